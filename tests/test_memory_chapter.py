"""Chapter 9, beyond the paper: the memory's questions (metacl_lite.findings.memory) on hand-made files, worked out by
hand; the chapter's records (metacl_lite.publish.page_memory); the figures' styles of the memory's methods and the
ACC-against-K figure (report.plots); the reproduction pages' memory rows and curves; and, slow, the chapter executed
on the committed files with its glued numbers recomputed here."""
import json
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from metacl_lite.errors import FileFormatError  # noqa: E402
from metacl_lite.findings import memory as Q, stats as S  # noqa: E402
from metacl_lite.lab.summary import summarize  # noqa: E402
from metacl_lite.publish import page_memory as R  # noqa: E402
from metacl_lite.report import plots as P  # noqa: E402
from metacl_lite.keys import RunKey  # noqa: E402
from metacl_lite.vocab import MEMORY_METHODS, PAPER_METHOD_NAMES  # noqa: E402

SEEDS = [0, 1, 2, 3]


def _file(K, methods, acc, seeds=SEEDS, M=None, refs=50.0):
    """A results file of a 2-task stream: each method's final accuracies on seed s are acc[method](s) on both tasks
    (ACC = that value; BT = 0; FA = first-task accuracy minus the reference)."""
    runs = {f"{m}/{s}": {"acc_matrix": [[acc[m](s), None], [acc[m](s), acc[m](s)]]} for m in methods for s in seeds}
    opts = {m: {"memory": M} for m in methods} if M else {}
    cfg = {"benchmark": "pmnist", "K": K, "n_tasks": 2, "seeds": list(SEEDS), "methods": list(methods),
           "method_hparams": {m: {} for m in methods}, "method_options": opts, "train": {"epochs": 1},
           "model": {}, "data_source": "auto"}
    res = {"config": cfg, "runs": runs, "references": {str(s): {"acc": [refs, refs]} for s in SEEDS}, "oracle": {}}
    res["summary"] = summarize(res)
    return res


def _evidence(memory_acc=None, ks=(20, 50), mem_seeds=SEEDS, mem_methods=tuple(MEMORY_METHODS)):
    """The paper's files at K = 20 and 50 (MAS-MetaCL-λ the best: 60 + s), and one memory file at K = 20, M = 1."""
    paper = {m: (lambda s, v=40.0 + i: v + s) for i, m in enumerate(PAPER_METHOD_NAMES)}
    paper["mas-metacl-lambda"] = lambda s: 60.0 + s
    mem = {m: (lambda s: 50.0 + s) for m in MEMORY_METHODS} | (memory_acc or {})
    results = {K: _file(K, PAPER_METHOD_NAMES, paper) for K in ks}
    memory = {(20, 1): _file(20, mem_methods, mem, seeds=mem_seeds, M=1)}
    return Q.MemoryEvidence(tuple(ks), Q.BUDGETS, results, memory)


def _by(rows, q):
    return {(r["a"], r["b"], r["metric"], r["K"], r["M"]): r for r in rows if r["question"] == q}


def test_the_questions_pair_a_memory_file_with_the_papers_file_seed_by_seed():
    """(a) MetaCL-λ (paper's file) − A-GEM (memory file): per seed (60 + s) − (50 + s) = 10 in ACC, BT 0 − 0; the
    differences are taken per seed across the two files."""
    ev = _evidence({"agem": lambda s: 50.0 + 2 * s})
    a = _by(Q.question_rows(ev), "a")
    r = a[("mas-metacl-lambda", "agem", "ACC", 20, 1)]
    assert r["differences"] == {0: 10.0, 1: 9.0, 2: 8.0, 3: 7.0} and r["mean"] == pytest.approx(8.5)
    assert r["verdict"] == S.CONFIRMED and r["test"] == "MAS-MetaCL-λ − A-GEM, ACC"
    assert a[("mas-metacl-lambda", "agem", "BT", 20, 1)]["differences"] == {s: 0.0 for s in SEEDS}
    # (a) asks at M = 1 only, at every K: K = 50 has no memory file
    assert {(K, M) for (_, _, _, K, M) in a} == {(20, 1), (50, 1)}
    r50 = a[("mas-metacl-lambda", "agem", "ACC", 50, 1)]
    assert r50["verdict"] == S.NOT_RUN and r50["missing"][0]["kind"] == "file"
    assert r50["missing"][0]["command"].endswith("--memory 1 --out results/pmnist-K50-memory-M1.json")


