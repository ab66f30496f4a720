"""Offer every executed MyST notebook as a downloadable .ipynb, one by one and all together.

- One by one: the book theme's download button reads `ipynb_source`; MyST-NB's executed notebooks are written into
  the HTML output's _sources folder.
- All together: NOTEBOOKS_ZIP, at the top of the HTML output, holds every page of the book as an executed .ipynb
  (outputs included; the assignments as their student versions, not executed), under the page's own path, with a
  README. Every page's footer links it. It is written when the build finishes, from the same notebooks, so it
  holds what the pages show. A single-page build holds that page only.

Most of what a page shows is glued (`myst_nb.glue(..., display=False)`): MyST-NB moves those values out of the
executed notebook into `<page>.glue.json` and pastes them where the text says `{glue:md}`, `{glue:text}` or
`{glue:figure}`, which Jupyter cannot do. So the notebooks offered here are `reader_notebook`s: every glue role and
directive of a markdown cell replaced by the value it pastes (a glued figure as an image attached to the cell,
with its caption), the `{table}` fences around glued tables turned into the caption above the table, and `{doc}`
links pointing at the other notebooks. The other MyST roles ({cite:p}, {numref}, ...) stay as written.
"""
import base64
import html
import json
import posixpath
import re
import zipfile
from pathlib import Path

NOTEBOOKS_ZIP = "metacl-lite-notebooks.zip"
FOLDER = "metacl-lite-book"  # the zip's one top folder
README = """These are the pages of the book "{title}" as executed Jupyter notebooks, with the outputs the book shows.
{info}

The values, tables and figures a page computes stand in its text, as on the book's pages (each figure is an image
attached to its cell). They are this build's: running a notebook again recomputes them in its code cells, but only a
book build pastes them into the text. Other MyST markup (citations, cross-references) stays as the source writes it.

To run them again you need the metacl-lite package and its results files: clone its repository, check out the
commit above, install it (pip install -e ".[book]") and open the notebooks from its book/ folder, where the pages
find the results/ folder they read. The pages under assignments/ are the student versions: run them after
`make assignments`.
"""


#: A glue directive of a markdown cell: ```{glue:KIND} KEY, its options (:name: value) and body, to the closing
#: fence (``` or :::, as long as the opening one).
GLUE_DIRECTIVE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glue(?::(?P<kind>\w*))?\}[ \t]+(?P<key>\S+)[ \t]*\n"
                            r"(?P<body>.*?)^(?P=fence)[ \t]*$\n?", re.M | re.S)
