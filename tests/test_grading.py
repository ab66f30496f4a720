"""Grading a class (`assignments grade ASSIGNMENT PATH...`): one folder of a1 submissions made from the student
notebook (blank, the solution, partly wrong, an infinite loop, a killed kernel, sys.exit in a graded function, a call
of the package's reference, one of the hidden tests' `reference`, a cell that overrides otter's runner, a function
that overrides the assertion helpers when called, one that writes into the package, a renamed copy, an otter export
zip), each in a jail with a time limit, the tests outside it (tests/test_grading_attacks.py: the attacks on that);
the same sheet every time; a rerun grades only missing rows (and error rows), also after Ctrl-C; the misuse of the
command (issue 37's grading items) refused before any work."""
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import runs_a_submission

from metacl_lite.course import assignments as A
from metacl_lite.course import grading as G
from metacl_lite.course import sheet as S

ROOT = Path(__file__).resolve().parents[1]
NAME = "a1_dynamic_balance"
TIMEOUT = "60"  # a jailed a1 submission takes 10-25 s on a loaded 2-core machine
EXPECTED = {  # submission -> (q1, q2, q3, total, status); each question: 1 point visible test, 2 points hidden
    "blank": ("0", "0", "0", "0", "ok"),
    "correct": ("3", "3", "3", "9", "ok"),
    "wrong": ("3", "3", "1", "7", "ok"),  # the KKT dual residual left out: only the hidden q3 test sees it
    "loop": ("0", "0", "0", "0", f"timeout (over {TIMEOUT} s)"),
    "killed": ("0", "0", "0", "0", "crashed"),
    "sysexit": ("0", "0", "2", "2", "ok"),  # the tests that call my_lambda fail; the hidden q3 test passes
    "reference": ("3", "3", "0", "6", "ok"),  # my_kkt calls metacl_lite's kkt_residuals: withheld while grading
    "refcall": ("3", "3", "0", "6", "ok"),  # my_kkt asks the hidden tests' `reference` for the trusted copy: refused
    "patched": ("0", "0", "0", "0", "ok"),  # blank, with a cell that makes every otter test pass: in the jail only
    "overrider": ("3", "3", "1", "7", "ok"),  # wrong, and disables assert_close and abs when called: in the jail only
    "vandal": ("3", "3", "3", "9", "ok"),  # the solution, then breaks the package's balance.py: only in its own copy
    "a1_dynamic_balance (1)": ("3", "3", "3", "9", "ok"),  # the solution, renamed as a second download is
    "export": ("3", "3", "3", "9", "ok"),  # the zip that the notebook's export cell wrote, run outside the checkout
}
VANDAL = ("import pathlib\nimport metacl_lite.balance\n"
          "with open(pathlib.Path(metacl_lite.balance.__file__), 'a') as f:\n    f.write('raise ImportError(1)')\n")


def _code_cell(nb, text):
    return next(c for c in nb.cells if c.cell_type == "code" and text in c.source)


def _variant(solution: Path, out: Path, edit) -> None:
    nb = nbformat.read(str(solution), as_version=4)
    edit(nb)
    nbformat.write(nb, str(out))


