"""Micro-benchmarks for the evaluation and the compiled task gradients (not a test; one intra-op thread, as the
grid's workers run). The numbers in `metacl_lite.compiled.COSTS` come from `steps`.

    python benchmarks/speed.py eval            # ms per evaluation of a_{i,j}, j <= i: images or weights permuted
    python benchmarks/speed.py steps mlp       # ms per outer step eager vs compiled, and the compile time with an
                                               # empty and a filled disk cache (mlp | cifar_cnn | resnet18)
    python benchmarks/speed.py run [--K 20]    # one MetaCL Permuted MNIST run (20 tasks): 3 evaluations x
                                               # compile off/on

Timings: the minimum (and median) over repeats, wall clock; on a shared machine run them when it is idle.
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from metacl_lite import compiled
from metacl_lite import training
from metacl_lite.mnist import permuted_mnist
from metacl_lite.models import cifar_cnn, mlp, resnet18_multihead

#: arch -> (model builder, input shape, heads); the batch is 100 images (bundles of 10), as in Appendix B.
ARCHS = {"mlp": (lambda: mlp(), (784,), 1), "cifar_cnn": (lambda: cifar_cnn(), (3, 32, 32), 10),
         "resnet18": (lambda: resnet18_multihead(random_init=True), (3, 224, 224), 10)}


def timings_ms(fns: dict, repeats: int) -> dict:
    """{name: (min, median) ms}: the functions called in turn, `repeats` rounds (the minimum is the least disturbed
    by other processes)."""
    for fn in fns.values():
        fn()
    ts = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            ts[k].append(1e3 * (time.perf_counter() - t0))
    return {k: (min(v), statistics.median(v)) for k, v in ts.items()}


@torch.no_grad()
def original_evaluate(model, exp) -> float:
    """The evaluation before the weights were permuted: a copy x[:, perm] of the images (advanced indexing)."""
    return 100.0 * int((model(exp.x[:, exp.perm]).argmax(1) == exp.y).sum()) / len(exp)


def bench_eval(repeats: int) -> None:
    """Three ways to evaluate: the images permuted by advanced indexing (the code before), by index_select (what
    `Experience.inputs` does now; fast=False), and the first layer's weights permuted (fast=True)."""
    bench = permuted_mnist(K=20, n_tasks=20, seed=0)
    model = training._new_model(bench, 0)
    for i in (0, 4, 9, 19):
        tests = bench.test_stream[: i + 1]
        t = timings_ms({"x[:, perm]": lambda: [original_evaluate(model, e) for e in tests],
                        "index_select": lambda: training.evaluate_tasks(model, tests, fast=False),
                        "weights": lambda: training.evaluate_tasks(model, tests)}, repeats)
        print(f"a_(i,j) for j <= i = {i:2d}, ms min (median) per evaluation of the {i + 1} task(s): " + ", ".join(
            f"{k} {v[0]:.1f} ({v[1]:.1f})" for k, v in t.items()), flush=True)


def _setup(arch: str, batch: int):
    build, shape, heads = ARCHS[arch]
    torch.manual_seed(0)
    model = build().train()
    return model, torch.randn(batch, *shape), torch.randint(0, 10, (batch,)), heads - 1


def _step_fns(model, x, y, task):
    return {("metacl", "eager"): lambda: training.metacl_gradient(model, x, y, task, 0.01, 10),
            ("metacl", "compiled"): lambda: compiled.metacl_gradient(model, x, y, task, 0.01, 10),
            ("plain", "eager"): lambda: training.plain_gradient(model, x, y, task),
            ("plain", "compiled"): lambda: compiled.plain_gradient(model, x, y, task)}


def compile_child(arch: str, kind: str, batch: int) -> None:
    """In a fresh process: seconds to the first compiled call of one step function (compile + one step)."""
    torch.set_num_threads(1)
    model, x, y, task = _setup(arch, batch)
    t0 = time.perf_counter()
    _step_fns(model, x, y, task)[(kind, "compiled")]()
    print(time.perf_counter() - t0)


def bench_steps(arch: str, repeats: int, batch: int) -> None:
    for kind in ("metacl", "plain"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
            cmd = [sys.executable, __file__, "_compile", arch, "--kind", kind, "--batch", str(batch)]
            for label in ("empty cache", "filled cache"):
                t = float(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
                print(f"{arch} {kind:6s} first compiled call in a new process ({label}): {t:6.1f} s", flush=True)
    model, x, y, task = _setup(arch, batch)
    fns = _step_fns(model, x, y, task)
    t = timings_ms(fns, repeats)
    for kind in ("metacl", "plain"):
        (e, em), (c, cm) = t[(kind, "eager")], t[(kind, "compiled")]
        print(f"{arch} {kind:6s} outer step (batch {batch}), min (median): eager {e:8.2f} ({em:8.2f}) ms, compiled "
              f"{c:8.2f} ({cm:8.2f}) ms, saving {e - c:8.2f} ms", flush=True)


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
             "index_select": functools.partial(real, fast=False), "weights": real}
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("eval", "steps", "run", "_compile"))
    p.add_argument("arch", nargs="?", default="mlp", choices=tuple(ARCHS))
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--kind", default="metacl", choices=("metacl", "plain"))
    p.add_argument("--K", type=int, default=20)
    p.add_argument("--method", default="metacl")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.what == "eval":
        bench_eval(a.repeats)
    elif a.what == "steps":
        bench_steps(a.arch, a.repeats, a.batch)
    elif a.what == "run":
        bench_run(a.K, a.method)
    else:
        compile_child(a.arch, a.kind, a.batch)


if __name__ == "__main__":
    main()
