"""Compiled task gradients g1: MetaCL's inner loop (Alg. 1/2: m SGD steps on mini-bundles, Eqs. 8-9) and the plain
mini-batch gradient (Eq. 2's first term), as `torch.func` functions of the parameters (functional_call + grad)
compiled with `torch.compile`. They return the same flat g1 as `training.metacl_gradient` / `plain_gradient`.

When to compile (`TrainConfig.compile`): "off" is the eager path; "on" compiles; "auto" compiles only when the run's
estimated saving exceeds the compile time (`COSTS`, measured on a 2-core CPU, one thread) and a C++ compiler exists
(inductor needs one; without it "auto" says so once and stays eager). With these costs "auto" compiles the MetaCL
runs of Permuted MNIST at K = 200 and 500 (2 000 outer steps and more; not K = 20, 50), the CIFAR-100 runs at the
paper's K and epochs, never the plain methods on Permuted MNIST, nor ResNet-18 (CUB). The decision depends on the
run's configuration only (never on timing or on what this process compiled before), so the same seed gives the same
numbers whichever executor runs the unit. Compiled and eager runs are not bit-identical, and over a whole stream the
difference grows as any rounding difference does (MetaCL, K = 200, seed 0: mean final accuracy 41.89 eager, 43.88
compiled, and 42.57 eager with one initial weight moved by one ulp).

Equality with eager: the compiled kernels round differently (g1 agrees to ~1e-7 relative on the MLP and the CIFAR
CNN, and one ResNet-18 inner step to ~1e-5, which is also eager's own float32 error there). Dropout (CIFAR CNN) draws
the same masks as eager, in the same order from the same global generator: on CPU inductor always calls torch's own
bernoulli_ for them, and `fallback_random` makes it do so for every random op on every device. BatchNorm (ResNet-18)
updates the model's running statistics as eager training does.

On a GPU the compiled step is also captured in CUDA graphs (inductor's `triton.cudagraphs`, what
`torch.compile(mode="reduce-overhead")` turns on): an eager MetaCL outer step on these small batches is ~60 tiny
kernel launches per inner step, launch-bound, and one graph replay replaces them. The graph's outputs live in memory
the next replay reuses, so every call marks a new step (`torch.compiler.cudagraph_mark_step_begin`) and turns the
outputs into g1 (a new tensor) before returning. No step mutates an input (inductor would then run it without a
graph): ResNet-18's BatchNorm statistics are updated in copies that the step returns and the caller puts back into
the model, with the values eager training leaves there. "auto" on a GPU
reads `CUDA_COSTS`, the GPU's own measured costs (`benchmarks/speed.py steps ARCH --device cuda`); a network
without a measured GPU cost stays eager under "auto".

Compiled code is cached on disk by torch (FX graph cache), so later processes skip most of the compile time; the
cache lives in $TORCHINDUCTOR_CACHE_DIR, set here (when unset) to ~/.cache/metacl-lite/torchinductor (or under
$XDG_CACHE_HOME) instead of torch's default in /tmp.
"""
from __future__ import annotations

import copy
import math
import os
import shutil
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad

from .device import kind as device_kind
from ..errors import UsageError

COMPILE_CHOICES = ("auto", "on", "off")


@dataclass(frozen=True)
class Cost:
    """What compiling one step function costs and saves: the compile time in a new process (s, disk cache filled;
    the first compile on a machine takes several times longer) and the time saved per outer step (s)."""

    compile_s: float
    saving_s: float


#: (architecture, kind of task gradient) -> Cost, measured with `benchmarks/speed.py steps ARCH` on a 2-core AMD EPYC
#: (one thread, batch 100, bundles of 10; minimum over repeats). Not listed: "auto" never compiles it.
#: mlp plain: 0.5 ms saved per step (2.6 -> 2.1 ms) for a 7 s compile: only a run of >14 000 steps repays it.
COSTS: dict[tuple[str, str], Cost] = {
    ("mlp", "metacl"): Cost(compile_s=8.0, saving_s=0.008),  # 13.3 -> 5.1 ms; first compile 61 s
    ("mlp", "plain"): Cost(compile_s=7.0, saving_s=0.0005),
    ("cifar_cnn", "metacl"): Cost(compile_s=13.0, saving_s=0.056),  # 262 -> 206 ms; first compile 170-220 s
    ("cifar_cnn", "plain"): Cost(compile_s=35.0, saving_s=0.030),  # 276 -> 247 ms; first compile 200 s
}

#: The same on a GPU, compiled with CUDA graphs (`MODES`), measured with `benchmarks/speed.py steps ARCH --device
#: cuda`. Empty until measured on a GPU: "auto" then trains eagerly there (`use_compiled`).
CUDA_COSTS: dict[tuple[str, str], Cost] = {}

