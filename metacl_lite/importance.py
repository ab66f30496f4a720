"""Parameter importance Omega for the penalty of Eq. 2: EWC (Fisher), PI (path integral, Synaptic Intelligence), MAS,
and L2 (Omega = 1, an extension the paper did not run). Which regularisers exist is `vocab.REGULARISER_TABLE`.

All functions return a flat, non-negative tensor with one entry per parameter (order of `model.parameters()`).
The training loop calls them through one interface, `Importance` (`EWC`, `PI`, `MAS`, `L2`): `begin_task`, `after_step`
after each outer update, `end_task` -> the task's Omega. Each class registers itself under its regulariser's name in the
vocabulary (`@estimator("pi")`), and reads the options the vocabulary declares for it (`vocab.options_of`) from the
run's config in `from_config`.
Across tasks `accumulate_importance` combines each task's Omega with the running one; by default they are *summed*
(Omega <- Omega + Omega_task), as SI and MAS accumulate, and the usual single-penalty form of EWC. The anchor bar_theta
is the parameter vector after the latest task.

Choices the paper leaves open (documented in the book):
- EWC uses the *empirical* Fisher, per sample: F = 1/N sum_n (d log p(y_n|x_n) / d theta)^2 with the observed label
  y_n, over the task's training images. `kind="expected"` (the option `fisher`) gives the true Fisher, exact over all classes,
  1/N sum_n sum_c p(c|x_n) (d log p(c|x_n) / d theta)^2: about ten times slower (one gradient per class).
- PI: omega_k accumulates -g_k * delta_theta_k over every outer update, with g the gradient of the *unregularised*
  task loss (g1 for MetaCL) and delta_theta the actual parameter change; at the end of the task
  Omega_k = max(omega_k, 0) / (Delta_k^2 + xi) with Delta_k the total change over the task (xi: the option `pi_xi`,
  0.1 by default, the value SI used for Permuted MNIST). The clamp at 0 keeps the penalty a penalty.
- MAS: Omega = 1/N sum_n |d ||f(x_n)||_2^2 / d theta| with f the logits of the task's head, per sample.
- Across tasks (options `omega_accumulate`, `omega_normalise`, see `accumulate_importance`): summed, not
  normalised, by default; the latest task's only, and per-task max or min-max normalisation, are options.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import nn
from torch.func import functional_call, grad, jacrev, vmap
from torch.nn.utils import parameters_to_vector

from .balance import flatten
from .data.streams import Experience
from .vocab import OMEGA_ACCUMULATE, OMEGA_NORMALISE, REGULARISERS, registrar


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
    total = torch.zeros(n_params, dtype=first.dtype, device=first.device)
    for s in range(0, len(y_all), chunk):
        total += fn(params, buffers, x_all[s: s + chunk], y_all[s: s + chunk])
    model.train(was_training)
    return total


#: Modules that act on each sample on its own in eval mode and hold no parameters (with nn.Linear: the MLPs).
_PER_SAMPLE_MODULES = (nn.ReLU, nn.Tanh, nn.Softplus, nn.Identity, nn.Dropout, nn.Sequential, nn.ModuleList)


def linear_only(model: nn.Module) -> bool:
    """True when every parameter sits in an nn.Linear and every other module is a per-sample, parameter-free one
    (the Permuted MNIST MLP): then per-sample gradients factor as outer products (see `_linear_per_sample`)."""
    from .models import MultiHeadNet

    return all(isinstance(m, (nn.Linear, MultiHeadNet) + _PER_SAMPLE_MODULES) for m in model.modules())


def _linear_per_sample(model: nn.Module, exp: Experience, loss: Callable, rule: str, chunk: int = 1024) -> torch.Tensor:
    """Sum over samples n of rule(d loss_n / d theta), rule "square" or "abs", for a `linear_only` model, without
    materialising per-sample gradients. For a linear layer z = W a + b the gradient of sample n's loss is the outer
    product delta_n a_n^T (delta_n = d loss_n / d z_n), so sum_n (delta_n a_n^T)^2 = (delta^2)^T (a^2) and
    sum_n |delta_n a_n^T| = |delta|^T |a|: one GEMM per layer (Goodfellow 2015, "Efficient per-example gradient
    computations"). One backward pass of sum_n loss_n gives every delta_n, since samples do not interact in eval mode.
    Equal to the vmap'd per-sample gradients up to float rounding (tests/test_importance.py)."""
    f = (lambda t: t * t) if rule == "square" else torch.abs
    linears = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    acts: dict[str, torch.Tensor] = {}
    deltas: dict[str, torch.Tensor] = {}

    def hook(name):
        def fwd(mod, inp, out):
            acts[name] = inp[0].detach()
            out.register_hook(lambda g: deltas.__setitem__(name, g.detach()))
        return fwd

    sums = {n: (torch.zeros_like(m.weight), None if m.bias is None else torch.zeros_like(m.bias))
            for n, m in linears.items()}
    handles = [m.register_forward_hook(hook(n)) for n, m in linears.items()]
    was_training = model.training
    model.eval()
    try:
        x_all, y_all = exp.inputs(), exp.y
        for s in range(0, len(y_all), chunk):
            acts.clear()
            deltas.clear()
            x, y = x_all[s: s + chunk], y_all[s: s + chunk]
            with torch.enable_grad():
                total = loss(model(x, exp.task_id), y)
                torch.autograd.grad(total, [m.weight for n, m in linears.items() if n in acts])  # layers it used
            for n, d in deltas.items():
                a = acts[n]
                if a.dim() != 2:
                    raise ValueError(f"linear layer {n!r} got {a.dim()}-D input; per-sample rule needs (batch, features)")
                w, b = sums[n]
                w += f(d).T @ f(a)
                if b is not None:
                    b += f(d).sum(0)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    out = []
    for name, p in model.named_parameters():
        mod, _, attr = name.rpartition(".")
        if mod not in linears:
            raise ValueError(f"parameter {name!r} is not in a linear layer")
        out.append(sums[mod][0 if attr == "weight" else 1].reshape(-1))
    return torch.cat(out)


def ewc_fisher(model: nn.Module, exp: Experience, kind: str = "empirical", chunk: int = 64,
               path: str = "auto") -> torch.Tensor:
    """EWC's diagonal Fisher information on one task (Kirkpatrick et al. 2017), averaged over its training images.

    path: "auto" takes the per-layer outer-product rule (`_linear_per_sample`) for the empirical Fisher of a
    `linear_only` model and vmap'd per-sample gradients otherwise; "vmap" forces the latter."""
    task = exp.task_id
    if path not in ("auto", "vmap"):
        raise ValueError(f"unknown path {path!r}; use 'auto' or 'vmap'")
    if kind == "empirical" and path == "auto" and linear_only(model):
        nll = lambda out, y: torch.nn.functional.cross_entropy(out, y, reduction="sum")  # noqa: E731
        return _linear_per_sample(model, exp, nll, "square") / len(exp)

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


def mas_importance(model: nn.Module, exp: Experience, chunk: int = 64, path: str = "auto") -> torch.Tensor:
    """MAS (Aljundi et al. 2018): mean over samples of |gradient of the squared L2 norm of the output|.

    path: as `ewc_fisher` ("auto": the outer-product rule for a `linear_only` model)."""
    task = exp.task_id
    if path not in ("auto", "vmap"):
        raise ValueError(f"unknown path {path!r}; use 'auto' or 'vmap'")
    if path == "auto" and linear_only(model):
        return _linear_per_sample(model, exp, lambda out, y: out.pow(2).sum(), "abs") / len(exp)

    def sq_norm(p, b, x):
        return functional_call(model, (p, b), (x.unsqueeze(0), task)).pow(2).sum()

    def fn(p, b, x, y):
        g = vmap(grad(sq_norm), in_dims=(None, None, 0))(p, b, x)
        return flatten(v.abs().sum(0) for v in g.values())

    return _per_sample(model, exp, fn, chunk) / len(exp)


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


#: Each regulariser's `Importance` class by its name in the vocabulary (`vocab.REGULARISER_TABLE`), registered by the
#: class itself (`estimator`); training builds every run's estimator from it.
ESTIMATORS: dict[str, type] = {}


#: A class decorator: `@estimator(name)` registers an `Importance` class as the estimator of the vocabulary's
#: regulariser `name`.
estimator: Callable[[str], Callable[[type], type]] = registrar(ESTIMATORS, REGULARISERS, "estimator", "a regulariser",
                                                               "REGULARISER_TABLE")


def estimator_of(name: str) -> type:
    """The `Importance` class registered for the vocabulary's regulariser `name` (`estimator`)."""
    if name not in ESTIMATORS:
        raise ValueError(f"the regulariser {name!r} has no Importance class: decorate one with @estimator({name!r})")
    return ESTIMATORS[name]


class Importance:
    """One task's Omega, estimated along the training loop: `begin_task(model)` before the first outer step,
    `after_step(model, g1, theta_before)` after each (`model` holds the new parameters, g1 is the task-loss gradient
    used at theta_before), `end_task(model, exp)` -> Omega for the task. The loop combines it with the running Omega
    (`accumulate_importance`). `needs_theta`: whether `after_step` reads theta_before (else the loop may pass None)."""

    needs_theta = False

    @classmethod
    def from_config(cls, cfg) -> "Importance":
        """A new estimator with the run's options (a `training.TrainConfig`; the class reads those the vocabulary
        declares for its regulariser, `vocab.options_of`); the training loop builds every one this way."""
        return cls()

    def begin_task(self, model: nn.Module) -> None:
        pass

    def after_step(self, model: nn.Module, g1: torch.Tensor, theta_before: torch.Tensor) -> None:
        pass

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        raise NotImplementedError


@estimator("ewc")
class EWC(Importance):
    """The diagonal Fisher at the end of the task (`ewc_fisher`); kind "empirical" or "expected"."""

    def __init__(self, kind: str = "empirical"):
        self.kind = kind

    @classmethod
    def from_config(cls, cfg) -> "EWC":
        return cls(cfg.fisher)

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return ewc_fisher(model, exp, self.kind)


@estimator("mas")
class MAS(Importance):
    """The output sensitivity at the end of the task (`mas_importance`)."""

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return mas_importance(model, exp)


@estimator("pi")
class PI(Importance):
    """The path integral over the task's outer updates (`PathIntegral`), with the task-loss gradient g1 only."""

    needs_theta = True

    def __init__(self, xi: float = 0.1):
        self.xi = xi
        self.path: PathIntegral | None = None

    @classmethod
    def from_config(cls, cfg) -> "PI":
        return cls(cfg.pi_xi)

    def begin_task(self, model: nn.Module) -> None:
        self.path = PathIntegral(parameters_to_vector(model.parameters()), self.xi)

    def after_step(self, model: nn.Module, g1: torch.Tensor, theta_before: torch.Tensor) -> None:
        self.path.accumulate(g1, parameters_to_vector(model.parameters()).detach() - theta_before)

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return self.path.importance(parameters_to_vector(model.parameters()))


@estimator("l2")
class L2(Importance):
    """Omega = 1 for every parameter: the plain L2 penalty beta ||theta - bar_theta||^2 (Eq. 2 with Omega = 1) towards
    the previous tasks' parameters, the simplest baseline of the regularisation methods (the "L2" curve of Kirkpatrick
    et al. 2017, Fig. 2A, against which EWC is compared). An extension: the paper did not run it. Summed over tasks (the default
    `omega_accumulate`), the Omega after t tasks is t; "latest" keeps it at 1."""

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return torch.ones_like(parameters_to_vector(model.parameters())).detach()