def test_each_question_has_its_pairs_metrics_and_budgets():
    rows = Q.question_rows(_evidence())
    tests = {q: {(r["a"], r["b"], r["metric"]) for r in rows if r["question"] == q} for q in "abcd"}
    lam = ["mas-metacl-lambda", "pi-metacl-lambda", "ewc-metacl-lambda"]
    assert tests["a"] == {(x, "agem", m) for x in lam for m in Q.METRICS}
    assert tests["b"] == {(x + "-mem", b, m) for x in lam for b in (x, "metacl-agem") for m in Q.METRICS}
    assert tests["c"] == {("metacl-agem", "agem", m) for m in Q.METRICS}
    assert tests["d"] == {("er", "mas-metacl-lambda", "ACC")}  # the best of the paper's methods in our file
    budgets = {q: {r["M"] for r in rows if r["question"] == q} for q in "abcd"}
    assert budgets == {"a": {1}, "b": {1}, "c": {1, 5}, "d": {1}}  # both references run at M = 1 only (memory_plan)
    parts = {r["part"] for r in rows if r["question"] == "b"}
    assert parts == {"regulariser alone", "memory alone"}


def test_holm_is_taken_within_each_question_over_its_K_and_M():
    """Each question is its own family: the adjusted p-values of a question are Holm's over its tests that ran and
    nothing else; changing another question's runs changes none of them."""
    rng = np.random.default_rng(0)
    noise = {m: rng.normal(size=4) for m in MEMORY_METHODS}
    ev = _evidence({m: (lambda s, m=m: 50.0 + 3 * noise[m][s]) for m in MEMORY_METHODS})
    rows = Q.question_rows(ev)
    for q in "abcd":
        ran = [r for r in rows if r["question"] == q and r["counted"] and r["n"] > 0]
        assert [r["p_holm"] for r in ran] == pytest.approx(S.holm_adjusted([r["p"] for r in ran]))
    other = _evidence({m: (lambda s, m=m: 50.0 + 3 * noise[m][s]) for m in MEMORY_METHODS}
                      | {"er": lambda s: 70.0 - s})
    same = [r["p_holm"] for r in Q.question_rows(other) if r["question"] == "c" and r["n"] > 0]
    assert same == [r["p_holm"] for r in rows if r["question"] == "c" and r["n"] > 0]


def test_a_file_just_begun_is_shown_not_counted_and_missing_runs_are_named():
    ev = _evidence(mem_seeds=[0], mem_methods=("agem", "er", "metacl-agem"))
    rows = Q.question_rows(ev)
    c = _by(rows, "c")[("metacl-agem", "agem", "ACC", 20, 1)]
    assert c["n"] == 1 and not c["counted"] and c["excluded"] == {"kind": "seeds", "n": 1} and c["holm"] == S.NOT_COUNTED
    b = _by(rows, "b")[("mas-metacl-lambda-mem", "mas-metacl-lambda", "ACC", 20, 1)]
    assert b["verdict"] == S.NOT_RUN and b["missing"] == [{"kind": "runs", "K": 20, "M": 1,
                                                          "file": "results/pmnist-K20-memory-M1.json",
                                                          "methods": ["mas-metacl-lambda-mem"]}]
    cov = Q.coverage(ev, rows)
    assert cov["files"] == [(20, 1)] and cov["absent"] == [(20, 5), (50, 1), (50, 5)]
    assert cov["runs_missing"] == {(20, 1): ["ewc-metacl-lambda-mem", "mas-metacl-lambda-mem",
                                             "pi-metacl-lambda-mem"]}
    assert cov["incomplete"] == [(20, 1, m, 1, 4) for m in ("agem", "er", "metacl-agem")]
    # the plan's commands: (20, 5) a run; (50, 1) its tuning, then its run; (50, 5) a run
    assert [c.split()[3] for c in cov["commands"]] == ["run", "tune", "run", "run"]
    assert "--K 50" in cov["commands"][-1] and "--memory 5" in cov["commands"][-1]
    # the whole grid's, made or not: (20, 1) its tuning and run, then the three above
    assert [c.split()[3] for c in cov["grid_commands"]] == ["tune", "run", "run", "tune", "run", "run"]
    assert cov["grid_commands"][2:] == cov["commands"] and "--K 20 --memory 1" in cov["grid_commands"][0]


