"""Models (Appendix B). Every model is called as `model(x, task)`; single-head models ignore `task`."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence, Union

import torch
from torch import nn

from .errors import UserError
from .data.specs import get_spec

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
        return out[torch.arange(len(h), device=h.device), task]


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


def cifar_cnn(n_classes: int = 10, n_heads: int = 10) -> MultiHeadNet:
    """The CIFAR-100 network of Appendix B's table: conv3x3-32, conv3x3-32, maxpool 2x2, dropout 0.5, conv3x3-64,
    conv3x3-64, maxpool 2x2, dropout 0.5, then one linear head per task.

    What the table leaves open, and our choice: padding 1 ("same") on every conv, so the feature map is 64x8x8 =
    4096 features; no hidden fully connected layer between the body and the heads (the table shows none).
    """
    body = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.5),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.5), nn.Flatten())
    return MultiHeadNet(body, 64 * 8 * 8, n_classes, n_heads)


#: torchvision's ImageNet ResNet-18 weights (IMAGENET1K_V1); the hex in the name is the start of the file's sha256,
#: and RESNET18_SHA256 the whole digest of the 46 830 571-byte file (as published beside it by many projects that pin
#: it; not computed here, where the file cannot be downloaded).
RESNET18_FILE = "resnet18-f37072fd.pth"
RESNET18_SHA256 = "f37072fd47e89c5e827621c5baffa7500819f7896bbacec160b1a16c560e07ec"
RESNET18_URL = "https://download.pytorch.org/models/resnet18-f37072fd.pth"


class WeightsError(UserError, RuntimeError):
    """The ResNet-18 weights are missing or are not torchvision's file."""


@lru_cache(maxsize=8)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    """The file's sha256, computed once per version of the file (every CUB model build looks the weights up)."""
    from .data.datafiles import file_digest

    return file_digest(Path(path), "sha256")


def find_resnet18_weights(path: Optional[Union[str, Path]] = None) -> Path:
    """The ImageNet ResNet-18 weights: `path`, else $METACL_LITE_RESNET18, else the torch hub cache. Checked against
    the file's whole sha256 (`RESNET18_SHA256`)."""
    cands = [Path(path)] if path else []
    if os.environ.get("METACL_LITE_RESNET18"):
        cands.append(Path(os.environ["METACL_LITE_RESNET18"]))
    cands.append(Path(torch.hub.get_dir()) / "checkpoints" / RESNET18_FILE)
    for c in cands:
        if c.exists():
            st = c.stat()
            digest = _sha256(str(c.resolve()), st.st_mtime_ns, st.st_size)
            if digest != RESNET18_SHA256:
                raise WeightsError(f"{c} is not torchvision's {RESNET18_FILE} (sha256 {digest}, expected "
                                   f"{RESNET18_SHA256}). Delete it and fetch the weights again.")
            return c
    raise WeightsError(
        f"ImageNet ResNet-18 weights not found (looked in: {', '.join(map(str, cands))}). Online, put them in the "
        f"torch hub cache with `python -c \"import torchvision; torchvision.models.resnet18(weights='IMAGENET1K_V1')\"`"
        f" or download {RESNET18_URL}; then pass --weights FILE if it is elsewhere. To train from random "
        f"initialisation instead (not the paper's setting), pass --random-init explicitly.")


def resnet18_multihead(n_classes: int = 20, n_heads: int = 10, weights: Optional[Union[str, Path]] = None,
                       random_init: bool = False) -> MultiHeadNet:
    """torchvision's ResNet-18 with ImageNet weights (the CUB network, Appendix B) and one 512->n head per task."""
    from torchvision.models import resnet18

    net = resnet18(weights=None)
    if not random_init:
        net.load_state_dict(torch.load(find_resnet18_weights(weights), map_location="cpu", weights_only=True))
    net.fc = nn.Identity()
    return MultiHeadNet(net, 512, n_classes, n_heads)


def build_model(benchmark: str, n_classes: int, n_heads: int, seed: int, weights: Optional[str] = None,
                random_init: bool = False) -> MultiHeadNet:
    """The paper's network for a benchmark, initialised from `seed` (same seed, same initial weights; for CUB the
    body is the pretrained ResNet-18 and the seed sets the heads)."""
    arch = get_spec(benchmark).model
    torch.manual_seed(seed)
    if arch == "resnet18":
        return resnet18_multihead(n_classes, n_heads, weights, random_init)
    return ARCHITECTURES[arch](n_classes=n_classes, n_heads=n_heads)


#: The networks of Appendix B, by the name `specs.BenchmarkSpec.model` gives.
ARCHITECTURES = {"mlp": mlp, "cifar_cnn": cifar_cnn, "resnet18": resnet18_multihead}
