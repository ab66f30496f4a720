"""The reproduction pages as pages of a book (issue 20): each made by papermill from the template that fits what it
can show, every glue name its text uses glued by its code, narrow numbered tables, figures coloured by regulariser and
styled by variant, and the numbers behind why the CIFAR-100 pages tune at K = 20."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from metacl_lite.publish import pages as N
from metacl_lite.report import overview as O  # noqa: E402
from metacl_lite.report import plots  # noqa: E402
from metacl_lite.report import targets as T  # noqa: E402
from metacl_lite.findings.paper import paper_table
from metacl_lite.report.tables import live_frame, metric_table_markdown, paper_rows  # noqa: E402
from metacl_lite.training import METHODS  # noqa: E402

KINDS = {"both": ("pmnist", 50), "ours": ("pmnist", 5), "paper": ("cifar100", 50)}


# --- which cells a page takes, and every glue it shows -----------------------------------------------------------------


def test_the_kind_follows_the_results_file_and_the_paper(tmp_path):
    (tmp_path / "pmnist-K5.json").write_text("{}")
    (tmp_path / "pmnist-K50.json").write_text("{}")
    assert N.reproduction_kind("pmnist", 50, tmp_path) == "both"
    assert N.reproduction_kind("pmnist", 5, tmp_path) == "ours"  # beyond the paper's K
    assert N.reproduction_kind("cifar100", 50, tmp_path) == "paper"  # no results file yet
    with pytest.raises(ValueError):
        N.reproduction_kind("pmnist", 7, tmp_path)  # neither: no page


def _glued_names(benchmark: str, K: int) -> set:
    """Every name the template's code glues for a setting: its literal glue("name", ...) calls and the keys of the
    records it glues with `glue_record` (publish/page_reproduction.py's `*_glue`), computed for this setting."""
    import re

    from metacl_lite.lab.store import load_results
    from metacl_lite.paths import REPO_ROOT
    from metacl_lite.publish import page_reproduction as P
    from metacl_lite.report.interpret import interpretation

    code = N.TEMPLATE.read_text()
    names = set(re.findall(r'glue\("([\w-]+)"', code))
    s = P.setting_record(benchmark, K)
    live = {"config": {"seeds": [0], "n_tasks": 3, "train": {"epochs": 1}}, "provenance": {"wall_s_total": 1.0},
            "summary": {"finetune": {}, "joint": {}}}
    names |= set(P.done_glue(live))  # the live run's, glued by its cell on any page
    names |= set(P.head_glue(s, True, P.live_record(benchmark, K, ["finetune"], 1, 0, 0, False, None, "")))
    committed = load_results(REPO_ROOT / s["committed_file"]) if s["present"] else None
    names |= set(P.tables_glue(benchmark, K, committed))
    if s["present"]:
        names |= set(P.made_glue(P.made_record(committed, s["committed_file"])))
        names |= set(P.interpretation_glue(interpretation(committed)))
    else:
        names |= set(P.missing_glue(P.missing_record(benchmark, K)))
    return names


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_glue_a_page_shows_is_glued_by_its_code(kind):
    """A glue name that is never set fails the book's build: every {glue:...} of the page made for each kind (with a
    live run) is glued by its code; the figures only where the page has their data."""
    import re

    import jupytext

    benchmark, K = KINDS[kind]
    params = {"benchmark": benchmark, "K": K, "live": True, "shows": "", "tables": kind}
    nb = jupytext.reads(N.make_page(N.TEMPLATE, "x", params), fmt="md:myst")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    shown = {a or b for a, b in re.findall(r"\{glue(?::\w+)?\}`([\w-]+)(?::[^`]*)?`|```\{glue(?::\w+)?\}\s+(\S+)", text)}
    assert shown and shown <= _glued_names(benchmark, K), shown - _glued_names(benchmark, K)
    assert ("{glue:figure} fig_curves" in text) == (kind != "paper")
    assert ("{glue:figure} fig_differences" in text) == (kind == "both")
    assert "records.live_run(" in code and "## A live run" in text  # -p live True runs it on any page
    for fig in ("fig_curves", "fig_differences"):  # each figure captioned, with alt text not a path
        if f"{{glue:figure}} {fig}\n" in text:
            block = text.split(f"{{glue:figure}} {fig}\n", 1)[1].split("```", 1)[0]
            alt = next(line for line in block.splitlines() if line.startswith(":alt: "))
            assert len(alt) > 150 and ".png" not in alt
    assert not any(t.startswith("only-") for c in nb.cells for t in c.metadata.get("tags", []))


def test_a_page_without_a_live_run_drops_its_words_but_keeps_the_cell():
    import jupytext

    page = lambda live: N.make_page(N.TEMPLATE, "x", {"benchmark": "pmnist", "K": 50, "live": live, "shows": "",  # noqa: E731
                                                      "tables": "both"})
    assert "The live run:" in page(True) and "The live run:" not in page(False)
    assert "records.live_run(" in page(False)  # -p live True still trains on a page made without one
    nb = jupytext.reads(page(False), fmt="md:myst")
    assert [c.metadata["tags"] for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])] == [
        ["injected-parameters", "hide-input"]]


