"""The grade sheet of a class and what a student gets back: the sheet's columns and rows, reading it back and writing
it atomically; which rows to grade again; each submission's feedback file, its written answers, and unique file names
for both.

Whatever came from a submission (its file's name, its cells' errors, its tests' messages, its written answers) is
shown so that it cannot pass for the grader's own text: one line in a feedback file, between « and »; quoted in the
written answers' Markdown; never a formula in the sheet."""
from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import math
import re
import unicodedata
from pathlib import Path
from typing import Optional

from ..lab.atomic import write_text
from .assignments import AssignmentError

#: the sheet's text columns that can hold a submission's text (its file's name, an error's text)
TEXT_COLUMNS = ("submission", "status")
#: what a spreadsheet reads as the start of a formula; with the quotes before it, what `sheet_cell` quotes
_FORMULA = re.compile(r"'*[=+\-@\t\r]")


def manual_column(q: str) -> str:
    """The grade sheet's column of a question graded by hand: left empty, for the instructor's points."""
    return f"{q} (manual)"


def ordered(points: dict[str, float], manual: dict[str, float]) -> list[str]:
    """The questions, autograded and graded by hand, in order (q1, q2, ..., q10)."""
    return sorted({*points, *manual}, key=lambda q: (len(q), q))


def columns(points: dict[str, float], manual: dict[str, float]) -> list[str]:
    """The grade sheet's columns: submission, every question in order (those graded by hand as `q2 (manual)`),
    total, possible, percent, status, each question's possible points, assignment, autograder_sha256."""
    qs = ordered(points, manual)
    return ["submission", *(manual_column(q) if q in manual else q for q in qs), "total", "possible", "percent",
            "status", *(f"possible_{q}" for q in qs), "assignment", "autograder_sha256"]


def _seconds(text: str) -> Optional[float]:
    try:
        s = float(text)
    except ValueError:
        return None
    return s if math.isfinite(s) and s > 0 else None


def timeout_of(status: str) -> Optional[float]:
    """The time limit, in seconds, that a `timeout (over N s)` status was graded with; None for any other status
    (and for a plain `timeout`, written before the status carried its limit)."""
    m = re.fullmatch(r"timeout \(over (\S+) s\)", (status or "").strip())
    return _seconds(m.group(1)) if m else None


def _graded(rec: dict, points: dict[str, float]) -> tuple[dict[str, float], str]:
    """The points of each autograded question and the status of a record that has `questions`."""
    possible = sum(points.values())
    got = rec["questions"]
    scores = {q: float(got[q]["score"]) if q in got else 0.0 for q in points}
    graded = sum(got[q]["possible"] for q in got)
    missing = sorted(set(points) - set(got))
    if missing or graded != possible:
        why = f"graded {graded:g} of {possible:g} points (missing {', '.join(missing) or 'none'})"
        return {q: 0.0 for q in points}, "error: " + why
    return scores, "ok"


def _status(rec: dict) -> str:
    """The status of a record that has no `questions`: one line."""
    if "refused" in rec:
        return "error: " + " ".join(str(rec["refused"]).split())
    if "timeout" in rec:  # with the limit it was graded with, so that a rerun with a larger --timeout grades it again
        m = re.fullmatch(r"over (\S+) s", str(rec["timeout"]).strip())  # `over 120 s` -> `timeout (over 120 s)`
        limit = _seconds(m.group(1)) if m else None
        return f"timeout (over {limit:g} s)" if limit is not None else "timeout"
    if "crashed" in rec:
        return "crashed"
    return "error: " + " ".join(str(rec.get("error", "no result")).split())


