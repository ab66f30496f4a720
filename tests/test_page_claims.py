"""The claims' records (`metacl_lite.publish.page_claims`, `page_intro`): the records and tables that the intro and
chapter 7 glue into their Markdown (issue 35 item 1). Worked by hand on small records and on the hand-made claim 2b of
`test_claims_parts`, then pinned on the committed evidence to the numbers the two pages showed before their words
moved into Markdown."""
from __future__ import annotations

import math

import pytest

from metacl_lite.findings import claims as C, evidence as E, stats as S
from metacl_lite.publish import formatting as F, page_claims as K, page_intro as I
from metacl_lite.report.targets import TARGET_ACC_GAP

from test_claims_parts import _claim2b


def _head(**kw):
    """A `claims.headline` record with the fields `number_behind` reads."""
    return {"test": "A − B, BT", "K": 20, "mean": -0.77, "threshold": 0.0, "unit": "points", "p_holm": 0.0021, **kw}


# ---------------------------------------------------------------------------------------------------------------
# Small records, by hand
# ---------------------------------------------------------------------------------------------------------------
def test_pts_has_a_real_minus_its_unit_and_a_dash_for_none():
    assert F.pts(-0.77) == "−0.8 pts"
    assert F.pts(11.326, "degrees") == "+11.3°"
    assert F.pts(-0.4, fmt="+.2f") == "−0.40 pts"
    assert F.pts(None) == F.pts(math.nan) == "–"


def test_number_behind_names_the_test_its_K_threshold_and_holm_p():
    assert K.number_behind(_head()) == "A − B, BT at K = 20: −0.8 pts, p(Holm) 0.002"
    assert K.number_behind(_head(threshold=8.0, mean=0.45, p_holm=1e-5)) == \
        "A − B, BT at K = 20: +0.5 pts against 8, p(Holm) < 0.001"
    assert K.number_behind(_head(K=None)) == "A − B, BT: −0.8 pts, p(Holm) 0.002"  # across K: its name says so
    assert K.number_behind(_head(mean=None)) == "–"


def test_part_counts_and_parts_list():
    bt = {"part": "BT", "verdict": S.REFUTED, "n": 3, S.CONFIRMED: 0, S.REFUTED: 2, S.INCONCLUSIVE: 1}
    fa = {"part": "FA", "verdict": S.CONFIRMED, "n": 4, S.CONFIRMED: 4, S.REFUTED: 0, S.INCONCLUSIVE: 0}
    assert K.part_counts(bt) == "2 of 3 refuted, 1 inconclusive"
    assert K.part_counts(fa) == "4 of 4 confirmed"
    h = {"parts": [bt, fa]}
    assert K.parts_list(h) == "BT (2 of 3 refuted, 1 inconclusive), FA (4 of 4 confirmed)"
    assert K.parts_list(h, verdicts=True) == "BT refuted (2 of 3 refuted, 1 inconclusive); FA confirmed (4 of 4 confirmed)"


def test_records_of_qualifiers():
    o = {"test": "A − B, ACC", "K": 20, "mean": -0.4, "unit": "points", "n_agree": 3, "n": 10, "paper": -1.46,
         "p_holm": 0.187}
    assert K.other_way_record(o) == {"test": "A − B, ACC", "at_K": " at K = 20", "mean": "−0.40 pts",
                                     "seeds": "3 of 10"}
    assert K.paper_against_record(o, "pmnist") == {"test": "A − B, ACC", "at_K": " at K = 20", "table": "Table 1",
                                                   "paper": "−1.5 pts", "ours": "−0.40 pts", "p_holm": "0.187"}
    assert K.paper_against_record({**o, "K": None}, "pmnist")["table"] == "tables"


def test_glue_record_glues_shown_values_only(monkeypatch):
    import myst_nb

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.setdefault(name, (value, display)))
    F.glue_record({"c1_verdict": S.REFUTED, "c1_n": 5, "c1_mean": 0.5, "c1_bounded": True, "c1_metrics": ["a"],
                   "c1_none": None})
    assert glued == {"c1_verdict": (S.REFUTED, False), "c1_n": (5, False), "c1_mean": (0.5, False)}


