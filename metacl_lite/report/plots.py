"""Figures used by the book (seaborn/matplotlib): the balance geometry (Fig. 2), accuracy curves (Fig. 3, one method
set per axes, or `plot_fig3`: four panels by K, colour by regulariser, line style by variant, a band over seeds) and
our-minus-paper differences."""
from __future__ import annotations

from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from ..balance import dynamic_balance, fixed_balance


def plot_balance_2d(g1, g2, beta: float = 0.6, gamma: float = 0.0, ax: Optional[plt.Axes] = None) -> plt.Axes:
    """Fig. 2 in 2-D: g1, g2, the fixed combination g1 + beta g2 and the dynamic g_x = g1 + (lambda + gamma) g2.

    The shaded half-plane {g : <g, g2> < 0} holds the directions whose step -eta g would increase the penalty.
    """
    ax = ax or plt.gca()
    g1, g2 = torch.as_tensor(g1, dtype=torch.float64), torch.as_tensor(g2, dtype=torch.float64)
    gb = fixed_balance(g1, g2, beta)
    gx, lam = dynamic_balance(g1, g2, gamma)
    lim = 1.2 * float(max(g1.norm(), gb.norm(), gx.norm(), g2.norm(), 1.0))
    n = g2 / g2.norm() if float(g2.norm()) > 0 else torch.tensor([0.0, 1.0], dtype=torch.float64)
    t = torch.tensor([-n[1], n[0]])
    poly = torch.stack([t * 3 * lim, t * 3 * lim - n * 3 * lim, -t * 3 * lim - n * 3 * lim, -t * 3 * lim])
    ax.fill(poly[:, 0], poly[:, 1], color="0.9", zorder=0, label="⟨g, g2⟩ < 0")
    for v, c, lab in ((g1, "C0", "g1 (task)"), (g2, "C3", "g2 (penalty)"), (gb, "C1", f"g1 + β g2 (β={beta:g})"),
                      (gx, "C2", f"g_x (λ={lam:.2f}, γ={gamma:g})")):
        ax.annotate("", xy=(float(v[0]), float(v[1])), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="-|>", color=c, lw=2))
        ax.plot([], [], color=c, lw=2, label=lab)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.7", lw=0.5)
    ax.axvline(0, color="0.7", lw=0.5)
    ax.legend(loc="lower left", fontsize=7)
    return ax


#: The reproduction pages' figures are drawn at the width of the book's content column (about 688 px at a 1280-px
#: window, 100 dpi), so that their text is printed at its own size: legends and tick labels at 9 pt or more.
PAGE_WIDTH_IN = 6.8
PAGE_FONT_PT = 9.5


def method_style(method: str) -> Optional[dict]:
    """The line of a method in the book's accuracy figures: colour by regulariser and line style by variant, from
    `FAMILY_COLOURS` and `VARIANT_STYLES` (as `plot_fig3`); None for a name outside the method families."""
    try:
        family, variant = family_variant(method)
    except (KeyError, ValueError):
        return None
    if family not in FAMILY_COLOURS:
        return None
    return {"color": FAMILY_COLOURS[family], "ls": VARIANT_STYLES[variant]}


def family_variant_handles() -> list:
    """Legend entries that decode `method_style`: one coloured line per regulariser, one black line per variant."""
    names = {"none": "no penalty", "plain": "plain (fine-tune)", "MetaCL-β": "MetaCL-β (MetaCL w/o reg)"}
    return ([plt.Line2D([], [], color=c, lw=2, label=names.get(f, f)) for f, c in FAMILY_COLOURS.items()]
            + [plt.Line2D([], [], color="k", ls=s, lw=1.6, label=names.get(v, v)) for v, s in VARIANT_STYLES.items()])


def plot_accuracy_curves(curves: dict[str, np.ndarray], labels: Optional[dict[str, str]] = None,
                         ax: Optional[plt.Axes] = None, title: str = "") -> plt.Axes:
    """Fig. 3 for one setting: the average accuracy over the tasks seen so far, after each task (`curves`: method ->
    mean curve, as `tables.average_accuracy_curves`). Colour by regulariser and line style by variant
    (`method_style`, the palette of `plot_fig3`), decoded by a legend of regularisers and variants below the axes;
    a method outside the families (none in the book) gets the next colour of the cycle and its own legend entry."""
    ax = ax or plt.gca()
    others = []
    for m, c in curves.items():
        style = method_style(m)
        x = np.arange(1, len(c) + 1)
        if style is None:
            others.append(ax.plot(x, c, lw=1.6, label=(labels or {}).get(m, m))[0])
        else:
            ax.plot(x, c, lw=1.6, **style)
    n = max((len(c) for c in curves.values()), default=1)
    ax.set(xlabel="tasks learnt", ylabel="average accuracy on tasks seen (%)", xlim=(1, max(n, 2)))
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.set_title(title, fontsize=PAGE_FONT_PT + 1)
    ax.tick_params(labelsize=PAGE_FONT_PT)
    ax.xaxis.label.set_size(PAGE_FONT_PT)
    ax.yaxis.label.set_size(PAGE_FONT_PT)
    ax.grid(True, alpha=0.4)
    handles = family_variant_handles() + others
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, fontsize=PAGE_FONT_PT,
              frameon=False)
    return ax