#: inductor's options per device kind: the same kernels everywhere, and on a GPU the step captured in CUDA graphs
#: ("triton.cudagraphs", what mode="reduce-overhead" sets; torch.compile takes either a mode or options, not both).
#: fallback_random: random ops (dropout) call torch's own kernels, drawing what eager draws.
MODES: dict[str, dict] = {"cpu": {"fallback_random": True},
                          "cuda": {"fallback_random": True, "triton.cudagraphs": True}}


def cache_dir() -> Path:
    """Where torch keeps compiled code: $TORCHINDUCTOR_CACHE_DIR, else (and then set to) a folder in the user's
    cache, which survives reboots (torch's default is under /tmp)."""
    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(base / "metacl-lite" / "torchinductor")
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def have_compiler() -> bool:
    """A C++ compiler for inductor's CPU kernels: $CXX, else g++ (inductor's own default)."""
    return shutil.which(os.environ.get("CXX") or "g++") is not None


_noted = False


def use_compiled(choice: str, arch: str | None, kind: str, outer_steps: int, device: str = "cpu") -> bool:
    """Whether a run compiles its task gradient: `kind` ("metacl" or "plain", `training.Method.update`) on the
    network `arch` (`specs.BenchmarkSpec.model`) for `outer_steps` outer steps.

    "auto": compile when outer_steps x saving per step > compile time and a C++ compiler exists, with the costs of
    the device kind (`COSTS` on the CPU, `CUDA_COSTS` on a GPU: a network without a measured cost stays eager)."""
    global _noted
    if choice not in COMPILE_CHOICES:
        raise UsageError(f"compile={choice!r} is not an option; choose one of {', '.join(COMPILE_CHOICES)}")
    if choice == "off":
        return False
    if choice == "on":
        if not have_compiler():
            raise UsageError("compile='on' needs a C++ compiler for torch.compile (g++, or $CXX); install one "
                             "(e.g. `apt-get install g++`) or use compile='auto'/'off'")
        return True
    cost = (CUDA_COSTS if device_kind(device) == "cuda" else COSTS).get((arch, kind))
    if cost is None or outer_steps * cost.saving_s <= cost.compile_s:
        return False
    if not have_compiler():
        if not _noted:
            print("metacl-lite: no C++ compiler found (g++ or $CXX): training eagerly, without torch.compile",
                  file=sys.stderr)
            _noted = True
        return False
    return True


