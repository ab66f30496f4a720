"""Tuning: never overwrites another protocol's results or hparams.json unless asked, resumes unit by unit, records a
command that regenerates exactly its file, and picks the argmax of its own grid."""
import json
import math
import shlex
from pathlib import Path

import numpy as np
import pytest

from metacl_lite.lab import grid as G
from metacl_lite.lab import lattice as L
from metacl_lite.lab import store
from metacl_lite.lab import tuning as TU
from metacl_lite.cli import main
from metacl_lite.errors import ConfigMismatch

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
    # the longer MetaCL-lambda units first (`grid.longest_first`), then PI's; each in its grid's order
    # (then two more gamma values below the smallest positive one, an edge: `choose`)
    assert [c[0] for c in fake_training[:6]] == ["pi-metacl-lambda"] * 3 + ["pi"] * 3
    assert [c[1] for c in fake_training[3:6]] == [0.1, 1.0, 10.0]
    assert (repo / "results" / "tuning-pmnist-K20.json").exists() and doc["hparams_written"]
    hp = json.loads(TU.H.HPARAMS_FILE.read_text())["pmnist"]
    assert hp["methods"]["pi"] == {"beta": 1.0} and hp["methods"]["pi-metacl-lambda"] == {"gamma": 1.0}
    tuned_here = "results/tuning-pmnist-K20.json"  # its path in the (stand-in) repository, as the others keep theirs
    assert TU.H.hparams_source("pmnist", ["pi", "pi-metacl-lambda", "ewc"]) == {
        "pi": f"default: {tuned_here}", "pi-metacl-lambda": f"default: {tuned_here}",
        "ewc": "default: results/tuning-pmnist-K20.json"}
    assert doc["at_edge"] == {"pi": False, "pi-metacl-lambda": False}
    # another K: values for that K only
    doc = TU.tune("pmnist", K=30, methods=["pi"], **kw)
    hp = json.loads(TU.H.HPARAMS_FILE.read_text())["pmnist"]
    assert hp["by_K"]["30"]["methods"] == {"pi": {"beta": 1.0}} and "--K 30" in hp["by_K"]["30"]["command"]
    assert hp["methods"]["pi"] == {"beta": 1.0}


def test_choose_takes_the_argmax_of_its_own_grid_and_flags_edges():
    def choose(*accs):
        return L.choose({"values": [0.1, 1.0, 10.0], "mean_val_acc": list(accs)})

    assert choose(50.0, 61.0, 60.0) == {"value": 1.0, "at_edge": False, "tied": False}
    assert choose(50.0, 55.0, 60.0) == {"value": 10.0, "at_edge": True, "tied": False}
    assert choose(61.0, 61.0, 60.0) == {"value": 0.1, "at_edge": True, "tied": False}
    assert choose(60.0, 60.0, 60.0) == {"value": 0.1, "at_edge": False, "tied": True}  # decides nothing


def test_the_committed_tuning_file_gives_the_committed_values():
    doc = TU.load_tuning(TU.REPO_ROOT / "results" / "tuning-pmnist-K20.json")
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
    g = {"values": list(L.BETA_GRID), "mean_val_acc": [0.0] * 12 + [1.0]}
    assert L.extension(g, L.BETA_GRID) == [30000.0, 100000.0]
    g = {"values": list(L.GAMMA_GRID), "mean_val_acc": [0.0, 1.0] + [0.0] * 12}
    assert L.extension(g, L.GAMMA_GRID) == [0.003, 0.001]  # 0 is searched, but not the half-decades above it
    g = {"values": [0.0, 0.01], "mean_val_acc": [1.0, 0.0]}  # gamma = 0 best: the half-decades below 0.01 are next
    assert L.choose(g) == {"value": 0.0, "at_edge": True, "tied": False}
    assert L.extension(g, [0.0, 0.01]) == [0.003, 0.001]
    g = {"values": [0.0, 1e-5, 3e-5, 1e-4, 3e-4, 0.001, 0.003, 0.01], "mean_val_acc": [1.0] + [0.0] * 7}
    assert L.extension(g, [0.0, 0.01]) == []  # 0 still best six half-decades below the protocol's grid: stop
    g = {"values": [0.0], "mean_val_acc": [1.0]}  # `tune --gamma-grid 0`: nothing above 0 to step from
    assert L.choose(g) == {"value": 0.0, "at_edge": False, "tied": False} and L.extension(g, [0.0]) == []
    g = {"values": [0.01, 0.1], "mean_val_acc": [1.0, 0.0]}
    assert L.extension(g, [0.01, 0.1]) == [0.003, 0.001]
    far = [1e-4 * 3 ** 0 / 10 ** k for k in range(4)]  # already far below the protocol's grid: stop
    g = {"values": sorted(far) + [0.01, 0.1], "mean_val_acc": [1.0] + [0.0] * 5}
    assert L.extension(g, [0.01, 0.1]) == []
    assert L.BETA_GRID == (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)


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


