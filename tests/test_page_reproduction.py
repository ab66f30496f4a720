"""The records of the reproduction pages and the overview (publish/page_reproduction.py, page_overview.py; issue 35
item 1), pinned on the committed files to the numbers those pages showed before their words moved into Markdown,
and the one template's cells per kind of page (publish/pages.py)."""
import json

import pytest

from metacl_lite.lab.store import load, load_results
from metacl_lite.paths import REPO_ROOT
from metacl_lite.publish import formatting as F, page_overview as O, page_reproduction as P
from metacl_lite.publish import pages as N

RESULTS = REPO_ROOT / "results"


def test_setting_record_says_which_tables_a_setting_has():
    both, ours, paper = P.setting_record("pmnist", 50), P.setting_record("pmnist", 5), P.setting_record("cifar100", 50)
    assert (both["kind"], both["present"], both["paper_table"]) == ("both", True, "Table 6 (Appendix D)")
    assert both["setting"] == "Permuted MNIST, K = 50" and both["committed_file"] == "results/pmnist-K50.json"
    assert (ours["kind"], ours["paper_source"], ours["paper_table"]) == ("ours", "none published for this K", "–")
    assert (paper["kind"], paper["present"], paper["paper_table"]) == ("paper", False, "Table 7 (Appendix D)")
    assert paper["run_yourself"] == ("python -m metacl_lite notebook book/reproduce/benchmark.md -p benchmark "
                                     "cifar100 -p K 50 -o runs/")
    assert P.setting_record("pmnist", 7)["kind"] == "none"


def test_made_record_of_the_committed_files():
    """How the K = 20 and K = 10 files were made, as the pages said: wall-clock and units' own minutes, and each
    invocation's seeds and minutes."""
    k20 = P.made_record(load_results(RESULTS / "pmnist-K20.json"), "results/pmnist-K20.json")
    assert (k20["n_seeds"], k20["runs"], k20["span_whole"], k20["unit_whole"], k20["together"]) == (10, 2, "49", "98",
                                                                                                   True)
    assert k20["invocations"] == "5 seeds in 11 min, then 5 seeds in 38 min"
    assert k20["commit"] == (load_results(RESULTS / "pmnist-K20.json")["provenance"]["git_commit"])[:10]
    k10 = P.made_record(load_results(RESULTS / "pmnist-K10.json"), "results/pmnist-K10.json")
    assert (k10["runs"], k10["invocations"], k10["n_seeds"]) == (1, "5 seeds in 10 min", 5)


def test_live_record_says_whether_the_stream_is_the_papers():
    full = P.live_record("pmnist", 20, ["finetune", "metacl"], 1, 0, 0, False, None, "")
    assert (full["n_methods"], full["tasks"], full["protocol"], full["device"], full["out"]) == (
        2, 20, "the paper's", "cpu", "a temporary folder")
    assert full["labels"] == "Fine tune; MetaCL, w/o reg"
    quick = P.live_record("pmnist", 20, ["finetune"], 2, 0, 0, True, "cuda", "runs")
    assert (quick["tasks"], quick["epochs"], quick["protocol"], quick["device"], quick["out"]) == (3, 1, "not the paper's",
                                                                                                  "cuda", "runs")
    assert P.live_record("pmnist", 20, ["finetune"], 1, 0, 5, False, None, "")["protocol"] == "not the paper's"


