"""The paper's claims as data, and their tests: `CLAIMS` is the registry (each claim's id, short title, quote, where
the paper states it, section and LaTeX line, and the tests that weigh it); `verdict_rows` runs every test on the
evidence (`findings.evidence`) and returns one record per test and K: the paired t-test's numbers (`findings.stats`),
the raw verdict, whether the claim counts the test (and why not, as a record) and, within the claim, Holm's
correction. `claim_verdict` and `deciding_test` give a claim's verdict and the one test behind it, `claim_parts` its
verdict per part (metric, control), `headline` one record per claim with what qualifies its verdict,
`largest_angle` claim 6's angles against the projection's bound, `seed_power` what the number of seeds can show,
`differences_frame` the per-seed differences for the plots (`plots.claim_differences`). The words that say what
these records mean are in the book (chapter 7, the intro, chapter 8).

Within one seed every method sees the same task permutations, initial weights and batch order (`run_stream`), so
methods are compared by paired per-seed differences a − b. A claim counts a test only where the paper states it
(`MAIN`: the K of its main-text table, Table 1; `PAPER`: every K of its tables, Table 1 and Appendix D's Tables 6-7)
and the same runs only once (`repeated_runs`). Claims 5 and 6 (Figs. 4 and 5) read the training logs that
`TrainConfig.eval_every_epoch` and `TrainConfig.record_angles` add to `run_stream`'s output (`evidence.dynamics_logs`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import FileFormatError
from ..keys import runs_of
from ..training import METHODS
from ..vocab import PAPER_REGULARISERS, REGULARISER_LABELS, VARIANTS, method_name
from .evidence import ANGLE_PAIR, CONTROL_COMMAND, CONTROLS, DYNAMICS_COMMAND, SPEED_PAIRS, Evidence, control_file
from .paper import PAPER_SOURCES, paper_table
from .stats import (ALPHA, CONFIRMED, INCONCLUSIVE, LOW_K, NOT_COUNTED, NOT_RUN, REFUTED, STANDARD_K, angle_mean,
                    angle_spread, angles_degrees, detectable_effect, epoch_accuracy, holm_verdicts, log_differences,
                    low_vs_standard, overall, paired_differences, paired_test, smallest_sign_p, verdict)

ACROSS_K, LIVE = "across K", "training logs"  # the column of claim 4's tests and of claims 5-6's (`column`)

#: Where a test is counted: MAIN, at the K of the paper's main-text table for the benchmark (Table 1: Permuted MNIST,
#: K = 20); PAPER, at every K of its tables (main text and Appendix D). Elsewhere it is shown, not counted.
MAIN, PAPER = "main", "paper"


def stated_ks(benchmark: str, scope: str) -> tuple:
    """The K at which the paper states a test of `scope` (MAIN or PAPER), read from `paper.PAPER_SOURCES`."""
    ks = sorted(K for (b, K), src in PAPER_SOURCES.items() if b == benchmark and (scope == PAPER or "main text" in src))
    return tuple(ks)


def _beyond(benchmark: str, scope: str) -> dict:
    """Why a test is not counted: beyond the K where the paper states it ({"kind": "beyond", "scope", "ks"})."""
    return {"kind": "beyond", "scope": scope, "ks": stated_ks(benchmark, scope)}


#: What must agree, besides the method's own settings, for two results files to hold the same runs.
RUN_KEYS = ("benchmark", "K", "n_tasks", "seeds", "train", "model", "data_source")


def repeated_runs(ctl: dict, main: dict, method: str) -> dict:
    """Why the runs of `method` in the control file `ctl` are the main file's own runs, bit for bit:
    {"configuration": its settings} when its settings, its options and the run keys `RUN_KEYS` are equal (a γ = β
    control where the tuned γ already is β), and/or {"matrices": n} when its accuracy matrices are equal on all n
    seeds; {} when neither holds."""
    cc, mc = ctl["config"], main["config"]
    why = {}
    if (method in mc.get("method_hparams", {}) and cc["method_hparams"].get(method) == mc["method_hparams"][method]
            and (cc.get("method_options") or {}).get(method) == (mc.get("method_options") or {}).get(method)
            and all(cc.get(k) == mc.get(k) for k in RUN_KEYS)):
        why["configuration"] = dict(cc["method_hparams"][method])
    seeds = cc["seeds"]
    runs = [(ctl["runs"].get(f"{method}/{s}"), main["runs"].get(f"{method}/{s}")) for s in seeds]
    if seeds and all(a is not None and b is not None and a["acc_matrix"] == b["acc_matrix"] for a, b in runs):
        why["matrices"] = len(seeds)
    return why


# ----------------------------------------------------------------------------------------------------------------
# Tests: each returns one row per test and K
# ----------------------------------------------------------------------------------------------------------------
def _label(m: str) -> str:
    return METHODS[m].label if m in METHODS else m


def _row(test: str, K, diffs: Optional[Mapping[int, float]], a: str, b: Optional[str], metric: str,
         threshold: float = 0.0, unit: str = "points", paper: Optional[float] = None,
         missing: Sequence[dict] = (), live: bool = False, excluded: Optional[dict] = None,
         part: Optional[str] = None) -> dict:
    """One test's row: its name (`test`), the methods a and b and the metric, `paired_test` numbers, the raw verdict,
    what is missing when it has not run (records: {"kind": "file" | "runs" | "control" | "logs", ...}), whether
    the claim counts it (`excluded`: None, or why not as a record) and the part of its claim it tests (`part`: the
    metric unless given; `claim_parts`). `Claim.evaluate` adds the Holm verdict."""
    t = paired_test(diffs or {}, threshold)
    return {"test": test, "K": K, "a": a, "b": b, "metric": metric, "part": part or metric, "live": live, **t,
            "verdict": verdict(t, threshold), "threshold": threshold, "unit": unit, "paper": paper,
            "missing": list(missing), "differences": dict(diffs or {}), "counted": not excluded, "excluded": excluded}


def _paper_diff(benchmark: str, K: int, a: str, b: str, metric: str) -> Optional[float]:
    """The paper's own difference of means a − b (its tables), for comparison; None where it reports none."""
    p = paper_table(benchmark, K) or {}
    pa, pb = (p.get(a) or {}).get(metric), (p.get(b) or {}).get(metric)
    return None if pa is None or pb is None else pa[0] - pb[0]


