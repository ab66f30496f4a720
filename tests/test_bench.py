"""The speed benchmark's wiring (not its timings): the legacy path really is the legacy path, and the summary reports
the measured figures."""
import torch

from metacl_lite import bench
from metacl_lite.reports import bench_summary


def test_the_legacy_path_evaluates_through_advanced_indexing(monkeypatch):
    from metacl_lite import data

    monkeypatch.setattr(data.Experience, "inputs", data.Experience.inputs)  # restored after the test
    seen = []
    monkeypatch.setattr(torch, "index_select", lambda *a, **k: seen.append("index_select"))
    threads = torch.get_num_threads()
    try:
        bench._legacy(1)
        e = data.Experience(0, torch.arange(6.0).view(2, 3), torch.zeros(2), perm=torch.tensor([2, 0, 1]))
        assert e.inputs().tolist() == [[2.0, 0.0, 1.0], [5.0, 3.0, 4.0]] and seen == []
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_summary_of_side_by_side_grids():
    b = {"provenance": {"command": "python -m metacl_lite bench --K 20", "device": "cpu: X (2 cores)",
                        "git_commit": "0123456789abcdef"},
         "gemm_gflops": 150.0, "eval_tflop_per_run": 1.13, "lower_bound_s_per_run": 7.5,
         "per_method": [{"method": "finetune", "wall_s": 9.0, "peak_mb": 800.0}],
         "grids": [{"K": 20, "seeds": 3, "runs": 33, "references": 60, "oracle": 3, "lower_bound_s": 247.5,
                    "new": {"wall_s": 297.0, "peak_mb": 900.0}, "legacy": {"wall_s": 594.0, "peak_mb": 1000.0},
                    "speedup": 2.0}]}
    text = bench_summary(b)
    assert "| finetune | 9.0 | 800 | 1.20 |" in text  # a file without the one-thread rate: the all-core bound
    one = bench_summary({**b, "gemm_gflops_1thread": 75.0, "lower_bound_s_per_run_1thread": 15.0})
    assert "| method | wall (s) | peak RSS (MB) | × one-thread evaluation bound |" in one
    assert "| finetune | 9.0 | 800 | 0.60 |" in one and "75 GFLOP/s on one thread" in one
    assert "at least 7.5 s on all cores and 15.0 s on one thread" in one
    assert "| K = 20, 3 seed(s) | 33 + 60 + 3 | 5.0 min | 1.20 | 9.9 min | 2.00× |" in text
