"""On a CUDA GPU (`make test-gpu`; `make test` leaves these out, and here they fail rather than skip without a GPU):
the CPU and the GPU agree on a short stream within a stated tolerance, an outer step never waits for the GPU, two
GPU runs are bit-identical for all three networks (dropout and BatchNorm included), compiled task gradients (CUDA
graphs) equal eager ones within float rounding on all three networks and repeat bit for bit, every network's steps
are graph replays, TF32 runs repeat bit for bit, every method runs end to end on every network, and a grid shares the
card between worker processes with the numbers of a single process. `data_scripts/gpu_check.py` runs them and writes
results/gpu-check.json."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from metacl_lite.accel import compiled
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.accel.device import accelerator, deterministic
from metacl_lite.reptile import inner_loop
from metacl_lite.data.synthetic import synthetic_benchmark
from metacl_lite.training import METHODS, TrainConfig, metacl_gradient, params_vector, plain_gradient, run_stream

pytestmark = pytest.mark.gpu

#: CPU against GPU after a short stream (2 tasks, 1 epoch, K = 5): the largest parameter difference and the largest
#: accuracy difference (points) allowed. Each step rounds differently (other kernels, other summation orders);
#: measured on an H100: see results/gpu-check.json.
PARAM_ATOL = 1e-4
ACC_POINTS = 0.5


@pytest.fixture(scope="module", autouse=True)
def gpu():
    assert torch.cuda.is_available(), "the GPU tests need a CUDA GPU: run them with `make test-gpu` on one"
    deterministic("cuda")


def _stream(name: str):
    if name == "mlp":
        return permuted_mnist(K=5, n_tasks=2, seed=0)
    return synthetic_benchmark("cifar100" if name == "cifar_cnn" else "cub", 2 if name == "cifar_cnn" else 1, 2)


def _run(bench, method: str, device: str, **cfg):
    from metacl_lite import training

    models = []
    real = training._new_model
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(training, "_new_model", lambda b, s, d="cpu": models.append(real(b, s, d)) or models[-1])
        r = run_stream(bench, method, TrainConfig(epochs=1, beta=1.0, gamma=0.1, device=device, **cfg), seed=3,
                       show_progress=False)
    return r["acc_matrix"], params_vector(models[-1]).cpu()


@pytest.mark.parametrize("method", ["finetune", "metacl", "ewc-metacl-lambda"])
def test_cpu_and_gpu_agree_on_a_short_stream_within_the_stated_tolerance(method):
    bench = _stream("mlp")
    acc_c, p_c = _run(bench, method, "cpu")
    acc_g, p_g = _run(bench, method, "cuda")
    assert float((p_c - p_g).abs().max()) <= PARAM_ATOL
    assert np.nanmax(np.abs(acc_c - acc_g)) <= ACC_POINTS


@pytest.mark.parametrize("net, method", [("mlp", "ewc-metacl-lambda"), ("cifar_cnn", "pi-metacl-lambda"),
                                         ("resnet18", "mas-metacl-beta")])
def test_two_gpu_runs_are_bit_identical(net, method):
    bench = _stream(net)
    acc1, p1 = _run(bench, method, "cuda")
    acc2, p2 = _run(bench, method, "cuda")
    assert np.array_equal(acc1, acc2, equal_nan=True) and torch.equal(p1, p2)


#: compiled (CUDA graphs) against eager, one call of each task gradient: the largest |compiled - eager| relative to
#: the largest |eager|. The kernels sum in other orders, and g1 = (theta - theta^m) / (alpha m) turns one ulp of a
#: parameter near 1 (a BatchNorm scale) into ~1e-5 of g1; ResNet-18's inner step differs by ~1e-5 relative on the CPU
#: too (compiled.py).
COMPILED_RTOL = {"mlp": 1e-4, "cifar_cnn": 1e-4, "resnet18": 1e-3}


@pytest.mark.parametrize("net", ["mlp", "cifar_cnn", "resnet18"])
def test_compiled_task_gradients_equal_eager_within_rounding(net):
    """Both task gradients (MetaCL's inner loop, Eqs. 8-9, and the plain one), compiled and captured in CUDA graphs,
    equal the eager ones within rounding on every network, dropout masks included (the same generator state gives the
    same masks: `fallback_random`; BatchNorm normalises with the batch's statistics, so its running statistics, which
    each call moves, do not enter g1); called twice, so the second call replays the captured graph."""
    from metacl_lite.training import _new_model

    bench = _stream(net)
    model = _new_model(bench, 0, "cuda")
    e = bench.train_stream[0]
    n = 100 if net != "resnet18" else 20
    x, y = e.inputs()[:n].cuda(), e.y[:n].cuda()
    for _ in range(2):
        for fn, cfn in ((lambda: metacl_gradient(model, x, y, 0, 0.01, 10),
                         lambda: compiled.metacl_gradient(model, x, y, 0, 0.01, 10, inner_loop)),
                        (lambda: plain_gradient(model, x, y, 0), lambda: compiled.plain_gradient(model, x, y, 0))):
            torch.manual_seed(0)
            eager = fn()
            torch.manual_seed(0)
            comp = cfn()
            err = float((comp - eager).abs().max() / eager.abs().max())
            assert err <= COMPILED_RTOL[net], (net, err)


@pytest.mark.parametrize("net", ["mlp", "cifar_cnn", "resnet18"])
def test_the_steps_are_captured_in_cuda_graphs(net, monkeypatch):
    """On a GPU the compiled steps run as CUDA graph replays: inductor skips no graph, for any of the three networks
    (dropout draws included; ResNet-18's BatchNorm statistics are updated in copies the steps return)."""
    from torch._dynamo.utils import counters

    from metacl_lite.training import _new_model

    bench = _stream(net)
    model = _new_model(bench, 0, "cuda")
    e = bench.train_stream[0]
    n = 100 if net != "resnet18" else 20
    x, y = e.inputs()[:n].cuda(), e.y[:n].cuda()
    # compiled afresh here: inductor counts a skipped graph once, when it compiles or first runs a function
    monkeypatch.setattr(compiled, "_STEPS", {})
    torch._dynamo.reset()
    counters.clear()
    steps = compiled.compiled_steps(model, inner_loop)
    assert steps.graphs
    for _ in range(3):
        compiled.metacl_gradient(model, x, y, 0, 0.01, 10, inner_loop)
        compiled.plain_gradient(model, x, y, 0)
    assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])



