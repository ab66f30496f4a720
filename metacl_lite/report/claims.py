"""A verdict on every claim of the paper: for each claim a short quote and where it stands, the statistic that tests
it, and a verdict per K, computed from results files (python -m metacl_lite run) and, for Figs. 4 and 5, from the
training logs that `TrainConfig.eval_every_epoch` and `TrainConfig.record_angles` add to `run_stream`'s output.

Within one seed every method sees the same task permutations, initial weights and batch order (`run_stream`), so
methods are compared by paired per-seed differences a − b, never by overlapping intervals. `VERDICT_RULE` is the one
rule that turns such differences into a verdict: a raw verdict per test (its 95% interval) and, for the claim, Holm's
correction over the tests the claim counts (those where the paper states it, each set of runs once). `CLAIMS` lists
the claims, `verdict_table` sums them up (one row per claim: its Holm verdict and the one number behind it),
`findings_markdown` says in a few lines what holds and what does not, and `seeds_note` says what the number of seeds
can and cannot show. Claims 5 and 6 read one stream each, the training logs of results/dynamics-pmnist.json
(`lab.dynamics`), through `dynamics_logs`, so every page that shows them shows the same runs.

"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import FileFormatError
from ..importance import REGULARISERS
from ..training import METHODS, VARIANTS
from .evidence import (CONTROL_COMMAND, CONTROLS, LIVE_NOTE, SPEED_PAIRS, ANGLE_PAIR, STREAM_PARAMETERS,  # noqa: F401
                       Evidence, control_file, dynamics_logs, load_evidence, stream_fingerprint)
from .paper import PAPER_SOURCES, paper_table
from .stats import (ALPHA, CONFIRMED, INCONCLUSIVE, LOW_K, NOT_COUNTED, NOT_RUN, REFUTED, STANDARD_K,  # noqa: F401
                    angle_mean, angle_spread, angles_degrees, detectable_effect, epoch_accuracy, holm_adjusted,
                    holm_verdicts, log_differences, low_vs_standard, overall, paired_differences, paired_test,
                    seed_values, smallest_sign_p, verdict)

VERDICT_RULE = (
    "Each test says that a paired per-seed difference a − b exceeds a threshold t (t = 0 unless the paper names a "
    "margin). Its p-value is the paired t-test's, two-sided, of \"the mean difference is t\": the 95% t-interval of "
    f"the mean difference excludes t exactly when p < {ALPHA:g}, and the sign of the mean difference − t says which "
    "way. **Raw verdict** of a test, on its own: **confirmed** when the interval lies above t, **refuted** when it "
    "lies below t, **inconclusive** when it contains t or there are fewer than two seeds; **not yet run**: no data. "
    "**Holm verdict**: the tests a claim counts form one family, all its K together (the claim's verdict rests on "
    "all of them); Holm's step-down procedure orders their p-values p(1) ≤ … ≤ p(m) and, from the smallest, "
    f"decides each test while p(i) < {ALPHA:g}/(m − i + 1) and stops at the first that is not, so that the chance "
    f"of deciding any test of the family whose true mean difference is t stays at most {ALPHA:g}; a decided test "
    "is confirmed or refuted by its sign, the others are inconclusive. A claim counts its tests only where the "
    "paper states it (the others are shown as beyond it) and counts the same runs only once (a control whose runs "
    "are the main file's own, the same configuration or the same accuracy matrices on every seed, is shown but not "
    "counted). A claim is refuted when one of its counted tests is, confirmed when all of them are, and "
    "inconclusive otherwise (tests not yet run left out); its verdict is the Holm one, with the raw one beside it.")

ACROSS_K, LIVE = "across K", "training logs"



def gain_by_K(results: Mapping[int, dict], metric: str = "ACC", benchmark: str = "pmnist") -> list[dict]:
    """MetaCL's gain over its plain regulariser at every K with a results file, the paper's K and those beyond it
    (claim 4 asks whether the gain is larger at low K): for each K, regulariser and variant (MetaCL-β, MetaCL-λ), the
    `paired_test` of the per-seed difference variant − plain, its `verdict`, and the paper's own difference where
    it publishes both numbers. Rows in order of K, regulariser, variant; pairs missing from a file are left out."""
    rows = []
    for K in sorted(results):
        for imp in REGULARISERS:
            for v, name in VARIANTS.items():
                d = paired_differences(results[K], f"{imp}-metacl-{v}", imp, metric)
                if not d:
                    continue
                t = paired_test(d)
                rows.append({"K": K, "regulariser": imp.upper(), "variant": name, "mean": t["mean"],
                             "ci95": t["ci95"], "n": t["n"], "n_agree": t["n_agree"], "verdict": verdict(t),
                             "paper": _paper_diff(benchmark, K, f"{imp}-metacl-{v}", imp, metric)})
    return rows


def stream_sentence(logs: Mapping) -> str:
    """What the training logs of claims 5 and 6 are, in one sentence: the streams, their seeds and where they come
    from (`dynamics_logs`)."""
    if "speed" not in logs:
        return logs["source"][0].upper() + logs["source"][1:] + "."
    sp, an = logs["speed"], logs["angles"]
    return (f"Learning speed (claim 5): K = {sp['K']}, {sp['n_tasks']} tasks, {len(sp['seeds'])} seeds; gradient "
            f"angles (claim 6): K = {an['K']}, {an['n_tasks']} tasks (read on task {an['n_tasks']}), "
            f"{len(an['seeds'])} seeds; {logs['source']}.")


# ----------------------------------------------------------------------------------------------------------------
# Where the paper states a claim, and runs that repeat others
# ----------------------------------------------------------------------------------------------------------------
#: Where a test is counted: MAIN, at the K of the paper's main-text table for the benchmark (Table 1: Permuted MNIST,
#: K = 20); PAPER, at every K of its tables (main text and Appendix D). Elsewhere it is shown, not counted.
MAIN, PAPER = "main", "paper"


def stated_ks(benchmark: str, scope: str) -> tuple:
    """The K at which the paper states a test of `scope` (MAIN or PAPER), read from `paper.PAPER_SOURCES`."""
    ks = sorted(K for (b, K), src in PAPER_SOURCES.items() if b == benchmark and (scope == PAPER or "main text" in src))
    return tuple(ks)


def _beyond(benchmark: str, scope: str) -> str:
    ks = stated_ks(benchmark, scope)
    where = "its main-text table" if scope == MAIN else "its tables"
    return f"beyond where the paper states it ({where}: K = {', '.join(map(str, ks))})"


#: What must agree, besides the method's own settings, for two results files to hold the same runs.
RUN_KEYS = ("benchmark", "K", "n_tasks", "seeds", "train", "model", "data_source")


def repeated_runs(ctl: dict, main: dict, method: str) -> list[str]:
    """Why the runs of `method` in the control file `ctl` are the main file's own runs, bit for bit: "same
    configuration: <its settings>" (its settings, its options and the run keys `RUN_KEYS` equal: a γ = β control
    where the tuned γ already is β) and/or "same accuracy matrices on all <n> seeds"; [] when neither holds."""
    cc, mc = ctl["config"], main["config"]
    why = []
    if (method in mc.get("method_hparams", {}) and cc["method_hparams"].get(method) == mc["method_hparams"][method]
            and (cc.get("method_options") or {}).get(method) == (mc.get("method_options") or {}).get(method)
            and all(cc.get(k) == mc.get(k) for k in RUN_KEYS)):
        setting = ", ".join(f"{k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}"
                            for k, v in cc["method_hparams"][method].items())
        why.append(f"same configuration: {setting or 'no settings'}")
    seeds = cc["seeds"]
    runs = [(ctl["runs"].get(f"{method}/{s}"), main["runs"].get(f"{method}/{s}")) for s in seeds]
    if seeds and all(a is not None and b is not None and a["acc_matrix"] == b["acc_matrix"] for a, b in runs):
        why.append(f"same accuracy matrices on all {len(seeds)} seeds")
    return why


# ----------------------------------------------------------------------------------------------------------------
# Claims
# ----------------------------------------------------------------------------------------------------------------
def _label(m: str) -> str:
    return METHODS[m].label if m in METHODS else m


def _row(test: str, K, diffs: Optional[Mapping[int, float]], threshold: float = 0.0, unit: str = "points",
         paper: Optional[float] = None, note: str = "", live: bool = False, excluded: str = "") -> dict:
    """One test's row: `paired_test` numbers, the raw verdict, and whether the claim counts it (`excluded` says why
    not: beyond where the paper states it, or runs counted elsewhere). `Claim.evaluate` adds the Holm verdict."""
    t = paired_test(diffs or {}, threshold)
    return {"test": test, "K": K, "live": live, **t, "verdict": verdict(t, threshold), "threshold": threshold,
            "unit": unit, "paper": paper, "note": note, "differences": dict(diffs or {}), "counted": not excluded,
            "excluded": excluded}


def _paper_diff(benchmark: str, K: int, a: str, b: str, metric: str) -> Optional[float]:
    """The paper's own difference of means a − b (its tables), for comparison; None where it reports none."""
    p = paper_table(benchmark, K) or {}
    pa, pb = (p.get(a) or {}).get(metric), (p.get(b) or {}).get(metric)
    return None if pa is None or pb is None else pa[0] - pb[0]