def make_submissions(dist: Path, folder: Path) -> None:
    out = A.generate(NAME, dist, run_tests=False)
    folder.mkdir()
    shutil.copy(out["student"], folder / "blank.ipynb")
    shutil.copy(out["solution"], folder / "correct.ipynb")

    def wrong(nb):
        c = _code_cell(nb, "def my_kkt")
        c.source = c.source.replace('"dual": max(0.0, -float(lam))', '"dual": 0.0')

    def loop(nb):
        _code_cell(nb, "def my_lambda").source += "\nwhile True:\n    pass\n"

    def killed(nb):
        _code_cell(nb, "def my_lambda").source += "\nimport os\nos._exit(1)\n"

    def sysexit(nb):
        c = _code_cell(nb, "def my_lambda")
        c.source = c.source.replace("    dot = float", "    import sys\n    sys.exit(0)\n    dot = float", 1)

    def reference(nb):
        _code_cell(nb, "def my_kkt").source = ("from metacl_lite.balance import kkt_residuals\n\n"
                                               "def my_kkt(g1, g2, g, lam):\n"
                                               "    return kkt_residuals(g1, g2, g, lam)\n")

    def refcall(nb):
        _code_cell(nb, "def my_kkt").source = ("from metacl_lite.course.grading_refs import reference\n\n"
                                               "def my_kkt(g1, g2, g, lam):\n"
                                               "    return reference('balance.kkt_residuals')(g1, g2, g, lam)\n")

    def overrider(nb):
        wrong(nb)
        _code_cell(nb, "def my_kkt").source += (
            "\n_mine = my_kkt\n\ndef my_kkt(*args):\n    import builtins\n    import torch\n"
            "    torch.testing.assert_close = lambda *a, **k: None\n    builtins.abs = lambda x: 0.0\n"
            "    return _mine(*args)\n")

    def vandal(nb):
        nb.cells.append(nbformat.v4.new_code_cell(VANDAL))

    for name, edit in (("wrong", wrong), ("loop", loop), ("killed", killed), ("sysexit", sysexit),
                       ("reference", reference), ("refcall", refcall), ("overrider", overrider), ("vandal", vandal)):
        _variant(out["solution"], folder / f"{name}.ipynb", edit)

    def patched(nb):
        init = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith(A.INIT_MARK))
        nb.cells.insert(init + 1, nbformat.v4.new_code_cell(
            "from otter.test_files.exception_test import test_case\ntest_case.call_func = lambda self, env: None\n"
            "import torch\ntorch.testing.assert_close = lambda *a, **k: None\n"))

    _variant(out["student"], folder / "patched.ipynb", patched)
    shutil.copy(out["solution"], folder / "a1_dynamic_balance (1).ipynb")
    (folder / "export.zip").write_bytes(exported(out["solution"], folder.parent / "student"))


def exported(notebook: Path, where: Path) -> bytes:
    """Run a notebook as a student would, renamed and in a folder outside the checkout, through its last cell, the
    export; the zip it wrote. Every grader.check cell must have found the notebook and its tests."""
    import nbclient

    where.mkdir()
    renamed = where / "my copy of a1.ipynb"
    shutil.copy(notebook, renamed)
    nb = nbformat.read(str(renamed), as_version=4)
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    nbclient.NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(where)}}).execute(env=env)
    checks = [c for c in nb.cells if c.cell_type == "code" and "grader.check" in c.source]
    for c in checks:
        text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in c.outputs)
        assert "All test cases passed" in text, (c.source, c.outputs)
    assert len(checks) == 4
    zips = list(where.glob("my copy of a1_*.zip"))
    assert len(zips) == 1, list(where.iterdir())
    return zips[0].read_bytes()


def grade(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    tmp = cwd / "tmpdir"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp), METACL_LITE_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "grade", *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