# ----------------------------------------------------------------------------------------------------------------
# Windowed search (tune --around K)
# ----------------------------------------------------------------------------------------------------------------
def test_window_grids_by_hand():
    assert L.window_grid(100.0, "beta") == [10.0, 30.0, 100.0, 300.0, 1000.0]
    assert L.window_grid(0.3, "beta", 1) == [0.1, 0.3, 1.0]
    assert L.window_grid(0.01, "gamma") == [0.0, 0.001, 0.003, 0.01, 0.03, 0.1]
    assert L.window_grid(0.0, "gamma") == [0.0, 0.01, 0.03, 0.1]
    assert [L.half_decade_index(v) for v in (0.03, 0.1, 1.0, 3.0, 3000.0)] == [-3, -2, 0, 1, 7]
    with pytest.raises(TU.UsageError, match="0.5 is not on the half-decade grid"):
        L.window_grid(0.5, "beta")
    with pytest.raises(TU.UsageError, match="a beta of 0 cannot centre"):
        L.window_grid(0.0, "beta")


def test_below_the_smallest_positive_gamma_is_an_edge_whether_it_or_0_is_best():
    """Below the smallest positive gamma only 0 was searched: the half-decades between are unsearched, so a best
    value at either is on the edge, and the extension steps down from the smallest positive one."""
    g = {"values": [0.0, 1.0, 3.0, 10.0], "mean_val_acc": [50.0, 60.0, 59.0, 58.0]}
    assert L.choose(g) == {"value": 1.0, "at_edge": True, "tied": False}
    at_0 = {**g, "mean_val_acc": [61.0, 60.0, 59.0, 58.0]}
    assert L.choose(at_0) == {"value": 0.0, "at_edge": True, "tied": False}
    assert L.choose({**g, "mean_val_acc": [50.0, 59.0, 60.0, 58.0]}) == {"value": 3.0, "at_edge": False, "tied": False}
    assert L.extension({**g, "param": "gamma"}, g["values"]) == [0.3, 0.1] == L.extension(at_0, g["values"])


def _centred(write, values):
    """hparams.json with values tuned at K=50 for every tunable method: `values` = (beta, gamma)."""
    hp = json.loads(TU.H.HPARAMS_FILE.read_text())
    hp["pmnist"]["by_K"]["50"] = {"methods": {m: {TU.H.strength_key(m): values[TU.H.strength_key(m) == "gamma"]}
                                              for m in TU.TUNABLE}, "source": "x", "command": "y"}
    write(hp)


