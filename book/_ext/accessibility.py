"""What a screen reader, a keyboard and a phone need from the theme's pages (WCAG 2.1 AA, checked with axe-core by
data_scripts/check_book_browser.py at 1280, 390 and 320 px).

Each page's HTML, as the theme writes it, gets (`accessible`):

- a name for every toggle of the sidebar's collapsible sections (a <summary> holding only an icon: axe `summary-name`);
- the search field's own words as its name ("Search Ctrl+K"; its label said "Search": `label-content-name-mismatch`),
  the colour-mode button's icons hidden from screen readers, without the titles that contradicted its label, and
  MyST-NB's hidden-code toggles named by their own words ("Show code cell source"), not "Toggle hidden content";
- the bibliography's entries as list items of its list (sphinxcontrib-bibtex marks them `doc-biblioentry`, a
  deprecated role that its `list` does not take: `aria-deprecated-role`, `aria-required-children`).

book/_static/accessibility.js names the widgets' sliders after their labels, as they render.
book/_static/accessibility.css adds link colours that keep a 4.5:1 contrast on the theme's shaded backgrounds, a
visible focus ring, and inline code and commands that wrap on a phone instead of widening the page.
"""
import re
from pathlib import Path

#: (pattern, replacement) applied to every HTML page, in order
FIXES = (
    (re.compile(r"<summary>(<span class=\"toctree-toggle\")"),
     r'<summary aria-label="Show or hide the pages of this section">\1'),
    (re.compile(r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="Search"'),
     r'\1 aria-label="Search Ctrl+K"'),
    (re.compile(r'<i class="theme-switch ([^"]*)"([^>]*?) title="[^"]*"'),
     r'<i aria-hidden="true" class="theme-switch \1"\2'),
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>"),
    (re.compile(r' role="doc-biblioentry"'), ' role="listitem"'),
)


def accessible(html: str) -> str:
    """A page's HTML with `FIXES` applied."""
    for pattern, replacement in FIXES:
        html = pattern.sub(replacement, html)
    return html


def _rewrite(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = accessible(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _rewrite)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
