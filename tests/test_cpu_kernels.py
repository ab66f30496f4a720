"""What decides how a CPU rounds (issue 31): torch's CPU capability, the processor's vendor, family and model, and the
BLAS library, recorded in every invocation's provenance (`device.cpu_kernels`), and the one rule that decides whether
a CPU run may be asked to repeat a file's numbers bit for bit (`provenance.rounding_differs`, which test_golden uses).
The machine is faked: torch's capability and build string are monkeypatched, /proc/cpuinfo is a file of the test's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from metacl_lite.accel import device
from metacl_lite.lab import provenance
from metacl_lite.lab.provenance import invocation, rounding_differs
from metacl_lite.lab.store import UnitFile

REPO = Path(__file__).resolve().parents[1]

EPYC_ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
EPYC_ZEN4 = EPYC_ZEN3.replace("cpu family\t: 25\nmodel\t\t: 1", "cpu family\t: 25\nmodel\t\t: 17")
ARM = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n"


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A fake machine: set(capability=..., cpuinfo=..., blas=...) changes what `cpu_kernels` sees."""
    info = tmp_path / "cpuinfo"

    def set_(capability="AVX512", cpuinfo=EPYC_ZEN3, blas="mkl"):
        info.write_text(cpuinfo)
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
        monkeypatch.setattr(torch.__config__, "show", lambda: f"  - Build settings: BLAS_INFO={blas}, BUILD_TYPE=R\n")
        monkeypatch.setattr(device, "CPUINFO", info)

    set_()
    return set_


def test_the_identity_is_capability_processor_and_blas(machine):
    assert device.cpu_kernels() == {"capability": "AVX512", "vendor": "AuthenticAMD", "family": "25", "model": "1",
                                    "blas": "mkl"}
    machine(capability="AVX2", cpuinfo=ARM, blas="open")
    assert device.cpu_kernels() == {"capability": "AVX2", "vendor": "0x41", "family": "8", "model": "0xd0c",
                                    "blas": "open"}


def test_without_cpuinfo_family_and_model_are_unknown(machine, tmp_path):
    got = device.cpu_kernels(tmp_path / "absent")
    assert (got["capability"], got["family"], got["model"], got["blas"]) == ("AVX512", None, None, "mkl")


def test_this_machine_has_an_identity():
    got = device.cpu_kernels()
    assert set(got) == set(device.CPU_KERNEL_KEYS) and got["capability"] == torch.backends.cpu.get_cpu_capability()


def test_every_invocation_records_it_and_the_device_string_is_unchanged(machine):
    inv = invocation("cpu")
    assert inv["cpu_kernels"] == device.cpu_kernels() and inv["device"].startswith(f"cpu: {device.cpu_name()} (")
    # units on a Ray cluster ran on other machines: this one's kernels are not theirs
    assert invocation("cpu", "ray cluster: 8 CPU(s) on 1 live node(s)")["cpu_kernels"] is None


def test_equality_only_where_all_of_it_matches(machine):
    made = invocation("cpu")
    assert rounding_differs(made) is None
    machine(capability="AVX2")  # the same processor, the kernels torch picks differ (ATEN_CPU_CAPABILITY, a build)
    assert "capability AVX512 there, AVX2 here" in rounding_differs(made)
    machine(cpuinfo=EPYC_ZEN4)  # the same name, "AMD EPYC", another generation
    assert "model 1 there, 17 here" in rounding_differs(made)
    machine(blas="openblas")
    assert "blas mkl there, openblas here" in rounding_differs(made)
    machine()
    assert rounding_differs(made) is None
    assert "torch 2.0.0 made it" in rounding_differs({**made, "packages": {**made["packages"], "torch": "2.0.0"}})


def test_an_unknown_field_is_not_a_match(machine, tmp_path):
    machine(cpuinfo="")  # no vendor, family or model lines
    made = invocation("cpu")
    assert "family None there, None here" in rounding_differs(made)


def test_files_made_before_the_field_ask_for_rounding_only():
    """The committed files' invocations made before cpu_kernels was recorded (null since the one-time migration)
    name the CPU's model only: never equality, on any machine (they stay readable)."""
    doc = json.loads((REPO / "results" / "pmnist-K1.json").read_text())
    old = [inv for inv in doc["provenance"]["invocations"] if inv["cpu_kernels"] is None]
    assert old  # its training units; a later invocation (the oracle's --redo) records them
    for inv in old:
        why = rounding_differs(inv)
        assert why is not None and ("no cpu_kernels" in why or "torch" in why)
    assert "no cpu_kernels" in rounding_differs({"packages": {"torch": torch.__version__.split("+")[0]},
                                                 "device": f"cpu: {device.cpu_name()} (2 cores, torch threads 2)"})


def test_a_results_file_records_it_per_invocation_and_at_the_top(machine, tmp_path):
    path = tmp_path / "r.json"
    store = UnitFile(path, "results", {}, ["runs"], compatible=lambda d: [], merge=lambda d: None,
                     finalize=lambda d: None)
    store.open()
    store.add("runs", "ewc/0", {"acc_matrix": [[0.5]], "wall_s": 1.0})
    prov = json.loads(path.read_text())["provenance"]
    assert prov["invocations"][0]["cpu_kernels"] == prov["cpu_kernels"] == device.cpu_kernels()
    assert rounding_differs(prov["invocations"][0]) is None
    machine(capability="AVX2")
    assert "capability" in rounding_differs(prov["invocations"][0])


def test_provenance_reads_this_machine_through_cpu_kernels():
    assert provenance.cpu_kernels is device.cpu_kernels


