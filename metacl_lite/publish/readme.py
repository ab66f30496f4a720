"""The README's generated blocks (`python -m metacl_lite.tools readme`): Table 1, ours beside the paper's (`table`
blocks, `tables.format_table`), and one line per claim of the paper with its verdict and the number behind it
(`claims` blocks, from `claims.headline`). Two functions here write Markdown: `update_readme`, which replaces each
block's body, and `markdown_table`, a plain table writer; everything else the README once showed (speed, the GPU
check, the open choices, the targets, the K = 1…500 tables) is on the book's pages, in their words."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..paths import REPO_ROOT
from ..report.tables import format_table

#: A generated block of the README: `<!-- BEGIN <kind> <source> -->` ... `<!-- END <kind> -->`.
README_MARK = re.compile(r"(<!-- BEGIN (table|claims) (\S+) -->\n)(.*?)(<!-- END \2 -->)", re.S)
#: A line that holds a block's marker (`check_blocks` asks each to be the whole line, paired with its kind's END).
MARKER_LINE = re.compile(r".*<!-- (BEGIN|END) (table|claims)\b.*")
#: The whole line a BEGIN or END marker must be.
BEGIN_LINE, END_LINE = re.compile(r"<!-- BEGIN (table|claims) (\S+) -->"), re.compile(r"<!-- END (table|claims) -->")
#: The blocks the repository's README.md must hold (kind, source): a block whose BEGIN and END lines were both
#: deleted leaves no marker out of place, so `update_readme` asks for each of these by name.
EXPECTED_BLOCKS = (("table", "results/pmnist-K20.json"), ("claims", "pmnist"))
#: The fields of a claim's headline record (`claims.headline`), in the order the `claims` block shows them.
HEADLINE_FIELDS = ("claim", "title", "verdict", "metric", "K", "a", "b", "mean", "unit")
#: The unit suffix of a mean difference.
UNITS = {"points": " pts", "degrees": "°"}


def markdown_table(rows: Iterable[Mapping[str, Any]], columns: Mapping[str, str]) -> str:
    """A Markdown table of `rows` (records, or a DataFrame's `to_dict("records")`): one column per key of `columns`,
    headed by its value; a missing or None cell shows as "–", a "|" inside a cell is escaped."""
    def cell(v: Any) -> str:
        return "–" if v is None else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(k)) for k in columns) + " |" for r in rows]
    return "\n".join(lines)


def headline_cells(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The cells of the `claims` block, one row per headline record (`claims.headline`: claim, title, verdict, metric,
    K, a, b, mean, unit, and optionally test): the mean difference a − b with its unit and sign, what it measures
    (from the test's name "a − b, measure" where the record has one, else the metric) and where ("across K" for a
    test over several K); "–" for a claim whose deciding test did not run (mean None)."""
    from .. import training as T

    name = {m: T.METHODS[m].label for m in T.METHODS}
    out = []
    for r in records:
        missing = [f for f in HEADLINE_FIELDS if f not in r]
        if missing:
            raise ValueError(f"claim record {r.get('claim')!r} lacks {missing}; claims.headline gives {HEADLINE_FIELDS}")
        mean, test = r["mean"], r.get("test") or ""
        minus = test.find(" − ")
        cut = test.find(", ", minus) if minus >= 0 else -1  # a label may hold a comma: the first one after the " − "
        if cut >= 0:  # the test's own name, "a − b, what is measured": a control's γ and the measure in full
            difference, metric = test[:cut], test[cut + 2:]
        else:
            difference = (f"{name.get(r['a'], r['a'])} − {name.get(r['b'], r['b'])}" if r["b"] else
                          name.get(r["a"], r["a"]))
            metric = r["metric"]
        out.append({"claim": r["claim"], "title": r["title"], "verdict": f"**{r['verdict']}**",
                    "difference": difference, "metric": metric, "K": "across K" if r["K"] is None and mean is not None
                    else r["K"],
                    "mean": None if mean is None else f"{mean:+.1f}{UNITS.get(r['unit'], ' ' + r['unit'])}"})
    return out


HEADLINE_COLUMNS = {"claim": "#", "title": "Claim", "verdict": "Verdict", "difference": "Paired difference",
                    "metric": "Metric", "K": "K", "mean": "Mean"}


def _claims_body(benchmark: str) -> str:
    """A `claims` block's body: the headline records of `benchmark`'s evidence (`claims.headline`) as a table."""
    from ..findings import claims
    from ..findings.evidence import load_evidence

    return markdown_table(headline_cells(claims.headline(claims.verdict_rows(load_evidence(benchmark)))),
                          HEADLINE_COLUMNS) + "\n"


def _table_body(source: str) -> str:
    """A `table` block's body: the results file beside the paper's table; a file of a setting we reproduce that is
    not made yet: the commands that make it."""
    from ..lab import store
    from ..report.commands import missing_commands
    from ..data.specs import get_spec
    from ..errors import check_not_deleted

    check_not_deleted(REPO_ROOT / source)  # deleted, not a file yet to be made
    setting = re.fullmatch(r"results/([a-z0-9]+)-K(\d+)\.json", source)
    if setting and not (REPO_ROOT / source).exists():
        get_spec(setting.group(1))  # a block naming an unknown benchmark is a typo, not a file to come
        return "```bash\n" + "\n".join(missing_commands(setting.group(1), int(setting.group(2)))) + "\n```\n"
    return format_table(store.load_results(REPO_ROOT / source), "md") + "\n"  # the summary made from the matrices


def check_blocks(text: str, path: Path) -> int:
    """The number of generated blocks in the README `text`, after checking that every marker is a line of its own and
    that every BEGIN is followed by its kind's END before any other marker: a FileFormatError naming `path` and the
    line otherwise, before anything is written (`README_MARK` would otherwise match from a BEGIN whose END was
    deleted to the next block's END, and replace the lines between)."""
    from ..errors import FileFormatError

    hint = f"restore the marker (`git diff {path}` shows what changed), then run the command again"
    opened: Optional[tuple[int, str, str]] = None  # line, kind, source of the BEGIN waiting for its END
    blocks = 0
    for n, line in enumerate(text.splitlines(), 1):
        if not MARKER_LINE.fullmatch(line):
            continue
        begin, end = BEGIN_LINE.fullmatch(line), END_LINE.fullmatch(line)
        if not (begin or end):
            raise FileFormatError(f"{path}, line {n}: {line!r} is not a block marker; write it alone on its line, "
                                  f"exactly <!-- BEGIN table|claims SOURCE --> or <!-- END table|claims -->")
        if opened and begin:
            raise FileFormatError(f"{path}, line {opened[0]}: <!-- BEGIN {opened[1]} {opened[2]} --> has no "
                                  f"<!-- END {opened[1]} --> before the next block (line {n}); {hint}")
        if end and not opened:
            raise FileFormatError(f"{path}, line {n}: <!-- END {end.group(1)} --> has no BEGIN before it; {hint}")
        if end and end.group(1) != opened[1]:
            raise FileFormatError(f"{path}, line {n}: <!-- END {end.group(1)} --> closes the block <!-- BEGIN "
                                  f"{opened[1]} {opened[2]} --> of line {opened[0]}, which ends with <!-- END "
                                  f"{opened[1]} -->; {hint}")
        if begin:
            opened = (n, begin.group(1), begin.group(2))
        else:
            opened, blocks = None, blocks + 1
    if opened:
        raise FileFormatError(f"{path}, line {opened[0]}: <!-- BEGIN {opened[1]} {opened[2]} --> has no "
                              f"<!-- END {opened[1]} --> after it; {hint}")
    return blocks


def update_readme(path: Optional[Path] = None, check: bool = False,
                  expected: Optional[Sequence[tuple[str, str]]] = None) -> bool:
    """Replace the body of each generated block of the README (`README_MARK`: `table results/X.json`, `claims
    <benchmark>`) with what its source makes now. Returns True when something was (or, with check, would be)
    changed. A marker out of place (`check_blocks`), or a block of `expected` that is not there (default: for the
    repository's README, `EXPECTED_BLOCKS`), is a FileFormatError, and a README that cannot be written (a read-only
    checkout) an OutputError, before anything is computed or written."""
    from ..errors import FileFormatError

    if path is None and expected is None:
        expected = EXPECTED_BLOCKS
    path = Path(path) if path else REPO_ROOT / "README.md"
    if not path.is_file():
        raise FileFormatError(f"{path} does not exist: restore it from git (`git checkout -- README.md`)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise FileFormatError(f"{path} is not UTF-8 text (byte {e.start} is {e.object[e.start]:#04x}): save it as "
                              "UTF-8, or restore it from git") from None
    blocks = check_blocks(text, path)
    present = {(mo.group(2), mo.group(3)) for mo in README_MARK.finditer(text)}
    lost = [f"<!-- BEGIN {k} {src} -->" for k, src in expected or () if (k, src) not in present]
    if lost:
        raise FileFormatError(f"{path} has no block {', '.join(lost)} (its BEGIN and END lines were deleted): put "
                              f"the two marker lines back where the block belongs (`git diff {path}` shows them), "
                              f"then run the command again")
    if not check:
        from ..lab.atomic import check_writable

        check_writable(path, fix="run it in a checkout you can write, or use --check, which writes nothing")

    def repl(mo: re.Match) -> str:
        body = _claims_body(mo.group(3)) if mo.group(2) == "claims" else _table_body(mo.group(3))
        return mo.group(1) + body + mo.group(5)

    new, replaced = README_MARK.subn(repl, text)
    assert replaced == blocks, (path, replaced, blocks)  # the checked blocks are the ones replaced
    if new != text and not check:
        from ..lab.atomic import write_text

        write_text(path, new)
    return new != text