def test_seeds_record_formats_seed_power():
    pw = {"n": 10, "ns": [10], "m": 19, "sd": 0.95, "alpha": 0.05, "power": 0.8,
          10: {"t": 2.2621, "sign_p": 2 / 2 ** 10, "effect": 0.996, "effect_holm": 1.6310}}
    assert K.seeds_record(pw) == {
        "n": 10, "m": 19, "alpha": "0.05", "sign_p": "0.00195", "t": "2.26", "effect": "1.00", "effect_holm": "1.63",
        "sd": "0.95", "effect_pts": "0.95", "effect_holm_pts": "1.55", "power": "80%", "one_in": 5,
        "reaches_alpha": True, "reaches_holm": True}  # 0.00195 < 0.05 / 19 = 0.00263
    assert K.seeds_record({**pw, 10: {**pw[10], "sign_p": 0.004}})["reaches_holm"] is False


def test_logs_record_names_the_streams_and_their_source():
    logs = {"source": {"kind": "file", "path": "results/d.json", "command": "python -m metacl_lite dynamics"},
            "speed": {"K": 20, "n_tasks": 10, "seeds": [0, 1]}}
    assert K.logs_record(logs) == {"source": "read from `results/d.json`, made by `python -m metacl_lite dynamics`",
                                   "speed_K": 20, "speed_tasks": 10, "speed_seeds": 2}
    assert K.logs_record({"source": {"kind": "live"}})["source"].startswith("trained on this page")


def _excluded(kind, K_, counted=False, verdict=S.REFUTED, **ex):
    return {"test": "X − Y, ACC", "K": K_, "threshold": 0.0, "counted": counted, "verdict": verdict, "n": 10,
            "excluded": {"kind": kind, **ex}}


def test_beyond_record_and_repeats_table():
    rows = [_excluded("beyond", 50, scope=C.MAIN, ks=(20,)), _excluded("beyond", 200, verdict=S.CONFIRMED,
                                                                       scope=C.MAIN, ks=(20,)),
            _excluded("beyond", 500, verdict=S.NOT_RUN, scope=C.MAIN, ks=(20,)),
            _excluded("repeats", 20, verdict=S.CONFIRMED, same={"configuration": {"gamma": 0.1}, "matrices": 10},
                      file="results/pmnist-K20.json", test="X − Y, ACC", claim="2b"),
            _excluded("repeats", 500, same={"matrices": 10}, file="results/pmnist-K500.json", test="X − Y, ACC",
                      claim="2b"),
            {**_excluded("beyond", 20), "counted": True}]
    assert K.beyond_record(rows) == {"n": 3, "ks": "50, 200, 500", "raw_counts": "1 confirmed, 1 refuted, 0 inconclusive",
                                     "scope": C.MAIN, "stated": "20", "others": 2}
    table = K.repeats_table(rows)
    assert table.to_dict("records") == [
        {"test": "X − Y, ACC", "K": 20, "raw": S.CONFIRMED, "same configuration": "gamma = 0.1",
         "same accuracy matrices": "10 seeds", "repeats": "X − Y, ACC of results/pmnist-K20.json (claim 2b)"},
        {"test": "X − Y, ACC", "K": 500, "raw": S.REFUTED, "same configuration": "–",
         "same accuracy matrices": "10 seeds", "repeats": "X − Y, ACC of results/pmnist-K500.json (claim 2b)"}]


