"""What the README, the overview page and "Running this book" say about a GPU speed benchmark: the whole grid beside
its target (met or missed), whether it was scaled from fewer seeds, each method's wall per unit in the paper's order,
and the CPU figure beside it; a missing file says so instead of a number."""
from __future__ import annotations

from metacl_lite.report.readme import gpu_bench_summary, gpu_check_summary
from metacl_lite.report.timings import device_table, duration, gpu_grid_markdown, ran_commit


def _doc(grid_s=2529.0, measured=1):
    return {"kind": "bench", "suite": "cub", "device": "cuda: GPU X (CUDA 13.0, cuDNN 1, torch 2.11)", "gpu": True,
            "complete": True, "K": 10, "n_tasks": 10, "epochs": 20, "data": "synthetic tensors", "synthetic": True, "workers": 8,
            "compile": "off", "seeds": 5, "measured_seeds": measured, "methods": ["finetune", "ewc"],
            "wall_s_measured": grid_s * measured / 5, "grid_s": grid_s, "target_s": 1800.0,
            "units": [{"unit": "runs/ewc/0", "wall_s": 130.0}, {"unit": "runs/finetune/0", "wall_s": 120.0},
                      {"unit": "references/0", "wall_s": 100.0}, {"unit": "oracle/0", "wall_s": 90.0}],
            "provenance": {"command": "python -m metacl_lite bench --suite cub --device cuda --measured-seeds 1",
                           "git_commit": "abc", "device": "cuda: GPU X", "note": "N.B."}}


def test_the_grid_is_set_beside_its_target_and_says_when_it_was_scaled():
    missed, met = gpu_bench_summary(_doc()), gpu_bench_summary(_doc(grid_s=1700.0, measured=5))
    assert "**5 seeds in 42.1 min** (scaled from 1 timed seed(s), 8.4 min: every seed is the same work)" in missed
    assert "target on one H100: 30.0 min ✗" in missed and "target on one H100: 30.0 min ✓" in met
    assert "scaled" not in met and "N.B." in met
    rows = [r.split(" | ")[0] for r in missed.splitlines() if r.startswith("| ") and "wall per unit" not in r]
    assert rows == ["| finetune", "| ewc", "| references (all tasks)", "| joint oracle"]  # the paper's order
    assert "is 30.0 min: missed (scaled" in gpu_grid_markdown(_doc()) and \
        gpu_grid_markdown(_doc(1700.0, 5)).endswith("is 30.0 min: met.")
    assert "8 worker processes sharing the GPU, task gradients eager: **5 seeds" in missed  # float32: nothing said
    tf32 = gpu_bench_summary({**_doc(), "compile": "on", "precision": "tf32"})
    assert "8 worker processes sharing the GPU, task gradients compiled (on), in TF32: **5 seeds" in tf32


def test_a_target_met_only_by_a_scaled_figure_says_so_in_its_verdict():
    # CIFAR-100's committed GPU file timed one seed and scaled it x5: its check mark rests on that scaled figure
    scaled_met = _doc(grid_s=1700.0, measured=1)
    assert "target on one H100: 30.0 min ✓ (scaled from 1 timed seed)." in gpu_bench_summary(scaled_met)
    assert "is 30.0 min: met (scaled from 1 timed seed)." in gpu_grid_markdown(scaled_met)
    assert "✗ (scaled from 2 timed seeds)." in gpu_bench_summary(_doc(measured=2))
    assert "target on one H100: 30.0 min ✓." in gpu_bench_summary(_doc(grid_s=1700.0, measured=5))  # all timed


#: A GPU file as this project's device sessions wrote them: the device copy's git metadata showed the session's base
#: commit with the tree's changes as uncommitted, and the note says which commit's code ran.
_NOTE = ("The code that ran is commit 977ad48 (this session's device runs send the working tree; the device copy's git "
         "metadata showed the session's base commit 0078ca7 with the tree's changes as uncommitted, which is what "
         "git_commit and git_dirty record).")
_BASE = "0078ca70e675dcb9039a35db14786148a4b13437"


def test_gpu_figures_name_the_commit_whose_code_ran_where_the_note_says_so(tmp_path):
    import json

    from metacl_lite.lab.store import load

    doc = _doc()
    doc["provenance"] = {**doc["provenance"], "git_commit": _BASE, "git_dirty": True, "note": _NOTE}
    (tmp_path / "bench-cub-cuda.json").write_text(json.dumps(doc))
    doc = load(tmp_path / "bench-cub-cuda.json", "bench")  # as the README and the overview read it (schema 1 upgraded)
    check = {"device": "cuda: GPU X", "passed": 1, "failed": 0, "tests": [],
             "provenance": {"command": "python data_scripts/gpu_check.py", "git_commit": _BASE, "git_dirty": True,
                            "note": _NOTE}}
    grid = gpu_grid_markdown(doc)  # no note quoted here: the commit and what the file records, in its own words
    assert "commit `977ad48`, the code that ran; its provenance records `0078ca70e6` with uncommitted" in grid
    assert "(commit `0078ca70e6`" not in grid and ", commit `0078ca70e6`" not in grid
    for text in (gpu_bench_summary(doc), gpu_check_summary(check)):  # these quote the note, which says it once
        assert "(commit `977ad48`)" in text.splitlines()[0] and _NOTE in text
        assert text.count("977ad48") == 2 and "0078ca70e6" not in text  # the commit, then the note: not said twice
    # without such a note: the recorded commit, and whether the tree was dirty
    assert ran_commit({"git_commit": _BASE, "git_dirty": True}) == "commit `0078ca70e6` with uncommitted changes"
    assert ran_commit({"git_commit": _BASE, "git_dirty": False, "note": "N.B."}) == "commit `0078ca70e6`"


