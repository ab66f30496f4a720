"""The benchmarks by name: `make_benchmark` builds one through its specification's loader (`specs.BenchmarkSpec.loader`:
`mnist.permuted_mnist`, `cifar100.split_cifar100` or `cub.split_cub`), after `check_data`, which raises the error the
build would raise without loading images, before any compute. Both take a benchmark's name or its specification.
"""
from __future__ import annotations

from typing import Callable, Optional

from .cifar100 import check_cifar100_request, split_cifar100
from .cub import read_cub_index, split_cub
from ..errors import UsageError
from .mnist import MNIST_SOURCES, check_mnist_request, permuted_mnist
from .specs import BenchmarkSpec, get_spec
from .streams import Benchmark, check_request, first_k_indices

LOADERS: dict[str, Callable[..., Benchmark]] = {"permuted_mnist": permuted_mnist, "split_cifar100": split_cifar100,
                                                "split_cub": split_cub}


def check_data(name: str | BenchmarkSpec, K: int, source: str = "auto", split: str = "test") -> None:
    """Fail fast, before any compute, with the error that building benchmark `name` (its name or its specification)
    at this K would raise, without loading images: UsageError for a bad K / split / source (the message gives the
    largest valid K), MissingDataError or ChecksumError naming the command that fixes it. MNIST files are
    checksum-verified; for CIFAR-100 its files and for CUB its split files must be present (their md5 / images are
    checked when the benchmark is built). `source` (auto / embedded / raw) picks the MNIST files; the other
    benchmarks have one source."""
    spec = get_spec(name)
    need = check_request(spec, K, split)
    if need > spec.max_K:  # before the files: no K too large is sent to download first (as CIFAR-100)
        raise UsageError(f"K={K} is more than the {spec.max_K} training images of the smallest {spec.title} "
                         f"class; choose K <= {spec.max_K}")
    if source not in MNIST_SOURCES:
        raise UsageError(f"unknown data source {source!r}; use {', '.join(MNIST_SOURCES)}")
    if source != "auto" and spec.loader != "permuted_mnist":
        raise UsageError(f"--data {source} picks the MNIST files; {spec.name} has one source (its folder under "
                         f"$METACL_LITE_DATA): leave --data out")
    if spec.loader == "permuted_mnist":
        labels = check_mnist_request(K, source, need)
        if labels is None:  # the embedded subset holds the images of every class
            return
    elif spec.loader == "split_cifar100":
        check_cifar100_request(K, need)
        return
    else:
        idx = read_cub_index()
        labels = idx["labels"][idx["is_train"]]
    if split == "val":
        first_k_indices(labels, spec.val_per_class, offset=spec.val_offset)
    else:
        first_k_indices(labels, K)


def make_benchmark(name: str | BenchmarkSpec, K: int, seed: int = 0, n_tasks: Optional[int] = None,
                   source: str = "auto", split: str = "test") -> Benchmark:
    """Build a benchmark by name (or from its specification, resolved once by the caller) through the
    specification's loader (`SPECS[name].loader`, which is handed the specification), after `check_data`
    (so missing data is reported before anything heavy is loaded). Errors name the valid choices and the command
    that fetches missing data.

    `seed` draws the permutations of Permuted MNIST and `source` picks its MNIST files; the class splits of
    CIFAR-100 and CUB are fixed.
    """
    spec = get_spec(name)
    check_data(spec, K, source, split)
    options = {"seed": seed, "source": source} if spec.loader == "permuted_mnist" else {}
    return LOADERS[spec.loader](K, n_tasks, split=split, spec=spec, **options)
