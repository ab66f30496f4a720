"""Speed without changing results: the evaluation of a_{i,j} (j <= i) through permuted first-layer weights instead of
permuted copies of the test images, and the task gradients g1 (Alg. 1/2, Eqs. 8-9; Eq. 2's first term) compiled with
torch.compile. Each is compared with an independent computation: the images permuted and run through the model, and
the eager training loop.
"""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from metacl_lite.accel import compiled
from metacl_lite import training
from metacl_lite.errors import UsageError
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.reptile import inner_loop
from metacl_lite.models import MultiHeadNet, mlp
from metacl_lite.data.streams import Experience
from metacl_lite.training import (METHODS, TrainConfig, evaluate, evaluate_tasks, metacl_gradient, params_vector,
                                  plain_gradient, run_stream)


@pytest.fixture(scope="module")
def bench():
    return permuted_mnist(K=5, n_tasks=4, seed=3, split="val")  # 1 000 evaluation images shared by the 4 tasks


sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import fasteval  # noqa: E402  (benchmarks/fasteval.py: the speed benchmark's evaluation, tested here)


def by_permuting_images(model, exp):
    """Accuracy (%) as the test set is defined: task j's images x[:, perm_j] through the whole model."""
    x = exp.x if exp.perm is None else exp.x[:, exp.perm]
    with torch.no_grad():
        return 100.0 * int((model.eval()(x, exp.task_id).argmax(1) == exp.y).sum()) / len(exp.y)


# ----------------------------------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_permuted_weights_give_the_accuracies_of_permuted_images(bench, seed, monkeypatch):
    """Random 784-256-256-10 networks on four permutations: the same accuracy per task in any chunking of the images
    (batch_size) and of the tasks (EVAL_CHUNK_FLOATS: 2 tasks per product for 300 images, 6 for the last 100)."""
    torch.manual_seed(seed)
    model = mlp()
    want = [by_permuting_images(model, e) for e in bench.test_stream]
    assert len(set(want)) > 1  # the tasks differ, so a task evaluated with another's permutation would show
    assert evaluate_tasks(model, bench.test_stream) == want
    assert fasteval.evaluate_tasks(model, bench.test_stream) == want
    monkeypatch.setattr(fasteval, "EVAL_CHUNK_FLOATS", 2 * 300 * 256)
    assert fasteval.evaluate_tasks(model, bench.test_stream, batch_size=300) == want
    assert evaluate_tasks(model, bench.test_stream, batch_size=300) == want
    assert [evaluate(model, e) for e in bench.test_stream] == want


def test_the_old_path_stays_available(bench, monkeypatch):
    """`training.evaluate_tasks` permutes the images (`Experience.inputs`, one copy per task); `benchmarks/fasteval.py`
    makes none."""
    calls = []
    real = Experience.inputs
    monkeypatch.setattr(Experience, "inputs", lambda self, rows=None: calls.append(self.task_id) or real(self, rows))
    torch.manual_seed(0)
    model = mlp()
    want = [by_permuting_images(model, e) for e in bench.test_stream]
    assert fasteval.evaluate_tasks(model, bench.test_stream) == want and calls == []
    assert evaluate_tasks(model, bench.test_stream) == want and calls == [0, 1, 2, 3]


def test_run_stream_matrix_is_that_of_permuted_images(bench, monkeypatch):
    """A short Permuted MNIST stream with the paper's MLP: a_{i,j} as run_stream computes it equals a_{i,j} with
    the evaluation replaced by the permuted images (the training is the same, so is every model evaluated)."""
    cfg = TrainConfig(epochs=1, batch_size=10, bundle_size=5, compile="off")
    got = run_stream(bench, "metacl", cfg, seed=0)["acc_matrix"]
    monkeypatch.setattr(training, "evaluate_tasks",
                        lambda model, exps: [by_permuting_images(model, e) for e in exps])
    want = run_stream(bench, "metacl", cfg, seed=0)["acc_matrix"]
    np.testing.assert_array_equal(got, want)
    assert not np.isnan(got[np.tril_indices(4)]).any()