def row(key: str, rec: dict, points: dict[str, float], manual: Optional[dict[str, float]] = None,
        assignment: str = "", sha: str = "") -> dict:
    """The grade-sheet row of one record: the points of each autograded question, total, possible (the autograded
    full score) and percent, status (`ok`, `timeout (over N s)`, `crashed` or `error: <why>`), the possible points
    of each question, the assignment and its autograder's sha256. The columns of the questions graded by hand are
    left empty."""
    manual = manual or {}
    possible = sum(points.values())
    if "questions" in rec and "refused" not in rec:
        scores, status = _graded(rec, points)
    else:
        scores, status = {q: 0.0 for q in points}, _status(rec)
    total = sum(scores.values())
    return {"submission": key, **{q: f"{s:g}" for q, s in scores.items()}, "total": f"{total:g}",
            "possible": f"{possible:g}", "percent": f"{100 * total / possible:.1f}" if possible else "",
            "status": status, **{f"possible_{q}": f"{points.get(q, manual.get(q, 0)):g}"
                                 for q in ordered(points, manual)},
            "assignment": assignment, "autograder_sha256": sha}


def needs_regrading(r: dict, sha: str, timeout: float) -> Optional[str]:
    """Why a sheet's row should be graded again, or None: its status is an error; it timed out under a smaller time
    limit than `timeout` (a plain `timeout`, of a sheet written before the status carried its limit, is kept); or
    another autograder graded it (its `autograder_sha256` is not `sha`: the caller says so). The columns graded by
    hand play no part (the caller keeps them in the new row)."""
    status = r.get("status") or ""
    if status.startswith("error"):
        return "its status is an error"
    limit = timeout_of(status)
    if limit is not None and limit < timeout:
        return f"it timed out over {limit:g} s, and the time limit is now {timeout:g} s"
    if graded_by_another(r, sha):
        return f"another autograder graded it (sha256 {r['autograder_sha256'][:12]}, now {sha[:12]})"
    return None


def graded_by_another(r: dict, sha: str) -> bool:
    """Whether a sheet's row was graded by an autograder other than the one of sha256 `sha`."""
    old = r.get("autograder_sha256") or ""
    return bool(old and sha and old != sha)


def keep_manual(new: dict, old: Optional[dict], manual: dict[str, float]) -> dict:
    """`new`, a submission's row graded again, with the points entered by hand in its previous row `old`."""
    for q in manual:
        if (old or {}).get(manual_column(q)):
            new[manual_column(q)] = old[manual_column(q)]
    return new


# What a student gets back
QUOTES = ("«", "»")
LEGEND = ("(text between « and » comes from the submission's own run: what its code raised, printed or returned, "
          "shown on one line)")


def one_line(text: object, limit: int = 300) -> str:
    """Text shown on one line of a feedback file: its whitespace (newlines included) as single spaces, control and
    format characters (terminal escapes, bidirectional overrides) as `\\uXXXX`, HTML's &, < and > as entities, at
    most `limit` characters."""
    s = " ".join(str(text).split())[:limit]
    s = "".join(c if unicodedata.category(c)[0] != "C" else f"\\u{ord(c):04x}" for c in s)
    return html.escape(s, quote=False)


def quoted(text: object, limit: int = 600) -> str:
    """A submission's text in its feedback: its lines joined by ` | ` on one line (`one_line`), between « and »
    (those two inside it shown as ‹ and ›), so that it can neither start a line nor pass for the grader's."""
    lines = [" ".join(x.split()) for x in str(text).splitlines()]
    s = one_line(" | ".join(x for x in lines if x), limit).replace("«", "‹").replace("»", "›")
    return QUOTES[0] + s + QUOTES[1]


def _test_lines(got: dict, show_hidden: bool) -> list[str]:
    """One question's tests: passed or failed, with the message of a visible test that failed (a hidden one by
    number, unless show_hidden)."""
    lines, k = [], 0
    for t in got.get("tests", []):
        mark = "passed" if t["passed"] else "failed"
        if t["hidden"]:
            k += 1
            if not show_hidden:
                lines.append(f"  hidden test {k} {mark}")
                continue
        hidden = " (hidden)" if t["hidden"] else ""
        msg = "" if t["passed"] or not t["message"] else ": " + quoted(t["message"])
        lines.append(f"  {mark} {one_line(t['test'])}{hidden}{msg}")
    return lines


