"""Fig. 3 (metacl_lite.report.plots.plot_fig3 and its data): families and variants by name, per-seed curves whose mean is
tables.average_accuracy_curves, and the drawn lines and bands equal to the data."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from metacl_lite.report import plots  # noqa: E402
from metacl_lite.report.tables import average_accuracy_curves  # noqa: E402


def _res(mats):
    """A results file of a 2-task stream: mats["method/seed"] = accuracy matrix [[x, -], [y, z]]."""
    return {"config": {"methods": sorted({k.split("/")[0] for k in mats}), "seeds": [0, 1]},
            "runs": {k: {"acc_matrix": [[x, None], [y, z]]} for k, (x, y, z) in mats.items()}}


RES = _res({"finetune/0": (60, 40, 80), "finetune/1": (70, 50, 90),  # curves (60, 60) and (70, 70)
            "pi-metacl-lambda/0": (80, 70, 90), "pi-metacl-lambda/1": (90, 90, 90)})  # (80, 80) and (90, 90)


@pytest.mark.parametrize("method, expected", [("finetune", ("none", "plain")), ("metacl", ("none", "MetaCL-β")),
                                              ("mas", ("MAS", "plain")), ("pi-metacl-beta", ("PI", "MetaCL-β")),
                                              ("ewc-metacl-lambda", ("EWC", "MetaCL-λ"))])
def test_family_variant(method, expected):
    assert plots.family_variant(method) == expected


def test_seed_curves_by_hand():
    f = plots.seed_accuracy_curves(RES)
    got = {(r.method, r.seed, r.task): r["average accuracy (%)"] for _, r in f.iterrows()}
    assert got == {("finetune", 0, 1): 60, ("finetune", 0, 2): 60, ("finetune", 1, 1): 70, ("finetune", 1, 2): 70,
                   ("pi-metacl-lambda", 0, 1): 80, ("pi-metacl-lambda", 0, 2): 80,
                   ("pi-metacl-lambda", 1, 1): 90, ("pi-metacl-lambda", 1, 2): 90}
    assert set(zip(f.method, f.family, f.variant)) == {("finetune", "none", "plain"),
                                                       ("pi-metacl-lambda", "PI", "MetaCL-λ")}


def test_seed_curves_average_to_the_reports_curve_on_a_committed_file():
    from metacl_lite.paths import REPO_ROOT
    from metacl_lite.lab.store import load_results

    res = load_results(REPO_ROOT / "results" / "pmnist-K20.json")
    mean = plots.seed_accuracy_curves(res).groupby(["method", "task"])["average accuracy (%)"].mean()
    for m, curve in average_accuracy_curves(res).items():
        np.testing.assert_allclose(mean[m].to_numpy(), curve, rtol=1e-12)


def test_fig3_draws_the_mean_and_the_seed_range():
    fig = plots.plot_fig3({20: RES, 50: RES})
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["K = 20", "K = 50"]
    lines = {(matplotlib.colors.to_hex(ln.get_color()), ln.get_linestyle()): ln.get_ydata().tolist()
             for ln in axes[0].lines}
    assert lines == {(matplotlib.colors.to_hex(plots.FAMILY_COLOURS["none"]), "-"): [65.0, 65.0],  # fine-tune: 60, 70
                     (matplotlib.colors.to_hex(plots.FAMILY_COLOURS["PI"]), ":"): [85.0, 85.0]}  # PI-MetaCL-λ, dotted
    bands = [c.get_paths()[0].vertices[:, 1] for c in axes[0].collections]
    assert [(b.min(), b.max()) for b in bands] == [(60.0, 70.0), (80.0, 90.0)]  # min to max over seeds
    plt.close(fig)
