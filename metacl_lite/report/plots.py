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


def _balance_parts(g1, g2, beta: float, gamma: float):
    g1, g2 = torch.as_tensor(g1, dtype=torch.float64), torch.as_tensor(g2, dtype=torch.float64)
    gx, lam = dynamic_balance(g1, g2, gamma)
    return g1, g2, fixed_balance(g1, g2, beta), gx, lam


def balance_labels(beta: float, gamma: float, lam: Optional[float] = None) -> dict[str, str]:
    """The legend's words for `plot_balance_2d`, with β, γ (and λ, when given) to two decimals, as the sliders of
    chapter 3's interactive figure show them."""
    lam_text = "" if lam is None else f"λ = {lam:.2f}, "
    return {"half": "⟨g, g2⟩ < 0 (penalty grows)", "g1": "g1 (task)", "g2": "g2 (penalty)",
            "fixed": f"g1 + β g2 (β = {beta:.2f})", "dynamic": f"g_x = g1 + (λ + γ) g2 ({lam_text}γ = {gamma:.2f})"}


def plot_balance_2d(g1, g2, beta: float = 0.6, gamma: float = 0.0, ax: Optional[plt.Axes] = None,
                    legend: bool = True, fontsize: float = 9) -> plt.Axes:
    """Fig. 2 in 2-D: g1, g2, the fixed combination g1 + beta g2 (Eq. 2's gradient) and the dynamic
    g_x = g1 + (lambda + gamma) g2 (Eqs. 5-6, `balance.dynamic_balance`).

    The shaded half-plane {g : <g, g2> < 0} holds the directions whose step -eta g would increase the penalty. With
    `legend`, a legend below the axes names each arrow with beta, lambda and gamma to two decimals.
    """
    ax = ax or plt.gca()
    g1, g2, gb, gx, lam = _balance_parts(g1, g2, beta, gamma)
    words = balance_labels(beta, gamma, lam)
    lim = 1.2 * float(max(g1.norm(), gb.norm(), gx.norm(), g2.norm(), 1.0))
    n = g2 / g2.norm() if float(g2.norm()) > 0 else torch.tensor([0.0, 1.0], dtype=torch.float64)
    t = torch.tensor([-n[1], n[0]])
    poly = torch.stack([t * 3 * lim, t * 3 * lim - n * 3 * lim, -t * 3 * lim - n * 3 * lim, -t * 3 * lim])
    ax.fill(poly[:, 0], poly[:, 1], color="0.9", zorder=0, label=words["half"])
    for v, c, key in ((g1, "C0", "g1"), (g2, "C3", "g2"), (gb, "C1", "fixed"), (gx, "C2", "dynamic")):
        ax.annotate("", xy=(float(v[0]), float(v[1])), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="-|>", color=c, lw=2))
        ax.plot([], [], color=c, lw=2, label=words[key])
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.7", lw=0.5)
    ax.axvline(0, color="0.7", lw=0.5)
    ax.tick_params(labelsize=fontsize)
    if legend:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=1, fontsize=fontsize, frameon=False)
    return ax


def balance_g2(norm: float, angle_deg: float) -> np.ndarray:
    """The 2-D penalty gradient of chapter 3's figures: length `norm`, at `angle_deg` degrees from the x axis."""
    a = np.deg2rad(angle_deg)
    return norm * np.array([np.cos(a), np.sin(a)])


def balance_title(norm: float, angle_deg: float, lam: Optional[float] = None) -> str:
    """The title of one panel: |g2| and its angle as the sliders show them (two decimals, whole degrees), and λ."""
    text = f"|g2| = {norm:.2f}, {angle_deg:.0f}°"
    return text if lam is None else text + f"\nλ = {lam:.2f}"


def plot_balance_panels(g1, norms, angle_deg: float, beta: float, gamma: float = 0.0, width: float = 6.9):
    """Fig. 2 as one row of panels, one per length of g2 in `norms` (all at `angle_deg`), each titled with |g2| and
    the dynamic λ, and one legend below them (β and γ are the same in every panel). `width` in inches: 6.9 fills the
    book's content column at 100 dpi. Returns the figure."""
    fig, axes = plt.subplots(1, len(norms), figsize=(width, width / len(norms) + 0.6), squeeze=False)
    for ax, norm in zip(axes[0], norms):
        g2 = balance_g2(norm, angle_deg)
        plot_balance_2d(g1, g2, beta=beta, gamma=gamma, ax=ax, legend=False)
        ax.set_title(balance_title(norm, angle_deg, _balance_parts(g1, g2, beta, gamma)[-1]), fontsize=10)
    words = balance_labels(beta, gamma)
    handles = [plt.Rectangle((0, 0), 1, 1, color="0.9", label=words["half"])] + [
        plt.Line2D([], [], color=c, lw=2, label=words[k]) for c, k in (("C0", "g1"), ("C3", "g2"), ("C1", "fixed"),
                                                                       ("C2", "dynamic"))]
    fig.tight_layout(w_pad=1.5)
    # the legend goes just below the panels' tick labels, after the layout, so the panels keep their size; the book
    # saves figures with a tight bounding box, which takes the legend in
    renderer = fig.canvas.get_renderer()
    bottom = min(ax.get_tightbbox(renderer).y0 for ax in axes[0]) / fig.bbox.height
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, bottom), ncol=2, fontsize=9, frameon=False)
    return fig


def plot_accuracy_curves(curves: dict[str, np.ndarray], labels: Optional[dict[str, str]] = None,
                         ax: Optional[plt.Axes] = None, title: str = "") -> plt.Axes:
    """Fig. 3: average accuracy over the tasks seen so far, after each task."""
    ax = ax or plt.gca()
    rows = [{"task": i + 1, "average accuracy (%)": v, "method": (labels or {}).get(m, m)}
            for m, c in curves.items() for i, v in enumerate(c)]
    sns.lineplot(data=pd.DataFrame(rows), x="task", y="average accuracy (%)", hue="method", ax=ax, marker="o",
                 markersize=3)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    return ax


def plot_differences(rows: list[dict], ax: Optional[plt.Axes] = None) -> plt.Axes:
    """Ours minus the paper's, per method and metric (rows from tables.comparison_rows)."""
    ax = ax or plt.gca()
    data = [{"method": r["label"], "metric": k, "ours − paper (points)": r[f"{k} diff"]}
            for r in rows for k in ("ACC", "BT", "FA") if r[f"{k} diff"] is not None]
    if data:
        sns.barplot(data=pd.DataFrame(data), y="method", x="ours − paper (points)", hue="metric", ax=ax)
    ax.axvline(0, color="k", lw=0.8)
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
