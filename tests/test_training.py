"""The one training loop, checked step by step against computations that do not use it.

For every outer step the test rebuilds, from scratch: the mini-batch (a copy of the batch-order generator), g1 (autograd
on a copy of the model for the plain methods; an explicit SGD inner loop, Eqs. 8-9, for MetaCL), g2 = 2 Omega
(theta - bar_theta) (the gradient of Eq. 2's penalty) and the balance that the method's *name* promises (Eq. 2 /
Alg. 1: g1 + beta g2; Eq. 5 / Alg. 2: g1 + (lambda + gamma) g2). What the loop really applied is read from a spy on
torch.optim.Adam: the parameters before each step and the gradient handed to the optimiser.
"""
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from metacl_lite import training, vocab
from metacl_lite.errors import UsageError
from metacl_lite.importance import ewc_fisher, mas_importance
from metacl_lite.findings.paper import PAPER_TABLES
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.models import mlp
from metacl_lite.data.streams import Experience
from metacl_lite.training import (METHODS, RegState, TrainConfig, evaluate, get_method, metacl_gradient,
                                  outer_steps, params_vector, plain_gradient, run_stream, train_experience, train_joint,
                                  train_reference)

# 50 training images per task (K=5): 5 outer steps per epoch, each with m = 2 mini-bundles
CFG = dict(epochs=1, batch_size=10, bundle_size=5, beta=2.0, gamma=0.5, pi_xi=0.2)
STEPS = 5
MEASURES = vocab.REGULARISERS


@pytest.fixture(scope="module")
def bench():
    return permuted_mnist(K=5, n_tasks=2, seed=0, split="val")  # evaluated on 1 000 images, not 10 000


@pytest.fixture
def adam(monkeypatch):
    """torch.optim.Adam replaced by a subclass that records each optimiser made and, at every step, whether its
    state was still empty, the parameters before the step and the gradient applied."""
    real = torch.optim.Adam
    rec = {"made": [], "steps": []}

    class SpyAdam(real):
        def __init__(self, params, **kw):
            super().__init__(params, **kw)
            rec["made"].append(self)

        def step(self, closure=None):
            ps = self.param_groups[0]["params"]
            rec["steps"].append({"opt": self, "fresh": len(self.state) == 0,
                                 "theta": parameters_to_vector(ps).detach().clone(),
                                 "g": torch.cat([p.grad.reshape(-1) for p in ps]).clone()})
            return super().step(closure)

    monkeypatch.setattr(torch.optim, "Adam", SpyAdam)
    return rec


@pytest.fixture
def small_nets(monkeypatch):
    """run_stream, train_reference and train_joint build the MLP 784-8-10 (seeded the same way), not 784-256-256-10."""
    def build(benchmark, n_classes, n_heads, seed, **kw):
        torch.manual_seed(seed)
        return mlp(784, (8,), n_classes, n_heads)

    monkeypatch.setattr(training, "build_model", build)
    return build


def promised(name):
    """(importance, update, balance) as the method's name says (Table 1), independent of the METHODS table."""
    head = name.split("-")[0]
    imp = head if head in MEASURES else None
    update = "metacl" if "metacl" in name else "plain"
    balance = "none" if imp is None else ("lambda" if name.endswith("-lambda") else "beta")
    return imp, update, balance


def tiny_mlp(seed=0):
    torch.manual_seed(seed)
    return mlp(784, (8,), 10)


def batches(exp, cfg, gen_state):
    """The mini-batches of one task, in the order a generator with state `gen_state` draws them."""
    gen = torch.Generator()
    gen.set_state(gen_state)
    x, y = exp.inputs(), exp.y
    for _ in range(cfg.epochs):
        order = torch.randperm(len(y), generator=gen)
        for s in range(0, len(y), cfg.batch_size):
            yield x[order[s: s + cfg.batch_size]], y[order[s: s + cfg.batch_size]]


