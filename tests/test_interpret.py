"""The interpretation of a results file (`report.interpret`) as numbers and records, on hand-made results documents
with known answers: the gaps per metric, Spearman's ρ, the family orderings (and that the verdict flips when the data does), the
β/γ and open choices, the interval; and the reports made from it: commands made relative to the repository
(`report.commands`), the overview of every setting (`report.overview`), the targets per K (`report.targets`) and the
time estimates (`report.timings`)."""
import json
import math

import pytest

from metacl_lite.vocab import REGULARISERS

from metacl_lite.paths import REPO_ROOT
from metacl_lite.report import commands as C
from metacl_lite.report import interpret as I
from metacl_lite.report import overview as O
from metacl_lite.report import targets as T
from metacl_lite.report import timings as Ti
from metacl_lite.findings.paper import paper_table
from metacl_lite.lab.summary import summarize
from metacl_lite.vocab import PAPER_METHOD_NAMES

PAPER20 = paper_table("pmnist", 20)


def doc(acc: dict, benchmark="pmnist", K=20, seeds=(0, 1), spread=0.1, config=None, methods=None) -> dict:
    """A results document whose method m has mean ACC acc[m] exactly: two tasks, each seed's accuracy matrix
    [[50, -], [2a - 50, 50]] (ACC = a, BT = 2a - 100, FA = 0 with references 50), a = acc[m] -+ spread on alternate
    seeds and acc[m] itself on the last of an odd number of seeds, so the mean is acc[m] (with 2 seeds the 95%
    half-width is t_{0.975,1} * spread = 12.706 * spread). acc["joint"] is the oracle."""
    methods = methods or [m for m in PAPER_METHOD_NAMES if m in acc]
    runs, refs, oracle = {}, {}, {}
    for i, s in enumerate(seeds):
        sign = 0 if (len(seeds) % 2 and i == len(seeds) - 1) else (-1 if i % 2 == 0 else 1)
        refs[str(s)] = {"acc": [50.0, 50.0]}
        for m in methods:
            a = acc[m] + sign * spread
            runs[f"{m}/{s}"] = {"acc_matrix": [[50.0, None], [2 * a - 50.0, 50.0]]}
        if "joint" in acc:
            oracle[str(s)] = {"acc": [acc["joint"] + sign * spread] * 2}
    cfg = {"benchmark": benchmark, "K": K, "n_tasks": 2, "seeds": list(seeds), "methods": methods,
           "train": {"epochs": 5}, "method_hparams": {m: {} for m in methods}}
    cfg.update(config or {})
    res = {"kind": "results", "schema": 2, "config": cfg, "runs": runs, "references": refs, "oracle": oracle,
           "provenance": {"command": "python -m metacl_lite run --benchmark pmnist --K 20", "invocations": []}}
    res["summary"] = summarize(res)
    return res


def paper_plus(offsets: dict, default: float = 0.0, K: int = 20) -> dict:
    paper = paper_table("pmnist", K)
    return {m: paper[m]["ACC"][0] + offsets.get(m, default) for m in paper}


# --- gaps -----------------------------------------------------------------------------------------------------------


def test_gaps_per_metric_with_known_answers():
    acc = paper_plus({"mas-metacl-lambda": -6.0, "pi": 2.5}, default=1.0)
    g = I.gaps(doc(acc))
    # ACC: 10 rows off by 1, one by 6, one by 2.5, over the 11 methods and the oracle
    assert g["ACC"]["n"] == 12 and g["ACC"]["mean_abs"] == pytest.approx((10 * 1.0 + 6.0 + 2.5) / 12)
    assert g["ACC"]["largest"][0] == ("mas-metacl-lambda", pytest.approx(-6.0))
    assert g["ACC"]["largest"][1] == ("pi", pytest.approx(2.5))
    # half-width 12.706 * 0.1 = 1.27: gaps of 1 lie inside, 2.5 and 6 outside
    assert sorted(g["ACC"]["outside"]) == ["mas-metacl-lambda", "pi"] and len(g["ACC"]["within"]) == 10
    # BT = 2 ACC - 100 here; the paper's BT is its own column (the oracle has none)
    bt = {m: 2 * acc[m] - 100 - PAPER20[m]["BT"][0] for m in PAPER_METHOD_NAMES}
    assert g["BT"]["n"] == 11 and g["BT"]["mean_abs"] == pytest.approx(sum(abs(v) for v in bt.values()) / 11)
    assert g["BT"]["by_method"] == pytest.approx(bt)
    fa = {m: 0.0 - PAPER20[m]["FA"][0] for m in PAPER_METHOD_NAMES}
    assert g["FA"]["mean_abs"] == pytest.approx(sum(abs(v) for v in fa.values()) / 11)


def test_gaps_only_over_rows_with_both_numbers():
    acc = paper_plus({}, default=-2.0)
    g = I.gaps(doc({m: acc[m] for m in ("finetune", "metacl", "pi")}))
    assert g["ACC"]["n"] == 3 and g["ACC"]["mean_abs"] == pytest.approx(2.0)
    assert I.gaps(doc({"finetune": 50.0}, K=37))["ACC"]["mean_abs"] is None  # no paper numbers at K = 37


# --- ranks ----------------------------------------------------------------------------------------------------------