def plot_differences(rows: list[dict], ax=None):
    """Ours minus the paper's per method, one panel per metric (ACC, BT, FA) sharing the method axis (`rows` from
    `tables.comparison_rows`); each bar in its method's regulariser colour (`FAMILY_COLOURS`; the joint oracle
    black), a line at zero. `ax`: three axes to draw on (default: a new figure of the page's width). Returns the
    axes."""
    metrics = ("ACC", "BT", "FA")
    if ax is None:
        n = max(len(rows), 1)
        _, ax = plt.subplots(1, 3, figsize=(PAGE_WIDTH_IN, 0.28 * n + 1.3), sharey=True)
    methods = [r for r in rows if any(r[f"{k} diff"] is not None for k in metrics)]
    labels = [r["label"] for r in methods]
    y = np.arange(len(methods))
    for a, k in zip(ax, metrics):
        vals = [r[f"{k} diff"] if r[f"{k} diff"] is not None else np.nan for r in methods]
        colours = [(method_style(r["method"]) or {"color": "k"})["color"] for r in methods]
        a.barh(y, vals, color=colours, height=0.7)
        a.axvline(0, color="k", lw=0.8)
        a.set_title(k, fontsize=PAGE_FONT_PT + 1)
        a.set_xlabel("ours − paper (points)", fontsize=PAGE_FONT_PT)
        a.tick_params(labelsize=PAGE_FONT_PT)
        a.grid(True, axis="x", alpha=0.4)
    ax[0].set_yticks(y, labels)
    ax[0].invert_yaxis()
    return ax


# ----------------------------------------------------------------------------------------------------------------
# Fig. 3: average accuracy after each task, one panel per K
# ----------------------------------------------------------------------------------------------------------------
#: Colour by regulariser ("none": fine-tune and MetaCL w/o reg), line style by variant.
FAMILY_COLOURS = {"none": "0.35", "MAS": "C0", "PI": "C1", "EWC": "C2"}
VARIANT_STYLES = {"plain": "-", "MetaCL-β": "--", "MetaCL-λ": ":"}


def family_variant(method: str) -> tuple[str, str]:
    """(regulariser family, variant) of a method name: fine-tune is ("none", "plain"), MetaCL w/o reg is
    ("none", "MetaCL-β") (the MetaCL update with no penalty draws as the MetaCL line of the "none" family), "pi" is
    ("PI", "plain"), "pi-metacl-lambda" is ("PI", "MetaCL-λ")."""
    if method in ("finetune", "metacl"):
        return "none", "plain" if method == "finetune" else "MetaCL-β"
    imp, *rest = method.split("-")
    variant = {(): "plain", ("metacl", "beta"): "MetaCL-β", ("metacl", "lambda"): "MetaCL-λ"}[tuple(rest)]
    return imp.upper(), variant


def seed_accuracy_curves(res: dict) -> pd.DataFrame:
    """Fig. 3's data in long form: one row per method, seed and task i, with the average accuracy over the tasks
    seen so far after task i (`metrics.average_accuracy_curve` of each seed's matrix); the mean over seeds of a
    method is `tables.average_accuracy_curves`."""
    from ..metrics import average_accuracy_curve
    from ..lab.summary import matrix_from_json

    rows = []
    for key, run in res["runs"].items():
        method, seed = key.split("/")
        family, variant = family_variant(method)
        for i, v in enumerate(average_accuracy_curve(matrix_from_json(run["acc_matrix"]))):
            rows.append({"method": method, "family": family, "variant": variant, "seed": int(seed), "task": i + 1,
                         "average accuracy (%)": float(v)})
    return pd.DataFrame(rows)


def plot_fig3(results: dict[int, dict], band: str = "range", axes=None):
    """Fig. 3 as one figure of four panels (one per K in `results`, {K: results file}): the average accuracy after
    each task, mean over seeds (line) and a band over seeds ("range": min to max; "sd": ± one standard deviation).
    Colour: the regulariser (grey for none); line style: the variant (solid plain, dashed MetaCL-β, dotted
    MetaCL-λ; fine-tune is the plain and MetaCL w/o reg the MetaCL line of "none"). Returns the figure."""
    ks = sorted(results)
    if axes is None:
        fig, axes = plt.subplots(1, len(ks), figsize=(3.6 * len(ks), 3.6), sharey=True, squeeze=False)
        axes = axes[0]
    fig = axes[0].figure
    for ax, K in zip(axes, ks):
        data = seed_accuracy_curves(results[K])
        for (family, variant), sub in data.groupby(["family", "variant"], sort=False):
            per_task = sub.groupby("task")["average accuracy (%)"]
            mean = per_task.mean()
            lo, hi = (per_task.min(), per_task.max()) if band == "range" else (mean - per_task.std(ddof=1),
                                                                               mean + per_task.std(ddof=1))
            colour, style = FAMILY_COLOURS[family], VARIANT_STYLES[variant]
            ax.plot(mean.index, mean.values, color=colour, ls=style, lw=1.6)
            ax.fill_between(mean.index, lo.values, hi.values, color=colour, alpha=0.12, lw=0)
        ax.set(title=f"K = {K}", xlabel="tasks learnt", xlim=(1, data.task.max()))
        ax.grid(True, alpha=0.4)
    axes[0].set_ylabel("average accuracy on tasks seen (%)")
    names = {"none": "no penalty", "plain": "plain (fine-tune)", "MetaCL-β": "MetaCL-β (MetaCL w/o reg)"}
    handles = ([plt.Line2D([], [], color=c, lw=2, label=names.get(f, f)) for f, c in FAMILY_COLOURS.items()]
               + [plt.Line2D([], [], color="k", ls=s, label=names.get(v, v)) for v, s in VARIANT_STYLES.items()])
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
