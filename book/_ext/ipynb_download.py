"""Offer every executed MyST notebook as a downloadable .ipynb, one by one and all together.

- One by one: the book theme's download button reads `ipynb_source`; MyST-NB's executed notebooks are copied into
  the HTML output's _sources folder.
- All together: NOTEBOOKS_ZIP, at the top of the HTML output, holds every page of the book as an executed .ipynb
  (outputs included; the assignments as their student versions, not executed), under the page's own path, with a
  README. Every page's footer links it. It is written when the build finishes, from the same notebooks, so it
  holds what the pages show. A single-page build holds that page only.
"""
import html
import shutil
import zipfile
from pathlib import Path

NOTEBOOKS_ZIP = "metacl-lite-notebooks.zip"
FOLDER = "metacl-lite-book"  # the zip's one top folder
README = """These are the pages of the book "{title}" as executed Jupyter notebooks, with the outputs the book shows.
{info}

To run them again you need the metacl-lite package and its results files: clone its repository, check out the
commit above, install it (pip install -e ".[book]") and open the notebooks from its book/ folder, where the pages
find the results/ folder they read. The pages under assignments/ are the student versions: run them after
`make assignments`.
"""


def _executed_dir(app) -> Path:
    return Path(app.outdir).parent / "jupyter_execute"


def _page_context(app, pagename, templatename, context, doctree):
    if (_executed_dir(app) / f"{pagename}.ipynb").exists():
        context["ipynb_source"] = f"{pagename}.ipynb"


def _footer_link(app, pagename, templatename, context, doctree):
    href = html.escape(context["pathto"](NOTEBOOKS_ZIP, 1))
    link = (f'<p class="notebooks-download"><a href="{href}" download>Download every page as an executed '
            f"notebook (.zip)</a></p>")
    context["theme_extra_footer"] = (context.get("theme_extra_footer") or "") + link


def notebooks(app) -> list[tuple[Path, str]]:
    """(executed notebook, its path relative to the book) for every page of this build, in page order."""
    src = _executed_dir(app)
    found = [(src / f"{doc}.ipynb", f"{doc}.ipynb") for doc in sorted(app.env.found_docs)]
    return [(nb, rel) for nb, rel in found if nb.exists()]


def write_zip(app, dest: Path) -> int:
    """Write the notebooks zip to `dest`; return how many notebooks it holds."""
    pages = notebooks(app)
    info = getattr(app, "book_build_info", "")
    tmp = dest.with_suffix(".zip.part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{FOLDER}/README.txt", README.format(title=app.config.html_title or app.config.project,
                                                          info=info))
        for nb, rel in pages:
            z.write(nb, f"{FOLDER}/{rel}")
    tmp.replace(dest)
    return len(pages)


def _copy(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    src = _executed_dir(app)
    for nb in src.rglob("*.ipynb"):
        dest = Path(app.outdir) / "_sources" / nb.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, dest)
    write_zip(app, Path(app.outdir) / NOTEBOOKS_ZIP)


def setup(app):
    app.connect("html-page-context", _page_context)
    app.connect("html-page-context", _footer_link, priority=600)  # after build_info's version line
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