def _missing(ev: Evidence, K: int, methods: Iterable[str]) -> list[dict]:
    """What a test at K lacks: no results file (and the command that makes it), or the methods the file has no runs
    of; [] when nothing is missing."""
    if K not in ev.results:
        return [{"kind": "file", "K": K, "file": f"results/{ev.benchmark}-K{K}.json",
                 "command": f"python -m metacl_lite run --benchmark {ev.benchmark} --K {K}"}]
    absent = [m for m in methods if m not in ev.results[K]["config"]["methods"]]
    return [{"kind": "runs", "K": K, "file": f"results/{ev.benchmark}-K{K}.json", "methods": absent}] if absent else []


def method_tests(pairs: Sequence[tuple], threshold: float = 0.0, ks: Optional[Sequence[int]] = None,
                 scope: str = PAPER):
    """Tests on a results file: per K, the paired differences a − b of a metric; pairs are (a, b, metric) or
    (a, b, metric, scope), counted at the K of their scope (`stated_ks`: MAIN or PAPER, `scope` by default) and
    shown beyond it."""
    def evaluate(ev: Evidence) -> list[dict]:
        rows = []
        for K in (ev.ks if ks is None else ks):
            for a, b, metric, *where in pairs:
                sc = where[0] if where else scope
                missing = _missing(ev, K, (a, b))
                diffs = None if missing else paired_differences(ev.results[K], a, b, metric)
                rows.append(_row(f"{_label(a)} − {_label(b)}, {metric}", K, diffs, a, b, metric, threshold,
                                 paper=_paper_diff(ev.benchmark, K, a, b, metric), missing=missing,
                                 excluded=None if K in stated_ks(ev.benchmark, sc) else _beyond(ev.benchmark, sc)))
        return rows
    return evaluate


def across_K_tests(pairs: Sequence[tuple], low: Sequence[int] = LOW_K, standard: Sequence[int] = STANDARD_K):
    """Tests across K (claim 4): per seed, the improvement a − b averaged over the low-shot K minus its average over
    the standard K (`low_vs_standard`); the paper's own contrast beside it."""
    def evaluate(ev: Evidence) -> list[dict]:
        rows = []
        for a, b, metric in pairs:
            missing = [m for K in (*low, *standard) for m in _missing(ev, K, (a, b))]
            diffs = None if missing else low_vs_standard(
                {K: paired_differences(ev.results[K], a, b, metric) for K in (*low, *standard)}, low, standard)
            paper = [_paper_diff(ev.benchmark, K, a, b, metric) for K in (*low, *standard)]
            rows.append(_row(f"{_label(a)} − {_label(b)}, {metric}: K {', '.join(map(str, low))} minus K "
                             f"{', '.join(map(str, standard))}", ACROSS_K, diffs, a, b, metric,
                             paper=None if None in paper else float(np.mean(paper[:len(low)])
                                                                    - np.mean(paper[len(low):])),
                             missing=missing))
        return rows
    return evaluate


