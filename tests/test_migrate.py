"""The one-time migration of results and tuning files of older formats (`lab.migrate`, `tools migrate`): numbers
unchanged, the migration recorded, a file migrated once; an older file is refused in one line naming the command."""
import json
import shutil
from pathlib import Path

import pytest

from metacl_lite.cli import main
from metacl_lite.errors import FileFormatError
from metacl_lite.lab import files as F
from metacl_lite.lab import migrate as M
from metacl_lite.lab import store
from metacl_lite.lab import tuning as TU

ROOT = Path(__file__).resolve().parents[1]
#: Every number a results or tuning file holds.
NUMBERS = ("runs", "references", "oracle", "units", "summary", "grid", "chosen", "at_edge", "data_info")


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_every_committed_file_migrates_with_its_numbers_unchanged(tmp_path):
    """A copy of results/ migrated: every file is then of today's format and holds the same numbers; migrating
    again changes nothing."""
    shutil.copytree(ROOT / "results", tmp_path / "results")
    files = M.committed_files(tmp_path / "results")
    assert len(files) >= 30 and any(f.parent.name == "open-choices" for f in files)
    before = {f: json.loads(f.read_text()) for f in files}
    M.migrate(files)
    for f in files:
        doc = json.loads(f.read_text())
        assert M.outdated(doc) is None, f
        assert {k: doc.get(k) for k in NUMBERS} == {k: before[f].get(k) for k in NUMBERS}, f
        if doc["kind"] == "results":
            store.load_results(f)
        else:
            F.load_tuning(f)
    again = {f: f.read_bytes() for f in files}
    assert all(v == [] for v in M.migrate(files).values())
    assert {f: f.read_bytes() for f in files} == again


def test_a_schema_1_results_file_gains_its_kind_invocation_and_defaults(tmp_path):
    prov = {"command": "python -m metacl_lite run --benchmark pmnist --K 20 --seeds 1", "git_commit": "7ec79b6e",
            "device": "cpu: X", "started": "2026-11-21T13:11:49+00:00", "wall_s_total": 12.5}
    doc = {"config": {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "seeds": [0], "methods": ["finetune"],
                      "train": {"epochs": 5}, "data_source": "auto"},
           "runs": {"finetune/0": {"acc_matrix": [[50.0, None], [40.0, 50.0]]}},
           "references": {"0": {"acc": [50.0, 50.0]}}, "oracle": {"0": {"acc": [60.0, 60.0]}}, "provenance": prov}
    path = _write(tmp_path / "old.json", doc)
    filled = M.migrate([path])[path]
    assert filled[:2] == ["kind", "provenance.invocations"] and "train.precision" in filled
    new = json.loads(path.read_text())
    assert new["kind"] == "results" and new["schema"] == store.SCHEMA and new["runs"] == doc["runs"]
    (inv,) = new["provenance"]["invocations"]
    assert inv["wall_s"] == 12.5 and inv["units"] == "all (schema 1)"
    assert new["config"]["model"] == {} and new["config"]["accelerator"] is None and new["config"]["threads"] == 1
    (m,) = new["provenance"]["migrations"]
    assert m["command"] == f"python -m metacl_lite.tools migrate {path}" and m["filled"] == filled


def test_a_schema_1_tuning_file_becomes_units_and_a_protocol(tmp_path):
    grid = {"ewc": {"param": "beta", "values": [0.1, 1.0], "val_acc": [[50.0, 51.0], [55.0, 56.0]]}}
    doc = {"benchmark": "pmnist", "K": 20, "n_tasks": 20, "epochs": 5, "seeds": [100, 101], "grid": grid,
           "chosen": {"ewc": {"beta": 1.0}}}
    path = _write(tmp_path / "t.json", doc)
    M.migrate([path])
    new = F.load_tuning(path)
    assert new["units"]["ewc/beta=1.0/101"]["val_acc"] == 56.0 and new["protocol"]["val_offset"] == 400
    assert new["protocol"]["options"] == {} and set(new["protocol"]["method_options"]) == set(TU.TUNABLE)
    assert F.grid_of(new)["ewc"]["mean_val_acc"] == [50.5, 55.5] and new["chosen"] == doc["chosen"]


def test_an_older_tuning_file_is_refused_in_one_line_naming_the_migration(tmp_path):
    doc = json.loads((ROOT / "results" / "tuning-pmnist-K20.json").read_text())
    del doc["protocol"]["method_options"]
    path = _write(tmp_path / "t.json", doc)
    with pytest.raises(FileFormatError) as e:
        F.load_tuning(path)
    msg = str(e.value)
    assert "its protocol has no method_options" in msg and f"`python -m metacl_lite.tools migrate {path}`" in msg
    assert "\n" not in msg
    M.migrate([path])
    assert F.load_tuning(path)["protocol"]["method_options"] == {m: {} for m in TU.TUNABLE}


def test_run_on_an_older_results_file_exits_2_naming_the_migration(capsys, tmp_path, hparams_file):
    doc = json.loads((ROOT / "results" / "pmnist-K20.json").read_text())
    doc["config"]["train"].pop("precision", None)
    doc["config"].pop("threads", None)
    path = _write(tmp_path / "r.json", doc)
    hparams_file({"pmnist": {"methods": {}}})
    rc = main(["run", "--benchmark", "pmnist", "--K", "20", "--methods", "finetune", "--seeds", "1",
               "--no-progress", "--out", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1
    assert "was written by an older metacl-lite (its config has no threads, train.precision)" in err
    assert f"python -m metacl_lite.tools migrate {path}" in err


def test_migrate_refuses_other_files_and_missing_ones(tmp_path):
    other = _write(tmp_path / "bench.json", {"kind": "bench", "per_method": {}})
    with pytest.raises(FileFormatError, match="bench.json is neither a results file nor a tuning file"):
        M.migrate([other])
    with pytest.raises(FileFormatError, match="nope.json not found"):
        M.migrate([tmp_path / "nope.json"])


def test_an_invocation_without_cpu_kernels_is_migrated_to_null_and_refused_before(tmp_path):
    """An invocation made before `cpu_kernels` was recorded: continuing its file is refused naming the migration
    (no reader takes a missing field for "not recorded"); the migration writes null (not recorded) and says so."""
    committed = [json.loads(p.read_text()) for p in M.committed_files(ROOT / "results")]
    assert all("cpu_kernels" in i for d in committed for i in d["provenance"]["invocations"])
    doc = json.loads((ROOT / "results" / "pmnist-K20.json").read_text())
    from metacl_lite.accel.device import CPU_KERNEL_KEYS
    doc["provenance"]["invocations"][0].pop("cpu_kernels")
    path = _write(tmp_path / "old.json", doc)
    assert M.outdated(doc) == "1 invocations without cpu_kernels"
    here = {"packages": {"torch": "2.x"}, "cpu_kernels": {k: "this CPU's" for k in CPU_KERNEL_KEYS}}
    with pytest.raises(FileFormatError, match=r"provenance.invocations\[0\] without cpu_kernels\): migrate it once"):
        store.rounds_otherwise(here, doc, path)
    assert M.migrate_file(path) == ["provenance.invocations.cpu_kernels (null: not recorded)"]
    after = json.loads(path.read_text())
    assert after["provenance"]["invocations"][0]["cpu_kernels"] is None
    assert {k: after[k] for k in NUMBERS if k in after} == {k: doc[k] for k in NUMBERS if k in doc}
    store.rounds_otherwise(here, after, path)  # read now: null is "not recorded", not compared
