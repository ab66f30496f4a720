"""Grading a class: many submissions of one assignment into one grade sheet, each in its own process and folder.

    python -m metacl_lite assignments grade a1 submissions/ late.ipynb --out grades.csv --feedback feedback/

Each submission (a notebook, or an otter export zip; a folder gives those it holds) is graded by otter-grader's
autograder (`grading_worker`, visible and hidden tests) in a child process with a time limit, in a fresh temporary
folder holding its own copy of the package, removed afterwards: one submission's file writes cannot change another's
grade or the instructor's files. The grade sheet gets one row per submission (`submission`, the points of each
question, `total`, `possible`: the assignment's full score, `status`: ok, timeout, crashed or `error: <why>`), written
atomically after each row, so a rerun after Ctrl-C grades only the missing rows.
"""
from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..data.datafiles import data_root
from ..paths import PACKAGE_DIR, REPO_ROOT
from ..lab.atomic import write_text
from .assignments import DIST_DIR, AssignmentError, ensure_autograder, list_assignments, source_path
from .grading_refs import startup_code

FIXED = ("submission",)
TAIL = ("total", "possible", "status")
#: what a checkout's copy needs beside the package: the chapters that assignments run (a4 runs book/reproduce)
COPIED = ("pyproject.toml", "book/reproduce")


def full_name(name: str) -> str:
    """`a1` or `a1_dynamic_balance` -> `a1_dynamic_balance`."""
    names = list_assignments()
    hits = [n for n in names if n == name or n.split("_", 1)[0] == name]
    if len(hits) != 1:
        raise AssignmentError(f"unknown assignment {name!r}; choose from: {', '.join(names)} (or a1..a{len(names)})")
    return hits[0]


def question_points(zip_path: Path) -> dict[str, float]:
    """Each autograded question's points, read from the autograder's test files (`points = 3`, or a list of the
    points of each test case: `points = [1, 2]`)."""
    out = {}
    with zipfile.ZipFile(zip_path) as z:
        for member in sorted(z.namelist()):
            m = re.fullmatch(r"tests/(\w+)\.py", member)
            if m:
                pts = re.search(r"^points = (.+?)\s*$", z.read(member).decode(), re.M)
                value = ast.literal_eval(pts.group(1)) if pts else 0.0
                out[m.group(1)] = float(sum(value) if isinstance(value, list) else value)
    return out


def manual_points(name: str) -> dict[str, float]:
    """The points of each question graded by hand (`manual: true` in the assignment's source)."""
    import yaml

    out = {}
    text = source_path(name).read_text()
    for block in re.findall(r"```otter\n# BEGIN QUESTION\n(.*?)```", text, re.S):
        conf = yaml.safe_load(block)
        if conf.get("manual"):
            out[conf["name"]] = float(conf.get("points") or 0)
    return out


def manual_column(q: str) -> str:
    """The grade sheet's column of a question graded by hand: left empty, for the instructor's points."""
    return f"{q} (manual)"


