"""Course assignments built from the book, autograded with otter-grader.

One MyST source per assignment, `book/assignments/source/<name>.md`, holds the prompt, the solution and the tests
in Otter Assign's format (fenced ```otter blocks: ASSIGNMENT CONFIG, BEGIN/END QUESTION, SOLUTION, TESTS; test
cells starting with `# HIDDEN` are held back from students). From it, otter-grader's `otter assign` generates

* the student version (solutions replaced by `...`, visible tests embedded in the notebook so `grader.check` works
  in a downloaded copy), committed as the book page `book/assignments/<name>.ipynb`;
* the instructor version (`dist/assignments/<name>/autograder/`): the solution notebook, with rubrics for the
  written questions, and the autograder zip that runs the visible *and* hidden tests.

    python -m metacl_lite assignments generate            # all assignments: run the tests on the solutions, write
                                                          # dist/assignments/ and refresh the book pages
    python -m metacl_lite assignments check my.ipynb      # a student: run the visible tests on my notebook
    python -m metacl_lite assignments grade my.ipynb      # the autograder: visible + hidden tests, a score (the
                                                          # notebook in a jail, the tests outside it: `grading`)
    python -m metacl_lite assignments grade a1 subs/      # a class: one grade sheet (`grading`)

The tests compare the student's functions with `metacl_lite`'s reference implementations on seeded random inputs
(the same score every time).
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from ..paths import REPO_ROOT
from ..lab.atomic import cannot_create_in, write_text
from ..errors import UsageError

SOURCE_DIR = REPO_ROOT / "book" / "assignments" / "source"
PAGES_DIR = REPO_ROOT / "book" / "assignments"
DIST_DIR = REPO_ROOT / "dist" / "assignments"


class AssignmentError(UsageError):
    """A bad assignment name or notebook, or a solution that fails its own tests (exit 2 from the CLI)."""


class EmptyPath(AssignmentError, argparse.ArgumentTypeError):
    """An empty path option (`--dist ''`): it would mean the working folder. Also an argparse type error, so that
    argparse shows its message when `nonempty_path` is an option's `type`."""


def nonempty_path(text, option: str = "") -> Path:
    """A path option's value as a Path; an empty one (or only spaces) refused: `Path('')` is the working folder, so
    `--dist ''` would write there. Usable as an argparse `type` (the message then follows argparse's `argument
    --dist:`), or called with the option's name once the options are parsed (one line, exit 2)."""
    if not str(text).strip():
        name = f"{option} is empty" if option else "an empty path"
        raise EmptyPath(f"{name}: it would mean the working folder; give a path (`.` for the working folder)")
    return Path(text)


def list_assignments(source_dir: Path = SOURCE_DIR) -> list[str]:
    """The assignment names (source file stems), in book order. An installed package has no sources: an error that
    says where they are."""
    if not Path(source_dir).is_dir():
        raise AssignmentError(f"no assignment sources in {source_dir}: the assignments are generated and graded from a "
                              "checkout of the metacl-lite repository (book/assignments/source); students need only "
                              "the student kit or the book's pages")
    return sorted(p.stem for p in Path(source_dir).glob("*.md"))


def source_path(name: str, source_dir: Path = SOURCE_DIR) -> Path:
    names = list_assignments(source_dir)
    if name not in names:
        raise AssignmentError(f"unknown assignment {name!r}; choose from: {', '.join(names)} "
                              f"(`python -m metacl_lite assignments list`)")
    return Path(source_dir) / f"{name}.md"


INIT_MARK = "# Initialize Otter"
#: the line of otter's init cell that names the notebook file, and what replaces it (`notebook_path`)
INIT_LINE = 'grader = otter.Notebook("{name}.ipynb")'
INIT_FOUND = ('from metacl_lite.course.assignments import notebook_path\n'
              'grader = otter.Notebook(notebook_path("{name}"))  # this notebook, renamed or moved')


