"""The grid of a results file: every method x seed, the single-task references (FA) and the joint oracle (Eq. 1), each
an independent *unit*. `run_experiment` validates everything before any compute, trains the units still missing and
saves each one as it finishes (`store.UnitFile`: locked, merged, atomic), so a killed run resumes where it stopped.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from . import hparams as H
from ..data import benchmarks as D
from ..data.benchmarks import make_benchmark
from ..paths import REPO_ROOT
from .atomic import check_writable
from .commands import option_flags, out_flag
from ..accel.device import accelerator, cpu_name, deterministic, kind
from ..errors import UnitsFailed, UsageError, UserError
from .checks import (check_epochs, check_gamma_control, check_methods, check_n_tasks, check_options, check_seeds,
                     effective_options, model_options, option_values)
from .executors import Plan, check_plan, locate, run_all, unit_device
from .provenance import relative_to_repo
from .summary import summarize
from ..data.specs import BenchmarkSpec, get_spec
from .store import DIFFERS, UnitFile, load, load_results
from ..progress import progress
from ..training import METHODS, TrainConfig, run_stream, train_joint, train_reference
from ..vocab import PAPER_METHOD_NAMES

#: Config fields that must agree for a results file to be continued (methods and seeds may be added).
#: "accelerator": the GPU model (None on the CPU; files made before it was recorded are CPU files). "threads": the
#: intra-op threads of each CPU unit (another count sums the same products in another order: the numbers differ in
#: rounding, so a CPU file refuses units made with another count; files made before it was recorded used 1).
COMPAT_KEYS = ("benchmark", "K", "n_tasks", "train", "data_source", "model", "accelerator", "threads")



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
        return f"{self.method}/{self.seed}" if self.kind == "run" else str(self.seed)


def default_out(benchmark: str, K: int, gamma: Optional[str] = None) -> Path:
    """results/<benchmark>-K<K>.json, or for a gamma control run results/<benchmark>-K<K>-control-gamma-<beta|0>.json."""
    return REPO_ROOT / "results" / (f"{benchmark}-K{K}.json" if gamma is None else control_file(benchmark, K, gamma))




def control_file(benchmark: str, K: int, gamma: str) -> str:
    """The file name of a gamma control run (`GAMMA_CONTROLS`)."""
    return f"{benchmark}-K{K}-control-gamma-{gamma}.json"


def run_command(config: dict, out: Path, spec: Optional[BenchmarkSpec] = None) -> str:
    """The `run` command that regenerates a results file with this config (all its methods and seeds); `spec`: the
    benchmark's, when the caller has it resolved (else looked up from the config's name)."""
    b, spec = config["benchmark"], spec or get_spec(config["benchmark"])
    seeds = config["seeds"]
    cmd = f"python -m metacl_lite run --benchmark {b} --K {config['K']}"
    cmd += f" --seeds {len(seeds)}" if seeds == list(range(len(seeds))) else f" --seed-list {','.join(map(str, seeds))}"
    if list(config["methods"]) != list(PAPER_METHOD_NAMES):  # the default run: the paper's eleven
        cmd += f" --methods {','.join(config['methods'])}"
    if config["n_tasks"] != spec.n_tasks:
        cmd += f" --n-tasks {config['n_tasks']}"
    if config["train"]["epochs"] != spec.epochs:
        cmd += f" --epochs {config['train']['epochs']}"
    cmd += option_flags(config["train"])
    if config["train"].get("compile", "off") != "off":  # a file made compiled refuses eager units, and vice versa
        cmd += f" --compile {config['train']['compile']}"
    if config["train"].get("device", "cpu") != spec.device:  # a file made on a GPU refuses CPU units, and vice versa
        cmd += f" --device {config['train'].get('device', 'cpu')}"
    if config["train"].get("precision", "float32") != "float32":  # TF32 on a GPU: other numbers, refused when mixed
        cmd += f" --precision {config['train']['precision']}"
    if config.get("gamma_control") is not None:
        cmd += f" --gamma {config['gamma_control']}"
    if config.get("data_source", "auto") != "auto":
        cmd += f" --data {config['data_source']}"
    model = config.get("model") or {}
    if model.get("random_init"):
        cmd += " --random-init"
    return cmd + out_flag(out, default_out(b, config["K"], config.get("gamma_control")))


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
    return f"{job.unit.section}/{job.unit.key}"


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
    22 s."""
    if unit.kind != "run":
        return 0.6 if unit.kind == "reference" else 0.55
    m = METHODS[unit.method]
    return (1.4 if m.update == "metacl" else 1.0) + (0.1 if m.importance else 0.0) + (0.05 if m.balance == "lambda"
                                                                                     else 0.0)


