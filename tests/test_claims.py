"""The claims machinery (metacl_lite.report: claims, stats, evidence) on hand-made results files and logs whose statistics are worked out by
hand here, and the verdict rule: the verdict must follow the data (swap the methods: confirmed becomes refuted; add
noise: inconclusive)."""
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from metacl_lite.findings import claims as C, evidence as E, stats as S
from metacl_lite.errors import FileFormatError

REPO_ROOT = Path(__file__).resolve().parents[1]
TEX = REPO_ROOT.parent / "shared" / "paper" / "metacl_aaai2020.tex"

T2 = 4.302653  # t_{0.975} with 2 degrees of freedom (statistical tables)
HALF_SD1_N3 = T2 / math.sqrt(3)  # 95% half-width of three differences with standard deviation 1: 2.484138
FT = [(60, 50, 60)] * 3  # ACC 55, BT -10, FA 10 on each seed


def _res(K, mats, seeds=(0, 1, 2), hparams=None):
    """A results file of a 2-task stream: mats[method][i] = (x, y, z) for seed seeds[i] gives the accuracy matrix
    [[x, -], [y, z]]. Every reference accuracy is 50, so (metrics.py with n = 2) ACC = (y + z)/2, BT = y - x and
    FA = (x + z)/2 - 50."""
    runs = {f"{m}/{s}": {"acc_matrix": [[x, None], [y, z]]} for m, v in mats.items() for s, (x, y, z) in zip(seeds, v)}
    return {"kind": "results", "schema": 2,
            "config": {"benchmark": "pmnist", "K": K, "n_tasks": 2, "seeds": list(seeds), "methods": list(mats),
                       "method_hparams": hparams or {}},
            "runs": runs, "references": {str(s): {"acc": [50.0, 50.0]} for s in seeds}, "oracle": {}}


def _acc(values):
    """Matrices whose ACC is each of `values` (y = z = value) and BT = 0."""
    return [(v, v, v) for v in values]


def _close(row, mean, lo, hi, n, n_agree, verdict):
    assert (row["mean"], *row["ci95"]) == pytest.approx((mean, lo, hi), abs=1e-5)
    assert (row["n"], row["n_agree"], row["verdict"]) == (n, n_agree, verdict)


# ---------------------------------------------------------------------------------------------------------------
# Statistics and the verdict rule
# ---------------------------------------------------------------------------------------------------------------
def test_paired_differences_match_seeds_by_number():
    # finetune ran seeds 0-2, metacl seeds 1-3: only seeds 1 and 2 pair up
    res = _res(20, {"finetune": FT}, seeds=(0, 1, 2, 3))
    res["runs"].update({"metacl/1": {"acc_matrix": [[62, None], [53, 62]]},  # ACC 57.5, BT -9, FA 12
                        "metacl/2": {"acc_matrix": [[63, None], [54, 63]]},  # ACC 58.5, BT -9, FA 13
                        "metacl/3": {"acc_matrix": [[70, None], [70, 70]]}})
    res["config"]["methods"].append("metacl")
    assert S.paired_differences(res, "metacl", "finetune", "ACC") == {1: 2.5, 2: 3.5}
    assert S.paired_differences(res, "metacl", "finetune", "BT") == {1: 1.0, 2: 1.0}
    assert S.paired_differences(res, "metacl", "finetune", "FA") == {1: 2.0, 2: 3.0}
    assert S.paired_differences(res, "metacl", "ewc", "ACC") == {}
    # b read from another file (control runs)
    other = _res(20, {"finetune": _acc([40, 41, 42])})
    assert S.paired_differences(res, "metacl", "finetune", "ACC", res_b=other) == {1: 16.5, 2: 16.5}


def test_paired_test_numbers():
    t = S.paired_test([1.0, 2.0, 3.0])  # mean 2, standard deviation 1
    assert t["mean"] == pytest.approx(2.0)
    assert t["ci95"] == pytest.approx((2 - HALF_SD1_N3, 2 + HALF_SD1_N3), abs=1e-5)
    assert (t["n"], t["n_agree"]) == (3, 3)
    assert S.paired_test({0: 1.0, 5: 2.0, 7: 3.0}, threshold=2.5)["n_agree"] == 1
    two = S.paired_test([1.0, 3.0])  # sd sqrt(2): half-width t_{0.975,1} sqrt(2) / sqrt(2) = 12.706205
    assert two["ci95"] == pytest.approx((2 - 12.706205, 2 + 12.706205), abs=1e-5)
    assert S.paired_test([])["n"] == 0