def test_durations_read_as_seconds_or_minutes():
    assert (duration(44.72), duration(299.0), duration(472.0)) == ("44.7 s", "299.0 s", "7.9 min")


def test_the_device_table_sets_cpu_beside_gpu_and_names_what_is_missing():
    table = device_table({"bench-cub-cuda.json": _doc()})
    cub = next(r for r in table.splitlines() if r.startswith("| Split CUB-200"))
    assert cub.startswith("| Split CUB-200 | not measured | 42.1 min for 5 seeds with references and oracle on "
                          "synthetic tensors of the exact shapes (not the dataset's images), scaled")
    real = device_table({"bench-pmnist-cuda.json": {**_doc(), "synthetic": False, "data": "embedded MNIST, tuned"}})
    assert "oracle on embedded MNIST, scaled" in real and "synthetic" not in real.split("| Permuted MNIST |")[1]
    assert "| Permuted MNIST | not measured | not measured |" in table


def test_the_gpu_check_lists_every_test_with_its_outcome():
    doc = {"device": "cuda: GPU X", "passed": 1, "failed": 1, "provenance": {"command": "python data_scripts/gpu_check.py",
                                                                             "git_commit": "abc"},
           "tests": [{"test": "t1", "outcome": "passed", "time_s": 1.0}, {"test": "t2", "outcome": "failure",
                                                                          "time_s": 2.0}]}
    text = gpu_check_summary(doc)
    assert "**1 passed, 1 failed**" in text and "| `t2` | failure | 2.0 |" in text


def test_the_gpu_check_names_the_checkouts_gpu_tests_it_did_not_run():
    doc = {"device": "cuda: GPU X", "passed": 2, "failed": 0, "provenance": {"command": "c", "git_commit": "abc"},
           "tests": [{"test": "t1", "outcome": "passed", "time_s": 1.0}, {"test": "t2[a]", "outcome": "passed",
                                                                          "time_s": 2.0}]}
    text = gpu_check_summary(doc, ["t1", "t2[a]", "t2[b]", "t3"])
    assert "include 2 that this check did not run" in text
    assert "| `t2[b]` | **not yet run on a GPU** | |" in text and "| `t3` | **not yet run on a GPU** | |" in text
    assert "t1` | **not yet" not in text and "not yet" not in gpu_check_summary(doc, ["t1", "t2[a]"])


def test_the_gpu_test_ids_read_from_the_file_are_those_pytest_collects():
    import subprocess
    import sys
    from pathlib import Path

    from metacl_lite.report.readme import gpu_test_ids

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_gpu.py"], cwd=root, capture_output=True, text=True, check=True).stdout
    collected = [line.split("::", 1)[1] for line in out.splitlines() if line.startswith("tests/test_gpu.py::")]
    assert collected and gpu_test_ids(root / "tests" / "test_gpu.py") == collected
    assert gpu_test_ids(root / "tests" / "no_such_file.py") is None


def test_a_bench_under_mps_says_so_and_each_units_peak_memory_is_shown_where_recorded():
    doc = _doc()
    plain = gpu_bench_summary(doc)
    assert "MPS" not in plain and "peak GPU memory" not in plain and "MPS" not in gpu_grid_markdown(doc)
    units = [{**u, "peak_gpu_mb": mb} for u, mb in zip(doc["units"], (5120.0, 3584.0, 2048.0, 1536.0))]
    units.append({"unit": "runs/ewc/1", "wall_s": 140.0, "peak_gpu_mb": 6144.0})
    mps = {**doc, "mps": True, "units": units}
    text = gpu_bench_summary(mps)
    assert "8 worker processes sharing the GPU, under NVIDIA MPS, task gradients eager" in text
    assert "sharing the card, under NVIDIA MPS: 5 seeds took" in gpu_grid_markdown(mps)
    rows = [r for r in text.splitlines() if r.startswith("| ")]
    assert rows[0] == "| unit | wall per unit (s), sharing the GPU | peak GPU memory (GB) |"
    assert rows[1:] == ["| finetune | 120.0 | 3.5 |", "| ewc | 135.0 | 6.0 |", "| references (all tasks) | 100.0 | 2.0 |",
                        "| joint oracle | 90.0 | 1.5 |"]  # each kind's largest peak


def test_the_gpu_session_script_refuses_an_unknown_phase_and_says_when_mps_cannot_be_tried(tmp_path):
    """benchmarks/gpu_session.sh on a machine without a GPU: an unknown phase exits 2 naming the phases; cub-mps
    without NVIDIA's MPS control program exits 1 having measured nothing (no bench file)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    script = repo / "benchmarks" / "gpu_session.sh"
    path = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "nvidia-cuda-mps-control").exists())
    env = {**os.environ, "OUT": str(tmp_path), "PATH": path}
    r = subprocess.run(["bash", str(script), "bogus"], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cub-tf32 or cub-mps" in r.stderr
    assert shutil.which("nvidia-cuda-mps-control", path=path) is None
    r = subprocess.run(["bash", str(script), "cub-mps"], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "MPS cannot be tried" in (tmp_path / "session.log").read_text()
    assert not (tmp_path / "bench-cub-cuda-mps.json").exists()
    assert not (repo / "results" / "bench-cub-cuda-mps.json").exists()
