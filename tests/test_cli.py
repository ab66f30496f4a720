"""Runs from the command line: bad input gets a clear error; an interrupted run resumes without redoing work."""
import json
import subprocess
import sys

import pytest

from metacl_lite import experiments as E
from metacl_lite import training as T
from metacl_lite.cli import main

TINY = ["--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "2", "--no-progress"]


def _err(capsys, argv):
    rc = main(argv)
    return rc, capsys.readouterr().err


def test_bad_inputs(capsys, tmp_path):
    out = ["--out", str(tmp_path / "r.json")]
    rc, err = _err(capsys, ["run", "--benchmark", "pmnist", *TINY, "--methods", "finetune,sgd", *out])
    assert rc == 2 and "unknown method 'sgd'" in err and "ewc-metacl-lambda" in err
    rc, err = _err(capsys, ["run", "--benchmark", "pmnist", "--K", "600", "--data", "embedded", "--n-tasks", "2", *out])
    assert rc == 2 and "K=600" in err and "--data raw" in err
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

    monkeypatch.setattr(E, "run_stream", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    saved = json.loads(out.read_text())
    assert len(saved["runs"]) == 2 and set(saved["references"]) == {"0", "1"}  # seed 1: reference, oracle done
    before = {k: v["acc_matrix"] for k, v in saved["runs"].items()}

    calls.clear()
    monkeypatch.setattr(E, "run_stream", lambda *a, **k: (calls.append(a[1]), real(*a, **k))[1])
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
    assert res["config"]["method_hparams"]["mas-metacl-lambda"] == E.method_hparams("pmnist", "mas-metacl-lambda")
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