def test_spearman_identical_reversed_and_one_adjacent_swap():
    same = paper_plus({}, default=3.0)
    assert I.rank_agreement(doc(same))["rho"] == pytest.approx(1.0)
    reversed_ = {m: 100.0 - v for m, v in same.items()}
    r = I.rank_agreement(doc(reversed_))
    assert r["rho"] == pytest.approx(-1.0) and r["n"] == 11  # the oracle is not a method
    swapped = dict(paper_plus({}), pi=PAPER20["ewc"]["ACC"][0], ewc=PAPER20["pi"]["ACC"][0])  # ranks 3, 4 of 11 swap
    assert I.rank_agreement(doc(swapped))["rho"] == pytest.approx(1 - 6 * 2 / (11 * (11 ** 2 - 1)))


def test_spearman_needs_three_methods():
    r = I.rank_agreement(doc({"finetune": 40.0, "metacl": 41.0}))
    assert r["rho"] is None and r["n"] == 2
    assert I.glue_values(I.interpretation(doc({"finetune": 40.0, "metacl": 41.0})))["rho"] == "–"


# --- family orderings -----------------------------------------------------------------------------------------------


def test_family_ordering_verdict_flips_with_the_data():
    base = paper_plus({}, default=0.0)
    holds = dict(base, mas=50.0, **{"mas-metacl-beta": 51.0, "mas-metacl-lambda": 52.0})
    f = I.family_orderings(doc(holds))
    assert f["mas"]["holds_ours"] is True and f["mas"]["ours"] == pytest.approx([50.0, 51.0, 52.0])
    broken = dict(holds, **{"mas-metacl-lambda": 49.0})
    f = I.family_orderings(doc(broken))
    assert f["mas"]["holds_ours"] is False
    assert f["pi"]["holds_ours"] is True and f["ewc"]["holds_ours"] is True  # the paper's numbers, ordered
    tie = dict(holds, **{"mas-metacl-beta": 50.0})
    assert I.family_orderings(doc(tie))["mas"]["holds_ours"] is False  # strictly increasing, not a tie
    g = I.glue_values(I.interpretation(doc(broken)))
    assert (g["n_held_ours"], g["n_fam_ours"], g["held_ours"]) == (2, 3, "PI, EWC")
    assert (g["n_held_paper"], g["n_fam_paper"], g["held_paper"]) == (3, 3, "MAS, PI, EWC")
    assert (g["chain_mas_ours"], g["order_mas_ours"]) == ("50.0 → 51.0 → 49.0", "does not hold")
    assert (g["chain_mas_paper"], g["order_mas_paper"]) == ("55.7 → 56.9 → 57.7", "holds")
    assert I.glue_values(I.interpretation(doc(holds)))["order_mas_ours"] == "holds"
    frame = I.family_frame(I.interpretation(doc(broken)))
    assert frame.iloc[0].tolist() == ["MAS", "50.0 → 51.0 → 49.0", "does not hold", "55.7 → 56.9 → 57.7", "holds"]


def test_family_ordering_of_the_paper_itself():
    """At K = 200 the paper's own table breaks the ordering for MAS (70.4, 67.9, 71.2) and PI (66.9, 65.9, 73.5)."""
    acc = {m: 40.0 + i for i, m in enumerate(["finetune", "metacl", "mas", "mas-metacl-beta", "mas-metacl-lambda",
                                              "pi", "pi-metacl-beta", "pi-metacl-lambda"])}
    f = I.family_orderings(doc(acc, K=200))
    assert (f["mas"]["holds_paper"], f["pi"]["holds_paper"]) == (False, False)
    assert (f["mas"]["holds_ours"], f["pi"]["holds_ours"]) == (True, True)
    assert "ewc" not in f  # neither our file nor the paper's K = 200 table has EWC
    assert I.glue_values(I.interpretation(doc(acc, K=200)))["order_pi_paper"] == "does not hold"


def test_family_ordering_at_a_K_the_paper_has_no_numbers_for():
    acc = dict(paper_plus({}, default=0.0), mas=50.0, **{"mas-metacl-beta": 51.0, "mas-metacl-lambda": 52.0})
    g = I.glue_values(I.interpretation(doc(acc, K=10)))
    assert (g["n_held_ours"], g["n_fam_ours"], g["held_ours"]) == (3, 3, "MAS, PI, EWC")
    assert (g["n_held_paper"], g["n_fam_paper"], g["held_paper"]) == (0, 0, "none")
    assert (g["chain_mas_ours"], g["order_mas_ours"], g["chain_mas_paper"], g["order_mas_paper"]) == \
        ("50.0 → 51.0 → 52.0", "holds", "–", "–")
    assert g["gap_ACC"] == "–" and g["n_ACC"] == 0


def test_chain_shows_two_decimals_where_one_would_hide_the_order():
    assert I.chain([49.41, 49.44, 41.1]) == "49.41 → 49.44 → 41.10"
    assert I.chain([49.4, 50.0, 51.0]) == "49.4 → 50.0 → 51.0"


# --- beta/gamma, options, interval ----------------------------------------------------------------------------------


