"""MNIST and Permuted MNIST: the four official idx files (md5-checked, fetched from torchvision's mirrors or a local
folder), the embedded low-shot subset shipped in the package (sha256-checked), which of the two a request reads, and
the Permuted MNIST benchmark built from them (Table 1, Appendix C: "we sample the first K images from each class").
"""
from __future__ import annotations

import gzip
import struct
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .datafiles import (ChecksumError, DataError, MissingDataError, check_folder, copy_file, data_root, fetch_command,
                        file_digest, verify_file)
from ..paths import PACKAGE_DIR
from ..errors import UsageError
from .specs import SPECS, BenchmarkSpec
from .streams import Benchmark, Experience, check_request, first_k_indices, unit_scale

#: The four original MNIST files and their official md5 (torchvision's `MNIST.resources`; a test checks they agree).
#: Kept here so that verifying the files does not import torchvision; downloads use torchvision's `MNIST.mirrors`.
MNIST_FILES: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
MNIST_SOURCES = ("auto", "embedded", "raw")

#: The embedded default: the first 600 training images of each class + the full test set, shipped in the package.
#: 600 = the largest K the paper uses (500) + the validation images 500-599 of each class (`SPECS["pmnist"]`), so
#: every paper K trains and validates on it; its first 500 per class are those of the 500-image file it replaced.
EMBEDDED_MNIST = PACKAGE_DIR / "data" / "mnist_first600.npz"
EMBEDDED_MNIST_PER_CLASS = 600
#: sha256 of the committed embedded file (checked on every load; rebuilt by data_scripts/build_embedded_mnist.py).
EMBEDDED_MNIST_SHA256_FILE = PACKAGE_DIR / "data" / "mnist_first600.sha256"

def fetch_hint_mnist() -> str:
    """How to get the raw MNIST files (`datafiles.fetch_command`: in an installed package, without data_scripts)."""
    return (f"Fetch the official files with `{fetch_command('mnist')}` (online), or copy them from a local folder "
            f"with `{fetch_command('mnist', 'DIR')}` (e.g. DIR = ../shared/data/mnist/raw); a corrupted file is "
            f"replaced.")


# ----------------------------------------------------------------------------------------------------------------
# The raw files and the embedded subset
# ----------------------------------------------------------------------------------------------------------------
def mnist_raw_dir(root: Optional[Path] = None) -> Path:
    return Path(root or data_root()) / "mnist" / "raw"


def fetch_mnist(dest: Optional[Path] = None, source_dir: Optional[Path] = None, quiet: bool = False) -> Path:
    """Place the four official MNIST files in `dest` (default: mnist_raw_dir()), md5-verified.

    With `source_dir`, copy them from that local folder (offline); otherwise download them from torchvision's
    official mirrors with `download_url` (which checks the md5). A file already present with the right md5 is kept;
    any other is replaced, atomically, by a verified file only, so a failure never leaves a worse file than before.
    """
    dest = check_folder(Path(dest), "the MNIST destination") if dest is not None else mnist_raw_dir()
    for name, md5 in MNIST_FILES.items():
        target = dest / name
        if target.is_file() and file_digest(target) == md5:
            done = "ok"
        elif source_dir is not None:
            src = Path(source_dir) / name
            verify_file(src, md5, fix=f"The copy in {source_dir} cannot be used: give a folder that holds the four "
                                      f"official files, or download them (`{fetch_command('mnist')}`; from Python, "
                                      f"`fetch_mnist()`).")
            copy_file(src, target)
            done = "copied"
        else:
            _download_mnist(name, md5, target)
            done = "fetched"
        if not quiet:
            print(f"{done:8s} {target}")
    return dest