def test_answers_name_the_verdict_parts_and_deciding_test():
    ev = _evidence({"metacl-agem": lambda s: 45.0 + s + 0.1 * s * s})
    ans = Q.answers(Q.question_rows(ev))
    assert ans["c"]["by"][("metacl-agem", "agem", "ACC", 20, 1)] == S.REFUTED and ans["c"]["verdict"] == S.REFUTED
    assert ans["d"]["deciding"]["a"] == "er" and ans["d"]["ran"] == 1 and ans["d"]["not_run"] == 1
    assert [p["part"] for p in ans["a"]["parts"]] == list(Q.METRICS)
    d = R.deciding_record(ans["d"])
    assert d["test"] == "ER − MAS-MetaCL-λ, ACC" and (d["K"], d["M"]) == (20, 1) and d["mean"] == "−10.0 pts"


def test_a_memory_file_is_paired_only_with_the_same_runs_and_references(tmp_path):
    ev = _evidence()
    main, mem = ev.results[20], ev.memory[(20, 1)]
    Q.check_pairing(mem, main, "x")
    for change in ({"n_tasks": 3}, {"train": {"epochs": 2}}, {"data_source": "raw"}):
        with pytest.raises(FileFormatError, match="cannot be paired"):
            Q.check_pairing({**mem, "config": {**mem["config"], **change}}, main, "x")
    with pytest.raises(FileFormatError, match="references"):
        Q.check_pairing({**mem, "references": {**mem["references"], "1": {"acc": [51.0, 50.0]}}}, main, "x")
    assert Q.check_pairing(mem, main, "x") == []


def _made_on(res, kernels, seeds=SEEDS):
    """`res` with one provenance invocation that made the references of `seeds` on `kernels` (None: not recorded)."""
    inv = {"cpu_kernels": kernels, "packages": {"torch": "2.14.1"}, "units": [f"references/{s}" for s in seeds]}
    return {**res, "provenance": {"invocations": [inv]}}


AVX2, AVX512 = {"capability": "AVX2", "model": "1"}, {"capability": "AVX512", "model": "17"}


@pytest.mark.parametrize("mem_kernels, main_kernels, allowed", [
    (AVX2, None, True),  # the paper's file did not record its kernels: a test image or two may differ
    (AVX2, AVX512, True),  # other kernels round otherwise
    (AVX2, AVX2, False),  # the same kernels and torch give the same bits: a gap means another stream
])
def test_references_may_differ_by_a_test_image_only_where_other_cpu_kernels_made_them(mem_kernels, main_kernels,
                                                                                       allowed):
    ev = _evidence()
    main, mem = _made_on(ev.results[20], main_kernels), _made_on(ev.memory[(20, 1)], mem_kernels)
    near = {**mem, "references": {**mem["references"], "2": {"acc": [50.01, 50.0]}}}
    if allowed:
        assert Q.check_pairing(near, main, "x") == [{"seed": 2, "tasks": 1, "of": 2, "max": pytest.approx(0.01)}]
    else:
        with pytest.raises(FileFormatError, match="seed 2 differ .by up to 0.01 points, made on the same CPU kernels"):
            Q.check_pairing(near, main, "x")
    far = {**mem, "references": {**mem["references"], "2": {"acc": [50.0, 50.0 + 2 * Q.KERNEL_GAP]}}}
    with pytest.raises(FileFormatError, match="seed 2 differ .by up to 0.20 points, above 0.1"):
        Q.check_pairing(far, main, "x")


def test_what_each_run_keeps_is_read_from_its_runs_and_must_agree_over_seeds():
    ev = _evidence()
    mem = ev.memory[(20, 1)]
    kept = {"agem": {"memory": 6000, "regulariser": 0}, "mas-metacl-lambda-mem": {"memory": 6000, "regulariser": 800}}
    for key, run in mem["runs"].items():
        if RunKey.parse(key).method in kept:
            run["state_bytes"] = dict(kept[RunKey.parse(key).method])
    assert Q.state_costs(ev) == [{"K": 20, "M": 1, "method": m, **v} for m, v in kept.items()]
    mem["runs"]["agem/3"]["state_bytes"]["memory"] = 6001
    with pytest.raises(FileFormatError, match="the seeds of agem record different state_bytes"):
        Q.state_costs(ev)


def test_a_memory_file_found_in_a_folder_is_loaded_and_checked(tmp_path):
    ev = _evidence()
    main, mem = ev.results[20], ev.memory[(20, 1)]
    # the files in a folder: found by name, loaded and checked
    for name, res in (("pmnist-K20.json", main), ("pmnist-K20-memory-M1.json", mem)):
        (tmp_path / name).write_text(json.dumps({k: v for k, v in res.items() if k != "summary"}))
    assert Q.memory_files("pmnist", tmp_path) == {(20, 1): tmp_path / "pmnist-K20-memory-M1.json"}
    assert Q.memory_files("cifar100", tmp_path) == {}