def _missing(ev: Evidence, K: int, methods: Iterable[str]) -> str:
    if K not in ev.results:
        return f"no results file for K = {K}: python -m metacl_lite run --benchmark {ev.benchmark} --K {K}"
    absent = [m for m in methods if m not in ev.results[K]["config"]["methods"]]
    return f"results/{ev.benchmark}-K{K}.json has no runs of {', '.join(absent)}" if absent else ""


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
                note = _missing(ev, K, (a, b))
                diffs = None if note else paired_differences(ev.results[K], a, b, metric)
                rows.append(_row(f"{_label(a)} − {_label(b)}, {metric}", K, diffs, threshold,
                                 paper=_paper_diff(ev.benchmark, K, a, b, metric), note=note,
                                 excluded="" if K in stated_ks(ev.benchmark, sc) else _beyond(ev.benchmark, sc)))
        return rows
    return evaluate


def across_K_tests(pairs: Sequence[tuple], low: Sequence[int] = LOW_K, standard: Sequence[int] = STANDARD_K):
    """Tests across K (claim 4): per seed, the improvement a − b averaged over the low-shot K minus its average over
    the standard K (`low_vs_standard`); the paper's own contrast beside it."""
    def evaluate(ev: Evidence) -> list[dict]:
        rows = []
        for a, b, metric in pairs:
            notes = [n for n in (_missing(ev, K, (a, b)) for K in (*low, *standard)) if n]
            diffs = None if notes else low_vs_standard(
                {K: paired_differences(ev.results[K], a, b, metric) for K in (*low, *standard)}, low, standard)
            paper = [_paper_diff(ev.benchmark, K, a, b, metric) for K in (*low, *standard)]
            rows.append(_row(f"{_label(a)} − {_label(b)}, {metric}: K {', '.join(map(str, low))} minus K "
                             f"{', '.join(map(str, standard))}", ACROSS_K, diffs,
                             paper=None if None in paper else float(np.mean(paper[:len(low)])
                                                                    - np.mean(paper[len(low):])),
                             note="; ".join(notes)))
        return rows
    return evaluate