def longest_first(items: Sequence, unit: Callable = lambda x: x) -> list:
    """`items` ordered by `unit_cost(unit(item))`, longest first (stable: ties keep their order). On a pool of
    workers the short units then fill the gaps at the end instead of one long unit running alone (the classic
    longest-processing-time rule). The order of units never changes their results."""
    return sorted(items, key=lambda x: -unit_cost(unit(x)))


def _filled(config: dict) -> dict:
    """A file's config with the training options added since it was made at their defaults."""
    c = dict(config)
    if isinstance(c.get("train"), dict):
        c["train"] = {**TrainConfig().to_dict(), **c["train"]}
    return c




def _compat_diff(old_config: dict, config: dict) -> list[str]:
    """The `COMPAT_KEYS` in which a file's config (`_filled`) differs from `config`; for the training configuration,
    each field that differs, with the file's value and this run's (e.g. "train.device: cpu in the file, cuda here")."""
    out = []
    for k in COMPAT_KEYS:
        old, new = old_config.get(k, {"model": {}, "threads": 1}.get(k)), config[k]
        if old == new:
            continue
        if k == "train" and isinstance(old, dict):
            out += [DIFFERS.format(f"train.{f}", old.get(f), new.get(f)) for f in new if old.get(f) != new[f]]
        else:
            out.append(DIFFERS.format(k, old, new) if k in ("accelerator", "K", "n_tasks", "threads") else k)
    return out


def reuse_shared_units(store: UnitFile, config: dict, main: Path) -> list[str]:
    """A gamma control run's references and oracle are those of the main results file `main`: the same benchmark, K,
    stream, data, seeds and fine-tune configuration (`COMPAT_KEYS`) give the same units, so those of the control's
    seeds that `main` has are copied (marked `reused_from`, wall_s 0) instead of trained again, about a fifth of a
    control's time. Nothing is copied when `main` is missing, unreadable or made with another configuration.
    Returns the copied units."""
    if not main.exists() or main.resolve() == store.path.resolve():
        return []
    try:
        src = load_results(main)
    except UserError:
        return []
    if _compat_diff(_filled(src.get("config", {})), config):
        return []
    copied = []
    for section in ("references", "oracle"):
        for key in map(str, config["seeds"]):
            if key in src.get(section, {}) and key not in store.done(section):
                store.add(section, key, {**src[section][key], "wall_s": 0.0, "reused_from": relative_to_repo(main)},
                          info={"data_info": src["data_info"]} if "data_info" in src else None)
                copied.append(f"{section}/{key}")
    return copied


def redone_units(path: Path, why: str) -> set[str]:
    """The units of `path` trained since its last discard made for the same reason `why` (the same --redo with the
    same new beta/gamma): by the invocation that discarded and by every later one. A --redo interrupted and run
    again keeps them instead of discarding its own work."""
    if not Path(path).exists():
        return set()
    try:
        prov = load(Path(path), "results", check_units=False).get("provenance", {})
    except UserError:
        return set()
    last = [d for d in prov.get("discarded", []) if d.get("why") == why]
    if not last:
        return set()
    invs = prov.get("invocations", [])
    ids = [i.get("id") for i in invs]
    since = (invs[ids.index(last[-1].get("by")):] if last[-1].get("by") in ids
             else [i for i in invs if str(i.get("started", "")) >= str(last[-1].get("when", ""))])
    return {u for i in since if isinstance(i.get("units"), list) for u in i["units"]}


def pending_units(config: dict, done: dict[str, set]) -> list[Unit]:
    """The units of `config` not yet in the file, seed by seed (an interrupted grid keeps whole seeds), each seed's
    longest first (`longest_first`: its MetaCL runs first, its references and oracle last)."""
    units = []
    for s in config["seeds"]:
        units += longest_first([u for u in (Unit("reference", s), Unit("joint", s)) if u.key not in done[u.section]]
                               + [Unit("run", s, m) for m in config["methods"] if f"{m}/{s}" not in done["runs"]])
    return units


