"""Eqs. 3-5 (the balance problem and its closed-form lambda) against a generic constrained QP solver and hand-solved
cases; the KKT conditions; the penalty of Eq. 2; the three balances the training loop picks from."""
import numpy as np
import pytest
import torch

from metacl_lite.balance import (BALANCE, balance_qp_numeric, dynamic_balance, dynamic_lambda, fixed_balance,
                                 kkt_residuals, reg_gradient, reg_penalty)


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


def _tol(g1):
    return 1e-6 * (1 + np.abs(g1).max())


def test_closed_form_equals_generic_qp_both_branches():
    """g_x of Eq. 5 is the solution of Eq. 3 found by SLSQP, which knows nothing of the closed form."""
    branches = set()
    for g1, g2 in _instances():
        gx, lam = dynamic_balance(torch.tensor(g1), torch.tensor(g2))
        np.testing.assert_allclose(gx.numpy(), balance_qp_numeric(g1, g2), atol=_tol(g1))
        branches.add(float(lam) > 0)
    assert branches == {True, False}


def test_lambda_is_the_multiplier_of_the_qp_solution():
    """Stationarity (Appendix A) read off the solver's g_x gives its multiplier, (g_x - g1).g2 / ||g2||^2: it is the
    closed-form lambda; and <g_x, g2> = max(g1.g2, 0) (0 on the active branch: complementary slackness)."""
    for g1, g2 in _instances(seed=1):
        ref = balance_qp_numeric(g1, g2)
        lam_ref = (ref - g1) @ g2 / (g2 @ g2)
        gx, lam = dynamic_balance(torch.tensor(g1), torch.tensor(g2))
        assert float(lam) == pytest.approx(lam_ref, abs=_tol(g1) / np.linalg.norm(g2))
        assert float(gx @ torch.tensor(g2)) == pytest.approx(max(g1 @ g2, 0.0), abs=1e-9 * (1 + g2 @ g2))


@pytest.mark.parametrize("gamma", [0.1, 10.0])
def test_gamma_adds_gamma_g2_to_the_qp_solution(gamma):
    """Alg. 2 with the paper's small constant: g_x = g1 + (lambda + gamma) g2 = (solution of Eq. 3) + gamma g2."""
    for g1, g2 in _instances(seed=2):
        gx, lam = dynamic_balance(torch.tensor(g1), torch.tensor(g2), gamma)
        np.testing.assert_allclose(gx.numpy(), balance_qp_numeric(g1, g2) + gamma * g2,
                                   atol=_tol(g1) + 1e-9 * gamma * np.abs(g2).max())
        assert lam == dynamic_lambda(torch.tensor(g1), torch.tensor(g2))  # gamma is not part of lambda


def test_hand_solved_case():
    """g1 = (1, 0), g2 = (-1, 1): g1.g2 = -1, ||g2||^2 = 2, lambda = 1/2; the projection of (1, 0) onto
    {g : g_y >= g_x} is (1/2, 1/2); with gamma = 1/4, g_x = (1, 0) + 3/4 (-1, 1) = (1/4, 3/4)."""
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    gx, lam = dynamic_balance(g1, g2)
    assert lam == 0.5 and gx.tolist() == [0.5, 0.5]
    gx, lam = dynamic_balance(g1, g2, gamma=0.25)
    assert lam == 0.5 and gx.tolist() == [0.25, 0.75]
    gx, lam = dynamic_balance(g1, -g2, gamma=0.25)  # g1.(-g2) = 1 >= 0: lambda = 0, g_x = g1 + gamma (-g2)
    assert lam == 0.0 and gx.tolist() == [1.25, -0.25]


