"""Promises that hold under misuse (issue 21): a notebook run never discards an earlier one's units, a corrupt unit is
refused when its file is opened (before any training), values JSON cannot hold are refused up front, bad paths and
files give one line and exit 2, `table` shows only what the matrices say and says when the stream is not the paper's,
notebook kernels import the checkout that launched them, and the protocol's wiring (validation split for tuning,
each reference on its own task, each alternative's options) is checked by spies on what each unit is given."""
import json
import re
import shutil
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jupytext
import numpy as np
import pytest

import metacl_lite
from metacl_lite.cli import build_parser, main
from metacl_lite.errors import CorruptUnit, FileFormatError, OutputError
from metacl_lite.lab import atomic, grid, store
from metacl_lite.lab.grid import run_experiment
from metacl_lite.lab.tuning import tune
from metacl_lite.publish.notebooks import declared_parameters, validate, ParameterError
from metacl_lite.publish.pages import BENCHMARK_PAGE, PAGES, REPRODUCE, TEMPLATES
from metacl_lite.progress import progress_enabled
from metacl_lite.training import TrainConfig
from metacl_lite.vocab import OMEGA_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "book" / "reproduce" / "benchmark.md"
FETCH = ROOT / "data_scripts" / "fetch.py"


# ----------------------------------------------------------------------------------------------------------------
# Spies: what each unit of a grid is given (no training: every unit returns at once)
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture
def spy(monkeypatch):
    """Replace the training functions the grid calls by spies that record their arguments: `benchmarks` (the split
    of each benchmark built), `streams` (method, seed, TrainConfig), `references` (task index, seed) and `joint`
    (seed). A reference of task i and seed s scores 10 i + s, so a wrong task shows in the file too."""
    rec = SimpleNamespace(benchmarks=[], streams=[], references=[], joint=[])
    monkeypatch.setattr(grid, "_BENCH_CACHE", {})

    def make_benchmark(name, K, seed=0, n_tasks=None, source="auto", split="test"):
        rec.benchmarks.append({"benchmark": name, "K": K, "seed": seed, "n_tasks": n_tasks, "split": split})
        return SimpleNamespace(n_tasks=n_tasks, info={"split": split})

    def run_stream(bench, method, cfg, seed, show_progress=None, evaluate_rows="all"):
        rec.streams.append({"method": method, "seed": seed, "cfg": cfg, "evaluate_rows": evaluate_rows})
        n = bench.n_tasks
        return {"acc_matrix": [[50.0 + i + j if j <= i else None for j in range(n)] for i in range(n)],
                "wall_s": 0.0}

    def train_reference(bench, task, cfg, seed):
        rec.references.append((task, seed))
        return 10.0 * task + seed

    def train_joint(bench, cfg, seed):
        rec.joint.append(seed)
        return [60.0] * bench.n_tasks

    for name, f in (("make_benchmark", make_benchmark), ("run_stream", run_stream),
                    ("train_reference", train_reference), ("train_joint", train_joint)):
        monkeypatch.setattr(grid, name, f)
    return rec


# ----------------------------------------------------------------------------------------------------------------
# A small results file written by hand (2 tasks of 1 epoch, 2 seeds, fine-tune)
# ----------------------------------------------------------------------------------------------------------------
def results_doc(n_tasks=2, epochs=1):
    runs = {f"finetune/{s}": {"acc_matrix": [[80.0 + s, None], [60.0 + s, 70.0 + s]], "wall_s": 1.0} for s in (0, 1)}
    doc = {"schema": store.SCHEMA, "kind": "results",
           "config": {"benchmark": "pmnist", "K": 5, "n_tasks": n_tasks, "seeds": [0, 1], "methods": ["finetune"],
                      "train": {**TrainConfig().to_dict(), "epochs": epochs}, "data_source": "auto", "model": {},
                      "accelerator": None, "threads": 1},
           "runs": runs, "references": {str(s): {"acc": [75.0, 72.0], "wall_s": 1.0} for s in (0, 1)},
           "oracle": {str(s): {"acc": [70.0, 70.0], "wall_s": 1.0} for s in (0, 1)}}
    from metacl_lite.lab.summary import summarize

    doc["summary"] = atomic.jsonable(summarize(doc))
    return doc


def write(path, doc):
    path.write_text(json.dumps(doc))  # json.dumps writes NaN as NaN, as an editor might
    return path