@pytest.mark.parametrize("diffs, threshold, expected", [
    ([2, 3, 4], 0, S.CONFIRMED),  # 3 +- 2.48 lies above 0
    ([1, 2, 3], 0, S.INCONCLUSIVE),  # 2 +- 2.48 covers 0, though every seed is positive
    ([-2, -3, -4], 0, S.REFUTED),
    ([3, -2, 1], 0, S.INCONCLUSIVE),  # mean 0.67, sd 2.52: the interval covers 0
    ([5], 0, S.INCONCLUSIVE),  # one seed: no interval
    ([], 0, S.NOT_RUN),
    ([10, 10.5, 11], 8, S.CONFIRMED),  # 10.5 +- 1.24 lies above 8
    ([9, 10, 11], 8, S.INCONCLUSIVE),  # 10 +- 2.48 covers 8
    ([4, 5, 6], 8, S.REFUTED),  # 5 +- 2.48 lies below 8
    ([2, 2, 2], 0, S.CONFIRMED),  # no spread: the interval is the point 2
    ([0, 0, 0], 0, S.INCONCLUSIVE),
])
def test_verdict_rule(diffs, threshold, expected):
    assert S.verdict(S.paired_test(diffs, threshold), threshold) == expected


def test_overall():
    assert S.overall([S.CONFIRMED, S.CONFIRMED, S.NOT_RUN]) == S.CONFIRMED
    assert S.overall([S.CONFIRMED, S.INCONCLUSIVE]) == S.INCONCLUSIVE
    assert S.overall([S.CONFIRMED, S.INCONCLUSIVE, S.REFUTED]) == S.REFUTED
    assert S.overall([S.NOT_RUN, S.NOT_RUN]) == S.NOT_RUN


# ---------------------------------------------------------------------------------------------------------------
# Claims on results files
# ---------------------------------------------------------------------------------------------------------------
METACL = [(62 + s, 52 + s, 62 + s) for s in range(3)]  # ACC 57+s, FA 12+s: both 2, 3, 4 above fine-tuning


def test_claim1_verdict_follows_the_data():
    claim = C.CLAIMS[0]
    fa, acc = claim.evaluate({20: _res(20, {"finetune": FT, "metacl": METACL})})
    assert (fa["test"], fa["K"], acc["test"]) == ("MetaCL, w/o reg − Fine tune, FA", 20,
                                                  "MetaCL, w/o reg − Fine tune, ACC")
    _close(fa, 3.0, 3 - HALF_SD1_N3, 3 + HALF_SD1_N3, 3, 3, S.CONFIRMED)
    _close(acc, 3.0, 3 - HALF_SD1_N3, 3 + HALF_SD1_N3, 3, 3, S.CONFIRMED)
    # the paper's Table 1: FA 3.3 - (-0.3), ACC 48.0 - 46.8
    assert fa["paper"] == pytest.approx(3.6) and acc["paper"] == pytest.approx(1.2)
    assert fa["differences"] == {0: 2.0, 1: 3.0, 2: 4.0}

    fa, acc = claim.evaluate({20: _res(20, {"finetune": METACL, "metacl": FT})})  # swapped
    _close(fa, -3.0, -3 - HALF_SD1_N3, -3 + HALF_SD1_N3, 3, 0, S.REFUTED)
    assert acc["verdict"] == S.REFUTED

    noisy = METACL[:2] + [(40, 52, 40)]  # seed 2: ACC 46, FA -10, far below fine-tuning
    fa, acc = claim.evaluate({20: _res(20, {"finetune": FT, "metacl": noisy})})
    assert fa["differences"] == {0: 2.0, 1: 3.0, 2: -20.0}
    assert (fa["verdict"], fa["n_agree"], acc["verdict"], acc["n_agree"]) == (S.INCONCLUSIVE, 2, S.INCONCLUSIVE, 2)


