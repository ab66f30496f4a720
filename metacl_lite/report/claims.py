"""A verdict on every claim of the paper: for each claim a short quote and where it stands, the statistic that tests
it, and a verdict per K, computed from results files (python -m metacl_lite run) and, for Figs. 4 and 5, from the
training logs that `TrainConfig.eval_every_epoch` and `TrainConfig.record_angles` add to `run_stream`'s output.

Within one seed every method sees the same task permutations, initial weights and batch order (`run_stream`), so
methods are compared by paired per-seed differences a − b, never by overlapping intervals. `VERDICT_RULE` is the one
rule that turns such differences into a verdict; `CLAIMS` lists the claims and `verdict_table` sums them up per K.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from ..datafiles import REPO_ROOT
from ..errors import FileFormatError
from ..metrics import mean_ci95
from .paper import paper_table
from ..lab.summary import summarize
from ..lab.store import load_results
from ..training import METHODS

CONFIRMED, REFUTED, INCONCLUSIVE, NOT_RUN = "confirmed", "refuted", "inconclusive", "not yet run"

VERDICT_RULE = ("Each test says that a paired per-seed difference a − b exceeds a threshold t (t = 0 unless the "
                "paper names a margin). **confirmed**: the 95% t-interval of the mean difference lies above t; "
                "**refuted**: it lies below t; **inconclusive**: it contains t, or there are fewer than two seeds; "
                "**not yet run**: no data. A claim made of several tests is refuted when one of its tests is, "
                "confirmed when all of them are, and inconclusive otherwise (tests not yet run left out). Each "
                "interval is at the 95% level on its own; there is no correction for the number of tests.")

LOW_K, STANDARD_K = (20, 50), (200, 500)  # "K=20, 50 can be seen as low-shot scenarios and K=200, 500 are standard"
ACROSS_K, LIVE = "across K", "live run"
REGULARISERS = ("mas", "pi", "ewc")


# ----------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------
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


def paired_test(diffs: Union[Mapping[int, float], Sequence[float]], threshold: float = 0.0) -> dict:
    """Mean of the paired differences, its 95% t-interval (lo, hi) (`metrics.mean_ci95`: t_{0.975, n-1} s / sqrt n),
    n, and n_agree: how many seeds agree with the claim (difference above `threshold`)."""
    d = np.asarray(list(diffs.values()) if isinstance(diffs, Mapping) else diffs, dtype=np.float64)
    if len(d) == 0:
        return {"mean": float("nan"), "ci95": (float("nan"), float("nan")), "n": 0, "n_agree": 0}
    mean, half = mean_ci95(d)
    return {"mean": mean, "ci95": (mean - half, mean + half), "n": len(d), "n_agree": int((d > threshold).sum())}


def verdict(test: dict, threshold: float = 0.0) -> str:
    """`VERDICT_RULE` applied to one `paired_test` (one seed has no interval, (NaN, NaN): inconclusive)."""
    if test["n"] == 0:
        return NOT_RUN
    lo, hi = test["ci95"]
    return CONFIRMED if lo > threshold else REFUTED if hi < threshold else INCONCLUSIVE


def overall(verdicts: Iterable[str]) -> str:
    """The verdict of a claim made of several tests (`VERDICT_RULE`)."""
    ran = [v for v in verdicts if v != NOT_RUN]
    if not ran:
        return NOT_RUN
    return REFUTED if REFUTED in ran else CONFIRMED if all(v == CONFIRMED for v in ran) else INCONCLUSIVE


def low_vs_standard(diffs_by_K: Mapping[int, Mapping[int, float]], low: Sequence[int] = LOW_K,
                    standard: Sequence[int] = STANDARD_K) -> dict[int, float]:
    """Per seed present at every K: the mean of its differences at the low-shot K minus their mean at the standard K
    (a paired contrast: seed s of every K starts from the same initial weights and permutations)."""
    seeds = sorted(set.intersection(*(set(diffs_by_K[K]) for K in (*low, *standard))))
    return {s: float(np.mean([diffs_by_K[K][s] for K in low]) - np.mean([diffs_by_K[K][s] for K in standard]))
            for s in seeds}


VARIANTS = {"-metacl-beta": "MetaCL-β", "-metacl-lambda": "MetaCL-λ"}


def gain_by_K(results: Mapping[int, dict], metric: str = "ACC", benchmark: str = "pmnist") -> list[dict]:
    """MetaCL's gain over its plain regulariser at every K with a results file, the paper's K and those beyond it
    (claim 4 asks whether the gain is larger at low K): for each K, regulariser and variant (MetaCL-β, MetaCL-λ), the
    `paired_test` of the per-seed difference variant − plain, its `verdict`, and the paper's own difference where
    it publishes both numbers. Rows in order of K, regulariser, variant; pairs missing from a file are left out."""
    rows = []
    for K in sorted(results):
        for imp in REGULARISERS:
            for suffix, name in VARIANTS.items():
                d = paired_differences(results[K], imp + suffix, imp, metric)
                if not d:
                    continue
                t = paired_test(d)
                rows.append({"K": K, "regulariser": imp.upper(), "variant": name, "mean": t["mean"],
                             "ci95": t["ci95"], "n": t["n"], "n_agree": t["n_agree"], "verdict": verdict(t),
                             "paper": _paper_diff(benchmark, K, imp + suffix, imp, metric)})
    return rows


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
    seeds = {int(k.split("/")[1]) for k in runs if k.split("/")[0] == a}
    return {s: stat(runs[f"{a}/{s}"]) - stat(runs[f"{b}/{s}"]) for s in sorted(seeds) if f"{b}/{s}" in runs}


# ----------------------------------------------------------------------------------------------------------------
# Evidence: the files and logs the verdicts are made from
# ----------------------------------------------------------------------------------------------------------------
#: The control runs of claim 7: every MetaCL-λ with γ set to its MetaCL-β counterpart's β ("gamma=beta"), and with
#: γ = 0 ("gamma=0"), each kept in its own results file per K (`control_file`), made with the seeds of the main file.
CONTROLS = ("gamma=beta", "gamma=0")
CONTROL_COMMAND = ("python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds} --methods {methods} "
                   "--gamma {gamma}")


def control_file(benchmark: str, K: int, control: str) -> str:
    """results/ file of a control ("gamma=beta" or "gamma=0"): the file `run --gamma` writes by default."""
    from ..lab.grid import control_file as grid_control_file

    return grid_control_file(benchmark, K, control.split("=")[1])


@dataclass
class Evidence:
    """What the verdicts are made from: results files per K, the control runs of claim 7 (control -> K -> results
    file) and the live logs of claims 5-6 ("speed", "angles" -> `run_logs`). Missing entries read "not yet run"."""

    ks: tuple
    results: dict
    controls: dict = field(default_factory=dict)
    logs: dict = field(default_factory=dict)
    benchmark: str = "pmnist"


def load_evidence(benchmark: str = "pmnist", ks: Sequence[int] = (20, 50, 200, 500),
                  folder: Optional[Path] = None) -> Evidence:
    """The results files results/<benchmark>-K<K>.json and the control files that exist (no logs)."""
    folder = Path(folder or REPO_ROOT / "results")
    results = {K: load_results(folder / f"{benchmark}-K{K}.json") for K in ks
               if (folder / f"{benchmark}-K{K}.json").exists()}
    controls = {c: {K: load_results(folder / control_file(benchmark, K, c)) for K in ks
                    if (folder / control_file(benchmark, K, c)).exists()} for c in CONTROLS}
    return Evidence(tuple(ks), results, controls, {}, benchmark)


#: The live runs of claims 5 and 6: which (MetaCL, plain) pairs are compared, and what each run records.
SPEED_PAIRS = (("metacl", "finetune"), ("pi-metacl-beta", "pi"))
ANGLE_PAIR = ("pi-metacl-beta", "pi-metacl-lambda")  # Fig. 5's example
LIVE_RUNS = {"speed": ([m for p in SPEED_PAIRS for m in p], "eval_every_epoch"),
             "angles": (list(ANGLE_PAIR), "record_angles")}


def run_logs(kind: str, K: int, n_tasks: int, seeds: Sequence[int], benchmark: str = "pmnist") -> dict:
    """Train the methods of claim 5 (kind="speed", with `eval_every_epoch`) or claim 6 ("angles", with
    `record_angles`) on a short stream, one run per method and seed: {"K", "n_tasks", "runs": {"method/seed": log}}."""
    from ..benchmarks import make_benchmark
    from ..lab.hparams import method_config
    from ..training import run_stream

    methods, record = LIVE_RUNS[kind]
    bench = make_benchmark(benchmark, K, n_tasks=n_tasks)  # permutations of seed 0, as in results files
    runs = {}
    for m in methods:
        cfg = method_config(benchmark, m, K=K, **{record: True})
        for s in seeds:
            runs[f"{m}/{s}"] = run_stream(bench, m, cfg, seed=s, show_progress=False)
    return {"K": K, "n_tasks": n_tasks, "runs": runs}


# ----------------------------------------------------------------------------------------------------------------
# Claims
# ----------------------------------------------------------------------------------------------------------------
def _label(m: str) -> str:
    return METHODS[m].label if m in METHODS else m


def _row(test: str, K, diffs: Optional[Mapping[int, float]], threshold: float = 0.0, unit: str = "points",
         paper: Optional[float] = None, note: str = "", live: bool = False) -> dict:
    t = paired_test(diffs or {}, threshold)
    return {"test": test, "K": K, "live": live, **t, "verdict": verdict(t, threshold), "threshold": threshold,
            "unit": unit, "paper": paper, "note": note, "differences": dict(diffs or {})}


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


def method_tests(pairs: Sequence[tuple], threshold: float = 0.0, ks: Optional[Sequence[int]] = None):
    """Tests on a results file: per K, the paired differences a − b of a metric; pairs are (a, b, metric)."""
    def evaluate(ev: Evidence) -> list[dict]:
        rows = []
        for K in (ev.ks if ks is None else ks):
            for a, b, metric in pairs:
                note = _missing(ev, K, (a, b))
                diffs = None if note else paired_differences(ev.results[K], a, b, metric)
                rows.append(_row(f"{_label(a)} − {_label(b)}, {metric}", K, diffs, threshold,
                                 paper=_paper_diff(ev.benchmark, K, a, b, metric), note=note))
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
        return _row(test, K, None, note=note)
    _check_control(ctl, ev.results[K], imp, control, K)
    return _row(test, K, paired_differences(ctl, lam, beta, metric, res_b=ev.results[K]))


def _check_control(ctl: dict, main: dict, imp: str, control: str, K: int) -> None:
    """A control file must hold MetaCL-λ made with the control's γ (FileFormatError otherwise)."""
    lam = f"{imp}-metacl-lambda"
    want = main["config"]["method_hparams"][f"{imp}-metacl-beta"]["beta"] if control == "gamma=beta" else 0.0
    got = ctl["config"]["method_hparams"][lam].get("gamma")
    if got != want:
        raise FileFormatError(f"the {control} control file for K = {K} holds {lam} with gamma = {got}, not {want}")


