"""Writing files so that nothing already computed is ever lost: atomic replacement and an exclusive lock.

* `write_text` / `write_bytes` / `write_json`: write a temporary file beside the target and rename it over the target,
  so a kill never leaves a half-written file.
* `locked(path)`: an exclusive advisory lock (``<path>.lock``) held while a process reads, merges and writes `path`; a
  second process that wants the same file waits, saying on stderr which process holds it (or, with ``wait=False``,
  gets `LockedError` at once; with ``timeout``, after that many seconds).
* `check_writable(path)`: fail before any compute when an output path is a directory or its folder is not writable.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from ..errors import FileFormatError, LockedError, OutputError
from ..paths import tracked


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
    """Write `data` to a temporary file in the same folder, fsync it, and rename it over `path` (over the file a
    symbolic link names: the link stays, its target gets the data)."""
    path = Path(os.path.realpath(path))
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
    """Parse a JSON file; a missing file, something that is not a regular file (a folder, /dev/null), invalid JSON or
    a key given twice raises a UserError that names the file and a safe fix: point the command elsewhere when the file
    is not a `what` at all (README.md given as --out), else restore it (from git, where it is a file of this checkout)
    or move it aside. keep=True (hparams.json: it holds every tuned value) never suggests moving it away."""
    path = Path(path)
    a_what = what if what.startswith(("a ", "an ")) else f"a {what}"
    bare = a_what.split(" ", 1)[1]  # "results file (...)", after "a damaged"
    if path.is_dir():
        raise FileFormatError(f"{path} is a directory, not {a_what}")
    if path.exists() and not path.is_file():
        raise FileFormatError(f"{path} is not a regular file (a device, a pipe or a socket), so not {a_what}; give "
                              f"the path of one")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileFormatError(f"{what} {path} not found") from None
    except UnicodeDecodeError:
        raise FileFormatError(f"{path} is not a text file, so not {a_what}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except DuplicateKey as e:
        raise FileFormatError(f"{path} holds the key {e.key!r} twice in one object (an edited {bare}: JSON readers "
                              f"disagree on which value wins); keep one of the two, or "
                              f"{_restore(path, keep)}") from None
    except json.JSONDecodeError as e:
        aside = "" if keep else ", or move it aside to start a new one"
        problem = "it is empty" if not text.strip() else f"{e.msg} at line {e.lineno}, column {e.colno}"
        raise FileFormatError(f"{path} is not valid JSON ({problem}), so not {a_what}: if it is another file, give "
                              f"the command another path; if it is a damaged {bare}, {_restore(path, keep)}{aside}"
                              + (" (do not delete it: it holds every tuned value)" if keep else "")) from None


def _restore(path: Path, keep: bool) -> str:
    """How to get a damaged JSON file back (asked of git only once a file is found damaged: `tracked` runs git)."""
    return (f"restore it with `git checkout -- {path}`" if keep or tracked(path)
            else "restore it from your own copy (a backup)")


class DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list) -> dict:
    """json's object hook: a dict, refusing a key given twice (json.loads would silently keep the last value)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


def check_writable(path: Path, fix: str = "choose another output path") -> Path:
    """Raise OutputError now (before any compute) unless `path` can be written as a file; `fix` ends the message (what
    the user can do: by default another output path, for a file that has no option naming it something else)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path} is a directory; give a file name" + (f" such as {path / path.name}" if path.suffix
                                                                       else " in it") + f", or {fix}")
    lock = path.with_name(path.name + ".lock")
    if len(lock.name.encode()) > 255:  # the longest name a Linux file system takes
        raise OutputError(f"{path.name[:30]}... is too long a file name ({len(path.name.encode())} bytes; with its "
                          f"'.lock' at most 255); {fix}")
    if lock.exists() and not lock.is_file():  # `locked` could not open it after the first unit trained
        what = "a directory" if lock.is_dir() else "not a file"
        raise OutputError(f"cannot lock {path}: its lock file {lock} is {what}; remove it (no process holds a lock "
                          f"through a folder) or {fix}")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"cannot create {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OutputError(f"cannot write {path}: permission denied; {fix}")
    why = cannot_create_in(parent)
    if why:
        raise OutputError(f"cannot write {path}: nothing can be created in {parent} ({why}); {fix}")
    return path


def cannot_create_in(folder: Path) -> Optional[str]:
    """Why no file can be created in `folder` (the system's words), or None when one can: a file is made and removed.
    os.access says yes to root everywhere, even where nothing can be created (/proc, a read-only mount)."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".metacl-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


#: How often a process waiting for a lock says it still waits (seconds).
WAIT_NOTE_EVERY = 60.0


@contextlib.contextmanager
def locked(path: Path, wait: bool = True, timeout: Optional[float] = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (through the file `<path>.lock`, which names the holder's process id and
    command while it holds it) for the duration of the block.

    A process that finds the lock held says on stderr which process holds it and waits (every WAIT_NOTE_EVERY s
    again); wait=False raises LockedError at once, `timeout` after that many seconds. A lock path that is not a file
    (a folder) or cannot be created raises OutputError. A symbolic link is locked as the file it names."""
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        what = "a directory" if lock.is_dir() else f"not writable ({e.strerror})"
        raise OutputError(f"cannot lock {path}: its lock file {lock} is {what}; remove it (no process holds a lock "
                          f"through a folder) or write elsewhere") from None
    try:
        _acquire(fd, path, lock, wait, timeout)
        _note_holder(fd)
        yield
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, lock: Path, wait: bool, timeout: Optional[float]) -> None:
    busy = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
    t0 = time.monotonic()
    said = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in busy:
                raise
        else:
            if said is not None:
                print(f"metacl-lite: {path} is free again after {time.monotonic() - t0:.0f} s; going on",
                      file=sys.stderr, flush=True)
            return
        waited = time.monotonic() - t0
        if not wait or (timeout is not None and waited >= timeout):
            raise LockedError(f"{path} is being written by another process ({holder(lock)}; lock {lock})"
                              + (f"; waited {waited:.0f} s" if wait else "")
                              + "; wait for it to finish, or write elsewhere")
        if said is None or waited - said >= WAIT_NOTE_EVERY:
            print(f"metacl-lite: waiting for {path}: another process ({holder(lock)}) is writing it (lock {lock})"
                  + (f"; still waiting after {waited:.0f} s" if said is not None else "")
                  + "; Ctrl-C stops this command, keeping everything it saved", file=sys.stderr, flush=True)
            said = waited
        time.sleep(0.2)


def _note_holder(fd: int) -> None:
    """Write this process's id and command into the lock file it holds, for the processes that wait for it."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {' '.join(sys.argv)[:300]}\n".encode("utf-8", "replace"), 0)
    except OSError:
        pass  # only words for the waiting processes: the lock itself is held


def holder(lock: Path) -> str:
    """Who holds `lock`, as the holder wrote it ("pid 123: python -m metacl_lite run ...")."""
    try:
        text = Path(lock).read_text(errors="replace").strip()
    except OSError:
        text = ""
    pid, _, cmd = text.partition(" ")
    if not pid.isdigit():
        return "it did not say which"
    return f"pid {pid}" + (f": {cmd}" if cmd else "")