@pytest.mark.parametrize("net, method", [("mlp", "pi-metacl-lambda"), ("cifar_cnn", "mas-metacl-beta")])
def test_two_compiled_gpu_runs_are_bit_identical(net, method):
    """--compile on, on a GPU (CUDA graphs): the same seed gives the same numbers, run after run."""
    bench = _stream(net)
    acc1, p1 = _run(bench, method, "cuda", compile="on")
    acc2, p2 = _run(bench, method, "cuda", compile="on")
    assert np.array_equal(acc1, acc2, equal_nan=True) and torch.equal(p1, p2)


def test_tf32_runs_repeat_bit_for_bit_and_each_run_sets_its_own_precision():
    """--precision tf32: TF32 is on while such a run trains, two runs give the same numbers, and a float32 run after
    it in the same process (a worker trains units of several files) turns TF32 off again."""
    bench = _stream("cifar_cnn")
    acc1, p1 = _run(bench, "pi-metacl-lambda", "cuda", precision="tf32")
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    acc2, p2 = _run(bench, "pi-metacl-lambda", "cuda", precision="tf32")
    assert np.array_equal(acc1, acc2, equal_nan=True) and torch.equal(p1, p2)
    _run(bench, "finetune", "cuda")
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32


@pytest.mark.parametrize("net", ["mlp", "cifar_cnn", "resnet18"])
def test_every_method_runs_a_stream_end_to_end(net):
    bench = _stream(net)
    methods = list(METHODS) if net != "resnet18" else ["finetune", "metacl", "ewc", "pi-metacl-beta",
                                                        "mas-metacl-lambda"]
    for m in methods:
        acc, p = _run(bench, m, "cuda")
        assert np.isfinite(acc[1, :2]).all() and torch.isfinite(p).all(), m


@pytest.mark.parametrize("compile", ["off", "on"])
def test_a_grid_shares_the_gpu_between_workers_with_the_numbers_of_one_process(hparams_file, tmp_path, compile):
    """Three worker processes or one: the same numbers, eager and compiled (CUDA graphs, each process compiling for
    itself)."""
    from metacl_lite.lab.executors import check_plan
    from metacl_lite.lab.grid import run_experiment

    kw = dict(K=5, n_tasks=2, epochs=1, seeds=[0, 1], methods=["finetune", "pi-metacl-lambda"], show_progress=False,
              device="cuda", compile=compile)
    run_experiment("pmnist", out=tmp_path / "a.json", plan=check_plan("local", 3, 1), **kw)
    run_experiment("pmnist", out=tmp_path / "b.json", plan=check_plan("local", 1, 1), **kw)
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["config"]["train"]["device"] == "cuda" and a["config"]["accelerator"] == accelerator("cuda")
    assert a["provenance"]["invocations"][0]["device"].startswith(f"cuda: {accelerator('cuda')}")
    assert a["provenance"]["command"].endswith(("--compile on " if compile == "on" else "") + "--device cuda --out "
                                               + str(tmp_path / "a.json"))
    timing = ("wall_s", "peak_gpu_mb")  # what the units measured of themselves, not their numbers
    for section in ("runs", "references", "oracle"):
        assert {k: {f: v for f, v in u.items() if f not in timing} for k, u in a[section].items()} == \
               {k: {f: v for f, v in u.items() if f not in timing} for k, u in b[section].items()}
        assert all(u["peak_gpu_mb"] > 0 for u in a[section].values())  # each GPU unit's peak memory, recorded


@pytest.mark.parametrize("method", ["pi-metacl-lambda", "ewc-metacl-beta"])
def test_an_outer_step_never_waits_for_the_gpu(method):
    """The outer steps of a penalised task (MetaCL's inner loop, the penalty, the balance, PI's path, Adam) queue
    their kernels without one GPU->CPU read (torch's sync debug mode turns any synchronisation into an error): the
    dynamic lambda stays on the device (`balance.dynamic_lambda`)."""
    from metacl_lite import training
    from metacl_lite.accel.device import benchmark_on

    bench = benchmark_on(_stream("mlp"), "cuda")
    cfg = TrainConfig(epochs=1, beta=1.0, gamma=0.1, device="cuda")
    model = training._new_model(bench, 0, "cuda")
    reg, gen = training.RegState(), torch.Generator().manual_seed(0)
    m = METHODS[method]
    training.train_experience(model, bench.train_stream[0], m, cfg, reg, gen)  # Omega and the anchor exist
    importance = training.IMPORTANCE[m.regulariser](cfg)
    importance.begin_task(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.outer_lr, foreach=True)
    exp = bench.train_stream[1]
    x, y = exp.inputs()[:100], exp.y[:100]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            theta = params_vector(model)
            g1 = training.TASK_GRADIENT[m.update](model, x, y, exp.task_id, cfg)
            g2 = training.reg_gradient(theta, reg.anchor, reg.omega)
            g, lam = training.BALANCE[m.balance](g1, g2, cfg.beta, cfg.gamma)
            training.set_grad(model, g, copy=False)
            opt.step()
            importance.after_step(model, g1, theta)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
