"""The λ story (metacl_lite.lab.lambda_story) on hand-made logs whose statistics are worked out by hand, the per-step
penalty log of `TrainConfig.record_penalty` checked against an independent recomputation, and the default training
path unchanged by the option."""
import importlib.metadata
import json
import math

import numpy as np
import pytest
import torch

from metacl_lite.lab import lambda_story as L
from metacl_lite.balance import reg_penalty
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.training import (PENALTY_COLUMNS, RegState, TrainConfig, get_method, params_vector, run_stream,
                                  train_experience)

CFG = dict(epochs=2, batch_size=20, bundle_size=5)


def row(task=1, lam=0.0, gamma=1.0, beta=0.0, before=1.0, after=1.0, g_dot=1.0, step_dot=-1.0, along=0.5,
        g_norm=1.0, g2_norm=1.0):
    r = dict(task=task, lam=lam, gamma=gamma, beta=beta, before=before, after=after, g_dot=g_dot, step_dot=step_dot,
             along=along, g_norm=g_norm, g2_norm=g2_norm)
    return list(r.values())


# The hand-made log: a task's first step (g2 = 0, l_reg 0 before: left out), then
#   B: lambda 2 > gamma 1, l_reg 1 -> 1.5 (raised), <g, g2> 0.5, <step, g2> 0.1 > 0, along -g: 0.9 (lowered);
#   C: lambda 0, l_reg 2 -> 1 (lowered), <step, g2> -0.2, along -g: 1.5 (lowered);
#   D: lambda 0.5 < gamma, l_reg 1 -> 1 (equal: not raised), <g, g2> = -0.5 (cos -0.5), <step, g2> 0.3,
#      along -g: 1.2 (raised);
#   E: as C but <g, g2> = -1e-6 with |g| = |g2| = 1: float rounding, not counted as against g2.
LOG = {"penalty": [row(before=0.0, after=0.3, lam=0.0, g_dot=0.0, g2_norm=0.0),
                   row(lam=2.0, before=1.0, after=1.5, g_dot=0.5, step_dot=0.1, along=0.9),
                   row(task=2, lam=0.0, before=2.0, after=1.0, g_dot=1.0, step_dot=-0.2, along=1.5),
                   row(task=2, lam=0.5, before=1.0, after=1.0, g_dot=-0.5, step_dot=0.3, along=1.2),
                   row(task=2, lam=0.0, before=2.0, after=1.0, g_dot=-1e-6, step_dot=-0.2, along=1.5)]}


def test_hand_made_log_statistics():
    s = L.story_stats(LOG)
    assert s == pytest.approx({
        "n_steps": 4,
        "frac_lambda_pos": 2 / 4,  # B and D
        "lambda_median_pos": 1.25,  # median of 2 and 0.5
        "frac_lambda_gt_gamma": 1 / 4,  # B only
        "lambda_over_gamma_median": 1.25,
        "frac_increase": 1 / 4,  # B only: D's equal penalty is no increase
        "frac_increase_along_g": 1 / 4,  # D only
        "frac_step_against_g2": 2 / 4,  # B and D
        "frac_g_against_g2": 1 / 4,  # D; E's -1e-6 is rounding
        "mean_rel_change": (0.5 - 0.5 + 0.0 - 0.5) / 4})
    assert tuple(s) == L.STAT_KEYS


def test_a_step_that_raises_the_penalty_is_counted():
    up = {"penalty": [row(before=1.0, after=1.0 + 1e-12)]}
    down = {"penalty": [row(before=1.0, after=1.0 - 1e-12)]}
    assert (L.story_stats(up)["frac_increase"], L.story_stats(down)["frac_increase"]) == (1.0, 0.0)


def test_gamma_zero_and_no_penalised_step():
    s = L.story_stats({"penalty": [row(lam=3.0, gamma=0.0, before=1.0, after=2.0)]})
    assert s["frac_lambda_gt_gamma"] == 1.0 and math.isnan(s["lambda_over_gamma_median"])
    s = L.story_stats({})  # the first task only: nothing penalised
    assert s["n_steps"] == 0 and all(math.isnan(s[k]) for k in L.STAT_KEYS if k != "n_steps")


def test_per_task_and_summary():
    per = L.per_task_stats(LOG)
    assert list(per) == [1, 2]
    assert (per[1]["n_steps"], per[2]["n_steps"]) == (1, 3)
    assert per[2]["frac_increase_along_g"] == pytest.approx(1 / 3)
    m = L.summarise({"0": {**L.story_stats(LOG)}, "1": {**L.story_stats(LOG), "frac_increase": 0.75,
                                                        "lambda_over_gamma_median": float("nan")}})
    assert m["frac_increase"] == pytest.approx((0.25 + 0.75) / 2)
    assert m["lambda_over_gamma_median"] == pytest.approx(1.25)  # the NaN seed is left out