def test_other_tasks_keep_the_plain_path():
    """Multi-head models (CIFAR, CUB: each task its head), and tasks with their own images."""
    torch.manual_seed(0)
    multi = mlp(12, (6,), 3, n_heads=2)
    x, y, perm = torch.randn(50, 12), torch.randint(0, 3, (50,)), torch.randperm(12)
    exps = [Experience(0, x, y), Experience(1, x, y), Experience(1, x, y, perm=perm)]
    want = [by_permuting_images(multi, e) for e in exps]
    assert len(set(want)) == 3 and evaluate_tasks(multi, exps) == want == fasteval.evaluate_tasks(multi, exps)
    single = mlp(12, (6,), 3)
    x2 = torch.randn(50, 12)
    exps = [Experience(0, x, y, perm=perm), Experience(1, x2, y, perm=perm), Experience(2, x2, y)]
    want = [by_permuting_images(single, e) for e in exps]
    assert len(set(want)) == 3 and evaluate_tasks(single, exps) == want == fasteval.evaluate_tasks(single, exps)


# ----------------------------------------------------------------------------------------------------------------
# When to compile
# ----------------------------------------------------------------------------------------------------------------
def test_compile_option_is_checked():
    with pytest.raises(UsageError, match="compile='yes'"):
        TrainConfig(compile="yes")


def test_auto_compiles_runs_that_repay_the_compile_time(monkeypatch):
    """"auto": compile iff steps x saving > compile time. With COSTS replaced by round numbers: 10 s to compile, 20 ms
    saved per MetaCL outer step, 1 ms per plain one -> MetaCL from 501 steps on, plain from 10 001."""
    monkeypatch.setattr(compiled, "have_compiler", lambda: True)
    monkeypatch.setattr(compiled, "COSTS", {("mlp", "metacl"): compiled.Cost(10.0, 0.020),
                                            ("mlp", "plain"): compiled.Cost(10.0, 0.001)})
    use = compiled.use_compiled
    assert not use("auto", "mlp", "metacl", 500) and use("auto", "mlp", "metacl", 501)
    assert not use("auto", "mlp", "plain", 10000) and use("auto", "mlp", "plain", 10001)
    assert not use("auto", "resnet18", "metacl", 10 ** 9)  # no measured saving: never
    assert not use("off", "mlp", "metacl", 10 ** 9) and use("on", "resnet18", "plain", 1)


def test_without_a_compiler_auto_is_eager_and_on_refuses(monkeypatch, capsys):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    monkeypatch.setattr(compiled, "_noted", False)
    assert not compiled.have_compiler()
    assert not compiled.use_compiled("auto", "mlp", "metacl", 10 ** 9)
    assert not compiled.use_compiled("auto", "mlp", "metacl", 10 ** 9)
    assert capsys.readouterr().err.count("no C++ compiler") == 1  # one line, once
    with pytest.raises(UsageError, match="C\\+\\+ compiler"):
        compiled.use_compiled("on", "mlp", "metacl", 1)


def test_short_runs_stay_eager(bench, monkeypatch):
    """Tests and the book's live pages: a short stream with compile="auto" compiles nothing."""
    monkeypatch.setattr(torch, "compile", lambda *a, **k: pytest.fail("torch.compile called"))
    for name in ("metacl_gradient", "plain_gradient"):
        monkeypatch.setattr(compiled, name, lambda *a, **k: pytest.fail("a compiled g1 called"))
    assert run_stream(bench, "metacl", TrainConfig(epochs=1, batch_size=10), seed=0)["compiled"] is False
    assert run_stream(bench, "ewc", TrainConfig(epochs=1, batch_size=10), seed=0)["compiled"] is False


def test_a_run_counts_its_outer_steps_by_kind_of_g1(bench, monkeypatch):
    """4 tasks x 50 images, 5 epochs of mini-batches of 10 = 100 outer steps; with 1 s to compile, a saving of
    10.1 ms per MetaCL step repays it (1.01 s) and 9.9 ms per plain step does not (0.99 s)."""
    assert training.outer_steps(bench.train_stream, TrainConfig(epochs=3, batch_size=20)) == 4 * 3 * 3
    monkeypatch.setattr(compiled, "have_compiler", lambda: True)
    monkeypatch.setattr(compiled, "COSTS", {("mlp", "metacl"): compiled.Cost(1.0, 0.0101),
                                            ("mlp", "plain"): compiled.Cost(1.0, 0.0099)})
    cfg = TrainConfig(epochs=5, batch_size=10, compile="auto")
    assert training.use_compiled(bench, METHODS["metacl"], cfg, bench.train_stream)
    assert not training.use_compiled(bench, METHODS["ewc"], cfg, bench.train_stream)
    assert not training.use_compiled(bench, METHODS["metacl"], cfg, bench.train_stream[:3])


