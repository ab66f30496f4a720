"""Data: MNIST idx files, the embedded low-shot subset, first-K sampling and the three benchmarks' streams.

Vocabulary (borrowed from Avalanche): a *benchmark* has a *train stream* and a *test stream*; each stream is a
list of *experiences*, one per task. Paper references: "Datasets" section ("we sample the first K images from each
class") and Appendix C (dataset statistics). What the paper fixes about each benchmark (tasks, classes per task,
heads, input shape, validation images) is read from `specs.SPECS`.

Good data is never replaced by worse: files are verified (md5 / sha256) before use, and a fetched file or folder is
verified before it is moved into place. Every data error is a `DataError` (a `UserError`) whose message names the
command that fixes it; `check_data` runs the same checks without loading images, before any compute.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import struct
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from .errors import UsageError, UserError
from .specs import BENCHMARKS, SPECS, BenchmarkSpec, get_spec  # noqa: F401 (BENCHMARKS is re-exported)

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent

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

FETCH_HINT = (
    "Fetch the official files with `python data_scripts/fetch.py mnist` (online), or copy them from a local folder "
    "with `python data_scripts/fetch.py mnist --from DIR` (e.g. --from ../shared/data/mnist/raw); a corrupted file "
    "is replaced."
)


class DataError(UserError, RuntimeError):
    """Missing or corrupted data; the message says which command fixes it."""


class MissingDataError(DataError, FileNotFoundError):
    pass


class ChecksumError(DataError, ValueError):
    pass


# ----------------------------------------------------------------------------------------------------------------
# Where data lives, checksums, fetching MNIST
# ----------------------------------------------------------------------------------------------------------------
def copy_file(src: Path, dst: Path) -> None:
    """Copy `src` to `dst` through a temporary file in `dst`'s folder (atomic at the destination), with the
    permissions of a new file under the current umask (not the temporary file's 0600)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algo).hexdigest()


def verify_file(path: Path, md5: str, fix: str = FETCH_HINT) -> None:
    """Raise MissingDataError / ChecksumError, followed by `fix` (how to get the right file), unless `path` exists
    with this md5."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"{path.name} not found in {path.parent}. {fix}")
    got = file_digest(path, "md5")
    if got != md5:
        raise ChecksumError(f"{path} is not the official file (md5 {got}, expected {md5}). {fix}")


def fetch_mnist(dest: Optional[Path] = None, source_dir: Optional[Path] = None, quiet: bool = False) -> Path:
    """Place the four official MNIST files in `dest` (default: mnist_raw_dir()), md5-verified.

    With `source_dir`, copy them from that local folder (offline); otherwise download them from torchvision's
    official mirrors with `download_url` (which checks the md5). A file already present with the right md5 is kept;
    any other is replaced, atomically, by a verified file only, so a failure never leaves a worse file than before.
    """
    dest = Path(dest) if dest is not None else mnist_raw_dir()
    for name, md5 in MNIST_FILES.items():
        target = dest / name
        if target.is_file() and file_digest(target) == md5:
            done = "ok"
        elif source_dir is not None:
            src = Path(source_dir) / name
            verify_file(src, md5, fix=f"The copy in {source_dir} cannot be used; give --from a folder holding the "
                                      f"four official files, or download them with `python data_scripts/fetch.py "
                                      f"mnist`.")
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
                    f"from a local folder: `python data_scripts/fetch.py mnist --from DIR`.")


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
        verify_file(d / name, md5)
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
# Low-shot sampling and permutations
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
    permutation: `inputs()` returns a permuted copy, and the evaluation (`training.evaluate_tasks`) makes none: it
    permutes the first layer's weights instead. (The training images are permuted once, when the benchmark is built.)
    """

    task_id: int
    x: torch.Tensor
    y: torch.Tensor
    perm: Optional[torch.Tensor] = None
    classes: Optional[list[int]] = None

    def inputs(self) -> torch.Tensor:
        if self.perm is None:
            return self.x
        return torch.index_select(self.x, 1, self.perm)  # = x[:, perm], a few times faster

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


def _check_request(spec: BenchmarkSpec, K: int, split: str, n_tasks: Optional[int] = None) -> int:
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


def _benchmark(spec: BenchmarkSpec, K: int, train: list, test: list, info: dict) -> Benchmark:
    return Benchmark(spec.name, K, len(train), spec.classes_per_task, spec.multi_head, spec.input_shape, train, test,
                     info=info)


def _to_float(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)


def _mnist_kind(K: int, source: str, need: int) -> str:
    """'embedded' or 'raw': the embedded subset when asked for, or (auto) when it holds `need` images per class."""
    if source not in MNIST_SOURCES:
        raise UsageError(f"unknown data source {source!r}; use {', '.join(MNIST_SOURCES)}")
    if source == "raw" or (source == "auto" and need > EMBEDDED_MNIST_PER_CLASS):
        return "raw"
    if need > EMBEDDED_MNIST_PER_CLASS:
        raise UsageError(f"K={K} needs {need} training images per class but the embedded subset holds "
                         f"{EMBEDDED_MNIST_PER_CLASS}; use the raw files (--data raw). {FETCH_HINT}")
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


def permuted_mnist(K: int, n_tasks: Optional[int] = None, seed: int = 0, source: str = "auto",
                   split: str = "test") -> Benchmark:
    """The Permuted MNIST benchmark: n_tasks permutations (default `SPECS["pmnist"].n_tasks`), single head
    (Appendix C).

    Training data of every task: the first K training images of each class (original file order), permuted.
    split="test": every task is evaluated on the 10 000 official test images under its permutation.
    split="val": evaluation on training images [val_offset, val_offset + val_per_class) of each class (the spec's
    values), which are never used for training when K <= val_offset (used to choose beta/gamma without touching the
    test set).
    """
    spec = SPECS["pmnist"]
    n_tasks = spec.n_tasks if n_tasks is None else n_tasks
    need = _check_request(spec, K, split, n_tasks)
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
    return _benchmark(spec, K, train, test,
                      info={"source": used, "split": split, "permutation_seed": seed, "task1_identity": True,
                            "n_train_per_task": len(y_tr), "n_test_per_task": len(y_te)})


# ----------------------------------------------------------------------------------------------------------------
# Split CIFAR-100 (Table 2, Appendix D): multi-head, tasks of consecutive classes
# ----------------------------------------------------------------------------------------------------------------
CIFAR100_FOLDER = "cifar-100-python"  # torchvision's CIFAR100.base_folder
#: The files of cifar-100-python/ (the names in torchvision's CIFAR100.train_list, test_list and meta, which also
#: hold their md5); their presence is checked without importing torchvision.
CIFAR100_FILES = ("train", "test", "meta")
CIFAR100_TRAIN_PER_CLASS = 500  # Appendix C: 500 training images per class
CIFAR_FETCH_HINT = ("Fetch it with `python data_scripts/fetch.py cifar100` (online), or from a local copy with "
                    "`python data_scripts/fetch.py cifar100 --from PATH` (the official cifar-100-python.tar.gz or the "
                    "folder holding cifar-100-python/).")
#: Per-channel mean and std of the CIFAR-100 training images (inputs are normalised with them).
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)