def test_claim2_tests_and_missing_methods():
    # MAS-MetaCL-beta (61, 51, 61) against MAS (60, 50, 60) on every seed: ACC 56 vs 55, BT -10 vs -10, FA 11 vs 10
    res = _res(20, {"mas": FT, "mas-metacl-beta": [(61, 51, 61)] * 3,
                    "mas-metacl-lambda": [(61, 48, 61)] * 3})  # ACC 54.5: 1.5 below MetaCL-beta
    rows = C.CLAIMS[1].evaluate({20: res})
    assert [r["test"] for r in rows[:3]] == ["MAS-MetaCL-β − MAS, ACC", "MAS-MetaCL-β − MAS, BT",
                                             "MAS-MetaCL-β − MAS, FA"]
    assert [(r["mean"], r["verdict"]) for r in rows[:3]] == [(1.0, S.CONFIRMED), (0.0, S.INCONCLUSIVE),
                                                             (1.0, S.CONFIRMED)]
    assert [r["verdict"] for r in rows[3:]] == [S.NOT_RUN] * 6
    assert rows[3]["missing"] == [{"kind": "runs", "K": 20, "file": "results/pmnist-K20.json",
                                   "methods": ["pi-metacl-beta", "pi"]}]
    assert (rows[3]["a"], rows[3]["b"], rows[3]["metric"]) == ("pi-metacl-beta", "pi", "ACC")
    rows_b = C.CLAIMS[2].evaluate({20: res})
    assert [r["test"] for r in rows_b] == ["MAS-MetaCL-λ − MAS-MetaCL-β, ACC", "PI-MetaCL-λ − PI-MetaCL-β, ACC",
                                           "EWC-MetaCL-λ − EWC-MetaCL-β, ACC", "PI-MetaCL-λ − PI-MetaCL-β, BT",
                                           "PI-MetaCL-λ − PI-MetaCL-β, FA"]
    assert (rows_b[0]["mean"], rows_b[0]["verdict"]) == (-1.5, S.REFUTED)


def test_claim3_is_a_threshold_claim_at_K50_only():
    beta = _acc([50, 50, 50])

    def evaluate(lam_acc):
        ev = E.Evidence((20, 50), {K: _res(K, {"pi-metacl-beta": beta, "pi-metacl-lambda": _acc(lam_acc)})
                                   for K in (20, 50)})
        return C.CLAIMS[3].evaluate(ev)

    [row] = evaluate([60, 60.5, 61])  # +10, +10.5, +11: 10.5 +- 1.24 above 8
    assert (row["K"], row["threshold"]) == (50, 8.0)
    _close(row, 10.5, 10.5 - HALF_SD1_N3 / 2, 10.5 + HALF_SD1_N3 / 2, 3, 3, S.CONFIRMED)
    assert row["paper"] == pytest.approx(8.2)  # Table 6, K = 50: 63.8 - 55.6
    assert evaluate([59, 60, 61])[0]["verdict"] == S.INCONCLUSIVE  # 10 +- 2.48 covers 8
    [row] = evaluate([54, 55, 56])  # +4, +5, +6: better, but by less than 8
    assert (row["verdict"], row["n_agree"]) == (S.REFUTED, 0)
    [row] = C.CLAIMS[3].evaluate(E.Evidence((20, 50), {20: _res(20, {})}))
    assert row["verdict"] == S.NOT_RUN
    assert row["missing"] == [{"kind": "file", "K": 50, "file": "results/pmnist-K50.json",
                               "command": "python -m metacl_lite run --benchmark pmnist --K 50"}]


def test_low_vs_standard_contrast():
    diffs = {20: {0: 3, 1: 5}, 50: {0: 1, 1: 3}, 200: {0: 0, 1: 1}, 500: {0: 2, 1: 1, 2: 9}}
    # seed 0: (3 + 1)/2 - (0 + 2)/2 = 1; seed 1: (5 + 3)/2 - (1 + 1)/2 = 3; seed 2 is not at every K
    assert S.low_vs_standard(diffs) == {0: 1.0, 1: 3.0}


def _claim4(acc_diffs):
    """Claim 4's MetaCL-vs-fine-tune row on files where MetaCL's ACC is fine-tuning's (55) + acc_diffs[K][seed]."""
    ev = E.Evidence((20, 50, 200, 500), {K: _res(K, {"finetune": FT, "metacl": _acc([55 + d for d in ds])})
                                         for K, ds in acc_diffs.items()})
    return C.CLAIMS[4].evaluate(ev)


