"""Figures used by the book (seaborn/matplotlib), each method in one style throughout (`method_style`): the balance
geometry (Fig. 2), accuracy curves (Fig. 3, one method set per axes, or `plot_fig3`: four panels by K, a band over
seeds), our-minus-paper differences, and chapters 8 and 9's (per task: `plot_task_curves`, `plot_forgetting`)."""
from __future__ import annotations

import base64
import html
import io
import re
from typing import Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from ..balance import dynamic_balance, fixed_balance
from ..keys import runs_by_key
from ..lab.summary import matrix_from_json
from ..metrics import average_accuracy_curve, forgetting, mean_ci95
from ..vocab import (BASELINES, MEMORY_METHODS, PAPER_REGULARISERS, REGULARISER_LABELS, VARIANTS, method_label,
                     parse_method)

#: A method's style in every figure (`method_style`), in Okabe and Ito's colour-blind-safe palette: its regulariser's
#: colour and marker (grey circles for fine-tune and MetaCL w/o reg; MAS blue, PI orange, EWC black: their MetaCL-λ
#: lines share a dash and stay apart in grey; L2 yellow) or a memory method's own; its variant's line style: A-GEM
#: fine-tune's, MetaCL-A-GEM MetaCL's, ER dash-dot-dot, GEM densely dotted, hollow markers with a regulariser too.
MEMORY_FAMILY, REPLAY, CONSTRAIN, BOTH, BOTH_GEM = ("episodic memory", "replay (ER)", "a constraint per task (GEM)",
                                                   "MetaCL-λ, both references", "MetaCL-λ, GEM's constraints")
FAMILY_COLOURS = {"none": "0.6", **dict(zip(REGULARISER_LABELS.values(), ("#0072B2", "#E69F00", "#000", "#F0E442")))}
FAMILY_MARKERS = dict(zip(FAMILY_COLOURS, "os^Dv"))
MEMORY_COLOURS = {"agem": "#D55E00", "er": "#56B4E9", "gem": "#CC79A7", "metacl-agem": "#009E73"}
MEMORY_MARKERS = {"agem": "X", "er": "P", "gem": "*", "metacl-agem": "X"}
VARIANT_STYLES = {"plain": "-", **dict(zip(VARIANTS.values(), ("--", ":"))), REPLAY: (0, (5, 1, 1, 1, 1, 1)),
                  CONSTRAIN: (0, (1, 1)), BOTH: "-.", BOTH_GEM: (0, (3, 1, 1, 1, 1, 1))}
BALANCE_COLOURS = {"g1": "#0072B2", "g2": "#D55E00", "fixed": "#E69F00", "dynamic": "#009E73"}
#: The families of the paper's methods: the legends' default (an extension's family shows where it is drawn).
PAPER_FAMILIES = ("none", *(REGULARISER_LABELS[r] for r in PAPER_REGULARISERS))


def _balance_parts(g1, g2, beta: float, gamma: float):
    g1, g2 = torch.as_tensor(g1, dtype=torch.float64), torch.as_tensor(g2, dtype=torch.float64)
    gx, lam = dynamic_balance(g1, g2, gamma)
    return g1, g2, fixed_balance(g1, g2, beta), gx, float(lam)


def balance_labels(beta: float, gamma: float, lam: Optional[float] = None) -> dict[str, str]:
    """The legend's words for `plot_balance_2d`, with β, γ (and λ, when given) to two decimals, as the sliders of
    chapter 3's interactive figure show them."""
    lam_text = "" if lam is None else f"λ = {lam:.2f}, "
    return {"half": "⟨g, g2⟩ < 0 (penalty grows)", "g1": "g1 (task)", "g2": "g2 (penalty)",
            "fixed": f"g1 + β g2 (β = {beta:.2f})", "dynamic": f"g_x = g1 + (λ + γ) g2 ({lam_text}γ = {gamma:.2f})"}