def cifar100_root(root: Optional[Path] = None) -> Path:
    """The folder that holds cifar-100-python/ (torchvision's `root`)."""
    return Path(root or data_root()) / "cifar100"


def _cifar100_present(folder: Path, label: object = None) -> None:
    missing = [f for f in CIFAR100_FILES if not (folder / f).is_file()]
    if missing:
        raise MissingDataError(f"CIFAR-100 in {label or folder}: missing {', '.join(missing)}. {CIFAR_FETCH_HINT}")


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
                            f"mismatch). {CIFAR_FETCH_HINT}")


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


def _normalise(x: torch.Tensor, mean, std) -> torch.Tensor:
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


def _multi_head_stream(x_tr, y_tr, x_te, y_te, K: int, tasks: list[list[int]], to_tensor, split: str,
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


def split_cifar100(K: int, n_tasks: Optional[int] = None, root: Optional[Path] = None,
                   split: str = "test") -> Benchmark:
    """Split CIFAR-100: task t = the t-th block of `classes_per_task` classes in label order, multi-head, the first K
    training images of each class in file order, all test images of each class (Appendix C). Inputs are normalised
    per channel. split="val" evaluates on training images [val_offset, val_offset + val_per_class) of each class
    instead (for choosing beta/gamma). Defaults and limits: `SPECS["cifar100"]`."""
    spec = SPECS["cifar100"]
    n_tasks = spec.n_tasks if n_tasks is None else n_tasks
    _check_request(spec, K, split, n_tasks)
    d = load_cifar100(root)
    tasks = split_classes(n_tasks, spec.classes_per_task)

    def to_tensor(x, idx):
        return _normalise(torch.from_numpy(np.ascontiguousarray(x[idx].transpose(0, 3, 1, 2))),
                          CIFAR100_MEAN, CIFAR100_STD)

    train, test = _multi_head_stream(d["x_train"], d["y_train"], d["x_test"], d["y_test"], K, tasks, to_tensor,
                                     split, spec)
    return _benchmark(spec, K, train, test,
                      info={"source": str(cifar100_root(root)), "tasks": [[d["classes"][c] for c in t] for t in tasks],
                            "split": split, "n_train_per_task": len(train[0]), "n_test_per_task": len(test[0])})


# ----------------------------------------------------------------------------------------------------------------
# Split CUB-200-2011 (Table 3): multi-head, 224x224, ImageNet preprocessing
# ----------------------------------------------------------------------------------------------------------------
CUB_ARCHIVE = ("CUB_200_2011.tgz", "97eceeb196236b17998738112f37df78")
CUB_URL = "https://data.caltech.edu/records/65de6-vzc39/files/CUB_200_2011.tgz"
CUB_FOLDER = "CUB_200_2011"
CUB_INDEX_FILES = ("images.txt", "image_class_labels.txt", "train_test_split.txt")
CUB_FETCH_HINT = ("Fetch it with `python data_scripts/fetch.py cub` (online), or from a local copy with "
                  "`python data_scripts/fetch.py cub --from PATH` (the official CUB_200_2011.tgz or the folder holding "
                  "CUB_200_2011/).")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def cub_root(root: Optional[Path] = None) -> Path:
    """The folder holding CUB_200_2011/ (images.txt, image_class_labels.txt, train_test_split.txt, images/)."""
    return Path(root or data_root()) / "cub"


def _read_pairs(path: Path, label: object) -> dict[int, str]:
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split(maxsplit=1)
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].isdigit():
            raise DataError(f"CUB-200-2011 in {label}: line {n} of {path.name} is {line!r}, not '<image id> <value>'. "
                            f"{CUB_FETCH_HINT}")
        out[int(parts[0])] = parts[1].strip()
    return out


