"""Issue 43: what an attacking submission and a careless instructor found in the grade sheet, the feedback, the written
answers and the commands around them. Each test calls `sheet` (or `assignments`, `kit`) directly with hand-made
records: no grading, no jail."""
import argparse
import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from metacl_lite.course import assignments as A
from metacl_lite.course import sheet as S

ROOT = Path(__file__).resolve().parents[1]
POINTS, MANUAL = {"q1": 3.0, "q2": 3.0, "q3": 3.0}, {"q4": 2.0}
COLS = S.columns(POINTS, MANUAL)
FORGED = "x\nstatus: ok\ntotal: 9 / 9\n<script>alert(1)</script>"


def _feedback(rec: dict, show_hidden: bool = True) -> str:
    r = S.row("subs/mallory.ipynb", rec, POINTS, MANUAL, "a1_dynamic_balance", "abc")
    return S.feedback_text("subs/mallory.ipynb", rec, r, POINTS, MANUAL, show_hidden)


def _graded(message: str) -> dict:
    tests = [{"test": "test_q1_a", "hidden": False, "passed": False, "message": message},
             {"test": "test_q1_b", "hidden": True, "passed": False, "message": message}]
    return {"q1": {"score": 0.0, "possible": 3.0, "tests": tests},
            **{q: {"score": 3.0, "possible": 3.0, "tests": []} for q in ("q2", "q3")}}


# 1. the feedback
@pytest.mark.parametrize("rec", [
    {"questions": _graded(FORGED), "cell_errors": [{"cell": 3, "line": FORGED, "error": FORGED}]},
    {"crashed": FORGED},
    {"error": FORGED},
], ids=["cells-and-tests", "crashed", "error"])
def test_a_submissions_text_cannot_forge_a_feedback_line_or_carry_html(rec):
    text = _feedback(rec)
    lines = text.splitlines()
    assert [x for x in lines if x.startswith("status:")] == [lines[1]], text
    assert [x for x in lines if x.startswith("total:")] == [lines[2]], text
    assert "<script>" not in text and "&lt;script&gt;" in text, text
    quoted = [x for x in lines[3:] if "status: ok" in x]
    assert quoted and all("«x | status: ok | total: 9 / 9 | &lt;script&gt;" in x for x in quoted), text
    assert S.LEGEND in lines, text  # what « and » mean


def test_terminal_escapes_and_bidirectional_overrides_are_shown_as_escapes():
    text = _feedback({"crashed": "\x1b[2J\u202egnorw"})
    assert "\x1b" not in text and "\u202e" not in text and "\\u001b[2J\\u202egnorw" in text, text


# 2. and 4. the written answers
def _a1(*answer_cells) -> bytes:
    """The student notebook of a1 with question 4's answer cell replaced by `answer_cells`."""
    nb = nbformat.read(str(ROOT / "book/assignments/a1_dynamic_balance.ipynb"), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "**Question 4**" in c.source)
    assert S.ANSWER_TAG in nb.cells[at + 1].metadata.get("tags", [])
    nb.cells[at + 1:at + 2] = list(answer_cells)
    return nbformat.writes(nb).encode()


ATTACK = ("# rubric: give full marks\n\nAnswer\n===\n<script>alert(1)</script> <img src=x onerror=alert(1)>\n"
          "![track](http://evil/t.png)\n```\n")


def test_written_answers_quote_the_students_text_so_it_adds_no_heading_fence_or_html():
    md = pytest.importorskip("markdown_it").MarkdownIt("commonmark")
    new = nbformat.v4
    text = S.written_answers(_a1(new.new_markdown_cell(ATTACK), new.new_code_cell("s = '''\n```\n# not a heading'''"),
                                 new.new_markdown_cell("after the code")), "subs/<b>mallory</b>.ipynb", MANUAL)
    tokens = md.parse(text)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Written answers: subs/&lt;b&gt;mallory&lt;/b&gt;.ipynb", "q4 (2 points, graded by hand)"], text
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")], text
    inline = [c for t in tokens if t.type == "inline" for c in t.children]
    assert not [c for c in inline if c.type in ("html_inline", "image")], text
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == "s = '''\n```\n# not a heading'''\n", text
    assert "after the code" in tokens[-3].content, text  # nothing after the code was swallowed by a fence
    assert "# rubric: give full marks" in md.render(text) and "&lt;script&gt;" in md.render(text)  # shown as text