def plot_balance_2d(g1, g2, beta: float = 0.6, gamma: float = 0.0, ax: Optional[plt.Axes] = None,
                    legend: bool = True, fontsize: float = 9) -> plt.Axes:
    """Fig. 2 in 2-D: g1, g2, the fixed combination g1 + beta g2 (Eq. 2's gradient) and the dynamic
    g_x = g1 + (lambda + gamma) g2 (Eqs. 4-5, `balance.dynamic_balance`).

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
    for v, (key, c) in zip((g1, g2, gb, gx), BALANCE_COLOURS.items()):  # Fig. 2's arrows in Okabe and Ito's colours
        ax.annotate("", xy=(float(v[0]), float(v[1])), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="-|>", color=c, lw=2))
        ax.plot([], [], color=c, lw=2, label=words[key])
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal")
    ax.axhline(0, color="0.7", lw=0.5)
    ax.axvline(0, color="0.7", lw=0.5)
    ax.tick_params(labelsize=fontsize)
    if legend:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=1, fontsize=fontsize, frameon=False)
    return ax


#: The reproduction pages' figures are drawn at the width of the book's content column (about 688 px at a 1280-px
#: window, 100 dpi), so that their text is printed at its own size: legends and tick labels at 9 pt or more.
PAGE_WIDTH_IN = 6.8
PAGE_FONT_PT = 9.5
MARKS = 0.1  # a line's markers (`markevery`) a tenth of the axes' diagonal apart: a long curve keeps its line


def method_style(method: str) -> Optional[dict]:
    """A method's line in every figure: its colour and marker (its own, `MEMORY_COLOURS`, or its regulariser's,
    `FAMILY_COLOURS`) and its variant's line style (`VARIANT_STYLES`); None for a name outside the families."""
    try:
        family, variant = family_variant(method)
    except (KeyError, ValueError):
        return None
    key = method if method in MEMORY_COLOURS else family
    colours, markers = {**FAMILY_COLOURS, **MEMORY_COLOURS}, {**FAMILY_MARKERS, **MEMORY_MARKERS}
    return {"color": colours[key], "ls": VARIANT_STYLES[variant], "marker": markers[key],
            "mfc": "white" if variant in (BOTH, BOTH_GEM) else None} if key in colours else None


def family_variant_handles(methods: Sequence[str] = ()) -> list:
    """Legend entries that decode `method_style` for the `methods` drawn: a line in each regulariser's colour with its
    family's marker (the paper's families always, an extension's where drawn), a black line per variant (the paper's
    always, both references' where drawn) and a method of its own colour (A-GEM, ER, ...) under its own name."""
    names = {"none": "no penalty", "plain": "plain (fine-tune)", "MetaCL-β": "MetaCL-β (MetaCL w/o reg)"}
    drawn = [family_variant(m) for m in methods if method_style(m) and m not in MEMORY_COLOURS]
    families = {*PAPER_FAMILIES, *(f for f, _ in drawn)}
    variants = {"plain", *VARIANTS.values(), *(v for _, v in drawn)}
    line = lambda label, **kw: plt.Line2D([], [], lw=1.8, label=names.get(label, label), **kw)  # noqa: E731
    return ([line(f, color=c, marker=FAMILY_MARKERS[f]) for f, c in FAMILY_COLOURS.items() if f in families]
            + [line(v, color="k", ls=s, marker="o" if v in (BOTH, BOTH_GEM) else "", mfc="white")
               for v, s in VARIANT_STYLES.items() if v in variants]
            + [line(method_label(m), **method_style(m)) for m in dict.fromkeys(methods) if m in MEMORY_COLOURS])


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
        plt.Line2D([], [], color=c, lw=2, label=words[k]) for k, c in BALANCE_COLOURS.items()]
    fig.tight_layout(w_pad=1.5)
    # the legend goes just below the panels' tick labels, after the layout, so the panels keep their size; the book
    # saves figures with a tight bounding box, which takes the legend in
    renderer = fig.canvas.get_renderer()
    bottom = min(ax.get_tightbbox(renderer).y0 for ax in axes[0]) / fig.bbox.height
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, bottom), ncol=2, fontsize=9, frameon=False)
    return fig


