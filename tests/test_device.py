"""The device option on a machine without a GPU (CI): `--device cpu` gives the committed numbers bit for bit, `cuda`
without a GPU stops before any work, `auto` resolves and is recorded, a file refuses units from another device, the
determinism settings are made, and provenance names the device the work really ran on."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from metacl_lite.accel import device as DV
from metacl_lite.cli import main
from metacl_lite.errors import ConfigMismatch, UsageError
from metacl_lite.lab import grid as G
from metacl_lite.lab import provenance
from metacl_lite.tools import main as tools_main

TINY = dict(K=5, n_tasks=2, epochs=1, show_progress=False)


def test_resolve_checks_before_any_work(no_gpu):
    assert DV.resolve("cpu") == "cpu" and DV.resolve("auto") == "cpu"
    for bad, needle in (("cuda", "no CUDA GPU is usable here"), ("cuda:0", "no CUDA GPU is usable here"),
                        ("cuda:x", "write cuda:N"), ("gpu", "is not a device")):
        with pytest.raises(UsageError, match=needle):
            DV.resolve(bad)


def test_cuda_without_a_gpu_exits_2_before_any_work(no_gpu, hparams_file, fake_units, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--benchmark", "pmnist", "--K", "5", "--device", "cuda", "--n-tasks", "2", "--epochs", "1",
                 "--seeds", "1", "--out", str(out), "--no-progress"]) == 2
    assert "--device cuda: no CUDA GPU is usable here" in capsys.readouterr().err
    assert fake_units == [] and not out.exists()
    assert main(["tune", "--benchmark", "pmnist", "--K", "5", "--device", "cuda", "--out", str(out)]) == 2
    assert tools_main(["bench", "--suite", "cifar100", "--device", "cuda", "--out", str(out)]) == 2
    assert not out.exists()


def test_auto_resolves_and_is_recorded_and_the_default_is_the_benchmarks(no_gpu, hparams_file, fake_units, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, device="auto", **TINY)
    doc = json.loads(out.read_text())
    assert doc["config"]["train"]["device"] == "cpu" and doc["config"]["accelerator"] is None
    assert [c.device for _, c in fake_units] == ["cpu"] * 3
    assert doc["provenance"]["invocations"][0]["device"].startswith("cpu: ")
    assert "--device" not in doc["provenance"]["command"]  # cpu is Permuted MNIST's default
    from metacl_lite.data.specs import get_spec

    assert (get_spec("pmnist").device, get_spec("cifar100").device, get_spec("cub").device) == ("cpu", "auto", "auto")


def test_a_file_refuses_units_from_another_device(hparams_file, fake_units, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, device="cpu", **TINY)
    doc = json.loads(out.read_text())
    doc["config"]["train"]["device"], doc["config"]["accelerator"] = "cuda", "NVIDIA H100 80GB HBM3"
    out.write_text(json.dumps(doc))
    with pytest.raises(ConfigMismatch, match=r"train.device: 'cuda' in the file, 'cpu' here.*accelerator: "
                                             r"'NVIDIA H100 80GB HBM3' in the file, None here"):
        G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], out=out, device="cpu", **TINY)
    assert main(["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "2",
                 "--methods", "finetune", "--out", str(out), "--no-progress"]) == 2
    # the command that extends a GPU file names its device
    doc["config"]["accelerator"] = None
    assert G.run_command(doc["config"], out).endswith(f"--device cuda --out {out}")


def test_device_cpu_changes_no_bit():
    """--device cpu trains exactly the loop as first written (`test_speed.textbook_stream`), through the device
    plumbing (`benchmark_on` leaves a CPU benchmark as it is). The committed files themselves reproduce bit for bit
    only on the CPU model that made them: BLAS kernels round differently on other processors."""
    from metacl_lite.data.mnist import permuted_mnist
    from metacl_lite.training import TrainConfig, params_vector
    from test_speed import textbook_stream

    from metacl_lite import training

    bench = permuted_mnist(K=5, n_tasks=3, seed=2, split="val")
    assert DV.benchmark_on(bench, "cpu") is bench
    cfg = TrainConfig(epochs=2, batch_size=20, bundle_size=5, beta=3.0, gamma=0.3, device="cpu")
    models = []
    real = training._new_model
    for name in ("finetune", "pi-metacl-lambda"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(training, "_new_model", lambda b, s, d="cpu": models.append(real(b, s, d)) or models[-1])
            training.run_stream(bench, name, cfg, seed=1, show_progress=False)
        assert torch.equal(params_vector(models[-1]), textbook_stream(bench, name, cfg, seed=1))

def test_determinism_settings_are_made_for_a_gpu_and_left_alone_for_the_cpu(monkeypatch):
    before = DV.determinism_settings()
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    DV.deterministic("cpu")
    assert DV.determinism_settings() == {**before, "cublas_workspace": None}
    try:
        DV.deterministic("cuda")  # sets flags only; nothing here touches a GPU
        assert DV.determinism_settings() == {"cudnn_deterministic": True, "cudnn_benchmark": False,
                                             "deterministic_algorithms": True, "matmul_tf32": False,
                                             "cudnn_tf32": False, "cublas_workspace": ":4096:8"}
    finally:
        torch.use_deterministic_algorithms(before["deterministic_algorithms"])
        torch.backends.cudnn.deterministic = before["cudnn_deterministic"]
        torch.backends.cudnn.benchmark = before["cudnn_benchmark"]
        torch.backends.cuda.matmul.allow_tf32 = before["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = before["cudnn_tf32"]


class _Stop(Exception):
    pass


@pytest.mark.parametrize("train", ["run_stream", "train_reference", "train_joint"])
def test_every_run_sets_the_determinism_settings_before_its_data_reach_the_gpu(train, monkeypatch):
    """Whoever trains (the grid's units, tuning, the chapters' live cells, the Python API), the run, a reference and
    the oracle each set the GPU's determinism settings before the streams move to the GPU (stopped there: no GPU)."""
    from metacl_lite import training
    from metacl_lite.training import TrainConfig

    calls = []
    monkeypatch.setattr(training, "deterministic", lambda d: calls.append(("deterministic", d)))
    monkeypatch.setattr(training, "set_precision", lambda p, d: calls.append(("precision", p)))

    def stop(bench, device):
        calls.append(("to device", device))
        raise _Stop

    monkeypatch.setattr(training, "benchmark_on", stop)
    from metacl_lite.data.mnist import permuted_mnist

    bench = permuted_mnist(K=5, n_tasks=2, seed=0)
    cfg = TrainConfig(epochs=1, device="cuda")
    args = {"run_stream": (bench, "finetune", cfg, 0), "train_reference": (bench, 0, cfg, 0),
            "train_joint": (bench, cfg, 0)}[train]
    with pytest.raises(_Stop):
        getattr(training, train)(*args)
    assert calls == [("deterministic", "cuda"), ("precision", "float32"), ("to device", "cuda")]


