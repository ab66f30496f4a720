"""Tuning: never overwrites another protocol's results or hparams.json unless asked, resumes unit by unit, records a
command that regenerates exactly its file, and picks the argmax of its own grid."""
import json
import math
import shlex

import numpy as np
import pytest

from metacl_lite import grid as G
from metacl_lite import store
from metacl_lite import tuning as TU
from metacl_lite.cli import main

SMOKE = dict(methods=["ewc"], n_tasks=2, epochs=1, seeds=(100,), beta_grid=(0.1, 1.0, 10.0), show_progress=False)


def _acc(cfg, seed):
    """A validation ACC with a known best: highest at beta (or gamma) = 1, lower away from it; seed 101 is 1 lower."""
    v = cfg.beta if cfg.beta else cfg.gamma
    return 60.0 - (math.log10(v) if v > 0 else -3.0) ** 2 - (seed - 100)


@pytest.fixture
def fake_training(monkeypatch):
    calls = []

    def run_stream(bench, method, cfg, seed, show_progress=None, evaluate_rows="all"):
        assert evaluate_rows == "last"  # tuning scores the final row only
        calls.append((method, cfg.beta, cfg.gamma, seed))
        n = bench.n_tasks
        acc = np.full((n, n), np.nan)
        acc[-1] = _acc(cfg, seed)
        return {"acc_matrix": acc, "wall_s": 0.5}

    monkeypatch.setattr(G, "run_stream", run_stream)
    return calls


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """Default outputs go under tmp_path (results/, runs/), never into the checkout."""
    monkeypatch.setattr(TU, "REPO_ROOT", tmp_path)
    (tmp_path / "results").mkdir()
    return tmp_path


def test_a_smoke_test_writes_elsewhere_and_leaves_hparams_alone(repo, hparams_file, fake_training):
    committed = repo / "results" / "tuning-pmnist-K20.json"
    committed.write_text('{"kind": "tuning", "grid": {}, "chosen": {}}')
    hp_before = TU.H.HPARAMS_FILE.read_bytes()
    doc = TU.tune("pmnist", **SMOKE)
    out = repo / "runs" / f"tuning-pmnist-K20-{TU.protocol_tag(doc['protocol'])}.json"
    assert out.exists() and committed.read_text() == '{"kind": "tuning", "grid": {}, "chosen": {}}'
    assert TU.H.HPARAMS_FILE.read_bytes() == hp_before and not doc["hparams_written"]
    assert doc["chosen"] == {"ewc": {"beta": 1.0}} and doc["at_edge"] == {"ewc": False}
    assert doc["provenance"]["command"] == (
        "python -m metacl_lite tune --benchmark pmnist --K 20 --methods ewc --n-tasks 2 --epochs 1 --seed-list 100 "
        "--beta-grid 0.1,1,10")


def test_the_recorded_command_regenerates_exactly_the_file(repo, hparams_file, fake_training):
    doc = TU.tune("pmnist", **SMOKE)
    out = repo / "runs" / f"tuning-pmnist-K20-{TU.protocol_tag(doc['protocol'])}.json"
    first = json.loads(out.read_text())
    out.unlink()
    assert main(shlex.split(doc["provenance"]["command"])[3:] + ["--workers", "1"]) == 0
    again = json.loads(out.read_text())
    assert again["units"] == first["units"] and again["protocol"] == first["protocol"]
    assert again["provenance"]["command"] == first["provenance"]["command"]


def test_tuning_resumes_unit_by_unit(repo, hparams_file, fake_training, monkeypatch):
    real = G.run_stream

    def killed_after_two(*a, **k):
        if len(fake_training) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(G, "run_stream", killed_after_two)
    kw = {**SMOKE, "seeds": (100, 101)}
    with pytest.raises(KeyboardInterrupt):
        TU.tune("pmnist", **kw)
    (out,) = (repo / "runs").glob("*.json")
    assert len(json.loads(out.read_text())["units"]) == 2
    monkeypatch.setattr(G, "run_stream", real)
    fake_training.clear()
    doc = TU.tune("pmnist", **kw)
    assert len(fake_training) == 4 and len(doc["units"]) == 6
    assert doc["grid"]["ewc"]["val_acc"] == [[59.0, 58.0], [60.0, 59.0], [59.0, 58.0]]
    assert doc["grid"]["ewc"]["mean_val_acc"] == [58.5, 59.5, 58.5]


