"""Choosing beta and gamma without the test set.

The protocol is `PROTOCOL` below (recorded in every tuning file as `protocol_text`).

A tuning file holds one protocol. Each unit is saved as it finishes (resumable, locked, merged: `files.TuningFile`).
The protocol of the committed files (`default_protocol`) writes `results/tuning-<benchmark>-K<K>.json` and, once a
method's grid is complete, its chosen value to hparams.json; any other protocol (a smoke test with fewer tasks, other
seeds or grids) writes elsewhere by default and leaves hparams.json alone unless asked to write it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from . import hparams as H
from ..data import benchmarks as D
from ..paths import IN_CHECKOUT, REPO_ROOT
from .atomic import check_writable
from .commands import option_flags, out_flag
from ..accel.device import check_precision, kind
from ..errors import UnitsFailed, UsageError
from .executors import Plan, check_plan, locate, run_all
from .lattice import BETA_GRID, GAMMA_GRID, WINDOW, check_grid, choose, extension, window_grid
from .checks import (check_epochs, check_methods, check_n_tasks, check_options, check_seeds, model_options,
                     recorded_options, run_options)
from .files import (REGULARISED, TuningFile, budget_tag, grid_of, load_tuning, protocol_budgets,  # noqa: F401
                    searched_grid)
from .grid import Job, Unit, checked_units, longest_first, run_job
from .request import TuneRequest
from ..data.specs import get_spec
from ..keys import TuningKey
from ..progress import progress
from ..training import ALL_METHODS, TrainConfig
from ..memory import POLICY, policy_record
from ..vocab import BUDGET_OPTIONS, OPTIONS, PAPER_REGULARISERS, in_paper

PROTOCOL = (
    "a stream of n_tasks tasks with permutation seeds disjoint from the evaluation seeds (100, 101 vs 0-4), training "
    "on the first K images of each class and scoring the final average accuracy (ACC) on training images that are "
    "never trained on (from specs.BenchmarkSpec.val_offset on: Permuted MNIST images 500-599, CIFAR-100 images "
    "400-499 of each class, CUB 20-28), never the test set. For each regularised method, each value of its grid (beta for the plain "
    "methods and MetaCL-beta, gamma for MetaCL-lambda) is one unit per seed; the value with the best mean validation "
    "ACC over the seeds wins (ties: the smaller value).")

TUNING_SEEDS = (100, 101)

#: Protocol fields that do not make a protocol other than the default one (`is_default`): the model options, the
#: compiled task gradients, where the units ran, and a windowed search of the default lattice. The precision is not
#: among them: a TF32 tuning chose its values on other numbers, so it is not the default protocol (its own file under
#: runs/, and hparams.json only with --write-hparams).
NOT_PROTOCOL_CHOICES = ("model", "compile", "window", "method_grids", "device", "accelerator", "threads")

#: Of the methods with a strength to tune (`files.REGULARISED`, `tune --methods`), the paper's nine: those of the
#: default protocol (an extension such as L2 is tuned when named).
TUNABLE = tuple(m for m in REGULARISED if in_paper(m))


def decided_options(benchmark: str, hp: Optional[dict] = None) -> dict:
    """{method: the open choices decided for its regulariser (hparams.json "options")} for every tunable method."""
    hp = H.load() if hp is None else hp
    return {m: H.method_options(benchmark, m, hp) for m in TUNABLE}


def default_protocol(benchmark: str, K: int) -> dict:
    spec = get_spec(benchmark)
    return {"benchmark": benchmark, "K": K, "n_tasks": spec.n_tasks, "epochs": spec.epochs,
            "seeds": list(TUNING_SEEDS), "beta_grid": list(BETA_GRID), "gamma_grid": list(GAMMA_GRID),
            "val_offset": spec.val_offset, "val_per_class": spec.val_per_class, "options": {},
            "method_options": decided_options(benchmark)}


def window_centres(benchmark: str, around: int, hp: Optional[dict] = None,
                   methods: Sequence[str] = TUNABLE) -> dict[str, float]:
    """The values tuned at K = `around` (hparams.json), the centres of a windowed search: of every tunable method
    that has one, and of each method of `methods` (an extension such as L2 among them), which must have one."""
    values = H.tuned_at(benchmark, around, hp)
    absent = [m for m in methods if m not in values]
    if absent:
        named = "" if set(absent) == set(TUNABLE) else f" --methods {','.join(absent)}"  # tune's default: the nine
        raise UsageError(f"--around {around}: {H.HPARAMS_FILE.name} holds no value tuned at K={around} for "
                         f"{', '.join(absent)}; tune that K first (python -m metacl_lite tune --benchmark {benchmark} "
                         f"--K {around}{named})")
    return {m: values[m][H.strength_key(m)] for m in [*TUNABLE, *(m for m in methods if m not in TUNABLE)]
            if m in values}


def budget_methods(budgets: Sequence[str]) -> list[str]:
    """The methods with a strength to tune that read every budget of `budgets` (`vocab.BUDGET_OPTIONS`: the memory's
    M -> the three MetaCL-lambda methods with both references): tune's methods when --methods is left out and a
    budget is given (the paper's nine read none)."""
    return [m for m in REGULARISED if set(budgets) <= set(recorded_options(m))]


def _tuned_methods(methods: Optional[Sequence[str]], options: Optional[dict]) -> list[str]:
    """The methods a tuning trains: `methods` checked (a method without beta or gamma refused, naming why), or when
    left out the paper's nine, and with a budget given the methods that read it (`budget_methods`)."""
    given = [k for k in (options or {}) if k in BUDGET_OPTIONS]
    if methods is None and given:
        return budget_methods(given)
    for m in methods or ():
        if m in ALL_METHODS and m not in REGULARISED:
            raise UsageError(f"method {m!r} is not allowed here: {m} has no beta or gamma to choose on validation data "
                             f"(run it as it is: python -m metacl_lite run --methods {m}); tune takes the methods "
                             f"with a strength: {', '.join(REGULARISED)}")
    return check_methods(methods, allowed=REGULARISED)


def _method_options(spec, methods: Sequence[str], options: dict, hp: Optional[dict]) -> dict:
    """{method: the options it trains with} for the paper's nine and each other method tuned: the open choices decided
    for its regulariser (hparams.json; none where `hp` is None), overridden by those given, and the budgets it reads
    (given, else their declared default: a tuning file records the budget its units had, one per file)."""
    out = {}
    for m in [*TUNABLE, *(m for m in methods if m not in TUNABLE)]:  # an extension's, only when it is tuned
        budgets = {k: OPTIONS[k].default for k in recorded_options(m) if k in BUDGET_OPTIONS}
        out[m] = {**(H.method_options(spec, m, hp) if hp is not None else {}), **budgets, **run_options(options, m)}
    return out


def is_default(protocol: dict) -> bool:
    """Whether a protocol is the default one of its benchmark and K (`default_protocol`), searched on the full grid or
    in a window of it; such a file is results/tuning-<b>-K<K>.json and writes hparams.json."""
    b, K = protocol["benchmark"], protocol["K"]
    rest = {k: v for k, v in protocol.items() if k not in NOT_PROTOCOL_CHOICES}
    if rest.pop("precision", "float32") != "float32" or rest.pop("memory_policy", POLICY) != POLICY:  # the defaults
        return False
    extensions = _extension_options(protocol)  # an extension is in the protocol when it is tuned, with its options
    if any(_open(o) != H.method_options(b, m) for m, o in extensions.items()):  # a budget is given, never a protocol's
        return False
    rest["method_options"] = {m: o for m, o in rest.get("method_options", {}).items() if m not in extensions}
    return rest == default_protocol(b, K)


def _open(options: dict) -> dict:
    """A method's options without its budgets (`vocab.BUDGET_OPTIONS`)."""
    return {k: v for k, v in options.items() if k not in BUDGET_OPTIONS}


def _extension_options(protocol: dict) -> dict:
    """{method: its options} for the methods a protocol tunes that are not the paper's (in it only when tuned)."""
    return {m: o for m, o in protocol.get("method_options", {}).items() if m not in TUNABLE}


def extension_regularisers(protocol: dict) -> list[str]:
    """The regularisers, not the paper's, of the methods a protocol tunes (a memory's method of the paper's
    regularisers adds none: its file is named by its budget, `budget_tag`)."""
    return sorted({H.regulariser(m) for m in _extension_options(protocol)} - set(PAPER_REGULARISERS))


def protocol_tag(protocol: dict) -> str:
    return hashlib.sha256(json.dumps(protocol, sort_keys=True).encode()).hexdigest()[:8]


def default_tuning_out(protocol: dict) -> Path:
    """results/tuning-<b>-K<K>.json for the default protocol (results/tuning-<b>-K<K>-<regulariser>.json where it
    also tunes an extension such as L2, results/tuning-<b>-K<K>-memory-M<M>.json where its methods read a budget, as
    the results files of a budget are named: the paper's file stays as it is); runs/tuning-<b>-K<K>-<hash>.json for
    any other."""
    b, K = protocol["benchmark"], protocol["K"]
    if is_default(protocol):
        extensions = "".join(f"-{r}" for r in extension_regularisers(protocol)) + budget_tag(protocol_budgets(protocol))
        return REPO_ROOT / "results" / f"tuning-{b}-K{K}{extensions}.json"
    return REPO_ROOT / "runs" / f"tuning-{b}-K{K}-{protocol_tag(protocol)}.json"


def tune_command(doc: dict, out: Path) -> str:
    """The `tune` command that regenerates a tuning file (its protocol and all its methods)."""
    p = doc["protocol"]
    d = default_protocol(p["benchmark"], p["K"])
    cmd = f"python -m metacl_lite tune --benchmark {p['benchmark']} --K {p['K']}"
    given = {k: v for k, v in protocol_budgets(p).items() if v}  # said even at its default: it picks the methods
    if doc["methods"] != (budget_methods(list(given)) if given else list(TUNABLE)):
        cmd += f" --methods {','.join(doc['methods'])}"
    cmd += "".join(f" --{k.replace('_', '-')} {v}" for k, vs in given.items() for v in sorted(vs))
    if p["n_tasks"] != d["n_tasks"]:
        cmd += f" --n-tasks {p['n_tasks']}"
    if p["epochs"] != d["epochs"]:
        cmd += f" --epochs {p['epochs']}"
    if p["seeds"] != d["seeds"]:
        cmd += f" --seed-list {','.join(map(str, p['seeds']))}"
    for g in ("beta_grid", "gamma_grid"):
        if p[g] != d[g]:
            cmd += f" --{g.replace('_', '-')} {','.join(f'{v:g}' for v in p[g])}"
    cmd += option_flags(p.get("options", {}))
    if "window" in p:
        cmd += f" --around {p['window']['around_K']}"
        cmd += "" if p["window"]["half_decades"] == WINDOW else f" --window {p['window']['half_decades']}"
    if p.get("compile", "off") != "off":
        cmd += f" --compile {p['compile']}"
    if p.get("threads", 1) != 1:
        cmd += f" --threads {p['threads']}"
    if p.get("device", "cpu") != get_spec(p["benchmark"]).device:
        cmd += f" --device {p.get('device', 'cpu')}"
    if p.get("precision", "float32") != "float32":
        cmd += f" --precision {p['precision']}"
    if (p.get("model") or {}).get("random_init"):
        cmd += " --random-init"
    return cmd + out_flag(out, default_tuning_out(p))


def repo_path(out: Path) -> str:
    """How hparams.json names the tuning file `out`: its path in the repository (REPO_ROOT), so that the name means
    the same file in every clone; a file outside the repository is refused (UsageError), before any work."""
    path, root = Path(out).resolve(), Path(REPO_ROOT).resolve()
    if not path.is_relative_to(root):
        raise UsageError(f"{out} is outside the repository ({root}), and hparams.json names each value's tuning file "
                         f"by its path in the repository: give --out a file under results/ or runs/, or tune with "
                         f"--no-write to keep the values in that file only")
    return str(path.relative_to(root))


def unit_key(method: str, param: str, value: float, seed: int) -> str:
    """How a tuning file keys one unit (`keys.TuningKey`)."""
    return str(TuningKey(method, param, value, seed))


def committed_tunings(benchmark: str, results_dir: Optional[Path] = None) -> dict[int, dict]:
    """The default tuning files of a benchmark (results/tuning-<b>-K<K>.json), by K, for every K of
    `specs.BenchmarkSpec.all_Ks` that has one."""
    folder = Path(results_dir or REPO_ROOT / "results")
    out = {}
    for K in get_spec(benchmark).all_Ks:
        path = folder / f"tuning-{benchmark}-K{K}.json"
        if path.exists():
            out[K] = load_tuning(path)
    return out


def validation_curves(docs: dict[int, dict]) -> list[dict]:
    """One row per (K, method, searched value) of complete grids: the mean validation ACC over the tuning seeds,
    whether the value is the one chosen, and whether that choice lies on an edge of the search (the data of the book's
    "how beta and gamma move with K")."""
    rows = []
    for K, doc in docs.items():
        for m, g in grid_of(doc).items():
            if not g["complete"]:
                continue
            c = choose(g)
            rows += [{"K": K, "method": m, "param": g["param"], "value": v, "val_acc": a, "chosen": v == c["value"],
                      "at_edge": v == c["value"] and c["at_edge"]} for v, a in zip(g["values"], g["mean_val_acc"])]
    return rows




def tune_request(benchmark: str = "pmnist", K: Optional[int] = None, n_tasks: Optional[int] = None,
                 seeds: Sequence[int] = TUNING_SEEDS, methods: Optional[Sequence[str]] = None,
                 out: Optional[Path] = None, write_hparams: Optional[bool] = None,
                 show_progress: Optional[bool] = None, beta_grid: Sequence[float] = BETA_GRID,
                 gamma_grid: Sequence[float] = GAMMA_GRID, epochs: Optional[int] = None,
                 weights: Optional[str] = None, random_init: bool = False, force: bool = False,
                 command: Optional[Callable[[dict, Path], str]] = None, plan: Optional[Plan] = None,
                 compile: str = "off", options: Optional[dict] = None, decided: bool = True,
                 reuse: Optional[dict] = None, around: Optional[int] = None, window: int = WINDOW,
                 device: Optional[str] = None, precision: str = "float32") -> TuneRequest:
    """The request of a tuning grid, every value checked before any work (see `tune`, which runs it)."""
    spec = get_spec(benchmark)  # looked up once: the checks, the data and the units below get the spec
    K = spec.tuning_K if K is None else K
    methods = _tuned_methods(methods, options)
    seeds = check_seeds(list(seeds))
    n = check_n_tasks(spec, n_tasks)
    check_epochs(epochs)
    protocol = {"benchmark": spec.name, "K": K, "n_tasks": n, "epochs": epochs or spec.epochs, "seeds": seeds,
                "beta_grid": check_grid("beta grid", beta_grid), "gamma_grid": check_grid("gamma grid", gamma_grid),
                "val_offset": spec.val_offset, "val_per_class": spec.val_per_class,
                "options": _open(check_options(options, methods, {"K": K}))}  # a budget: read by a method, M <= K
    if compile != "off":
        protocol["compile"] = compile
    plan = plan or check_plan()
    loc = locate(plan, spec.device if device is None else device, spec.name)  # Ray: the cluster's GPUs
    _where_in_protocol(protocol, plan, loc, precision)
    if around is not None:
        _window_in_protocol(protocol, methods, around, window)
    protocol["method_options"] = _method_options(spec, methods, options or {}, H.load() if decided else None)
    protocol.update(policy_record(methods))  # what the memory keeps and when: a file of another policy is refused
    if K > spec.val_offset:
        raise UsageError(f"K={K}: the validation images of {spec.title} start at image {spec.val_offset} of each class, "
                         f"so tuning needs K <= {spec.val_offset}")
    D.check_data(spec, K, split="val")
    model = model_options(spec, weights, random_init)
    if model:
        protocol["model"] = {"random_init": model["random_init"]}
    out = check_writable(Path(out) if out else default_tuning_out(protocol))
    canonical = is_default(protocol)
    write = canonical if write_hparams is None else write_hparams
    if write:  # a read-only hparams.json, or a tuning file it could not name: said now, not after hours
        check_writable(H.HPARAMS_FILE, fix="make it writable, or tune with --no-write to keep the results in the "
                                           "tuning file only")
        results = (REPO_ROOT / "results").resolve()
        why = ("it ships inside the installed package" if not IN_CHECKOUT else None if results in out.resolve().parents
               else f"it would name {out} as its values' source, outside {results}, where the repository commits")
        if why:
            raise UsageError(f"cannot write hparams.json: {why}; tune in a checkout into results/, or with --no-write")
    return TuneRequest(spec=spec, K=K, n_tasks=n, methods=tuple(methods), seeds=tuple(seeds), epochs=epochs, out=out,
                       plan=plan, loc=loc, model=model, compile=compile, precision=precision,
                       options=dict(options or {}), force=force, show_progress=show_progress, command=command,
                       protocol=protocol, write=write, write_hparams=write_hparams,
                       source=repo_path(out) if write else None, canonical=canonical, reuse=dict(reuse or {}))


def _where_in_protocol(protocol: dict, plan: Plan, loc, precision: str) -> None:
    """Record in `protocol` where and how its units compute, where that changes their numbers: a GPU's kind and
    model, a precision other than float32 (refused on the CPU: `check_precision`, before any work), and another
    count of CPU threads than 1 (it sums in another order)."""
    where = loc.device
    if kind(where) != "cpu":
        protocol["device"], protocol["accelerator"] = kind(where), loc.accelerator
    check_precision(precision, where)  # "tf32" on the CPU: refused here, before any work
    if precision != "float32":
        protocol["precision"] = precision
    if kind(where) == "cpu" and plan.threads != 1:  # another thread count sums in another order: other numbers
        protocol["threads"] = plan.threads


def _window_in_protocol(protocol: dict, methods: Sequence[str], around: int, window: int) -> None:
    """Record in `protocol` a windowed search: `window` half-decades either side of each method's value tuned at
    K = `around` (`window_centres`, `window_grid`)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise UsageError(f"--window {window!r}: give a whole number of half-decades >= 1")
    centres = window_centres(protocol["benchmark"], around, methods=methods)
    protocol["window"] = {"around_K": around, "half_decades": window, "centres": centres}
    protocol["method_grids"] = {m: window_grid(c, H.strength_key(m), window) for m, c in centres.items()}


def _jobs(req: TuneRequest, store: TuningFile, method: str, values: Sequence[float]) -> list[Job]:
    """The units of `method` at `values` still missing from the file, one per tuning seed."""
    param, done, p = H.strength_key(method), store.done("units"), req.protocol
    return [Job(Unit("run", s, method), req.spec, req.K, req.n_tasks, "auto", req.model,
                TrainConfig(epochs=p["epochs"], compile=req.compile, device=req.device_kind, precision=req.precision,
                            **p["method_options"][method], **{param: v}).to_dict(), split="val",
                evaluate_rows="last", device=req.unit_device)
            for v in values for s in req.seeds if unit_key(method, param, v, s) not in done]


def _label(job: Job) -> str:
    """How a tuning file keys the unit of `job`, as failures name it."""
    param = H.strength_key(job.unit.method)
    return unit_key(job.unit.method, param, job.cfg[param], job.unit.seed)


def _saver(store: TuningFile) -> Callable[[Job, dict], None]:
    """Save one finished tuning unit: its final validation ACC under its key."""
    def save(job: Job, r: dict) -> None:
        m, s, cfg = job.unit.method, job.unit.seed, job.cfg
        param = H.strength_key(m)
        store.add("units", unit_key(m, param, cfg[param], s),
                  {"method": m, "param": param, "value": cfg[param], "seed": s,
                   "val_acc": float(np.nanmean(r["value"]["acc_matrix"][-1])), "wall_s": r["value"]["wall_s"]})
    return save


def _extensions(req: TuneRequest, store: TuningFile, grids: dict) -> list[Job]:
    """The units that extend each complete grid whose best value lies on an edge (`lattice.extension`)."""
    g = grid_of(store.doc)
    return [j for m in req.methods if g[m]["complete"] for j in _jobs(req, store, m, extension(g[m], grids[m]))]


def tune_grid(req: TuneRequest) -> dict:
    """Train the units of `req`'s tuning grid still missing from its file (`TuningFile`), then two half-decades more
    wherever a method's best value lies on an edge, until none does; write the chosen values to hparams.json where
    `req.write` says so. Returns the tuning document (protocol, units, grid, chosen)."""
    store = TuningFile(req, req.command or tune_command, PROTOCOL)
    store.open(req.force, until_work=True)  # a finished file is read on any machine
    grids = {m: searched_grid(req.protocol, m) for m in req.methods}

    def pending() -> list[Job]:
        return [j for m in req.methods for j in _jobs(req, store, m, grids[m])]

    if req.reuse or pending() or _extensions(req, store, grids):
        store.refuse_other_rounding()
    reused = sum(store.reuse(m, path) for m, path in req.reuse.items())
    jobs = pending()
    jobs = longest_first(jobs + _extensions(req, store, grids), lambda j: j.unit)  # a grid completed earlier too
    ran = bool(jobs) or reused > 0
    bar = progress(None, req.show_progress, total=len(jobs), desc=f"tune {req.benchmark} K={req.K}", unit="run")
    wrong: list = []  # units from another GPU model (a mixed Ray cluster): not saved
    save = checked_units(_saver(store), req.loc.accelerator, wrong, _label,
                         store.note_machine if req.machine_counter else None)
    while jobs:  # the grid, then two half-decades more wherever the best value lies on an edge
        failures = run_all(run_job, jobs, save, req.plan, progress=lambda: bar.update())
        if failures or wrong:
            bar.close()
            raise UnitsFailed(req.out, [(_label(f.job), f.error) for f in failures] + wrong)
        jobs = longest_first(_extensions(req, store, grids), lambda j: j.unit)
        bar.total += len(jobs)
    bar.close()
    doc = store.doc
    if "grid" not in doc or not ran:
        doc["grid"] = grid_of(doc)
    chosen = {m: v for m, v in doc.get("chosen", {}).items() if m in req.methods}
    written = bool(req.write and chosen and (ran or req.write_hparams))  # asked for: a finished tuning's values too
    if written:
        H.store(req.benchmark, req.K, chosen, req.source, doc["provenance"]["command"])
    doc["hparams_written"], doc["canonical"] = written, req.canonical
    return doc


def tune(*args, **kwargs) -> dict:
    """Grid-search beta/gamma per regularised method on the validation split (see the module docstring):
    `tune_grid(tune_request(...))`.

    around: search each method in a window of the half-decade lattice (`window_grid`: `window` half-decades either
    side, and 0 for gamma) centred on its value tuned at K = around, instead of the whole beta/gamma grid; extended
    like the full grid wherever the best value lies on an edge. The protocol records the centres' K, the window and
    every method's grid. compile: recorded in the protocol unless "off" (compiled and eager runs round differently).
    device: auto, cpu, cuda or cuda:N (default: the benchmark's); a GPU's kind and model are recorded in the protocol
    (a file refuses units from another device, as from another compile setting). precision: `TrainConfig.precision`,
    recorded in the protocol unless "float32" ("tf32" on a GPU only).

    Each method trains with the open choices decided for its regulariser (hparams.json "options", see `choices`)
    overridden by `options`; decided=False starts from the defaults instead (how `choices` tunes its alternatives). The
    protocol records both (options, method_options).

    reuse: {method: tuning file} whose units of that method were made with exactly this protocol's training
    configuration for it (every protocol field equal, method_options of that method included): they are copied in
    (marked "reused_from") instead of being trained again; a file that does not match is refused.

    options may hold a budget (`vocab.BUDGET_OPTIONS`: the memory's M, at most K): the methods that read it train with
    it (without `methods`, they are the methods tuned: `budget_methods`, MetaCL-lambda with both references), and
    protocol.method_options records it for each of them (their declared default where none is given), so that a file
    holds one budget; the default protocol's file is results/tuning-<b>-K<K>-memory-M<M>.json (`budget_tag`).

    write_hparams: None (default) writes hparams.json only for the default protocol; True writes it for any protocol;
    False never. Returns the tuning document (protocol, units, grid, chosen)."""
    return tune_grid(tune_request(*args, **kwargs))