def sheet(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_each_submission_gets_its_score_and_status(graded):
    cwd, r = graded
    assert r.returncode == 0, r.stdout + r.stderr
    rows = sheet(cwd / "grades.csv")
    assert list(rows[0]) == ["submission", "q1", "q2", "q3", "q4 (manual)", "total", "possible", "percent", "status",
                             "possible_q1", "possible_q2", "possible_q3", "possible_q4", "assignment",
                             "autograder_sha256"]
    assert {(x["possible_q1"], x["possible_q2"], x["possible_q3"], x["possible_q4"]) for x in rows} == {("3", "3", "3",
                                                                                                         "2")}
    assert {x["assignment"] for x in rows} == {NAME} and len({x["autograder_sha256"] for x in rows}) == 1
    assert {x["percent"] for x in rows if x["total"] == "7"} == {"77.8"}
    assert {x["q4 (manual)"] for x in rows} == {""}  # the written question: for the instructor to fill in
    got = {Path(x["submission"]).stem: (x["q1"], x["q2"], x["q3"], x["total"], x["status"]) for x in rows}
    assert set(got) == set(EXPECTED)
    for name, (q1, q2, q3, total, status) in EXPECTED.items():
        assert got[name][:4] == (q1, q2, q3, total), (name, got[name])
        assert got[name][4].startswith(status), (name, got[name])
    assert {x["possible"] for x in rows} == {"9"}  # the full score on every row, also for a timeout or a crash
    assert not list((cwd / "tmpdir").iterdir()), "a grading left its temporary folder behind"
    fb = lambda name: (cwd / "fb" / S.feedback_name(f"subs/{name}.ipynb")).read_text()  # noqa: E731
    feedback = fb("wrong")
    assert "total: 7 / 9" in feedback and "q3: 1 / 3" in feedback and "q4: manual / 2" in feedback
    assert "passed test_q3_zero_at_optimum\n" in feedback
    assert "  hidden test 1 failed\n" in feedback and "random_candidates" not in feedback, feedback  # hidden: by number
    assert "called sys.exit(0)" in fb("sysexit")
    assert "is for the autograder's tests" in fb("refcall")
    assert "status: timeout" in fb("loop")
    assert (f"timeout: over {TIMEOUT} s\n  (the time limit, --timeout; this assignment's default, "
            f"{G.DEFAULT_TIMEOUT[NAME]} s, allows") in fb("loop"), fb("loop")
    assert re.search(r"cell \d+ raised \(«import pathlib»\): «(PermissionError|OSError): .*(Read-only|Permission denied)",
                     fb("vandal")), \
        fb("vandal")  # the student cell that raised, with its error


@pytest.mark.slow
def test_grading_twice_gives_the_same_sheet(graded):
    """The class's submissions whose rows hold seeded failures graded again, with two jobs (rows land in any order):
    the same rows and feedback (the looping one is left out: its row is its time limit, and it costs that limit)."""
    cwd, _ = graded
    again = [f"subs/{n}.ipynb" for n in ("correct", "wrong", "sysexit", "overrider", "patched")]
    r = grade(cwd, "a1_dynamic_balance", *again, "--out", "again.csv", "--feedback", "fb2", "--timeout", TIMEOUT,
              "--dist", "dist", "--jobs", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    first = {x["submission"]: x for x in sheet(cwd / "grades.csv")}
    assert {x["submission"]: x for x in sheet(cwd / "again.csv")} == {k: first[k] for k in again}
    for f in (cwd / "fb2").iterdir():  # the failure messages name the same seeded instances
        assert (cwd / "fb" / f.name).read_text() == f.read_text(), f.name
    assert len(list((cwd / "fb2").iterdir())) == len(again)


@pytest.mark.slow
def test_a_rerun_grades_only_the_missing_rows(graded):
    cwd, _ = graded
    rows = sheet(cwd / "grades.csv")
    kept = [x for x in rows if Path(x["submission"]).stem not in ("correct", "wrong")]
    kept[0]["status"] = "ok (kept)"  # a row already there is never graded again
    S.write_sheet(cwd / "partial.csv", list(rows[0]), kept)
    r = grade(cwd, "a1", "subs", "--out", "partial.csv", "--timeout", TIMEOUT, "--dist", "dist", "--feedback", "fb3",
              "--show-hidden")
    assert r.returncode == 0, r.stdout + r.stderr
    shown = (cwd / "fb3" / S.feedback_name("subs/wrong.ipynb")).read_text()  # the instructor asked for the hidden tests
    assert re.search(r"failed test_q3_random_candidates_against_reference \(hidden\).*dual = 0\.0", shown), shown
    graded_now = [line.split(":")[0] for line in r.stdout.splitlines() if line.startswith("subs")]
    assert sorted(Path(s).stem for s in graded_now) == ["correct", "wrong"], r.stdout
    after = {x["submission"]: x for x in sheet(cwd / "partial.csv")}
    assert after[kept[0]["submission"]]["status"] == "ok (kept)"
    assert sorted(after) == sorted(x["submission"] for x in rows)
    for x in rows:
        if Path(x["submission"]).stem in ("correct", "wrong"):
            assert after[x["submission"]] == x


@pytest.mark.slow
def test_one_notebook_prints_its_scores(graded):
    cwd, _ = graded
    r = grade(cwd, "subs/wrong.ipynb", "--dist", "dist", "--timeout", TIMEOUT)
    assert r.returncode == 0 and "q3: 1 / 3" in r.stdout and "total: 7 / 9" in r.stdout, r.stdout + r.stderr
    assert "q4: manual / 2" in r.stdout


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    for args, message in ((["a9", "x"], "unknown assignment 'a9'"), (["a1"], "give the submissions"),
                          (["a1", "missing"], "missing does not exist")):
        r = grade(tmp_path, *args)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.fixture(scope="module")
def a1_dist(tmp_path_factory):
    dist = tmp_path_factory.mktemp("a1dist")
    A.generate(NAME, dist, run_tests=False)
    return dist


def _a1_columns(dist):
    zip_path = A.autograder_zip(NAME, dist)
    return S.columns(G.question_points(zip_path), G.manual_points(NAME))


@pytest.mark.parametrize("content, message", [
    (None, "is the sheet of a2_importance, not of a1_dynamic_balance"),  # by name, not by columns
    ("submission,x,total,possible,status\n", "extra: x"),
    ("", "is empty"),
    ("\ufeffsubmission,q1\n", "byte-order mark"),
    ('{"config": {}, "runs": {}}', "is JSON (a results file?)"),
    (b"submission,q1\n\xff\xfe,1\n", "is not UTF-8"),
])
def test_a_sheet_that_is_not_this_assignments_is_refused_saying_why(tmp_path, a1_dist, content, message):
    cols = _a1_columns(a1_dist)
    sheet = tmp_path / "other.csv"
    if content is None:  # a2's sheet with a1's columns: refused by its assignment column
        S.write_sheet(sheet, cols, [dict(S.row("s.ipynb", {"error": "x"}, {"q1": 3, "q2": 3, "q3": 3}, {"q4": 2},
                                             "a2_importance", "0" * 64))])
    elif isinstance(content, bytes):
        sheet.write_bytes(content)
    else:
        sheet.write_text(content, encoding="utf-8")
    before = sheet.read_bytes()
    nb = tmp_path / "s.ipynb"
    shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", nb)
    r = grade(tmp_path, "a1", str(nb), "--out", "other.csv", "--dist", str(a1_dist))
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sheet.read_bytes() == before


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "1e12", "0", "-5"])
def test_a_timeout_that_is_not_a_number_of_seconds_exits_2(tmp_path, value):
    r = grade(tmp_path, "a1", "x.ipynb", "--timeout", value)
    assert r.returncode == 2 and "--timeout must be a number of seconds" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_grading_a_notebook_that_does_not_exist_says_so(tmp_path):
    r = grade(tmp_path, "nosuch.ipynb")
    assert r.returncode == 2 and "nosuch.ipynb does not exist" in r.stderr, r.stderr


