"""The grade sheet of a class and what a student gets back: the sheet's columns (the points of each question, their
possible points, the manual columns, the total, percent and status, the assignment and the autograder's sha256), its
rows, reading it back (another assignment's sheet refused by name) and writing it atomically; each submission's
feedback file, its written answers, and unique file names for both."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Optional

from ..lab.atomic import write_text
from .assignments import AssignmentError

FIXED = ("submission",)
TAIL = ("total", "possible", "percent", "status")

#: the sheet's columns after the questions' points, and its record of what graded it
META = ("assignment", "autograder_sha256")


def manual_column(q: str) -> str:
    """The grade sheet's column of a question graded by hand: left empty, for the instructor's points."""
    return f"{q} (manual)"


#: the sheet's columns after the questions' points, and its record of what graded it
def ordered(points: dict[str, float], manual: dict[str, float]) -> list[str]:
    """The questions, autograded and graded by hand, in order (q1, q2, ..., q10)."""
    return sorted({*points, *manual}, key=lambda q: (len(q), q))


def possible_column(q: str) -> str:
    return f"possible_{q}"


def columns(points: dict[str, float], manual: dict[str, float]) -> list[str]:
    """The grade sheet's columns: submission, every question in order (those graded by hand as `q2 (manual)`),
    total, possible, percent, status, each question's possible points, assignment, autograder_sha256."""
    qs = ordered(points, manual)
    return [*FIXED, *(manual_column(q) if q in manual else q for q in qs), *TAIL,
            *(possible_column(q) for q in qs), *META]


def row(key: str, rec: dict, points: dict[str, float], manual: Optional[dict[str, float]] = None,
        assignment: str = "", sha: str = "") -> dict:
    """The grade-sheet row of one record: the points of each autograded question, total, possible (the autograded
    full score) and percent, status, the possible points of each question, the assignment and its autograder's
    sha256. The columns of the questions graded by hand are left empty."""
    manual = manual or {}
    possible = sum(points.values())
    scores = {q: 0.0 for q in points}
    status = "ok"
    if "refused" in rec:
        status = "error: " + rec["refused"]
    elif "questions" in rec:
        got = rec["questions"]
        for q in points:
            if q in got:
                scores[q] = got[q]["score"]
        graded = sum(got[q]["possible"] for q in got)
        missing = sorted(set(points) - set(got))
        if missing or graded != possible:
            why = f"graded {graded:g} of {possible:g} points (missing {', '.join(missing) or 'none'})"
            status = "error: " + why
            scores = {q: 0.0 for q in points}
    elif "timeout" in rec:
        status = "timeout"
    elif "crashed" in rec:
        status = "crashed"
    else:
        status = "error: " + " ".join(str(rec.get("error", "no result")).split())
    total = sum(scores.values())
    return {"submission": key, **{q: f"{s:g}" for q, s in scores.items()}, "total": f"{total:g}",
            "possible": f"{possible:g}", "percent": f"{100 * total / possible:.1f}" if possible else "",
            "status": status, **{possible_column(q): f"{points.get(q, manual.get(q, 0)):g}"
                                 for q in ordered(points, manual)},
            "assignment": assignment, "autograder_sha256": sha}


def feedback_text(key: str, rec: dict, r: dict, points: dict[str, float], manual: dict[str, float],
                  show_hidden: bool = False) -> str:
    """One submission's feedback, like `otter grade --summaries`: per question its points (or `manual` and its
    points), per test passed or failed with the student-visible message; a hidden test as `hidden test k` (its name
    and message only with show_hidden); the notebook's cells that raised, with their error."""
    lines = [f"submission: {key}", f"status: {r['status']}", f"total: {r['total']} / {r['possible']}"]
    got = rec.get("questions", {})
    for q in ordered(points, manual):
        if q in manual:
            lines.append(f"{q}: manual / {manual[q]:g}")
            continue
        lines.append(f"{q}: {r[q]} / {points[q]:g}")
        k = 0
        for t in got.get(q, {}).get("tests", []):
            mark = "passed" if t["passed"] else "failed"
            if t["hidden"]:
                k += 1
                if not show_hidden:
                    lines.append(f"  hidden test {k} {mark}")
                    continue
            hidden = " (hidden)" if t["hidden"] else ""
            msg = "" if t["passed"] or not t["message"] else ": " + " | ".join(t["message"].splitlines())
            lines.append(f"  {mark} {t['test']}{hidden}{msg}")
    for e in rec.get("cell_errors", []):
        lines.append(f"cell {e['cell']} raised ({e['line']}): {e['error']}")
    for k in ("timeout", "crashed", "error", "refused"):
        if k in rec:
            lines.append(f"{k}: {rec[k]}")
    if "timeout" in rec and "default_timeout" in rec:
        hint = (f"  (the time limit, --timeout; this assignment's default, {rec['default_timeout']:g} s, allows for "
                "its measured grading time)")
        lines.append(hint)
    return "\n".join(lines) + "\n"


