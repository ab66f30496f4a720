"""How the book's pages write numbers and tables, and how a page glues a record: the one place of the pages'
number formatting (a difference with its unit and a real minus sign, a long time, a list of numbers), their Markdown
tables and `glue_record`. A page's records (`page_*.py`) are dicts keyed by the glue names the page's Markdown reads,
written out in full, so that `grep -rn <glue-name> metacl_lite book` finds both the page and the code."""
from __future__ import annotations

from ..report.tables import minus


def pts(x, unit: str = "points", fmt: str = "+.1f") -> str:
    """A difference with its unit and a real minus sign: "−0.8 pts", "+11.3°"; "–" for none."""
    if x is None or x != x:
        return "–"
    return minus(format(x, fmt)) + ("°" if unit == "degrees" else " pts")


def num(x, fmt: str = "+.2f") -> str:
    """A number with a real minus sign ("−0.84"); "–" for none."""
    return "–" if x is None or x != x else minus(format(x, fmt))


def hours(s: float) -> str:
    """A long time as a reader reads it: minutes under an hour (`timings.duration`), else hours ("4.2 h", "19 h")."""
    from ..report.timings import duration

    return duration(s) if s < 3600 else f"{s / 3600:.1f} h" if s < 36000 else f"{s / 3600:.0f} h"


def listing(items) -> str:
    """'20', '20 and 50', '1, 5 and 10': a list of numbers or names as a page writes it."""
    items = [str(i) for i in items]
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def code(text) -> str:
    """A command or a commit as a code span: "`python -m metacl_lite run ...`"."""
    return f"`{text}`"


def table_md(frame, index: bool = False, numparse: bool = False, **kw):
    """A table for a page's `{glue:md}` block: `frame` as Markdown (by default without its index and with numbers as
    formatted), so that its cells' Markdown (a link, bold) renders; `kw` goes to `DataFrame.to_markdown`."""
    from IPython.display import Markdown

    return Markdown(frame.to_markdown(index=index, **({} if numparse else {"disable_numparse": True}), **kw))


def markdown(df, align=None):
    """A DataFrame as a Markdown table (numbers as written, negative ones with the minus sign), for `glue`."""
    return df.map(minus).to_markdown(index=False, disable_numparse=True, **({"colalign": align} if align else {}))


def glue_record(record: dict, markdown: bool = False) -> None:
    """Glue each value of `record` under its key, a glue name of the page, not displayed. By default a string as it
    is (for `{glue:text}`) and a number, table or figure as it is, leaving out what no page shows (a bool, None, a
    list or dict: the premises the page asserts); with markdown=True every value, a string as Markdown (for
    `{glue:md}`, so that code spans and links render)."""
    from IPython.display import Markdown
    from myst_nb import glue

    for name, value in record.items():
        if markdown:
            glue(name, Markdown(value) if isinstance(value, str) else value, display=False)
        elif not isinstance(value, (bool, list, tuple, dict, set, type(None))):
            glue(name, value, display=False)