def test_hparams_and_open_choices_as_recorded():
    hp = {"mas": {"beta": 3.0}, "mas-metacl-beta": {"beta": 3.0}, "mas-metacl-lambda": {"gamma": 0.3}}
    acc = {m: 50.0 + i for i, m in enumerate(["finetune", "mas", "mas-metacl-beta", "mas-metacl-lambda"])}
    res = doc(acc, config={"method_hparams": {"finetune": {}, **hp},
                           "hparams_source": {"mas": "default: results/tuning-pmnist-K20.json",
                                              "mas-metacl-beta": "default: results/tuning-pmnist-K20.json",
                                              "mas-metacl-lambda": "K=20: /work/x/results/t.json"},
                           "train": {"epochs": 5, "omega_accumulate": "latest", "omega_normalise": "minmax",
                                     "pi_xi": 0.001}})
    h = I.hparams_used(res)
    assert h["values"] == hp and h["options_recorded"]
    assert h["options"] == {"omega_accumulate": "latest", "omega_normalise": "minmax", "pi_xi": 0.001}
    frame = I.hparams_frame(I.interpretation(res))
    assert frame.values.tolist() == [
        ["MAS", "β = 3", 20, "`results/tuning-pmnist-K20.json`", "`latest`", "`minmax`", "–"],
        ["MAS-MetaCL-β", "β = 3", 20, "`results/tuning-pmnist-K20.json`", "`latest`", "`minmax`", "–"],
        ["MAS-MetaCL-λ", "γ = 0.3", 20, "`/work/x/results/t.json`", "`latest`", "`minmax`", "–"]]  # outside: as is
    assert I.glue_values(I.interpretation(res))["options_where"] == "train"


def test_a_compiled_file_says_so():
    res = doc(paper_plus({}), config={"train": {"epochs": 5, "compile": "auto"}})
    assert I.glue_values(I.interpretation(res))["compile"] == "auto"
    assert I.glue_values(I.interpretation(doc(paper_plus({}))))["compile"] == "off"


def test_a_tf32_file_says_so():
    res = doc(paper_plus({}), config={"train": {"epochs": 5, "device": "cuda", "precision": "tf32"}})
    assert I.glue_values(I.interpretation(res))["precision"] == "tf32"
    assert I.glue_values(I.interpretation(doc(paper_plus({}))))["precision"] == "float32"  # and files made before


def test_hparams_of_a_file_made_before_sources_and_options_were_recorded():
    acc = {"finetune": 50.0, "ewc": 51.0, "ewc-metacl-beta": 52.0, "ewc-metacl-lambda": 53.0}
    res = doc(acc, config={"method_hparams": {"ewc": {"beta": 100.0}, "ewc-metacl-beta": {"beta": 100.0},
                                              "ewc-metacl-lambda": {"gamma": 10.0}}})
    h = I.hparams_used(res)
    assert not h["options_recorded"] and h["sources"] == {"ewc": None, "ewc-metacl-beta": None,
                                                          "ewc-metacl-lambda": None}
    frame = I.hparams_frame(I.interpretation(res))
    assert frame["β/γ"].tolist() == ["β = 100", "β = 100", "γ = 10"]
    assert frame["Tuned at K"].tolist() == ["–"] * 3 and frame["File"].tolist() == ["–"] * 3  # not recorded
    assert frame["Ω accumulated"].tolist() == ["`sum`"] * 3  # the file predates the options: today's defaults
    assert I.glue_values(I.interpretation(res))["options_where"] == "none"
    assert I.source_record("K=20: results/a.json") == {"file": "results/a.json", "K": 20}
    assert I.source_record("default: results/t.json", 20) == {"file": "results/t.json", "K": 20}
    assert I.source_record("made by hand") == {"file": "made by hand", "K": None}
    assert I.source_record(None) == {"file": None, "K": None}


def test_interval_is_a_t_interval_over_the_seeds():
    acc = paper_plus({}, default=0.5)
    iv = I.interval(doc(acc, seeds=(0, 1, 2, 3, 4)))
    assert iv["n_seeds"] == 5 and iv["t"] == pytest.approx(2.776445, abs=1e-6)  # t_{0.975,4}, from tables
    assert iv["factor"] == pytest.approx(2.776445 / math.sqrt(5), abs=1e-6) and iv["permuted"] is True
    # values a - 0.1, a + 0.1, a - 0.1, a + 0.1, a over 5 seeds -> s = sqrt(sum((x - mean)^2) / 4)
    vals = [-0.1, 0.1, -0.1, 0.1, 0.0]
    mean = sum(vals) / 5
    s = math.sqrt(sum((v - mean) ** 2 for v in vals) / 4)
    assert iv["mean_ci_ours"] == pytest.approx(2.776445 * s / math.sqrt(5), abs=1e-6)
    assert iv["mean_pm_paper"] == pytest.approx(sum(PAPER20[m]["ACC"][1] for m in PAPER20) / 12)
    g = I.glue_values(I.interpretation(doc(acc, seeds=(0, 1, 2, 3, 4))))
    assert (g["n_seeds"], g["t_df"], g["factor"], g["permuted"]) == (5, 4, 1.24, "yes")
    cub = I.glue_values(I.interpretation(doc({"finetune": 30.0, "metacl": 31.0, "ewc": 32.0}, benchmark="cub", K=10)))
    assert cub["permuted"] == "no"  # the class split of the tasks is fixed


def test_one_seed_has_no_interval():
    g = I.glue_values(I.interpretation(doc(paper_plus({}), seeds=(0,))))
    assert (g["n_seeds"], g["factor"], g["mean_ci_ours"]) == (1, "–", "–")
    assert I.gaps(doc(paper_plus({}), seeds=(0,)))["ACC"]["within"] == []  # no interval, nothing inside it