# ---------------------------------------------------------------------------------------------------------------
# The hand-made claim 2b (`test_claims_parts._claim2b`: per-seed differences and p-values worked out there)
# ---------------------------------------------------------------------------------------------------------------
def test_verdict_record_of_claim_2b():
    """Holm decides PI's three tests (ACC, FA confirmed; BT refuted), leaves EWC's (confirmed raw) and MAS's
    undecided: refuted, its clearest refutation PI's BT (-10, -12, -14: mean -12, p 0.0091, Holm 3 x = 0.027)."""
    assert K.verdict_record(_claim2b()) == {
        "verdict": S.REFUTED, "raw": S.REFUTED, "n": 5, "not_run": 0,
        "holm": "2 confirmed, 1 refuted, 2 inconclusive", "raw_counts": "3 confirmed, 1 refuted, 1 inconclusive",
        "behind_test": "PI-MetaCL-λ − PI-MetaCL-β, BT", "behind_column": "K = 20", "behind_mean": "−12.00",
        "behind_p": "0.027", "by_K": ""}  # one K: no verdict per K


def test_tests_table_of_claim_2b():
    """Rows as the chapter shows them: PI's ACC 10, 11, 12 (mean 11, sd 1: 95% half-width 4.3027/sqrt 3 = 2.484;
    p 0.0028, Holm 5 x = 0.014); EWC's ACC 2, 3, 4 confirmed raw, undecided with Holm (2 x 0.0351 = 0.070)."""
    table = K.tests_table(_claim2b())
    assert list(table.columns) == ["test", "K", "verdict: Holm / raw", "mean difference [95% interval]", "seeds for",
                                   "paper", "p (Holm)"]
    pi, ewc = table.iloc[1].to_dict(), table.iloc[2].to_dict()
    assert pi == {"test": "PI-MetaCL-λ − PI-MetaCL-β, ACC", "K": 20, "verdict: Holm / raw": "**confirmed** / confirmed",
                  "mean difference [95% interval]": "+11.00 [+8.52, +13.48]", "seeds for": "3/3", "paper": "+1.90",
                  "p (Holm)": "0.003 (0.014)"}
    assert (ewc["verdict: Holm / raw"], ewc["mean difference [95% interval]"], ewc["p (Holm)"]) == (
        "**inconclusive** / confirmed", "+3.00 [+0.52, +5.48]", "0.035 (0.070)")


def test_a_test_not_counted_reads_so_without_a_holm_p():
    row = {**_claim2b()[1], "counted": False, "holm": "not counted"}
    cells = K.tests_table([row]).iloc[0]
    assert (cells["verdict: Holm / raw"], cells["p (Holm)"]) == ("not counted / confirmed", "0.003")


# ---------------------------------------------------------------------------------------------------------------
# The committed evidence: the numbers the intro and chapter 7 showed before their words moved into Markdown
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def committed():
    ev = E.load_evidence("pmnist")
    rows = C.verdict_rows(ev)
    return ev, rows, {h["claim"]: h for h in C.headline(rows)}


def test_committed_summary(committed):
    _, _, heads = committed
    table = K.summary_table(heads.values())
    assert table["#"].tolist() == [f"{{ref}}`{c.id} <claim-{c.id}>`" for c in C.CLAIMS]
    behind = dict(zip([c.id for c in C.CLAIMS], table["the test behind it"]))
    assert behind["2a"] == "EWC-MetaCL-β − EWC, BT at K = 20: −0.8 pts, p(Holm) 0.002"
    assert behind["3"] == "PI-MetaCL-λ − PI-MetaCL-β, ACC at K = 50: +0.4 pts against 8, p(Holm) < 0.001"
    assert behind["4"] == "MAS-MetaCL-λ − MAS, ACC: K 20, 50 minus K 200, 500: +1.0 pts, p(Holm) 0.066"
    assert behind["6"] == "PI-MetaCL-β − PI-MetaCL-λ, mean ⟨g1, gx⟩ on the last task at K = 50: +11.3°, p(Holm) < 0.001"
    assert K.head_record(heads["2b"])["parts"] == \
        "ACC (6 of 6 inconclusive), BT (1 of 4 refuted, 3 inconclusive), FA (2 of 4 confirmed, 1 refuted, 1 inconclusive)"
    assert [K.head_record(heads[c])["part_kind"] for c in ("1", "5", "6", "7")] == [
        "metric", "method pair", "statistic", "control"]
    assert K.verdicts(heads.values()) == {"1": S.INCONCLUSIVE, "2a": S.REFUTED, "2b": S.REFUTED, "3": S.REFUTED,
                                         "4": S.INCONCLUSIVE, "5": S.CONFIRMED, "6": S.CONFIRMED, "7": S.REFUTED}


