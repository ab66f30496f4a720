"""The device's paths through the lab, on a machine without a GPU (CI): `auto` resolves to a GPU where one is usable and
the results file records it (kind, model, regenerating command), and to the CPU where none is, also recorded; a tuning
file refuses units of another device kind or GPU model; Ray units on a GPU ask for a share of one card and CPU units
for none; `--device cuda` without a GPU stops `choices` and `notebook` before any output or work."""
from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from metacl_lite.cli import main
from metacl_lite.tools import main as tools_main
from metacl_lite.paths import REPO_ROOT
from metacl_lite.errors import ConfigMismatch, UnitsFailed, UsageError
from metacl_lite.lab import executors as E
from metacl_lite.lab import grid as G

TINY = dict(K=5, n_tasks=2, epochs=1, show_progress=False)


# ----------------------------------------------------------------------------------------------------------------
# auto resolves, and the file records what it resolved to
# ----------------------------------------------------------------------------------------------------------------
def test_auto_on_a_machine_with_a_gpu_trains_there_and_the_file_records_it(fake_gpu, hparams_file, fake_units,
                                                                          tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, device="auto", **TINY)
    doc = json.loads(out.read_text())
    assert doc["config"]["train"]["device"] == "cuda" and doc["config"]["accelerator"] == "GPU X"
    assert [c.device for _, c in fake_units] == ["cuda"] * 3  # the run, its references and its oracle
    assert doc["provenance"]["invocations"][0]["device"] == "cuda: GPU X"
    # Permuted MNIST's default is the CPU: the command that regenerates (or extends) the file must name the GPU
    assert doc["provenance"]["command"].endswith(f" --device cuda --out {out}")


@pytest.fixture
def synthetic_cifar(monkeypatch):
    """CIFAR-100 without its files: the data check passes and each unit gets synthetic tensors of the real shapes
    (what `bench` trains on); the units themselves are `fake_units`."""
    from metacl_lite.data.synthetic import synthetic_benchmark

    monkeypatch.setattr(G.D, "check_data", lambda *a, **k: None)
    monkeypatch.setattr(G, "unit_benchmark", lambda spec, K, n_tasks, *a, **k:
                        synthetic_benchmark(G.get_spec(spec).name, K, n_tasks))