def test_the_default_protocol_writes_hparams_once_a_grid_is_complete(repo, hparams_file, fake_training, monkeypatch):
    tiny = {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "epochs": 1, "seeds": [100], "beta_grid": [0.1, 1.0, 10.0],
            "gamma_grid": [0.0, 1.0, 100.0], "val_offset": 500, "val_per_class": 100, "options": {},
            "method_options": {m: {} for m in TU.TUNABLE}}
    monkeypatch.setattr(TU, "default_protocol", lambda b, K: dict(tiny, K=K))
    kw = dict(n_tasks=2, epochs=1, seeds=(100,), beta_grid=tiny["beta_grid"], gamma_grid=tiny["gamma_grid"],
              show_progress=False)
    doc = TU.tune("pmnist", methods=["pi", "pi-metacl-lambda"], **kw)
    assert (repo / "results" / "tuning-pmnist-K20.json").exists() and doc["hparams_written"]
    hp = json.loads(TU.H.HPARAMS_FILE.read_text())["pmnist"]
    assert hp["methods"]["pi"] == {"beta": 1.0} and hp["methods"]["pi-metacl-lambda"] == {"gamma": 1.0}
    assert hp["source"] == str(repo / "results" / "tuning-pmnist-K20.json")
    assert doc["at_edge"] == {"pi": False, "pi-metacl-lambda": False}
    # another K: values for that K only
    doc = TU.tune("pmnist", K=30, methods=["pi"], **kw)
    hp = json.loads(TU.H.HPARAMS_FILE.read_text())["pmnist"]
    assert hp["by_K"]["30"]["methods"] == {"pi": {"beta": 1.0}} and "--K 30" in hp["by_K"]["30"]["command"]
    assert hp["methods"]["pi"] == {"beta": 1.0}


def test_choose_takes_the_argmax_of_its_own_grid_and_flags_edges():
    assert TU.choose({"values": [0.1, 1.0, 10.0], "mean_val_acc": [50.0, 61.0, 60.0]}) == {"value": 1.0, "at_edge": False}
    assert TU.choose({"values": [0.1, 1.0, 10.0], "mean_val_acc": [50.0, 55.0, 60.0]}) == {"value": 10.0, "at_edge": True}
    assert TU.choose({"values": [0.1, 1.0, 10.0], "mean_val_acc": [61.0, 61.0, 60.0]}) == {"value": 0.1, "at_edge": True}


def test_the_committed_tuning_file_gives_the_committed_values():
    doc = TU._upgrade_schema1(store.load(TU.REPO_ROOT / "results" / "tuning-pmnist-K20.json", "tuning"))
    grid = TU.grid_of(doc)
    hp = TU.H.load()["pmnist"]["methods"]
    for m, g in grid.items():
        assert g["complete"] and g["mean_val_acc"] == pytest.approx(doc["grid"][m]["mean_val_acc"], abs=1e-12)
        best = max(range(len(g["values"])), key=lambda i: (g["mean_val_acc"][i], -i))  # first of the best
        assert hp[m] == {g["param"]: g["values"][best]}


