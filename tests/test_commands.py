"""The command recorded in a results or tuning file is made from its configuration by one lab function
(`grid.run_command`, `tuning.tune_command`), and the CLI's parser is the other side of it: run again, the recorded
command makes a file with the same configuration. And a run resolves its benchmark's name once, handing the spec
down."""
from __future__ import annotations

import json
import shlex

import pytest

from metacl_lite.data import specs
from metacl_lite.cli import main
from metacl_lite.lab import grid as G

SMALL = ["--K", "5", "--n-tasks", "2", "--epochs", "1", "--no-progress", "--workers", "1"]



def _again(recorded: str, out_a, out_b) -> list[str]:
    argv = shlex.split(recorded)
    assert argv[:3] == ["python", "-m", "metacl_lite"]
    argv = [str(out_b) if a == str(out_a) else a for a in argv[3:]]
    return argv + ["--no-progress", "--workers", "1"]  # in this process, where the units are faked


@pytest.mark.parametrize("extra", [
    ["--seeds", "2", "--methods", "finetune,mas"],
    ["--seed-list", "3,4", "--methods", "pi,ewc-metacl-beta", "--pi-xi", "0.05", "--omega-accumulate", "latest"],
    ["--seeds", "1", "--methods", "mas-metacl-lambda,pi-metacl-lambda", "--gamma", "beta"],
    ["--seeds", "1", "--methods", "ewc-metacl-lambda", "--gamma", "0", "--omega-normalise", "max"],
    ["--seeds", "1", "--methods", "metacl", "--data", "embedded", "--compile", "auto", "--device", "cpu"],
])
def test_a_recorded_run_command_makes_the_same_configuration(hparams_file, fake_units, tmp_path, extra):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["run", "--benchmark", "pmnist", *SMALL, *extra, "--out", str(a)]) == 0
    doc_a = json.loads(a.read_text())
    again = _again(doc_a["provenance"]["command"], a, b)
    assert main(again) == 0
    doc_b = json.loads(b.read_text())
    assert doc_b["config"] == doc_a["config"]
    assert doc_b["provenance"]["command"] == " ".join(shlex.quote(x) for x in ["python", "-m", "metacl_lite",
                                                                                 *again[:-3]])


@pytest.mark.parametrize("extra", [
    ["--methods", "mas", "--seed-list", "7", "--beta-grid", "0.1,1"],
    ["--methods", "pi-metacl-lambda", "--seed-list", "7,8", "--gamma-grid", "0,1", "--pi-xi", "0.001"],
])
def test_a_recorded_tune_command_makes_the_same_protocol(hparams_file, fake_units, tmp_path, extra):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["tune", "--benchmark", "pmnist", *SMALL, *extra, "--no-write", "--out", str(a)]) == 0
    doc_a = json.loads(a.read_text())
    again = _again(doc_a["provenance"]["command"], a, b) + ["--no-write"]
    assert main(again) == 0
    doc_b = json.loads(b.read_text())
    assert doc_b["protocol"] == doc_a["protocol"] and doc_b["methods"] == doc_a["methods"]


def test_a_run_resolves_its_benchmark_name_once(hparams_file, fake_units, tmp_path, monkeypatch):
    """Every check, hparams lookup and unit of one grid gets the spec; only the entry point reads the name."""
    looked_up = []

    class Counting(dict):
        def __getitem__(self, name):
            looked_up.append(name)
            return super().__getitem__(name)

    monkeypatch.setattr(specs, "SPECS", Counting(specs.SPECS))
    G.run_experiment("pmnist", 5, seeds=[0, 1], methods=["finetune", "ewc", "pi-metacl-lambda"], n_tasks=2, epochs=1,
                     out=tmp_path / "r.json", show_progress=False)
    assert looked_up == ["pmnist"]