def run_experiment(benchmark: str, K: int, seeds: Sequence[int] = (0, 1, 2), methods: Optional[Sequence[str]] = None,
                   out: Optional[Path] = None, n_tasks: Optional[int] = None, epochs: Optional[int] = None,
                   source: str = "auto", show_progress: Optional[bool] = None, force: bool = False,
                   weights: Optional[str] = None, random_init: bool = False,
                   command: Optional[Callable[[dict, Path], str]] = None, plan: Optional[Plan] = None,
                   compile: str = "off", options: Optional[dict] = None, gamma: Optional[str] = None,
                   redo: Sequence[str] = (), device: Optional[str] = None, precision: str = "float32") -> dict:
    """Train every unit of the grid still missing from `out` and save each as it finishes.

    Everything is checked before any compute: the options, the output path, the data, the tuned beta/gamma of every
    regularised method, and that `out` (if it exists) was made with the same configuration. `command(config, out)`
    writes the command line that regenerates the file (default: the CLI's `run` command). `plan` says where the units
    run (`executors.check_plan`; default: one after another in this process); `compile` is `TrainConfig.compile`
    (auto / on / off: compiled task gradients, equal to eager within float rounding). `options` sets the choices the
    paper leaves open (`TrainConfig.omega_accumulate`, `omega_normalise`, `pi_xi`), recorded in the config.
    `gamma` makes a control run of MetaCL-lambda methods (`GAMMA_CONTROLS`): "beta" trains each with gamma equal to
    the tuned beta of its MetaCL-beta counterpart, "0" with gamma = 0; recorded as config["gamma_control"] and in
    method_hparams, written by default to `control_file`.
    `device`: auto, cpu, cuda or cuda:N (default: the benchmark's, `BenchmarkSpec.device`), resolved here before any
    work; its kind is recorded in config["train"]["device"] and the GPU model in config["accelerator"], so a file
    refuses units trained on another kind of device or another GPU model. `precision`: `TrainConfig.precision`
    ("float32", or "tf32" on a GPU: faster products and convolutions, other numbers), recorded in config["train"].
    `redo`: methods (and "oracle", the joint-training units) whose finished runs in `out` are discarded first and
    trained again (after their beta/gamma or options changed); the file records what was discarded
    (provenance.discarded)."""
    spec = get_spec(benchmark)  # resolved once: every check, lookup and unit below gets the spec, not the name
    benchmark = spec.name  # what the results file records
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
    where = loc.device
    out = check_writable(Path(out) if out else default_out(benchmark, K, gamma))
    D.check_data(spec, K, source=source)
    model = model_options(spec, weights, random_init)
    hp = H.load()  # read and checked once for the whole grid
    needed = [m.replace("-lambda", "-beta") for m in methods] if gamma == "beta" else methods
    absent = H.missing(spec, needed if gamma != "0" else [], K, hp)
    if absent:
        raise H.MissingHparams(f"no tuned beta/gamma for {', '.join(absent)} on {benchmark} (K={K}) in {H.HPARAMS_FILE}",
                               absent)
    if H.sources_checked():  # each value's tuning file is there and chose it: no run on a value of unknown origin
        H.check_sources(hp, spec, needed if gamma != "0" else [], K)
    options = {**check_options(options), "device": kind(where), "precision": precision}
    if gamma is None:
        cfgs = {m: H.method_config(spec, m, epochs, K, hp, compile=compile, **options) for m in methods}
        method_hp = {m: H.method_hparams(spec, m, K, hp) for m in methods}
        hp_source = H.hparams_source(spec, methods, K, hp)
    else:
        beta_m = {m: m.replace("-lambda", "-beta") for m in methods}  # each MetaCL-lambda's MetaCL-beta counterpart
        beta_of = {m: H.method_hparams(spec, beta_m[m], K, hp)["beta"] if gamma == "beta" else 0.0
                   for m in methods}
        cfgs = {m: H.method_config(spec, "finetune", epochs, compile=compile, gamma=beta_of[m],
                                   **{**H.method_options(spec, m, hp), **options}) for m in methods}
        method_hp = {m: {"gamma": beta_of[m]} for m in methods}
        src = H.hparams_source(spec, list(beta_m.values()), K, hp) if gamma == "beta" else {}
        hp_source = {m: f"gamma=beta control: {beta_m[m]}'s beta, {src[beta_m[m]]}" if gamma == "beta"
                     else "gamma=0 control" for m in methods}
    base_cfg = H.method_config(spec, "finetune", epochs, compile=compile, **options)
    config = {"benchmark": benchmark, "K": K, "n_tasks": n, "seeds": seeds, "methods": methods,
              "train": base_cfg.to_dict(), "method_hparams": method_hp, "hparams_source": hp_source,
              "method_options": {m: option_values(cfgs[m].to_dict()) for m in methods if H.regulariser(m)},
              "data_source": source, "model": model, "accelerator": loc.accelerator,
              "threads": plan.threads if kind(where) == "cpu" else None}
    if gamma is not None:
        config["gamma_control"] = gamma
    if command is None:
        command = lambda c, o: run_command(c, o, spec)  # noqa: E731

    def compatible(old: dict) -> list:
        oc = _filled(old.get("config", {}))  # options added since the file was made have their default there
        diff = _compat_diff(oc, config)
        diff += ["gamma_control"] if oc.get("gamma_control") != config.get("gamma_control") else []
        diff += [f"method_hparams[{m}]" for m in methods
                 if m in oc.get("method_hparams", {}) and oc["method_hparams"][m] != config["method_hparams"][m]]
        diff += [f"method_options[{m}]" for m in config["method_options"]
                 if m in oc.get("methods", []) and effective_options(oc, m) != config["method_options"][m]]
        return diff

    def merge(doc: dict) -> None:
        old = doc.get("config", {})
        merged = dict(config)
        merged["methods"] = [m for m in METHODS if m in set(old.get("methods", [])) | set(methods)]
        merged["seeds"] = sorted(set(old.get("seeds", [])) | set(seeds))
        merged["method_hparams"] = {**old.get("method_hparams", {}), **config["method_hparams"]}
        merged["hparams_source"] = {**old.get("hparams_source", {}), **config["hparams_source"]}
        merged["method_options"] = {**{m: effective_options(old, m) for m in old.get("methods", [])
                                       if H.regulariser(m)}, **config["method_options"]}
        doc["config"] = merged

    def finalize(doc: dict) -> None:
        doc["summary"] = summarize(doc)
        doc.setdefault("provenance", {})["command"] = command(doc["config"], out)

    store = UnitFile(out, "results", config, ("runs", "references", "oracle"), compatible, merge, finalize, where,
                     loc.text, plan.threads)
    if (redo or redo_oracle) and not force:
        def forget(doc: dict) -> None:
            c = doc.get("config", {})
            for key in ("method_hparams", "hparams_source", "method_options"):
                for m in redo:
                    c.get(key, {}).pop(m, None)
            c["methods"] = [m for m in c.get("methods", []) if m not in redo]

        redone = redo + ["oracle"] * redo_oracle
        why = (f"--redo {','.join(redone)}: retrained with " + "; ".join(
            [f"{m} {method_hp[m]}" for m in redo] + ["the oracle as train_joint trains it"] * redo_oracle))
        keep = redone_units(out, why)  # a resumed --redo keeps what its first attempt already retrained
        gone = store.discard(lambda s, k: (s == "runs" and k.split("/")[0] in redo or s == "oracle" and redo_oracle)
                             and f"{s}/{k}" not in keep, forget, why)
        if gone:
            print(f"discarded {len(gone)} finished runs of {', '.join(redone)} from {out}; training them again")
    doc = store.open(force)
    if gamma is not None:
        copied = reuse_shared_units(store, config, default_out(benchmark, K))
        if copied:
            print(f"{len(copied)} reference/oracle units copied from {default_out(benchmark, K)} instead of trained "
                  f"again (the same configuration)")
    todo = pending_units(config, {s: store.done(s) for s in store.sections})
    on = unit_device(plan, where)
    jobs = [Job(u, spec, K, n, source, model, (cfgs[u.method] if u.kind == "run" else base_cfg).to_dict(),
                device=on) for u in todo]
    bar = progress(None, show_progress, total=len(jobs), desc=f"{benchmark} K={K}", unit="run")
    wrong: list = []
    save = checked_units(lambda job, r: store.add(job.unit.section, job.unit.key, r["value"],
                                                  info={"data_info": r["data_info"]}), loc.accelerator, wrong,
                         machine=store.note_machine if plan.executor == "ray" else None)
    failures = run_all(run_job, jobs, save, plan, progress=lambda: bar.update())
    bar.close()
    if failures or wrong:
        raise UnitsFailed(out, [(unit_label(f.job), f.error) for f in failures] + wrong)
    doc = store.doc
    if not todo and "summary" not in doc:
        doc["summary"] = summarize(doc)
    return doc