CORRUPTIONS = {
    "nan": (lambda d: d["runs"]["finetune/0"]["acc_matrix"][1].__setitem__(0, float("nan")),
            "runs/finetune/0", "acc_matrix[1][0] is nan"),
    "string": (lambda d: d["runs"]["finetune/1"]["acc_matrix"][0].__setitem__(0, "x"),
               "runs/finetune/1", "acc_matrix[0][0] is 'x'"),
    "no acc_matrix": (lambda d: d["runs"]["finetune/0"].pop("acc_matrix"), "runs/finetune/0", "acc_matrix is missing"),
    "short row": (lambda d: d["runs"]["finetune/0"]["acc_matrix"][1].pop(), "runs/finetune/0", "acc_matrix[1]"),
    "reference": (lambda d: d["references"]["1"].__setitem__("acc", [75.0, None]), "references/1", "acc[1] is None"),
    "oracle": (lambda d: d["oracle"]["0"].pop("acc"), "oracle/0", "acc is missing"),
    "over 100 %": (lambda d: d["runs"]["finetune/0"]["acc_matrix"][1].__setitem__(1, 150.0), "runs/finetune/0",
                   "acc_matrix[1][1] is 150.0, not an accuracy in percent (0 to 100)"),
    "negative": (lambda d: d["oracle"]["0"]["acc"].__setitem__(0, -5.0), "oracle/0",
                 "acc[0] is -5.0, not an accuracy in percent (0 to 100)"),
    "tasks of another stream": (lambda d: d["references"]["0"]["acc"].append(70.0), "runs/finetune/0",
                                "its 2 tasks are not the 3 of references/0"),
}


