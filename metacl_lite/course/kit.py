"""What students receive: one zip with the student notebooks, the package as a wheel, and what assignment 4 runs;
no assignment source (solutions, hidden tests, rubrics) and no clone of the repository.

    python -m metacl_lite assignments kit          # dist/assignments/metacl-lite-student-kit.zip

The notebooks are the book's pages (`book/assignments/<name>.ipynb`, the student versions that `generate` writes);
the wheel holds the `metacl_lite` package only (pyproject's packages), built from this checkout.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..paths import REPO_ROOT
from .assignments import DIST_DIR, PAGES_DIR, AssignmentError, list_assignments, nonempty_path

KIT = "metacl-lite-student-kit.zip"
FOLDER = "metacl-lite-assignments"  # the zip's one top folder
#: besides the notebooks: the reproduction notebook that assignment 4 runs with papermill
EXTRA = (REPO_ROOT / "book" / "reproduce" / "benchmark.md",)
README = """The metacl-lite assignments: {names}.

1. Install the package and the graders' tools (Python 3.11 or newer), in a virtual environment:

       python -m venv .venv && . .venv/bin/activate
       pip install "{wheel}[book,assignments]" jupyterlab

2. Open a notebook with Jupyter (`jupyter lab a1_dynamic_balance.ipynb`); keep the files of this folder together
   (assignment 4 runs benchmark.md). Fill in the cells marked `...`; `grader.check("q1")` runs a question's visible
   tests, `python -m metacl_lite assignments check NOTEBOOK` runs them all from a shell. The grade also counts hidden
   tests, worth more than the visible ones: passing the visible tests is not full marks. Each question says its points.

3. Hand in: save the notebook, run its last cell (`grader.export`) and hand in the zip it writes beside the notebook.
   The notebook may be renamed or moved; it finds itself.
"""


def build_wheel(dest: Path) -> Path:
    """The package's wheel, built by pip from a copy of the checkout's pyproject.toml, README.md and metacl_lite/
    (without network when setuptools is installed: no build isolation). pip's own temporary files go into the same
    temporary folder, so that an interrupted build leaves nothing behind."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pip-tmp").mkdir()
        src = Path(tmp) / "src"
        shutil.copytree(REPO_ROOT / "metacl_lite", src / "metacl_lite",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for f in ("pyproject.toml", "README.md"):
            shutil.copy2(REPO_ROOT / f, src / f)
        isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--quiet", "-w", str(Path(tmp) / "w"),
               str(src)]
        env = dict(os.environ, TMPDIR=str(Path(tmp) / "pip-tmp"))
        pip = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
        try:
            err = pip.communicate()[1]
        except BaseException:  # Ctrl-C, SIGTERM: pip and its build backend go before their folder does
            from .grading import _kill

            _kill(pip)
            raise
        if pip.returncode != 0:
            last = (err.strip().splitlines() or ["no message"])[-1]
            raise AssignmentError(f"pip could not build the package's wheel ({last}); install setuptools>=68")
        wheel = next((Path(tmp) / "w").glob("*.whl"))
        Path(dest).mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheel, Path(dest) / wheel.name))


def write_kit(out: Path = DIST_DIR / KIT, pages: Path = PAGES_DIR) -> Path:
    """Write the student kit zip to `out` (atomically); returns its path."""
    names = list_assignments()
    notebooks = [Path(pages) / f"{n}.ipynb" for n in names]
    missing = [str(p) for p in [*notebooks, *EXTRA] if not p.is_file()]
    if missing:
        raise AssignmentError(f"missing {', '.join(missing)}: run `python -m metacl_lite assignments generate` first")
    out = check_out(Path(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wheel = build_wheel(Path(tmp))
            with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr(f"{FOLDER}/README.txt", README.format(names=", ".join(names), wheel=wheel.name))
                for p in [*notebooks, *EXTRA, wheel]:
                    z.write(p, f"{FOLDER}/{p.name}")
            part.replace(out)
    finally:
        part.unlink(missing_ok=True)
    return out


def is_kit(path: Path) -> bool:
    """Whether `path` is a student kit zip (its README in the kit's folder)."""
    try:
        with zipfile.ZipFile(path) as z:
            return f"{FOLDER}/README.txt" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def check_out(out: Path) -> Path:
    """Refuse, before building anything, an --out that is a folder, an existing file that is not a kit (a results
    file), or a path that cannot be written."""
    from ..errors import OutputError
    from ..lab.atomic import check_writable

    if out.is_dir():
        raise AssignmentError(f"--out {out} is a folder; give the zip's file name, e.g. {out / KIT}")
    if out.exists() and not is_kit(out):
        raise AssignmentError(f"--out {out} exists and is not a student kit; it is left as it is: give another --out")
    try:
        check_writable(out, "give another --out")
    except OutputError as e:
        raise AssignmentError(str(e)) from None
    return out


def add_parser(ssub) -> None:
    """The `assignments kit` subcommand."""
    sk = ssub.add_parser("kit", help="what students receive: the student notebooks and the package's wheel, one zip",
                         description="write the student kit: the student notebooks, the package as a wheel and the "
                                     "reproduction notebook assignment 4 runs, without any assignment source")
    sk.add_argument("--out", default=DIST_DIR / KIT, help=f"the zip (default dist/assignments/{KIT})")
    sk.set_defaults(run=command)


def command(a) -> int:
    from .grading import signals_interrupt

    out = nonempty_path(a.out, "--out")  # '' would be the working folder
    with signals_interrupt():  # SIGTERM, SIGHUP as Ctrl-C: the temporary copy, pip's build, the half-written zip gone
        print(f"wrote {write_kit(out)}")
    return 0
