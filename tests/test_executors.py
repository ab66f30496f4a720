"""Executors: the same seeds give the same numbers in this process, in local workers and on Ray; a dead worker loses
no finished unit; bad options fail before any work."""
import json
import os
import signal
import sys
import types

import pytest

from metacl_lite.lab import executors as X
from metacl_lite.lab import grid as G
from metacl_lite.cli import main
from metacl_lite.errors import UnitsFailed, UsageError


def _square_or_die(job):
    if job == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-unit
    if job == 4:
        raise ValueError("unit 4 is broken")
    return job * job


def test_a_dead_worker_or_failing_unit_loses_no_finished_unit():
    saved = {}
    plan = X.check_plan("local", workers=2)
    failures = X.run_all(_square_or_die, [0, 1, 2, 3, 4, 5, 6], lambda j, r: saved.__setitem__(j, r), plan)
    failed = {f.job: f.error for f in failures}
    assert 3 in failed and "a worker process died" in failed[3]
    assert set(saved) | set(failed) == set(range(7)) and not set(saved) & set(failed)
    assert all(saved[j] == j * j for j in saved)
    assert failed.get(4) in (None, "ValueError: unit 4 is broken") or "a worker process died" in failed[4]


class _Stuck(X.Executor):
    """Units a and b end `first` seconds apart (the longest wait), then none for `polls` polls of 30 s."""

    def __init__(self, first, polls):
        super().__init__(None)
        self.first, self.polls = first, polls

    def start(self, fn, jobs):
        self.now, self.ends = 0.0, [[("a", 1, None)], [("b", 2, None)]] + [[]] * self.polls

    def running(self):
        return bool(self.ends)

    def ended(self, timeout):
        self.now += self.first if len(self.ends) > self.polls else 30
        return self.ends.pop(0)


def _run(monkeypatch, ex):
    monkeypatch.setattr(X, "time", types.SimpleNamespace(monotonic=lambda: ex.now))
    seen = []
    ex.run(None, [], lambda job, result, error: seen.append(job))
    return seen


def test_a_grid_whose_units_stop_ending_says_so_once_past_stall_times_the_longest_wait(monkeypatch, capsys):
    assert _run(monkeypatch, _Stuck(60, 30)) == ["a", "b"] and X.STALL == 10  # 1 min, then 15 min without an end
    assert capsys.readouterr().err.splitlines() == [  # after 10.5 min without an end, not before, and once
        "metacl-lite: no unit has ended for 10 min, over 10 times the longest wait so far (1.0 min): one may be stuck"]
    _run(monkeypatch, _Stuck(1, 19))  # a second, then 9.5 min: over STALL times the longest wait, under 10 minutes
    assert capsys.readouterr().err == ""


def test_failed_units_are_reported_and_the_finished_ones_kept(hparams_file, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    real = X.run_all

    def some_fail(fn, jobs, on_result, plan, progress=None):
        jobs = list(jobs)
        failures = real(fn, jobs[:-1], on_result, plan, progress)
        return failures + [X.Failure(jobs[-1], "RuntimeError: boom")]

    monkeypatch.setattr(G, "run_all", some_fail)
    with pytest.raises(UnitsFailed, match=r"1 unit\(s\) failed: oracle/0: RuntimeError: boom") as e:  # the last
        G.run_experiment("pmnist", 5, seeds=[0], methods=["finetune"], out=out, n_tasks=2, epochs=1,
                         show_progress=False)
    assert str(out) in str(e.value)
    doc = json.loads(out.read_text())
    assert set(doc["references"]) == {"0"} and set(doc["runs"]) == {"finetune/0"} and doc["oracle"] == {}


def _grid(out, plan):
    G.run_experiment("pmnist", 5, seeds=[0, 1], methods=["finetune", "ewc-metacl-lambda"], out=out, n_tasks=2,
                     epochs=1, show_progress=False, plan=plan)
    doc = json.loads(out.read_text())
    return {k: doc[k] for k in ("runs", "references", "oracle")}


def _strip(d):
    return {s: {k: {kk: vv for kk, vv in v.items() if kk != "wall_s"} for k, v in sec.items()} for s, sec in d.items()}


@pytest.mark.slow
def test_same_numbers_in_process_in_local_workers_and_on_ray(tmp_path):
    serial = _strip(_grid(tmp_path / "serial.json", X.check_plan("local", workers=1)))
    pooled = _strip(_grid(tmp_path / "pool.json", X.check_plan("local", workers=2)))
    assert pooled == serial and len(serial["runs"]) == 4
    two_threads = _strip(_grid(tmp_path / "threads.json", X.check_plan("local", workers=1, threads=2)))
    assert two_threads == serial
    import ray

    try:
        on_ray = _strip(_grid(tmp_path / "ray.json", X.check_plan("ray", workers=2)))
    finally:
        ray.shutdown()
    assert on_ray == serial


def test_bad_executor_options_fail_before_any_work(monkeypatch, capsys, tmp_path):
    with pytest.raises(UsageError, match="workers=0 must be a positive integer"):
        X.check_plan("local", workers=0)
    with pytest.raises(UsageError, match="unknown executor 'dask'"):
        X.check_plan("dask")
    with pytest.raises(UsageError, match="an address is for the ray executor only"):
        X.check_plan("local", address="10.0.0.1:6379")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(UsageError, match=r"pip install 'metacl-lite\[cluster\]'"):
        X.check_plan("ray")
    with pytest.raises(SystemExit) as e:
        main(["run", "--benchmark", "pmnist", "--K", "5", "--workers", "0"])
    assert e.value.code == 2 and "--workers must be positive" in capsys.readouterr().err
    rc = main(["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--executor", "ray",
               "--out", str(tmp_path / "r.json")])
    assert rc == 2 and "needs Ray" in capsys.readouterr().err and not (tmp_path / "r.json").exists()


def test_an_unreachable_ray_address_is_a_clear_error():
    with pytest.raises(UsageError, match="cannot reach a Ray cluster at 127.0.0.1:1: "):
        X.check_plan("ray", address="127.0.0.1:1")
    with pytest.raises(UsageError, match="is not HOST:PORT"):
        X.check_plan("ray", address="nowhere")


def _threads(job):
    import torch

    return torch.get_num_threads()


def test_every_executor_runs_units_with_the_plans_threads():
    """One intra-op thread per unit by default, in this process too (torch's default, all cores, oversubscribes a
    machine whose other cores are busy: 15-30x slower units were seen); this process's own setting is put back."""
    import torch

    torch.set_num_threads(2)
    for plan in (X.check_plan("local", workers=1), X.check_plan("local", workers=2),
                 X.check_plan("local", workers=1, threads=2)):
        seen = {}
        assert X.run_all(_threads, [0, 1], lambda j, r: seen.__setitem__(j, r), plan) == []
        assert seen == {0: plan.threads, 1: plan.threads}
        assert torch.get_num_threads() == 2
