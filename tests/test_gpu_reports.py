"""What the book's pages show about a GPU speed benchmark, as records: the whole grid beside its target (met or
missed), whether it was scaled from fewer seeds, each method's wall per unit in the paper's order, the GPU check, and
the CPU figure beside the GPU one; a missing file gives no number."""
from __future__ import annotations

import math

from metacl_lite.report.timings import device_table, duration, gpu_check, gpu_grid, gpu_test_ids, gpu_units, ran_commit


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
    missed, met = gpu_grid(_doc()), gpu_grid(_doc(grid_s=1700.0, measured=5))
    assert (missed["grid_s"], missed["seeds"], missed["measured_seeds"], missed["scaled"], missed["met"]) == \
        (2529.0, 5, 1, True, False)
    assert missed["wall_s_measured"] == 2529.0 / 5 and missed["target_s"] == 1800.0
    assert (met["scaled"], met["met"], met["note"]) == (False, True, "N.B.")
    assert list(gpu_units(_doc()).index) == ["finetune", "ewc", "references", "oracle"]  # the paper's order
    assert (missed["workers"], missed["compile"], missed["precision"], missed["mps"]) == (8, "off", "float32", False)
    tf32 = gpu_grid({**_doc(), "compile": "on", "precision": "tf32"})
    assert (tf32["compile"], tf32["precision"]) == ("on", "tf32")


def test_a_target_met_only_by_a_scaled_figure_says_so_in_its_record():
    # CIFAR-100's committed GPU file timed one seed and scaled it x5: its verdict rests on that scaled figure
    scaled_met = gpu_grid(_doc(grid_s=1700.0, measured=1))
    assert scaled_met["met"] and scaled_met["scaled"] and scaled_met["measured_seeds"] == 1
    assert gpu_grid(_doc(grid_s=1800.0, measured=5))["met"] and not gpu_grid(_doc(grid_s=1800.1))["met"]


#: A GPU file as this project's device sessions wrote them: the device copy's git metadata showed the session's base
#: commit with the tree's changes as uncommitted, and the note says which commit's code ran.
_NOTE = ("The code that ran is commit 977ad48 (this session's device runs send the working tree; the device copy's git "
         "metadata showed the session's base commit 0078ca7 with the tree's changes as uncommitted, which is what "
         "git_commit and git_dirty record).")
_BASE = "0078ca70e675dcb9039a35db14786148a4b13437"


def test_gpu_figures_name_the_commit_whose_code_ran_where_the_note_says_so(tmp_path):
    import json

    from metacl_lite.lab.store import load
    from metacl_lite.report.timings import RAN_COMMIT_FIELD

    ran_field = {RAN_COMMIT_FIELD: {"commit": "977ad48", "why": _NOTE.split("(")[1].split(")")[0]}, "note": "N.B."}
    doc = _doc()
    doc["provenance"] = {**doc["provenance"], "git_commit": _BASE, "git_dirty": True, **ran_field}
    (tmp_path / "bench-cub-cuda.json").write_text(json.dumps(doc))
    check = {"kind": "gpu-check", "device": "cuda: GPU X", "passed": 1, "failed": 0, "tests": [],
             "provenance": {"command": "python data_scripts/gpu_check.py", "git_commit": _BASE, "git_dirty": True,
                            **ran_field}}
    (tmp_path / "gpu-check.json").write_text(json.dumps(check))
    doc = load(tmp_path / "bench-cub-cuda.json", "bench")  # as the pages read it
    check = json.loads((tmp_path / "gpu-check.json").read_text())
    ran = {"commit": "977ad48", "recorded": "0078ca70e6", "from_note": True, "dirty": True}
    grid, checked = gpu_grid(doc), gpu_check(check).attrs
    assert {k: grid[k] for k in ran} == ran and {k: checked[k] for k in ran} == ran
    assert grid["note"] == checked["note"] == "N.B."
    # without such a note: the recorded commit, and whether the tree was dirty
    assert ran_commit({"git_commit": _BASE, "git_dirty": True}) == {"commit": "0078ca70e6", "recorded": "0078ca70e6",
                                                                    "from_note": False, "dirty": True, "why": "",
                                                                    "note_beyond_commit": ""}
    assert ran_commit({"git_commit": _BASE, "note": "N.B."})["commit"] == "0078ca70e6"


def test_durations_read_as_seconds_or_minutes():
    assert (duration(44.72), duration(299.0), duration(472.0)) == ("44.7 s", "299.0 s", "7.9 min")


def test_the_device_table_sets_cpu_beside_gpu_and_leaves_what_is_missing_empty():
    table = device_table({"bench-cub-cuda.json": _doc()})
    cub = table.loc["Split CUB-200"]
    assert math.isnan(cub.cpu_s) and cub.cpu_seeds is None
    assert (cub.gpu_s, cub.gpu_seeds, cub.gpu_scaled, cub.gpu_synthetic, cub.gpu_device) == \
        (2529.0, 5, True, True, "cuda: GPU X")
    real = device_table({"bench-pmnist-cuda.json": {**_doc(), "synthetic": False, "data": "embedded MNIST, tuned"}})
    assert (real.loc["Permuted MNIST", "gpu_data"], real.loc["Permuted MNIST", "gpu_synthetic"]) == \
        ("embedded MNIST", False)
    assert table.loc["Permuted MNIST", ["cpu_s", "gpu_s"]].isna().all()