def test_importing_the_package_sets_the_cublas_workspace_unless_the_user_did():
    """cuBLAS reads CUBLAS_WORKSPACE_CONFIG at its first handle: set when metacl_lite's training code is imported,
    before any GPU product of ours; a value the user set is kept."""
    code = "import os, metacl_lite.training; print(os.environ.get('CUBLAS_WORKSPACE_CONFIG'))"
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == ":4096:8"
    got = subprocess.run([sys.executable, "-c", code], env={**env, "CUBLAS_WORKSPACE_CONFIG": ":16:8"},
                         capture_output=True, text=True, check=True)
    assert got.stdout.strip() == ":16:8"


def test_provenance_names_the_device_the_work_ran_on(monkeypatch):
    """A visible GPU that the run did not use is not named (the bench and results files said `cuda` before)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    assert provenance.device("cpu").startswith("cpu: ") and "H100" not in provenance.device("cpu")
    assert provenance.invocation("cpu")["device"].startswith("cpu: ")
    assert provenance.invocation()["device"].startswith("cpu: ")  # the default: where a run without --device trains


def test_to_device_keeps_shared_tensors_shared(monkeypatch):
    """Permuted MNIST's tasks share their test images: moved once, still shared (checked with a stand-in move)."""
    from metacl_lite.data.mnist import permuted_mnist

    bench = permuted_mnist(K=2, n_tasks=3, seed=0)
    moved = []
    monkeypatch.setattr(DV, "kind", lambda d: "cuda")
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: moved.append(1) or self.clone())
    b = DV.benchmark_on(bench, "cuda")
    assert b is DV.benchmark_on(bench, "cuda")  # made once per benchmark and device
    xs = {id(e.x) for e in b.test_stream}
    assert len(xs) == 1 and id(bench.test_stream[0].x) not in xs
    distinct = {id(v) for e in bench.train_stream + bench.test_stream for v in (e.x, e.y, e.perm) if v is not None}
    assert len(moved) == len(distinct) < 3 * 2 * 3  # each tensor once, however many tasks share it


