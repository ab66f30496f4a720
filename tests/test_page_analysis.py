"""Chapter 8's records (metacl_lite.publish.page_analysis): worked out by hand on small inputs, and pinned on the committed
results files to the numbers the chapter showed before its words moved into Markdown (issue 35 item 1)."""
import math

import pandas as pd
import pytest

from metacl_lite.data.specs import SPECS
from metacl_lite.findings import stats as S
from metacl_lite.lab import lambda_story as L
from metacl_lite.publish import page_analysis as A
from metacl_lite.vocab import PAPER_REGULARISERS


def test_listing():
    assert [A.listing([]), A.listing([20]), A.listing([20, 50]), A.listing([1, 5, 10])] == \
        ["", "20", "20 and 50", "1, 5 and 10"]


def test_gain_table_by_hand():
    rows = [{"K": 1, "regulariser": "MAS", "variant": "MetaCL-β", "mean": -0.5, "verdict": S.REFUTED},
            {"K": 20, "regulariser": "MAS", "variant": "MetaCL-β", "mean": 1.25, "verdict": S.CONFIRMED},
            {"K": 50, "regulariser": "MAS", "variant": "MetaCL-β", "mean": 0.3, "verdict": S.INCONCLUSIVE},
            {"K": 1, "regulariser": "MAS", "variant": "MetaCL-λ", "mean": 0.1, "verdict": S.INCONCLUSIVE}]
    t = A.gain_table(rows)
    assert t.to_dict("records") == [
        {"variant over plain": "MetaCL-β over MAS", "gain at K": "20", "loss at K": "1",
         "largest mean gain (points)": "+1.2", "at K": 20},
        {"variant over plain": "MetaCL-λ over MAS", "gain at K": "–", "loss at K": "–",
         "largest mean gain (points)": "+0.1", "at K": 1}]


def _speed(pair, epoch, mean, lo, hi, verdict):
    return {"test": f"{pair}, accuracy after epoch {epoch}", "mean": mean, "ci95": (lo, hi), "verdict": verdict}


def test_speed_tables_by_hand():
    rows = [_speed("A − B", 1, 2.0, 1.0, 3.0, S.CONFIRMED), _speed("A − B", 2, -0.5, -1.0, 0.1, S.INCONCLUSIVE),
            _speed("A − B", 3, -1.0, -1.5, -0.5, S.REFUTED)]
    assert A.speed_table(rows).to_dict("records") == [
        {"a − b": "A − B", "epoch 1": "+2.0 (confirmed)", "epoch 2": "−0.5 (inconclusive)", "epoch 3": "−1.0 (refuted)"}]
    assert A.speed_ends_table(rows).to_dict("records") == [
        {"a − b": "A − B", "confirmed at epochs": "1", "refuted at epochs": "3", "inconclusive at epochs": "2",
         "after epoch 1 (95% interval)": "+2.0 (+1.0 to +3.0)", "after epoch 3 (95% interval)": "−1.0 (−1.5 to −0.5)"}]


def test_angle_record_by_hand():
    idx = pd.MultiIndex.from_tuples([("task 2", "B"), ("task 2", "L"), ("task 5", "B"), ("task 5", "L")],
                                    names=["task", "method"])
    summary = pd.DataFrame({"mean ∠(g1, gx)": [10.0, 12.0, 40.0, 20.0]}, index=idx)
    t = lambda mean, v: {"mean": mean, "ci95": (mean - 1, mean + 1), "verdict": v}  # noqa: E731
    tests = {1: [t(0.0, S.INCONCLUSIVE), t(0.0, S.INCONCLUSIVE), t(-2.0, S.REFUTED)],
             4: [t(9.0, S.CONFIRMED), t(0.0, S.INCONCLUSIVE), t(20.0, S.CONFIRMED)]}
    r = A.angle_record(summary, tests, 5, "B", "L")
    assert (r["b_first"], r["b_last"], r["b_growth"], r["l_growth"]) == ("10.0", "40.0", "+30.0", "+8.0")
    assert (r["mean_first"], r["mean_first_lo"], r["mean_first_verdict"]) == ("−2.0", "−3.0", S.REFUTED)
    assert (r["mean_last"], r["spread_last"], r["spread_last_hi"]) == ("+20.0", "+9.0", "+10.0")
    assert r["b_growth_value"] - r["l_growth_value"] == pytest.approx(22.0)


TUNING = {"grid": {"mas": {"param": "beta", "values": [0.1, 1.0, 10.0], "mean_val_acc": [50.0, 49.5, 30.0]},
                   "mas-metacl-beta": {"param": "beta", "values": [0.1, 1.0, 10.0], "mean_val_acc": [52.0, 40.0, 32.0]},
                   "mas-metacl-lambda": {"param": "gamma", "values": [0.0, 0.1, 1.0],
                                         "mean_val_acc": [51.0, 50.5, 50.2]}}}