def test_out_and_feedback_are_checked_before_the_first_submission(tmp_path, a1_dist):
    nb = tmp_path / "s.ipynb"
    shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", nb)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(ro), str(ro)], check=False)
    mounted = subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode == 0
    try:
        cases = [(["--out", "adir"], "is a directory"), (["--feedback", "afile"], "--feedback afile is a file")]
        if mounted:
            cases += [(["--out", "ro/g.csv"], "cannot write"), (["--feedback", "ro/fb"], "cannot write --feedback")]
        for extra, message in cases:
            r = grade(tmp_path, "a1", str(nb), "--dist", str(a1_dist), *extra)
            assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)
            assert not (tmp_path / "grades.csv").exists(), "graded before refusing"
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_two_graders_on_one_sheet_the_second_is_refused(tmp_path, a1_dist):
    from metacl_lite.lab.atomic import locked

    nb = tmp_path / "s.ipynb"
    shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", nb)
    with locked(tmp_path / "g.csv"):  # the first grader holds the sheet
        r = grade(tmp_path, "a1", str(nb), "--out", "g.csv", "--dist", str(a1_dist))
    assert r.returncode == 2 and "being written by another process" in r.stderr, r.stderr
    assert not (tmp_path / "g.csv").exists()


def test_feedback_names_are_unique_and_keys_are_resolved_paths(tmp_path, monkeypatch):
    keys = ["x/y.ipynb", "x y.ipynb", "x_y.ipynb", "x/y y.ipynb", "x_y_y.ipynb"]
    assert len({S.feedback_name(k) for k in keys}) == len(keys)
    assert S.feedback_name("wrong.ipynb") == "wrong.ipynb.txt"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "subs").mkdir()
    nb = tmp_path / "subs" / "a.ipynb"
    nb.write_text("{}")
    found = G.find_submissions([Path("subs/a.ipynb"), Path("./subs/../subs/a.ipynb"), nb, Path("subs")])
    assert [s.key for s in found] == ["subs/a.ipynb"]


