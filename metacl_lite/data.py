"""Data: MNIST idx files, the embedded low-shot subset, first-K sampling and the Permuted MNIST stream.

Vocabulary (borrowed from Avalanche): a *benchmark* has a *train stream* and a *test stream*; each stream is a
list of *experiences*, one per task. Paper references: "Datasets" section and Appendix C (dataset statistics).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import struct
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent

#: The four original MNIST files and their official md5 (the ones torchvision and the MNIST homepage list).
MNIST_FILES: dict[str, str] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
#: Official mirrors, tried in order (the same ones torchvision uses).
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)

#: The embedded default: the first 500 training images of each class + the full test set, shipped in the package.
EMBEDDED_MNIST = PACKAGE_DIR / "data" / "mnist_first500.npz"
EMBEDDED_MNIST_PER_CLASS = 500
#: sha256 of the committed embedded file (checked on every load; rebuilt by data_scripts/build_embedded_mnist.py).
EMBEDDED_MNIST_SHA256_FILE = PACKAGE_DIR / "data" / "mnist_first500.sha256"

FETCH_HINT = (
    "Fetch it with `python data_scripts/fetch_mnist.py` (online), or copy a local copy with "
    "`python data_scripts/fetch_mnist.py --from DIR` (e.g. --from ../shared/data/mnist/raw)."
)


class DataError(RuntimeError):
    """Raised for missing or corrupted data; the message says which command fixes it."""


class MissingDataError(DataError, FileNotFoundError):
    pass


class ChecksumError(DataError, ValueError):
    pass


# ----------------------------------------------------------------------------------------------------------------
# Where data lives, checksums, fetching
# ----------------------------------------------------------------------------------------------------------------
def data_root() -> Path:
    """Root folder for downloaded data: $METACL_LITE_DATA, else `data/` in a source checkout, else ~/.cache."""
    env = os.environ.get("METACL_LITE_DATA")
    if env:
        return Path(env).expanduser().resolve()
    if (REPO_ROOT / "pyproject.toml").exists():
        return REPO_ROOT / "data"
    return Path.home() / ".cache" / "metacl-lite"


def mnist_raw_dir(root: Optional[Path] = None) -> Path:
    return Path(root or data_root()) / "mnist" / "raw"


def file_digest(path: Path, algo: str = "md5") -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: Path, md5: str, hint: str = FETCH_HINT) -> None:
    """Raise MissingDataError / ChecksumError (with the fixing command) unless `path` exists with this md5."""
    path = Path(path)
    if not path.exists():
        raise MissingDataError(f"{path.name} not found in {path.parent}. {hint}")
    got = file_digest(path, "md5")
    if got != md5:
        raise ChecksumError(
            f"{path} is corrupted: md5 {got}, expected {md5}. Delete it and fetch it again. {hint}"
        )


def atomic_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def fetch_mnist(dest: Optional[Path] = None, source_dir: Optional[Path] = None, quiet: bool = False) -> Path:
    """Place the four MNIST files in `dest` (default: mnist_raw_dir()) and verify their md5.

    With `source_dir`, copy from that local folder (offline); otherwise download from the official mirrors.
    Files already present with the right md5 are kept; a file with a wrong md5 is replaced.
    """
    dest = Path(dest or mnist_raw_dir())
    dest.mkdir(parents=True, exist_ok=True)
    for name, md5 in MNIST_FILES.items():
        target = dest / name
        if target.exists() and file_digest(target) == md5:
            if not quiet:
                print(f"ok       {target}")
            continue
        if source_dir is not None:
            src = Path(source_dir) / name
            verify_file(src, md5, hint=f"The local copy in {source_dir} is not the official file.")
            atomic_copy(src, target)
        else:
            last_err: Optional[Exception] = None
            for mirror in MNIST_MIRRORS:
                tmp = target.with_name(name + ".part")
                try:
                    with urllib.request.urlopen(mirror + name, timeout=60) as r, open(tmp, "wb") as f:
                        shutil.copyfileobj(r, f)
                    if file_digest(tmp) != md5:
                        raise ChecksumError(f"{mirror + name}: md5 mismatch")
                    os.replace(tmp, target)
                    last_err = None
                    break
                except Exception as e:  # try the next mirror, report all failures at the end
                    last_err = e
                    tmp.unlink(missing_ok=True)
            if last_err is not None:
                raise DataError(
                    f"could not download {name} ({last_err}). If you are offline, copy the files from a "
                    f"local folder: python data_scripts/fetch_mnist.py --from DIR"
                )
        verify_file(target, md5)
        if not quiet:
            print(f"fetched  {target}")
    return dest


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    if magic >> 8 != 0x08:
        raise ChecksumError(f"{path}: not an unsigned-byte idx file (magic {magic:#x})")
    dims = struct.unpack(">" + "I" * ndim, raw[4: 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist_raw(root: Optional[Path] = None) -> dict[str, np.ndarray]:
    """The original MNIST files, md5-verified: uint8 images (N, 28, 28) and labels (N,), in file order."""
    d = Path(root) if root is not None else mnist_raw_dir()
    for name, md5 in MNIST_FILES.items():
        verify_file(d / name, md5)
    return {
        "x_train": _read_idx(d / "train-images-idx3-ubyte.gz"),
        "y_train": _read_idx(d / "train-labels-idx1-ubyte.gz"),
        "x_test": _read_idx(d / "t10k-images-idx3-ubyte.gz"),
        "y_test": _read_idx(d / "t10k-labels-idx1-ubyte.gz"),
    }


def load_mnist_embedded(path: Path = EMBEDDED_MNIST) -> dict[str, np.ndarray]:
    """The embedded subset (first 500 training images per class, in file order, + the full test set).

    Its sha256 is checked against the committed value before use. Keys: x_train, y_train, train_index (the
    images' positions in the original training file), x_test, y_test.
    """
    path = Path(path)
    hint = "Rebuild it with `python data_scripts/build_embedded_mnist.py` (needs the raw MNIST files)."
    if not path.exists():
        raise MissingDataError(f"embedded MNIST subset {path} is missing. {hint}")
    want = EMBEDDED_MNIST_SHA256_FILE.read_text().split()[0]
    got = file_digest(path, "sha256")
    if got != want:
        raise ChecksumError(f"{path} is corrupted: sha256 {got}, expected {want}. {hint}")
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# ----------------------------------------------------------------------------------------------------------------
# Low-shot sampling and permutations
# ----------------------------------------------------------------------------------------------------------------
def first_k_indices(labels: np.ndarray, K: int, classes: Optional[Sequence[int]] = None,
                    offset: int = 0) -> np.ndarray:
    """Indices of the first K images of each class, in original file order (Appendix C, "first K images").

    `offset` skips the first `offset` images of each class (used to carve a validation split beyond the
    training images). Raises ValueError if a class has fewer than offset + K images.
    """
    labels = np.asarray(labels)
    if classes is None:
        classes = np.unique(labels)
    if K <= 0:
        raise ValueError(f"K must be a positive number of images per class, got K={K}")
    picked = []
    for c in classes:
        idx = np.flatnonzero(labels == c)
        if len(idx) < offset + K:
            raise ValueError(
                f"K={K} (offset {offset}) is more than the {len(idx)} training images of class {c} "
                f"available in this data; choose K <= {len(idx) - offset}"
            )
        picked.append(idx[offset: offset + K])
    return np.sort(np.concatenate(picked))


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


# ----------------------------------------------------------------------------------------------------------------
# Experiences, streams, benchmarks
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Experience:
    """The data of one task. `x` is float32 (N, ...); `y` are class labels in the task's head (0..C-1).

    For Permuted MNIST the test images are shared by all tasks and `perm` holds the task's pixel
    permutation, applied when `inputs()` is called (this saves n_tasks copies of the 10 000 test images).
    """

    task_id: int
    x: torch.Tensor
    y: torch.Tensor
    perm: Optional[torch.Tensor] = None
    classes: Optional[list[int]] = None

    def inputs(self) -> torch.Tensor:
        if self.perm is None:
            return self.x
        return self.x[:, self.perm]

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class Benchmark:
    name: str
    K: int
    n_tasks: int
    n_classes: int  # per task (= per head)
    multi_head: bool
    input_shape: tuple
    train_stream: list[Experience]
    test_stream: list[Experience]
    info: dict = field(default_factory=dict)


BENCHMARKS = ("pmnist", "cifar100", "cub")


def _to_float(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)


def mnist_source(K: int, source: str = "auto", need_per_class: Optional[int] = None) -> tuple[dict, str]:
    """Pick the MNIST source: the embedded subset when it holds enough images per class, else the raw files."""
    need = need_per_class if need_per_class is not None else K
    if source not in ("auto", "embedded", "raw"):
        raise ValueError(f"unknown data source {source!r}; use auto, embedded or raw")
    if source == "embedded" or (source == "auto" and need <= EMBEDDED_MNIST_PER_CLASS):
        if need > EMBEDDED_MNIST_PER_CLASS:
            raise ValueError(
                f"K={K} needs {need} training images per class but the embedded subset holds "
                f"{EMBEDDED_MNIST_PER_CLASS}; use the raw files (--data raw). {FETCH_HINT}"
            )
        return load_mnist_embedded(), "embedded"
    try:
        return load_mnist_raw(), "raw"
    except MissingDataError as e:
        raise MissingDataError(f"K={K} needs more than the embedded {EMBEDDED_MNIST_PER_CLASS} images per "
                               f"class, so the raw MNIST files are needed: {e}") from None


def permuted_mnist(K: int, n_tasks: int = 20, seed: int = 0, source: str = "auto",
                   split: str = "test", val_offset: int = 400, val_per_class: int = 100) -> Benchmark:
    """The Permuted MNIST benchmark: n_tasks permutations, single head, 10 classes (Appendix C).

    Training data of every task: the first K training images of each class (original file order), permuted.
    split="test": every task is evaluated on the 10 000 official test images under its permutation.
    split="val": evaluation on training images [val_offset, val_offset + val_per_class) of each class, which are
    never used for training when K <= val_offset (used to choose beta/gamma without touching the test set).
    """
    if split not in ("test", "val"):
        raise ValueError(f"split must be 'test' or 'val', got {split!r}")
    if K <= 0:
        raise ValueError(f"K must be a positive number of images per class, got K={K}")
    if split == "val" and K > val_offset:
        raise ValueError(f"validation images start at {val_offset} per class; K={K} would overlap them")
    need = val_offset + val_per_class if split == "val" else K
    d, used = mnist_source(K, source, need)
    tr = first_k_indices(d["y_train"], K)
    x_tr, y_tr = _to_float(d["x_train"][tr]), torch.from_numpy(d["y_train"][tr].astype(np.int64))
    if split == "test":
        x_te, y_te = _to_float(d["x_test"]), torch.from_numpy(d["y_test"].astype(np.int64))
    else:
        va = first_k_indices(d["y_train"], val_per_class, offset=val_offset)
        x_te, y_te = _to_float(d["x_train"][va]), torch.from_numpy(d["y_train"][va].astype(np.int64))
    perms = torch.from_numpy(make_permutations(n_tasks, seed))
    train = [Experience(t, x_tr[:, perms[t]].contiguous(), y_tr) for t in range(n_tasks)]
    test = [Experience(t, x_te, y_te, perm=perms[t]) for t in range(n_tasks)]
    return Benchmark("pmnist", K, n_tasks, 10, False, (784,), train, test,
                     info={"source": used, "split": split, "permutation_seed": seed,
                           "task1_identity": True, "n_train_per_task": len(y_tr), "n_test_per_task": len(y_te)})


def make_benchmark(name: str, K: int, seed: int = 0, n_tasks: Optional[int] = None, source: str = "auto",
                   split: str = "test") -> Benchmark:
    """Build a benchmark by name. Errors name the valid choices and the command that fetches missing data."""
    if name == "pmnist":
        return permuted_mnist(K, n_tasks or 20, seed=seed, source=source, split=split)
    if name in ("cifar100", "cub"):
        raise NotImplementedError(f"benchmark {name!r} is not available yet in this version of metacl-lite")
    raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
