"""Chapters as parameterised notebooks: parameters (names, types, values, grids) are checked before any kernel
starts, every grid point keeps its own outputs, and every chapter executes through papermill with small parameters;
the assertions are on the values each chapter recorded (myst_nb glue)."""
import ast
import json
import math
from pathlib import Path

import jupytext
import papermill
import pytest

from metacl_lite.cli import main
from metacl_lite.errors import FileFormatError, OutputError, UsageError
from metacl_lite.publish.notebooks import (ParameterError, check_parameters, declared_parameters, expand_grid, glued_values, injected_parameters, plan_runs, run_cli, run_notebook, tag, validate)
from metacl_lite.publish.pages import PAGES, TEMPLATE, make_page, page_params, write_pages

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "book" / "reproduce" / "benchmark.md"

#: A tiny notebook that writes a fixed results file name into `out_dir`, as the reproduction chapter does.
TINY = '''---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---

```{code-cell} ipython3
:tags: [parameters]
x = 1  # the value recorded
fail = False  # raise before writing
out_dir = ""  # folder of result.json
```

```{code-cell} ipython3
import json, pathlib
if fail:
    raise RuntimeError("failed on purpose")
pathlib.Path(out_dir, "result.json").write_text(json.dumps({"x": x}))
```
'''


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.md"
    p.write_text(TINY)
    return p


def test_declared_parameters_are_python_values(tmp_path, tiny):
    assert declared_parameters(BENCH) == {"benchmark": "pmnist", "K": 20, "seeds": 1, "methods": "all", "epochs": 0,
                                          "n_tasks": 0, "quick": False, "live": True, "out_dir": "", "device": None,
                                          "shows": page_params("benchmark")[2]["shows"], "tables": ""}  # injected shows
    assert declared_parameters(ROOT / "book/chapters/06_metrics.md") == {}
    ipynb = tmp_path / "tiny.ipynb"
    jupytext.write(jupytext.read(str(tiny)), str(ipynb))
    assert declared_parameters(ipynb) == {"x": 1, "fail": False, "out_dir": ""}
    tiny.write_text(TINY.replace("x = 1 ", "x = len('ab') "))
    with pytest.raises(FileFormatError, match=r"default of parameter x, len\('ab'\), is not a Python literal"):
        declared_parameters(tiny)


def test_validation_of_names_and_types():
    d = declared_parameters(BENCH)
    validate({"K": 50, "quick": True}, d)
    with pytest.raises(ParameterError, match="unknown notebook parameter"):
        validate({"KK": 50}, d)
    with pytest.raises(ParameterError, match="expected int"):
        validate({"K": "fifty"}, d)
    with pytest.raises(ParameterError, match="expected bool"):
        validate({"quick": 1}, d)


@pytest.mark.parametrize("params, msg", [
    ({"K": -1}, "K=-1 is invalid: give a positive integer"), ({"K": 0}, "K=0 is invalid: give a positive integer"),
    ({"seeds": 0}, "seeds=0 is invalid: give a positive integer"),
    ({"benchmark": "bogus"}, "benchmark='bogus' is invalid: choose one of pmnist, cifar100, cub"),
    ({"methods": "nope"}, r"methods='nope' is invalid: unknown method\(s\) 'nope'; give 'all' or a comma-separated "
                          r"list of finetune, metacl"),
    ({"methods": "metacl,"}, r"methods='metacl,' is invalid: unknown method\(s\) ''"),
    ({"methods": "metacl,finetune,metacl"}, "methods='metacl,finetune,metacl' is invalid: metacl listed twice; name each method once"),
    ({"epochs": -2}, "epochs=-2 is invalid: give 0"), ({"n_tasks": -1}, "n_tasks=-1 is invalid: give 0"),
    ({"n_tasks": 1}, "n_tasks=1 is invalid: give 0 .* or at least 2 tasks"),
    ({"benchmark": "cifar100", "n_tasks": 11}, r"n_tasks=11 is invalid: .* at most 10 \(Split CIFAR-100"),
])
def test_invalid_values_are_rejected_naming_parameter_and_fix(params, msg):
    with pytest.raises(ParameterError, match=f"parameter {msg}"):
        validate(params, declared_parameters(BENCH))


def test_valid_edge_values_pass():
    d = declared_parameters(BENCH)
    validate({"K": 1, "seeds": 1, "epochs": 0, "n_tasks": 0, "benchmark": "cub", "methods": "all"}, d)
    validate({"methods": "finetune, pi-metacl-lambda", "n_tasks": 2, "epochs": 1}, d)
    validate({"benchmark": "cifar100", "n_tasks": 10}, d)
    validate({"n_tasks": 11}, d)  # Permuted MNIST makes any number of tasks