def test_metric_tables_put_the_rows_the_paper_did_not_run_last():
    """An extension's rows (L2) come after the paper's rows and the joint oracle, in ACC, BT and FA alike, and the
    rows of the memory's files at this K (M = 1, then M = 5) after them."""
    res = load_results(RESULTS / "pmnist-K20.json")
    res["config"]["methods"] = list(res["config"]["methods"]) + ["l2"]
    res["summary"] = {**res["summary"], "l2": res["summary"]["ewc"]}
    lam = [f"{r}-MetaCL-λ-{m}" for m in ("mem", "GEM") for r in ("MAS", "PI", "EWC")]
    memory = [f"{m}, M = {M} (not in the paper)" for M, ms in
              ((1, ["A-GEM", "ER", "GEM", "MetaCL-A-GEM", *lam]), (5, ["A-GEM", "ER", "GEM", "MetaCL-A-GEM"])) for m in ms]
    for k, table in P.metric_tables("pmnist", 20, res).items():
        labels = [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]]
        assert labels[11:] == ["Joint training (oracle)", "L2 (not in the paper)"] + memory, (k, labels)
        assert labels[0] == "Fine tune"
    assert "| Method | Ours | Paper |" in P.metric_tables("pmnist", 50, load_results(RESULTS / "pmnist-K50.json"))["ACC"]
    assert P.metric_tables("cifar100", 50, None)["BT"].startswith("| Method | Paper |")
    assert P.metric_tables("pmnist", 5, load_results(RESULTS / "pmnist-K5.json"))["FA"].startswith("| Method | Ours |")


def test_interpretation_tables_and_values_follow_the_paper():
    from metacl_lite.report.interpret import interpretation

    both = interpretation(load_results(RESULTS / "pmnist-K50.json"))
    ours = interpretation(load_results(RESULTS / "pmnist-K5.json"))
    tb, to = P.interpretation_tables(both), P.interpretation_tables(ours)
    assert set(tb) == {"gaps_table", "family_table", "hparams_table", "options_table"}
    assert "gaps_table" not in to and list(to["family_table"].columns) == ["Regulariser", "Ours", "Holds (ours)"]
    v = P.interpretation_values(both)
    assert v["rho_text"] == F.minus(f"{both['rank']['rho']:.2f}") and "-" not in str(v["rho_text"])
    assert P.interpretation_values(ours)["rho_text"] == "–"
    assert "−" in F.markdown(tb["gaps_table"]) or "-" not in F.markdown(tb["gaps_table"])


def test_missing_record_of_the_settings_without_results():
    """What the CIFAR-100 and CUB pages showed: tuning at K = 50 possible (and its commands), at K = 500 not, at
    CUB's K = 10 not needed; 240 tuning runs against 55 for a run of five seeds."""
    r = P.missing_record("cifar100", 50)
    assert (r["tune_here"], r["n_tune"], r["n_run"], r["cmd_seeds"], r["val_first"], r["val_last"]) == (
        "possible", 240, 55, 5, 400, 499)
    assert r["tune_commands"] == ["python -m metacl_lite tune --benchmark cifar100 --K 50",
                                  "python -m metacl_lite run --benchmark cifar100 --K 50 --seeds 5"]
    assert (r["make_runs"], r["own_Ks"], r["beyond_Ks"]) == ("5 seeds of every K (20, 50, 200, 500)", "50, 200", "500")
    assert r["shrink"] == "K = 50: 9 of 9; K = 200: 9 of 9; K = 500: 9 of 9"
    far = P.missing_record("cifar100", 500)
    assert (far["tune_here"], far["tune_commands"]) == ("not possible", [])
    assert P.missing_record("cub", 10)["tune_here"] == "not needed"


def test_hours_and_the_overview_frame():
    assert (F.hours(59), F.hours(3000), F.hours(15000), F.hours(70000)) == ("59.0 s", "50.0 min", "4.2 h", "19 h")
    rows = [{"title": "Permuted MNIST", "K": 20, "page": "pmnist-K20", "exists": True, "seeds": 10, "complete": False,
             "gap_ACC": 1.234, "rho": 0.9}, {"title": "Split CUB-200", "K": 10, "page": "cub-K10", "exists": False,
                                             "seeds": 0, "complete": True, "gap_ACC": None, "rho": None}]
    df = O.overview_frame(rows)
    assert df.values.tolist() == [["[Permuted MNIST, K = 20](pmnist-K20.md)", "10 (incomplete)", "1.2", "0.90"],
                                  ["[Split CUB-200, K = 10](cub-K10.md)", "none yet", "–", "–"]]


