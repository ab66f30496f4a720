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


def test_per_K_hparams_override_the_default_for_that_K_only(tmp_path, monkeypatch):
    import json

    from metacl_lite import experiments as E

    hp = {"pmnist": {"methods": {"pi": {"beta": 1000.0}, "mas-metacl-lambda": {"gamma": 1.0}},
                     "source": "results/tuning-pmnist-K20.json",
                     "by_K": {"200": {"methods": {"pi": {"beta": 1.0}}, "source": "results/tuning-pmnist-K200.json"}}}}
    f = tmp_path / "hparams.json"
    f.write_text(json.dumps(hp))
    monkeypatch.setattr(E, "HPARAMS_FILE", f)
    assert E.method_hparams("pmnist", "pi") == {"beta": 1000.0}
    assert E.method_hparams("pmnist", "pi", K=50) == {"beta": 1000.0}
    assert E.method_hparams("pmnist", "pi", K=200) == {"beta": 1.0}
    assert E.method_hparams("pmnist", "mas-metacl-lambda", K=200) == {"gamma": 1.0}  # not tuned at 200: default
    assert E.method_config("pmnist", "pi", K=200).beta == 1.0 and E.method_config("pmnist", "pi").beta == 1000.0
    assert E.hparams_source("pmnist", ["finetune", "pi", "mas-metacl-lambda"], K=200) == {
        "pi": "K=200: results/tuning-pmnist-K200.json", "mas-metacl-lambda": "default: results/tuning-pmnist-K20.json"}


def test_tune_at_another_K_writes_values_for_that_K_only(tmp_path, monkeypatch):
    import json

    from metacl_lite import experiments as E

    f = tmp_path / "hparams.json"
    f.write_text(json.dumps({"pmnist": {"methods": {"mas": {"beta": 7.0}}, "source": "x"}}))
    monkeypatch.setattr(E, "HPARAMS_FILE", f)
    kw = dict(n_tasks=2, seeds=(100,), methods=["mas"], epochs=1, beta_grid=(0.1, 10.0), show_progress=False)
    res = E.tune("pmnist", 30, out=tmp_path / "t30.json", **kw)
    hp = json.loads(f.read_text())["pmnist"]
    assert hp["methods"]["mas"] == {"beta": 7.0}  # the default is untouched
    assert hp["by_K"]["30"]["methods"]["mas"] == res["chosen"]["mas"] and res["chosen"]["mas"]["beta"] in (0.1, 10.0)
    assert "--K 30" in hp["by_K"]["30"]["command"]
    assert E.method_hparams("pmnist", "mas", K=30) == res["chosen"]["mas"]
    E.tune("pmnist", 20, out=tmp_path / "t20.json", **kw)
    assert json.loads(f.read_text())["pmnist"]["methods"]["mas"] != {"beta": 7.0}  # K=20 sets the default