def _run_lines(rec: dict) -> list[str]:
    """The cells that raised, and why grading stopped: the submission's texts quoted."""
    lines = [f"cell {one_line(e['cell'])} raised ({quoted(e['line'], 120)}): {quoted(e['error'])}"
             for e in rec.get("cell_errors", [])]
    for k in ("timeout", "refused"):
        if k in rec:
            lines.append(f"{k}: {one_line(rec[k])}")
    for k in ("crashed", "error"):
        if k in rec:
            lines.append(f"{k}: {quoted(rec[k])}")
    if "timeout" in rec and "default_timeout" in rec:
        lines.append(f"  (the time limit, --timeout; this assignment's default, {float(rec['default_timeout']):g} s, "
                     "allows for its measured grading time)")
    return lines


def feedback_text(key: str, rec: dict, r: dict, points: dict[str, float], manual: dict[str, float],
                  show_hidden: bool = False) -> str:
    """One submission's feedback, like `otter grade --summaries`: per question its points (or `manual` and its
    points), per test passed or failed with the student-visible message; a hidden test as `hidden test k` (its name
    and message only with show_hidden); the notebook's cells that raised, with their error. Every line is the
    grader's: what came from the submission is quoted within a line (`quoted`), explained by a legend line."""
    head = [f"submission: {one_line(key, 1000)}", f"status: {one_line(r['status'])}",
            f"total: {r['total']} / {r['possible']}"]
    body = []
    got = rec.get("questions", {})
    for q in ordered(points, manual):
        if q in manual:
            body.append(f"{q}: manual / {manual[q]:g}")
            continue
        body.append(f"{q}: {r[q]} / {points[q]:g}")
        body += _test_lines(got.get(q, {}), show_hidden)
    body += _run_lines(rec)
    legend = [LEGEND] if any(QUOTES[0] in line for line in body) else []
    return "\n".join(head + legend + body) + "\n"


# Written answers
ANSWER_TAG = "otter_answer_cell"
PLACEHOLDER = "_Type your answer here, replacing this text._"
#: what ends a written question's cells: otter's markers, the next question
_END = ("<!-- END QUESTION", "<!-- BEGIN QUESTION", "# BEGIN QUESTION", "**Question ")


def _source(c) -> str:
    s = c.get("source", "") if isinstance(c, dict) else ""
    return "".join(map(str, s)) if isinstance(s, list) else str(s)


def _locked(c) -> bool:
    """One of the assignment's own cells (otter makes them not editable)."""
    meta = c.get("metadata") if isinstance(c, dict) else None
    return isinstance(meta, dict) and meta.get("editable") is False


def _is_grader_cell(c) -> bool:
    """otter's check and export cells: code whose every line is a comment or a `grader.` call."""
    lines = [s.strip() for s in _source(c).splitlines() if s.strip() and not s.strip().startswith("#")]
    return c.get("cell_type") == "code" and bool(lines) and all(s.startswith("grader.") for s in lines)


def _prompt_at(cells: list, q: str) -> Optional[int]:
    """The cell of question `q`'s prompt: the assignment's own cell that names it, else any cell that does."""
    mark = f"**Question {q[1:]}**"
    hits = [i for i, c in enumerate(cells) if mark in _source(c)]
    return next((i for i in hits if _locked(cells[i])), hits[0] if hits else None)


def _answer_cells(cells: list, at: int) -> list[tuple[str, str]]:
    """(cell type, source) of the student's answer to the question whose prompt is cell `at`: the cells after it up
    to the question's end (otter's END QUESTION, the next question, a locked cell of the assignment's, a check
    cell), without empty cells, the placeholder otter puts in the answer cell, and `grader.` lines."""
    out = []
    for c in cells[at + 1:]:
        s = _source(c)
        if not isinstance(c, dict) or _locked(c) or _is_grader_cell(c) or any(m in s for m in _END):
            break
        s = "\n".join(x for x in s.splitlines() if not x.strip().startswith("grader.")).strip("\n")
        if s.strip() and s.strip() != PLACEHOLDER:
            out.append((str(c.get("cell_type")), s))
    return out


def fenced(code: str, info: str = "python") -> list[str]:
    """Code as a Markdown fenced block whose fence is longer than any run of backticks inside it, so the code can
    neither close it nor open another."""
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *code.splitlines(), fence]


