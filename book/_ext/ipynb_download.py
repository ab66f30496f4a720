"""Offer every executed MyST notebook as a downloadable .ipynb (the book theme's download button reads
`ipynb_source`): copy MyST-NB's executed notebooks into the HTML output's _sources folder."""
import shutil
from pathlib import Path


def _executed_dir(app) -> Path:
    return Path(app.outdir).parent / "jupyter_execute"


def _page_context(app, pagename, templatename, context, doctree):
    if (_executed_dir(app) / f"{pagename}.ipynb").exists():
        context["ipynb_source"] = f"{pagename}.ipynb"


def _copy(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    src = _executed_dir(app)
    for nb in src.rglob("*.ipynb"):
        dest = Path(app.outdir) / "_sources" / nb.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, dest)


def setup(app):
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