def plot_accuracy_curves(curves: dict, labels: Optional[dict[str, str]] = None,
                         ax: Optional[plt.Axes] = None, title: str = "") -> plt.Axes:
    """Fig. 3 for one setting: the average accuracy over the tasks seen so far, after each task (`curves`: method ->
    mean curve, as `tables.average_accuracy_curves`; a memory method at budget M keyed (method, M)) in `method_style`,
    decoded by a legend below (`family_variant_handles`), a memory method's larger budgets thicker (each M in the
    legend); a method outside the families (none in the book): the cycle's next colour and its own entry."""
    ax = ax or plt.gca()
    others, budgets = [], sorted({k[1] for k in curves if isinstance(k, tuple)})
    width = {M: 1.6 + 1.2 * i for i, M in enumerate(budgets)}
    for key, c in curves.items():
        m, M = key if isinstance(key, tuple) else (key, None)
        style = method_style(m)
        x = np.arange(1, len(c) + 1)
        if style is None:
            others.append(ax.plot(x, c, lw=1.6, label=(labels or {}).get(m, m))[0])
        else:
            ax.plot(x, c, lw=width.get(M, 1.6), alpha=0.8 if M else 1.0, ms=4, markevery=MARKS, **style)
    n = max((len(c) for c in curves.values()), default=1)
    ax.set_xlim(1, max(n, 2))
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    _panel(ax, title, xlabel="tasks learnt", ylabel="average accuracy on tasks seen (%)")
    handles = family_variant_handles([k[0] if isinstance(k, tuple) else k for k in curves]) + [
        plt.Line2D([], [], color="0.5", lw=width[M], label=f"M = {M}") for M in budgets] + others
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4 if len(handles) < 10 else 3,
              fontsize=PAGE_FONT_PT, frameon=False)
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
        _panel(a, k, xlabel="ours − paper (points)", grid="x")
    ax[0].set_yticks(y, labels)
    ax[0].invert_yaxis()
    return ax


def family_variant(method: str) -> tuple[str, str]:
    """(regulariser family, variant) of a method name: fine-tune is ("none", "plain"), MetaCL w/o reg is
    ("none", "MetaCL-β") (the MetaCL update with no penalty draws as the MetaCL line of the "none" family), "pi" is
    ("PI", "plain"), "pi-metacl-lambda" is ("PI", "MetaCL-λ"); of the memory family, "agem" is ("episodic memory",
    "plain"), "metacl-agem" ("episodic memory", "MetaCL-β"), "er" ("episodic memory", `REPLAY`), "gem" ("episodic
    memory", `CONSTRAIN`) and "pi-metacl-lambda-mem" ("PI", `BOTH`)."""
    if method in BASELINES:
        return "none", "plain" if method == "finetune" else VARIANTS["beta"]
    if method in MEMORY_METHODS:  # an extension (chapter 9): its base's line style, or its use's
        base, use = MEMORY_METHODS[method].base, MEMORY_METHODS[method].use
        if base in BASELINES:
            return MEMORY_FAMILY, {"replay": REPLAY, "constrain": CONSTRAIN}.get(use, family_variant(base)[1])
        return family_variant(base)[0], BOTH_GEM if use == "constrain" else BOTH
    imp, variant = parse_method(method)
    return REGULARISER_LABELS[imp], "plain" if variant is None else VARIANTS[variant]


def seed_accuracy_curves(res: dict) -> pd.DataFrame:
    """Fig. 3's data in long form: one row per method, seed and task i, with the average accuracy over the tasks
    seen so far after task i (`metrics.average_accuracy_curve` of each seed's matrix); the mean over seeds of a
    method is `tables.average_accuracy_curves`."""
    rows = []
    for (method, seed), run in runs_by_key(res["runs"]):
        family, variant = family_variant(method)
        for i, v in enumerate(average_accuracy_curve(matrix_from_json(run["acc_matrix"]))):
            rows.append({"method": method, "family": family, "variant": variant, "seed": seed, "task": i + 1,
                         "average accuracy (%)": float(v)})
    return pd.DataFrame(rows)


#: Width in inches of a figure that fills the book's content column (about 688 px at the 100 dpi pages render at),
#: and the smallest font the figures of the analysis chapter use: 9 pt stays 9 pt at that width.
COLUMN_IN = 6.9
MIN_FONT = 9.5


def _legend_below(fig, handles, ncol: int, row_in: float = 0.22, fontsize: float = MIN_FONT, **kw):
    """`handles` in `ncol` columns below the panels, the figure grown by their rows (`row_in` inches each)."""
    rows = -(-len(handles) // ncol)
    fig.set_figheight(fig.get_figheight() + row_in * rows)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=fontsize, frameon=False, **kw)
    fig.tight_layout(rect=(0, (row_in * rows + 0.05) / fig.get_figheight(), 1, 1))
    return fig