def test_the_compile_cache_is_kept_in_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compiled.cache_dir() == tmp_path / "metacl-lite" / "torchinductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert compiled.cache_dir() == tmp_path / "mine"


# ----------------------------------------------------------------------------------------------------------------
# Compiled task gradients equal the eager ones
# ----------------------------------------------------------------------------------------------------------------
def conv_net(norm: nn.Module, heads: int = 3) -> MultiHeadNet:
    """A small multi-head CNN with the layer types of the paper's CNN (dropout) or ResNet-18 (BatchNorm)."""
    body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), norm, nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
    return MultiHeadNet(body, 4 * 4 * 4, 5, heads)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dropout", "batchnorm"])
def test_compiled_g1_equals_eager(kind):
    """Small multi-head CNNs (the paper's MLP: next test). g1 of MetaCL (Eqs. 8-9: 3 bundles of 4 images) and of the
    plain methods (task 2 of 3: zeros for the other heads), compiled vs eager, from the same parameters and the same
    global RNG state: equal within float rounding (atol 1e-6 on gradients of size ~0.1); dropout draws the same
    masks (the RNG ends in the same state, and other masks would change g1 by far more than the tolerance);
    BatchNorm's running statistics are updated as in eager training."""
    torch.manual_seed(0)
    model, task = conv_net(nn.Dropout(0.5) if kind == "dropout" else nn.BatchNorm2d(4)).train(), 2
    x = torch.randn(12, 3, 8, 8)
    y = torch.randint(0, 5, (12,))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    for eager, fast in ((lambda: metacl_gradient(model, x, y, task, 0.1, 4),
                         lambda: compiled.metacl_gradient(model, x, y, task, 0.1, 4, inner_loop)),
                        (lambda: plain_gradient(model, x, y, task),
                         lambda: compiled.plain_gradient(model, x, y, task))):
        outs = []
        for fn in (eager, fast):
            model.load_state_dict(start)
            torch.manual_seed(7)
            outs.append((fn(), torch.get_rng_state(), {k: v.clone() for k, v in model.state_dict().items()}))
        (g_e, rng_e, sd_e), (g_c, rng_c, sd_c) = outs
        torch.testing.assert_close(g_c, g_e, atol=1e-6, rtol=1e-5)
        assert g_e.abs().max() > 1e-2  # a gradient, not zeros
        assert torch.equal(rng_c, rng_e)
        for k in sd_e:
            torch.testing.assert_close(sd_c[k], sd_e[k], atol=1e-6, rtol=1e-5)
        if kind == "batchnorm":
            assert not torch.equal(sd_e["body.1.running_mean"], start["body.1.running_mean"])
    if kind == "batchnorm":  # the compiled steps mutate none of their inputs (a CUDA graph could not capture them)
        params, buffers, w, b = compiled._split(model, task)
        mine = {k: v.clone() for k, v in buffers.items()}
        before = {k: (v.clone(), v._version) for k, v in mine.items()}
        steps = compiled.compiled_steps(model, inner_loop)
        for out in (steps.metacl_steps(0.1, 4, params, mine, w, b, x, y), steps.plain_grad(params, mine, w, b, x, y)):
            for k, (v, version) in before.items():
                assert mine[k]._version == version and torch.equal(mine[k], v), k
            assert not torch.equal(out[-1]["1.running_mean"], mine["1.running_mean"])  # the updates are returned


