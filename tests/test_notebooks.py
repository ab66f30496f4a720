"""Chapters as parameterised notebooks: parameters are checked before any work, and every chapter executes through
papermill with small parameters; the assertions are on the values each chapter recorded (myst_nb glue)."""
import math
from pathlib import Path

import jupytext
import papermill
import pytest

from metacl_lite.cli import main
from metacl_lite.notebooks import (ParameterError, declared_parameters, expand_grid, glued_values, make_variant,
                                   run_notebook, validate, write_variants, TEMPLATE)

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "book" / "reproduce" / "benchmark.md"


def test_declared_parameters_and_validation():
    d = declared_parameters(BENCH)
    assert d["benchmark"] == "pmnist" and d["K"] == 20 and d["quick"] is False
    validate({"K": 50, "quick": True}, d)
    with pytest.raises(ParameterError, match="unknown notebook parameter"):
        validate({"KK": 50}, d)
    with pytest.raises(ParameterError, match="expected int"):
        validate({"K": "fifty"}, d)
    with pytest.raises(ParameterError, match="expected bool"):
        validate({"quick": 1}, d)
    assert declared_parameters(ROOT / "book/chapters/06_metrics.md") == {}


def test_grid():
    runs = expand_grid({"benchmark": "pmnist"}, ["K=20,50", "seeds=1,3"])
    assert len(runs) == 4 and {"benchmark": "pmnist", "K": 50, "seeds": 3} in runs
    with pytest.raises(ParameterError):
        expand_grid({}, ["K"])


def test_cli_rejects_bad_parameters_before_any_work(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["notebook", str(BENCH), "-p", "K", "20", "--grid", "bogus=1,2", "-o", str(out)]) == 2
    assert "unknown notebook parameter(s) bogus" in capsys.readouterr().err
    assert main(["notebook", str(BENCH), "-p", "K", "'many'", "-o", str(out)]) == 2
    assert "expected int" in capsys.readouterr().err
    assert not out.exists()


def test_plain_papermill_is_checked_inside_the_notebook(tmp_path):
    ipynb = tmp_path / "benchmark.ipynb"
    jupytext.write(jupytext.read(str(BENCH)), str(ipynb))
    with pytest.raises(papermill.PapermillExecutionError, match="unknown notebook parameter"):
        papermill.execute_notebook(str(ipynb), str(tmp_path / "out.ipynb"), parameters={"bogus": 1},
                                   cwd=str(BENCH.parent), progress_bar=False)


PARAMETERISED = [p for p in sorted((ROOT / "book").glob("*/*.md")) if declared_parameters(p)]


def test_parameterised_pages_found():
    assert {"benchmark", "08_analysis", "pmnist-K50"} <= {p.stem for p in PARAMETERISED}


@pytest.mark.parametrize("path", PARAMETERISED, ids=lambda p: p.stem)
def test_plain_papermill_sees_every_parameter(path, tmp_path):
    """`papermill --help-notebook` and parameter injection parse the parameters cell line by line; a comment it
    cannot parse hides that parameter (papermill then warns "Passed unknown parameter")."""
    declared = declared_parameters(path)
    ipynb = tmp_path / "nb.ipynb"
    jupytext.write(jupytext.read(str(path)), str(ipynb))
    assert set(declared) <= set(papermill.inspect_notebook(str(ipynb)))


def test_variant_pages_in_sync_with_template():
    assert write_variants(check=True) == []
    v = make_variant(TEMPLATE.read_text(), "X", {"K": 77, "live": False})
    assert "K = 77  #" in v and "live = False  #" in v and "# 7. Reproduction: X" in v


def _num(v):
    return float(v) if not isinstance(v, (int, float)) else v


CHAPTERS = {
    "01_problem": ({}, lambda g: g["n_train_task"] == 200 and g["n_test_task"] == 10000),
    "02_forgetting": ({}, lambda g: True),
    "03_dynamic_balance": ({}, lambda g: _num(g["max_err_random"]) < 1e-6 and _num(g["max_err_real"]) < 1e-6),
    "04_adaptation": ({}, lambda g: abs(_num(g["slope1"]) - 1) < 0.1 and abs(_num(g["slope2"]) - 2) < 0.2
                      and _num(g["identity_err"]) < 1e-12),
    "05_algorithms": ({}, lambda g: True),
    "06_metrics": ({}, lambda g: math.isclose(_num(g["ex_ACC"]), 72.67) and math.isclose(_num(g["ex_BT"]), -8.5)
                   and math.isclose(_num(g["ex_FA"]), 0.67)),
    "08_analysis": ({"speed_tasks": 2, "angle_K": 20, "angle_tasks": 3},
                    lambda g: _num(g["angle_g2_lambda_max"]) <= 90.0 + 1e-6 and 0 <= _num(g["speed_ft"]) <= 100),
}


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_chapter_executes(chapter, tmp_path):
    params, check = CHAPTERS[chapter]
    out = run_notebook(ROOT / "book" / "chapters" / f"{chapter}.md", params, tmp_path)
    g = glued_values(out)
    assert check(g), g


def test_reproduction_notebook_quick(tmp_path):
    out = run_notebook(BENCH, {"quick": True, "seeds": 1, "methods": "finetune,metacl,pi-metacl-lambda"}, tmp_path)
    g = glued_values(out)
    assert g["live_n_methods"] == 3
    for m in ("finetune", "metacl", "pi-metacl-lambda", "joint"):
        assert 0 <= g[f"live_acc_{m}"] <= 100
    assert (tmp_path / "pmnist-K20-live.json").exists()  # out_dir is the run folder


def test_failed_run_keeps_the_executed_notebook_and_no_temporary_input(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="unknown method 'nope'"):
        run_notebook(BENCH, {"methods": "nope", "quick": True}, tmp_path)
    assert not list(tmp_path.glob("*.input.ipynb"))
    assert [p.name for p in tmp_path.glob("*.ipynb")] == ["benchmark-methodsnope-quickTrue.ipynb"]
