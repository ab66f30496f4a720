"""The λ story, checked: what the dynamic balance of Eqs. 3-5 does during real training, per regulariser and K.

The paper's argument for MetaCL-λ: λ is the smallest multiplier that makes the combined gradient g_x = g1 + λ g2
satisfy ⟨g_x, g2⟩ ≥ 0 (Eq. 3), so the update "does not increase" the penalty l_reg of Eq. 2 to first order; γ is a
"small constant" added to λ. Two things stand between that argument and the training loop, and this module
measures both from the per-step log that `TrainConfig.record_penalty` adds to `run_stream`'s output
(`training.PENALTY_COLUMNS`):

1. **How often λ is active and how large it is against γ.** If γ is not small next to λ (the tuned γ is chosen on
   the validation split), MetaCL-λ is mostly a fixed balance g1 + γ g2 with an occasional correction.
2. **Whether the step actually taken lowers the penalty.** The dual guarantees ⟨g_x, g2⟩ ≥ 0 for the gradient, but
   the update is Adam's preconditioned step Δθ = −η m̂/(√v̂ + ε), whose direction is not g_x: ⟨Δθ, g2⟩ ≤ 0 is not
   guaranteed, and l_reg can rise even when it is (second-order terms). We count the steps where
   l_reg(θ after) > l_reg(θ before), with the tuned γ and with γ = 0 (the pure projection), and, as a reference,
   for MetaCL-β (fixed β, no projection).

Steps where g2 = 0 (each task's first step, θ = θ̄) are left out of every rate: there any move raises l_reg from 0
and λ is 0 by definition. Regenerate the committed file with `COMMAND` (see `main`).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from ..keys import StoryKey
from ..paths import REPO_ROOT
from ..vocab import PAPER_REGULARISERS, REGULARISER_LABELS, method_name, parse_method
from ..training import PENALTY_COLUMNS

RESULTS_FILE = REPO_ROOT / "results" / "lambda-story-pmnist.json"
#: The settings, each (variant, γ choice): MetaCL-λ with its tuned γ, MetaCL-λ with γ = 0, and MetaCL-β with its
#: tuned β. (The file's config keeps the list under its first name, "variants".)
SETTINGS = (("lambda", "tuned"), ("lambda", "zero"), ("beta", "tuned"))
#: The committed measurement: K = 20 and 50 on the full 20-task stream; K = 200 on a 3-task stream (K = 500 left out)
#: to fit a CPU budget of about a quarter of an hour on one core; 2 seeds.
DEFAULT_STREAMS = {20: 20, 50: 20, 200: 3}
DEFAULT_SEEDS = (0, 1)
#: Float rounding of cos(g, g2): g = g1 + λ g2 is formed in float32 over ~270 000 parameters.
COS_TOL = 1e-4


# ----------------------------------------------------------------------------------------------------------------
# Statistics of one log
# ----------------------------------------------------------------------------------------------------------------
def penalty_table(log: Mapping) -> np.ndarray:
    """log["penalty"] as a float array (steps × `PENALTY_COLUMNS`); an empty (0 × columns) array when the run had
    no penalised step."""
    rows = log.get("penalty", [])
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(PENALTY_COLUMNS))


def _col(t: np.ndarray, name: str) -> np.ndarray:
    return t[:, PENALTY_COLUMNS.index(name)]


def active_steps(t: np.ndarray) -> np.ndarray:
    """The rows where g2 ≠ 0, i.e. θ ≠ θ̄ before the step (l_reg before > 0; Ω ≥ 0 makes l_reg = 0 exactly when
    g2 = 2Ω(θ − θ̄) = 0)."""
    return t[_col(t, "l_reg_before") > 0]


def story_stats(log: Mapping) -> dict:
    """The λ story of one run, over its steps with g2 ≠ 0 (`active_steps`):

    - n_steps: how many such steps;
    - frac_lambda_pos: the fraction where λ > 0 (the constraint ⟨g1, g2⟩ ≥ 0 was violated and λ corrected it);
    - lambda_median_pos: the median λ over those steps (NaN if none);
    - frac_lambda_gt_gamma: the fraction of all steps where λ > γ (λ dominates the constant);
    - lambda_over_gamma_median: the median of λ/γ over the steps with λ > 0 (NaN if γ = 0 or no λ > 0);
    - frac_increase: the fraction where the optimiser's step raised the penalty, l_reg after > before;
    - frac_step_against_g2: the fraction where ⟨Δθ, g2⟩ > 0 (the actual step goes uphill on l_reg to first order);
    - frac_g_against_g2: the fraction where ⟨g, g2⟩ < 0 (the gradient handed to Adam), beyond float rounding:
      cos(g, g2) < −`COS_TOL` (with γ = 0 an active projection makes ⟨g, g2⟩ = 0 exactly, in float32 ±rounding; the
      dual makes this fraction 0 for MetaCL-λ);
    - frac_increase_along_g: the same count for a step of the same length along −g (`PENALTY_COLUMNS`'s
      l_reg_after_along_g): what the penalty would have done had the optimiser followed the balanced gradient;
    - mean_rel_change: the mean of (after − before)/before, the relative change of l_reg per step.
    """
    t = active_steps(penalty_table(log))
    n = len(t)
    if n == 0:
        nan = float("nan")
        return {"n_steps": 0, **{k: nan for k in ("frac_lambda_pos", "lambda_median_pos", "frac_lambda_gt_gamma",
                                                  "lambda_over_gamma_median", "frac_increase",
                                                  "frac_increase_along_g", "frac_step_against_g2", "frac_g_against_g2", "mean_rel_change")}}
    lam, gamma = _col(t, "lambda"), _col(t, "gamma")
    before, after = _col(t, "l_reg_before"), _col(t, "l_reg_after")
    pos = lam > 0
    ratio = lam[pos & (gamma > 0)] / gamma[pos & (gamma > 0)]
    return {"n_steps": int(n),
            "frac_lambda_pos": float(pos.mean()),
            "lambda_median_pos": float(np.median(lam[pos])) if pos.any() else float("nan"),
            "frac_lambda_gt_gamma": float((lam > gamma).mean()),
            "lambda_over_gamma_median": float(np.median(ratio)) if len(ratio) else float("nan"),
            "frac_increase": float((after > before).mean()),
            "frac_increase_along_g": float((_col(t, "l_reg_after_along_g") > before).mean()),
            "frac_step_against_g2": float((_col(t, "step_dot_g2") > 0).mean()),
            "frac_g_against_g2": float((_col(t, "g_dot_g2")
                                        < -COS_TOL * _col(t, "g_norm") * _col(t, "g2_norm")).mean()),
            "mean_rel_change": float(np.mean((after - before) / before))}


STAT_KEYS = tuple(story_stats({"penalty": [[0, 1.0, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 1.0, 1.0]]}))


def per_task_stats(log: Mapping) -> dict[int, dict]:
    """`story_stats` of each task's steps separately: {task: stats} (tasks with no penalised step left out)."""
    t = penalty_table(log)
    tasks = sorted({int(x) for x in _col(t, "task")})
    return {k: story_stats({"penalty": t[_col(t, "task") == k].tolist()}) for k in tasks}


