"""Each value a book page shows is found by its name (issue 41, point 7): every glue name a page's Markdown reads
(`{glue:text}`, `{glue:md}`, `{glue:figure}`) is written out in full, as a string, in the page's own code or in the
records of `metacl_lite/publish/` (a page's `page_*.py`), so that `grep -rn <name> metacl_lite book` finds both the
page and the code that makes the value; and no page or record module glues a name built from a prefix."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
PUBLISH = ROOT / "metacl_lite" / "publish"
#: A glue name a page's Markdown reads (a `{glue:text}` may add a format: `bt:.2f`).
SHOWN = re.compile(r"\{glue(?::\w+)?\}`([\w-]+)(?::[^`]*)?`|```\{glue(?::\w+)?\}\s+([\w-]+)")


def pages() -> list[Path]:
    """The book's pages with glued values, the reproduction template among them; not the course's assignments (their
    own tooling makes them), nor a build."""
    return sorted(p for p in BOOK.rglob("*.md") if not {"_build", "assignments", "_vendor"} & set(p.parts))


def shown(text: str) -> set[str]:
    return {a or b for a, b in SHOWN.findall(text)}


def unwritten(page_text: str, records: str) -> set[str]:
    """The names `page_text` shows that neither it nor `records` writes out as a string."""
    return {n for n in shown(page_text) if not any(f"{q}{n}{q}" in t for q in "\"'" for t in (page_text, records))}


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(BOOK)))
def test_every_glue_name_a_page_shows_is_written_out(page):
    records = "\n".join(p.read_text() for p in PUBLISH.glob("*.py"))
    assert unwritten(page.read_text(), records) == set(), "write the name out in full (a dict literal of the records)"


def test_no_record_module_builds_a_glue_name_from_a_prefix():
    """`glue_record` takes full names; the prefix-and-key glueing (`glue_all(prefix, record)`) is gone."""
    for path in sorted(PUBLISH.glob("*.py")):
        assert "glue_all" not in path.read_text(), path.name
    for page in pages():
        assert "glue_all(" not in page.read_text(), page.name


def test_the_check_finds_a_name_built_from_a_prefix():
    page = 'glue_record({f"c{c}_title": t for c, t in titles.items()})\n\nClaim 1: {glue:text}`c1_title`.'
    assert unwritten(page, records="") == {"c1_title"}
    assert unwritten(page, records='{"c1_title": h["title"]}') == set()
    assert shown("{glue:text}`bt:.2f` and\n```{glue:md} table\n```") == {"bt", "table"}
