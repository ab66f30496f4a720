"""Experiments: the grid of methods x seeds (+ references and oracle), results files with provenance, resuming,
choosing beta/gamma on a validation split, and the table beside the paper's."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from .data import BENCHMARKS, REPO_ROOT, make_benchmark
from .metrics import all_metrics, average_accuracy_curve, mean_ci95
from .paper import PAPER_SOURCES, paper_table
from .training import METHODS, TrainConfig, get_method, progress, run_stream, train_joint, train_reference

HPARAMS_FILE = Path(__file__).resolve().parent / "hparams.json"
SCHEMA = 1

#: Appendix B: epochs per task; Appendix C: tasks per stream.
BENCH_DEFAULTS = {"pmnist": {"epochs": 5, "n_tasks": 20}, "cifar100": {"epochs": 60, "n_tasks": 10},
                  "cub": {"epochs": 20, "n_tasks": 10}}

#: The grids searched by `tune` (the same decades for every regulariser; gamma also tries 0).
BETA_GRID = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
GAMMA_GRID = (0.0,) + BETA_GRID


# ----------------------------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------------------------
def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (float, np.floating)):
        return None if math.isnan(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temporary file and rename it over `path`: a kill never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(_jsonable(obj), indent=1, allow_nan=False) + "\n")
    os.replace(tmp, path)


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def matrix_from_json(rows: list) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=np.float64)


# ----------------------------------------------------------------------------------------------------------------
# Hyperparameters (one place: hparams.json)
# ----------------------------------------------------------------------------------------------------------------
def load_hparams() -> dict:
    return load_json(HPARAMS_FILE) if HPARAMS_FILE.exists() else {}


#: The K at which `tune` chooses the values every other K uses unless it has values of its own (hparams.json
#: keeps those under "by_K").
TUNING_K = {"pmnist": 20, "cifar100": 20, "cub": 10}


def _hparams_entry(benchmark: str, method: str, K: Optional[int]) -> tuple[dict, str]:
    entry = load_hparams().get(benchmark, {})
    per_k = entry.get("by_K", {}).get(str(K), {}) if K is not None else {}
    if method in per_k.get("methods", {}):
        return per_k, f"K={K}"
    return entry, "default"


def method_hparams(benchmark: str, method: str, K: Optional[int] = None) -> dict:
    """beta (plain and MetaCL-beta) or gamma (MetaCL-lambda) for a method, from hparams.json: the values tuned at
    this K when there are any (`tune --K K`), else the default ones (tuned at TUNING_K[benchmark])."""
    m = get_method(method)
    if m.importance is None:
        return {}
    hp = _hparams_entry(benchmark, method, K)[0].get("methods", {})
    if method not in hp:
        raise KeyError(f"no tuned beta/gamma for {method} on {benchmark} in {HPARAMS_FILE}; "
                       f"choose them with `python -m metacl_lite tune --benchmark {benchmark}`")
    return dict(hp[method])


def hparams_source(benchmark: str, methods: Sequence[str], K: Optional[int] = None) -> dict[str, str]:
    """Where each method's beta/gamma come from: the tuning file (and K) behind the values method_hparams returns."""
    out = {}
    for m in methods:
        if get_method(m).importance is None:
            continue
        entry, which = _hparams_entry(benchmark, m, K)
        out[m] = f"{which}: {entry.get('source', '?')}"
    return out


def method_config(benchmark: str, method: str, epochs: Optional[int] = None, K: Optional[int] = None,
                  **overrides) -> TrainConfig:
    cfg = TrainConfig(epochs=epochs or BENCH_DEFAULTS[benchmark]["epochs"], **overrides)
    for k, v in method_hparams(benchmark, method, K).items():
        setattr(cfg, k, v)
    return cfg


