"""Issue 43, misuse round six (the lab, the reports, publishing, the command lines and the tools): each test is one
defect a careless new user found, each fast (tiny synthetic files, faked units, nothing trained for real)."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metacl_lite.cli import main
from metacl_lite.errors import OutputError
from metacl_lite.lab import hparams as H
from metacl_lite.lab import tuning as TU
from metacl_lite.lab.atomic import check_writable
from metacl_lite.paths import REPO_ROOT
from metacl_lite.tools import main as tools_main

RESULTS = REPO_ROOT / "results"
TINY = ["--K", "5", "--n-tasks", "2", "--epochs", "1", "--no-progress", "--workers", "1"]


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


def _copy(name: str, folder: Path, edit=None) -> Path:
    """results/`name` copied into `folder` (as `folder`/results/`name` when `folder` stands in for the repository),
    after `edit(doc)`."""
    out = folder / name
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads((RESULTS / name).read_text())
    if edit:
        edit(doc)
    out.write_text(json.dumps(doc))
    return out


# 1. bench --suite X --out <the bench file of suite Y>
def test_a_bench_file_of_another_suite_is_refused_before_any_measurement(tmp_path, monkeypatch, capsys):
    out = tmp_path / "bench-cub.json"
    shutil.copy(RESULTS / "bench-cub.json", out)
    before = out.read_bytes()
    monkeypatch.setattr("metacl_lite.data.synthetic.synthetic_benchmark", lambda *a, **k: pytest.fail("measured"))
    assert tools_main(["bench", "--suite", "cifar100", "--epochs", "1", "--n-tasks", "1", "--out", str(out)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "holds the cub benchmark's figures, and this run times cifar100" in err and "--out" in err
    assert out.read_bytes() == before


# 2. the README's headline: from the matrices, every method of the file
def _readme_of(tmp_path, monkeypatch, edit) -> str:
    from metacl_lite.publish import readme as R

    _copy("pmnist-K20.json", tmp_path / "results", edit)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- BEGIN table results/pmnist-K20.json -->\n<!-- END table -->\n")
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path)
    R.update_readme(readme, expected=())
    return readme.read_text()


def test_the_readme_headline_is_made_from_the_matrices_not_the_stored_summary(tmp_path, monkeypatch):
    def edit(doc):
        doc["summary"]["finetune"]["ACC"]["mean"] = 99.0

    text = _readme_of(tmp_path, monkeypatch, edit)
    row = next(line for line in text.splitlines() if line.startswith("| Fine tune |"))
    assert "| 48.0 ± 1.4 |" in row and "99.0" not in text


def test_l2_units_added_to_a_results_file_show_in_the_readme_with_their_seeds(tmp_path, monkeypatch):
    def edit(doc):  # L2's units beside the others, the stored summary not updated
        doc["config"]["methods"].append("l2")
        doc["runs"].update({f"l2/{s}": doc["runs"][f"finetune/{s}"] for s in doc["config"]["seeds"]})

    text = _readme_of(tmp_path, monkeypatch, edit)
    row = next(line for line in text.splitlines() if line.startswith("| L2 (not in the paper) |"))
    assert row.startswith("| L2 (not in the paper) | 10 | 48.0 ± 1.4 |") and "incomplete" not in text


# 3. table on a gamma control file
@pytest.mark.parametrize("fmt", ["text", "md"])
def test_table_of_a_gamma_control_file_says_it_is_a_control(fmt, capsys):
    assert main(["table", str(RESULTS / "pmnist-K20-control-gamma-0.json"), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "γ CONTROL: the MetaCL-λ rows trained with γ = 0 (the pure projection), not their tuned γ" in out
    assert "results/pmnist-K20.json" in out
    assert main(["table", str(RESULTS / "pmnist-K20.json"), "--format", fmt]) == 0
    assert "CONTROL" not in capsys.readouterr().out


# 4. the tuning files hparams.json names
@pytest.fixture
def checked_hparams(hparams_file, monkeypatch):
    """A copy of the committed hparams.json that `run` checks as it checks the package's own (`sources_checked`)."""
    monkeypatch.setattr(H, "PACKAGED_FILE", H.HPARAMS_FILE)

    def edit(change):
        hp = json.loads(H.HPARAMS_FILE.read_text())
        change(hp["pmnist"])
        hparams_file(hp)
    return edit


