"""The grid of a results file: every method x seed, the single-task references (FA) and the joint oracle (Eq. 1), each
an independent *unit*. `run_request` checks everything before any compute and returns the `request.RunRequest`;
`run_grid` trains the units still missing from its file and saves each one as it finishes (`files.ResultsFile` on
`store.UnitFile`: locked, merged, atomic), so a killed run resumes where it stopped. `run_experiment` is the two in
one call, with keywords.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from . import hparams as H
from ..data import benchmarks as D
from ..data.benchmarks import make_benchmark
from .atomic import check_writable
from ..accel.device import accelerator, cpu_name, deterministic, kind
from ..errors import UnitsFailed, UsageError
from .checks import (check_epochs, check_gamma_control, check_methods, check_n_tasks, check_options, check_seeds,
                     method_option_values, model_options, recorded_options, run_options)
from .executors import Plan, check_plan, locate, run_all
from .files import (ResultsFile, budget_tag, budgets, control_file, default_out,  # noqa: F401 (read from here too)
                    run_command)
from .request import RunRequest
from .summary import summarize
from ..data.specs import BenchmarkSpec, get_spec
from ..keys import RunKey, unit_name
from ..progress import progress
from ..training import TrainConfig, get_method, run_stream, train_joint, train_reference
from ..memory import policy_record
from ..vocab import BUDGET_OPTIONS


@dataclass(frozen=True)
class Unit:
    """One independent piece of a grid: a method's run through the stream, a seed's references, or its oracle."""

    kind: str  # "run" | "reference" | "joint"
    seed: int
    method: Optional[str] = None

    @property
    def section(self) -> str:
        return {"run": "runs", "reference": "references", "joint": "oracle"}[self.kind]

    @property
    def key(self) -> str:
        return str(RunKey(self.method, self.seed)) if self.kind == "run" else str(self.seed)


# ----------------------------------------------------------------------------------------------------------------
# One unit
# ----------------------------------------------------------------------------------------------------------------
_BENCH_CACHE: dict = {}


def unit_benchmark(benchmark: str | BenchmarkSpec, K: int, n_tasks: int, seed: int, source: str, model: dict,
                   split: str = "test"):
    """The benchmark a unit trains on (one cached per process: the permutation seed matters for Permuted MNIST only,
    the class splits of CIFAR-100 and CUB are fixed)."""
    spec = get_spec(benchmark)
    key = (spec.name, K, n_tasks, seed if spec.permuted else None, source, split)
    if key not in _BENCH_CACHE:
        _BENCH_CACHE.clear()
        if source == "synthetic":  # the speed benchmark's tensors of the real shapes (CIFAR-100, CUB)
            from ..data.synthetic import synthetic_benchmark

            b = synthetic_benchmark(spec.name, K, n_tasks)
        else:
            b = make_benchmark(spec, K, seed=seed, n_tasks=n_tasks, source=source, split=split)
        _BENCH_CACHE[key] = b
    b = _BENCH_CACHE[key]
    b.info["model"] = model
    return b


@dataclass(frozen=True)
class Job:
    """Everything a worker process needs to train one unit (picklable: plain values only)."""

    unit: Unit
    benchmark: str | BenchmarkSpec  # the spec, resolved once by the run (a name works too)
    K: int
    n_tasks: int
    source: str
    model: dict
    cfg: dict
    split: str = "test"
    evaluate_rows: str = "all"  # "last": only the final row of the accuracy matrix (tuning; see run_stream)
    device: str = "cpu"  # the resolved device (`device.resolve`: cpu, cuda or cuda:N); cfg["device"] is its kind


def run_job(job: Job) -> dict:
    """Build (or reuse) the unit's benchmark in this process and train the unit (on a GPU with the determinism
    settings of `device.deterministic`, which every run sets again in `training._on_device`; here, first, with the
    unit's device itself: on cuda:N it makes N this process's current GPU, which the run's "cuda" then means)."""
    deterministic(job.device)
    bench = unit_benchmark(job.benchmark, job.K, job.n_tasks, job.unit.seed, job.source, job.model, job.split)
    gpu = accelerator(job.device)
    return {"value": execute_unit(job.unit, bench, TrainConfig(**job.cfg), job.evaluate_rows),
            "data_info": dict(bench.info), "accelerator": gpu, "machine": gpu or f"cpu: {cpu_name()}"}


def unit_label(job: Job) -> str:
    """How a results file keys the unit of `job` (section/key), as failures name it."""
    return unit_name(job.unit.section, job.unit.key)


