"""The speed benchmark's wiring (not its timings): the figures the book shows (`timings.cpu_bench`) are the measured
ones, including the legacy path's grid times that the files made before issue 41 keep."""
import torch

from metacl_lite.lab import bench
from metacl_lite.report.timings import cpu_bench


def test_summary_of_side_by_side_grids():
    b = {"provenance": {"command": "python -m metacl_lite.tools bench --K 20", "device": "cpu: X (2 cores)",
                        "git_commit": "0123456789abcdef"},
         "gemm_gflops": 150.0, "eval_tflop_per_run": 1.13, "lower_bound_s_per_run": 7.5,
         "per_method": [{"method": "finetune", "wall_s": 9.0, "peak_mb": 800.0}],
         "grids": [{"K": 20, "seeds": 3, "runs": 33, "references": 60, "oracle": 3, "lower_bound_s": 247.5,
                    "new": {"wall_s": 297.0, "peak_mb": 900.0}, "legacy": {"wall_s": 594.0, "peak_mb": 1000.0},
                    "speedup": 2.0}]}
    f = cpu_bench(b)
    assert f["methods"].loc["finetune"].tolist() == [9.0, 800.0, 1.2]  # without the one-thread rate: the all-core bound
    one = cpu_bench({**b, "gemm_gflops_1thread": 75.0, "lower_bound_s_per_run_1thread": 15.0})
    assert one["methods"].loc["finetune", "x_bound"] == 0.6 and one["gemm_gflops_1thread"] == 75.0
    assert (one["bound_s"], one["bound_s_1thread"], f["bound_s_1thread"]) == (7.5, 15.0, None)
    g = f["grids"].loc[20]
    assert (g.seeds, g.runs, g.references, g.oracle, g.new_min, g.x_bound, g.legacy_min, g.speedup) == \
        (3, 33, 60, 3, 4.95, 1.2, 9.9, 2.0)
    # a file made before the tools moved out of the users' CLI: its command as it runs today
    assert (f["command"], f["commit"], f["device"]) == ("python -m metacl_lite.tools bench --K 20", "0123456789",
                                                        "cpu: X (2 cores)")


def test_grids_only_and_compiled_today_path_are_wired_and_recorded(monkeypatch, tmp_path):
    """`--skip-methods --compile auto`: no per-method run, the grid gets the compile setting; the file records the
    setting and the command that regenerates it, and its summary says so (no legacy path: its columns are empty)."""
    calls = []

    def fake_child(target, *args):
        calls.append((target.__name__, args))
        return {"wall_s": 300.0, "peak_mb": 1.0}  # args: K, seeds, out, compile

    monkeypatch.setattr(bench, "in_child", fake_child)
    monkeypatch.setattr(bench, "matmul_gflops", lambda repeats=20, threads=None: 100.0)
    monkeypatch.setattr(bench, "REPO_ROOT", tmp_path)
    (tmp_path / "results").mkdir()
    assert bench.bench_pmnist(500, grids=[500], grid_seeds=1, compile="auto", skip_methods=True) == 0
    assert [(n, a[0], a[1], a[3]) for n, a in calls] == [("_grid", 500, 1, "auto")]
    import json

    b = json.loads((tmp_path / "results" / "bench-pmnist-K500.json").read_text())
    assert b["per_method"] == [] and b["compile"] == "auto" and set(b["grids"][0]) == {
        "K", "seeds", "runs", "references", "oracle", "lower_bound_s", "new"}
    assert b["provenance"]["command"] == ("python -m metacl_lite.tools bench --K 500 --grids 500 --grid-seeds 1 "
                                          "--compile auto --skip-methods")
    f = cpu_bench(b)
    assert f["methods"].empty and f["compile"] == "auto"
    assert f["grids"].loc[500, ["seeds", "runs", "references", "oracle", "new_min"]].tolist() == [1, 11, 20, 1, 5.0]
    assert f["grids"][["legacy_min", "speedup"]].isna().all().all()


def test_the_grid_gets_the_compile_setting_and_one_thread_per_worker(monkeypatch, tmp_path):
    seen = {}
    import metacl_lite.lab.grid as G

    monkeypatch.setattr(G, "run_experiment", lambda *a, **k: seen.update(k))

    class Q:
        def put(self, x):
            pass

    for compile in ("auto", "off"):
        bench._grid(20, 1, str(tmp_path / "g.json"), compile, Q())
        assert (seen["compile"], seen["plan"].threads) == (compile, 1)


def test_the_reference_page_shows_the_legacy_columns_only_for_files_that_timed_it():
    from metacl_lite.publish.page_reference import cpu_bench_record

    b = {"provenance": {"command": "python -m metacl_lite.tools bench --K 20", "device": "cpu: X (2 cores)",
                        "git_commit": "0123456789abcdef"},
         "gemm_gflops": 150.0, "gemm_gflops_1thread": 75.0, "eval_tflop_per_run": 1.13, "lower_bound_s_per_run": 7.5,
         "lower_bound_s_per_run_1thread": 15.0, "per_method": [],
         "grids": [{"K": 20, "seeds": 3, "runs": 33, "references": 60, "oracle": 3, "lower_bound_s": 247.5,
                    "new": {"wall_s": 297.0, "peak_mb": 900.0}}]}
    today = cpu_bench_record(b)["grids"].data
    assert "| 5.0 " in today and "legacy" not in today and "speed-up" not in today
    b["grids"][0] |= {"legacy": {"wall_s": 594.0, "peak_mb": 1000.0}, "speedup": 2.0}
    before = cpu_bench_record(b)["grids"].data
    assert "legacy path (min)" in before and "9.9" in before and "2.00×" in before