def test_prose_and_glue_carry_the_numbers():
    acc = paper_plus({"mas-metacl-lambda": -6.0, "pi": 2.5}, default=1.0)
    res = doc(acc)
    g = I.glue_values(I.interpretation(res))
    assert g["gap_ACC"] == round((10 + 6 + 2.5) / 12, 1) and g["n_seeds"] == 2 and g["order_mas_ours"] == "does not hold"
    assert (g["n_ACC"], g["within_ACC"], g["outside_ACC"]) == (12, 10, "MAS-MetaCL-λ; PI")
    assert g["largest_ACC"] == "MAS-MetaCL-λ (-6.0); PI (+2.5)" and g["rank_n"] == 11
    assert (g["best_ours"], g["best_paper"]) == ("MAS-MetaCL-β", "MAS-MetaCL-λ")  # 56.9 + 1 above 57.7 - 6
    frame = I.gaps_frame(I.interpretation(res))
    assert frame["Metric"].tolist() == ["ACC", "BT", "FA"]
    assert frame.iloc[0].tolist() == ["ACC", g["gap_ACC"], 12, 10, "MAS-MetaCL-λ (-6.0); PI (+2.5)"]


def test_incomplete_rows_are_named_in_the_prose():
    res = doc(paper_plus({}), seeds=(0, 1, 2))
    del res["runs"]["pi/2"]
    res["summary"] = summarize(res)
    assert I.interpretation(res)["incomplete"] == ["PI"] and I.glue_values(I.interpretation(res))["incomplete"] == "PI"
    assert I.glue_values(I.interpretation(doc(paper_plus({}))))["incomplete"] == "none"


# --- commands -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd, want", [
    ("python -m metacl_lite run --K 20 --out /work/main/results/pmnist-K20.json",
     "python -m metacl_lite run --K 20 --out results/pmnist-K20.json"),
    ("run --out=/work/main/results/a.json --x 1", "run --out=results/a.json --x 1"),
    ("run --out '/work/main/runs/a b.json'", "run --out 'runs/a b.json'"),
    ("run --data-dir /work/main", "run --data-dir ."),
    ("run --out /work/mainline/a.json", "run --out /work/mainline/a.json"),  # not inside /work/main
    ("run --weights /opt/w.pth --out results/a.json", "run --weights /opt/w.pth --out results/a.json"),
])
def test_relative_command(cmd, want):
    assert C.relative_command(cmd, "/work/main") == want


def test_provenance_commands_of_file_and_invocations(tmp_path):
    root = str(tmp_path)
    res = {"provenance": {"command": f"python -m metacl_lite run --out {root}/results/x.json",
                          "invocations": [{"command": f"python -m metacl_lite run --out {root}/results/x.json"},
                                          {"argv": ["python", "-m", "metacl_lite", "run", "--out", f"{root}/r.json"]},
                                          {"units": "all (schema 1)"}]}}
    got = C.provenance_commands(res, root)
    assert got == {"command": "python -m metacl_lite run --out results/x.json",
                   "invocations": ["python -m metacl_lite run --out results/x.json",
                                   "python -m metacl_lite run --out r.json", None]}
    assert C.relative_command(None) is None


def test_committed_results_render_without_machine_paths():
    """Whatever the committed files record, what the book and README render has no path of this checkout."""
    for path in sorted((REPO_ROOT / "results").glob("pmnist-K*.json")):
        res = json.loads(path.read_text())
        got = C.provenance_commands(res)
        assert str(REPO_ROOT) not in (got["command"] or ""), path
        info = I.interpretation(res)
        shown = " ".join(map(str, I.glue_values(info).values())) + I.hparams_frame(info).to_string()
        assert str(REPO_ROOT) not in shown, path


# --- overview -------------------------------------------------------------------------------------------------------


def test_overview_lists_every_setting_and_handles_missing_files(tmp_path):
    res = doc(paper_plus({}, default=-2.0, K=50) | {}, K=50,
              methods=["finetune", "metacl", "mas", "mas-metacl-beta", "mas-metacl-lambda", "pi", "pi-metacl-beta",
                       "pi-metacl-lambda"], seeds=(0, 1, 2, 3, 4))
    res["schema"] = 2
    (tmp_path / "pmnist-K50.json").write_text(json.dumps(res))
    rows = O.overview_rows(tmp_path)
    assert [(r["benchmark"], r["K"]) for r in rows] == [("pmnist", 20), ("pmnist", 50), ("pmnist", 200),
                                                       ("pmnist", 500), ("cifar100", 20), ("cifar100", 50),
                                                       ("cifar100", 200), ("cifar100", 500), ("cub", 10)]
    by = {(r["benchmark"], r["K"]): r for r in rows}
    k50 = by[("pmnist", 50)]
    assert k50["exists"] and k50["seeds"] == 5 and k50["complete"] and k50["gap_ACC"] == pytest.approx(2.0)
    assert k50["rho"] == pytest.approx(1.0) and k50["methods"] == 8
    assert not by[("cub", 10)]["exists"] and by[("cub", 10)]["seeds"] is None
    assert by[("pmnist", 20)]["page"] == "benchmark" and k50["page"] == "pmnist-K50"  # K = 20: the live page
    assert by[("cub", 10)]["page"] == "cub-K10" and by[("cub", 10)]["file"] == "results/cub-K10.json"
    assert by[("cub", 10)]["gap_ACC"] is None and by[("cub", 10)]["rho"] is None