def test_claim4_contrast_and_verdicts():
    rows = _claim4({20: [3, 5, 4], 50: [1, 3, 2], 200: [0, 1, 0], 500: [2, 1, 0]})
    row = rows[0]
    assert (row["test"], row["K"]) == ("MetaCL, w/o reg − Fine tune, ACC: K 20, 50 minus K 200, 500", C.ACROSS_K)
    assert row["differences"] == pytest.approx({0: 1.0, 1: 3.0, 2: 3.0})
    # mean 7/3, sd sqrt(4/3): half-width 4.302653 * sqrt(4/3) / sqrt(3) = 2.868435
    _close(row, 7 / 3, 7 / 3 - 2.868435, 7 / 3 + 2.868435, 3, 3, S.INCONCLUSIVE)
    assert row["paper"] == pytest.approx(-0.55)  # ((48.0-46.8) + (44.3-48.7))/2 - ((47.8-47.5) + (46.7-49.1))/2
    assert [r["verdict"] for r in rows[1:]] == [S.NOT_RUN] * 6  # no regularised methods in these files
    big_low = {20: [10, 11, 12], 50: [10, 11, 12], 200: [0, 0, 0], 500: [0, 0, 0]}
    assert _claim4(big_low)[0]["verdict"] == S.CONFIRMED
    assert _claim4({20: [0, 0, 0], 50: [0, 0, 0], 200: [10, 11, 12], 500: [10, 11, 12]})[0]["verdict"] == S.REFUTED
    del big_low[500]
    row = _claim4(big_low)[0]
    assert (row["verdict"], row["missing"]) == (S.NOT_RUN, [{
        "kind": "file", "K": 500, "file": "results/pmnist-K500.json",
        "command": "python -m metacl_lite run --benchmark pmnist --K 500"}])


def test_claim7_controls():
    hp = {"mas-metacl-beta": {"beta": 1.0}, "pi-metacl-beta": {"beta": 1000.0}}
    main = _res(20, {"mas-metacl-beta": _acc([50, 50, 50]), "pi-metacl-beta": _acc([50, 51, 52])}, hparams=hp)
    rows = C.CLAIMS[7].evaluate(E.Evidence((20,), {20: main}))
    assert len(rows) == 6 and {r["verdict"] for r in rows} == {S.NOT_RUN}
    assert rows[0]["missing"] == [{"kind": "control", "K": 20, "file": "results/pmnist-K20-control-gamma-beta.json",
                                   "command": "python -m metacl_lite run --benchmark pmnist --K 20 --seeds 3 "
                                              "--methods mas-metacl-lambda,pi-metacl-lambda --gamma beta"}]
    assert rows[2]["missing"] == [{"kind": "runs", "K": 20, "file": "results/pmnist-K20.json",
                                   "methods": ["ewc-metacl-beta"]}]
    assert rows[3]["missing"][0]["command"].endswith("--gamma 0")

    ctl = _res(20, {"pi-metacl-lambda": _acc([53, 55, 57])}, hparams={"pi-metacl-lambda": {"gamma": 1000.0}})
    rows = C.CLAIMS[7].evaluate(E.Evidence((20,), {20: main}, {"gamma=beta": {20: ctl}}))
    assert rows[1]["test"] == "PI-MetaCL-λ (γ = β) − PI-MetaCL-β, ACC"
    assert rows[1]["differences"] == {0: 3.0, 1: 4.0, 2: 5.0}
    _close(rows[1], 4.0, 4 - HALF_SD1_N3, 4 + HALF_SD1_N3, 3, 3, S.CONFIRMED)
    assert rows[0]["missing"] == [{"kind": "runs", "K": 20, "file": "results/pmnist-K20-control-gamma-beta.json",
                                   "methods": ["mas-metacl-lambda"]}]
    ctl["config"]["method_hparams"]["pi-metacl-lambda"]["gamma"] = 100.0  # not MetaCL-beta's beta
    with pytest.raises(FileFormatError, match="gamma = 100.0, not 1000.0"):
        C.CLAIMS[7].evaluate(E.Evidence((20,), {20: main}, {"gamma=beta": {20: ctl}}))