def test_gammas_say_where_each_came_from():
    ev = _evidence()
    cfg = ev.memory[(20, 1)]["config"]
    cfg["method_hparams"]["pi-metacl-lambda-mem"] = {"gamma": 100.0}
    cfg["method_hparams"]["mas-metacl-lambda-mem"] = {"gamma": 0.5}
    cfg["hparams_source"] = {"pi-metacl-lambda-mem": "pi-metacl-lambda's gamma, default: results/tuning-pmnist-K20.json",
                             "mas-metacl-lambda-mem": "tuned: results/tuning-pmnist-K20-memory-M1.json"}
    ev.results[20]["config"]["method_hparams"].update({"pi-metacl-lambda": {"gamma": 100.0},
                                                        "mas-metacl-lambda": {"gamma": 3.0}})
    g = {r["method"]: (r["gamma"], r["borrowed"], r["base_gamma"]) for r in Q.gammas(ev)}
    assert g == {"pi-metacl-lambda-mem": (100.0, True, 100.0), "mas-metacl-lambda-mem": (0.5, False, 3.0)}
    t = R.gamma_table(Q.gammas(ev))
    assert list(t["γ"]) == ["0.5", "100"] and list(t["method"]) == ["MAS-MetaCL-λ-mem", "PI-MetaCL-λ-mem"]


def test_acc_by_K_points_and_the_results_table():
    ev = _evidence({"er": lambda s: 52.0 + s})
    pts = Q.acc_by_K(ev)
    assert {(p["group"], p["method"], p["K"], p["M"]) for p in pts if p["method"] in ("er", "finetune",
                                                                                  "pi-metacl-lambda-mem")} == {
        ("memory", "er", 20, 1), ("regulariser", "finetune", 20, None), ("regulariser", "finetune", 50, None),
        ("both", "pi-metacl-lambda-mem", 20, 1)}
    er = next(p for p in pts if p["method"] == "er")
    assert er["mean"] == pytest.approx(53.5) and (er["n"], er["of"]) == (4, 4) and er["lo"] < 53.5 < er["hi"]
    t = R.results_table(ev)
    assert list(t.K.unique()) == [20]  # only the K with a memory file
    assert list(t.method[:5]) == ["Fine tune", "MetaCL, w/o reg", "MAS-MetaCL-λ", "PI-MetaCL-λ", "EWC-MetaCL-λ"]
    assert list(t[t.method == "ER"].ACC) == ["53.5\u00a0±\u00a02.1"] and list(t[t.method == "ER"].M) == [1]


def test_the_pages_formats_by_hand():
    assert R.by_K([(50, 1), (50, 5), (200, 1)]) == "K = 50 (M = 1, 5) and K = 200 (M = 1)" and R.by_K([]) == "none"
    rows = [{"question": "a", "metric": "ACC", "K": 20, "M": 1, "verdict": S.CONFIRMED, "mean": m, "a": a, "b": "agem",
             "holm": h} for m, a, h in ((4.6, "pi-metacl-lambda", S.CONFIRMED), (5.1, "mas-metacl-lambda", S.INCONCLUSIVE))]
    assert R.span(rows, "a", "ACC", 20, 1) == "+4.6 to +5.1 pts" and R.span(rows, "a", "BT", 20, 1) == "–"
    assert R.span(rows[:1], "a", "ACC", 20, 1) == "+4.6 pts"
    assert R.whose(rows, "a", "ACC", 20, 1, S.CONFIRMED) == ["PI-MetaCL-λ"]


def test_tests_table_names_pair_metric_K_M_and_p():
    rows = Q.question_rows(_evidence({"agem": lambda s: 50.0 + 2 * s}))
    t = R.tests_table([r for r in rows if r["question"] == "a"])
    first = t.iloc[0].to_dict()
    assert first["a − b, metric"] == "MAS-MetaCL-λ − A-GEM, ACC" and (first["K"], first["M"]) == (20, 1)
    assert first["mean (95% interval)"].startswith("+8.5 pts (") and first["seeds for"] == "4 of 4"
    assert first["verdict: Holm / raw"] == "confirmed / confirmed" and "(" in first["p (Holm)"]
    assert len(t) == 9  # the tests not yet run (K = 50) are left out of the table


