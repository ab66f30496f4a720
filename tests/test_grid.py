"""The grid: each unit trains with the configuration it should, a finished file is left alone, and every invocation
that contributed units is recorded."""
import json

import pytest

from metacl_lite.lab import grid as G
from metacl_lite.paths import REPO_ROOT
from metacl_lite.lab.checks import effective_options
from metacl_lite.errors import ConfigMismatch
from metacl_lite.training import TrainConfig
from metacl_lite.vocab import PAPER_METHOD_NAMES

TINY = dict(K=5, n_tasks=2, epochs=1, show_progress=False)


@pytest.fixture
def spy(fake_units):
    """Replace the training of a unit by a record of what it would train with (conftest.fake_units)."""
    return fake_units


def test_each_unit_trains_with_its_tuned_beta_or_gamma(hparams_file, spy, tmp_path):
    hparams_file({"pmnist": {"methods": {"ewc": {"beta": 7.5}, "ewc-metacl-lambda": {"gamma": 0.25},
                                         "mas-metacl-beta": {"beta": 3.0}},
                             "by_K": {"5": {"methods": {"ewc": {"beta": 0.5}}}}}})
    G.run_experiment("pmnist", seeds=[0], methods=["finetune", "ewc", "ewc-metacl-lambda", "mas-metacl-beta"],
                     out=tmp_path / "r.json", **TINY)
    cfgs = {(u.kind, u.method): c for u, c in spy}
    base = TrainConfig(epochs=1)
    assert cfgs[("run", "ewc")] == TrainConfig(epochs=1, beta=0.5)  # the K=5 value wins over the default 7.5
    assert cfgs[("run", "ewc-metacl-lambda")] == TrainConfig(epochs=1, gamma=0.25)
    assert cfgs[("run", "mas-metacl-beta")] == TrainConfig(epochs=1, beta=3.0)
    assert cfgs[("run", "finetune")] == cfgs[("reference", None)] == cfgs[("joint", None)] == base
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["config"]["method_hparams"]["ewc"] == {"beta": 0.5}
    assert doc["config"]["hparams_source"]["ewc"].startswith("K=5: ")


def test_a_finished_file_is_not_rewritten(hparams_file, spy, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, **TINY)
    before, mtime = out.read_bytes(), out.stat().st_mtime_ns
    n = len(spy)
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, **TINY)
    assert len(spy) == n and out.read_bytes() == before and out.stat().st_mtime_ns == mtime


def test_every_contributing_invocation_is_recorded(hparams_file, spy, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, **TINY)
    G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune", "metacl"], out=out, **TINY)
    doc = json.loads(out.read_text())
    invs = doc["provenance"]["invocations"]
    assert [sorted(i["units"]) for i in invs] == [
        ["oracle/0", "references/0", "runs/finetune/0"],
        ["oracle/1", "references/1", "runs/finetune/1", "runs/metacl/0", "runs/metacl/1"]]
    assert doc["provenance"]["wall_s_total"] == 8.0
    assert doc["provenance"]["command"] == ("python -m metacl_lite run --benchmark pmnist --K 5 --seeds 2 "
                                            f"--methods finetune,metacl --n-tasks 2 --epochs 1 --out {out}")
    assert doc["config"]["methods"] == ["finetune", "metacl"] and doc["config"]["seeds"] == [0, 1]


def test_recorded_command_is_relative_inside_the_repository(hparams_file, spy):
    from metacl_lite.lab.grid import run_command

    cfg = {"benchmark": "pmnist", "K": 50, "seeds": [0, 1, 2], "methods": list(PAPER_METHOD_NAMES), "n_tasks": 20,
           "train": {"epochs": 5}, "data_source": "auto", "model": {}}
    assert run_command(cfg, G.default_out("pmnist", 50)) == "python -m metacl_lite run --benchmark pmnist --K 50 --seeds 3"
    assert run_command(cfg, REPO_ROOT / "runs" / "x.json").endswith(" --seeds 3 --out runs/x.json")
    cfg.update(seeds=[3, 4], data_source="raw")
    assert run_command(cfg, G.default_out("pmnist", 50)).endswith("--K 50 --seed-list 3,4 --data raw")
    cfg["train"]["compile"] = "auto"  # a compiled file refuses eager units: its command must say so
    assert run_command(cfg, G.default_out("pmnist", 50)).endswith("--K 50 --seed-list 3,4 --compile auto --data raw")
    cfg["train"]["compile"] = "off"
    assert run_command(cfg, G.default_out("pmnist", 50)).endswith("--K 50 --seed-list 3,4 --data raw")


