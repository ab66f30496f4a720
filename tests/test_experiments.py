"""Tables and generated comparison text, on a synthetic results dict with known numbers."""
import numpy as np

from metacl_lite.experiments import comparison_rows, comparison_summary, format_table, summarize
from metacl_lite.paper import paper_table
from metacl_lite.training import METHODS


def _fake(offset: float) -> dict:
    """Every method's 2x2 accuracy matrix gives exactly the paper's ACC + offset (reference = diagonal)."""
    paper = paper_table("pmnist", 20)
    runs, refs = {}, {}
    for s in (0, 1):
        refs[str(s)] = {"acc": [50.0, 50.0]}
        for m in METHODS:
            acc = paper[m]["ACC"][0] + offset
            runs[f"{m}/{s}"] = {"acc_matrix": [[50.0, None], [2 * acc - 50.0, 50.0]]}
    res = {"config": {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "seeds": [0, 1], "methods": list(METHODS)},
           "runs": runs, "references": refs, "oracle": {}, "paper_source": "Table 1"}
    res["summary"] = summarize(res)
    return res


def test_rows_and_table():
    res = _fake(1.5)
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert np.isclose(rows["pi"]["ACC diff"], 1.5) and rows["pi"]["ACC paper"] == "50.6 ± 0.9"
    assert rows["joint"]["ACC ours"] == "–" and rows["joint"]["ACC paper"] == "68.2 ± 0.2"
    md = format_table(res, "md")
    assert md.count("\n") == 1 + len(rows) and "| PI-MetaCL-λ |" in md


def test_summary_numbers():
    text = comparison_summary(_fake(-2.0))
    assert "ACC: mean |ours − paper| = 2.0 points over 11 rows" in text
    assert "Spearman ρ over 11 methods): 1.00" in text
    assert "MAS 53.7 → β 54.9 → λ 55.7" in text