@pytest.mark.parametrize("argv,needle", [
    (["--methods", "finetune"], "method 'finetune' is not allowed here"),
    (["--n-tasks", "1"], "a stream needs at least 2 tasks"),
    (["--K", "501"], "K=501: the validation images of Permuted MNIST start at image 500"),
    (["--beta-grid", "1,-1"], "beta grid: -1.0 is not a finite number >= 0"),
    (["--beta-grid", "1,1.0"], "beta grid: 1.0 is given twice"),
])
def test_bad_tuning_requests_exit_2_before_any_work(repo, hparams_file, fake_training, capsys, argv, needle):
    rc = main(["tune", "--benchmark", "pmnist", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and fake_training == [] and not (repo / "runs").exists()


def test_a_best_value_on_an_edge_extends_the_grid_until_it_is_interior(repo, hparams_file, fake_training, monkeypatch):
    monkeypatch.setattr(G, "run_stream", lambda bench, m, cfg, seed, show_progress=None, evaluate_rows="last": {
        "acc_matrix": np.full((2, 2), 60.0 - (math.log10(cfg.beta) - 2) ** 2), "wall_s": 0.1})  # best at beta = 100
    doc = TU.tune("pmnist", **SMOKE)
    g = doc["grid"]["ewc"]
    assert g["values"] == [0.1, 1.0, 10.0, 30.0, 100.0, 300.0, 1000.0] and g["extended"] == [30.0, 100.0, 300.0, 1000.0]
    assert doc["chosen"] == {"ewc": {"beta": 100.0}} and doc["at_edge"] == {"ewc": False}


def test_extension_steps_half_decades_and_stops():
    g = {"values": list(TU.BETA_GRID), "mean_val_acc": [0.0] * 12 + [1.0]}
    assert TU.extension(g, TU.BETA_GRID) == [30000.0, 100000.0]
    g = {"values": list(TU.GAMMA_GRID), "mean_val_acc": [0.0, 1.0] + [0.0] * 12}
    assert TU.extension(g, TU.GAMMA_GRID) == []  # 0.01 lies inside [0, 1e4]
    g = {"values": [0.0, 0.01], "mean_val_acc": [1.0, 0.0]}
    assert TU.choose(g) == {"value": 0.0, "at_edge": False}  # gamma = 0 is a bound, not an edge
    g = {"values": [0.01, 0.1], "mean_val_acc": [1.0, 0.0]}
    assert TU.extension(g, [0.01, 0.1]) == [0.003, 0.001]
    far = [1e-4 * 3 ** 0 / 10 ** k for k in range(4)]  # already far below the protocol's grid: stop
    g = {"values": sorted(far) + [0.01, 0.1], "mean_val_acc": [1.0] + [0.0] * 5}
    assert TU.extension(g, [0.01, 0.1]) == []
    assert TU.BETA_GRID == (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)


def test_reuse_copies_units_made_with_the_same_configuration_and_refuses_others(repo, hparams_file, fake_training):
    """tune(reuse=...) (how `choices` makes the canonical file from the winning variant): units of a file made with
    the same per-method training configuration are copied, nothing is trained; any other file is refused."""
    a = TU.tune("pmnist", **SMOKE, options={"omega_accumulate": "latest"}, decided=False, out=repo / "a.json")
    assert len(fake_training) == 3
    hp = json.loads(TU.H.HPARAMS_FILE.read_text())
    hp["pmnist"]["options"] = {"ewc": {"omega_accumulate": "latest"}}
    hparams_file(hp)
    fake_training.clear()
    b = TU.tune("pmnist", **SMOKE, out=repo / "b.json", reuse={"ewc": repo / "a.json"})
    assert fake_training == [] and b["chosen"] == a["chosen"] == {"ewc": {"beta": 1.0}}
    assert {k: {**u, "reused_from": None} for k, u in b["units"].items()} == {
        k: {**u, "reused_from": None} for k, u in a["units"].items()}
    assert {u["reused_from"] for u in b["units"].values()} == {str(repo / "a.json")}
    plain = TU.tune("pmnist", **SMOKE, decided=False, out=repo / "c.json")  # made without the decided option
    with pytest.raises(TU.UsageError, match="cannot stand in for ewc's units \\(method_options differ\\)"):
        TU.tune("pmnist", **SMOKE, out=repo / "d.json", reuse={"ewc": repo / "c.json"})
    assert plain["protocol"]["method_options"]["ewc"] == {}
