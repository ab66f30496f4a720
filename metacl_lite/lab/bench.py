"""Speed benchmark (not a test): wall time and peak memory of one full Permuted MNIST run per method and of the
whole Table 1 grid, next to a lower bound from the floating-point work of the evaluation.

    python -m metacl_lite.tools bench [--K 20] [--methods a,b] [--skip-grid | --skip-methods] [--grids 20,500]
                                [--grid-seeds N] [--compile auto]

Each measurement runs in its own process so that its peak resident memory (ru_maxrss) is its own. Results are
printed and written to results/bench-pmnist-K<K>.json with provenance.
"""
from __future__ import annotations

import multiprocessing
import resource
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import torch

from .atomic import write_json
from ..accel.device import torch_threads
from ..paths import REPO_ROOT
from .provenance import device
from ..data.specs import get_spec
from ..keys import unit_name
from ..vocab import BUDGET_OPTIONS, OPTIONS, PAPER_METHOD_NAMES, memory_of, options_of

#: The step of a memory method against its base method's, on the CPU: at most 1.5 times (issue 44: one more gradient
#: per outer step), 3 times for MetaCL-lambda with GEM's constraints (issue 52: a gradient per past task).
MEMORY_TARGET, GEM_TARGET = 1.5, 3.0


def measures(doc: dict) -> set:
    """What a speed-benchmark file measured: its methods, and its grids (K, seeds, and whether the legacy path too: the
    files made before that path left the benchmark, in issue 41, keep its grid times)."""
    return ({("method", r["method"]) for r in doc.get("per_method", [])}
            | {("grid", g["K"], g["seeds"], "legacy" in g) for g in doc.get("grids", [])}
            | {("gpu grid", m, doc["seeds"]) for m in (doc.get("methods", []) if doc.get("gpu") else [])})


def suite_of(doc: dict) -> str:
    """The suite a speed-benchmark file (or a planned one) times: its "suite" ("pmnist" for the CPU files of
    Permuted MNIST, which do not name it)."""
    return doc.get("suite", "pmnist")


def check_bench_out(path: Path, planned: dict) -> Path:
    """The file a benchmark writes: refused (before any measurement) when it exists and is not a speed benchmark file
    (a results or tuning file given as --out: its units would be lost), or holds a measurement this run would not
    make again (a partial run would replace the committed figures: fewer methods, no grid, ...)."""
    from ..errors import FileFormatError, UserError
    from .atomic import check_writable, read_json
    from .store import KINDS, kind_of, what_is

    path = check_writable(Path(path))
    if path.exists():
        doc = read_json(path, "speed benchmark file")
        if kind_of(doc) != "bench":
            raise FileFormatError(f"{path} is {what_is(doc)}, not {KINDS['bench']}, and the benchmark would "
                                  f"replace it: give --out a new file or a speed benchmark file")
        if suite_of(doc) != suite_of(planned):
            raise UserError(f"{path} holds the {suite_of(doc)} benchmark's figures, and this run times "
                            f"{suite_of(planned)}, which would replace them: give --out a new file (or that "
                            f"suite's own bench file)")
        lost = measures(doc) - measures(planned)
        if any(m[0] == "grid" and m[3] for m in lost):
            raise UserError(f"{path} holds grid times of the legacy path, measured before that path left the "
                            f"benchmark, which no run makes again: write this run elsewhere with --out FILE")
        if lost:
            raise UserError(f"{path} holds measurements this run would not make again ({len(lost)}: e.g. "
                            f"{sorted(map(str, lost))[0]}); write this partial run elsewhere with --out FILE, or run "
                            f"the whole benchmark")
    return path


def provenance(command: str, where: str = "cpu") -> dict:
    """The command and where the measured work really ran (`where`: the resolved device)."""
    from .provenance import invocation

    return {"command": command, **invocation(where)}