def test_compile_auto_stays_eager_on_a_gpu_whose_costs_are_not_measured(monkeypatch):
    """"auto" weighs costs measured on a CPU; on a GPU it stays eager while no GPU cost is measured (the README says
    so), "on" still compiles; a measured GPU cost (`CUDA_COSTS`) is weighed on a GPU only."""
    from metacl_lite.accel import compiled

    monkeypatch.setattr(compiled, "have_compiler", lambda: True)
    assert compiled.use_compiled("auto", "mlp", "metacl", 10 ** 6, "cpu")
    assert not compiled.use_compiled("auto", "mlp", "metacl", 10 ** 6, "cuda")
    assert compiled.use_compiled("on", "mlp", "metacl", 1, "cuda")
    # once a GPU cost is measured, "auto" weighs it there (and only there): 10 s to compile, 20 ms saved per step
    monkeypatch.setattr(compiled, "CUDA_COSTS", {("mlp", "metacl"): compiled.Cost(10.0, 0.020)})
    monkeypatch.setattr(compiled, "COSTS", {})
    assert compiled.use_compiled("auto", "mlp", "metacl", 501, "cuda")
    assert not compiled.use_compiled("auto", "mlp", "metacl", 500, "cuda")
    assert not compiled.use_compiled("auto", "mlp", "metacl", 10 ** 6, "cpu")
    assert not compiled.use_compiled("auto", "cifar_cnn", "metacl", 10 ** 6, "cuda:1")
    assert compiled.use_compiled("auto", "mlp", "metacl", 501, "cuda:1")


def test_compiled_steps_capture_cuda_graphs_on_a_gpu_only(monkeypatch):
    """The compiled steps of a model on the CPU use inductor's plain options; a model on a GPU gets its own steps
    with CUDA graphs (what mode="reduce-overhead" sets), each call marking a new graph step."""
    from metacl_lite.accel import compiled
    from metacl_lite.models import mlp
    from metacl_lite.reptile import inner_loop

    calls, marks = [], []
    monkeypatch.setattr(compiled, "_STEPS", {})
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: calls.append(kw) or fn)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    model = mlp()
    cpu = compiled.compiled_steps(model)
    assert cpu is compiled.compiled_steps(mlp())  # one set per architecture and device kind
    assert calls == [dict(fullgraph=True, dynamic=False, options={"fallback_random": True})] * 2 and not cpu.graphs
    x, y = torch.randn(20, 784), torch.randint(0, 10, (20,))
    g = compiled.plain_gradient(model, x, y, 0)
    assert marks == [] and g.shape == (sum(p.numel() for p in model.parameters()),)
    gpu = compiled.CompiledSteps(model.body, "cuda", inner_loop=inner_loop)
    assert gpu.graphs and calls[-1]["options"] == {"fallback_random": True, "triton.cudagraphs": True}
    gpu.plain_grad(*compiled._split(model, 0), x, y)
    gpu.metacl_steps(0.01, 10, *compiled._split(model, 0), x, y)
    assert marks == [1, 1]