def _cub_index(base: Path, label: object = None) -> dict[str, np.ndarray]:
    label = label or base
    missing = [n for n in CUB_INDEX_FILES if not (base / n).is_file()]
    if missing:
        raise MissingDataError(f"CUB-200-2011 in {label}: missing {', '.join(missing)}. {CUB_FETCH_HINT}")
    images, labels, split = (_read_pairs(base / n, label) for n in CUB_INDEX_FILES)
    if not images.keys() == labels.keys() == split.keys():
        raise DataError(f"CUB-200-2011 in {label}: {', '.join(CUB_INDEX_FILES)} list different image ids. "
                        f"{CUB_FETCH_HINT}")
    ids = sorted(images)
    return {"ids": np.array(ids), "paths": np.array([images[i] for i in ids]),
            "labels": np.array([int(labels[i]) - 1 for i in ids]), "is_train": np.array([split[i] == "1" for i in ids])}


def read_cub_index(root: Optional[Path] = None) -> dict[str, np.ndarray]:
    """The official split files: image id order, relative paths, class labels (0-based) and is-train flags."""
    return _cub_index(cub_root(root) / CUB_FOLDER)


def check_cub(base: Path, label: object = None) -> None:
    """A complete CUB_200_2011/ folder: the split files read back (`read_cub_index`'s checks) and every image they
    list present under images/. `label` names the folder in messages (default: `base`)."""
    paths = _cub_index(base, label)["paths"]
    missing = [p for p in paths if not (base / "images" / p).is_file()]
    if missing:
        raise MissingDataError(f"CUB-200-2011 in {label or base}: {len(missing)} of the {len(paths)} images listed in "
                               f"images.txt are missing (first: images/{missing[0]}). {CUB_FETCH_HINT}")


def cub_preprocess(path: Path) -> torch.Tensor:
    """The standard ImageNet evaluation preprocessing: resize the short side to 256, centre-crop 224, as uint8 CHW
    (normalisation with the ImageNet mean/std happens in `Experience.inputs`)."""
    from PIL import Image
    from torchvision.transforms import functional as TF

    with Image.open(path) as im:
        im = TF.center_crop(TF.resize(im.convert("RGB"), 256), 224)
        return torch.from_numpy(np.asarray(im, dtype=np.uint8).transpose(2, 0, 1).copy())