def test_the_dual_check_meets_every_active_set_and_the_solvers():
    d = R.dual_check(n=100)
    assert d["kkt"] <= 1e-8 and d["slsqp"] <= 1e-7
    assert d["active"]["generic"] == {(a, b) for a in (False, True) for b in (False, True)}
    assert d["active"]["both zero"] == {(False, False)}
    assert {k for k, v in d["active"].items() if v} == set(R.KINDS)
    several = R.several_check(n=2)
    assert several["three_violation"] <= 1e-8 and (several["osqp"] is None or several["osqp"] <= 1e-6)


@pytest.mark.parametrize("method, expected", [
    ("agem", (P.MEMORY_FAMILY, "plain")), ("metacl-agem", (P.MEMORY_FAMILY, "MetaCL-β")),
    ("er", (P.MEMORY_FAMILY, P.REPLAY)), ("gem", (P.MEMORY_FAMILY, P.CONSTRAIN)),
    ("pi-metacl-lambda-mem", ("PI", P.BOTH))])
def test_family_variant_of_the_memorys_methods(method, expected):
    assert P.family_variant(method) == expected
    style = P.method_style(method)  # a memory method without a regulariser in its own colour, the others in theirs
    assert style is not None and style["color"] == P.MEMORY_COLOURS.get(method, P.FAMILY_COLOURS.get(expected[0]))


def test_the_memorys_lines_differ_from_each_other_and_the_papers():
    styles = {m: tuple(map(str, P.method_style(m).values())) for m in (*PAPER_METHOD_NAMES, *MEMORY_METHODS)}
    assert len(set(styles.values())) == len(styles)


def test_accuracy_curves_with_budgets_draw_the_larger_thicker():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    P.plot_accuracy_curves({"finetune": np.array([60, 50]), ("agem", 1): np.array([61, 52]),
                            ("agem", 5): np.array([62, 55])}, ax=ax)
    widths = {tuple(line.get_ydata()): line.get_linewidth() for line in ax.get_lines()}
    assert widths[(61, 52)] < widths[(62, 55)] and widths[(60, 50)] == widths[(61, 52)]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "A-GEM" in labels and "M = 1" in labels and "M = 5" in labels and P.REPLAY not in labels
    plt.close(fig)


def test_acc_by_K_figure_draws_each_method_of_each_group():
    import matplotlib.pyplot as plt

    ev = _evidence()
    fig = P.plot_acc_by_K(Q.acc_by_K(ev), (20, 50, 200, 500), {"regulariser": "r", "memory": "m", "both": "b"})
    axes = fig.axes
    assert [a.get_title() for a in axes] == ["r", "m", "b"]
    assert [len(a.containers) for a in axes] == [4, 4, 6]  # fine-tune, 3 MetaCL-λ; A-GEM, ER, GEM, MetaCL-A-GEM; 3 + 3
    plt.close(fig)
    begun = _evidence(mem_seeds=[0])  # a run of one seed is left out
    fig = P.plot_acc_by_K(Q.acc_by_K(begun), (20, 50), {"regulariser": "r", "memory": "m", "both": "b"})
    assert [len(a.containers) for a in fig.axes] == [4, 0, 0]
    plt.close(fig)


def test_the_reproduction_pages_memory_rows_and_curves():
    from metacl_lite.publish import page_reproduction as PR

    ev = _evidence()
    memory = {1: ev.memory[(20, 1)], 5: _file(20, ("agem",), {"agem": lambda s: 55.0}, M=5, seeds=[0, 1])}
    rows = PR.memory_rows(memory)
    assert [r["label"] for r in rows][:2] == ["A-GEM, M = 1 (not in the paper)", "ER, M = 1 (not in the paper)"]
    assert rows[-1]["label"] == "A-GEM, M = 5 (not in the paper)" and not rows[-1]["complete"]
    curves = PR.curves(ev.results[20], memory)
    assert "finetune" in curves and ("agem", 5) in curves and ("er", 1) in curves and "agem" not in curves


def test_each_K_lists_a_value_at_every_K_in_order():
    assert R.each_K({50: "+2.8 pts", 20: "+4.6 to +5.1 pts"}) == "+4.6 to +5.1 pts at K = 20; +2.8 pts at K = 50"
    assert (R.each_K({200: "MAS-MetaCL-λ"}), R.each_K({})) == ("MAS-MetaCL-λ at K = 200", "–")


def test_where_lists_only_the_K_with_a_value():
    assert R.where({20: "", 50: "PI-MetaCL-λ", 200: "MAS-MetaCL-λ and EWC-MetaCL-λ"}) == (
        "PI-MetaCL-λ at K = 50; MAS-MetaCL-λ and EWC-MetaCL-λ at K = 200")
    assert (R.where({20: "", 50: ""}), R.where({})) == ("none", "none")


