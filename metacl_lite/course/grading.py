"""Grading a class: many submissions of one assignment into one grade sheet; each student's code in a jail, the tests
outside it.

    python -m metacl_lite assignments grade a1 submissions/ late.ipynb --out grades.csv --feedback feedback/

Each submission (a notebook or an otter export zip, or a folder of them: `submissions`) is graded by a trusted
worker process (`grading_worker`) with a time limit: the submission's code runs in a jail (`jail`: no autograder,
solution, package source, home or other submission in sight, limits), while the autograder's tests, visible and
hidden, run in the worker and call the student's functions through a channel of plain data (`channel`). One
submission cannot change another's grade, the autograder, the checkout or the environment. The grade sheet (`sheet`)
gets one row per submission, written atomically after each row under a lock, so a rerun after Ctrl-C grades only the
missing rows (and those whose status is an error).
"""
from __future__ import annotations

import ast
import contextlib
import errno
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..data.datafiles import data_root
from ..paths import PACKAGE_DIR, REPO_ROOT
from ..lab.atomic import cannot_create_in, check_writable, locked, write_text
from ..lab.executors import result
from .sheet import (columns, feedback_name, feedback_text, graded_by_another, keep_manual, needs_regrading, one_line,
                    ordered, read_sheet, row, write_sheet, written_answers)
from .assignments import DIST_DIR, SOURCE_DIR, AssignmentError, ensure_autograder, list_assignments, source_path
from .submissions import (MAX_NOTEBOOK, NotANotebook, Submission, find_submissions, notebook_bytes,  # noqa: F401
                          plain_notebook, submission_key)


def full_name(name: str) -> str:
    """`a1` or `a1_dynamic_balance` -> `a1_dynamic_balance`."""
    names = list_assignments()
    hits = [n for n in names if n == name or n.split("_", 1)[0] == name]
    if len(hits) != 1:
        raise AssignmentError(f"unknown assignment {name!r}; choose from: {', '.join(names)} (or a1..a{len(names)})")
    return hits[0]


def question_points(zip_path: Path) -> dict[str, float]:
    """Each autograded question's points, read from the autograder's test files (`points = 3`, or a list of the
    points of each test case: `points = [1, 2]`)."""
    out = {}
    with zipfile.ZipFile(zip_path) as z:
        for member in sorted(z.namelist()):
            m = re.fullmatch(r"tests/(\w+)\.py", member)
            if m:
                pts = re.search(r"^points = (.+?)\s*$", z.read(member).decode(), re.M)
                value = ast.literal_eval(pts.group(1)) if pts else 0.0
                out[m.group(1)] = float(sum(value) if isinstance(value, list) else value)
    return out


def manual_points(name: str) -> dict[str, float]:
    """The points of each question graded by hand (`manual: true` in the assignment's source)."""
    import yaml

    out = {}
    text = source_path(name).read_text()
    for block in re.findall(r"```otter\n# BEGIN QUESTION\n(.*?)```", text, re.S):
        conf = yaml.safe_load(block)
        if conf.get("manual"):
            out[conf["name"]] = float(conf.get("points") or 0)
    return out