def test_a_symlink_or_a_file_outside_the_folder_is_refused_and_a_zip_gives_only_its_notebook(tmp_path):
    import io
    import zipfile

    (tmp_path / "subs").mkdir()
    outside = tmp_path / "solution.ipynb"
    outside.write_text("{}")
    (tmp_path / "subs" / "link.ipynb").symlink_to(outside)
    (tmp_path / "subs" / "dir").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "subs" / "real.ipynb").write_text("{}")
    found = {Path(s.key).name: s.refused for s in G.find_submissions([tmp_path / "subs"])}
    assert found["real.ipynb"] is None and found["link.ipynb"].startswith("a symbolic link")
    assert "solution.ipynb" not in found, "a linked folder was followed"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("otter/__init__.py", "x")
        z.writestr("../evil.ipynb", "{}")
        z.writestr("mine.ipynb", '{"cells": []}')
    (tmp_path / "h.zip").write_bytes(buf.getvalue())
    assert G.notebook_bytes(tmp_path / "h.zip") == b'{"cells": []}'


def test_a_full_temporary_folder_stops_grading_with_one_line_and_keeps_the_rows(tmp_path, a1_dist, monkeypatch,
                                                                               capsys):
    """ENOSPC while a submission is set up (its folder, its package copy): exit 2 naming TMPDIR, the rows already
    graded kept, no traceback; the first submission's row is written before the second finds the disk full. The
    caller's SIGTERM and SIGHUP handlers are back after the command (grading's own stop at Ctrl-C stayed behind)."""
    import errno

    from metacl_lite.cli import main

    for n in ("a", "b"):
        shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", tmp_path / f"{n}.ipynb")
    calls = []

    def one(name, zip_path, submission, timeout, hidden=()):
        calls.append(submission.name)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return {"questions": {}, "cell_errors": []}

    monkeypatch.setattr(G, "grade_one", one)
    monkeypatch.chdir(tmp_path)
    handlers = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)]
    code = main(["assignments", "grade", "a1", "a.ipynb", "b.ipynb", "--dist", str(a1_dist), "--out", "g.csv"])
    assert code == 2 and calls == ["a.ipynb", "b.ipynb"]
    assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)] == handlers, "a handler stayed behind"
    err = capsys.readouterr().err
    assert err.startswith("error: no space left in the temporary folder") and "TMPDIR" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert [Path(r["submission"]).name for r in sheet(tmp_path / "g.csv")] == ["a.ipynb"]


@pytest.mark.slow
def test_rows_whose_status_is_an_error_are_graded_again(graded):
    cwd, _ = graded
    rows = [x for x in sheet(cwd / "grades.csv") if Path(x["submission"]).stem in ("correct", "blank")]
    broken = [dict(x, total="0", q1="0", q2="0", q3="0", status="error: FileNotFoundError: autograder")
              if Path(x["submission"]).stem == "correct" else x for x in rows]
    S.write_sheet(cwd / "errors.csv", list(rows[0]), broken)
    (cwd / "two").mkdir(exist_ok=True)
    for x in rows:
        shutil.copy(cwd / x["submission"], cwd / "two" / Path(x["submission"]).name)
    S.write_sheet(cwd / "errors.csv", list(rows[0]), [dict(x, submission="two/" + Path(x["submission"]).name)
                                                        for x in broken])
    r = grade(cwd, "a1", "two", "--out", "errors.csv", "--timeout", TIMEOUT, "--dist", "dist")
    assert r.returncode == 0, r.stderr
    assert [line.split(":")[0] for line in r.stdout.splitlines()[:-1]] == ["two/correct.ipynb"], r.stdout
    assert {Path(x["submission"]).stem: x["total"] for x in sheet(cwd / "errors.csv")} == {"correct": "9", "blank": "0"}


