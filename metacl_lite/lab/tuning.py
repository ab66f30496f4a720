"""Choosing beta and gamma without the test set.

The protocol is `PROTOCOL` below (recorded in every tuning file as `protocol_text`).

A tuning file holds one protocol. Each unit is saved as it finishes (resumable, locked, merged: `store.UnitFile`).
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
from ..paths import REPO_ROOT
from .atomic import check_writable
from .commands import option_flags, out_flag
from ..accel.device import check_precision, kind
from ..errors import UsageError
from ..errors import UnitsFailed
from .executors import Plan, check_plan, locate, run_all, unit_device
from .lattice import BETA_GRID, GAMMA_GRID, WINDOW, check_grid, choose, extension, window_grid
from .checks import check_epochs, check_methods, check_n_tasks, check_options, check_seeds, model_options
from .grid import Job, Unit, checked_units, longest_first, run_job
from .provenance import relative_to_repo
from ..data.specs import get_spec
from . import store as store_mod
from .store import UnitFile
from ..progress import progress
from ..training import METHODS, TrainConfig
from ..vocab import in_paper

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

#: Methods with a strength to tune: every regularised one (`tune --methods`) ...
REGULARISED = tuple(m for m in METHODS if H.strength_key(m) is not None)
#: ... and the paper's nine, those of the default protocol (an extension such as L2 is tuned when named).
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


def is_default(protocol: dict) -> bool:
    """Whether a protocol is the default one of its benchmark and K (`default_protocol`), searched on the full grid or
    in a window of it; such a file is results/tuning-<b>-K<K>.json and writes hparams.json."""
    b, K = protocol["benchmark"], protocol["K"]
    rest = {k: v for k, v in protocol.items() if k not in NOT_PROTOCOL_CHOICES}
    if rest.pop("precision", "float32") != "float32":  # float32 is the default, recorded or not
        return False
    extensions = _extension_options(protocol)  # an extension is in the protocol when it is tuned, with its options
    if any(o != H.method_options(b, m) for m, o in extensions.items()):
        return False
    rest["method_options"] = {m: o for m, o in rest.get("method_options", {}).items() if m not in extensions}
    return rest == default_protocol(b, K)


def _extension_options(protocol: dict) -> dict:
    """{method: its options} for the methods a protocol tunes that are not the paper's (in it only when tuned)."""
    return {m: o for m, o in protocol.get("method_options", {}).items() if m not in TUNABLE}


def extension_regularisers(protocol: dict) -> list[str]:
    """The regularisers, not the paper's, of the methods a protocol tunes."""
    return sorted({H.regulariser(m) for m in _extension_options(protocol)})


def protocol_tag(protocol: dict) -> str:
    return hashlib.sha256(json.dumps(protocol, sort_keys=True).encode()).hexdigest()[:8]


def default_tuning_out(protocol: dict) -> Path:
    """results/tuning-<b>-K<K>.json for the default protocol (results/tuning-<b>-K<K>-<regulariser>.json where it
    also tunes an extension such as L2: the paper's file stays as it is); runs/tuning-<b>-K<K>-<hash>.json for any
    other."""
    b, K = protocol["benchmark"], protocol["K"]
    if is_default(protocol):
        extensions = "".join(f"-{r}" for r in extension_regularisers(protocol))
        return REPO_ROOT / "results" / f"tuning-{b}-K{K}{extensions}.json"
    return REPO_ROOT / "runs" / f"tuning-{b}-K{K}-{protocol_tag(protocol)}.json"


def tune_command(doc: dict, out: Path) -> str:
    """The `tune` command that regenerates a tuning file (its protocol and all its methods)."""
    p = doc["protocol"]
    d = default_protocol(p["benchmark"], p["K"])
    cmd = f"python -m metacl_lite tune --benchmark {p['benchmark']} --K {p['K']}"
    if doc["methods"] != list(TUNABLE):
        cmd += f" --methods {','.join(doc['methods'])}"
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
    return f"{method}/{param}={value!r}/{seed}"