def _panel(ax, title: str, xlabel: str = "", ylabel: str = "", grid: str = "both"):
    """A panel's words at the book's sizes (title and labels 10 pt, ticks `MIN_FONT`) and its grid."""
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.tick_params(labelsize=MIN_FONT)
    ax.grid(True, axis=grid, alpha=0.4)


def plot_fig3(results: dict[int, dict], band: str = "range", axes=None):
    """Fig. 3 as one figure with a panel per K in `results` ({K: results file}), two panels a row, sized for the
    book's column (`COLUMN_IN`): the average accuracy after each task, mean over seeds (line) and a band over seeds
    ("range": min to max; "sd": ± one standard deviation), in `method_style` (fine-tune is the plain and MetaCL w/o
    reg the MetaCL-β line of "none"). The legend sits below the panels. Returns the figure."""
    ks = sorted(results)
    if axes is None:
        ncols = min(2, len(ks))
        nrows = -(-len(ks) // ncols)
        fig, grid = plt.subplots(nrows, ncols, figsize=(COLUMN_IN, 2.7 * nrows + 0.3), sharey=True, sharex=True,
                                 squeeze=False)
        for ax in grid.flat[len(ks):]:
            ax.remove()
        axes = list(grid.flat[:len(ks)])
    fig, drawn = axes[0].figure, []
    for ax, K in zip(axes, ks):
        data = seed_accuracy_curves(results[K])
        for method, sub in data.groupby("method", sort=False):
            per_task = sub.groupby("task")["average accuracy (%)"]
            mean = per_task.mean()
            lo, hi = (per_task.min(), per_task.max()) if band == "range" else (mean - per_task.std(ddof=1),
                                                                               mean + per_task.std(ddof=1))
            style = method_style(method)
            ax.plot(mean.index, mean.values, lw=1.6, ms=4, markevery=MARKS, **style)
            ax.fill_between(mean.index, lo.values, hi.values, color=style["color"], alpha=0.12, lw=0)
            drawn.append(method)
        ss = ax.get_subplotspec()
        _panel(ax, f"K = {K}", xlabel="tasks learnt" if ss.is_last_row() or len(axes) <= 2 else "",
               ylabel="accuracy on tasks seen (%)" if ss.is_first_col() else "")
        ax.set_xlim(1, data.task.max())
    handles = family_variant_handles(drawn)
    return _legend_below(fig, handles, -(-len(handles) // (2 if len(axes) > 1 else 3)), row_in=0.3, fontsize=10,
                         columnspacing=1.2, handlelength=2.2)


# Chapters 8 and 9: MetaCL's gain across K, ACC by K with the memory, per task, the λ story; sized for the column
def plot_gain_by_K(rows: list[dict], Ks: list[int], paper_Ks: list[int]):
    """MetaCL's paired ACC gain over its plain regulariser at every K (`claims.gain_by_K` rows): one panel per
    regulariser, stacked; filled markers and bars: our mean and 95% t-interval per variant; hollow markers: the
    paper's difference of means where it publishes both; shaded: the K below the paper's. Returns the figure."""
    gain = pd.DataFrame(rows)
    regs = list(dict.fromkeys(gain.regulariser)) if len(gain) else ["MAS", "PI", "EWC"]
    variants = list(dict.fromkeys(gain.variant)) if len(gain) else []
    colours = dict(zip(variants, sns.color_palette("colorblind", max(len(variants), 1))))
    fig, axes = plt.subplots(len(regs), 1, figsize=(COLUMN_IN, 1.9 * len(regs) + 0.56), sharex=True, sharey=True,
                             squeeze=False)
    axes = axes[:, 0]
    below = [K for K in Ks if K < min(paper_Ks)]
    for ax, imp in zip(axes, regs):
        for i, variant in enumerate(variants):
            g = gain[(gain.regulariser == imp) & (gain.variant == variant)]
            if g.empty:
                continue
            shift = 0.93 if i == 0 else 1.07  # side by side on the log axis
            lo, hi = np.array([r[0] for r in g.ci95]), np.array([r[1] for r in g.ci95])
            ax.errorbar(g.K.to_numpy() * shift, g["mean"], yerr=[g["mean"] - lo, hi - g["mean"]], fmt="o-",
                        color=colours[variant], capsize=3, ms=5, label=f"{variant} − plain, ours")
            p = g[g.paper.notna()]
            ax.scatter(p.K.to_numpy() * shift, p.paper, facecolors="none", edgecolors=colours[variant], s=55,
                       label=f"{variant} − plain, paper")
        ax.axhline(0, color="grey", lw=0.8)
        ax.margins(y=0.12)
        if below:
            ax.axvspan(0.7, (max(below) * min(paper_Ks)) ** 0.5, color="grey", alpha=0.1, lw=0)
        ax.set_xscale("log")
        ax.set_xlim(0.7, max(Ks) * 1.4)
        ax.set_xticks(Ks, [str(k) for k in Ks])
        ax.minorticks_off()
        ax.tick_params(labelsize=MIN_FONT)
        ax.set_ylabel(f"{imp}\ngain (points)", fontsize=10)
    axes[-1].set_xlabel("K, training images per class (shaded: below the paper's K)", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (labels[i].split(" − ")[0], not labels[i].endswith("ours")))
    return _legend_below(fig, [handles[i] for i in order], 2, fontsize=10)


def plot_acc_by_K(points: list[dict], Ks: Sequence[int], groups: dict[str, str]):
    """ACC against K (chapter 9, `findings.memory.acc_by_K` points): one panel per group (`groups`: its key in the
    points -> the panel's title), sharing the y axis; per method and budget M, the mean ACC over seeds joined across
    K with its 95% t-interval, in the method's colour and line style (`method_style`) and a marker per M (a circle
    for the paper's methods, which have none), hollow where a run has not yet every seed of its file; a run with fewer
    than two seeds, or fewer than half its file's, is left out. The K axis is logarithmic with a tick at each K of
    `Ks`; the legend below names the methods and the markers. Sized for the book's column. Returns the figure."""
    data = pd.DataFrame(points)
    data = data[(data.n >= 2) & (2 * data.n >= data["of"])] if len(data) else data
    budgets = sorted({int(M) for M in data.M if M == M and M is not None}) if len(data) else []
    markers = {None: "o", **dict(zip(budgets, "s^vDP"))}
    fig, axes = plt.subplots(1, len(groups), figsize=(COLUMN_IN, 2.9), sharey=True, squeeze=False)
    handles = {}
    for ax, (group, title) in zip(axes[0], groups.items()):
        sub = data[data.group == group] if len(data) else data
        lines = list(sub.groupby(["method", sub.M.fillna(0)], sort=False))
        for i, ((m, M), g) in enumerate(lines):
            M = None if M == 0 else int(M)
            g = g.sort_values("K").assign(K=lambda f: f.K * 1.07 ** (i - (len(lines) - 1) / 2))  # side by side
            style = {**(method_style(m) or {}), "marker": markers[M], "mfc": None}  # hollow: a run not done
            line = ax.errorbar(g.K, g["mean"], yerr=[g["mean"] - g.lo, g.hi - g["mean"]], ms=5, capsize=2, lw=1.4,
                               label=method_label(m), **style)
            part = g[g.n < g["of"]]  # a run not yet at every seed of its file: a hollow marker
            ax.scatter(part.K, part["mean"], marker=markers[M], s=25, color="white", zorder=3)
            handles.setdefault(method_label(m), line)
        ax.set_xscale("log")
        ax.set_xticks(list(Ks), [str(k) for k in Ks])
        ax.minorticks_off()
        ax.set_xlim(min(Ks) / 1.5, max(Ks) * 1.5)
        _panel(ax, title, xlabel="K", ylabel="ACC (%)" if ax is axes[0][0] else "")
    marks = [plt.Line2D([], [], color="0.4", ls="none", marker=markers[M], label="paper's file" if M is None
                        else f"M = {M}") for M in markers]
    return _legend_below(fig, list(handles.values()) + marks, 3)


def method_matrices(res: dict, methods: Optional[Sequence[str]] = None) -> dict[str, list[np.ndarray]]:
    """A results file's accuracy matrices, {method: one per seed in seed order}, of `methods` with runs (default all),
    for `plot_task_curves` and `plot_forgetting`; two files' joined as {**a, **b}."""
    runs = sorted(runs_by_key(res["runs"]), key=lambda kr: kr[0].seed)
    mats = {m: [matrix_from_json(r["acc_matrix"]) for k, r in runs if k.method == m]
            for m in methods or dict.fromkeys(k.method for k, _ in runs)}
    return {m: v for m, v in mats.items() if v}


def plot_task_curves(runs: dict[str, list[np.ndarray]], tasks: Sequence[int] = (1, 5, 10),
                     labels: Optional[dict[str, str]] = None):
    """The paper's Fig. 3 per task: a panel per task j of `tasks` (1-based) with the accuracy on it after each task
    i >= j, mean over seeds, a line per method of `runs` ({method: its seeds' accuracy matrices, `method_matrices`})
    in its `method_style`, named below (`labels`: method -> name; default the tables'). Returns the figure."""
    labels = {m: (labels or {}).get(m, method_label(m) if method_style(m) else m) for m in runs}
    fig, axes = plt.subplots(1, len(tasks), figsize=(COLUMN_IN, 2.5), sharex=True, sharey=True, squeeze=False)
    for ax, j in zip(axes[0], tasks):
        for m, mats in runs.items():
            mean = np.mean([a[j - 1:, j - 1] for a in mats], axis=0)
            ax.plot(np.arange(j, j + len(mean)), mean, lw=1.4, ms=5, markevery=MARKS, label=labels[m],
                    **(method_style(m) or {}))
        _panel(ax, f"task {j}", xlabel="tasks learnt", ylabel="accuracy on the task (%)" if j == tasks[0] else "")
        ax.set_xlim(1, len(mean) + j - 1)
    return _legend_below(fig, axes[0][0].get_lines(), 3)


def plot_forgetting(runs: dict[str, list[np.ndarray]], labels: Optional[dict[str, str]] = None):
    """Each task's forgetting at the end of the stream (`metrics.forgetting`), a line per method of `runs` (as
    `plot_task_curves`) in its `method_style`: the mean over seeds with its 95% t-interval, methods side by side."""
    labels = {m: (labels or {}).get(m, method_label(m) if method_style(m) else m) for m in runs}
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 2.7))
    for i, (m, mats) in enumerate(runs.items()):
        mean, half = np.array([mean_ci95(f) for f in np.array([forgetting(a) for a in mats]).T]).T
        x = np.arange(1, len(mean) + 1) + 0.1 * (i - (len(runs) - 1) / 2)
        ax.errorbar(x, mean, yerr=half, lw=1.4, ms=5, capsize=2, label=labels[m], **(method_style(m) or {}))
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xticks(range(1, len(mean) + 1))
    _panel(ax, "", xlabel="task", ylabel="forgetting at the end (points)")
    return _legend_below(fig, ax.containers, 3)