def test_value_checks_see_the_notebook_defaults():
    """A variant page's own default benchmark bounds n_tasks: Split CIFAR-100 has 10 tasks."""
    cifar = declared_parameters(ROOT / "book" / "reproduce" / "cifar100-K20.md")
    validate({"n_tasks": 10}, cifar)
    with pytest.raises(ParameterError, match=r"n_tasks=11 is invalid: .* at most 10 \(Split CIFAR-100"):
        validate({"n_tasks": 11}, cifar)


def test_check_parameters_applies_the_same_value_checks():
    """What the notebook's second cell does under plain papermill, without a kernel."""
    d = declared_parameters(BENCH)
    names = set(d) | {"__name__"}
    assert check_parameters({**d, "__name__": "m", "K": 50}, d, names) == {**d, "K": 50}
    with pytest.raises(ParameterError, match="parameter seeds=0 is invalid"):
        check_parameters({**d, "seeds": 0}, d, names)
    with pytest.raises(ParameterError, match="unknown notebook parameter.s. bogus"):
        check_parameters({**d, "bogus": 1}, d, names)


def test_grid():
    runs = expand_grid({"benchmark": "pmnist"}, ["K=20,50", "seeds=1,3"])
    assert runs == [{"benchmark": "pmnist", "K": 20, "seeds": 1}, {"benchmark": "pmnist", "K": 20, "seeds": 3},
                    {"benchmark": "pmnist", "K": 50, "seeds": 1}, {"benchmark": "pmnist", "K": 50, "seeds": 3}]
    assert expand_grid({}, ["methods=finetune, metacl"]) == [{"methods": "finetune"}, {"methods": "metacl"}]
    assert expand_grid({"K": 20}, []) == [{"K": 20}]
    for grid, msg in [(["K"], "NAME=v1,v2"), (["=1,2"], "NAME=v1,v2"), (["K="], "empty value"),
                      (["K=20,,50"], "empty value"), (["K=20,50,20"], "lists 20 twice"),
                      (["benchmark='a','a'"], "lists 'a' twice"), (["K=20", "K=50"], "K is given twice")]:
        with pytest.raises(ParameterError, match=msg):
            expand_grid({}, grid)
    with pytest.raises(ParameterError, match="K is given twice"):
        expand_grid({"K": 20}, ["K=50"])


def test_glued_values_read_a_notebook_and_a_book_builds_glue_record(tmp_path):
    """papermill leaves glued values in the notebook's outputs; a book build moves them to <page>.glue.json."""
    def out(name, text, prefix="application/papermill.record/"):
        return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}},
                "data": {prefix + "text/plain": text}}

    nb = {"cells": [{"cell_type": "code", "outputs": [out("n", "200"), out("s", "'69\u202f322'"),
                                                      {"output_type": "stream", "text": "x"}]}]}
    (tmp_path / "p.ipynb").write_text(json.dumps(nb))
    record = {"n": out("n", "200", prefix=""), "s": out("s", "'69\u202f322'", prefix=""),
              "fig": {"output_type": "display_data", "metadata": {"scrapbook": {"name": "fig", "mime_prefix": ""}},
                      "data": {"text/plain": "<Figure size 600x500 with 1 Axes>", "image/png": "iVBOR"}}}
    (tmp_path / "p.glue.json").write_text(json.dumps(record))
    assert glued_values(tmp_path / "p.ipynb") == {"n": 200, "s": "69\u202f322"}
    assert glued_values(tmp_path / "p.glue.json") == {"n": 200, "s": "69\u202f322",
                                                      "fig": "<Figure size 600x500 with 1 Axes>"}


def test_tag():
    assert tag({"seeds": 1, "K": 20}) == "K20-seeds1"
    assert tag({}) == "defaults"
    assert tag({"methods": "finetune,metacl", "out_dir": "a/b c"}) == "methodsfinetune,metacl-out_dira_b_c"