@dataclass
class NormalisedExperience(Experience):
    """An experience stored as uint8 images and normalised on access (CUB: 224x224 images would take 4x the memory
    as float32)."""

    mean: tuple = IMAGENET_MEAN
    std: tuple = IMAGENET_STD

    def inputs(self) -> torch.Tensor:
        return _normalise(self.x, self.mean, self.std)


def split_cub(K: int, n_tasks: Optional[int] = None, root: Optional[Path] = None,
              split: str = "test") -> Benchmark:
    """Split CUB-200: task t = the t-th block of `classes_per_task` classes (classes.txt order), multi-head, the
    first K training images of each class in images.txt order (the official train/test split), all test images of
    each class. split="val" evaluates on training images [val_offset, val_offset + val_per_class) of each class
    instead (every class has enough). Defaults and limits: `SPECS["cub"]`."""
    spec = SPECS["cub"]
    n_tasks = spec.n_tasks if n_tasks is None else n_tasks
    _check_request(spec, K, split, n_tasks)
    idx = read_cub_index(root)
    base = cub_root(root) / CUB_FOLDER / "images"
    tasks = split_classes(n_tasks, spec.classes_per_task)
    tr_mask, te_mask = idx["is_train"], ~idx["is_train"]

    def load_images(paths, sel):
        missing = [paths[i] for i in sel if not (base / paths[i]).exists()]
        if missing:
            raise MissingDataError(f"CUB image {base / missing[0]} not found ({len(missing)} missing). {CUB_FETCH_HINT}")
        return torch.stack([cub_preprocess(base / paths[i]) for i in sel])

    train, test = _multi_head_stream(idx["paths"][tr_mask], idx["labels"][tr_mask], idx["paths"][te_mask],
                                     idx["labels"][te_mask], K, tasks, load_images, split, spec,
                                     experience=NormalisedExperience)
    return _benchmark(spec, K, train, test,
                      info={"source": str(cub_root(root)), "tasks": tasks, "split": split,
                            "n_train_per_task": len(train[0]), "n_test_per_task": len(test[0])})


# ----------------------------------------------------------------------------------------------------------------
# Fetching CIFAR-100 and CUB: verify in a temporary folder, then swap
# ----------------------------------------------------------------------------------------------------------------
def place_dataset(archive: tuple[str, str], url: str, root: Path, folder: str, check: Callable[[Path, object], None],
                  hint: str, source: Optional[Path] = None, quiet: bool = False) -> Path:
    """Put a dataset's official content at `root/folder` without ever losing what is there.

    The new copy is made in a temporary folder inside `root`: source=None downloads `url` with torchvision's
    `download_url` (md5-checked; kept as `root/<archive name>` so that a retry does not download it again);
    source=an archive is md5-checked; either archive is then extracted. source=a folder holding `folder` (or
    `folder` itself) is copied. The copy is then checked with `check(path, label)` (the loader's integrity checks).
    Only then is it swapped in: the old folder renamed aside, the new one renamed in, the old one removed. Any
    failure before the swap (a bad archive, a wrong md5, a missing folder, a failing check, an error mid-copy)
    leaves the old folder as it was.
    """
    name, md5 = archive
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    target = root / folder
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{folder}.") as tmp:
        staging, aside = Path(tmp) / "new", Path(tmp) / "old"
        if source is not None and Path(source).is_dir():
            origin = Path(source) / folder if (Path(source) / folder).is_dir() else Path(source)
            if origin.name != folder:
                raise MissingDataError(f"{source} holds neither {folder}/ nor {name}. {hint}")
            shutil.copytree(origin, staging / folder)
        else:
            if source is None:
                from torchvision.datasets.utils import download_url

                origin = root / name
                try:
                    download_url(url, root, name, md5)
                except (OSError, RuntimeError) as e:  # unreachable / md5 mismatch
                    raise DataError(f"could not download {url} ({e}). If you are offline, use a local copy. "
                                    f"{hint}") from None
            else:
                origin = Path(source)
                verify_file(origin, md5, fix=hint)
            with tarfile.open(origin) as t:
                t.extractall(staging, filter="data")
        try:
            check(staging / folder, origin)
        except DataError as e:
            raise type(e)(f"{e} ({target} was left as it was)") from None
        if target.exists():
            os.replace(target, aside)
        try:
            os.replace(staging / folder, target)
        except BaseException:
            if aside.exists():
                os.replace(aside, target)
            raise
    if not quiet:
        print(f"placed {target}")
    return target


