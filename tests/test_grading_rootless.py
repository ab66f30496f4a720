"""Issue 42 (5): grading without root. A grader that is not root builds the same jail in an unprivileged user
namespace (`course/userns`); the submission runs in a nested one, as the grader's uid without capabilities or
namespaces of its own, its process limit counted in its own namespace. Before any work the grader probes that the
machine allows it, and where it does not says what to do, in one line.

The tests run as root in CI: the rootless grader then runs under `setpriv` as an unprivileged uid (conftest's
`unprivileged_python`: the system's Python with a `.pth` naming this environment's site-packages, where this
environment lives in root's home). Run without root, these tests and the rest of the grading suite grade rootless
themselves. The grading suite's tests of the jail run in both modes: as themselves (root in CI) and, from here, under
`setpriv` (SUITE)."""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from conftest import UNPRIVILEGED_UID, give_to_unprivileged

ROOT = Path(__file__).resolve().parents[1]
#: the grading suite's tests of what a jail allows, run a second time without root by
#: `test_the_whole_grading_suite_passes_without_root`: every attack, the kernel surface, the scratch tmpfs, a killed
#: worker. What does not depend on how the jail is built is not run twice: the sheet's logic, the channel's encoding,
#: the autograders' own fixtures (test_grading_fixtures.py), and the control group's bounds (round 3's hogs: an
#: unprivileged grader has a group only where the machine delegates one, and its probe says when it does not). An
#: unprivileged grader's sheet is compared with root's by
#: `test_an_unprivileged_grader_grades_a_class_with_the_same_sheet_as_root`.
SUITE = ("tests/test_grading_attacks.py",
         "tests/test_grading_round3.py::test_what_a_hostile_class_tried_is_refused_and_the_notebook_keeps_its_score",
         "tests/test_grading_round2.py::test_what_a_submission_writes_stays_in_its_own_limited_memory",
         "tests/test_grading_round2.py::test_sigkill_of_the_worker_leaves_nothing_and_its_row_is_graded_again")