def test_the_gpu_check_lists_every_test_with_its_outcome():
    doc = {"device": "cuda: GPU X", "passed": 1, "failed": 1, "provenance": {"command": "python data_scripts/gpu_check.py",
                                                                             "git_commit": "abc"},
           "tests": [{"test": "t1", "outcome": "passed", "time_s": 1.0}, {"test": "t2", "outcome": "failure",
                                                                          "time_s": 2.0}]}
    t = gpu_check(doc)
    assert (t.attrs["passed"], t.attrs["failed"], t.attrs["not_run"]) == (1, 1, 0)
    assert t.loc["t2"].tolist() == ["failure", 2.0]


def test_the_gpu_check_names_the_checkouts_gpu_tests_it_did_not_run():
    doc = {"device": "cuda: GPU X", "passed": 2, "failed": 0, "provenance": {"command": "c", "git_commit": "abc"},
           "tests": [{"test": "t1", "outcome": "passed", "time_s": 1.0}, {"test": "t2[a]", "outcome": "passed",
                                                                          "time_s": 2.0}]}
    t = gpu_check(doc, ["t1", "t2[a]", "t2[b]", "t3"])
    assert t.attrs["not_run"] == 2 and list(t.index[t.outcome == "not run"]) == ["t2[b]", "t3"]
    assert gpu_check(doc, ["t1", "t2[a]"]).attrs["not_run"] == 0


def test_the_gpu_test_ids_read_from_the_file_are_those_pytest_collects():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_gpu.py"], cwd=root, capture_output=True, text=True, check=True).stdout
    collected = [line.split("::", 1)[1] for line in out.splitlines() if line.startswith("tests/test_gpu.py::")]
    assert collected and gpu_test_ids(root / "tests" / "test_gpu.py") == collected
    assert gpu_test_ids(root / "tests" / "no_such_file.py") is None


def test_a_bench_under_mps_says_so_and_each_units_peak_memory_is_kept_where_recorded():
    doc = _doc()
    assert not gpu_grid(doc)["mps"] and gpu_units(doc)["peak_gb"].isna().all()
    units = [{**u, "peak_gpu_mb": mb} for u, mb in zip(doc["units"], (5120.0, 3584.0, 2048.0, 1536.0))]
    units.append({"unit": "runs/ewc/1", "wall_s": 140.0, "peak_gpu_mb": 6144.0})
    mps = {**doc, "mps": True, "units": units}
    assert gpu_grid(mps)["mps"]
    u = gpu_units(mps)
    assert u.to_dict("index") == {"finetune": {"wall_s": 120.0, "peak_gb": 3.5}, "ewc": {"wall_s": 135.0, "peak_gb": 6.0},
                                  "references": {"wall_s": 100.0, "peak_gb": 2.0},
                                  "oracle": {"wall_s": 90.0, "peak_gb": 1.5}}  # each kind's mean wall, largest peak


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
    assert r.returncode == 2 and "cub-tf32, cub-mps or memory" in r.stderr
    assert shutil.which("nvidia-cuda-mps-control", path=path) is None
    r = subprocess.run(["bash", str(script), "cub-mps"], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "MPS cannot be tried" in (tmp_path / "session.log").read_text()
    assert not (tmp_path / "bench-cub-cuda-mps.json").exists()
    assert not (repo / "results" / "bench-cub-cuda-mps.json").exists()


def test_the_gpu_session_times_the_memory_family_beside_its_bases(tmp_path):
    """The `memory` phase (issue 44, point 6) runs the GPU bench of Permuted MNIST on the memory family's methods (the
    bench adds each one's base method and prints the ratios) into results/bench-pmnist-cuda-memory-M1.json; here with
    a stand-in interpreter (PY) that records the bench's command line instead of running it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from metacl_lite import vocab

    repo = Path(__file__).resolve().parents[1]
    fake = tmp_path / "py"
    fake.write_text(f"#!/bin/sh\nif [ \"$2\" = metacl_lite.vocab ]; then exec {sys.executable} \"$@\"; fi\n"
                    f"echo \"$@\" >> {tmp_path}/argv\n")
    fake.chmod(0o755)
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PY": str(fake)}
    r = subprocess.run(["bash", str(repo / "benchmarks" / "gpu_session.sh"), "memory"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "argv").read_text().split() == [
        "-m", "metacl_lite.tools", "bench", "--suite", "pmnist", "--device", "cuda", "--methods",
        ",".join(vocab.MEMORY_METHODS), "--out", "results/bench-pmnist-cuda-memory-M1.json"]