def control_tests(metric: str = "ACC"):
    """Claim 7: each MetaCL-λ control run (γ = β of its MetaCL-β counterpart; γ = 0) minus MetaCL-β, per K."""
    def evaluate(ev: Evidence) -> list[dict]:
        return [_control_row(ev, K, c, imp, metric) for K in ev.ks for c in CONTROLS for imp in REGULARISERS]
    return evaluate


def _control_row(ev: Evidence, K: int, control: str, imp: str, metric: str) -> dict:
    lam, beta = f"{imp}-metacl-lambda", f"{imp}-metacl-beta"
    test = f"{_label(lam)} (γ = {'β' if control == 'gamma=beta' else '0'}) − {_label(beta)}, {metric}"
    ctl = ev.controls.get(control, {}).get(K)
    note = _missing(ev, K, (beta,))
    excluded = "" if K in stated_ks(ev.benchmark, PAPER) else _beyond(ev.benchmark, PAPER)
    if not note and ctl is None:
        main = ev.results[K]["config"]["methods"]
        note = CONTROL_COMMAND.format(benchmark=ev.benchmark, K=K, gamma=control.split("=")[1],
                                      seeds=len(ev.results[K]["config"]["seeds"]),
                                      methods=",".join(f"{i}-metacl-lambda" for i in REGULARISERS
                                                       if f"{i}-metacl-beta" in main),
                                      file=control_file(ev.benchmark, K, control))
    elif not note and lam not in ctl["config"]["methods"]:
        note = f"results/{control_file(ev.benchmark, K, control)} has no runs of {lam}"
    if note:
        return _row(test, K, None, note=note, excluded=excluded)
    _check_control(ctl, ev.results[K], imp, control, K)
    same = repeated_runs(ctl, ev.results[K], lam)
    if same:  # the same runs as the main file's: their difference is already a test of the main file
        excluded = (f"repeats the main file's {_label(lam)} runs ({'; '.join(same)}), so its difference is "
                    f"{_label(lam)} − {_label(beta)}, {metric} of results/{ev.benchmark}-K{K}.json"
                    + (", claim 2b's comparison," if metric == "ACC" else "") + " again")
    return _row(test, K, paired_differences(ctl, lam, beta, metric, res_b=ev.results[K]), excluded=excluded)


def _check_control(ctl: dict, main: dict, imp: str, control: str, K: int) -> None:
    """A control file must hold MetaCL-λ made with the control's γ (FileFormatError otherwise)."""
    lam = f"{imp}-metacl-lambda"
    want = main["config"]["method_hparams"][f"{imp}-metacl-beta"]["beta"] if control == "gamma=beta" else 0.0
    got = ctl["config"]["method_hparams"][lam].get("gamma")
    if got != want:
        raise FileFormatError(f"the {control} control file for K = {K} holds {lam} with gamma = {got}, not {want}")


def speed_tests(pairs: Sequence[tuple] = SPEED_PAIRS):
    """Claim 5 (Fig. 4): per epoch e, per seed, the MetaCL method's accuracy on the current task after epoch e minus
    the plain method's, averaged over the tasks of its stream (`dynamics_logs`)."""
    def evaluate(ev: Evidence) -> list[dict]:
        log = ev.logs.get("speed")
        if log is None or not log["runs"]:
            return [_row(f"{_label(a)} − {_label(b)}, accuracy after each epoch", None, None, note=LIVE_NOTE,
                         live=True) for a, b in pairs]
        first = next(iter(log["runs"].values()))
        rows = []
        for a, b in pairs:
            for e in range(epoch_accuracy(first).shape[1]):
                diffs = log_differences(log["runs"], a, b, lambda r, e=e: float(epoch_accuracy(r)[:, e].mean()))
                rows.append(_row(f"{_label(a)} − {_label(b)}, accuracy after epoch {e + 1}", log["K"], diffs,
                                 live=True))
        return rows
    return evaluate


