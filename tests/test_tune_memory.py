"""`tune --memory M` (issue 44): the gamma of MetaCL-lambda with both references is chosen on the validation split
by the existing protocol, one budget per tuning file (recorded in its protocol, named in its file name, a file mixing
budgets refused before any training), written to hparams.json for that method at that K with the tuning file as its
source; the methods without a knob are refused; the borrowed gamma stays only as the recorded fallback."""
import json
import shlex

import pytest

from metacl_lite import vocab
from metacl_lite.cli import main
from metacl_lite.lab import hparams as H
from metacl_lite.lab import tuning as TU

from test_tuning import fake_training, repo  # noqa: F401 (fixtures: fake units, outputs under tmp_path)

MEM = [m.name for m in vocab.MEMORY_METHOD_TABLE if H.strength_key(m.name) is not None]
TINY = ["--n-tasks", "2", "--epochs", "1", "--seed-list", "100", "--gamma-grid", "0,1,100", "--no-progress",
        "--workers", "1"]


@pytest.fixture
def tiny_default(monkeypatch):
    """The default protocol made tiny (2 tasks, 1 epoch, one seed, three gammas), so that tuning with TINY is it."""
    tiny = {"benchmark": "pmnist", "K": 20, "n_tasks": 2, "epochs": 1, "seeds": [100], "beta_grid": list(TU.BETA_GRID),
            "gamma_grid": [0.0, 1.0, 100.0], "val_offset": 500, "val_per_class": 100, "options": {},
            "method_options": {m: {} for m in TU.TUNABLE}}
    monkeypatch.setattr(TU, "default_protocol", lambda b, K: dict(tiny, K=K))


@pytest.fixture
def seen(monkeypatch, fake_training):  # noqa: F811
    """The training configurations the fake units were given (their budgets)."""
    from metacl_lite.lab import grid as G

    cfgs, real = [], G.run_stream

    def record(bench, method, cfg, seed, **kw):
        cfgs.append((method, cfg.memory))
        return real(bench, method, cfg, seed, **kw)

    monkeypatch.setattr(G, "run_stream", record)
    return cfgs


def test_the_six_memory_lambdas_are_the_methods_with_a_knob():
    assert MEM == ["mas-metacl-lambda-mem", "pi-metacl-lambda-mem", "ewc-metacl-lambda-mem", "mas-metacl-lambda-gem",
                   "pi-metacl-lambda-gem", "ewc-metacl-lambda-gem"]
    assert TU.budget_methods(["memory"]) == MEM and all(H.strength_key(m) == "gamma" for m in MEM)


def test_tune_memory_chooses_gamma_on_validation_and_writes_it_for_that_method_and_K(repo, hparams_before_memory_tuning,
                                                                                      seen,  # noqa: F811
                                                                                      tiny_default, capsys):
    assert H.hparams_source("pmnist", MEM, K=50)["mas-metacl-lambda-mem"].startswith("mas-metacl-lambda's gamma, ")
    assert main(["tune", "--benchmark", "pmnist", "--K", "50", "--memory", "2", *TINY]) == 0
    out = repo / "results" / "tuning-pmnist-K50-memory-M2.json"
    doc = json.loads(out.read_text())
    assert doc["methods"] == MEM and {m for m, _ in seen} == set(MEM) and {M for _, M in seen} == {2}
    assert {m: doc["protocol"]["method_options"][m]["memory"] for m in MEM} == dict.fromkeys(MEM, 2)
    assert not any("memory" in o for m, o in doc["protocol"]["method_options"].items() if m not in MEM)
    assert doc["chosen"] == {m: {"gamma": 1.0} for m in MEM}  # the fake's best, on the validation units
    assert doc["provenance"]["command"] == "python -m metacl_lite tune --benchmark pmnist --K 50 --memory 2"
    hp = json.loads(H.HPARAMS_FILE.read_text())["pmnist"]["by_K"]["50"]
    assert {m: hp["methods"][m] for m in MEM} == {m: {"gamma": 1.0} for m in MEM}
    assert hp["sources"]["ewc-metacl-lambda-mem"]["source"] == "results/tuning-pmnist-K50-memory-M2.json"
    assert "ewc-metacl-lambda" not in hp["sources"]  # the paper's methods keep naming their own tuning
    # its own gamma now, not its base method's; still borrowed at a K it was not tuned at without a default of its own
    assert {m: H.tuned_method("pmnist", m, 50) for m in MEM} == {m: m for m in MEM}
    assert H.hparams_source("pmnist", ["pi-metacl-lambda-mem"], K=50) == {
        "pi-metacl-lambda-mem": "K=50: results/tuning-pmnist-K50-memory-M2.json"}
    assert H.tuned_method("pmnist", "pi-metacl-lambda-mem", 200) == "pi-metacl-lambda"
    assert "updated" in capsys.readouterr().out