def speed_tests(pairs: Sequence[tuple] = SPEED_PAIRS):
    """Claim 5 (Fig. 4): per epoch e, per seed, the MetaCL method's accuracy on the current task after epoch e minus
    the plain method's, averaged over the tasks of the live stream."""
    def evaluate(ev: Evidence) -> list[dict]:
        log = ev.logs.get("speed")
        if log is None:
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
    """Claim 6 (Fig. 5): on the last task of the live stream (or the 0-based `task`), per seed, MetaCL-β's statistic
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
            if log is None:
                rows.append(_row(test, None, None, unit="degrees", note=LIVE_NOTE, live=True))
                continue
            last = log["n_tasks"] - 1 if task is None else task
            diffs = log_differences(log["runs"], *pair, lambda r, fn=fn, which=which: fn(r, last, which))
            rows.append(_row(test, log["K"], diffs, unit="degrees", live=True))
        return rows
    return evaluate


LIVE_NOTE = "live run not made: python -m metacl_lite notebook book/chapters/07_claims.md -p live True -o runs/"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: `evaluate(evidence)` returns one row per test and K (`paired_test` numbers, verdict,
    the paper's own difference where it has one, and a note saying what is missing when not yet run)."""

    id: str
    title: str
    quote: str  # Markdown; tests/test_claims.py checks it against the paper's LaTeX
    where: str
    statistic: str
    tests: Callable[[Evidence], list[dict]]

    def evaluate(self, ev: Union[Evidence, dict]) -> list[dict]:
        ev = ev if isinstance(ev, Evidence) else Evidence(tuple(ev), ev)
        return [{"claim": self.id, **r} for r in self.tests(ev)]