def summarise(per_seed: Mapping[str, Mapping[str, float]]) -> dict:
    """{stat: mean over seeds} of `story_stats` results keyed by seed (NaNs ignored; NaN when all are)."""
    out = {}
    for k in STAT_KEYS:
        v = np.array([s[k] for s in per_seed.values()], dtype=np.float64)
        out[k] = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
    return out


# ----------------------------------------------------------------------------------------------------------------
# The measurement
# ----------------------------------------------------------------------------------------------------------------
def run_key(imp: str, variant: str, setting: str, K: int) -> str:
    return str(StoryKey(method_name(imp, variant), "gamma" if variant == "lambda" else "beta", setting, K))


def measure(streams: Mapping[int, int], seeds: Sequence[int], regularisers: Sequence[str] = PAPER_REGULARISERS,
            settings: Sequence[tuple] = SETTINGS, benchmark: str = "pmnist", show_progress: bool = False,
            hp: Optional[dict] = None) -> dict:
    """Train each (regulariser, setting, K, seed) with `record_penalty` (the final row only is evaluated) and return
    {run_key: {"method", "K", "n_tasks", "gamma", "beta", "per_seed": {seed: story_stats}, "mean": summarise,
    "final_acc": {seed: final average accuracy}, "train": the run's TrainConfig, "wall_s"}}. γ (β for MetaCL-β)
    and the regulariser's decided options are those `hparams.method_config` reads from `hp` (default: hparams.json,
    read once here, so a file rewritten during the measurement does not mix two versions), or γ = 0 for the control."""
    from ..data.benchmarks import make_benchmark
    from .hparams import load, method_config
    from ..training import run_stream

    hp = load() if hp is None else hp
    out = {}
    for K, n_tasks in streams.items():
        bench = make_benchmark(benchmark, K, n_tasks=n_tasks)  # permutations of seed 0, as in results files
        for imp in regularisers:
            for variant, setting in settings:
                method = method_name(imp, variant)
                cfg = method_config(benchmark, method, K=K, hp=hp, record_penalty=True)
                if setting == "zero":
                    cfg.gamma = 0.0
                entry = {"method": method, "K": K, "n_tasks": n_tasks, "gamma": cfg.gamma, "beta": cfg.beta,
                         "train": cfg.to_dict(), "per_seed": {}, "per_task": {}, "final_acc": {}}
                t0 = time.perf_counter()
                for s in seeds:
                    r = run_stream(bench, method, cfg, seed=s, show_progress=show_progress, evaluate_rows="last")
                    entry["per_seed"][str(s)] = story_stats(r)
                    entry["per_task"][str(s)] = {str(k): v for k, v in per_task_stats(r).items()}
                    entry["final_acc"][str(s)] = float(np.nanmean(r["acc_matrix"][-1]))
                entry["wall_s"] = time.perf_counter() - t0
                entry["mean"] = summarise(entry["per_seed"])
                out[run_key(imp, variant, setting, K)] = entry
                if show_progress:
                    print(f"{run_key(imp, variant, setting, K)}: {entry['mean']} ({entry['wall_s']:.0f} s)",
                          file=sys.stderr)
    return out


