"""Grading a class (`assignments grade ASSIGNMENT PATH...`): one folder of a1 submissions made from the student
notebook (blank, the solution, partly wrong, an infinite loop, a killed kernel, sys.exit in a graded function, a call
of the package's reference, one of the hidden tests' `reference`, a cell that overrides otter's runner, a function
that overrides the assertion helpers when called, one that writes into the package, a renamed copy, an otter export
zip), each graded in its own process and folder with a time limit; the same sheet every time; a rerun grades only
missing rows, also after Ctrl-C."""
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from metacl_lite.course import assignments as A
from metacl_lite.course import grading as G

ROOT = Path(__file__).resolve().parents[1]
NAME = "a1_dynamic_balance"
TIMEOUT = "25"
EXPECTED = {  # submission -> (q1, q2, q3, total, status); each question: 1 point visible test, 2 points hidden
    "blank": ("0", "0", "0", "0", "ok"),
    "correct": ("3", "3", "3", "9", "ok"),
    "wrong": ("3", "3", "1", "7", "ok"),  # the KKT dual residual left out: only the hidden q3 test sees it
    "loop": ("0", "0", "0", "0", "timeout"),
    "killed": ("0", "0", "0", "0", "crashed"),
    "sysexit": ("0", "0", "2", "2", "ok"),  # the tests that call my_lambda fail; the hidden q3 test passes
    "reference": ("3", "3", "0", "6", "ok"),  # my_kkt calls metacl_lite's kkt_residuals: withheld while grading
    "refcall": ("3", "3", "0", "6", "ok"),  # my_kkt asks the hidden tests' `reference` for the trusted copy: refused
    "patched": ("0", "0", "0", "0", "ok"),  # blank, with a cell that makes every otter test pass: put back
    "overrider": ("3", "3", "0", "6", "ok"),  # a wrong my_kkt that disables assert_close and abs when called
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


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The folder graded once: (working folder, the command's result)."""
    cwd = tmp_path_factory.mktemp("grading")
    make_submissions(cwd / "dist", cwd / "subs")
    package = ROOT / "metacl_lite" / "balance.py"
    before = package.read_bytes()
    try:
        r = grade(cwd, "a1", "subs", "--out", "grades.csv", "--feedback", "fb", "--timeout", TIMEOUT, "--dist", "dist")
    finally:
        after = package.read_bytes()
        package.write_bytes(before)  # whatever happened, the checkout is left as it was
    assert after == before, "a submission changed the instructor's package"
    return cwd, r


@pytest.mark.slow
def test_each_submission_gets_its_score_and_status(graded):
    cwd, r = graded
    assert r.returncode == 0, r.stdout + r.stderr
    rows = sheet(cwd / "grades.csv")
    assert list(rows[0]) == ["submission", "q1", "q2", "q3", "q4 (manual)", "total", "possible", "status"]
    assert {x["q4 (manual)"] for x in rows} == {""}  # the written question: for the instructor to fill in
    got = {Path(x["submission"]).stem: (x["q1"], x["q2"], x["q3"], x["total"], x["status"]) for x in rows}
    assert set(got) == set(EXPECTED)
    for name, (q1, q2, q3, total, status) in EXPECTED.items():
        assert got[name][:4] == (q1, q2, q3, total), (name, got[name])
        assert got[name][4].startswith(status), (name, got[name])
    assert {x["possible"] for x in rows} == {"9"}  # the full score on every row, also for a timeout or a crash
    assert not list((cwd / "tmpdir").iterdir()), "a grading left its temporary folder behind"
    feedback = (cwd / "fb" / "subs_wrong.ipynb.txt").read_text()
    assert "total: 7 / 9" in feedback and "q3: 1 / 3" in feedback and "q4: manual / 2" in feedback
    assert "passed test_q3_zero_at_optimum\n" in feedback
    assert re.search(r"failed test_q3_random_candidates_against_reference \(hidden\).*dual = 0\.0", feedback), feedback
    assert "overrode torch.testing.assert_close" in (cwd / "fb" / "subs_overrider.ipynb.txt").read_text()
    assert "called sys.exit(0)" in (cwd / "fb" / "subs_sysexit.ipynb.txt").read_text()
    assert "is for the autograder's tests" in (cwd / "fb" / "subs_refcall.ipynb.txt").read_text()
    assert "status: timeout" in (cwd / "fb" / "subs_loop.ipynb.txt").read_text()


@pytest.mark.slow
def test_grading_twice_gives_the_same_sheet(graded):
    cwd, _ = graded
    r = grade(cwd, "a1_dynamic_balance", "subs", "--out", "again.csv", "--feedback", "fb2", "--timeout", TIMEOUT,
              "--dist", "dist")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (cwd / "again.csv").read_text() == (cwd / "grades.csv").read_text()
    for f in (cwd / "fb").iterdir():  # the failure messages name the same seeded instances
        assert (cwd / "fb2" / f.name).read_text() == f.read_text(), f.name


@pytest.mark.slow
def test_a_rerun_grades_only_the_missing_rows(graded):
    cwd, _ = graded
    rows = sheet(cwd / "grades.csv")
    kept = [x for x in rows if Path(x["submission"]).stem not in ("correct", "wrong")]
    kept[0]["status"] = "ok (kept)"  # a row already there is never graded again
    G.write_sheet(cwd / "partial.csv", list(rows[0]), kept)
    r = grade(cwd, "a1", "subs", "--out", "partial.csv", "--timeout", TIMEOUT, "--dist", "dist")
    assert r.returncode == 0, r.stdout + r.stderr
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


@pytest.mark.slow
def test_the_sheet_of_another_assignment_is_refused(tmp_path):  # slow: generates a1's autograder
    (tmp_path / "other.csv").write_text("submission,x,total,possible,status\n")
    nb = tmp_path / "s.ipynb"
    shutil.copy(ROOT / "book/assignments" / f"{NAME}.ipynb", nb)
    r = grade(tmp_path, "a1", str(nb), "--out", "other.csv", "--dist", str(tmp_path / "dist"))
    assert r.returncode == 2 and "another assignment" in r.stderr, r.stderr


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
    r = grade(cwd, "a1", "ctrlc", "--out", "ctrlc.csv", "--timeout", TIMEOUT, "--dist", "dist")
    assert r.returncode == 0, r.stderr
    assert [line.split(":")[0] for line in r.stdout.splitlines()[:-1]] == ["ctrlc/loop.ipynb", "ctrlc/wrong.ipynb"]
    rows = {Path(x["submission"]).stem: (x["total"], x["status"]) for x in sheet(cwd / "ctrlc.csv")}
    assert rows == {"correct": ("9", "ok"), "loop": ("0", "timeout"), "wrong": ("7", "ok")}