# ----------------------------------------------------------------------------------------------------------------
# Provenance
# ----------------------------------------------------------------------------------------------------------------
def _git(*args: str) -> Optional[str]:
    try:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except Exception:
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance(command: str) -> dict:
    """Where a result came from: the regenerating command, git commit, packages, device."""
    pkgs = {}
    for name in ("metacl-lite", "torch", "torchvision", "numpy", "scipy"):
        try:
            pkgs[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pkgs[name] = None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "command": command,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "python": sys.version.split()[0],
        "packages": pkgs,
        "platform": platform.platform(),
        "device": f"cpu: {_cpu_name()} ({os.cpu_count()} cores, torch threads {torch.get_num_threads()})"
        if not torch.cuda.is_available() else f"cuda: {torch.cuda.get_device_name(0)}",
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


# ----------------------------------------------------------------------------------------------------------------
# The grid
# ----------------------------------------------------------------------------------------------------------------
class ConfigMismatch(RuntimeError):
    pass


def run_command(benchmark: str, K: int, seeds: Sequence[int], methods: Sequence[str], n_tasks: Optional[int],
                epochs: Optional[int], out: Path) -> str:
    cmd = f"python -m metacl_lite run --benchmark {benchmark} --K {K}"
    cmd += f" --seeds {len(seeds)}" if list(seeds) == list(range(len(seeds))) else \
        f" --seed-list {','.join(map(str, seeds))}"
    if list(methods) != list(METHODS):
        cmd += f" --methods {','.join(methods)}"
    if n_tasks is not None:
        cmd += f" --n-tasks {n_tasks}"
    if epochs is not None:
        cmd += f" --epochs {epochs}"
    out = Path(out).resolve()
    if out == default_out(benchmark, K).resolve():
        return cmd
    return cmd + f" --out {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}"


def default_out(benchmark: str, K: int) -> Path:
    return REPO_ROOT / "results" / f"{benchmark}-K{K}.json"


def model_options(benchmark: str, weights: Optional[str] = None, random_init: bool = False) -> dict:
    """Model options recorded in the config; for CUB, checks now (before any work) that the weights can be found."""
    if benchmark != "cub":
        if weights or random_init:
            raise ValueError("--weights / --random-init apply to the cub benchmark (ResNet-18) only")
        return {}
    if random_init:
        return {"weights": None, "random_init": True}
    from .models import find_resnet18_weights

    return {"weights": str(find_resnet18_weights(weights)), "random_init": False}


def run_experiment(benchmark: str, K: int, seeds: Sequence[int] = (0, 1, 2), methods: Optional[Sequence[str]] = None,
                   out: Optional[Path] = None, n_tasks: Optional[int] = None, epochs: Optional[int] = None,
                   source: str = "auto", show_progress: Optional[bool] = None, force: bool = False,
                   weights: Optional[str] = None, random_init: bool = False) -> dict:
    """Run every method for every seed, the single-task references (FA) and the joint oracle; write `out` after
    every finished unit (atomically), and skip units already in `out` when it was made with the same config."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(BENCHMARKS)}")
    methods = list(methods) if methods else list(METHODS)
    for m in methods:
        get_method(m)
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("need at least one seed")
    out = Path(out) if out else default_out(benchmark, K)
    n = n_tasks or BENCH_DEFAULTS[benchmark]["n_tasks"]
    model = model_options(benchmark, weights, random_init)
    cfgs = {m: method_config(benchmark, m, epochs, K) for m in methods}
    base_cfg = method_config(benchmark, "finetune", epochs)
    config = {"benchmark": benchmark, "K": K, "n_tasks": n, "seeds": seeds, "methods": methods,
              "train": base_cfg.to_dict(), "method_hparams": {m: method_hparams(benchmark, m, K) for m in methods},
              "hparams_source": hparams_source(benchmark, methods, K), "data_source": source, "model": model}
    def build(seed: int):
        b = make_benchmark(benchmark, K, seed=seed, n_tasks=n, source=source)
        b.info["model"] = model
        return b

    bench = build(seeds[0])  # validates the data and K before any work (raises with the fixing command)
    res: dict = {}
    if out.exists() and not force:
        old = load_json(out)
        keys = ("benchmark", "K", "n_tasks", "train", "data_source", "model")
        diff = [k for k in keys if old.get("config", {}).get(k, {} if k == "model" else None) != _jsonable(config[k])]
        diff += [f"method_hparams[{m}]" for m in methods
                 if m in old.get("config", {}).get("method_hparams", {})
                 and old["config"]["method_hparams"][m] != _jsonable(config["method_hparams"][m])]
        if diff:
            raise ConfigMismatch(f"{out} was made with a different configuration ({', '.join(diff)}); "
                                 f"write elsewhere with --out, or start over with --force")
        res = old
    res.setdefault("runs", {})
    res.setdefault("references", {})
    res.setdefault("oracle", {})
    prev_wall = float(res.get("provenance", {}).get("wall_s_total", 0.0))
    old_methods = res.get("config", {}).get("methods", [])
    old_seeds = res.get("config", {}).get("seeds", [])
    config["methods"] = old_methods + [m for m in methods if m not in old_methods]
    config["seeds"] = sorted(set(old_seeds) | set(seeds))
    for m in config["methods"]:
        config["method_hparams"].setdefault(m, res.get("config", {}).get("method_hparams", {}).get(m, {}))
    res["schema"] = SCHEMA
    res["config"] = config
    res["paper_source"] = PAPER_SOURCES.get((benchmark, K))
    prov = provenance(run_command(benchmark, K, config["seeds"], config["methods"], n_tasks, epochs, out))
    t_start = time.perf_counter()

    def save():
        prov["wall_s_total"] = prev_wall + time.perf_counter() - t_start
        prov["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        res["provenance"] = prov
        res["summary"] = summarize(res)
        write_json_atomic(out, res)

    units = []
    for s in seeds:
        if str(s) not in res["references"]:
            units.append(("reference", s))
        if str(s) not in res["oracle"]:
            units.append(("joint", s))
        units += [(m, s) for m in methods if f"{m}/{s}" not in res["runs"]]
    for unit, s in progress(units, show_progress, desc=f"{benchmark} K={K}", unit="run"):
        if benchmark == "pmnist" and bench.info["permutation_seed"] != s:  # CIFAR-100/CUB splits ignore the seed
            bench = build(s)
        t0 = time.perf_counter()
        if unit == "reference":
            res["references"][str(s)] = {"acc": [train_reference(bench, i, base_cfg, s) for i in range(n)],
                                         "wall_s": time.perf_counter() - t0}
        elif unit == "joint":
            res["oracle"][str(s)] = {"acc": train_joint(bench, base_cfg, s), "wall_s": time.perf_counter() - t0}
        else:
            r = run_stream(bench, unit, cfgs[unit], s, show_progress=False)
            res["runs"][f"{unit}/{s}"] = {"acc_matrix": r["acc_matrix"], "wall_s": r["wall_s"]}
        res.setdefault("data_info", bench.info)
        save()
    if not units:
        save()
    return res


def summarize(res: dict) -> dict:
    """Per method: each seed's ACC, BT, FA (needs that seed's references), and mean +- 95% CI over seeds."""
    summary: dict = {}
    for m in res["config"]["methods"] + ["joint"]:
        per: dict[str, list] = {"ACC": [], "BT": [], "FA": [], "seeds": []}
        for s in res["config"]["seeds"]:
            if m == "joint":
                if str(s) in res["oracle"]:
                    per["ACC"].append(float(np.mean(res["oracle"][str(s)]["acc"])))
                    per["seeds"].append(s)
                continue
            run = res["runs"].get(f"{m}/{s}")
            ref = res["references"].get(str(s))
            if run is None or ref is None:
                continue
            met = all_metrics(matrix_from_json(_jsonable(run["acc_matrix"])), ref["acc"])
            for k in ("ACC", "BT", "FA"):
                per[k].append(met[k])
            per["seeds"].append(s)
        if not per["seeds"]:
            continue
        entry = {"seeds": per["seeds"]}
        for k in ("ACC", "BT", "FA"):
            if per[k]:
                mean, ci = mean_ci95(per[k])
                entry[k] = {"mean": mean, "ci95": ci, "values": per[k]}
        summary[m] = entry
    return summary


def average_accuracy_curves(res: dict) -> dict[str, np.ndarray]:
    """Fig. 3: the average accuracy after each task, mean over seeds, per method."""
    out = {}
    for m in res["config"]["methods"]:
        mats = [matrix_from_json(r["acc_matrix"]) for k, r in res["runs"].items() if k.split("/")[0] == m]
        if mats:
            out[m] = np.mean([average_accuracy_curve(a) for a in mats], axis=0)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------------------------
def _fmt(mean: Optional[float], ci: Optional[float]) -> str:
    if mean is None:
        return "–"
    return f"{mean:.1f}" if ci is None or (isinstance(ci, float) and math.isnan(ci)) else f"{mean:.1f} ± {ci:.1f}"


def comparison_rows(res: dict) -> list[dict]:
    """One row per method: ours and the paper's ACC/BT/FA (strings), plus the numeric differences."""
    cfg = res["config"]
    paper = paper_table(cfg["benchmark"], cfg["K"]) or {}
    rows = []
    for m in list(METHODS) + ["joint"]:
        ours = res.get("summary", {}).get(m)
        pap = paper.get(m)
        if ours is None and pap is None:
            continue
        row = {"method": m, "label": METHODS[m].label if m in METHODS else "Joint training (oracle)"}
        for k in ("ACC", "BT", "FA"):
            o = (ours or {}).get(k)
            p = (pap or {}).get(k)
            row[f"{k} ours"] = _fmt(o["mean"], o["ci95"]) if o else "–"
            row[f"{k} paper"] = _fmt(*p) if p else "–"
            row[f"{k} diff"] = (o["mean"] - p[0]) if (o and p) else None
        rows.append(row)
    return rows