@pytest.fixture
def tmp_path():
    """A folder of the test's own, outside pytest's per-user folder: any other pytest that root starts on the machine
    meanwhile resets that folder to 0700 (pytest does so for safety), and an unprivileged grader working below it
    loses its folder (`PermissionError` in the middle of the suite)."""
    where = Path(tempfile.mkdtemp(prefix="metacl-rootless-test-", dir="/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def python(request) -> list[str]:
    """This environment's Python as an unprivileged uid: under `setpriv` when the tests run as root (CI), else as
    the tests' own uid."""
    return request.getfixturevalue("as_unprivileged") if os.geteuid() == 0 else [sys.executable]


def run(python: list[str], cwd: Path, *args: str, env: dict = None, timeout: float = 600):
    if os.geteuid() == 0:
        give_to_unprivileged(cwd)
    base = dict(os.environ, METACL_LITE_PROGRESS="0", HOME=str(cwd), TMPDIR=str(cwd))
    return subprocess.run([*python, *args], cwd=cwd, capture_output=True, text=True, env={**base, **(env or {})},
                          timeout=timeout)


def uid_of(python: list[str]) -> int:
    return UNPRIVILEGED_UID if python[0] == "setpriv" else os.getuid()


def test_the_probe_finds_that_this_machine_allows_grading_without_root(python, tmp_path):
    """Fails, with the probe's reason and what to do, on a machine that refuses (CI's must not)."""
    r = run(python, tmp_path, "-c", "from metacl_lite.course import jail\nassert jail.rootless()\n"
                                    "jail.check_available()\nprint('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("args", [["a1", "subs", "--out", "g.csv"], ["subs/a1_dynamic_balance.ipynb"]])
def test_a_machine_that_refuses_user_namespaces_is_named_in_one_line_before_any_work(python, tmp_path, args):
    """Where a mount in a new user namespace is refused (Ubuntu 24.04's AppArmor: `bwrap` here answers as it does
    there), `assignments grade` exits 2 with one line that says what to do, before generating or grading anything."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'mount: /tmp: permission denied.' >&2\nexit 32\n")
    (fake / "bwrap").chmod(0o755)
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "a1_dynamic_balance.ipynb").write_bytes((ROOT / "book/assignments"
                                                                 / "a1_dynamic_balance.ipynb").read_bytes())
    r = run(python, tmp_path, "-m", "metacl_lite", "assignments", "grade", *args, "--dist", "dist",
            env={"PATH": f"{fake}:{os.environ['PATH']}"})
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (r.returncode, err)
    assert "refuses a mount there (mount: /tmp: permission denied.)" in err and "or run the grader as root" in err, err
    assert not (tmp_path / "dist").exists() and not (tmp_path / "g.csv").exists(), "work began before the probe"
    assert not list(tmp_path.glob("metacl-grade-*")), "a submission's folder was made before the probe"


@pytest.mark.parametrize("files, fix", [
    ({"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"},
     "sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile"),
    ({"/proc/sys/user/max_user_namespaces": "0"}, "sudo sysctl user.max_user_namespaces="),
    ({"/proc/sys/kernel/unprivileged_userns_clone": "0"}, "sudo sysctl kernel.unprivileged_userns_clone=1"),
    ({"/proc/1/cgroup": "0::/docker/abc"}, "--security-opt seccomp=unconfined"),
    ({}, "kernel.apparmor_restrict_unprivileged_userns=0 or user.max_user_namespaces")])
def test_what_to_do_names_the_cause_found_first(monkeypatch, files, fix):
    from metacl_lite.course import userns

    monkeypatch.setattr(userns, "_read", lambda path: files.get(path, ""))
    monkeypatch.setattr(userns.os.path, "exists", lambda p: False)
    text = userns.remedies()
    assert fix in text and text.endswith("or run the grader as root (sudo)") and "\n" not in text, text


NESTED = textwrap.dedent("""
    import ctypes, os, sys
    from metacl_lite.course import jail
    jail.LIMITS["nproc"] = {nproc}
    conf = {{"rootless": True, "inner_uid": {uid}, "inner_gid": {uid}, "cwd": "/", "cpu_seconds": 0}}

    hold = os.pipe()  # never written: its readers wait until init ends, which ends them all

    def spawn(n, nest):
        r, w = os.pipe()
        if os.fork() == 0:  # a submission's process: its own nested namespace, or (nest=False) its limit only
            if nest:
                jail.become_submission(conf, jail.submission_filter())
            else:
                jail._limits(conf)
            made = 0
            for i in range(n):
                try:
                    if os.fork() == 0:
                        os.read(hold[0], 1)
                        os._exit(0)
                except OSError:
                    break
                made += 1
            os.write(w, str(made).encode().ljust(8))
            os.read(hold[0], 1)
            os._exit(0)
        return r, w

    {body}
""")


def nested(python, cwd, body: str, nproc: int = 20) -> str:
    """`body` run as root of a new user and PID namespace, as the jail's init is (there by bwrap's --unshare-user)."""
    code = NESTED.format(nproc=nproc, uid=uid_of(python), body=textwrap.dedent(body))
    r = run(python, cwd, "-c", f"import os, sys\nos.execvp('unshare', ['unshare', '--user', '--map-root-user', "
                               f"'--pid', '--fork', '--mount-proc', sys.executable, '-c', {code!r}])")
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_the_submission_is_the_graders_uid_without_capabilities_or_namespaces_of_its_own(python, tmp_path):
    """In its nested user namespace the submission is the grader's uid, mapped onto the jail's root, with no
    capability (none to regain), and the kernel refuses it any namespace: a user namespace too."""
    out = nested(python, tmp_path, """
        jail.become_submission(conf, jail.submission_filter())
        libc = ctypes.CDLL(None, use_errno=True)
        status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
        print("ids", os.getuid(), os.geteuid(), os.getgid())
        print("map", open("/proc/self/uid_map").read().split())
        print("caps", int(status["CapEff"], 16), int(status["CapPrm"], 16), int(status["CapBnd"], 16))
        for name, flag in (("user", 0x10000000), ("mount", 0x20000), ("net", 0x40000000), ("pid", 0x20000000)):
            print(name, libc.unshare(flag), os.strerror(ctypes.get_errno()))
    """)
    uid = uid_of(python)
    assert f"ids {uid} {uid} {uid}" in out and f"map ['{uid}', '0', '1']" in out and "caps 0 0 0" in out, out
    for name in ("user", "mount", "net", "pid"):
        assert f"\n{name} -1 " in out, out


def test_one_submissions_process_limit_is_its_own_budget(python, tmp_path):
    """The process limit counts a submission's own processes, in its own user namespace: a neighbour graded beside
    one that spent its limit (both the grader's uid on the machine) still gets processes; a process limit without
    the nested namespace (a shared uid's count, as one jail user for every submission was) would have none left."""
    out = nested(python, tmp_path, """
        hog = spawn(100, True)
        print("hog", int(os.read(hog[0], 8)))
        neighbour = spawn(10, True)
        print("neighbour", int(os.read(neighbour[0], 8)))
        shared = spawn(10, False)
        print("shared", int(os.read(shared[0], 8)))
        sys.stdout.flush()
        os._exit(0)  # init's end ends every process of the PID namespace
    """)
    got = dict(line.split() for line in out.splitlines())
    assert int(got["hog"]) < 20 and got["neighbour"] == "10", out  # its own 20, of which the process itself is one
    assert int(got["shared"]) < 10, out  # the control: one count for the uid, spent by the hog


@pytest.mark.slow
def test_an_unprivileged_grader_grades_a_class_with_the_same_sheet_as_root(python, tmp_path, graded):
    """Done when (issue 42, 5): `assignments grade` run as an unprivileged user grades a class with the same sheet
    as root (and the same feedback): tests/test_grading.py's class, graded as root once for the session (`graded`),
    graded here without root in a copy of its folder. Run without root, the other way is not there: it says so."""
    from test_grading import EXPECTED, TIMEOUT

    assert os.geteuid() == 0, "the same class graded as root and without root needs the tests run as root (CI)"
    root, _ = graded
    for name in ("dist", "subs"):
        shutil.copytree(root / name, tmp_path / name)
    rootless = run(python, tmp_path, "-m", "metacl_lite", "assignments", "grade", "a1", "subs", "--timeout", TIMEOUT,
                   "--dist", "dist", "--jobs", "2", "--out", "rootless.csv", "--feedback", "fb-rootless")
    assert rootless.returncode == 0, rootless.stderr[-3000:]
    assert (tmp_path / "rootless.csv").read_text() == (root / "grades.csv").read_text()
    assert len((root / "grades.csv").read_text().splitlines()) == len(EXPECTED) + 1
    for f in (root / "fb").iterdir():
        assert (tmp_path / "fb-rootless" / f.name).read_text() == f.read_text(), f.name
    from metacl_lite.course import sheet

    assert "total: 9 / 9" in (tmp_path / "fb-rootless" / sheet.feedback_name("subs/correct.ipynb")).read_text()


@pytest.mark.slow
def test_an_unprivileged_grader_works_outside_pytests_per_user_folder(tmp_path):
    """The folder the unprivileged grader and its suite work in is not below /tmp/pytest-of-USER, which a second
    pytest run by the same user resets to 0700."""
    per_user = Path(tempfile.gettempdir()) / f"pytest-of-{pwd.getpwuid(os.getuid()).pw_name}"
    assert per_user not in tmp_path.parents, tmp_path


def test_the_whole_grading_suite_passes_without_root(python, tmp_path):
    """The grading suite's tests of the jail (SUITE), attacks included, run again as an unprivileged uid (when these
    tests run as root, as in CI): every attack scores what its notebook scores without it, and no file outside the
    jail changes, in both modes. Run without root, this session's grading suite is that run."""
    if python[0] != "setpriv":
        from metacl_lite.course import jail

        assert jail.rootless()  # the suite of this session grades without root
        return
    r = run(python, tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
            str(tmp_path / "basetemp"), "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"),
            *(str(ROOT / t) for t in SUITE), timeout=3 * 3600,
            env={"PYTHONDONTWRITEBYTECODE": "1"})
    tail = "\n".join(r.stdout.splitlines()[-40:])
    assert r.returncode == 0, tail + r.stderr[-2000:]
    assert " passed" in tail and " failed" not in tail and " skipped" not in tail, tail


def test_the_grader_waits_for_a_jails_namespace_and_leaves_a_namespace_that_took_its_number_alone():
    """`end_namespace` kills and waits for every process of the jail's PID namespace (the grader's last step before
    the row), and leaves a namespace alone whose init started at another time: the kernel gives a new namespace the
    number of one that has gone, and another submission's jail may have it."""
    import time

    from metacl_lite.course import userns

    cmd = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
           "sleep 300 & sleep 300 & wait"]
    procs = [subprocess.Popen(cmd) for _ in range(2)]
    try:
        deadline, inits = time.monotonic() + 30, []
        while len(inits) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            inits = [k for p in procs for k in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()]
        ours, theirs = inits
        ns, other = userns.pid_namespace(ours), userns.pid_namespace(theirs)
        assert ns and other and ns != other
        assert userns.end_namespace(other, userns.start_time(theirs) + 1, wait_s=5) == 0  # not the init it had
        assert userns.end_namespace(ns, userns.start_time(ours)) >= 3  # its init and the two sleeps
        assert not [p for p in os.listdir("/proc") if p.isdigit() and userns.pid_namespace(p) == ns]
        assert procs[0].wait(timeout=30) is not None
        assert procs[1].poll() is None and userns.pid_namespace(theirs) == other, "another jail's processes were killed"
    finally:
        for p in procs:
            p.kill()
            p.wait()