def test_a_windowed_search_trains_the_window_extends_at_an_edge_and_records_it(repo, hparams_file, fake_training):
    _centred(hparams_file, (10.0, 0.1))  # _acc peaks at 1: beta's window 1..100 has it on its lower edge
    kw = dict(n_tasks=2, epochs=1, seeds=(100,), show_progress=False)
    doc = TU.tune("pmnist", K=200, methods=["ewc", "ewc-metacl-lambda"], around=50, **kw)
    p = doc["protocol"]
    assert p["window"] == {"around_K": 50, "half_decades": 2, "centres": {m: (0.1 if "lambda" in m else 10.0)
                                                                          for m in TU.TUNABLE}}
    assert p["method_grids"]["ewc"] == [1.0, 3.0, 10.0, 30.0, 100.0]
    trained = sorted({b for m, b, g, s in fake_training if m == "ewc"})
    assert trained == [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]  # the window, then two half-decades below it
    assert sorted({g for m, b, g, s in fake_training if m == "ewc-metacl-lambda"}) == [0.0, 0.01, 0.03, 0.1, 0.3,
                                                                                       1.0, 3.0, 10.0]
    assert doc["chosen"] == {"ewc": {"beta": 1.0}, "ewc-metacl-lambda": {"gamma": 1.0}}
    assert doc["at_edge"] == {"ewc": False, "ewc-metacl-lambda": False}
    assert doc["grid"]["ewc"]["extended"] == [0.1, 0.3]
    assert " --around 50" in doc["provenance"]["command"] and "--window" not in doc["provenance"]["command"]
    # the same protocol on the full grid is another file; another window is refused in the same file
    out = repo / "runs" / f"tuning-pmnist-K200-{TU.protocol_tag(p)}.json"
    assert out.exists()
    with pytest.raises(ConfigMismatch, match="method_grids|window"):
        TU.tune("pmnist", K=200, methods=["ewc"], around=50, window=1, out=out, **kw)


def test_a_windowed_search_of_the_default_protocol_is_the_default_file(repo, hparams_file, fake_training,
                                                                      monkeypatch):
    _centred(hparams_file, (1.0, 1.0))
    tiny = {"benchmark": "pmnist", "K": 200, "n_tasks": 2, "epochs": 1, "seeds": [100], "beta_grid": list(L.BETA_GRID),
            "gamma_grid": list(L.GAMMA_GRID), "val_offset": 500, "val_per_class": 100, "options": {},
            "method_options": {m: {} for m in TU.TUNABLE}}
    monkeypatch.setattr(TU, "default_protocol", lambda b, K: dict(tiny, K=K))
    doc = TU.tune("pmnist", K=200, methods=["pi"], n_tasks=2, epochs=1, seeds=(100,), show_progress=False, around=50)
    assert doc["canonical"] and doc["hparams_written"] and (repo / "results" / "tuning-pmnist-K200.json").exists()
    assert len(fake_training) == 5 and doc["chosen"] == {"pi": {"beta": 1.0}}


@pytest.mark.parametrize("argv,needle", [
    (["--around", "30"], "--around 30: hparams.json holds no value tuned at K=30 for mas, mas-metacl-beta"),
    (["--window", "3"], "--window sets the width of an --around search"),
    (["--around", "50", "--window", "0"], "--window must be"),
])
def test_bad_windows_exit_2_before_any_work(repo, hparams_file, fake_training, capsys, argv, needle):
    try:
        rc = main(["tune", "--benchmark", "pmnist", "--K", "200", "--no-progress"] + argv)
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    assert rc == 2 and needle in capsys.readouterr().err and fake_training == []


def windowed_choice(full: dict, centre: float, half_decades: int = L.WINDOW):
    """What a windowed search centred on `centre` would choose, replayed on a complete full-grid search of the same
    protocol (`grid_of`'s entry of one method): the window, extended as `tune` extends it, scored by the same units.
    None when the replay needs a value the full grid did not search. This is the evidence that a windowed search finds
    the full grid's choice (`tune(around=...)`)."""
    known = dict(zip(full["values"], full["mean_val_acc"]))
    base = L.window_grid(centre, full["param"], half_decades)
    values = sorted(base)
    while True:
        if any(v not in known for v in values):
            return None
        g = {"values": values, "mean_val_acc": [known[v] for v in values]}
        more = L.extension(g, base)
        if not more:
            return L.choose(g)["value"]
        values = sorted(set(values) | set(more))


