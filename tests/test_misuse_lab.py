"""Misuse of the lab's commands (issue 21): each one line and exit 2 before any work, or, for a run killed outright,
no worker left behind; and CPU files that record the thread count their numbers depend on."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from metacl_lite.cli import main
from metacl_lite.lab.checks import check_options
from metacl_lite.tools import main as tools_main
from metacl_lite.errors import ConfigMismatch, FileFormatError, UserError
from metacl_lite.lab import bench as B
from metacl_lite.lab import grid as G
from metacl_lite.lab.executors import check_plan

TINY = dict(K=5, n_tasks=2, epochs=1, show_progress=False)
RUN = ["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--no-progress", "--workers", "1"]


@pytest.mark.parametrize("argv, needle", [
    (RUN + ["--seed-list", str(2 ** 64)], "seed 18446744073709551616 is too large"),
    (RUN + ["--seed-list", str(2 ** 63)], "seeds go up to 2^63 - 1"),
    (RUN + ["--seeds", "1", "--threads", "100000"], "threads=100000: at most"),
    (["choices", "--benchmark", "pmnist", "--K", "7"], "--K 7: the open choices are decided at K = 20, 200 only"),
    (["bench", "--suite", "cifar100", "--n-tasks", "11", "--epochs", "1"], "Split CIFAR-100 has 10 tasks"),
])
def test_bad_values_stop_before_any_work(argv, needle, hparams_file, fake_units, tmp_path, capsys):
    assert (tools_main if argv[0] == "bench" else main)(argv + (["--out", str(tmp_path / "r.json")] if argv[0] == "run" else [])) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and fake_units == []


def test_a_cpu_file_records_its_thread_count_and_refuses_another(hparams_file, fake_units, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, plan=check_plan("local", 1, 1), **TINY)
    assert json.loads(out.read_text())["config"]["threads"] == 1
    with pytest.raises(ConfigMismatch, match="threads: 1 in the file, 2 here"):
        G.run_experiment("pmnist", seeds=[1], methods=["finetune"], out=out, plan=check_plan("local", 1, 2), **TINY)
    doc = json.loads(out.read_text())
    del doc["config"]["threads"]  # a file made before the count was recorded: its workers used one thread
    out.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=r"older metacl-lite \(its config has no threads\): migrate it once .* "
                                              r"at commit 82768e1"):
        G.run_experiment("pmnist", seeds=[1], methods=["finetune"], out=out, plan=check_plan("local", 1, 1), **TINY)
    doc["config"]["threads"] = 1  # as the one-time migration (up to commit 82768e1) recorded the one thread
    out.write_text(json.dumps(doc))
    G.run_experiment("pmnist", seeds=[1], methods=["finetune"], out=out, plan=check_plan("local", 1, 1), **TINY)
    assert set(json.loads(out.read_text())["runs"]) == {"finetune/0", "finetune/1"}


def test_a_partial_bench_does_not_replace_a_fuller_file(tmp_path, no_measuring, capsys):
    full = tmp_path / "bench.json"
    full.write_text(json.dumps({"kind": "bench", "per_method": [{"method": m} for m in ("finetune", "metacl")],
                                "grids": [{"K": 20, "seeds": 3}]}))
    assert tools_main(["bench", "--skip-grid", "--methods", "finetune", "--out", str(full)]) == 2
    assert "holds measurements this run would not make again" in capsys.readouterr().err
    assert B.check_bench_out(full, {"per_method": [{"method": "finetune"}, {"method": "metacl"}],
                                    "grids": [{"K": 20, "seeds": 3}]}) == full


def test_a_bench_file_with_the_legacy_paths_times_is_never_replaced(tmp_path, capsys):
    """The legacy path left the benchmark (issue 41); the committed files keep its measured grid times, which no run
    makes again, so a run into such a file is refused, naming why."""
    old = tmp_path / "bench.json"
    old.write_text(json.dumps({"kind": "bench", "per_method": [{"method": "finetune"}],
                               "grids": [{"K": 20, "seeds": 3, "legacy": {"wall_s": 1.0}}]}))
    with pytest.raises(UserError, match="legacy path, measured before that path left the benchmark"):
        B.check_bench_out(old, {"per_method": [{"method": "finetune"}], "grids": [{"K": 20, "seeds": 3}]})
    with pytest.raises(SystemExit) as e:
        tools_main(["bench", "--no-baseline"])  # the flag went with the path
    assert e.value.code == 2
    assert "unrecognized arguments: --no-baseline" in capsys.readouterr().err


def test_bench_beyond_the_embedded_subset_without_raw_data_stops_at_once(tmp_path, monkeypatch, no_measuring, capsys):
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path))
    assert tools_main(["bench", "--K", "601", "--skip-grid", "--out", str(tmp_path / "b.json")]) == 2
    assert "raw" in capsys.readouterr().err.lower()


def test_a_benchmark_child_that_dies_before_it_reports_is_an_error_not_a_hang():
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="failed .* before it reported"):
        B.in_child(os._exit)  # the child calls os._exit(queue): a TypeError, and it exits without a word
    assert time.perf_counter() - t0 < 60


def test_tune_checks_that_it_can_write_hparams_before_training(hparams_file, fake_units, tmp_path, monkeypatch,
                                                                capsys):
    from metacl_lite.lab import hparams as H

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(H, "HPARAMS_FILE", blocker / "hparams.json")  # cannot be written: its folder is a file
    assert main(["tune", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--methods", "mas",
                 "--beta-grid", "1", "--seed-list", "7", "--write-hparams", "--out", str(tmp_path / "t.json")]) == 2
    assert "hparams.json" in capsys.readouterr().err and fake_units == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_end_when_their_parent_is_killed(tmp_path):
    pid_file = tmp_path / "worker.pid"
    script = textwrap.dedent(f"""
        import os, time
        from concurrent.futures import ProcessPoolExecutor
        import multiprocessing
        from metacl_lite.lab.executors import _init_worker
        def work(path):
            open(path, "w").write(str(os.getpid()))
            time.sleep(120)
        if __name__ == "__main__":
            pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                                       initargs=(1,))
            pool.submit(work, {str(pid_file)!r})
            time.sleep(120)
    """)
    (tmp_path / "parent.py").write_text(script)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py")], cwd=os.getcwd())
    deadline = time.time() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
        time.sleep(0.2)
    worker = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(worker, signal.SIGKILL)
    pytest.fail("the worker outlived its killed parent")


def test_a_full_disk_while_run_saves_a_unit_stops_with_a_message_and_keeps_the_file(hparams_file, fake_units, tmp_path,
                                                                                   monkeypatch, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--benchmark", "pmnist", "--K", "20", "--seeds", "1", "--methods", "finetune", "--n-tasks", "2",
                 "--epochs", "1", "--workers", "1", "--out", str(out), "--no-progress"]) == 0
    before = out.read_bytes()

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the disk fills while the next unit's result is saved
    assert main(["run", "--benchmark", "pmnist", "--K", "20", "--seeds", "2", "--methods", "finetune", "--n-tasks", "2",
                 "--epochs", "1", "--workers", "1", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {out}: the disk is full (No space left on device)" in err and "Traceback" not in err, err
    assert out.read_bytes() == before and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_two_ctrl_c_during_a_grid_of_two_workers_end_it_at_once_without_tracebacks(tmp_path):
    """Ctrl-C in a terminal reaches the whole process group: the parent and both workers. The workers leave it to the
    parent, which ends them at once (their units would train on for minutes) with a second press ignored meanwhile;
    before, the second press hung the exit in concurrent.futures' atexit join and printed tracebacks.

    The script takes Ctrl-C as a terminal's foreground job does: a test runner started in the background (CI) passes
    on an ignored SIGINT, which Python keeps and `run_all` rightly leaves alone; the presses then did nothing and the
    grid slept on (the CI's hang, twice; test_misuse_round5 had the same fix)."""
    started = tmp_path / "started"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        from metacl_lite.lab.executors import Plan, run_all
        def unit(job):
            open({str(started)!r} + str(job), "w").close()
            time.sleep(300)  # a unit that would train for minutes
        if __name__ == "__main__":
            import faulthandler
            faulthandler.dump_traceback_later(120, exit=True)  # a hang shows where it hangs, then ends
            signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (see the docstring)
            try:
                run_all(unit, [0, 1], lambda job, result: None, Plan(workers=2))
            except KeyboardInterrupt:
                print("interrupted", file=sys.stderr)
                sys.exit(130)
    """)
    (tmp_path / "grid.py").write_text(script)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "grid.py")], cwd=tmp_path, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    # No timing race on a loaded machine: both presses are sent once both workers run a unit (however long they
    # take to start), the second one wherever it lands (before the first is handled, while the workers stop, or just
    # after) is ignored by run_all's handler, and "at once" is measured against a unit's 300 s, not the load
    deadline = time.time() + 600
    while not all((tmp_path / f"started{j}").exists() for j in (0, 1)):
        assert time.time() < deadline and proc.poll() is None, "the two workers never started their units"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"two Ctrl-C did not end the grid: {proc.communicate()[1][-2000:]}")
    # 130 from the script, or -SIGINT where the second press landed while the interpreter was already exiting (its
    # handlers reset to the default): either way stopped at once
    assert proc.returncode in (130, -signal.SIGINT) and "interrupted" in err, err
    assert "Traceback" not in err, err


@pytest.mark.parametrize("xi", [float("inf"), float("nan"), 0.0, -1.0, True])
def test_library_callers_get_the_finite_pi_xi_check_too(xi):
    with pytest.raises(UserError, match="must be a finite positive number"):
        check_options({"pi_xi": xi})


def test_the_advice_for_a_file_that_is_not_json_loses_nothing(hparams_file, fake_units, tmp_path, capsys):
    """--out README.md is another file, not a damaged results file: no advice to delete it; a corrupt hparams.json
    is restored from git, never deleted."""
    readme = tmp_path / "README.md"
    readme.write_text("# a readme\n")
    assert main(RUN + ["--seeds", "1", "--out", str(readme)]) == 2
    err = capsys.readouterr().err
    assert "if it is another file, give the command another path" in err and "delete it" not in err
    assert readme.read_text() == "# a readme\n" and fake_units == []
    broken = hparams_file("{not json")
    assert main(RUN + ["--seeds", "1", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert f"restore it with `git checkout -- {broken}`" in err and "do not delete it" in err and "aside" not in err


def test_a_mismatch_after_retuning_points_at_redo(hparams_file, fake_units, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(RUN + ["--seeds", "1", "--methods", "finetune,mas", "--out", str(out)]) == 0
    hp = json.loads(G.H.HPARAMS_FILE.read_text())
    hp["pmnist"]["by_K"]["5"]["methods"]["mas"]["beta"] *= 10  # mas retuned at K = 5
    hparams_file(hp)
    assert main(RUN + ["--seeds", "2", "--methods", "finetune,mas", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "method_hparams[mas]" in err and "with --redo mas; or write elsewhere with --out FILE" in err


def test_a_resumed_redo_keeps_what_its_first_attempt_retrained(hparams_file, fake_units, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    args = RUN + ["--seed-list", "0,1,2", "--methods", "finetune,mas", "--out", str(out)]
    assert main(args) == 0
    hp = json.loads(G.H.HPARAMS_FILE.read_text())
    hp["pmnist"]["by_K"]["5"]["methods"]["mas"]["beta"] *= 10  # mas retuned
    hparams_file(hp)
    fake, calls = G.execute_unit, []

    def interrupted(unit, bench, cfg, evaluate_rows="all"):
        calls.append(unit)
        if len(calls) == 2:  # Ctrl-C while the second retrained run trains
            raise KeyboardInterrupt
        return fake(unit, bench, cfg, evaluate_rows)

    monkeypatch.setattr(G, "execute_unit", interrupted)
    assert main(args + ["--redo", "mas"]) == 130
    first = json.loads(out.read_text())
    assert len(first["provenance"]["discarded"]) == 1 and set(first["runs"]) == {
        "finetune/0", "finetune/1", "finetune/2", f"mas/{calls[0].seed}"}
    monkeypatch.setattr(G, "execute_unit", fake)
    assert main(args + ["--redo", "mas"]) == 0  # the same command again: resumes
    doc = json.loads(out.read_text())
    assert len(doc["provenance"]["discarded"]) == 1  # nothing discarded twice
    last = doc["provenance"]["invocations"][-1]["units"]
    assert f"runs/mas/{calls[0].seed}" not in last and len([u for u in last if u.startswith("runs/mas/")]) == 2
    assert doc["config"]["method_hparams"]["mas"] == {"beta": hp["pmnist"]["by_K"]["5"]["methods"]["mas"]["beta"]}


def test_a_tuning_file_records_a_thread_count_other_than_one_and_refuses_another(hparams_file, fake_units, tmp_path):
    """As a results file: tuning units made with 2 threads per worker are not mixed with 1-thread units; the file's
    command regenerates it with the same count."""
    from metacl_lite.lab.tuning import tune
    kw = dict(n_tasks=2, seeds=[100], methods=["ewc"], out=tmp_path / "t.json", write_hparams=False,
              beta_grid=[1.0, 3.0], gamma_grid=[0.0, 1.0], epochs=1, show_progress=False)
    doc = tune("pmnist", 5, plan=check_plan("local", 1, 2), **kw)
    assert doc["protocol"]["threads"] == 2 and " --threads 2" in doc["provenance"]["command"]
    with pytest.raises(ConfigMismatch, match="threads"):
        tune("pmnist", 5, plan=check_plan("local", 1, 1), **kw)
    one = tune("pmnist", 5, plan=check_plan("local", 1, 1), **{**kw, "out": tmp_path / "t1.json"})
    assert "threads" not in one["protocol"] and "--threads" not in one["provenance"]["command"]


def test_redo_oracle_trains_the_joint_units_again_and_keeps_the_runs(hparams_file, fake_units, tmp_path, capsys):
    """After a change of train_joint (the oracle's outer steps): `--redo oracle` discards and trains again only the
    oracle units, and the file records what was discarded and why."""
    out = tmp_path / "r.json"
    assert main(RUN + ["--seeds", "2", "--methods", "finetune", "--out", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    fake_units.clear()
    assert main(RUN + ["--seeds", "2", "--methods", "finetune", "--redo", "oracle", "--out", str(out)]) == 0
    assert sorted((u.kind, u.seed) for u, _ in fake_units) == [("joint", 0), ("joint", 1)]
    doc = json.loads(out.read_text())
    assert doc["runs"] == runs and set(doc["oracle"]) == {"0", "1"}
    assert doc["provenance"]["discarded"][-1]["units"] == ["oracle/0", "oracle/1"]
    assert doc["provenance"]["discarded"][-1]["why"] == "--redo oracle: retrained with the oracle as train_joint trains it"
    with pytest.raises(SystemExit) as exit_:
        main(RUN + ["--seeds", "2", "--methods", "finetune", "--redo", "oracles", "--out", str(out)])
    assert exit_.value.code == 2 and "unknown method 'oracles'" in capsys.readouterr().err


@pytest.mark.parametrize("tool", ["bench", "pages"])
def test_a_maintainers_tool_asked_of_the_users_command_line_names_the_command_that_runs_it(tool, capsys):
    """The tools left the users' command line (`python -m metacl_lite bench` ran once): one line with the command."""
    with pytest.raises(SystemExit) as e:
        main([tool, "--K", "20"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"run it as `python -m metacl_lite.tools {tool} ...`" in err and "Traceback" not in err


def test_a_ctrl_c_whose_interrupt_was_lost_still_ends_the_grid():
    """The first press is recorded before its KeyboardInterrupt is raised; where that exception is lost (raised inside
    a finaliser, which ignores it) the grid still ends at the next poll, its workers stopped, instead of polling on
    while the handler ignores every later press (a hang seen once in a fresh clone's run of the two-presses test)."""
    from metacl_lite.lab.executors import Plan, PoolExecutor

    ex = PoolExecutor(Plan(workers=2))
    finished = []

    def done(job, result, error):  # the quick unit ends: a press lands and its exception is lost
        finished.append(job)
        ex.pressed.append(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        ex.run(time.sleep, [0, 60], done)  # without the check: waits the 60 s unit out, no KeyboardInterrupt
    assert finished == [0] and not any(p.is_alive() for p in (ex.pool._processes or {}).values())