def test_gain_by_K_per_regulariser_and_variant_with_the_papers_difference():
    """Seeds give MAS 50, 51, 52 and MAS-MetaCL-β 1, 2, 3 points more (mean +2, sd 1), MetaCL-λ 1 less on every seed
    (sd 0: the interval is a point); at K = 10 the paper has no numbers, at K = 20 its MAS-MetaCL-β − MAS is
    56.9 − 55.7 = +1.2."""
    mats = {"mas": _acc([50, 51, 52]), "mas-metacl-beta": _acc([51, 53, 55]), "mas-metacl-lambda": _acc([49, 50, 51])}
    rows = C.gain_by_K({20: _res(20, mats), 10: _res(10, {m: mats[m] for m in ("mas", "mas-metacl-beta")})})
    assert [(r["K"], r["regulariser"], r["variant"]) for r in rows] == [
        (10, "MAS", "MetaCL-β"), (20, "MAS", "MetaCL-β"), (20, "MAS", "MetaCL-λ")]
    _close(rows[0], 2.0, 2.0 - HALF_SD1_N3, 2.0 + HALF_SD1_N3, 3, 3, S.INCONCLUSIVE)  # half-width 2.48 > 2
    assert rows[0]["paper"] is None and rows[1]["paper"] == pytest.approx(1.2)
    _close(rows[2], -1.0, -1.0, -1.0, 3, 0, S.REFUTED)
    assert rows[2]["paper"] == pytest.approx(57.7 - 55.7)


def test_load_evidence(tmp_path):
    (tmp_path / "pmnist-K20.json").write_text(json.dumps(_res(20, {"finetune": FT})))
    (tmp_path / "pmnist-K20-control-gamma-0.json").write_text(json.dumps(_res(20, {"finetune": FT})))
    ev = E.load_evidence("pmnist", (20, 50), tmp_path)
    assert ev.ks == (20, 50) and list(ev.results) == [20]
    assert {c: list(v) for c, v in ev.controls.items()} == {"gamma=beta": [], "gamma=0": [20]}


# ---------------------------------------------------------------------------------------------------------------
# Claims on training logs (Figs. 4 and 5)
# ---------------------------------------------------------------------------------------------------------------
def test_epoch_accuracy():
    log = {"epoch_acc": [[0, 10.0], [0, 20.0], [1, 30.0], [1, 50.0]]}
    assert S.epoch_accuracy(log).tolist() == [[10.0, 20.0], [30.0, 50.0]]


def test_claim5_per_epoch():
    ft = {"epoch_acc": [[0, 10], [0, 20], [1, 30], [1, 40]]}  # epoch means 20, 30
    runs = {}
    for s in range(3):
        runs[f"finetune/{s}"] = runs[f"pi/{s}"] = runs[f"pi-metacl-beta/{s}"] = ft
        runs[f"metacl/{s}"] = {"epoch_acc": [[0, 12 + s], [0, 22], [1, 32 + s], [1, 42]]}  # epoch means 22+s, 32
    rows = C.CLAIMS[5].evaluate(E.Evidence((20,), {}, logs={"speed": {"K": 20, "n_tasks": 2, "runs": runs}}))
    assert [r["test"] for r in rows] == [f"{p}, accuracy after epoch {e}" for p in
                                         ("MetaCL, w/o reg − Fine tune", "PI-MetaCL-β − PI") for e in (1, 2)]
    _close(rows[0], 3.0, 3 - HALF_SD1_N3, 3 + HALF_SD1_N3, 3, 3, S.CONFIRMED)
    _close(rows[1], 2.0, 2.0, 2.0, 3, 3, S.CONFIRMED)
    assert [r["verdict"] for r in rows[2:]] == [S.INCONCLUSIVE] * 2  # identical curves
    assert all(r["live"] and r["K"] == 20 for r in rows)
    rows = C.CLAIMS[5].evaluate(E.Evidence((20,), {}))
    assert [(r["verdict"], r["missing"]) for r in rows] == [
        (S.NOT_RUN, [{"kind": "logs", "command": "python -m metacl_lite dynamics"}])] * 2


def test_angles():
    nan = float("nan")
    log = {"angles": [[0, 1.0, nan, 0.0], [1, 1.0, None, 0.0], [1, 0.0, 0.5, 0.0], [1, 0.5, -1.0, 0.0],
                      [2, -1.0, -1.0, 0.0]]}
    assert S.angles_degrees(log, 1, "g1") == pytest.approx([0.0, 90.0, 60.0])
    assert S.angles_degrees(log, 1, "g2") == pytest.approx([60.0, 180.0])  # the undefined angle is left out
    assert S.angle_mean(log, 1, "g1") == pytest.approx(50.0)
    assert S.angle_spread(log, 1, "g1") == pytest.approx(math.sqrt(2100))  # (50^2 + 40^2 + 10^2) / 2
    assert S.angle_spread(log, 1, "g2") == pytest.approx(math.sqrt(7200))


