"""Streams: the first-K sampling of the paper ("Datasets": "we sample the first K images from each class";
Appendix C), the experiences and benchmarks every dataset is turned into, and the checks and helpers the three
benchmarks' builders share (`mnist`, `cifar100`, `cub`).

Vocabulary (borrowed from Avalanche): a *benchmark* has a *train stream* and a *test stream*; each stream is a
list of *experiences*, one per task. What the paper fixes about each benchmark (tasks, classes per task, heads,
input shape, validation images) is read from its `specs.BenchmarkSpec`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..errors import UsageError
from .specs import BenchmarkSpec


# ----------------------------------------------------------------------------------------------------------------
# Low-shot sampling
# ----------------------------------------------------------------------------------------------------------------
def first_k_indices(labels: np.ndarray, K: int, classes: Optional[Sequence[int]] = None,
                    offset: int = 0) -> np.ndarray:
    """Indices of the first K images of each class, in original file order (Appendix C, "first K images").

    `offset` skips the first `offset` images of each class (used to carve a validation split beyond the training
    images). Raises UsageError unless every class has offset + K images; the message gives the largest K that fits
    (the smallest class's count minus the offset).
    """
    labels = np.asarray(labels)
    if classes is None:
        classes = np.unique(labels)
    if K <= 0:
        raise UsageError(f"K must be a positive number of images per class, got K={K}")
    per_class = [np.flatnonzero(labels == c) for c in classes]
    counts = [len(idx) for idx in per_class]
    smallest = int(np.argmin(counts))
    if counts[smallest] < offset + K:
        raise UsageError(
            f"K={K} (offset {offset}) is more than this data holds: class {classes[smallest]} has "
            f"{counts[smallest]} training images, the fewest of all classes; choose K <= "
            f"{max(counts[smallest] - offset, 0)}"
        )
    return np.sort(np.concatenate([idx[offset: offset + K] for idx in per_class]))


# ----------------------------------------------------------------------------------------------------------------
# Experiences and benchmarks
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Experience:
    """The data of one task. `x` is float32 (N, ...); `y` are class labels in the task's head (0..C-1).

    For Permuted MNIST the test images are shared by all tasks and `perm` holds the task's pixel
    permutation: `inputs()` returns a permuted copy, which the evaluation (`training.evaluate_tasks`) runs through
    the model (`benchmarks/fasteval.py` permutes the first layer's weights instead). (The training images are permuted
    once, when the benchmark is built.)
    """

    task_id: int
    x: torch.Tensor
    y: torch.Tensor
    perm: Optional[torch.Tensor] = None
    classes: Optional[list[int]] = None

    def inputs(self, rows: Optional[slice] = None) -> torch.Tensor:
        """The model's inputs: all of them, or those of `rows` (a slice: the evaluation's batches)."""
        x = self.x if rows is None else self.x[rows]
        if self.perm is None:
            return x
        return torch.index_select(x, 1, self.perm)  # = x[:, perm], a few times faster

    def stored(self, idx: torch.Tensor) -> tuple[torch.Tensor, Callable]:
        """Rows `idx` of the inputs as an episodic memory keeps them, and the function that gives the inputs back
        exactly: uint8 where they are 8-bit images scaled to [0, 1] (Permuted MNIST), else the inputs themselves."""
        x = self.inputs().index_select(0, idx)
        q = x.mul(255).round_().clamp_(0, 255).to(torch.uint8)
        return (q, unit_scale) if torch.equal(unit_scale(q), x) else (x, lambda t: t)

    def __len__(self) -> int:
        return len(self.y)


def unit_scale(q: torch.Tensor) -> torch.Tensor:
    """uint8 images as float32 in [0, 1]: Permuted MNIST's inputs (`mnist._to_float`), and a memory's images back."""
    return q.float() / 255.0


@dataclass
class Benchmark:
    """One benchmark at one K: its train and test streams (one experience per task) and what the stream is (`info`)."""

    name: str
    K: int
    n_tasks: int
    n_classes: int  # per task (= per head)
    multi_head: bool
    input_shape: tuple
    train_stream: list[Experience]
    test_stream: list[Experience]
    info: dict = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: BenchmarkSpec, K: int, train: list, test: list, info: dict) -> Benchmark:
        """The benchmark of these streams, with the name, classes per task, heads and input shape of `spec`."""
        return cls(spec.name, K, len(train), spec.classes_per_task, spec.multi_head, spec.input_shape, train, test,
                   info=info)


def check_request(spec: BenchmarkSpec, K: int, split: str, n_tasks: Optional[int] = None) -> int:
    """Validate K, split and n_tasks against the benchmark's specification (UsageError). Returns the training images
    per class the request reads: K, or the end of the validation images for split="val"."""
    if split not in ("test", "val"):
        raise UsageError(f"split must be 'test' or 'val', got {split!r}")
    if K <= 0:
        raise UsageError(f"K must be a positive number of images per class, got K={K}")
    if split == "val" and K > spec.val_offset:
        raise UsageError(f"the validation images of {spec.title} start at image {spec.val_offset} of each class; "
                         f"K={K} would overlap them: choose K <= {spec.val_offset}")
    if n_tasks is not None and not 1 <= n_tasks <= spec.max_tasks:
        raise UsageError(f"{spec.title} has at most {spec.max_tasks} tasks of {spec.classes_per_task} classes; "
                         f"n_tasks={n_tasks} is out of range")
    return spec.val_offset + spec.val_per_class if split == "val" else K


# ----------------------------------------------------------------------------------------------------------------
# Multi-head streams of consecutive classes (Split CIFAR-100, Split CUB-200)
# ----------------------------------------------------------------------------------------------------------------
def normalise(x: torch.Tensor, mean, std) -> torch.Tensor:
    """uint8 images (N, C, H, W) as float32, scaled to [0, 1] and normalised per channel with `mean` and `std`."""
    m = torch.tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return (x.float() / 255.0 - m) / s


def split_classes(n_tasks: int, per_task: int) -> list[list[int]]:
    """Task t gets classes t*per_task .. (t+1)*per_task - 1 (the datasets' own label order)."""
    return [list(range(t * per_task, (t + 1) * per_task)) for t in range(n_tasks)]


def _eval_indices(y_tr, y_te, cls, split: str, val_offset: int, val_n: int):
    """Evaluation images of one task: all its test images, or (split="val") training images
    [val_offset, val_offset + val_n) of each class, which training never uses when K <= val_offset."""
    if split == "val":
        return first_k_indices(y_tr, val_n, classes=cls, offset=val_offset), True
    return np.sort(np.flatnonzero(np.isin(y_te, cls))), False


def multi_head_stream(x_tr, y_tr, x_te, y_te, K: int, tasks: list[list[int]], to_tensor, split: str,
                      spec: BenchmarkSpec, experience=None) -> tuple[list, list]:
    """Per task: the first K training images of its classes and its evaluation images, labels remapped to the
    task's head (0..C-1). `to_tensor(x, idx)` turns the selected rows of `x` into the inputs; `experience` is the
    Experience class to build (default Experience)."""
    experience = experience or Experience
    train, test = [], []
    for t, cls in enumerate(tasks):
        tr = first_k_indices(y_tr, K, classes=cls)
        te, from_train = _eval_indices(y_tr, y_te, cls, split, spec.val_offset, spec.val_per_class)
        ex, ey = (x_tr, y_tr) if from_train else (x_te, y_te)
        remap = {c: i for i, c in enumerate(cls)}
        ytr = torch.tensor([remap[int(c)] for c in y_tr[tr]], dtype=torch.long)
        yte = torch.tensor([remap[int(c)] for c in ey[te]], dtype=torch.long)
        train.append(experience(t, to_tensor(x_tr, tr), ytr, classes=cls))
        test.append(experience(t, to_tensor(ex, te), yte, classes=cls))
    return train, test
