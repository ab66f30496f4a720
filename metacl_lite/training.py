"""One training loop for every method: fine-tune, MetaCL w/o reg, {EWC, PI, MAS, L2} x {plain, MetaCL-beta, MetaCL-lambda},
plus the joint-training oracle (Eq. 1) and the single-task reference models that FA needs.

A method is three choices, each looked up in a small registry by `train_experience`:
- `TASK_GRADIENT[update]`: how the current-task gradient g1 is made: `plain`, the mini-batch gradient of the loss;
  `metacl`, the Reptile-style inner loop of Alg. 1/2, g1 = (theta - theta^m) / (alpha m) (Eqs. 8-9);
- `IMPORTANCE[regulariser]`: how Eq. 2's importance Omega is estimated, one entry per `vocab.REGULARISER_TABLE` row
  (EWC, PI, MAS; L2, an extension), the class each registered (`importance.estimator`) (None: no penalty);
- `BALANCE[balance]` (balance.py): how g1 and the penalty gradient g2 are combined: `none` (g = g1), `beta` (Eq. 2,
  Alg. 1: g = g1 + beta g2) or `lambda` (Eqs. 3-5, Alg. 2: g_x = g1 + (lambda + gamma) g2).
The outer update is Adam (eta = 0.001) on the combined gradient, with a new optimiser (empty state) for each task.
The memory family's methods (A-GEM, ER, ...: extensions, `WITH_MEMORY`) add an episodic memory to one of these; its
hook (`memory.py`) replaces g1 by ER's replayed loss's gradient, or projects the step onto the memory's half-space.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, make_dataclass, replace
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector

from .accel import compiled
from .progress import progress
from .accel.device import DEVICE_KINDS, benchmark_on, check_precision, deterministic, set_precision
from .balance import BALANCE, PENALTY_COLUMNS, flatten, penalty_row, reg_gradient  # noqa: F401 (PENALTY_COLUMNS)
from .data.streams import Benchmark, Experience
from .errors import UsageError
from .importance import Importance, accumulate_importance, estimator_of
from .memory import USES, new_memory, state_bytes
from .models import MultiHeadNet, build_model
from .data.specs import get_spec
from .reptile import inner_loop
from .vocab import (BASELINES, BUDGET_OPTIONS, MEMORY_METHOD_TABLE, OPTION_TABLE, OPTIONS, REGULARISER_TABLE,
                    REGULARISERS, VARIANTS, check_option, family, method_label)


# -------- Configuration -----------------------------------------------------------------------------------------------
@dataclass
class Hyperparameters:
    """Hyperparameters of Appendix B."""

    epochs: int = 5  # per task: 5 Permuted MNIST, 20 CUB, 60 CIFAR-100
    batch_size: int = 100  # mini-batch
    bundle_size: int = 10  # mini-bundle; m = batch_size / bundle_size = 10 inner steps
    inner_lr: float = 0.01  # alpha, inner SGD
    outer_lr: float = 0.001  # eta, outer Adam
    beta: float = 0.0  # fixed balance (plain and MetaCL-beta); chosen per method, see hparams.json
    gamma: float = 0.0  # MetaCL-lambda's small constant; chosen per method, see hparams.json


#: Appendix B's hyperparameters and one field per option of the method families with its declared default
#: (`vocab.OPTION_TABLE`: EWC's Fisher, PI's xi, the choices about Omega the paper leaves open).
FamilyOptions = make_dataclass("FamilyOptions", [(o.name, type(o.default), field(default=o.default))
                                                 for o in OPTION_TABLE], bases=(Hyperparameters,))


#: Adam's state across tasks (`TrainConfig.optimizer_state`): new for each task, or kept over the stream.
OPTIMIZER_STATES = ("task", "stream")


@dataclass
class TrainConfig(FamilyOptions):
    """Hyperparameters of Appendix B (`Hyperparameters`), the method families' options (`FamilyOptions`, one field
    per `vocab.Option`, checked by its declaration), and how the run trains and what it records."""

    record_angles: bool = False  # record cos<g1,g>, cos<g2,g>, lambda at every outer step (Fig. 5)
    eval_every_epoch: bool = False  # accuracy on the current task after each epoch (Fig. 4)
    record_penalty: bool = False  # record lambda, gamma and l_reg before/after every penalised step (lambda_story.py)
    compile: str = "off"  # task gradients under torch.compile: "on", "off" or "auto" (long runs; compiled.py)
    device: str = "cpu"  # where the run trains: "cpu" or "cuda" (the current GPU; device.py says what carries over)
    precision: str = "float32"  # products and convolutions: "float32", or "tf32" on a GPU (other numbers; device.py)
    # Adam's state: new at each task's first step ("task", every method's protocol here) or kept over the stream
    # ("stream", as Avalanche's strategies keep it); recorded where it is "stream"
    optimizer_state: str = "task"

    def __post_init__(self):
        for o in OPTION_TABLE:
            try:
                check_option(o.name, getattr(self, o.name))
            except ValueError as e:
                raise UsageError(str(e)) from None
        for name, allowed in (("compile", compiled.COMPILE_CHOICES), ("device", DEVICE_KINDS),
                              ("optimizer_state", OPTIMIZER_STATES)):
            if getattr(self, name) not in allowed:
                raise UsageError(f"{name}={getattr(self, name)!r} is not an option; choose one of "
                                 f"{', '.join(allowed)}")
        check_precision(self.precision, self.device)

    def to_dict(self) -> dict:  # a budget only where set (recorded per method), and the optimiser's state where kept:
        return {k: v for k, v in asdict(self).items()  # files recording a config keep theirs
                if (k not in BUDGET_OPTIONS or v != OPTIONS[k].default) and (k, v) != ("optimizer_state", "task")}


# -------- Gradients ---------------------------------------------------------------------------------------------------
def params_vector(model: nn.Module) -> torch.Tensor:
    """theta: the model's parameters as one flat, detached vector (the order of `model.parameters()`)."""
    return parameters_to_vector(model.parameters()).detach()