_PAIRED = "paired per-seed difference"
CLAIMS = [
    Claim("1", "MetaCL w/o reg beats fine-tune on FA and ACC",
          "MetaCL w/o *reg* demonstrates better ACC and stronger forward adaption than straightforward fine tune, "
          "with a little cost of BT",
          "Experiments, Results (Tables 1-3); Appendix D adds: \"Compared with Fine tune, MetaCL w/o *reg* always "
          "achieves better FA in all circumstances.\"",
          f"{_PAIRED} MetaCL w/o reg − fine-tune in FA and in ACC, at every K.",
          method_tests([("metacl", "finetune", "FA"), ("metacl", "finetune", "ACC")])),
    Claim("2a", "MetaCL-β beats the plain method on ACC, BT and FA",
          "after applying MetaCL algorithms on these regularization methods, all three metrics ACC, BT and FA are "
          "improved",
          "Experiments, Results (Tables 1-3)",
          f"{_PAIRED} X-MetaCL-β − X for X = MAS, PI, EWC, in ACC, BT and FA, at every K.",
          method_tests([(f"{i}-metacl-beta", i, m) for i in REGULARISERS for m in ("ACC", "BT", "FA")])),
    Claim("2b", "MetaCL-λ beats MetaCL-β on ACC (PI: also BT and FA)",
          "compared with the fixed balance strategy MetaCL-$\\beta$, the dynamic balance MetaCL-$\\lambda$ achieves "
          "comparable or better trade-off between BT and FA, and thus further improves ACC",
          "Experiments, Results (Tables 1-3); Appendix D adds: \"PI-MetaCL-$\\lambda$ significantly surpasses "
          "PI-MetaCL-$\\beta$ on Permuted MNIST datasets in all three metrics.\"",
          f"{_PAIRED} X-MetaCL-λ − X-MetaCL-β in ACC for X = MAS, PI, EWC, and in BT and FA for PI "
          "(\"comparable or better trade-off\" is no one-sided claim for the others), at every K.",
          method_tests([(f"{i}-metacl-lambda", f"{i}-metacl-beta", "ACC") for i in REGULARISERS]
                       + [("pi-metacl-lambda", "pi-metacl-beta", m) for m in ("BT", "FA")])),
    Claim("3", "PI-MetaCL-λ beats PI-MetaCL-β by over 8 ACC points at K = 50",
          "On Permuted MNIST with $K=50$, the PI-MetaCL-$\\lambda$ surpasses PI-MetaCL-$\\beta$ over 8\\% in terms "
          "of ACC",
          "Experiments, Regularization Strategy Analysis (Table 6 of Appendix D, which the text calls Table 3)",
          f"{_PAIRED} PI-MetaCL-λ − PI-MetaCL-β in ACC at K = 50, against the threshold 8.",
          method_tests([("pi-metacl-lambda", "pi-metacl-beta", "ACC")], threshold=8.0, ks=(50,))),
    Claim("4", "MetaCL's improvement is larger at low K than at standard K",
          "Compared with large size of training data, our algorithms can provide more improvement on low-shot "
          "scenarios.",
          "Experiments, Performance with Different K (Fig. 3; Appendix D, Tables 6-7; the paper's example is "
          "CIFAR-100)",
          "Per seed, the ACC improvement of each MetaCL method over its base method averaged over K = 20, 50, minus "
          "its average over K = 200, 500 (a paired contrast: seed s starts from the same weights at every K).",
          across_K_tests([("metacl", "finetune", "ACC")]
                         + [(f"{i}-metacl-{v}", i, "ACC") for i in REGULARISERS for v in ("beta", "lambda")])),
    Claim("5", "MetaCL learns faster: accuracy above the plain method's after every epoch",
          "The curves of MetaCL methods are always above the original approaches (i.e. orange, blue and green "
          "curves), which indicates faster learning speed and higher accuracy.",
          "Experiments, Learning Speed Comparison (Fig. 4; CIFAR-100 in the paper)",
          "Per seed and epoch e, the accuracy on the task being learnt after epoch e, averaged over the tasks of a "
          "short live Permuted MNIST stream: MetaCL method − plain method. Confirmed when it is at every epoch.",
          speed_tests()),
    Claim("6", "The dynamic balance gives a more stable compromise",
          "the fixed balance strategy struggles to learn current task 20 (i.e. the angle of $\\langle g_1, "
          "g_x\\rangle$ is big) and cannot provide a stable compromise",
          "Experiments, Regularization Strategy Analysis (Fig. 5: PI, Permuted MNIST, K = 50); the caption adds: "
          "\"The dynamic balance strategy can provide a more stable and better compromise.\"",
          "On the last task of a live stream, per seed, PI-MetaCL-β's spread (standard deviation over the task's "
          "outer steps) of the angles ⟨g1, gx⟩ and ⟨g2, gx⟩, and its mean ⟨g1, gx⟩, minus PI-MetaCL-λ's.",
          angle_tests()),
    Claim("7", "The projection's own effect (controls)",
          "With the dynamic balance strategy, the MetaCL-$\\lambda$ generally outperforms the fixed balance method.",
          "Experiments, Regularization Strategy Analysis; the tuned constants differ (MetaCL-λ adds γ to λ, "
          "MetaCL-β uses its own β), so the gain is the projection's only when the constant is held fixed",
          f"{_PAIRED} in ACC: MetaCL-λ run with γ equal to MetaCL-β's β, minus MetaCL-β (only the projection "
          "differs); and MetaCL-λ run with γ = 0 (the projection alone) minus MetaCL-β.",
          control_tests()),
]


