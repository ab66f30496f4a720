"""The whole book as one PDF (issue 42): `make pdf`'s build (Jupyter Book's pdflatex builder, xelatex) of the book
the test session builds, from the same execution cache, has every page of the table of contents, Table 1's numbers
(ours and the paper's, as the README's generated block has them), the claims' verdicts, the bibliography, and no
unresolved reference ("??"); an HTML build that finds the PDF offers it on every page, and one without it does not."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import pdf_download as P  # noqa: E402
from conftest import build_book  # noqa: E402


def pdf_text(pdf: Path) -> str:
    """The PDF's text, whitespace made single spaces and typographic apostrophes plain (pdftotext, poppler-utils:
    `make system-deps` installs it)."""
    r = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True, check=True)
    return re.sub(r"\s+", " ", r.stdout).replace("\u2019", "'")


def toc_root() -> str:
    return yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())["root"]


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            files += [chapter["file"]] + [s["file"] for s in chapter.get("sections", [])]
    return files


def page_title(page: str) -> str:
    """A page's title, its typed number ("7. ") left out: the PDF numbers chapters itself. The root page opens the
    PDF without its title (sphinx-jupyterbook-latex): there, the first words of its text."""
    if page == toc_root():
        text = (ROOT / "book" / f"{page}.md").read_text().split("\n---\n", 1)[-1]
        first = next(b for b in text.split("\n\n") if b.strip() and not b.strip().startswith(("#", "```")))
        return " ".join(re.sub(r"[*`]", "", first).split()[:6])
    md = ROOT / "book" / f"{page}.md"
    if md.exists():
        text = md.read_text().split("\n---\n", 1)[-1]
    else:  # the assignments are notebooks
        nb = json.loads((ROOT / "book" / f"{page}.ipynb").read_text())
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    title = re.search(r"^# (.+)$", text, re.M).group(1)
    return re.sub(r"^\d+\.\s+", "", title).replace("`", "")


def table_1_cells() -> list[str]:
    """The ACC cells of Table 1, ours and the paper's, from the README's block generated from results/pmnist-K20.json."""
    block = (ROOT / "README.md").read_text().split("<!-- BEGIN table results/pmnist-K20.json -->\n")[1]
    rows = [r.split("|")[1:-1] for r in block.split("<!-- END table -->")[0].strip().splitlines()[2:]]
    assert len(rows) == 12
    return [c.strip() for r in rows for c in r[2:4]]


def headline() -> list[tuple[str, str, str]]:
    """(claim, verdict, mean) of the README's claims block, generated from the results as the intro's are; the mean
    with the minus sign the book prints."""
    block = (ROOT / "README.md").read_text().split("<!-- BEGIN claims pmnist -->\n")[1].split("<!-- END claims -->")[0]
    rows = [[c.strip() for c in r.split("|")[1:-1]] for r in block.strip().splitlines()[2:]]
    return [(r[0], r[2].strip("*"), re.sub(r"^-", "\u2212", r[6])) for r in rows]


@pytest.mark.slow
def test_the_book_is_one_pdf_with_every_page_table_1_the_verdicts_and_no_unresolved_reference(book_build):
    assert book_build.result.returncode == 0
    tmp = book_build.html.parents[2]  # <tmp>/out/_build/html: the book is <tmp>/book, its cache <tmp>/out/_build
    jb = str(Path(sys.executable).parent / "jupyter-book")
    r = subprocess.run([jb, "build", str(tmp / "book"), "--path-output", str(tmp / "out"), "--warningiserror",
                        "--keep-going", "--builder", "pdflatex"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "Executing notebook" not in r.stdout  # the pages' executed outputs are the HTML build's, from the cache
    text = pdf_text(tmp / "out" / "_build" / "latex" / "book.pdf")
    assert [p for p in toc_pages() if page_title(p) not in text] == []
    assert [c for c in table_1_cells() if c not in text] == []
    assert "??" not in text
    # each chapter's figures and tables numbered within it, as on its page (Fig. 7.1: the first figure of chapter 7)
    for n, page in enumerate(sorted((book_build.html / "chapters").glob("0*.html")), 1):
        shown = page.read_text()
        for kind in ("Fig.", "Table"):
            if f'<span class="caption-number">{kind} ' in shown:
                assert f"{kind} {n}.1: " in text, (page.name, kind)
    for claim, verdict, mean in headline():  # the verdicts, and the glued number behind each
        assert f"Claim {claim}," in text and verdict in text and mean in text, (claim, verdict, mean)
    assert "Learning Continually from Low-shot Data Stream" in text and "Overcoming catastrophic forgetting" in text


def test_table_1_cells_and_titles_are_read_as_the_pdf_shows_them():
    cells = table_1_cells()
    assert len(cells) == 24 and all(re.fullmatch(r"\d+\.\d ± \d+\.\d", c) for c in cells), cells
    titles = {p: page_title(p) for p in toc_pages()}
    assert all(t and not t[0].isdigit() for t in titles.values()), titles
    assert titles[toc_root()] == "This book derives, checks and reproduces"
    claims = headline()
    assert len(claims) >= 8 and {v for _, v, _ in claims} <= {"confirmed", "refuted", "inconclusive", "not run"}
    assert all(re.fullmatch(r"[+\u2212]\d+\.\d( pts|°)", m) for _, _, m in claims), claims
    assert len(titles) == len(set(titles.values()))  # each page found by its own title


MINI = """---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---