def test_claim6_angles_verdict_follows_the_data():
    unsteady = {"angles": [[0, 1.0, 1.0, 0.0], [1, 1.0, 0.5, 0.0], [1, 0.0, -1.0, 0.0], [1, 0.5, -1.0, 0.0]]}
    steady = {"angles": [[0, 0.0, 0.0, 0.0], [1, 1.0, 0.0, 0.3], [1, 1.0, 0.0, 0.3], [1, 1.0, 0.0, 0.3]]}

    def rows(beta, lam):
        runs = {f"{m}/{s}": log for s in range(3) for m, log in (("pi-metacl-beta", beta), ("pi-metacl-lambda", lam))}
        return C.CLAIMS[6].evaluate(E.Evidence((50,), {}, logs={"angles": {"K": 50, "n_tasks": 2, "runs": runs}}))

    # beta on task 1: <g1,gx> 0, 90, 60 degrees (sd sqrt(2100), mean 50); <g2,gx> 60, 180, 180 (sd sqrt(4800))
    # lambda: <g1,gx> 0, 0, 0 and <g2,gx> 90, 90, 90 (no spread)
    r = rows(unsteady, steady)
    assert [x["test"] for x in r] == [
        "PI-MetaCL-β − PI-MetaCL-λ, spread of ⟨g1, gx⟩ on the last task",
        "PI-MetaCL-β − PI-MetaCL-λ, spread of ⟨g2, gx⟩ on the last task",
        "PI-MetaCL-β − PI-MetaCL-λ, mean ⟨g1, gx⟩ on the last task"]
    assert [x["mean"] for x in r] == pytest.approx([math.sqrt(2100), math.sqrt(4800), 50.0])
    assert [x["verdict"] for x in r] == [S.CONFIRMED] * 3
    assert set(C.differences_frame(r).unit) == {"degrees"}
    assert [(x["a"], x["b"], x["metric"]) for x in r] == [
        ("pi-metacl-beta", "pi-metacl-lambda", name) for name, _, _ in C.ANGLE_STATS]
    assert [x["verdict"] for x in rows(steady, unsteady)] == [S.REFUTED] * 3
    assert [x["verdict"] for x in rows(steady, steady)] == [S.INCONCLUSIVE] * 3


def test_angle_tests_on_a_named_task():
    """angle_tests(task=0) reads task 1 (0-based 0), not the last one: there beta and lambda swap roles."""
    beta = {"angles": [[0, 1.0, 0.0, 0.0], [0, 1.0, 0.0, 0.0], [1, 1.0, 0.5, 0.0], [1, 0.0, -1.0, 0.0]]}
    lam = {"angles": [[0, 1.0, 0.0, 0.0], [0, 0.0, 0.0, 0.0], [1, 1.0, 0.0, 0.0], [1, 1.0, 0.0, 0.0]]}
    runs = {f"{m}/{s}": log for s in range(3) for m, log in (("pi-metacl-beta", beta), ("pi-metacl-lambda", lam))}
    ev = E.Evidence((50,), {}, logs={"angles": {"K": 50, "n_tasks": 2, "runs": runs}})
    first, last = C.angle_tests(task=0)(ev), C.angle_tests()(ev)
    assert first[0]["test"] == "PI-MetaCL-β − PI-MetaCL-λ, spread of ⟨g1, gx⟩ on task 1"
    # task 1: beta's <g1,gx> 0, 0 (sd 0); lambda's 0, 90 (sd sqrt(4050)); the last task: beta 0, 90, lambda 0, 0
    assert first[0]["mean"] == pytest.approx(-math.sqrt(4050)) and last[0]["mean"] == pytest.approx(math.sqrt(4050))
    assert (first[0]["verdict"], last[0]["verdict"]) == (S.REFUTED, S.CONFIRMED)


# ---------------------------------------------------------------------------------------------------------------
# Tables and text
# ---------------------------------------------------------------------------------------------------------------
def p_df2(t):
    """Two-sided p-value of a t statistic with 2 degrees of freedom (closed form): 1 - t / sqrt(t^2 + 2)."""
    return 1 - abs(t) / math.sqrt(t * t + 2)


