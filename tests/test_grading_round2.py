"""Issue 43, grades that hold, round two: one malformed notebook is its own row and the class goes on; a FIFO, the
file system's root, a linked class folder and a zip with a notebook over the limit; rows graded again when the
grader's side failed (a shorter time limit, another autograder, a worker killed), with the points entered by hand
kept; the same class graded from another working folder; what the channel decodes is bounded; a submission's
writable places are size-limited tmpfs; a hidden test's message keeps its quotes; nothing of a submission outlives
a SIGKILL of its worker."""
import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import runs_a_submission

from metacl_lite.course import assignments as A
from metacl_lite.course import channel as C
from metacl_lite.course import grading as G
from metacl_lite.course import grading_worker as W
from metacl_lite.course import jail as J
from metacl_lite.course import sheet as S
from metacl_lite.course import userns

ROOT = Path(__file__).resolve().parents[1]
NAME = "a1_dynamic_balance"


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    for name in (NAME, "a4_experiment"):
        A.generate(name, dist, run_tests=False)
    return dist


def _sheet(path: Path) -> dict:
    with open(path, newline="") as f:
        return {Path(x["submission"]).name: x for x in csv.DictReader(f)}


def test_a_hidden_tests_message_keeps_its_quotes_and_its_lines(tmp_path):
    """otter strips a message's quotes (`'stationarity' is missing` read `stationarity' is missing`) and the worker
    kept the last three lines only."""
    test = ("OK_FORMAT = False\nname = 'q1'\npoints = 1\nfrom otter.test_files import test_case\n"
            "@test_case(points=1, hidden=True)\ndef test_q1(x):\n    assert x == 1, \"'stationarity' is missing\"\n")
    zpath = tmp_path / "ag.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("tests/q1.py", test)
    got = W.run_tests(str(zpath), {"x": 2})
    message = got["q1"]["tests"][0]["message"]
    assert message.endswith("AssertionError: 'stationarity' is missing"), message
    assert "Test case failed" not in message and message.startswith("Error at line"), message


@pytest.mark.parametrize("raw, why", [
    (b'{"cells": [], "metadata": []}', None),  # a list for metadata: the jail never reads it
    (b"[" * 100000 + b"]" * 100000, "RecursionError"),
    (b'{"cells": ["print(1)"], "metadata": {}}', "cell 1 is not a cell"),
    (b'{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1 is not a cell"),
    (b'{"cells": {}}', "no list of cells"),
    (b"\xff", "UnicodeDecodeError"),
])
def test_a_notebook_is_read_as_cells_of_text_or_refused_saying_why(raw, why):
    if why is None:
        doc = G.plain_notebook(raw)
        assert doc["cells"] == [] and doc["metadata"]["kernelspec"]["name"] == "python3"
    else:
        with pytest.raises(G.NotANotebook, match=why):
            G.plain_notebook(raw)


def test_a_fifo_is_refused_the_root_is_refused_and_a_linked_class_folder_is_followed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "a.ipynb").write_text("{}")
    os.mkfifo(tmp_path / "class" / "f.ipynb")
    (tmp_path / "link").symlink_to(tmp_path / "class")
    found = {Path(s.key).name: s.refused for s in G.find_submissions([Path("link")])}
    assert found == {"a.ipynb": None, "f.ipynb": "not a regular file (a FIFO, socket or device), not graded"}
    with pytest.raises(A.AssignmentError, match="not a regular file"):  # at once: a FIFO read would block
        G.notebook_bytes(tmp_path / "class" / "f.ipynb")
    with pytest.raises(A.AssignmentError, match="the root of the file system"):
        G.find_submissions([Path("/")])


def test_a_zip_whose_notebook_is_over_the_limit_says_so(tmp_path):
    zpath = tmp_path / "big.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.ipynb", b"{" + b" " * (G.MAX_NOTEBOOK + 1) + b"}")
    with pytest.raises(A.AssignmentError, match="its notebook big.ipynb is over 64 MB"):
        G.notebook_bytes(zpath)