@pytest.mark.parametrize("kw,needle", [
    (dict(seeds=[0, -1]), "seed -1 is not a non-negative integer"),
    (dict(seeds=[1, 1]), "seed 1 is given twice"),
    (dict(seeds=[]), "no seeds given"),
    (dict(methods=[]), "the list of methods is empty"),
    (dict(methods=["pi", "pi"]), "method 'pi' is given twice"),
    (dict(methods=["sgd"]), "unknown method 'sgd'"),
    (dict(n_tasks=1), "n_tasks=1: a stream needs at least 2 tasks"),
    (dict(epochs=0), "epochs=0 must be a whole number from 1 to 1000"),
    (dict(epochs=1000001), "epochs=1000001 must be a whole number from 1 to 1000"),
    (dict(n_tasks=1001), "n_tasks=1001: Permuted MNIST has at most 1000 tasks"),
])
def test_library_callers_get_the_same_checks(hparams_file, spy, tmp_path, kw, needle):
    args = {**dict(seeds=[0], methods=["finetune"], out=tmp_path / "r.json"), **TINY, **kw}
    with pytest.raises(G.UsageError, match=needle):
        G.run_experiment("pmnist", **args)
    assert spy == [] and not (tmp_path / "r.json").exists()


def test_cifar_stream_longer_than_the_dataset_is_refused(hparams_file, spy, tmp_path):
    with pytest.raises(G.UsageError, match="n_tasks=11: Split CIFAR-100 has at most 10 tasks"):
        G.run_experiment("cifar100", 20, seeds=[0], n_tasks=11, out=tmp_path / "r.json")


def test_a_file_made_before_new_training_options_is_refused_until_current(hparams_file, spy, tmp_path):
    """A run interrupted before a training option existed (its config has no train.pi_xi): refused in one line naming
    what it lacks, the migration of metacl-lite at commit 82768e1 and the command in its provenance; with the option at
    its default (as that migration wrote it) it continues, training only the units it lacks."""
    from metacl_lite.errors import FileFormatError

    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune"], out=out, **TINY)
    doc = json.loads(out.read_text())
    del doc["config"]["train"]["pi_xi"]  # as if pi_xi had been added after the file was made (default 0.1)
    del doc["config"]["threads"]  # and the threads recorded since
    out.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=r"r.json was written by an older metacl-lite \(its config has no "
                                              r"threads, train.pi_xi\): migrate it once with `python -m "
                                              r"metacl_lite.tools migrate .*r.json` from metacl-lite at commit "
                                              r"82768e1 \(the last with it\), or regenerate it with the command in "
                                              r"its provenance"):
        G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], out=out, **TINY)
    assert json.loads(out.read_text()) == doc  # refused before any work: the file as it was
    doc["config"]["train"]["pi_xi"], doc["config"]["threads"] = 0.1, 1  # as the migration wrote them
    out.write_text(json.dumps(doc))
    G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], out=out, **TINY)
    after = json.loads(out.read_text())
    assert set(after["runs"]) == {"finetune/0", "finetune/1"} and after["runs"]["finetune/0"] == doc["runs"]["finetune/0"]
    doc["config"]["train"]["pi_xi"] = 0.5  # a real difference is still refused
    doc["config"]["threads"] = 1
    out.write_text(json.dumps(doc))
    with pytest.raises(ConfigMismatch, match=r"\(train.pi_xi: 0.5 in the file, 0.1 here\)"):
        G.run_experiment("pmnist", seeds=[0, 2], methods=["finetune"], out=out, **TINY)