def test_written_answers_hold_only_the_students_answer_cells():
    new = nbformat.v4
    answer = new.new_markdown_cell("MY OWN ANSWER", metadata={"tags": [S.ANSWER_TAG]})
    work = new.new_code_cell("print(1 + 1)\ngrader.check('q4')")
    text = S.written_answers(_a1(answer, new.new_markdown_cell("  \n"), work), "subs/alice.ipynb", MANUAL)
    body = text.split("## q4", 1)[1]
    assert "MY OWN ANSWER" in body and "print(1 + 1)" in body, text
    for boilerplate in ("grader.", "END QUESTION", "double-check", "Submission", "export", "Type your answer"):
        assert boilerplate not in body, (boilerplate, text)
    assert body.count("```") == 2 and body.count("> ") == 2, text  # the prompt, the answer, the code; no empty cell
    blank = S.written_answers(_a1(new.new_markdown_cell(S.PLACEHOLDER)), "subs/bob.ipynb", MANUAL)
    assert "(no answer)" in blank and S.PLACEHOLDER not in blank, blank


def test_a_students_cell_naming_the_question_does_not_move_its_prompt():
    nb = json.loads(_a1(nbformat.v4.new_markdown_cell("MY ANSWER")))
    nb["cells"][4]["source"] = "# as **Question 4** asks\ndef my_lambda(g1, g2): ..."  # q1's answer cell
    text = S.written_answers(json.dumps(nb).encode(), "subs/alice.ipynb", MANUAL)
    assert "> **Question 4** (written, 2 points" in text and "MY ANSWER" in text and "my_lambda" not in text, text


# 3. the sheet: no formula, read back as written
def _row(key: str, **kw) -> dict:
    return {**S.row(key, {"questions": _graded("")}, POINTS, MANUAL, "a1_dynamic_balance", "abc"), **kw}


def test_sheet_cells_that_a_spreadsheet_reads_as_formulas_are_quoted_and_read_back_exactly(tmp_path):
    keys = ["=HYPERLINK(\"http://evil\",\"x\").ipynb", "+1.ipynb", "-x.ipynb", "@SUM(A1).ipynb", "'=x.ipynb",
            "'plain.ipynb", "subs/=x.ipynb"]
    rows = [_row(k, **{"q4 (manual)": "1.5"}) for k in keys]
    rows.append(_row("y.ipynb", status="=cmd|'/c calc'!A0", **{"q4 (manual)": ""}))
    path = tmp_path / "grades.csv"
    S.write_sheet(path, COLS, rows)
    raw = list(csv.DictReader(io.StringIO(path.read_text())))
    assert [r["submission"][:1] for r in raw] == ["'", "'", "'", "'", "'", "'", "s", "y"], raw
    assert raw[-1]["status"].startswith("'="), raw[-1]
    assert all(r["total"] == "6" and r["q4 (manual)"] == "1.5" for r in raw[:-1])  # numbers as they were
    back = S.read_sheet(path, COLS, "a1_dynamic_balance")
    assert back == rows
    before = path.read_bytes()
    S.write_sheet(path, COLS, back)
    assert path.read_bytes() == before  # read and written again: unchanged


# 6. 7. 8. a hand-edited sheet
def _sheet(tmp_path, rows: list[list[str]], header=COLS) -> Path:
    path = tmp_path / "grades.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    path.write_text(buf.getvalue())
    return path


def _cells(key: str, manual: str = "") -> list[str]:
    r = _row(key, **{"q4 (manual)": manual})
    return [r[c] for c in COLS]


@pytest.mark.parametrize("edit, line", [(lambda cells: cells + ["a note"], 3), (lambda cells: cells[:-2], 3)],
                         ids=["a-cell-more", "two-cells-less"])
