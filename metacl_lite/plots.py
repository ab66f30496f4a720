"""Figures used by the book (seaborn/matplotlib): the balance geometry (Fig. 2), accuracy curves (Fig. 3), gradient
angles (Fig. 5) and our-minus-paper differences."""
from __future__ import annotations

from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from .balance import dynamic_balance, fixed_balance


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
    """Ours minus the paper's, per method and metric (rows from reports.comparison_rows)."""
    ax = ax or plt.gca()
    data = [{"method": r["label"], "metric": k, "ours − paper (points)": r[f"{k} diff"]}
            for r in rows for k in ("ACC", "BT", "FA") if r[f"{k} diff"] is not None]
    if data:
        sns.barplot(data=pd.DataFrame(data), y="method", x="ours − paper (points)", hue="metric", ax=ax)
    ax.axvline(0, color="k", lw=0.8)
    return ax
