"""Offer the whole book as one PDF from every page, where one was built (`make pdf`, before `make book`); and in the
PDF, chapter titles without the numbers the pages type ("7. A verdict on every claim"), as LaTeX numbers chapters.

`make pdf` typesets the book with Jupyter Book's pdflatex builder (xelatex, book/_config.yml's `latex`) into
<build>/latex/book.pdf. An HTML build that finds that file beside its own output copies it to PDF_NAME at the top of
the site and links it from every page's footer, after the notebooks' zip; an HTML build without it shows no link (so
a page never links a file the site does not have). The publishing workflow runs `make pdf`, then `make book`.
"""
import html
import re
import shutil
from pathlib import Path

from docutils import nodes

PDF_NAME = "metacl-lite-book.pdf"
TYPED_NUMBER = re.compile(r"^\d+\.\s+")  # "7. " before a page's title


def built_pdf(app) -> Path:
    """Where `make pdf` leaves the book's PDF for this build folder."""
    return Path(app.outdir).parent / "latex" / "book.pdf"


def _inited(app):
    app.book_pdf = built_pdf(app) if app.builder.format == "html" and built_pdf(app).is_file() else None


def _pdf_state(app) -> tuple | None:
    pdf = built_pdf(app)
    return (pdf.stat().st_size, pdf.stat().st_mtime_ns) if pdf.is_file() else None


def _outdated(app, env, added, changed, removed):
    """Every page again where the PDF came, went or changed since the last build: the pages' footers say whether
    there is one (Sphinx would otherwise rewrite only the pages whose sources changed)."""
    state = _pdf_state(app)
    if getattr(env, "book_pdf_state", None) == state:
        return []
    env.book_pdf_state = state
    return sorted(env.found_docs)


def _footer_link(app, pagename, templatename, context, doctree):
    if not getattr(app, "book_pdf", None):
        return
    href = html.escape(context["pathto"](PDF_NAME, 1))
    link = f'<p class="pdf-download"><a href="{href}" download>Download the whole book as one PDF</a></p>'
    context["theme_extra_footer"] = (context.get("theme_extra_footer") or "") + link


def _copy(app, exception):
    if exception is None and getattr(app, "book_pdf", None):
        shutil.copyfile(app.book_pdf, Path(app.outdir) / PDF_NAME)


def _untyped_titles(app, doctree, docname):
    """LaTeX only: "CHAPTER SEVEN / 7. A verdict on every claim" would say the number twice."""
    if app.builder.format != "latex":
        return
    for title in doctree.findall(nodes.title):
        if isinstance(title.parent, nodes.section) and title.children and isinstance(title[0], nodes.Text) \
                and TYPED_NUMBER.match(title[0].astext()):
            title[0] = nodes.Text(TYPED_NUMBER.sub("", title[0].astext(), count=1))


def setup(app):
    app.connect("doctree-resolved", _untyped_titles)
    app.connect("builder-inited", _inited)
    app.connect("env-get-outdated", _outdated)
    app.connect("html-page-context", _footer_link, priority=650)  # after ipynb_download's zip link (600)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