P234 = p_df2(3 * math.sqrt(3))  # differences 2, 3, 4: mean 3, sd 1, t = 3 sqrt(3): p = 0.0351


def test_headline_one_record_per_claim():
    noisy = METACL[:2] + [(62, 40, 62)]  # seed 2: ACC 51 (-4 against fine-tuning), FA 12 (+2)
    ev = E.Evidence((20, 50), {20: _res(20, {"finetune": FT, "metacl": METACL}),
                               50: _res(50, {"finetune": FT, "metacl": noisy})})
    claims = [C.CLAIMS[0], C.CLAIMS[3], C.CLAIMS[5]]
    heads = C.headline(C.verdict_rows(ev, claims), claims)
    assert [h["claim"] for h in heads] == ["1", "3", "5"]
    # claim 1 counts FA at K = 20 (2, 3, 4: p = 0.0351) and 50 (2, 3, 2: mean 7/3, sd 1/sqrt 3, t = 7, p = 0.0198)
    # and ACC at K = 20 (2, 3, 4); Holm: 3 * 0.0198, max(2 * 0.0351, ...): all inconclusive, each confirmed alone;
    # the number behind an inconclusive claim is its undecided test with the smallest adjusted p: FA at K = 50
    h = heads[0]
    assert {k: h[k] for k in ("title", "verdict", "raw", "metric", "K", "a", "b", "unit", "threshold")} == {
        "title": "MetaCL w/o reg beats fine-tune", "verdict": S.INCONCLUSIVE, "raw": S.CONFIRMED, "metric": "FA",
        "K": 50, "a": "metacl", "b": "finetune", "unit": "points", "threshold": 0.0}
    assert (h["mean"], h["p_holm"]) == pytest.approx((7 / 3, 3 * p_df2(7.0)))
    for h in heads[1:]:  # not run: no number behind the verdict
        assert (h["verdict"], h["mean"], h["metric"], h["K"]) == (S.NOT_RUN, None, None, None)


def test_claim_rows_counted_and_missing():
    claim = C.CLAIMS[0]
    rows = claim.evaluate({20: _res(20, {"finetune": FT, "metacl": METACL}), 50: _res(50, {"finetune": FT})})
    # two tests ran, both counted: p = 0.0351 each, Holm-adjusted 2p = 0.0702
    fa20, acc20, fa50, acc50 = rows
    assert (fa20["test"], fa20["K"], fa20["holm"], fa20["verdict"], fa20["n_agree"], fa20["n"]) == (
        "MetaCL, w/o reg − Fine tune, FA", 20, S.INCONCLUSIVE, S.CONFIRMED, 3, 3)
    assert (fa20["mean"], *fa20["ci95"], fa20["paper"]) == pytest.approx((3.0, 0.516, 5.484, 3.6), abs=1e-3)
    assert (fa20["p"], fa20["p_holm"]) == pytest.approx((P234, 2 * P234))
    assert (acc50["counted"], acc50["holm"], acc50["verdict"], acc50["n"]) == (False, S.NOT_COUNTED, S.NOT_RUN, 0)
    assert acc50["paper"] == pytest.approx(-4.4)
    assert acc50["excluded"] == {"kind": "beyond", "scope": C.MAIN, "ks": (20,)}
    assert (fa50["counted"], fa50["holm"], fa50["verdict"]) == (True, S.NOT_RUN, S.NOT_RUN)
    assert fa50["paper"] == pytest.approx(4.2)
    assert fa50["missing"] == [{"kind": "runs", "K": 50, "file": "results/pmnist-K50.json", "methods": ["metacl"]}]
    assert (C.claim_verdict(rows), C.claim_verdict(rows, holm=False)) == (S.INCONCLUSIVE, S.CONFIRMED)
    assert C.deciding_test(rows) is fa20  # undecided, the smallest adjusted p (ties: the first)
    rows = C.CLAIMS[5].evaluate({20: _res(20, {})})  # nothing ran
    assert {r["verdict"] for r in rows} == {S.NOT_RUN} and C.deciding_test(rows) is None
    assert rows[0]["missing"] == [C.NO_LOGS]