def notebook_path(name: str) -> Optional[str]:
    """The file of the running notebook of assignment `name`, for otter's `Notebook` (its `check` and `export` read
    it), so that a renamed download ("a1_dynamic_balance (1).ipynb") or a copy outside the repository works: the path
    Jupyter gives the kernel (`JPY_SESSION_NAME`, VS Code's `__vsc_ipynb_file__`), else `<name>.ipynb` in the working
    folder, else the notebook there whose otter metadata names the assignment (the latest saved when several do).
    None while otter grades (it finds the notebook itself) or when nothing fits (otter's own search then runs)."""
    import json
    import os

    try:
        import otter

        if otter.Notebook._grading_mode:
            return None
    except (ImportError, AttributeError):
        pass
    given = [os.environ.get("JPY_SESSION_NAME", "")]
    try:
        given.append(str(get_ipython().user_ns.get("__vsc_ipynb_file__", "")))  # noqa: F821 - in a kernel only
    except NameError:
        pass
    here = Path.cwd()
    for p in given:
        if p.endswith(".ipynb") and Path(p).is_file():
            p = Path(p).resolve()
            return str(p.relative_to(here)) if p.is_relative_to(here) else str(p)
    if (here / f"{name}.ipynb").is_file():
        return f"{name}.ipynb"
    mine = []
    for p in here.glob("*.ipynb"):
        try:
            meta = json.loads(p.read_text(encoding="utf-8")).get("metadata", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(meta, dict) and meta.get("otter", {}).get("assignment_name") == name:
            mine.append(p)
    return max(mine, key=lambda p: p.stat().st_mtime).name if mine else None


def init_after_title(nb) -> None:
    """otter assign puts its "Initialize Otter" code cell first, above the assignment's title; move it to just after
    the title (the first Markdown cell that starts with "# "), so that a notebook opens with its title; and let its
    `otter.Notebook` find the notebook's file when it is renamed or moved (`notebook_path`). In place."""
    cells = nb.cells
    init = next((i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith(INIT_MARK)), None)
    title = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("# ")), None)
    if init is not None and title is not None and init < title:
        cells.insert(title, cells.pop(init))
    name = nb.metadata.get("otter", {}).get("assignment_name")
    for c in cells:
        if c.cell_type == "code" and c.source.startswith(INIT_MARK) and name:
            c.source = c.source.replace(INIT_LINE.format(name=name), INIT_FOUND.format(name=name))


def _normalise_ids(path: Path) -> None:
    """Move otter's init cell after the title (`init_after_title`). otter assign gives cells random ids; make them a
    function of position and content so that regenerating an unchanged source gives a byte-identical notebook (the
    committed book pages are checked against the sources)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    init_after_title(nb)
    for i, cell in enumerate(nb.cells):
        src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        cell["id"] = hashlib.sha1(f"{i}:{cell.cell_type}:{src}".encode()).hexdigest()[:12]
    nb.metadata.pop("jupytext", None)
    nbformat.write(nb, str(path))


def _master_notebook(name: str, tmp: Path, source_dir: Path) -> Path:
    import jupytext

    master = tmp / f"{name}.ipynb"
    nb = jupytext.read(str(source_path(name, source_dir)))
    if f"name: {name}" not in "".join(c.source for c in nb.cells if c.cell_type == "markdown"):
        raise AssignmentError(f"{name}.md: its ASSIGNMENT CONFIG must say `name: {name}` (the file stem), so that a "
                              "submitted notebook names the autograder it belongs to")
    jupytext.write(nb, str(master))
    return master


def generate(name: str, dist: Path = DIST_DIR, run_tests: bool = True,
             source_dir: Path = SOURCE_DIR) -> dict[str, Path]:
    """Run `otter assign` on one assignment: dist/<name>/student/<name>.ipynb and dist/<name>/autograder/ (solution
    notebook and autograder zip). With run_tests, otter runs every test (visible and hidden) against the solution
    notebook and fails unless it scores 100%."""
    from otter.assign import main as otter_assign

    out = Path(dist) / name
    with tempfile.TemporaryDirectory() as tmp:
        master = _master_notebook(name, Path(tmp), source_dir)
        staging = Path(tmp) / "dist"
        try:
            otter_assign(str(master), str(staging), no_run_tests=not run_tests, no_pdfs=True)
        except RuntimeError as e:
            raise AssignmentError(f"{name}: the solution does not pass its own tests:\n{e}") from e
        for sub in ("student", "autograder"):
            _normalise_ids(staging / sub / f"{name}.ipynb")
        if out.exists():  # replace only after a successful generation
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, out)
    zips = sorted((out / "autograder").glob("*.zip"))
    return {"student": out / "student" / f"{name}.ipynb", "solution": out / "autograder" / f"{name}.ipynb",
            "autograder": zips[-1] if zips else None}


def update_pages(names: Optional[Sequence[str]] = None, check: bool = False, dist: Optional[Path] = None,
                 source_dir: Path = SOURCE_DIR, pages_dir: Path = PAGES_DIR) -> list[str]:
    """Write the student versions to the book (book/assignments/<name>.ipynb), or with check=True only report which
    pages differ from what the sources generate. Returns the names of the pages that changed (or would)."""
    names = list(names or list_assignments(source_dir))
    changed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            student = generate(name, Path(dist or tmp), run_tests=False, source_dir=source_dir)["student"]
            page = Path(pages_dir) / f"{name}.ipynb"
            new = student.read_text()
            if not page.exists() or page.read_text() != new:
                changed.append(name)
                if not check:
                    write_text(page, new)
    return changed


def read_notebook(notebook: Path):
    """A notebook as nbformat reads it; a file that is not a notebook (not JSON, `{}`, a list, a folder) raises an
    AssignmentError naming it."""
    import nbformat

    try:
        nb = nbformat.read(str(notebook), as_version=4)
        if not isinstance(nb.get("metadata"), dict):
            raise ValueError("no metadata")
    except Exception as e:  # nbformat raises NotJSONError, ValidationError, KeyError, AttributeError... by content
        why = " ".join(str(e).split())[:120]  # one line
        raise AssignmentError(f"{notebook} is not a Jupyter notebook ({type(e).__name__}: {why}); give the .ipynb "
                              f"file of your assignment, as downloaded from the book") from None
    return nb


def assignment_name(notebook: Path) -> str:
    """The assignment a notebook belongs to (otter writes it into the notebook metadata)."""
    nb = read_notebook(notebook)
    name = nb.metadata.get("otter", {}).get("assignment_name")
    if not name:
        raise AssignmentError(f"{notebook} is not an assignment notebook (no otter metadata); download it from the "
                              "book's Assignments part or run `python -m metacl_lite assignments generate`")
    return name


def visible_tests(notebook: Path) -> dict[str, str]:
    """The visible tests that otter embedded in a student notebook: question -> test file source."""
    return dict(read_notebook(notebook).metadata.get("otter", {}).get("tests", {}))


def manual_questions(notebook: Path) -> list[str]:
    """The questions of a student notebook graded by hand (written answers): those otter marks `<!-- BEGIN
    QUESTION -->` in the prompt's cell (`q4` for **Question 4**)."""
    cells = read_notebook(notebook).cells
    found = (re.findall(r"<!-- BEGIN QUESTION -->\s*\*\*Question (\w+)\*\*", c.source) for c in cells
             if c.cell_type == "markdown")
    return [f"q{n}" for hits in found for n in hits]