def find_submissions(paths: Sequence[Path]) -> list[Path]:
    """The notebooks and zips named, or held by the named folders (recursively, checkpoints left out), in order."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.suffix in (".ipynb", ".zip") and q.is_file()
                           and ".ipynb_checkpoints" not in q.parts)
            if not found:
                raise AssignmentError(f"{p} holds no notebooks (.ipynb) or otter exports (.zip)")
            out += found
        elif p.is_file() and p.suffix in (".ipynb", ".zip"):
            out.append(p)
        elif p.exists():
            raise AssignmentError(f"{p} is neither a notebook (.ipynb), an otter export (.zip) nor a folder")
        else:
            raise AssignmentError(f"{p} does not exist")
    seen: set[str] = set()
    return [p for p in out if not (str(p) in seen or seen.add(str(p)))]


def _kill(proc: subprocess.Popen) -> None:
    """Kill the worker and everything it started (the kernel runs in a session of its own)."""
    try:
        import psutil

        procs = psutil.Process(proc.pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - gone already, or no psutil: the process group is all we can reach
        procs = []
    for p in procs:
        try:
            p.kill()
        except Exception:  # noqa: BLE001
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _sandbox(tmp: Path, name: str) -> dict:
    """A copy of the package (and of what a checkout's copy needs) under tmp/repo, an IPython startup file that
    withholds the assignment's references from the kernel (`grading_refs`); the child's environment."""
    repo = tmp / "repo"
    shutil.copytree(PACKAGE_DIR, repo / PACKAGE_DIR.name, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in COPIED:
        src = REPO_ROOT / rel
        if src.is_dir():
            shutil.copytree(src, repo / rel)
        elif src.is_file():
            shutil.copy2(src, repo / rel)
    (tmp / "tmp").mkdir()
    startup = tmp / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-withhold.py").write_text(startup_code(name))
    env = dict(os.environ, PYTHONPATH=str(repo), TMPDIR=str(tmp / "tmp"), HOME=str(tmp),
               IPYTHONDIR=str(startup.parents[1]), METACL_LITE_DATA=str(data_root()), METACL_LITE_PROGRESS="0")
    return env


def grade_one(name: str, zip_path: Path, submission: Path, timeout: float) -> dict:
    """Run the worker on one submission; its record (`questions`, or `error` / `crashed` / `timeout`)."""
    tmp = Path(tempfile.mkdtemp(prefix="metacl-grade-"))
    try:
        env = _sandbox(tmp, name)
        sub = tmp / "submission"
        sub.mkdir()
        shutil.copy2(submission, sub / submission.name)
        result = tmp / "result.json"
        cmd = [sys.executable, "-m", "metacl_lite.course.grading_worker", str(Path(zip_path).resolve()),
               str(sub / submission.name), str(result)]
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return {"timeout": f"over {timeout:g} s"}
        except BaseException:  # Ctrl-C: leave nothing running
            _kill(proc)
            raise
        _kill(proc)  # a kernel left behind
        if result.is_file():
            return json.loads(result.read_text())
        last = (err or b"").decode(errors="replace").strip().splitlines()
        return {"crashed": last[-1][:160] if last else f"exit status {proc.returncode}"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ordered(points: dict[str, float], manual: dict[str, float]) -> list[str]:
    """The questions, autograded and graded by hand, in order (q1, q2, ..., q10)."""
    return sorted({*points, *manual}, key=lambda q: (len(q), q))


def columns(points: dict[str, float], manual: dict[str, float]) -> list[str]:
    """The grade sheet's columns: submission, every question in order (those graded by hand as `q2 (manual)`),
    total, possible, status."""
    return [*FIXED, *(manual_column(q) if q in manual else q for q in ordered(points, manual)), *TAIL]


def row(key: str, rec: dict, points: dict[str, float]) -> dict:
    """The grade-sheet row of one record: the points of each autograded question, total and possible (the
    autograded full score), status. The columns of the questions graded by hand are left empty."""
    possible = sum(points.values())
    scores = {q: 0.0 for q in points}
    status = "ok"
    if "questions" in rec:
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
    return {"submission": key, **{q: f"{s:g}" for q, s in scores.items()}, "total": f"{sum(scores.values()):g}",
            "possible": f"{possible:g}", "status": status}


def feedback_text(key: str, rec: dict, r: dict, points: dict[str, float], manual: dict[str, float]) -> str:
    """One submission's feedback: per question its points (or `manual` and its points, for a question graded by
    hand), per test passed/failed (hidden ones marked), otter's message for a failure. Records, one a line."""
    lines = [f"submission: {key}", f"status: {r['status']}", f"total: {r['total']} / {r['possible']}"]
    got = rec.get("questions", {})
    for q in ordered(points, manual):
        if q in manual:
            lines.append(f"{q}: manual / {manual[q]:g}")
            continue
        pts = points[q]
        lines.append(f"{q}: {r[q]} / {pts:g}")
        for t in got.get(q, {}).get("tests", []):
            mark = "passed" if t["passed"] else "failed"
            hidden = " (hidden)" if t["hidden"] else ""
            msg = "" if t["passed"] or not t["message"] else ": " + " | ".join(t["message"].splitlines())
            lines.append(f"  {mark} {t['test']}{hidden}{msg}")
    for k in ("timeout", "crashed", "error"):
        if k in rec:
            lines.append(f"{k}: {rec[k]}")
    return "\n".join(lines) + "\n"