def plot_story_steps(frame, stat: str = "frac_increase",
                     ylabel: str = "steps where the penalty rose (%)"):
    """The λ story (`lambda_story.story_frame`): per K (panel) and regulariser (x), a bar per setting with the mean
    over seeds of a per-run fraction in percent, its value written on the bar, and a line spanning the seeds.
    Returns the figure."""
    data = frame.assign(pct=100 * frame[stat])
    Ks = sorted(data.K.unique())
    fig, axes = plt.subplots(1, len(Ks), figsize=(COLUMN_IN, 3.18), sharey=True, squeeze=False)
    axes = axes[0]
    order = list(dict.fromkeys(data.setting))
    for ax, K in zip(axes, Ks):
        sns.barplot(data=data[data.K == K], x="regulariser", y="pct", hue="setting", hue_order=order,
                    errorbar=("pi", 100), palette="colorblind", ax=ax, err_kws={"linewidth": 1.2}, legend=ax is axes[0])
        for c in ax.containers:
            ax.bar_label(c, fmt="%.0f", fontsize=MIN_FONT, padding=2, rotation=90)
        ax.set(title=f"K = {K}", xlabel="", ylim=(0, 125), yticks=range(0, 101, 20),
               ylabel=ylabel if ax is axes[0] else "")
        ax.tick_params(labelsize=MIN_FONT)
    handles = axes[0].get_legend_handles_labels()[0]
    axes[0].get_legend().remove()
    return _legend_below(fig, handles, len(handles), columnspacing=1.0, handlelength=1.2)