def test_the_window_finds_the_full_grids_choice_on_the_committed_files():
    """The evidence for --around: replayed on each committed full-grid search at K (the same units), a window of two
    half-decades either side of the value chosen at the previous K, extended as `tune` extends it, chooses what the
    full grid chose, for every method, between consecutive K from the paper's smallest (20) up, the regime where
    `make reproduce-pmnist` uses the window (K = 500 from 200). Below K = 20 full grids take minutes and are used at
    every K; there some validation curves are flat within noise (PI-MetaCL-λ at K = 5 spans 49.5-49.7 from γ = 0 to
    100), so a window centred on K = 1's value is no evidence either way."""
    docs = TU.committed_tunings("pmnist")
    full_Ks = [K for K, d in docs.items() if "method_grids" not in d["protocol"] and K >= 20]
    pairs = list(zip(full_Ks, full_Ks[1:]))
    assert (20, 50) in pairs and (50, 200) in pairs
    for prev, K in pairs:
        hp_prev = docs[prev]["chosen"]
        full = TU.grid_of(docs[K])
        for m, g in full.items():
            centre = hp_prev[m][g["param"]]
            assert windowed_choice(g, centre) == L.choose(g)["value"], (prev, K, m)


def test_a_complete_grid_whose_best_is_on_an_edge_is_extended_when_tuning_resumes(repo, hparams_file,
                                                                                 fake_training):
    """A file whose grid was complete with its best value on an edge (under the edge rule of the day) gets the
    extension when `tune` is run again with the same protocol: nothing else is trained."""
    kw = dict(SMOKE, beta_grid=(0.1, 0.3))
    out = repo / "t.json"
    doc = TU.tune("pmnist", **kw, out=out)
    assert doc["chosen"] == {"ewc": {"beta": 1.0}} and sorted(b for _, b, _, _ in fake_training) == [0.1, 0.3, 1.0, 3.0]
    d = json.loads(out.read_text())  # as if the file had stopped before extending
    d["units"] = {k: u for k, u in d["units"].items() if u["value"] < 1.0}
    out.write_text(json.dumps(d))
    fake_training.clear()
    doc = TU.tune("pmnist", **kw, out=out)
    assert sorted(b for _, b, _, _ in fake_training) == [1.0, 3.0] and doc["chosen"] == {"ewc": {"beta": 1.0}}


def test_validation_curves_of_committed_tunings(repo, hparams_file, fake_training):
    """The book's per-K curves: one row per searched value of each complete grid, the chosen value flagged (and
    whether it is on an edge); files are found per K of the benchmark, others ignored."""
    kw = dict(n_tasks=2, epochs=1, seeds=(100,), show_progress=False, write_hparams=False)
    TU.tune("pmnist", K=5, methods=["ewc"], beta_grid=(0.1, 1.0, 10.0), out=repo / "results" / "tuning-pmnist-K5.json",
            **kw)
    (repo / "results" / "tuning-pmnist-K7.json").write_text("not read: 7 is no K of the benchmark")
    docs = TU.committed_tunings("pmnist", repo / "results")
    assert list(docs) == [5]
    rows = TU.validation_curves(docs)
    assert [(r["value"], r["val_acc"], r["chosen"], r["at_edge"]) for r in rows] == [
        (0.1, 59.0, False, False), (1.0, 60.0, True, False), (10.0, 59.0, False, False)]


def test_a_read_only_hparams_file_is_said_before_any_training_with_the_option_that_helps(repo, hparams_file,
                                                                                          fake_training, monkeypatch):
    """hparams.json cannot be written (os.access says so; as root it says yes everywhere, hence the stand-in): tune
    stops before any unit with the fix that exists, --no-write, not "another output path" that no option sets."""
    import os

    from metacl_lite.errors import OutputError
    from metacl_lite.lab import atomic

    real = os.access
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: False if Path(p) == TU.H.HPARAMS_FILE else real(p, mode))
    with pytest.raises(OutputError, match=r"hparams.json: permission denied; make it writable, or tune with "
                                          r"--no-write to keep the results in the tuning file only"):
        TU.tune("pmnist", **SMOKE, write_hparams=True)
    assert fake_training == []
