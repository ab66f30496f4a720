"""hparams.json: validated when read (before any work), looked up per K, and written under a lock."""
import json
import re

import pytest

from metacl_lite.lab import hparams as H
from metacl_lite.cli import main
from metacl_lite.errors import HparamsError
from metacl_lite.vocab import PAPER_METHOD_NAMES

GOOD = {"pmnist": {"methods": {"ewc": {"beta": 100.0}, "ewc-metacl-lambda": {"gamma": 0.0}}, "source": "x"}}


@pytest.mark.parametrize("entry,needle", [
    ({"ewc": {"betta": 100.0}}, "pmnist.methods.ewc must be {\"beta\": value} (ewc uses beta), got betta"),
    ({"ewc": {"beta": float("nan")}}, "pmnist.methods.ewc.beta = nan; it must be a finite number >= 0"),
    ({"ewc": {"beta": -1.0}}, "pmnist.methods.ewc.beta = -1.0; it must be a finite number >= 0"),
    ({"ewc": {"beta": "100"}}, "pmnist.methods.ewc.beta = '100'; it must be a finite number >= 0"),
    ({"ewc": {"beta": True}}, "pmnist.methods.ewc.beta = True"),
    ({"ewc-metacl-lambda": {"beta": 1.0}}, "ewc-metacl-lambda must be {\"gamma\": value}"),
    ({"ewk": {"beta": 1.0}}, "unknown method 'ewk' in pmnist.methods"),
    ({"finetune": {"beta": 1.0}}, "finetune has no beta/gamma"),
])
def test_bad_values_are_refused_naming_file_and_key(hparams_file, entry, needle):
    path = hparams_file(json.dumps({"pmnist": {"methods": entry}}))  # json writes NaN as NaN, as a user's editor may
    with pytest.raises(HparamsError) as e:
        H.load()
    assert str(path) in str(e.value) and needle in str(e.value)


def test_bad_structure_is_refused(hparams_file):
    hparams_file({"pmnist": {**GOOD["pmnist"], "by_K": {"fifty": {}}}})
    with pytest.raises(HparamsError, match="by_K key 'fifty' must be a positive integer K"):
        H.load()
    hparams_file({"mnist": GOOD["pmnist"]})
    with pytest.raises(HparamsError, match="unknown benchmark 'mnist'"):
        H.load()
    hparams_file({"pmnist": {**GOOD["pmnist"], "sauce": "x"}})
    with pytest.raises(HparamsError, match=r"unknown key\(s\) sauce in pmnist"):
        H.load()
    path = hparams_file("{ not json")
    with pytest.raises(HparamsError.__mro__[1], match=f"{path} is not valid JSON"):
        H.load()