def control_tests(metric: str = "ACC"):
    """Claim 7: each MetaCL-λ control run (γ = β of its MetaCL-β counterpart; γ = 0) minus MetaCL-β, per K."""
    def evaluate(ev: Evidence) -> list[dict]:
        return [_control_row(ev, K, c, imp, metric)
                for K in ev.ks for c in CONTROLS for imp in PAPER_REGULARISERS]
    return evaluate


def _control_row(ev: Evidence, K: int, control: str, imp: str, metric: str) -> dict:
    lam, beta = method_name(imp, "lambda"), method_name(imp, "beta")
    part = f"γ = {'β' if control == 'gamma=beta' else '0'}"  # the control: claim 7's parts (`claim_parts`)
    test = f"{_label(lam)} ({part}) − {_label(beta)}, {metric}"
    ctl = ev.controls.get(control, {}).get(K)
    missing = _missing(ev, K, (beta,))
    excluded = None if K in stated_ks(ev.benchmark, PAPER) else _beyond(ev.benchmark, PAPER)
    cfile = f"results/{control_file(ev.benchmark, K, control)}"
    if not missing and ctl is None:
        main = ev.results[K]["config"]["methods"]
        missing = [{"kind": "control", "K": K, "file": cfile, "command": CONTROL_COMMAND.format(
            benchmark=ev.benchmark, K=K, gamma=control.split("=")[1], seeds=len(ev.results[K]["config"]["seeds"]),
            methods=",".join(method_name(i, "lambda") for i in PAPER_REGULARISERS
                             if method_name(i, "beta") in main))}]
    elif not missing and lam not in ctl["config"]["methods"]:
        missing = [{"kind": "runs", "K": K, "file": cfile, "methods": [lam]}]
    if missing:
        return _row(test, K, None, lam, beta, metric, missing=missing, excluded=excluded, part=part)
    _check_control(ctl, ev.results[K], imp, control, K)
    same = repeated_runs(ctl, ev.results[K], lam)
    if same:  # the same runs as the main file's: their difference is already a test of the main file
        excluded = {"kind": "repeats", "same": same, "file": f"results/{ev.benchmark}-K{K}.json",
                    "test": f"{_label(lam)} − {_label(beta)}, {metric}", "claim": "2b" if metric == "ACC" else None}
    return _row(test, K, paired_differences(ctl, lam, beta, metric, res_b=ev.results[K]), lam, beta, metric,
                excluded=excluded, part=part)


def _check_control(ctl: dict, main: dict, imp: str, control: str, K: int) -> None:
    """A control file must hold MetaCL-λ made with the control's γ (FileFormatError otherwise)."""
    lam = method_name(imp, "lambda")
    want = main["config"]["method_hparams"][method_name(imp, "beta")]["beta"] if control == "gamma=beta" else 0.0
    got = ctl["config"]["method_hparams"][lam].get("gamma")
    if got != want:
        raise FileFormatError(f"the {control} control file for K = {K} holds {lam} with gamma = {got}, not {want}")


#: What a claim on the training logs lacks when there are none.
NO_LOGS = {"kind": "logs", "command": DYNAMICS_COMMAND}


def speed_tests(pairs: Sequence[tuple] = SPEED_PAIRS):
    """Claim 5 (Fig. 4): per epoch e, per seed, the MetaCL method's accuracy on the current task after epoch e minus
    the plain method's, averaged over the tasks of its stream (`evidence.dynamics_logs`)."""
    def evaluate(ev: Evidence) -> list[dict]:
        log = ev.logs.get("speed")
        if log is None or not log["runs"]:
            return [_row(f"{_label(a)} − {_label(b)}, accuracy after each epoch", None, None, a, b,
                         "accuracy after each epoch", missing=[NO_LOGS], live=True, part=f"{_label(a)} − {_label(b)}")
                    for a, b in pairs]
        first = next(iter(log["runs"].values()))
        rows = []
        for a, b in pairs:
            for e in range(epoch_accuracy(first).shape[1]):
                diffs = log_differences(log["runs"], a, b, lambda r, e=e: float(epoch_accuracy(r)[:, e].mean()))
                rows.append(_row(f"{_label(a)} − {_label(b)}, accuracy after epoch {e + 1}", log["K"], diffs, a, b,
                                 f"accuracy after epoch {e + 1}", live=True, part=f"{_label(a)} − {_label(b)}"))
        return rows
    return evaluate


