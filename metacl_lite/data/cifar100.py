"""Split CIFAR-100 (Table 2, Appendix D): the official python version (md5-checked through torchvision, fetched or
copied and verified before it replaces anything), and its multi-head stream of tasks of consecutive classes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .datafiles import ChecksumError, MissingDataError, data_root, fetch_hint, place_dataset
from ..errors import UsageError
from .specs import SPECS, BenchmarkSpec
from .streams import Benchmark, check_request, multi_head_stream, normalise, split_classes

CIFAR100_FOLDER = "cifar-100-python"  # torchvision's CIFAR100.base_folder
#: The files of cifar-100-python/ (the names in torchvision's CIFAR100.train_list, test_list and meta, which also
#: hold their md5); their presence is checked without importing torchvision.
CIFAR100_FILES = ("train", "test", "meta")
CIFAR100_TRAIN_PER_CLASS = 500  # Appendix C: 500 training images per class
def cifar_fetch_hint() -> str:
    return fetch_hint("cifar100", "cifar-100-python.tar.gz", CIFAR100_FOLDER)
#: Per-channel mean and std of the CIFAR-100 training images (inputs are normalised with them).
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)


def cifar100_root(root: Optional[Path] = None) -> Path:
    """The folder that holds cifar-100-python/ (torchvision's `root`)."""
    return Path(root or data_root()) / "cifar100"


def _cifar100_present(folder: Path, label: object = None) -> None:
    missing = [f for f in CIFAR100_FILES if not (folder / f).is_file()]
    if missing:
        raise MissingDataError(f"CIFAR-100 in {label or folder}: missing {', '.join(missing)}. {cifar_fetch_hint()}")


def check_cifar100(folder: Path, label: object = None) -> None:
    """Every official file of cifar-100-python/ is in `folder` with its md5 (torchvision's `check_integrity` on
    `CIFAR100.train_list`, `test_list` and `meta`). `label` names the folder in messages (default: `folder`)."""
    from torchvision.datasets import CIFAR100
    from torchvision.datasets.utils import check_integrity

    _cifar100_present(folder, label)
    files = [*CIFAR100.train_list, *CIFAR100.test_list, (CIFAR100.meta["filename"], CIFAR100.meta["md5"])]
    bad = [f for f, md5 in files if not check_integrity(folder / f, md5)]
    if bad:
        raise ChecksumError(f"CIFAR-100 in {label or folder}: {', '.join(bad)} is not the official file (md5 "
                            f"mismatch). {cifar_fetch_hint()}")


def load_cifar100(root: Optional[Path] = None) -> dict[str, np.ndarray]:
    """CIFAR-100 through torchvision's `CIFAR100`, after `check_cifar100`.

    Returns uint8 images (N, 32, 32, 3) and fine labels, in the official file order.
    """
    from torchvision.datasets import CIFAR100

    r = cifar100_root(root)
    check_cifar100(r / CIFAR100_FOLDER)
    tr, te = CIFAR100(str(r), train=True), CIFAR100(str(r), train=False)
    return {"x_train": tr.data, "y_train": np.asarray(tr.targets), "x_test": te.data, "y_test": np.asarray(te.targets),
            "classes": list(tr.classes)}


def check_cifar100_request(K: int, need: int) -> None:
    """What `benchmarks.check_data` checks of CIFAR-100 without loading images: its files are present (their md5 is
    checked when the benchmark is built) and every class has the `need` training images a request at K reads."""
    if need > CIFAR100_TRAIN_PER_CLASS:  # before the files: no K too large is sent to download first
        raise UsageError(f"K={K} is more than the {CIFAR100_TRAIN_PER_CLASS} training images of each CIFAR-100 "
                         f"class; choose K <= {CIFAR100_TRAIN_PER_CLASS}")
    _cifar100_present(cifar100_root() / CIFAR100_FOLDER)


def split_cifar100(K: int, n_tasks: Optional[int] = None, root: Optional[Path] = None,
                   split: str = "test", spec: Optional[BenchmarkSpec] = None) -> Benchmark:
    """Split CIFAR-100: task t = the t-th block of `classes_per_task` classes in label order, multi-head, the first K
    training images of each class in file order, all test images of each class (Appendix C). Inputs are normalised
    per channel. split="val" evaluates on training images [val_offset, val_offset + val_per_class) of each class
    instead (for choosing beta/gamma). Defaults and limits: `spec` (default `SPECS["cifar100"]`)."""
    spec = SPECS["cifar100"] if spec is None else spec
    n_tasks = spec.n_tasks if n_tasks is None else n_tasks
    check_request(spec, K, split, n_tasks)
    d = load_cifar100(root)
    tasks = split_classes(n_tasks, spec.classes_per_task)

    def to_tensor(x, idx):
        return normalise(torch.from_numpy(np.ascontiguousarray(x[idx].transpose(0, 3, 1, 2))),
                         CIFAR100_MEAN, CIFAR100_STD)

    train, test = multi_head_stream(d["x_train"], d["y_train"], d["x_test"], d["y_test"], K, tasks, to_tensor,
                                    split, spec)
    return Benchmark.from_spec(spec, K, train, test,
                               info={"source": str(cifar100_root(root)),
                                     "tasks": [[d["classes"][c] for c in t] for t in tasks], "split": split,
                                     "n_train_per_task": len(train[0]), "n_test_per_task": len(test[0])})


def fetch_cifar100(source: Optional[Path] = None, root: Optional[Path] = None, quiet: bool = False) -> Path:
    """CIFAR-100 (python version, torchvision's `CIFAR100.url` / `filename` / `tgz_md5`) into cifar100_root(),
    verified by `check_cifar100` before it replaces anything."""
    from torchvision.datasets import CIFAR100

    place_dataset((CIFAR100.filename, CIFAR100.tgz_md5), CIFAR100.url, cifar100_root(root), CIFAR100_FOLDER,
                  check_cifar100, cifar_fetch_hint(), source, quiet)
    return cifar100_root(root)
