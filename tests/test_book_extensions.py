"""The book's own Sphinx extensions (book/_ext), on a two-page Sphinx project built in-process in a few seconds:
figure and table numbers per page after the page title's number, a glued table numbered as a table with its caption
above, the version, commit and date in every footer, and the zip of every executed notebook linked from it, each
notebook with the values and figures its page glues pasted into its text."""
import base64
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"
sys.path.insert(0, str(EXT))
import book_numbers  # noqa: E402
import build_info  # noqa: E402
import ipynb_download  # noqa: E402

CONF = f"""
import sys
sys.path.insert(0, {str(EXT)!r})
extensions = ["book_numbers", "build_info", "ipynb_download"]
project = "A test book"
html_theme = "sphinx_book_theme"
numfig = True
numfig_format = {{"figure": "Fig. %s", "table": "Table %s", "code-block": "Listing %s", "section": "Section %s"}}
"""
FIGURE = """
.. figure:: dot.png
   :name: {name}
   :alt: A grey box{figclass}

   {caption}
"""
CHAPTER = ("6. Metrics: ACC, BT, FA\n=======================\n\n.. toctree::\n\n   appendix\n"
           + FIGURE.format(name="fig-one", figclass="", caption="The first figure.")
           + FIGURE.format(name="tbl-glued", figclass="\n   :figclass: table", caption="A glued table.")
           + "\n.. table:: A real table.\n   :name: tbl-real\n\n   = =\n   a b\n   = =\n   1 2\n   = =\n"
           + FIGURE.format(name="fig-two", figclass="", caption="The second figure.")
           + "\nSee :numref:`fig-two` and :numref:`tbl-glued`.\n")
APPENDIX = "Running this book\n=================\n" + FIGURE.format(name="fig-run", figclass="", caption="Runs.")


#: A page's executed notebook as MyST-NB leaves it: the glued values are not in its cells but in <page>.glue.json.
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n a tiny image").decode()
MARKDOWN = """# 6. Metrics

The verdict holds for {glue:text}`n_held` of {glue:text}`n_all` methods, BT {glue:text}`bt:.2f` ({glue:md}`where`).

```{glue:md} findings
:format: myst
```

:::{table} ACC per method. {glue:md}`caption`
:name: tab-acc

```{glue:md} table
:format: myst
```
:::

```{glue:figure} fig_curves
:alt: A line chart [of accuracy]
:name: fig-curves

The curves of {glue:md}`where`, as in {doc}`chapter 8 <../chapters/08_analysis>`.
```

See {doc}`appendix` and {glue:text}`never_glued`.
"""
NOTEBOOK = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": MARKDOWN},
                      {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "glue('n_held', 2)",
                       "outputs": []}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
PREFIX = "application/papermill.record/"


def _glued(name, data):
    return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name, "mime_prefix": PREFIX}},
            "data": {PREFIX + k: v for k, v in data.items()}}