def test_story_frame_reads_json_nulls():
    doc = {"runs": {"pi-metacl-lambda/gamma=zero/K=20": {
        "method": "pi-metacl-lambda", "K": 20, "n_tasks": 3, "gamma": 0.0, "beta": 0.0,
        "per_seed": {"0": {**L.story_stats(LOG), "lambda_over_gamma_median": None}}, "final_acc": {"0": 61.0}}}}
    f = L.story_frame(doc)
    r = f.iloc[0]
    assert (r.regulariser, r.setting, r.K, r.seed, r["final ACC"]) == ("PI", "MetaCL-λ (γ = 0)", 20, 0, 61.0)
    assert math.isnan(r.lambda_over_gamma_median) and r.frac_increase == 0.25


def _doc(entries):
    """A story document from {(method, setting, K): (gamma, {seed: (frac_lambda_pos, frac_lambda_gt_gamma,
    lambda_over_gamma_median, frac_increase, final ACC)})}."""
    runs = {}
    for (method, setting, K), (gamma, seeds) in entries.items():
        variant = method.split("-")[-1]
        per_seed = {s: {**L.story_stats(LOG), "frac_lambda_pos": a, "frac_lambda_gt_gamma": b,
                        "lambda_over_gamma_median": c, "frac_increase": d} for s, (a, b, c, d, _) in seeds.items()}
        runs[L.run_key(method.split("-")[0], variant, setting, K)] = {
            "method": method, "K": K, "n_tasks": 3, "gamma": gamma, "beta": 0.0, "per_seed": per_seed,
            "final_acc": {s: v[4] for s, v in seeds.items()}}
    return {"runs": runs}


DOC = _doc({("pi-metacl-lambda", "tuned", 20): (100.0, {"0": (0.9, 0.5, 4.06, 0.25, 50.0),
                                                        "1": (1.0, 0.7, 4.14, 0.75, 52.0)}),
            ("pi-metacl-lambda", "zero", 20): (0.0, {"0": (0.5, 0.5, None, 1.0, 40.0),
                                                     "1": (0.3, 0.3, None, 1.0, 41.0)}),
            ("pi-metacl-beta", "tuned", 20): (0.0, {"0": (0.0, 0.0, None, 0.123, 60.0),
                                                    "1": (0.0, 0.0, None, 0.125, 61.0)}),
            ("mas-metacl-lambda", "tuned", 50): (0.1, {"0": (0.0, 0.0, None, 0.004, 70.0)})})


def test_lambda_table_by_hand():
    t = L.lambda_table(L.story_frame(DOC))
    assert t.to_dict("records") == [
        {"K": 20, "reg.": "PI", "γ": "100", "λ > 0": "95", "λ > γ": "60", "λ/γ": "4.1"},  # means over the seeds
        {"K": 50, "reg.": "MAS", "γ": "0.1", "λ > 0": "0", "λ > γ": "0", "λ/γ": "–"}]  # λ never active: no ratio


def test_setting_table_by_hand():
    f = L.story_frame(DOC)
    assert L.setting_table(f, "frac_increase").to_dict("records") == [
        {"K": 20, "reg.": "PI", "tuned γ": "50", "γ = 0": "100", "MetaCL-β": "12"},
        {"K": 50, "reg.": "MAS", "tuned γ": "0", "γ = 0": "–", "MetaCL-β": "–"}]  # not measured: "–"
    assert L.setting_table(f, "final ACC", percent=False).iloc[0].tolist() == [20, "PI", "51.0", "40.5", "60.5"]


def test_hparams_current():
    made = {"pmnist": {"methods": {"pi-metacl-lambda": {"gamma": 1.0}}, "options": {"pi": {}},
                       "by_K": {"50": {"methods": {"pi-metacl-lambda": {"gamma": 0.1}}}}}}
    doc = {"config": {"hparams": {"content": made}, "regularisers": ["pi"]},
           "runs": {"pi-metacl-lambda/gamma=tuned/K=20": {"method": "pi-metacl-lambda"}}}
    assert L.hparams_current(doc, made)
    changed = json.loads(json.dumps(made))
    changed["pmnist"]["by_K"]["50"]["methods"]["pi-metacl-lambda"]["gamma"] = 1.0
    assert not L.hparams_current(doc, changed)  # a measured method's γ at another K
    changed = json.loads(json.dumps(made))
    changed["pmnist"]["options"]["pi"] = {"pi_xi": 0.1}
    assert not L.hparams_current(doc, changed)  # a measured regulariser's option
    added = json.loads(json.dumps(made))  # a regulariser added since (issue 35's L2): the measurement still stands
    added["pmnist"]["methods"]["l2-metacl-lambda"] = {"gamma": 3.0}
    added["pmnist"]["by_K"]["50"]["methods"]["l2"] = {"beta": 1.0}
    added["pmnist"]["options"]["l2"] = {}
    assert L.hparams_current(doc, added)


def test_committed_story_is_made_with_the_committed_hparams():
    """Chapter 8 reads results/lambda-story-pmnist.json: when hparams.json changes (β, γ or an option), the file
    must be regenerated with its provenance command, or the page shows runs of other settings."""
    from metacl_lite.lab.hparams import load

    story = L.load_story()
    assert L.hparams_current(story, load()), (
        "results/lambda-story-pmnist.json was made with another hparams.json; regenerate it: "
        + story["provenance"]["command"])