def test_sensitivity_by_hand():
    sens = A.sensitivity_frame(TUNING)
    assert list(sens.variant.unique()) == ["fixed β", "fixed β (MetaCL)", "dynamic λ (+γ)"]
    assert sens["β or γ"].tolist()[-3:] == [1e-3, 0.1, 1.0]  # γ = 0 drawn at 1e-3
    assert A.sensitivity_table(sens).to_dict("list") == {
        "method": ["MAS", "MAS-MetaCL-β", "MAS-MetaCL-λ"], "tunes": ["β", "β", "γ"], "best ACC": ["50.0", "52.0", "51.0"],
        "range": ["20.0", "20.0", "0.8"], "near best": ["2 of 3", "1 of 3", "3 of 3"]}
    [r] = A.sensitivity_by_regulariser(sens).to_dict("records")
    assert (r["regulariser"], r["γ"], r["β (plain)"], r["β (MetaCL-β)"], r["wider"]) == ("MAS", pytest.approx(0.8),
                                                                                        20.0, 20.0, True)
    assert r["ratio"] == pytest.approx(0.04)


def test_tuned_steps_and_table_by_hand():
    chosen = pd.DataFrame({1: [1.0, 10.0, 3.0], 5: [0.1, 10.0, float("nan")], 10: [0.1, 1.0, 1.0]},
                          index=pd.Index(["a", "b", "c"], name="method"))
    edge = chosen.notna() & False
    edge.loc["a", 10] = True
    assert A.tuned_steps(chosen).to_dict("records") == [
        {"K": "1 to 5", "lower": 1, "higher": 0, "unchanged": 1, "methods": 2},
        {"K": "5 to 10", "lower": 1, "higher": 0, "unchanged": 1, "methods": 2}]
    assert A.tuned_table(chosen, edge, [5, 10]).to_dict("list") == {
        "method": ["a", "b", "c"], "K = 5": ["0.1", "10", "–"], "K = 10": ["0.1 (edge)", "1", "1"]}


def test_pct_range_by_hand():
    f = pd.DataFrame({"K": [20, 20, 50, 50], "regulariser": ["MAS"] * 4, "x": [0.3, 0.32, 1.0, 1.0]})
    assert A.pct_range(f, "x") == "31–100%"
    assert A.pct_range(f[f.K == 50], "x") == "100%"


# ---------------------------------------------------------------------------------------------------------------
# Pinned on the committed files: the numbers chapter 8 showed (built at HEAD before the move, compared as text)
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results():
    return A.pmnist_results(SPECS["pmnist"].all_Ks)


def test_fig3_ends_on_the_committed_files(results):
    ends = A.fig3_ends({K: results[K] for K in SPECS["pmnist"].paper_Ks})
    assert {K: (e["best"], e["worst"], e["seeds"]) for K, e in ends.items()} == {
        20: ("mas-metacl-lambda", "metacl", 10), 50: ("mas-metacl-beta", "metacl", 10),
        200: ("mas-metacl-lambda", "metacl", 10), 500: ("mas-metacl-beta", "metacl", 10)}
    assert all(e["lambda_above"] == list(PAPER_REGULARISERS) and e["lambda_below"] == [] for e in ends.values())
    assert A.fig3_table(ends).iloc[0].tolist() == [20, 10, "MAS-MetaCL-λ (55.8%)", "MetaCL, w/o reg (47.6%)", "48.0%"]
    assert A.seeds_by_K(results, [1, 5, 10]) == [5] and A.seeds_by_K(results, [20, 50, 200, 500]) == [10]


def test_story_on_the_committed_file():
    doc = L.load_story()
    rec = A.story_record(doc)
    assert (rec["streams"], rec["seeds"], rec["short"], rec["unmeasured"], rec["minutes"]) == (
        "K = 20 on 20 tasks, K = 50 on 20 tasks, K = 200 on 3 tasks", "0 and 1", [200], "500", "31")
    n = A.story_numbers(L.story_frame(doc))
    assert {k: n[k] for k in ("tuned_frac_lambda_pos", "tuned_frac_lambda_gt_gamma", "tuned_frac_step_against_g2",
                              "zero_frac_step_against_g2", "beta_frac_step_against_g2", "zero_frac_increase",
                              "zero_frac_increase_along_g", "tuned_frac_increase", "beta_frac_increase",
                              "ratio_min", "ratio_max")} == {
        "tuned_frac_lambda_pos": "31–100%", "tuned_frac_lambda_gt_gamma": "3–99%",
        "tuned_frac_step_against_g2": "46–100%", "zero_frac_step_against_g2": "100%",
        "beta_frac_step_against_g2": "42–100%", "zero_frac_increase": "100%", "zero_frac_increase_along_g": "88–100%",
        "tuned_frac_increase": "57–100%", "beta_frac_increase": "47–100%", "ratio_min": "0.19", "ratio_max": "7.3"}
    assert n["lambda_larger"] == [(20, "MAS"), (20, "PI"), (50, "PI"), (200, "MAS"), (200, "PI")]
    assert (n["g_against"], n["pairs"], n["within"], n["higher"], n["lower"], n["zero_acc_higher"], n["seeds_n"]) == \
        (0, 9, 6, 3, 0, 0, 2)
    assert math.isclose(n["zero_rise_min"], 1.0) and n["tuned_rise_min"] < 0.95
