"""Each importance measure on a model small enough to compute Omega by hand (a linear softmax classifier)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import vector_to_parameters

from metacl_lite.data.streams import Experience
from metacl_lite.importance import EWC, MAS, PI, PathIntegral, ewc_fisher, mas_importance
from metacl_lite.training import IMPORTANCE, TrainConfig, params_vector
from metacl_lite.models import MultiHeadNet


@pytest.fixture
def setup():
    torch.manual_seed(0)
    model = MultiHeadNet(nn.Identity(), 3, 4).double()
    x = torch.randn(7, 3, dtype=torch.float64)
    y = torch.randint(0, 4, (7,))
    W = model.heads[0].weight.detach().numpy()
    b = model.heads[0].bias.detach().numpy()
    return model, Experience(0, x, y), W, b, x.numpy(), y.numpy()


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def test_ewc_empirical_by_hand(setup):
    model, exp, W, b, x, y = setup
    fw, fb = np.zeros_like(W), np.zeros_like(b)
    for xi, yi in zip(x, y):
        d = _softmax(W @ xi + b) - np.eye(4)[yi]  # d(-log p_y)/dz
        fw += np.outer(d, xi) ** 2
        fb += d ** 2
    want = np.concatenate([fw.ravel(), fb]) / len(x)
    np.testing.assert_allclose(ewc_fisher(model, exp, "empirical").numpy(), want, rtol=1e-10)


def test_ewc_expected_by_hand(setup):
    model, exp, W, b, x, y = setup
    fw, fb = np.zeros_like(W), np.zeros_like(b)
    for xi in x:
        p = _softmax(W @ xi + b)
        for c in range(4):
            d = p - np.eye(4)[c]
            fw += p[c] * np.outer(d, xi) ** 2
            fb += p[c] * d ** 2
    want = np.concatenate([fw.ravel(), fb]) / len(x)
    np.testing.assert_allclose(ewc_fisher(model, exp, "expected", chunk=3).numpy(), want, rtol=1e-10)


def test_mas_by_hand(setup):
    model, exp, W, b, x, y = setup
    fw, fb = np.zeros_like(W), np.zeros_like(b)
    for xi in x:
        z = W @ xi + b
        fw += np.abs(2 * np.outer(z, xi))
        fb += np.abs(2 * z)
    want = np.concatenate([fw.ravel(), fb]) / len(x)
    np.testing.assert_allclose(mas_importance(model, exp, chunk=2).numpy(), want, rtol=1e-10)


def test_unknown_fisher_kind(setup):
    model, exp, *_ = setup
    with pytest.raises(ValueError, match="Fisher"):
        ewc_fisher(model, exp, "sampled")


def test_pi_by_hand():
    theta0 = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    pi = PathIntegral(theta0, xi=0.5)
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    steps = [(t([1.0, -2.0, 0.5]), t([-0.1, 0.2, 0.3])), (t([0.5, -1.0, -1.0]), t([-0.2, 0.1, 0.1]))]
    theta = theta0.clone()
    for g, d in steps:
        pi.accumulate(g, d)
        theta = theta + d
    omega = np.array([0.1 + 0.1, 0.4 + 0.1, -0.15 + 0.1])  # sum of -g*d
    total = np.array([-0.3, 0.3, 0.4])
    want = np.maximum(omega, 0) / (total ** 2 + 0.5)
    np.testing.assert_allclose(pi.importance(theta).numpy(), want, rtol=1e-12)


def _per_sample_loop(model, exp, fn):
    """1/N sum_n of fn(flat gradient of sample n), one autograd call per sample (no vmap, no chunks)."""
    params = list(model.parameters())
    total = torch.zeros(sum(p.numel() for p in params), dtype=torch.float64)
    for xi, yi in zip(exp.x, exp.y):
        total += fn(xi.unsqueeze(0), yi.unsqueeze(0), params)
    return total / len(exp)


def _grad(out, params):
    gs = torch.autograd.grad(out, params, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(gs, params)])


@pytest.fixture
def two_head_mlp():
    """A hidden layer, two heads, and task 1's data (the measures must use head 1, and give head 0 nothing)."""
    from metacl_lite.models import mlp
    torch.manual_seed(1)
    model = mlp(6, (5,), 3, n_heads=2).double()
    return model, Experience(1, torch.randn(9, 6, dtype=torch.float64), torch.randint(0, 3, (9,)))


