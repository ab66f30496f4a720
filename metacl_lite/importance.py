"""Parameter importance Omega for the penalty of Eq. 2: EWC (Fisher), PI (path integral, Synaptic Intelligence), MAS.

All functions return a flat, non-negative tensor with one entry per parameter (order of `model.parameters()`).
The training loop calls them through one interface, `Importance` (`EWC`, `PI`, `MAS`): `begin_task`, `after_step`
after each outer update, `end_task` -> the task's Omega.
Across tasks `accumulate_importance` combines each task's Omega with the running one; by default they are *summed*
(Omega <- Omega + Omega_task), as SI and MAS accumulate, and the usual single-penalty form of EWC. The anchor bar_theta
is the parameter vector after the latest task.

Choices the paper leaves open (documented in the book):
- EWC uses the *empirical* Fisher, per sample: F = 1/N sum_n (d log p(y_n|x_n) / d theta)^2 with the observed label
  y_n, over the task's training images. `kind="expected"` gives the true Fisher, exact over all classes,
  1/N sum_n sum_c p(c|x_n) (d log p(c|x_n) / d theta)^2: about ten times slower (one gradient per class).
- PI: omega_k accumulates -g_k * delta_theta_k over every outer update, with g the gradient of the *unregularised*
  task loss (g1 for MetaCL) and delta_theta the actual parameter change; at the end of the task
  Omega_k = max(omega_k, 0) / (Delta_k^2 + xi) with Delta_k the total change over the task (xi = 0.1, the value SI
  used for Permuted MNIST). The clamp at 0 keeps the penalty a penalty.
- MAS: Omega = 1/N sum_n |d ||f(x_n)||_2^2 / d theta| with f the logits of the task's head, per sample.
- Across tasks (`TrainConfig.omega_accumulate`, `omega_normalise`, see `accumulate_importance`): summed, not
  normalised, by default; the latest task's only, and per-task max or min-max normalisation, are options.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import nn
from torch.func import functional_call, grad, jacrev, vmap
from torch.nn.utils import parameters_to_vector

from .balance import flatten
from .data import Experience


def _per_sample(model: nn.Module, exp: Experience, fn: Callable, chunk: int) -> torch.Tensor:
    """Sum over the experience's samples of fn(params, buffers, x, y) -> flat tensor, in eval mode."""
    was_training = model.training
    model.eval()
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    x_all, y_all = exp.inputs(), exp.y
    n_params = sum(p.numel() for p in params.values())
    chunk = max(1, min(chunk, int(5e7 // n_params)))  # per-sample gradients of a chunk stay below ~200 MB each
    first = next(iter(params.values()))
    total = torch.zeros(n_params, dtype=first.dtype)
    for s in range(0, len(y_all), chunk):
        total += fn(params, buffers, x_all[s: s + chunk], y_all[s: s + chunk])
    model.train(was_training)
    return total


def ewc_fisher(model: nn.Module, exp: Experience, kind: str = "empirical", chunk: int = 64) -> torch.Tensor:
    """EWC's diagonal Fisher information on one task (Kirkpatrick et al. 2017), averaged over its training images."""
    task = exp.task_id

    def log_probs(p, b, x):
        return torch.log_softmax(functional_call(model, (p, b), (x.unsqueeze(0), task)), dim=-1).squeeze(0)

    if kind == "expected":
        def fn(p, b, x, y):
            jac = vmap(jacrev(log_probs), in_dims=(None, None, 0))(p, b, x)  # name -> (B, C, *shape)
            with torch.no_grad():
                prob = torch.exp(vmap(log_probs, in_dims=(None, None, 0))(p, b, x))  # (B, C)
            return flatten(
                torch.einsum("bc,bc...->...", prob, j.pow(2)) for j in jac.values()
            )
    elif kind == "empirical":
        def nll(p, b, x, y):
            out = functional_call(model, (p, b), (x.unsqueeze(0), task))
            return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

        def fn(p, b, x, y):
            g = vmap(grad(nll), in_dims=(None, None, 0, 0))(p, b, x, y)
            return flatten(v.pow(2).sum(0) for v in g.values())
    else:
        raise ValueError(f"unknown Fisher kind {kind!r}; use 'expected' or 'empirical'")
    return _per_sample(model, exp, fn, chunk) / len(exp)


def mas_importance(model: nn.Module, exp: Experience, chunk: int = 64) -> torch.Tensor:
    """MAS (Aljundi et al. 2018): mean over samples of |gradient of the squared L2 norm of the output|."""
    task = exp.task_id

    def sq_norm(p, b, x):
        return functional_call(model, (p, b), (x.unsqueeze(0), task)).pow(2).sum()

    def fn(p, b, x, y):
        g = vmap(grad(sq_norm), in_dims=(None, None, 0))(p, b, x)
        return flatten(v.abs().sum(0) for v in g.values())

    return _per_sample(model, exp, fn, chunk) / len(exp)


#: How the running Omega takes in a finished task's Omega, and how that Omega is normalised first.
OMEGA_ACCUMULATE = ("sum", "latest")
OMEGA_NORMALISE = ("none", "max", "minmax")


def accumulate_importance(previous: Optional[torch.Tensor], new: torch.Tensor, accumulate: str = "sum",
                          normalise: str = "none") -> torch.Tensor:
    """The Omega of Eq. 2's penalty after a task: the running Omega `previous` (None before the first task) combined
    with the finished task's importance `new`. The paper does not say how; the choices of the methods' own code:

    normalise (the new task's Omega, over all parameters at once, before it is combined):
      "none"   Omega_task as estimated (Zenke et al. 2017, SI; Aljundi et al. 2018, MAS).
      "max"    Omega_task / max(Omega_task): the most important parameter gets 1 (min-max's scale without its shift;
               the two agree whenever some parameter has zero importance, as the first-layer weights of MNIST's
               always-blank pixels do).
      "minmax" (Omega_task - min) / (max - min), in [0, 1]: how Chaudhry et al.'s A-GEM code (facebookresearch/agem,
               model/model.py, `normalize_fisher_at_minima`) normalises EWC's Fisher, over all layers together.
      An all-zero Omega_task ("max") or a constant one ("minmax") gives zeros (A-GEM divides by max - min + 1e-32).
    accumulate:
      "sum"    Omega <- Omega + Omega_task: SI's Omega = sum over past tasks of omega / (Delta^2 + xi) (Zenke et al.
               2017), MAS's code (Aljundi et al. 2018; rahafaljundi/MAS-Memory-Aware-Synapses,
               `accumelate_reg_params`: prev_omega + new_omega), and A-GEM's code for PI.
      "latest" Omega <- Omega_task: only the latest task's importance, as A-GEM's code for EWC (the Fisher at the
               latest minimum) and MAS (its scores are reset before each task).
    """
    if accumulate not in OMEGA_ACCUMULATE or normalise not in OMEGA_NORMALISE:
        raise ValueError(f"accumulate {accumulate!r} / normalise {normalise!r}: use one of {OMEGA_ACCUMULATE} / "
                         f"{OMEGA_NORMALISE}")
    if normalise == "max":
        top = new.max()
        new = new / top if top > 0 else torch.zeros_like(new)
    elif normalise == "minmax":
        low, span = new.min(), new.max() - new.min()
        new = (new - low) / span if span > 0 else torch.zeros_like(new)
    if previous is None or accumulate == "latest":
        return new
    return previous + new


class PathIntegral:
    """PI / Synaptic Intelligence (Zenke et al. 2017): the path integral of the task loss along the trajectory."""

    def __init__(self, theta_start: torch.Tensor, xi: float = 0.1):
        self.theta_start = theta_start.detach().clone()
        self.omega = torch.zeros_like(self.theta_start)
        self.xi = xi

    def accumulate(self, g_unreg: torch.Tensor, delta: torch.Tensor) -> None:
        """Add one update: omega_k += -g_k * delta_theta_k (g: unregularised loss gradient, delta: actual change)."""
        self.omega -= g_unreg * delta

    def importance(self, theta_end: torch.Tensor) -> torch.Tensor:
        """Omega_k = max(omega_k, 0) / (Delta_k^2 + xi) for the finished task."""
        total = theta_end.detach() - self.theta_start
        return self.omega.clamp(min=0.0) / (total.pow(2) + self.xi)


class Importance:
    """One task's Omega, estimated along the training loop: `begin_task(model)` before the first outer step,
    `after_step(model, g1, theta_before)` after each (`model` holds the new parameters, g1 is the task-loss gradient
    used at theta_before), `end_task(model, exp)` -> Omega for the task. The loop combines it with the running Omega
    (`accumulate_importance`)."""

    def begin_task(self, model: nn.Module) -> None:
        pass

    def after_step(self, model: nn.Module, g1: torch.Tensor, theta_before: torch.Tensor) -> None:
        pass

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        raise NotImplementedError


class EWC(Importance):
    """The diagonal Fisher at the end of the task (`ewc_fisher`); kind "empirical" or "expected"."""

    def __init__(self, kind: str = "empirical"):
        self.kind = kind

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return ewc_fisher(model, exp, self.kind)


class MAS(Importance):
    """The output sensitivity at the end of the task (`mas_importance`)."""

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return mas_importance(model, exp)


class PI(Importance):
    """The path integral over the task's outer updates (`PathIntegral`), with the task-loss gradient g1 only."""

    def __init__(self, xi: float = 0.1):
        self.xi = xi
        self.path: PathIntegral | None = None

    def begin_task(self, model: nn.Module) -> None:
        self.path = PathIntegral(parameters_to_vector(model.parameters()), self.xi)

    def after_step(self, model: nn.Module, g1: torch.Tensor, theta_before: torch.Tensor) -> None:
        self.path.accumulate(g1, parameters_to_vector(model.parameters()).detach() - theta_before)

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return self.path.importance(parameters_to_vector(model.parameters()))