@pytest.mark.slow
def test_compiled_runs_equal_eager_runs_for_every_method():
    """Two tasks of a short stream, all eleven methods, compile on vs off: the same accuracy matrix, and the same
    final parameters within 1e-5 except on a handful of entries. Float rounding differs, and Adam normalises each
    entry's gradient: on an entry whose gradient is ~0, rounding can flip the sign of the normalised step, so that
    entry differs by up to 2 lr per step (10 outer steps here), which is what the bound on the rest allows."""
    two = permuted_mnist(K=5, n_tasks=2, seed=3, split="val")
    finals = {}
    real = training._new_model

    def keep(b, seed, device="cpu"):
        finals["model"] = real(b, seed, device)
        return finals["model"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(training, "_new_model", keep)
        for name in METHODS:
            runs = {}
            for mode in ("off", "on"):
                cfg = TrainConfig(epochs=1, batch_size=10, bundle_size=5, beta=2.0, gamma=0.5, compile=mode)
                r = run_stream(two, name, cfg, seed=0)
                assert r["compiled"] is (mode == "on")
                runs[mode] = (r["acc_matrix"], params_vector(finals["model"]))
            np.testing.assert_array_equal(runs["on"][0], runs["off"][0])
            diff = (runs["on"][1] - runs["off"][1]).abs()
            assert int((diff > 1e-5).sum()) <= 5, name  # of 269 322 parameters
            assert float(diff.max()) <= 2 * cfg.outer_lr * 10, name


# ----------------------------------------------------------------------------------------------------------------
# The training loop's own overheads
# ----------------------------------------------------------------------------------------------------------------
def textbook_stream(bench, method, cfg, seed):
    """The loop of `training.train_experience` as first written, without its shortcuts: theta at every step,
    `x[idx]`, a copy of g in every `.grad`, and torch's default (for-loop) Adam. Returns the final parameters."""
    from metacl_lite.balance import BALANCE, reg_gradient
    from metacl_lite.importance import accumulate_importance

    method = METHODS[method]
    model = training._new_model(bench, seed)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    reg = training.RegState()
    for exp in bench.train_stream:
        penalised = method.regulariser is not None and reg.omega is not None
        balance = BALANCE[method.balance if penalised else "none"]
        importance = training.IMPORTANCE[method.regulariser](cfg) if method.regulariser else None
        opt = torch.optim.Adam(model.parameters(), lr=cfg.outer_lr, foreach=False)
        x_all, y_all = exp.inputs(), exp.y
        if importance is not None:
            importance.begin_task(model)
        for _ in range(cfg.epochs):
            order = torch.randperm(len(y_all), generator=gen)
            for s in range(0, len(order), cfg.batch_size):
                idx = order[s: s + cfg.batch_size]
                theta = params_vector(model)
                g1 = training.TASK_GRADIENT[method.update](model, x_all[idx], y_all[idx], exp.task_id, cfg)
                g2 = reg_gradient(theta, reg.anchor, reg.omega) if penalised else None
                g, _ = balance(g1, g2, cfg.beta, cfg.gamma)
                for p, gp in zip(model.parameters(), g.split([p.numel() for p in model.parameters()])):
                    p.grad = gp.view_as(p).clone()
                opt.step()
                if importance is not None:
                    importance.after_step(model, g1, theta)
        if importance is not None:
            reg.omega = accumulate_importance(reg.omega, importance.end_task(model, exp), cfg.omega_accumulate,
                                              cfg.omega_normalise)
            reg.anchor = params_vector(model)
    return params_vector(model)


@pytest.mark.parametrize("name", ["finetune", "metacl", "pi", "mas-metacl-beta", "ewc-metacl-lambda",
                                  "pi-metacl-lambda"])
def test_the_loops_shortcuts_change_no_bit(name, monkeypatch):
    """`train_experience` skips theta where nothing reads it, gathers the mini-batch with index_select, hands Adam
    views of g instead of copies, and runs Adam's foreach form: the final parameters equal the textbook loop's bit
    for bit (so the committed results files stay reproducible by their commands)."""
    three = permuted_mnist(K=5, n_tasks=3, seed=2, split="val")
    cfg = TrainConfig(epochs=2, batch_size=20, bundle_size=5, beta=3.0, gamma=0.3)
    finals = {}
    real = training._new_model

    def keep(b, seed, device="cpu"):
        finals["model"] = real(b, seed, device)
        return finals["model"]

    monkeypatch.setattr(training, "_new_model", keep)
    run_stream(three, name, cfg, seed=1, show_progress=False)
    got = params_vector(finals["model"])
    want = textbook_stream(three, name, cfg, seed=1)
    assert not torch.equal(want, params_vector(real(three, 1)))  # it trained
    assert torch.equal(got, want)