def test_committed_claim_records(committed):
    ev, rows, heads = committed
    mine = {c.id: [r for r in rows if r["claim"] == c.id] for c in C.CLAIMS}
    seven = K.verdict_record(mine["7"])
    assert (seven["n"], seven["holm"], seven["raw_counts"], seven["behind_mean"], seven["by_K"]) == (
        19, "0 confirmed, 14 refuted, 5 inconclusive", "0 confirmed, 17 refuted, 2 inconclusive", "−12.77",
        "K = 20 refuted / refuted; K = 50 refuted / refuted; K = 200 refuted / refuted; K = 500 refuted / refuted")
    assert K.verdict_record(mine["5"])["behind_column"] == C.LIVE
    assert K.beyond_record(mine["1"]) == {"n": 3, "ks": "50, 200, 500", "raw_counts": "0 confirmed, 3 refuted, "
                                          "0 inconclusive", "scope": C.MAIN, "stated": "20", "others": 0}
    # K = 500's control repeats the main file's runs in its configuration too since the one-time migration wrote
    # train.precision (float32, as every file was made) into the main file, which lacked it ("–" before)
    assert K.repeats_table(mine["7"])["same configuration"].tolist() == ["gamma = 0.1", "gamma = 100", "gamma = 30",
                                                                        "gamma = 30", "gamma = 30"]
    assert K.largest_angles(ev) == {"cap": "90", "lam": "89.6", "beta": "115.6", "lam_label": "PI-MetaCL-λ",
                                    "beta_label": "PI-MetaCL-β", "bounded": True}
    t2 = K.task2_record(ev)
    assert [(t2[f"verdict{i}"], t2[f"mean{i}"]) for i in range(3)] == [
        (S.REFUTED, "−1.77°"), (S.CONFIRMED, "+4.78°"), (S.REFUTED, "−5.13°")] and (t2["decided"], t2["n"]) == (3, 3)
    assert K.holm_changes(heads.values(), rows) == {"changed": [], "n": 68, "undone": 8}
    assert K.seeds_record(C.seed_power(rows))["effect_holm_pts"] == "1.55"


def test_committed_basis_and_gaps(committed):
    ev, _, _ = committed
    assert I.seeds_of(ev) == {"files": {20: 10, 50: 10, 200: 10, 500: 10}, "logs": {"speed": 10, "angles": 10}}
    assert K.files_table(ev.results)["command"].iloc[0] == "`python -m metacl_lite run --benchmark pmnist --K 20 " \
                                                          "--seeds 10`"
    assert I.gaps_to_paper("pmnist", TARGET_ACC_GAP) == {
        "near": {20: "1.7"}, "far": {50: "3.2", 200: "3.2", 500: "6.3"},
        "without": {"Split CIFAR-100": "Table 2", "Split CUB-200": "Table 3"}, "partly": []}
    assert K.quote(C.CLAIMS[0]) == f"> {C.CLAIMS[0].quote}\n>\n> — {C.CLAIMS[0].where}"


def test_table_md_keeps_cells_as_written():
    import pandas as pd

    md = F.table_md(pd.DataFrame({"#": ["{ref}`1 <claim-1>`"], "K": ["020"], "v": ["**refuted** / refuted"]})).data
    assert md.splitlines()[0].split("|")[1:-1] == [" #                  ", " K   ", " v                     "]
    assert "| {ref}`1 <claim-1>` | 020 | **refuted** / refuted |" in md  # no index, "020" not read as a number


