"""One submission graded: the trusted side. `grading.grade_one` starts this process for each submission.

    python -m metacl_lite.course.grading_worker CONFIG.json

It starts the jail (`jail`) on the submission's notebook, waits for its cells to run (`jail_runner`), then runs the
autograder's tests, visible and hidden, here, in this process, with otter's test files from the grader's private copy
of the autograder zip. A test's arguments (`my_lambda`, `model`, ...) are stand-ins: calling one sends the arguments as
plain data (`channel`) to the jail and returns the result decoded afresh, so a student's code never runs here and
never sees a test, a reference or the grader; files cross as bytes, never by a name the submission chose (`Files`).
The tests work in an empty folder of their own. Writes the record as JSON: per question its score, per test whether
it passed and otter's message, the student cells that raised; `{"error": ...}` or `{"crashed": ...}` when grading
could not run the tests.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .jail_runner import one_line


class SubmissionError(AssertionError):
    """What the submission's code did wrong when a test called it (raised, returned what cannot cross, ended)."""


class Files:
    """Which files cross between the worker and the jail, and where: the files the submission sends land in
    `landing`; a path it sends as a name only names something under `nowhere`, an empty folder; and only the worker's
    own files (those it landed, those its tests made in its temporary folder) go to the submission as files. So the
    worker, which runs as the instructor, never opens a file because the submission named it."""

    def __init__(self, private: Path):
        self.landing, self.nowhere = private / "landing", private / "nowhere"
        self.own = (self.landing.resolve(), Path(tempfile.gettempdir()).resolve())

    def may_ship(self, path: Path) -> bool:
        """`channel.encode`'s ship: a file goes as a file only when it is the worker's own (links resolved)."""
        p = path.resolve()
        return any(p == d or d in p.parents for d in self.own)

    def decode(self, d):
        from .channel import decode

        return decode(d, landing=self.landing, nowhere=self.nowhere)


class Tail:
    """The last `keep` bytes of what a process writes to a pipe, read by a thread: a submission that floods its
    error output costs neither the disk nor this process's memory."""

    def __init__(self, fd: int, keep: int = 8192):
        import threading

        self.keep, self.data = keep, b""
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as f:
            while chunk := f.read(65536):
                self.data = (self.data + chunk)[-self.keep:]

    def text(self, wait: float = 2.0) -> str:
        self.thread.join(wait)
        return self.data.decode(errors="replace")