def blockquoted(text: str) -> list[str]:
    """Markdown text as a blockquote that renders as text: HTML's &, < and > as entities; a line's first character
    escaped when it would start a heading, a setext underline, a fence or a nested quote; images as text."""
    out = []
    for line in text.splitlines():
        s = html.escape(line, quote=False).replace("![", "!\\[")
        s = re.sub(r"^(\s*)([#=\-`~])", r"\1\\\2", s)
        out.append("> " + s if s.strip() else ">")
    return out


def written_answers(nb_bytes: bytes, key: str, manual: dict[str, float]) -> str:
    """The written answers of a submission as Markdown: for each question graded by hand, its prompt's first line
    and the student's answer cells (`_answer_cells`), quoted: code fenced, text as a blockquote (`blockquoted`),
    so that no answer can add a heading, a fence or HTML to the file."""
    try:
        cells = json.loads(nb_bytes.decode("utf-8")).get("cells", [])
        cells = cells if isinstance(cells, list) else []
    except (ValueError, AttributeError, RecursionError):
        cells = []
    text = [f"# Written answers: {one_line(key, 1000)}", ""]
    for q in sorted(manual, key=lambda q: (len(q), q)):
        text += [f"## {q} ({manual[q]:g} points, graded by hand)", ""]
        at = _prompt_at(cells, q)
        if at is None:
            text += ["(the question's cell is missing)", ""]
            continue
        prompt = [s for s in _source(cells[at]).strip().splitlines() if s.strip() and not s.startswith("<!--")]
        text += blockquoted(prompt[0][:300] if prompt else f"**Question {q[1:]}**") + [""]
        answer = _answer_cells(cells, at)
        for kind, s in answer:
            text += (fenced(s) if kind == "code" else blockquoted(s)) + [""]
        if not answer:
            text += ["(no answer)", ""]
    return "\n".join(text) + "\n"


# The sheet
def sheet_cell(text: str) -> str:
    """A text cell as the sheet stores it: with a leading `'` when a spreadsheet would read it as a formula (it
    starts with =, +, -, @, a tab or a carriage return, after any quotes), so `plain_cell` reads it back exactly."""
    return "'" + text if _FORMULA.match(text) else text


def plain_cell(text: str) -> str:
    """A text cell as `sheet_cell` wrote it, read back."""
    return text[1:] if text.startswith("'") and _FORMULA.match(text[1:]) else text


def _sheet_error(path: Path, why: str) -> AssignmentError:
    return AssignmentError(f"{path} {why}; give another --out (or remove the file)")


def _repair_error(path: Path, why: str) -> AssignmentError:
    return AssignmentError(f"{path} {why}; repair it in a text editor and run the same command again (nothing was "
                           f"graded, and the sheet is left as it was)")


def _records(path: Path, reader: csv.DictReader) -> list[tuple[int, dict]]:
    """(line number, row) of each row, every row with as many cells as the header has (a hand-edited row that
    gained or lost a cell is refused by its line)."""
    width = len(reader.fieldnames or [])
    out = []
    try:
        for r in reader:
            cells = width + len(r.get(None) or []) - sum(v is None for v in r.values())
            if cells != width:
                raise _repair_error(path, f"line {reader.line_num} has {cells} cells where its header has {width} "
                                          f"(a cell added or deleted by hand, or a comma outside quotes?)")
            out.append((reader.line_num, r))
    except csv.Error as e:
        raise _repair_error(path, f"line {reader.line_num} is not CSV ({e})") from None
    return out


def _check_columns(path: Path, fields: list, cols: list[str], assignment: Optional[str]) -> None:
    """The header holds this grader's columns, in any order, each once."""
    if sorted(fields) == sorted(cols):
        return
    twice = sorted({c for c in fields if fields.count(c) > 1})
    extra = sorted(set(fields) - set(cols))
    lack = sorted(set(cols) - set(fields))
    why = (f"twice: {', '.join(twice)}" if twice and not extra and not lack else
           f"extra: {', '.join(extra) or 'none'}; missing: {', '.join(lack) or 'none'}")
    raise _sheet_error(path, f"is not a grade sheet of {assignment or 'this assignment'} with this grader's "
                             f"columns ({why})")