def test_plan_gives_each_grid_point_its_own_folder(tmp_path):
    """The README's `--grid seeds=1,3`: each point runs in its own folder (where its results file goes too)."""
    out = tmp_path / "runs"
    assert plan_runs(BENCH, [], ["seeds=1,3"], out) == [({"seeds": 1}, out / "seeds1"), ({"seeds": 3}, out / "seeds3")]
    assert plan_runs(BENCH, [("quick", "True")], ["seeds=1,3", "K=20,50"], out) == [
        ({"quick": True, "seeds": 1, "K": 20}, out / "K20-seeds1"), ({"quick": True, "seeds": 1, "K": 50}, out / "K50-seeds1"),
        ({"quick": True, "seeds": 3, "K": 20}, out / "K20-seeds3"), ({"quick": True, "seeds": 3, "K": 50}, out / "K50-seeds3")]
    assert plan_runs(BENCH, [("K", "50"), ("methods", "finetune")], [], out) == [({"K": 50, "methods": "finetune"}, out)]
    assert not out.exists()  # planning writes nothing


@pytest.mark.parametrize("params, grid, err, msg", [
    ([], ["bogus=1,2"], ParameterError, r"unknown notebook parameter\(s\) bogus"),
    ([], ["K=20,-1"], ParameterError, "parameter K=-1 is invalid"),  # a bad later point stops the first one too
    ([("K", "20"), ("K", "50")], [], ParameterError, "parameter K is given twice"),
    ([("out_dir", "'x'")], ["K=20,50"], ParameterError, "out_dir cannot be set for a grid"),
    ([], ["methods='a b','a_b'"], ParameterError, "would share a folder"),
])
def test_plan_rejects_before_any_run(tmp_path, params, grid, err, msg):
    with pytest.raises(err, match=msg):
        plan_runs(BENCH, params, grid, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_plan_rejects_bad_paths(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        plan_runs(tmp_path / "missing.md", [], [], tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match="not a .md/.ipynb file"):
        plan_runs(tmp_path / "notes.txt", [], [], tmp_path)
    with pytest.raises(OutputError, match="not a directory"):
        plan_runs(BENCH, [], [], tmp_path / "notes.txt")


def test_cli_rejects_bad_parameters_before_any_work(tmp_path, capsys):
    out = tmp_path / "runs"
    for argv, msg in [(["--grid", "bogus=1,2"], "unknown notebook parameter(s) bogus"),
                      (["-p", "K", "'many'"], "expected int"),
                      (["-p", "K", "-1"], "parameter K=-1 is invalid: give a positive integer"),
                      (["-p", "benchmark", "bogus"], "parameter benchmark='bogus' is invalid: choose one of"),
                      (["--grid", "K=20,20"], "lists 20 twice"), (["--grid", "K="], "empty value")]:
        assert main(["notebook", str(BENCH), *argv, "-o", str(out)]) == 2, argv
        assert msg in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("params, msg", [({"bogus": 1}, "unknown notebook parameter"),
                                         ({"K": -1}, "parameter K=-1 is invalid")])
def test_plain_papermill_is_checked_inside_the_notebook(tmp_path, params, msg):
    ipynb = tmp_path / "benchmark.ipynb"
    jupytext.write(jupytext.read(str(BENCH)), str(ipynb))
    with pytest.raises(papermill.PapermillExecutionError, match=msg):
        papermill.execute_notebook(str(ipynb), str(tmp_path / "out.ipynb"), parameters=params,
                                   cwd=str(BENCH.parent), progress_bar=False)


@pytest.mark.slow
def test_grid_run_keeps_every_point(tmp_path, tiny):
    """Both points of a 2-point grid keep their executed notebook and their (fixed-name) results file."""
    out = tmp_path / "runs"
    done = run_cli(tiny, [], ["x=1,2"], out)
    assert done == [out / "x1" / "tiny-x1.ipynb", out / "x2" / "tiny-x2.ipynb"]
    for x in (1, 2):
        assert json.loads((out / f"x{x}" / "result.json").read_text()) == {"x": x}
        nb = json.loads((out / f"x{x}" / f"tiny-x{x}.ipynb").read_text())
        assert nb["metadata"]["papermill"]["parameters"] == {"x": x, "out_dir": str((out / f"x{x}").resolve())}


@pytest.mark.slow
def test_failed_run_keeps_the_executed_notebook_and_no_temporary_input(tmp_path, tiny):
    out = tmp_path / "runs"
    from metacl_lite.errors import NotebookFailed
    with pytest.raises(NotebookFailed, match="failed on purpose") as e:  # one line naming the executed notebook
        run_cli(tiny, [("fail", "True")], [], out)
    assert str(e.value).endswith(f"is {out / 'tiny-failTrue.ipynb'}") and not e.value.user
    assert sorted(p.name for p in out.iterdir()) == ["tiny-failTrue.ipynb"]
    assert "failed on purpose" in (out / "tiny-failTrue.ipynb").read_text()


PARAMETERISED = [p for p in sorted((ROOT / "book").glob("*/*.md")) if declared_parameters(p)]


def test_parameterised_pages_found():
    assert {"benchmark", "08_analysis", "pmnist-K50"} <= {p.stem for p in PARAMETERISED}


@pytest.mark.parametrize("path", PARAMETERISED, ids=lambda p: p.stem)
def test_papermill_sees_every_parameter(path):
    """papermill parses the parameters cell line by line, so a line it cannot parse hides that parameter (papermill
    then warns "Passed unknown parameter"); here every assignment of the cell, read by Python's own parser, must be
    a declared parameter with the same default (or the value the page injects over it)."""
    cell = next(c for c in jupytext.read(str(path)).cells if "parameters" in c.metadata.get("tags", []))
    assigned = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(cell.source).body
                if isinstance(n, ast.Assign) and not n.targets[0].id.startswith("_")}
    assert declared_parameters(path) == {**assigned, **injected_parameters(path)}


def _injected(path) -> dict:
    [cell] = [c for c in jupytext.read(str(path)).cells if "injected-parameters" in c.metadata.get("tags", [])]
    return {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(cell.source).body}


def test_reproduction_pages_are_their_template_with_papermills_parameters():
    """Every reproduction page is its template with the page's parameters injected by papermill (one cell, after the
    parameters cell), titled by PAGES, with no typed section number (the table of contents numbers pages), and
    `pages --check` finds nothing stale."""
    assert write_pages(check=True) == []
    for stem in ["benchmark", *PAGES]:
        path, title, params, template = page_params(stem)
        assert _injected(path) == params, stem
        assert params["shows"].startswith(f"results/{params['benchmark']}-K{params['K']}.json, "), stem
        cells = jupytext.read(str(path)).cells
        tags = [c.metadata.get("tags", []) for c in cells]
        assert "injected-parameters" in tags[tags.index(["parameters"]) + 1], stem  # shown: the page's parameters
        heads = [ln for c in cells if c.cell_type == "markdown" for ln in c.source.splitlines() if ln.startswith("# ")]
        assert heads == [f"# Reproduction: {title}"], stem
    assert page_params("benchmark")[2] == {"benchmark": "pmnist", "K": 20, "live": True,
                                           "shows": page_params("benchmark")[2]["shows"]}
    page = make_page(TEMPLATE, "X", {"K": 77, "live": False, "shows": "s", "tables": "both"})
    assert "# Reproduction: X\n" in page and 'K = 77\nlive = False\nshows = "s"\ntables = "both"\n' in page
    assert "K = 20  # training images per class" in page  # the parameters cell keeps the template's defaults


def test_a_new_results_file_makes_its_page_stale(monkeypatch):
    """The page's `shows` parameter carries the digest of its results file: when the file changes, `pages --check`
    lists the page (and only the pages that show that file)."""
    from metacl_lite.publish import pages

    real = pages._digest
    monkeypatch.setattr(pages, "_digest", lambda path: "sha256 0" if path.name == "pmnist-K5.json" else real(path))
    stale = write_pages(check=True)
    assert [p for p in stale if p.parent == pages.REPRODUCE and p.stem != "overview"] == [pages.REPRODUCE / "pmnist-K5.md"]
    assert set(stale) - {pages.REPRODUCE / "pmnist-K5.md"} == {p for p, names in pages.stamped_pages().items()
                                                               if "pmnist-K5.json" in names}  # they read it too


def _num(v):
    """A glued number, as text (the pages write a negative one with the minus sign) or as a number."""
    return float(v.replace("\u2212", "-")) if not isinstance(v, (int, float)) else v


def _first_epoch_accuracy_finetune(n_tasks: int, seeds: int) -> float:
    """Chapter 8's learning-speed number recomputed here: fine-tuning's accuracy on the current task after its first
    epoch, mean over the tasks of a K = 20 stream (permutation seed 0, as the chapter's live runs) and over run seeds
    0..seeds-1."""
    from metacl_lite.data.mnist import permuted_mnist
    from metacl_lite.lab.hparams import method_config
    from metacl_lite.training import run_stream

    cfg = method_config("pmnist", "finetune")
    cfg.eval_every_epoch = True
    first, bench = [], permuted_mnist(K=20, n_tasks=n_tasks, seed=0)
    for seed in range(seeds):
        r = run_stream(bench, "finetune", cfg, seed=seed, show_progress=False)
        first += [acc for k, (_, acc) in enumerate(r["epoch_acc"]) if k % cfg.epochs == 0]
    assert len(first) == n_tasks * seeds
    return sum(first) / len(first)


#: chapter -> check of its glued values, as the book build executed it; chapters that glue nothing must glue nothing.
CHAPTERS = {
    "01_problem": lambda g: g["n_train_task"] == 200 and g["n_test_task"] == 10000,
    "02_forgetting": lambda g: set(g) == {"fig_omega_share"},
    "03_dynamic_balance": lambda g: (_num(g["max_err_random"]) < 1e-6 and _num(g["max_err_real"]) < 1e-6
                                     and g["n_params"] == "269\u202f322"
                                     and (g["geo_angle"], g["widget_norm"], g["geo_beta"], g["geo_gamma"])
                                     == ("140°", "1.50", "0.60", "0.00")),
    "04_adaptation": lambda g: (abs(_num(g["slope1"]) - 1) < 0.1 and abs(_num(g["slope2"]) - 2) < 0.2
                                and _num(g["identity_err"]) < 1e-12),
    "05_algorithms": lambda g: g == {},
    "06_metrics": lambda g: (math.isclose(_num(g["ex_ACC"]), 72.67) and math.isclose(_num(g["ex_BT"]), -8.5)
                             and math.isclose(_num(g["ex_FA"]), 0.67) and g["ex_curve"] == "90.0, 82.5 and 72.7"
                             and (g["t_3seeds"], g["ci_3seeds"]) == ("4.30", "2.48")),
}


@pytest.mark.slow
@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_chapter_computes_what_its_text_says(chapter, book_build):
    """Read from the book build (each chapter executed once per session, there)."""
    g = book_build.glue(f"chapters/{chapter}")
    assert CHAPTERS[chapter](g), g


@pytest.mark.slow
def test_analysis_chapter_executes_with_small_runs(tmp_path):
    """Chapter 8 with its parameters: live runs of both streams, small. MetaCL-lambda keeps <g2, gx> <= 90 degrees
    by construction (Eqs. 5-6); the speed number is recomputed here."""
    small = {"speed_tasks": 2, "speed_seeds": 2, "angle_K": 20, "angle_tasks": 3, "angle_seeds": 2}
    out = run_notebook(ROOT / "book" / "chapters" / "08_analysis.md", small, tmp_path)
    g = glued_values(out)
    assert _num(g["angle_g2_lambda_max"]) <= 90.0 + 1e-6, g
    assert abs(_num(g["speed_ft_epoch1"]) - _first_epoch_accuracy_finetune(2, 2)) <= 0.1, g


@pytest.mark.slow
def test_reproduction_notebook_quick(tmp_path):
    methods = ["finetune", "metacl", "pi-metacl-lambda"]
    [out] = run_cli(BENCH, [("quick", "True"), ("seeds", "1"), ("methods", ",".join(methods))], [], tmp_path)
    assert out == tmp_path / "benchmark-methodsfinetune,metacl,pi-metacl-lambda-quickTrue-seeds1.ipynb"
    g = glued_values(out)
    res = json.loads((tmp_path / "pmnist-K20-live.json").read_text())  # out_dir is the run folder
    cfg = res["config"]
    assert (cfg["benchmark"], cfg["K"], cfg["n_tasks"], cfg["seeds"], cfg["methods"], cfg["train"]["epochs"]) == \
        ("pmnist", 20, 3, [0], methods, 1)
    assert g["live_n_methods"] == 3
    for m in methods + ["joint"]:  # the page shows what the run wrote
        assert g[f"live_acc_{m}"] == round(res["summary"][m]["ACC"]["mean"], 2)


@pytest.mark.slow
def test_reproduction_notebook_runs_a_setting_without_a_results_file(tmp_path):
    """benchmark.md carries the cells of a page beside the paper's numbers; run for a setting without a results file
    (no live run), its cells that need one skip, and it shows the setting's own record."""
    [out] = run_cli(BENCH, [("benchmark", "cifar100"), ("K", "50"), ("live", "False")], [], tmp_path)
    g = glued_values(out)
    assert (g["setting"], g["present"], g["kind"]) == ("Split CIFAR-100, K = 50", "not present", "paper")
    assert not any(k.startswith(("made_", "done_", "fig_")) for k in g) and "rho_text" not in g
    assert set(g) >= {"tab_ACC", "tab_BT", "tab_FA"}
