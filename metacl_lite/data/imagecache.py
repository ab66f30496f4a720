"""Decode and resize a dataset's images once, into a checksummed cache of uint8 tensors.

A Split CUB-200 run reads every test image (5 794) and the first K training images of each class. Decoding and
resizing those JPEGs anew for every unit costs more than the unit's training on a GPU, so the images are
preprocessed once, in the dataset's own order, into one uint8 array of shape (N, 3, H, W) in a `.npy` file
(CUB at 224 x 224: 11 788 images, 1.8 GB), with a manifest beside it (`.json`):

- the preprocessing it applied (`preprocess`, a name that changes whenever the preprocessing does),
- the source images it was made from (count and a sha256 over their relative paths, sizes and modification times:
  a re-fetched or edited dataset makes a new cache, never reuses a stale one),
- the array's shape and the sha256 of the array file.

The file name carries a hash of the preprocessing and the sources, so a cache is only ever read for the images it
was made from. It is built through a temporary file that is checked and then renamed into place (two workers that
build it at once: the second waits on a lock and reads the first one's), and checked against its sha256 the first time a process reads it. A cache
that fails its check is derived data: it is rebuilt from the images (said on stderr), nothing else is touched.
Where the cache lives: `<data root>/cache/<dataset>/` (`datafiles.data_root`).
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..progress import progress_enabled
from .datafiles import DataError, data_root, file_digest, new_file_mode

#: Paths of caches already checked against their sha256 in this process.
_VERIFIED: set[str] = set()


def cache_folder(dataset: str) -> Path:
    return data_root() / "cache" / dataset


def sources_digest(base: Path, paths: Sequence[str]) -> str:
    """sha256 over the images' relative paths, sizes and modification times (in the given order)."""
    h = hashlib.sha256()
    for p in paths:
        st = (base / p).stat()
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def cache_paths(dataset: str, preprocess: str, digest: str) -> tuple[Path, Path]:
    key = hashlib.sha256(f"{preprocess}\0{digest}".encode()).hexdigest()[:16]
    folder = cache_folder(dataset)
    return folder / f"{dataset}-{preprocess}-{key}.npy", folder / f"{dataset}-{preprocess}-{key}.json"


def _build(array_path: Path, manifest_path: Path, base: Path, paths: Sequence[str], decode: Callable[[Path], torch.Tensor],
           preprocess: str, digest: str, progress: bool) -> None:
    """Decode every image into a temporary array file, checksum it, then rename the array and its manifest into
    place (the manifest last: an array without its manifest is never read)."""
    array_path.parent.mkdir(parents=True, exist_ok=True)
    first = decode(base / paths[0]).numpy()
    shape = (len(paths), *first.shape)
    fd, tmp = tempfile.mkstemp(dir=array_path.parent, prefix=f".{array_path.name}.", suffix=".part")
    os.close(fd)
    try:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=shape)
        out[0] = first
        it = range(1, len(paths))
        if progress:
            from tqdm.auto import tqdm
            it = tqdm(it, desc=f"decoding {len(paths)} images once into {array_path.name}", unit="img")
        for i in it:
            out[i] = decode(base / paths[i]).numpy()
        out.flush()
        del out
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        manifest = {"preprocess": preprocess, "n_images": len(paths), "sources_sha256": digest,
                    "shape": list(shape), "dtype": "uint8", "sha256": file_digest(Path(tmp), "sha256")}
        os.chmod(tmp, new_file_mode())  # readable as any new file is, not mkstemp's 0600
        os.replace(tmp, array_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fd, mtmp = tempfile.mkstemp(dir=array_path.parent, prefix=f".{manifest_path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1)
        os.chmod(mtmp, new_file_mode())
        os.replace(mtmp, manifest_path)
    except BaseException:
        Path(mtmp).unlink(missing_ok=True)
        raise


def _valid(array_path: Path, manifest_path: Path, preprocess: str, digest: str, n: int) -> Optional[str]:
    """None when the cache is the one asked for and its array matches its sha256; else why not."""
    try:
        m = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        return f"its manifest cannot be read ({e})"
    if not isinstance(m, dict):
        return f"its manifest is {type(m).__name__} JSON, not an object"
    if (m.get("preprocess"), m.get("sources_sha256"), m.get("n_images")) != (preprocess, digest, n):
        return "its manifest describes other images or another preprocessing"
    if str(array_path) not in _VERIFIED:
        if not array_path.is_file() or file_digest(array_path, "sha256") != m.get("sha256"):
            return "its array does not match the sha256 in its manifest"
        _VERIFIED.add(str(array_path))
    return None


def cached_images(dataset: str, base: Path, paths: Sequence[str], decode: Callable[[Path], torch.Tensor],
                  preprocess: str, progress: Optional[bool] = None) -> np.ndarray:
    """Every image of `paths` (relative to `base`), decoded by `decode` (a uint8 CHW tensor), as one read-only uint8
    array (N, C, H, W) memory-mapped from the cache; built on first use, with a progress bar unless `progress` is
    False or METACL_LITE_PROGRESS switches bars off (`progress.progress_enabled`). `preprocess` names what
    `decode` does."""
    progress = progress_enabled(progress)
    digest = sources_digest(base, paths)
    array_path, manifest_path = cache_paths(dataset, preprocess, digest)
    folder = array_path.parent
    fix = "make it writable, or set METACL_LITE_DATA to a data folder you can write"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / ".lock", "a+")
    except OSError as e:
        if manifest_path.exists() and _valid(array_path, manifest_path, preprocess, digest, len(paths)) is None:
            return np.load(array_path, mmap_mode="r")  # a complete cache in a read-only folder: read it as it is
        raise DataError(f"cannot write the image cache in {folder} ({e.strerror or e}); {fix}") from None
    # one builder at a time: workers that start together wait for the first one's cache instead of each decoding
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if manifest_path.exists():
            why = _valid(array_path, manifest_path, preprocess, digest, len(paths))
            if why is None:
                return np.load(array_path, mmap_mode="r")
            print(f"image cache {array_path}: {why}; rebuilding it from the images", file=sys.stderr)
        try:
            _build(array_path, manifest_path, base, paths, decode, preprocess, digest, progress)
        except OSError as e:  # a full disk, a folder made read-only meanwhile: nothing half-written is left (_build)
            if e.errno == errno.ENOSPC:
                raise DataError(f"cannot write the image cache {array_path} (the disk is full): {e.strerror}; free "
                                "some space, or set METACL_LITE_DATA to a folder on another disk") from None
            raise DataError(f"cannot write the image cache {array_path}: {e.strerror or e}; {fix}") from None
        _VERIFIED.add(str(array_path))
        return np.load(array_path, mmap_mode="r")


def select(images: np.ndarray, index: Sequence[int]) -> torch.Tensor:
    """The images at `index` (in that order) as a uint8 tensor in memory."""
    return torch.from_numpy(np.ascontiguousarray(images[np.asarray(index, dtype=np.int64)]))
