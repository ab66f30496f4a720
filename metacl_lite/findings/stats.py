"""The statistics of the claims (`findings.claims`): paired per-seed differences, the paired t-test with its 95%
interval (`scipy.stats.ttest_1samp`), the verdict rule, Holm's step-down correction within a claim (statsmodels'
`multipletests`), the effect the t-test detects with a given power, and the per-epoch accuracy (Fig. 4) and gradient
angles (Fig. 5) of the training logs.

The verdict rule. A test says that a paired per-seed difference a − b exceeds a threshold t (0 unless the paper
names a margin). Raw verdict: confirmed when the 95% t-interval of the mean difference lies above t, refuted when it
lies below, inconclusive when it contains t or there are fewer than two seeds, "not yet run" without data; the
interval excludes t exactly when the two-sided p-value is below `ALPHA`. Holm verdict: the tests a claim counts form
one family; Holm's step-down procedure decides a test when its adjusted p-value is below `ALPHA` (confirmed or
refuted by the sign of mean − t), the others are inconclusive. A claim is refuted when one of its counted tests is,
confirmed when all are, inconclusive otherwise (`overall`). Chapter 7 of the book says it in words."""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from ..keys import runs_of

from ..lab.summary import summarize

CONFIRMED, REFUTED, INCONCLUSIVE, NOT_RUN = "confirmed", "refuted", "inconclusive", "not yet run"
NOT_COUNTED = "not counted"  # the Holm verdict of a test the claim does not count (shown, with its raw verdict)

ALPHA = 0.05  # the family-wise level of Holm's correction, and 1 − the level of each raw interval (the 95% t-interval)
LOW_K, STANDARD_K = (20, 50), (200, 500)  # "K=20, 50 can be seen as low-shot scenarios and K=200, 500 are standard"


def seed_values(res: dict, method: str, metric: str) -> dict[int, float]:
    """{seed: the method's ACC, BT or FA on that seed} from a results file (`lab.summary.summarize`); {} if absent."""
    entry = summarize(res).get(method)
    if entry is None or metric not in entry:
        return {}
    return dict(zip(entry["seeds"], entry[metric]["values"]))


def paired_differences(res: dict, a: str, b: str, metric: str, res_b: Optional[dict] = None) -> dict[int, float]:
    """{seed: metric(a) − metric(b)} over the seeds that both methods ran; b is read from `res_b` when given (control
    runs kept in another file, made with the same seeds)."""
    va, vb = seed_values(res, a, metric), seed_values(res if res_b is None else res_b, b, metric)
    return {s: va[s] - vb[s] for s in sorted(va) if s in vb}


def paired_test(diffs: Union[Mapping[int, float], Sequence[float]], threshold: float = 0.0,
                alpha: float = ALPHA) -> dict:
    """The paired t-test of "the mean difference is `threshold`" on the per-seed differences a − b
    (`scipy.stats.ttest_1samp`, two-sided): their mean, its (1 − alpha) t-interval (lo, hi) (mean ± t_{1-alpha/2, n-1}
    s / sqrt n, `TtestResult.confidence_interval`), n, n_agree: how many seeds agree with the claim (difference above
    `threshold`), sd: their standard deviation (ddof=1), and p: the test's p-value; p < alpha exactly when the
    interval excludes the threshold. No spread (sd = 0): the interval is the mean and p is 0 when the mean differs
    from the threshold, 1 when it is it; fewer than two seeds: NaN interval and p (no test); none: n = 0."""
    from scipy.stats import ttest_1samp

    d = np.asarray(list(diffs.values()) if isinstance(diffs, Mapping) else diffs, dtype=np.float64)
    nan = float("nan")
    out = {"mean": float(d.mean()) if len(d) else nan, "ci95": (nan, nan), "n": len(d),
           "n_agree": int((d > threshold).sum()), "sd": float(d.std(ddof=1)) if len(d) > 1 else nan, "p": nan}
    if len(d) < 2:
        return out
    if out["sd"] == 0:
        return {**out, "ci95": (out["mean"], out["mean"]), "p": 0.0 if out["mean"] != threshold else 1.0}
    res = ttest_1samp(d, popmean=threshold)
    ci = res.confidence_interval(1 - alpha)
    return {**out, "ci95": (float(ci.low), float(ci.high)), "p": float(res.pvalue)}