def test_generated_pages_show_what_their_setting_has():
    """The CIFAR-100 and CUB pages (no results file) have no figure, the pages beyond the paper no differences
    figure: each page is the template made for its kind, and `pages --check` finds none stale."""
    from metacl_lite.paths import REPO_ROOT

    for stem in ["benchmark", *N.PAGES]:
        path, title, params, kind = N.page_params(stem)
        text = path.read_text()
        b, K = params["benchmark"], params["K"]
        has_file = (REPO_ROOT / "results" / f"{b}-K{K}.json").exists()
        assert ("{glue:figure} fig_curves" in text) == has_file, stem
        assert ("{glue:figure} fig_differences" in text) == (has_file and paper_table(b, K) is not None), stem
        assert kind == ("both" if has_file and paper_table(b, K) else "ours" if has_file else "paper"), stem
        assert text == N.make_page(N.TEMPLATE, title, params, kind), stem
        assert params.get("tables", "") == ("" if stem == "benchmark" else kind)


# --- tables ----------------------------------------------------------------------------------------------------------


def _row(m, acc_ours, acc_paper, diff, complete=True):
    return {"method": m, "label": METHODS[m].label, "n": 2 if complete else 1, "n_total": 2, "complete": complete,
            "ACC ours": acc_ours, "ACC paper": acc_paper, "ACC diff": diff}


def test_metric_table_is_narrow_and_keeps_each_number_on_one_line():
    rows = [_row("pi", "52.1 ± 0.4", "50.6 ± 0.9", 1.5), _row("ewc", "-40.0 ± 1.0", "41.2 ± 0.3", -1.2, False),
            _row("mas", "–", "55.7 ± 1.1", None)]
    nb = "\u00a0±\u00a0"
    assert metric_table_markdown(rows, "ACC").splitlines() == [
        "| Method | Ours | Paper |", "|:---|---:|---:|",
        f"| PI | 52.1{nb}0.4 | 50.6{nb}0.9 |",
        f"| EWC (1 of 2 seeds) | −40.0{nb}1.0 | 41.2{nb}0.3 |",
        f"| MAS | – | 55.7{nb}1.1 |"]
    assert metric_table_markdown(rows, "ACC", paper=False).splitlines()[:3] == [
        "| Method | Ours |", "|:---|---:|", f"| PI | 52.1{nb}0.4 |"]


def test_paper_rows_hold_the_papers_numbers_only():
    rows = paper_rows("cub", 10)
    paper = paper_table("cub", 10)
    assert [r["method"] for r in rows] == [m for m in list(METHODS) + ["joint"] if m in paper]
    first = rows[0]
    mean, pm = paper[first["method"]]["ACC"]
    assert first["ACC paper"] == f"{mean:.1f} ± {pm:.1f}" and first["ACC ours"] == "–" and first["ACC diff"] is None
    assert paper_rows("pmnist", 5) == []
    table = metric_table_markdown(rows, "ACC", ours=False).splitlines()
    assert table[0] == "| Method | Paper |" and table[2] == f"| {first['label']} | {mean:.1f}\u00a0±\u00a0{pm:.1f} |"


def test_live_frame_lists_the_methods_run():
    summ = {"finetune": {"ACC": {"mean": 40.04, "ci95": None}, "BT": {"mean": -10.0, "ci95": None},
                         "FA": {"mean": 0.5, "ci95": None}, "seeds": [0]}}
    res = {"config": {"benchmark": "pmnist", "K": 20, "seeds": [0], "methods": ["finetune"], "n_tasks": 3},
           "summary": summ}
    assert live_frame(res).values.tolist() == [["Fine tune", "40.0", "−10.0", "0.5"]]


def test_targets_split_into_two_narrow_tables():
    rows = [{"K": 5, "in_paper": False, "exists": True, "seeds": 5, "tuned_at_K": True, "interior": True,
             "acc_gap": None, "fa_max": None, "fa_method": None, "acc_above": None, "acc_below": None, "rho": None},
            {"K": 50, "in_paper": True, "exists": True, "seeds": 5, "tuned_at_K": False, "interior": False,
             "acc_gap": 3.24, "fa_max": 13.8, "fa_method": "pi", "acc_above": 4, "acc_below": 0, "rho": 0.9},
            {"K": 200, "in_paper": True, "exists": False, "seeds": None, "tuned_at_K": None, "interior": None,
             "acc_gap": None, "fa_max": None, "fa_method": None, "acc_above": None, "acc_below": None, "rho": None}]
    assert T.targets_frame(rows, "protocol").values.tolist() == [[5, 5, "yes", "yes"], [50, 5, "no", "no"],
                                                                 [200, "no results file yet", "–", "–"]]
    assert T.targets_frame(rows, "gaps").values.tolist() == [[5, "beyond the paper", "–", "–"],
                                                             [50, "3.2 ✗", "13.8 ✗ (PI)", "4 / 0"],
                                                             [200, "no results file yet", "–", "–"]]
    for part in ("protocol", "gaps"):
        assert T.targets_frame(rows, part).shape[1] == 4  # four narrow columns: readable in a 390-px window
    assert T.targets_frame(rows).shape[1] == 8 and T.targets_frame(rows).loc[1, "ρ"] == "0.90"  # the README's
    with pytest.raises(ValueError):
        T.targets_frame(rows, "other")