def command(streams: Mapping[int, int], seeds: Sequence[int], out: Path) -> str:
    """The one command that regenerates a file made with these settings."""
    from .provenance import relative_to_repo

    return ("python -m metacl_lite.lab.lambda_story --streams " + ",".join(f"{K}:{n}" for K, n in streams.items())
            + " --seeds " + ",".join(map(str, seeds)) + f" --out {relative_to_repo(out)}")


def _streams(text: str) -> dict[int, int]:
    try:
        pairs = [p.split(":") for p in text.split(",")]
        return {int(k): int(n) for k, n in pairs}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--streams {text!r}: write K:n_tasks pairs, e.g. 20:20,50:20")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m metacl_lite.lab.lambda_story", description=__doc__.split("\n")[0])
    p.add_argument("--streams", type=_streams, default=DEFAULT_STREAMS,
                   help="K:n_tasks pairs (default: " + ",".join(f"{k}:{n}" for k, n in DEFAULT_STREAMS.items()) + ")")
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=list(DEFAULT_SEEDS))
    p.add_argument("--out", type=Path, default=RESULTS_FILE)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    a = p.parse_args(argv)
    import torch

    from .atomic import check_writable, write_json
    from .hparams import HPARAMS_FILE, load
    from .provenance import invocation, relative_to_repo

    check_writable(a.out)
    torch.set_num_threads(a.threads)
    prov, hp = invocation(), load()
    t0 = time.perf_counter()
    runs = measure(a.streams, a.seeds, show_progress=True, hp=hp)
    doc = {"kind": "lambda-story", "benchmark": "pmnist",
           "config": {"streams": {str(k): n for k, n in a.streams.items()}, "seeds": list(a.seeds),
                      "regularisers": list(PAPER_REGULARISERS), "variants": [list(v) for v in SETTINGS],
                      "hparams": {"file": relative_to_repo(HPARAMS_FILE), "content": hp}},
           "runs": runs,
           "provenance": {"command": command(a.streams, a.seeds, a.out), **prov,
                          "wall_s_total": time.perf_counter() - t0}}
    write_json(a.out, doc)
    print(f"wrote {relative_to_repo(a.out)}", file=sys.stderr)
    return 0


def load_story(path: Optional[Path] = None) -> dict:
    """The committed measurement (`main`'s file)."""
    from .atomic import read_json

    return read_json(Path(path or RESULTS_FILE), "λ-story results file")


def _measured_part(hp, methods: set, regularisers: set):
    """`hp` (an hparams.json) cut to what a measurement of `methods` reads: at every level the "methods" entries of
    those methods, the "options" of those regularisers and the "sources" of those methods (none: no key, as in a file
    written before there were any); everything else as it is."""
    if not isinstance(hp, Mapping):
        return hp
    keep = {"methods": methods, "options": regularisers, "sources": methods}
    out = {k: ({n: x for n, x in v.items() if n in keep[k]} if k in keep and isinstance(v, Mapping)
               else _measured_part(v, methods, regularisers)) for k, v in hp.items()}
    if not out.get("sources", True):
        del out["sources"]
    return out