def test_a_bad_file_stops_a_run_before_any_work(hparams_file, tmp_path, capsys, monkeypatch):
    from metacl_lite.lab import grid

    hparams_file({"pmnist": {"methods": {"ewc": {"betta": 100.0}}}})
    trained = []
    monkeypatch.setattr(grid, "execute_unit", lambda *a: trained.append(a))
    out = tmp_path / "r.json"
    rc = main(["run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--methods", "ewc", "--seeds", "1",
               "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "pmnist.methods.ewc must be" in err and "Traceback" not in err
    assert trained == [] and not out.exists()


def test_the_committed_file_is_valid():
    """Tuned values for the paper's nine regularised methods from results/tuning-pmnist-K20.json, for L2's three
    (an extension, tuned by `tune --methods l2,...`) from a file of their own, named per method (`sources`), and for
    the memory's methods with a gamma (MetaCL-lambda with both references, `tune --memory 1`) from theirs."""
    from metacl_lite import vocab

    hp = H.load()["pmnist"]
    paper = {m for m in PAPER_METHOD_NAMES if H.strength_key(m)}
    both = {m for m in vocab.MEMORY_METHODS if H.strength_key(m)}
    assert both == {f"{r}-metacl-lambda-{m}" for r in vocab.PAPER_REGULARISERS for m in ("mem", "gem")}
    assert set(hp["methods"]) == paper | set(vocab.family("l2")) | both
    assert hp["source"] == "results/tuning-pmnist-K20.json"
    assert {m: s["source"] for m, s in hp["sources"].items()} == {
        **{m: "results/tuning-pmnist-K20-l2.json" for m in vocab.family("l2")},
        **{m: "results/tuning-pmnist-K20-memory-M1.json" for m in both}}


def test_per_K_values_override_the_default_for_that_K_only(hparams_file):
    hparams_file({"pmnist": {"methods": {"pi": {"beta": 1000.0}, "mas-metacl-lambda": {"gamma": 1.0}},
                             "source": "results/tuning-pmnist-K20.json",
                             "by_K": {"200": {"methods": {"pi": {"beta": 1.0}},
                                              "source": "results/tuning-pmnist-K200.json"}}}})
    assert H.method_hparams("pmnist", "pi") == {"beta": 1000.0}
    assert H.method_hparams("pmnist", "pi", K=50) == {"beta": 1000.0}
    assert H.method_hparams("pmnist", "pi", K=200) == {"beta": 1.0}
    assert H.method_hparams("pmnist", "mas-metacl-lambda", K=200) == {"gamma": 1.0}  # not tuned at 200: default
    assert H.method_config("pmnist", "pi", K=200).beta == 1.0 and H.method_config("pmnist", "pi").beta == 1000.0
    assert H.method_config("pmnist", "mas-metacl-lambda", K=200).gamma == 1.0
    assert H.hparams_source("pmnist", ["finetune", "pi", "mas-metacl-lambda"], K=200) == {
        "pi": "K=200: results/tuning-pmnist-K200.json", "mas-metacl-lambda": "default: results/tuning-pmnist-K20.json"}
    assert H.missing("pmnist", ["finetune", "pi", "ewc"], K=200) == ["ewc"]
    with pytest.raises(H.MissingHparams, match="no tuned beta/gamma for ewc on pmnist"):
        H.method_hparams("pmnist", "ewc", K=200)


def test_store_writes_the_tuning_K_as_default_and_other_K_under_by_K(hparams_file):
    path = hparams_file(GOOD)
    H.store("pmnist", 50, {"ewc": {"beta": 3.0}}, "t50.json", "cmd50")
    hp = json.loads(path.read_text())
    assert hp["pmnist"]["methods"]["ewc"] == {"beta": 100.0}
    assert hp["pmnist"]["by_K"]["50"] == {"methods": {"ewc": {"beta": 3.0}}, "source": "t50.json", "command": "cmd50"}
    H.store("pmnist", 20, {"ewc": {"beta": 10.0}}, "t20.json", "cmd20")
    hp = json.loads(path.read_text())
    assert hp["pmnist"]["methods"] == {"ewc": {"beta": 10.0}, "ewc-metacl-lambda": {"gamma": 0.0}}
    # ewc-metacl-lambda still comes from "x": ewc's own tuning is noted beside it (`store`)
    assert hp["pmnist"]["source"] == "x" and hp["pmnist"]["sources"] == {"ewc": {"source": "t20.json",
                                                                                  "command": "cmd20"}}
    H.store("pmnist", 20, {"ewc": {"beta": 10.0}, "ewc-metacl-lambda": {"gamma": 1.0}}, "t20.json", "cmd20")
    hp = json.loads(path.read_text())
    assert (hp["pmnist"]["source"], hp["pmnist"]["command"]) == ("t20.json", "cmd20") and "sources" not in hp["pmnist"]
    with pytest.raises(HparamsError):
        H.store("pmnist", 20, {"ewc": {"beta": -1.0}}, "t.json", "c")
    assert json.loads(path.read_text()) == hp  # a refused value writes nothing


@pytest.mark.parametrize("options,needle", [
    ({"si": {"pi_xi": 0.1}}, "unknown regulariser 'si'"),
    ({"ewc": {"omega": "sum"}}, "options.ewc must be an object with keys among"),
    ({"ewc": {"omega_normalise": "l2"}}, "options.ewc:"),
    ({"ewc": {"omega_normalise": "l2"}}, "options.ewc: omega_normalise='l2' is not an option; choose one of none, max"),
    ({"pi": {"pi_xi": -1.0}}, "options.pi: pi_xi=-1.0 must be a finite positive number"),
    ({"pi": {"pi_xi": True}}, "options.pi: pi_xi=True must be a finite positive number"),
    ({"pi": {"pi_xi": float("inf")}}, "options.pi: pi_xi=inf must be a finite positive number"),
])
def test_bad_decided_options_are_refused_naming_the_key(hparams_file, options, needle):
    path = hparams_file({"pmnist": {"methods": {}, "options": options}})
    with pytest.raises(H.HparamsError, match=re.escape(needle)):
        H.load(path)


def test_tuned_at_gives_only_the_values_tuned_at_that_K(hparams_file):
    """No fallback: K=50's entry, the top-level entry at the tuning K (20), nothing for an untuned K."""
    hparams_file({"pmnist": {"methods": {"ewc": {"beta": 100.0}}, "source": "a", "command": "b",
                             "by_K": {"50": {"methods": {"pi": {"beta": 3.0}}, "source": "c", "command": "d"}}}})
    assert H.tuned_at("pmnist", 20) == {"ewc": {"beta": 100.0}}
    assert H.tuned_at("pmnist", 50) == {"pi": {"beta": 3.0}}
    assert H.tuned_at("pmnist", 200) == {}