def test_open_choices_reach_every_unit_and_the_command(hparams_file, spy, tmp_path):
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune", "ewc", "pi"], out=out,
                     options={"omega_accumulate": "latest", "omega_normalise": "minmax", "pi_xi": 0.001}, **TINY)
    for unit, cfg in spy:
        assert (cfg.omega_accumulate, cfg.omega_normalise, cfg.pi_xi) == ("latest", "minmax", 0.001), unit
    doc = json.loads(out.read_text())
    assert doc["provenance"]["command"].endswith(
        "--n-tasks 2 --epochs 1 --omega-accumulate latest --omega-normalise minmax --pi-xi 0.001 " f"--out {out}")
    with pytest.raises(G.UsageError, match="unknown option"):
        G.run_experiment("pmnist", seeds=[0], out=out, options={"omega": "sum"}, **TINY)
    with pytest.raises(G.UsageError, match="omega_normalise='l2' is not an option"):
        G.run_experiment("pmnist", seeds=[0], out=out, options={"omega_normalise": "l2"}, **TINY)


def test_gamma_controls_train_metacl_lambda_with_the_beta_counterparts_beta_or_zero(hparams_file, spy, tmp_path,
                                                                                  monkeypatch):
    """run --gamma beta: each MetaCL-lambda trains with gamma = the tuned beta of its MetaCL-beta counterpart at this
    K; --gamma 0: gamma = 0. Both recorded in the config and the command, written to the control file by default."""
    monkeypatch.setattr("metacl_lite.lab.files.REPO_ROOT", tmp_path)
    hparams_file({"pmnist": {"methods": {"ewc-metacl-beta": {"beta": 7.5}, "ewc-metacl-lambda": {"gamma": 0.25},
                                         "pi-metacl-beta": {"beta": 3.0}},
                             "by_K": {"5": {"methods": {"pi-metacl-beta": {"beta": 30.0}}}}}})
    lam = ["pi-metacl-lambda", "ewc-metacl-lambda"]
    G.run_experiment("pmnist", seeds=[0], methods=lam, gamma="beta", **TINY)
    cfgs = {(u.kind, u.method): c for u, c in spy}
    assert cfgs[("run", "pi-metacl-lambda")] == TrainConfig(epochs=1, gamma=30.0)  # the K=5 beta
    assert cfgs[("run", "ewc-metacl-lambda")] == TrainConfig(epochs=1, gamma=7.5)
    doc = json.loads((tmp_path / "results" / "pmnist-K5-control-gamma-beta.json").read_text())
    assert doc["config"]["gamma_control"] == "beta"
    assert doc["config"]["method_hparams"] == {"pi-metacl-lambda": {"gamma": 30.0}, "ewc-metacl-lambda": {"gamma": 7.5}}
    assert doc["provenance"]["command"] == ("python -m metacl_lite run --benchmark pmnist --K 5 --seeds 1 --methods "
                                            "pi-metacl-lambda,ewc-metacl-lambda --n-tasks 2 --epochs 1 --gamma beta")
    spy.clear()
    G.run_experiment("pmnist", seeds=[0], methods=["mas-metacl-lambda"], gamma="0", **TINY)  # no hparams needed
    assert [c.gamma for u, c in spy if u.kind == "run"] == [0.0]
    assert (tmp_path / "results" / "pmnist-K5-control-gamma-0.json").exists()
    with pytest.raises(G.UsageError, match="MetaCL-lambda methods only \\(with no memory\\), not ewc"):
        G.run_experiment("pmnist", seeds=[0], methods=["ewc"], gamma="0", **TINY)
    with pytest.raises(G.H.MissingHparams, match="mas-metacl-beta"):
        G.run_experiment("pmnist", seeds=[0], methods=["mas-metacl-lambda"], gamma="beta", **TINY)
    from metacl_lite.errors import ConfigMismatch
    with pytest.raises(ConfigMismatch, match="gamma_control"):
        G.run_experiment("pmnist", seeds=[1], methods=lam, gamma="0",
                         out=tmp_path / "results" / "pmnist-K5-control-gamma-beta.json", **TINY)