def checked_units(save: Callable[[Job, dict], None], expected: Optional[str], wrong: list,
                  label: Callable[[Job], str] = unit_label, machine: Optional[Callable[[str], None]] = None
                  ) -> Callable:
    """`save` for the units that trained on the GPU model `expected` (a results or tuning file's `accelerator`;
    None: the CPU); a unit that reports another (a Ray node of another model) is not saved but listed in `wrong` as
    (label(job), why), for `UnitsFailed`. `machine` (Ray: `UnitFile.note_machine`) is told the machine each saved
    unit ran on (its GPU, or its CPU model: CPU models round differently), before it is saved."""
    def on_result(job: Job, r: dict) -> None:
        got = r.get("accelerator", expected)
        if got != expected:
            msg = (f"trained on {got or 'the CPU'}, but this file's units train on {expected or 'the CPU'}: "
                   f"not saved")
            wrong.append((label(job), msg))
            return
        if machine is not None and r.get("machine"):
            machine(r["machine"])
        save(job, r)

    return on_result


def execute_unit(unit: Unit, bench, cfg: TrainConfig, evaluate_rows: str = "all") -> dict:
    """Train one unit and return what the results file stores for it; on a GPU also the unit's peak GPU memory
    (`peak_gpu_mb`: what torch's allocator reserved at most, without the CUDA context), which sizes how many units
    share a card (`BenchmarkSpec.gpu_unit_gb`)."""
    gpu = kind(cfg.device) == "cuda"
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    if unit.kind == "reference":
        out = {"acc": [train_reference(bench, i, cfg, unit.seed) for i in range(bench.n_tasks)]}
    elif unit.kind == "joint":
        out = {"acc": train_joint(bench, cfg, unit.seed)}
    else:
        r = run_stream(bench, unit.method, cfg, unit.seed, show_progress=False, evaluate_rows=evaluate_rows)
        out = {"acc_matrix": r["acc_matrix"], "wall_s": r["wall_s"]}  # the stream's own time, as files always had
        out.update({k: r[k] for k in ("state_bytes",) if k in r})  # a memory's cost beside the regulariser's
    out.setdefault("wall_s", time.perf_counter() - t0)
    if gpu:
        out["peak_gpu_mb"] = torch.cuda.max_memory_reserved() / 2 ** 20
    return out


# ----------------------------------------------------------------------------------------------------------------
# The grid
# ----------------------------------------------------------------------------------------------------------------
def unit_cost(unit: Unit) -> float:
    """A unit's wall time relative to a fine-tune run, for scheduling only (never for results). Measured in one
    Permuted MNIST K = 500 grid (two workers of one thread, compile auto, a 2-core AMD EPYC): fine-tune 41 s, MetaCL
    59 s, a plain regulariser 46-47 s, a MetaCL-beta/lambda one 52-63 s, a seed's twenty references 25 s, the oracle
    22 s; a memory's gradient per step counts as 0.3 more (a guess)."""
    if unit.kind != "run":
        return 0.6 if unit.kind == "reference" else 0.55
    m = get_method(unit.method)
    return ((1.4 if m.update == "metacl" else 1.0) + (0.1 if m.regulariser else 0.0)
            + (0.05 if m.balance == "lambda" else 0.0) + (0.3 if m.memory else 0.0))


def longest_first(items: Sequence, unit: Callable = lambda x: x) -> list:
    """`items` ordered by `unit_cost(unit(item))`, longest first (stable: ties keep their order). On a pool of
    workers the short units then fill the gaps at the end instead of one long unit running alone (the classic
    longest-processing-time rule). The order of units never changes their results."""
    return sorted(items, key=lambda x: -unit_cost(unit(x)))


def pending_units(config: dict, done: dict[str, set]) -> list[Unit]:
    """The units of `config` not yet in the file, seed by seed (an interrupted grid keeps whole seeds), each seed's
    longest first (`longest_first`: its MetaCL runs first, its references and oracle last)."""
    units = []
    for s in config["seeds"]:
        units += longest_first([u for u in (Unit("reference", s), Unit("joint", s)) if u.key not in done[u.section]]
                               + [Unit("run", s, m) for m in config["methods"] if str(RunKey(m, s)) not in done["runs"]])
    return units


