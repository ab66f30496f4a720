"""Figure and table numbers that name their page: "Fig. 6.2" is the second captioned figure of chapter 6.

Sphinx numbers captioned figures and tables (numfig, on in Jupyter Book) either per section of a numbered toctree or,
as here, where the table of contents is not numbered (the page titles carry their own numbers: "6. Metrics"), in one
sequence over the whole book: Fig. 23 on chapter 6, and Fig. 1 in a single-page build of the same chapter. This
renumbers each page's figures, tables and code blocks from 1 and puts the number of the page's title in front
("8.1. Reproduction: ..." gives Table 8.1.1); a page whose title has no number keeps plain 1, 2, ... So a number is
the same in the whole book and in a single-page build, and cannot be mistaken for the paper's own "Fig. 3".

A glued table (a DataFrame or Markdown pasted with `{glue:figure}`) is a figure to Sphinx. Give it the class
`table` (`:figclass: table`) and it is numbered as a table ("Table 7.1", in the table sequence), with its caption
above it, as a reader expects of a table.
"""
import copy
import re

from docutils import nodes
from sphinx.writers.html5 import HTML5Translator

TITLE_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)*)\.\s")


class table_figure(nodes.figure):  # noqa: N801 (a docutils node class)
    """A figure holding a table: numbered in the "table" sequence, caption first."""


def page_number(title: str) -> tuple[int, ...]:
    """(8, 1) for "8.1. Reproduction: ...", () for a title without a leading number."""
    m = TITLE_NUMBER.match(title)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def renumber(fignumbers: dict, titles: dict) -> dict:
    """Per page and figure type, 1, 2, ... in the order Sphinx numbered them, after the page title's number."""
    out = {}
    for docname, by_type in fignumbers.items():
        prefix = page_number(titles.get(docname, ""))
        out[docname] = {figtype: {fid: (*prefix, i) for i, fid in
                                  enumerate(sorted(ids, key=lambda f, ids=ids: ids[f]), 1)}
                        for figtype, ids in by_type.items()}
    return out


def _tables_as_tables(app, doctree):
    for fig in list(doctree.findall(nodes.figure)):
        if "table" in fig["classes"] and not isinstance(fig, table_figure):
            new = table_figure(fig.rawsource, **copy.deepcopy(fig.attributes))
            captions = [c for c in fig.children if isinstance(c, (nodes.caption, nodes.legend))]
            new.extend(captions + [c for c in fig.children if c not in captions])  # caption above the table
            new.source, new.line = fig.source, fig.line
            fig.replace_self(new)
            for i in new["ids"]:  # :numref: finds its target here
                doctree.ids[i] = new


def _before_sphinx(app, env):
    # The toctree collector compares what it assigns with env.toc_fignumbers to find the pages to rewrite: give it
    # its own numbers of the last build, not ours, so that it does not rewrite every page every time.
    env.toc_fignumbers = getattr(env, "book_numbers_sphinx", {})
    return []


def _after_sphinx(app, env):
    env.book_numbers_sphinx = env.toc_fignumbers
    titles = {d: t.astext() for d, t in env.titles.items()}
    ours = renumber(env.toc_fignumbers, titles)
    old = getattr(env, "book_numbers_ours", {})
    env.toc_fignumbers = env.book_numbers_ours = ours
    return [d for d in ours.keys() | old.keys() if ours.get(d) != old.get(d)]


def _visit(self, node):
    HTML5Translator.visit_figure(self, node)


def _depart(self, node):
    HTML5Translator.depart_figure(self, node)


def setup(app):
    app.add_enumerable_node(table_figure, "table", html=(_visit, _depart))
    app.connect("doctree-read", _tables_as_tables)
    app.connect("env-get-updated", _before_sphinx, priority=400)  # the toctree collector runs at 500
    app.connect("env-get-updated", _after_sphinx, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
