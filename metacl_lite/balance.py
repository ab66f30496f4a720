"""Balancing current-task learning against forgetting: Eq. 2 (penalty), Alg. 1 (fixed beta), Eqs. 3-5 and Alg. 2
(dynamic lambda).

Gradients are flat 1-D tensors over all parameters (see `flatten`). The penalty gradient is computed in closed
form, g2 = d/dtheta sum_k Omega_k (theta_k - bar_theta_k)^2 = 2 Omega (theta - bar_theta).
`BALANCE` names the three ways the training loop combines g1 and g2.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import numpy as np
import torch


def flatten(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def reg_penalty(theta: torch.Tensor, anchor: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """Eq. 2's regulariser  l_reg(theta) = sum_k Omega_k (theta_k - bar_theta_k)^2."""
    return (omega * (theta - anchor) ** 2).sum()


def reg_gradient(theta: torch.Tensor, anchor: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """g2 = d l_reg / d theta = 2 Omega (theta - bar_theta)  (the "gradient for forgetting reducing", Alg. 1/2)."""
    return 2.0 * omega * (theta - anchor)


def fixed_balance(g1: torch.Tensor, g2: torch.Tensor, beta: float) -> torch.Tensor:
    """Fixed balance (Eq. 2 / Alg. 1): g = g1 + beta * g2."""
    return g1 + beta * g2


def dynamic_lambda(g1: torch.Tensor, g2: torch.Tensor) -> torch.Tensor:
    """Eq. 5, the optimal Lagrange multiplier of the dual (Eq. 4): 0 if g1.g2 >= 0, else -g1.g2 / ||g2||^2.

    Guard: when ||g2|| = 0 (every task's first step, where theta = bar_theta) the constraint g_x.g2 >= 0 holds
    for any g_x, and the multiplier is 0 (g1.g2 = 0 there too, so the first branch already applies; the guard
    also covers a numerically zero g2 with a non-zero dot product).

    Returns a 0-dim float64 tensor on the gradients' device, not a Python float: reading a GPU number on the CPU
    makes the CPU wait for the GPU at every outer step. `float(lam)` where a number is needed. The arithmetic is
    that of Python floats (the float32 dot products, exactly widened to float64), so the values are the same.
    """
    dot = torch.dot(g1, g2).double()
    nn2 = torch.dot(g2, g2).double()
    return torch.where((dot >= 0.0) | (nn2 == 0.0), torch.zeros_like(dot), -dot / nn2)


def dynamic_balance(g1: torch.Tensor, g2: torch.Tensor, gamma: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic balance (Eqs. 4-5 and Alg. 2): g_x = g1 + (lambda + gamma) g2, with the small constant gamma > 0 that
    the paper adds to lambda "to further fortify the knowledge preservation".

    Returns (g_x, lambda), lambda as `dynamic_lambda` gives it (a 0-dim tensor). With gamma = 0, g_x solves Eq. 3:
    the projection of g1 onto {g : g.g2 >= 0}. lambda + gamma is rounded to the gradients' dtype before it
    multiplies g2, as a Python number would be.
    """
    lam = dynamic_lambda(g1, g2)
    return g1 + (lam + gamma).to(g2.dtype) * g2, lam


Balance = Callable[[torch.Tensor, Optional[torch.Tensor], float, float], tuple[torch.Tensor, float | torch.Tensor]]

#: Method.balance -> (g1, g2, beta, gamma) -> (g, lambda): the gradient handed to the outer optimiser.
#: "none": g = g1 (no penalty: fine-tune, MetaCL w/o reg, and every method's first task); "beta": Eq. 2 / Alg. 1;
#: "lambda": Eqs. 4-5 / Alg. 2.
BALANCE: dict[str, Balance] = {
    "none": lambda g1, g2, beta, gamma: (g1, 0.0),
    "beta": lambda g1, g2, beta, gamma: (fixed_balance(g1, g2, beta), 0.0),
    "lambda": lambda g1, g2, beta, gamma: dynamic_balance(g1, g2, gamma),
}


def kkt_residuals(g1: torch.Tensor, g2: torch.Tensor, g: torch.Tensor, lam: float) -> dict[str, float]:
    """The KKT conditions of Eq. 3 (Appendix A) at a candidate (g, lambda), as non-negative residuals (all 0 at the
    optimum): stationarity max|g - g1 - lambda g2|, primal violation max(0, -<g, g2>), dual violation max(0, -lambda),
    complementary slackness |lambda <g, g2>|."""
    dot = float(torch.dot(g, g2))
    return {"stationarity": float((g - g1 - lam * g2).abs().max()) if g.numel() else 0.0,
            "primal": max(0.0, -dot), "dual": max(0.0, -float(lam)), "complementarity": abs(float(lam) * dot)}


def balance_qp_numeric(g1: np.ndarray, g2: np.ndarray, method: str = "slsqp") -> np.ndarray:
    """Solve Eq. 3, min_g 1/2 ||g - g1||^2 s.t. <g, g2> >= 0, with a generic constrained QP solver.

    It knows nothing of the closed form; it is the reference `dynamic_balance` is checked against.
    method="slsqp": SciPy's SLSQP (dense; for small problems). method="osqp": the OSQP solver with a sparse
    identity Hessian (scales to the ~270 000 parameters of the MLP; needs the `osqp` package, in the book extra).
    """
    g1 = np.asarray(g1, dtype=np.float64)
    g2 = np.asarray(g2, dtype=np.float64)
    if method == "osqp":
        import osqp
        import scipy.sparse as sp

        solver = osqp.OSQP()
        solver.setup(P=sp.identity(len(g1), format="csc"), q=-g1, A=sp.csc_matrix(g2[None, :]),
                     l=np.array([0.0]), u=np.array([np.inf]), eps_abs=1e-10, eps_rel=1e-10, max_iter=100000,
                     polishing=True, verbose=False)
        res = solver.solve()
        if res.info.status != "solved":
            raise RuntimeError(f"OSQP failed: {res.info.status}")
        return np.asarray(res.x)
    if method != "slsqp":
        raise ValueError(f"unknown QP method {method!r}; use 'slsqp' or 'osqp'")
    from scipy.optimize import minimize

    res = minimize(
        lambda g: 0.5 * np.sum((g - g1) ** 2), x0=np.zeros_like(g1), jac=lambda g: g - g1,
        constraints=[{"type": "ineq", "fun": lambda g: g @ g2, "jac": lambda g: g2}],
        method="SLSQP", options={"ftol": 1e-12, "maxiter": 1000},
    )
    if not res.success:
        raise RuntimeError(f"SLSQP failed: {res.message}")
    return res.x
