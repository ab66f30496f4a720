"""Grading a class (`assignments grade ASSIGNMENT PATH...`): one folder of a1 submissions made from the student
notebook (blank, the solution, partly wrong, an infinite loop, a killed kernel, sys.exit in a graded function, a call
of the package's reference, a cell that overrides otter's runner, a function that overrides the assertion helpers
when called, one that writes into the package), each graded in its own process and folder with a time limit; the
same sheet every time; a rerun grades only missing rows."""
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from metacl_lite.report import assignments as A
from metacl_lite.report import grading as G

ROOT = Path(__file__).resolve().parents[1]
NAME = "a1_dynamic_balance"
TIMEOUT = "25"
EXPECTED = {  # submission -> (q1, q2, q3, total, status)
    "blank": ("0", "0", "0", "0", "ok"),
    "correct": ("3", "3", "3", "9", "ok"),
    "wrong": ("3", "3", "1.5", "7.5", "ok"),  # the KKT dual residual left out: only the hidden q3 test sees it
    "loop": ("0", "0", "0", "0", "timeout"),
    "killed": ("0", "0", "0", "0", "crashed"),
    "sysexit": ("0", "0", "1.5", "1.5", "ok"),  # the tests that call my_lambda fail; the hidden q3 test passes
    "reference": ("3", "3", "0", "6", "ok"),  # my_kkt calls metacl_lite's kkt_residuals: withheld while grading
    "patched": ("0", "0", "0", "0", "ok"),  # blank, with a cell that makes every otter test pass: put back
    "overrider": ("3", "3", "0", "6", "ok"),  # a wrong my_kkt that disables assert_close and abs when called
    "vandal": ("3", "3", "3", "9", "ok"),  # the solution, then breaks the package's balance.py: only in its own copy
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

    def overrider(nb):
        wrong(nb)
        _code_cell(nb, "def my_kkt").source += (
            "\n_mine = my_kkt\n\ndef my_kkt(*args):\n    import builtins\n    import torch\n"
            "    torch.testing.assert_close = lambda *a, **k: None\n    builtins.abs = lambda x: 0.0\n"
            "    return _mine(*args)\n")

    def vandal(nb):
        nb.cells.append(nbformat.v4.new_code_cell(VANDAL))

    for name, edit in (("wrong", wrong), ("loop", loop), ("killed", killed), ("sysexit", sysexit),
                       ("reference", reference), ("overrider", overrider), ("vandal", vandal)):
        _variant(out["solution"], folder / f"{name}.ipynb", edit)

    def patched(nb):
        init = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith(A.INIT_MARK))
        nb.cells.insert(init + 1, nbformat.v4.new_code_cell(
            "from otter.test_files.exception_test import test_case\ntest_case.call_func = lambda self, env: None\n"
            "import torch\ntorch.testing.assert_close = lambda *a, **k: None\n"))

    _variant(out["student"], folder / "patched.ipynb", patched)


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
    assert list(rows[0]) == ["submission", "q1", "q2", "q3", "total", "possible", "status"]
    got = {Path(x["submission"]).stem: (x["q1"], x["q2"], x["q3"], x["total"], x["status"]) for x in rows}
    assert set(got) == set(EXPECTED)
    for name, (q1, q2, q3, total, status) in EXPECTED.items():
        assert got[name][:4] == (q1, q2, q3, total), (name, got[name])
        assert got[name][4].startswith(status), (name, got[name])
    assert {x["possible"] for x in rows} == {"9"}  # the full score on every row, also for a timeout or a crash
    assert not list((cwd / "tmpdir").iterdir()), "a grading left its temporary folder behind"
    feedback = (cwd / "fb" / "subs_wrong.ipynb.txt").read_text()
    assert "total: 7.5 / 9" in feedback and "q3: 1.5 / 3" in feedback
    assert re.search(r"failed .*\(hidden\).*dual = 0\.0", feedback), feedback
    assert "overrode torch.testing.assert_close" in (cwd / "fb" / "subs_overrider.ipynb.txt").read_text()
    assert "called sys.exit(0)" in (cwd / "fb" / "subs_sysexit.ipynb.txt").read_text()
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
    assert r.returncode == 0 and "q3: 1.5 / 3" in r.stdout and "total: 7.5 / 9" in r.stdout, r.stdout + r.stderr


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