def test_the_recorded_command_regenerates_the_file_and_m_at_its_default_is_the_same_file(repo, hparams_file, seen):  # noqa: F811
    """Off the default protocol (runs/...); M = 1 given or left out (it is the declared default) is one protocol: the
    second tuning trains nothing."""
    hp = H.HPARAMS_FILE.read_bytes()
    assert main(["tune", "--benchmark", "pmnist", "--methods", "mas-metacl-lambda-mem", *TINY]) == 0
    (out,) = (repo / "runs").glob("tuning-pmnist-K20-*.json")
    first = json.loads(out.read_text())
    assert first["protocol"]["method_options"]["mas-metacl-lambda-mem"]["memory"] == 1
    assert H.HPARAMS_FILE.read_bytes() == hp  # not the default protocol: hparams.json left alone
    cmd = first["provenance"]["command"]
    assert " --memory 1" in cmd and "--methods mas-metacl-lambda-mem" in cmd
    n = len(seen)
    again = shlex.split(cmd)[3:] + ["--workers", "1"]
    assert main(again) == 0 and len(seen) == n  # the same protocol: nothing trained again
    out.unlink()
    assert main(again) == 0
    again = json.loads(out.read_text())
    assert again["protocol"] == first["protocol"] and again["units"].keys() == first["units"].keys()


def test_a_tuning_file_of_another_budget_is_refused_before_any_training(repo, hparams_file, seen, capsys):  # noqa: F811
    out = repo / "runs" / "t.json"
    assert main(["tune", "--memory", "1", *TINY, "--out", str(out), "--no-write"]) == 0
    before, n = out.read_bytes(), len(seen)
    capsys.readouterr()
    assert main(["tune", "--memory", "2", *TINY, "--out", str(out), "--no-write"]) == 2
    err = capsys.readouterr().err
    assert "memory: [1] in the file, [2] here" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert len(seen) == n and out.read_bytes() == before


@pytest.mark.parametrize("argv, needle", [
    (["--methods", "agem", "--memory", "1"], "method 'agem' is not allowed here: agem has no beta or gamma"),
    (["--methods", "metacl-agem"], "metacl-agem has no beta or gamma"),
    (["--methods", "er"], "python -m metacl_lite run --methods er"),
    (["--methods", "pi-metacl-lambda", "--memory", "1"], "memory=1 applies only to the methods that read it"),
    (["--memory", "30"], "memory=30 must be at most K=20"),
    (["--memory", "0"], "--memory"),
    (["--memory", "1.5"], "--memory must be an integer"),
])
def test_bad_memory_tunings_exit_2_before_any_work(repo, hparams_file, fake_training, capsys, argv, needle):  # noqa: F811
    try:
        rc = main(["tune", "--benchmark", "pmnist", *argv, *TINY])
    except SystemExit as e:  # argparse's own refusal of a value of the wrong type: exit 2, one usage line
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err and fake_training == []
    assert not (repo / "runs").exists() and list((repo / "results").iterdir()) == []


def test_budget_file_names_and_the_default_protocol():
    p = TU.default_protocol("pmnist", 20)
    mem = {**p, "method_options": {**p["method_options"], **{m: {"memory": 3} for m in MEM}}}
    assert TU.is_default(mem) and TU.default_tuning_out(mem).name == "tuning-pmnist-K20-memory-M3.json"
    assert TU.is_default({**mem, "memory_policy": "balanced"})  # today's memory, as tune records it
    assert not TU.is_default({**mem, "memory_policy": "end-of-task"})
    assert TU.default_tuning_out(p).name == "tuning-pmnist-K20.json"
    other = {**mem, "method_options": {**mem["method_options"], MEM[0]: {"memory": 3, "omega_normalise": "max"}}}
    assert not TU.is_default(other) and TU.default_tuning_out(other).parent.name == "runs"