def check(notebook: Path, question: Optional[str] = None):
    """What a student runs: execute the notebook and run its visible tests (otter's grader). Returns otter's
    GradingResults (`.total`, `.possible`, `.summary()`)."""
    from otter.execute import grade_notebook

    notebook = Path(notebook)
    if notebook.is_dir():
        raise AssignmentError(f"{notebook} is a folder; give the notebook file (.ipynb) to check")
    if not notebook.is_file():
        raise AssignmentError(f"{notebook} does not exist")
    tests = visible_tests(notebook)
    if not tests:
        raise AssignmentError(f"{notebook} carries no tests; is it a student notebook from book/assignments/?")
    if question is not None and question not in tests and question in manual_questions(notebook):
        raise AssignmentError(f"{question} of {notebook.name} is graded by hand (a written answer): it has no tests "
                              f"to run; the questions with tests: {', '.join(sorted(tests))}")
    if question is not None and question not in tests:
        raise AssignmentError(f"no question {question!r} in {notebook.name}; it has: {', '.join(sorted(tests))}")
    with tempfile.TemporaryDirectory() as tmp:
        tdir = Path(tmp) / "tests"
        tdir.mkdir()
        for q, src in tests.items():
            (tdir / f"{q}.py").write_text(src)
        qs = [str(tdir / f"{q}.py") for q in sorted(tests) if question in (None, q)]
        return grade_notebook(str(notebook.resolve()), tests_glob=qs, test_dir=str(tdir),
                              cwd=str(notebook.resolve().parent))


def autograder_zip(name: str, dist: Path = DIST_DIR) -> Path:
    zips = sorted((Path(dist) / name / "autograder").glob("*.zip"))
    if not zips:
        raise AssignmentError(f"no autograder for {name!r} in {dist}; run `python -m metacl_lite assignments generate "
                              f"{name}` first")
    return zips[-1]


def check_dist(dist: Path, option: str = "--dist") -> Path:
    """Refuse now, before any work, a `dist` folder that is a file or cannot be written (read-only, no permission)."""
    dist = Path(dist)
    probe = dist
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise AssignmentError(f"{option} {dist}: {probe} is a file, not a folder; give a folder")
    why = cannot_create_in(probe)
    if why:
        raise AssignmentError(f"cannot write {option} {dist}: {why} in {probe}; give another folder")
    return dist


def ensure_autograder(name: str, dist: Path = DIST_DIR) -> Path:
    """The autograder zip of assignment `name` in `dist`, generated first when it is missing (`dist` checked
    writable before the generation)."""
    try:
        return autograder_zip(name, dist)
    except AssignmentError:
        check_dist(dist)
        return generate(name, dist)["autograder"]


def grade(notebook: Path, dist: Path = DIST_DIR, generate_missing: bool = True):
    """otter's own autograder (visible and hidden tests, in the notebook's kernel, no jail) on a notebook you trust:
    checks a generated autograder against the solution and the student version. Students' submissions are graded by
    `assignments grade` (`grading`: their code in a jail, the tests outside it). Generates the autograder first if it
    is missing."""
    from otter.api import grade_submission

    notebook = Path(notebook)
    if not notebook.is_file():
        raise AssignmentError(f"{notebook} does not exist")
    name = assignment_name(notebook)
    zip_path = ensure_autograder(name, dist) if generate_missing else autograder_zip(name, dist)
    return grade_submission(str(notebook.resolve()), str(zip_path), quiet=True)


def score_table(results) -> list[tuple[str, float, float]]:
    """(question, score, possible) for each autograded question of a GradingResults."""
    return [(q, float(tf.score), float(tf.possible)) for q, tf in sorted(results.results.items())]
