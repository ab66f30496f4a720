"""Each importance measure on a model small enough to compute Omega by hand (a linear softmax classifier)."""
import numpy as np
import pytest
import torch
from torch import nn

from metacl_lite.data import Experience
from metacl_lite.importance import PathIntegral, ewc_fisher, mas_importance
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


def test_importances_non_negative_on_mlp():
    from metacl_lite.models import mlp
    torch.manual_seed(1)
    model = mlp(20, (8,), 5)
    exp = Experience(0, torch.randn(30, 20), torch.randint(0, 5, (30,)))
    for om in (ewc_fisher(model, exp), ewc_fisher(model, exp, "expected"), mas_importance(model, exp)):
        assert om.shape == (sum(p.numel() for p in model.parameters()),)
        assert bool((om >= 0).all()) and float(om.sum()) > 0