def test_ks_where_lists_the_K_of_a_verdict_at_one_budget():
    def row(K, holm, M=1, metric="BT", q="c"):
        return {"question": q, "metric": metric, "K": K, "M": M, "a": "metacl-agem", "b": "agem", "mean": -1.0,
                "holm": holm, "verdict": S.NOT_RUN if holm is None else holm}
    rows = [row(200, S.REFUTED), row(20, S.REFUTED), row(500, S.INCONCLUSIVE), row(50, S.REFUTED),
            row(50, S.INCONCLUSIVE, M=5), row(20, S.INCONCLUSIVE, metric="ACC"), row(20, S.INCONCLUSIVE, q="a"),
            row(1000, None)]  # another budget, metric or question, and a test not run: not read
    assert R.ks_where(rows, "c", "BT", 1, S.REFUTED) == "K = 20, 50 and 200"
    assert R.ks_where(rows, "c", "BT", 1, S.INCONCLUSIVE) == "K = 500"
    assert R.ks_where(rows, "c", "BT", 1, S.CONFIRMED) == "none"


def test_gamma_fa_sets_bs_fa_test_beside_the_order_of_the_two_gammas():
    def row(a, b, K, mean, holm, M=1, metric="FA"):
        return {"question": "b", "metric": metric, "K": K, "M": M, "a": a, "b": b, "mean": mean, "holm": holm,
                "verdict": holm}
    rows = [row("pi-metacl-lambda-mem", "pi-metacl-lambda", 20, -3.2, S.REFUTED),
            row("pi-metacl-lambda-mem", "metacl-agem", 20, 9.0, S.CONFIRMED),  # against the memory alone: not read
            row("mas-metacl-lambda-mem", "mas-metacl-lambda", 20, 0.1, S.INCONCLUSIVE),
            row("mas-metacl-lambda-mem", "mas-metacl-lambda", 20, 5.0, S.CONFIRMED, metric="BT"),  # another metric
            row("ewc-metacl-lambda-mem", "ewc-metacl-lambda", 200, 4.46, S.CONFIRMED),
            row("pi-metacl-lambda-mem", "pi-metacl-lambda", 50, -0.004, S.INCONCLUSIVE)]
    gammas = [{"K": 20, "M": 1, "method": "pi-metacl-lambda-mem", "gamma": 300.0, "base_gamma": 100.0},
              {"K": 20, "M": 1, "method": "mas-metacl-lambda-mem", "gamma": 0.1, "base_gamma": 0.1},
              {"K": 200, "M": 1, "method": "ewc-metacl-lambda-mem", "gamma": 10.0, "base_gamma": 30.0},
              {"K": 50, "M": 1, "method": "ewc-metacl-lambda-mem", "gamma": 10.0, "base_gamma": 30.0},  # no test
              {"K": 50, "M": 1, "method": "pi-metacl-lambda-mem", "gamma": 3.0, "base_gamma": 3.0}]
    pairs = R.gamma_fa(gammas, rows)
    assert [(p["K"], p["regulariser"], p["order"], p["mean"], p["holm"]) for p in pairs] == [
        (20, "pi-metacl-lambda", "larger", -3.2, S.REFUTED), (20, "mas-metacl-lambda", "same", 0.1, S.INCONCLUSIVE),
        (200, "ewc-metacl-lambda", "smaller", 4.46, S.CONFIRMED), (50, "pi-metacl-lambda", "same", -0.004,
                                                                   S.INCONCLUSIVE)]
    assert R.gamma_fa_glue(pairs) == {
        "qb_fa_larger": "PI-MetaCL-λ-mem at K = 20 (γ 300 against 100: FA −3.20 pts)",
        "qb_fa_same": "MAS-MetaCL-λ-mem at K = 20 (γ 0.1: FA +0.10 pts); "
                      "PI-MetaCL-λ-mem at K = 50 (γ 3: FA +0.00 pts)",
        "qb_fa_smaller": "EWC-MetaCL-λ-mem at K = 200 (γ 10 against 30: FA +4.46 pts)"}
    assert R.gamma_fa_glue(pairs[:1])["qb_fa_smaller"] == "none"