def format_table(res: dict, fmt: str = "text") -> str:
    """Our table beside the paper's (fmt: "text" or "md")."""
    cfg = res["config"]
    rows = comparison_rows(res)
    cols = ["label"] + [f"{k} {w}" for k in ("ACC", "BT", "FA") for w in ("ours", "paper")]
    heads = ["Method"] + [f"{k} {w}" for k in ("ACC", "BT", "FA") for w in ("ours", "paper")]
    seeds = len(cfg["seeds"])
    title = (f"{cfg['benchmark']} K={cfg['K']}, {cfg['n_tasks']} tasks, {seeds} seed(s); ours: mean ± 95% CI "
             f"(t-interval over seeds); paper: {res.get('paper_source') or 'no published numbers'}")
    if fmt == "md":
        lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(str(r[c])) for r in rows)) for h, c in zip(heads, cols)]
    line = lambda vals: "  ".join(str(v).ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    out = [title, line(heads), line("-" * w for w in widths)]
    out += [line([r[c] for c in cols]) for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------------------
# Choosing beta and gamma without the test set
# ----------------------------------------------------------------------------------------------------------------
def tune(benchmark: str = "pmnist", K: int = 20, n_tasks: int = 10, seeds: Sequence[int] = (100, 101),
         methods: Optional[Sequence[str]] = None, out: Optional[Path] = None, write_hparams: bool = True,
         show_progress: Optional[bool] = None, beta_grid: Sequence[float] = BETA_GRID,
         gamma_grid: Sequence[float] = GAMMA_GRID, epochs: Optional[int] = None, weights: Optional[str] = None,
         random_init: bool = False) -> dict:
    """Grid-search beta (plain, MetaCL-beta) and gamma (MetaCL-lambda) per regularised method on a validation split.

    Protocol: a short stream (n_tasks) with permutation seeds disjoint from the evaluation seeds (100, 101 vs 0-2),
    training on the first K images per class, scoring the final average accuracy (ACC) on training images beyond the
    first K (Permuted MNIST and CIFAR-100: images 400-499 of each class; CUB: 20-28), never the test set. The value
    with the best mean validation ACC over the seeds wins (ties: the smaller value). Results go to results/tuning-<benchmark>-K<K>.json, the chosen
    values to hparams.json, which every run reads. Values tuned at TUNING_K[benchmark] (20; CUB 10) are the default for
    every K; values tuned at another K are stored under "by_K" and used for that K only.
    """
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(BENCHMARKS)}")
    methods = [m for m in (methods or METHODS) if get_method(m).importance is not None]
    out = Path(out) if out else REPO_ROOT / "results" / f"tuning-{benchmark}-K{K}.json"
    model = model_options(benchmark, weights, random_init)
    cmd = f"python -m metacl_lite tune --benchmark {benchmark} --K {K} --n-tasks {n_tasks} " \
          f"--seed-list {','.join(map(str, seeds))}" + (f" --epochs {epochs}" if epochs else "")
    epochs = epochs or BENCH_DEFAULTS[benchmark]["epochs"]
    prov = provenance(cmd)
    t0 = time.perf_counter()
    benches = {s: make_benchmark(benchmark, K, seed=s, n_tasks=n_tasks, split="val") for s in seeds}
    for b in benches.values():
        b.info["model"] = model
    grid = {}
    jobs = []
    for m in methods:
        key, values = ("gamma", gamma_grid) if get_method(m).balance == "lambda" else ("beta", beta_grid)
        jobs += [(m, key, v) for v in values]
    for m, key, v in progress(jobs, show_progress, desc="tune", unit="cfg"):
        cfg = TrainConfig(epochs=epochs, **{key: v})
        accs = [float(run_stream(benches[s], m, cfg, s, show_progress=False)["acc_matrix"][-1].mean())
                for s in seeds]
        grid.setdefault(m, {"param": key, "values": [], "val_acc": []})
        grid[m]["values"].append(v)
        grid[m]["val_acc"].append(accs)
    chosen = {}
    for m, g in grid.items():
        means = [float(np.mean(a)) for a in g["val_acc"]]
        best = int(np.argmax(means))  # argmax takes the first (smallest) value on ties
        chosen[m] = {g["param"]: g["values"][best]}
        g["mean_val_acc"] = means
    prov["wall_s_total"] = time.perf_counter() - t0
    result = {"schema": SCHEMA, "benchmark": benchmark, "K": K, "n_tasks": n_tasks, "seeds": list(seeds), "model": model,
              "protocol": tune.__doc__.split("Protocol: ", 1)[1].strip(), "epochs": epochs,
              "grid": grid, "chosen": chosen, "provenance": prov}
    write_json_atomic(out, result)
    if write_hparams:
        hp = load_hparams()
        entry = hp.setdefault(benchmark, {})
        if K != TUNING_K[benchmark]:  # values for this K only; every other K keeps reading the default ones
            entry = entry.setdefault("by_K", {}).setdefault(str(K), {})
        entry.setdefault("methods", {}).update(chosen)
        entry["source"] = str(out.relative_to(REPO_ROOT)) if out.is_relative_to(REPO_ROOT) else str(out)
        entry["command"] = cmd
        write_json_atomic(HPARAMS_FILE, hp)
    return result


README_MARK = re.compile(r"(<!-- BEGIN (table|summary|bench) (\S+) -->\n)(.*?)(<!-- END \2 -->)", re.S)


def bench_summary(b: dict) -> str:
    """The figures of a benchmark file (python -m metacl_lite bench) as Markdown."""
    prov = b["provenance"]
    head = f"Measured by `{prov['command']}` on {prov['device']} (commit `{(prov['git_commit'] or '?')[:10]}`)."
    if "suite" in b:  # multi-head synthetic
        rows = ["| method | measured (s) | full run (min) |", "|---|---|---|"]
        rows += [f"| {r['method']} | {r['wall_s']:.1f} | {'~' if r['extrapolated'] else ''}"
                 f"{r['full_run_s_estimate'] / 60:.1f} |" for r in b["per_method"]]
        note = (f"Synthetic tensors of the real shapes, {b['n_tasks']} task(s) × {b['epochs']} epoch(s) on "
                f"{b['device']}" + ("; REDUCED: full-run time = measured time × (full epochs × tasks) / (measured "
                                    "epochs × tasks), a rough linear extrapolation that also scales the evaluation"
                                    if b["reduced"] else "")
                + f". Whole grid (3 seeds, without references and oracle): "
                  f"{'~' if b['reduced'] else ''}{b['grid_s_estimate'] / 3600:.1f} h.")
        return "\n".join([head, note, "", *rows])
    rows = ["| method | wall (s) | peak RSS (MB) | × evaluation bound |", "|---|---|---|---|"]
    rows += [f"| {r['method']} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} | "
             f"{r['wall_s'] / b['lower_bound_s_per_run']:.1f} |" for r in b["per_method"]]
    out = [head, f"float32 GEMM {b['gemm_gflops']:.0f} GFLOP/s; the evaluation of one run ({b['eval_tflop_per_run']:.2f} "
                 f"TFLOP, 210 passes over 10 000 test images) takes at least {b['lower_bound_s_per_run']:.1f} s.", ""]
    out += rows
    g = b.get("grid")
    if g:
        out += ["", f"Whole Table 1 grid ({g['runs']} runs + {g['references']} references + {g['oracle']} oracles): "
                    f"{g['wall_s'] / 60:.1f} min (target < {g['target_s'] / 60:.0f} min; evaluation bound "
                    f"{g['lower_bound_s'] / 60:.1f} min; peak RSS {g['peak_mb_max_child']:.0f} MB)."]
    return "\n".join(out)


def comparison_summary(res: dict) -> str:
    """A few generated sentences comparing our numbers with the paper's (no hand-typed numbers anywhere)."""
    from scipy.stats import spearmanr

    rows = [r for r in comparison_rows(res) if r["ACC diff"] is not None]
    if not rows:
        return "No published numbers to compare with."
    out = []
    for k in ("ACC", "BT", "FA"):
        d = [(r[f"{k} diff"], r["label"]) for r in rows if r[f"{k} diff"] is not None]
        if not d:
            continue
        mean_abs = float(np.mean([abs(x) for x, _ in d]))
        lo, hi = min(d), max(d)
        out.append(f"- {k}: mean |ours − paper| = {mean_abs:.1f} points over {len(d)} rows; largest gaps "
                   f"{lo[0]:+.1f} ({lo[1]}) and {hi[0]:+.1f} ({hi[1]}).")
    summ, paper = res["summary"], paper_table(res["config"]["benchmark"], res["config"]["K"]) or {}
    common = [m for m in METHODS if m in summ and m in paper and "ACC" in summ[m]]
    if len(common) >= 3:
        rho = spearmanr([summ[m]["ACC"]["mean"] for m in common], [paper[m]["ACC"][0] for m in common]).statistic
        out.append(f"- Rank agreement of the methods' ACC with the paper's (Spearman ρ over {len(common)} methods): "
                   f"{rho:.2f}.")
    pairs = []
    for imp in ("mas", "pi", "ewc"):
        trio = [imp, f"{imp}-metacl-beta", f"{imp}-metacl-lambda"]
        if all(m in summ for m in trio):
            a = [summ[m]["ACC"]["mean"] for m in trio]
            pairs.append(f"{imp.upper()} {a[0]:.1f} → β {a[1]:.1f} → λ {a[2]:.1f}")
    if pairs:
        out.append("- Our ACC, plain → MetaCL-β → MetaCL-λ: " + "; ".join(pairs) + ".")
    return "\n".join(out)


def update_readme(path: Optional[Path] = None, check: bool = False) -> bool:
    """Replace each `<!-- BEGIN table results/X.json -->...<!-- END table -->` block of the README with the table
    made from that results file (and each `summary` block with `comparison_summary`). Returns True when something was (or, with check, would be) changed."""
    path = Path(path) if path else REPO_ROOT / "README.md"
    text = path.read_text()

    def repl(mo):
        res = load_json(REPO_ROOT / mo.group(3))
        body = {"table": lambda: format_table(res, "md"), "summary": lambda: comparison_summary(res),
                "bench": lambda: bench_summary(res)}[mo.group(2)]()
        return mo.group(1) + body + "\n" + mo.group(5)

    new = README_MARK.sub(repl, text)
    if new != text and not check:
        path.write_text(new)
    return new != text
