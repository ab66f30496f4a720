"""Misuse, round five (issue 37): the lab's files, the recorded command, the lock, Ctrl-C, the output encoding, the
maintainers' tools and an installed copy. Each test fails without its fix."""
from __future__ import annotations

import errno
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from metacl_lite import cli
from metacl_lite.cli import main
from metacl_lite.errors import ConfigMismatch, FileFormatError, LockedError, OutputError
from metacl_lite.lab import atomic
from metacl_lite.lab import dynamics as D
from metacl_lite.lab import grid as G
from metacl_lite.lab import provenance
from metacl_lite.lab.executors import check_plan
from metacl_lite.paths import REPO_ROOT
from metacl_lite.tools import main as tools_main

RUN = ["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--no-progress", "--workers", "1",
       "--methods", "finetune"]
TINY = dict(K=5, n_tasks=2, epochs=1, show_progress=False)
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "METACL_LITE_PROGRESS": "0"}


def _results(tmp_path, name="r.json") -> Path:
    """A small results file made by the real store (units faked by `fake_units`)."""
    out = tmp_path / name
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, plan=check_plan("local", 1, 1), **TINY)
    return out


# ----------------------------------------------------------------------------------------------------------------
# dynamics: the CPU and thread checks of run and tune
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_dynamics(monkeypatch):
    """Dynamics units without training; torch's thread count put back afterwards (measure sets it)."""
    import torch

    trained = []

    def unit(benchmark, kind, stream, method, seed, bench=None):
        trained.append(f"{kind}/{method}/{seed}")
        log = [[0, float(seed)]] if kind == "speed" else [[0, 1.0, None, 0.0]]
        return {D.RECORDS[kind][1]: log, "final_acc": 50.0, "wall_s": 1.0}

    monkeypatch.setattr(D, "train_unit", unit)
    monkeypatch.setattr("metacl_lite.data.benchmarks.make_benchmark", lambda *a, **k: None)
    before = torch.get_num_threads()
    yield trained
    torch.set_num_threads(before)


def test_dynamics_refuses_units_from_a_cpu_that_rounds_otherwise_or_another_thread_count(tmp_path, fake_dynamics,
                                                                                         monkeypatch):
    out = tmp_path / "d.json"
    D.measure([0], out=out, threads=1)
    first = out.read_bytes()
    n = len(fake_dynamics)
    real = provenance.cpu_kernels()
    monkeypatch.setattr(provenance, "cpu_kernels", lambda: {**real, "capability": "AVX2-elsewhere"})
    with pytest.raises(ConfigMismatch, match=r"cpu_kernels\.capability: .* in the file, 'AVX2-elsewhere' here"):
        D.measure([1], out=out, threads=1)
    monkeypatch.setattr(provenance, "cpu_kernels", lambda: real)
    with pytest.raises(ConfigMismatch, match=r"threads: 1 in the file, 2 here"):
        D.measure([1], out=out, threads=2)
    assert out.read_bytes() == first and len(fake_dynamics) == n  # refused before any unit
    doc = json.loads(first)
    del doc["config"]["threads"]  # a file made before the count was recorded (the committed one): one thread
    out.write_text(json.dumps(doc))
    D.measure([1], out=out, threads=1)
    assert D.load_dynamics(out)["config"]["seeds"] == [0, 1]