def angle_tests(pair: tuple = ANGLE_PAIR, task: Optional[int] = None):
    """Claim 6 (Fig. 5): on the last task of its stream (`dynamics_logs`; or the 0-based `task`), per seed, MetaCL-β's statistic
    minus MetaCL-λ's: the spread (standard deviation over the task's steps, `angle_spread`) of the angles
    <g1, g_x> and <g2, g_x>, and the mean <g1, g_x> (`angle_mean`). The analysis chapter calls it for task 2 too."""
    stats = (("spread of ⟨g1, gx⟩", angle_spread, "g1"), ("spread of ⟨g2, gx⟩", angle_spread, "g2"),
             ("mean ⟨g1, gx⟩", angle_mean, "g1"))
    where = "the last task" if task is None else f"task {task + 1}"

    def evaluate(ev: Evidence) -> list[dict]:
        log = ev.logs.get("angles")
        rows = []
        for name, fn, which in stats:
            test = f"{_label(pair[0])} − {_label(pair[1])}, {name} on {where}"
            if log is None or not log["runs"]:
                rows.append(_row(test, None, None, unit="degrees", note=LIVE_NOTE, live=True))
                continue
            last = log["n_tasks"] - 1 if task is None else task
            diffs = log_differences(log["runs"], *pair, lambda r, fn=fn, which=which: fn(r, last, which))
            rows.append(_row(test, log["K"], diffs, unit="degrees", live=True))
        return rows
    return evaluate




@dataclass(frozen=True)
class Claim:
    """One claim of the paper: `evaluate(evidence)` returns one row per test and K (`paired_test` numbers, the raw
    verdict, whether the claim counts the test and why not, its Holm-adjusted p-value and Holm verdict within the
    claim's counted tests (`with_holm`), the paper's own difference where it has one, and a note saying what is
    missing when not yet run)."""

    id: str
    title: str
    quote: str  # Markdown; tests/test_claims.py checks it against the paper's LaTeX
    where: str
    statistic: str
    tests: Callable[[Evidence], list[dict]]
    short: str = ""  # a few words, for the summary table and the findings

    def evaluate(self, ev: Union[Evidence, dict], alpha: float = ALPHA) -> list[dict]:
        ev = ev if isinstance(ev, Evidence) else Evidence(tuple(ev), ev)
        return with_holm([{"claim": self.id, **r} for r in self.tests(ev)], alpha)


def with_holm(rows: list[dict], alpha: float = ALPHA) -> list[dict]:
    """`rows` of one claim with "p_holm" and "holm" added: Holm's correction (`holm_verdicts`) over the rows the
    claim counts, all K together; a row not counted gets NaN and `NOT_COUNTED`."""
    counted = [r for r in rows if r["counted"]]
    for r, (p, v) in zip(counted, holm_verdicts(counted, [r["threshold"] for r in counted], alpha)):
        r.update(p_holm=p, holm=v)
    for r in rows:
        if not r["counted"]:
            r.update(p_holm=float("nan"), holm=NOT_COUNTED)
    return rows


def claim_verdict(rows: Iterable[dict], holm: bool = True) -> str:
    """A claim's verdict from its rows (`VERDICT_RULE`): `overall` of the Holm verdicts (holm=True) or of the raw
    verdicts of the tests it counts."""
    return overall(r["holm" if holm else "verdict"] for r in rows if r["counted"])


