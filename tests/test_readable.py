"""Numbers and tables as the book's chapters show them (`report.readable`), and chapter 3's balance figure: its
legend and titles round as the interactive figure's sliders do."""
import math

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from metacl_lite.balance import dynamic_lambda  # noqa: E402
from metacl_lite.report import plots as P  # noqa: E402
from metacl_lite.report.readable import percent, sci, styled  # noqa: E402


@pytest.mark.parametrize("x, digits, text", [
    (1.3522414859783624e-14, 2, "1.4 × 10⁻¹⁴"),
    (2.220446e-16, 3, "2.22 × 10⁻¹⁶"),
    (-1.05e-16, 2, "−1.1 × 10⁻¹⁶"),
    (0.000396, 2, "4.0 × 10⁻⁴"),
    (0.0036, 2, "0.0036"),
    (-0.003569, 2, "−0.0036"),
    (4.846046, 3, "4.85"),
    (9.96, 2, "10"),  # rounds up to the next power of ten
    (300.0, 2, "300"),
    (12345.0, 2, "1.2 × 10⁴"),
    (0.0, 2, "0"),
    (float("nan"), 2, "–"),
    (None, 2, "–"),
])
def test_sci(x, digits, text):
    assert sci(x, digits) == text


def test_percent_and_styled_table():
    assert percent(0.6) == "60 %" and percent(None) == "–" and percent(float("nan")) == "–"
    df = pd.DataFrame({"a": [1.0, math.nan], "b": [1e-14, 0.5]}, index=pd.Index(["x", "y"], name="row name"))
    df.columns.name = "cols"
    html = styled(df, {"a": "{:.1f}", "b": sci}).to_html()
    assert ">1.0<" in html and ">–<" in html and "1.0 × 10⁻¹⁴" in html and ">0.50<" in html
    assert "nan" not in html.lower() and "row name" not in html and "cols" not in html
    assert 'class="dataframe"' in html
    hidden = styled(df, index=False).to_html()
    assert ">x<" not in hidden and ">1.000000<" in hidden  # no format given: pandas' default


def test_balance_figure_rounds_as_the_sliders():
    """Chapter 3: the sliders read out beta and |g2| to two decimals and the angle in whole degrees; the legend and
    the panel titles say the same numbers, and each panel's lambda is Eq. 5's."""
    g1 = np.array([1.0, 0.3])
    words = P.balance_labels(0.6, 0.0, 0.38)
    assert words["fixed"] == "g1 + β g2 (β = 0.60)" and words["dynamic"].endswith("(λ = 0.38, γ = 0.00)")
    assert P.balance_title(1.5, 140.0) == "|g2| = 1.50, 140°"
    g2 = P.balance_g2(1.5, 140.0)
    assert np.allclose(g2, 1.5 * np.array([math.cos(math.radians(140)), math.sin(math.radians(140))]))
    fig = P.plot_balance_panels(g1, (0.4, 1.5, 4.0), 140.0, 0.6, 0.0)
    titles = [ax.get_title() for ax in fig.axes]
    lams = [dynamic_lambda(torch.tensor(g1), torch.tensor(P.balance_g2(n, 140.0))) for n in (0.4, 1.5, 4.0)]
    assert titles == [f"|g2| = {n:.2f}, 140°\nλ = {lam:.2f}" for n, lam in zip((0.4, 1.5, 4.0), lams)]
    assert len(set(f"{lam:.2f}" for lam in lams)) == 3  # lambda shrinks as g2 grows
    [legend] = fig.legends
    assert [t.get_text() for t in legend.get_texts()][2:] == ["g2 (penalty)", "g1 + β g2 (β = 0.60)",
                                                              "g_x = g1 + (λ + γ) g2 (γ = 0.00)"]
    ax = P.plot_balance_2d(g1, g2, beta=0.6, ax=matplotlib.pyplot.figure().gca())
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"g_x = g1 + (λ + γ) g2 (λ = {lams[1]:.2f}, γ = 0.00)" in texts
