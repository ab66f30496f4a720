"""The book builds with warnings as errors and executed cells; a failing cell fails the build."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JB = str(Path(sys.executable).parent / "jupyter-book")


def _build(src: Path, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([JB, "build", str(src), "--path-output", str(tmp / "out"), "--warningiserror",
                           "--builder", "html"], capture_output=True, text=True)


def test_book_builds(tmp_path):
    r = _build(ROOT / "book", tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    html = tmp_path / "out" / "_build" / "html"
    assert (html / "index.html").exists()
    page = (html / "reproduce" / "pmnist_k20.html").read_text()
    assert "MAS-MetaCL-λ" in page and "Traceback" not in page


def test_failing_cell_fails_the_build(tmp_path):
    book = tmp_path / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("_build"))
    page = book / "reproduce" / "pmnist_k20.md"
    page.write_text(page.read_text() + "\n```{code-cell} ipython3\nraise RuntimeError('boom')\n```\n")
    r = _build(book, tmp_path)
    assert r.returncode != 0