_PAIRED = "paired per-seed difference"
CLAIMS = [
    Claim("1", "MetaCL w/o reg beats fine-tune on FA and ACC",
          "MetaCL w/o *reg* demonstrates better ACC and stronger forward adaption than straightforward fine tune, "
          "with a little cost of BT",
          "Experiments, Results (Tables 1-3); Appendix D adds: \"Compared with Fine tune, MetaCL w/o *reg* always "
          "achieves better FA in all circumstances.\"",
          f"{_PAIRED} MetaCL w/o reg − fine-tune in FA at every K of the paper's tables (Appendix D: \"in all "
          "circumstances\"), and in ACC at K = 20, the K of Table 1 that the sentence describes; ACC at the other K "
          "is shown beyond where the paper states it.",
          method_tests([("metacl", "finetune", "FA", PAPER), ("metacl", "finetune", "ACC", MAIN)]),
          short="MetaCL w/o reg beats fine-tune"),
    Claim("2a", "MetaCL-β beats the plain method on ACC, BT and FA",
          "after applying MetaCL algorithms on these regularization methods, all three metrics ACC, BT and FA are "
          "improved",
          "Experiments, Results (Tables 1-3); Appendix D says only: \"When compare MetaCL with the original "
          "approaches PI and MAS, MetaCL can generally reach higher ACC and FA with comparable BT.\"",
          f"{_PAIRED} X-MetaCL-β − X for X = MAS, PI, EWC, in ACC, BT and FA, at K = 20, the K of Table 1; the "
          "other K are shown beyond where the paper states it (Appendix D's \"generally\" makes no claim about "
          "each K).",
          method_tests([(f"{i}-metacl-beta", i, m) for i in REGULARISERS for m in ("ACC", "BT", "FA")],
                       scope=MAIN),
          short="MetaCL-β beats its regulariser"),
    Claim("2b", "MetaCL-λ beats MetaCL-β on ACC (PI: also BT and FA)",
          "compared with the fixed balance strategy MetaCL-$\\beta$, the dynamic balance MetaCL-$\\lambda$ achieves "
          "comparable or better trade-off between BT and FA, and thus further improves ACC",
          "Experiments, Results (Tables 1-3); Appendix D adds: \"PI-MetaCL-$\\lambda$ significantly surpasses "
          "PI-MetaCL-$\\beta$ on Permuted MNIST datasets in all three metrics.\"",
          f"{_PAIRED} X-MetaCL-λ − X-MetaCL-β in ACC for X = MAS, PI, EWC at K = 20, the K of Table 1, and for PI "
          "in ACC, BT and FA at every K of the paper's tables (Appendix D); (\"comparable or better trade-off\" is "
          "no one-sided claim for BT and FA of the others). MAS and EWC at the other K are shown beyond where the "
          "paper states it.",
          method_tests([(f"{i}-metacl-lambda", f"{i}-metacl-beta", "ACC", PAPER if i == "pi" else MAIN)
                        for i in REGULARISERS]
                       + [("pi-metacl-lambda", "pi-metacl-beta", m, PAPER) for m in ("BT", "FA")]),
          short="MetaCL-λ beats MetaCL-β"),
    Claim("3", "PI-MetaCL-λ beats PI-MetaCL-β by over 8 ACC points at K = 50",
          "On Permuted MNIST with $K=50$, the PI-MetaCL-$\\lambda$ surpasses PI-MetaCL-$\\beta$ over 8\\% in terms "
          "of ACC",
          "Experiments, Regularization Strategy Analysis (Table 6 of Appendix D, which the text calls Table 3)",
          f"{_PAIRED} PI-MetaCL-λ − PI-MetaCL-β in ACC at K = 50, against the threshold 8.",
          method_tests([("pi-metacl-lambda", "pi-metacl-beta", "ACC")], threshold=8.0, ks=(50,)),
          short="PI-MetaCL-λ beats PI-MetaCL-β by 8 pts (K = 50)"),
    Claim("4", "MetaCL's improvement is larger at low K than at standard K",
          "Compared with large size of training data, our algorithms can provide more improvement on low-shot "
          "scenarios.",
          "Experiments, Performance with Different K (Fig. 3; Appendix D, Tables 6-7; the paper's example is "
          "CIFAR-100)",
          "Per seed, the ACC improvement of each MetaCL method over its base method averaged over K = 20, 50, minus "
          "its average over K = 200, 500 (a paired contrast: seed s starts from the same weights at every K).",
          across_K_tests([("metacl", "finetune", "ACC")]
                         + [(f"{i}-metacl-{v}", i, "ACC") for i in REGULARISERS for v in ("beta", "lambda")]),
          short="larger gain at low K"),
    Claim("5", "MetaCL learns faster: accuracy above the plain method's after every epoch",
          "The curves of MetaCL methods are always above the original approaches (i.e. orange, blue and green "
          "curves), which indicates faster learning speed and higher accuracy.",
          "Experiments, Learning Speed Comparison (Fig. 4; CIFAR-100 in the paper)",
          "Per seed and epoch e, the accuracy on the task being learnt after epoch e, averaged over the tasks of "
          "claim 5's Permuted MNIST stream (the training logs): MetaCL method − plain method. Confirmed when it is at every epoch.",
          speed_tests(),
          short="MetaCL learns faster (Fig. 4)"),
    Claim("6", "The dynamic balance gives a more stable compromise",
          "the fixed balance strategy struggles to learn current task 20 (i.e. the angle of $\\langle g_1, "
          "g_x\\rangle$ is big) and cannot provide a stable compromise",
          "Experiments, Regularization Strategy Analysis (Fig. 5: PI, Permuted MNIST, K = 50); the caption adds: "
          "\"The dynamic balance strategy can provide a more stable and better compromise.\"",
          "On the last task of claim 6's stream (the training logs), per seed, PI-MetaCL-β's spread (standard deviation over the task's "
          "outer steps) of the angles ⟨g1, gx⟩ and ⟨g2, gx⟩, and its mean ⟨g1, gx⟩, minus PI-MetaCL-λ's.",
          angle_tests(),
          short="dynamic balance is more stable (Fig. 5)"),
    Claim("7", "The projection's own effect (controls)",
          "With the dynamic balance strategy, the MetaCL-$\\lambda$ generally outperforms the fixed balance method.",
          "Experiments, Regularization Strategy Analysis; the tuned constants differ (MetaCL-λ adds γ to λ, "
          "MetaCL-β uses its own β), so the gain is the projection's only when the constant is held fixed",
          f"{_PAIRED} in ACC: MetaCL-λ run with γ equal to MetaCL-β's β, minus MetaCL-β (only the projection "
          "differs); and MetaCL-λ run with γ = 0 (the projection alone) minus MetaCL-β; at every K of the paper's "
          "tables. Where the tuned γ already equals β, the γ = β control repeats the main file's MetaCL-λ runs and "
          "its difference is claim 2b's: shown, not counted.",
          control_tests(),
          short="the projection's own gain"),
]


# ----------------------------------------------------------------------------------------------------------------
# Tables and text
# ----------------------------------------------------------------------------------------------------------------
def verdict_rows(ev: Union[Evidence, dict], claims: Sequence[Claim] = tuple(CLAIMS)) -> list[dict]:
    """Every test of every claim, one row per test and K, with its raw and Holm verdicts (`Claim.evaluate`)."""
    return [r for c in claims for r in c.evaluate(ev)]


def _column(row: dict) -> str:
    """The column of a row when grouped by K: its K, "across K" (claim 4) or "training logs" (claims 5-6)."""
    return LIVE if row["live"] else ACROSS_K if row["K"] == ACROSS_K else f"K = {row['K']}"


def _num(x: Optional[float], fmt: str = "+.2f") -> str:
    return "–" if x is None or np.isnan(x) else format(x, fmt)


