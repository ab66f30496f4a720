"""Random tensors with the real shapes of Split CIFAR-100 and Split CUB-200, for timing only (the accuracies mean
nothing): where the datasets are not at hand, the speed benchmark trains every method on these, through the same
loop and on the same device as a real run. CUB's images are uint8 and normalised on access, as the real ones are."""
from __future__ import annotations

import torch

from .cub import NormalisedExperience
from .streams import Benchmark, Experience

#: classes per task, image shape, test images per task (CIFAR-100: 1 000; CUB: ~5 794 / 10 tasks, rounded to 580)
SHAPES = {"cifar100": (10, (3, 32, 32), 1000), "cub": (20, (3, 224, 224), 580)}


def synthetic_benchmark(name: str, K: int, n_tasks: int) -> Benchmark:
    """K x classes training images and the test images of every task, drawn from a generator seeded with 0."""
    g = torch.Generator().manual_seed(0)
    c, shape, n_test = SHAPES[name]

    def exp(t: int, n: int) -> Experience:
        y = torch.arange(n) % c
        if name == "cub":
            return NormalisedExperience(t, torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8), y)
        return Experience(t, torch.randn(n, *shape, generator=g), y)

    tr = [exp(t, K * c) for t in range(n_tasks)]
    te = [exp(t, n_test) for t in range(n_tasks)]
    return Benchmark(name, K, n_tasks, c, True, shape, tr, te, info={"synthetic": True, "model": {"random_init": True}})
