"""Runs from the command line: bad input gets a clear error; an interrupted run resumes without redoing work."""
import json
import subprocess
import sys

import pytest

from metacl_lite.lab import grid as G
from metacl_lite.paths import REPO_ROOT
from metacl_lite.lab import hparams as H
from metacl_lite import training as T
from metacl_lite.cli import main
from metacl_lite.tools import main as tools_main

TINY = ["--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "2", "--no-progress", "--workers", "1"]


def _err(capsys, argv):
    rc = (tools_main if argv[0] in ("bench", "where", "pages", "readme") else main)(argv)
    return rc, capsys.readouterr().err


def test_bad_inputs(capsys, tmp_path):
    out = ["--out", str(tmp_path / "r.json")]
    with pytest.raises(SystemExit) as e:
        main(["run", "--benchmark", "pmnist", *TINY, "--methods", "finetune,sgd", *out])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "unknown method 'sgd'" in err and "ewc-metacl-lambda" in err
    rc, err = _err(capsys, ["run", "--benchmark", "pmnist", "--K", "601", "--data", "embedded", "--n-tasks", "2", *out])
    assert rc == 2 and "K=601" in err and "--data raw" in err
    rc, err = _err(capsys, ["run", "--benchmark", "pmnist", "--K", "9000", "--n-tasks", "2", *out])
    assert rc == 2 and "K=9000" in err
    with pytest.raises(SystemExit):
        main(["run", "--benchmark", "pmnist", "--K", "0"])
    assert "K must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--benchmark", "mnist-rotated", "--K", "20"])
    assert "invalid choice" in capsys.readouterr().err
    rc, err = _err(capsys, ["table", str(tmp_path / "missing.json")])
    assert rc == 2 and "python -m metacl_lite run" in err
    assert not (tmp_path / "r.json").exists()


def test_a_results_file_that_is_not_there_is_told_before_torch_is_imported(tmp_path):
    """`table` with a mistyped path answers at once (importing torch takes seconds)."""
    code = ("import sys\nfrom metacl_lite.cli import main\nrc = main(['table', 'nosuch.json'])\n"
            "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.stdout.split() == ["2", "False"] and "nosuch.json not found" in r.stderr, (r.stdout, r.stderr)


def test_missing_raw_data_names_the_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "empty"))
    rc, err = _err(capsys, ["run", "--benchmark", "pmnist", "--K", "800", "--n-tasks", "2",
                            "--out", str(tmp_path / "r.json")])
    assert rc == 2 and "data_scripts/fetch.py mnist" in err


