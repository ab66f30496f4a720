"""The reproduction pages as pages of a book (issue 20): their parameters in words, narrow numbered tables, figures
coloured by regulariser and styled by variant, the blocks a page without data leaves out, and why the CIFAR-100
pages tune at K = 20."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from metacl_lite.report import notebooks as N  # noqa: E402
from metacl_lite.report import overview as O  # noqa: E402
from metacl_lite.report import plots  # noqa: E402
from metacl_lite.report import targets as T  # noqa: E402
from metacl_lite.report.paper import paper_table  # noqa: E402
from metacl_lite.report.tables import live_table_markdown, metric_table_markdown, paper_rows  # noqa: E402
from metacl_lite.training import METHODS  # noqa: E402

DEFAULTS = {"benchmark": "pmnist", "K": 20, "seeds": 1, "methods": "all", "epochs": 0, "n_tasks": 0, "quick": False,
            "live": True, "out_dir": "", "device": None}


# --- parameters in words --------------------------------------------------------------------------------------------


def test_parameters_are_a_sentence_not_a_dict():
    md = N.parameters_markdown(DEFAULTS)
    assert "{" not in md and "'K'" not in md
    assert md.splitlines() == [
        "- **Setting:** Permuted MNIST, K = 20 training images per class.",
        "- **Live run:** all 11 methods and the joint oracle, 1 seed, 20 tasks of 5 epochs (the paper's), on `cpu`; "
        "its results file goes to a temporary folder."]
    quick = N.parameters_markdown({**DEFAULTS, "methods": "finetune,pi", "quick": True, "seeds": 2, "out_dir": "runs"})
    assert "2 methods (Fine tune, PI) and the joint oracle, 2 seeds, a smoke run of 3 tasks with 1 epoch each" in quick
    assert "goes to `runs`" in quick
    assert "10 tasks of 5 epochs (not the paper's protocol)" in N.parameters_markdown({**DEFAULTS, "n_tasks": 10})
    off = N.parameters_markdown({**DEFAULTS, "benchmark": "cifar100", "K": 50, "live": False})
    assert off.splitlines()[1] == "- **Live run:** none (`live = False`); the page shows the committed results."


# --- blocks a page keeps only where it has their data ----------------------------------------------------------------


TEXT = "a\n% only-if: results\nfig\n% end-if\nb\n% only-if: compare\ndiff\n% end-if\nc\n"


def test_keep_blocks_drops_only_the_false_ones():
    assert N.keep_blocks(TEXT, {"results": True, "compare": False}) == "a\n% only-if: results\nfig\n% end-if\nb\nc\n"
    assert N.keep_blocks(TEXT, {"results": False, "compare": False}) == "a\nb\nc\n"
    assert N.keep_blocks(TEXT, {"results": True, "compare": True}) == TEXT


def test_page_conditions_follow_the_results_file_and_the_paper(tmp_path):
    (tmp_path / "pmnist-K5.json").write_text("{}")
    assert N.page_conditions("pmnist", 5, False, tmp_path) == {"results": True, "paper": False, "table": True,
                                                                "compare": False, "live": False}
    assert N.page_conditions("cifar100", 50, False, tmp_path) == {"results": False, "paper": True, "table": True,
                                                                   "compare": False, "live": False}


def test_generated_pages_glue_every_figure_they_show():
    """A page keeps a glued figure only where its data exists: the CIFAR-100 and CUB pages (no results file) have no
    figure, the pages beyond the paper no differences figure, and no variant page has the live run's heading (its
    code stays: `-p live True` runs it on any page)."""
    from metacl_lite.data.datafiles import REPO_ROOT

    for stem, (_, params) in N.PAGES.items():
        text = (N.TEMPLATE.parent / f"{stem}.md").read_text()
        b, K = params.get("benchmark", "pmnist"), params["K"]
        has_file = (REPO_ROOT / "results" / f"{b}-K{K}.json").exists()
        assert ("{glue:figure} fig_curves" in text) == has_file, stem
        assert ("{glue:figure} fig_differences" in text) == (has_file and paper_table(b, K) is not None), stem
        assert "## A live run" not in text and "{glue:md} tab_ACC" in text and "run_experiment(" in text, stem
    template = N.TEMPLATE.read_text()
    assert "## A live run" in template and "{glue:figure} fig_differences" in template
    # the live run's table is a cell output: rendered as MyST (CommonMark, the default for outputs, has no tables)
    live_cell = template.split("## A live run", 1)[1].split("```{code-cell} ipython3", 1)[1].split("\nif live:", 1)[0]
    assert "markdown_format: myst" in live_cell
    for name in ("fig_curves", "fig_differences"):  # each figure numbered, captioned, with alt text not a path
        block = template.split(f"{{glue:figure}} {name}\n", 1)[1].split("```", 1)[0]
        alt = next(line for line in block.splitlines() if line.startswith(":alt: "))
        assert ":name: fig-repro-" in block and len(alt) > 150 and ".png" not in alt


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


def test_live_table_lists_the_methods_run():
    summ = {"finetune": {"ACC": {"mean": 40.04, "ci95": None}, "BT": {"mean": -10.0, "ci95": None},
                         "FA": {"mean": 0.5, "ci95": None}, "seeds": [0]}}
    res = {"config": {"benchmark": "pmnist", "K": 20, "seeds": [0], "methods": ["finetune"], "n_tasks": 3},
           "summary": summ}
    assert live_table_markdown(res).splitlines() == ["| Method | ACC | BT | FA |", "|:---|---:|---:|---:|",
                                                     "| Fine tune | 40.0 | −10.0 | 0.5 |"]


def test_targets_split_into_two_narrow_tables():
    rows = [{"K": 5, "in_paper": False, "exists": True, "seeds": 5, "tuned_at_K": True, "interior": True,
             "acc_gap": None, "fa_max": None, "fa_method": None, "acc_above": None, "acc_below": None, "rho": None},
            {"K": 50, "in_paper": True, "exists": True, "seeds": 5, "tuned_at_K": False, "interior": False,
             "acc_gap": 3.24, "fa_max": 13.8, "fa_method": "pi", "acc_above": 4, "acc_below": 0, "rho": 0.9},
            {"K": 200, "in_paper": True, "exists": False, "seeds": None, "tuned_at_K": None, "interior": None,
             "acc_gap": None, "fa_max": None, "fa_method": None, "acc_above": None, "acc_below": None, "rho": None}]
    assert T.targets_markdown(rows, "protocol").splitlines()[2:] == ["| 5 | 5 | yes | yes |", "| 50 | 5 | no | no |",
                                                                     "| 200 | no results file yet | – | – |"]
    assert T.targets_markdown(rows, "gaps").splitlines()[2:] == ["| 5 | beyond the paper | – | – |",
                                                                 "| 50 | 3.2 ✗ | 13.8 ✗ (PI) | 4 / 0 |",
                                                                 "| 200 | no results file yet | – | – |"]
    for part in ("protocol", "gaps"):
        assert {line.count("|") for line in T.targets_markdown(rows, part).splitlines()} == {5}
    assert T.targets_markdown(rows).count("|") > T.targets_markdown(rows, "gaps").count("|")  # the README's: wide
    with pytest.raises(ValueError):
        T.targets_markdown(rows, "other")


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


def test_cifar_pages_say_why_they_tune_at_20_and_how_to_tune_at_their_K(monkeypatch):
    assert O.tuning_note_markdown("cifar100", 20) is None and O.tuning_note_markdown("pmnist", 50) is None
    assert O.tuning_note_markdown("cub", 10) is None
    monkeypatch.setattr(O, "tuned_values_shrink", lambda b="pmnist": [{"K": 50, "n": 9, "smaller": 9},
                                                                      {"K": 200, "n": 9, "smaller": 9}])
    note = O.tuning_note_markdown("cifar100", 200)
    assert note.startswith("**Why `--K 20`.**") and "over-regularise" in note and "chapter 8" in note
    assert "K = 50, 200 are smaller than those chosen at K = 20 for every regularised method" in note
    assert note.endswith("```text\npython -m metacl_lite tune --benchmark cifar100 --K 200\n"
                         "python -m metacl_lite run --benchmark cifar100 --K 200 --seeds 5\n```")
    monkeypatch.setattr(O, "tuned_values_shrink", lambda b="pmnist": [{"K": 50, "n": 9, "smaller": 7}])
    assert "7 of 9 methods at K = 50" in O.tuning_note_markdown("cifar100", 50)
    # K = 500 cannot be tuned at its own K on CIFAR-100 (its validation images are images 400-499)
    k500 = O.tuning_note_markdown("cifar100", 500)
    assert "images 400 to 499" in k500 and "tune --benchmark cifar100 --K 500" not in k500
    assert O.missing_results_markdown("cifar100", 50).count("```text") == 2  # the commands, then the per-K ones


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
    """Sphinx warns on a label defined twice (the build runs with warnings as errors): every generated page suffixes
    the template's labels with its name, and its {numref}s point at its own labels."""
    import re
    from pathlib import Path
    book = Path(__file__).resolve().parents[1] / "book"
    seen = {}
    for page in sorted(book.rglob("*.md")):
        if "_build" in page.parts:
            continue
        text = page.read_text()
        names = re.findall(r"^:name:\s*(\S+)", text, flags=re.M)
        for n in names:
            assert n not in seen, f"{n} in {page} and {seen[n]}"
            seen[n] = page
        for ref in re.findall(r"\{numref\}`(?:[^<`]*<)?([^>`]+)>?`", text):
            if "-repro-" in ref:
                assert ref in names, (page, ref)
    assert seen["tab-repro-acc-pmnist-k50"].name == "pmnist-K50.md"