# ----------------------------------------------------------------------------------------------------------------
# Tables and text
# ----------------------------------------------------------------------------------------------------------------
def verdict_rows(ev: Union[Evidence, dict], claims: Sequence[Claim] = tuple(CLAIMS)) -> list[dict]:
    """Every test of every claim, one row per test and K."""
    return [r for c in claims for r in c.evaluate(ev)]


def _cell(verdicts: list[str]) -> str:
    v = overall(verdicts)
    if len(set(verdicts)) == 1:
        return v
    counts = {k: verdicts.count(k) for k in (CONFIRMED, REFUTED, INCONCLUSIVE, NOT_RUN)}
    return f"{v} ({', '.join(f'{n} {k}' for k, n in counts.items() if n)})"


def _column(row: dict) -> str:
    """The summary table's column of a row: its K, "across K" (claim 4) or "live run" (claims 5-6)."""
    return LIVE if row["live"] else ACROSS_K if row["K"] == ACROSS_K else f"K = {row['K']}"


def verdict_table(ev: Union[Evidence, dict], claims: Sequence[Claim] = tuple(CLAIMS),
                  rows: Optional[list[dict]] = None):
    """Claims × K: each claim's verdict (`overall` of its tests there, with the count of each verdict when it has
    several); "–" where the claim is not made. Pass `rows` (`verdict_rows`) to avoid computing them again."""
    import pandas as pd

    rows = verdict_rows(ev, claims) if rows is None else rows
    ks = sorted({r["K"] for r in rows if not r["live"] and r["K"] != ACROSS_K})
    cols = [f"K = {K}" for K in ks] + [c for c in (ACROSS_K, LIVE) if any(_column(r) == c for r in rows)]
    table = {}
    for c in claims:
        mine = [r for r in rows if r["claim"] == c.id]
        table[c.id] = {"claim": c.title, **{col: _cell([r["verdict"] for r in mine if _column(r) == col])
                                             if any(_column(r) == col for r in mine) else "–" for col in cols}}
    return pd.DataFrame.from_dict(table, orient="index")


