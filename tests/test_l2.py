"""L2, a fourth regulariser and an extension the paper did not run (issue 35 item 3): Omega = 1 for every parameter;
it trains and tunes through the command line on a small stream, `table` shows its rows after the paper's, marked,
with "–" in the paper's columns, and the default run still trains the paper's eleven methods only."""
from __future__ import annotations

import json

import pytest
import torch

from metacl_lite import vocab
from metacl_lite.cli import main
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.importance import L2, accumulate_importance
from metacl_lite.lab import hparams as H
from metacl_lite.lab.checks import check_methods
from metacl_lite.models import mlp
from metacl_lite.report.tables import comparison_rows
from metacl_lite.training import IMPORTANCE, METHODS, RegState, TrainConfig, train_experience

L2_FAMILY = vocab.family("l2")
TINY = ["--K", "5", "--n-tasks", "2", "--epochs", "1", "--no-progress", "--workers", "1"]


def test_l2_omega_is_one_per_parameter_and_sums_over_tasks():
    bench = permuted_mnist(K=5, n_tasks=2, seed=0, split="val")
    torch.manual_seed(0)
    model, reg = mlp(784, (8,), 10, 2), RegState()
    n = sum(p.numel() for p in model.parameters())
    imp = IMPORTANCE["l2"](TrainConfig())
    assert isinstance(imp, L2) and torch.equal(imp.end_task(model, bench.train_stream[0]), torch.ones(n))
    cfg = TrainConfig(epochs=1, batch_size=10, bundle_size=5, beta=0.5)
    gen = torch.Generator().manual_seed(0)
    for t in range(2):
        train_experience(model, bench.train_stream[t], METHODS["l2"], cfg, reg, gen)
        assert torch.equal(reg.omega, torch.full((n,), float(t + 1)))  # summed over tasks (the default)
    assert torch.equal(accumulate_importance(torch.ones(3), torch.ones(3), "latest"), torch.ones(3))


def test_the_default_run_and_tuning_are_the_papers_methods():
    assert check_methods(None) == list(vocab.PAPER_METHOD_NAMES) and len(vocab.PAPER_METHOD_NAMES) == 11
    assert check_methods(list(L2_FAMILY)) == list(L2_FAMILY)
    from metacl_lite.lab.tuning import REGULARISED, TUNABLE

    assert len(TUNABLE) == 9 and not set(L2_FAMILY) & set(TUNABLE) and set(L2_FAMILY) <= set(REGULARISED)