def test_the_overview_estimates_pinned_on_the_committed_bench_files():
    """The numbers the overview's CIFAR-100 and CUB sections showed (CPU run and grid, the whole of make
    reproduce-<b> on one GPU, step by step), unchanged by the L2 extension (the paper's methods are counted)."""
    cpu = {b: O.cpu_estimate_record(load(RESULTS / f"bench-{b}.json", "bench"), 5) for b in ("cifar100", "cub")}
    assert [(c["run_min"], c["grid_h"], c["n_methods"], c["n_table_methods"]) for c in cpu.values()] == [
        ("23", "21", 11, 11), ("178", "59", 4, 11)]
    assert cpu["cub"]["fold"] == "2.8" and cpu["cifar100"]["max_paper_K"] > cpu["cifar100"]["K"] == 20
    total = {b: O.total_estimate_record(load(RESULTS / f"bench-{b}-cuda.json", "bench"), 5) for b in ("cifar100", "cub")}
    assert [(t["total"], t["n_runs"], t["K0"], t["concurrency"], t["times"]) for t in total.values()] == [
        ("19 h", 1960, 20, "6.2", "5"), ("4.2 h", 335, 10, "6.9", "5")]
    cub = total["cub"]["table"]
    assert cub.loc[cub["Step"] == "the grid", "GPU time"].tolist() == ["42.1 min (timed)"]
    assert cub["Runs"].tolist()[-2:] == [65, 30]


# --- the one template ----------------------------------------------------------------------------------------------


def test_make_page_keeps_the_cells_of_its_kind(tmp_path):
    """A cell tagged only-<kind> is on the pages of that kind only, only-live on pages with a live run; the tags
    go."""
    template = tmp_path / "t.md"
    template.write_text("---\njupytext:\n  text_representation: {extension: .md, format_name: myst}\nkernelspec: "
                        "{display_name: Python 3, language: python, name: python3}\n---\n\n# Reproduction: x\n\n"
                        "```{code-cell} ipython3\n:tags: [parameters]\nK = 1\n```\n\nALL PAGES\n\n"
                        "+++ {\"tags\": [\"only-both\", \"only-ours\"]}\n\nOURS CELL\n\n"
                        "+++ {\"tags\": [\"only-paper\"]}\n\nPAPER CELL\n\n+++ {\"tags\": [\"only-live\"]}\n\nLIVE CELL\n")
    page = lambda kind, live: N.make_page(template, "T", {"K": 2, "live": live, "tables": kind})  # noqa: E731
    assert [w in page("both", True) for w in ("OURS CELL", "PAPER CELL", "LIVE CELL")] == [True, False, True]
    assert [w in page("paper", False) for w in ("OURS CELL", "PAPER CELL", "LIVE CELL")] == [False, True, False]
    assert [w in page("ours", False) for w in ("OURS CELL", "PAPER CELL", "LIVE CELL")] == [True, False, False]
    assert "only-" not in page("ours", True) and "# Reproduction: T" in page("ours", True)
    assert all("ALL PAGES" in page(k, live) for k in ("both", "ours", "paper") for live in (True, False))


def test_the_reproduction_page_asserts_its_tables_match_the_files():
    """A page whose `tables` no longer matches what the files hold (a results file added since `pages` ran) fails
    at its first hidden cell, naming the fix."""
    import jupytext

    nb = jupytext.read(str(N.TEMPLATE))
    cell = next(c.source for c in nb.cells if "setting_record(" in c.source)
    ns = {"benchmark": "pmnist", "K": 50, "tables": "paper", "methods": "all", "live": False, "seeds": 1, "epochs": 0,
          "n_tasks": 0, "quick": False, "device": None, "out_dir": ""}
    with pytest.raises(AssertionError, match="run the pages tool"):
        exec(cell, ns)
    ns["tables"] = "both"
    exec(cell, ns)
    assert ns["committed"]["config"]["K"] == 50
    from metacl_lite.vocab import PAPER_METHOD_NAMES

    assert ns["method_list"] == list(PAPER_METHOD_NAMES) and "l2" not in ns["method_list"]  # "all": run's default
    ns.update(tables="both", methods="finetune, l2")
    exec(cell, ns)
    assert json.loads(json.dumps(ns["method_list"])) == ["finetune", "l2"]
