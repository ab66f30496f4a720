"""Micro-benchmarks for the evaluation and the compiled task gradients (not a test; one intra-op thread, as the
grid's workers run). The numbers in `metacl_lite.accel.compiled.COSTS` come from `steps`.

    python benchmarks/speed.py eval            # ms per evaluation of a_{i,j}, j <= i: images or weights permuted
    python benchmarks/speed.py steps mlp       # ms per outer step eager vs compiled, and the compile time with an
                                               # empty and a filled disk cache (mlp | cifar_cnn | resnet18)
    python benchmarks/speed.py steps mlp --device cuda --json steps-mlp-cuda.json
                                               # the same on a GPU (compiled: CUDA graphs), where the numbers of
                                               # `compiled.CUDA_COSTS` come from; --json also writes them with
                                               # provenance
    python benchmarks/speed.py run [--K 20]    # one MetaCL Permuted MNIST run (20 tasks): 3 evaluations x
                                               # compile off/on
    python benchmarks/speed.py profile --suite cub --method metacl --device cuda [--compile on] [--json FILE]
                                               # where one run's time goes: operators by their own GPU time

Timings: the minimum (and median) over repeats, wall clock; on a shared machine run them when it is idle.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from metacl_lite.accel import compiled

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fasteval  # noqa: E402  (benchmarks/fasteval.py, beside this script)
from metacl_lite import training
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.models import cifar_cnn, mlp, resnet18_multihead

#: arch -> (model builder, input shape, heads); the batch is 100 images (bundles of 10), as in Appendix B.
ARCHS = {"mlp": (lambda: mlp(), (784,), 1), "cifar_cnn": (lambda: cifar_cnn(), (3, 32, 32), 10),
         "resnet18": (lambda: resnet18_multihead(random_init=True), (3, 224, 224), 10)}


def _sync() -> None:
    """Wait for the GPU's queued work (timings on a GPU end when its kernels have run, not when they were queued)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timings_ms(fns: dict, repeats: int) -> dict:
    """{name: (min, median) ms}: the functions called in turn, `repeats` rounds (the minimum is the least disturbed
    by other processes)."""
    for fn in fns.values():
        fn()
        fn()  # on a GPU the second call of a compiled step records its CUDA graph; later calls replay it
    _sync()
    ts = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            _sync()
            ts[k].append(1e3 * (time.perf_counter() - t0))
    return {k: (min(v), statistics.median(v)) for k, v in ts.items()}


@torch.no_grad()
def original_evaluate(model, exp) -> float:
    """The evaluation before the weights were permuted: a copy x[:, perm] of the images (advanced indexing)."""
    return 100.0 * int((model(exp.x[:, exp.perm]).argmax(1) == exp.y).sum()) / len(exp)


def bench_eval(repeats: int) -> None:
    """Three ways to evaluate: the images permuted by advanced indexing (the code before), by index_select (what
    `Experience.inputs` does now; `training.evaluate_tasks`), and the first layer's weights permuted
    (`benchmarks/fasteval.py`'s `evaluate_tasks`)."""
    bench = permuted_mnist(K=20, n_tasks=20, seed=0)
    model = training._new_model(bench, 0)
    for i in (0, 4, 9, 19):
        tests = bench.test_stream[: i + 1]
        t = timings_ms({"x[:, perm]": lambda: [original_evaluate(model, e) for e in tests],
                        "index_select": lambda: training.evaluate_tasks(model, tests),
                        "weights": lambda: fasteval.evaluate_tasks(model, tests)}, repeats)
        print(f"a_(i,j) for j <= i = {i:2d}, ms min (median) per evaluation of the {i + 1} task(s): " + ", ".join(
            f"{k} {v[0]:.1f} ({v[1]:.1f})" for k, v in t.items()), flush=True)


def _setup(arch: str, batch: int, device: str = "cpu", precision: str = "float32"):
    from metacl_lite.accel.device import deterministic, set_precision

    deterministic(device)  # the settings every run on a GPU trains with
    set_precision(precision, device)
    build, shape, heads = ARCHS[arch]
    torch.manual_seed(0)
    model = build().train().to(device)
    x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
    return model, x.to(device), y.to(device), heads - 1