@pytest.mark.parametrize("kernels", ["AVX512", ["AVX512"], 3])
def test_a_cpu_kernels_record_that_is_not_an_object_is_refused_as_corrupt(kernels, tmp_path, hparams_file,
                                                                         fake_units, fake_dynamics, capsys):
    """`run` skipped the CPU check for a string or a list; now every writer refuses the file before any unit."""
    out = _results(tmp_path)
    doc = json.loads(out.read_text())
    doc["provenance"]["invocations"][0]["cpu_kernels"] = kernels
    out.write_text(json.dumps(doc))
    n = len(fake_units)
    assert main(RUN + ["--seed-list", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"provenance.invocations[0] is corrupt (cpu_kernels is {kernels!r}" in err and len(fake_units) == n
    dyn = tmp_path / "d.json"
    D.measure([0], out=dyn, threads=1)
    doc = json.loads(dyn.read_text())
    doc["provenance"]["invocations"][0]["cpu_kernels"] = kernels
    dyn.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match="cpu_kernels is"):
        D.measure([1], out=dyn, threads=1)


# ----------------------------------------------------------------------------------------------------------------
# The recorded command, --out, --seeds, --redo
# ----------------------------------------------------------------------------------------------------------------
def test_the_recorded_command_reruns_with_an_out_path_that_has_spaces(tmp_path, hparams_file, fake_units,
                                                                     fake_dynamics):
    out = tmp_path / "dir with spaces" / "x.json"
    assert main(RUN + ["--seeds", "1", "--out", str(out)]) == 0
    recorded = json.loads(out.read_text())["provenance"]["command"]
    argv = shlex.split(recorded)
    assert argv[:3] == ["python", "-m", "metacl_lite"] and cli.build_parser().parse_args(argv[3:]).out == out
    n = len(fake_units)
    assert main(argv[3:]) == 0 and len(fake_units) == n  # the same file: nothing left to train
    dyn = tmp_path / "logs here" / "d.json"
    D.measure([0], out=dyn, threads=1)
    argv = shlex.split(D.load_dynamics(dyn)["provenance"]["command"])
    assert cli.build_parser().parse_args(argv[3:]).out == dyn


@pytest.mark.parametrize("cmd", [RUN, ["tune", "--benchmark", "pmnist"], ["dynamics"]])
def test_an_out_that_names_a_folder_is_refused(cmd, tmp_path, capsys, fake_units):
    with pytest.raises(SystemExit) as e:
        main(cmd + ["--out", f"{tmp_path}/newdir/"])
    assert e.value.code == 2 and "names a folder" in capsys.readouterr().err
    assert not (tmp_path / "newdir").exists() and fake_units == []


@pytest.mark.parametrize("cmd", [RUN, ["dynamics"]])
@pytest.mark.parametrize("n", ["1000000000000", "10000000", "1001"])
def test_seed_counts_are_capped_before_anything_is_allocated(cmd, n, capsys):
    with pytest.raises(SystemExit) as e:
        main(cmd + ["--seeds", n])
    assert e.value.code == 2 and f"--seeds {n}: at most 1000 seeds" in capsys.readouterr().err


def test_an_empty_redo_names_redo(capsys):
    with pytest.raises(SystemExit) as e:
        main(RUN + ["--redo", ""])
    err = capsys.readouterr().err.splitlines()[-1]  # below the usage lines
    assert e.value.code == 2 and "--redo takes a comma-separated list" in err and "--methods" not in err


# ----------------------------------------------------------------------------------------------------------------
# Reading files: keys given twice, accuracies, null units (pages), README blocks
# ----------------------------------------------------------------------------------------------------------------
def test_a_key_given_twice_is_refused_and_so_is_an_accuracy_beyond_100(tmp_path, hparams_file, fake_units, capsys):
    out = _results(tmp_path)
    text = out.read_text()
    doc = json.loads(text)
    row = json.dumps(doc["runs"]["finetune/0"])
    edited = row.replace("50.0", "90.0")
    twice = text.replace('"runs": {', '"runs": {\n  "finetune/0": ' + edited + ",", 1)
    assert twice.count('"finetune/0"') == 2 and json.loads(twice)["runs"]["finetune/0"] == doc["runs"]["finetune/0"]
    out.write_text(twice)
    assert main(["table", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds the key 'finetune/0' twice" in err and "90.0" not in err
    doc["runs"]["finetune/0"]["acc_matrix"][0][0] = 190.0
    out.write_text(json.dumps(doc))
    assert main(["table", str(out)]) == 2
    assert "acc_matrix[0][0] is 190.0, not an accuracy in percent (0 to 100)" in capsys.readouterr().err
    tuning = tmp_path / "t.json"
    tuning.write_text('{"kind": "tuning", "grid": {}, "chosen": {}, "chosen": {"ewc": 1}}')
    from metacl_lite.lab.store import load

    with pytest.raises(FileFormatError, match="holds the key 'chosen' twice"):
        load(tuning, "tuning")


def _results_folder(tmp_path, monkeypatch) -> Path:
    """A copy of results/ that the pages tool reads instead of the committed one (the pages are never written)."""
    from metacl_lite.publish import pages
    from metacl_lite.tools import commands as C

    shutil.copytree(REPO_ROOT / "results", tmp_path / "results")
    monkeypatch.setattr(C, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(pages, "write_pages", lambda check=False: pytest.fail("pages written from a corrupt file"))
    return tmp_path / "results"


@pytest.mark.parametrize("name, section, key", [("pmnist-K20.json", "runs", "finetune/0"),
                                                ("tuning-pmnist-K20.json", "units", None),
                                                ("dynamics-pmnist.json", "speed", "metacl/0")])
def test_pages_refuses_a_file_with_a_null_unit_before_stamping_its_hash(name, section, key, tmp_path, monkeypatch,
                                                                       capsys):
    results = _results_folder(tmp_path, monkeypatch)
    doc = json.loads((results / name).read_text())
    units = doc["runs"][section] if name.startswith("dynamics") else doc[section]
    key = key or next(iter(units))
    units[key] = None
    (results / name).write_text(json.dumps(doc))
    assert tools_main(["pages", "--check"]) == 2
    err = capsys.readouterr().err
    assert f"{results / name}: unit " in err and f"/{key} is corrupt (it is None, not an object)" in err, err


def test_the_committed_results_pass_the_pages_check():
    from metacl_lite.tools.commands import check_stamped_files

    check_stamped_files()  # a stricter reader still accepts every committed file


def test_the_readme_must_hold_every_expected_block(tmp_path, monkeypatch, capsys):
    from metacl_lite.publish import readme as R

    text = (REPO_ROOT / "README.md").read_text()
    for kind, source in R.EXPECTED_BLOCKS:  # the list names the committed README's blocks
        assert f"<!-- BEGIN {kind} {source} -->\n" in text
    lost = text.replace("<!-- BEGIN table results/pmnist-K20.json -->\n", "").replace("<!-- END table -->\n", "")
    (tmp_path / "README.md").write_text(lost)
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path)
    assert tools_main(["readme", "--check"]) == 2
    err = capsys.readouterr().err
    assert "has no block <!-- BEGIN table results/pmnist-K20.json -->" in err and "Traceback" not in err
    assert (tmp_path / "README.md").read_text() == lost


def test_readme_in_a_read_only_checkout_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    from metacl_lite.publish import readme as R

    shutil.copy(REPO_ROOT / "README.md", tmp_path / "README.md")
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path)

    def read_only(*a, **k):  # what a read-only mount answers (root passes os.access everywhere)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomic.tempfile, "mkstemp", read_only)
    monkeypatch.setattr(R, "_claims_body", lambda b: pytest.fail("computed before the write check"))
    assert tools_main(["readme"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {tmp_path / 'README.md'}: nothing can be created") and \
        "Read-only file system" in err and "--check" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------------
# The lock: a folder, a holder named, a visible wait
# ----------------------------------------------------------------------------------------------------------------
def test_a_lock_that_is_a_folder_is_refused_before_any_unit(tmp_path, hparams_file, fake_units, capsys):
    out = tmp_path / "r.json"
    (tmp_path / "r.json.lock").mkdir()
    assert main(RUN + ["--seeds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "its lock file" in err and "is a directory" in err and "Traceback" not in err and fake_units == []
    with pytest.raises(OutputError, match="is a directory"):
        with atomic.locked(out):
            pass


def test_a_process_waiting_for_a_lock_says_who_holds_it_and_waits_visibly(tmp_path, capsys):
    path = tmp_path / "f.json"
    got = []
    with atomic.locked(path):
        with pytest.raises(LockedError, match=rf"f.json is being written by another process \(pid {os.getpid()}: "):
            with atomic.locked(path, timeout=0.3):
                pass
        capsys.readouterr()
        waiter = threading.Thread(target=lambda: [got.append(1) for _ in [atomic.locked(path).__enter__()]])
        waiter.start()
        deadline = time.time() + 60
        err = ""
        while "waiting for" not in err and time.time() < deadline:
            time.sleep(0.05)
            err += capsys.readouterr().err
        assert f"waiting for {path}: another process (pid {os.getpid()}: " in err and got == []
    waiter.join(timeout=60)
    assert got == [1] and "is free again" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------------
# Ctrl-C
# ----------------------------------------------------------------------------------------------------------------
DRIVER = textwrap.dedent("""
    import runpy, sys
    target, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]

    class CtrlC:  # Ctrl-C lands while `target` is imported
        def find_spec(self, name, path=None, target_=None):
            if name == target:
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
""")


@pytest.mark.parametrize("target, module, args", [
    ("metacl_lite.cli.commands", "metacl_lite", RUN),  # python -m metacl_lite importing its command line
    ("metacl_lite.lab.dynamics", "metacl_lite", RUN),  # building the parser
    ("metacl_lite.lab.grid", "metacl_lite", RUN),  # the command importing torch and the lab
    ("metacl_lite.tools.commands", "metacl_lite.tools", ["where"]),
])
def test_ctrl_c_in_the_first_moments_of_a_command_prints_no_traceback(target, module, args, tmp_path):
    (tmp_path / "driver.py").write_text(DRIVER)
    r = subprocess.run([sys.executable, str(tmp_path / "driver.py"), target, module, *args, "--out",
                        str(tmp_path / "r.json")][:None if module == "metacl_lite" else -2], capture_output=True,
                       text=True, env=ENV, timeout=300, cwd=tmp_path)
    assert r.returncode == 130 and "interrupted" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("delivered", ["to the process", "to another thread"])
def test_a_second_ctrl_c_while_the_workers_stop_is_ignored(tmp_path, delivered):
    """A second press that lands after the first was raised but before the workers are stopped (on a loaded machine
    the gap is long) used to skip stopping them: the exit then hung in their join. Here it lands there for sure.

    The first press is also handed to a thread other than the main one (a kernel may do so: the CI's did, twice): the
    handler only runs when the main thread wakes, and a wait for the units without a timeout slept until a unit ended
    (here 300 s). A stack dump of every thread ends the script if it hangs all the same, to say where.

    The script takes Ctrl-C as a terminal's foreground job does: a test runner started in the background (CI) passes
    on an ignored SIGINT, which Python keeps and `run_all` rightly leaves alone, so the press did nothing and the grid
    ran on: that, not the machine's load, was the CI's hang."""
    press = ("os.kill(os.getpid(), signal.SIGINT)" if delivered == "to the process"
             else "signal.pthread_kill(threading.get_ident(), signal.SIGINT)")
    script = textwrap.dedent(f"""
        import faulthandler, os, signal, sys, threading, time
        faulthandler.dump_traceback_later(150, exit=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (see the docstring)
        from metacl_lite.lab import executors as X
        def unit(job):
            with open({str(tmp_path)!r} + "/.pid" + str(job), "w") as f:
                f.write(str(os.getpid()))
            os.replace({str(tmp_path)!r} + "/.pid" + str(job), {str(tmp_path)!r} + "/pid" + str(job))  # whole
            time.sleep(300)
        real_stop = X._stop_pool
        def stop_after_a_second_press(pool):
            signal.raise_signal(signal.SIGINT)  # the second press, before the workers are ended
            real_stop(pool)
        X._stop_pool = stop_after_a_second_press
        def press():  # the first press, once both units run
            while len([f for f in os.listdir({str(tmp_path)!r}) if f.startswith("pid")]) < 2:
                time.sleep(0.05)
            {press}
        if __name__ == "__main__":
            threading.Thread(target=press, daemon=True).start()
            try:
                X.run_all(unit, [0, 1], lambda job, result: None, X.Plan(workers=2))
            except KeyboardInterrupt:
                print("interrupted", file=sys.stderr)
                sys.exit(130)
    """)
    (tmp_path / "grid.py").write_text(script)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "grid.py")], cwd=tmp_path, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=ENV)
    try:
        _, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the grid did not end: {proc.communicate()[1][-2000:]}")
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    pids = [int((tmp_path / f"pid{j}").read_text()) for j in (0, 1)]

    def gone(pid: int) -> bool:  # ended, or a zombie: a loaded machine may take a moment to finish a killed worker
        try:
            return "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 60
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(p) for p in pids), "a worker outlived the grid by a minute"


# ----------------------------------------------------------------------------------------------------------------
# Output that cannot encode the Greek letters
# ----------------------------------------------------------------------------------------------------------------
def test_a_stream_that_cannot_encode_greek_letters_spells_them(monkeypatch):
    buf = io.BytesIO()
    stream = io.TextIOWrapper(buf, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", stream)
    cli.plain_streams()
    print("EWC-MetaCL-λ 55.8 ± 1.0, MAS-MetaCL-β −1.2 ☃")
    stream.flush()
    assert buf.getvalue() == b"EWC-MetaCL-lambda 55.8 +/- 1.0, MAS-MetaCL-beta -1.2 \\u2603\n"


def test_run_and_table_under_an_ascii_encoding_exit_0(tmp_path):
    env = {**ENV, "PYTHONIOENCODING": "ascii"}
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "metacl_lite", *RUN[:-1], "ewc-metacl-lambda", "--seeds", "1",
                        "--out", str(out)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0 and "EWC-MetaCL-lambda" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "table", str(REPO_ROOT / "results" / "pmnist-K20.json")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "MAS-MetaCL-beta" in r.stdout and "+/-" in r.stdout, r.stderr


# ----------------------------------------------------------------------------------------------------------------
# Unclear messages
# ----------------------------------------------------------------------------------------------------------------
def test_table_of_something_that_is_not_a_results_file_says_what_it_is(tmp_path, capsys):
    assert main(["table", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert "/dev/null is not a regular file" in err and "a a " not in err and "git checkout" not in err
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert main(["table", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "is not valid JSON (it is empty)" in err and "a a " not in err and "git checkout" not in err


def test_a_notebook_without_parameters_says_so(capsys):
    assert main(["notebook", str(REPO_ROOT / "book" / "intro.md"), "-p", "K", "5"]) == 2
    err = capsys.readouterr().err
    assert "this notebook takes no parameters" in err and "takes: \n" not in err and err.count("\n") == 1


def test_browser_check_with_a_chrome_that_is_not_there(capfd):
    assert tools_main(["browser-check", "--chrome", "/nonexistent"]) == 2
    err = capfd.readouterr().err
    assert "--chrome /nonexistent: no such executable" in err and "Traceback" not in err


def test_where_with_device_cpu_and_need_gpu_does_not_advise_device_cpu(capsys):
    assert tools_main(["where", "--device", "cpu", "--need-gpu", "x"]) == 2
    err = capsys.readouterr().err
    assert "you chose --device cpu" in err and "with --device cpu" not in err and err.count("\n") == 1


def test_an_installed_copy_is_told_how_to_fetch_without_data_scripts(tmp_path, monkeypatch, capsys):
    from metacl_lite import paths

    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path))
    monkeypatch.setattr(paths, "IN_CHECKOUT", False)
    for argv, fetch in ((["--benchmark", "pmnist", "--K", "601"], "fetch_mnist()"),
                        (["--benchmark", "cub", "--K", "10"], "fetch_cub()")):
        assert main(["run", *argv, "--seeds", "1", "--device", "cpu", "--out", str(tmp_path / "r.json")]) == 2
        err = capsys.readouterr().err
        assert "data_scripts" not in err and f"from metacl_lite.data." in err and fetch in err, err
    monkeypatch.setattr(paths, "IN_CHECKOUT", True)
    assert main(["run", "--benchmark", "pmnist", "--K", "601", "--seeds", "1", "--out", str(tmp_path / "r.json")]) == 2
    assert "`python data_scripts/fetch.py mnist`" in capsys.readouterr().err


def test_cifar100_beyond_500_images_is_told_the_limit_before_any_download(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path))  # no CIFAR-100 here
    assert main(["run", "--benchmark", "cifar100", "--K", "501", "--seeds", "1", "--device", "cpu", "--out",
                 str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "choose K <= 500" in err and "Fetch" not in err and "fetch" not in err


def test_make_j2_reproduce_installs_nothing_beside_a_failing_gpu_check(tmp_path):
    """With -j2 the environment's install (5 GB) started beside the GPU precheck; it now waits for it."""
    log = tmp_path / "log"
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("sh", "grep", "echo", "test", "[", "sleep"):
        real = shutil.which(tool)
        if real:
            (bin_ / tool).symlink_to(real)
    (bin_ / "nvidia-smi").write_text(f"#!/bin/sh\nsleep 2\necho precheck >> {log}\nexit 1\n")
    (tmp_path / "python").write_text(f"#!/bin/sh\necho install >> {log}\nexit 1\n")
    for f in (bin_ / "nvidia-smi", tmp_path / "python"):
        f.chmod(0o755)
    r = subprocess.run([shutil.which("make"), "-s", "-j2", "reproduce-cub", f"STAMP={tmp_path / 'venv' / 'stamp'}",
                        f"VENV={tmp_path / 'venv'}", "PY=false", f"PYTHON={tmp_path / 'python'}"], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=120, env={"PATH": str(bin_), "HOME": str(tmp_path)})
    assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr, r.stderr
    assert log.read_text().split() == ["precheck"]


def test_ctrl_c_during_the_browser_check_prints_no_traceback(tmp_path):
    driver = textwrap.dedent(f"""
        import runpy, shutil, sys
        def ctrl_c(*a, **k):  # Ctrl-C lands while the check looks for Chromium
            raise KeyboardInterrupt
        shutil.which = ctrl_c
        sys.argv = ["check_book_browser.py"]
        runpy.run_path({str(REPO_ROOT / "data_scripts" / "check_book_browser.py")!r}, run_name="__main__")
    """)
    (tmp_path / "driver.py").write_text(driver)
    r = subprocess.run([sys.executable, str(tmp_path / "driver.py")], capture_output=True, text=True, env=ENV,
                       timeout=120)
    assert r.returncode == 130 and "interrupted" in r.stderr and "Traceback" not in r.stderr, r.stderr