def _store(path):
    return UnitFile(path, "results", {}, ["runs"], compatible=lambda d: [], merge=lambda d: None,
                    finalize=lambda d: None)


def _one_unit_file(tmp_path):
    """A results file with one unit made on this (fake) machine: its path and its bytes."""
    path = tmp_path / "r.json"
    first = _store(path)
    first.open()
    first.add("runs", "ewc/0", {"acc_matrix": [[50.0]], "wall_s": 1.0})
    return path, path.read_bytes()


def test_a_file_refuses_cpu_units_from_a_machine_that_rounds_otherwise(machine, tmp_path):
    """What cannot be made equal is refused when mixed: a CPU file made with AVX-512 kernels takes no units from an
    AVX2 machine (nor another processor model, BLAS or torch), before any unit trains; the same kind of machine
    continues it."""
    from metacl_lite.errors import ConfigMismatch

    path, before = _one_unit_file(tmp_path)
    machine(capability="AVX2")
    with pytest.raises(ConfigMismatch, match=r"cpu_kernels\.capability: 'AVX512' in the file, 'AVX2' here"):
        _store(path).open()
    machine(cpuinfo=EPYC_ZEN4)
    with pytest.raises(ConfigMismatch, match=r"cpu_kernels\.model: '1' in the file, '17' here"):
        _store(path).open()
    machine()
    doc = json.loads(path.read_text())
    doc["provenance"]["invocations"][0]["packages"]["torch"] = "2.0.0"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigMismatch, match=r"torch: '2\.0\.0' in the file"):
        _store(path).open()
    path.write_bytes(before)
    again = _store(path)  # the same kind of machine: continued
    again.open()
    again.add("runs", "ewc/1", {"acc_matrix": [[50.0]], "wall_s": 1.0})
    assert set(json.loads(path.read_text())["runs"]) == {"ewc/0", "ewc/1"}


def test_invocations_that_record_no_kernels_are_not_compared(machine, tmp_path):
    """The committed files (made before cpu_kernels was recorded) and a Ray cluster's invocations (its nodes' kernels
    are not this process's) can still be continued: what decided their rounding is unknown."""
    path = tmp_path / "r.json"
    first = _store(path)
    first.open()
    first.add("runs", "ewc/0", {"acc_matrix": [[50.0]], "wall_s": 1.0})
    doc = json.loads(path.read_text())
    doc["provenance"]["invocations"][0]["cpu_kernels"] = None
    path.write_text(json.dumps(doc))
    machine(capability="AVX2")
    _store(path).open()
    ray = UnitFile(path, "results", {}, ["runs"], compatible=lambda d: [], merge=lambda d: None,
                   finalize=lambda d: None, where_text="ray cluster: 8 CPU(s) on 1 live node(s)")
    assert ray.inv["cpu_kernels"] is None
    ray.open()


def test_a_finished_file_is_read_anywhere_and_units_are_refused_only_where_some_remain(machine, tmp_path):
    """`open(until_work=True)` (run and tune) reads a file whose units another kind of CPU made: a finished file is
    passed over on any machine (make reproduce-memory across sessions); `refuse_other_rounding`, called where units
    remain, and `add` refuse it, and nothing is written."""
    from metacl_lite.errors import ConfigMismatch

    path, before = _one_unit_file(tmp_path)
    machine(capability="AVX2")
    later = _store(path)
    assert set(later.open(until_work=True)["runs"]) == {"ewc/0"}
    with pytest.raises(ConfigMismatch, match=r"cpu_kernels\.capability: 'AVX512' in the file, 'AVX2' here"):
        later.refuse_other_rounding()
    with pytest.raises(ConfigMismatch, match=r"cpu_kernels\.capability"):
        later.add("runs", "ewc/1", {"acc_matrix": [[50.0]], "wall_s": 1.0})
    assert path.read_bytes() == before
    machine()
    same = _store(path)
    same.open(until_work=True)
    same.refuse_other_rounding()  # the same kind of machine: nothing to refuse


def test_run_and_tune_pass_over_a_finished_file_from_another_cpu_and_refuse_one_with_units_left(
        machine, tmp_path, hparams_file, fake_units, capsys):
    from metacl_lite.cli import main

    tiny = ["--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--no-progress", "--workers", "1"]
    run = ["run", *tiny, "--methods", "finetune", "--seed-list", "0", "--out", str(tmp_path / "r.json")]
    tune = ["tune", *tiny, "--methods", "mas", "--beta-grid", "0.1,1,10", "--seed-list", "7", "--no-write", "--out",
            str(tmp_path / "t.json")]
    assert main(run) == 0 and main(tune) == 0
    files = {p: p.read_bytes() for p in tmp_path.glob("[rt].json")}
    n = len(fake_units)
    machine(capability="AVX2")
    assert main(run) == 0 and main(tune) == 0 and len(fake_units) == n  # finished: nothing to train, nothing refused
    assert main([*run[:-4], "--seed-list", "0,1", *run[-2:]]) == 2
    assert "cpu_kernels.capability: 'AVX512' in the file, 'AVX2' here" in capsys.readouterr().err
    doc = json.loads(files[tmp_path / "t.json"])
    doc["units"].popitem()  # a tuning stopped before its last unit
    (tmp_path / "t.json").write_text(json.dumps(doc))
    files[tmp_path / "t.json"] = (tmp_path / "t.json").read_bytes()
    assert main(tune) == 2
    assert "cpu_kernels.capability" in capsys.readouterr().err
    assert len(fake_units) == n and {p: p.read_bytes() for p in files} == files