def written_answers(nb_bytes: bytes, key: str, manual: dict[str, float]) -> str:
    """The written answers of a submission as Markdown: for each question graded by hand, its prompt's first line
    and the cells that follow it up to the next question."""
    try:
        cells = json.loads(nb_bytes.decode("utf-8")).get("cells", [])
    except (ValueError, AttributeError):
        cells = []
    text = [f"# Written answers: {key}", ""]

    def src(c) -> str:
        s = c.get("source", "") if isinstance(c, dict) else ""
        return "".join(s) if isinstance(s, list) else str(s)

    for q in sorted(manual, key=lambda q: (len(q), q)):
        mark = f"**Question {q[1:]}**"
        at = next((i for i, c in enumerate(cells) if mark in src(c)), None)
        text += [f"## {q} ({manual[q]:g} points, graded by hand)", ""]
        if at is None:
            text += ["(the question's cell is missing)", ""]
            continue
        prompt = [s for s in src(cells[at]).strip().splitlines() if s.strip() and not s.startswith("<!--")]
        text += ["> " + (prompt[0][:300] if prompt else mark), ""]
        for c in cells[at + 1:]:
            s = src(c)
            if "**Question " in s or "grader." in s or "# BEGIN QUESTION" in s:
                break
            if c.get("cell_type") == "code":
                text += ["```python", s.rstrip(), "```", ""]
            else:
                text += [s.rstrip(), ""]
    return "\n".join(text) + "\n"


def _sheet_error(path: Path, why: str) -> AssignmentError:
    return AssignmentError(f"{path} {why}; give another --out (or remove the file)")


def read_sheet(path: Path, cols: list[str], assignment: Optional[str] = None) -> list[dict]:
    """The rows already in a grade sheet (none if it does not exist). Refused with a message that says why: a sheet
    of another assignment (by its `assignment` column), an empty file, a byte-order mark, not UTF-8, not CSV (a
    results JSON), other columns."""
    path = Path(path)
    if not path.exists():
        return []
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
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = list(reader)
    names = {r.get("assignment") for r in rows} - {None, ""}
    if "assignment" in (reader.fieldnames or []) and assignment and names and names != {assignment}:
        raise _sheet_error(path, f"is the sheet of {', '.join(sorted(names))}, not of {assignment}")
    if reader.fieldnames != cols:
        extra = sorted(set(reader.fieldnames or []) - set(cols))
        lack = sorted(set(cols) - set(reader.fieldnames or []))
        raise _sheet_error(path, f"is not a grade sheet of {assignment or 'this assignment'} with this grader's "
                                 f"columns (extra: {', '.join(extra) or 'none'}; missing: {', '.join(lack) or 'none'})")
    return rows


def write_sheet(path: Path, columns: list[str], rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())


def feedback_name(key: str, suffix: str = ".txt") -> str:
    """A file name for a submission's feedback: its key made safe, with a short hash of the key when making it safe
    changed it (so `x/y.ipynb`, `x y.ipynb` and `x_y.ipynb` get three files)."""
    safe = re.sub(r"[^\w.-]+", "_", key.lstrip("./")) or "submission"
    if safe != key:
        safe += "-" + hashlib.sha256(key.encode()).hexdigest()[:8]
    return safe + suffix