# ----------------------------------------------------------------------------------------------------------------
# The reports pick the budget up from the file (vocab.BUDGET_OPTIONS); the paper's files read as before


def _files():
    from metacl_lite.lab.store import load_results

    paper = load_results(TU.REPO_ROOT / "results" / "pmnist-K20.json")
    mem = load_results(TU.REPO_ROOT / "results" / "pmnist-K20-memory-M1.json")
    mem2 = json.loads(json.dumps(mem))
    for o in mem2["config"]["method_options"].values():
        o["memory"] = 2
    return paper, mem, mem2


def test_the_table_names_the_budget_of_a_file_that_has_one():
    from metacl_lite.report.tables import format_table

    paper, mem, mem2 = _files()
    assert format_table(mem).splitlines()[0].startswith("pmnist K=20, 20 tasks, 10 seed(s), M=1 (memory); ours:")
    assert format_table(mem2).splitlines()[0].startswith("pmnist K=20, 20 tasks, 10 seed(s), M=2 (memory); ours:")
    assert format_table(mem, "md").startswith("Budget: M=1 (memory).\n\n| Method |")
    n = len(paper["config"]["seeds"])
    assert format_table(paper).splitlines()[0].startswith(f"pmnist K=20, 20 tasks, {n} seed(s); ours:")
    assert "Budget" not in format_table(paper, "md") and "M=" not in format_table(paper)


def test_interpret_records_the_budget_and_the_borrowed_gamma():
    from metacl_lite.report.interpret import glue_values, hparams_frame, interpretation, source_record

    paper, mem, mem2 = _files()
    info = interpretation(mem2)
    assert info["hparams"]["budgets"] == {"memory": 2} and glue_values(info)["budget"] == "M=2"
    frame = hparams_frame(info)
    assert list(frame.columns)[-1] == "M" and set(frame["M"]) == {"2"} and len(frame) == len(vocab.MEMORY_METHODS)
    assert (frame.set_index("Method").loc["PI-MetaCL-λ-mem", "β/γ"].endswith("(PI-MetaCL-λ's)")
            == mem["config"]["hparams_source"]["pi-metacl-lambda-mem"].startswith("pi-metacl-lambda's"))
    plain = interpretation(paper)
    assert plain["hparams"]["budgets"] == {} and glue_values(plain)["budget"] == "none"
    assert list(hparams_frame(plain).columns) == ["Method", "β/γ", "Tuned at K", "File", "Ω accumulated",
                                                  "Ω normalised", "PI's ξ"]
    assert source_record("pi-metacl-lambda's gamma, K=50: results/t.json") == {"file": "results/t.json", "K": 50,
                                                                               "from": "pi-metacl-lambda"}
    assert source_record("default: results/t.json", 20) == {"file": "results/t.json", "K": 20}


def test_a_method_may_join_a_tuning_file_under_the_same_protocol():
    """MetaCL-λ with GEM's constraints joined the memory's tuning file made for the two-reference methods: a tuning
    file is continued where every protocol field is equal, the per-method ones compared on the methods both tune;
    the joined file's protocol holds every method's options. A method tuned again with other options is refused."""
    from types import SimpleNamespace

    from metacl_lite.lab.files import TuningFile

    p = TU.default_protocol("pmnist", 20)
    old = {"protocol": {**p, "method_options": {**p["method_options"], MEM[0]: {"memory": 1}}}, "units": {},
           "methods": [MEM[0]]}
    new = {**p, "method_options": {**p["method_options"], MEM[3]: {"memory": 1}}}
    stub = SimpleNamespace(req=SimpleNamespace(protocol=new, methods=[MEM[3]]), path="t.json",
                           PER_METHOD=TuningFile.PER_METHOD, text="")
    assert TuningFile.compatible(stub, old) == []
    TuningFile.merge(stub, old)
    assert {m: o for m, o in old["protocol"]["method_options"].items() if m in MEM} == {
        MEM[0]: {"memory": 1}, MEM[3]: {"memory": 1}} and old["methods"] == [MEM[0], MEM[3]]
    other = {**p, "method_options": {**p["method_options"], MEM[0]: {"memory": 1, "omega_normalise": "max"}}}
    stub.req.protocol = other
    assert TuningFile.compatible(stub, old) == [f"method_options[{MEM[0]}]"]
    stub.req.protocol = {**new, "seeds": [7]}
    assert TuningFile.compatible(stub, old) == ["seeds"]