# ----------------------------------------------------------------------------------------------------------------
# 1. The notebook's live run continues its file, never discards it
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("page", [BENCHMARK_PAGE] + [REPRODUCE / f"{stem}.md" for stem in PAGES]
                         + sorted(TEMPLATES.glob("*.md")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_notebook_cell_starts_its_file_over(page):
    """No hidden `force`: a page's live run continues the results file in out_dir (force=True discarded the units
    of the previous run without a record)."""
    import inspect

    from metacl_lite.publish import page_reproduction

    code = "\n".join(c.source for c in jupytext.read(str(page)).cells if c.cell_type == "code")
    assert "records.live_run(" in code and "force" not in code  # the page's live run is page_reproduction's
    live = inspect.getsource(page_reproduction.live_run)
    assert "run_experiment(" in live and "force" not in live


@pytest.mark.slow
def test_second_notebook_run_keeps_the_first_runs_units(tmp_path):
    """The scenario of issue 21: finetune then metacl into the same folder; both units stay. A third run with
    another stream is refused on the page (the file stays as it was)."""
    from metacl_lite.publish.notebooks import run_cli

    for m in ("finetune", "metacl"):
        run_cli(BENCH, [("K", "5"), ("methods", m), ("quick", "True")], [], tmp_path)
    path = tmp_path / "pmnist-K5-live.json"
    res = json.loads(path.read_text())
    assert {"finetune/0", "metacl/0"} <= set(res["runs"])
    assert res["config"]["methods"] == ["finetune", "metacl"]
    assert "discarded" not in res["provenance"]
    before = path.read_bytes()
    [out] = run_cli(BENCH, [("K", "5"), ("methods", "finetune"), ("n_tasks", "2"), ("epochs", "1")], [], tmp_path)
    assert path.read_bytes() == before
    assert "was made with a different configuration (n_tasks: 3 in the file, 2 here)" in out.read_text()


# ----------------------------------------------------------------------------------------------------------------
# 2. A corrupt unit is refused when the file is opened, naming it, before any training
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_a_corrupt_unit_is_named_when_the_file_is_read(tmp_path, name):
    corrupt, unit, problem = CORRUPTIONS[name]
    doc = results_doc()
    corrupt(doc)
    path = write(tmp_path / "r.json", doc)
    with pytest.raises(CorruptUnit) as e:
        store.load(path, "results")
    msg = str(e.value)
    assert f"unit {unit} is corrupt" in msg and problem in msg and "\n" not in msg
    section, key = unit.split("/", 1)
    assert f"delete the entry {key!r} from {section!r}" in msg


def test_a_corrupt_tuning_unit_is_named(tmp_path):
    doc = {"schema": 2, "kind": "tuning", "grid": {}, "chosen": {},
           "units": {"ewc/beta=1.0/100": {"method": "ewc", "param": "beta", "value": 1.0, "seed": 100,
                                          "val_acc": float("nan")}}}
    with pytest.raises(CorruptUnit, match=r"unit units/ewc/beta=1.0/100 is corrupt \(val_acc is nan"):
        store.load(write(tmp_path / "t.json", doc), "tuning")


def test_every_committed_file_passes_the_checks():
    for path in sorted((ROOT / "results").glob("**/*.json")):
        kind = store.kind_of(json.loads(path.read_text()))
        if kind in ("results", "tuning"):
            store.load(path, kind)
        if kind == "results":
            store.load_results(path)


def test_a_run_on_a_file_with_a_corrupt_unit_stops_before_training(tmp_path, spy, capsys):
    doc = results_doc()
    CORRUPTIONS["string"][0](doc)
    path = write(tmp_path / "r.json", doc)
    before = path.read_bytes()
    argv = ["run", "--benchmark", "pmnist", "--K", "5", "--seeds", "2", "--methods", "finetune,metacl",
            "--n-tasks", "2", "--epochs", "1", "--workers", "1", "--out", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unit runs/finetune/1 is corrupt" in err and "--redo finetune" in err
    assert spy.streams == [] and spy.references == [] and path.read_bytes() == before
    # --redo discards the method's runs, the corrupt one with them, and trains them again; the rest is kept
    assert main(argv + ["--redo", "finetune"]) == 0
    res = store.load_results(path)
    assert set(res["runs"]) == {"finetune/0", "finetune/1", "metacl/0", "metacl/1"}
    assert res["provenance"]["discarded"][0]["units"] == ["runs/finetune/0", "runs/finetune/1"]
    assert res["references"] == doc["references"]


def test_the_kept_part_of_a_discard_must_be_usable(tmp_path, spy):
    doc = results_doc()
    CORRUPTIONS["reference"][0](doc)
    path = write(tmp_path / "r.json", doc)
    with pytest.raises(CorruptUnit, match="references/1"):
        run_experiment("pmnist", 5, seeds=[0, 1], methods=["finetune"], out=path, n_tasks=2, epochs=1,
                       redo=["finetune"])
    assert json.loads(path.read_text()) == doc  # nothing discarded


# ----------------------------------------------------------------------------------------------------------------
# 3. --pi-xi must be a value a results file can hold
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", ["run", "tune"])
@pytest.mark.parametrize("value", ["inf", "1e400", "-inf", "nan", "0", "-1", "0.5,1", "x"])
def test_pi_xi_must_be_finite_and_positive(cmd, value, capsys):
    argv = [cmd, "--benchmark", "pmnist", "--K", "5", f"--pi-xi={value}"]
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2 and "--pi-xi must be a finite number > 0" in capsys.readouterr().err


def test_pi_xi_accepts_finite_positive_values():
    assert build_parser().parse_args(["run", "--benchmark", "pmnist", "--K", "5", "--pi-xi", "1e-3"]).pi_xi == 0.001


# ----------------------------------------------------------------------------------------------------------------
# 4. fetch.py: an empty --dest, a file as --dest or as METACL_LITE_DATA: one line, exit 2
# ----------------------------------------------------------------------------------------------------------------
def _fetch_main():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fetch_script", FETCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


@pytest.mark.parametrize("case", ["empty dest", "dest is a file", "dest inside a file", "data root is a file",
                                  "data root is a file (cifar100)", "empty from"])
def test_fetch_refuses_bad_folders_in_one_line(tmp_path, monkeypatch, capsys, case):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "afile").write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    args, env, needle = {
        "empty dest": (["mnist", "--dest", "", "--from", str(empty)], {}, "--dest '' names no path"),
        "dest is a file": (["mnist", "--dest", str(tmp_path / "afile"), "--from", str(empty)], {}, "is a file"),
        "dest inside a file": (["mnist", "--dest", str(tmp_path / "afile" / "d"), "--from", str(empty)], {},
                               "is inside"),
        "data root is a file": (["mnist", "--from", str(empty)], {"METACL_LITE_DATA": str(tmp_path / "afile")},
                                "METACL_LITE_DATA"),
        "data root is a file (cifar100)": (["cifar100", "--from", str(empty)],
                                           {"METACL_LITE_DATA": str(tmp_path / "afile")}, "METACL_LITE_DATA"),
        "empty from": (["mnist", "--from", ""], {}, "--from '' names no path"),
    }[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(work)
    assert _fetch_main()(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err, err
    assert list(work.iterdir()) == [] and (tmp_path / "afile").read_text() == "x"


def test_fetch_into_a_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """A read-only target (simulated: the tests may run as root, whom permissions do not stop)."""
    import pathlib

    real = pathlib.Path.mkdir

    def mkdir(self, *a, **k):
        if "readonly" in str(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)

    from metacl_lite.data.mnist import mnist_raw_dir

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    assert _fetch_main()(["mnist", "--dest", str(tmp_path / "readonly" / "mnist"), "--from",
                          str(mnist_raw_dir())]) == 2  # the real files (`make mnist-raw`): checked, then copied
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'readonly'}") and "Permission denied; give a folder you can write" \
        in err and err.count("\n") == 1, err


def test_fetch_script_exits_2_in_one_line(tmp_path):
    """The script as run from a shell (its own import of this checkout)."""
    r = subprocess.run([sys.executable, str(FETCH), "mnist", "--dest", ""], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert (r.returncode, r.stderr) == (2, "error: --dest '' names no path; give a folder (or leave --dest out)\n")
    assert list(tmp_path.iterdir()) == []


def test_data_root_refuses_a_file(tmp_path, monkeypatch):
    from metacl_lite.data.datafiles import DataError, data_root

    (tmp_path / "f").write_text("")
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "f"))
    with pytest.raises(DataError, match="METACL_LITE_DATA: .* is a file, not a folder"):
        data_root()
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "new" / "folder"))
    assert data_root() == tmp_path / "new" / "folder"  # a folder still to be made is fine


