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
    page = (html / "reproduce" / "benchmark.html").read_text()
    assert "MAS-MetaCL-λ" in page and "Trained now, on this machine" in page and "Traceback" not in page
    assert "No results yet" in (html / "reproduce" / "cub-K10.html").read_text()
    assert (html / "_sources" / "chapters" / "03_dynamic_balance.ipynb").exists()  # .ipynb download
    _assignment_pages_hide_solutions(html)
    sys.path.insert(0, str(ROOT / "data_scripts"))
    from check_offline_book import static_check
    assert static_check(html) == []


def _assignment_pages_hide_solutions(html: Path):
    import re
    from html import unescape

    from metacl_lite.assignments import list_assignments, secret_lines

    assert "Course assignments" in (html / "assignments" / "index.html").read_text()
    for name in list_assignments():
        page = html / "assignments" / f"{name}.html"
        text = unescape(re.sub(r"<[^>]+>", "", page.read_text()))  # drop the syntax-highlighting spans
        assert 'grader.check("q1")' in text, name
        leaked = [s for s in secret_lines(name) if s in text]
        assert not leaked, (name, leaked)
        assert (html / "_sources" / "assignments" / f"{name}.ipynb").exists(), name  # the download button


def _mini_book(tmp: Path, page_body: str) -> Path:
    """The book's own configuration with a one-page table of contents."""
    book = tmp / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("_build", "chapters", "reproduce"))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: page\n")
    (book / "page.md").write_text((ROOT / "book/chapters/06_metrics.md").read_text().split("# 6.")[0]
                                  + "# A page\n\n" + page_body)
    return book


def test_failing_cell_fails_the_build(tmp_path):
    ok = _build(_mini_book(tmp_path / "a", "```{code-cell} ipython3\nx = 1 + 1\n```\n"), tmp_path / "a")
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    bad = _build(_mini_book(tmp_path / "b", "```{code-cell} ipython3\nraise RuntimeError('boom')\n```\n"),
                 tmp_path / "b")
    assert bad.returncode != 0
