"""The book's words live in its Markdown, its numbers come from the package (issue 35): no code cell of a page is
over 40 lines, no page hides more than 60 lines of code, and no function defined in a page builds a sentence (a
function whose body holds a string of three words or more). Read from the pages' source (MyST notebooks, and the
notebooks the book renders), nothing executed."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"
MAX_CELL, MAX_HIDDEN = 40, 60
HIDDEN = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def code_cells(page: Path) -> list[tuple[set[str], str]]:
    """(tags, code) of each code cell of a MyST notebook or an .ipynb."""
    if page.suffix == ".ipynb":
        nb = json.loads(page.read_text())
        return [(set(c.get("metadata", {}).get("tags", [])), "".join(c["source"]))
                for c in nb["cells"] if c["cell_type"] == "code"]
    cells = []
    for body in CELL.findall(page.read_text()):
        tags: set[str] = set()
        lines = body.split("\n")
        if lines and lines[0].strip() == "---":  # a YAML block of options
            end = lines.index("---", 1)
            options, lines = lines[1:end], lines[end + 1:]
        else:
            options = []
            while lines and lines[0].startswith(":"):
                options.append(lines.pop(0))
        for line in options:
            m = re.match(r"\s*:?tags:\s*\[(.*)\]", line)
            if m:
                tags |= {t.strip() for t in m.group(1).split(",")}
        cells.append((tags, "\n".join(lines).strip("\n")))
    return cells


def code_lines(code: str) -> int:
    return sum(1 for line in code.split("\n") if line.strip())


def sentence_builders(code: str) -> list[str]:
    """The functions defined in `code` whose body holds a string literal of three words or more (an f-string's
    literal parts count), e.g. def verdict_line(...): return f"the claim holds at K = {K}". An assertion's or an
    error's message, a docstring and an assignment's test functions (test_*) do not count."""
    source = "\n".join(line for line in code.split("\n") if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
        if getattr(fn, "name", "").startswith("test_"):  # an assignment's test: its messages are for the student
            continue
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        skip = {id(n) for s in ast.walk(fn) if isinstance(s, (ast.Assert, ast.Raise))
                for part in ((s.msg,) if isinstance(s, ast.Assert) else (s.exc,)) if part is not None
                for n in ast.walk(part)}  # an assertion's or an error's message is not the page's text
        docstring = (body[0] if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                                                     ast.Constant) else None)
        for node in (n for b in body if b is not docstring for n in ast.walk(b)):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value.split()) >= 3
                    and id(node) not in skip):
                found.append(getattr(fn, "name", "lambda"))
                break
    return found


def pages() -> list[Path]:
    return sorted(p for p in [*BOOK.rglob("*.md"), *BOOK.rglob("*.ipynb")]
                  if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts and p.name != "README.md"
                  and (p.suffix == ".md" or not p.with_suffix(".md").exists()))


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(BOOK)))
def test_a_page_holds_short_cells_and_no_sentence_builders(page):
    cells = code_cells(page)
    long = [(i, code_lines(c)) for i, (_, c) in enumerate(cells) if code_lines(c) > MAX_CELL]
    hidden = sum(code_lines(c) for tags, c in cells if tags & HIDDEN)
    builders = [name for _, c in cells for name in sentence_builders(c)]
    assert long == [], f"code cells over {MAX_CELL} lines (cell index, lines)"
    assert hidden <= MAX_HIDDEN, f"{hidden} lines of hidden code (at most {MAX_HIDDEN})"
    assert builders == [], "functions defined in the page that build sentences"


@pytest.mark.parametrize("code, cells, long, builders", [
    ("```{code-cell} ipython3\n:tags: [remove-input]\n" + "x = 1\n" * 41 + "```\n", 1, 1, []),
    ("```{code-cell} ipython3\n---\ntags: [hide-input]\n---\ndef f(k):\n    return f'the claim holds at {k}'\n```\n",
     1, 0, ["f"]),
    ("```{code-cell} ipython3\ndef f(k):\n    \"\"\"A docstring of many words.\"\"\"\n    return k['a b']\n```\n",
     1, 0, []),
    ("```{code-cell} ipython3\ndef f(k):\n    assert k, 'k must be set'\n    return k\n```\n", 1, 0, []),
])
def test_the_check_finds_a_long_cell_and_a_sentence_builder(tmp_path, code, cells, long, builders):
    page = tmp_path / "p.md"
    page.write_text("# A page\n\n" + code)
    found = code_cells(page)
    assert len(found) == cells
    assert sum(code_lines(c) > MAX_CELL for _, c in found) == long
    assert [n for _, c in found for n in sentence_builders(c)] == builders
