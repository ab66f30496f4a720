"""Models (Appendix B). Every model is called as `model(x, task)`; single-head models ignore `task`."""
from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import nn

TaskArg = Union[int, torch.Tensor]


class MultiHeadNet(nn.Module):
    """A shared body followed by one linear head per task (multi-head) or a single shared head (single-head).

    `task` is an int (the whole batch belongs to one task) or a LongTensor of per-sample task ids (joint
    training on a multi-head benchmark).
    """

    def __init__(self, body: nn.Module, feat_dim: int, n_classes: int, n_heads: int = 1):
        super().__init__()
        self.body = body
        self.heads = nn.ModuleList(nn.Linear(feat_dim, n_classes) for _ in range(n_heads))

    @property
    def multi_head(self) -> bool:
        return len(self.heads) > 1

    def forward(self, x: torch.Tensor, task: TaskArg = 0) -> torch.Tensor:
        h = self.body(x)
        if not self.multi_head:
            return self.heads[0](h)
        if isinstance(task, int):
            return self.heads[task](h)
        out = torch.stack([head(h) for head in self.heads], dim=1)  # (B, H, C)
        return out[torch.arange(len(h)), task]


ACTIVATIONS = {"relu": nn.ReLU, "softplus": nn.Softplus, "tanh": nn.Tanh}


def mlp(in_dim: int = 784, hidden: Sequence[int] = (256, 256), n_classes: int = 10, n_heads: int = 1,
        activation: str = "relu") -> MultiHeadNet:
    """The Permuted MNIST network: MLP 784-256-256-10 with ReLU (Appendix B).

    `activation` swaps the non-linearity (e.g. a smooth "softplus" for the Taylor-expansion check of chapter 4).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose from {', '.join(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    d = in_dim
    for h in hidden:
        layers += [nn.Linear(d, h), ACTIVATIONS[activation]()]
        d = h
    return MultiHeadNet(nn.Sequential(*layers), d, n_classes, n_heads)


def build_model(benchmark: str, n_classes: int, n_heads: int, seed: int) -> MultiHeadNet:
    """The paper's network for a benchmark, initialised from `seed` (same seed, same initial weights)."""
    torch.manual_seed(seed)
    if benchmark == "pmnist":
        return mlp(784, (256, 256), n_classes, n_heads)
    raise ValueError(f"no model for benchmark {benchmark!r}")