def _peak_mb_self() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def matmul_gflops(repeats: int = 20, threads: Optional[int] = None) -> float:
    """Measured float32 GEMM rate on this machine for the evaluation's biggest product (10000x784 @ 784x256), with
    `threads` intra-op threads (default: torch's current setting, all cores)."""
    with torch_threads(threads or None):
        x, w = torch.randn(10000, 784), torch.randn(784, 256)
        x @ w
        t0 = time.perf_counter()
        for _ in range(repeats):
            x @ w
        dt = (time.perf_counter() - t0) / repeats
    return 2 * 10000 * 784 * 256 / dt / 1e9


def eval_flops(n_tasks: int = 20, n_test: int = 10000, dims=(784, 256, 256, 10)) -> float:
    """FLOPs of evaluating a_{i,j} for all j <= i: n(n+1)/2 forward passes of the MLP over the test set."""
    per_image = 2 * sum(a * b for a, b in zip(dims[:-1], dims[1:]))
    return n_tasks * (n_tasks + 1) / 2 * n_test * per_image


def _one(method: str, K: int, compile: str, queue) -> None:
    """One full Permuted MNIST run of `method` (seed 0, tuned beta/gamma and decided options, one thread, today's
    defaults: index_select evaluation, task gradients as `compile` says), in a child process of its own. Besides its
    wall time, the time its evaluations took (`eval_s`, timed around `training.evaluate_tasks`) and so the time per
    outer step of its training (`step_ms`: the rest over `training.outer_steps`)."""
    from .. import training
    from ..data.mnist import permuted_mnist
    from .hparams import method_config

    torch.set_num_threads(1)
    bench = permuted_mnist(K, get_spec("pmnist").n_tasks, seed=0)
    cfg = method_config("pmnist", method, K=K, compile=compile)
    evaluate, spent = training.evaluate_tasks, [0.0]

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return evaluate(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t

    training.evaluate_tasks = timed  # this child process only
    t0 = time.perf_counter()
    training.run_stream(bench, method, cfg, seed=0, show_progress=False)
    wall, steps = time.perf_counter() - t0, training.outer_steps(bench.train_stream, cfg)
    queue.put({"method": method, "wall_s": wall, "peak_mb": _peak_mb_self(), "eval_s": spent[0], "steps": steps,
               "step_ms": (wall - spent[0]) / steps * 1e3})


def with_bases(methods: Sequence[str]) -> list[str]:
    """`methods`, each method of the memory family preceded by the method it adds the memory to where that is not
    listed (`vocab.memory_of`: MetaCL-lambda for MetaCL-lambda with both references), so its time stands beside it."""
    out: list[str] = []
    for m in methods:
        base = memory_of(m).base if memory_of(m) else None
        out += [b for b in (base, m) if b is not None and b not in out and (b == m or b not in methods)]
    return out


def memory_ratios(times: dict[str, float]) -> list[dict]:
    """For each method of the memory family in `times` ({method: seconds or ms per step}) whose base method is there
    too: its time over its base's (`ratio`), its `target` and whether it is met: issue 44's (`MEMORY_TARGET`: one more
    gradient a step); for GEM's constraints, a gradient per past task, none for GEM and issue 52's with a MetaCL-lambda
    (`GEM_TARGET`)."""
    aim = {m: (GEM_TARGET if "lambda" in mm.base else None) if mm.use == "constrain" else MEMORY_TARGET
           for m, mm in ((m, memory_of(m)) for m in times if memory_of(m))}
    return [{"method": m, "base": memory_of(m).base, "ratio": (r := times[m] / times[memory_of(m).base]),
             "target": t, "met": None if t is None else r <= t} for m, t in aim.items() if memory_of(m).base in times]


def print_ratios(ratios: list[dict], what: str) -> None:
    """The memory methods' `what` beside their base methods', with the ratio and the target."""
    for r in ratios:
        aim = "no target" if r["target"] is None else \
            f"target <= {r['target']:g} x: {'met' if r['met'] else 'MISSED'}"
        print(f"{r['method']:22s} {r['ratio']:5.2f} x the {what} of {r['base']} ({aim})", flush=True)


def bench_budgets(methods: Sequence[str]) -> dict:
    """The budgets (`vocab.BUDGET_OPTIONS`) the measured `methods` read, at their declared defaults, as the runs train
    ({"memory": 1}; {} for the paper's methods)."""
    return {k: OPTIONS[k].default for k in BUDGET_OPTIONS if any(k in {o.name for o in options_of(m)} for m in methods)}


def _grid(K: int, seeds: int, out: str, compile: str, queue) -> None:
    """The whole grid of `K` (all eleven methods x seeds, references, oracle) with today's defaults: worker processes,
    one thread each, task gradients as `compile` says."""
    from .executors import check_plan, default_workers
    from .grid import run_experiment

    plan = check_plan("local", default_workers(), 1)
    t0 = time.perf_counter()
    run_experiment("pmnist", K, seeds=range(seeds), out=Path(out), show_progress=False, plan=plan,
                   command=lambda c, o: "bench", compile=compile)
    queue.put({"wall_s": time.perf_counter() - t0, "peak_mb": _peak_mb_self()})


def in_child(target, *args) -> dict:
    """Run `target(*args, queue)` in a fresh process (spawned, so its peak memory is its own); return what it put."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    import queue as queue_mod

    try:
        while True:  # a child that dies before it answers (a bad K, no data) must not leave this process waiting
            try:
                out = q.get(timeout=1.0)
                break
            except queue_mod.Empty:
                if not p.is_alive() and q.empty():
                    p.join()
                    raise RuntimeError(f"benchmark child process failed (exit {p.exitcode}) before it reported")
    finally:
        p.join()
    if p.exitcode != 0:
        raise RuntimeError(f"benchmark child process failed (exit {p.exitcode})")
    return out


def bench_multihead(suite: str, epochs: Optional[int] = None, n_tasks: Optional[int] = None,
                    methods: Optional[Sequence[str]] = None, out: Optional[Path] = None) -> int:
    """Wall time per method on synthetic data of the real shapes. Without a GPU: fewer epochs (and tasks), said so,
    and the full-run time is the whole measured time scaled linearly by (epochs x tasks) - a rough estimate that
    also scales the evaluation (which really grows as tasks^2 / 2 and not with epochs). A short warm-up run comes
    first so that one-time start-up costs are not charged to the first method (files before this change lack it)."""
    from ..data.synthetic import synthetic_benchmark
    from ..training import TrainConfig, run_stream

    spec = get_spec(suite)
    full = (spec.epochs, spec.n_tasks, spec.tuning_K)  # epochs, tasks, K
    epochs, n_tasks = epochs or full[0], n_tasks or full[1]
    if n_tasks > spec.n_tasks or epochs > spec.epochs:
        from ..errors import UsageError

        raise UsageError(f"--n-tasks {n_tasks} --epochs {epochs}: {spec.title} has {spec.n_tasks} tasks of "
                         f"{spec.epochs} epochs; a reduced run takes at most those")
    dev = "cpu"  # this path trains on the CPU, whatever GPU is visible (a GPU: bench --device cuda)
    methods = list(methods or PAPER_METHOD_NAMES)
    default_out = REPO_ROOT / "results" / f"bench-{suite}.json"
    # a run of fewer methods must not replace the committed figures of the others: refused before any measurement
    out_file = check_bench_out(default_out if out is None else Path(out),
                               {"suite": suite, "per_method": [{"method": m} for m in methods]})
    bench = synthetic_benchmark(suite, full[2], n_tasks)
    reduced = (epochs, n_tasks) != full[:2]
    run_stream(synthetic_benchmark(suite, 1, 1), "finetune", TrainConfig(epochs=1), seed=0, show_progress=False)
    print(f"{suite}: synthetic tensors of the real shapes, K={full[2]}, {n_tasks} tasks, {epochs} epoch(s) per task "
          f"on {dev}" + (f" (REDUCED from {full[0]} epochs x {full[1]} tasks; full-run times = measured x "
                            f"{full[0] * full[1] // (epochs * n_tasks)}, a rough linear extrapolation)"
                            if reduced else ""))
    rows = []
    for m in methods:
        cfg = TrainConfig(epochs=epochs, beta=1.0, gamma=0.1)
        r = run_stream(bench, m, cfg, seed=0, show_progress=False)
        wall = r["wall_s"]
        est = wall * (full[0] * full[1]) / (epochs * n_tasks) if reduced else wall
        rows.append({"method": m, "wall_s": wall, "full_run_s_estimate": est, "extrapolated": reduced})
        print(f"{m:20s} measured {wall:8.1f} s   full run {'~' if reduced else ''}{est / 60:7.1f} min", flush=True)
    grid = 3 * sum(r["full_run_s_estimate"] for r in rows)
    print(f"Table {'2' if suite == 'cifar100' else '3'} grid ({len(methods)} methods x 3 seeds, without references "
          f"and oracle): {'~' if reduced else ''}{grid / 3600:.1f} h")
    cmd = f"python -m metacl_lite.tools bench --suite {suite}"
    cmd += f" --epochs {epochs} --n-tasks {n_tasks}" if reduced else ""
    cmd += "" if methods == list(PAPER_METHOD_NAMES) else f" --methods {','.join(methods)}"
    if out_file.resolve() != default_out.resolve():
        from .provenance import relative_to_repo

        cmd += f" --out {shlex.quote(relative_to_repo(out_file))}"
    prov = provenance(cmd)
    prov["wall_s_total"] = sum(r["wall_s"] for r in rows)
    write_json(out_file,
               {"kind": "bench", "suite": suite, "device": dev, "epochs": epochs, "n_tasks": n_tasks, "reduced": reduced,
                       "per_method": rows, "grid_s_estimate": grid, "provenance": prov})
    return 0


def _time_grid(K: int, seeds: int, lb: float, compile: str) -> dict:
    """One whole grid at K with the paper's methods and `seeds` seeds, timed in a child beside its evaluation bound."""
    n_runs = seeds * len(PAPER_METHOD_NAMES)
    row = {"K": K, "seeds": seeds, "runs": n_runs, "references": seeds * get_spec("pmnist").n_tasks, "oracle": seeds,
           "lower_bound_s": lb * n_runs}
    with tempfile.TemporaryDirectory() as d:
        g = in_child(_grid, K, seeds, f"{d}/grid.json", compile)
    row["new"] = {"wall_s": g["wall_s"], "peak_mb": g["peak_mb"]}
    print(f"grid K={K} ({n_runs} runs + references + oracles): {g['wall_s']:.0f} s "
          f"({g['wall_s'] / row['lower_bound_s']:.2f} x the evaluation bound {row['lower_bound_s']:.0f} s)", flush=True)
    return row


def bench_pmnist(K: int = 20, methods: Optional[Sequence[str]] = None, skip_grid: bool = False,
                 grids: Sequence[int] = (20,), grid_seeds: int = 3, compile: str = "off",
                 skip_methods: bool = False, out: Optional[Path] = None) -> int:
    """In one run on one machine: the GEMM rate and the evaluation bound, each method's full run at `K` (today's
    defaults; none with `skip_methods`), and for each K in `grids` the whole grid with today's defaults. `compile` is
    the task gradients of both.
    Every measurement runs in a process of its own; the figures go to results/bench-pmnist-K<K>.json (with methods of
    the memory family, each timed beside the method it adds the memory to, `with_bases`, and with the ratio of their
    steps, `memory_ratios`: results/bench-pmnist-K<K>-memory-M<M>.json, M their declared budget)."""
    asked = None if skip_methods or methods is None else list(methods)
    methods = [] if skip_methods else with_bases(methods or PAPER_METHOD_NAMES)
    from .files import budget_tag

    budgets = bench_budgets(methods)
    default_out = REPO_ROOT / "results" / f"bench-pmnist-K{K}{budget_tag(budgets)}.json"
    out = check_bench_out(default_out if out is None else Path(out),
                          {"per_method": [{"method": m} for m in methods],
                           "grids": [{"K": g, "seeds": grid_seeds} for g in ([] if skip_grid else grids)]})
    from ..data.benchmarks import check_data

    for k in {K, *([] if skip_grid else grids)}:
        check_data("pmnist", k)  # before any child starts: K beyond the embedded subset needs the raw files
    rate, rate1 = matmul_gflops(), matmul_gflops(threads=1)
    lb, lb1 = eval_flops() / (rate * 1e9), eval_flops() / (rate1 * 1e9)
    print(f"machine: {device()}; float32 GEMM {rate:.1f} GFLOP/s (all cores), {rate1:.1f} GFLOP/s (one thread)")
    print(f"evaluation work per run: {eval_flops() / 1e12:.2f} TFLOP -> lower bound {lb:.1f} s per run on all cores, "
          f"{lb1:.1f} s on one thread (210 evaluations of 10 000 images)")
    rows = []
    print(f"{'method':20s} {'wall s':>8s} {'peak MB':>8s} {'x 1-thread bound':>17s}")
    for m in methods:
        r = in_child(_one, m, K, compile)
        rows.append(r)
        print(f"{m:20s} {r['wall_s']:8.1f} {r['peak_mb']:8.0f} {r['wall_s'] / lb1:17.2f}   {r['step_ms']:6.2f} ms per "
              f"outer step", flush=True)
    ratios = memory_ratios({r["method"]: r["step_ms"] for r in rows})
    print_ratios(ratios, "step time")
    grid_rows = [_time_grid(Kg, grid_seeds, lb, compile) for Kg in ([] if skip_grid else grids)]
    cmd = (f"python -m metacl_lite.tools bench --K {K}" + (f" --grids {','.join(map(str, grids))}" if list(grids) != [20]
           else "") + (f" --grid-seeds {grid_seeds}" if grid_seeds != 3 else "")
           + (f" --compile {compile}" if compile != "off" else "")
           + (f" --methods {','.join(asked)}" if asked and asked != list(PAPER_METHOD_NAMES) else ""))
    prov = provenance(cmd + (" --skip-grid" if skip_grid else "") + (" --skip-methods" if skip_methods else "")
                      + _out_flag(out, default_out))
    prov["wall_s_total"] = sum(r["wall_s"] for r in rows) + sum(r["new"]["wall_s"] for r in grid_rows)
    write_json(out,
               {"kind": "bench", "gemm_gflops": rate, "gemm_gflops_1thread": rate1,
                "eval_tflop_per_run": eval_flops() / 1e12, "lower_bound_s_per_run": lb,
                "lower_bound_s_per_run_1thread": lb1, "per_method": rows, "grids": grid_rows, "compile": compile,
                **({"budgets": budgets, "memory_ratios": ratios} if ratios else {}), "provenance": prov})
    return 0


# ----------------------------------------------------------------------------------------------------------------
# On a GPU: whole grids, every unit at full size, several units sharing the card
# ----------------------------------------------------------------------------------------------------------------
#: The H100 targets of issue 19 for a whole grid (K, seeds, seconds), compile time included.
GPU_TARGETS = {"pmnist": (20, 5, 60.0), "cifar100": (20, 5, 600.0), "cub": (10, 5, 1800.0)}
#: beta/gamma for the synthetic grids (there are no tuned values without the data; the time does not depend on them)
SYNTHETIC_STRENGTH = {"beta": 1.0, "gamma": 0.1}


def _unit_row(unit: str, value: dict) -> dict:
    """A GPU bench file's row for one unit: its wall time, and its peak GPU memory where the unit recorded one."""
    return {"unit": unit, "wall_s": value["wall_s"],
            **({"peak_gpu_mb": value["peak_gpu_mb"]} if "peak_gpu_mb" in value else {})}


def _grid_units(seeds: Sequence[int], methods: Sequence[str]):
    from .grid import Unit, longest_first

    units = []
    for s in seeds:
        units += longest_first([Unit("run", s, m) for m in methods] + [Unit("reference", s), Unit("joint", s)])
    return units


def bench_gpu(suite: str, device: str = "cuda", seeds: int = 5, measured_seeds: Optional[int] = None,
              workers: Optional[int] = None, methods: Optional[Sequence[str]] = None, compile: str = "off",
              out: Optional[Path] = None, precision: str = "float32") -> dict:
    """The whole grid of `suite` at its paper K (Permuted MNIST K = 20, CIFAR-100 K = 20, CUB K = 10) on a GPU, every
    unit at full size (all tasks and epochs): `seeds` seeds of every method, their references and oracle, as `workers`
    processes sharing the card. Permuted MNIST trains on the embedded data with the tuned beta/gamma (`run_experiment`);
    CIFAR-100 and CUB on synthetic tensors of the exact shapes (`synthetic.py`; the data cannot be had everywhere, and
    the time does not depend on the pixels), beta = 1 and gamma = 0.1. `measured_seeds` < `seeds` times that many
    seeds and scales the wall time to `seeds` (every seed is the same work; the file says so). Writes `out` (default
    results/bench-<suite>-cuda.json, the file the README and the book read; another file for a setting such as
    `compile` "on", to compare before it replaces the default one) with each unit's own wall time, the device, the
    determinism settings and the targets. `precision`: "float32", or "tf32" (`TrainConfig.precision`: faster, other
    numbers), recorded in the file."""
    from ..accel.device import (check_precision, describe, determinism_settings, deterministic, kind, mps_active,
                                resolve, set_precision)
    from .executors import check_plan, default_workers

    where = resolve(device)
    if kind(where) != "cuda":
        from ..errors import UsageError

        raise UsageError(f"bench --device {device} times the grids on a GPU, and no GPU is usable here; on the CPU "
                         f"use bench without --device")
    spec = get_spec(suite)
    check_precision(precision, where)  # an unknown precision: refused before any work
    K, _, target = GPU_TARGETS[suite]
    measured = min(seeds, measured_seeds or seeds)
    methods = with_bases(methods or PAPER_METHOD_NAMES)  # a memory method's unit time beside its base method's
    default_out = REPO_ROOT / "results" / f"bench-{suite}-cuda.json"
    out_file = check_bench_out(Path(out) if out is not None else default_out,
                               {"suite": suite, "gpu": True, "methods": methods, "seeds": seeds})
    deterministic(where)
    set_precision(precision, where)  # as every unit sets it: the file's determinism record says what they ran with
    default_n = default_workers(gpu=True, benchmark=suite, device=where)
    workers = workers or default_n
    grid = GpuGrid(suite, K, range(measured), methods, check_plan("local", workers, 1), where, compile, precision)
    units, wall, data = grid.time_pmnist() if suite == "pmnist" else grid.time_synthetic(out_file)
    grid_s = wall * seeds / measured
    print(f"{suite}: grid of {measured} seed(s) x {len(methods)} methods + references + oracle in {wall:.1f} s on "
          f"{describe(where)} with {workers} workers; {seeds} seeds: {grid_s:.0f} s (target {target:.0f} s)")
    ratios = memory_ratios(method_walls(units))
    print_ratios(ratios, "mean run-unit time")
    cmd = f"python -m metacl_lite.tools bench --suite {suite} --device cuda" + "".join(
        f" {flag} {value}" for flag, value, default in (
            ("--grid-seeds", seeds, 5), ("--measured-seeds", measured, seeds), ("--workers", workers, default_n),
            ("--compile", compile, "off"), ("--precision", precision, "float32"),
            ("--methods", ",".join(methods), ",".join(PAPER_METHOD_NAMES))) if value != default)
    prov = provenance(cmd + _out_flag(out_file, default_out), where)
    doc = {"kind": "bench", "suite": suite, "device": describe(where), "gpu": True, "complete": True, "K": K,
           "n_tasks": spec.n_tasks,
           "epochs": spec.epochs, "data": data, "synthetic": suite != "pmnist", "workers": workers,
           "compile": compile, "precision": precision, "mps": mps_active(), "seeds": seeds,
           "measured_seeds": measured, "methods": methods,
           "wall_s_measured": wall, "grid_s": grid_s, "target_s": target, "units": units,
           "determinism": determinism_settings(), **({"memory_ratios": ratios} if ratios else {}),
           "provenance": {**prov, "wall_s_total": wall}}
    write_json(out_file, doc)
    return doc


def method_walls(units: list[dict]) -> dict[str, float]:
    """{method: the mean wall time of its run units} of a GPU bench file's unit rows ("runs/<method>/<seed>")."""
    walls: dict[str, list] = {}
    for u in units:
        section, _, rest = u["unit"].partition("/")
        if section == "runs":
            walls.setdefault(rest.rsplit("/", 1)[0], []).append(u["wall_s"])
    return {m: sum(w) / len(w) for m, w in walls.items()}


def _out_flag(out_file: Path, default_out: Path) -> str:
    """A bench command's --out, where the figures went elsewhere than the default file (shell-quoted, relative to the
    repository)."""
    if out_file.resolve() == default_out.resolve():
        return ""
    from .provenance import relative_to_repo

    return f" --out {shlex.quote(relative_to_repo(out_file))}"


class GpuGrid(NamedTuple):
    """The grid that `bench_gpu` times: `suite` at `K`, the `seeds` it measures of every method of `methods`, their
    references and oracle, run by `plan` on the GPU `where`."""

    suite: str
    K: int
    seeds: range
    methods: list
    plan: Any
    where: str
    compile: str
    precision: str

    def time_pmnist(self) -> tuple[list, float, str]:
        """Permuted MNIST's grid on its embedded data (`run_experiment`, into a file of its own that is then
        dropped): each unit's row (`_unit_row`), the wall time, and what it trained on."""
        from .grid import run_experiment
        from .store import load_results

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "grid.json"
            run_experiment("pmnist", self.K, seeds=self.seeds, methods=self.methods, out=out, show_progress=False,
                           plan=self.plan, command=lambda c, o: "bench", compile=self.compile, device=self.where,
                           precision=self.precision)
            doc = load_results(out)
        wall = time.perf_counter() - t0
        units = [_unit_row(unit_name(section, key), u) for section in ("runs", "references", "oracle")
                 for key, u in doc[section].items()]
        return units, wall, "embedded Permuted MNIST, beta/gamma tuned at K = 20 (hparams.json)"

    def time_synthetic(self, out_file: Path) -> tuple[list, float, str]:
        """CIFAR-100's or CUB's grid on synthetic tensors of the exact shapes: each unit's row as it ends, written to
        `out_file` at once (a run stopped before its grid is done keeps what it measured: complete false, no grid
        time), the wall time, and what it trained on."""
        from ..accel.device import describe
        from ..training import TrainConfig
        from .executors import run_all
        from .grid import Job, run_job

        spec = get_spec(self.suite)
        jobs = [Job(u, self.suite, self.K, spec.n_tasks, "synthetic", {"random_init": True},
                    TrainConfig(epochs=spec.epochs, compile=self.compile, device="cuda", precision=self.precision,
                                **(SYNTHETIC_STRENGTH if u.kind == "run" else {})).to_dict(), device=self.where)
                for u in _grid_units(self.seeds, self.methods)]
        units: list[dict] = []
        t0 = time.perf_counter()

        def save(job, r):
            name = unit_name(job.unit.section, job.unit.key)
            units.append(_unit_row(name, r["value"]))
            print(f"  {name}: {r['value']['wall_s']:.1f} s", flush=True)
            write_json(out_file,
                       {"kind": "bench", "suite": self.suite, "device": describe(self.where), "gpu": True,
                        "complete": False, "K": self.K, "workers": self.plan.workers, "units_planned": len(jobs),
                        "units": units, "elapsed_s": time.perf_counter() - t0})

        failures = run_all(run_job, jobs, save, self.plan)
        if failures:
            raise RuntimeError("; ".join(f"{f.job.unit.key}: {f.error}" for f in failures))
        data = (f"synthetic tensors of the exact shapes (K = {self.K}, {spec.n_tasks} tasks x {spec.epochs} epochs"
                + (", ResNet-18 from random init)" if self.suite == "cub" else ")"))
        return units, time.perf_counter() - t0, data