def test_short_and_full_names():
    assert G.full_name("a1") == G.full_name(NAME) == NAME
    with pytest.raises(A.AssignmentError, match="unknown assignment"):
        G.full_name("a")


@pytest.mark.parametrize("name", A.list_assignments())
def test_every_test_is_seeded(name):
    """Every visible and hidden test draws its random inputs from a fixed seed: the same score every time."""
    text = (ROOT / "book/assignments/source" / f"{name}.md").read_text()
    tests = re.findall(r"```\{code-cell\} ipython3\n(?:# HIDDEN\n)?(def test_.*?)```", text, re.S)
    assert tests
    for body in tests:
        draw = re.search(r"randn\(|rand\(|randint\(|\.normal\(|\.uniform\(|\.integers\(|mlp\(", body)
        if draw:
            seeded = re.search(r"(manual_seed|default_rng)\(\w+\)", body)
            assert seeded and seeded.start() < draw.start(), f"unseeded draw in {body.splitlines()[0]}"
        assert "SeedSequence()" not in body and "default_rng()" not in body, body.splitlines()[0]


@pytest.mark.slow
def test_ctrl_c_halfway_then_a_rerun_completes_the_sheet(graded):
    """Ctrl-C while a looping submission is graded: the command stops at once (exit 130, one line), leaves no kernel
    and no temporary folder, keeps the rows already graded; the rerun grades only the rest."""
    import signal
    import time

    cwd, _ = graded
    subs = cwd / "ctrlc"
    subs.mkdir()
    for name in ("correct", "loop", "wrong"):
        shutil.copy(cwd / "subs" / f"{name}.ipynb", subs / f"{name}.ipynb")
    tmp = cwd / "tmpdir"
    env = dict(os.environ, TMPDIR=str(tmp), METACL_LITE_PROGRESS="0")
    cmd = [sys.executable, "-m", "metacl_lite", "assignments", "grade", "a1", "ctrlc", "--out", "ctrlc.csv",
           "--timeout", "120", "--dist", "dist"]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (cwd / "ctrlc.csv").exists() and time.monotonic() < deadline:  # the first row, then the loop starts
        time.sleep(0.5)
    time.sleep(5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and len(err.strip().splitlines()) == 1, (proc.returncode, err)
    assert [Path(x["submission"]).stem for x in sheet(cwd / "ctrlc.csv")] == ["correct"]
    assert not list(tmp.iterdir()), "the interrupted grading left its folder (and perhaps its kernel) behind"
    shutil.copy(subs / "correct.ipynb", subs / "loop.ipynb")  # its student fixed it (the class test has the timeout)
    r = grade(cwd, "a1", "ctrlc", "--out", "ctrlc.csv", "--timeout", TIMEOUT, "--dist", "dist")
    assert r.returncode == 0, r.stderr
    assert [line.split(":")[0] for line in r.stdout.splitlines()[:-1]] == ["ctrlc/loop.ipynb", "ctrlc/wrong.ipynb"]
    rows = {Path(x["submission"]).stem: (x["total"], x["status"]) for x in sheet(cwd / "ctrlc.csv")}
    assert rows == {"correct": ("9", "ok"), "loop": ("9", "ok"), "wrong": ("7", "ok")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_killing_the_grader_leaves_no_worker_jail_or_folder(graded, sig):
    """Issue 37: SIGKILL or SIGTERM of the grader left the worker and a looping kernel running and a
    metacl-grade-* folder behind. The worker dies with the grader (parent-death signal), kills its jail (the PID
    namespace empties) and removes its folder."""
    import signal
    import time

    import psutil

    cwd, _ = graded
    subs = cwd / f"kill-{sig}"
    subs.mkdir()
    shutil.copy(cwd / "subs" / "loop.ipynb", subs / "loop.ipynb")
    tmp = cwd / f"tmp-{sig}"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), METACL_LITE_PROGRESS="0")
    proc = subprocess.Popen([sys.executable, "-m", "metacl_lite", "assignments", "grade", "a1", str(subs.name),
                             "--out", f"kill-{sig}.csv", "--timeout", "300", "--dist", "dist"], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    jailed = []
    while not jailed and time.monotonic() < deadline:  # the loop runs in the jail
        time.sleep(1)
        jailed = [p for p in psutil.process_iter(["uids", "cmdline"])
                  if runs_a_submission(p) and str(tmp) in " ".join(p.info["cmdline"] or [])]
    assert jailed, "the submission never started"
    time.sleep(2)
    proc.send_signal(getattr(signal, sig))
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [p for p in psutil.process_iter(["cmdline"]) if str(tmp) in " ".join(p.info["cmdline"] or [])]
        if not left and not list(tmp.iterdir()):
            break
        time.sleep(0.5)
    assert not left, [p.info["cmdline"] for p in left]
    assert not list(tmp.iterdir()), list(tmp.iterdir())


def test_grade_dist_that_is_a_file_is_refused_before_generating(tmp_path):
    """Issue 37: `grade --dist FILE` (no autograder there yet) crashed after generating; refused first."""
    nb = tmp_path / "s.ipynb"
    shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", nb)
    (tmp_path / "afile").write_text("x")
    r = grade(tmp_path, "a1", str(nb), "--dist", "afile")
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / "afile").read_text() == "x" and not (tmp_path / "grades.csv").exists()