def _step_fns(model, x, y, task):
    return {("metacl", "eager"): lambda: training.metacl_gradient(model, x, y, task, 0.01, 10),
            ("metacl", "compiled"): lambda: compiled.metacl_gradient(model, x, y, task, 0.01, 10),
            ("plain", "eager"): lambda: training.plain_gradient(model, x, y, task),
            ("plain", "compiled"): lambda: compiled.plain_gradient(model, x, y, task)}


def compile_child(arch: str, kind: str, batch: int, device: str = "cpu", precision: str = "float32") -> None:
    """In a fresh process: seconds to the first compiled calls of one step function (compile + two steps: on a GPU
    the second call records the CUDA graph)."""
    torch.set_num_threads(1)
    model, x, y, task = _setup(arch, batch, device, precision)
    t0 = time.perf_counter()
    fn = _step_fns(model, x, y, task)[(kind, "compiled")]
    fn()
    fn()
    _sync()
    print(time.perf_counter() - t0)


def _write(doc: dict, out, device: str) -> None:
    """The figures so far, with provenance (written after each measurement: a run cut off keeps what it has)."""
    if out is None:
        return
    from metacl_lite.lab.atomic import write_json
    from metacl_lite.lab.provenance import invocation

    doc["provenance"] = {"command": " ".join(["python", "benchmarks/speed.py", *sys.argv[1:]]), **invocation(device)}
    write_json(out, doc)