# ----------------------------------------------------------------------------------------------------------------
# 5, 6. table: what the matrices say, files it cannot read, a stream that is not the paper's
# ----------------------------------------------------------------------------------------------------------------
def _table(path, capsys, *extra):
    rc = main(["table", str(path), *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_table_recomputes_an_edited_summary(tmp_path, capsys):
    doc = results_doc()
    true = doc["summary"]["finetune"]["ACC"]["mean"]
    doc["summary"]["finetune"]["ACC"]["mean"] = 99.9
    rc, out, _ = _table(write(tmp_path / "r.json", doc), capsys)
    assert rc == 0 and "99.9" not in out and f"{true:.1f}" in out


def test_table_counts_the_units_that_are_there(tmp_path, capsys):
    doc = results_doc()
    del doc["runs"]["finetune/1"]  # the stored summary still says two seeds
    rc, out, _ = _table(write(tmp_path / "r.json", doc), capsys)
    assert rc == 0 and "1 of 2 (incomplete)" in out and "INCOMPLETE" in out
    assert f"{doc['summary']['finetune']['ACC']['values'][0]:.1f}" in out


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["runs"]["finetune/0"]["acc_matrix"][1].__setitem__(1, float("nan")), "unit runs/finetune/0 is corrupt"),
    (lambda d: d.__setitem__("schema", 99), "has schema 99; this version of metacl-lite reads schema 2 (older ones once migrated by metacl-lite at commit 82768e1)"),
    (lambda d: d.__setitem__("schema", "2"), "has schema '2'"),
    (lambda d: d.pop("config"), "is not a complete results file (no config)"),
    (lambda d: d["config"].pop("seeds"), "is not a complete results file (no seeds)"),
    (lambda d: d.pop("oracle"), "is not a complete results file (no oracle)"),
])
def test_table_refuses_what_it_cannot_show_truly(tmp_path, capsys, edit, needle):
    doc = results_doc()
    edit(doc)
    rc, out, err = _table(write(tmp_path / "r.json", doc), capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and needle in err, err


def test_a_file_of_another_named_kind_is_not_a_results_file(tmp_path):
    doc = {**results_doc(), "kind": "lambda-story"}  # results-like fields, but it says what it is
    with pytest.raises(FileFormatError, match="is a 'lambda-story' file, not a results file"):
        store.load(write(tmp_path / "s.json", doc), "results")


@pytest.mark.parametrize("fmt", ["text", "md"])
def test_table_says_when_the_stream_is_not_the_papers(tmp_path, capsys, fmt):
    rc, out, _ = _table(write(tmp_path / "r.json", results_doc(n_tasks=2, epochs=1)), capsys, "--format", fmt)
    assert rc == 0
    assert "NOT THE PAPER'S PROTOCOL: 2 tasks, 1 epoch(s) per task (the paper: 20 tasks, 5 epochs per task)" in out
    doc = results_doc()
    doc["config"]["train"]["epochs"] = 5  # only the tasks differ: still said, with both numbers
    rc, out, _ = _table(write(tmp_path / "r5.json", doc), capsys, "--format", fmt)
    assert "NOT THE PAPER'S PROTOCOL: 2 tasks, 5 epoch(s) per task" in out


def test_table_of_the_papers_stream_has_no_protocol_note(capsys):
    rc, out, _ = _table(ROOT / "results" / "pmnist-K20.json", capsys)
    assert rc == 0 and "NOT THE PAPER'S PROTOCOL" not in out


# ----------------------------------------------------------------------------------------------------------------
# 7. METACL_LITE_PROGRESS: the usual false spellings, any case
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, on", [("0", False), ("false", False), ("False", False), ("FALSE", False),
                                       ("no", False), ("No", False), ("off", False), ("OFF", False), ("", False),
                                       (" off ", False), ("1", True), ("true", True), ("yes", True), ("on", True)])