def read_sheet(path: Path, columns: list[str]) -> list[dict]:
    """The rows already in a grade sheet (none if it does not exist); a sheet of other columns is an error."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != columns:
            raise AssignmentError(f"{path} has the columns {reader.fieldnames}, not {columns}: it is the sheet of "
                                  "another assignment; give another --out")
        return list(reader)


def write_sheet(path: Path, columns: list[str], rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    w.writeheader()
    w.writerows(rows)
    write_text(path, buf.getvalue())


def feedback_name(key: str) -> str:
    return re.sub(r"[^\w.-]+", "_", key.lstrip("./")) + ".txt"


def grade_many(name: str, paths: Sequence[Path], out: Path, feedback: Optional[Path] = None, timeout: float = 600,
               dist: Path = DIST_DIR, on_row: Optional[Callable[[dict], None]] = None) -> list[dict]:
    """Grade every submission under `paths` that `out` does not already have a row for; returns all rows."""
    name = full_name(name)
    subs = find_submissions(paths)
    zip_path = ensure_autograder(name, dist)
    points, manual = question_points(zip_path), manual_points(name)
    cols = columns(points, manual)
    out = Path(out)
    rows = read_sheet(out, cols)
    done = {r["submission"] for r in rows}
    for sub in subs:
        key = str(sub)
        if key in done:
            continue
        rec = grade_one(name, zip_path, sub, timeout)
        r = row(key, rec, points)
        if feedback is not None:
            write_text(Path(feedback) / feedback_name(key), feedback_text(key, rec, r, points, manual))
        rows.append(r)
        done.add(key)
        write_sheet(out, cols, rows)
        if on_row:
            on_row(r)
    if not out.exists():
        write_sheet(out, cols, rows)
    return rows


def add_parser(ssub) -> None:
    """The `assignments grade` subcommand's arguments."""
    sr = ssub.add_parser("grade", help="the autograder: visible and hidden tests on submissions, a grade sheet",
                         description="grade ASSIGNMENT PATH... (a1..a4 or the full name; notebooks, folders, otter "
                                     "zips) into a CSV grade sheet; or grade NOTEBOOK for one notebook's score")
    sr.add_argument("args", nargs="+", metavar="ASSIGNMENT PATH", help="the assignment, then the submissions")
    sr.add_argument("--out", type=Path, default=Path("grades.csv"), help="the grade sheet (default grades.csv); "
                    "rows already in it are kept and not graded again")
    sr.add_argument("--feedback", type=Path, default=None, help="a folder for one feedback file per submission")
    sr.add_argument("--timeout", type=float, default=600, help="seconds per submission (default 600)")
    sr.add_argument("--dist", type=Path, default=None, help="where the autograders are (default dist/assignments)")
    sr.set_defaults(run=command)


def command(a) -> int:
    """`assignments grade`: the grade sheet of ASSIGNMENT PATH..., or one notebook's scores (`grade NOTEBOOK`)."""
    from .assignments import assignment_name

    dist = a.dist or DIST_DIR
    first, paths = a.args[0], [Path(p) for p in a.args[1:]]
    if a.timeout <= 0:
        raise AssignmentError(f"--timeout must be positive, got {a.timeout:g}")
    if not paths and Path(first).is_file():  # one notebook: its scores on stdout
        name = assignment_name(Path(first))
        zip_path = ensure_autograder(name, dist)
        points, manual = question_points(zip_path), manual_points(name)
        r = row(first, grade_one(name, zip_path, Path(first), a.timeout), points)
        for q in ordered(points, manual):
            print(f"{q}: {r[q]} / {points[q]:g}" if q in points else f"{q}: manual / {manual[q]:g}")
        print(f"total: {r['total']} / {r['possible']}" + ("" if r["status"] == "ok" else f"\nstatus: {r['status']}"))
        return 0
    if not paths:
        raise AssignmentError(f"give the submissions to grade after the assignment: grade {first} PATH...")
    rows = grade_many(first, paths, a.out, a.feedback, a.timeout, dist,
                      on_row=lambda r: print(f"{r['submission']}: {r['total']} / {r['possible']} {r['status']}"))
    print(f"{len(rows)} rows in {a.out}")
    return 0