#: (data_scripts/grading_times.py measures it; a4 trains two runs of the reproduction notebook, 55-65 s)
DEFAULT_TIMEOUT = {"a1_dynamic_balance": 120, "a2_importance": 120, "a3_reptile": 120, "a4_experiment": 300}
MAX_TIMEOUT = 24 * 3600
#: the environment variables a jailed submission keeps (everything else is left out)
PASSED_ENV = ("LANG", "LC_ALL", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ")


def _kill(proc: subprocess.Popen) -> None:
    """Kill the worker and everything it started (the jail's PID namespace dies with its first process)."""
    try:
        import psutil

        procs = psutil.Process(proc.pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - gone already, or no psutil: the process group is all we can reach
        procs = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in procs:
        try:
            p.kill()
        except Exception:  # noqa: BLE001
            pass
    proc.wait()
    if procs:  # the row is written once they have gone
        import psutil

        psutil.wait_procs(procs, timeout=60)


def _package_copy(pkg: Path, name: str) -> None:
    """The package as the jail sees it: a copy whose withheld references are stubs, and what a checkout's copy needs
    beside it (the chapters that assignments run)."""
    from .grading_refs import sanitize

    try:
        shutil.copytree(PACKAGE_DIR, pkg / PACKAGE_DIR.name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        for rel in ("pyproject.toml", "book/reproduce"):  # a4 runs book/reproduce
            src = REPO_ROOT / rel
            if src.is_dir():
                shutil.copytree(src, pkg / rel)
            elif src.is_file():
                shutil.copy2(src, pkg / rel)
    except shutil.Error as e:  # copytree gathers each file's error: a full disk is one error, not a list of them
        if any(isinstance(x, tuple) and ("No space left" in str(x[-1]) or "quota" in str(x[-1]))
               for x in (e.args[0] if e.args and isinstance(e.args[0], list) else [])):
            raise OSError(errno.ENOSPC, "No space left on device") from None
        raise
    sanitize(pkg / PACKAGE_DIR.name, name)
    for f in (p for p in pkg.rglob("*") if p.is_file() and not p.is_symlink()):  # not writable by their owner either
        f.chmod(0o444)  # (without root the submission runs as that owner; the jail's mount is read-only anyway)


#: the worker processes running now (killed by an interrupted grade_many)
LIVE: set = set()
_LIVE_LOCK = threading.Lock()


def _worker_conf(tmp: Path, notebook: Path, uid: int, gid: int, timeout: float, hidden: Sequence[Path]) -> dict:
    """What the trusted worker needs to grade one notebook in a jail (`grading_worker.main`): the folders under `tmp`
    (private, scratch and the package copy), the jail's user, environment, binds and CPU limit."""
    from . import jail

    private, scratch, pkg = tmp / "private", tmp / "scratch", tmp / "pkg"
    data = str(data_root().resolve())
    keep_ro = sorted({str(pkg), *map(str, jail.python_dirs(REPO_ROOT)), data})
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update(PATH=f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", HOME=str(scratch),
               TMPDIR="/tmp", PYTHONPATH=str(pkg), METACL_LITE_DATA=data,
               METACL_LITE_PROGRESS="0", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", USER=jail.USER,
               LOGNAME=jail.USER)
    env.setdefault("LANG", "C.UTF-8")
    hide = [str(Path(p).resolve()) for p in (*hidden, DIST_DIR, SOURCE_DIR, PACKAGE_DIR, REPO_ROOT / ".git",
                                              REPO_ROOT / "dist", private, Path.home(), "/root")]
    ids = {"uid": 0, "gid": 0, "rootless": True, "inner_uid": os.getuid(), "inner_gid": os.getgid()} \
        if jail.rootless() else {"uid": uid, "gid": gid}  # without root: the scratch is the namespace root's
    return {"notebook": str(notebook), "autograder": str(private / "autograder.zip"),
            "result": str(private / "result.json"), "private": str(private), "cwd": str(scratch),
            **ids, "env": env, "binds_rw": [str(scratch)],
            "binds_ro": keep_ro, "hidden": sorted(set(hide)), "cpu_seconds": int(min(timeout * 4, MAX_TIMEOUT)) + 10}


def grade_one(name: str, zip_path: Path, submission: Path, timeout: float, hidden: Sequence[Path] = ()) -> dict:
    """Grade one submission: a trusted worker (`grading_worker`) runs the tests against its notebook's code, which
    runs in a jail (`jail`); its record (`questions` and `cell_errors`, or `error` / `crashed` / `timeout`)."""
    from . import cgroup, jail

    slot = jail.Slot()
    uid, gid = slot.uid, (os.getgid() if jail.rootless() else jail.ensure_user()[1])
    tmp = Path(tempfile.mkdtemp(prefix="metacl-grade-"))
    group = cgroup.Group(f"metacl-jail-{tmp.name}")
    try:
        os.chmod(tmp, 0o711)
        private, scratch, pkg = tmp / "private", tmp / "scratch", tmp / "pkg"
        private.mkdir(mode=0o700)
        scratch.mkdir()
        pkg.mkdir()
        try:
            doc = plain_notebook(notebook_bytes(submission, name))
        except NotANotebook as e:
            return {"error": f"not a Jupyter notebook ({e})"}
        notebook = scratch / f"{name}.ipynb"
        notebook.write_text(json.dumps(doc))
        for p in (scratch, notebook) if not jail.rootless() else ():
            os.chown(p, uid, gid)
        _package_copy(pkg, name)
        if isinstance(zip_path, bytes):  # the grader's private copy, held in memory
            (private / "autograder.zip").write_bytes(zip_path)
        else:
            shutil.copy2(zip_path, private / "autograder.zip")
        result = private / "result.json"
        conf = dict(_worker_conf(tmp, notebook, uid, gid, timeout, hidden), cgroup=group.procs())
        (private / "worker.json").write_text(json.dumps(conf))
        cmd = [sys.executable, "-m", "metacl_lite.course.grading_worker", str(private / "worker.json")]
        proc = subprocess.Popen(cmd, cwd=tmp, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=dict(os.environ, METACL_LITE_PROGRESS="0"),
                                preexec_fn=lambda: jail._pdeathsig(signal.SIGTERM))
        with _LIVE_LOCK:
            LIVE.add(proc)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return {"timeout": f"over {timeout:g} s", "default_timeout": DEFAULT_TIMEOUT.get(name, 600)}
        except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: leave nothing running
            _kill(proc)
            raise
        finally:
            with _LIVE_LOCK:
                LIVE.discard(proc)
        _kill(proc)  # anything left behind
        if result.is_file():
            return json.loads(result.read_text())
        last = (err or b"").decode(errors="replace").strip().splitlines()
        why = last[-1][:160] if last else f"exit status {proc.returncode}"
        return {"error": f"the grader's worker ended without a result ({why}); graded again on a rerun"}
    finally:
        jail.end_jail(tmp / "private")  # nothing of the submission runs once its row is written
        group.remove()  # nor in its group
        shutil.rmtree(tmp, ignore_errors=True)
        slot.release()


def _check_folder(path: Optional[Path], option: str) -> None:
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise AssignmentError(f"{option} {path} is a file; give a folder for one file per submission")
    probe = path
    while not probe.exists():
        probe = probe.parent
    why = cannot_create_in(probe)
    if why:
        raise AssignmentError(f"cannot write {option} {path}: {why} in {probe}; give another folder")


def to_grade(subs: Sequence[Submission], rows: dict[str, dict], sha: str, timeout: float, out: Path) -> list:
    """The submissions to grade: those without a row in the sheet `out` (`rows`), and those whose row should be
    graded again (`sheet.needs_regrading`); a note on stderr says how many another autograder graded."""
    todo = [s for s in subs if s.key not in rows or needs_regrading(rows[s.key], sha, timeout)]
    stale = [s for s in todo if s.key in rows and graded_by_another(rows[s.key], sha)]
    if stale:
        print(f"note: {len(stale)} rows of {out} were graded by another autograder (sha256 differs): graded again "
              "with this one, their manual points kept", file=sys.stderr)
    return todo


@dataclass
class ClassGrading:
    """One grading of a class: the autograder (a private copy, in memory: regenerating dist/ meanwhile changes
    nothing here, and a SIGKILL leaves no file), its questions, and where rows, feedback and written answers go."""

    name: str
    autograder: bytes
    timeout: float
    out: Path
    hidden: list
    feedback: Optional[Path] = None
    answers: Optional[Path] = None
    show_hidden: bool = False

    def __post_init__(self):
        self.sha = hashlib.sha256(self.autograder).hexdigest()
        self.points, self.manual = question_points(io.BytesIO(self.autograder)), manual_points(self.name)
        self.columns = columns(self.points, self.manual)

    def grade(self, s: Submission) -> dict:
        """One submission's record; one submission's failure is its own record, and the class goes on."""
        if s.refused:
            return {"refused": s.refused}
        try:
            return grade_one(self.name, self.autograder, s.path, self.timeout, self.hidden)
        except AssignmentError as e:
            return {"error": str(e)}
        except Exception as e:  # noqa: BLE001 - one submission's failure is its own row; the class goes on
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):  # a full temporary folder
                raise AssignmentError(  # would fail every other submission too: it stops the class
                    f"no space left in the temporary folder {tempfile.gettempdir()} while grading {s.key}: free "
                    f"some, or point TMPDIR at a folder with room; the rows graded so far are kept in {self.out}, "
                    f"and the same command grades the rest") from None
            return {"error": f"{s.path} could not be graded ({type(e).__name__}: {e})"}

    def row(self, s: Submission, rec: dict, old: Optional[dict]) -> dict:
        """The sheet's row for a record, keeping the hand-entered points of `old`."""
        return keep_manual(row(s.key, rec, self.points, self.manual, self.name, self.sha), old, self.manual)

    def write_feedback(self, s: Submission, rec: dict, r: dict) -> None:
        """The feedback file and the written answers of one submission (after its row is in the sheet)."""
        if self.feedback is not None:
            write_text(Path(self.feedback) / feedback_name(s.key),
                       feedback_text(s.key, rec, r, self.points, self.manual, self.show_hidden))
        if self.answers is not None and self.manual and not s.refused:
            try:
                nb = notebook_bytes(s.path, self.name)
            except (AssignmentError, OSError):
                nb = b""
            write_text(Path(self.answers) / feedback_name(s.key, ".md"), written_answers(nb, s.key, self.manual))


def _check_outputs(out: Path, feedback: Optional[Path], answers: Optional[Path]) -> None:
    """Everything the grading writes, and the jail it needs, checked before the first submission."""
    from . import jail
    from ..errors import OutputError

    try:
        check_writable(out, "give another --out")
    except OutputError as e:
        raise AssignmentError(str(e)) from None
    _check_folder(feedback, "--feedback")
    _check_folder(answers, "--answers")
    try:
        jail.check_available()
        if not jail.rootless():
            jail.ensure_user()
    except jail.JailUnavailable as e:
        raise AssignmentError(f"cannot grade here: {e}") from None


def _in_threads(items: Sequence, work: Callable, done: Callable, jobs: int) -> None:
    """work(item) for every item, `jobs` at a time, done(item, result) in order; on an exception or a Ctrl-C every
    worker process running now is killed before it propagates."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max(1, jobs))
    try:
        futures = [(s, pool.submit(work, s)) for s in items]
        for s, f in futures:
            done(s, result(f))  # woken twice a second: a Ctrl-C that lands in a grading thread is answered
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        with _LIVE_LOCK:
            live = list(LIVE)
        for p in live:
            _kill(p)
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)


def grade_many(name: str, paths: Sequence[Path], out: Path, feedback: Optional[Path] = None,
               timeout: Optional[float] = None, dist: Path = DIST_DIR, on_row: Optional[Callable[[dict], None]] = None,
               jobs: int = 1, show_hidden: bool = False, answers: Optional[Path] = None) -> list[dict]:
    """Grade every submission under `paths` that `out` has no row for (or a row whose status is an error), `jobs` at
    a time; returns all rows. The sheet is locked while grading; everything is checked before the first submission."""
    name = full_name(name)
    out = Path(out)
    subs = find_submissions(paths, base=Path(os.path.abspath(out)).parent)
    _check_outputs(out, feedback, answers)
    folders = {Path(p).resolve() if Path(p).is_dir() else Path(p).resolve().parent for p in paths}
    hidden = [*folders, *(Path(x).resolve() for x in (feedback, answers, dist) if x is not None), out.resolve()]
    g = ClassGrading(name, ensure_autograder(name, dist).read_bytes(), timeout or DEFAULT_TIMEOUT.get(name, 600), out,
                     hidden, feedback, answers, show_hidden)
    with locked(out, wait=False):
        rows = {r["submission"]: r for r in read_sheet(out, g.columns, name)}
        order = list(dict.fromkeys([*rows, *(s.key for s in subs)]))

        def done(s: Submission, rec: dict) -> None:
            rows[s.key] = r = g.row(s, rec, rows.get(s.key))
            write_sheet(out, g.columns, [rows[k] for k in order if k in rows])
            try:
                g.write_feedback(s, rec, r)
            except Exception as e:  # noqa: BLE001 - the row is in the sheet; say what is missing
                print(f"warning: the feedback of {s.key} was not written ({type(e).__name__}: {e})", file=sys.stderr)
            if on_row:
                on_row(r)

        _in_threads(to_grade(subs, rows, g.sha, g.timeout, out), g.grade, done, jobs)
        if not out.exists():
            write_sheet(out, g.columns, [])
    return [rows[k] for k in order if k in rows]


def add_parser(ssub) -> None:
    """The `assignments grade` subcommand's arguments."""
    sr = ssub.add_parser("grade", help="the autograder: visible and hidden tests on submissions, a grade sheet",
                         description="grade ASSIGNMENT PATH... (a1..a4 or the full name; notebooks, folders, otter "
                                     "zips) into a CSV grade sheet; or grade NOTEBOOK for one notebook's score. "
                                     "Each submission's code runs in a jail, the tests outside it (as root, or "
                                     "without root in a user namespace).")
    sr.add_argument("args", nargs="+", metavar="ASSIGNMENT PATH", help="the assignment, then the submissions")
    sr.add_argument("--out", type=str, default="grades.csv", help="the grade sheet (default grades.csv); "
                    "rows already in it are kept and not graded again (rows whose status is an error are)")
    sr.add_argument("--feedback", type=str, default=None, help="a folder for one feedback file per submission")
    sr.add_argument("--show-hidden", action="store_true", help="name the hidden tests and their messages in the "
                    "feedback (default: `hidden test k failed`)")
    sr.add_argument("--answers", type=str, default=None, help="a folder for one Markdown file of written answers "
                    "per submission")
    sr.add_argument("--timeout", type=float, default=None, help="seconds per submission (default: the assignment's, "
                    + ", ".join(f"{k.split('_')[0]} {v}" for k, v in DEFAULT_TIMEOUT.items()) + ")")
    sr.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    sr.add_argument("--dist", type=str, default=None, help="where the autograders are (default dist/assignments)")
    sr.set_defaults(run=command)


@contextlib.contextmanager
def signals_interrupt():
    """While in the block, SIGTERM and SIGHUP stop as Ctrl-C does (the default action would kill the process and
    leave what it made): grading's workers and jails killed, the rows done kept; the kit's temporary copy of the
    package, pip's build and half-written zip removed. The caller's handlers are back after it."""
    def stop(signum, frame):
        raise KeyboardInterrupt

    before = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            before[sig] = signal.signal(sig, stop)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def command(a) -> int:
    """`assignments grade`: the grade sheet of ASSIGNMENT PATH..., or one notebook's scores (`grade NOTEBOOK`)."""
    with signals_interrupt():
        return _grade(a)


def _grade(a) -> int:
    from . import cgroup
    from .assignments import assignment_name, nonempty_path

    def path(value, option):  # an empty path would mean the working folder: refused
        return None if value is None else nonempty_path(value, option)

    a.out, a.feedback, a.answers = path(a.out, "--out"), path(a.feedback, "--feedback"), path(a.answers, "--answers")
    dist = path(a.dist, "--dist") or DIST_DIR
    first, paths = a.args[0], [Path(p) for p in a.args[1:]]
    timeout = a.timeout  # seconds in (0, 24 h], or None (the assignment's default)
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0 or timeout > MAX_TIMEOUT):
        raise AssignmentError(f"--timeout must be a number of seconds between 0 and {MAX_TIMEOUT} (24 h), got "
                              f"{timeout:g}")
    if not 1 <= a.jobs <= 64:
        raise AssignmentError(f"--jobs must be between 1 and 64, got {a.jobs}")
    if not paths and first.endswith((".ipynb", ".zip")) and not Path(first).is_file():
        raise AssignmentError(f"{first} does not exist" if not Path(first).exists() else f"{first} is not a file")
    if not paths and Path(first).is_file():  # one notebook: its scores on stdout
        from . import jail

        name = assignment_name(Path(first)) if first.endswith(".ipynb") else None
        if name is None:
            raise AssignmentError(f"give the assignment before a zip: grade a1 {first}")
        try:
            jail.check_available()
        except jail.JailUnavailable as e:
            raise AssignmentError(f"cannot grade here: {e}") from None
        zip_path = ensure_autograder(name, dist).read_bytes()  # a private copy, in memory
        points, manual = question_points(io.BytesIO(zip_path)), manual_points(name)
        rec = grade_one(name, zip_path, Path(first), timeout or DEFAULT_TIMEOUT.get(name, 600),
                        hidden=[Path(dist).resolve(), Path(first).resolve().parent])
        r = row(first, rec, points, manual, name)
        for q in ordered(points, manual):
            print(f"{q}: {r[q]} / {points[q]:g}" if q in points else f"{q}: manual / {manual[q]:g}")
        print(f"total: {r['total']} / {r['possible']}" + ("" if r["status"] == "ok" else
                                                          f"\nstatus: {one_line(r['status'])}"))
        return 0
    if not paths:
        raise AssignmentError(f"give the submissions to grade after the assignment: grade {first} PATH...")
    rows = grade_many(first, paths, a.out, a.feedback, timeout, dist, jobs=a.jobs, show_hidden=a.show_hidden,
                      answers=a.answers,
                      on_row=lambda r: print(f"{one_line(r['submission'])}: {r['total']} / {r['possible']} "
                                             f"{one_line(r['status'])}"))
    why = cgroup.where()[0]  # said last, where it is read: the rows' lines come first
    print(f"{len(rows)} rows in {a.out}" + (f"; each submission's memory, processes and CPU were bounded process by "
                                            f"process, not as a whole: {why}" if why else ""))
    return 0