def test_kkt_residuals_zero_at_optimum_positive_elsewhere():
    for g1, g2 in _instances(seed=3):  # the solver's g_x with the closed-form lambda
        t1, t2 = torch.tensor(g1), torch.tensor(g2)
        ref = torch.tensor(balance_qp_numeric(g1, g2))
        r = kkt_residuals(t1, t2, ref, dynamic_lambda(t1, t2))
        assert max(r.values()) <= 1e-5 * (1 + float(t1 @ t1) + float(t2 @ t2))
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 0.0])  # conflicting: optimum g = 0, lambda = 1
    r = kkt_residuals(g1, g2, g1, -0.5)  # g = g1 (infeasible), lambda < 0
    assert r == {"stationarity": 0.5, "primal": 1.0, "dual": 0.5, "complementarity": 0.5}


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
    assert dynamic_lambda(g1, torch.tensor([-2.0, 0.0])) == 0.5  # -(-2)/4


def test_penalty_and_gradient():
    """g2 = 2 Omega (theta - bar_theta) is the autograd gradient of Eq. 2's penalty; by hand on 2 parameters."""
    theta, anchor, omega = (torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64),
                            torch.rand(5, dtype=torch.float64))
    t = theta.clone().requires_grad_(True)
    reg_penalty(t, anchor, omega).backward()
    torch.testing.assert_close(t.grad, reg_gradient(theta, anchor, omega))
    theta, anchor, omega = torch.tensor([1.0, 3.0]), torch.tensor([0.5, 1.0]), torch.tensor([2.0, 0.25])
    assert float(reg_penalty(theta, anchor, omega)) == 2 * 0.25 + 0.25 * 4  # sum Omega_k (theta_k - bar_theta_k)^2
    assert reg_gradient(theta, anchor, omega).tolist() == [2.0, 1.0]
    assert float(reg_penalty(anchor, anchor, omega)) == 0.0


def test_the_three_balances_on_a_hand_case():
    """What the training loop hands to Adam: "none" g1; "beta" g1 + beta g2 (Eq. 2 / Alg. 1); "lambda" Eq. 5 plus
    gamma (Alg. 2). g1 = (1, 0), g2 = (-1, 1), beta = 3, gamma = 1/4."""
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    assert set(BALANCE) == {"none", "beta", "lambda"}
    g, lam = BALANCE["none"](g1, None, 3.0, 0.25)
    assert g.tolist() == [1.0, 0.0] and lam == 0.0
    g, lam = BALANCE["beta"](g1, g2, 3.0, 0.25)
    assert g.tolist() == [-2.0, 3.0] and lam == 0.0
    g, lam = BALANCE["lambda"](g1, g2, 3.0, 0.25)
    assert g.tolist() == [0.25, 0.75] and lam == 0.5
    assert fixed_balance(g1, g2, 3.0).tolist() == [-2.0, 3.0]


def test_lambda_stays_a_tensor_and_equals_the_python_float_arithmetic_bit_for_bit():
    """lambda is a 0-dim tensor on the gradients' device (no GPU->CPU read per outer step), and g_x is bit for bit
    what the Python-float formula gives (float32 dot products read as Python floats, lambda + gamma in double)."""
    def textbook(g1, g2, gamma):
        dot = float(torch.dot(g1, g2))
        nn2 = float(torch.dot(g2, g2))
        lam = 0.0 if dot >= 0.0 or nn2 == 0.0 else -dot / nn2
        return g1 + (lam + gamma) * g2, lam

    gen = torch.Generator().manual_seed(0)
    for i in range(400):
        n = int(torch.randint(1, 5000, (1,), generator=gen))
        g1 = torch.randn(n, generator=gen) * 10 ** float(torch.empty(1).uniform_(-4, 4, generator=gen))
        g2 = torch.zeros(n) if i % 7 == 0 else torch.randn(n, generator=gen) * 10 ** float(
            torch.empty(1).uniform_(-6, 4, generator=gen))
        gamma = (0.0, 0.01, 0.1, 1e-3, 0.37)[i % 5]
        gx, lam = dynamic_balance(g1, g2, gamma)
        want, want_lam = textbook(g1, g2, gamma)
        assert isinstance(lam, torch.Tensor) and lam.dim() == 0 and lam.device == g1.device
        assert torch.equal(gx, want) and float(lam) == want_lam, f"instance {i}"
