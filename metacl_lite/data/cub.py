"""Split CUB-200-2011 (Table 3): the official archive (md5-checked, fetched or copied and verified before it replaces
anything), its split files, the ImageNet preprocessing at 224x224, and its multi-head stream of tasks of consecutive
classes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .datafiles import DataError, MissingDataError, data_root, fetch_hint, place_dataset
from .imagecache import cached_images, select
from .specs import SPECS, BenchmarkSpec
from .streams import Benchmark, Experience, check_request, multi_head_stream, normalise, split_classes

CUB_ARCHIVE = ("CUB_200_2011.tgz", "97eceeb196236b17998738112f37df78")
CUB_URL = "https://data.caltech.edu/records/65de6-vzc39/files/CUB_200_2011.tgz"
CUB_FOLDER = "CUB_200_2011"
CUB_INDEX_FILES = ("images.txt", "image_class_labels.txt", "train_test_split.txt")
def cub_fetch_hint() -> str:
    return fetch_hint("cub", CUB_ARCHIVE[0], CUB_FOLDER)
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
                            f"{cub_fetch_hint()}")
        out[int(parts[0])] = parts[1].strip()
    return out


def _cub_index(base: Path, label: object = None) -> dict[str, np.ndarray]:
    label = label or base
    missing = [n for n in CUB_INDEX_FILES if not (base / n).is_file()]
    if missing:
        raise MissingDataError(f"CUB-200-2011 in {label}: missing {', '.join(missing)}. {cub_fetch_hint()}")
    images, labels, split = (_read_pairs(base / n, label) for n in CUB_INDEX_FILES)
    if not images.keys() == labels.keys() == split.keys():
        raise DataError(f"CUB-200-2011 in {label}: {', '.join(CUB_INDEX_FILES)} list different image ids. "
                        f"{cub_fetch_hint()}")
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
                               f"images.txt are missing (first: images/{missing[0]}). {cub_fetch_hint()}")


#: The name of `cub_preprocess` in the image cache: change it whenever the preprocessing changes.
CUB_PREPROCESS = "resize256-crop224"


def cub_preprocess(path: Path) -> torch.Tensor:
    """The standard ImageNet evaluation preprocessing: resize the short side to 256, centre-crop 224, as uint8 CHW
    (normalisation with the ImageNet mean/std happens in `Experience.inputs`).

    The paper does not say how it prepares CUB's images. This is the transform torchvision's ImageNet ResNet-18
    weights were evaluated with, so the pretrained features see images as they were trained to; A-GEM instead
    resizes to 224 x 224 without a crop (changing the birds' aspect ratio) and subtracts the ImageNet mean only."""
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

    def inputs(self, rows: Optional[slice] = None) -> torch.Tensor:
        return normalise(self.x if rows is None else self.x[rows], self.mean, self.std)

    def stored(self, idx: torch.Tensor):
        """The rows' uint8 images, normalised as each batch is drawn (`Experience.stored`)."""
        return self.x.index_select(0, idx), partial(normalise, mean=self.mean, std=self.std)


def split_cub(K: int, n_tasks: Optional[int] = None, root: Optional[Path] = None,
              split: str = "test", spec: Optional[BenchmarkSpec] = None, progress: Optional[bool] = None) -> Benchmark:
    """Split CUB-200: task t = the t-th block of `classes_per_task` classes (classes.txt order), multi-head, the
    first K training images of each class in images.txt order (the official train/test split), all test images of
    each class. split="val" evaluates on training images [val_offset, val_offset + val_per_class) of each class
    instead (every class has enough). Defaults and limits: `spec` (default `SPECS["cub"]`). The images are decoded
    and resized once into a checksummed cache (`imagecache.cached_images`; `progress`: a bar while it is built)."""
    spec = SPECS["cub"] if spec is None else spec
    n_tasks = spec.n_tasks if n_tasks is None else n_tasks
    check_request(spec, K, split, n_tasks)
    idx = read_cub_index(root)
    base = cub_root(root) / CUB_FOLDER / "images"
    tasks = split_classes(n_tasks, spec.classes_per_task)
    tr_mask, te_mask = idx["is_train"], ~idx["is_train"]

    cache = {}

    def load_images(paths, sel):
        """The selected images, from the decode-once cache of every image in images.txt order (`imagecache`)."""
        if not cache:
            missing = [p for p in idx["paths"] if not (base / p).exists()]
            if missing:
                raise MissingDataError(f"CUB image {base / missing[0]} not found ({len(missing)} missing). "
                                       f"{cub_fetch_hint()}")
            cache["images"] = cached_images("cub", base, idx["paths"], cub_preprocess, CUB_PREPROCESS, progress)
            cache["position"] = {p: i for i, p in enumerate(idx["paths"])}
        return select(cache["images"], [cache["position"][paths[i]] for i in sel])

    train, test = multi_head_stream(idx["paths"][tr_mask], idx["labels"][tr_mask], idx["paths"][te_mask],
                                    idx["labels"][te_mask], K, tasks, load_images, split, spec,
                                    experience=NormalisedExperience)
    return Benchmark.from_spec(spec, K, train, test,
                               info={"source": str(cub_root(root)), "tasks": tasks, "split": split,
                                     "n_train_per_task": len(train[0]), "n_test_per_task": len(test[0])})


def fetch_cub(source: Optional[Path] = None, root: Optional[Path] = None, quiet: bool = False) -> Path:
    """CUB-200-2011 into cub_root(), verified by `check_cub` before it replaces anything."""
    place_dataset(CUB_ARCHIVE, CUB_URL, cub_root(root), CUB_FOLDER, check_cub, cub_fetch_hint(), source, quiet)
    return cub_root(root)