def test_a_missing_file_says_whether_it_needs_a_download_and_how_to_make_it():
    """Permuted MNIST up to K = 500 runs on the embedded subset: no fetch, tuned at its own K; beyond it, and on the
    other benchmarks, the data must be fetched first (CUB also needs the ResNet-18 weights)."""
    assert C.missing_commands("pmnist", 10) == ["python -m metacl_lite tune --benchmark pmnist --K 10",
                                                "python -m metacl_lite run --benchmark pmnist --K 10 --seeds 5"]
    assert C.missing_commands("pmnist", 600)[0].startswith("python data_scripts/fetch.py mnist")
    # the paper's K run ten seeds, as `make reproduce-pmnist` does (misuse round 7: the README said five)
    assert C.missing_commands("pmnist", 200)[-1] == "python -m metacl_lite run --benchmark pmnist --K 200 --seeds 10"
    make = (REPO_ROOT / "Makefile").read_text()
    assert "S=5; case $$K in 20|50|200|500) S=10;; esac" in make and C.SEEDS == 5 and C.PAPER_K_SEEDS == 10
    cub = C.missing_commands("cub", 10)
    assert cub[0].startswith("python data_scripts/fetch.py cub") and cub[1].startswith("# ResNet-18")
    assert cub[2:] == ["python -m metacl_lite tune --benchmark cub --K 10",
                       "python -m metacl_lite run --benchmark cub --K 10 --seeds 5"]
    assert C.missing_commands("cifar100", 200)[1] == "python -m metacl_lite tune --benchmark cifar100 --K 20"
    assert not C.needs_download("pmnist", 10) and not C.needs_download("pmnist", 500)
    assert C.needs_download("pmnist", 600) and C.needs_download("cifar100", 50) and C.needs_download("cub", 10)


# --- time estimates, page timings, page stamps ----------------------------------------------------------------------


def _bench(n_methods: int, reduced=True, device="cpu", suite="cub") -> dict:
    per = [{"method": m, "wall_s": 1.0, "full_run_s_estimate": 600.0 * (i + 1), "extrapolated": reduced}
           for i, m in enumerate(list(PAPER_METHOD_NAMES)[:n_methods])]
    return {"suite": suite, "device": device, "epochs": 1, "n_tasks": 1, "reduced": reduced,
            "grid_s_estimate": 3 * sum(r["full_run_s_estimate"] for r in per), "per_method": per,
            "provenance": {"command": f"python -m metacl_lite.tools bench --suite cub --out {REPO_ROOT}/results/b.json",
                           "device": "cpu: Z (2 cores)"}}


def test_bench_estimate_scales_to_the_seeds():
    est = Ti.bench_estimate(_bench(4), seeds=5)
    assert est["mean_run_s"] == pytest.approx(600.0 * (1 + 2 + 3 + 4) / 4)
    assert est["grid_s"] == pytest.approx(5 * 600.0 * 10)  # 5 seeds x the four runs
    assert (est["reduced"], est["cpu"], est["n_methods"], est["n_table_methods"]) == (True, True, 4, 11)
    assert est["methods"] == list(PAPER_METHOD_NAMES)[:4]
    assert (est["K"], est["max_paper_K"]) == (10, 10)  # CUB: only K = 10
    # no local path
    assert est["command"] == "python -m metacl_lite.tools bench --suite cub --out results/b.json"
    cifar = Ti.bench_estimate(_bench(11, suite="cifar100"), 3)
    assert (cifar["n_methods"], cifar["K"], cifar["max_paper_K"]) == (11, 20, 500)
    gpu = Ti.bench_estimate(_bench(11, reduced=False, device="cuda"), 3)
    assert (gpu["reduced"], gpu["cpu"], gpu["device"]) == (False, False, "cuda")
    assert gpu["grid_s"] == pytest.approx(3 * 600.0 * sum(range(1, 12)))


def test_setting_commands_fetch_tune_and_run_each_paper_K():
    c = C.setting_commands("cifar100")  # the seeds and the tune command of the pages' missing_commands
    assert c[0].startswith("python data_scripts/fetch.py cifar100") and c[1] == C.missing_commands("cifar100", 20)[1] \
        == "python -m metacl_lite tune --benchmark cifar100 --K 20"
    assert c[2:] == [f"python -m metacl_lite run --benchmark cifar100 --K {K} --seeds 5" for K in (20, 50, 200, 500)]
    assert C.setting_commands("cub", 3)[-2:] == ["python -m metacl_lite tune --benchmark cub --K 10",
                                                 "python -m metacl_lite run --benchmark cub --K 10 --seeds 3"]


def test_timings_table():
    """Every page of `pages` has a row, in its order: a page the file lacks is "absent", the excluded pages share one
    row, an overlapping run is counted; the figures above the table come from the provenance."""
    import math

    doc = {"pages": [{"page": "chapters/01_problem", "execution_s": 90.0, "status": "cached",
                      "executed": "2026-01-01T10:01:30"},
                     {"page": "running", "execution_s": None, "status": "force (executed on every build; not cached)"},
                     {"page": "assignments/a1", "execution_s": None,
                      "status": "not executed (execute.exclude_patterns: assignments/*)"},
                     {"page": "assignments/a2", "execution_s": None,
                      "status": "not executed (execute.exclude_patterns: assignments/*)"},
                     {"page": "reproduce/benchmark", "execution_s": 1410.0, "status": "cached",
                      "executed": "2026-01-01T10:25:00"}],
           "provenance": {"command": f"python data_scripts/book_timings.py --out {REPO_ROOT}/results/t.json --note 'x'",
                          "device": "cpu: Q", "git_commit": "0123456789abc", "started": "2026-01-01T11:00:00+00:00",
                          "note": "x"}}
    pages = ["chapters/01_problem", "reproduce/benchmark", "reproduce/pmnist-K1", "assignments/a1", "assignments/a2",
             "running"]
    t = Ti.timings_table(doc, pages)
    assert t.attrs == {"device": "cpu: Q", "commit": "0123456789", "command":
                       "python data_scripts/book_timings.py --out results/t.json", "date": "2026-01-01",
                       "n_timed": 2, "total_s": 1500.0, "untimed": 2, "n_overlapped": 0, "note": "x"}
    assert list(t.index) == ["chapters/01_problem", "reproduce/benchmark", "reproduce/pmnist-K1", "assignments/*",
                             "running"]
    assert t["execution_s"].tolist()[:2] == [90.0, 1410.0] and math.isnan(t.loc["reproduce/pmnist-K1", "execution_s"])
    assert t["status"].tolist() == ["cached", "cached", "absent", "not executed",
                                    "force (executed on every build; not cached)"]
    assert t["excluded"].tolist() == [0, 0, 0, 2, 0] and t["overlapped"].tolist() == [0, 0, 0, 0, 0]
    # the benchmark page's run (10:01:30 to 10:25:00) began before the first chapter's ended: two builds at once
    doc["pages"][0]["executed"] = "2026-01-01T10:03:00"
    t = Ti.timings_table(doc, pages)
    assert t["overlapped"].tolist() == [1, 1, 0, 0, 0] and t.attrs["n_overlapped"] == 2
    assert Ti.overlapping_runs(doc["pages"]) == {"chapters/01_problem": ["reproduce/benchmark"],
                                                 "reproduce/benchmark": ["chapters/01_problem"]}