GLUE_FILE = {k: _glued(k, v) for k, v in {
    "n_held": {"text/plain": "2"}, "n_all": {"text/plain": "3"}, "bt": {"text/plain": "-1.2345"},
    "where": {"text/plain": "<IPython.core.display.Markdown object>", "text/markdown": "results/`pmnist-K20.json`"},
    "findings": {"text/plain": "<Markdown>", "text/markdown": "- **Holds:** claim 5.\n- **Refuted:** claim 2a.\n"},
    "caption": {"text/markdown": "Permuted MNIST, K = 20."},
    "table": {"text/markdown": "| Method | ACC |\n|:--|--:|\n| MAS | 51.2 |"},
    "fig_curves": {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": PNG}}.items()}


def test_a_notebook_for_readers_has_every_glued_value_and_figure_in_its_text():
    glue = ipynb_download.glued_values_from(GLUE_FILE)
    nb = ipynb_download.reader_notebook(NOTEBOOK, glue, page="chapters/06_metrics")
    cell = nb["cells"][0]
    text = cell["source"]
    assert "The verdict holds for 2 of 3 methods, BT -1.23 (results/`pmnist-K20.json`)." in text
    assert "- **Holds:** claim 5.\n- **Refuted:** claim 2a." in text
    # a table fence becomes its caption above the table; a figure an attached image with its caption
    assert "ACC per method. Permuted MNIST, K = 20.\n\n| Method | ACC |\n|:--|--:|\n| MAS | 51.2 |" in text
    assert "![A line chart  of accuracy ](attachment:fig_curves.png)\n\nThe curves of results/`pmnist-K20.json`" in text
    assert cell["attachments"] == {"fig_curves.png": {"image/png": PNG}}
    # links to the other pages point at their notebooks; a key the page never glued stays as written
    assert "[chapter 8](08_analysis.ipynb)" in text and "[appendix](appendix.ipynb)" in text
    assert "{glue:text}`never_glued`" in text
    assert "{glue" not in text.replace("{glue:text}`never_glued`", "") and "{table}" not in text
    assert ":name:" not in text and ":alt:" not in text
    assert nb["cells"][1] == NOTEBOOK["cells"][1] and NOTEBOOK["cells"][0]["source"] == MARKDOWN  # a copy


def test_the_downloads_hold_the_pasted_notebooks(built):
    with zipfile.ZipFile(built / "metacl-lite-notebooks.zip") as z:
        zipped = json.loads(z.read("metacl-lite-book/index.ipynb"))
    single = json.loads((built / "_sources" / "index.ipynb").read_text())
    for nb in (zipped, single):
        text = nb["cells"][0]["source"]
        assert "holds for 2 of 3 methods" in text and "{glue:md}" not in text
        assert nb["cells"][0]["attachments"]["fig_curves.png"]["image/png"] == PNG
        assert "See [Running this book](appendix.ipynb)" in text  # a bare link takes the page's title


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from sphinx.application import Sphinx

    tmp = tmp_path_factory.mktemp("ext")
    src, out = tmp / "src", tmp / "_build" / "html"
    src.mkdir()
    (src / "conf.py").write_text(CONF)
    (src / "index.rst").write_text(CHAPTER)
    (src / "appendix.rst").write_text(APPENDIX)
    (src / "dot.png").write_bytes(b"")
    executed = tmp / "_build" / "jupyter_execute"  # where MyST-NB leaves the executed notebooks
    executed.mkdir(parents=True)
    (executed / "index.ipynb").write_text(json.dumps(NOTEBOOK))
    (executed / "index.glue.json").write_text(json.dumps(GLUE_FILE))  # what MyST-NB keeps of the page's glue
    (executed / "stale.ipynb").write_text("{}")  # a page this book no longer has
    app = Sphinx(str(src), str(src), str(out), str(tmp / "doctrees"), "html", status=None, warning=None,
                 freshenv=True)
    app.build()
    return out


def _numbers(page: str) -> list[str]:
    return re.findall(r'<span class="caption-number">([^<]*?)\s*</span>', page)


def test_figures_and_tables_are_numbered_per_page_after_the_title_number(built):
    chapter = (built / "index.html").read_text()
    assert _numbers(chapter) == ["Fig. 6.1", "Table 6.1", "Table 6.2", "Fig. 6.2"]
    assert ">Fig. 6.2<" in chapter and ">Table 6.1<" in chapter  # :numref: uses the same numbers
    # A page whose title has no number counts from 1; without book_numbers it would be Fig. 3 of one sequence.
    assert _numbers((built / "appendix.html").read_text()) == ["Fig. 1"]


def test_a_figure_of_class_table_has_its_caption_above(built):
    chapter = (built / "index.html").read_text()
    glued = chapter[chapter.index('id="tbl-glued"'):]
    assert glued.index("<figcaption") < glued.index("<img")
    one = chapter[chapter.index('id="fig-one"'):]
    assert one.index("<img") < one.index("<figcaption")  # an ordinary figure keeps its caption below


def test_page_number_reads_the_title():
    assert book_numbers.page_number("8.1. Reproduction: Permuted MNIST, K = 50") == (8, 1)
    assert book_numbers.page_number("6. Metrics: ACC, BT, FA") == (6,)
    assert book_numbers.page_number("Running this book") == ()
    assert book_numbers.page_number("2020 results") == ()  # a year is not a chapter number


def test_every_footer_has_version_commit_date_and_the_notebooks_zip(built):
    version = build_info.version()
    for page in ("index.html", "appendix.html"):
        footer = (built / page).read_text().split('<div class="extra_footer">')[1].split("</div>")[0]
        info = re.search(r'<p class="build-info">([^<]*)</p>', footer).group(1)
        # This book's folder is no git repository: no commit (the real book's footer has one, see below).
        assert re.fullmatch(f"metacl-lite {re.escape(version)} · built \\d{{4}}-\\d\\d-\\d\\d", info), info
        assert 'href="metacl-lite-notebooks.zip"' in footer
    with zipfile.ZipFile(built / "metacl-lite-notebooks.zip") as z:
        assert sorted(z.namelist()) == ["metacl-lite-book/README.txt", "metacl-lite-book/index.ipynb"]
        assert "commit" in z.read("metacl-lite-book/README.txt").decode()
    assert version != "(version unknown)"


def test_build_info_names_the_commit_of_the_books_repository():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    assert head and build_info.git_commit(ROOT / "book") == head + (" + local changes" if dirty else "")
    assert f"· commit {build_info.git_commit(ROOT / 'book')} ·" in build_info.footer_text(ROOT / "book")


def test_build_info_without_git(tmp_path, monkeypatch):
    assert build_info.git_commit(tmp_path) is None  # not a repository
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert build_info.git_commit(ROOT) is None
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert build_info.footer_text(ROOT) == f"metacl-lite {build_info.version()} · built 1970-01-01"