def verdict(test: dict, threshold: float = 0.0) -> str:
    """The raw verdict of the rule (module docstring) applied to one `paired_test` (one seed has no interval, (NaN, NaN):
    inconclusive)."""
    if test["n"] == 0:
        return NOT_RUN
    lo, hi = test["ci95"]
    return CONFIRMED if lo > threshold else REFUTED if hi < threshold else INCONCLUSIVE


def holm_adjusted(pvalues: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given (`statsmodels.stats.multitest.multipletests`, method "holm"):
    with p(1) ≤ … ≤ p(m) sorted, p(i) becomes max_{j ≤ i} min(1, (m − j + 1) p(j)); a test is decided at
    family-wise level alpha exactly when its adjusted p-value is below alpha (Holm's step-down procedure). A NaN (no
    test: fewer than two seeds) counts as 1: it is in the family and never decided."""
    from statsmodels.stats.multitest import multipletests

    p = np.nan_to_num(np.asarray(pvalues, dtype=np.float64), nan=1.0)
    return multipletests(p, method="holm")[1].tolist() if len(p) else []


def holm_verdicts(tests: Sequence[dict], thresholds: Sequence[float], alpha: float = ALPHA) -> list[tuple]:
    """(adjusted p-value, verdict) of each `paired_test` of one family under Holm's correction at family-wise level
    `alpha` (the rule: module docstring): a decided test is confirmed or refuted by the sign of mean − threshold, the others
    inconclusive; tests not run stay "not yet run" and are left out of the family."""
    ran = [i for i, t in enumerate(tests) if t["n"] > 0]
    adjusted = dict(zip(ran, holm_adjusted([tests[i]["p"] for i in ran])))
    out = []
    for i, (t, thr) in enumerate(zip(tests, thresholds)):
        if i not in adjusted:
            out.append((float("nan"), NOT_RUN))
        elif adjusted[i] < alpha:
            out.append((adjusted[i], CONFIRMED if t["mean"] > thr else REFUTED))
        else:
            out.append((adjusted[i], INCONCLUSIVE))
    return out


def overall(verdicts: Iterable[str]) -> str:
    """The verdict of a claim made of several tests (the rule: module docstring); tests not run or not counted are left out."""
    ran = [v for v in verdicts if v not in (NOT_RUN, NOT_COUNTED)]
    if not ran:
        return NOT_RUN
    return REFUTED if REFUTED in ran else CONFIRMED if all(v == CONFIRMED for v in ran) else INCONCLUSIVE


def detectable_effect(n: int, alpha: float = ALPHA, power: float = 0.8) -> float:
    """The smallest true mean difference, in standard deviations of the per-seed differences, that the two-sided
    paired t-test of `n` seeds at level `alpha` decides with probability `power` (the noncentral t distribution with
    n − 1 degrees of freedom and noncentrality difference sqrt(n) / sd); it assumes normal differences. Written here
    rather than statsmodels' `TTestPower().solve_power`, whose root finder stops early (about 1e-7 off at 10 seeds)
    and lands on a wrong root at 3 seeds and alpha 0.05/9; tests/test_claims_multiplicity.py checks it against
    `TTestPower().power`."""
    from scipy.optimize import brentq
    from scipy.stats import nct, t as student

    df, crit = n - 1, student.ppf(1 - alpha / 2, n - 1)

    def shortfall(e: float) -> float:  # power at a difference of e sd, minus `power`; far tails read as 0, not NaN
        nc = e * np.sqrt(n)
        return float(np.nan_to_num(nct.sf(crit, df, nc)) + np.nan_to_num(nct.cdf(-crit, df, nc))) - power

    hi = 1.0
    while shortfall(hi) < 0:
        hi *= 2
    return float(brentq(shortfall, 0.0, hi))


def smallest_sign_p(n: int) -> float:
    """The smallest two-sided p-value that a test with no assumption on the distribution of n paired differences
    (the sign test, or Wilcoxon's signed-rank test) can reach: every seed on the same side, 2 / 2^n."""
    return 2.0 / 2 ** n


def low_vs_standard(diffs_by_K: Mapping[int, Mapping[int, float]], low: Sequence[int] = LOW_K,
                    standard: Sequence[int] = STANDARD_K) -> dict[int, float]:
    """Per seed present at every K: the mean of its differences at the low-shot K minus their mean at the standard K
    (a paired contrast: seed s of every K starts from the same initial weights and permutations)."""
    seeds = sorted(set.intersection(*(set(diffs_by_K[K]) for K in (*low, *standard))))
    return {s: float(np.mean([diffs_by_K[K][s] for K in low]) - np.mean([diffs_by_K[K][s] for K in standard]))
            for s in seeds}



def epoch_accuracy(log: dict) -> np.ndarray:
    """(tasks, epochs): the accuracy on the task being learnt after each of its epochs (Fig. 4), from
    log["epoch_acc"] = [[task, accuracy], ...] in training order (`TrainConfig.eval_every_epoch`)."""
    per: dict[int, list] = {}
    for task, acc in log["epoch_acc"]:
        per.setdefault(int(task), []).append(acc)
    return np.array([per[t] for t in sorted(per)], dtype=np.float64)


def angles_degrees(log: dict, task: int, which: str) -> np.ndarray:
    """The angle (degrees) between the update g_x and g1 (which="g1") or g2 ("g2") at each outer step of `task`
    (Fig. 5), from log["angles"] = [[task, cos<g1,g_x>, cos<g2,g_x>, lambda], ...] (`TrainConfig.record_angles`).
    Steps where the angle is undefined (g2 = 0 at a task's first step: NaN, or None once stored as JSON) are left
    out."""
    col = {"g1": 1, "g2": 2}[which]
    c = np.array([np.nan if r[col] is None else r[col] for r in log["angles"] if r[0] == task], dtype=np.float64)
    return np.degrees(np.arccos(np.clip(c[~np.isnan(c)], -1.0, 1.0)))


def angle_spread(log: dict, task: int, which: str) -> float:
    """How much the angle between g_x and g1 (or g2) moves while `task` is learnt: its standard deviation over the
    task's outer steps (ddof=1), the statistic of "a more stable compromise" (Fig. 5)."""
    return float(np.std(angles_degrees(log, task, which), ddof=1))


def angle_mean(log: dict, task: int, which: str) -> float:
    """The mean angle between g_x and g1 (or g2) over `task`'s outer steps (Fig. 5: "the angle of <g1, g_x> is big"
    when the update no longer follows the task)."""
    return float(np.mean(angles_degrees(log, task, which)))


def log_differences(runs: Mapping[str, dict], a: str, b: str, stat: Callable[[dict], float]) -> dict[int, float]:
    """{seed: stat(log of a) − stat(log of b)} over the seeds with both logs; `runs` maps "method/seed" to a log."""
    logs_a, logs_b = runs_of(runs, a), runs_of(runs, b)
    return {s: stat(logs_a[s]) - stat(logs_b[s]) for s in sorted(logs_a) if s in logs_b}


def format_p(x: float, alpha: float = ALPHA) -> str:
    """A p-value as the pages show it: three decimals, four where three would round it across `alpha` (0.0505 is
    not "0.050", which reads as decided at 0.05 when it is not); "< 0.001" below that, "–" for NaN (no test)."""
    if np.isnan(x):
        return "–"
    if x < 0.001:
        return "< 0.001"
    three = f"{x:.3f}"
    return three if (float(three) < alpha) == (x < alpha) else f"{x:.4f}"
