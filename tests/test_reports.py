"""Tables and generated comparison text, on synthetic results with known numbers; incomplete rows are marked."""
import numpy as np

from metacl_lite.paper import paper_table
from metacl_lite.reports import comparison_rows, comparison_summary, format_table, summarize
from metacl_lite.training import METHODS


def _fake(offset: float, seeds=(0, 1), missing=()) -> dict:
    """Every method's 2x2 accuracy matrix gives exactly the paper's ACC + offset (reference = diagonal)."""
    paper = paper_table("pmnist", 20)
    runs, refs = {}, {}
    for s in seeds:
        refs[str(s)] = {"acc": [50.0, 50.0]}
        for m in METHODS:
            if (m, s) in missing:
                continue
            acc = paper[m]["ACC"][0] + offset
            runs[f"{m}/{s}"] = {"acc_matrix": [[50.0, None], [2 * acc - 50.0, 50.0]]}
    res = {"config": {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "seeds": list(seeds), "methods": list(METHODS)},
           "runs": runs, "references": refs, "oracle": {str(s): {"acc": [paper["joint"]["ACC"][0] + offset - 5, paper["joint"]["ACC"][0] + offset + 5]}
                      for s in seeds},
           "paper_source": "Table 1"}
    res["summary"] = summarize(res)
    return res


def test_rows_and_table():
    res = _fake(1.5)
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert np.isclose(rows["pi"]["ACC diff"], 1.5) and rows["pi"]["ACC paper"] == "50.6 ± 0.9"
    assert rows["joint"]["ACC ours"] == "69.7 ± 0.0" and rows["joint"]["ACC paper"] == "68.2 ± 0.2"
    assert rows["pi"]["Seeds"] == "2" and rows["pi"]["complete"]
    md = format_table(res, "md")
    assert md.count("\n") == 1 + len(rows) and "| PI-MetaCL-λ | 2 |" in md and "INCOMPLETE" not in md


def test_summary_numbers():
    text = comparison_summary(_fake(-2.0))
    assert "ACC: mean |ours − paper| = 2.0 points over 12 rows" in text
    assert "Spearman ρ over 11 methods): 1.00" in text
    assert "MAS 53.7 → β 54.9 → λ 55.7" in text


def test_rows_made_from_fewer_seeds_are_marked_in_every_format():
    res = _fake(0.0, seeds=(0, 1, 2), missing={("pi", 2), ("ewc", 1), ("ewc", 2)})
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert (rows["pi"]["n"], rows["pi"]["Seeds"]) == (2, "2 of 3 (incomplete)")
    assert (rows["ewc"]["n"], rows["ewc"]["Seeds"]) == (1, "1 of 3 (incomplete)")
    assert rows["mas"]["Seeds"] == "3" and rows["mas"]["complete"]
    text, md, summary = format_table(res), format_table(res, "md"), comparison_summary(res)
    for out in (text, md, summary):
        assert "INCOMPLETE: 2 row(s) are made from fewer than the 3 seeds of the file (PI, EWC)" in out
    assert "| PI | 2 of 3 (incomplete) |" in md
    assert "1 of 3 (incomplete)" in text


def test_a_method_without_any_finished_seed_still_gets_a_row():
    res = _fake(0.0, seeds=(0,), missing={("mas", 0)})
    rows = {r["method"]: r for r in comparison_rows(res)}
    assert rows["mas"]["Seeds"] == "0 of 1 (incomplete)" and rows["mas"]["ACC ours"] == "–"