def run_request(benchmark: str, K: int, seeds: Sequence[int] = (0, 1, 2), methods: Optional[Sequence[str]] = None,
                out: Optional[Path] = None, n_tasks: Optional[int] = None, epochs: Optional[int] = None,
                source: str = "auto", show_progress: Optional[bool] = None, force: bool = False,
                weights: Optional[str] = None, random_init: bool = False,
                command: Optional[Callable[[dict, Path], str]] = None, plan: Optional[Plan] = None,
                compile: str = "off", options: Optional[dict] = None, gamma: Optional[str] = None,
                redo: Sequence[str] = (), device: Optional[str] = None, precision: str = "float32",
                optimizer_state: str = "task") -> RunRequest:
    """The request of a results file's grid, every value checked before any compute: the options, the output path,
    the data, the tuned beta/gamma of every regularised method (`results_config`).

    `command(config, out)` writes the command line that regenerates the file (default: the CLI's `run` command).
    `plan` says where the units run (`executors.check_plan`; default: one after another in this process); `compile`
    is `TrainConfig.compile` (auto / on / off: compiled task gradients, equal to eager within float rounding).
    `options` sets the choices the paper leaves open (`vocab.OMEGA_OPTIONS`, declared in `vocab.OPTION_TABLE`),
    recorded in the config, and the budgets (`vocab.BUDGET_OPTIONS`: the memory's M, 1 <= M <= K, for the methods
    that read it, refused for a run none of whose methods does), recorded per method in config.method_options, one
    value per file. `gamma` makes a control run of MetaCL-lambda methods (`GAMMA_CONTROLS`): "beta" trains
    each with gamma equal to the tuned beta of its MetaCL-beta counterpart, "0" with gamma = 0; recorded as
    config["gamma_control"] and in method_hparams, written by default to `control_file`.
    `device`: auto, cpu, cuda or cuda:N (default: the benchmark's, `BenchmarkSpec.device`), resolved here; its kind
    is recorded in config["train"]["device"] and the GPU model in config["accelerator"], so a file refuses units
    trained on another kind of device or another GPU model. `precision`: `TrainConfig.precision` ("float32", or
    "tf32" on a GPU: faster products and convolutions, other numbers), recorded in config["train"], as is
    `optimizer_state` where it is "stream" (`TrainConfig.optimizer_state`: Adam's state kept across tasks).
    `redo`: methods (and "oracle", the joint-training units) whose finished runs in `out` are discarded first and
    trained again (after their beta/gamma or options changed); the file records what was discarded
    (provenance.discarded)."""
    spec = get_spec(benchmark)  # looked up once: every check, lookup and unit below gets the spec, not the name
    methods = check_methods(methods)
    redo_oracle = "oracle" in redo  # the joint-training units (after a change of train_joint)
    redo = check_methods([m for m in redo if m != "oracle"]) if set(redo) - {"oracle"} else []
    if set(redo) - set(methods):
        raise UsageError(f"--redo {','.join(sorted(set(redo) - set(methods)))}: not among the methods this run trains; "
                         f"add it to --methods or leave it out of --redo")
    check_gamma_control(gamma, methods)
    seeds = check_seeds(list(seeds))
    n = check_n_tasks(spec, n_tasks)
    check_epochs(epochs)
    plan = plan or check_plan()
    loc = locate(plan, spec.device if device is None else device, spec.name)  # Ray: the cluster's GPUs
    out = check_writable(Path(out)) if out else None  # by default, named once the budgets are known
    D.check_data(spec, K, source=source)
    model = model_options(spec, weights, random_init)
    req = RunRequest(spec=spec, K=K, n_tasks=n, methods=tuple(methods), seeds=tuple(seeds), epochs=epochs, out=out,
                     plan=plan, loc=loc, model=model, compile=compile, precision=precision, options=options or {},
                     optimizer_state=optimizer_state,
                     force=force, show_progress=show_progress, command=command, source=source, gamma=gamma,
                     redo=tuple(redo), redo_oracle=redo_oracle)
    return results_config(req)