def fetch_cifar100(source: Optional[Path] = None, root: Optional[Path] = None, quiet: bool = False) -> Path:
    """CIFAR-100 (python version, torchvision's `CIFAR100.url` / `filename` / `tgz_md5`) into cifar100_root(),
    verified by `check_cifar100` before it replaces anything."""
    from torchvision.datasets import CIFAR100

    place_dataset((CIFAR100.filename, CIFAR100.tgz_md5), CIFAR100.url, cifar100_root(root), CIFAR100_FOLDER,
                  check_cifar100, CIFAR_FETCH_HINT, source, quiet)
    return cifar100_root(root)


def fetch_cub(source: Optional[Path] = None, root: Optional[Path] = None, quiet: bool = False) -> Path:
    """CUB-200-2011 into cub_root(), verified by `check_cub` before it replaces anything."""
    place_dataset(CUB_ARCHIVE, CUB_URL, cub_root(root), CUB_FOLDER, check_cub, CUB_FETCH_HINT, source, quiet)
    return cub_root(root)


# ----------------------------------------------------------------------------------------------------------------
# By name
# ----------------------------------------------------------------------------------------------------------------
LOADERS: dict[str, Callable[..., Benchmark]] = {"permuted_mnist": permuted_mnist, "split_cifar100": split_cifar100,
                                                "split_cub": split_cub}


def check_data(name: str, K: int, source: str = "auto", split: str = "test") -> None:
    """Fail fast, before any compute, with the error that building benchmark `name` at this K would raise, without
    loading images: UsageError for a bad K / split / source (the message gives the largest valid K), MissingDataError
    or ChecksumError naming the command that fixes it. MNIST files are checksum-verified; for CIFAR-100 its files
    and for CUB its split files must be present (their md5 / images are checked when the benchmark is built).
    `source` (auto / embedded / raw) picks the MNIST files; the other benchmarks have one source."""
    spec = get_spec(name)
    need = _check_request(spec, K, split)
    if source not in MNIST_SOURCES:
        raise UsageError(f"unknown data source {source!r}; use {', '.join(MNIST_SOURCES)}")
    if source != "auto" and spec.loader != "permuted_mnist":
        raise UsageError(f"--data {source} picks the MNIST files; {name} has one source (its folder under "
                         f"$METACL_LITE_DATA): leave --data out")
    if spec.loader == "permuted_mnist":
        if _mnist_kind(K, source, need) == "embedded":
            verify_embedded()  # it holds EMBEDDED_MNIST_PER_CLASS >= need images of every class
            return
        try:
            labels = _read_idx(verify_mnist_raw() / "train-labels-idx1-ubyte.gz")
        except MissingDataError as e:
            raise _raw_needed(K, need, e) from None
    elif spec.loader == "split_cifar100":
        _cifar100_present(cifar100_root() / CIFAR100_FOLDER)
        if need > CIFAR100_TRAIN_PER_CLASS:
            raise UsageError(f"K={K} is more than the {CIFAR100_TRAIN_PER_CLASS} training images of each CIFAR-100 "
                             f"class; choose K <= {CIFAR100_TRAIN_PER_CLASS}")
        return
    else:
        idx = read_cub_index()
        labels = idx["labels"][idx["is_train"]]
    if split == "val":
        first_k_indices(labels, spec.val_per_class, offset=spec.val_offset)
    else:
        first_k_indices(labels, K)


def make_benchmark(name: str, K: int, seed: int = 0, n_tasks: Optional[int] = None, source: str = "auto",
                   split: str = "test") -> Benchmark:
    """Build a benchmark by name through its specification's loader (`SPECS[name].loader`), after `check_data`
    (so missing data is reported before anything heavy is loaded). Errors name the valid choices and the command
    that fetches missing data.

    `seed` draws the permutations of Permuted MNIST and `source` picks its MNIST files; the class splits of
    CIFAR-100 and CUB are fixed.
    """
    spec = get_spec(name)
    check_data(name, K, source, split)
    options = {"seed": seed, "source": source} if spec.loader == "permuted_mnist" else {}
    return LOADERS[spec.loader](K, n_tasks, split=split, **options)