def test_timings_cover_every_page_of_the_book_with_code():
    """The Running page's table has a row for every page with code of the table of contents, the reproduction
    pages for K = 1, 5 and 10 included, whatever the committed timings file lists."""
    import json

    pages = Ti.code_pages(REPO_ROOT / "book")
    assert {"chapters/03_dynamic_balance", "reproduce/pmnist-K1", "reproduce/pmnist-K5", "reproduce/pmnist-K10",
            "running", "intro"} <= set(pages)  # the intro computes its findings
    t = Ti.timings_table(json.loads((REPO_ROOT / "results" / "book-timings.json").read_text()), pages)
    for page in pages:
        assert page in t.index or page.startswith("assignments/"), page


def test_page_stamp_follows_the_results_file(tmp_path):
    """A page's `shows` parameter names its results file and the start of its digest: a new file, a new stamp."""
    from metacl_lite.publish.pages import STAMP, files_stamp

    assert files_stamp(["cub-K10.json"], tmp_path) == f"{STAMP}results/cub-K10.json, absent"
    (tmp_path / "cub-K10.json").write_text("{}")
    one = files_stamp(["cub-K10.json"], tmp_path)
    (tmp_path / "cub-K10.json").write_text('{"a": 1}')
    two = files_stamp(["cub-K10.json"], tmp_path)
    assert one != two and one.startswith(f"{STAMP}results/cub-K10.json, sha256 ")


def test_book_timings_reads_the_execution_cache(tmp_path):
    """data_scripts/book_timings.py: a page whose current code has a cache record gets that record's time; a page
    changed since gets none; a force page and an excluded page say so."""
    import sys

    import jupytext
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    sys.path.insert(0, str(REPO_ROOT / "data_scripts"))
    from book_timings import page_timings

    book = tmp_path / "book"
    (book / "ex").mkdir(parents=True)
    head = "---\njupytext:\n  text_representation: {extension: .md, format_name: myst}\n" \
           "kernelspec: {display_name: Python 3, language: python, name: python3}\n"
    cell = "```{code-cell} ipython3\nx = %s\n```\n"
    (book / "intro.md").write_text("# Intro\n")
    (book / "a.md").write_text(head + "---\n# A\n" + cell % 1)
    (book / "b.md").write_text(head + "---\n# B\n" + cell % 2)
    (book / "c.md").write_text(head + "mystnb:\n  execution_mode: force\n---\n# C\n" + cell % 3)
    (book / "ex" / "d.md").write_text(head + "---\n# D\n" + cell % 4)
    (book / "_config.yml").write_text("execute:\n  exclude_patterns: ['ex/*']\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nparts:\n  - caption: P\n    chapters:\n"
                                   "      - file: a\n      - file: b\n      - file: c\n      - file: ex/d\n")
    cache = get_cache(str(tmp_path / "cache"))
    for name, secs in (("a", 12.5), ("b", 3.0)):
        cache.cache_notebook_bundle(CacheBundleIn(jupytext.read(str(book / f"{name}.md")), str(book / f"{name}.md"),
                                               data={"execution_seconds": secs}), check_validity=False)
    (book / "b.md").write_text(head + "---\n# B\n" + cell % 22)  # changed since its cached run
    rows = {r["page"]: r for r in page_timings(book, tmp_path / "cache")}
    assert sorted(rows) == ["a", "b", "c", "ex/d"]  # the intro has no code
    assert (rows["a"]["execution_s"], rows["a"]["status"]) == (12.5, "cached")
    assert (rows["b"]["execution_s"], rows["b"]["status"]) == (None, "no cached run of the current code")
    assert rows["c"]["status"].startswith("force") and rows["ex/d"]["status"].startswith("not executed")