def test_run_resume_after_kill_and_table(capsys, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    argv = ["run", "--benchmark", "pmnist", *TINY, "--methods", "finetune,mas-metacl-lambda", "--out", str(out)]
    real = T.run_stream
    calls = []

    def killed_after_two(*a, **k):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the third method run is killed
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(G, "run_stream", killed_after_two)
    assert main(argv) == 130
    assert "every finished unit is saved in" in capsys.readouterr().err
    saved = json.loads(out.read_text())
    # seed 0 whole (its runs first, then its references and oracle); seed 1 killed at its first (longest) run
    assert set(saved["runs"]) == {"finetune/0", "mas-metacl-lambda/0"}
    assert set(saved["references"]) == set(saved["oracle"]) == {"0"}
    before = {k: v["acc_matrix"] for k, v in saved["runs"].items()}

    calls.clear()
    monkeypatch.setattr(G, "run_stream", lambda *a, **k: (calls.append(a[1]), real(*a, **k))[1])
    assert main(argv) == 0
    res = json.loads(out.read_text())
    assert len(calls) == 2  # only seed 1's two runs were left
    assert set(res["runs"]) == {"finetune/0", "mas-metacl-lambda/0", "finetune/1", "mas-metacl-lambda/1"}
    assert all(res["runs"][k]["acc_matrix"] == v for k, v in before.items())
    prov = res["provenance"]
    assert prov["command"].startswith("python -m metacl_lite run --benchmark pmnist --K 5")
    assert {"git_commit", "packages", "device", "wall_s_total", "python"} <= set(prov)
    assert res["summary"]["finetune"]["seeds"] == [0, 1]
    assert 0 <= res["summary"]["finetune"]["ACC"]["mean"] <= 100
    assert res["config"]["method_hparams"]["mas-metacl-lambda"] == H.method_hparams("pmnist", "mas-metacl-lambda", K=5)
    capsys.readouterr()
    assert main(["table", str(out)]) == 0
    table = capsys.readouterr().out
    assert "Fine tune" in table and "MAS-MetaCL-λ" in table

    # same file, different configuration: refused, nothing overwritten
    rc, err = _err(capsys, ["run", "--benchmark", "pmnist", "--K", "6", "--n-tasks", "2", "--epochs", "1",
                            "--seeds", "1", "--out", str(out), "--no-progress"])
    assert rc == 2 and "different configuration" in err
    assert json.loads(out.read_text())["runs"].keys() == res["runs"].keys()


def test_module_entry_point(tmp_path):
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "run", "--benchmark", "pmnist", "--K", "5",
                        "--methods", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown method" in r.stderr


def _no_work(monkeypatch):
    """Fail the test if any unit starts training."""
    def boom(*a, **k):
        raise AssertionError("training started before the input was checked")
    monkeypatch.setattr(G, "execute_unit", boom)


@pytest.mark.parametrize("extra,needle", [
    (["--seed-list", "0,-1"], "--seed-list: '-1' is not a non-negative integer"),
    (["--seed-list", "0,abc"], "--seed-list: 'abc' is not a non-negative integer"),
    (["--seed-list", "0,0"], "--seed-list: 0 given twice"),
    (["--methods", ""], "--methods takes a comma-separated list without empty items"),
    (["--methods", "ewc,ewc"], "--methods: ewc given twice"),
    (["--methods", "ewc,,pi"], "--methods takes a comma-separated list without empty items"),
    (["--seeds", "0"], "--seeds must be positive"),
])
def test_bad_lists_exit_2_before_any_work(capsys, tmp_path, monkeypatch, extra, needle):
    _no_work(monkeypatch)
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as e:
        main(["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert e.value.code == 2 and needle in err and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("extra,needle", [
    (["--n-tasks", "1"], "n_tasks=1: a stream needs at least 2 tasks"),
    (["--out", "{tmp}"], "is a directory; give a file name"),
    (["--out", "{tmp}/file/r.json"], "file is not a directory"),
])
def test_bad_values_exit_2_before_any_work(capsys, tmp_path, monkeypatch, extra, needle):
    _no_work(monkeypatch)
    (tmp_path / "file").write_text("")
    extra = [x.format(tmp=tmp_path) for x in extra]
    rc = main(["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--seeds", "1", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err


def test_table_names_files_of_the_wrong_kind(capsys, tmp_path):
    root = REPO_ROOT
    for path, needle in [(root / "results" / "tuning-pmnist-K20.json", "is a tuning file"),
                         (root / "results" / "bench-pmnist-K20.json", "is a speed benchmark file")]:
        rc, err = _err(capsys, ["table", str(path)])
        assert rc == 2 and err == f"error: {path} {needle}" + err.split(needle, 1)[1] and "not a results file" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    rc, err = _err(capsys, ["table", str(bad)])
    assert rc == 2 and f"{bad} is not valid JSON" in err


def test_bench_rejects_an_unknown_method(capsys):
    with pytest.raises(SystemExit) as e:
        tools_main(["bench", "--methods", "bogus"])
    assert e.value.code == 2 and "unknown method 'bogus'" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["--suite", "cub", "--skip-methods"], "--skip-methods applies to --suite pmnist only"),
    (["--suite", "cifar100", "--compile", "auto"], "--compile applies to --suite pmnist only"),
])
def test_bench_refuses_pmnist_options_on_the_synthetic_suites(capsys, monkeypatch, argv, needle):
    from metacl_lite.lab import bench

    monkeypatch.setattr(bench, "bench_multihead", lambda *a, **k: pytest.fail("ran"))
    rc, err = _err(capsys, ["bench", *argv])
    assert rc == 2 and needle in err


