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
from conftest import secret_lines

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
        for secret in secret_lines(name):
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


def _kit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "kit", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_kit_out_refuses_a_file_that_is_not_a_kit_a_folder_and_a_read_only_folder(tmp_path):
    """Issue 37: `kit --out results/x.json` overwrote the results file with a zip; a folder or a read-only folder
    crashed after building the wheel, leaving a .part. Each is refused before any work, the file left as it was."""
    results = tmp_path / "pmnist-K20.json"
    results.write_text('{"config": {}}')
    r = _kit("--out", str(results))
    assert r.returncode == 2 and "is not a student kit" in r.stderr, r.stderr
    assert results.read_text() == '{"config": {}}'
    r = _kit("--out", str(tmp_path))
    assert r.returncode == 2 and "is a folder" in r.stderr, r.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    root = os.geteuid() == 0
    if root:  # root writes through a folder's permissions: a read-only bind mount
        subprocess.run(["mount", "--bind", str(ro), str(ro)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True, capture_output=True)
    else:
        ro.chmod(0o555)
    try:
        r = _kit("--out", str(ro / "kit.zip"))
        assert r.returncode == 2 and "cannot" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert list(ro.iterdir()) == [], "a .part was left behind"
    finally:
        if root:
            subprocess.run(["umount", str(ro)], capture_output=True)
        ro.chmod(0o755)


def test_kit_out_replaces_an_earlier_kit(kit_zip, tmp_path):
    again = tmp_path / "k.zip"
    shutil.copy(kit_zip, again)
    assert kit.is_kit(again)
    kit.check_out(again)  # an earlier kit may be replaced