def grid_of(doc: dict) -> dict:
    """Per method of the file: its grid values, the validation ACC per value and seed, the mean, and whether the grid
    is complete."""
    p = doc["protocol"]
    out = {}
    for m in doc["methods"]:
        param = H.strength_key(m)
        base = searched_grid(p, m)
        extra = {u["value"] for u in doc["units"].values() if u["method"] == m}  # values added by extending
        values = sorted(set(base) | extra)
        accs = [[doc["units"].get(unit_key(m, param, v, s), {}).get("val_acc") for s in p["seeds"]] for v in values]
        complete = all(a is not None for row in accs for a in row)
        g = {"param": param, "values": values, "val_acc": accs, "complete": complete,
             "extended": sorted(extra - set(base))}
        if complete:
            g["mean_val_acc"] = [float(np.mean(row)) for row in accs]
        out[m] = g
    return out


def searched_grid(protocol: dict, method: str) -> list[float]:
    """The grid a protocol searches for a method: its window (`window_grid`) in a windowed search, else the protocol's
    beta or gamma grid."""
    if "method_grids" in protocol:
        return protocol["method_grids"][method]
    return protocol["gamma_grid"] if H.strength_key(method) == "gamma" else protocol["beta_grid"]


def committed_tunings(benchmark: str, results_dir: Optional[Path] = None) -> dict[int, dict]:
    """The default tuning files of a benchmark (results/tuning-<b>-K<K>.json), by K, for every K of
    `specs.BenchmarkSpec.all_Ks` that has one."""
    folder = Path(results_dir or REPO_ROOT / "results")
    out = {}
    for K in get_spec(benchmark).all_Ks:
        path = folder / f"tuning-{benchmark}-K{K}.json"
        if path.exists():
            out[K] = _upgrade_schema1(store_mod.load(path, "tuning"))
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


#: Schema-1 tuning files validated Permuted MNIST on images 400-499 of each class (the embedded subset held 500).
SCHEMA1_VAL_OFFSET = {"pmnist": 400}


def _upgrade_schema1(doc: dict) -> dict:
    """A tuning file of schema 1 (grid and chosen only) as units of schema 2."""
    if "units" in doc:
        return doc
    grid = doc["grid"]
    betas = next((g["values"] for g in grid.values() if g["param"] == "beta"), list(BETA_GRID))
    gammas = next((g["values"] for g in grid.values() if g["param"] == "gamma"), list(GAMMA_GRID))
    spec = get_spec(doc["benchmark"])
    doc["protocol"] = {"benchmark": doc["benchmark"], "K": doc["K"], "n_tasks": doc["n_tasks"], "epochs": doc["epochs"],
                       "seeds": doc["seeds"], "beta_grid": betas, "gamma_grid": gammas,
                       "val_offset": SCHEMA1_VAL_OFFSET.get(doc["benchmark"], spec.val_offset),
                       "val_per_class": spec.val_per_class}
    if doc.get("model"):
        doc["protocol"]["model"] = doc["model"]
    doc["methods"] = list(grid)
    doc["units"] = {unit_key(m, g["param"], v, s): {"method": m, "param": g["param"], "value": v, "seed": s,
                                                   "val_acc": a}
                    for m, g in grid.items() for v, row in zip(g["values"], g["val_acc"])
                    for s, a in zip(doc["seeds"], row)}
    return doc


def _full_protocol(doc: dict) -> dict:
    """A tuning file's protocol with the fields of files made before them: no options, and method_options equal to
    the file-wide options for every method."""
    p = dict(doc["protocol"])
    p.setdefault("options", {})
    p.setdefault("method_options", {m: dict(p["options"]) for m in TUNABLE})
    return p


