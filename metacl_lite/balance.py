"""Balancing current-task learning against forgetting: Eq. 2 (penalty), Alg. 1 (fixed beta), Eqs. 3-5 and Alg. 2
(dynamic lambda), and Eq. 3 with two references (`two_reference_lambdas`: the regulariser's and an episodic memory's,
an extension) or many (`many_reference_lambdas`: GEM's, one per past task).

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


#: The columns of log["penalty"] (`training.TrainConfig.record_penalty`, `penalty_row`), one row per penalised outer
#: step: the task, lambda (Eq. 5; 0 for the fixed balance), gamma and beta of the run, Eq. 2's l_reg before and after
#: the optimiser step, <g, g2> (g: the combined gradient handed to Adam), <Delta theta, g2> (Delta theta: the step Adam
#: actually took), l_reg after a step of Adam's length along -g instead (theta - |Delta theta| g / |g|: what the dual's
#: guarantee is about), and the norms |g| and |g2|; all in float64.
PENALTY_COLUMNS = ("task", "lambda", "gamma", "beta", "l_reg_before", "l_reg_after", "g_dot_g2", "step_dot_g2",
                   "l_reg_after_along_g", "g_norm", "g2_norm")


def penalty_row(task, lam: float, gamma: float, beta: float, theta: torch.Tensor, theta_after: torch.Tensor,
                g: torch.Tensor, g2: torch.Tensor, omega: torch.Tensor, anchor: torch.Tensor) -> list:
    """One row of log["penalty"] (`PENALTY_COLUMNS`) for the step from theta to theta_after, under the penalty of
    Omega and bar_theta (`anchor`)."""
    d = lambda t: t.detach().to(torch.float64)  # noqa: E731
    omega, anchor, g2d, gd, th = d(omega), d(anchor), d(g2), d(g), d(theta)
    step = d(theta_after) - th
    gn = float(gd.norm())
    along = th - (float(step.norm()) / gn) * gd if gn > 0 else th
    return [task, float(lam), float(gamma), float(beta), float(reg_penalty(th, anchor, omega)),
            float(reg_penalty(d(theta_after), anchor, omega)), float(torch.dot(gd, g2d)), float(torch.dot(step, g2d)),
            float(reg_penalty(along, anchor, omega)), gn, float(g2d.norm())]


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


def two_reference_lambdas(g1: torch.Tensor, g2: torch.Tensor, gm: torch.Tensor) -> torch.Tensor:
    """Eq. 3 with two references, min_g 1/2 ||g - g1||^2 s.t. <g, g2> >= 0 and <g, gm> >= 0 (g2: the regulariser's
    gradient, gm: an episodic memory's), solved through its two-variable dual in closed form; returns the optimal
    multipliers (lambda_2, lambda_m) as a float64 tensor of two, on the gradients' device (no number is read on the
    CPU), and g = g1 + lambda_2 g2 + lambda_m gm.

    The dual. With R = [g2, gm] (columns), the Lagrangian 1/2 ||g - g1||^2 - lambda^T R^T g is stationary at
    g = g1 + R lambda; put back, the dual (Eq. 4 with two multipliers) is max_{lambda >= 0} -q(lambda) with
    q(lambda) = 1/2 lambda^T G lambda + c^T lambda, G = R^T R (||g2||^2, <g2, gm>, ||gm||^2) and c = R^T g1
    (<g1, g2>, <g1, gm>). Its KKT conditions: lambda >= 0, s = G lambda + c >= 0 (s = R^T g, the two constraints),
    lambda_i s_i = 0.

    Active sets. The minimum of the convex q over lambda >= 0 lies on one of four faces, and on its face it is that
    face's unconstrained minimiser: none active, lambda = 0 (g = g1); g2's alone, lambda = (-c_2 / ||g2||^2, 0)
    (Eq. 5); gm's alone, (0, -c_m / ||gm||^2); both, lambda = -G^{-1} c. Each candidate that lies in lambda >= 0 is
    a dual feasible point, and the one with the least q is the optimum (ties: the first, in that order; every optimum
    gives the same g, the primal being strictly convex). A reference that is zero constrains nothing: its
    single-reference candidate is left out and its multiplier stays 0. Parallel or antiparallel references make G
    singular (det G <= 1e-10 ||g2||^2 ||gm||^2, rounding included): "both" is left out, and a single-reference
    candidate is an optimum (antiparallel ones leave the hyperplane <g, g2> = 0, on which it lies).

    The dot products are taken in float64 (the float32 gradients widened, their products exact), so that a
    singular G is seen as one."""
    a, b, x = g2.double(), gm.double(), g1.double()
    ab = torch.dot(a, b)
    G = torch.stack([torch.stack([torch.dot(a, a), ab]), torch.stack([ab, torch.dot(b, b)])])
    c = torch.stack([torch.dot(x, a), torch.dot(x, b)])
    det = G[0, 0] * G[1, 1] - ab * ab
    zero = torch.zeros_like(det)

    def ratio(num: torch.Tensor, den: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
        return torch.where(ok, num / torch.where(ok, den, torch.ones_like(den)), zero)

    ok = torch.stack([torch.ones_like(det, dtype=torch.bool), G[0, 0] > 0, G[1, 1] > 0,
                      det > 1e-10 * G[0, 0] * G[1, 1]])
    lams = torch.stack([torch.stack([zero, zero]),
                        torch.stack([ratio(-c[0], G[0, 0], ok[1]), zero]),
                        torch.stack([zero, ratio(-c[1], G[1, 1], ok[2])]),
                        torch.stack([ratio(G[0, 1] * c[1] - G[1, 1] * c[0], det, ok[3]),
                                     ratio(G[0, 1] * c[0] - G[0, 0] * c[1], det, ok[3])])])
    q = 0.5 * ((lams @ G) * lams).sum(1) + lams @ c
    q = torch.where(ok & (lams >= 0).all(1), q, torch.full_like(q, float("inf")))
    return lams[torch.argmin(q)]


def two_reference_balance(g1: torch.Tensor, g2: torch.Tensor, gm: torch.Tensor,
                          gamma: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """MetaCL-lambda with two references (Alg. 2's step with an episodic memory's gradient gm beside the regulariser's
    g2): g = g1 + (lambda_2 + gamma) g2 + lambda_m gm with (lambda_2, lambda_m) of `two_reference_lambdas`, and
    gamma added to the regulariser's multiplier as Alg. 2 adds it. Returns (g, lambda_2): the regulariser's
    multiplier, as `dynamic_balance` returns its lambda. With gamma = 0, g solves the two-reference problem."""
    lam = two_reference_lambdas(g1, g2, gm)
    return g1 + (lam[0] + gamma).to(g2.dtype) * g2 + lam[1].to(gm.dtype) * gm, lam[0]


def many_reference_lambdas(g1: torch.Tensor, refs: torch.Tensor) -> torch.Tensor:
    """Eq. 3 with one reference per row of `refs` (GEM, Lopez-Paz and Ranzato 2017: one per past task), min_g
    1/2 ||g - g1||^2 s.t. <g, r_i> >= 0 for every row r_i, through the dual of `two_reference_lambdas` with n
    multipliers: min_{lambda >= 0} q(lambda) = 1/2 lambda^T G lambda + c^T lambda, G = R R^T, c = R g1, and
    g = g1 + R^T lambda, solved by `gram_nnls` to 1e-12 of the instance's scale. Returns the optimal multipliers
    (float64, on the CPU). Every optimum gives the same g (the primal is strictly convex). The dot products are taken
    in float64, as the two-reference path takes them."""
    R = refs.double()
    G, c = (R @ R.T).cpu().numpy(), (R @ g1.double()).cpu().numpy()
    tol = 1e-12 * max(float(np.sqrt(G.diagonal().max(initial=0.0))) * float(g1.double().norm()), 1e-300)
    return torch.from_numpy(gram_nnls(G, c, tol))


def gram_nnls(G: np.ndarray, c: np.ndarray, tol: float) -> np.ndarray:
    """min_{lambda >= 0} 1/2 lambda^T G lambda + c^T lambda (non-negative least squares in its Gram form), by Lawson
    and Hanson's active-set method as Bro and De Jong write it for G and c: a variable joins the active set while its
    w = -(G lambda + c) exceeds `tol` (the largest first); each active set's multipliers solve G_PP lambda_P = -c_P
    (least squares: a singular G_PP, of parallel, repeated or zero references, gives its least-norm solution); a step
    that would make one negative stops where it reaches 0, and that one leaves the set whatever the rounding left of
    its multiplier (one left at 5e-324, whose step underflows to 0, looped for ever: tests/test_balance_two.py)."""
    n, lam, active = len(c), np.zeros(len(c)), np.zeros(len(c), dtype=bool)
    for _ in range(3 * n):
        w = -(G @ lam + c)
        if not (w[~active] > tol).any():
            break
        active[np.flatnonzero(~active)[np.argmax(w[~active])]] = True
        while True:
            s = np.zeros(n)
            s[active] = np.linalg.lstsq(G[np.ix_(active, active)], -c[active], rcond=None)[0]
            if (s[active] > 0).all():
                lam = s
                break
            down = active & (s <= 0)
            ratio = lam[down] / np.maximum(lam[down] - s[down], 1e-300)
            lam = lam + ratio.min() * (s - lam)
            active &= lam > 0
            active[np.flatnonzero(down)[np.argmin(ratio)]] = False
            lam[~active] = 0.0
    return lam


Balance = Callable[[torch.Tensor, Optional[torch.Tensor], float, float], tuple[torch.Tensor, float | torch.Tensor]]

#: Method.balance -> (g1, g2, beta, gamma) -> (g, lambda): the gradient handed to the outer optimiser.
#: "none": g = g1 (no penalty: fine-tune, MetaCL w/o reg, and every method's first task); "beta": Eq. 2 / Alg. 1;
#: "lambda": Eqs. 4-5 / Alg. 2.
BALANCE: dict[str, Balance] = {
    "none": lambda g1, g2, beta, gamma: (g1, 0.0),
    "beta": lambda g1, g2, beta, gamma: (fixed_balance(g1, g2, beta), 0.0),
    "lambda": lambda g1, g2, beta, gamma: dynamic_balance(g1, g2, gamma),
}


def kkt_residuals(g1: torch.Tensor, g2: torch.Tensor, g: torch.Tensor, lam) -> dict[str, float]:
    """The KKT conditions of Eq. 3 (Appendix A) at a candidate (g, lambda), as non-negative residuals (all 0 at the
    optimum): stationarity max|g - g1 - lambda g2|, primal violation max(0, -<g, g2>), dual violation max(0, -lambda),
    complementary slackness |lambda <g, g2>|. With several references (`g2` 2-D, one per row, and one multiplier each
    in `lam`: the two-reference problem of `two_reference_lambdas`) stationarity is max|g - g1 - sum_i lambda_i g2_i|
    and each other residual the largest over the constraints."""
    refs, lams = (g2, [float(x) for x in lam]) if g2.dim() == 2 else (g2[None], [float(lam)])
    dots = [float(torch.dot(g, r)) for r in refs]
    return {"stationarity": float((g - g1 - sum(x * r for x, r in zip(lams, refs))).abs().max()) if g.numel() else 0.0,
            "primal": max(0.0, *(-d for d in dots)), "dual": max(0.0, *(-x for x in lams)),
            "complementarity": max(abs(x * d) for x, d in zip(lams, dots))}


def balance_qp_numeric(g1: np.ndarray, g2: np.ndarray, method: str = "slsqp") -> np.ndarray:
    """Solve Eq. 3, min_g 1/2 ||g - g1||^2 s.t. <g, g2> >= 0, with a generic constrained QP solver; `g2` 2-D: one
    constraint <g, g2_i> >= 0 per row (the two-reference problem of `two_reference_lambdas`, or more).

    It knows nothing of the closed form; it is the reference `dynamic_balance` is checked against.
    method="slsqp": SciPy's SLSQP (dense; for small problems). method="osqp": the OSQP solver with a sparse
    identity Hessian (scales to the ~270 000 parameters of the MLP; needs the `osqp` package, in the book extra).
    """
    g1 = np.asarray(g1, dtype=np.float64)
    refs = np.atleast_2d(np.asarray(g2, dtype=np.float64))
    if method == "osqp":
        import osqp
        import scipy.sparse as sp

        solver = osqp.OSQP()
        solver.setup(P=sp.identity(len(g1), format="csc"), q=-g1, A=sp.csc_matrix(refs),
                     l=np.zeros(len(refs)), u=np.full(len(refs), np.inf), eps_abs=1e-10, eps_rel=1e-10,
                     max_iter=100000, polishing=False, verbose=False)
        res = solver.solve()
        if res.info.status != "solved":
            raise RuntimeError(f"OSQP failed: {res.info.status}")
        return np.asarray(res.x)
    if method != "slsqp":
        raise ValueError(f"unknown QP method {method!r}; use 'slsqp' or 'osqp'")
    from scipy.optimize import minimize

    res = minimize(
        lambda g: 0.5 * np.sum((g - g1) ** 2), x0=np.zeros_like(g1), jac=lambda g: g - g1,
        constraints=[{"type": "ineq", "fun": lambda g: refs @ g, "jac": lambda g: refs}],
        method="SLSQP", options={"ftol": 1e-12, "maxiter": 1000},
    )
    if not res.success:
        raise RuntimeError(f"SLSQP failed: {res.message}")
    return res.x
