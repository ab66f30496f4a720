"""The paper's open choices about Omega, decided on validation data (never the test set).

The paper gives Eq. 2's penalty sum_k Omega_k (theta_k - bar_theta_k)^2 but not how Omega is carried across tasks,
whether each task's Omega is normalised, or PI's damping xi: the options the vocabulary declares open
(`vocab.OMEGA_OPTIONS`). The methods' own code differs (`importance.accumulate_importance` cites each), so each
combination is an *alternative* (`vocab.ALTERNATIVES`, here `CANDIDATES`; a "variant" in the decision files, their
rule and their table), and each regulariser (EWC, MAS, PI) gets the alternative whose tuned validation ACC is best:

1. At the benchmark's tuning K (Permuted MNIST: K = 20) every alternative is tuned with the full protocol
   (`tuning.tune`: all nine regularised methods, the full half-decade grids, two tuning seeds, the 20-task stream),
   starting from the defaults (not from choices decided before). Score of a regulariser and alternative: the best mean
   validation ACC over its grid, averaged over the regulariser's three methods. The best-scoring alternative is the
   regulariser's candidate (ties: the base alternative).
2. At a standard K (200) the base alternative and the candidate are tuned for the plain method (EWC, MAS or PI) on five
   half-decades around the value chosen at K = 20 for that alternative (c/10 ... 10c), extended like any tuning grid
   while the best lies on an edge: a fraction of the full grid's cost (each run at K = 200 costs ten at K = 20).
3. The candidate replaces the base variant only if it scores higher on *every tuning seed* at *every* decision K
   (per seed: each method at the value its grid chose, averaged over the regulariser's methods); otherwise the base
   variant stays ("base kept": the difference is within the seed-to-seed noise or does not hold at both K). With
   two tuning seeds and two K this is four paired comparisons that must all agree.

Min-max normalisation is not a separate alternative: on MNIST some pixels are blank in every image, so the weights
they feed have zero importance, min(Omega_task) = 0, and min-max scaling equals division by the maximum (bit for bit).
The A-GEM alternative (latest task, min-max) is therefore the same as "latest-max".

`python -m metacl_lite choices` runs what is missing (resumable: each alternative is a tuning file under
results/open-choices/), writes results/open-choices-<benchmark>.json with every score, the decisions and provenance,
and, once every regulariser is decided, records the decisions in hparams.json ("options"), from where `run` and
`tune` take them for every K, and makes the canonical tuning file of the tuning K from the winning alternatives' units
(`tune(reuse=...)`: the same training configurations, so the same numbers a fresh tuning would compute).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from . import hparams as H
from .atomic import read_json, write_json
from ..paths import REPO_ROOT
from ..errors import UsageError
from .provenance import invocation, relative_to_repo
from ..data.specs import get_spec
from ..vocab import ALTERNATIVES, PAPER_REGULARISERS, family

#: The regularisers in the order of the decision files: the paper's (an extension keeps the default options).
ORDER = tuple(sorted(PAPER_REGULARISERS))
FAMILY = {r: family(r) for r in ORDER}

#: The alternatives tried, by name (`vocab.Alternative`: its options, the regularisers that read them, what it is).
CANDIDATES = {a.name: a for a in ALTERNATIVES}

DECISION_KS = (20, 200)


def choices_command(benchmark: str, Ks) -> str:
    return (f"python -m metacl_lite choices --benchmark {benchmark}"
            + ("" if tuple(Ks) == DECISION_KS else f" --K {','.join(map(str, Ks))}"))
FOLDER = REPO_ROOT / "results" / "open-choices"


def alternative_file(benchmark: str, K: int, alternative: str, method: Optional[str] = None) -> Path:
    """The tuning file of an alternative at K (of one method's, at K other than the tuning K)."""
    return FOLDER / f"tuning-{benchmark}-K{K}-{alternative}{'-' + method if method else ''}.json"


def around(c: float) -> list[float]:
    """Five half-decades centred on c: c/10, ~c/3, c, ~3c, 10c (on the 1-3-10 ladder)."""
    from .lattice import _step

    down = _step(c, up=False)
    up = _step(c, up=True)
    return [_step(down, up=False), down, c, up, _step(up, up=True)]


@dataclass(frozen=True)
class Run:
    """One tuning run of the decision: an alternative, its methods, grid and output file."""

    alternative: str
    K: int
    methods: tuple
    beta_grid: Optional[tuple]  # None: the protocol's full grid
    out: Path


def plan(benchmark: str, K: int) -> list[Run]:
    """The tuning runs that decide the open choices at K (see the module docstring); at K other than the tuning K it
    needs the tuning-K files of every alternative (they name the candidates and centre the grids)."""
    spec = get_spec(benchmark)
    if K == spec.tuning_K:
        return [Run(v.name, K, tuple(m for r in v.regularisers for m in FAMILY[r]), None,
                    alternative_file(benchmark, K, v.name)) for v in CANDIDATES.values()]
    first = scores(benchmark, (spec.tuning_K,))
    runs = []
    for r in ORDER:
        names = [v.name for v in CANDIDATES.values() if r in v.regularisers]
        have = first[r].get(spec.tuning_K, {})
        if any(n not in have for n in names):
            raise UsageError(f"the K={spec.tuning_K} tuning of {', '.join(n for n in names if n not in have)} "
                             f"({r}) is missing or incomplete: decide at K={spec.tuning_K} first "
                             f"(python -m metacl_lite choices --benchmark {benchmark} --K {spec.tuning_K})")
        for name in dict.fromkeys(("base", candidate(have))):
            c = have[name]["chosen"][r]["beta"]
            runs.append(Run(name, K, (r,), tuple(around(c)), alternative_file(benchmark, K, name, r)))
    return runs


def candidate(per_alternative: dict) -> str:
    """The best-scoring alternative (ties: base)."""
    return max(per_alternative, key=lambda n: (per_alternative[n]["score"], n == "base"))


def execute(benchmark: str, K: int, tune_plan=None, show_progress: Optional[bool] = None,
            log: Callable[[str], None] = print, device: Optional[str] = None) -> None:
    """Run (or resume) every tuning run of `plan` at K, one after another, each over the workers of `tune_plan`, on
    `device` (`tune`'s). Every run's request (`tuning.tune_request`) is built, and so checked, before the first
    trains."""
    from .tuning import tune_grid, tune_request

    runs = plan(benchmark, K)
    requests = [tune_request(benchmark, K, methods=list(r.methods), out=r.out, write_hparams=False,
                             show_progress=show_progress, plan=tune_plan, options=CANDIDATES[r.alternative].options,
                             decided=False, device=device, **({} if r.beta_grid is None else {"beta_grid": r.beta_grid}))
                for r in runs]
    for r, req in zip(runs, requests):
        log(f"{r.alternative} K={K} {','.join(r.methods)} -> {relative_to_repo(r.out)}")
        tune_grid(req)


def _best(doc: dict, method: str) -> Optional[tuple[float, list[float]]]:
    """The best mean validation ACC of the method's grid, and the per-seed ACC at that value (None if incomplete)."""
    g = doc.get("grid", {}).get(method)
    if not g or not g.get("complete"):
        return None
    i = int(np.argmax(g["mean_val_acc"]))
    return float(g["mean_val_acc"][i]), [float(a) for a in g["val_acc"][i]]


def scores(benchmark: str, Ks: Sequence[int] = DECISION_KS, folder_root: Optional[Path] = None) -> dict:
    """{regulariser: {K: {alternative: {"score", "methods": {method: best mean val ACC}, "chosen": {method: value},
    "file"}}}} over the tuning files that exist and are complete."""
    from .files import grid_of, load_tuning
    from .lattice import choose

    spec = get_spec(benchmark)
    out: dict = {r: {} for r in ORDER}
    for K in Ks:
        for v in CANDIDATES.values():
            for r in v.regularisers:
                if K == spec.tuning_K:
                    files = {m: alternative_file(benchmark, K, v.name) for m in FAMILY[r]}
                else:
                    files = {r: alternative_file(benchmark, K, v.name, r)}
                best, per_seed, chosen = {}, {}, {}
                for m, f in files.items():
                    if not f.exists():
                        continue
                    # the grid again from the file's units: an edited grid or `chosen` never reaches a decision
                    grid = grid_of(load_tuning(f))
                    b = _best({"grid": grid}, m)
                    if b is not None:
                        best[m], per_seed[m] = b
                        chosen[m] = {grid[m]["param"]: choose(grid[m])["value"]}
                if len(best) == len(files):
                    out[r].setdefault(K, {})[v.name] = {
                        "score": float(np.mean(list(best.values()))),
                        "per_seed": [float(x) for x in np.mean(list(per_seed.values()), axis=0)],
                        "methods": best, "chosen": chosen,
                        "files": sorted({relative_to_repo(f) for f in files.values()})}
    return out


#: Why a decision file keeps the base alternative (its `kept_base_because` field).
KEPT_BASE = "{cand} is best at K={K} but not better than base on every tuning seed at every K"


def decide(table: dict, Ks: Sequence[int] = DECISION_KS) -> dict:
    """Per regulariser: the candidate (best at the first K, the tuning K) if it beats the base alternative at every
    other K too, else base; "undecided" while a score is missing."""
    out = {}
    first, rest = Ks[0], list(Ks[1:])
    for r, per_k in table.items():
        names = [v.name for v in CANDIDATES.values() if r in v.regularisers]
        missing = [f"{n}@K={first}" for n in names if n not in per_k.get(first, {})]
        if missing:
            out[r] = {"decision": "undecided", "missing": missing}
            continue
        cand = candidate({n: per_k[first][n] for n in names})
        need = ["base"] + ([cand] if cand != "base" else [])
        missing = [f"{n}@K={K}" for K in rest for n in need if n not in per_k.get(K, {})]
        if missing:
            out[r] = {"decision": "undecided", "candidate": cand, "missing": missing}
            continue
        margins = {K: per_k[K][cand]["score"] - per_k[K]["base"]["score"] for K in Ks}
        seeds = {K: [c - b for c, b in zip(per_k[K][cand]["per_seed"], per_k[K]["base"]["per_seed"])] for K in Ks}
        winner = cand if cand != "base" and all(d > 0 for K in Ks for d in seeds[K]) else "base"
        out[r] = {"decision": winner, "candidate": cand, "margin_over_base": margins, "per_seed_margin": seeds,
                  "kept_base_because": None if winner == cand else
                  KEPT_BASE.format(cand=cand, K=first),
                  "options": CANDIDATES[winner].options}
    return out


def summary_file(benchmark: str) -> Path:
    return REPO_ROOT / "results" / f"open-choices-{benchmark}.json"


def write_summary(benchmark: str, command: str, Ks: Sequence[int] = DECISION_KS) -> dict:
    table = scores(benchmark, Ks)
    doc = {"kind": "open-choices", "benchmark": benchmark, "decision_Ks": list(Ks),
           "variants": {v.name: {"options": v.options, "regularisers": list(v.regularisers), "what": v.what}
                        for v in CANDIDATES.values()},
           "rule": " ".join(__doc__.split("3. ", 1)[1].split("\n\n", 1)[0].split()),
           "scores": {r: {str(K): v for K, v in per_k.items()} for r, per_k in table.items()},
           "decisions": decide(table, Ks), "provenance": {"command": command, **invocation()}}
    files = {f for per_k in table.values() for per_v in per_k.values() for v in per_v.values() for f in v["files"]}
    doc["provenance"]["wall_s_total"] = sum(  # the training time of the tuning files it decides from
        float(read_json(REPO_ROOT / f, "tuning file").get("provenance", {}).get("wall_s_total") or 0.0) for f in files)
    old = read_json(summary_file(benchmark), "open-choices file") if summary_file(benchmark).exists() else None
    as_read = json.loads(json.dumps(doc))  # as the file would hold it (its keys strings)
    same = isinstance(old, dict) and all(old.get(k) == v for k, v in as_read.items() if k != "provenance")
    if same and (old.get("provenance") or {}).get("wall_s_total") == doc["provenance"]["wall_s_total"]:
        return old  # nothing new was decided or trained: the file and its provenance (commit, start) stay as they are
    write_json(summary_file(benchmark), doc)
    return doc


def apply(benchmark: str, doc: dict, tune_plan=None, show_progress: Optional[bool] = None,
          device: Optional[str] = None) -> Optional[dict]:
    """Once every regulariser is decided: record the decisions in hparams.json and make the canonical tuning file of
    the tuning K (with the decided options) from the winning alternatives' units (nothing is trained again). Returns the
    tuning document, or None while something is undecided."""
    from .tuning import TUNABLE, tune_grid, tune_request

    decisions = doc["decisions"]
    if any(d["decision"] == "undecided" for d in decisions.values()):
        return None
    options = {r: d["options"] for r, d in decisions.items()}
    K = get_spec(benchmark).tuning_K
    from . import store as S
    from .tuning import default_protocol, default_tuning_out

    canonical = default_tuning_out(default_protocol(benchmark, K))
    if H.load().get(benchmark, {}).get("options") == options and canonical.exists():
        doc = S.load(canonical, "tuning")
        if doc.get("protocol", {}).get("method_options") == default_protocol(benchmark, K)["method_options"]:
            return doc  # already applied: nothing to rewrite
    H.store_options(benchmark, options, relative_to_repo(summary_file(benchmark)))
    reuse = {m: alternative_file(benchmark, K, decisions[H.regulariser(m)]["decision"]) for m in TUNABLE}
    return tune_grid(tune_request(benchmark, K, reuse=reuse, plan=tune_plan, show_progress=show_progress, force=True,
                                  device=device))


def choices_table(doc: dict):
    """The decision file (results/open-choices-<b>.json) as a DataFrame, one row per regulariser and variant (index:
    regulariser, variant): `what` the variant is, its score at each decision K (`K=<K>`: best mean validation ACC,
    averaged over the regulariser's methods tuned at that K; NaN where not run), whether it is the regulariser's
    `candidate` and its `decided` variant. The per-seed margins behind each decision are `doc["decisions"]`."""
    import pandas as pd

    rows = []
    for r, per_k in doc["scores"].items():
        d = doc["decisions"][r]
        for name, v in doc["variants"].items():
            if r in v["regularisers"]:
                rows.append({"regulariser": r, "variant": name, "what": v["what"],
                             **{f"K={K}": per_k.get(str(K), {}).get(name, {}).get("score", float("nan"))
                                for K in doc["decision_Ks"]},
                             "candidate": d.get("candidate") == name, "decided": d.get("decision") == name})
    return pd.DataFrame(rows).set_index(["regulariser", "variant"])