def task_gradient(model, theta, x, y, task, update, cfg):
    """g1 at theta on a copy of the model: the mini-batch gradient, or (theta - theta^m) / (alpha m) after m SGD steps
    on consecutive mini-bundles (Alg. 1/2, Eqs. 8-9)."""
    clone = copy.deepcopy(model)
    vector_to_parameters(theta.clone(), clone.parameters())  # a copy: the parameters become views of it
    if update == "plain":
        F.cross_entropy(clone(x, task), y).backward()
        return torch.cat([p.grad.reshape(-1) for p in clone.parameters()])
    sgd = torch.optim.SGD(clone.parameters(), lr=cfg.inner_lr)
    m = math.ceil(len(y) / cfg.bundle_size)
    for i in range(m):
        sgd.zero_grad()
        sl = slice(i * cfg.bundle_size, (i + 1) * cfg.bundle_size)
        F.cross_entropy(clone(x[sl], task), y[sl]).backward()
        sgd.step()
    return (theta - parameters_to_vector(clone.parameters()).detach()) / (cfg.inner_lr * m)


def expected_update(balance, g1, g2, cfg):
    """(g, lambda) by hand: Eq. 2 / Alg. 1 for beta; Eq. 5 and Alg. 2 plus the paper's gamma for lambda."""
    if g2 is None:
        return g1, 0.0
    if balance == "beta":
        return g1 + cfg.beta * g2, 0.0
    dot = float(g1 @ g2)
    lam = 0.0 if dot >= 0 else -dot / float(g2 @ g2)
    return g1 + (lam + cfg.gamma) * g2, lam


def cos(a, b):
    n = float(a.norm() * b.norm())
    return float(a @ b) / n if n > 0 else float("nan")


def run_task(model, exp, name, cfg, reg, adam):
    """Train one task; check the one fresh Adam and every step's update; return this task's three candidate
    importances computed independently (EWC and MAS on the final model, PI from the path with g1 only)."""
    imp, update, balance = promised(name)
    omega, anchor = reg.omega, reg.anchor  # before the task
    gen = torch.Generator().manual_seed(7)
    state, n_before, log = gen.get_state(), len(adam["steps"]), {}
    theta_start = params_vector(model)
    train_experience(model, exp, get_method(name), cfg, reg, gen, log)
    steps = adam["steps"][n_before:]
    assert len(steps) == STEPS * cfg.epochs
    opt = steps[0]["opt"]
    assert adam["made"][-1] is opt and [s["opt"] is opt for s in steps] == [True] * len(steps)
    assert [s["fresh"] for s in steps] == [True] + [False] * (len(steps) - 1)
    g1s, angles = [], []
    for (x, y), st in zip(batches(exp, cfg, state), steps):
        g1 = task_gradient(model, st["theta"], x, y, exp.task_id, update, cfg)
        g2 = None if imp is None or omega is None else 2 * omega * (st["theta"] - anchor)
        want, lam = expected_update(balance, g1, g2, cfg)
        scale = float(want.abs().max())
        torch.testing.assert_close(st["g"], want, rtol=1e-4, atol=1e-5 * scale)
        angles.append([exp.task_id, cos(g1, want), float("nan") if g2 is None else cos(g2, want), lam])
        g1s.append(g1)
    if cfg.record_angles:
        np.testing.assert_allclose(np.array(log["angles"]), np.array(angles), rtol=1e-4, atol=1e-6)
    thetas = [s["theta"] for s in steps] + [params_vector(model)]
    path = -sum(g * (b - a) for g, a, b in zip(g1s, thetas[:-1], thetas[1:]))
    pi = path.clamp(min=0) / ((thetas[-1] - theta_start) ** 2 + cfg.pi_xi)  # Zenke et al.: task-loss gradient only
    return {"ewc": ewc_fisher(model, exp, cfg.fisher), "mas": mas_importance(model, exp), "pi": pi,
            "l2": torch.ones_like(pi)}, angles


def assert_own_measure(increment, candidates, imp):
    """The Omega a task added is the method's own measure and none of the others."""
    torch.testing.assert_close(increment, candidates[imp], rtol=1e-3, atol=1e-4 * float(candidates[imp].max()))
    for other in set(MEASURES) - {imp}:
        assert not torch.allclose(increment, candidates[other], rtol=1e-2, atol=0.0), other


