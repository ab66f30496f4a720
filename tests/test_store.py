"""The results store: atomic writes, a lock, merging writers, clear errors for files of the wrong kind."""
import json
import multiprocessing
import os

import pytest

from metacl_lite.lab import atomic
from metacl_lite.lab import store
from metacl_lite.errors import ConfigMismatch, FileFormatError, LockedError, OutputError


def _file(path, config=None, log=None):
    config = config or {"a": 1}

    def compatible(old):
        return [k for k in config if old.get("config", {}).get(k) != config[k]]

    def merge(doc):
        doc["config"] = dict(config)

    def finalize(doc):
        doc["n_units"] = len(doc["units"])
        doc.setdefault("provenance", {})["command"] = "cmd"

    return store.UnitFile(path, "results", config, ("units", "runs"), compatible, merge, finalize)


def test_two_writers_of_one_file_keep_each_others_units(tmp_path):
    path = tmp_path / "r.json"
    a, b = _file(path), _file(path)
    a.open(), b.open()  # both start from the same (absent) file
    a.add("units", "x", {"v": 1, "wall_s": 2.0})
    b.add("units", "y", {"v": 2, "wall_s": 3.0})
    a.add("units", "z", {"v": 3, "wall_s": 1.0})
    doc = json.loads(path.read_text())
    assert doc["units"] == {"x": {"v": 1, "wall_s": 2.0}, "y": {"v": 2, "wall_s": 3.0}, "z": {"v": 3, "wall_s": 1.0}}
    invs = doc["provenance"]["invocations"]
    assert [i["units"] for i in invs] == [["units/y"], ["units/x", "units/z"]]
    assert [i["wall_s"] for i in invs] == [3.0, 3.0] and doc["provenance"]["wall_s_total"] == 6.0
    assert doc["n_units"] == 3 and doc["kind"] == "results" and doc["schema"] == store.SCHEMA


def _writer(path, name, n):
    f = _file(path)
    f.open()
    for i in range(n):
        f.add("units", f"{name}{i}", {"v": i})


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "r.json"
    ctx = multiprocessing.get_context("fork")
    ps = [ctx.Process(target=_writer, args=(path, name, 40)) for name in "ab"]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    assert [p.exitcode for p in ps] == [0, 0]
    doc = json.loads(path.read_text())
    assert set(doc["units"]) == {f"{n}{i}" for n in "ab" for i in range(40)}
    assert sorted(len(i["units"]) for i in doc["provenance"]["invocations"]) == [40, 40]


def test_a_file_of_another_configuration_is_refused_and_kept(tmp_path):
    path = tmp_path / "r.json"
    f = _file(path, {"a": 1})
    f.open()
    f.add("units", "x", {"v": 1})
    before = path.read_bytes()
    with pytest.raises(ConfigMismatch, match=r"r.json was made with a different configuration \(a\)"):
        _file(path, {"a": 2}).open()
    g = _file(path, {"a": 2})
    g.open(force=True)  # starting over: the first new unit replaces the file
    assert path.read_bytes() == before
    g.add("units", "y", {"v": 2})
    assert json.loads(path.read_text())["units"] == {"y": {"v": 2}}


@pytest.mark.parametrize("content,needle", [
    ({"kind": "tuning", "grid": {}, "chosen": {}}, "is a tuning file (python -m metacl_lite tune), not a results file"),
    ({"per_method": [], "gemm_gflops": 1.0}, "is a speed benchmark file (python -m metacl_lite.tools bench), not a results file"),
    ({}, "is an empty JSON object, not a results file"),
    ([1, 2], "is JSON of another shape (list), not a results file"),
])
def test_files_of_the_wrong_kind_are_named(tmp_path, content, needle):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(content))
    with pytest.raises(FileFormatError) as e:
        store.load(path, "results")
    assert str(e.value) == f"{path} {needle} (python -m metacl_lite run)"


def test_invalid_json_names_the_file_and_the_place(tmp_path):
    path = tmp_path / "f.json"
    path.write_text('{"a": 1,\n "b": }')
    with pytest.raises(FileFormatError) as e:
        atomic.read_json(path)
    assert str(e.value).startswith(f"{path} is not valid JSON (Expecting value at line 2, column 7)")


def test_schema_1_files_are_refused_naming_the_old_migration_and_the_provenance(tmp_path):
    """A schema-1 file (one provenance block, as the first committed results files had) is not read: one line names
    the migration of metacl-lite at the last commit that had it, and the command in its provenance."""
    prov = {"command": "python -m metacl_lite run --benchmark pmnist --K 20 --seeds 3", "git_commit": "7ec79b6e",
            "git_dirty": False, "device": "cpu: X", "started": "2026-11-21T13:11:49+00:00",
            "finished": "2026-11-21T13:34:00+00:00", "wall_s_total": 1331.25}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"runs": {}, "references": {}, "oracle": {}, "config": {"benchmark": "pmnist"},
                                "provenance": prov}))
    with pytest.raises(FileFormatError, match=r"older metacl-lite \(schema 1, without a kind field\): migrate it "
                                              r"once with `python -m metacl_lite.tools migrate \S*old.json` from "
                                              r"metacl-lite at commit 82768e1 \(the last with it\), or regenerate "
                                              r"it with the command in its provenance$"):
        store.load(path, "results")
    (kindless := json.loads(path.read_text())).update(kind="results", schema=1)
    path.write_text(json.dumps(kindless))
    with pytest.raises(FileFormatError, match=r"\(schema 1, one provenance block per file\): migrate it once .* at "
                                              r"commit 82768e1"):
        store.load(path, "results")


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "f.json"
    atomic.write_json(path, {"old": 1})
    with pytest.raises(TypeError):
        atomic.write_json(path, {"new": object()})
    assert json.loads(path.read_text()) == {"old": 1} and os.listdir(tmp_path) == ["f.json"]


def test_lock_without_waiting_refuses_a_second_holder(tmp_path):
    path = tmp_path / "f.json"
    with atomic.locked(path):
        with pytest.raises(LockedError, match="f.json is being written by another process"):
            with atomic.locked(path, wait=False):
                pass
    with atomic.locked(path, wait=False):  # released
        pass


def test_unwritable_outputs_fail_before_any_work(tmp_path):
    with pytest.raises(OutputError, match="is a directory"):
        atomic.check_writable(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        atomic.check_writable(tmp_path / "file" / "r.json")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores permissions: then the folder really is writable
            assert atomic.check_writable(ro / "r.json") == ro / "r.json"
        else:
            with pytest.raises(OutputError, match="permission denied"):
                atomic.check_writable(ro / "r.json")
    finally:
        ro.chmod(0o700)


def test_atomic_writes_keep_permissions(tmp_path):
    new = tmp_path / "new.json"
    old_umask = os.umask(0o022)
    try:
        atomic.write_json(new, {"a": 1})
    finally:
        os.umask(old_umask)
    assert new.stat().st_mode & 0o777 == 0o644  # mkstemp's 0600 would hide results from other users
    new.chmod(0o640)
    atomic.write_json(new, {"a": 2})
    assert new.stat().st_mode & 0o777 == 0o640
