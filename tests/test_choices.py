"""The open-choice decision (metacl_lite.lab.choices) on hand-made tuning files with known answers."""
import json

import pytest

from metacl_lite.lab import choices as CH
from metacl_lite.cli import main
from metacl_lite.errors import UsageError


def test_around_is_five_half_decades_centred_on_the_value():
    assert CH.around(1.0) == [0.1, 0.3, 1.0, 3.0, 10.0]
    assert CH.around(30.0) == [3.0, 10.0, 30.0, 100.0, 300.0]
    assert CH.around(0.01) == [0.001, 0.003, 0.01, 0.03, 0.1]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    from metacl_lite.lab import tuning as TU
    monkeypatch.setattr(CH, "FOLDER", tmp_path / "results" / "open-choices")
    monkeypatch.setattr(CH, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(TU, "REPO_ROOT", tmp_path)
    monkeypatch.setattr("metacl_lite.lab.provenance.REPO_ROOT", tmp_path)
    (tmp_path / "results" / "open-choices").mkdir(parents=True)
    return tmp_path


def _tuning(path, best: dict, spread: float = 0.0):
    """A complete tuning file (today's format: a protocol and its units) whose methods reach `best[m]` (mean val ACC
    over two seeds: best - spread and best + spread) at beta/gamma = 1, and 5 points less at 0.1."""
    from metacl_lite.keys import TuningKey

    units = {}
    for m, b in best.items():
        param = "gamma" if m.endswith("lambda") else "beta"
        for v, accs in ((0.1, (b - 5, b - 5)), (1.0, (b - spread, b + spread))):
            units.update({str(TuningKey(m, param, v, s)): {"method": m, "param": param, "value": v, "seed": s,
                                                           "val_acc": a} for s, a in zip((0, 1), accs)})
    protocol = {"seeds": [0, 1], "beta_grid": [0.1, 1.0], "gamma_grid": [0.1, 1.0], "options": {},
                "method_options": {}}
    path.write_text(json.dumps({"kind": "tuning", "schema": 2, "benchmark": "pmnist", "K": 20, "n_tasks": 20,
                                "epochs": 1, "methods": list(best), "protocol": protocol, "units": units,
                                "chosen": {m: {u["param"]: 1.0} for u in units.values() for m in [u["method"]]}}))


def _write_all(K20: dict, K200: dict, spread200: dict = {}):
    """K20/K200: {alternative: score added to every method's base ACC 80}; spread200: {alternative: seed spread at K=200}."""
    for v, var in CH.CANDIDATES.items():
        fam = [m for r in var.regularisers for m in CH.FAMILY[r]]
        _tuning(CH.alternative_file("pmnist", 20, v), {m: 80.0 + K20.get(v, 0.0) for m in fam})
        for r in var.regularisers:
            _tuning(CH.alternative_file("pmnist", 200, v, r), {r: 70.0 + K200.get(v, 0.0)}, spread200.get(v, 0.0))


def test_the_k20_candidate_wins_only_where_it_also_beats_base_at_k200(folder):
    _write_all({"latest": 1.0, "max": 3.0}, {"latest": 0.5, "max": -0.1})
    d = CH.decide(CH.scores("pmnist"))
    # max is best at K=20 (the candidate) but loses to base at K=200: base is kept, latest is never considered
    assert d["ewc"]["decision"] == "base" and d["ewc"]["candidate"] == "max"
    assert d["ewc"]["margin_over_base"] == {20: 3.0, 200: pytest.approx(-0.1)}
    _write_all({"latest": 1.0, "max": 3.0}, {"latest": 0.5, "max": 0.2})  # the data flips: max everywhere
    d = CH.decide(CH.scores("pmnist"))
    assert {r: d[r]["decision"] for r in CH.ORDER} == {"ewc": "max", "mas": "max", "pi": "max"}
    assert d["ewc"]["options"] == {"omega_normalise": "max"}
    _write_all({"xi1e-3": 5.0}, {"xi1e-3": 5.0})  # xi is PI's alone
    d = CH.decide(CH.scores("pmnist"))
    assert (d["pi"]["decision"], d["ewc"]["decision"]) == ("xi1e-3", "base")


def test_a_mean_margin_that_one_tuning_seed_contradicts_keeps_base(folder):
    _write_all({"max": 3.0}, {"max": 0.2}, spread200={"max": 0.5})  # K=200 seeds: -0.3 and +0.7 against base
    d = CH.decide(CH.scores("pmnist"))["ewc"]
    assert (d["decision"], d["candidate"]) == ("base", "max") and d["margin_over_base"][200] == pytest.approx(0.2)
    assert d["per_seed_margin"] == {20: [3.0, 3.0], 200: [pytest.approx(-0.3), pytest.approx(0.7)]}
    _write_all({"max": 3.0}, {"max": 0.2}, spread200={"max": 0.1})  # -> +0.1 and +0.3: every seed agrees
    assert CH.decide(CH.scores("pmnist"))["ewc"]["decision"] == "max"


def test_the_score_is_the_family_mean_of_best_validation_acc(folder):
    _write_all({}, {})
    _tuning(CH.alternative_file("pmnist", 20, "max"), {"ewc": 80.0, "ewc-metacl-beta": 83.0, "ewc-metacl-lambda": 86.0,
                                                   "mas": 80.0, "mas-metacl-beta": 80.0, "mas-metacl-lambda": 80.0,
                                                   "pi": 80.0, "pi-metacl-beta": 80.0, "pi-metacl-lambda": 80.0})
    s = CH.scores("pmnist")
    assert s["ewc"][20]["max"]["score"] == 83.0 and s["ewc"][20]["base"]["score"] == 80.0
    assert s["ewc"][200]["base"]["methods"] == {"ewc": 70.0}


def test_undecided_while_files_are_missing_and_k200_needs_k20_first(folder):
    with pytest.raises(UsageError, match="decide at K=20 first"):
        CH.plan("pmnist", 200)
    _write_all({"latest": 1.0}, {})
    CH.alternative_file("pmnist", 200, "latest", "mas").unlink()
    d = CH.decide(CH.scores("pmnist"))
    assert d["mas"] == {"decision": "undecided", "candidate": "latest", "missing": ["latest@K=200"]}
    runs = CH.plan("pmnist", 200)  # base and the K=20 candidate, per plain method, around its K=20 value
    assert [(r.alternative, r.methods) for r in runs] == [(v, (m,)) for m in CH.ORDER for v in ("base", "latest")]
    assert all(r.beta_grid == (0.1, 0.3, 1.0, 3.0, 10.0) for r in runs)
    _write_all({}, {})
    assert [r.alternative for r in CH.plan("pmnist", 200)] == ["base"] * 3  # a tie at K=20 keeps base alone


def test_summary_only_writes_the_decision_file_and_the_decided_options(folder, hparams_file, capsys, monkeypatch):
    tuned = []  # the canonical K=20 tuning that apply() makes from the winners' units (tuning.tune's own test: reuse)
    monkeypatch.setattr("metacl_lite.lab.tuning.tune_request", lambda b, K, **kw: (b, K, kw))
    monkeypatch.setattr("metacl_lite.lab.tuning.tune_grid", lambda req: tuned.append(req) or {"K": req[1]})
    _write_all({"latest": 1.0}, {"latest": 1.0})
    CH.alternative_file("pmnist", 200, "latest", "mas").unlink()  # undecided: hparams.json is left alone
    before = CH.H.HPARAMS_FILE.read_bytes()
    assert main(["choices", "--summary-only"]) == 0 and CH.H.HPARAMS_FILE.read_bytes() == before and tuned == []
    _write_all({"latest": 1.0}, {"latest": 1.0})
    assert main(["choices", "--summary-only"]) == 0
    hp = json.loads(CH.H.HPARAMS_FILE.read_text())["pmnist"]
    assert hp["options"] == {r: {"omega_accumulate": "latest"} for r in CH.ORDER}
    assert hp["options_source"] == "results/open-choices-pmnist.json"
    assert CH.H.method_config("pmnist", "pi-metacl-beta").omega_accumulate == "latest"
    assert CH.H.method_config("pmnist", "finetune").omega_accumulate == "sum"
    [(b, K, kw)] = tuned
    assert (b, K, kw["force"]) == ("pmnist", 20, True)
    assert kw["reuse"] == {m: CH.alternative_file("pmnist", 20, "latest") for r in CH.ORDER for m in CH.FAMILY[r]}
    doc = json.loads((folder / "results" / "open-choices-pmnist.json").read_text())
    assert doc["decisions"]["mas"]["decision"] == "latest"
    assert doc["provenance"]["command"] == "python -m metacl_lite choices --benchmark pmnist"
    assert doc["scores"]["pi"]["200"]["latest"]["files"] == ["results/open-choices/tuning-pmnist-K200-latest-pi.json"]
    out = capsys.readouterr().out
    assert "ewc  latest (candidate: latest; margin over base per K: K=20: +1.00, K=200: +1.00)" in out
    assert "hparams.json: the decided options, and the K=20 values" in out


def test_running_only_k20_never_decides_on_k20_alone(folder, hparams_file, monkeypatch):
    """choices --K 20 runs the K=20 alternatives only; the decision still needs K=200, so nothing is applied."""
    ran = []
    monkeypatch.setattr(CH, "execute", lambda b, K, *a, **k: ran.append(K))
    _write_all({"latest": 1.0}, {})
    for r in CH.ORDER:
        CH.alternative_file("pmnist", 200, "latest", r).unlink()
    before = CH.H.HPARAMS_FILE.read_bytes()
    assert main(["choices", "--K", "20"]) == 0 and ran == [20]
    doc = json.loads((folder / "results" / "open-choices-pmnist.json").read_text())
    assert doc["decision_Ks"] == [20, 200] and doc["decisions"]["ewc"]["decision"] == "undecided"
    assert CH.H.HPARAMS_FILE.read_bytes() == before


def test_the_decision_table_holds_scores_candidates_and_decisions(folder, hparams_file, monkeypatch):
    monkeypatch.setattr("metacl_lite.lab.tuning.tune_request", lambda b, K, **kw: K)
    monkeypatch.setattr("metacl_lite.lab.tuning.tune_grid", lambda K: {"K": K})
    _write_all({"max": 3.0}, {"max": 0.2}, spread200={"max": 0.5})
    CH.alternative_file("pmnist", 200, "latest", "ewc").unlink()  # not a candidate: not run at K=200
    assert main(["choices", "--summary-only"]) == 0
    doc = json.loads((folder / "results" / "open-choices-pmnist.json").read_text())
    t = CH.choices_table(doc)
    assert t.loc[("ewc", "base"), ["K=20", "K=200", "candidate", "decided"]].tolist() == [80.0, 70.0, False, True]
    assert t.loc[("ewc", "max"), ["K=20", "K=200", "candidate", "decided"]].tolist() == [83.0, 70.2, True, False]
    latest = t.loc[("ewc", "latest"), ["K=20", "K=200"]]  # latest: K=20 only
    assert latest["K=20"] == 80.0 and latest.isna()["K=200"]
    d = doc["decisions"]["ewc"]
    assert (d["decision"], d["candidate"]) == ("base", "max")
    assert {K: [round(x, 2) for x in xs] for K, xs in d["per_seed_margin"].items()} == {"20": [3.0, 3.0],
                                                                                          "200": [-0.3, 0.7]}
    assert d["kept_base_because"] == CH.KEPT_BASE.format(cand="max", K=20)

def test_choices_trains_each_alternative_with_its_own_options(folder, hparams_file, fake_units, monkeypatch):
    """Through the command, down to the training configuration of every unit: each alternative's tuning trains its
    regularisers' methods with that alternative's options (and nothing else), not the base options."""
    from metacl_lite.lab import grid as G

    monkeypatch.setattr(G, "execute_unit", _scored(G.execute_unit))  # a peak inside each grid: no edge extensions
    made, make = {}, G.make_benchmark

    def once(spec, K, **kw):  # each stream built once (the grid keeps one per process; the tuning seeds alternate)
        key = (spec.name, K, *sorted(kw.items()))
        if key not in made:
            made[key] = make(spec, K, **kw)
        return made[key]

    monkeypatch.setattr(G, "make_benchmark", once)
    assert main(["choices", "--K", "20", "--workers", "1", "--no-progress"]) == 0
    defaults = {"omega_accumulate": "sum", "omega_normalise": "none", "pi_xi": 0.1}
    expected = {(m, tuple(sorted({**defaults, **v.options}.items())))
                for v in CH.CANDIDATES.values() for r in v.regularisers for m in CH.FAMILY[r]}
    trained = {(u.method, tuple(sorted((k, getattr(cfg, k)) for k in defaults))) for u, cfg in fake_units}
    assert trained == expected
    assert len(expected) == 4 * 9 + 3  # four alternatives of every regulariser's three methods, xi of PI's three


def _scored(fake):
    """The fake unit, with a validation ACC that peaks at the middle of the half-decade ladder (beta or gamma = 1)."""
    import math

    def unit(u, bench, cfg, evaluate_rows="all"):
        out = fake(u, bench, cfg, evaluate_rows)
        value = cfg.gamma if u.method and u.method.endswith("lambda") else cfg.beta
        if "acc" in out and value:
            out["acc"] = [50.0 - abs(math.log10(value))] * len(out["acc"])
        return out
    return unit


def test_every_tuning_run_of_a_decision_k_is_checked_before_the_first_trains(folder, monkeypatch):
    """`execute` builds each run's request (`tuning.tune_request`) first: a bad one stops it before anything trains."""
    trained = []
    monkeypatch.setattr("metacl_lite.lab.tuning.tune_grid", lambda req: trained.append(req))
    good = CH.Run("base", 20, ("mas",), None, folder / "a.json")
    bad = CH.Run("base", 20, ("mas",), (0.1, -1.0), folder / "b.json")  # a negative beta: refused by its request
    monkeypatch.setattr(CH, "plan", lambda b, K: [good, bad])
    with pytest.raises(UsageError, match="beta grid"):
        CH.execute("pmnist", 20, log=lambda line: None)
    assert trained == []
    monkeypatch.setattr(CH, "plan", lambda b, K: [good])
    CH.execute("pmnist", 20, log=lambda line: None)
    assert [(r.methods, r.out) for r in trained] == [(("mas",), folder / "a.json")]