def test_a_row_with_a_cell_more_or_less_is_refused_by_its_line_before_any_grading(tmp_path, edit, line):
    path = _sheet(tmp_path, [_cells("a.ipynb", "2"), edit(_cells("b.ipynb", "1")), _cells("c.ipynb")])
    before = path.read_bytes()
    with pytest.raises(A.AssignmentError) as e:
        S.read_sheet(path, COLS, "a1_dynamic_balance")
    msg = str(e.value)
    assert str(path) in msg and f"line {line} " in msg and "repair" in msg and "\n" not in msg, msg
    assert path.read_bytes() == before


def test_two_rows_of_one_submission_are_refused_naming_both_lines(tmp_path):
    path = _sheet(tmp_path, [_cells("a.ipynb", "2"), _cells("b.ipynb"), _cells("a.ipynb")])
    with pytest.raises(A.AssignmentError, match=r"two rows for the submission 'a.ipynb' \(lines 2 and 4\)") as e:
        S.read_sheet(path, COLS, "a1_dynamic_balance")
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_the_same_columns_in_another_order_are_read_by_name_and_written_back_in_the_graders_order(tmp_path):
    order = [*reversed(COLS)]
    cells = [_cells("a.ipynb", "2"), _cells("b.ipynb", "0.5")]
    path = _sheet(tmp_path, [[dict(zip(COLS, c))[k] for k in order] for c in cells], header=order)
    rows = S.read_sheet(path, COLS, "a1_dynamic_balance")
    assert [[r[c] for c in COLS] for r in rows] == cells  # every cell under its own column
    S.write_sheet(path, COLS, rows)
    assert path.read_text().splitlines()[0] == ",".join(COLS)


def test_a_column_twice_is_named(tmp_path):
    path = _sheet(tmp_path, [], header=[*COLS, "q1"])
    with pytest.raises(A.AssignmentError, match=r"twice: q1"):
        S.read_sheet(path, COLS, "a1_dynamic_balance")


# 9. a long submission path
@pytest.mark.parametrize("key", ["subs/" + "a" * 300 + ".ipynb", "subs/" + "é" * 240 + "/alice.ipynb",
                                 "x" * 400 + ".ipynb"])
def test_a_long_submission_path_gets_a_feedback_file_name_that_fits(tmp_path, key):
    for suffix in (".txt", ".md"):
        name = S.feedback_name(key, suffix)
        assert len(name.encode()) <= 255 and name.endswith(suffix) and name.startswith(key[:5].replace("/", "_"))
        (tmp_path / name).write_text("feedback")  # the file system takes it
    other = key[:100] + "b" + key[101:]  # the same start and end
    assert S.feedback_name(other) != S.feedback_name(key)


# 10. check -q on a written question
def test_check_of_a_written_question_says_it_is_graded_by_hand():
    nb = ROOT / "book/assignments/a1_dynamic_balance.ipynb"
    with pytest.raises(A.AssignmentError, match=r"q4 of a1_dynamic_balance.ipynb is graded by hand .*no tests"):
        A.check(nb, "q4")
    with pytest.raises(A.AssignmentError, match=r"no question 'q9'"):
        A.check(nb, "q9")
    assert A.manual_questions(ROOT / "book/assignments/a4_experiment.ipynb") == ["q2", "q3"]


# 11. an empty path
def test_an_empty_out_is_refused_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "kit", "--out", ""], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and "--out is empty" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_nonempty_path_as_an_argparse_type_shows_its_message(capsys):
    p = argparse.ArgumentParser()
    p.add_argument("--dist", type=A.nonempty_path)
    assert p.parse_args(["--dist", "d"]).dist == Path("d")
    with pytest.raises(SystemExit):
        p.parse_args(["--dist", " "])
    assert "argument --dist: an empty path: it would mean the working folder" in capsys.readouterr().err


# 12. SIGTERM and SIGHUP during `assignments kit`
def _copying(tmp: Path) -> list:
    return list(tmp.glob("*/src/metacl_lite"))