def test_local_gpu_workers_train_on_the_resolved_device_itself(hparams_file, monkeypatch, tmp_path):
    """Local worker processes get the resolved device (cuda:N) and ask no share of a card; Ray's units: see
    test_device_paths (the cluster's GPUs)."""
    from metacl_lite.lab.executors import Plan

    seen = {}

    def fake_run_all(fn, jobs, on_result, plan, progress=None):
        seen["share"], seen["devices"] = plan.gpu_share, {j.device for j in jobs}
        return []

    monkeypatch.setattr("metacl_lite.accel.device.resolve", lambda d: "cuda:1")
    monkeypatch.setattr("metacl_lite.accel.device.accelerator", lambda d: "GPU X")
    monkeypatch.setattr(G, "run_all", fake_run_all)
    monkeypatch.setattr(provenance, "describe", lambda d, *_: f"{d}: GPU X")
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=tmp_path / "b.json", device="cuda:1",
                     plan=Plan(executor="local", workers=2), **TINY)
    assert seen == {"share": 0.0, "devices": {"cuda:1"}}


def test_gpu_bench_writes_a_variant_where_out_says_and_its_command_regenerates_it(monkeypatch, tmp_path):
    """bench --device cuda --compile on --out FILE: the figures go to FILE, not to the default file the README and
    the book read, and the recorded command carries --compile and --out (checked with stand-ins for the GPU and the
    units: no training here)."""
    from metacl_lite.accel import device as dev
    from metacl_lite.lab import bench, executors

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (79 * 2 ** 30, 80 * 2 ** 30))
    monkeypatch.setattr(dev, "deterministic", lambda d: None)
    monkeypatch.setattr(dev, "describe", lambda d, *_: "cuda: GPU X (CUDA 13.0, cuDNN 1, torch 2.11)")
    monkeypatch.setattr(provenance, "describe", dev.describe)
    jobs = []

    def fake_run_all(fn, todo, save, plan):
        for job in todo:
            jobs.append(job)
            save(job, {"value": {"wall_s": 2.0, "peak_gpu_mb": 900.0}})
        return []

    monkeypatch.setattr(executors, "run_all", fake_run_all)
    default = bench.REPO_ROOT / "results" / "bench-cifar100-cuda.json"
    before = default.read_bytes()
    out = tmp_path / "bench-cifar100-cuda-compile-on.json"
    assert tools_main(["bench", "--suite", "cifar100", "--device", "cuda", "--compile", "on", "--grid-seeds", "2",
                 "--measured-seeds", "1", "--methods", "finetune,metacl", "--workers", "1", "--out", str(out)]) == 0
    assert default.read_bytes() == before
    doc = json.loads(out.read_text())
    assert [j.cfg["compile"] for j in jobs] == ["on"] * 4  # 2 methods, references and oracle of one seed
    assert doc["compile"] == "on" and doc["complete"] and doc["grid_s"] == 2 * doc["wall_s_measured"]
    assert [u["peak_gpu_mb"] for u in doc["units"]] == [900.0] * 4  # each unit's measured peak, kept
    assert doc["provenance"]["command"] == (
        "python -m metacl_lite.tools bench --suite cifar100 --device cuda --grid-seeds 2 --measured-seeds 1 --workers 1 "
        f"--compile on --methods finetune,metacl --out {out}")
    assert doc["provenance"]["device"] == "cuda: GPU X (CUDA 13.0, cuDNN 1, torch 2.11)"


def test_tf32_needs_a_gpu_and_is_refused_before_any_work(no_gpu, hparams_file, fake_units, tmp_path, capsys):
    from metacl_lite.training import TrainConfig

    with pytest.raises(UsageError, match=r"precision='tf32' \(--precision\) needs a GPU"):
        TrainConfig(precision="tf32")
    with pytest.raises(UsageError, match="precision='bf16' is not an option; choose one of float32, tf32"):
        TrainConfig(device="cuda", precision="bf16")
    out = tmp_path / "r.json"
    for argv in (["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "1",
                  "--precision", "tf32", "--out", str(out), "--no-progress", "--workers", "1"],
                 ["tune", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--precision", "tf32", "--out",
                  str(out), "--no-progress", "--workers", "1"]):
        assert main(argv) == 2
        assert "needs a GPU (--device cuda)" in capsys.readouterr().err
    assert fake_units == [] and not out.exists()
    assert main(["choices", "--precision", "tf32"]) == 2 and "--precision does not apply to choices" in \
        capsys.readouterr().err