def tune(benchmark: str = "pmnist", K: Optional[int] = None, n_tasks: Optional[int] = None,
         seeds: Sequence[int] = TUNING_SEEDS, methods: Optional[Sequence[str]] = None, out: Optional[Path] = None,
         write_hparams: Optional[bool] = None, show_progress: Optional[bool] = None,
         beta_grid: Sequence[float] = BETA_GRID, gamma_grid: Sequence[float] = GAMMA_GRID,
         epochs: Optional[int] = None, weights: Optional[str] = None, random_init: bool = False,
         force: bool = False, command: Optional[Callable[[dict, Path], str]] = None,
         plan: Optional[Plan] = None, compile: str = "off", options: Optional[dict] = None,
         decided: bool = True, reuse: Optional[dict] = None, around: Optional[int] = None,
         window: int = WINDOW, device: Optional[str] = None, precision: str = "float32") -> dict:
    """Grid-search beta/gamma per regularised method on the validation split (see the module docstring).

    around: search each method in a window of the half-decade lattice (`window_grid`: `window` half-decades either
    side, and 0 for gamma) centred on its value tuned at K = around, instead of the whole beta/gamma grid; extended
    like the full grid wherever the best value lies on an edge. The protocol records the centres' K, the window and
    every method's grid. compile: recorded in the protocol unless "off" (compiled and eager runs round differently).
    device: auto, cpu, cuda or cuda:N (default: the benchmark's); a GPU's kind and model are recorded in the protocol
    (a file refuses units from another device, as from another compile setting). precision: `TrainConfig.precision`,
    recorded in the protocol unless "float32" ("tf32" on a GPU only).

    Each method trains with the open choices decided for its regulariser (hparams.json "options", see `choices`)
    overridden by `options`; decided=False starts from the defaults instead (how `choices` tunes its variants). The
    protocol records both (options, method_options).

    reuse: {method: tuning file} whose units of that method were made with exactly this protocol's training
    configuration for it (every protocol field equal, method_options of that method included): they are copied in
    (marked "reused_from") instead of being trained again; a file that does not match is refused.

    write_hparams: None (default) writes hparams.json only for the default protocol; True writes it for any protocol;
    False never. Returns the tuning document (protocol, units, grid, chosen)."""
    spec = get_spec(benchmark)  # resolved once: the checks, the data and the units below get the spec
    benchmark = spec.name  # what the tuning file and hparams.json record
    K = spec.tuning_K if K is None else K
    methods = check_methods(methods, allowed=REGULARISED)
    seeds = check_seeds(list(seeds))
    n = check_n_tasks(spec, n_tasks)
    check_epochs(epochs)
    protocol = {"benchmark": benchmark, "K": K, "n_tasks": n, "epochs": epochs or spec.epochs, "seeds": seeds,
                "beta_grid": check_grid("beta grid", beta_grid), "gamma_grid": check_grid("gamma grid", gamma_grid),
                "val_offset": spec.val_offset, "val_per_class": spec.val_per_class,
                "options": check_options(options)}
    if compile != "off":
        protocol["compile"] = compile
    plan = plan or check_plan()
    loc = locate(plan, spec.device if device is None else device, spec.name)  # Ray: the cluster's GPUs
    where = loc.device
    if kind(where) != "cpu":
        protocol["device"], protocol["accelerator"] = kind(where), loc.accelerator
    check_precision(precision, where)  # "tf32" on the CPU: refused here, before any work
    if precision != "float32":
        protocol["precision"] = precision
    if kind(where) == "cpu" and plan.threads != 1:  # another thread count sums in another order: other numbers
        protocol["threads"] = plan.threads
    if around is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise UsageError(f"--window {window!r}: give a whole number of half-decades >= 1")
        centres = window_centres(benchmark, around, methods=methods)
        protocol["window"] = {"around_K": around, "half_decades": window, "centres": centres}
        protocol["method_grids"] = {m: window_grid(c, H.strength_key(m), window) for m, c in centres.items()}
    with_options = [*TUNABLE, *(m for m in methods if m not in TUNABLE)]  # an extension's, only when it is tuned
    hp = H.load() if decided else {}
    base = {m: H.method_options(benchmark, m, hp) if decided else {} for m in with_options}
    protocol["method_options"] = {m: {**base[m], **protocol["options"]} for m in with_options}
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
        source = repo_path(out)
    if command is None:
        command = tune_command

    def compatible(old: dict) -> list:
        old = _upgrade_schema1(old)
        op = _full_protocol(old)
        return sorted(k for k in set(protocol) | set(op) if op.get(k) != protocol.get(k))

    def merge(doc: dict) -> None:
        if "grid" in doc and "units" not in doc:
            _upgrade_schema1(doc)
        doc["protocol"] = protocol
        doc["methods"] = [m for m in REGULARISED if m in set(doc.get("methods", [])) | set(methods)]
        doc["protocol_text"] = PROTOCOL
        for k in ("benchmark", "K", "n_tasks", "seeds", "epochs"):  # the fields of schema 1, for readers
            doc[k] = protocol[k]

    def finalize(doc: dict) -> None:
        doc["grid"] = grid_of(doc)
        doc["chosen"], doc["at_edge"] = {}, {}
        for m, g in doc["grid"].items():
            if g["complete"]:
                c = choose(g)
                doc["chosen"][m] = {g["param"]: c["value"]}
                doc["at_edge"][m] = c["at_edge"]
        doc.setdefault("provenance", {})["command"] = command(doc, out)

    store = UnitFile(out, "tuning", protocol, ("units",), compatible, merge, finalize, where, loc.text, plan.threads)
    doc = store.open(force)

    def jobs_for(m: str, values: Sequence[float]) -> list[Job]:
        param = H.strength_key(m)
        done = store.done("units")
        return [Job(Unit("run", s, m), spec, K, n, "auto", model,
                    TrainConfig(epochs=protocol["epochs"], compile=compile, device=kind(where), precision=precision,
                                **protocol["method_options"][m], **{param: v}).to_dict(), split="val",
                    evaluate_rows="last", device=unit_device(plan, where))
                for v in values for s in seeds if unit_key(m, param, v, s) not in done]

    def save(job: Job, r: dict) -> None:
        m, s, cfg = job.unit.method, job.unit.seed, job.cfg
        param = H.strength_key(m)
        store.add("units", unit_key(m, param, cfg[param], s),
                  {"method": m, "param": param, "value": cfg[param], "seed": s,
                   "val_acc": float(np.nanmean(r["value"]["acc_matrix"][-1])), "wall_s": r["value"]["wall_s"]})

    def label(job: Job) -> str:
        return unit_key(job.unit.method, H.strength_key(job.unit.method), job.cfg[H.strength_key(job.unit.method)],
                        job.unit.seed)

    reused = 0
    for m, path in (reuse or {}).items():
        src = _upgrade_schema1(store_mod.load(Path(path), "tuning"))
        sp = _full_protocol(src)
        diff = sorted(k for k in set(protocol) | set(sp)
                      if k not in ("options", "method_options") and sp.get(k) != protocol.get(k))
        diff += ["method_options"] if sp["method_options"].get(m) != protocol["method_options"][m] else []
        if diff:
            raise UsageError(f"{relative_to_repo(path)} cannot stand in for {m}'s units ({', '.join(diff)} differ)")
        for key, u in src["units"].items():
            if u["method"] == m and key not in store.done("units"):
                store.add("units", key, {**u, "reused_from": relative_to_repo(path)})
                reused += 1

    grids = {m: searched_grid(protocol, m) for m in methods}
    jobs = [j for m in methods for j in jobs_for(m, grids[m])]
    g = grid_of(store.doc)  # a grid completed earlier may still need extending (e.g. after a change of the edge rule)
    jobs += [j for m in methods if g[m]["complete"] for j in jobs_for(m, extension(g[m], grids[m]))]
    jobs = longest_first(jobs, lambda j: j.unit)
    ran = bool(jobs) or reused > 0
    bar = progress(None, show_progress, total=len(jobs), desc=f"tune {benchmark} K={K}", unit="run")
    wrong: list = []  # units from another GPU model (a mixed Ray cluster): not saved
    while jobs:  # the grid, then two half-decades more wherever the best value lies on an edge
        failures = run_all(run_job, jobs, checked_units(save, loc.accelerator, wrong, label,
                                                        store.note_machine if plan.executor == "ray" else None), plan,
                           progress=lambda: bar.update())
        if failures or wrong:
            bar.close()
            raise UnitsFailed(out, [(label(f.job), f.error) for f in failures] + wrong)
        g = grid_of(store.doc)
        jobs = longest_first([j for m in methods if g[m]["complete"] for j in jobs_for(m, extension(g[m], grids[m]))],
                             lambda j: j.unit)
        bar.total += len(jobs)
    bar.close()
    doc = store.doc
    if "grid" not in doc or not ran:
        doc["grid"] = grid_of(doc)
    chosen = {m: v for m, v in doc.get("chosen", {}).items() if m in methods}
    written = bool(write and chosen and (ran or write_hparams))  # asked for: a finished tuning's values too
    if written:
        H.store(benchmark, K, chosen, source, doc["provenance"]["command"])
    doc["hparams_written"] = written
    doc["canonical"] = canonical
    return doc