def test_ctrl_c_handed_to_a_grading_thread_is_answered_at_once(tmp_path, a1_dist):
    """Issue 37 (the CI's hang): a Ctrl-C the kernel hands to a grading thread only sets a flag that the main thread
    reads when it wakes; waiting for a submission without a timeout left the press unanswered until that submission
    ended (up to its time limit). The submission here runs a process for 300 s and presses Ctrl-C from its own thread:
    the command must end at once, exit 130 with one line, and kill that process."""
    import signal
    import time

    shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", tmp_path / "a.ipynb")
    script = tmp_path / "grader.py"
    script.write_text(f"""
import faulthandler, signal, subprocess, sys, threading
faulthandler.dump_traceback_later(100, exit=True)
signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's foreground job, whatever the runner ignores
from metacl_lite.cli import main
from metacl_lite.course import grading as G

def one(name, zip_path, submission, timeout, hidden=()):
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)  # as the real worker
    open("sleeper.pid", "w").write(str(proc.pid))
    with G._LIVE_LOCK:
        G.LIVE.add(proc)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # the press, handed to this grading thread
    proc.wait()
    return {{"questions": {{}}, "cell_errors": []}}

G.grade_one = one
sys.exit(main(["assignments", "grade", "a1", "a.ipynb", "--dist", {str(a1_dist)!r}, "--out", "g.csv"]))
""")
    env = dict(os.environ, METACL_LITE_PROGRESS="0", PYTHONPATH=str(ROOT))
    start = time.monotonic()
    with open(tmp_path / "err.txt", "w") as err:  # a file, not a pipe: a sleeper left behind would hold a pipe open
        code = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=err, timeout=200).returncode
    took = time.monotonic() - start
    pid = int((tmp_path / "sleeper.pid").read_text())
    try:
        alive = "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        alive = False
    if alive:
        os.kill(pid, signal.SIGKILL)
    err = (tmp_path / "err.txt").read_text()
    assert code == 130 and len(err.strip().splitlines()) == 1, (code, err[-3000:])
    assert took < 90, f"the press was answered after {took:.0f} s"
    assert not alive, "the submission's process outlived the grader"
    assert not (tmp_path / "g.csv").exists() or not sheet(tmp_path / "g.csv")


def test_a_crashed_jail_is_described_once_it_has_ended(tmp_path):
    """The feedback of a submission that killed its own process said `exit status None` or `exit status 1` from one
    run to the next (the CI's `grading twice` failure): its pipe closes a moment before the process is reaped. The
    status is read once the process has ended."""
    from metacl_lite.course import grading_worker as W

    jail = W.Jail.__new__(W.Jail)  # the pipes and the jail itself are not needed to describe its end
    r, w = os.pipe()
    jail.proc = subprocess.Popen(["sh", "-c", "sleep 0.5; exit 1"], stderr=w)
    os.close(w)
    jail.log = W.Tail(r)
    assert jail.last_error() == "exit status 1"