def set_grad(model: nn.Module, g: torch.Tensor, copy: bool = True) -> None:
    """Write a flat gradient into `.grad` of every parameter (for the outer optimiser). copy=False makes each `.grad`
    a view into `g` instead of a copy (the training loop: its g is new at every step, and Adam only reads it)."""
    params = list(model.parameters())
    for p, gp in zip(params, g.split([p.numel() for p in params])):
        p.grad = gp.view_as(p).clone() if copy else gp.view_as(p)


def _grads(loss: torch.Tensor, params: list[torch.Tensor]) -> list[torch.Tensor]:
    """d loss / d params, with zeros for parameters the loss does not use (the other tasks' heads)."""
    gs = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for g, p in zip(gs, params)]


def plain_gradient(model: MultiHeadNet, x: torch.Tensor, y: torch.Tensor, task) -> torch.Tensor:
    """g1 for the plain methods (Eq. 2's first term): the gradient of the mean cross-entropy on the mini-batch."""
    loss = F.cross_entropy(model(x, task), y)
    return flatten(_grads(loss, list(model.parameters())))


def metacl_gradient(model: MultiHeadNet, x: torch.Tensor, y: torch.Tensor, task, alpha: float,
                    bundle_size: int) -> torch.Tensor:
    """g1 of Alg. 1/2: split the mini-batch into m mini-bundles, take m SGD steps theta^i = theta^{i-1} - alpha
    l'_{b_i}(theta^{i-1}) from theta (`reptile.inner_loop`; the model is left as it is), and return
    g1 = (theta - theta^m) / (alpha m)  (Eqs. 8-9).

    The mini-batch is already a random draw, so consecutive slices of it are a random split into mini-bundles.
    """
    names = [n for n, _ in model.named_parameters()]

    def bundle_grad(theta: list[torch.Tensor], i: int) -> list[torch.Tensor]:
        """l'_{b_{i+1}}(theta): the cross-entropy of the (i+1)-th mini-bundle, differentiated at theta."""
        rows = slice(i * bundle_size, (i + 1) * bundle_size)
        leaves = [t.detach().requires_grad_(True) for t in theta]
        return _grads(F.cross_entropy(functional_call(model, dict(zip(names, leaves)), (x[rows], task)), y[rows]),
                      leaves)

    m = math.ceil(len(y) / bundle_size)
    theta_m = inner_loop([p.detach() for p in model.parameters()], bundle_grad, m, alpha)
    return (params_vector(model) - parameters_to_vector(theta_m)) / (alpha * m)