def test_cifar100s_default_auto_without_a_gpu_trains_on_the_cpu_and_the_command_says_so(no_gpu, synthetic_cifar,
                                                                                        hparams_file, fake_units,
                                                                                        tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("cifar100", seeds=[0], methods=["finetune"], out=out, **TINY)  # no device: the spec's, auto
    doc = json.loads(out.read_text())
    assert doc["config"]["train"]["device"] == "cpu" and doc["config"]["accelerator"] is None
    assert [c.device for _, c in fake_units] == ["cpu"] * 3
    assert doc["provenance"]["invocations"][0]["device"].startswith("cpu")
    # CIFAR-100's default (auto) would take a GPU where one is: extending this file there must stay on the CPU
    assert doc["provenance"]["command"].endswith(f" --device cpu --out {out}")


# ----------------------------------------------------------------------------------------------------------------
# a tuning file refuses units of another device
# ----------------------------------------------------------------------------------------------------------------
def _tune(tmp_path, **kw):
    from metacl_lite.lab.tuning import tune

    kw = {"beta_grid": [1.0, 3.0], "out": tmp_path / "t.json", **kw}
    return tune("pmnist", 5, n_tasks=2, seeds=[100], methods=["ewc"], write_hparams=False, gamma_grid=[0.0, 1.0],
                epochs=1, show_progress=False, **kw)


def test_a_tuning_file_made_on_a_gpu_refuses_cpu_units_and_another_gpu_model(fake_gpu, hparams_file, fake_units,
                                                                            tmp_path, monkeypatch):
    doc = _tune(tmp_path, device="cuda")
    assert (doc["protocol"]["device"], doc["protocol"]["accelerator"]) == ("cuda", "GPU X")
    assert " --device cuda" in doc["provenance"]["command"]
    n = len(fake_units)
    with pytest.raises(ConfigMismatch, match=r"accelerator.*device|device.*accelerator"):
        _tune(tmp_path, device="cpu")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU Y")
    with pytest.raises(ConfigMismatch, match="accelerator") as e:
        _tune(tmp_path, device="cuda")
    assert "device" not in str(e.value).replace("accelerator", "")  # the kind matches; the model does not
    assert len(fake_units) == n  # refused before any unit
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    assert _tune(tmp_path, device="cuda")["protocol"]["accelerator"] == "GPU X"  # the same GPU resumes


def test_a_tuning_file_made_on_the_cpu_refuses_gpu_units(fake_gpu, hparams_file, fake_units, tmp_path):
    doc = _tune(tmp_path, device="cpu")
    assert "device" not in doc["protocol"] and "accelerator" not in doc["protocol"]
    with pytest.raises(ConfigMismatch, match="device"):
        _tune(tmp_path, device="cuda")


# ----------------------------------------------------------------------------------------------------------------
# Ray: the cluster's GPUs decide (not the machine that starts the grid), units ask for a share of one card of one
# model, CPU units for none, and a unit from another GPU model is not saved
# ----------------------------------------------------------------------------------------------------------------
class _Ref:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error


def _run_task(fn, job):
    """A Ray task run here: its value, or its exception as Ray hands it over (a RayError, here RuntimeError)."""
    try:
        return _Ref(fn(job))
    except Exception as e:  # noqa: BLE001 - any failure of a unit
        return _Ref(error=f"{type(e).__name__}: {e}")


def _get(ref):
    if ref.error is not None:
        raise RuntimeError(ref.error)
    return ref.value


def _node(gpus=0, model=None, alive=True):
    res = {"CPU": 8.0, **({"GPU": float(gpus)} if gpus else {}),
           **({f"accelerator_type:{model}": 1.0} if model else {})}
    return {"Alive": alive, "Resources": res}


def _fake_ray(nodes=(), gpu_name="GPU X", gpu_gb=80.0):
    """A stand-in for the `ray` module: a cluster of `nodes` whose GPUs are called `gpu_name` and hold `gpu_gb` GB;
    records the arguments of each `ray.remote(...)` and runs the tasks in this process (a unit's `_call` without its
    worker set-up)."""

    ray = types.ModuleType("ray")
    ray.remote_args = []
    ray.is_initialized = lambda: True
    ray.exceptions = types.SimpleNamespace(RayError=RuntimeError)
    ray.cancel = lambda *a, **k: None
    ray.get = _get
    ray.wait = lambda refs, num_returns=1, timeout=None: ([refs[0]], refs[1:])
    ray.nodes = lambda: list(nodes)

    def remote(**kw):
        ray.remote_args.append(kw)

        def wrap(f):
            if f is E._call:
                return types.SimpleNamespace(remote=lambda fn, job, threads: _run_task(fn, job))
            assert f is E._gpu_probe  # the probe: what a unit on the cluster's GPU sees
            return types.SimpleNamespace(remote=lambda: _Ref((gpu_name, int(gpu_gb * 2 ** 30))))

        return wrap

    ray.remote = remote
    return ray


@pytest.fixture
def cluster(hparams_file, fake_units, monkeypatch):
    """A Ray cluster (`cluster(nodes, gpu_name, unit_gpu, gpu_gb)`) started from a machine without a GPU: its units
    report `unit_gpu` as the GPU they ran on. Returns the fake ray module."""
    from metacl_lite.lab import provenance
    from metacl_lite.lab.executors import check_plan

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(provenance, "describe", lambda d, *_: "cpu: Y")
    monkeypatch.setattr(E, "_said", set())

    def make(nodes, gpu_name="GPU X", unit_gpu="GPU X", gpu_gb=80.0):
        ray = _fake_ray(nodes, gpu_name, gpu_gb)
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setattr(G, "accelerator", lambda d: unit_gpu if str(d).startswith("cuda") else None)
        monkeypatch.setattr(G, "deterministic", lambda d: None)
        return ray, check_plan("ray", workers=2)

    return make


def test_a_ray_grid_trains_on_the_clusters_gpus_pinned_to_one_model(cluster, tmp_path, capsys):
    ray, plan = cluster([_node(), _node(2, "H100"), _node(2, "H100"), _node(1, "A100"), _node(8, "A100", alive=False)])
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, device="cuda", plan=plan, **TINY)
    opts = {"num_cpus": 1, "num_gpus": 1 / 8, "accelerator_type": "H100"}
    assert ray.remote_args == [opts, opts]  # the probe of the GPU's name, then the units
    doc = json.loads(out.read_text())
    assert doc["config"]["train"]["device"] == "cuda" and doc["config"]["accelerator"] == "GPU X"
    assert doc["provenance"]["invocations"][0]["device"] == ("ray cluster: 4 GPU(s) of GPU X (units pinned to "
                                                             "accelerator_type H100)")
    assert doc["provenance"]["invocations"][0]["unit_machines"] == {"GPU X": 3}  # each unit's GPU, as it saw it
    assert "GPUs of several models (A100: 1, H100: 4); this grid's units run on H100 only" in capsys.readouterr().err