# ----------------------------------------------------------------------------------------------------------------
# The functions that are compiled: one body (shared layers) followed by one linear head (the task's)
# ----------------------------------------------------------------------------------------------------------------
def _loss(body: nn.Module, params: dict, buffers: dict, w: torch.Tensor, b: torch.Tensor, x: torch.Tensor,
          y: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of the head (w, b) on the body's features, as a function of the parameters."""
    return F.cross_entropy(F.linear(functional_call(body, (params, buffers), (x,)), w, b), y)


_grad_loss = grad(_loss, argnums=(1, 3, 4))


def _metacl_steps(body, inner_loop, alpha, bundle_size, params, buffers, w, b, x, y):
    """theta^m of Alg. 1/2 (`inner_loop`: the method's `reptile.inner_loop`, passed in by training and traced into the
    compiled function; the speed path imports nothing of the method) over the consecutive
    mini-bundles b_1..b_m of the mini-batch, on the list [body parameters..., head weight, head bias]; and the
    buffers as the m steps leave them (`_own`)."""
    buffers, names = _own(buffers), list(params)

    def bundle_grad(theta: list, i: int) -> list:
        rows = slice(i * bundle_size, (i + 1) * bundle_size)
        gp, gw, gb = _grad_loss(body, dict(zip(names, theta[:-2])), buffers, theta[-2], theta[-1], x[rows], y[rows])
        return [*(gp[k] for k in names), gw, gb]

    theta = inner_loop([*params.values(), w, b], bundle_grad, math.ceil(len(y) / bundle_size), alpha)
    return dict(zip(names, theta[:-2])), theta[-2], theta[-1], buffers


def _plain_grad(body, params, buffers, w, b, x, y):
    """The gradient of the mini-batch loss (Eq. 2's first term), and the buffers as the step leaves them (`_own`)."""
    buffers = _own(buffers)
    return _grad_loss(body, params, buffers, w, b, x, y), buffers


def _own(buffers: dict) -> dict:
    """Copies of the body's buffers for a compiled step to update and return (BatchNorm moves its running statistics
    in place at every forward pass) instead of the inputs themselves: a compiled function that mutates an input is
    not captured in a CUDA graph. The caller copies them into the model (`_keep`): the same values as eager training
    leaves there."""
    return {k: v.clone() for k, v in buffers.items()}


class CompiledSteps:
    """The compiled g1 functions of one body architecture. The body they trace is a private copy (its own values are
    never used: every parameter and buffer is passed in), so that every model with this body reuses the compiled
    code instead of recompiling for each new model object."""

    def __init__(self, body: nn.Module, kind: str = "cpu", inner_loop: Optional[Callable] = None):
        self.inner_loop = inner_loop  # Alg. 1/2's inner loop (`reptile.inner_loop`), given by the first MetaCL call
        cache_dir()
        template = copy.deepcopy(body).train()
        options = dict(MODES[kind])
        self.graphs = bool(options.get("triton.cudagraphs"))
        opts = dict(fullgraph=True, dynamic=False, options=options)
        self._metacl_steps = torch.compile(
            lambda alpha, bundle_size, *a: _metacl_steps(template, self.inner_loop, alpha, bundle_size, *a), **opts)
        self._plain_grad = torch.compile(lambda *a: _plain_grad(template, *a), **opts)

    def _step(self) -> None:
        """A new step for CUDA graphs: the previous call's outputs (already used) may be overwritten."""
        if self.graphs:
            torch.compiler.cudagraph_mark_step_begin()

    def metacl_steps(self, *a):
        self._step()
        return self._metacl_steps(*a)

    def plain_grad(self, *a):
        self._step()
        return self._plain_grad(*a)


_STEPS: dict[tuple[str, str], CompiledSteps] = {}
#: Each body's architecture (its repr), computed once per body: ResNet-18's repr costs 0.4 ms, once per step call.
_ARCH: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()


def compiled_steps(model: nn.Module, inner_loop: Optional[Callable] = None) -> CompiledSteps:
    """The compiled steps of the model's body on the model's device kind (one set per architecture and kind), with
    `inner_loop` (`reptile.inner_loop`, where given) traced into the MetaCL step."""
    where = device_kind(next(model.parameters()).device)
    if (arch := _ARCH.get(model.body)) is None:
        arch = _ARCH[model.body] = repr(model.body)
    key = (arch, where)
    if key not in _STEPS:
        _STEPS[key] = CompiledSteps(model.body, where)
    if inner_loop is not None:
        _STEPS[key].inner_loop = inner_loop
    return _STEPS[key]


def _head(model: nn.Module, task: int) -> int:
    """The index of the task's head (single-head models have one, shared by every task)."""
    return task if model.multi_head else 0


def _split(model: nn.Module, task: int):
    """(body parameters, body buffers, head weight, head bias), detached; the buffers are the model's own (the
    compiled steps update copies, which `_keep` puts back)."""
    head = model.heads[_head(model, task)]
    return ({k: v.detach() for k, v in model.body.named_parameters()}, dict(model.body.named_buffers()),
            head.weight.detach(), head.bias.detach())


def _keep(buffers: dict, new: dict) -> None:
    """Copy a compiled step's updated buffers (BatchNorm's running statistics) into the model's (`buffers`), before
    the next step may overwrite the graph's outputs."""
    with torch.no_grad():
        for dtype in {v.dtype for v in buffers.values()}:  # one fused copy per dtype (float statistics, int64 counts)
            keys = [k for k, v in buffers.items() if v.dtype == dtype]
            torch._foreach_copy_([buffers[k] for k in keys], [new[k] for k in keys])


def _flat(model: nn.Module, task: int, body: list, head: list) -> torch.Tensor:
    """One flat vector in the order of `model.parameters()`: the body's, then each head's (zeros but for `task`'s)."""
    parts = list(body)
    for t, h in enumerate(model.heads):
        parts += head if t == _head(model, task) else [torch.zeros_like(h.weight), torch.zeros_like(h.bias)]
    return torch.cat([p.reshape(-1) for p in parts])


def metacl_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: int, alpha: float,
                    bundle_size: int, inner_loop: Callable) -> torch.Tensor:
    """`training.metacl_gradient`, compiled: g1 = (theta - theta^m) / (alpha m)  (Eqs. 8-9), theta^m by `inner_loop`
    (`reptile.inner_loop`, Alg. 1/2's inner loop)."""
    params, buffers, w, b = _split(model, task)
    pm, wm, bm, new = compiled_steps(model, inner_loop).metacl_steps(alpha, bundle_size, params, buffers, w, b, x, y)
    _keep(buffers, new)
    g = _flat(model, task, [params[k] - pm[k] for k in params], [w - wm, b - bm])
    return g / (alpha * math.ceil(len(y) / bundle_size))


def plain_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: int) -> torch.Tensor:
    """`training.plain_gradient`, compiled: the gradient of the mean cross-entropy on the mini-batch."""
    params, buffers, w, b = _split(model, task)
    (gp, gw, gb), new = compiled_steps(model).plain_grad(params, buffers, w, b, x, y)
    _keep(buffers, new)
    return _flat(model, task, list(gp.values()), [gw, gb])