def bench_steps(arch: str, repeats: int, batch: int, device: str = "cpu", out=None,
                precision: str = "float32") -> dict:
    """Compile times (new process, empty and filled disk cache) and ms per outer step, eager against compiled, of
    both task gradients on `device`; written to `out` (JSON, with provenance) after each measurement: the figures of
    `compiled.COSTS` (CPU) and `compiled.CUDA_COSTS` (GPU). The compile children fill one temporary disk cache, which
    this process then reads, so the timings compile nothing from scratch."""
    doc = {"kind": "compile-costs", "arch": arch, "batch": batch, "bundle": 10, "repeats": repeats,
           "device": device, "precision": precision, "complete": False, "compile_s": {}, "step_ms": {}}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        for kind in ("metacl", "plain"):
            cmd = [sys.executable, __file__, "_compile", arch, "--kind", kind, "--batch", str(batch), "--device",
                   device, "--precision", precision]
            for label in ("empty cache", "filled cache"):
                t = float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                          .strip().splitlines()[-1])
                doc["compile_s"].setdefault(kind, {})[label] = t
                print(f"{arch} {kind:6s} first compiled calls in a new process ({label}): {t:6.1f} s", flush=True)
                _write(doc, out, device)
        model, x, y, task = _setup(arch, batch, device, precision)
        fns = _step_fns(model, x, y, task)
        t = timings_ms(fns, repeats)
    for kind in ("metacl", "plain"):
        (e, em), (c, cm) = t[(kind, "eager")], t[(kind, "compiled")]
        doc["step_ms"][kind] = {"eager_min": e, "eager_median": em, "compiled_min": c, "compiled_median": cm,
                                "saving": e - c}
        print(f"{arch} {kind:6s} outer step (batch {batch}), min (median): eager {e:8.2f} ({em:8.2f}) ms, compiled "
              f"{c:8.2f} ({cm:8.2f}) ms, saving {e - c:8.2f} ms", flush=True)
    if device.startswith("cuda"):
        from torch._dynamo.utils import counters

        # compiled functions that inductor ran without a CUDA graph (counted once each; e.g. an input mutated in
        # place, which compiled.py avoids: expected 0)
        doc["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
    doc["complete"] = True
    _write(doc, out, device)
    if out is not None:
        print(f"wrote {out}")
    return doc


def bench_run(K: int, method: str) -> None:
    from metacl_lite.training import TrainConfig, run_stream

    bench = permuted_mnist(K=K, n_tasks=20, seed=0)
    model, exp = training._new_model(bench, 0).train(), bench.train_stream[0]
    t0 = time.perf_counter()
    compiled.metacl_gradient(model, exp.x[:100], exp.y[:100], 0, 0.01, 10)
    compiled.plain_gradient(model, exp.x[:100], exp.y[:100], 0)
    print(f"compile (first calls, disk cache as found in {compiled.cache_dir()}): {time.perf_counter() - t0:.1f} s; "
          f"the runs below exclude it", flush=True)
    real = training.evaluate_tasks
    evals = {"x[:, perm]": lambda model, exps: [original_evaluate(model, e) for e in exps],
             "index_select": real, "weights": fasteval.evaluate_tasks}
    try:
        for label, fn in evals.items():
            training.evaluate_tasks = fn
            for mode in ("off", "on"):
                t0 = time.perf_counter()
                r = run_stream(bench, method, TrainConfig(compile=mode), seed=0, show_progress=False)
                print(f"{method} K={K}: evaluation {label:12s} compile {mode:3s}: {time.perf_counter() - t0:7.1f} s "
                      f"(mean final accuracy {r['acc_matrix'][-1].mean():.4f})", flush=True)
    finally:
        training.evaluate_tasks = real


def bench_profile(suite: str, method: str, n_tasks: int, device: str, compile: str, out,
                  precision: str = "float32") -> None:
    """Where one run's time goes on `device`: `method` on the first `n_tasks` tasks of `suite` (synthetic tensors of
    the exact shapes for cifar100/cub, the embedded data for pmnist) under torch.profiler, after a warm-up run; prints
    (and writes to `out`) the operators by their own GPU time (CPU time on the CPU) and the run's wall time."""
    from torch.profiler import ProfilerActivity, profile

    from metacl_lite.accel.device import deterministic
    from metacl_lite.lab.bench import SYNTHETIC_STRENGTH
    from metacl_lite.data.specs import get_spec
    from metacl_lite.data.synthetic import synthetic_benchmark
    from metacl_lite.training import TrainConfig, run_stream

    from metacl_lite.accel.device import kind

    deterministic(device)  # on cuda:N also makes N the current GPU, which "cuda" below means
    spec = get_spec(suite)
    bench = (permuted_mnist(K=20, n_tasks=n_tasks, seed=0) if suite == "pmnist"
             else synthetic_benchmark(suite, {"cifar100": 20, "cub": 10}[suite], n_tasks))
    cfg = TrainConfig(epochs=spec.epochs, compile=compile, device=kind(device), precision=precision,
                      **SYNTHETIC_STRENGTH)
    run_stream(bench, method, cfg, seed=0, show_progress=False)  # warm-up: cuDNN, compile, CUDA graphs
    _sync()
    gpu = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        run_stream(bench, method, cfg, seed=0, show_progress=False)
        _sync()
    wall = time.perf_counter() - t0
    table = prof.key_averages().table(sort_by="self_cuda_time_total" if gpu else "self_cpu_time_total",
                                      row_limit=30)
    text = (f"{suite} {method}, {n_tasks} task(s) x {spec.epochs} epoch(s), device {device}, compile {compile}, "
            f"precision {precision}: "
            f"{wall:.1f} s under the profiler\n{table}")
    print(text, flush=True)
    if out is not None:
        Path(out).write_text(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("eval", "steps", "run", "profile", "_compile"))
    p.add_argument("arch", nargs="?", default="mlp", choices=tuple(ARCHS))
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--kind", default="metacl", choices=("metacl", "plain"))
    p.add_argument("--K", type=int, default=20)
    p.add_argument("--method", default="metacl")
    p.add_argument("--device", default="cpu", help="steps: cpu, cuda or cuda:N")
    p.add_argument("--json", type=Path, default=None, help="steps: also write the figures here; profile: the table")
    p.add_argument("--suite", default="cub", choices=("pmnist", "cifar100", "cub"), help="profile: the benchmark")
    p.add_argument("--n-tasks", type=int, default=2, help="profile: tasks of the stream")
    p.add_argument("--compile", default="off", choices=("off", "on"), help="profile: compiled task gradients")
    p.add_argument("--precision", default="float32", choices=("float32", "tf32"),
                   help="steps, profile: on a GPU, float32 or TF32 products and convolutions")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.what == "eval":
        bench_eval(a.repeats)
    elif a.what == "steps":
        bench_steps(a.arch, a.repeats, a.batch, a.device, a.json, a.precision)
    elif a.what == "run":
        bench_run(a.K, a.method)
    elif a.what == "profile":
        bench_profile(a.suite, a.method, a.n_tasks, a.device, a.compile, a.json, a.precision)
    else:
        compile_child(a.arch, a.kind, a.batch, a.device, a.precision)


if __name__ == "__main__":
    main()
