"""The book's figures' palette (`plots.method_style`): every method has one style, in Okabe and Ito's colour-blind-safe
colours; the memory's methods each in a colour of their own; every figure reads in grey (no two methods share a line
style and a marker, and where a figure marks the budget M instead, methods sharing a line style differ in luminance).
Each task's forgetting (`metrics.forgetting`) on a matrix by hand, and chapter 9's per-task figures on small input."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from metacl_lite.metrics import backward_transfer, forgetting  # noqa: E402
from metacl_lite.report import plots as P  # noqa: E402
from metacl_lite.vocab import (MEMORY_METHODS, METHOD_NAMES, PAPER_REGULARISERS, method_name,  # noqa: E402
                               regulariser_of)

OKABE_ITO = {"#000000", "#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7"}
STYLES = {m: P.method_style(m) for m in METHOD_NAMES}
#: The smallest luminance difference (0 to 1) that tells two lines apart in grey.
MARGIN = 0.2


def luminance(colour) -> float:
    r, g, b = matplotlib.colors.to_rgb(colour)
    return 0.299 * r + 0.587 * g + 0.114 * b


def dashes(ls) -> tuple:
    """A line style as the dash pattern it draws (named styles through matplotlib's own patterns)."""
    named = {"-": "solid", "--": "dashed", "-.": "dashdot", ":": "dotted"}
    if ls in named:
        return () if ls == "-" else tuple(plt.rcParams[f"lines.{named[ls]}_pattern"])
    return tuple(ls[1])


def key(m) -> tuple:
    return dashes(STYLES[m]["ls"]), STYLES[m]["marker"]


def test_every_method_has_a_style_in_okabe_ito_or_grey():
    assert all(STYLES.values()), [m for m, s in STYLES.items() if not s]
    for m, s in STYLES.items():
        r, g, b = matplotlib.colors.to_rgb(s["color"])
        assert matplotlib.colors.to_hex(s["color"]) in OKABE_ITO or r == g == b, m


def test_each_memory_method_has_a_colour_of_its_own():
    own = [m for m in MEMORY_METHODS if regulariser_of(m) is None]
    colours = [matplotlib.colors.to_hex(STYLES[m]["color"]) for m in own]
    assert len(set(colours)) == len(own), dict(zip(own, colours))
    assert len({(c, *key(m)) for c, m in zip(colours, own)}) == len(own)
    regulariser_colours = {matplotlib.colors.to_hex(c) for c in P.FAMILY_COLOURS.values()}
    assert not set(colours) & regulariser_colours  # nor a regulariser's


def test_no_two_methods_share_a_line_style_and_a_marker():
    """The figures that draw a method with its marker (the accuracy curves, Fig. 3, the per-task figures) read in
    grey: line style and marker tell every pair of methods apart."""
    seen = {}
    for m in METHOD_NAMES:
        assert key(m) not in seen, f"{m} and {seen.get(key(m))} share a line style and a marker"
        seen[key(m)] = m


#: Chapter 9's ACC-by-K panels (`findings.memory.acc_by_K`), where the marker is the budget M: within a panel, lines
#: of one line style must differ in luminance.
ACC_BY_K_PANELS = {
    "regulariser": ["finetune", *(method_name(r, "lambda") for r in PAPER_REGULARISERS)],
    "memory": [m for m in MEMORY_METHODS if regulariser_of(m) is None],
    "both": [m for m in MEMORY_METHODS if regulariser_of(m) is not None]}


@pytest.mark.parametrize("panel", ACC_BY_K_PANELS)
def test_lines_of_one_dash_in_a_panel_differ_in_grey(panel):
    methods = ACC_BY_K_PANELS[panel]
    for i, a in enumerate(methods):
        for b in methods[i + 1:]:
            if dashes(STYLES[a]["ls"]) == dashes(STYLES[b]["ls"]):
                gap = abs(luminance(STYLES[a]["color"]) - luminance(STYLES[b]["color"]))
                assert gap >= MARGIN, f"{a} and {b} share a dash and differ by {gap:.2f} in luminance"


def test_forgetting_by_hand():
    a = np.array([[90.0, np.nan, np.nan], [70.0, 80.0, np.nan], [60.0, 85.0, 95.0]])
    np.testing.assert_array_equal(forgetting(a), [30.0, -5.0])  # max(90, 70) - 60; 80 - 85 (it got better)
    assert backward_transfer(a) == -12.5  # BT (Eq. 16) is the mean forgetting, negated
    assert forgetting(np.array([[50.0]])).shape == (0,)
    assert str(backward_transfer(np.array([[50.0, np.nan], [50.0, 60.0]]))) == "0.0"  # nothing forgotten: not -0.0


def _runs():
    """Two methods, two seeds each, on a 3-task stream."""
    m = lambda x, y, z, u, v, w: np.array([[x, np.nan, np.nan], [y, z, np.nan], [u, v, w]])  # noqa: E731
    return {"finetune": [m(90, 60, 80, 50, 70, 85), m(80, 50, 90, 40, 60, 95)],
            "agem": [m(90, 80, 80, 70, 75, 85), m(90, 70, 80, 60, 75, 85)]}


def test_task_curves_draw_each_method_per_task():
    fig = P.plot_task_curves(_runs(), tasks=(1, 2))
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["task 1", "task 2"]
    assert [[ln.get_ydata().tolist() for ln in ax.lines] for ax in axes] == [
        [[85.0, 55.0, 45.0], [90.0, 75.0, 65.0]], [[85.0, 65.0], [80.0, 75.0]]]  # mean over seeds
    assert [ln.get_color() for ln in axes[0].lines] == [P.method_style(m)["color"] for m in ("finetune", "agem")]
    [legend] = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["Fine tune", "A-GEM"]
    assert fig.get_size_inches()[0] == pytest.approx(P.COLUMN_IN)
    assert min(t.get_fontsize() for t in legend.get_texts()) >= P.MIN_FONT
    plt.close(fig)


def test_forgetting_figure_one_line_per_method_at_its_mean():
    fig = P.plot_forgetting(_runs(), labels={"agem": "A-GEM, M = 1"})
    [ax] = fig.axes
    assert len(ax.containers) == 2
    means = [c.lines[0].get_ydata().tolist() for c in ax.containers]
    assert means == [[40.0, 20.0], [25.0, 5.0]]  # fine-tune: (40, 40) and (10, 30); A-GEM: (20, 30), (5, 5)
    assert [c.lines[0].get_color() for c in ax.containers] == [P.method_style(m)["color"] for m in ("finetune", "agem")]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["Fine tune", "A-GEM, M = 1"]
    plt.close(fig)


def test_method_matrices_by_seed_from_a_results_file():
    res = {"runs": {"agem/1": {"acc_matrix": [[50.0, None], [40.0, 60.0]]},
                    "agem/0": {"acc_matrix": [[70.0, None], [65.0, 80.0]]},
                    "er/0": {"acc_matrix": [[70.0, None], [68.0, 80.0]]}}}
    got = P.method_matrices(res, ["agem", "gem"])
    assert list(got) == ["agem"] and [a[0, 0] for a in got["agem"]] == [70.0, 50.0]  # seed order; gem: no runs
    assert np.isnan(got["agem"][0][0, 1]) and list(P.method_matrices(res)) == ["agem", "er"]


def _drawn_colours(fig) -> set:
    """The face and edge colours of every patch and line a figure draws (legends included), as hex, greys left out."""
    import matplotlib.colors as mc

    found = set()
    for a in fig.findobj(lambda o: isinstance(o, (matplotlib.patches.Patch, matplotlib.lines.Line2D))):
        cs = [a.get_color()] if isinstance(a, matplotlib.lines.Line2D) else [a.get_facecolor(), a.get_edgecolor()]
        for c in cs:
            rgba = mc.to_rgba(c)
            if rgba[3] > 0 and not rgba[0] == rgba[1] == rgba[2]:
                found.add(mc.to_hex(rgba))
    return found


def test_the_balance_and_story_figures_draw_in_colour_blind_safe_colours():
    """Fig. 2 (chapter 3) in Okabe and Ito's colours (it drew matplotlib's red and green, which deuteranopes confuse);
    the λ story's bars in seaborn's colour-blind palette (it drew "deep")."""
    import pandas as pd
    import seaborn as sns

    fig = P.plot_balance_panels(np.array([1.0, 0.0]), [0.5, 2.0], 120.0, beta=0.6)
    assert _drawn_colours(fig) == {c.lower() for c in P.BALANCE_COLOURS.values()}
    plt.close(fig)
    frame = pd.DataFrame([{"K": K, "regulariser": r, "setting": s, "frac_increase": 0.1 * i, "seed": 0}
                          for K in (20, 50) for r in ("MAS", "EWC") for i, s in enumerate(("fixed", "dynamic", "x"))])
    fig = P.plot_story_steps(frame)
    assert _drawn_colours(fig) == set(sns.color_palette("colorblind", 3, desat=0.75).as_hex())  # barplot's saturation
    plt.close(fig)