def _download_mnist(name: str, md5: str, target: Path) -> None:
    """Try each of torchvision's MNIST mirrors; the md5-checked download is copied atomically to `target`."""
    from torchvision.datasets import MNIST
    from torchvision.datasets.utils import download_url

    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for mirror in MNIST.mirrors:
            try:
                download_url(mirror + name, tmp, name, md5)
            except (OSError, RuntimeError) as e:  # unreachable mirror / md5 mismatch: try the next one
                errors.append(f"{mirror + name}: {e}")
                continue
            copy_file(Path(tmp) / name, target)
            return
    raise DataError(f"could not download {name} ({'; '.join(errors)}). If you are offline, copy the official files "
                    f"from a local folder: `{fetch_command('mnist', 'DIR')}`.")


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    if magic >> 8 != 0x08:
        raise ChecksumError(f"{path}: not an unsigned-byte idx file (magic {magic:#x})")
    dims = struct.unpack(">" + "I" * ndim, raw[4: 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def verify_mnist_raw(root: Optional[Path] = None) -> Path:
    """The folder of the four raw MNIST files, after checking their md5 (MissingDataError / ChecksumError)."""
    d = Path(root) if root is not None else mnist_raw_dir()
    for name, md5 in MNIST_FILES.items():
        verify_file(d / name, md5, fetch_hint_mnist())
    return d


def load_mnist_raw(root: Optional[Path] = None) -> dict[str, np.ndarray]:
    """The original MNIST files, md5-verified: uint8 images (N, 28, 28) and labels (N,), in file order."""
    d = verify_mnist_raw(root)
    return {
        "x_train": _read_idx(d / "train-images-idx3-ubyte.gz"),
        "y_train": _read_idx(d / "train-labels-idx1-ubyte.gz"),
        "x_test": _read_idx(d / "t10k-images-idx3-ubyte.gz"),
        "y_test": _read_idx(d / "t10k-labels-idx1-ubyte.gz"),
    }


def verify_embedded(path: Path = EMBEDDED_MNIST) -> None:
    """Check the embedded subset's sha256 against the committed value (MissingDataError / ChecksumError)."""
    path = Path(path)
    hint = "Rebuild it with `python data_scripts/build_embedded_mnist.py` (needs the raw MNIST files)."
    if not path.is_file():
        raise MissingDataError(f"embedded MNIST subset {path} is missing. {hint}")
    want = EMBEDDED_MNIST_SHA256_FILE.read_text().split()[0]
    got = file_digest(path, "sha256")
    if got != want:
        raise ChecksumError(f"{path} is corrupted: sha256 {got}, expected {want}. {hint}")


def load_mnist_embedded(path: Path = EMBEDDED_MNIST) -> dict[str, np.ndarray]:
    """The embedded subset (first EMBEDDED_MNIST_PER_CLASS training images per class, in file order, + the full
    test set).

    Its sha256 is checked against the committed value before use. Keys: x_train, y_train, train_index (the
    images' positions in the original training file), x_test, y_test.
    """
    verify_embedded(path)
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# ----------------------------------------------------------------------------------------------------------------
# Permuted MNIST (Table 1): single head, one pixel permutation per task
# ----------------------------------------------------------------------------------------------------------------
def make_permutations(n_tasks: int, seed: int, n_pixels: int = 784, identity_first: bool = True) -> np.ndarray:
    """Fixed pixel permutations for Permuted MNIST, shape (n_tasks, n_pixels).

    Task 1 is the identity (plain MNIST) when `identity_first`; tasks 2..n are drawn from
    `np.random.default_rng(seed)`. For an MLP with i.i.d. random init the choice of task 1 does not change the
    distribution of results (a permuted input is the same as a permuted first-layer weight matrix).
    """
    rng = np.random.default_rng(seed)
    perms = [np.arange(n_pixels)] if identity_first else []
    while len(perms) < n_tasks:
        perms.append(rng.permutation(n_pixels))
    return np.stack(perms)


def _to_float(x: np.ndarray) -> torch.Tensor:
    return unit_scale(torch.from_numpy(np.array(x.reshape(len(x), -1))))  # what a memory's uint8 images give back


def _mnist_kind(K: int, source: str, need: int) -> str:
    """'embedded' or 'raw': the embedded subset when asked for, or (auto) when it holds `need` images per class."""
    if source not in MNIST_SOURCES:
        raise UsageError(f"unknown data source {source!r}; use {', '.join(MNIST_SOURCES)}")
    if source == "raw" or (source == "auto" and need > EMBEDDED_MNIST_PER_CLASS):
        return "raw"
    if need > EMBEDDED_MNIST_PER_CLASS:
        raise UsageError(f"K={K} needs {need} training images per class but the embedded subset holds "
                         f"{EMBEDDED_MNIST_PER_CLASS}; use the raw files (--data raw). {fetch_hint_mnist()}")
    return "embedded"


def _raw_needed(K: int, need: int, e: MissingDataError) -> MissingDataError:
    """The missing-raw-files error, saying why the raw files were needed."""
    if need > EMBEDDED_MNIST_PER_CLASS:
        why = (f"K={K} needs {need} training images per class, more than the embedded subset's "
               f"{EMBEDDED_MNIST_PER_CLASS}, so the raw MNIST files are needed")
    else:
        why = (f"the raw MNIST files were asked for (--data raw) but are missing; this run needs {need} training "
               f"images per class, which the embedded subset ({EMBEDDED_MNIST_PER_CLASS} per class) holds: "
               f"`--data embedded` or `--data auto` uses it")
    return MissingDataError(f"{why}. {e}")


def mnist_source(K: int, source: str = "auto", need_per_class: Optional[int] = None) -> tuple[dict, str]:
    """Pick the MNIST source: the embedded subset when it holds enough images per class, else the raw files."""
    need = need_per_class if need_per_class is not None else K
    if _mnist_kind(K, source, need) == "embedded":
        return load_mnist_embedded(), "embedded"
    try:
        return load_mnist_raw(), "raw"
    except MissingDataError as e:
        raise _raw_needed(K, need, e) from None


def check_mnist_request(K: int, source: str, need: int) -> Optional[np.ndarray]:
    """What `benchmarks.check_data` checks of MNIST without loading images, for a request reading `need` training
    images per class: the embedded subset's sha256 when it is the source (it holds EMBEDDED_MNIST_PER_CLASS >= need
    images of every class; returns None), else the raw files' md5; returns the raw training labels, for counting
    the first K images of each class."""
    if _mnist_kind(K, source, need) == "embedded":
        verify_embedded()
        return None
    try:
        return _read_idx(verify_mnist_raw() / "train-labels-idx1-ubyte.gz")
    except MissingDataError as e:
        raise _raw_needed(K, need, e) from None


def permuted_mnist(K: int, n_tasks: Optional[int] = None, seed: int = 0, source: str = "auto",
                   split: str = "test", spec: Optional[BenchmarkSpec] = None) -> Benchmark:
    """The Permuted MNIST benchmark: n_tasks permutations (default `SPECS["pmnist"].n_tasks`), single head
    (Appendix C).

    Training data of every task: the first K training images of each class (original file order), permuted.
    split="test": every task is evaluated on the 10 000 official test images under its permutation.
    split="val": evaluation on training images [val_offset, val_offset + val_per_class) of each class (the spec's
    values), which are never used for training when K <= val_offset (used to choose beta/gamma without touching the
    test set). `spec` (default `SPECS["pmnist"]`) is the specification `benchmarks.make_benchmark` resolved.
    """
    spec = SPECS["pmnist"] if spec is None else spec
    n_tasks = spec.n_tasks if n_tasks is None else n_tasks
    need = check_request(spec, K, split, n_tasks)
    d, used = mnist_source(K, source, need)
    tr = first_k_indices(d["y_train"], K)
    x_tr, y_tr = _to_float(d["x_train"][tr]), torch.from_numpy(d["y_train"][tr].astype(np.int64))
    if split == "test":
        x_te, y_te = _to_float(d["x_test"]), torch.from_numpy(d["y_test"].astype(np.int64))
    else:
        va = first_k_indices(d["y_train"], spec.val_per_class, offset=spec.val_offset)
        x_te, y_te = _to_float(d["x_train"][va]), torch.from_numpy(d["y_train"][va].astype(np.int64))
    perms = torch.from_numpy(make_permutations(n_tasks, seed, n_pixels=spec.input_shape[0]))
    train = [Experience(t, x_tr[:, perms[t]].contiguous(), y_tr) for t in range(n_tasks)]
    test = [Experience(t, x_te, y_te, perm=perms[t]) for t in range(n_tasks)]
    return Benchmark.from_spec(spec, K, train, test,
                               info={"source": used, "split": split, "permutation_seed": seed, "task1_identity": True,
                                     "n_train_per_task": len(y_tr), "n_test_per_task": len(y_te)})