# --- why the CIFAR-100 pages tune at K = 20 ------------------------------------------------------------------------


HP = {"pmnist": {"methods": {"ewc": {"beta": 100.0}, "pi": {"beta": 300.0}},
                 "by_K": {"50": {"methods": {"ewc": {"beta": 30.0}, "pi": {"beta": 300.0}}},
                          "5": {"methods": {"ewc": {"beta": 300.0}, "pi": {"beta": 1000.0}}}}}}


def test_tuned_values_shrink_counts_smaller_values_than_at_the_tuning_K():
    assert O.tuned_values_shrink("pmnist", HP) == [{"K": 5, "n": 2, "smaller": 0}, {"K": 50, "n": 2, "smaller": 1}]


def test_tuning_cost_counts_grid_values_and_seeds():
    from metacl_lite.lab.tuning import BETA_GRID, GAMMA_GRID, TUNING_SEEDS

    n_tune, n_run = O.tuning_cost(5)
    # six plain/MetaCL-β methods search β, three MetaCL-λ methods search γ (which also tries 0)
    assert n_tune == (6 * len(BETA_GRID) + 3 * len(GAMMA_GRID)) * len(TUNING_SEEDS) and n_run == 11 * 5


# --- figures ---------------------------------------------------------------------------------------------------------


def test_accuracy_curves_colour_by_regulariser_and_style_by_variant():
    curves = {"finetune": np.array([60.0, 50.0]), "pi-metacl-lambda": np.array([80.0, 70.0]),
              "ewc-metacl-beta": np.array([70.0, 65.0])}
    fig, ax = plt.subplots()
    plots.plot_accuracy_curves(curves, ax=ax)
    got = {(matplotlib.colors.to_hex(ln.get_color()), ln.get_linestyle()): ln.get_ydata().tolist()
           for ln in ax.lines}
    assert got == {(matplotlib.colors.to_hex(plots.FAMILY_COLOURS["none"]), "-"): [60.0, 50.0],
                   (matplotlib.colors.to_hex(plots.FAMILY_COLOURS["PI"]), ":"): [80.0, 70.0],
                   (matplotlib.colors.to_hex(plots.FAMILY_COLOURS["EWC"]), "--"): [70.0, 65.0]}
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["no penalty", "MAS", "PI", "EWC", "plain (fine-tune)",
                                                          "MetaCL-β (MetaCL w/o reg)", "MetaCL-λ"]
    assert min(t.get_fontsize() for t in legend.get_texts()) >= 9
    plt.close(fig)


def test_differences_one_panel_per_metric_in_regulariser_colours():
    rows = [{"method": "pi", "label": "PI", "ACC diff": 1.5, "BT diff": -2.0, "FA diff": None},
            {"method": "joint", "label": "Joint training (oracle)", "ACC diff": -0.5, "BT diff": None,
             "FA diff": None}]
    axes = plots.plot_differences(rows)
    assert [a.get_title() for a in axes] == ["ACC", "BT", "FA"]
    widths = [[p.get_width() for p in a.patches] for a in axes]
    assert widths[0] == [1.5, -0.5] and widths[1][0] == -2.0 and np.isnan(widths[1][1])
    assert matplotlib.colors.to_hex(axes[0].patches[0].get_facecolor()) == matplotlib.colors.to_hex(
        plots.FAMILY_COLOURS["PI"])
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["PI", "Joint training (oracle)"]
    assert axes[0].figure.get_size_inches()[0] == pytest.approx(plots.PAGE_WIDTH_IN)
    plt.close(axes[0].figure)


def test_an_unknown_method_keeps_its_own_legend_entry():
    fig, ax = plt.subplots()
    plots.plot_accuracy_curves({"mystery": np.array([1.0, 2.0])}, {"mystery": "My method"}, ax=ax)
    assert "My method" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)



def test_figure_and_table_labels_are_unique_across_the_book_and_each_reference_finds_its_own_page():
    """Sphinx warns on a label defined twice (the build runs with warnings as errors): the reproduction pages, made
    from one template each, name no figure or table (their captions say which tables they mean), and every
    {numref} of the book finds a label of its own page."""
    import re
    from pathlib import Path
    book = Path(__file__).resolve().parents[1] / "book"
    seen = {}
    for page in sorted(book.rglob("*.md")):
        if "_build" in page.parts:
            continue
        text = page.read_text()
        names = re.findall(r"^:name:\s*(\S+)", text, flags=re.M)
        if page.parent.name in ("reproduce", "templates") and page.stem != "overview":
            assert names == [], page
        for n in names:
            assert n not in seen, f"{n} in {page} and {seen[n]}"
            seen[n] = page
        for ref in re.findall(r"\{numref\}`(?:[^<`]*<)?([^>`]+)>?`", text):
            assert ref in names, (page, ref)