def test_mlp_measures_equal_a_per_sample_loop(two_head_mlp):
    """vmap'd per-sample gradients in chunks of 4 against one autograd call per sample."""
    model, exp = two_head_mlp
    nll = lambda x, y, ps: _grad(F.cross_entropy(model(x, 1), y), ps) ** 2  # noqa: E731
    mas = lambda x, y, ps: _grad(model(x, 1).pow(2).sum(), ps).abs()  # noqa: E731

    def expected(x, y, ps):
        p = torch.softmax(model(x, 1), -1).detach()[0]
        return sum(p[c] * _grad(F.cross_entropy(model(x, 1), torch.tensor([c])), ps) ** 2 for c in range(3))

    for got, fn in ((ewc_fisher(model, exp, "empirical", chunk=4), nll), (ewc_fisher(model, exp, "expected", chunk=4),
                    expected), (mas_importance(model, exp, chunk=4), mas)):
        torch.testing.assert_close(got, _per_sample_loop(model, exp, fn), rtol=1e-10, atol=0.0)


def test_registry_estimators_on_hand_values(setup, two_head_mlp):
    """The interface the training loop calls: EWC and MAS give the functions' Omega at the end of the task; PI
    follows the path it is shown (Zenke et al.: -g1 * delta summed, clamped, divided by Delta^2 + xi)."""
    model, exp = two_head_mlp
    for est, want in ((EWC("expected"), ewc_fisher(model, exp, "expected")), (MAS(), mas_importance(model, exp))):
        est.begin_task(model)
        est.after_step(model, torch.ones(len(want), dtype=torch.float64), params_vector(model) - 1.0)
        torch.testing.assert_close(est.end_task(model, exp), want, rtol=0.0, atol=0.0)
    lin, lin_exp, *_ = setup  # 3 inputs, 4 classes: 16 parameters
    theta0 = params_vector(lin)
    est = PI(xi=0.5)
    est.begin_task(lin)
    g1, delta = torch.linspace(-1.0, 1.0, 16, dtype=torch.float64), torch.full((16,), 0.1, dtype=torch.float64)
    with torch.no_grad():
        vector_to_parameters(theta0 + delta, lin.parameters())
    est.after_step(lin, g1, theta0)
    want = (-g1 * 0.1).clamp(min=0) / (0.1 ** 2 + 0.5)
    torch.testing.assert_close(est.end_task(lin, lin_exp), want, rtol=1e-12, atol=1e-15)


def test_training_builds_each_estimator_with_the_run_options():
    assert IMPORTANCE["ewc"](TrainConfig(fisher="expected")).kind == "expected"
    assert IMPORTANCE["pi"](TrainConfig(pi_xi=0.3)).xi == 0.3
    assert type(IMPORTANCE["mas"](TrainConfig())) is MAS


def test_outer_product_rule_equals_vmap_per_sample_gradients():
    """The MLP path (one GEMM per layer, `_linear_per_sample`) against vmap'd per-sample gradients: float64 to 1e-12,
    float32 to 1e-5 relative, on the two-layer, two-head network with task 1 (head 0 gets exactly zero)."""
    from metacl_lite.models import mlp
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        torch.manual_seed(2)
        model = mlp(20, (16, 12), 5, n_heads=2).to(dtype)
        exp = Experience(1, torch.randn(300, 20, dtype=dtype), torch.randint(0, 5, (300,)))
        for f in (ewc_fisher, mas_importance):
            fast, ref = f(model, exp), f(model, exp, path="vmap")
            torch.testing.assert_close(fast, ref, rtol=tol, atol=tol * float(ref.abs().max()))
            n_head0 = model.heads[0].weight.numel() + model.heads[0].bias.numel()
            head0 = slice(len(fast) - 2 * n_head0, len(fast) - n_head0)
            assert torch.count_nonzero(fast[head0]) == 0 and torch.count_nonzero(fast) > len(fast) // 2


def test_models_with_other_layers_take_the_vmap_path():
    from metacl_lite.importance import linear_only
    from metacl_lite.models import cifar_cnn, mlp
    assert linear_only(mlp()) and not linear_only(cifar_cnn())
    with pytest.raises(ValueError, match="path"):
        ewc_fisher(mlp(), Experience(0, torch.zeros(2, 784), torch.zeros(2, dtype=torch.long)), path="fast")