def test_ray_units_ask_for_the_share_of_a_gpu_that_fits_its_memory(cluster, tmp_path, capsys):
    """As the local default (`gpu_fit`), but from the probed card's whole memory: Permuted MNIST on 16 GB cards keeps
    an eighth of a GPU per unit; CUB's units (about 6 GB each) ask for half of one, and the command says so."""
    ray, plan = cluster([_node(4, "T4")], gpu_name="Tesla T4", unit_gpu="Tesla T4", gpu_gb=15.0)
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=tmp_path / "p.json", device="cuda", plan=plan,
                     **TINY)
    assert [a["num_gpus"] for a in ray.remote_args] == [1 / 8, 1 / 8] and capsys.readouterr().err == ""
    ray, plan = cluster([_node(4, "T4")], gpu_name="Tesla T4", unit_gpu="Tesla T4", gpu_gb=15.0)
    assert E.locate(plan, "cuda", "cub") == ("cuda", "Tesla T4",
                                             "ray cluster: 4 GPU(s) of Tesla T4 (units pinned to accelerator_type T4)")
    assert plan.gpu_share == 1 / 2 and ray.remote_args == [{"num_cpus": 1, "num_gpus": 1 / 8, "accelerator_type": "T4"}]
    assert capsys.readouterr().err == ("metacl-lite: 2 Ray units share each Tesla T4 for Split CUB-200: 15.0 GB memory, "
                                       "about 6 GB per unit (an estimate); each unit asks Ray for that share of a GPU "
                                       "(num_gpus); --gpu-share F chooses another\n")
    ray, plan = cluster([_node(4, "T4")], gpu_name="Tesla T4", unit_gpu="Tesla T4", gpu_gb=4.0)
    E.locate(plan, "cuda", "cub")
    assert plan.gpu_share == 1.0  # never more than one card
    ray, plan = cluster([_node(4, "T4")], gpu_name="Tesla T4", unit_gpu="Tesla T4", gpu_gb=15.0)
    E.locate(plan, "cuda", "pmnist")
    assert plan.gpu_share == 1 / 8
    E.locate(plan, "cuda", "cub")  # the same plan for another benchmark: sized again, not taken for a user's choice
    assert plan.gpu_share == 1 / 2
    plan.gpu_request = 0.25  # --gpu-share 0.25: kept, whatever the memory
    for bench in ("cub", "pmnist"):
        E.locate(plan, "cuda", bench)
        assert plan.gpu_share == 0.25 and ray.remote_args[-1]["num_gpus"] == 0.25  # the probe asks for it too


def test_gpu_share_is_checked_before_any_work(cluster, capsys):
    from metacl_lite.lab.executors import check_plan

    cluster([_node(4, "T4")], gpu_name="Tesla T4", unit_gpu="Tesla T4", gpu_gb=15.0)
    assert check_plan("ray", gpu_share=0.25).gpu_request == 0.25
    for share, why in ((0.0, "in \\(0, 1\\]"), (1.5, "in \\(0, 1\\]"), (float("nan"), "in \\(0, 1\\]")):
        with pytest.raises(UsageError, match=f"--gpu-share {share!r}: give the fraction of a GPU .*{why}"):
            check_plan("ray", gpu_share=share)
    with pytest.raises(UsageError, match="--gpu-share 0.5 is for the ray executor only"):
        check_plan("local", gpu_share=0.5)
    assert tools_main(["where", "--benchmark", "cub", "--executor", "ray", "--gpu-share", "0.25"]) == 0
    assert capsys.readouterr().out.endswith("; each unit asks Ray for 0.25 of a GPU\n")
    assert tools_main(["where", "--benchmark", "cub", "--gpu-share", "0.25"]) == 2
    assert "--gpu-share 0.25 is for the ray executor only" in capsys.readouterr().err