#: Method.update -> g1(model, x, y, task, cfg).
TASK_GRADIENT: dict[str, Callable[..., torch.Tensor]] = {
    "plain": lambda model, x, y, task, cfg: plain_gradient(model, x, y, task),
    "metacl": lambda model, x, y, task, cfg: metacl_gradient(model, x, y, task, cfg.inner_lr, cfg.bundle_size),
}

#: The same task gradients, compiled (`compiled.py`; equal to the eager ones within float rounding).
COMPILED_TASK_GRADIENT: dict[str, Callable[..., torch.Tensor]] = {
    "plain": lambda model, x, y, task, cfg: compiled.plain_gradient(model, x, y, task),
    "metacl": lambda model, x, y, task, cfg: compiled.metacl_gradient(model, x, y, task, cfg.inner_lr,
                                                                      cfg.bundle_size, inner_loop),
}

#: Method.regulariser -> a new estimator of one task's Omega (Eq. 2) with the run's options: the class each
#: regulariser of the vocabulary registered (`importance.estimator`).
IMPORTANCE: dict[str, Callable[[TrainConfig], Importance]] = {r.name: estimator_of(r.name).from_config
                                                              for r in REGULARISER_TABLE}


# -------- Methods -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """One row of Table 1: keys into `IMPORTANCE` (or None), `TASK_GRADIENT` and `BALANCE`; a method of the memory
    family (`WITH_MEMORY`) also names its memory and how it uses it (`memory.USES`; "project" replaces the balance)."""

    name: str
    label: str  # as in the paper's tables
    regulariser: Optional[str]  # None or one of vocab.REGULARISERS
    update: str  # "plain" | "metacl"
    balance: str  # "none" | "beta" | "lambda"
    memory: Optional[str] = None  # None or one of vocab.MEMORIES
    use: Optional[str] = None  # None (no memory) or one of memory.USES

    def __post_init__(self):
        if (self.update not in TASK_GRADIENT or self.balance not in BALANCE
                or (self.regulariser is None) != (self.balance == "none")
                or (self.regulariser is not None and self.regulariser not in IMPORTANCE)
                or (self.memory is None) != (self.use is None) or self.use not in (None, *USES)
                or (self.use in ("project", "constrain") and self.balance == "beta")):
            raise ValueError(f"inconsistent method {self}: a penalty needs a balance, and no balance without one")


def _methods() -> dict[str, Method]:
    m = [Method(name, BASELINES[name], None, update, "none") for name, update in (("finetune", "plain"),
                                                                                    ("metacl", "metacl"))]
    for r in REGULARISERS:  # the order of the paper's Table 1, extensions after the paper's own
        m += [Method(name, method_label(name), r, "plain" if v is None else "metacl", v or "beta")
              for name, v in zip(family(r), (None, *VARIANTS))]
    return {x.name: x for x in m}


#: Every method without a memory: Table 1's eleven in the paper's row order (`vocab.PAPER_METHOD_NAMES`), then L2's.
METHODS: dict[str, Method] = _methods()
#: The memory family's methods (`vocab.MEMORY_METHOD_TABLE`, extensions): each its base method with a memory.
WITH_MEMORY: dict[str, Method] = {m.name: replace(METHODS[m.base], name=m.name, label=m.label, memory=m.memory,
                                                  use=m.use) for m in MEMORY_METHOD_TABLE}
#: Every method, those without a memory first (`vocab.METHOD_NAMES`' order).
ALL_METHODS: dict[str, Method] = {**METHODS, **WITH_MEMORY}


def get_method(name: str) -> Method:
    if name not in ALL_METHODS:
        raise UsageError(f"unknown method {name!r}; choose from: {', '.join(ALL_METHODS)}")
    return ALL_METHODS[name]


# -------- Training and evaluation -------------------------------------------------------------------------------------
@dataclass
class RegState:
    """What a method carries from task to task: Omega (summed over tasks) and the anchor bar_theta (the parameters
    after the latest task) of Eq. 2's penalty, and the episodic memory of the memory family (`memory.py`)."""

    omega: Optional[torch.Tensor] = None
    anchor: Optional[torch.Tensor] = None
    memory: Optional[object] = None
    opt: Optional[torch.optim.Optimizer] = None  # Adam, where its state is kept over the stream