def _grade_in_process(monkeypatch, dist, args, records):
    """`assignments grade` in this process, each submission's record from `records` (name -> record)."""
    from metacl_lite.cli import main

    calls = []

    def one(name, zip_path, submission, timeout, hidden=()):
        calls.append((Path(submission).name, timeout))
        return records[Path(submission).name]

    monkeypatch.setattr(G, "grade_one", one)
    assert main(["assignments", "grade", *args, "--dist", str(dist)]) == 0
    return calls


OK = {"questions": {q: {"score": 1.0, "possible": p, "tests": []} for q, p in (("q1", 3.0), ("q2", 3.0),
                                                                                ("q3", 3.0))}, "cell_errors": []}


def test_a_rerun_regrades_what_the_graders_side_failed_and_keeps_the_points_entered_by_hand(tmp_path, dists,
                                                                                             monkeypatch, capsys):
    """A timeout under a shorter limit than now, a row of another autograder and an error row are graded again, the
    manual points entered meanwhile kept; an ok row and a timeout under the same limit are not."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    for n in ("ok", "slow", "same", "old", "err"):
        (tmp_path / "c" / f"{n}.ipynb").write_text("{}")
    records = {"ok.ipynb": OK, "slow.ipynb": {"timeout": "over 1e-09 s"}, "same.ipynb": {"timeout": "over 120 s"},
               "old.ipynb": OK, "err.ipynb": {"error": "boom"}}
    _grade_in_process(monkeypatch, dists, ["a1", "c", "--out", "g.csv", "--timeout", "1e-9"], records)
    rows = list(_sheet(tmp_path / "g.csv").values())
    for r in rows:
        if r["submission"].endswith("same.ipynb"):
            r["status"] = "timeout (over 120 s)"
        if r["submission"].endswith("old.ipynb"):
            r["autograder_sha256"] = "0" * 64
    S.write_sheet(tmp_path / "g.csv", list(rows[0]), rows)
    records = {k: OK for k in records}
    calls = _grade_in_process(monkeypatch, dists, ["a1", "c", "--out", "g.csv", "--timeout", "120"], records)
    assert sorted(c[0] for c in calls) == ["err.ipynb", "old.ipynb", "slow.ipynb"], calls
    assert "1 rows of g.csv were graded by another autograder" in capsys.readouterr().err
    assert {k: r["status"] for k, r in _sheet(tmp_path / "g.csv").items()} == {
        "ok.ipynb": "ok", "slow.ipynb": "ok", "same.ipynb": "timeout (over 120 s)", "old.ipynb": "ok",
        "err.ipynb": "ok"}


def test_a_regraded_row_keeps_its_manual_points(tmp_path, dists, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "s.ipynb").write_text("{}")
    _grade_in_process(monkeypatch, dists, ["a4", "c", "--out", "g.csv"], {"s.ipynb": {"error": "boom"}})
    rows = list(_sheet(tmp_path / "g.csv").values())
    rows[0]["q2 (manual)"], rows[0]["q3 (manual)"] = "3", "4"
    S.write_sheet(tmp_path / "g.csv", list(rows[0]), rows)
    done = {"questions": {"q1": {"score": 4.0, "possible": 4.0, "tests": []}}, "cell_errors": []}
    _grade_in_process(monkeypatch, dists, ["a4", "c", "--out", "g.csv"], {"s.ipynb": done})
    row = _sheet(tmp_path / "g.csv")["s.ipynb"]
    assert (row["q1"], row["q2 (manual)"], row["q3 (manual)"], row["status"]) == ("4", "3", "4", "ok")


def test_the_same_class_graded_from_another_working_folder_finds_its_rows(tmp_path, dists, monkeypatch):
    course = tmp_path / "course"
    (course / "subs").mkdir(parents=True)
    (course / "subs" / "s.ipynb").write_text("{}")
    monkeypatch.chdir(course)
    _grade_in_process(monkeypatch, dists, ["a1", "subs", "--out", "grades.csv"], {"s.ipynb": OK})
    monkeypatch.chdir(tmp_path)
    calls = _grade_in_process(monkeypatch, dists, ["a1", "course/subs", "--out", "course/grades.csv"],
                              {"s.ipynb": OK})
    assert calls == [] and list(_sheet(course / "grades.csv")) == ["s.ipynb"]


@pytest.mark.slow
def test_one_malformed_notebook_is_its_own_row_and_the_class_goes_on(tmp_path, dists, monkeypatch):
    """A notebook whose metadata is a list (the grader exited with a TypeError), one nested too deeply
    (RecursionError), one with a cell that is a plain string (AttributeError with --answers) and a FIFO."""
    monkeypatch.chdir(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "meta_list.ipynb").write_text('{"cells": [], "metadata": []}')
    (subs / "nested.ipynb").write_bytes(b"[" * 100000 + b"]" * 100000)
    (subs / "string_cell.ipynb").write_text('{"cells": ["**Question 2** my answer"], "metadata": {}}')
    os.mkfifo(subs / "fifo.ipynb")
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "grade", "a4", "subs", "--out", "g.csv",
                        "--dist", str(dists), "--answers", "answers", "--timeout", "120"], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, METACL_LITE_PROGRESS="0"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {k: (v["total"], v["status"]) for k, v in _sheet(tmp_path / "g.csv").items()}
    assert rows == {
        "fifo.ipynb": ("0", "error: not a regular file (a FIFO, socket or device), not graded"),
        "meta_list.ipynb": ("0", "ok"),
        "nested.ipynb": ("0", "error: not a Jupyter notebook (RecursionError)"),
        "string_cell.ipynb": ("0", "error: not a Jupyter notebook (cell 1 is not a cell with a type and a text "
                                   "source)")}, rows
    assert len(list((tmp_path / "answers").iterdir())) == 3


def test_what_the_channel_decodes_is_bounded(tmp_path):
    """A flood of small lists, a network named by its sizes, nesting, landed files: each refused before it costs
    the worker its memory or disk."""
    flood = json.dumps({"value": [[]] * (C.MAX_ITEMS + 1)}).encode()
    with pytest.raises(C.ChannelError, match="lists, objects and items"):
        C.loads(flood)
    with pytest.raises(C.ChannelError, match="nested too deeply"):
        C.loads(b'{"v": ' + b"[" * 100000 + b"]" * 100000 + b"}")
    huge = {"in_dim": 65536, "hidden": [65536, 65536], "n_classes": 10, "n_heads": 1, "activation": "relu",
            "state": {}}
    with pytest.raises(C.ChannelError, match="parameters"):
        C.module_from_spec(huge)
    with pytest.raises(C.ChannelError, match="at most 64"):
        C.module_from_spec(dict(huge, hidden=[1] * 65))
    import base64

    body = base64.b64encode(b"x" * (C.MAX_FILE // 2)).decode()
    landing = tmp_path / "landing"
    for i in range(C.MAX_LANDED // (C.MAX_FILE // 2)):
        C.decode({"file": [f"f{i}", body]}, landing=landing)
    with pytest.raises(C.ChannelError, match="in all"):
        C.decode({"file": ["one-more", body]}, landing=landing)
    assert C.landed(landing) == C.MAX_LANDED


def test_the_worker_limits_its_own_memory():
    code = ("from metacl_lite.course import grading_worker as W\nW.limit_memory()\n"
            "try:\n    b = bytearray(W.WORKER_DATA_BYTES + 2 ** 30)\nexcept MemoryError:\n    print('refused')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "refused", r.stdout + r.stderr


@pytest.mark.slow
def test_sigkill_of_the_worker_leaves_nothing_and_its_row_is_graded_again(tmp_path, dists):
    """The worker killed (the out-of-memory killer's SIGKILL) while a looping submission runs in a new session with
    a thread that is no daemon: no process of the submission is left once grade_one returns, and the row is an
    error (the grader's side), graded again on a rerun, not the student's `crashed`."""
    import psutil

    nb = nbformat.read(str(ROOT / "book/assignments" / f"{NAME}.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import os, subprocess, threading, time\n"
        "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "threading.Thread(target=time.sleep, args=(600,)).start()\n"
        "while True:\n    pass\n"))
    nbformat.write(nb, str(tmp_path / "loop.ipynb"))
    zip_bytes = A.autograder_zip(NAME, dists).read_bytes()
    out = {}
    t = threading.Thread(target=lambda: out.update(G.grade_one(NAME, zip_bytes, tmp_path / "loop.ipynb", 300)))
    t.start()
    deadline, uid = time.monotonic() + 120, None
    while uid is None and time.monotonic() < deadline:
        time.sleep(0.5)
        for p in psutil.process_iter(["uids", "cmdline"]):
            if runs_a_submission(p) and "sleep" in (p.info["cmdline"] or []):
                uid, ns = p.info["uids"].real, userns.pid_namespace(str(p.pid))
    assert uid is not None, "the submission never started"
    worker = [p for p in psutil.process_iter(["cmdline"]) if "metacl_lite.course.grading_worker" in
              " ".join(p.info["cmdline"] or []) and p.ppid() == os.getpid()]
    assert len(worker) == 1, worker
    worker[0].send_signal(signal.SIGKILL)
    t.join(120)
    assert not t.is_alive()
    left = [p.info["cmdline"] for p in psutil.process_iter(["uids", "cmdline"])  # its jail's, and as root its uid's
            if userns.pid_namespace(str(p.pid)) == ns or (J.UID_BASE <= uid < J.UID_BASE + J.UID_SPAN
                                                                   and p.info["uids"].real == uid)]
    assert left == [], left
    assert out.get("error", "").startswith("the grader's worker ended without a result"), out


@pytest.mark.slow
def test_what_a_submission_writes_stays_in_its_own_limited_memory(tmp_path, dists):
    """3 GiB written into the scratch folder reached the grading machine's disk: the scratch folder is a tmpfs of
    `scratch_size`, and a flood of error output is kept as its last 8 KiB."""
    nb = nbformat.read(str(ROOT / "book/assignments" / f"{NAME}.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys\nsys.__stderr__.write('x' * (64 * 2 ** 20))\nsys.__stderr__.flush()\n"
        "with open('big', 'wb') as f:\n    for i in range(2048):\n        f.write(b'x' * 2 ** 20)\n"))
    nbformat.write(nb, str(tmp_path / "hog.ipynb"))
    zip_bytes = A.autograder_zip(NAME, dists).read_bytes()
    rec = G.grade_one(NAME, zip_bytes, tmp_path / "hog.ipynb", 300)
    errors = [e["error"] for e in rec["cell_errors"]]
    assert any("No space left on device" in e for e in errors), rec


def test_a_full_temporary_folder_while_the_package_is_copied_is_one_error_not_a_list(tmp_path, monkeypatch):
    """A TMPDIR of a few MiB ended in a 40-line shutil.Error (copytree gathers each file's error): it is the one
    ENOSPC that grade_many turns into its one-line message."""
    import errno
    import shutil

    def full(src, dst, **kw):
        raise shutil.Error([(str(src), str(dst), "[Errno 28] No space left on device")] * 40)

    monkeypatch.setattr(shutil, "copytree", full)
    with pytest.raises(OSError) as e:
        G._package_copy(tmp_path, NAME)
    assert e.value.errno == errno.ENOSPC and not isinstance(e.value, shutil.Error)


@pytest.mark.parametrize("args", [["assignments", "generate", "a1", "--dist", ""],
                                  ["assignments", "grade", "a1", "x.ipynb", "--dist", " "],
                                  ["assignments", "grade", "a1", "x.ipynb", "--out", ""]])
def test_an_empty_path_option_is_refused_not_taken_for_the_working_folder(args, tmp_path, monkeypatch, capsys):
    """`--dist ''` wrote the solution notebook into the working folder (the checkout's root)."""
    from metacl_lite.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.ipynb").write_text("{}")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "is empty: it would mean the working folder" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.ipynb"]
