"""The episodic memory of the memory family's methods (extensions the paper did not run, `vocab.MEMORY_METHOD_TABLE`):
A-GEM (Chaudhry et al., ICLR 2019), experience replay (ER; Chaudhry et al. 2019, "On Tiny Episodic Memories in
Continual Learning"), MetaCL's Reptile gradient projected as A-GEM projects, and MetaCL-lambda with both references.

What it keeps (`POLICY`, recorded in every results file with a memory method): a fixed budget of M examples per class
of each task of the stream (the option `memory`, 1 <= M <= K; M x classes x tasks in all), used from the first task
and balanced over the (task, class) groups seen, as Avalanche's replay and the field's buffers keep it. When a task
ends, each of its classes joins with its training images in a random order drawn from the memory's generator; then
every group keeps the first `capacity // groups` of its images (the first groups in (task, class) order one more,
so that the whole budget is held), the earlier tasks giving up slots as tasks come. After task t each class holds
min(K, M T / t) images; after the last, M. Which images a class keeps is a uniform random subset of its training
images, what a ring buffer per class written during the task holds at its end (Chaudhry et al.'s code); the batches
draw from the past tasks only, as theirs and Avalanche's do. The images are kept in the data's own type (uint8 for
8-bit images: `Experience.stored`), the labels and tasks in the smallest integer type that holds them, and turned
into the model's inputs, exactly, as each batch is drawn.

How the training loop uses it (`EpisodicMemory.hook`, once the memory holds a task; the first task trains as the base
method does):
- "project" (A-GEM's use): at each outer step a reference batch is drawn from the memory, A-GEM's rule: a random batch
  of `REFERENCE_BATCH` = 256 examples without replacement (A-GEM's code, `eps_mem_batch`), the whole memory when it is
  smaller; gm is the gradient of the mean cross-entropy on it at theta (each example through its own task's head). The
  step is g1 projected onto {g : <g, gm> >= 0}, `balance.dynamic_balance(g1, gm, 0)` (Eq. 3 with gm for g2, A-GEM's
  projection), or, with a regulariser's g2 as well, `balance.two_reference_balance(g1, g2, gm, gamma)`.
- "replay" (ER): g1 is the gradient of the mean cross-entropy on the current mini-batch and a memory batch together
  (one forward pass on their union), the memory batch as large as the current one (ER's rule) or the whole memory
  when it is smaller.

Determinism: the memory draws (the order each class joins in, which examples form each batch) come from a CPU
generator of its own, seeded from the run's seed (`memory_generator`), apart from the batch order's; they do not
depend on the executor, the number of workers or threads, and the methods without a memory draw nothing more (their
numbers are unchanged). The memory's cost in bytes (`EpisodicMemory.nbytes`: what it keeps, in the types it keeps it
in) stands beside the regulariser's, Omega and the anchor: two copies of the parameters (`state_bytes`).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .balance import dynamic_balance, flatten, many_reference_lambdas, two_reference_balance
from .data.streams import Experience
from .vocab import MEMORIES, memory_of, registrar

#: A-GEM's reference batch: at most 256 examples of the memory (A-GEM's code, `eps_mem_batch`).
REFERENCE_BATCH = 256
#: How a method of the memory family uses its memory (`vocab.MemoryMethod.use`).
USES = ("project", "replay", "constrain")
#: What the memory keeps and when (module docstring), recorded in a results file's config (`lab.grid`): a file made
#: with another policy is refused, never resumed.
POLICY = "balanced"

#: Each memory family's class by its name in the vocabulary (`vocab.MEMORY_TABLE`), registered by the class itself
#: (`memory_family`); the training loop builds every run's memory from it (`new_memory`).
MEMORY_CLASSES: dict[str, type] = {}


#: A class decorator: `@memory_family(name)` registers a memory class as the one of the vocabulary's memory family.
memory_family: Callable[[str], Callable[[type], type]] = registrar(MEMORY_CLASSES, MEMORIES, "memory_family",
                                                                   "a memory", "MEMORY_TABLE")


def memory_generator(seed: int) -> torch.Generator:
    """The memory's CPU generator: seeded from the run's seed through numpy's SeedSequence (its child stream 1), a
    stream apart from the batch order's (a generator seeded with the seed itself)."""
    state = np.random.SeedSequence(seed, spawn_key=(1,)).generate_state(2, np.uint32)
    return torch.Generator().manual_seed((int(state[0]) << 31) ^ int(state[1]))