def test_highest_mean_and_where_er_with_five_images_leads():
    ev = _evidence({"er": lambda s: 58.0 + s})  # ER, M = 1: 59.5 against MAS-MetaCL-λ's 61.5 at K = 20
    assert Q.highest_mean(ev, 20) == ("mas-metacl-lambda", None, pytest.approx(61.5))
    five = {"er": lambda s: 70.0 + s, "agem": lambda s: 40.0 + s, "metacl-agem": lambda s: 40.0 + s}
    ev.memory[(20, 5)] = _file(20, ["agem", "er", "metacl-agem"], five, M=5)
    ev.memory[(50, 1)] = _file(50, MEMORY_METHODS, {m: (lambda s: 50.0 + s) for m in MEMORY_METHODS}
                               | {"pi-metacl-lambda-mem": lambda s: 66.0 + s}, M=1)
    ev.memory[(50, 5)] = _file(50, ["agem", "er", "metacl-agem"], {m: (lambda s: 63.0 + s) for m in five}, M=5)
    assert Q.highest_mean(ev, 20) == ("er", 5, pytest.approx(71.5))
    assert Q.highest_mean(ev, 50) == ("pi-metacl-lambda-mem", 1, pytest.approx(67.5))
    top = {K: Q.highest_mean(ev, K) for K in (20, 50)}
    assert R.er5_glue(ev, top) == {"er5_leads": "K = 20", "er5_behind": "64.5% at K = 50, against MAS-MetaCL-λ's "
                                                                        "61.5% and PI-MetaCL-λ-mem's 67.5% at M = 1"}
    assert R.er5_glue(ev, {50: top[50]})["er5_leads"] == "none"


def test_the_pages_tool_stamps_chapter_9_with_every_planned_memory_file():
    from metacl_lite.publish import pages as PG

    names = PG.stamped_pages()[PG.REPO_ROOT / "book" / "chapters" / "09_memory.md"]
    assert [n for n in names if "memory" in n][:2] == ["pmnist-K20-memory-M1.json", "pmnist-K20-memory-M5.json"]
    assert {f"pmnist-K{K}-memory-M{M}.json" for K in (20, 50, 200, 500) for M in Q.BUDGETS} <= set(names)
    assert PG.memory_names("cifar100", 20, planned=False) == []


# ---------------------------------------------------------------------------------------------------------------
# The chapter, executed on the committed files
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_chapter_9_executes_and_its_numbers_are_the_files(book_build):
    """Chapter 9 as the book's build executed it (conftest's book_build: once per session): its glued numbers."""
    from metacl_lite.paths import REPO_ROOT
    from metacl_lite.publish.notebooks import glued_values

    assert book_build.result.returncode == 0, book_build.result.stderr[-3000:]
    g = glued_values(book_build.executed / "chapters" / "09_memory.glue.json")
    ev = Q.load_memory_evidence()
    rows = Q.question_rows(ev)
    a = [r for r in rows if r["question"] == "a" and r["metric"] == "ACC" and (r["K"], r["M"]) == (20, 1)]
    assert g["qa_acc_span"].split("; ")[0] == R.span(rows, "a", "ACC", 20, 1) + " at K = 20"
    means = sorted(np.mean([ev.results[20]["summary"][r["a"]]["ACC"]["values"][i]
                            - dict(zip(ev.memory[(20, 1)]["summary"]["agem"]["seeds"],
                                       ev.memory[(20, 1)]["summary"]["agem"]["ACC"]["values"]))[s]
                            for i, s in enumerate(ev.results[20]["summary"][r["a"]]["seeds"])]) for r in a)
    assert g["qa_acc_span"].startswith(f"+{means[0]:.1f}") and math.isclose(a[0]["n"], 10)
    assert g["dual_n"] == 100 and g["dual_generic_sets"] == 4 and g["qd_best"].split("; ")[0] == "MAS-MetaCL-λ at K = 20"
    assert g["mem_files"].startswith("K = 20 (M = 1") and g["mem_ks"] == "K = 20, 50, 200 and 500"
    assert g["qb_fa_larger"].startswith("PI-MetaCL-λ-mem at K = 20 (γ 300 against 100: FA −")
    # the memory's policy and Adam's state beside ER at K = 20, M = 1, from the three files themselves
    er = {f: json.loads((REPO_ROOT / "results" / f).read_text())["summary"]["er"]["ACC"]["mean"] for f in
          ("memory-end-of-task/pmnist-K20-memory-M1.json", "pmnist-K20-memory-M1.json",
           "pmnist-K20-memory-M1-optimizer-stream.json")}
    old, now, kept = er.values()
    assert g["er_policy_gain"] == R.pts(now - old) and g["er_state_gain"] == R.pts(kept - now)
    assert g["er_kept"] == f"{kept:.1f}" and g["er_images"] == "2" and g["curves_both"].endswith("-MetaCL-λ-mem")


