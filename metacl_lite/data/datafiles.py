"""Where data lives and how it is checked: the data root, the data errors, checksums, atomic copies, and putting a
fetched dataset in place (verified in a temporary folder, then swapped in).

Good data is never replaced by worse: files are verified (md5 / sha256) before use, and a fetched file or folder is
verified before it is moved into place. Every data error is a `DataError` (a `UserError`) whose message names the
command that fixes it. The datasets themselves: `mnist`, `cifar100`, `cub`.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..errors import UserError
from ..paths import IN_CHECKOUT, REPO_ROOT

class DataError(UserError, RuntimeError):
    """Missing or corrupted data; the message says which command fixes it."""


class MissingDataError(DataError, FileNotFoundError):
    pass


class ChecksumError(DataError, ValueError):
    pass


# ----------------------------------------------------------------------------------------------------------------
# Where data lives
# ----------------------------------------------------------------------------------------------------------------
def data_root() -> Path:
    """Root folder for downloaded data: $METACL_LITE_DATA, else `data/` in a source checkout, else ~/.cache."""
    env = os.environ.get("METACL_LITE_DATA")
    if env:
        return check_folder(Path(env).expanduser().resolve(), "METACL_LITE_DATA")
    if IN_CHECKOUT:
        return REPO_ROOT / "data"
    return Path.home() / ".cache" / "metacl-lite"


def check_folder(path: Path, what: str) -> Path:
    """`path`, unless it or the nearest of its parents that exists is not a folder (a DataError naming `what`, e.g.
    the environment variable or option that gave it, before anything is fetched or copied)."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == p.parent)
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == path else f"is inside {existing}, a file"
        raise DataError(f"{what}: {path} {where}, not a folder; give a folder for the data")
    return path


def fetch_hint(dataset: str, archive: str, folder: str) -> str:
    """How to get a dataset that `data_scripts/fetch.py` places from its official archive or its extracted folder
    (`fetch_command`: in an installed package, which has no data_scripts, the package's own fetch function)."""
    return (f"Fetch it with `{fetch_command(dataset)}` (online), or from a local copy with "
            f"`{fetch_command(dataset, 'PATH')}` (the official {archive} or the folder holding {folder}/).")


#: The package's fetch function of each dataset (what data_scripts/fetch.py calls): module, function.
FETCHERS = {"mnist": ("mnist", "fetch_mnist"), "cifar100": ("cifar100", "fetch_cifar100"), "cub": ("cub", "fetch_cub")}


def fetch_command(dataset: str, source: Optional[str] = None) -> str:
    """The command that places `dataset` (from `source`, a local copy, when given): `python data_scripts/fetch.py`
    in a checkout; in an installed package, which does not ship data_scripts, the same function through python -c."""
    from .. import paths

    if paths.IN_CHECKOUT:
        return f"python data_scripts/fetch.py {dataset}" + (f" --from {source}" if source else "")
    module, fn = FETCHERS[dataset]
    arg = "" if source is None else f"source_dir='{source}'" if dataset == "mnist" else f"'{source}'"
    return f'python -c "from metacl_lite.data.{module} import {fn}; {fn}({arg})"'


# ----------------------------------------------------------------------------------------------------------------
# Files: copies, checksums, datasets put in place
# ----------------------------------------------------------------------------------------------------------------
def new_file_mode() -> int:
    """The permissions of a new file under the current umask: what a file written through a temporary one (mkstemp
    makes 0600) is given before it is renamed into place."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def copy_file(src: Path, dst: Path) -> None:
    """Copy `src` to `dst` through a temporary file in `dst`'s folder (atomic at the destination), with the
    permissions of a new file under the current umask (not the temporary file's 0600)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def file_digest(path: Path, algo: str = "md5") -> str:
    """The hex digest of the file `path` (`algo`: "md5", "sha256", ...)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algo).hexdigest()


def verify_file(path: Path, md5: str, fix: str) -> None:
    """Raise MissingDataError / ChecksumError, followed by `fix` (how to get the right file), unless `path` exists
    with this md5."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"{path.name} not found in {path.parent}. {fix}")
    got = file_digest(path, "md5")
    if got != md5:
        raise ChecksumError(f"{path} is not the official file (md5 {got}, expected {md5}). {fix}")


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