def test_a_gpu_share_for_a_ray_grid_on_the_cpu_is_refused(cluster):
    """--gpu-share with --device cpu, or with auto on a cluster without GPUs: the units ask Ray for no GPU, so the
    share would be ignored; refused before any unit runs."""
    ray, plan = cluster([_node(2, "H100")])
    plan.gpu_request = 0.25
    with pytest.raises(UsageError, match=r"--gpu-share 0.25: this grid's units train on the CPU \(--device cpu\)"):
        E.locate(plan, "cpu", "pmnist")
    ray, plan = cluster([_node()])
    plan.gpu_request = 0.5
    with pytest.raises(UsageError, match="on the CPU \\(the Ray cluster has no live node with a GPU\\)"):
        E.locate(plan, "auto", "pmnist")
    assert ray.remote_args == []
    plan.gpu_request = None
    assert E.locate(plan, "auto", "pmnist").device == "cpu"


def test_a_ray_grid_on_the_cpu_asks_for_no_gpu(cluster, tmp_path):
    ray, plan = cluster([_node(2, "H100")])
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=tmp_path / "r.json", device="cpu", plan=plan,
                     **TINY)
    assert ray.remote_args == [{"num_cpus": 1, "num_gpus": 0}] and plan.accelerator_type is None
    prov = json.loads((tmp_path / "r.json").read_text())["provenance"]["invocations"][0]
    assert prov["device"] == "ray cluster: 8 CPU(s) on 1 live node(s)"  # the units' machines, not this one
    from metacl_lite.accel.device import cpu_name

    assert prov["unit_machines"] == {f"cpu: {cpu_name()}": len(prov["units"])} and len(prov["units"]) == 3


def test_a_ray_cluster_without_gpus_refuses_cuda_and_auto_trains_on_the_cpu(cluster, tmp_path):
    ray, plan = cluster([_node(), _node()])
    with pytest.raises(UsageError, match="the Ray cluster has no live node with a GPU"):
        G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=tmp_path / "r.json", device="cuda",
                         plan=plan, **TINY)
    with pytest.raises(UsageError, match="Ray places each unit on one of the cluster's GPUs; use --device cuda"):
        G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=tmp_path / "r.json", device="cuda:1",
                         plan=plan, **TINY)
    assert ray.remote_args == [] and not (tmp_path / "r.json").exists()
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=tmp_path / "r.json", device="auto", plan=plan,
                     **TINY)
    assert json.loads((tmp_path / "r.json").read_text())["config"]["train"]["device"] == "cpu"


def test_a_unit_from_another_gpu_model_is_not_saved(cluster, tmp_path):
    """The probe saw GPU X, but the units report GPU Y (a node Ray could not tell apart): none of them is saved."""
    ray, plan = cluster([_node(2)], gpu_name="GPU X", unit_gpu="GPU Y")
    out = tmp_path / "r.json"
    with pytest.raises(UnitsFailed, match=r"3 unit\(s\) failed: .*trained on GPU Y, but this file's units train on "
                                          r"GPU X: not saved"):
        G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, device="cuda", plan=plan, **TINY)
    assert plan.accelerator_type is None and ray.remote_args[0] == {"num_cpus": 1, "num_gpus": 1 / 8}
    assert not out.exists()  # nothing was saved


def test_a_ray_tuning_records_the_clusters_gpu(cluster, tmp_path):
    ray, plan = cluster([_node(4, "L4")], gpu_name="NVIDIA L4", unit_gpu="NVIDIA L4")
    doc = _tune(tmp_path, device="cuda", plan=plan)
    assert doc["protocol"]["device"] == "cuda" and doc["protocol"]["accelerator"] == "NVIDIA L4"
    inv = doc["provenance"]["invocations"][0]
    assert inv["unit_machines"] == {"NVIDIA L4": len(inv["units"])} and inv["units"]
    assert all(a.get("accelerator_type") == "L4" for a in ray.remote_args)
    ray, plan = cluster([_node(4, "L4")], gpu_name="NVIDIA L4", unit_gpu="NVIDIA T4")
    with pytest.raises(UnitsFailed, match=r"ewc/beta=1.0/100: trained on NVIDIA T4, but this file's units train on "
                                          r"NVIDIA L4: not saved"):
        _tune(tmp_path, device="cuda", plan=plan, out=tmp_path / "t2.json")