def test_decided_options_reach_each_regularisers_units_and_a_change_is_refused(hparams_file, spy, tmp_path):
    """hparams.json "options" (decided per regulariser by `choices`): each method trains with its regulariser's
    choices, an explicit option overrides them for every method, config.method_options records what each used, and
    continuing a file after the decisions changed is refused."""
    hp = json.loads(G.H.HPARAMS_FILE.read_text())
    hp["pmnist"]["options"] = {"ewc": {"omega_accumulate": "latest", "omega_normalise": "minmax"},
                               "pi": {"pi_xi": 0.001}}
    hparams_file(hp)
    out = tmp_path / "r.json"
    G.run_experiment("pmnist", seeds=[0], methods=["finetune", "ewc-metacl-beta", "pi", "mas"], out=out, **TINY)
    cfgs = {u.method: c for u, c in spy if u.kind == "run"}
    assert (cfgs["ewc-metacl-beta"].omega_accumulate, cfgs["ewc-metacl-beta"].omega_normalise) == ("latest", "minmax")
    assert (cfgs["pi"].pi_xi, cfgs["pi"].omega_accumulate) == (0.001, "sum")
    assert (cfgs["mas"].omega_accumulate, cfgs["mas"].pi_xi, cfgs["finetune"].omega_normalise) == ("sum", 0.1, "none")
    doc = json.loads(out.read_text())
    assert doc["config"]["method_options"]["pi"] == {"omega_accumulate": "sum", "omega_normalise": "none",
                                                     "pi_xi": 0.001}
    assert "finetune" not in doc["config"]["method_options"]
    assert effective_options(doc["config"], "ewc-metacl-beta")["omega_normalise"] == "minmax"
    spy.clear()
    G.run_experiment("pmnist", seeds=[0], methods=["ewc"], out=tmp_path / "o.json",
                     options={"omega_normalise": "none"}, **TINY)
    assert [c.omega_normalise for u, c in spy if u.kind == "run"] == ["none"]  # the command line wins
    hp["pmnist"]["options"]["pi"] = {"pi_xi": 0.1}
    hparams_file(hp)
    from metacl_lite.errors import ConfigMismatch
    with pytest.raises(ConfigMismatch, match=r"method_options\[pi\]"):
        G.run_experiment("pmnist", seeds=[1], methods=["pi"], out=out, **TINY)


def test_units_run_seed_by_seed_longest_first(hparams_file, spy, tmp_path):
    """Each seed's units in one block (an interrupted grid keeps whole seeds); in the block MetaCL-lambda and -beta
    first, then MetaCL, the plain regularisers, fine-tune, and the short references and oracle last, so that on a pool
    of workers no long unit is left running alone at the end."""
    hparams_file({"pmnist": {"methods": {"pi": {"beta": 1.0}, "pi-metacl-beta": {"beta": 1.0},
                                         "pi-metacl-lambda": {"gamma": 1.0}}}})
    G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune", "metacl", "pi", "pi-metacl-beta", "pi-metacl-lambda"],
                     out=tmp_path / "r.json", **TINY)
    block = ["run pi-metacl-lambda", "run pi-metacl-beta", "run metacl", "run pi", "run finetune", "reference None",
             "joint None"]
    assert [(f"{u.kind} {u.method}", u.seed) for u, _ in spy] == [(b, s) for s in (0, 1) for b in block]


def test_a_gamma_control_copies_the_references_and_oracle_of_the_main_file(hparams_file, spy, tmp_path, monkeypatch):
    """The control's references and oracle are the main file's units (same configuration): copied, not trained
    again, for the seeds the main file has; with another configuration (here 2 epochs) nothing is copied."""
    monkeypatch.setattr("metacl_lite.lab.files.REPO_ROOT", tmp_path)
    monkeypatch.setattr("metacl_lite.lab.provenance.REPO_ROOT", tmp_path.resolve())
    G.run_experiment("pmnist", seeds=[0, 1], methods=["finetune"], **TINY)
    main = json.loads((tmp_path / "results" / "pmnist-K5.json").read_text())
    spy.clear()
    G.run_experiment("pmnist", seeds=[0, 1, 2], methods=["mas-metacl-lambda"], gamma="0", **TINY)
    assert sorted((u.kind, u.seed) for u, _ in spy) == [("joint", 2), ("reference", 2), ("run", 0), ("run", 1),
                                                        ("run", 2)]
    doc = json.loads((tmp_path / "results" / "pmnist-K5-control-gamma-0.json").read_text())
    for section in ("references", "oracle"):
        assert doc[section]["0"] == {**main[section]["0"], "wall_s": 0.0, "reused_from": "results/pmnist-K5.json"}
        assert "reused_from" not in doc[section]["2"]
    spy.clear()
    G.run_experiment("pmnist", seeds=[0], methods=["mas-metacl-lambda"], gamma="0",
                     **{**TINY, "epochs": 2}, out=tmp_path / "other.json")
    assert sorted(u.kind for u, _ in spy) == ["joint", "reference", "run"]