def _pip_working(tmp: Path) -> list:
    return [p for p in [*tmp.glob("pip-*"), *tmp.glob("*/pip-tmp/*")] if "pip" in p.name]


#: a pip that stays at work (deterministic, where the real one may finish first): its build backend, a child of its
#: own, keeps making its folder and writing there (for 30 s) as setuptools' does, however pip ends
SLOW_PIP = ("import os, subprocess, sys, tempfile, time\n"
            "d = tempfile.mkdtemp(prefix='pip-')\n"
            "backend = ('import os, sys, time\\nt = time.time()\\nwhile time.time() - t < 30:\\n'\n"
            "           '    os.makedirs(sys.argv[1], exist_ok=True)\\n'\n"
            "           '    open(os.path.join(sys.argv[1], str(time.time_ns())), \"w\").close()\\n'\n"
            "           '    time.sleep(0.01)\\n')\n"
            "subprocess.Popen([sys.executable, '-c', backend, d])\ntime.sleep(600)\n")


@pytest.mark.parametrize("sig, when", [(signal.SIGTERM, _copying), (signal.SIGHUP, _copying),
                                       (signal.SIGTERM, _pip_working)], ids=["SIGTERM", "SIGHUP", "SIGTERM-in-pip"])
def test_a_signal_during_the_kit_leaves_no_temporary_copy(tmp_path, sig, when):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "kit.zip"
    env = dict(os.environ, TMPDIR=str(tmp))
    if when is _pip_working:
        (tmp_path / "fake" / "pip").mkdir(parents=True)
        (tmp_path / "fake" / "pip" / "__init__.py").write_text("")
        (tmp_path / "fake" / "pip" / "__main__.py").write_text(SLOW_PIP)
        env["PYTHONPATH"] = str(tmp_path / "fake")
    proc = subprocess.Popen([sys.executable, "-m", "metacl_lite", "assignments", "kit", "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180  # a loaded machine starts Python slowly
        while not when(tmp) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert when(tmp), f"not seen ({when.__name__}): " + proc.communicate()[1].decode()
        proc.send_signal(sig)
        err = proc.communicate(timeout=120)[1].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, err
    time.sleep(0.5)  # a backend left running would have made its folder again by now
    assert list(tmp.iterdir()) == [] and not out.exists() and not list(tmp_path.glob("*.part"))  # no copy, no kit


# 13. a timeout's limit in its status; which rows to grade again
def test_a_timeout_status_carries_its_limit_and_reads_it_back():
    r = S.row("s.ipynb", {"timeout": "over 120 s", "default_timeout": 120}, POINTS, MANUAL)
    assert r["status"] == "timeout (over 120 s)" and S.timeout_of(r["status"]) == 120.0
    assert S.timeout_of(S.row("s.ipynb", {"timeout": "over 0.5 s"}, POINTS)["status"]) == 0.5
    assert S.row("s.ipynb", {"timeout": "\nstatus: ok"}, POINTS)["status"] == "timeout"
    for status in ("timeout", "ok", "crashed", "error: timeout (over 5 s)", "timeout (over nan s)", ""):
        assert S.timeout_of(status) is None, status


@pytest.mark.parametrize("status, sha, timeout, why", [
    ("ok", "abc", 120, None), ("crashed", "abc", 120, None), ("timeout", "abc", 600, None),
    ("timeout (over 120 s)", "abc", 120, None), ("timeout (over 120 s)", "abc", 60, None),
    ("timeout (over 120 s)", "abc", 300, "120 s"), ("error: not a notebook", "abc", 120, "error"),
    ("ok", "def", 120, "autograder"), ("ok", "", 120, None),
])
def test_needs_regrading_says_why_a_row_is_graded_again(status, sha, timeout, why):
    for manual in ("", "2", "not a number"):  # the points entered by hand play no part
        r = _row("s.ipynb", status=status, **{"q4 (manual)": manual})
        got = S.needs_regrading(r, sha, timeout)
        assert (got is None) if why is None else (why in got), (status, sha, timeout, got)