#: The most input floats one evaluation batch holds: 2^24 (64 MB). Permuted MNIST's 10 000 test images (784 floats
#: each) and a CIFAR-100 task's 1 000 (3 072) still run in one batch; CUB's 224 x 224 images (150 528 floats) run
#: 111 at a time, so that ResNet-18's activations stay near 1.5 GB instead of ~4 GB for a whole task's ~580 images
#: at once (several worker processes share a GPU's memory). Eval mode: a batch's size changes no image's logits
#: beyond rounding.
EVAL_BATCH_FLOATS = 2 ** 24


def eval_batch_size(exp: Experience, batch_size: int) -> int:
    """The evaluation's batch for `exp`: `batch_size` images, fewer where an image is large (`EVAL_BATCH_FLOATS`)."""
    per_image = exp.x[0].numel() if len(exp) else 1
    return max(1, min(batch_size, EVAL_BATCH_FLOATS // per_image))


def count_correct(model: MultiHeadNet, exp: Experience, batch_size: int) -> int:
    """How many of the task's test images the model classifies right: the task's inputs through the whole model, in
    batches of `eval_batch_size` (each batch's inputs made on the fly: CUB's uint8 images normalised per batch)."""
    correct, batch_size = 0, eval_batch_size(exp, batch_size)
    for s in range(0, len(exp), batch_size):
        rows = slice(s, s + batch_size)
        correct += int((model(exp.inputs(rows), exp.task_id).argmax(1) == exp.y[rows]).sum())
    return correct


@torch.no_grad()
def evaluate_tasks(model: MultiHeadNet, exps: Sequence[Experience], batch_size: int = 10000) -> list[float]:
    """Accuracy (%) of one model on each of several tasks' test data (a_{i,j} for j <= i; the head of each task for
    multi-head models): each task's images (permuted for Permuted MNIST, `Experience.inputs`) through the model.
    (`benchmarks/fasteval.py` permutes the first layer's weights instead, for the speed benchmarks.)"""
    was = model.training
    model.eval()
    correct = [count_correct(model, e, batch_size) for e in exps]
    model.train(was)
    return [100.0 * c / len(e) for c, e in zip(correct, exps)]


def evaluate(model: MultiHeadNet, exp: Experience, batch_size: int = 10000) -> float:
    """Accuracy (%) on one task's test data (the head of that task for multi-head models); see `evaluate_tasks`."""
    return evaluate_tasks(model, [exp], batch_size)[0]


def outer_steps(exps: Iterable[Experience], cfg: TrainConfig) -> int:
    """The number of outer steps (mini-batches) of training on `exps`, cfg.epochs epochs each."""
    return sum(cfg.epochs * math.ceil(len(e) / cfg.batch_size) for e in exps)


def use_compiled(bench: Benchmark, method: Method, cfg: TrainConfig, exps: Iterable[Experience]) -> bool:
    """cfg.compile resolved for training `method` on `exps` of `bench` (`compiled.use_compiled`: "auto" compiles
    when the run is long enough to repay the compile time)."""
    return compiled.use_compiled(cfg.compile, get_spec(bench.name).model, method.update, outer_steps(exps, cfg),
                                 cfg.device)


# -------- Logs: hooks the training loop calls, outside its arithmetic -------------------------------------------------
@dataclass
class Step:
    """What one outer step leaves for the step hooks: theta before the step (None where nothing needed it), g1, g2
    (None without a penalty), the combined g handed to Adam and lambda (Eq. 5; 0 for the fixed balance)."""

    model: MultiHeadNet
    task: int
    cfg: TrainConfig
    reg: RegState
    penalised: bool
    theta: Optional[torch.Tensor]
    g1: torch.Tensor
    g2: Optional[torch.Tensor]
    g: torch.Tensor
    lam: float | torch.Tensor


@dataclass
class Epoch:
    """What one epoch leaves for the epoch hooks: the model after it, the task and the epoch (0-based)."""

    model: MultiHeadNet
    task: int
    epoch: int


@dataclass
class Hooks:
    """Called by `train_experience`, outside its arithmetic: each of `step` with a `Step` after every outer step,
    each of `epoch` with an `Epoch` after every epoch. Hooks only read what they are given."""

    step: list[Callable[[Step], None]]
    epoch: list[Callable[[Epoch], None]]


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    na, nb = float(a.norm()), float(b.norm())
    return float(torch.dot(a, b)) / (na * nb) if na > 0 and nb > 0 else float("nan")


def angles_hook(log: dict) -> Callable[[Step], None]:
    """log["angles"] (`TrainConfig.record_angles`, Fig. 5): [task, cos<g1,g>, cos<g2,g> (NaN without a penalty),
    lambda] at every outer step."""
    return lambda s: log.setdefault("angles", []).append(
        [s.task, _cos(s.g1, s.g), _cos(s.g2, s.g) if s.penalised else float("nan"), float(s.lam)])


def penalty_hook(log: dict) -> Callable[[Step], None]:
    """log["penalty"] (`TrainConfig.record_penalty`): one `PENALTY_COLUMNS` row per penalised outer step."""
    def hook(s: Step) -> None:
        if s.penalised:
            log.setdefault("penalty", []).append(penalty_row(s.task, s.lam, s.cfg.gamma, s.cfg.beta, s.theta,
                                                             params_vector(s.model), s.g, s.g2, s.reg.omega,
                                                             s.reg.anchor))
    return hook


def epoch_accuracy_hook(log: dict, eval_exp: Experience) -> Callable[[Epoch], None]:
    """log["epoch_acc"] (`TrainConfig.eval_every_epoch`, Fig. 4): [task, accuracy on `eval_exp`] after each epoch."""
    return lambda e: log.setdefault("epoch_acc", []).append([e.task, evaluate(e.model, eval_exp)])


def log_hooks(cfg: TrainConfig, log: Optional[dict], eval_exp: Optional[Experience] = None) -> Hooks:
    """The hooks that fill `log` as cfg's flags ask (none without a log): the angles, the penalty, the epochs'
    accuracies (these only with `eval_exp`, the task's test data)."""
    if log is None:
        return Hooks([], [])
    step = [make(log) for flag, make in ((cfg.record_angles, angles_hook), (cfg.record_penalty, penalty_hook)) if flag]
    epoch = [epoch_accuracy_hook(log, eval_exp)] if cfg.eval_every_epoch and eval_exp is not None else []
    return Hooks(step, epoch)


def train_experience(model: MultiHeadNet, exp: Experience, method: Method, cfg: TrainConfig, reg: RegState,
                     gen: torch.Generator, log: Optional[dict] = None, eval_exp: Optional[Experience] = None,
                     compile_g1: Optional[bool] = None, hooks: Optional[Hooks] = None) -> None:
    """Train on one task with `method` (Eq. 2 for the plain methods, Alg. 1 for MetaCL-beta, Alg. 2 for MetaCL-lambda),
    then add this task's importance to Omega and move the anchor bar_theta to the new parameters (`reg`).

    Each outer step: g1 from `TASK_GRADIENT` (`COMPILED_TASK_GRADIENT` if `compile_g1`; None: if cfg.compile is "on",
    as "auto" needs the whole run's length, see `use_compiled`), g2 = 2 Omega (theta - bar_theta) (Eq. 2's
    penalty; none before the first Omega exists), g from `BALANCE`, one Adam step on g. The Adam optimiser is made
    here, its state empty at each task's first step, unless cfg.optimizer_state is "stream" (`reg.opt` keeps it).
    `hooks` (default: `log_hooks`, which fill `log` as cfg's flags ask) are called after every step and every
    epoch, and only read.
    """
    hooks = log_hooks(cfg, log, eval_exp) if hooks is None else hooks
    if compile_g1 is None:
        compile_g1 = compiled.use_compiled(cfg.compile, None, method.update, 0)
    task_gradient = (COMPILED_TASK_GRADIENT if compile_g1 else TASK_GRADIENT)[method.update]
    penalised = method.regulariser is not None and reg.omega is not None
    balance = BALANCE[method.balance if penalised else "none"]
    if reg.memory is not None:  # the memory family's hook (memory.py): ER's replayed loss, or A-GEM's projection
        task_gradient, balance = reg.memory.hook(model, method.use, task_gradient, balance)
    importance = IMPORTANCE[method.regulariser](cfg) if method.regulariser is not None else None
    model.train()
    opt = reg.opt or torch.optim.Adam(model.parameters(), lr=cfg.outer_lr, foreach=True)
    reg.opt = opt if cfg.optimizer_state == "stream" else None
    x_all, y_all, task = exp.inputs(), exp.y, exp.task_id
    if importance is not None:
        importance.begin_task(model)
    # theta (before the step) is needed by the penalty (and its log) and by an importance that follows the path (PI)
    need_theta = penalised or (importance is not None and importance.needs_theta)
    for epoch in range(cfg.epochs):
        # the batch order comes from the CPU generator on every device (the same mini-batches), moved once per epoch
        order = torch.randperm(len(y_all), generator=gen).to(y_all.device)
        for s in range(0, len(order), cfg.batch_size):
            idx = order[s: s + cfg.batch_size]
            theta = params_vector(model) if need_theta else None
            # index_select: the same rows as x_all[idx], a few times faster
            g1 = task_gradient(model, x_all.index_select(0, idx), y_all.index_select(0, idx), task, cfg)
            g2 = reg_gradient(theta, reg.anchor, reg.omega) if penalised else None
            g, lam = balance(g1, g2, cfg.beta, cfg.gamma)
            set_grad(model, g, copy=False)  # g is new at every step and nothing changes it in place
            opt.step()
            if importance is not None:
                importance.after_step(model, g1, theta)
            if hooks.step:
                step = Step(model, task, cfg, reg, penalised, theta, g1, g2, g, lam)
                for hook in hooks.step:
                    hook(step)
        for hook in hooks.epoch:
            hook(Epoch(model, task, epoch))
    if importance is not None:
        omega = importance.end_task(model, exp)
        reg.omega = accumulate_importance(reg.omega, omega, cfg.omega_accumulate, cfg.omega_normalise)
        reg.anchor = params_vector(model)
    if reg.memory is not None:
        reg.memory.add(exp)


def _new_model(bench: Benchmark, seed: int, device: str = "cpu") -> MultiHeadNet:
    """The benchmark's network on `device`, initialised on the CPU from `seed` (the same initial weights on every
    device); `bench.info["model"]` may carry model options (CUB: weights, random_init)."""
    return build_model(bench.name, bench.n_classes, bench.n_tasks if bench.multi_head else 1, seed,
                       **bench.info.get("model", {})).to(device)


def _on_device(bench: Benchmark, cfg: TrainConfig) -> Benchmark:
    """The benchmark's streams on the run's device (once per benchmark and device), with the GPU's determinism
    settings (`device.deterministic`) and the run's precision set: every run, reference and oracle starts here."""
    deterministic(cfg.device)
    set_precision(cfg.precision, cfg.device)
    return benchmark_on(bench, cfg.device)


def run_stream(bench: Benchmark, method: Method | str, cfg: TrainConfig, seed: int,
               show_progress: Optional[bool] = None, evaluate_rows: str = "all") -> dict:
    """Train `method` through the whole stream. Returns the accuracy matrix (lower triangle; NaN above), the wall
    time, whether the task gradients were compiled (`use_compiled`) and the logs.

    evaluate_rows: "all" evaluates after every task (row i: a_{i,j}, j <= i); "last" only after the final task (the
    other rows stay NaN), for tuning, which scores the final average accuracy alone: the same last row, and with a
    20-task stream 20 evaluations instead of 210. Training does not depend on it.

    Determinism: the initial weights come from `seed` (`build_model`), the batch order from a generator seeded with
    `seed`, and the global torch RNG (dropout) is seeded with `seed` too.
    """
    method = get_method(method) if isinstance(method, str) else method
    bench = _on_device(bench, cfg)  # the streams on the run's device, once; the run's precision
    model = _new_model(bench, seed, cfg.device)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    n = bench.n_tasks
    acc = np.full((n, n), np.nan)
    reg, log = RegState(memory=new_memory(method.memory, cfg, seed, bench.n_classes * n)), {}
    compile_g1 = use_compiled(bench, method, cfg, bench.train_stream)
    if evaluate_rows not in ("all", "last"):
        raise ValueError(f"evaluate_rows={evaluate_rows!r}: use 'all' or 'last'")
    t0 = time.perf_counter()
    for i in progress(range(n), show_progress, desc=f"{method.name} s{seed}", unit="task"):
        train_experience(model, bench.train_stream[i], method, cfg, reg, gen, log, bench.test_stream[i], compile_g1)
        if evaluate_rows == "all" or i == n - 1:
            acc[i, : i + 1] = evaluate_tasks(model, bench.test_stream[: i + 1])
    out = {"acc_matrix": acc, "wall_s": time.perf_counter() - t0, "compiled": compile_g1}
    if reg.memory is not None:  # the memory's cost in bytes beside the regulariser's
        out["state_bytes"] = state_bytes(model, reg.memory, method.regulariser is not None)
    out.update(log)
    return out


def train_reference(bench: Benchmark, task: int, cfg: TrainConfig, seed: int) -> float:
    """a*_i for FA: a model from the same random init as the seed's runs, trained on task i only with the fine-tune
    procedure and the same budget (cfg.epochs), evaluated on task i."""
    bench = _on_device(bench, cfg)
    model = _new_model(bench, seed, cfg.device)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    exp, method = bench.train_stream[task], METHODS["finetune"]
    train_experience(model, exp, method, cfg, RegState(), gen, compile_g1=use_compiled(bench, method, cfg, [exp]))
    return evaluate(model, bench.test_stream[task])


def train_joint(bench: Benchmark, cfg: TrainConfig, seed: int) -> list[float]:
    """The joint-training oracle: all tasks' low-shot training data at once (Eq. 1), Adam, mini-batches of the shuffled
    union for as many outer steps as the sequential stream takes (`outer_steps`: cfg.epochs epochs of each task). Where
    every task is a whole number of mini-batches that is cfg.epochs epochs of the union; where tasks are smaller than
    one mini-batch (Permuted MNIST at K = 1 and 5: 10 and 50 images) it is more epochs of fuller batches, not fewer
    steps. Returns the accuracy on each task."""
    bench = _on_device(bench, cfg)
    model = _new_model(bench, seed, cfg.device)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.cat([e.inputs() for e in bench.train_stream])
    y = torch.cat([e.y for e in bench.train_stream])
    tasks = torch.cat([torch.full((len(e),), e.task_id, dtype=torch.long, device=e.y.device)
                       for e in bench.train_stream])
    opt = torch.optim.Adam(model.parameters(), lr=cfg.outer_lr, foreach=True)
    model.train()
    steps = outer_steps(bench.train_stream, cfg)
    while steps > 0:
        order = torch.randperm(len(y), generator=gen).to(y.device)
        for s in range(0, min(len(order), steps * cfg.batch_size), cfg.batch_size):
            steps -= 1
            idx = order[s: s + cfg.batch_size]
            opt.zero_grad()
            F.cross_entropy(model(x.index_select(0, idx), tasks.index_select(0, idx) if bench.multi_head else 0),
                            y.index_select(0, idx)).backward()
            opt.step()
    return evaluate_tasks(model, bench.test_stream)