def test_pages_that_read_results_carry_the_stamp_of_every_file_they_read():
    """The overview reads every setting's results file and the CIFAR-100/CUB speed benchmarks, the intro every
    setting's results file too (whether it exists), the Running page the timings, the reference page the speed
    benchmarks and the GPU tests' last run; `pages` writes their digests into the pages, so a changed file changes
    the page's code (and the cache runs it again), and `pages --check` is clean only when every stamp is current."""
    from metacl_lite.publish.pages import STAMP, files_stamp, stamped_pages, write_pages

    pages = {p.name: names for p, names in stamped_pages().items()}
    assert pages["overview.md"] == [f"{b}-K{K}.json" for b, K in O.paper_settings()] + \
        ["pmnist-K1.json", "pmnist-K5.json", "pmnist-K10.json"] + \
        [f"tuning-pmnist-K{K}.json" for K in (1, 5, 10, 20, 50, 200, 500)] + ["bench-cifar100.json", "bench-cub.json",
                                                                        "bench-cifar100-cuda.json", "bench-cub-cuda.json"]
    assert pages["08_analysis.md"][-9:] == ["dynamics-pmnist.json"] + \
        [f"tuning-pmnist-K{K}.json" for K in (1, 5, 10, 20, 50, 200, 500)] + ["lambda-story-pmnist.json"]
    # the intro reads chapter 7's files, and whether each setting of the other benchmarks has a results file
    # (`overview_rows`, for what is reproduced so far): an absent one is stamped "absent", so its arrival re-runs it
    claims = pages["07_claims.md"]
    assert claims[-1] == "dynamics-pmnist.json" and not any(n.startswith(("cifar100-", "cub-")) for n in claims)
    assert pages["intro.md"] == claims + ["cifar100-K20.json", "cifar100-K50.json", "cifar100-K200.json",
                                          "cifar100-K500.json", "cub-K10.json"]
    assert pages["running.md"] == ["book-timings.json", "bench-pmnist-K20.json", "bench-pmnist-cuda.json",
                                   "bench-cifar100.json", "bench-cifar100-cuda.json", "bench-cub.json",
                                   "bench-cub-cuda.json", "pmnist-K20.json"]
    assert pages["reference.md"] == ["open-choices-pmnist.json", "tuning-pmnist-K500.json", "bench-pmnist-K500.json",
                                     "bench-pmnist-K20.json", "bench-cifar100.json", "bench-cub.json",
                                     "bench-pmnist-cuda.json", "bench-cifar100-cuda.json", "bench-cub-cuda.json",
                                     "gpu-check.json"]
    assert pages["instructors.md"] == ["grading-times.json"]
    for page, names in stamped_pages().items():
        assert files_stamp(names) in page.read_text().splitlines(), page
    assert write_pages(check=True) == []
    assert files_stamp(["nothing-here.json"]) == f"{STAMP}results/nothing-here.json, absent"


def test_open_choices_decided_per_regulariser():
    """Files made since the open choices are decided per regulariser record them in config.method_options; the
    prose names each regulariser's choices, and an unexpected key in method_hparams is shown, not mislabelled."""
    acc = {m: 50.0 + i for i, m in enumerate(["finetune", "mas", "mas-metacl-beta", "mas-metacl-lambda", "pi",
                                              "pi-metacl-beta", "pi-metacl-lambda"])}
    latest = {"omega_accumulate": "latest", "omega_normalise": "max", "pi_xi": 0.1}
    base = {"omega_accumulate": "sum", "omega_normalise": "none", "pi_xi": 0.001}
    res = doc(acc, config={"train": {"epochs": 5, "omega_accumulate": "sum", "omega_normalise": "none", "pi_xi": 0.1},
                           "method_hparams": {"mas": {"beta": 1.0}, "mas-metacl-beta": {"beta": 1.0},
                                              "mas-metacl-lambda": {"gamma": 3.0, "note": "x"},
                                              "pi": {"beta": 10.0}, "pi-metacl-beta": {"beta": 10.0},
                                              "pi-metacl-lambda": {"gamma": 1.0}},
                           "method_options": {**{m: latest for m in ("mas", "mas-metacl-beta", "mas-metacl-lambda")},
                                              **{m: base for m in ("pi", "pi-metacl-beta", "pi-metacl-lambda")}}})
    h = I.hparams_used(res)
    assert h["options_where"] == "method_options" and h["method_options"]["mas-metacl-beta"] == latest
    frame = I.hparams_frame(I.interpretation(res)).set_index("Method")
    assert frame.loc["MAS-MetaCL-β", ["Ω accumulated", "Ω normalised", "PI's ξ"]].tolist() == ["`latest`", "`max`", "–"]
    assert frame.loc["PI-MetaCL-λ", ["Ω accumulated", "Ω normalised", "PI's ξ"]].tolist() == ["`sum`", "`none`",
                                                                                           "0.001"]
    assert frame.loc["MAS-MetaCL-λ", "β/γ"] == "γ = 3, note = x"
    same = doc(acc, config={"method_options": {m: latest for m in acc if m != "finetune"}})
    assert I.glue_values(I.interpretation(same))["options_where"] == "method_options"