#: A glue role: {glue:KIND}`KEY` ({glue:text}`KEY:FORMAT`).
GLUE_ROLE = re.compile(r"\{glue(?::(?P<kind>\w*))?\}`(?P<key>[^`]+)`")
#: A table fence: :::{table} CAPTION, its options, the table, the closing fence.
TABLE = re.compile(r"^(?P<fence>:{3,}|`{3,})\{table\}[ \t]*(?P<caption>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                   re.M | re.S)
#: A {doc} link: {doc}`TEXT <TARGET>` or {doc}`TARGET`.
DOC = re.compile(r"\{doc\}`(?:(?P<text>[^`<]*?)\s*<(?P<target>[^`>]+)>|(?P<bare>[^`<>]+))`")
OPTION = re.compile(r"^:(?P<name>[\w-]+):[ \t]*(?P<value>.*)$")
IMAGE_TYPES = (("image/png", "png"), ("image/jpeg", "jpg"), ("image/svg+xml", "svg"))


def _options(body: str) -> tuple[dict, str]:
    """A directive body's leading options (:name: value) and the rest (a figure's caption)."""
    lines, opts = body.split("\n"), {}
    while lines and (mo := OPTION.match(lines[0])):
        opts[mo.group("name")] = mo.group("value").strip()
        lines.pop(0)
    return opts, "\n".join(lines).strip()


def _plain(data: dict, fmt: str = "") -> str:
    """A glued value's text/plain as {glue:text} pastes it (quotes removed, FORMAT applied)."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(data.get("text/plain", ""), fmt)


def _markdown(data: dict) -> str:
    return data["text/markdown"].strip() if "text/markdown" in data else _plain(data)


def _image(data: dict, key: str, attachments: dict, alt: str = "") -> str | None:
    """Attach a glued image to the cell (`attachments`, nbformat's) and return the Markdown that shows it; None
    where the value has no image."""
    for mime, ext in IMAGE_TYPES:
        if mime in data:
            name = f"{key}.{ext}"
            value = data[mime]
            if mime == "image/svg+xml" and not isinstance(value, str):
                value = "".join(value)
            attachments[name] = {mime: value if mime != "image/svg+xml" else
                                 base64.b64encode(value.encode()).decode()}
            alt = re.sub(r"[\[\]\n]", " ", alt or key)
            return f"![{alt}](attachment:{name})"
    return None


def _doc_link(mo: re.Match, page: str, titles: dict) -> str:
    target = (mo.group("target") or mo.group("bare")).strip()
    doc = (posixpath.normpath(posixpath.join(posixpath.dirname(page), target)) if not target.startswith("/")
           else target.lstrip("/"))
    text = mo.group("text") or titles.get(doc) or target
    href = posixpath.relpath(doc, posixpath.dirname(page) or ".") + ".ipynb"
    return f"[{text}]({href})"


def paste(source: str, glue: dict, page: str = "", titles: dict | None = None) -> tuple[str, dict]:
    """A markdown cell's source with every glue directive and role replaced by the value it pastes (`glue`: key ->
    the glued output's data, its mime types without MyST-NB's prefix), the {table} fences around them turned into
    the caption above the table, and {doc} links made links to the other notebooks (`page`: this page's path in the
    book, without suffix; `titles`: page -> title, for a bare {doc}). Returns the source and the attachments (file
    name -> {mime: base64}) its glued figures need. A key the page did not glue is left as written."""
    attachments: dict = {}

    def directive(mo: re.Match) -> str:
        key, kind = mo.group("key"), mo.group("kind") or "any"
        if key not in glue:
            return mo.group(0)
        data = glue[key]
        opts, caption = _options(mo.group("body"))
        if kind in ("figure", "any"):
            shown = _image(data, key, attachments, opts.get("alt", "")) or _markdown(data)
            return shown + ("\n\n" + caption if caption and kind == "figure" else "") + "\n"
        if kind == "math":
            return "$$\n" + _plain(data).strip("$") + "\n$$\n"
        return _markdown(data) + "\n"

    def role(mo: re.Match) -> str:
        kind, text = mo.group("kind") or "any", mo.group("key")
        key, _, fmt = text.partition(":") if kind == "text" else (text.split(":", 1)[0], "", "")
        if key not in glue:
            return mo.group(0)
        data = glue[key]
        return _plain(data, fmt) if kind == "text" or "text/markdown" not in data else _markdown(data)

    def table(mo: re.Match) -> str:
        _, body = _options(mo.group("body"))
        caption = mo.group("caption").strip()
        return (caption + "\n\n" if caption else "") + body.strip() + "\n"

    out = GLUE_DIRECTIVE.sub(directive, source)
    out = GLUE_ROLE.sub(role, out)
    out = TABLE.sub(table, out)
    out = DOC.sub(lambda mo: _doc_link(mo, page, titles or {}), out)
    return out, attachments


def glued_values(glue_file: Path) -> dict:
    """A page's glued values (MyST-NB's `<page>.glue.json`; none where it has none), as `glued_values_from`."""
    return glued_values_from(json.loads(glue_file.read_text())) if glue_file.exists() else {}


def glued_values_from(doc: dict) -> dict:
    """MyST-NB's glue file (key -> the glued output) as key -> data, the mime types without its prefix."""
    out = {}
    for key, output in doc.items():
        prefix = (output.get("metadata") or {}).get("scrapbook", {}).get("mime_prefix", "")
        out[key] = {m.removeprefix(prefix): v for m, v in (output.get("data") or {}).items()}
    return out


def reader_notebook(nb: dict, glue: dict, page: str = "", titles: dict | None = None) -> dict:
    """The executed notebook `nb` as a reader downloads it: `paste` applied to every markdown cell, its glued figures
    attached to the cell."""
    nb = json.loads(json.dumps(nb))  # a copy
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        new, attachments = paste(src, glue, page, titles)
        cell["source"] = new
        if attachments:
            cell["attachments"] = {**cell.get("attachments", {}), **attachments}
    return nb


def _reader_text(app, nb: Path) -> str:
    """The executed notebook `nb` as a reader downloads it (`reader_notebook`), as the text of its file."""
    page = nb.relative_to(_executed_dir(app)).with_suffix("").as_posix()
    glue = glued_values(nb.with_name(nb.stem + ".glue.json"))
    titles = {doc: t.astext() for doc, t in getattr(app.env, "titles", {}).items()}
    nb_doc = reader_notebook(json.loads(nb.read_text()), glue, page, titles)
    return json.dumps(nb_doc, ensure_ascii=False, indent=1) + "\n"


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


def write_zip(app, dest: Path, texts: dict | None = None) -> int:
    """Write the notebooks zip to `dest` (`texts`: executed notebook -> its `_reader_text`, where already made);
    return how many notebooks it holds."""
    pages = notebooks(app)
    info = getattr(app, "book_build_info", "")
    tmp = dest.with_suffix(".zip.part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{FOLDER}/README.txt", README.format(title=app.config.html_title or app.config.project,
                                                          info=info))
        for nb, rel in pages:
            z.writestr(f"{FOLDER}/{rel}", (texts or {}).get(nb) or _reader_text(app, nb))
    tmp.replace(dest)
    return len(pages)


def _copy(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    src = _executed_dir(app)
    texts = {nb: _reader_text(app, nb) for nb in src.rglob("*.ipynb")}  # each made once: the page's and the zip's
    for nb, text in texts.items():
        dest = Path(app.outdir) / "_sources" / nb.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    write_zip(app, Path(app.outdir) / NOTEBOOKS_ZIP, texts)


def setup(app):
    app.connect("html-page-context", _page_context)
    app.connect("html-page-context", _footer_link, priority=600)  # after build_info's version line
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