def test_the_sentences_of_b_and_c_name_fa_below_the_memory_alone_and_acc_below_a_gem():
    """(b): PI-MetaCL-λ-mem 45 + 1.5 s against MetaCL-A-GEM's 50 + s is lower in FA (−5 + s / 2 per seed), MAS's
    55 + 1.5 s higher; (c): MetaCL-A-GEM − A-GEM (52 + 1.5 s) = −2 − s / 2 in ACC, refuted at K = 20 alone."""
    ev = _evidence({"mas-metacl-lambda-mem": lambda s: 55 + 1.5 * s, "pi-metacl-lambda-mem": lambda s: 45 + 1.5 * s,
                    "agem": lambda s: 52 + 1.5 * s})
    g = R.spans_glue(Q.question_rows(ev), ev)
    assert g["qb_mem_fa_lower"] == "PI-MetaCL-λ-mem at K = 20" and g["qb_mem_fa_higher"] == "MAS-MetaCL-λ-mem at K = 20"
    assert g["qc_acc_refuted"] == "K = 20" and R.spans_glue(Q.question_rows(_evidence()), _evidence())[
        "qc_acc_refuted"] == "none"


def test_verdict_changes_lists_the_tests_whose_holm_verdict_moved():
    """Two memories on the same paper's files: A-GEM 50 + s before, 65 + s now, so MAS-MetaCL-λ (60 + s) − A-GEM in
    ACC goes from confirmed (+10) to refuted (−5); a test run with one memory only is not listed."""
    before = _evidence()
    now = _evidence({"agem": lambda s: 65.0 + s})
    changed = Q.verdict_changes(Q.question_rows(before), Q.question_rows(now))
    acc = [c for c in changed if (c["question"], c["a"], c["b"], c["metric"]) == ("a", "mas-metacl-lambda", "agem",
                                                                                  "ACC")]
    assert acc == [{"question": "a", "a": "mas-metacl-lambda", "b": "agem", "metric": "ACC", "K": 20, "M": 1,
                    "before": S.CONFIRMED, "now": S.REFUTED, "mean_before": 10.0, "mean_now": -5.0}]
    assert Q.verdict_changes(Q.question_rows(before), Q.question_rows(before)) == []
    assert R.changes_table(acc).to_dict("records") == [
        {"question": "(a)", "a − b, metric": "MAS-MetaCL-λ − A-GEM, ACC", "K": 20, "M": 1,
         "before: mean, Holm": "+10.0 pts, confirmed", "now: mean, Holm": "−5.0 pts, refuted"}]
    policy = R.policy_table(now, before, {})
    assert policy.set_index("method").loc["A-GEM", ["end-of-task memory", "balanced memory"]].tolist() == [
        "51.5\u00a0±\u00a02.1", "66.5\u00a0±\u00a02.1"]


def test_compute_rows_count_the_images_each_step_passes_by_hand():
    """K = 20, 2 tasks of 10 classes, M = 1: the memory holds nothing during the first task and min(200, 1 x 10 x 2)
    = 20 images during the second. Fine-tune: 100 a step; ER: 100 + min(100, 20); A-GEM: 100 + min(256, 20); GEM:
    100 + 20 (its whole memory). Mean over the two tasks' steps, most, and the step time's ratio to fine-tune's."""
    from metacl_lite.memory import images_per_step

    assert [images_per_step(u, 100, 300) for u in (None, "replay", "project", "constrain")] == [100, 200, 356, 400]
    ev = _evidence()
    ev.memory[(20, 1)]["config"]["train"]["batch_size"] = 100
    rows = {r["method"]: r for r in Q.compute_rows(ev, 20, 1, {"finetune": 4.0, "er": 6.0})}
    assert [(rows[m]["images_mean"], rows[m]["images_max"]) for m in ("finetune", "er", "agem", "gem")] == [
        (100, 100), (110, 120), (110, 120), (110, 120)]
    assert rows["er"]["vs_finetune"] == 1.5 and rows["agem"]["step_ms"] is None and rows["agem"]["vs_finetune"] is None
    assert list(rows)[:5] == ["finetune", "metacl", "mas-metacl-lambda", "pi-metacl-lambda", "ewc-metacl-lambda"]
    table = R.compute_table({1: list(rows.values())})
    assert table.set_index("method").loc["ER", ["images a step (most)", "× fine-tune's"]].tolist() == [120, "1.50"]