@pytest.mark.parametrize("argv,needle", [
    # the GPU bench times the whole grid of --suite at its paper K: a CPU-bench option given with it is refused, not
    # silently ignored (--K 50 would otherwise time K = 20 and say nothing)
    (["--suite", "cifar100", "--device", "cuda", "--K", "50"], "--K does not apply with --device cuda"),
    (["--device", "cuda", "--K", "20"], "--K does not apply with --device cuda"),  # given, even at the default value
    (["--device", "cuda:0", "--skip-methods"], "--skip-methods does not apply with --device cuda:0"),
    (["--device", "auto", "--grids", "20"], "--grids does not apply with --device auto"),
    # the multi-head CPU bench has no K or grids
    (["--suite", "cifar100", "--K", "50"], "--K does not apply to bench --suite cifar100 on the CPU"),
    (["--suite", "pmnist", "--epochs", "1"], "--epochs applies to --suite cifar100/cub only"),
    # the grids time every method: --methods with --skip-methods would be ignored
    (["--skip-methods", "--methods", "finetune"], "--methods picks the per-method runs, which --skip-methods skips"),
])
def test_bench_refuses_options_its_path_would_ignore(capsys, monkeypatch, argv, needle):
    from metacl_lite.lab import bench

    for name in ("bench_gpu", "bench_multihead", "bench_pmnist"):
        monkeypatch.setattr(bench, name, lambda *a, **k: pytest.fail("ran"))
    rc, err = _err(capsys, ["bench", *argv])
    assert rc == 2 and needle in err and "drop it" in err and len(err.strip().splitlines()) == 1


def test_bench_passes_the_gpu_options_it_does_use(monkeypatch):
    from metacl_lite.lab import bench

    got = {}
    monkeypatch.setattr(bench, "bench_gpu", lambda suite, device, **k: got.update(suite=suite, device=device, **k))
    assert tools_main(["bench", "--suite", "cub", "--device", "cuda", "--grid-seeds", "3", "--measured-seeds", "1",
                 "--methods", "finetune"]) == 0
    assert (got["suite"], got["device"], got["seeds"], got["measured_seeds"], got["methods"]) == \
        ("cub", "cuda", 3, 1, ["finetune"])


def test_bench_help_says_the_cpu_is_the_default_device(capsys):
    with pytest.raises(SystemExit):
        tools_main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--device DEVICE default: the CPU" in text and "auto for cifar100" not in text
    assert "refuses units" not in text