def test_claim_verdict_by_K():
    """With tests counted at several K, the claim's verdict per K (the chapter's "By K" line) is `claim_verdict`
    over the rows of each `column`."""
    noisy = METACL[:2] + [(62, 40, 62)]
    rows = C.CLAIMS[0].evaluate({20: _res(20, {"finetune": FT, "metacl": [(70 + s, 60 + s, 70 + s)
                                                                          for s in range(3)]}),
                                 50: _res(50, {"finetune": FT, "metacl": noisy})})
    # K = 20: +10, +11, +12 in FA and ACC (p = 0.0027 each); K = 50: FA 2, 3, 2 (p = 0.0198); adjusted 3 x 0.0027,
    # then 2 x 0.0027 and 0.0198: all three confirmed (ACC at K = 50 is not counted)
    ran = [r for r in rows if r["counted"]]
    assert [C.column(r) for r in rows] == ["K = 20", "K = 20", "K = 50", "K = 50"]
    for col in ("K = 20", "K = 50"):
        mine = [r for r in ran if C.column(r) == col]
        assert (C.claim_verdict(mine), C.claim_verdict(mine, holm=False)) == (S.CONFIRMED, S.CONFIRMED)
    # the number behind a confirmed claim is its weakest confirmation: FA at K = 50
    d = C.deciding_test(rows)
    assert (d["test"], d["K"]) == ("MetaCL, w/o reg − Fine tune, FA", 50)
    assert (d["mean"], d["p_holm"]) == pytest.approx((7 / 3, p_df2(7.0)))


def test_differences_frame():
    rows = C.CLAIMS[3].evaluate({50: _res(50, {"pi-metacl-beta": _acc([50, 50, 50]),
                                               "pi-metacl-lambda": _acc([60, 61, 62])})})
    f = C.differences_frame(rows)
    assert f.to_dict("records") == [
        {"claim": "3", "test": "PI-MetaCL-λ − PI-MetaCL-β, ACC", "K": "K = 50", "seed": s, "difference": d,
         "threshold": 8.0, "unit": "points", "counted": True} for s, d in ((0, 10.0), (1, 11.0), (2, 12.0))]


def _latex_to_markdown(tex: str) -> str:
    """The paper's text as the quotes write it: \\emph{x} -> *x*, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"\\emph\{(.*?)\}", r"*\1*", tex))


def test_quotes_are_the_papers_words():
    if not TEX.is_file():
        pytest.fail(f"the paper's LaTeX is missing: looked for {TEX} (../shared/paper/ beside the checkout)")
    text = _latex_to_markdown(TEX.read_text(encoding="utf-8"))
    lines = TEX.read_text(encoding="utf-8").splitlines()
    for c in C.CLAIMS:
        for q in [c.quote] + re.findall(r'"(.+?)"', c.where):  # the quote, and those its location adds
            assert q in text, (c.id, q)
        # the quote starts on its LaTeX line (1-based)
        assert _latex_to_markdown(lines[c.line - 1]).strip()[:30] in _latex_to_markdown(c.quote) or \
            _latex_to_markdown(c.quote)[:30] in _latex_to_markdown(lines[c.line - 1]), (c.id, c.line)


# ---------------------------------------------------------------------------------------------------------------
# The chapter
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_chapter_executes(tmp_path):
    from metacl_lite.publish.notebooks import glued_values, run_notebook

    out = run_notebook(REPO_ROOT / "book" / "chapters" / "07_claims.md",
                       {"speed_tasks": 2, "speed_seeds": 2, "angle_K": 20, "angle_tasks": 3, "angle_seeds": 2},
                       tmp_path)  # a small live run of both streams (the default reads results/dynamics-pmnist.json)
    g = glued_values(out)
    res = json.loads((REPO_ROOT / "results" / "pmnist-K50.json").read_text())
    acc = {k: float(np.mean(v["acc_matrix"][-1])) for k, v in res["runs"].items()}  # ACC: the last row's mean
    seeds = res["config"]["seeds"]
    expected = np.mean([acc[f"pi-metacl-lambda/{s}"] - acc[f"pi-metacl-beta/{s}"] for s in seeds])
    assert g["claim3_n"] == len(seeds)
    assert g["claim3_mean"] == pytest.approx(expected, abs=0.006)
    assert S.NOT_RUN not in (g["verdict_5"], g["verdict_6"])  # the live runs were made and read
    assert g["stream_id"] != E.stream_fingerprint(E.dynamics_logs())  # not the committed file's runs
