"""The episodic memory of the memory family's methods (extensions the paper did not run, `vocab.MEMORY_METHOD_TABLE`):
A-GEM (Chaudhry et al., ICLR 2019), experience replay (ER; Chaudhry et al. 2019, "On Tiny Episodic Memories in
Continual Learning"), MetaCL's Reptile gradient projected as A-GEM projects, and MetaCL-lambda with both references.

What it keeps: after each task, M examples per class of that task's training images (the option `memory`, declared in
the vocabulary: 1 <= M <= K), drawn without replacement from the K each class has, join the memory for the rest of the
stream; it holds the model's inputs, the labels and each example's task (its head), on the run's device.

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

Determinism: the memory draws (which examples join, which form each batch) come from a CPU generator of its own,
seeded from the run's seed (`memory_generator`), apart from the batch order's; they do not depend on the executor, the
number of workers or threads, and the methods without a memory draw nothing more (their numbers are unchanged). The
memory's cost in bytes (`EpisodicMemory.nbytes`) stands beside the regulariser's, Omega and the anchor: two copies of
the parameters (`state_bytes`).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .balance import dynamic_balance, flatten, two_reference_balance
from .data.streams import Experience
from .vocab import MEMORIES, registrar

#: A-GEM's reference batch: at most 256 examples of the memory (A-GEM's code, `eps_mem_batch`).
REFERENCE_BATCH = 256
#: How a method of the memory family uses its memory (`vocab.MemoryMethod.use`).
USES = ("project", "replay")

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


@memory_family("episodic")
class EpisodicMemory:
    """M examples per class of each past task (module docstring): `add(exp)` after a task, `draw(n)` a batch,
    `gradient(model, rows)` the memory loss's gradient, `hook(...)` what the training loop's step becomes."""

    def __init__(self, per_class: int, gen: torch.Generator):
        self.per_class, self.gen = per_class, gen
        self.x: Optional[torch.Tensor] = None
        self.y: Optional[torch.Tensor] = None
        self.task: Optional[torch.Tensor] = None

    @classmethod
    def from_config(cls, cfg, seed: int) -> "EpisodicMemory":
        """An empty memory with the run's budget (the option `memory` of a `training.TrainConfig`) and its generator
        (`memory_generator`)."""
        return cls(cfg.memory, memory_generator(seed))

    def __len__(self) -> int:
        return 0 if self.y is None else len(self.y)

    @property
    def nbytes(self) -> int:
        """What the memory holds, in bytes: its inputs, labels and task indices."""
        return sum(t.numel() * t.element_size() for t in (self.x, self.y, self.task) if t is not None)

    def add(self, exp: Experience) -> None:
        """`per_class` examples of each class of the task's training images, drawn without replacement (a
        permutation of the class's rows by the memory's generator, its first M), join the memory."""
        labels = exp.y.cpu()
        picks = []
        for c in torch.unique(labels).tolist():
            rows = torch.nonzero(labels == c).flatten()
            if len(rows) < self.per_class:
                raise ValueError(f"class {c} of task {exp.task_id} has {len(rows)} training images, fewer than "
                                 f"memory={self.per_class}")
            picks.append(rows[torch.randperm(len(rows), generator=self.gen)[: self.per_class]])
        idx = torch.cat(picks).to(exp.y.device)
        x, y = exp.inputs().index_select(0, idx), exp.y.index_select(0, idx)
        task = torch.full((len(idx),), exp.task_id, dtype=torch.long, device=y.device)
        old = (self.x, self.y, self.task)
        self.x, self.y, self.task = (new if o is None else torch.cat([o, new]) for o, new in zip(old, (x, y, task)))

    def draw(self, size: int) -> Optional[torch.Tensor]:
        """The rows of one memory batch: `size` of them drawn without replacement, or None for the whole memory when
        it holds no more than `size` (nothing is drawn then)."""
        if len(self) <= size:
            return None
        return torch.randperm(len(self), generator=self.gen)[:size].to(self.y.device)

    def batch(self, rows: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inputs, labels, tasks) of `rows` (None: the whole memory)."""
        if rows is None:
            return self.x, self.y, self.task
        return self.x.index_select(0, rows), self.y.index_select(0, rows), self.task.index_select(0, rows)

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

    def hook(self, model: nn.Module, use: str, task_gradient: Callable, balance: Callable) -> tuple[Callable, Callable]:
        """The training loop's task gradient and balance for a method that uses the memory as `use` says (`USES`):
        unchanged while the memory is empty (the stream's first task); "replay": ER's g1 (`replay_gradient`);
        "project": the step projected onto the memory gradient's half-space as well (module docstring), its lambda
        the regulariser's multiplier where there is one, else the memory's."""
        if use not in USES:
            raise ValueError(f"unknown use of the memory {use!r}; one of {', '.join(USES)}")
        if len(self) == 0:
            return task_gradient, balance
        if use == "replay":
            return (lambda model, x, y, task, cfg: self.replay_gradient(model, x, y, task)), balance

        def project(g1: torch.Tensor, g2: Optional[torch.Tensor], beta: float, gamma: float):
            gm = self.gradient(model, self.draw(REFERENCE_BATCH))
            return dynamic_balance(g1, gm, 0.0) if g2 is None else two_reference_balance(g1, g2, gm, gamma)

        return task_gradient, project


def new_memory(memory: Optional[str], cfg, seed: int):
    """A run's empty memory of the vocabulary's memory family `memory` (its registered class, with the run's options
    and seed); None for a method without one."""
    if memory is None:
        return None
    if memory not in MEMORY_CLASSES:
        raise ValueError(f"the memory {memory!r} has no class: decorate one with @memory_family({memory!r})")
    return MEMORY_CLASSES[memory].from_config(cfg, seed)


def state_bytes(model: nn.Module, memory, regularised: bool) -> dict[str, int]:
    """What a run carries from task to task, in bytes: its memory's examples (`memory`; 0 without one) and its
    regulariser's Omega and anchor, two copies of the parameters (0 without a regulariser)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"memory": 0 if memory is None else memory.nbytes, "regulariser": 2 * params if regularised else 0}