def _p(x: float) -> str:
    """A p-value for a reader: three decimals, four where three would round it across `ALPHA` (0.0505 is not
    "0.050", which reads as decided at 0.05 when it is not)."""
    if np.isnan(x):
        return "–"
    if x < 0.001:
        return "< 0.001"
    three = f"{x:.3f}"
    return three if (float(three) < ALPHA) == (x < ALPHA) else f"{x:.4f}"


def _unit(row: dict) -> str:
    return "°" if row["unit"] == "degrees" else ""


def _name(row: dict) -> str:
    return row["test"] + (f" (vs {row['threshold']:g})" if row["threshold"] else "")


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


def behind(rows: Sequence[dict]) -> str:
    """The one number behind a claim's Holm verdict, in words: its `deciding_test`, where, its mean difference and
    adjusted p-value."""
    r = deciding_test(rows)
    if r is None:
        return "–"
    return f"{_name(r)}, {_column(r)}: {_num(r['mean'])}{_unit(r)}, Holm p {_p(r['p_holm'])}"


def number_behind(rows: Sequence[dict]) -> str:
    """The one number behind a claim's Holm verdict, short: its `deciding_test`'s mean difference and Holm-adjusted
    p-value ("+2.3 pts, p(Holm) 0.059"); "–" when no counted test ran. `behind` says which test it is."""
    r = deciding_test(rows)
    if r is None:
        return "–"
    unit = "°" if r["unit"] == "degrees" else " pts"
    against = f" against {r['threshold']:g}" if r["threshold"] else ""
    return f"{_num(r['mean'], '+.1f')}{unit}{against}, p(Holm) {_p(r['p_holm'])}"


def verdict_table(ev: Union[Evidence, dict], claims: Sequence[Claim] = tuple(CLAIMS),
                  rows: Optional[list[dict]] = None):
    """One row per claim (index: the claim's id), three narrow columns: a short name of the claim, its verdict with
    Holm's correction (`claim_verdict`) and the one number behind it (`number_behind`). The raw verdicts and the
    tests are in each claim's own text (`claim_markdown`). Pass `rows` (`verdict_rows`) to avoid computing them
    again."""
    import pandas as pd

    rows = verdict_rows(ev, claims) if rows is None else rows
    table = {}
    for c in claims:
        mine = [r for r in rows if r["claim"] == c.id]
        table[c.id] = {"claim": c.short or c.title, "verdict": claim_verdict(mine),
                       "number behind it": number_behind(mine)}
    return pd.DataFrame.from_dict(table, orient="index").rename_axis("#")


#: How the findings name each verdict.
FINDINGS = ((CONFIRMED, "Holds (confirmed)"), (REFUTED, "Does not hold (refuted)"),
            (INCONCLUSIVE, "Undecided (inconclusive)"), (NOT_RUN, "Not yet run"))


def findings_markdown(rows: Sequence[dict], claims: Sequence[Claim] = tuple(CLAIMS)) -> str:
    """What holds and what does not, in a few Markdown bullets (glue it as a block): one bullet per verdict that
    occurs, in the order of `FINDINGS`, naming each claim (id, short name, the number behind its verdict)."""
    groups: dict[str, list[str]] = {}
    for c in claims:
        mine = [r for r in rows if r["claim"] == c.id]
        v = claim_verdict(mine)
        num = number_behind(mine)
        groups.setdefault(v, []).append(f"claim {c.id}, {c.short or c.title}" + ("" if num == "–" else f" ({num})"))
    lines = [f"- **{name}:** " + "; ".join(groups[v]) + "." for v, name in FINDINGS if v in groups]
    return "\n".join(lines)


def verdict_changes(rows: Sequence[dict], claims: Sequence[Claim] = tuple(CLAIMS)) -> str:
    """A sentence naming the claims whose verdict Holm's correction changes (raw → Holm), and counting the tests
    decided on their own (raw confirmed or refuted) that are inconclusive within their claim's family."""
    changed = []
    for c in claims:
        mine = [r for r in rows if r["claim"] == c.id]
        raw, holm = claim_verdict(mine, holm=False), claim_verdict(mine)
        if raw != holm:
            changed.append(f"claim {c.id} ({raw} → {holm})")
    undone = [r for r in rows if r["counted"] and r["verdict"] in (CONFIRMED, REFUTED) and r["holm"] == INCONCLUSIVE]
    counted = [r for r in rows if r["counted"] and r["n"] > 0]
    return ((f"Holm's correction changes the verdict of {', '.join(changed)}" if changed else
             "Holm's correction changes no claim's verdict")
            + f": of the {len(counted)} tests counted, {len(undone)} decided on their own (raw) are inconclusive "
              "within their claim's family.")


def _counts(verdicts: Sequence[str]) -> str:
    return ", ".join(f"{verdicts.count(k)} {k}" for k in (CONFIRMED, REFUTED, INCONCLUSIVE))