def test_eleven_methods_in_paper_order_then_the_extension():
    """The paper's eleven in the row order of its Table 1 (the rows of findings.paper's table, independent of the
    vocabulary), then L2's family, an extension."""
    paper = [m for m in PAPER_TABLES[("pmnist", 20)] if m != vocab.ORACLE]
    assert list(METHODS) == [*paper, "l2", "l2-metacl-beta", "l2-metacl-lambda"]
    assert list(vocab.PAPER_METHOD_NAMES) == paper
    assert METHODS["l2-metacl-lambda"].label == "L2-MetaCL-λ" and METHODS["pi-metacl-beta"].label == "PI-MetaCL-β"
    assert [(m.regulariser, m.update, m.balance) for m in METHODS.values()] == [promised(n) for n in METHODS]
    with pytest.raises(UsageError, match="unknown method 'sgd'"):
        get_method("sgd")


@pytest.mark.parametrize("fields", [("ewc", "plain", "none"), (None, "metacl", "beta"), ("si", "plain", "beta"),
                                    (None, "reptile", "none"), ("mas", "metacl", "sigma")])
def test_a_method_must_name_known_parts_and_a_balance_iff_a_penalty(fields):
    with pytest.raises(ValueError, match="inconsistent method"):
        training.Method("x", "x", *fields)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_step_applies_the_balanced_gradient(bench, adam, name):
    """Task 2 under a given Omega and anchor (g2 != 0 from the first step): each update is the balance the name
    promises, with the configured beta or gamma; afterwards Omega = old Omega + this task's own measure."""
    imp, _, balance = promised(name)
    cfg = TrainConfig(record_angles=True, **CFG)
    model = tiny_mlp()
    g = torch.Generator().manual_seed(5)
    theta0 = params_vector(model)
    omega0, anchor0 = torch.rand(theta0.shape, generator=g), theta0 + 0.05 * torch.randn(theta0.shape, generator=g)
    reg = RegState(omega0.clone(), anchor0.clone()) if imp else RegState()
    candidates, angles = run_task(model, bench.train_stream[1], name, cfg, reg, adam)
    lams = [a[3] for a in angles]
    if balance == "lambda":  # both branches of Eq. 5 were met
        assert min(lams) == 0.0 and max(lams) > 0.0
    if imp is None:
        assert reg.omega is None and reg.anchor is None
        return
    assert_own_measure(reg.omega - omega0, candidates, imp)
    assert torch.equal(reg.anchor, params_vector(model))


@pytest.mark.parametrize("name", ["mas-metacl-lambda", "pi", "ewc-metacl-beta"])
def test_omega_is_the_sum_over_tasks(bench, adam, name):
    """From an empty state: after task 1 Omega is task 1's measure on the model saved then; after task 2 it is the
    sum of both tasks' measures (Eq. 2's Omega accumulates), and the anchor is the latest parameters."""
    imp = promised(name)[0]
    cfg = TrainConfig(**CFG)
    model, reg = tiny_mlp(1), RegState()
    first, _ = run_task(model, bench.train_stream[0], name, cfg, reg, adam)
    assert_own_measure(reg.omega, first, imp)
    second, _ = run_task(model, bench.train_stream[1], name, cfg, reg, adam)
    assert_own_measure(reg.omega, {k: first[k] + second[k] for k in MEASURES}, imp)
    assert torch.equal(reg.anchor, params_vector(model))


def test_a_fresh_adam_for_every_task(bench, adam, small_nets):
    """The outer optimiser is Adam(eta) on the model's parameters, made anew for each task: empty state at each
    task's first step, and each task's steps all on its own optimiser."""
    cfg = TrainConfig(**CFG)
    run_stream(bench, "ewc-metacl-lambda", cfg, seed=0, show_progress=False)
    assert len(adam["made"]) == 2
    assert [adam["made"].index(s["opt"]) for s in adam["steps"]] == [0] * STEPS + [1] * STEPS
    assert [s["fresh"] for s in adam["steps"]] == ([True] + [False] * (STEPS - 1)) * 2
    for opt in adam["made"]:
        assert opt.param_groups[0]["lr"] == cfg.outer_lr
        assert len(opt.param_groups[0]["params"]) == 4  # the MLP 784-8-10: 2 weights, 2 biases


def test_same_seed_same_matrix(bench, small_nets):
    cfg = TrainConfig(**CFG)
    a = run_stream(bench, "pi-metacl-lambda", cfg, seed=3)["acc_matrix"]
    np.testing.assert_array_equal(a, run_stream(bench, "pi-metacl-lambda", cfg, seed=3)["acc_matrix"])
    assert not np.array_equal(a, run_stream(bench, "pi-metacl-lambda", cfg, seed=4)["acc_matrix"])