def test_l2_without_tuned_values_says_to_tune(hparams_file, tmp_path, capsys):
    hp = json.loads((H.Path(H.__file__).parent / "hparams.json").read_text())  # the committed values, without L2's
    for entry in (hp["pmnist"], *hp["pmnist"].get("by_K", {}).values()):
        for m in L2_FAMILY:
            entry["methods"].pop(m, None)
            entry.get("sources", {}).pop(m, None)
        if not entry.get("sources", True):
            entry.pop("sources")
    hparams_file(hp)
    out = tmp_path / "l2.json"
    rc = main(["run", "--benchmark", "pmnist", *TINY, "--seeds", "1", "--methods", "l2", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and not out.exists()
    assert "python -m metacl_lite tune --benchmark pmnist --K 5 --methods l2`" in err  # tune's default skips L2


def test_l2_tunes_then_trains_and_shows_as_an_extension(hparams_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("metacl_lite.lab.tuning.REPO_ROOT", tmp_path)  # hparams.json names files in the repository
    (tmp_path / "results").mkdir()
    tuning = tmp_path / "results" / "tuning-l2.json"
    # three epochs: with one, task 2 takes a single step, where the penalty's gradient is 0 (the parameters are still
    # the anchor), so every value scores the same and the grid decides nothing
    tiny3 = [("3" if a == "1" and TINY[i - 1] == "--epochs" else a) for i, a in enumerate(TINY)]
    rc = main(["tune", "--benchmark", "pmnist", *tiny3, "--seed-list", "100", "--methods", ",".join(L2_FAMILY),
               "--beta-grid", "0.1,1000", "--gamma-grid", "0,1000", "--out", str(tuning), "--write-hparams"])
    assert rc == 0, capsys.readouterr().err
    doc = json.loads(tuning.read_text())
    assert doc["methods"] == list(L2_FAMILY) and set(doc["chosen"]) == set(L2_FAMILY)
    assert {m: g["param"] for m, g in doc["grid"].items()} == {"l2": "beta", "l2-metacl-beta": "beta",
                                                                 "l2-metacl-lambda": "gamma"}
    assert all(doc["grid"][m]["complete"] for m in L2_FAMILY)
    chosen = {m: H.method_hparams("pmnist", m, K=5) for m in L2_FAMILY}  # written for K = 5 (by_K)
    assert chosen == doc["chosen"]

    out = tmp_path / "pmnist-K5-l2.json"
    rc = main(["run", "--benchmark", "pmnist", *TINY, "--seeds", "1", "--methods", "finetune," + ",".join(L2_FAMILY),
               "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    res = json.loads(out.read_text())
    assert res["config"]["methods"] == ["finetune", *L2_FAMILY]
    assert {k.split("/")[0] for k in res["runs"]} == {"finetune", *L2_FAMILY}
    assert res["config"]["method_hparams"]["l2-metacl-lambda"] == chosen["l2-metacl-lambda"]

    rows = comparison_rows(res)
    assert [r["method"] for r in rows] == ["finetune", "joint", *L2_FAMILY]  # the paper's rows, then the extension's
    assert [r["label"] for r in rows[2:]] == ["L2 (not in the paper)", "L2-MetaCL-β (not in the paper)",
                                              "L2-MetaCL-λ (not in the paper)"]
    assert all(r[f"{k} paper"] == "–" and r[f"{k} ours"] != "–" for r in rows[2:] for k in ("ACC", "BT", "FA"))
    capsys.readouterr()
    assert main(["table", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.index("Fine tune") < text.index("Joint training") < text.index("L2 (not in the paper)")


def files_with_and_without(extension) -> tuple[dict, dict]:
    """Hand-made results files of K = 20 and 50 ({K: file}) with the paper's methods, and the same files with the
    `extension` methods' runs added: the claims must read both the same."""
    import random

    rng = random.Random(0)

    def res(K, methods):
        runs = {f"{m}/{s}": {"acc_matrix": [[rng.uniform(40, 70), None], [rng.uniform(40, 70), rng.uniform(40, 70)]]}
                for m in methods for s in range(3)}
        return {"config": {"benchmark": "pmnist", "K": K, "n_tasks": 2, "seeds": [0, 1, 2], "methods": list(methods),
                           "method_hparams": {}},
                "runs": runs, "references": {str(s): {"acc": [50.0, 50.0]} for s in range(3)}, "oracle": {}}

    paper = {K: res(K, vocab.PAPER_METHOD_NAMES) for K in (20, 50)}
    extended = {K: {**r, "config": {**r["config"], "methods": [*r["config"]["methods"], *extension]},
                    "runs": {**r["runs"], **res(K, extension)["runs"]}} for K, r in paper.items()}
    return paper, extended


def test_the_claims_and_their_holm_families_ignore_an_extension():
    """Files that also hold L2's runs give the claims exactly the rows (tests, families, verdicts) they give without
    them: the claims are about the paper's regularisers (vocab.PAPER_REGULARISERS), whatever the package trains."""
    from metacl_lite.findings import claims as C, evidence as E

    paper, extended = files_with_and_without(L2_FAMILY)
    for claim in C.CLAIMS[1:5]:  # 2a, 2b, 3, 4: the claims about the regularisers' families
        a = claim.evaluate(E.Evidence((20, 50), paper))
        b = claim.evaluate(E.Evidence((20, 50), extended))
        assert json.dumps(a, default=str, sort_keys=True) == json.dumps(b, default=str, sort_keys=True)  # NaN too
        assert a and not any("L2" in r["test"] for r in b)
    assert not any(r["regulariser"] == "L2" for r in C.gain_by_K(extended))


def test_the_figures_draw_l2_in_its_own_colour_and_name_it_only_where_drawn():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from metacl_lite.report import plots as P

    assert list(P.FAMILY_COLOURS) == ["none", "MAS", "PI", "EWC", "L2"]  # the three as before, then L2's own
    assert P.method_style("l2-metacl-lambda") == {"color": P.FAMILY_COLOURS["L2"], "ls": ":", "marker": "v",
                                                  "mfc": None}
    assert P.method_style("joint") is None

    def legend(methods):
        fig, ax = plt.subplots()
        P.plot_accuracy_curves({m: np.array([50.0, 40.0]) for m in methods}, ax=ax)
        names = [t.get_text() for t in ax.get_legend().get_texts()]
        plt.close(fig)
        return names

    assert "L2" not in legend(["finetune", "pi", "pi-metacl-lambda"])
    assert legend(["finetune", "pi", "l2", "l2-metacl-beta"]).count("L2") == 1


def test_an_extension_tuned_in_its_own_file_keeps_the_papers_provenance(hparams_file):
    """L2 tuned in a file of its own (results/tuning-pmnist-K20-l2.json, the default protocol's name for it) records
    where its values came from beside the paper's nine, which keep naming results/tuning-pmnist-K20.json and its
    command; values tuned again where the whole entry was tuned drop the per-method note."""
    from metacl_lite.lab import tuning as T

    protocol = T.default_protocol("pmnist", 20)
    assert T.default_tuning_out(protocol).name == "tuning-pmnist-K20.json"
    with_l2 = {**protocol, "method_options": {**protocol["method_options"], **{m: {} for m in L2_FAMILY}}}
    assert T.is_default(with_l2) and T.default_tuning_out(with_l2).name == "tuning-pmnist-K20-l2.json"
    other = {**with_l2, "method_options": {**with_l2["method_options"], "l2": {"omega_normalise": "max"}}}
    assert not T.is_default(other) and T.default_tuning_out(other).parent.name == "runs"

    hparams_file(json.loads((H.Path(H.__file__).parent / "hparams.json").read_text()))
    before = H.load(H.HPARAMS_FILE)["pmnist"]
    paper = H.hparams_source("pmnist", ["ewc", "pi-metacl-lambda"])
    H.store("pmnist", 20, {"l2": {"beta": 1.0}}, "results/tuning-pmnist-K20-l2.json", "tune ... --methods l2")
    entry = H.load(H.HPARAMS_FILE)["pmnist"]
    assert (entry["source"], entry["command"]) == (before["source"], before["command"])
    assert entry["sources"]["l2"] == {"source": "results/tuning-pmnist-K20-l2.json", "command": "tune ... --methods l2"}
    assert H.hparams_source("pmnist", ["ewc", "pi-metacl-lambda"]) == paper
    assert H.hparams_source("pmnist", ["l2"]) == {"l2": "default: results/tuning-pmnist-K20-l2.json"}
    assert H.method_hparams("pmnist", "l2") == {"beta": 1.0}

    everything = {m: {H.strength_key(m): 1.0} for m in entry["methods"]}
    H.store("pmnist", 20, everything, "results/tuning-all.json", "tune all")
    entry = H.load(H.HPARAMS_FILE)["pmnist"]
    assert (entry["source"], entry["command"]) == ("results/tuning-all.json", "tune all") and "sources" not in entry
    assert H.hparams_source("pmnist", ["l2"]) == {"l2": "default: results/tuning-all.json"}


@pytest.mark.parametrize("sources, message", [
    ({"nosuch": {"source": "a", "command": "b"}}, "nosuch has no value"),
    ({"ewc": {"source": "a"}}, "must be"),
    ([], "must be an object"),
])
def test_a_bad_sources_entry_is_refused(hparams_file, sources, message):
    hp = json.loads((H.Path(H.__file__).parent / "hparams.json").read_text())
    hp["pmnist"]["sources"] = sources
    path = hparams_file(hp)
    with pytest.raises(H.HparamsError, match=message):
        H.load(path)