@pytest.mark.parametrize("change, needle", [
    (lambda e: e["by_K"]["5"].update(source="results/tuning-pmnist-K5-gone.json"),
     "by_K.5.methods.mas comes from results/tuning-pmnist-K5-gone.json, which is missing"),
    (lambda e: e["by_K"]["5"].update(sources={"mas": {"source": "results/tuning-pmnist-K20-l2.json", "command": "c"}}),
     "names results/tuning-pmnist-K20-l2.json as its tuning, which chose no value for mas"),
])
def test_run_refuses_a_value_whose_tuning_file_is_missing_or_chose_another(change, needle, checked_hparams, fake_units,
                                                                           tmp_path, capsys):
    checked_hparams(change)
    assert main(["run", "--benchmark", "pmnist", *TINY, "--seeds", "1", "--methods", "mas", "--out",
                 str(tmp_path / "r.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert needle in err and "--methods mas" in err and fake_units == [] and not (tmp_path / "r.json").exists()


def test_run_refuses_a_gamma_chosen_at_another_memory_budget(checked_hparams, fake_units, tmp_path, capsys):
    """hparams.json keeps one gamma per method and K: the two-reference MetaCL-lambda's was chosen at M = 1
    (results/tuning-pmnist-K20-memory-M1.json, the default K 5 reads), so a run at M = 5 is refused before any
    compute, naming the budget it was chosen at and the tuning at this one; at M = 1 the same run goes on."""
    checked_hparams(lambda e: None)
    args = ["run", "--benchmark", "pmnist", *TINY, "--seeds", "1", "--methods", "mas-metacl-lambda-mem"]
    assert main([*args, "--memory", "5", "--out", str(tmp_path / "r5.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert ("mas-metacl-lambda-mem was chosen in results/tuning-pmnist-K20-memory-M1.json at --memory 1 (this run: 5)"
            in err and "run mas-metacl-lambda-mem with --memory 1" in err and "--methods mas-metacl-lambda-mem "
            "--memory 5`" in err), err
    assert fake_units == [] and not (tmp_path / "r5.json").exists()
    assert main([*args, "--memory", "1", "--out", str(tmp_path / "r1.json")]) == 0
    assert fake_units and json.loads((tmp_path / "r1.json").read_text())["config"]["method_hparams"] == {
        "mas-metacl-lambda-mem": H.load()["pmnist"]["methods"]["mas-metacl-lambda-mem"]}


@pytest.mark.parametrize("tool", ["pages", "readme"])
def test_pages_and_readme_check_the_tuning_files_hparams_names(tool, tmp_path, monkeypatch, capsys):
    shutil.copytree(RESULTS, tmp_path / "results")
    (tmp_path / "results" / "tuning-pmnist-K50.json").unlink()  # deleted
    monkeypatch.setattr("metacl_lite.paths.REPO_ROOT", tmp_path)
    monkeypatch.setattr("metacl_lite.publish.pages.write_pages", lambda check=False: pytest.fail("went on"))
    monkeypatch.setattr("metacl_lite.publish.readme.update_readme", lambda check=False: pytest.fail("went on"))
    assert tools_main([tool, "--check"]) == 2
    assert "by_K.50.methods.mas comes from results/tuning-pmnist-K50.json, which is missing" in \
        _one_line(capsys.readouterr().err)


def test_tune_write_hparams_refuses_a_tuning_file_outside_the_repository(hparams_file, fake_units, tmp_path, capsys):
    before = H.HPARAMS_FILE.read_bytes()
    out = tmp_path / "t.json"
    assert main(["tune", "--benchmark", "pmnist", *TINY[:-2], "--methods", "mas", "--beta-grid", "1", "--seed-list",
                 "7", "--write-hparams", "--workers", "1", "--out", str(out)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"it would name {out} as its values' source, outside" in err and "--no-write" in err
    assert fake_units == [] and not out.exists() and H.HPARAMS_FILE.read_bytes() == before


def test_tune_write_hparams_records_the_path_in_the_repository(hparams_file, peaked_units, tmp_path, monkeypatch):
    monkeypatch.setattr(TU, "REPO_ROOT", tmp_path)
    doc = TU.tune("pmnist", 5, n_tasks=2, epochs=1, seeds=[7], methods=["mas"], beta_grid=[1.0],
                  out=tmp_path / "results" / "t.json", write_hparams=True, show_progress=False)
    assert doc["hparams_written"]
    assert H.hparams_source("pmnist", ["mas"], 5) == {"mas": "K=5: results/t.json"}


# 5. a results file's config against its units and its name
@pytest.mark.parametrize("edit, needle", [
    (lambda c: c.update(n_tasks=10), "config.n_tasks is 10, but runs/finetune/0 holds 20 tasks"),
    (lambda c: c.update(K=50), "its name says pmnist K=20, its config pmnist K=50"),
])
def test_a_results_file_whose_config_disagrees_with_its_units_or_name_is_refused(edit, needle, tmp_path, capsys):
    path = _copy("pmnist-K20.json", tmp_path, lambda doc: edit(doc["config"]))
    assert main(["table", str(path)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"{path}: {needle}" in err


# 6. tune --around of an extension
def test_tune_around_of_an_extension_centres_it_on_its_own_value(hparams_file, fake_units, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["tune", "--benchmark", "pmnist", "--around", "20", "--K", "50", "--methods", "l2", "--n-tasks", "2",
                 "--epochs", "1", "--seed-list", "100", "--no-write", "--no-progress", "--workers", "1", "--out",
                 str(out)]) == 0, capsys.readouterr().err
    protocol = json.loads(out.read_text())["protocol"]
    assert protocol["window"]["centres"]["l2"] == H.tuned_at("pmnist", 20)["l2"]["beta"]
    assert set(protocol["method_grids"]) >= {"l2"} and {u.method for u, _ in fake_units} == {"l2"}


# 7. readme --check on a results file without config
def test_readme_check_on_a_results_file_without_config_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from metacl_lite.publish import readme as R

    _copy("pmnist-K20.json", tmp_path / "results", lambda doc: doc.pop("config"))
    shutil.copy(REPO_ROOT / "README.md", tmp_path / "README.md")
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path)
    assert tools_main(["readme", "--check"]) == 2
    assert "pmnist-K20.json is not a complete results file (no config)" in _one_line(capsys.readouterr().err)


# 8. pages --check with a results file deleted
def test_pages_check_with_a_results_file_deleted_is_one_line(tmp_path, monkeypatch, capsys):
    from metacl_lite.publish import pages

    shutil.copytree(RESULTS, tmp_path / "results")
    (tmp_path / "results" / "pmnist-K1.json").unlink()
    monkeypatch.setattr(pages, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(pages, "make_page", lambda *a, **k: "")  # the pages' text is not what is tested
    assert tools_main(["pages", "--check"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"{tmp_path / 'results' / 'pmnist-K1.json'} is missing" in err and "run --benchmark pmnist --K 1" in err


# 9. notebook -p seeds N: the cap of run --seeds
def test_the_notebook_command_caps_seeds_as_run_does_before_any_kernel(tmp_path, monkeypatch, capsys):
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    assert main(["notebook", str(REPO_ROOT / "book" / "reproduce" / "benchmark.md"), "-p", "seeds", "100000", "-o",
                 str(tmp_path)]) == 2
    assert "parameter seeds=100000 is invalid: at most 1000 seeds" in _one_line(capsys.readouterr().err)


# 10. run --benchmark cub --K 1000 without the data
def test_a_cub_K_beyond_its_classes_is_refused_before_the_download_is_asked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path))  # no CUB here
    assert main(["run", "--benchmark", "cub", "--K", "1000", "--seeds", "1", "--device", "cpu", "--random-init",
                 "--out", str(tmp_path / "r.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "choose K <= 29" in err and "fetch" not in err.lower()


# 11. Ctrl-C while python -m metacl_lite.tools loads: round five's driver (a Ctrl-C while `target` is imported)
from test_misuse_round5 import DRIVER  # noqa: E402


@pytest.mark.parametrize("target", ["metacl_lite.cli", "argparse"])
def test_ctrl_c_while_the_tools_load_prints_no_traceback(target, tmp_path):
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, str(tmp_path / "driver.py"), target, "metacl_lite.tools", "where"],
                       capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert r.returncode == 130 and r.stderr == "\ninterrupted\n", r.stderr


# 12. tune --write-hparams on a finished tuning
def test_write_hparams_on_a_finished_tuning_writes_its_values(hparams_file, peaked_units, tmp_path, monkeypatch,
                                                              capsys):
    monkeypatch.setattr(TU, "REPO_ROOT", tmp_path)
    argv = ["tune", "--benchmark", "pmnist", *TINY[:-2], "--methods", "mas", "--beta-grid", "1", "--seed-list", "7",
            "--out", str(tmp_path / "results" / "t.json"), "--no-progress", "--workers", "1"]
    assert main(argv) == 0 and "hparams.json not changed" in capsys.readouterr().out  # not the default protocol
    trained = len(peaked_units)
    assert trained > 0
    assert main(argv + ["--write-hparams"]) == 0 and len(peaked_units) == trained  # nothing trained again
    assert "hparams.json updated" in capsys.readouterr().out
    chosen = json.loads((tmp_path / "results" / "t.json").read_text())["chosen"]["mas"]
    assert H.load()["pmnist"]["by_K"]["5"]["methods"]["mas"] == chosen


# 13. check_writable's suggestion follows the file's own name
def test_an_out_that_is_a_folder_is_told_a_file_of_its_own_kind(tmp_path):
    sheet = tmp_path / "grades.csv"
    sheet.mkdir()
    with pytest.raises(OutputError) as e:
        check_writable(sheet, "give another --out")  # as `assignments grade` calls it
    assert f"give a file name such as {sheet / 'grades.csv'}, or give another --out" in str(e.value)
    assert "results.json" not in str(e.value)


# 14. PYTHONIOENCODING=ascii: the table's columns stay aligned
def test_a_table_on_an_ascii_stream_keeps_its_columns_aligned(monkeypatch):
    buf = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buf, encoding="ascii"))
    assert main(["table", str(RESULTS / "pmnist-K20.json")]) == 0
    sys.stdout.flush()
    lines = buf.getvalue().decode("ascii").splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Method"))
    rows = lines[head + 2:]
    assert any("MetaCL-beta" in r for r in rows) and any("+/-" in r for r in rows)
    for column in ("Seeds", "ACC ours", "BT ours", "FA paper"):
        at = lines[head].index(column)
        assert all(r[at - 2:at] == "  " and r[at] != " " for r in rows), (column, rows)


# 15. the hint for missing values names only the methods missing
def test_the_hint_for_missing_l2_values_tunes_only_l2(hparams_file, fake_units, tmp_path, capsys):
    hp = json.loads(H.HPARAMS_FILE.read_text())
    for m in ("l2", "l2-metacl-beta", "l2-metacl-lambda"):
        hp["pmnist"]["methods"].pop(m)
    hp["pmnist"].pop("sources")
    hparams_file(hp)
    assert main(["run", "--benchmark", "pmnist", *TINY, "--seeds", "1", "--methods", "mas,l2", "--out",
                 str(tmp_path / "r.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "no tuned beta/gamma for l2 " in err
    assert err.rstrip().endswith("`python -m metacl_lite tune --benchmark pmnist --K 5 --methods l2`")


# 16. "restore the file from git" only for a file git tracks
def test_restore_from_git_is_advised_only_for_a_file_git_tracks(tmp_path, capsys):
    def corrupt(doc):
        doc["runs"]["finetune/0"] = None

    path = _copy("pmnist-K1.json", tmp_path, corrupt)
    assert main(["table", str(path)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "unit runs/finetune/0 is corrupt" in err and "from git" not in err and "your own copy" in err
    from metacl_lite.errors import restore_advice

    assert restore_advice(RESULTS / "pmnist-K1.json") == \
        "restore it from git (`git checkout -- results/pmnist-K1.json`)"


def test_the_tuning_files_are_not_required_where_there_is_no_results_folder(tmp_path, monkeypatch):
    """The grading jail's copy of the package has a pyproject.toml beside it but no results/: an a4 submission's run
    was refused ('tuning file ... missing') and the solution scored 3/4. Only a checkout with results/ is checked."""
    from metacl_lite import paths
    from metacl_lite.lab import hparams

    assert hparams.sources_checked() == (paths.REPO_ROOT / "results").is_dir()
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    assert not hparams.sources_checked()
    (tmp_path / "results").mkdir()
    assert hparams.sources_checked() == paths.IN_CHECKOUT
