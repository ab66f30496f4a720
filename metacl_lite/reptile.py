"""The Reptile argument of "Strengthening Adaptation" (Eqs. 7-14), as functions that can be checked numerically.

Notation: mini-bundles b_1..b_m, g_i = l'_{b_i}(theta) the bundle gradients at the starting point, H_i = l''_{b_i}(theta)
their Hessians, theta^i the inner SGD iterates with step alpha. All vectors are flat over the model's parameters.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector

from .models import MultiHeadNet

Bundle = tuple[torch.Tensor, torch.Tensor]  # (x, y)


def _unflatten(model: MultiHeadNet, theta: torch.Tensor) -> dict[str, torch.Tensor]:
    out, i = {}, 0
    for name, p in model.named_parameters():
        out[name] = theta[i: i + p.numel()].view_as(p)
        i += p.numel()
    return out


def bundle_loss(model: MultiHeadNet, theta: torch.Tensor, bundle: Bundle, task: int = 0) -> torch.Tensor:
    """l_b(theta): mean cross-entropy of the model with flat parameters `theta` on one mini-bundle."""
    x, y = bundle
    return F.cross_entropy(functional_call(model, _unflatten(model, theta), (x, task)), y)


def bundle_gradient(model: MultiHeadNet, theta: torch.Tensor, bundle: Bundle, task: int = 0) -> torch.Tensor:
    """l'_b(theta)."""
    t = theta.detach().requires_grad_(True)
    return torch.autograd.grad(bundle_loss(model, t, bundle, task), t)[0]


def hessian_vector_product(model: MultiHeadNet, theta: torch.Tensor, bundle: Bundle, v: torch.Tensor,
                           task: int = 0) -> torch.Tensor:
    """l''_b(theta) v by double back-propagation (no Hessian is formed)."""
    t = theta.detach().requires_grad_(True)
    g = torch.autograd.grad(bundle_loss(model, t, bundle, task), t, create_graph=True)[0]
    return torch.autograd.grad(g @ v, t)[0]


def inner_loop(theta: list[torch.Tensor], bundle_grad: Callable[[list[torch.Tensor], int], Sequence[torch.Tensor]],
               m: int, alpha: float) -> list[torch.Tensor]:
    """theta^m of the inner loop of Alg. 1/2: m SGD steps theta^i = theta^{i-1} - alpha l'_{b_i}(theta^{i-1}) over the
    mini-bundles b_1..b_m, whose sum is Eq. 8 (theta - theta^m = alpha sum_i l'_{b_i}(theta^{i-1})).

    `theta` is a list of tensors (a model's parameters, or one flat vector) and `bundle_grad(theta, i)` returns
    l'_{b_{i+1}}(theta) as a list of the same shapes (0-based i). The package's one inner loop: the eager g1
    (`training.metacl_gradient`), the compiled one (`accel.compiled`, inside the compiled function) and the checks
    below (`inner_loop_gradients`) all run it.
    """
    for i in range(m):
        grads = bundle_grad(theta, i)
        theta = [t - alpha * g for t, g in zip(theta, grads)]
    return theta


def inner_loop_gradients(model: MultiHeadNet, bundles: Sequence[Bundle], alpha: float, task: int = 0) -> list[torch.Tensor]:
    """The gradients l'_{b_i}(theta^{i-1}) met along the inner loop (`inner_loop`, on the flat parameter vector)."""
    out = []

    def bundle_grad(theta: list[torch.Tensor], i: int) -> list[torch.Tensor]:
        out.append(bundle_gradient(model, theta[0], bundles[i], task))
        return out[-1:]

    inner_loop([parameters_to_vector(model.parameters()).detach()], bundle_grad, len(bundles), alpha)
    return out


def g1_exact(model: MultiHeadNet, bundles: Sequence[Bundle], alpha: float, task: int = 0) -> torch.Tensor:
    """Eqs. 8-9: g1 = (theta - theta^m) / (alpha m) = 1/m sum_i l'_{b_i}(theta^{i-1}), computed as the mean on the
    right (no cancellation in theta - theta^m at a small alpha)."""
    return torch.stack(inner_loop_gradients(model, bundles, alpha, task)).mean(0)


def _start_gradients(model: MultiHeadNet, bundles: Sequence[Bundle], task: int = 0) -> tuple[torch.Tensor, list]:
    """The starting point theta and the bundle gradients g_i = l'_{b_i}(theta) there."""
    theta = parameters_to_vector(model.parameters()).detach()
    return theta, [bundle_gradient(model, theta, b, task) for b in bundles]