class Jail:
    """The jailed runner and its two pipes."""

    def __init__(self, conf: dict):
        from . import cgroup, jail

        r_req, w_req = os.pipe()
        r_rep, w_rep = os.pipe()
        r_err, w_err = os.pipe()
        for fd in (r_req, w_rep):
            os.set_inheritable(fd, True)
        conf["runner_args"] = [conf["notebook"], str(r_req), str(w_rep)]
        conf["fds"] = [r_req, w_rep]
        cfg = Path(conf["private"]) / "jail.json"
        pidns = conf["pidns_fd"] = os.open(Path(conf["private"]) / jail.PIDNS, os.O_WRONLY | os.O_CREAT, 0o600)
        cfg.write_text(json.dumps(conf))
        cfg_fd = os.open(cfg, os.O_RDONLY)  # by number: the jail's /proc/1/cmdline names no folder of the grader's
        self.proc = subprocess.Popen(jail.command(conf, cfg_fd), pass_fds=(r_req, w_rep, cfg_fd, pidns),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w_err,
                                     preexec_fn=lambda: (cgroup.attach(conf["cgroup"]), jail._pdeathsig()))
        for fd in (r_req, w_rep, w_err, cfg_fd, pidns):
            os.close(fd)
        self.log = Tail(r_err)
        self.w, self.r = os.fdopen(w_req, "wb"), os.fdopen(r_rep, "rb")
        self.gone = False
        self.files = Files(Path(conf["private"]))

    def receive(self) -> dict:
        from .channel import MAX_MESSAGE, loads

        line = self.r.readline(MAX_MESSAGE) if not self.gone else b""
        if not line:
            self.gone = True
            raise SubmissionError("the submission's process ended (os._exit, a crash, or memory)")
        return loads(line)

    def request(self, msg: dict) -> dict:
        from .channel import dumps

        if self.gone:
            raise SubmissionError("the submission's process ended (os._exit, a crash, or memory)")
        try:
            self.w.write(dumps(msg))
            self.w.flush()
        except (BrokenPipeError, OSError):
            self.gone = True
            raise SubmissionError("the submission's process ended (os._exit, a crash, or memory)") from None
        return self.receive()

    #: Seconds `close` waits for the namespace to empty once its init is killed (the kernel kills and reaps every
    #: process in it before init's own end is reported)
    KILL_WAIT_S = 60.0

    def close(self) -> None:
        """End every process of the submission: kill the namespace's init, then wait for `bwrap`, which reports
        init's end only once the kernel has killed and reaped every process in the namespace."""
        for f in (self.w, self.r):
            try:
                f.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            pid = self.proc.pid
            try:  # the jail's init: the one child of `bwrap`, unless it has gone
                os.kill(int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0]), signal.SIGKILL)
            except (OSError, IndexError):
                pass
            try:
                self.proc.wait(timeout=self.KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # init still dies, by its parent-death signal
        self.proc.wait()

    #: Seconds `last_error` waits for a jail whose pipe closed to end (it is ending: the pipe closed as it exited).
    END_WAIT_S = 10.0

    def last_error(self) -> str:
        """The jail's last line of stderr, else its exit status: read once it has ended (a pipe closes a moment
        before its process is reaped, and an exit status read then was None: feedback that changed between runs)."""
        try:
            code = self.proc.wait(timeout=self.END_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        lines = self.log.text().strip().splitlines()
        return lines[-1][:200] if lines else f"exit status {code if code is not None else 'unknown (still running)'}"


class StudentFunction:
    """A stand-in for the student's function `name`: arguments go to the jail as plain data, the result comes back
    as plain data; networks passed in are updated as the student's call left them."""

    def __init__(self, jail: Jail, name: str):
        self._jail, self.__name__ = jail, name

    def __call__(self, *args, **kwargs):
        from .channel import ChannelError, encode

        ship = self._jail.files.may_ship
        reply = self._jail.request({"op": "call", "name": self.__name__, "args": encode(list(args), ship=ship),
                                    "kwargs": encode(kwargs, ship=ship)})
        if "raised" in reply:
            raise SubmissionError(f"{self.__name__} raised {reply['raised']}")
        try:
            value = self._jail.files.decode(reply.get("value"))
            for i, spec in (reply.get("modules") or {}).items():
                net = self._jail.files.decode(spec)
                with __import__("torch").no_grad():
                    for p, q in zip(args[int(i)].state_dict().values(), net.state_dict().values()):
                        p.copy_(q)
        except (ChannelError, ValueError, KeyError, IndexError, TypeError, RuntimeError, MemoryError) as e:
            raise SubmissionError(f"{self.__name__} returned what the grader cannot read: {one_line(e)}") from None
        return value


class Env(dict):
    """The notebook's global names as the tests see them: functions as stand-ins, values as plain data copies."""

    def __init__(self, jail: Jail):
        super().__init__()
        self._jail = jail

    def get(self, name, default=None):
        from .channel import ChannelError

        if name not in self:
            try:
                kind = self._jail.request({"op": "kind", "name": name}).get("kind")
                if kind == "function":
                    self[name] = StudentFunction(self._jail, name)
                elif kind == "value":
                    reply = self._jail.request({"op": "get", "name": name})
                    self[name] = self._jail.files.decode(reply["value"]) if "value" in reply else default
                else:
                    return default
            except (SubmissionError, ChannelError, KeyError, ValueError, TypeError, RuntimeError, MemoryError):
                return default
        return dict.get(self, name, default)


#: otter's line before a test's message, left out of the message
OTTER_MARKS = ("❌ Test case failed", "✅ Test case passed")


def run_tests(zip_path: str, env: Env) -> dict:
    """Every test file of the autograder run against `env`: per question score, possible, tests (each with its whole
    message, but otter's pass/fail line, and its exception as raised: otter strips a message's quotes, so
    `'stationarity' is missing` read `stationarity' is missing`)."""
    from otter.test_files import ExceptionTestFile

    class TestFile(ExceptionTestFile):
        def _generate_error_message(self, excp, context=0):
            text = super()._generate_error_message(excp, context)
            cut = f"{type(excp).__name__}: {str(excp).strip(chr(39))}"
            return text[:len(text) - len(cut)] + f"{type(excp).__name__}: {excp}" if text.endswith(cut) else text

    questions = {}
    with zipfile.ZipFile(zip_path) as z:
        for member in sorted(z.namelist()):
            m = re.fullmatch(r"tests/(\w+)\.py", member)
            if not m:
                continue
            source = z.read(member).decode()
            tf = TestFile.from_string(source, path=member)
            tf.run(env)
            own = re.findall(r"^@test_case\(.*\)\s*\ndef (\w+)", source, re.M)  # its test functions' names, in order
            tests = [{"test": own[i] if len(own) == len(tf.test_case_results) else r.test_case.name,
                      "hidden": bool(r.test_case.hidden), "passed": bool(r.passed),
                      "message": "\n".join(x for x in (r.message or "").strip().splitlines()
                                            if x.strip() not in OTTER_MARKS)[:2000]}
                     for i, r in enumerate(tf.test_case_results)]
            questions[m.group(1)] = {"score": float(tf.score), "possible": float(tf.possible), "tests": tests}
    return questions


def grade(conf: dict) -> dict:
    jail = Jail(conf)
    try:
        try:
            executed = jail.receive()
        except SubmissionError:
            return {"crashed": f"the submission's process ended while its notebook ran ({jail.last_error()})"}
        errors = executed.get("errors") if isinstance(executed.get("errors"), list) else []
        here = str(Path(conf["private"]).parent)  # a random folder: named alike every time (identical regrading)

        def alike(text: str) -> str:
            return text.replace(here, "<grading folder>")

        cells = [{"cell": int(e["cell"]), "line": str(e["line"])[:120], "error": alike(str(e["error"]))[:300]}
                 for e in errors[:50] if isinstance(e, dict) and {"cell", "line", "error"} <= set(e)]
        questions = run_tests(conf["autograder"], Env(jail))
        for q in questions.values():  # a landed file's path in a message too
            for t in q["tests"]:
                t["message"] = alike(t["message"])
        return {"questions": questions, "cell_errors": cells}
    finally:
        jail.close()


class Orphaned(BaseException):
    """The grader died (this process got its parent-death SIGTERM): stop, kill the jail, remove the folder."""


def _orphaned(signum, frame):
    raise Orphaned


#: the worker's memory (RLIMIT_DATA: its heap and private writable mappings): far above what the tests need, far
#: below the machine's, so that nothing a submission sends can make it take the machine's memory
WORKER_DATA_BYTES = 6 * 2 ** 30


def limit_memory() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard == resource.RLIM_INFINITY or hard > WORKER_DATA_BYTES:
        resource.setrlimit(resource.RLIMIT_DATA, (WORKER_DATA_BYTES, WORKER_DATA_BYTES))


def main(argv=None) -> int:
    import shutil

    limit_memory()
    conf = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    signal.signal(signal.SIGTERM, _orphaned)  # grading.grade_one asks for it when the grader dies (PDEATHSIG)
    private = Path(conf["private"])
    for sub in ("work", "tmp"):  # the tests' working folder and their temporary files: the grader's own, empty
        (private / sub).mkdir(mode=0o700, exist_ok=True)
    os.chdir(private / "work")
    tempfile.tempdir = str(private / "tmp")
    try:
        rec = grade(conf)
    except Orphaned:  # the jail is closed (grade's finally); nobody is left to remove the folder but us
        os.chdir("/")
        shutil.rmtree(Path(conf["private"]).parent, ignore_errors=True)
        return 143
    except Exception as e:  # noqa: BLE001 - every failure becomes the submission's status
        rec = {"error": one_line(e)}
    Path(conf["result"]).write_text(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
