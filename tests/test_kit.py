"""The student kit (`assignments kit`): the student notebooks, the package's wheel and assignment 4's reproduction
notebook, and nothing of the assignment sources; assignment 4 runs from it outside the checkout."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from metacl_lite.course import assignments as A
from metacl_lite.course import kit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kit_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit") / "kit.zip"
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "kit", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def test_the_kit_holds_notebooks_wheel_and_readme_and_no_source(kit_zip):
    with zipfile.ZipFile(kit_zip) as z:
        names = sorted(Path(n).name for n in z.namelist())
        wheel = next(n for n in z.namelist() if n.endswith(".whl"))
        texts = {n: z.read(n) for n in z.namelist() if not n.endswith(".whl")}
        z.extract(wheel, kit_zip.parent)
    assert names == sorted(["README.txt", "benchmark.md", *(f"{n}.ipynb" for n in A.list_assignments()),
                            Path(wheel).name])
    with zipfile.ZipFile(kit_zip.parent / wheel) as w:
        inside = w.namelist()
        package = {n: w.read(n) for n in inside if not n.endswith(".npz")}
    assert "metacl_lite/balance.py" in inside and "metacl_lite/course/grading.py" in inside
    assert not [n for n in inside if "book/" in n or n.endswith(".md") and "assignments" in n]
    for name in A.list_assignments():
        for secret in A.secret_lines(name):
            leaks = [n for n, data in texts.items() if secret.encode() in data]
            assert not leaks, f"{name}: {secret!r} is in {leaks}"
            # the package is the book's reference implementation (the solutions' code is in it by design, withheld
            # while grading); what must not be there are the hidden tests and the rubrics
            if secret.startswith(("def test_", "*Rubric")):
                leaks = [n for n, data in package.items() if secret.encode() in data]
                assert not leaks, f"{name}: {secret!r} is in the wheel's {leaks}"
    readme = texts[f"{kit.FOLDER}/README.txt"].decode()
    assert "grader.export" in readme and Path(wheel).name in readme and "hidden" in readme


def test_a_missing_page_is_named_before_any_work(tmp_path):
    with pytest.raises(A.AssignmentError, match=r"a1_dynamic_balance.ipynb, .*a4_experiment.ipynb: run `python -m metacl_lite assignments generate`"):
        kit.write_kit(tmp_path / "k.zip", pages=tmp_path)
    assert not (tmp_path / "k.zip").exists()


@pytest.mark.slow
def test_assignment_4_runs_from_the_kit_outside_the_checkout(kit_zip, tmp_path):
    """The a4 solution, renamed, in the unpacked kit, with the package imported from the kit's wheel (not from the
    checkout): it finds the reproduction notebook beside it, writes its runs there, and its check passes."""
    import nbclient

    with zipfile.ZipFile(kit_zip) as z:
        z.extractall(tmp_path)
    folder = tmp_path / kit.FOLDER
    site = tmp_path / "site"
    with zipfile.ZipFile(next(folder.glob("*.whl"))) as w:
        w.extractall(site)
    solution = A.generate("a4_experiment", tmp_path / "dist", run_tests=False)["solution"]
    shutil.copy(solution, folder / "mine.ipynb")
    nb = nbformat.read(str(folder / "mine.ipynb"), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import metacl_lite\nprint(metacl_lite.__file__)"))
    env = dict(os.environ, PYTHONPATH=str(site), METACL_LITE_PROGRESS="0")
    env.pop("JPY_SESSION_NAME", None)
    nbclient.NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(folder)}}).execute(env=env)
    assert nb.cells[0].outputs[0]["text"].strip() == str(site / "metacl_lite" / "__init__.py")
    check = next(c for c in nb.cells if c.source.startswith('grader.check("q1")'))
    assert "All test cases passed" in str(check.outputs), check.outputs
    assert sorted(p.name for p in (folder / "a4-runs").iterdir()) == ["K10", "K100"]