def test_a_tf32_file_records_it_refuses_float32_units_and_its_command_names_it(fake_gpu, hparams_file, fake_units,
                                                                              tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, device="cuda", precision="tf32", **TINY)
    doc = json.loads(out.read_text())
    assert doc["config"]["train"]["precision"] == "tf32"
    assert [c.precision for _, c in fake_units] == ["tf32"] * 3  # the run, its references and its oracle
    assert doc["provenance"]["command"].endswith(f"--device cuda --precision tf32 --out {out}")
    with pytest.raises(ConfigMismatch, match=r"train.precision: 'tf32' in the file, 'float32' here"):
        G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], out=out, device="cuda", **TINY)
    # a file made before the option existed is refused (the one-time migration, up to commit 82768e1, recorded it as
    # float32); so recorded, it is extended in float32 and refused in tf32
    from metacl_lite.errors import FileFormatError

    old = tmp_path / "old.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=old, device="cuda", **TINY)
    doc = json.loads(old.read_text())
    del doc["config"]["train"]["precision"]
    old.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=r"older metacl-lite \(its config has no train.precision\): migrate "
                                              r"it once .* at commit 82768e1"):
        G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], out=old, device="cuda", **TINY)
    doc["config"]["train"]["precision"] = "float32"  # as the migration recorded it
    old.write_text(json.dumps(doc))
    G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], out=old, device="cuda", **TINY)
    with pytest.raises(ConfigMismatch, match=r"train.precision: 'float32' in the file, 'tf32' here"):
        G.run_experiment("pmnist", seeds=[0, 2], methods=["finetune"], out=old, device="cuda", precision="tf32",
                         **TINY)


def test_a_tf32_tuning_records_it_and_is_not_the_default_protocol():
    from metacl_lite.lab import tuning as T

    gpu = {**T.default_protocol("pmnist", 20), "device": "cuda", "accelerator": "GPU X"}
    assert T.is_default(gpu) and T.is_default({**gpu, "precision": "float32"})  # where it ran is no other protocol
    p = {**gpu, "precision": "tf32"}
    assert not T.is_default(p)  # values chosen on TF32's numbers: not hparams.json's unless asked (--write-hparams)
    out = T.default_tuning_out(p)
    assert out.parent.name == "runs" and out.name.startswith("tuning-pmnist-K20-")
    assert T.tune_command({"protocol": p, "methods": list(T.TUNABLE)}, out).endswith(
        "--device cuda --precision tf32")  # (that file is where this command writes by default)


def test_the_cli_offers_the_precisions_the_device_module_knows():
    from metacl_lite.cli import options

    assert options.PRECISIONS == DV.PRECISIONS


def test_set_precision_sets_tf32_on_a_gpu_only():
    before = DV.determinism_settings()
    try:
        DV.set_precision("tf32", "cpu")
        assert DV.determinism_settings() == before
        DV.set_precision("tf32", "cuda:1")  # flags only; nothing here touches a GPU
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
        DV.set_precision("float32", "cuda")
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
        with pytest.raises(UsageError, match="precision='fp16' is not an option"):
            DV.set_precision("fp16", "cuda")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = before["cudnn_tf32"]


def test_mps_is_seen_from_its_daemons_process_and_named_where_the_work_ran(tmp_path, monkeypatch):
    (tmp_path / "17").mkdir()
    (tmp_path / "17" / "comm").write_text("python3\n")
    assert not DV.mps_active(tmp_path)
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "comm").write_text("nvidia-cuda-mps-control\n")
    assert DV.mps_active(tmp_path)
    monkeypatch.setattr(DV, "accelerator", lambda d: "GPU X")
    monkeypatch.setattr(DV, "mps_active", lambda: True)
    assert DV.describe("cuda").endswith(", MPS)")
    monkeypatch.setattr(DV, "mps_active", lambda: False)
    assert DV.describe("cuda").startswith("cuda: GPU X (CUDA ") and "MPS" not in DV.describe("cuda")
