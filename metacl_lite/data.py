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
    "Fetch it with `python data_scripts/fetch.py mnist` (online), or copy a local copy with "
    "`python data_scripts/fetch.py mnist --from DIR` (e.g. --from ../shared/data/mnist/raw)."
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
                    f"local folder: python data_scripts/fetch.py mnist --from DIR"
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


# ----------------------------------------------------------------------------------------------------------------
# Split CIFAR-100 (Table 2, Appendix D): 10 tasks x 10 classes, multi-head
# ----------------------------------------------------------------------------------------------------------------
CIFAR100_ARCHIVE = ("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85")
CIFAR100_URL = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
CIFAR_FETCH_HINT = ("Fetch it with `python data_scripts/fetch.py cifar100` (online), or from a local copy with "
                    "`python data_scripts/fetch.py cifar100 --from PATH` (the folder holding cifar-100-python/ or the "
                    ".tar.gz).")
#: Per-channel mean and std of the CIFAR-100 training images (inputs are normalised with them).
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)


def cifar100_root(root: Optional[Path] = None) -> Path:
    """The folder that holds cifar-100-python/ (torchvision's `root`)."""
    return Path(root or data_root()) / "cifar100"


def load_cifar100(root: Optional[Path] = None) -> dict[str, np.ndarray]:
    """CIFAR-100 through torchvision's `CIFAR100` (which checks the md5 of `train`, `test` and `meta`).

    Returns uint8 images (N, 32, 32, 3) and fine labels, in the official file order.
    """
    from torchvision.datasets import CIFAR100

    r = cifar100_root(root)
    probe = CIFAR100.__new__(CIFAR100)
    probe.root = str(r)
    if not probe._check_integrity():
        missing = [f for f, _ in CIFAR100.train_list + CIFAR100.test_list
                   if not (r / CIFAR100.base_folder / f).exists()]
        what = f"missing {', '.join(missing)}" if missing else "an md5 mismatch (corrupted files)"
        raise (MissingDataError if missing else ChecksumError)(
            f"CIFAR-100 in {r / CIFAR100.base_folder}: {what}. {CIFAR_FETCH_HINT}")
    tr, te = CIFAR100(str(r), train=True), CIFAR100(str(r), train=False)
    return {"x_train": tr.data, "y_train": np.asarray(tr.targets), "x_test": te.data, "y_test": np.asarray(te.targets),
            "classes": list(tr.classes)}


def _normalise(x: torch.Tensor, mean, std) -> torch.Tensor:
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return (x.float() / 255.0 - m) / s


def split_classes(n_tasks: int, per_task: int) -> list[list[int]]:
    """Task t gets classes t*per_task .. (t+1)*per_task - 1 (the datasets' own label order)."""
    return [list(range(t * per_task, (t + 1) * per_task)) for t in range(n_tasks)]


def _eval_indices(y_tr, y_te, cls, K: int, split: str, val_offset: int, val_n: int):
    """Evaluation images of one task: all its test images, or (split="val") training images
    [val_offset, val_offset + val_n) of each class, which training never uses when K <= val_offset."""
    if split == "val":
        if K > val_offset:
            raise ValueError(f"validation images start at {val_offset} per class; K={K} would overlap them")
        return first_k_indices(y_tr, val_n, classes=cls, offset=val_offset), True
    if split != "test":
        raise ValueError(f"split must be 'test' or 'val', got {split!r}")
    return np.sort(np.flatnonzero(np.isin(y_te, cls))), False


def _multi_head_stream(x_tr, y_tr, x_te, y_te, K: int, tasks: list[list[int]], to_tensor, split: str = "test",
                       val_offset: int = 0, val_n: int = 0, experience=None) -> tuple[list, list]:
    """Per task: the first K training images of its classes and its evaluation images, labels remapped to the
    task's head (0..C-1). `to_tensor(x, idx)` turns the selected rows of `x` into the inputs; `experience` is the
    Experience class to build (default Experience)."""
    experience = experience or Experience
    train, test = [], []
    for t, cls in enumerate(tasks):
        tr = first_k_indices(y_tr, K, classes=cls)
        te, from_train = _eval_indices(y_tr, y_te, cls, K, split, val_offset, val_n)
        ex, ey = (x_tr, y_tr) if from_train else (x_te, y_te)
        remap = {c: i for i, c in enumerate(cls)}
        ytr = torch.tensor([remap[int(c)] for c in y_tr[tr]], dtype=torch.long)
        yte = torch.tensor([remap[int(c)] for c in ey[te]], dtype=torch.long)
        train.append(experience(t, to_tensor(x_tr, tr), ytr, classes=cls))
        test.append(experience(t, to_tensor(ex, te), yte, classes=cls))
    return train, test


