"""Issue 44, point 6: `bench` times each method of the memory family beside the method it adds the memory to
(MetaCL-lambda for the two-reference methods), per outer step of training, and prints and records the ratio with the
1.5x target; its file is named by the budget the runs had (results/bench-pmnist-K20-memory-M1.json)."""
import json

import pytest

from metacl_lite import training, vocab
from metacl_lite.lab import bench

MEMORY = list(vocab.MEMORY_METHODS)


def test_each_memory_method_is_timed_beside_its_base():
    assert bench.with_bases(vocab.PAPER_METHOD_NAMES) == list(vocab.PAPER_METHOD_NAMES)  # the default bench as before
    assert bench.with_bases(["pi-metacl-lambda-mem", "agem"]) == ["pi-metacl-lambda", "pi-metacl-lambda-mem",
                                                                  "finetune", "agem"]
    assert bench.with_bases(["pi-metacl-lambda-mem", "pi-metacl-lambda"]) == ["pi-metacl-lambda-mem",
                                                                              "pi-metacl-lambda"]
    assert bench.memory_ratios({"pi-metacl-lambda": 2.0, "pi-metacl-lambda-mem": 2.8, "agem": 5.0}) == [
        {"method": "pi-metacl-lambda-mem", "base": "pi-metacl-lambda", "ratio": pytest.approx(1.4), "target": 1.5,
         "met": True}]  # agem's base was not timed: no ratio
    assert bench.memory_ratios({"finetune": 2.0, "gem": 7.0, "pi-metacl-lambda": 2.0, "pi-metacl-lambda-gem": 6.2}) == [
        {"method": "gem", "base": "finetune", "ratio": 3.5, "target": None, "met": None},  # a gradient per past task
        {"method": "pi-metacl-lambda-gem", "base": "pi-metacl-lambda", "ratio": pytest.approx(3.1), "target": 3.0,
         "met": False}]  # issue 52's bound for MetaCL-lambda with GEM's constraints
    assert bench.bench_budgets(MEMORY) == {"memory": 1} and bench.bench_budgets(vocab.PAPER_METHOD_NAMES) == {}
    units = [{"unit": "runs/agem/0", "wall_s": 2.0}, {"unit": "runs/agem/1", "wall_s": 4.0},
             {"unit": "references/0", "wall_s": 9.0}, {"unit": "runs/finetune/0", "wall_s": 2.0}]
    assert bench.method_walls(units) == {"agem": 3.0, "finetune": 2.0}


def test_the_memory_bench_writes_its_own_file_with_the_ratios_and_the_target(monkeypatch, tmp_path, capsys):
    step = {"finetune": 2.0, "agem": 3.6, "pi-metacl-lambda": 4.0, "pi-metacl-lambda-mem": 5.0}

    def fake_child(target, method, K, compile):
        assert target is bench._one and K == 20
        return {"method": method, "wall_s": 20.0, "peak_mb": 1.0, "eval_s": 15.0, "steps": 2000,
                "step_ms": step[method]}

    monkeypatch.setattr(bench, "in_child", fake_child)
    monkeypatch.setattr(bench, "matmul_gflops", lambda repeats=20, threads=None: 100.0)
    monkeypatch.setattr(bench, "REPO_ROOT", tmp_path)
    (tmp_path / "results").mkdir()
    assert bench.bench_pmnist(20, methods=["pi-metacl-lambda-mem", "agem"], skip_grid=True) == 0
    b = json.loads((tmp_path / "results" / "bench-pmnist-K20-memory-M1.json").read_text())
    assert [r["method"] for r in b["per_method"]] == ["pi-metacl-lambda", "pi-metacl-lambda-mem", "finetune", "agem"]
    assert b["budgets"] == {"memory": 1}
    assert [(r["method"], r["base"], round(r["ratio"], 2), r["met"]) for r in b["memory_ratios"]] == [
        ("pi-metacl-lambda-mem", "pi-metacl-lambda", 1.25, True), ("agem", "finetune", 1.8, False)]
    assert b["provenance"]["command"] == ("python -m metacl_lite.tools bench --K 20 --methods "
                                          "pi-metacl-lambda-mem,agem --skip-grid")
    out = capsys.readouterr().out
    assert "1.25 x the step time of pi-metacl-lambda (target <= 1.5 x: met)" in out
    assert "1.80 x the step time of finetune (target <= 1.5 x: MISSED)" in out


def test_a_run_times_its_evaluations_apart_from_its_steps(monkeypatch):
    """`_one` charges the evaluations (timed around training.evaluate_tasks) to eval_s and the rest to the outer
    steps (training.outer_steps of the stream)."""
    import time

    monkeypatch.setattr(training, "evaluate_tasks", training.evaluate_tasks)  # _one replaces it: restored after
    monkeypatch.setattr(bench.torch, "set_num_threads", lambda n: None)

    def fake_run(b, method, cfg, seed, show_progress=None):
        time.sleep(0.05)
        training.evaluate_tasks(None, [])  # no task: nothing evaluated, but timed
        return {}

    def slow_eval(model, exps):
        time.sleep(0.2)
        return []

    monkeypatch.setattr(training, "run_stream", fake_run)
    monkeypatch.setattr(training, "evaluate_tasks", slow_eval)

    class Q:
        def put(self, x):
            self.x = x

    q = Q()
    bench._one("agem", 20, "off", q)
    r = q.x
    assert r["method"] == "agem" and r["eval_s"] >= 0.2 and r["wall_s"] >= r["eval_s"] + 0.05
    assert r["steps"] == 20 * 5 * 2 and r["step_ms"] == pytest.approx((r["wall_s"] - r["eval_s"]) / r["steps"] * 1e3)