def _num(x: Optional[float], fmt: str = "+.2f") -> str:
    return "–" if x is None or np.isnan(x) else format(x, fmt)


def claim_markdown(claim: Claim, rows: list[dict]) -> str:
    """The generated text of one claim: the quote and where it stands, the statistic, one table row per test and K
    (mean difference, 95% interval, seeds agreeing with the claim, the paper's own difference, verdict; no table when
    nothing ran), a sentence counting the verdicts, and what to run for the tests not yet run."""
    lines = [f"> {claim.quote}", ">", f"> — {claim.where}", "", f"**Statistic.** {claim.statistic}", ""]
    verdicts = [r["verdict"] for r in rows]
    ran = [v for v in verdicts if v != NOT_RUN]
    if ran:
        lines += ["| test | K | mean difference | 95% interval | seeds for | paper | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            lo, hi = r["ci95"]
            unit = "°" if r["unit"] == "degrees" else ""
            thr = f" (vs {r['threshold']:g})" if r["threshold"] else ""
            lines.append(f"| {r['test']}{thr} | {'–' if r['K'] is None else r['K']} | {_num(r['mean'])}{unit} | "
                         f"{_num(lo)} to {_num(hi)} | {r['n_agree']}/{r['n']} | {_num(r['paper'])} | "
                         f"**{r['verdict']}** |")
        lines.append("")
    lines.append(f"Overall: **{overall(verdicts)}**. Of {len(ran)} test(s) run, {ran.count(CONFIRMED)} confirmed, "
                 f"{ran.count(REFUTED)} refuted and {ran.count(INCONCLUSIVE)} inconclusive"
                 + (f"; {len(verdicts) - len(ran)} not yet run." if len(ran) < len(verdicts) else "."))
    notes = dict.fromkeys(r["note"] for r in rows if r["verdict"] == NOT_RUN and r["note"])
    lines += ["- Not yet run: " + re.sub(r"(python -m [^;]*)", r"`\1`", n) for n in notes]  # commands as code
    return "\n".join(lines)


def differences_frame(rows: list[dict]):
    """The per-seed differences of `rows` in long form (claim, test, K column, seed, difference, threshold, unit), for
    plotting."""
    import pandas as pd

    return pd.DataFrame([{"claim": r["claim"], "test": r["test"], "K": _column(r), "seed": s, "difference": d,
                          "threshold": r["threshold"], "unit": r["unit"]}
                         for r in rows for s, d in r["differences"].items()])