def test_progress_environment_variable(monkeypatch, value, on):
    monkeypatch.setenv("METACL_LITE_PROGRESS", value)
    monkeypatch.delenv("CI", raising=False)
    assert progress_enabled() is on
    assert progress_enabled(True) is True and progress_enabled(False) is False  # the flag wins


# ----------------------------------------------------------------------------------------------------------------
# 8. assignments check/grade on files that are not notebooks
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", ["check", "grade"])
@pytest.mark.parametrize("content", ["{}", "not json at all", "[1, 2]", '{"cells": 3}'])
def test_assignments_refuse_files_that_are_not_notebooks(tmp_path, capsys, cmd, content):
    nb = tmp_path / "my.ipynb"
    nb.write_text(content)
    assert main(["assignments", cmd, str(nb)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {nb} is not a Jupyter notebook") and err.count("\n") == 1, err


# ----------------------------------------------------------------------------------------------------------------
# 9. An output path where nothing can be created: one line, exit 2, before any compute
# ----------------------------------------------------------------------------------------------------------------
needs_proc = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")


@needs_proc
def test_check_writable_tries_the_folder():
    """Under root, os.access says /proc is writable; creating a file there fails."""
    with pytest.raises(OutputError, match="cannot write /proc/x.json"):
        atomic.check_writable(Path("/proc/x.json"))


@needs_proc
@pytest.mark.parametrize("argv", [
    ["run", "--benchmark", "pmnist", "--K", "5", "--seeds", "1", "--methods", "finetune", "--n-tasks", "2",
     "--epochs", "1", "--workers", "1", "--out", "/proc/x.json"],
    ["tune", "--benchmark", "pmnist", "--K", "5", "--methods", "ewc", "--n-tasks", "2", "--epochs", "1",
     "--beta-grid", "1", "--seed-list", "100", "--workers", "1", "--no-write", "--out", "/proc/x.json"],
    ["notebook", str(BENCH), "-p", "live", "False", "-o", "/proc/xdir"],
], ids=["run", "tune", "notebook"])
def test_unwritable_out_fails_before_any_compute(argv, spy, hparams_file, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write /proc/x") and err.count("\n") == 1, err
    assert spy.streams == [] and spy.references == [] and spy.benchmarks == []


# ----------------------------------------------------------------------------------------------------------------
# 10. Notebook kernels import the checkout that launched them
# ----------------------------------------------------------------------------------------------------------------
def where_notebook(path: Path) -> Path:
    """A notebook that writes the file of the `metacl_lite` its kernel imports to out_dir/where.txt."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell('out_dir = ""', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import pathlib, metacl_lite\n"
                                          "pathlib.Path(out_dir, 'where.txt').write_text(metacl_lite.__file__)")]
    nbformat.write(nb, str(path))
    return path


def test_kernel_environment_puts_this_checkout_first(monkeypatch):
    from metacl_lite.publish.notebooks import kernel_imports_this_checkout

    here = str(Path(metacl_lite.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    with kernel_imports_this_checkout():
        assert os.environ["PYTHONPATH"].split(os.pathsep) == [here, "/elsewhere"]
    assert os.environ["PYTHONPATH"] == "/elsewhere"
    monkeypatch.delenv("PYTHONPATH")
    with kernel_imports_this_checkout():
        assert os.environ["PYTHONPATH"] == here
    assert "PYTHONPATH" not in os.environ


@pytest.mark.slow
def test_notebook_kernel_imports_the_launching_checkout(tmp_path, monkeypatch):
    """Another `metacl_lite` first on the import path (as an installed copy of another checkout would be): the
    kernel of a notebook run from this checkout still imports this checkout's package."""
    from metacl_lite.publish.notebooks import run_notebook

    other = tmp_path / "other"
    (other / "metacl_lite").mkdir(parents=True)
    (other / "metacl_lite" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(other))
    run_notebook(where_notebook(tmp_path / "where.ipynb"), {}, tmp_path / "out")
    assert Path((tmp_path / "out" / "where.txt").read_text()) == Path(metacl_lite.__file__)


# ----------------------------------------------------------------------------------------------------------------
# 11. The protocol's wiring, seen by spies
# ----------------------------------------------------------------------------------------------------------------
def _tune(tmp_path, methods, **kw):
    return tune("pmnist", 5, n_tasks=2, seeds=[100, 101], methods=methods, out=tmp_path / "t.json",
                write_hparams=False, beta_grid=[1.0, 3.0], gamma_grid=[0.0, 1.0], epochs=1, **kw)


def test_tuning_units_are_scored_on_the_validation_split(tmp_path, spy, hparams_file):
    doc = _tune(tmp_path, ["ewc", "ewc-metacl-lambda"])
    assert spy.streams and len(spy.benchmarks) >= 2
    assert {b["split"] for b in spy.benchmarks} == {"val"}
    assert {s["evaluate_rows"] for s in spy.streams} == {"last"}
    assert all(u["val_acc"] == 51.5 for u in doc["units"].values())  # the mean of the spy's last row
    # and the results grid on the test split
    run_experiment("pmnist", 5, seeds=[0], methods=["finetune"], out=tmp_path / "r.json", n_tasks=2, epochs=1)
    assert spy.benchmarks[-1]["split"] == "test"


def test_each_reference_is_trained_on_its_own_task(tmp_path, spy):
    res = run_experiment("pmnist", 5, seeds=[0, 3], methods=["finetune"], out=tmp_path / "r.json", n_tasks=4,
                         epochs=1)
    assert sorted(spy.references) == sorted((t, s) for s in (0, 3) for t in range(4))
    for s in (0, 3):
        assert res["references"][str(s)]["acc"] == [10.0 * t + s for t in range(4)]
    # FA uses them task by task: mean(a_ii - a*_i) with the spy's a_ii = 50 + 2 i
    fa = np.mean([50.0 + 2 * t - (10.0 * t + 0) for t in range(4)])
    assert math.isclose(res["summary"]["finetune"]["FA"]["values"][0], fa)


@pytest.mark.parametrize("alternative", ["latest", "max", "latest-minmax", "xi1e-3"])
def test_tuning_units_of_an_alternative_train_with_its_options(tmp_path, spy, hparams_file, alternative):
    """How `choices` tunes an alternative (`choices.execute`: its options, decided=False): every unit's TrainConfig holds
    the alternative's options; the other options are the defaults, not hparams.json's decided ones."""
    from metacl_lite.lab.choices import FAMILY, CANDIDATES as CHOICES

    v = CHOICES[alternative]
    hp = json.loads((ROOT / "metacl_lite" / "lab" / "hparams.json").read_text())
    hp["pmnist"]["options"] = {"ewc": {"omega_normalise": "minmax"}, "mas": {"pi_xi": 0.5}, "pi": {"pi_xi": 0.5}}
    hparams_file(hp)  # decided options that must not leak into an alternative's units
    r = v.regularisers[0]
    _tune(tmp_path, list(FAMILY[r]), options=v.options, decided=False)
    want = {**{k: getattr(TrainConfig(), k) for k in OMEGA_OPTIONS}, **v.options}
    assert {s["method"] for s in spy.streams} == set(FAMILY[r])
    for s in spy.streams:
        assert {k: getattr(s["cfg"], k) for k in want} == want, (s["method"], s["cfg"])


def test_tuning_units_train_with_the_decided_options_by_default(tmp_path, spy, hparams_file):
    hp = json.loads((ROOT / "metacl_lite" / "lab" / "hparams.json").read_text())
    hp["pmnist"]["options"] = {"ewc": {"omega_accumulate": "latest", "omega_normalise": "max"}, "mas": {}, "pi": {}}
    hparams_file(hp)
    _tune(tmp_path, ["ewc", "ewc-metacl-beta", "mas"])
    for s in spy.streams:
        cfg = s["cfg"]
        assert (cfg.omega_accumulate, cfg.omega_normalise) == (("latest", "max") if s["method"].startswith("ewc")
                                                               else ("sum", "none")), s["method"]


# ----------------------------------------------------------------------------------------------------------------
# 12. The notebooks' device parameter
# ----------------------------------------------------------------------------------------------------------------
def test_device_parameter_is_declared_and_passed_on():
    for page in [BENCHMARK_PAGE] + [REPRODUCE / f"{stem}.md" for stem in PAGES] + sorted(TEMPLATES.glob("*.md")):
        assert declared_parameters(page)["device"] is None
        code = "\n".join(c.source for c in jupytext.read(str(page)).cells if c.cell_type == "code")
        assert '"device": None' in code and re.search(r"records\.live_(run|record)\([^)]*\bdevice\b", code)
    import inspect

    from metacl_lite.publish import page_reproduction

    assert "device=device" in inspect.getsource(page_reproduction.live_run)  # the page's live run passes it on


@pytest.mark.parametrize("value", ["auto", "cpu", "cuda", "cuda:0", "cuda:12", None])
def test_device_parameter_accepts_the_device_choices(value):
    validate({"device": value}, declared_parameters(BENCH))


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "", 0, True])
def test_device_parameter_refuses_anything_else(value):
    with pytest.raises(ParameterError, match=r"parameter device=.* is invalid: give auto, cpu, cuda or cuda:N"):
        validate({"device": value}, declared_parameters(BENCH))


def test_notebook_cli_refuses_a_bad_device_before_any_kernel(tmp_path, capsys):
    assert main(["notebook", str(BENCH), "-p", "device", "tpu", "-o", str(tmp_path / "o")]) == 2
    assert "parameter device='tpu' is invalid" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------------------------
# An installed package (no checkout): default outputs land in the folder the user works in, never in site-packages
# ---------------------------------------------------------------------------------------------------------------
def test_an_installed_package_writes_its_default_files_where_it_is_started(tmp_path):
    site, work = tmp_path / "site-packages", tmp_path / "work"
    work.mkdir()
    import shutil
    shutil.copytree(Path(metacl_lite.__file__).parent, site / "metacl_lite",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("from metacl_lite.lab import grid, tuning, bench, choices, provenance; from metacl_lite.data import datafiles;"
            "from metacl_lite.lab.tuning import default_protocol;"
            "print(grid.default_out('pmnist', 20)); print(grid.default_out('pmnist', 20, 'beta'));"
            "print(tuning.default_tuning_out(default_protocol('pmnist', 20)));"
            "print(choices.summary_file('pmnist')); print(choices.FOLDER);"
            "print(provenance.invocation()['git_commit']); print(datafiles.IN_CHECKOUT)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "METACL_LITE_DATA")}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    w = work.resolve()
    assert lines[:5] == [str(w / "results" / "pmnist-K20.json"), str(w / "results" / "pmnist-K20-control-gamma-beta.json"),
                         str(w / "results" / "tuning-pmnist-K20.json"), str(w / "results" / "open-choices-pmnist.json"),
                         str(w / "results" / "open-choices")]
    # the work folder's own git repository (if any) is not this code's: no commit is recorded for an installed package
    assert lines[5:7] == ["None", "False"]


def test_table_into_a_closed_pipe_ends_without_a_traceback():
    """`table ... | head -1`: the reader goes away before the table is written; no traceback, exit 141 (SIGPIPE)."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is written
    env = {**os.environ, "PYTHONPATH": str(Path(metacl_lite.__file__).parents[1])}
    p = subprocess.run([sys.executable, "-m", "metacl_lite", "table", "results/pmnist-K50.json"], stdout=w,
                       stderr=subprocess.PIPE, text=True, env=env, cwd=Path(metacl_lite.__file__).parents[1],
                       timeout=300)
    os.close(w)
    assert (p.returncode, p.stderr) == (141, "")


@pytest.mark.slow
@pytest.mark.parametrize("cell, rc, name", [("raise ValueError('bad value')", 1, "ValueError: bad value"),
                                             ("from metacl_lite.errors import UsageError\n"
                                              "raise UsageError('K=7: choose another K')", 2,
                                              "UsageError: K=7: choose another K")])
def test_a_failing_notebook_cell_is_one_line_naming_the_executed_notebook(tmp_path, capsys, cell, rc, name):
    """`notebook` with a cell that raises: one line (the cell, the error, where the executed notebook with its
    traceback is), no papermill traceback; exit 2 for this package's user errors, 1 otherwise."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}), nbformat.v4.new_code_cell(cell)]
    nbformat.write(nb, str(tmp_path / "fails.ipynb"))
    assert main(["notebook", str(tmp_path / "fails.ipynb"), "-o", str(tmp_path / "out")]) == rc
    err = capsys.readouterr().err
    executed = next((tmp_path / "out").glob("fails-*.ipynb"))
    assert err == f"error: {tmp_path / 'fails.ipynb'}: cell [2] raised {name}. The executed notebook, with the " \
                  f"traceback, is {executed}\n"


# ----------------------------------------------------------------------------------------------------------------
# The open choices: a rerun with nothing new keeps the file; an edited tuning file cannot steer a decision
# ----------------------------------------------------------------------------------------------------------------
def _choices_in(tmp_path, monkeypatch, copy_tuning=False):
    """The open-choices module writing its decision file to a copy of the committed one (and, with copy_tuning,
    reading copies of the alternatives' tuning files)."""
    from metacl_lite.lab import choices as CH

    shutil.copy(ROOT / "results" / "open-choices-pmnist.json", tmp_path / "open-choices-pmnist.json")
    monkeypatch.setattr(CH, "summary_file", lambda b: tmp_path / f"open-choices-{b}.json")
    if copy_tuning:
        shutil.copytree(ROOT / "results" / "open-choices", tmp_path / "open-choices")
        real = CH.alternative_file
        monkeypatch.setattr(CH, "alternative_file", lambda *a, **k: tmp_path / "open-choices" / real(*a, **k).name)
    return CH


def test_choices_with_nothing_new_keeps_the_file_and_its_provenance(tmp_path, monkeypatch):
    CH = _choices_in(tmp_path, monkeypatch)
    path = tmp_path / "open-choices-pmnist.json"
    before = path.read_bytes()
    doc = CH.write_summary("pmnist", json.loads(before)["provenance"]["command"])
    assert path.read_bytes() == before, "the decision file was rewritten though nothing was trained or decided"
    assert doc["provenance"] == json.loads(before)["provenance"]


def test_an_edited_chosen_value_does_not_reach_the_decision(tmp_path, monkeypatch):
    CH = _choices_in(tmp_path, monkeypatch, copy_tuning=True)

    def decided(table):
        return {r: {K: {v: {k: x for k, x in s.items() if k != "files"} for v, s in per_v.items()}
                    for K, per_v in per_k.items()} for r, per_k in table.items()}

    truth = decided(CH.scores("pmnist"))
    assert truth["pi"], "no decision to compare"
    f = tmp_path / "open-choices" / "tuning-pmnist-K20-base.json"
    doc = json.loads(f.read_text())
    method = sorted(doc["chosen"])[0]
    param = next(iter(doc["chosen"][method]))
    doc["chosen"][method][param] = 12345.0  # a hand edit
    doc["grid"][method]["mean_val_acc"] = [0.0] * len(doc["grid"][method]["mean_val_acc"])
    f.write_text(json.dumps(doc))
    assert decided(CH.scores("pmnist")) == truth


def test_the_provenance_names_the_threads_each_unit_ran_with(tmp_path, spy):
    """A CPU file's device says the torch threads of its units (the plan's), not those of the process that started
    them: `--threads 1` with torch at 2 threads in the parent."""
    import torch

    from metacl_lite.lab.executors import check_plan

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        res = run_experiment("pmnist", 5, seeds=[0], methods=["finetune"], out=tmp_path / "r.json", n_tasks=2,
                             epochs=1, plan=check_plan(workers=1, threads=1))
    finally:
        torch.set_num_threads(before)
    device = res["provenance"]["invocations"][-1]["device"]
    assert device.startswith("cpu: ") and device.endswith("torch threads 1)"), device


def test_more_local_cpu_workers_than_cores_are_refused_before_any_work(spy, capsys):
    from metacl_lite.lab.executors import default_workers

    cores = default_workers()
    argv = ["run", "--benchmark", "pmnist", "--K", "5", "--seeds", "1", "--methods", "finetune", "--n-tasks", "2",
            "--epochs", "1", "--workers", str(cores + 1)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --workers {cores + 1}: this machine has {cores} cores") and not spy.streams, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("benchmark, K, most", [("cifar100", 501, 500), ("cub", 30, 29), ("pmnist", 5422, 5421)])
def test_a_K_beyond_the_smallest_class_is_refused_before_the_notebook_runs(benchmark, K, most, tmp_path, capsys):
    defaults = declared_parameters(BENCH)
    validate({"benchmark": benchmark, "K": most}, defaults)  # the largest K there is: accepted
    with pytest.raises(ParameterError, match=rf"K.*at most {most} training images in its smallest class: give K <= "
                                             rf"{most}"):
        validate({"benchmark": benchmark, "K": K}, defaults)
    assert main(["notebook", str(BENCH), "-p", "benchmark", benchmark, "-p", "K", str(K), "-o", str(tmp_path)]) == 2
    assert f"give K <= {most}" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
