"""Eq. 5 (the closed-form lambda) against a generic constrained QP solver, KKT conditions, and edge cases."""
import numpy as np
import pytest
import torch

from metacl_lite.balance import (balance_qp_numeric, dynamic_balance, dynamic_lambda, fixed_balance, kkt_residuals,
                                 reg_gradient, reg_penalty)


def _instances(n=40, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        p = int(rng.integers(2, 30))
        g1, g2 = rng.normal(size=p), rng.normal(size=p) * 10 ** rng.uniform(-2, 2)
        if i % 2:  # force the other branch half the time
            g2 = g2 if g1 @ g2 < 0 else -g2
        else:
            g2 = g2 if g1 @ g2 >= 0 else -g2
        yield g1, g2


def test_closed_form_equals_generic_qp_both_branches():
    branches = set()
    for g1, g2 in _instances():
        gx, lam = dynamic_balance(torch.tensor(g1), torch.tensor(g2))
        ref = balance_qp_numeric(g1, g2)
        np.testing.assert_allclose(gx.numpy(), ref, atol=1e-6 * (1 + np.abs(g1).max()))
        branches.add(lam > 0)
    assert branches == {True, False}


def test_kkt_conditions():
    for g1, g2 in _instances(seed=1):
        t1, t2 = torch.tensor(g1), torch.tensor(g2)
        gx, lam = dynamic_balance(t1, t2)
        assert lam >= 0  # dual feasibility
        assert float(gx @ t2) >= -1e-9 * float(t2 @ t2)  # primal feasibility
        torch.testing.assert_close(gx - t1 - lam * t2, torch.zeros_like(t1))  # stationarity
        assert abs(lam * float(gx @ t2)) <= 1e-8 * (1 + float(t1 @ t1) + float(t2 @ t2))  # complementary slackness


def test_kkt_residuals_zero_at_optimum_positive_elsewhere():
    for g1, g2 in _instances(seed=3):
        t1, t2 = torch.tensor(g1), torch.tensor(g2)
        gx, lam = dynamic_balance(t1, t2)
        scale = 1 + float(t1 @ t1) + float(t2 @ t2)
        assert all(v <= 1e-8 * scale for v in kkt_residuals(t1, t2, gx, lam).values())
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 0.0])  # conflicting: optimum g = 0, lambda = 1
    r = kkt_residuals(g1, g2, g1, -0.5)  # g = g1 (infeasible), lambda < 0
    assert r == {"stationarity": 0.5, "primal": 1.0, "dual": 0.5, "complementarity": 0.5}


@pytest.mark.parametrize("gamma", [0.0, 0.1, 10.0])
def test_gx_never_increases_the_penalty(gamma):
    for g1, g2 in _instances(seed=2):
        gx, _ = dynamic_balance(torch.tensor(g1), torch.tensor(g2), gamma)
        assert float(gx @ torch.tensor(g2)) >= -1e-9 * float(g2 @ g2)


def test_g2_zero_gives_lambda_zero():
    g1 = torch.randn(7)
    z = torch.zeros(7)
    assert dynamic_lambda(g1, z) == 0.0
    gx, lam = dynamic_balance(g1, z, gamma=0.5)
    assert lam == 0.0 and torch.equal(gx, g1)
    np.testing.assert_allclose(balance_qp_numeric(g1.numpy(), z.numpy()), g1.numpy(), atol=1e-8)


def test_lambda_branches_exact():
    g1 = torch.tensor([1.0, 0.0])
    assert dynamic_lambda(g1, torch.tensor([1.0, 1.0])) == 0.0  # g1.g2 >= 0
    assert dynamic_lambda(g1, torch.tensor([0.0, 1.0])) == 0.0  # orthogonal: boundary of the first branch
    assert dynamic_lambda(g1, torch.tensor([-2.0, 0.0])) == pytest.approx(0.5)  # -(-2)/4


def test_penalty_and_gradient():
    theta, anchor, omega = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64), torch.rand(5, dtype=torch.float64)
    t = theta.clone().requires_grad_(True)
    reg_penalty(t, anchor, omega).backward()
    torch.testing.assert_close(t.grad, reg_gradient(theta, anchor, omega))
    assert float(reg_penalty(anchor, anchor, omega)) == 0.0
    torch.testing.assert_close(fixed_balance(theta, anchor, 2.0), theta + 2 * anchor)