def test_targets_per_K_with_known_answers(tmp_path):
    """Issue 10's targets per K: ACC gap <= 3 and every regularised FA gap < 10, whether β/γ were tuned at that K,
    whether the tuning file's choices are interior; K beyond the paper has no gaps; a missing file says so."""
    reg = [m for m in PAPER_METHOD_NAMES if any(m.startswith(r) for r in REGULARISERS)]
    tuned = {m: "default: results/tuning-pmnist-K20.json" for m in reg}
    res20 = doc(paper_plus({"pi": 4.0}, default=2.0), config={"hparams_source": tuned})
    (tmp_path / "pmnist-K20.json").write_text(json.dumps(res20))
    res50 = doc(paper_plus({}, default=-1.0, K=50), K=50, config={"hparams_source": tuned})  # K=20's values
    (tmp_path / "pmnist-K50.json").write_text(json.dumps(res50))
    res5 = doc({m: 40.0 for m in PAPER_METHOD_NAMES}, K=5,
               config={"hparams_source": {m: "K=5: x" for m in reg}})
    (tmp_path / "pmnist-K5.json").write_text(json.dumps(res5))
    for K, edge in ((20, False), (50, True)):
        (tmp_path / f"tuning-pmnist-K{K}.json").write_text(json.dumps(
            {"kind": "tuning", "schema": 2, "grid": {}, "chosen": {}, "at_edge": {"pi": False, "ewc": edge},
             "provenance": {"invocations": []}}))
    rows = {r["K"]: r for r in T.target_rows("pmnist", tmp_path)}
    assert list(rows) == [1, 5, 10, 20, 50, 200, 500]
    paper20 = paper_table("pmnist", 20)
    n20 = len([m for m in paper20 if paper20[m].get("ACC")])
    assert rows[20]["acc_gap"] == pytest.approx((4.0 + 2.0 * (n20 - 1)) / n20)
    fa20 = max((abs(paper20[m]["FA"][0]), m) for m in reg)  # ours FA = 0 in these documents
    assert (rows[20]["fa_max"], rows[20]["fa_method"]) == (pytest.approx(fa20[0]), fa20[1])
    assert rows[20]["tuned_at_K"] is True and rows[20]["interior"] is True and rows[20]["seeds"] == 2
    assert rows[50]["acc_gap"] == pytest.approx(1.0) and rows[50]["tuned_at_K"] is False
    assert rows[50]["interior"] is False and rows[5]["tuned_at_K"] is True and rows[5]["interior"] is None
    assert not rows[200]["exists"] and rows[200]["acc_gap"] is None
    wide = T.targets_frame(list(rows.values())).set_index("K")
    assert wide.loc[5].tolist()[:3] == [2, "yes", "beyond the paper"]
    assert wide.loc[20].tolist()[:3] == [2, "yes", f"{rows[20]['acc_gap']:.1f} ✓"]
    assert wide.loc[50].tolist()[:3] == [2, "no", "1.0 ✓"] and wide.loc[50].tolist()[-1] == "no"
    assert wide.loc[200].tolist() == ["no results file yet", "–", "no results file yet", "–", "–", "–", "–"]
    # the half-width is 12.706 * 0.1 = 1.27: at K = 20 every row (2 and 4 points above) is outside, above the paper's;
    # at K = 50 every row is 1 point below, inside the interval
    assert (rows[20]["acc_above"], rows[20]["acc_below"]) == (n20, 0) and wide.loc[20, "Outside: above / below"] == \
        f"{n20} / 0"
    assert (rows[50]["acc_above"], rows[50]["acc_below"]) == (0, 0) and rows[5]["acc_above"] is None
    # MAS above and PI below, both outside the 1.27 half-width; MAS-MetaCL-β above but inside: not counted
    res50b = doc(paper_plus({"pi": -3.0, "mas": 2.0, "mas-metacl-beta": 1.0}, default=0.0, K=50), K=50)
    (tmp_path / "pmnist-K50.json").write_text(json.dumps(res50b))
    k50 = {r["K"]: r for r in T.target_rows("pmnist", tmp_path)}[50]
    assert (k50["acc_above"], k50["acc_below"]) == (1, 1)


def test_the_make_target_steps_follow_the_makefile():
    """What the book says about `make reproduce-cifar100` / `make reproduce-cub` (`commands.make_target_steps`)
    follows the Makefile: the K it runs, the K it tunes (every paper K up to the validation offset; the tuning K
    through `choices`), and the GPU check before the download."""
    import re

    from metacl_lite.data.specs import SPECS

    make = (REPO_ROOT / "Makefile").read_text()
    cifar = SPECS["cifar100"]
    assert [int(k) for k in re.search(r"^CIFAR_KS\s*\?=\s*(.*)$", make, re.M).group(1).split()] == list(cifar.paper_Ks)
    recipe = make.split("\nreproduce-cifar100:")[1].split("\n\n")[0]
    assert f"[ $$K = {cifar.tuning_K} ] || [ $$K -gt {cifar.val_offset} ] && continue" in recipe
    assert "choices --benchmark cifar100" in recipe
    assert C.make_target_steps("cifar100") == {"tuning_K": 20, "own_Ks": [50, 200], "beyond_Ks": [500],
                                               "val_first": 400, "val_last": 499, "weights": False}
    cub = C.make_target_steps("cub")
    assert (cub["tuning_K"], cub["own_Ks"], cub["beyond_Ks"], cub["weights"]) == (10, [], [], True)
    assert "tune --benchmark cub --K 10" in make.split("\nreproduce-cub:")[1]
    for target in ("reproduce-cifar100", "reproduce-cub"):
        runs = re.findall(r"metacl_lite run .*?--seeds (\d+)", make.split(f"\n{target}:")[1].split("\n\n")[0])
        assert runs and set(runs) == {str(C.SEEDS)}  # the seeds the book's commands give (commands.SEEDS)
        head, recipe_lines = make.split(f"\n{target}:")[1].split("\n", 1)
        steps = [ln.strip() for ln in recipe_lines.split("\n")]
        fetch = next(i for i, ln in enumerate(steps) if "data_scripts/fetch.py" in ln)
        assert head.strip() == f"gpu-precheck-{target.split('-')[1]}"  # before installing anything
        assert "$(NEED_GPU)" in steps[:fetch]  # the check comes before the download
    assert "$(WHERE_OPTS) --need-gpu" in make.split("\nNEED_GPU")[1].split("\n")[0]  # a Ray cluster's GPUs, with EXEC
    assert all("$(WHERE_OPTS)" in line for line in make.replace("\\\n", " ").splitlines()  # EXEC reaches every step
               if re.search(r"metacl_lite (choices|tune|run) ", line))
    assert C.make_target_steps("pmnist") is None