def split_cifar100(K: int, n_tasks: int = 10, root: Optional[Path] = None, split: str = "test") -> Benchmark:
    """Split CIFAR-100: task t = classes 10t..10t+9 (label order), multi-head, the first K training images of each
    class in file order, all 100 test images of each class (Appendix C). Inputs are normalised per channel.
    split="val" evaluates on training images 400-499 of each class instead (for choosing beta/gamma)."""
    if K <= 0:
        raise ValueError(f"K must be a positive number of images per class, got K={K}")
    if not 1 <= n_tasks <= 10:
        raise ValueError(f"Split CIFAR-100 has 10 tasks of 10 classes; n_tasks={n_tasks} is out of range")
    d = load_cifar100(root)
    tasks = split_classes(n_tasks, 10)

    def to_tensor(x, idx):
        return _normalise(torch.from_numpy(np.ascontiguousarray(x[idx].transpose(0, 3, 1, 2))),
                          CIFAR100_MEAN, CIFAR100_STD)

    train, test = _multi_head_stream(d["x_train"], d["y_train"], d["x_test"], d["y_test"], K, tasks, to_tensor,
                                     split, val_offset=400, val_n=100)
    return Benchmark("cifar100", K, n_tasks, 10, True, (3, 32, 32), train, test,
                     info={"source": str(cifar100_root(root)), "tasks": [[d["classes"][c] for c in t] for t in tasks],
                           "split": split, "n_train_per_task": len(train[0]), "n_test_per_task": len(test[0])})


# ----------------------------------------------------------------------------------------------------------------
# Split CUB-200-2011 (Table 3): 10 tasks x 20 classes, multi-head, 224x224, ImageNet preprocessing
# ----------------------------------------------------------------------------------------------------------------
CUB_ARCHIVE = ("CUB_200_2011.tgz", "97eceeb196236b17998738112f37df78")
CUB_URL = "https://data.caltech.edu/records/65de6-vzc39/files/CUB_200_2011.tgz"
CUB_FETCH_HINT = ("Fetch it with `python data_scripts/fetch.py cub` (online), or from a local copy with "
                  "`python data_scripts/fetch.py cub --from PATH` (CUB_200_2011.tgz or the extracted folder).")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def cub_root(root: Optional[Path] = None) -> Path:
    """The folder holding CUB_200_2011/ (images.txt, image_class_labels.txt, train_test_split.txt, images/)."""
    return Path(root or data_root()) / "cub"