#: Claim 6's statistics (Fig. 5): (name, function, which angle).
ANGLE_STATS = (("spread of ⟨g1, gx⟩", angle_spread, "g1"), ("spread of ⟨g2, gx⟩", angle_spread, "g2"),
               ("mean ⟨g1, gx⟩", angle_mean, "g1"))


def angle_tests(pair: tuple = ANGLE_PAIR, task: Optional[int] = None):
    """Claim 6 (Fig. 5): on the last task of its stream (`evidence.dynamics_logs`; or the 0-based `task`), per seed,
    MetaCL-β's statistic minus MetaCL-λ's: the spread (standard deviation over the task's steps, `angle_spread`) of
    the angles <g1, g_x> and <g2, g_x>, and the mean <g1, g_x> (`angle_mean`). The analysis chapter calls it for
    task 2 too."""
    where = "the last task" if task is None else f"task {task + 1}"

    def evaluate(ev: Evidence) -> list[dict]:
        log = ev.logs.get("angles")
        rows = []
        for name, fn, which in ANGLE_STATS:
            test = f"{_label(pair[0])} − {_label(pair[1])}, {name} on {where}"
            if log is None or not log["runs"]:
                rows.append(_row(test, None, None, *pair, name, unit="degrees", missing=[NO_LOGS], live=True))
                continue
            last = log["n_tasks"] - 1 if task is None else task
            diffs = log_differences(log["runs"], *pair, lambda r, fn=fn, which=which: fn(r, last, which))
            rows.append(_row(test, log["K"], diffs, *pair, name, unit="degrees", live=True))
        return rows
    return evaluate