# A page

```{code-cell} ipython3
1 + 1
```
"""


def test_an_html_build_offers_the_pdf_where_one_was_built_and_no_link_otherwise(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    for folder in ("_ext", "_vendor"):
        shutil.copytree(ROOT / "book" / folder, book / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("_config.yml", "references.bib"):
        shutil.copy(ROOT / "book" / f, book)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (book / "intro.md").write_text(MINI)
    out = tmp_path / "out"
    r = build_book(book, out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    html = out / "_build" / "html"
    assert "pdf-download" not in (html / "intro.html").read_text() and not (html / P.PDF_NAME).exists()

    latex = out / "_build" / "latex"
    latex.mkdir()
    (latex / "book.pdf").write_bytes(b"%PDF-1.5 a stand-in\n")
    r = build_book(book, out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    page = (html / "intro.html").read_text()
    assert f'<p class="pdf-download"><a href="{P.PDF_NAME}" download>' in page
    assert (html / P.PDF_NAME).read_bytes() == b"%PDF-1.5 a stand-in\n"


def test_the_pdf_drops_the_typed_chapter_numbers_and_the_pages_keep_them():
    from types import SimpleNamespace

    from docutils import nodes

    def tree():
        doc = nodes.document(None, None)
        chapter = nodes.section("", nodes.title("", "7. A verdict on every claim"))
        chapter += nodes.section("", nodes.title("", "7.1 Summary"))  # a section's own number stays
        chapter += nodes.paragraph("", "7. Not a title.")
        doc += chapter
        return doc

    def titles(builder_format):
        doc = tree()
        P._untyped_titles(SimpleNamespace(builder=SimpleNamespace(format=builder_format)), doc, "index")
        return [n.astext() for n in doc.findall(nodes.title)] + [n.astext() for n in doc.findall(nodes.paragraph)]

    assert titles("latex") == ["A verdict on every claim", "7.1 Summary", "7. Not a title."]
    assert titles("html") == ["7. A verdict on every claim", "7.1 Summary", "7. Not a title."]


def test_make_pdf_installs_tex_with_the_system_packages_and_builds_the_book_with_latex():
    r = subprocess.run(["make", "-n", "pdf"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "bash data_scripts/system_deps.sh" in lines  # the step that installs Chromium
    build = [ln for ln in lines if "jupyter-book build book" in ln]
    assert build and build[-1].endswith("--warningiserror --keep-going --builder pdflatex")
    assert lines.index("bash data_scripts/system_deps.sh") < lines.index(build[-1])
    deps = (ROOT / "data_scripts" / "system_deps.sh").read_text()
    assert all(p in deps for p in ("texlive-xetex", "texlive-latex-extra", "latexmk", "fonts-freefont-otf",
                                   "poppler-utils"))
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert config["latex"]["latex_engine"] == "xelatex"
    assert config["latex"]["latex_documents"]["targetname"] == "book.tex"  # book/_build/latex/book.pdf
    assert all((ROOT / "book" / f).is_file() for f in config["sphinx"]["config"]["latex_additional_files"])