def _check_unique(path: Path, records: list[tuple[int, dict]]) -> None:
    """One row per submission: two rows of one submission (the first would be lost, with its points entered by
    hand) are refused by their lines."""
    seen: dict[str, int] = {}
    for line, r in records:
        key = r["submission"]
        if key in seen:
            raise _repair_error(path, f"has two rows for the submission {key!r} (lines {seen[key]} and {line}): "
                                      f"keep one, with any points entered by hand")
        seen[key] = line


def _sheet_text(path: Path) -> str:
    """The sheet's text: refused when it is no CSV text (empty, a byte-order mark, not UTF-8, JSON)."""
    if not path.is_file():
        raise _sheet_error(path, "is not a file")
    raw = path.read_bytes()
    if not raw.strip():
        raise _sheet_error(path, "is empty (not even a header)")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise _sheet_error(path, "starts with a UTF-8 byte-order mark (saved by a spreadsheet?): save it as plain "
                                 "CSV UTF-8 without BOM")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _sheet_error(path, "is not UTF-8 text") from None
    if text.lstrip()[:1] in "{[":
        raise _sheet_error(path, "is JSON (a results file?), not a CSV grade sheet")
    return text


def read_sheet(path: Path, cols: list[str], assignment: Optional[str] = None) -> list[dict]:
    """The rows already in a grade sheet (none if it does not exist), its text cells as they were before
    `write_sheet` quoted them; a sheet of another assignment (by its `assignment` column) or with other columns
    refused, saying why (and `_sheet_text`, `_records`, `_check_unique`). The same columns in another order (a
    spreadsheet moved one) are read by name, and written back in the grader's order."""
    path = Path(path)
    if not path.exists():
        return []
    reader = csv.DictReader(io.StringIO(_sheet_text(path), newline=""))
    fields = list(reader.fieldnames or [])
    records = _records(path, reader)
    names = {r.get("assignment") for _, r in records} - {None, ""}
    if "assignment" in fields and assignment and names and names != {assignment}:
        raise _sheet_error(path, f"is the sheet of {', '.join(sorted(names))}, not of {assignment}")
    _check_columns(path, fields, cols, assignment)
    rows = [{k: plain_cell(v) if k in TEXT_COLUMNS else v for k, v in r.items()} for _, r in records]
    _check_unique(path, [(line, r) for (line, _), r in zip(records, rows)])
    return rows


def write_sheet(path: Path, columns: list[str], rows: list[dict]) -> None:
    """Write the sheet atomically, in `columns`' order; a text cell that a spreadsheet would read as a formula is
    quoted (`sheet_cell`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    w.writeheader()
    w.writerows({k: sheet_cell(v) if k in TEXT_COLUMNS and isinstance(v, str) else v for k, v in r.items()}
                for r in rows)
    write_text(path, buf.getvalue())


#: the bytes of a feedback file's name kept from its key (with the hash and the suffix, under the 255 of most file
#: systems): the start and the end of a longer one
NAME_BYTES = 200


def feedback_name(key: str, suffix: str = ".txt") -> str:
    """A file name for a submission's feedback: its key made safe, with a short hash of the key when making it safe
    changed it (so `x/y.ipynb`, `x y.ipynb` and `x_y.ipynb` get three files); a long key kept to its start and end
    joined by `...` (`NAME_BYTES` of UTF-8), with the hash, so the name fits a file system's 255 bytes."""
    safe = re.sub(r"[^\w.-]+", "_", key.lstrip("./")) or "submission"
    b, half = safe.encode(), (NAME_BYTES - 3) // 2
    short = safe if len(b) <= NAME_BYTES else \
        b[:half].decode(errors="ignore") + "..." + b[-half:].decode(errors="ignore")
    if short != key:
        short += "-" + hashlib.sha256(key.encode()).hexdigest()[:8]
    return short + suffix