def test_committed_verdict_tables(committed):
    """Chapter 7's verdict table per claim, built from the registry: the rows each claim has, and the words the
    chapter showed in its paragraph under each claim's table before the table replaced it."""
    ev, rows, heads = committed
    tables = {c.id: K.verdict_table(c, [r for r in rows if r["claim"] == c.id], heads[c.id], ev.benchmark)
              for c in C.CLAIMS}
    cells = {c: dict(zip(t.iloc[:, 0], t.iloc[:, 1])) for c, t in tables.items()}
    assert [t.columns[0] for t in tables.values()] == [f"Claim {c.id}" for c in C.CLAIMS]
    base = ["verdict, Holm / raw", "tests counted", "test behind it"]
    assert {c: list(v)[3:] for c, v in cells.items()} == {
        "1": ["by K, Holm / raw", "by metric, Holm", "other way, undecided", "not counted"],
        "2a": ["by metric, Holm", "not counted"],
        "2b": ["by K, Holm / raw", "by metric, Holm", "paper against it", "not counted"], "3": [],
        "4": ["other way, undecided", "paper against it"], "5": ["by method pair, Holm"], "6": ["by statistic, Holm"],
        "7": ["by K, Holm / raw", "by control, Holm", "not counted"]}
    assert all(list(v)[:3] == base for v in cells.values())
    assert cells["2a"]["verdict, Holm / raw"] == "**refuted** / refuted"
    assert cells["7"]["tests counted"] == "19: with Holm 0 confirmed, 14 refuted, 5 inconclusive; raw 0 confirmed, " \
                                          "17 refuted, 2 inconclusive"
    assert cells["2a"]["test behind it"] == "EWC-MetaCL-β − EWC, BT, K = 20: −0.77, Holm p 0.002"
    assert cells["1"]["other way, undecided"] == "MetaCL, w/o reg − Fine tune, ACC at K = 20: −0.40 pts, 3 of 10 seeds " \
                                                 "for it"
    assert cells["2b"]["paper against it"] == "BT: PI-MetaCL-λ − PI-MetaCL-β, BT at K = 20: paper's Table 1 " \
                                              "−1.5 pts, ours −0.13 pts, p(Holm) 1.000"
    assert cells["1"]["not counted"] == "3 at K = 50, 200, 500, raw 0 confirmed, 3 refuted, 0 inconclusive; stated " \
                                        "at K = 20"
    assert cells["7"]["not counted"] == "5 repeated runs (below)"


def test_claims_glue_names_every_claim_of_the_registry(committed, monkeypatch):
    """`claims_glue` glues five names per claim of `claims.CLAIMS`, written out in `CLAIM_GLUE` (the figures are
    `plots.claim_differences`'s, not drawn here)."""
    from metacl_lite.report import plots

    ev, rows, heads = committed
    monkeypatch.setattr(plots, "claim_differences", lambda frame, claim: f"figure {claim}")
    glued = K.claims_glue(rows, heads, ev.benchmark)
    assert list(K.CLAIM_GLUE) == [c.id for c in C.CLAIMS]
    assert list(glued) == [n for names in K.CLAIM_GLUE.values() for n in names]
    assert glued["fig_claim_2b"] == "figure 2b" and glued["verdict_5"] == S.CONFIRMED
    assert glued["verdict_table_3"].data.startswith("| Claim 3 ")
    monkeypatch.setattr(K, "CLAIM_GLUE", {c: v for c, v in K.CLAIM_GLUE.items() if c != "7"})
    with pytest.raises(ValueError, match="CLAIM_GLUE names claims"):
        K.claims_glue(rows, heads, ev.benchmark)


def test_the_intro_glues_what_it_showed(committed):
    ev, rows, heads = committed
    glued = I.findings_glue(heads, K.largest_angles(ev), K.task2_record(ev), I.seeds_of(ev),
                            I.gaps_to_paper("pmnist", TARGET_ACC_GAP), ev.benchmark, TARGET_ACC_GAP)
    assert (glued["c2a_behind"], glued["c6_lam"], glued["gap_500"], glued["files_seeds"]) == (
        "EWC-MetaCL-β − EWC, BT at K = 20: −0.8 pts, p(Holm) 0.002", "89.6", "6.3", 10)
    assert glued["c7_other_counts"] == "4 of 7 refuted, 3 inconclusive"