def g1_zeroth_order(model: MultiHeadNet, bundles: Sequence[Bundle], task: int = 0) -> torch.Tensor:
    """The alpha -> 0 limit of g1: the mean bundle gradient at theta, 1/m sum_i g_i (error O(alpha))."""
    return torch.stack(_start_gradients(model, bundles, task)[1]).mean(0)


def _second_order_terms(model: MultiHeadNet, bundles: Sequence[Bundle], task: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(1/m sum_i g_i, 1/m sum_i H_i sum_{k<i} g_k): Eq. 12 averaged over the bundles (as in
    Eq. 9) is the first minus alpha times the second."""
    theta, gs = _start_gradients(model, bundles, task)
    corr = torch.zeros_like(theta)
    prefix = torch.zeros_like(theta)
    for i, b in enumerate(bundles):
        if i > 0:
            corr += hessian_vector_product(model, theta, b, prefix, task)
        prefix = prefix + gs[i]
    return prefix / len(bundles), corr / len(bundles)


def g1_second_order(model: MultiHeadNet, bundles: Sequence[Bundle], alpha: float, task: int = 0) -> torch.Tensor:
    """Eqs. 10-12: g1 ~ 1/m sum_i [g_i - alpha H_i sum_{k<i} g_k]  (error O(alpha^2))."""
    g0, corr = _second_order_terms(model, bundles, task)
    return g0 - alpha * corr


def pairwise_hessian_sum(model: MultiHeadNet, bundles: Sequence[Bundle], task: int = 0) -> torch.Tensor:
    """1/2 sum_{i != k} H_i g_k, the order-free (symmetrised) second-order term."""
    theta, gs = _start_gradients(model, bundles, task)
    total = sum(gs)
    return 0.5 * sum(hessian_vector_product(model, theta, b, total - gs[i], task) for i, b in enumerate(bundles))


def gradient_of_inner_products(model: MultiHeadNet, bundles: Sequence[Bundle], task: int = 0) -> torch.Tensor:
    """1/2 grad_theta sum_{i<k} g_i . g_k: the second term of Eqs. 13-14, "the inner product between gradients of
    different mini-bundles" (the one Eq. 6 maximises)."""
    t = parameters_to_vector(model.parameters()).detach().requires_grad_(True)
    gs = [torch.autograd.grad(bundle_loss(model, t, b, task), t, create_graph=True)[0] for b in bundles]
    s = sum(gs[i] @ gs[k] for i in range(len(gs)) for k in range(i + 1, len(gs)))
    return 0.5 * torch.autograd.grad(s, t)[0]


def g1_symmetrised(model: MultiHeadNet, bundles: Sequence[Bundle], alpha: float, task: int = 0) -> torch.Tensor:
    """Eq. 14: g1 ~ 1/m [sum_i g_i - alpha/2 grad sum_{i<k} g_i . g_k].

    This equals the average of `g1_second_order` over all orderings of the bundles (each pair (i, k) has k before i
    in half of them): it holds in expectation over the random split of the mini-batch, not for one fixed order.
    For m = 2 it is the gradient of 1/2 [l_u + l_v - (alpha/2) l'_u . l'_v]: Eq. 7's objective with alpha/2 (and
    beta = 0).
    """
    return g1_zeroth_order(model, bundles, task) - alpha / len(bundles) * gradient_of_inner_products(model, bundles, task)


def taylor_errors(model: MultiHeadNet, bundles: Sequence[Bundle], alphas: Sequence[float],
                  task: int = 0) -> dict[str, list[float]]:
    """For each alpha, ||g1 - zeroth order|| (should be O(alpha)) and ||g1 - second order|| (should be O(alpha^2))."""
    g0, corr = _second_order_terms(model, bundles, task)  # the same for every alpha: computed once
    e0, e2 = [], []
    for a in alphas:
        g = g1_exact(model, bundles, float(a), task)
        e0.append(float((g - g0).norm()))
        e2.append(float((g - (g0 - float(a) * corr)).norm()))
    return {"alpha": [float(a) for a in alphas], "first_order_error": e0, "second_order_error": e2}


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (the order of the error)."""
    import numpy as np

    return float(np.polyfit(np.log(np.asarray(x)), np.log(np.asarray(y)), 1)[0])