def test_bench_skip_grid_and_skip_methods_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as e:
        tools_main(["bench", "--skip-grid", "--skip-methods"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_bugs_keep_their_traceback(monkeypatch, tmp_path):
    """The CLI turns user errors into exit 2; a KeyError or RuntimeError from a bug is not disguised as one."""
    for exc in (KeyError("config"), RuntimeError("bug")):
        def broken(*a, **k):
            raise exc
        monkeypatch.setattr(G, "execute_unit", broken)
        with pytest.raises(type(exc)):
            main(["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--seeds", "1", "--methods",
                  "finetune", "--out", str(tmp_path / "r.json"), "--force", "--workers", "1"])


def test_missing_cifar_data_names_the_fetch_command_not_tune(capsys, tmp_path, monkeypatch, hparams_file):
    monkeypatch.setenv("METACL_LITE_DATA", str(tmp_path / "empty"))
    rc, err = _err(capsys, ["run", "--benchmark", "cifar100", "--K", "20", "--out", str(tmp_path / "r.json")])
    assert rc == 2 and "python data_scripts/fetch.py cifar100" in err and "tune" not in err


def test_redo_retrains_one_method_after_its_gamma_changed_and_records_it(capsys, tmp_path, monkeypatch,
                                                                        hparams_file):
    """After a method's gamma is tuned again the file refuses to continue (its recorded gamma differs); --redo
    discards that method's runs, trains them with the new value, keeps every other unit, and says so in the file. A
    --redo against a file whose other settings differ discards nothing."""
    out = tmp_path / "r.json"
    argv = ["run", "--benchmark", "pmnist", *TINY, "--methods", "finetune,mas-metacl-lambda", "--out", str(out)]
    assert main(argv) == 0
    first = json.loads(out.read_text())
    hp = json.loads(H.HPARAMS_FILE.read_text())
    old_gamma = H.method_hparams("pmnist", "mas-metacl-lambda", K=5)["gamma"]
    hp["pmnist"]["by_K"]["5"] = {"methods": {"mas-metacl-lambda": {"gamma": old_gamma * 10}}, "source": "s",
                                 "command": "c"}
    hparams_file(hp)
    rc, err = _err(capsys, argv)
    assert rc == 2 and "method_hparams[mas-metacl-lambda]" in err
    rc, err = _err(capsys, argv[:3] + ["--K", "6"] + argv[5:] + ["--redo", "mas-metacl-lambda"])
    assert rc == 2 and "different configuration" in err and json.loads(out.read_text()) == first
    rc, err = _err(capsys, argv + ["--redo", "finetune,pi"])
    assert rc == 2 and "--redo pi: not among the methods" in err

    calls = []
    real = G.run_stream
    monkeypatch.setattr(G, "run_stream", lambda *a, **k: (calls.append((a[1], a[2].gamma)), real(*a, **k))[1])
    assert main(argv + ["--redo", "mas-metacl-lambda"]) == 0
    res = json.loads(out.read_text())
    assert calls == [("mas-metacl-lambda", old_gamma * 10)] * 2
    assert res["config"]["method_hparams"]["mas-metacl-lambda"] == {"gamma": old_gamma * 10}
    assert res["config"]["methods"] == ["finetune", "mas-metacl-lambda"]
    assert {k: v for k, v in res["runs"].items() if k.startswith("finetune")} == \
        {k: v for k, v in first["runs"].items() if k.startswith("finetune")}
    assert res["references"] == first["references"] and res["oracle"] == first["oracle"]
    (d,) = res["provenance"]["discarded"]
    assert d["units"] == ["runs/mas-metacl-lambda/0", "runs/mas-metacl-lambda/1"] and "--redo" in d["why"]
    assert main(argv) == 0 and len(calls) == 2  # and the file continues normally


def test_a_partial_multihead_bench_keeps_the_committed_figures_and_writes_where_out_says(capsys, monkeypatch,
                                                                                      tmp_path):
    """bench --suite cub --methods finetune would replace results/bench-cub.json (eleven methods) with one method:
    refused before any measurement; with --out it writes there, and its command regenerates it."""
    import json

    from metacl_lite.lab import bench

    committed = bench.REPO_ROOT / "results" / "bench-cub.json"
    before = committed.read_bytes()
    rc, err = _err(capsys, ["bench", "--suite", "cub", "--methods", "finetune", "--epochs", "1", "--n-tasks", "1"])
    assert rc == 2 and "holds measurements this run would not make again" in err and "--out FILE" in err
    assert committed.read_bytes() == before
    import metacl_lite.training as training

    monkeypatch.setattr(training, "run_stream", lambda *a, **k: {"wall_s": 2.0})
    out = tmp_path / "b.json"
    assert tools_main(["bench", "--suite", "cub", "--methods", "finetune", "--epochs", "1", "--n-tasks", "1", "--out",
                 str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["method"] for r in doc["per_method"]] == ["finetune"] and committed.read_bytes() == before
    assert doc["provenance"]["command"] == ("python -m metacl_lite.tools bench --suite cub --epochs 1 --n-tasks 1 "
                                            f"--methods finetune --out {out}")


@pytest.mark.parametrize("cmd", ["where", "pages", "readme", "bench", "gpu-check", "browser-check"])
def test_the_maintainers_tools_are_reachable_from_their_own_entry_and_not_from_the_users_cli(cmd, capsys):
    r = subprocess.run([sys.executable, "-m", "metacl_lite.tools", cmd, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "usage:" in r.stdout, r.stderr
    with pytest.raises(SystemExit) as e:
        main([cmd])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_the_tools_exit_2_without_a_traceback_on_a_users_error(capsys, monkeypatch):
    from metacl_lite.tools import commands as C

    assert tools_main(["where", "--benchmark", "cub", "--device", "cpu", "--need-gpu", "make X"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: make X needs a CUDA GPU") and "Traceback" not in err
    monkeypatch.setattr(C, "REPO_ROOT", C.REPO_ROOT / "nowhere")  # an installed package: no data_scripts/
    assert tools_main(["gpu-check"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        tools_main(["bench", "--K", "0"])
    assert e.value.code == 2


def test_the_pages_tool_calls_the_page_writer_with_check(monkeypatch, capsys, tmp_path):
    from metacl_lite.publish import pages

    seen = []
    monkeypatch.setattr(pages, "write_pages", lambda check: seen.append(check) or [tmp_path / "p.md"])
    assert tools_main(["pages", "--check"]) == 1 and seen == [True]
    assert tools_main(["pages"]) == 0 and seen == [True, False]