def _flat_grad(loss: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """d loss / d theta as one flat vector, zeros for the parameters the loss does not use."""
    params = list(model.parameters())
    gs = torch.autograd.grad(loss, params, allow_unused=True)
    return flatten(torch.zeros_like(p) if g is None else g for g, p in zip(gs, params))


def _small(t: torch.Tensor) -> torch.Tensor:
    """Labels or task indices in the smallest integer type that holds them (uint8 for up to 256)."""
    return t.to(next(d for d in (torch.uint8, torch.int16, torch.int32) if int(t.max()) <= torch.iinfo(d).max))


@memory_family("episodic")
class EpisodicMemory:
    """A fixed budget of `capacity` examples, balanced over the (task, class) groups seen (module docstring):
    `add(exp)` after a task, `draw(n)` a batch, `gradient(model, rows)` the memory loss's gradient, `hook(...)` what
    the training loop's step becomes."""

    def __init__(self, capacity: int, gen: torch.Generator):
        self.capacity, self.gen = capacity, gen
        self.x: Optional[torch.Tensor] = None  # the images as kept (`Experience.stored`), decoded by `self.decode`
        self.y: Optional[torch.Tensor] = None
        self.task: Optional[torch.Tensor] = None
        self.decode: Callable = lambda x: x

    @classmethod
    def from_config(cls, cfg, seed: int, groups: int) -> "EpisodicMemory":
        """An empty memory with the run's budget, M (the option `memory` of a `training.TrainConfig`) for each of the
        stream's `groups` (classes x tasks), and its generator (`memory_generator`)."""
        return cls(cfg.memory * groups, memory_generator(seed))

    def __len__(self) -> int:
        return 0 if self.y is None else len(self.y)

    @property
    def nbytes(self) -> int:
        """What the memory holds, in bytes: its images, labels and task indices, in the types it keeps them in."""
        return sum(t.numel() * t.element_size() for t in (self.x, self.y, self.task) if t is not None)

    def add(self, exp: Experience) -> None:
        """The task's training images join, each class in an order drawn by the memory's generator; then each
        (task, class) group keeps its share of the budget, its first images (`_keep`)."""
        labels = exp.y.cpu()
        idx = torch.cat([rows[torch.randperm(len(rows), generator=self.gen)]
                         for rows in (torch.nonzero(labels == c).flatten() for c in torch.unique(labels).tolist())])
        x, self.decode = exp.stored(idx.to(exp.y.device))
        new = (x, _small(labels[idx]), _small(torch.full((len(idx),), exp.task_id)))
        old = (self.x, self.y, self.task)
        x, y, task = (n.to(x.device) if o is None else torch.cat([o, n.to(o.device)]) for o, n in zip(old, new))
        keep = self._keep(task.cpu(), y.cpu()).to(x.device)
        self.x, self.y, self.task = (t.index_select(0, keep) for t in (x, y, task))

    def _keep(self, task: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The rows that stay: the first `capacity // groups` of each (task, class) group, one more for the first
        `capacity % groups` groups (the rows lie group after group, in (task, class) order)."""
        _, group, counts = torch.unique(task.long() * 65536 + y.long(), return_inverse=True, return_counts=True)
        base, extra = divmod(self.capacity, len(counts))
        share = base + (torch.arange(len(counts)) < extra).long()
        rank = torch.arange(len(y)) - (torch.cumsum(counts, 0) - counts)[group]
        return torch.nonzero(rank < share[group]).flatten()

    def draw(self, size: int) -> Optional[torch.Tensor]:
        """The rows of one memory batch: `size` of them drawn without replacement, or None for the whole memory when
        it holds no more than `size` (nothing is drawn then)."""
        if len(self) <= size:
            return None
        return torch.randperm(len(self), generator=self.gen)[:size].to(self.y.device)

    def batch(self, rows: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inputs, labels, tasks) of `rows` (None: the whole memory)."""
        x, y, task = (self.x, self.y, self.task) if rows is None else (t.index_select(0, rows) for t in
                                                                        (self.x, self.y, self.task))
        return self.decode(x), y.long(), task.long()

    def gradient(self, model: nn.Module, rows: Optional[torch.Tensor]) -> torch.Tensor:
        """gm: the gradient of the mean cross-entropy on the memory's `rows` at the model's parameters, each example
        through its own task's head."""
        x, y, task = self.batch(rows)
        return _flat_grad(F.cross_entropy(model(x, task), y), model)

    def replay_gradient(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: int) -> torch.Tensor:
        """ER's g1: the gradient of the mean cross-entropy on the current mini-batch (x, y of `task`) and a memory
        batch as large, together (one forward pass on their union, each example through its own task's head)."""
        mx, my, mt = self.batch(self.draw(len(y)))
        tasks = torch.cat([torch.full((len(y),), task, dtype=torch.long, device=y.device), mt])
        return _flat_grad(F.cross_entropy(model(torch.cat([x, mx]), tasks), torch.cat([y, my])), model)

    def task_gradients(self, model: nn.Module) -> torch.Tensor:
        """GEM's references, one row per past task: the gradient of the mean cross-entropy on all of that task's
        examples in the memory."""
        x, y, task = self.batch(None)
        return torch.stack([_flat_grad(F.cross_entropy(model(x[m], task[m]), y[m]), model)
                            for m in (task == k for k in torch.unique(task).tolist())])

    def hook(self, model: nn.Module, use: str, task_gradient: Callable, balance: Callable) -> tuple[Callable, Callable]:
        """The training loop's task gradient and balance for a method that uses the memory as `use` says (`USES`):
        unchanged while the memory is empty (the stream's first task); "replay": ER's g1 (`replay_gradient`);
        "project": the step projected onto the memory gradient's half-space as well (module docstring), its lambda
        the regulariser's multiplier where there is one, else the memory's; "constrain" (GEM): g1 projected onto the
        intersection of the past tasks' half-spaces (`task_gradients`, `balance.many_reference_lambdas`), its lambda
        the largest multiplier; with a regulariser's g2 as one more reference, gamma added to its multiplier, which is
        the lambda (as Alg. 2 adds it)."""
        if use not in USES:
            raise ValueError(f"unknown use of the memory {use!r}; one of {', '.join(USES)}")
        if len(self) == 0:
            return task_gradient, balance
        if use == "replay":
            return (lambda model, x, y, task, cfg: self.replay_gradient(model, x, y, task)), balance
        if use == "constrain":
            def constrain(g1: torch.Tensor, g2: Optional[torch.Tensor], beta: float, gamma: float):
                refs = self.task_gradients(model)
                refs = refs if g2 is None else torch.cat([g2[None], refs])  # the regulariser's, one reference more
                lam = many_reference_lambdas(g1, refs)
                if g2 is None:
                    return g1 + lam.to(refs) @ refs, lam.max()
                return g1 + lam[1:].to(refs) @ refs[1:] + (lam[0] + gamma).to(g2.dtype) * g2, lam[0]
            return task_gradient, constrain

        def project(g1: torch.Tensor, g2: Optional[torch.Tensor], beta: float, gamma: float):
            gm = self.gradient(model, self.draw(REFERENCE_BATCH))
            return dynamic_balance(g1, gm, 0.0) if g2 is None else two_reference_balance(g1, g2, gm, gamma)

        return task_gradient, project


def new_memory(memory: Optional[str], cfg, seed: int, groups: int):
    """A run's empty memory of the vocabulary's memory family `memory` (its registered class, with the run's options
    and seed, for a stream of `groups` classes x tasks); None for a method without one."""
    if memory is None:
        return None
    if memory not in MEMORY_CLASSES:
        raise ValueError(f"the memory {memory!r} has no class: decorate one with @memory_family({memory!r})")
    return MEMORY_CLASSES[memory].from_config(cfg, seed, groups)


def policy_record(methods) -> dict:
    """What a results or tuning file of `methods` records of its memory: {"memory_policy": POLICY} where a method has
    one, else nothing; a file whose record differs is of another memory and is refused."""
    return {"memory_policy": POLICY} if any(map(memory_of, methods)) else {}


def images_per_step(use: Optional[str], batch: int, held: int) -> int:
    """The images one outer step passes through the network while the memory holds `held`: the current batch's, and
    those its use adds (`USES`: A-GEM's reference batch, ER's replayed batch, GEM's whole memory; None: none)."""
    return batch + {None: 0, "project": min(REFERENCE_BATCH, held), "replay": min(batch, held), "constrain": held}[use]


def state_bytes(model: nn.Module, memory, regularised: bool) -> dict[str, int]:
    """What a run carries from task to task, in bytes: its memory's examples (`memory`; 0 without one) and its
    regulariser's Omega and anchor, two copies of the parameters (0 without a regulariser)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"memory": 0 if memory is None else memory.nbytes, "regulariser": 2 * params if regularised else 0}