def plot_story_ratio(frame, setting: str = "MetaCL-λ (tuned γ)"):
    """The λ story: per run (dot: one K and seed) the median λ/γ over its steps with λ > 0, by regulariser, on a
    log axis with a line at 1 (above it λ exceeds γ). Returns the figure."""
    data = frame[frame.setting == setting].copy()
    data["K "] = data.K.map(lambda k: f"K = {k}")
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 3.2))
    sns.stripplot(data=data, x="regulariser", y="lambda_over_gamma_median", hue="K ", dodge=True, size=7,
                  palette="crest", jitter=False, ax=ax)
    ax.set_yscale("log")
    ax.axhline(1, color="black", lw=1)
    ax.set(xlabel="", ylabel="median λ/γ (steps with λ > 0)")
    lo, hi = data.lambda_over_gamma_median.min(), data.lambda_over_gamma_median.max()
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo / 2 <= t <= hi * 2]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_formatter(plt.NullFormatter())
    ax.tick_params(labelsize=MIN_FONT)
    ax.legend(title="", fontsize=MIN_FONT, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def png_html(fig, alt: str):
    """A figure as an HTML <img> with alt text (`IPython.display.HTML`): for outputs that a caption cannot reach,
    such as a widget's drawing, which the static page shows as a snapshot."""
    from IPython.display import HTML

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode()
    return HTML(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}" style="max-width:100%">')


def _short_test(test: str) -> str:  # a label, for `claim_differences`
    """A test's name as a figure's row label: without the K contrast of claim 4, the task of claim 6 and the words
    "accuracy after" of claim 5 (the panel's axis says them)."""
    test = re.sub(r": K [0-9, ]+ minus K [0-9, ]+$", "", test)
    return re.sub(r" on (the last task|task \d+)$", "", test).replace("accuracy after epoch", "epoch")


def claim_differences(frame, claim: str, width: float = 6.8):
    """One claim's per-seed differences (`claims.differences_frame`): a row per test, dots for seeds and a diamond with the
    95% t-interval for their mean, one colour per K (the same colour for a K in every claim's figure), the claim's
    threshold as a black line; the legend above the axes. Sized for the book's column (`width` inches)."""
    from ..findings.stats import paired_test

    sub = frame[frame.claim == claim].assign(test=lambda f: f.test.map(_short_test))
    ks = list(dict.fromkeys(sub.K))
    allk = [f"K = {K}" for K in (20, 50, 200, 500)] + ["across K", "training logs"]  # `claims.column`
    colours = dict(zip(allk, sns.color_palette("colorblind", len(allk))))
    n_tests = sub.test.nunique()
    fig, ax = plt.subplots(figsize=(width, 0.9 + (0.3 + 0.12 * len(ks)) * n_tests))
    dodge = 0.6 if len(ks) > 1 else False
    sns.stripplot(data=sub, x="difference", y="test", hue="K", hue_order=ks, palette=colours, dodge=bool(dodge),
                  alpha=0.5, size=3.5, ax=ax, legend=False)
    sns.pointplot(data=sub, x="difference", y="test", hue="K", hue_order=ks, palette=colours, dodge=dodge,
                  errorbar=lambda v: paired_test(list(v))["ci95"], linestyle="none", markers="D", markersize=5,
                  capsize=0.15, err_kws={"linewidth": 1.2}, ax=ax, legend=False)
    for thr in sub.threshold.unique():
        ax.axvline(thr, color="black", lw=1)
    unit = "degrees" if (sub.unit == "degrees").all() else "points"
    ax.set(ylabel="", xlabel=f"paired per-seed difference a − b ({unit})")
    ax.tick_params(labelsize=9)
    ax.xaxis.label.set_size(9)
    handles = [plt.Line2D([], [], marker="D", linestyle="none", color=colours[k], label=k) for k in ks]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(ks), fontsize=9, frameon=False,
              borderaxespad=0.2, handletextpad=0.2, columnspacing=1.0)
    fig.tight_layout()
    return fig