def results_config(req: RunRequest) -> RunRequest:
    """`req` with its results file's configuration resolved: the tuned beta/gamma of every method (hparams.json,
    read and checked once for the whole grid: a MissingHparams names what is absent), each method's training
    configuration and fine-tune's, and the file's `config`."""
    spec, K, methods, gamma = req.spec, req.K, list(req.methods), req.gamma
    hp = H.load()
    tuned = [H.tuned_method(spec, m, K, hp) for m in methods]  # a memory's MetaCL-lambda may read its base's gamma
    needed = [m.replace("-lambda", "-beta") for m in methods] if gamma == "beta" else tuned
    absent = H.missing(spec, needed if gamma != "0" else [], K, hp)
    if absent:
        raise H.MissingHparams(f"no tuned beta/gamma for {', '.join(absent)} on {spec.name} (K={K}) in "
                               f"{H.HPARAMS_FILE}", absent)
    options = {**check_options(req.options, methods, {"K": K}), "device": req.device_kind, "precision": req.precision,
               "optimizer_state": req.optimizer_state}
    if H.sources_checked():  # each value's tuning file is there and chose it, at this budget
        H.check_sources(hp, spec, needed if gamma != "0" else [], K,
                        {m: {k: v for k, v in run_options(options, m).items() if k in BUDGET_OPTIONS} for m in methods})
    if gamma is None:
        cfgs = {m: H.method_config(spec, m, req.epochs, K, hp, compile=req.compile, **run_options(options, m))
                for m in methods}
        method_hp = {m: H.method_hparams(spec, m, K, hp) for m in methods}
        hp_source = H.hparams_source(spec, methods, K, hp)
    else:
        beta_m = {m: m.replace("-lambda", "-beta") for m in methods}  # each MetaCL-lambda's MetaCL-beta counterpart
        beta_of = {m: H.method_hparams(spec, beta_m[m], K, hp)["beta"] if gamma == "beta" else 0.0
                   for m in methods}
        cfgs = {m: H.method_config(spec, "finetune", req.epochs, compile=req.compile, gamma=beta_of[m],
                                   **{**H.method_options(spec, m, hp), **options}) for m in methods}
        method_hp = {m: {"gamma": beta_of[m]} for m in methods}
        src = H.hparams_source(spec, list(beta_m.values()), K, hp) if gamma == "beta" else {}
        hp_source = {m: f"gamma=beta control: {beta_m[m]}'s beta, {src[beta_m[m]]}" if gamma == "beta"
                     else "gamma=0 control" for m in methods}
    base_cfg = H.method_config(spec, "finetune", req.epochs, compile=req.compile, **run_options(options, "finetune"))
    config = {"benchmark": spec.name, "K": K, "n_tasks": req.n_tasks, "seeds": list(req.seeds), "methods": methods,
              "train": {k: v for k, v in base_cfg.to_dict().items() if k not in BUDGET_OPTIONS},
              "method_hparams": method_hp, "hparams_source": hp_source,
              "method_options": {m: method_option_values(cfgs[m].to_dict(), m) for m in methods if recorded_options(m)},
              "data_source": req.source, "model": req.model, "accelerator": req.loc.accelerator,
              "threads": req.plan.threads if req.device_kind == "cpu" else None}
    config.update(policy_record(methods))  # what the memory keeps and when (`memory.POLICY`)
    if gamma is not None:
        config["gamma_control"] = gamma
    out = req.out or check_writable(default_out(spec.name, K, gamma, budget_tag(budgets(config))))
    return replace(req, out=out, options=options, config=config, cfgs={m: c.to_dict() for m, c in cfgs.items()},
                   base_cfg=base_cfg.to_dict())


def run_grid(req: RunRequest) -> dict:
    """Train every unit of `req`'s grid still missing from its file and save each as it finishes (`ResultsFile`);
    with `req.redo`, the runs to redo are discarded first. Returns the results document; units that failed raise
    `UnitsFailed` after every other unit is saved."""
    store = ResultsFile(req)
    if (req.redo or req.redo_oracle) and not req.force:
        store.redo()
    store.open(req.force, until_work=True)  # a finished file is read on any machine
    if pending_units(req.config, {s: store.done(s) for s in store.sections}):
        store.refuse_other_rounding()
    if req.gamma is not None:
        main = default_out(req.benchmark, req.K)
        copied = store.reuse_shared(main)
        if copied:
            print(f"{len(copied)} reference/oracle units copied from {main} instead of trained again (the same "
                  f"configuration)")
    todo = pending_units(req.config, {s: store.done(s) for s in store.sections})
    jobs = [Job(u, req.spec, req.K, req.n_tasks, req.source, req.model,
                req.cfgs[u.method] if u.kind == "run" else req.base_cfg, device=req.unit_device) for u in todo]
    bar = progress(None, req.show_progress, total=len(jobs), desc=f"{req.benchmark} K={req.K}", unit="run")
    wrong: list = []
    save = checked_units(lambda job, r: store.add(job.unit.section, job.unit.key, r["value"],
                                                  info={"data_info": r["data_info"]}), req.loc.accelerator, wrong,
                         machine=store.note_machine if req.machine_counter else None)
    failures = run_all(run_job, jobs, save, req.plan, progress=lambda: bar.update())
    bar.close()
    if failures or wrong:
        raise UnitsFailed(req.out, [(unit_label(f.job), f.error) for f in failures] + wrong)
    doc = store.doc
    if not todo and "summary" not in doc:
        doc["summary"] = summarize(doc)
    return doc


def run_experiment(*args, **kwargs) -> dict:
    """Train every unit of a results file's grid still missing and save each as it finishes:
    `run_grid(run_request(...))`, with `run_request`'s arguments (as the book, the benchmarks and the tests call it)."""
    return run_grid(run_request(*args, **kwargs))