# ----------------------------------------------------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """One claim of the paper: its id, a short title (`short`, for the summary and the README), a longer `title`,
    the paper's words (`quote`, Markdown; tests/test_claims.py checks it against the LaTeX), where the paper states
    it (`where`: the section and what Appendix D adds, `line`: the quote's line in the LaTeX) and its tests:
    `evaluate(evidence)` returns one row per test and K (`_row`) with Holm's correction within the claim
    (`with_holm`)."""

    id: str
    title: str
    short: str
    quote: str
    where: str
    line: int
    tests: Callable[[Evidence], list[dict]]

    def evaluate(self, ev: Union[Evidence, dict], alpha: float = ALPHA) -> list[dict]:
        ev = ev if isinstance(ev, Evidence) else Evidence(tuple(ev), ev)
        return with_holm([{"claim": self.id, **r} for r in self.tests(ev)], alpha)


def with_holm(rows: list[dict], alpha: float = ALPHA) -> list[dict]:
    """`rows` of one claim with "p_holm" and "holm" added: Holm's correction (`stats.holm_verdicts`) over the rows
    the claim counts, all K together; a row not counted gets NaN and `NOT_COUNTED`."""
    counted = [r for r in rows if r["counted"]]
    for r, (p, v) in zip(counted, holm_verdicts(counted, [r["threshold"] for r in counted], alpha)):
        r.update(p_holm=p, holm=v)
    for r in rows:
        if not r["counted"]:
            r.update(p_holm=float("nan"), holm=NOT_COUNTED)
    return rows


def claim_verdict(rows: Iterable[dict], holm: bool = True) -> str:
    """A claim's verdict from its rows: `stats.overall` of the Holm verdicts (holm=True) or of the raw verdicts of
    the tests it counts."""
    return overall(r["holm" if holm else "verdict"] for r in rows if r["counted"])


CLAIMS = [
    Claim("1", "MetaCL w/o reg beats fine-tune on FA and ACC", "MetaCL w/o reg beats fine-tune",
          "MetaCL w/o *reg* demonstrates better ACC and stronger forward adaption than straightforward fine tune, "
          "with a little cost of BT",
          "Experiments, Results (Tables 1-3); Appendix D adds: \"Compared with Fine tune, MetaCL w/o *reg* always "
          "achieves better FA in all circumstances.\"", 507,
          method_tests([("metacl", "finetune", "FA", PAPER), ("metacl", "finetune", "ACC", MAIN)])),
    Claim("2a", "MetaCL-β beats the plain method on ACC, BT and FA", "MetaCL-β beats its regulariser",
          "after applying MetaCL algorithms on these regularization methods, all three metrics ACC, BT and FA are "
          "improved",
          "Experiments, Results (Tables 1-3); Appendix D says only: \"When compare MetaCL with the original "
          "approaches PI and MAS, MetaCL can generally reach higher ACC and FA with comparable BT.\"", 511,
          method_tests([(method_name(i, "beta"), i, m) for i in PAPER_REGULARISERS for m in ("ACC", "BT", "FA")],
                       scope=MAIN)),
    Claim("2b", "MetaCL-λ beats MetaCL-β on ACC (PI: also BT and FA)", "MetaCL-λ beats MetaCL-β",
          "compared with the fixed balance strategy MetaCL-$\\beta$, the dynamic balance MetaCL-$\\lambda$ achieves "
          "comparable or better trade-off between BT and FA, and thus further improves ACC",
          "Experiments, Results (Tables 1-3); Appendix D adds: \"PI-MetaCL-$\\lambda$ significantly surpasses "
          "PI-MetaCL-$\\beta$ on Permuted MNIST datasets in all three metrics.\"", 513,
          method_tests([(method_name(i, "lambda"), method_name(i, "beta"), "ACC", PAPER if i == "pi" else MAIN)
                        for i in PAPER_REGULARISERS]
                       + [("pi-metacl-lambda", "pi-metacl-beta", m, PAPER) for m in ("BT", "FA")])),
    Claim("3", "PI-MetaCL-λ beats PI-MetaCL-β by over 8 ACC points at K = 50",
          "PI-MetaCL-λ beats PI-MetaCL-β by 8 pts (K = 50)",
          "On Permuted MNIST with $K=50$, the PI-MetaCL-$\\lambda$ surpasses PI-MetaCL-$\\beta$ over 8\\% in terms "
          "of ACC",
          "Experiments, Regularization Strategy Analysis (Table 6 of Appendix D, which the text calls Table 3)", 541,
          method_tests([("pi-metacl-lambda", "pi-metacl-beta", "ACC")], threshold=8.0, ks=(50,))),
    Claim("4", "MetaCL's improvement is larger at low K than at standard K", "larger gain at low K",
          "Compared with large size of training data, our algorithms can provide more improvement on low-shot "
          "scenarios.",
          "Experiments, Performance with Different K (Fig. 3; Appendix D, Tables 6-7; the paper's example is "
          "CIFAR-100)", 520,
          across_K_tests([("metacl", "finetune", "ACC")]
                         + [(method_name(i, v), i, "ACC") for i in PAPER_REGULARISERS for v in VARIANTS])),
    Claim("5", "MetaCL learns faster: accuracy above the plain method's after every epoch",
          "MetaCL learns faster (Fig. 4)",
          "The curves of MetaCL methods are always above the original approaches (i.e. orange, blue and green "
          "curves), which indicates faster learning speed and higher accuracy.",
          "Experiments, Learning Speed Comparison (Fig. 4; CIFAR-100 in the paper)", 528,
          speed_tests()),
    Claim("6", "The dynamic balance gives a more stable compromise", "dynamic balance is more stable (Fig. 5)",
          "the fixed balance strategy struggles to learn current task 20 (i.e. the angle of $\\langle g_1, "
          "g_x\\rangle$ is big) and cannot provide a stable compromise",
          "Experiments, Regularization Strategy Analysis (Fig. 5: PI, Permuted MNIST, K = 50); the caption adds: "
          "\"The dynamic balance strategy can provide a more stable and better compromise.\"", 544,
          angle_tests()),
    Claim("7", "The projection's own effect (controls)", "the projection's own gain",
          "With the dynamic balance strategy, the MetaCL-$\\lambda$ generally outperforms the fixed balance method.",
          "Experiments, Regularization Strategy Analysis; the tuned constants differ (MetaCL-λ adds γ to λ, "
          "MetaCL-β uses its own β), so the gain is the projection's only when the constant is held fixed", 540,
          control_tests()),
]


# ----------------------------------------------------------------------------------------------------------------
# Records for the pages and the README
# ----------------------------------------------------------------------------------------------------------------
def verdict_rows(ev: Union[Evidence, dict], claims: Sequence[Claim] = tuple(CLAIMS)) -> list[dict]:
    """Every test of every claim, one row per test and K, with its raw and Holm verdicts (`Claim.evaluate`)."""
    return [r for c in claims for r in c.evaluate(ev)]


def column(row: dict) -> str:
    """The column of a row when grouped by K: "K = <K>", `ACROSS_K` (claim 4) or `LIVE` (claims 5-6)."""
    return LIVE if row["live"] else ACROSS_K if row["K"] == ACROSS_K else f"K = {row['K']}"


def deciding_test(rows: Sequence[dict]) -> Optional[dict]:
    """The counted test behind a claim's Holm verdict (`claim_verdict`): refuted, its refuted test with the smallest
    adjusted p-value; confirmed, its confirmed test with the largest (the weakest confirmation); inconclusive, its
    undecided test with the smallest (the nearest to a decision). None when no counted test ran."""
    v = claim_verdict(rows)
    pool = [r for r in rows if r["counted"] and r["holm"] == v]
    if v == NOT_RUN or not pool:
        return None
    key = lambda r: np.nan_to_num(r["p_holm"], nan=1.0)  # noqa: E731
    return max(pool, key=key) if v == CONFIRMED else min(pool, key=key)


#: The fields of a test that say what the number behind a verdict is (`headline`, `claim_parts`).
NUMBER_FIELDS = ("test", "metric", "part", "K", "a", "b", "mean", "p_holm", "threshold", "unit", "n_agree", "n",
                 "paper")


def _number(row: Optional[dict]) -> dict:
    """`NUMBER_FIELDS` of a test's row, "K" an int (None across K); every field None for no row."""
    row = row or {}
    return {**{k: row.get(k) for k in NUMBER_FIELDS}, "K": row["K"] if isinstance(row.get("K"), int) else None}


def claim_parts(rows: Sequence[dict]) -> list[dict]:
    """A claim's verdict per part, in the order of its rows: for each `part` of its counted tests that ran (the
    metric; claim 7: the control, "γ = β" or "γ = 0"; claim 5: the method pair), {"part", "verdict": the part's
    `claim_verdict`, "n": its tests, CONFIRMED / REFUTED / INCONCLUSIVE: how many have that Holm verdict,
    "deciding": `_number` of the part's `deciding_test`}."""
    by: dict[str, list] = {}
    for r in rows:
        if r["counted"] and r["verdict"] != NOT_RUN:
            by.setdefault(r["part"], []).append(r)
    return [{"part": p, "verdict": claim_verdict(rs), "n": len(rs),
             **{v: sum(r["holm"] == v for r in rs) for v in (CONFIRMED, REFUTED, INCONCLUSIVE)},
             "deciding": _number(deciding_test(rs))} for p, rs in by.items()]


def headline(rows: Sequence[dict], claims: Sequence[Claim] = tuple(CLAIMS)) -> list[dict]:
    """One record per claim, in the registry's order: {"claim": its id, "title": its short title, "verdict": its
    Holm verdict, "raw": its raw verdict}, the `NUMBER_FIELDS` of its `deciding_test` ("test", "metric", "part", "K"
    (an int, None across K), "a", "b" (methods), "mean" (the number behind the verdict), "p_holm", "threshold",
    "unit" ("points" or "degrees"), "n_agree", "n", "paper"; all None where no counted test ran), and what qualifies
    the verdict: "parts" (`claim_parts`), "split" (True when its parts' verdicts differ), "other_way" (its counted
    tests left undecided by Holm whose mean lies on the other side of the threshold) and "paper_against" (its counted
    tests where the paper's own difference does), each a list of `_number` records."""
    out = []
    for c in claims:
        mine = [r for r in rows if r["claim"] == c.id]
        parts = claim_parts(mine)
        counted = [r for r in mine if r["counted"]]
        out.append({"claim": c.id, "title": c.short, "verdict": claim_verdict(mine),
                    "raw": claim_verdict(mine, holm=False), **_number(deciding_test(mine)), "parts": parts,
                    "split": len({p["verdict"] for p in parts}) > 1,
                    "other_way": [_number(r) for r in counted if r["holm"] == INCONCLUSIVE
                                  and r["mean"] < r["threshold"]],
                    "paper_against": [_number(r) for r in counted if r["paper"] is not None
                                      and r["paper"] < r["threshold"]]})
    return out


#: The largest angle between the update g_x and g2 that MetaCL-λ's projection allows, in degrees: with γ ≥ 0,
#: g_x · g2 ≥ 0 (Eq. 3; `balance.dynamic_balance`).
PROJECTION_CAP = 90.0


def largest_angle(ev: Evidence, which: str = "g2", task: Optional[int] = None, pair: tuple = ANGLE_PAIR) -> dict:
    """Claim 6 against the projection's bound: per method of `pair`, the largest angle (degrees) between g_x and g2
    (or g1) over the seeds and outer steps of the last task of claim 6's stream (or the 0-based `task`); {} without
    training logs. MetaCL-λ's stays at most `PROJECTION_CAP` by construction."""
    log = ev.logs.get("angles")
    if log is None or not log["runs"]:
        return {}
    t = log["n_tasks"] - 1 if task is None else task
    return {m: max(float(np.max(angles_degrees(r, t, which))) for r in runs_of(log["runs"], m).values())
            for m in pair}


def seed_power(rows: Sequence[dict], more: int = 10, alpha: float = ALPHA, power: float = 0.8) -> Optional[dict]:
    """What the seeds of the results files can show, as numbers: n, the commonest number of seeds of the counted
    tests on results files; ns, n and `more`; m, the largest family of counted tests that ran (Holm's strictest
    level is alpha/m); sd, the median standard deviation of the counted per-seed differences in points at n seeds;
    and per k in ns: "t" the interval's quantile t_{1-alpha/2, k-1}, "sign_p" the smallest p-value a test without
    the normality assumption reaches (`stats.smallest_sign_p`), "effect" and "effect_holm" the mean difference in
    sd that the t-test decides with probability `power` at alpha and alpha/m (`stats.detectable_effect`). None when
    no counted test on results files has two seeds."""
    from scipy.stats import t as student

    files = [r for r in rows if r["counted"] and not r["live"] and r["n"] > 1]
    if not files:
        return None
    n = max(set(r["n"] for r in files), key=[r["n"] for r in files].count)
    ns = sorted({n, more})
    m = max(sum(1 for r in rows if r["claim"] == c and r["counted"] and r["n"] > 0) for c in {r["claim"] for r in rows})
    sd = float(np.median([r["sd"] for r in files if r["n"] == n and r["unit"] == "points"]))
    return {"n": n, "ns": ns, "m": m, "sd": sd, "alpha": alpha, "power": power,
            **{k: {"t": float(student.ppf(1 - alpha / 2, k - 1)), "sign_p": smallest_sign_p(k),
                   "effect": detectable_effect(k, alpha, power), "effect_holm": detectable_effect(k, alpha / m, power)}
               for k in ns}}


def differences_frame(rows: list[dict]):
    """The per-seed differences of `rows` in long form (claim, test, K column, seed, difference, threshold, unit,
    counted), for plotting (`plots.claim_differences`)."""
    import pandas as pd

    return pd.DataFrame([{"claim": r["claim"], "test": r["test"], "K": column(r), "seed": s, "difference": d,
                          "threshold": r["threshold"], "unit": r["unit"], "counted": r["counted"]}
                         for r in rows for s, d in r["differences"].items()])


def gain_by_K(results: Mapping[int, dict], metric: str = "ACC", benchmark: str = "pmnist") -> list[dict]:
    """MetaCL's gain over its plain regulariser at every K with a results file, the paper's K and those beyond it
    (claim 4 asks whether the gain is larger at low K): for each K, regulariser and variant (MetaCL-β, MetaCL-λ), the
    `paired_test` of the per-seed difference variant − plain, its `verdict`, and the paper's own difference where
    it publishes both numbers. Rows in order of K, regulariser, variant; pairs missing from a file are left out."""
    rows = []
    for K in sorted(results):
        for imp in PAPER_REGULARISERS:
            for v, name in VARIANTS.items():
                d = paired_differences(results[K], method_name(imp, v), imp, metric)
                if not d:
                    continue
                t = paired_test(d)
                rows.append({"K": K, "regulariser": REGULARISER_LABELS[imp], "variant": name, "mean": t["mean"],
                             "ci95": t["ci95"], "n": t["n"], "n_agree": t["n_agree"], "verdict": verdict(t),
                             "paper": _paper_diff(benchmark, K, method_name(imp, v), imp, metric)})
    return rows