# ----------------------------------------------------------------------------------------------------------------
# --device cuda without a GPU: exit 2 before any output or work
# ----------------------------------------------------------------------------------------------------------------
def test_choices_with_cuda_and_no_gpu_exits_2_before_printing_or_tuning(no_gpu, monkeypatch, capsys):
    from metacl_lite.lab import choices as CH

    ran = []
    monkeypatch.setattr(CH, "execute", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(CH, "write_summary", lambda *a, **k: ran.append(a))
    # --workers 1: the plan then has no reason to look at the device, so only the early check can stop it
    for argv in (["choices", "--device", "cuda", "--workers", "1", "--no-progress"],
                 ["choices", "--benchmark", "cifar100", "--device", "cuda:0", "--executor", "local", "--workers", "2"],
                 ["choices", "--device", "cuda", "--summary-only"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and ran == []
        assert err.startswith("error: --device cuda") and "no CUDA GPU is usable here" in err
        assert len(err.strip().splitlines()) == 1


def test_notebook_with_device_cuda_and_no_gpu_exits_2_before_a_kernel_starts(no_gpu, monkeypatch, tmp_path, capsys):
    from metacl_lite.publish import notebooks as NB

    monkeypatch.setattr(NB, "run_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    page = str(REPO_ROOT / "book" / "reproduce" / "benchmark.md")
    for extra in (["-p", "device", "cuda"], ["-p", "device", "cuda:1", "--grid", "K=5,10"]):
        assert main(["notebook", page, *extra, "-o", str(tmp_path / "runs")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "-p device cuda" in err and "no CUDA GPU is usable here" in err
        assert "use -p device cpu" in err and "--device" not in err
    assert not (tmp_path / "runs").exists()
    # auto and cpu need no GPU: they pass the check (the run itself is not started here)
    assert len(NB.plan_runs(REPO_ROOT / "book" / "reproduce" / "benchmark.md", [("device", "auto")], [],
                            tmp_path / "ok")) == 1


# ----------------------------------------------------------------------------------------------------------------
# make reproduce-cifar100 / reproduce-cub: no GPU, no start (unless DEVICE=cpu)
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["reproduce-cifar100", "reproduce-cub"])
def test_the_make_targets_refuse_to_start_without_a_gpu_unless_device_cpu_is_given(target, tmp_path):
    """The recipe's commands go to a stand-in for the venv's python that logs them (nothing is downloaded or trained);
    only the GPU check (`metacl_lite.tools where --need-gpu`) runs, in this interpreter with no GPU visible. EXEC's executor
    options go to the check and to every training step."""
    import subprocess

    log = tmp_path / "calls.log"  # make is there: the suite itself runs under `make test`
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\ncase "$*" in "-m metacl_lite.tools where "*) '
                    f'CUDA_VISIBLE_DEVICES= exec {sys.executable} "$@";; esac\nexit 0\n')
    fake.chmod(0o755)

    def make(*extra):
        log.write_text("")
        r = subprocess.run(["make", "-s", target, "STAMP=", f"PY={fake}", *extra], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300)
        return r, log.read_text().splitlines()

    bench = target.split("-")[1]
    r, calls = make()
    assert r.returncode == 2 and r.stderr.startswith(f"error: make {target} needs a CUDA GPU, and --device auto "
                                                     f"trains on the CPU (no CUDA GPU is usable here; ")
    assert "DEVICE=cpu" in r.stderr and "Traceback" not in r.stderr
    assert calls == [f"-m metacl_lite.tools where --benchmark {bench} --device auto --need-gpu make {target}"]
    r, calls = make("DEVICE=cuda:1")
    assert r.returncode == 2 and f"error: make {target} needs a CUDA GPU: --device cuda:1: no CUDA GPU" in r.stderr
    assert len(calls) == 1  # nothing fetched, tuned or run
    # a Ray cluster's GPUs count, not this machine's: the check asks the cluster (here an address nobody answers)
    r, calls = make("EXEC=--executor ray --address 127.0.0.1:9")
    assert r.returncode == 2 and "cannot reach a Ray cluster at 127.0.0.1:9" in r.stderr
    assert calls == [(f"-m metacl_lite.tools where --benchmark {bench} --device auto --executor ray --address 127.0.0.1:9 "
                      f"--need-gpu make {target}")]
    r, calls = make("DEVICE=cpu", "EXEC=--executor ray --address 127.0.0.1:9")
    assert r.returncode == 0, r.stderr
    assert calls[0].startswith("data_scripts/fetch.py") and not any(" where " in c for c in calls)
    steps = [c for c in calls if c.startswith(("-m metacl_lite choices", "-m metacl_lite tune", "-m metacl_lite run"))]
    assert len(steps) >= 3 and all("--device cpu --executor ray --address 127.0.0.1:9" in c for c in steps)


def test_where_says_where_units_would_train_and_need_gpu_refuses_the_cpu(cluster, capsys):
    """`where`: the device, and how many units share a GPU (a Ray cluster's, seen from a machine without one)."""
    cluster([_node(4, "T4")], gpu_name="Tesla T4", unit_gpu="Tesla T4", gpu_gb=15.0)
    assert tools_main(["where", "--benchmark", "cub", "--executor", "ray", "--need-gpu", "make reproduce-cub"]) == 0
    out = capsys.readouterr().out
    assert out == ("cub: units train on cuda, ray cluster: 4 GPU(s) of Tesla T4 (units pinned to accelerator_type "
                   "T4); each unit asks Ray for 0.5 of a GPU\n")
    cluster([_node(), _node()])  # no GPU in the cluster: auto is the CPU, which --need-gpu refuses
    assert tools_main(["where", "--benchmark", "cifar100", "--executor", "ray"]) == 0
    assert capsys.readouterr().out == ("cifar100: units train on cpu, ray cluster: 16 CPU(s) on 2 live node(s); each "
                                       "unit asks Ray for one CPU\n")
    assert tools_main(["where", "--need-gpu", "X"]) == 2  # Permuted MNIST: the CPU by default
    assert "X needs a CUDA GPU, and --device cpu trains on the CPU (Permuted MNIST's default)" in capsys.readouterr().err
    assert tools_main(["where", "--benchmark", "cifar100", "--executor", "ray", "--need-gpu", "make reproduce-cifar100"]) == 2
    assert capsys.readouterr().err == (
        "error: make reproduce-cifar100 needs a CUDA GPU, and --device auto trains on the CPU (the Ray cluster has no "
        "live node with a GPU; Split CIFAR-100's grids take days on the CPU): run it where a GPU is, or train on the "
        "CPU anyway with --device cpu (make: DEVICE=cpu)\n")


def test_a_failed_tuning_unit_is_named_by_its_method_value_and_seed(cluster, tmp_path, monkeypatch):
    real = G.execute_unit

    def fail_one(unit, bench, cfg, evaluate_rows="all"):
        if cfg.beta == 3.0:
            raise RuntimeError("boom")
        return real(unit, bench, cfg, evaluate_rows)

    ray, plan = cluster([_node(4, "L4")], gpu_name="NVIDIA L4", unit_gpu="NVIDIA L4")
    monkeypatch.setattr(G, "execute_unit", fail_one)
    with pytest.raises(UnitsFailed, match=r"^1 unit\(s\) failed: ewc/beta=3.0/100: RuntimeError: .*boom\. Every"):
        _tune(tmp_path, device="cuda", plan=plan)


def test_bench_device_auto_without_a_gpu_names_the_device_it_was_given(no_gpu, capsys):
    """`bench --device auto` on a machine without a GPU speaks of --device auto (it spoke of --device cuda)."""
    assert tools_main(["bench", "--device", "auto"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bench --device auto times the grids on a GPU, and no GPU is usable here") \
        and "cuda" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("target", ["reproduce-cifar100", "reproduce-cub"])
def test_the_make_targets_stop_before_installing_on_a_machine_without_a_gpu(target, tmp_path):
    """No nvidia-smi GPU (an empty PATH but for the shell's tools), no venv yet: refused before the 5 GB install;
    DEVICE=cpu or a Ray cluster's address goes on to the install (here a stand-in that records it)."""
    import shutil
    import subprocess

    stamp = tmp_path / "venv" / "stamp"
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("sh", "grep", "echo", "test", "["):
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if real.startswith("/"):
            (bin_ / tool).symlink_to(real)
    env = {"PATH": str(bin_), "HOME": str(tmp_path)}

    def make(*extra):
        return subprocess.run([shutil.which("make"), "-s", target, f"STAMP={stamp}", "PY=false", "PYTHON=false", *extra],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)

    r = make()
    assert r.returncode == 2 and r.stderr.startswith(f"error: make {target} needs a CUDA GPU, and nvidia-smi finds "
                                                     "none here; give DEVICE=cpu"), r.stderr
    assert not stamp.parent.exists()
    for extra in (["DEVICE=cpu"], ["EXEC=--executor ray --address 10.0.0.1:6379"]):
        r = make(*extra)  # past the precheck: the install's first command (the stand-in `false`) fails
        assert "needs a CUDA GPU" not in r.stderr and r.returncode != 0, r.stderr