def test_matrix_entry_i_j_is_the_model_after_task_i_on_task_j(bench, small_nets):
    """a_{i,j} (the "Metrics" section): the model after task i, evaluated on task j's test data, for j <= i; NaN above.
    The stream is replayed by hand: model and batch order seeded with the seed, one train_experience per task."""
    cfg = TrainConfig(**CFG)
    got = run_stream(bench, "pi", cfg, seed=1)["acc_matrix"]
    model, reg, gen = small_nets("pmnist", 10, 1, seed=1), RegState(), torch.Generator().manual_seed(1)
    want = np.full((2, 2), np.nan)
    for i in range(2):
        train_experience(model, bench.train_stream[i], get_method("pi"), cfg, reg, gen)
        for j in range(i + 1):
            e = bench.test_stream[j]
            with torch.no_grad():
                want[i, j] = 100.0 * int((model(e.inputs()).argmax(1) == e.y).sum()) / len(e)
    np.testing.assert_array_equal(got, want)


def test_tuning_evaluates_the_last_row_only(bench, small_nets):
    """evaluate_rows="last" (tuning's final validation ACC): the same last row bit for bit, NaN in every earlier row,
    and no other effect on training."""
    cfg = TrainConfig(**CFG)
    full = run_stream(bench, "ewc-metacl-beta", cfg, seed=2)["acc_matrix"]
    last = run_stream(bench, "ewc-metacl-beta", cfg, seed=2, evaluate_rows="last")["acc_matrix"]
    np.testing.assert_array_equal(last[-1], full[-1])
    assert np.isnan(last[:-1]).all() and not np.isnan(full[0, 0])
    with pytest.raises(ValueError, match="evaluate_rows"):
        run_stream(bench, "finetune", cfg, seed=2, evaluate_rows="first")


def test_metacl_g1_matches_explicit_inner_loop():
    torch.manual_seed(0)
    model = mlp(6, (5,), 3).double()
    x, y = torch.randn(20, 6, dtype=torch.float64), torch.randint(0, 3, (20,))
    g1 = metacl_gradient(model, x, y, 0, alpha=0.05, bundle_size=5)
    cfg = TrainConfig(inner_lr=0.05, bundle_size=5)
    torch.testing.assert_close(g1, task_gradient(model, params_vector(model), x, y, 0, "metacl", cfg))
    assert all(p.grad is None for p in model.parameters())  # the model itself is untouched


def test_hooks_see_every_step_and_epoch_and_change_no_bit(bench, adam):
    """`train_experience` calls each step hook (two here) once per outer step with that step's g (the one Adam
    applied) and each epoch hook once per epoch (with its index); hooks given replace the log's (no "angles" though
    record_angles is set); and a run with hooks leaves the same parameters, bit for bit, as one without."""
    cfg, exp = TrainConfig(epochs=2, batch_size=20, bundle_size=5, beta=1.0, record_angles=True), bench.train_stream[0]
    finals = []
    for with_hooks in (False, True):
        model, reg, log, seen = tiny_mlp(), RegState(), {}, {"steps": [], "epochs": [], "second": []}
        hooks = training.Hooks([lambda s: seen["steps"].append((s.task, s.penalised, s.g.clone(), s.g2)),
                                lambda s: seen["second"].append(s.task)],
                               [lambda e: seen["epochs"].append((e.task, e.epoch))]) if with_hooks else None
        n_before = len(adam["steps"])
        train_experience(model, exp, get_method("metacl"), cfg, reg, torch.Generator().manual_seed(3), log,
                         hooks=hooks)
        finals.append(params_vector(model))
    assert torch.equal(finals[0], finals[1])
    assert log == {} and seen["epochs"] == [(0, 0), (0, 1)] and len(seen["steps"]) == 2 * math.ceil(len(exp) / 20)
    assert all(t == 0 and not pen and g2 is None for t, pen, _, g2 in seen["steps"])
    assert seen["second"] == [0] * len(seen["steps"])  # every hook at every step
    for (_, _, g, _), step in zip(seen["steps"], adam["steps"][n_before:]):
        assert torch.equal(g, step["g"])


