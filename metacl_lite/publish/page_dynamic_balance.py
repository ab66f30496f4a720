"""The records of chapter 3 (`book/chapters/03_dynamic_balance.md`): its interactive balance drawn at one setting of
the sliders."""
from __future__ import annotations


def balance_snapshot(g1, angle_deg: float, g2_norm: float, beta: float, gamma: float, alt: str):
    """Chapter 3's interactive balance at one setting of the sliders: the figure as an image (`plots.png_html`; a
    plain plt.show() gives the static page an image without any alt text). `alt`, the page's words, is filled with
    `title` (the panel's title, `plots.balance_title`), `beta` and `gamma`."""
    import matplotlib.pyplot as plt

    from ..report.plots import balance_g2, balance_title, plot_balance_2d, png_html

    fig, ax = plt.subplots(figsize=(4.6, 5.8))
    plot_balance_2d(g1, balance_g2(g2_norm, angle_deg), beta=beta, gamma=gamma, ax=ax)
    ax.set_title(balance_title(g2_norm, angle_deg), fontsize=10)
    fig.tight_layout()
    image = png_html(fig, alt.format(title=balance_title(g2_norm, angle_deg), beta=beta, gamma=gamma))
    plt.close(fig)
    return image