def hparams_current(doc: Mapping, hp: Optional[dict] = None) -> bool:
    """Whether the measurement `doc` was made with the β, γ and options of `hp` (default: the current hparams.json)
    for the methods it measured, i.e. whether `COMMAND` would train the same runs again. A False means the file is
    stale: regenerate it. Entries of other methods (a regulariser added since) do not count."""
    from .hparams import load

    methods = {r["method"] for r in doc["runs"].values()}
    regs = set(doc["config"]["regularisers"])
    return _measured_part(doc["config"]["hparams"]["content"], methods, regs) == \
        _measured_part(load() if hp is None else hp, methods, regs)


#: The settings as tables and plots name them ((variant, γ choice) -> name), in `SETTINGS`' order.
SETTING_NAMES = {("lambda", "tuned"): "MetaCL-λ (tuned γ)", ("lambda", "zero"): "MetaCL-λ (γ = 0)",
                 ("beta", "tuned"): "MetaCL-β (tuned β)"}


def story_frame(doc: Mapping):
    """One row per run and seed: regulariser, setting (`SETTING_NAMES`), K, n_tasks, seed and every `story_stats`
    value; for tables and plots."""
    import pandas as pd

    names = SETTING_NAMES
    rows = []
    for key, r in doc["runs"].items():
        imp, variant = parse_method(r["method"])
        setting = StoryKey.parse(key).setting
        for s, st in r["per_seed"].items():
            rows.append({"regulariser": REGULARISER_LABELS[imp], "setting": names[(variant, setting)], "K": r["K"],
                         "n_tasks": r["n_tasks"], "gamma": r["gamma"], "beta": r["beta"], "seed": int(s),
                         "final ACC": r["final_acc"][s],
                         **{k: float("nan") if v is None else v for k, v in st.items()}})  # JSON null: NaN
    return pd.DataFrame(rows)


def _pct(v: float) -> str:
    """A fraction as a whole percentage ("–" for NaN): 0.934 -> "93"."""
    return "–" if v != v else f"{100 * v:.0f}"


def _sig(v: float) -> str:
    """Two significant digits ("–" for NaN): 0.1934 -> "0.19", 4.06 -> "4.1", 120.4 -> "120"."""
    return "–" if v != v else f"{float(f'{v:.2g}'):g}"


def lambda_table(frame):
    """MetaCL-λ with its tuned γ, one row per K and regulariser ("reg."), means over seeds as strings for the page:
    γ, the % of penalised steps with λ > 0 ("λ > 0") and with λ > γ ("λ > γ"), and the median λ/γ over the steps
    with λ > 0 ("λ/γ", two significant digits)."""
    lam = frame[frame.setting == SETTING_NAMES[("lambda", "tuned")]]
    m = lam.groupby(["K", "regulariser"], sort=False)[["gamma", "frac_lambda_pos", "frac_lambda_gt_gamma",
                                                        "lambda_over_gamma_median"]].mean()
    m = m.sort_index(level="K", sort_remaining=False)
    return m.assign(gamma=m.gamma.map(lambda v: f"{v:g}"), frac_lambda_pos=m.frac_lambda_pos.map(_pct),
                    frac_lambda_gt_gamma=m.frac_lambda_gt_gamma.map(_pct),
                    lambda_over_gamma_median=m.lambda_over_gamma_median.map(_sig)).rename(columns={
        "gamma": "γ", "frac_lambda_pos": "λ > 0", "frac_lambda_gt_gamma": "λ > γ",
        "lambda_over_gamma_median": "λ/γ"}).reset_index().rename(columns={"regulariser": "reg."})


def setting_table(frame, stat: str, percent: bool = True):
    """One statistic of `story_stats` (or "final ACC") side by side for the three settings: one row per K and
    regulariser ("reg."), one column per setting (MetaCL-λ with its "tuned γ" and with "γ = 0", "MetaCL-β"), means
    over seeds as strings (whole percentages of the penalised steps if `percent`, else one decimal)."""
    short = {SETTING_NAMES[v]: n for v, n in zip(SETTINGS, ("tuned γ", "γ = 0", "MetaCL-β"))}
    m = frame.groupby(["K", "regulariser", "setting"], sort=False)[stat].mean().unstack("setting")
    m = m.sort_index(level="K", sort_remaining=False)[[v for v in short if v in set(frame.setting)]]
    shown = m.apply(lambda c: c.map(_pct if percent else (lambda v: "–" if v != v else f"{v:.1f}")))
    return shown.rename(columns=short).rename_axis(columns=None).reset_index().rename(columns={"regulariser": "reg."})


if __name__ == "__main__":
    sys.exit(main())
