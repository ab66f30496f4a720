"""Writing files so that nothing already computed is ever lost: atomic replacement and an exclusive lock.

* `write_text` / `write_bytes` / `write_json`: write a temporary file beside the target and rename it over the target,
  so a kill never leaves a half-written file.
* `locked(path)`: an exclusive advisory lock (``<path>.lock``) held while a process reads, merges and writes `path`; a
  second process that wants the same file waits (or, with ``wait=False``, gets `LockedError` at once).
* `check_writable(path)`: fail before any compute when an output path is a directory or its folder is not writable.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import FileFormatError, LockedError, OutputError


def jsonable(x: Any) -> Any:
    """Plain JSON types for numpy arrays/scalars, tuples and NaN (written as null)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (float, np.floating)):
        return None if math.isnan(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file in the same folder, fsync it, and rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OutputError(f"cannot write {path}: the disk is full ({e.strerror}); {path.name} is kept as it was "
                              f"before this write: free some space and run the same command again") from None
        raise


def _mode(path: Path) -> int:
    """The replaced file's permissions, or those of a new file under the current umask (mkstemp makes 0600)."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    """JSON (indent 1, NaN as null) written atomically."""
    write_text(path, json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n")


def read_json(path: Path, what: str = "JSON file", keep: bool = False) -> Any:
    """Parse a JSON file; a missing file or invalid JSON raises a UserError that names the file and a safe fix: point
    the command elsewhere when the file is not a `what` at all (README.md given as --out), else restore it from git
    or move it aside. keep=True (hparams.json: it holds every tuned value) never suggests moving it away."""
    path = Path(path)
    if path.is_dir():
        raise FileFormatError(f"{path} is a directory, not a {what}")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileFormatError(f"{what} {path} not found") from None
    except UnicodeDecodeError:
        raise FileFormatError(f"{path} is not a text {what}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        aside = "" if keep else ", or move it aside to start a new one"
        raise FileFormatError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}), so not a "
                              f"{what}: if it is another file, give the command another path; if it is a damaged "
                              f"{what}, restore it with `git checkout -- {path}`{aside}"
                              + (" (do not delete it: it holds every tuned value)" if keep else "")) from None


def check_writable(path: Path, fix: str = "choose another output path") -> Path:
    """Raise OutputError now (before any compute) unless `path` can be written as a file; `fix` ends the message (what
    the user can do: by default another output path, for a file that has no option naming it something else)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path} is a directory; give a file name such as {path / 'results.json'}")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"cannot create {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OutputError(f"cannot write {path}: permission denied; {fix}")
    try:  # os.access says yes to root everywhere, even where nothing can be created (/proc, a read-only mount)
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".metacl-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"cannot write {path}: nothing can be created in {parent} ({e.strerror}); {fix}") from None
    return path


@contextlib.contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `path` (through the file `<path>.lock`) for the duration of the block.

    wait=False raises LockedError at once when another process holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise LockedError(f"{path} is being written by another process (lock {lock}); wait for it to "
                                  f"finish, or write elsewhere") from None
            raise
        yield
    finally:
        os.close(fd)