# ---------------------------------------------------------------------------------------------------------------
# The log written by training
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench():
    return permuted_mnist(K=5, n_tasks=3, seed=0, split="val")


@pytest.mark.parametrize("name, gamma", [("pi-metacl-lambda", 0.5), ("pi-metacl-lambda", 0.0), ("ewc", 0.0)])
def test_penalty_log_matches_an_independent_recomputation(bench, name, gamma):
    """Task 2 under a given Omega and anchor: l_reg before each step is the previous step's l_reg after, the first
    is l_reg at the start and the last l_reg after is that of the final parameters (Eq. 2 recomputed here); for
    MetaCL-λ, <g, g2> >= gamma |g2|^2 at every step (the dual's guarantee, plus gamma)."""
    from metacl_lite.models import build_model

    model = build_model("pmnist", 10, 1, 0)
    cfg = TrainConfig(record_penalty=True, gamma=gamma, beta=0.3, **CFG)
    g = torch.Generator().manual_seed(3)
    theta0 = params_vector(model)
    omega, anchor = torch.rand(theta0.shape, generator=g), theta0 + 0.01 * torch.randn(theta0.shape, generator=g)
    reg, log = RegState(omega.clone(), anchor.clone()), {}
    train_experience(model, bench.train_stream[1], get_method(name), cfg, reg, torch.Generator().manual_seed(1), log)
    t = np.array(log["penalty"])
    assert t.shape == (cfg.epochs * 3, len(PENALTY_COLUMNS))  # 50 images, batches of 20: 3 steps per epoch
    c = {k: t[:, i] for i, k in enumerate(PENALTY_COLUMNS)}
    d = lambda x: x.double()  # noqa: E731
    assert c["l_reg_before"][0] == pytest.approx(float(reg_penalty(d(theta0), d(anchor), d(omega))), rel=1e-12)
    np.testing.assert_allclose(c["l_reg_before"][1:], c["l_reg_after"][:-1], rtol=1e-12)
    assert c["l_reg_after"][-1] == pytest.approx(float(reg_penalty(d(params_vector(model)), d(anchor), d(omega))),
                                                 rel=1e-12)
    assert set(c["task"]) == {1} and set(c["gamma"]) == {gamma} and set(c["beta"]) == {0.3}
    if name.endswith("lambda"):
        assert (c["lambda"] > 0).any()
        assert (c["g_dot_g2"] >= gamma * c["g2_norm"] ** 2 - 1e-4 * c["g_norm"] * c["g2_norm"]).all()
    else:
        assert (c["lambda"] == 0).all()


def test_record_penalty_leaves_training_bit_identical(bench):
    """The option only logs: the same seed gives the same accuracy matrix with it on and off, and off adds no log."""
    cfg = dict(gamma=1.0, **CFG)
    off = run_stream(bench, "mas-metacl-lambda", TrainConfig(**cfg), seed=0, show_progress=False)
    on = run_stream(bench, "mas-metacl-lambda", TrainConfig(record_penalty=True, **cfg), seed=0, show_progress=False)
    np.testing.assert_array_equal(off["acc_matrix"], on["acc_matrix"])
    assert "penalty" not in off
    assert len(on["penalty"]) == 2 * CFG["epochs"] * 3  # tasks 2 and 3 are penalised


def test_main_writes_the_file_with_provenance(tmp_path, monkeypatch):
    out = tmp_path / "story.json"
    monkeypatch.setattr(L, "PAPER_REGULARISERS", ("mas",))
    monkeypatch.setattr(L, "measure", lambda streams, seeds, show_progress=False, hp=None: {
        "k": {"streams": {str(k): v for k, v in streams.items()}, "seeds": list(seeds)}})
    assert L.main(["--streams", "5:2,10:3", "--seeds", "0,2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["runs"] == {"k": {"streams": {"5": 2, "10": 3}, "seeds": [0, 2]}}
    assert doc["provenance"]["command"] == ("python -m metacl_lite.lab.lambda_story --streams 5:2,10:3 --seeds 0,2 "
                                            f"--out {out}")
    assert doc["provenance"]["packages"]["torch"] == importlib.metadata.version("torch")
    assert doc["provenance"]["git_commit"]
    assert "methods" in doc["config"]["hparams"]["content"]["pmnist"]


def test_measure_on_a_tiny_stream(monkeypatch):
    """measure() reads gamma from the hparams it is given (method_config) and sets it to 0 for the control."""
    hp = {"pmnist": {"methods": {"mas-metacl-lambda": {"gamma": 2.5}}}}
    runs = L.measure({5: 2}, [0], regularisers=("mas",), settings=(("lambda", "tuned"), ("lambda", "zero")), hp=hp)
    tuned, zero = runs["mas-metacl-lambda/gamma=tuned/K=5"], runs["mas-metacl-lambda/gamma=zero/K=5"]
    assert (tuned["gamma"], zero["gamma"]) == (2.5, 0.0)
    assert tuned["per_seed"]["0"]["n_steps"] == 5 * 1 - 1  # task 2: 5 epochs of one batch, the first has g2 = 0
    assert list(tuned["per_task"]["0"]) == ["1"]