def _read_pairs(path: Path) -> dict[int, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            k, v = line.split(maxsplit=1)
            out[int(k)] = v.strip()
    return out


def read_cub_index(root: Optional[Path] = None) -> dict[str, np.ndarray]:
    """The official split files: image id order, relative paths, class labels (0-based) and is-train flags."""
    base = cub_root(root) / "CUB_200_2011"
    need = ["images.txt", "image_class_labels.txt", "train_test_split.txt"]
    missing = [n for n in need if not (base / n).exists()]
    if missing:
        raise MissingDataError(f"CUB-200-2011 in {base}: missing {', '.join(missing)}. {CUB_FETCH_HINT}")
    images = _read_pairs(base / "images.txt")
    labels = _read_pairs(base / "image_class_labels.txt")
    split = _read_pairs(base / "train_test_split.txt")
    ids = sorted(images)
    return {"ids": np.array(ids), "paths": np.array([images[i] for i in ids]),
            "labels": np.array([int(labels[i]) - 1 for i in ids]), "is_train": np.array([split[i] == "1" for i in ids])}


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


def split_cub(K: int = 10, n_tasks: int = 10, root: Optional[Path] = None, split: str = "test") -> Benchmark:
    """Split CUB-200: task t = classes 20t..20t+19 (classes.txt order), multi-head, the first K training images of
    each class in images.txt order (the official train/test split), all test images of each class.
    split="val" evaluates on training images 20-28 of each class instead (every class has at least 29)."""
    if K <= 0:
        raise ValueError(f"K must be a positive number of images per class, got K={K}")
    if not 1 <= n_tasks <= 10:
        raise ValueError(f"Split CUB-200 has 10 tasks of 20 classes; n_tasks={n_tasks} is out of range")
    idx = read_cub_index(root)
    base = cub_root(root) / "CUB_200_2011" / "images"
    tasks = split_classes(n_tasks, 20)
    tr_mask, te_mask = idx["is_train"], ~idx["is_train"]

    def load_images(paths, sel):
        missing = [paths[i] for i in sel if not (base / paths[i]).exists()]
        if missing:
            raise MissingDataError(f"CUB image {base / missing[0]} not found ({len(missing)} missing). {CUB_FETCH_HINT}")
        return torch.stack([cub_preprocess(base / paths[i]) for i in sel])

    train, test = _multi_head_stream(idx["paths"][tr_mask], idx["labels"][tr_mask], idx["paths"][te_mask],
                                     idx["labels"][te_mask], K, tasks, load_images, split, val_offset=20, val_n=9,
                                     experience=NormalisedExperience)
    return Benchmark("cub", K, n_tasks, 20, True, (3, 224, 224), train, test,
                     info={"source": str(cub_root(root)), "tasks": tasks, "split": split, "n_train_per_task": len(train[0]),
                           "n_test_per_task": len(test[0])})


def place_dataset(archive: tuple[str, str], url: str, root: Path, folder: str, source: Optional[Path] = None,
                  quiet: bool = False) -> Path:
    """Put a dataset's official archive content under `root/folder`.

    source=None: download `url` and check its md5. source=an archive file: check its md5 and extract it.
    source=a folder holding `folder` (already extracted): copy it. Nothing half-done is left at the target: the
    archive is extracted into a temporary folder and moved into place.
    """
    import tarfile
    import tempfile

    name, md5 = archive
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if source is not None and Path(source).is_dir():
        src = Path(source) / folder if (Path(source) / folder).is_dir() else Path(source)
        if src.name != folder:
            raise MissingDataError(f"{source} holds neither {folder}/ nor {name}")
        tmp = Path(tempfile.mkdtemp(dir=root))
        shutil.copytree(src, tmp / folder)
    else:
        arc = Path(source) if source is not None else root / name
        if source is None and not (arc.exists() and file_digest(arc) == md5):
            part = arc.with_name(name + ".part")
            try:
                with urllib.request.urlopen(url, timeout=120) as r, open(part, "wb") as f:
                    shutil.copyfileobj(r, f)
            except Exception as e:
                part.unlink(missing_ok=True)
                raise DataError(f"could not download {url} ({e}); if you are offline, pass --from PATH") from None
            os.replace(part, arc)
        verify_file(arc, md5, hint=f"{arc} is not the official {name}.")
        tmp = Path(tempfile.mkdtemp(dir=root))
        with tarfile.open(arc) as t:
            t.extractall(tmp, filter="data")
        if not (tmp / folder).is_dir():
            shutil.rmtree(tmp)
            raise DataError(f"{arc} does not contain {folder}/")
    target = root / folder
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp / folder, target)
    shutil.rmtree(tmp)
    if not quiet:
        print(f"placed {target}")
    return target


def fetch_cifar100(source: Optional[Path] = None, root: Optional[Path] = None, quiet: bool = False) -> Path:
    """CIFAR-100 (python version) into cifar100_root(); then verified through torchvision's md5 checks."""
    place_dataset(CIFAR100_ARCHIVE, CIFAR100_URL, cifar100_root(root), "cifar-100-python", source, quiet)
    load_cifar100(root)  # raises ChecksumError if the files are not the official ones
    return cifar100_root(root)


def fetch_cub(source: Optional[Path] = None, root: Optional[Path] = None, quiet: bool = False) -> Path:
    """CUB-200-2011 into cub_root(); then the official split files are read back as a check."""
    place_dataset(CUB_ARCHIVE, CUB_URL, cub_root(root), "CUB_200_2011", source, quiet)
    read_cub_index(root)
    return cub_root(root)


def make_benchmark(name: str, K: int, seed: int = 0, n_tasks: Optional[int] = None, source: str = "auto",
                   split: str = "test") -> Benchmark:
    """Build a benchmark by name. Errors name the valid choices and the command that fetches missing data.

    `seed` sets the permutations of Permuted MNIST; the class splits of CIFAR-100 and CUB are fixed.
    """
    if name == "pmnist":
        return permuted_mnist(K, n_tasks or 20, seed=seed, source=source, split=split)
    if name == "cifar100":
        return split_cifar100(K, n_tasks or 10, split=split)
    if name == "cub":
        return split_cub(K, n_tasks or 10, split=split)
    raise ValueError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