def claim_markdown(claim: Claim, rows: list[dict]) -> str:
    """The generated text of one claim: the quote and where it stands, the statistic, one table row per test and K
    (the verdict "Holm / raw" first, so that a narrow screen shows it beside the test without scrolling, then the
    mean difference with its 95% interval, seeds agreeing with the claim, the paper's own difference, and the p-value
    with the Holm-adjusted one in brackets; no table when nothing ran), the claim's
    verdict with Holm's correction beside the raw one, per K where it has several, the tests shown but not counted
    and why, and what to run for the tests not yet run."""
    lines = [f"> {claim.quote}", ">", f"> — {claim.where}", "", f"**Statistic.** {claim.statistic}", ""]
    counted = [r for r in rows if r["counted"]]
    ran = [r for r in counted if r["verdict"] != NOT_RUN]
    if any(r["verdict"] != NOT_RUN for r in rows):
        lines += ["| test | K | verdict: Holm / raw | mean difference [95% interval] | seeds for | paper | p (Holm) |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            lo, hi = r["ci95"]
            mean = "–" if r["n"] == 0 else f"{_num(r['mean'])}{_unit(r)} [{_num(lo)}, {_num(hi)}]"
            p = _p(r["p"]) + (f" ({_p(r['p_holm'])})" if r["counted"] and r["n"] > 0 else "")
            holm = f"**{r['holm']}**" if r["counted"] else r["holm"]
            lines.append(f"| {_name(r)} | {'–' if r['K'] is None else r['K']} | {holm} / {r['verdict']} | {mean} | "
                         f"{r['n_agree']}/{r['n']} | {_num(r['paper'])} | {p} |")
        lines.append("")
    if ran:
        lines.append(f"Verdict: **{claim_verdict(rows)}** with Holm's correction over the {len(ran)} test(s) "
                     f"counted (raw: **{claim_verdict(rows, holm=False)}**). With Holm, "
                     f"{_counts([r['holm'] for r in ran])}; raw, {_counts([r['verdict'] for r in ran])}"
                     + (f"; {len(counted) - len(ran)} not yet run." if len(ran) < len(counted) else ".")
                     + (f" The number behind the verdict: {behind(rows)}." if deciding_test(rows) else ""))
    else:
        lines.append(f"Verdict: **{NOT_RUN}**: none of its {len(counted)} test(s) has run.")
    columns = list(dict.fromkeys(_column(r) for r in ran))
    if len(columns) > 1:
        lines.append("By K (Holm / raw): " + "; ".join(
            f"{col} {claim_verdict([r for r in ran if _column(r) == col])} / "
            f"{claim_verdict([r for r in ran if _column(r) == col], holm=False)}" for col in columns) + ".")
    lines.append("")
    reasons: dict[str, list[dict]] = {}
    for r in rows:
        if not r["counted"]:
            reasons.setdefault(r["excluded"], []).append(r)
    for why, rs in reasons.items():
        shown = [r for r in rs if r["verdict"] != NOT_RUN]
        raw = f" (raw: {_counts([r['verdict'] for r in shown])})" if shown else ""
        if len(rs) == 1:
            v = rs[0]["verdict"]
            lines.append(f"- Not counted: {_name(rs[0])} at {_column(rs[0])} "
                         f"({'not yet run' if v == NOT_RUN else 'raw: ' + v}), {why}.")
        else:
            ks = ", ".join(dict.fromkeys(str(r["K"]) for r in rs))
            lines.append(f"- Not counted: {len(rs)} tests at K = {ks}{raw}, {why}.")
    notes = dict.fromkeys(r["note"] for r in counted if r["verdict"] == NOT_RUN and r["note"])
    lines += ["- Not yet run: " + re.sub(r"(python -m [^;]*)", r"`\1`", n) for n in notes]  # commands as code
    return "\n".join(lines).rstrip("\n")


def seeds_note(rows: Sequence[dict], more: int = 10, alpha: float = ALPHA, power: float = 0.8) -> str:
    """What the results files' seeds (the commonest number n among the counted tests on files) and `more` seeds can
    and cannot show, from the numbers: the t-test's normality assumption and the smallest p-value a test without it
    can reach (`smallest_sign_p`), the t quantile of the interval, and the smallest mean difference the t-test
    decides with probability `power` (`detectable_effect`), in standard deviations, at level `alpha` and at the
    strictest Holm level alpha/m of the largest family here, and in points at the median standard deviation of the
    counted per-seed differences."""
    from scipy.stats import t as student

    files = [r for r in rows if r["counted"] and not r["live"] and r["n"] > 1]
    if not files:
        return "No counted test on results files has two seeds or more yet: nothing to say about their number."
    n = max(set(r["n"] for r in files), key=[r["n"] for r in files].count)
    ns = sorted({n, more})
    m = max(sum(1 for r in rows if r["claim"] == c and r["counted"] and r["n"] > 0) for c in {r["claim"] for r in rows})
    sd = float(np.median([r["sd"] for r in files if r["n"] == n and r["unit"] == "points"]))
    eff = {k: detectable_effect(k, alpha, power) for k in ns}
    eff_holm = {k: detectable_effect(k, alpha / m, power) for k in ns}
    both = lambda f: " and ".join(f(k) for k in ns)  # noqa: E731
    sign = {k: smallest_sign_p(k) for k in ns}
    holm_floor = f"Holm's strictest level here, {alpha:g}/{m}"

    def reach(k: int) -> str:
        if sign[k] >= alpha:
            return f"no such test of {k} seeds can reach {alpha:g}"
        floor = f" but not {holm_floor}" if sign[k] >= alpha / m else f" and even {holm_floor}"
        return f"such a test of {k} seeds, all agreeing, can reach {alpha:g}" + floor

    return (
        f"**What {n} seeds can and cannot show.** Every p-value and interval here comes from the t-test, which "
        f"assumes that the per-seed differences are normally distributed; {n} seeds are {'far ' if n < 10 else ''}too few to check that. "
        f"Without that assumption, a sign or signed-rank test gives at best p = 2/2ⁿ (n seeds, all agreeing), "
        + both(lambda k: f"{sign[k]:.3g} with {k} seeds") + ": " + "; ".join(reach(k) for k in ns) + ". "
        "The interval's half-width is t(0.975, n − 1)·s/√n, with "
        + both(lambda k: f"t = {student.ppf(0.975, k - 1):.2f} at {k} seeds") + ". "
        f"The t-test decides a true mean difference with probability {power:.0%} when it is at least, in standard "
        f"deviations s of the per-seed differences, " + both(lambda k: f"{eff[k]:.2f} s with {k} seeds")
        + f" at level {alpha:g}, and " + both(lambda k: f"{eff_holm[k]:.2f} s with {k} seeds")
        + f" at Holm's strictest level {alpha:g}/{m} (the largest family here has {m} tests). "
        f"The median s of the counted per-seed differences on the results files is {sd:.2f} points: a true "
        f"difference smaller than about "
        + both(lambda k: f"{eff[k] * sd:.2f} points ({eff_holm[k] * sd:.2f} at {alpha:g}/{m}) with {k} seeds")
        + f" is missed more often than one time in {round(1 / (1 - power))}, so an inconclusive verdict says that "
          "the seeds could not tell, not that the two methods are equal.")


def differences_frame(rows: list[dict]):
    """The per-seed differences of `rows` in long form (claim, test, K column, seed, difference, threshold, unit,
    counted), for plotting."""
    import pandas as pd

    return pd.DataFrame([{"claim": r["claim"], "test": r["test"], "K": _column(r), "seed": s, "difference": d,
                          "threshold": r["threshold"], "unit": r["unit"], "counted": r["counted"]}
                         for r in rows for s, d in r["differences"].items()])


def evidence_basis(ev: Evidence) -> str:
    """What the verdicts rest on, in a phrase: the seeds of the results files (per K where they differ) and of the
    training logs of claims 5 and 6."""
    seeds = {K: len(res["config"]["seeds"]) for K, res in ev.results.items()}
    files = ("no results files" if not seeds else
             f"results files with {next(iter(seeds.values()))} seeds at each K" if len(set(seeds.values())) == 1 else
             "results files with " + ", ".join(f"{n} seeds at K = {K}" for K, n in seeds.items()))
    logs = {k: len(ev.logs[k]["seeds"]) for k in ("speed", "angles") if k in ev.logs and ev.logs[k]["runs"]}
    if not logs:
        return files + ", no training logs for claims 5 and 6"
    n = set(logs.values())
    return files + (f", training logs with {n.pop()} seeds for claims 5 and 6" if len(n) == 1 else
                    f", training logs with {logs.get('speed', 0)} seeds (claim 5) and {logs.get('angles', 0)} "
                    f"(claim 6)")


def _short_test(test: str) -> str:
    """A test's name as a figure's row label: without the K contrast of claim 4, the task of claim 6 and the words
    "accuracy after" of claim 5 (the panel's axis says them)."""
    test = re.sub(r": K [0-9, ]+ minus K [0-9, ]+$", "", test)
    return re.sub(r" on (the last task|task \d+)$", "", test).replace("accuracy after epoch", "epoch")


def plot_differences(frame, claim: str, width: float = 6.8):
    """One claim's per-seed differences (`differences_frame`): a row per test, dots for seeds and a diamond with the
    95% t-interval for their mean, one colour per K (the same colour for a K in every claim's figure), the claim's
    threshold as a black line; the legend above the axes. Sized for the book's column (`width` inches)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.lines import Line2D

    sub = frame[frame.claim == claim].assign(test=lambda f: f.test.map(_short_test))
    ks = list(dict.fromkeys(sub.K))
    allk = [f"K = {K}" for K in (20, 50, 200, 500)] + [ACROSS_K, LIVE]
    colours = dict(zip(allk, sns.color_palette("colorblind", len(allk))))
    n_tests = sub.test.nunique()
    fig, ax = plt.subplots(figsize=(width, 0.9 + (0.3 + 0.12 * len(ks)) * n_tests))
    dodge = 0.6 if len(ks) > 1 else False
    sns.stripplot(data=sub, x="difference", y="test", hue="K", hue_order=ks, palette=colours, dodge=bool(dodge),
                  alpha=0.5, size=3.5, ax=ax, legend=False)
    sns.pointplot(data=sub, x="difference", y="test", hue="K", hue_order=ks, palette=colours, dodge=dodge,
                  errorbar=lambda v: paired_test(list(v))["ci95"], linestyle="none", markers="D", markersize=5,
                  capsize=0.15, err_kws={"linewidth": 1.2}, ax=ax, legend=False)
    for thr in sub.threshold.unique():
        ax.axvline(thr, color="black", lw=1)
    unit = "degrees" if (sub.unit == "degrees").all() else "points"
    ax.set(ylabel="", xlabel=f"paired per-seed difference a − b ({unit})")
    ax.tick_params(labelsize=9)
    ax.xaxis.label.set_size(9)
    handles = [Line2D([], [], marker="D", linestyle="none", color=colours[k], label=k) for k in ks]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(ks), fontsize=9, frameon=False,
              borderaxespad=0.2, handletextpad=0.2, columnspacing=1.0)
    fig.tight_layout()
    return fig