def test_log_hooks_follow_the_configs_flags(bench):
    exp = bench.test_stream[0]
    assert training.log_hooks(TrainConfig(record_angles=True, eval_every_epoch=True), None, exp) == training.Hooks(
        [], [])
    for angles, penalty, epochs, want in ((False, False, False, (0, 0)), (True, False, False, (1, 0)),
                                          (True, True, True, (2, 1)), (False, True, False, (1, 0))):
        h = training.log_hooks(TrainConfig(record_angles=angles, record_penalty=penalty, eval_every_epoch=epochs), {},
                               exp)
        assert (len(h.step), len(h.epoch)) == want
    assert training.log_hooks(TrainConfig(eval_every_epoch=True), {}, None).epoch == []  # no test data, no accuracy


def test_metacl_with_one_bundle_is_the_plain_gradient():
    torch.manual_seed(0)
    model = mlp(6, (5,), 3).double()
    x, y = torch.randn(10, 6, dtype=torch.float64), torch.randint(0, 3, (10,))
    torch.testing.assert_close(metacl_gradient(model, x, y, 0, 0.01, bundle_size=10), plain_gradient(model, x, y, 0))


def test_evaluate_is_the_percentage_correct_in_any_chunking():
    """Accuracy (%) with the task's head, in chunks: labels set to head 1's prediction on 6 of 10 images -> 60%;
    head 0, biased to always answer class 4 (never a label here) -> 0%."""
    torch.manual_seed(0)
    model = mlp(4, (3,), 5, n_heads=2)
    x = torch.randn(10, 4)
    with torch.no_grad():
        model.heads[0].bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 1e3]))
        pred = model.heads[1](model.body(x)).argmax(1)
    y = torch.where(torch.arange(10) < 6, pred, (pred + 1) % 4)
    assert evaluate(model, Experience(1, x, y), batch_size=3) == 60.0
    assert evaluate(model, Experience(0, x, y), batch_size=3) == 0.0


def test_the_oracle_takes_as_many_outer_steps_as_the_stream_when_tasks_are_smaller_than_a_batch(bench, small_nets,
                                                                                                 adam):
    """K = 5: each task is 50 images, one mini-batch of 100 per epoch for the stream (2 tasks x 3 epochs = 6 steps);
    3 epochs of the 100-image union would be 3 steps. The oracle takes the stream's 6, in full batches."""
    cfg = TrainConfig(epochs=3, batch_size=100)
    assert [len(e) for e in bench.train_stream] == [50, 50] and outer_steps(bench.train_stream, cfg) == 6
    train_joint(bench, cfg, seed=0)
    assert len(adam["steps"]) == 6 and all(s["opt"] is adam["made"][0] for s in adam["steps"])


def test_reference_equals_finetune_first_task(bench, small_nets):
    cfg = TrainConfig(**CFG)
    a = run_stream(bench, "finetune", cfg, seed=2)["acc_matrix"]
    assert train_reference(bench, 0, cfg, seed=2) == a[0, 0]


def test_joint_oracle_is_adam_on_the_union(bench, small_nets):
    """Eq. 1: every task's training data in one set, mini-batches drawn from the union, Adam(eta), for the stream's
    number of outer steps: 2 epochs of 3 batches of 20 (the last of 10) for each 50-image task make 12, so the oracle
    takes 2 epochs of the union's 5 batches and 2 batches of a third."""
    cfg = TrainConfig(epochs=2, batch_size=20)
    got = train_joint(bench, cfg, seed=0)
    model = small_nets("pmnist", 10, 1, seed=0)
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([e.inputs() for e in bench.train_stream])
    y = torch.cat([e.y for e in bench.train_stream])
    opt = torch.optim.Adam(model.parameters(), lr=cfg.outer_lr)
    epochs = [torch.randperm(len(y), generator=gen) for _ in range(3)]  # one shuffle of the union per epoch
    batches = [idx for order in epochs for idx in order.split(cfg.batch_size)]
    for idx in batches[:12]:
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    with torch.no_grad():
        want = [100.0 * int((model(e.inputs()).argmax(1) == e.y).sum()) / len(e) for e in bench.test_stream]
    assert got == want
