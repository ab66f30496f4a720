"""The paper's open choices about Omega, decided on validation data (never the test set).

The paper gives Eq. 2's penalty sum_k Omega_k (theta_k - bar_theta_k)^2 but not how Omega is carried across tasks,
whether each task's Omega is normalised, or PI's damping xi. The methods' own code differs (`importance.
accumulate_importance` cites each), so each combination is a *variant*, and each regulariser (EWC, MAS, PI) gets the
variant whose tuned validation ACC is best:

1. At the benchmark's tuning K (Permuted MNIST: K = 20) every variant is tuned with the full protocol (`tuning.tune`:
   all nine regularised methods, the full half-decade grids, two tuning seeds, the 20-task stream), starting from the
   defaults (not from choices decided before).
2. At a standard K (200) the plain methods (EWC, MAS, PI) are tuned per variant on five half-decades around the value
   chosen at K = 20 for that variant (c/10 ... 10c), extended like any tuning grid while the best lies on an edge:
   a tenth of the full grid's cost (each run at K = 200 costs ten at K = 20).
3. Score of a regulariser, variant and K: the best mean validation ACC over its grid, averaged over the regulariser's
   methods tuned at that K (three at K = 20, the plain one at K = 200). A variant replaces the base one only if it
   scores higher at *every* decision K; otherwise the base variant stays ("base kept": the evidence does not agree).

`python -m metacl_lite choices` runs what is missing (resumable: each variant is a tuning file under
results/open-choices/), writes results/open-choices-<benchmark>.json with every score, the decisions and provenance,
and, once every regulariser is decided, records the decisions in hparams.json ("options"), from where `run` and
`tune` take them for every K. The values of beta/gamma tuned before a decision changed must then be tuned again with
it (`tune --K <K> --force`): the canonical tuning protocol includes the decided options.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from . import hparams as H
from .atomic import read_json, write_json
from .data import REPO_ROOT
from .errors import UsageError
from .provenance import invocation, relative_to_repo
from .specs import get_spec

REGULARISERS = ("ewc", "mas", "pi")
FAMILY = {r: (r, f"{r}-metacl-beta", f"{r}-metacl-lambda") for r in REGULARISERS}


@dataclass(frozen=True)
class Variant:
    name: str
    options: dict
    regularisers: tuple
    what: str


VARIANTS = {v.name: v for v in (
    Variant("base", {}, REGULARISERS,
            "Omega summed over tasks, each task's Omega as estimated, PI's xi = 0.1 (SI's code on Permuted MNIST)"),
    Variant("latest", {"omega_accumulate": "latest"}, REGULARISERS,
            "the latest task's Omega only (A-GEM's code for EWC and MAS)"),
    Variant("max", {"omega_normalise": "max"}, REGULARISERS, "each task's Omega divided by its maximum, summed"),
    Variant("minmax", {"omega_normalise": "minmax"}, REGULARISERS, "each task's Omega min-max scaled to [0, 1], summed"),
    Variant("latest-minmax", {"omega_accumulate": "latest", "omega_normalise": "minmax"}, REGULARISERS,
            "the latest task's Omega, min-max scaled (A-GEM's code for EWC)"),
    Variant("xi1e-3", {"pi_xi": 0.001}, ("pi",), "PI's xi = 1e-3 (A-GEM's code)"),
)}

DECISION_KS = (20, 200)
FOLDER = REPO_ROOT / "results" / "open-choices"


def variant_file(benchmark: str, K: int, variant: str, method: Optional[str] = None) -> Path:
    """The tuning file of a variant at K (of one method's, at K other than the tuning K)."""
    return FOLDER / f"tuning-{benchmark}-K{K}-{variant}{'-' + method if method else ''}.json"


def around(c: float) -> list[float]:
    """Five half-decades centred on c: c/10, ~c/3, c, ~3c, 10c (on the 1-3-10 ladder)."""
    from .tuning import _step

    down = _step(c, up=False)
    up = _step(c, up=True)
    return [_step(down, up=False), down, c, up, _step(up, up=True)]


@dataclass(frozen=True)
class Run:
    """One tuning run of the decision: a variant, its methods, grid and output file."""

    variant: str
    K: int
    methods: tuple
    beta_grid: Optional[tuple]  # None: the protocol's full grid
    out: Path


def plan(benchmark: str, K: int) -> list[Run]:
    """The tuning runs that decide the open choices at K (see the module docstring); needs, at K other than the
    tuning K, the tuning-K files of every variant (their chosen values centre the grids)."""
    spec = get_spec(benchmark)
    runs = []
    for v in VARIANTS.values():
        family = tuple(m for r in v.regularisers for m in FAMILY[r])
        if K == spec.tuning_K:
            runs.append(Run(v.name, K, family, None, variant_file(benchmark, K, v.name)))
            continue
        src = variant_file(benchmark, spec.tuning_K, v.name)
        if not src.exists():
            raise UsageError(f"{relative_to_repo(src)} is missing: decide at K={spec.tuning_K} first "
                             f"(python -m metacl_lite choices --benchmark {benchmark} --K {spec.tuning_K})")
        chosen = read_json(src, "tuning file").get("chosen", {})
        for r in v.regularisers:
            if r not in chosen:
                raise UsageError(f"{relative_to_repo(src)} has no chosen beta for {r}; rerun its tuning")
            runs.append(Run(v.name, K, (r,), tuple(around(chosen[r]["beta"])), variant_file(benchmark, K, v.name, r)))
    return runs


def execute(benchmark: str, K: int, tune_plan=None, show_progress: Optional[bool] = None,
            log: Callable[[str], None] = print) -> None:
    """Run (or resume) every tuning run of `plan` at K, one after another, each over the workers of `tune_plan`."""
    from .tuning import tune

    for r in plan(benchmark, K):
        log(f"{r.variant} K={K} {','.join(r.methods)} -> {relative_to_repo(r.out)}")
        kw = {} if r.beta_grid is None else {"beta_grid": r.beta_grid}
        tune(benchmark, K, methods=list(r.methods), out=r.out, write_hparams=False, show_progress=show_progress,
             plan=tune_plan, options=VARIANTS[r.variant].options, decided=False, **kw)


def _best(doc: dict, method: str) -> Optional[float]:
    g = doc.get("grid", {}).get(method)
    if not g or not g.get("complete"):
        return None
    return float(max(g["mean_val_acc"]))


def scores(benchmark: str, Ks: Sequence[int] = DECISION_KS, folder_root: Optional[Path] = None) -> dict:
    """{regulariser: {K: {variant: {"score", "methods": {method: best mean val ACC}, "chosen": {method: value},
    "file"}}}} over the tuning files that exist and are complete."""
    spec = get_spec(benchmark)
    out: dict = {r: {} for r in REGULARISERS}
    for K in Ks:
        for v in VARIANTS.values():
            for r in v.regularisers:
                if K == spec.tuning_K:
                    files = {m: variant_file(benchmark, K, v.name) for m in FAMILY[r]}
                else:
                    files = {r: variant_file(benchmark, K, v.name, r)}
                best, chosen = {}, {}
                for m, f in files.items():
                    if not f.exists():
                        continue
                    doc = read_json(f, "tuning file")
                    b = _best(doc, m)
                    if b is not None:
                        best[m] = b
                        chosen[m] = doc["chosen"][m]
                if len(best) == len(files):
                    out[r].setdefault(K, {})[v.name] = {
                        "score": float(np.mean(list(best.values()))), "methods": best, "chosen": chosen,
                        "files": sorted({relative_to_repo(f) for f in files.values()})}
    return out


def decide(table: dict, Ks: Sequence[int] = DECISION_KS) -> dict:
    """Per regulariser: the variant with the best mean score over Ks, kept only if it beats the base variant at every
    K; "undecided" while a K lacks a variant's score."""
    out = {}
    for r, per_k in table.items():
        names = [v.name for v in VARIANTS.values() if r in v.regularisers]
        if any(n not in per_k.get(K, {}) for K in Ks for n in names):
            missing = sorted({f"{n}@K={K}" for K in Ks for n in names if n not in per_k.get(K, {})})
            out[r] = {"decision": "undecided", "missing": missing}
            continue
        mean = {n: float(np.mean([per_k[K][n]["score"] for K in Ks])) for n in names}
        best = max(names, key=lambda n: (mean[n], n == "base"))
        everywhere = all(per_k[K][best]["score"] > per_k[K]["base"]["score"] for K in Ks)
        winner = best if best == "base" or everywhere else "base"
        out[r] = {"decision": winner, "best_mean": best, "mean_score": mean,
                  "margin_over_base": {K: per_k[K][best]["score"] - per_k[K]["base"]["score"] for K in Ks},
                  "kept_base_because": None if winner == best else
                  f"{best} has the best mean but does not beat base at every K", "options": VARIANTS[winner].options}
    return out


def summary_file(benchmark: str) -> Path:
    return REPO_ROOT / "results" / f"open-choices-{benchmark}.json"


def write_summary(benchmark: str, command: str, Ks: Sequence[int] = DECISION_KS) -> dict:
    table = scores(benchmark, Ks)
    doc = {"kind": "open-choices", "benchmark": benchmark, "decision_Ks": list(Ks),
           "variants": {v.name: {"options": v.options, "regularisers": list(v.regularisers), "what": v.what}
                        for v in VARIANTS.values()},
           "rule": __doc__.split("3. ", 1)[1].split("\n\n", 1)[0].replace("\n  ", " ").strip(),
           "scores": {r: {str(K): v for K, v in per_k.items()} for r, per_k in table.items()},
           "decisions": decide(table, Ks), "provenance": {"command": command, **invocation()}}
    write_json(summary_file(benchmark), doc)
    if all(d["decision"] != "undecided" for d in doc["decisions"].values()):
        H.store_options(benchmark, {r: d["options"] for r, d in doc["decisions"].items()},
                        relative_to_repo(summary_file(benchmark)))
        doc["hparams_written"] = True
    return doc
