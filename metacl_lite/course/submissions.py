"""The submissions of a class as the grader finds and reads them: the notebooks and otter export zips named or held
by the named folders (each with why it is refused: a symbolic link, a FIFO or other special file, a file outside its
folder), each keyed by its path relative to the grade sheet's folder; a notebook's bytes read without ever blocking
(regular files only, within a size), the one notebook of an otter export zip; and the plain notebook the jail runs
(`plain_notebook`: cells of text, or NotANotebook saying why)."""
from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from pathlib import Path
from typing import Optional, Sequence

from .assignments import AssignmentError

MAX_NOTEBOOK = 64 * 2 ** 20


class Submission(tuple):
    """(key, path, refused): the sheet's key (`submission_key`), the file, and why it is refused (a symbolic link, a
    special file, a file outside its class folder) or None."""

    key = property(lambda self: self[0])
    path = property(lambda self: self[1])
    refused = property(lambda self: self[2])


def submission_key(p: Path, base: Optional[Path] = None) -> str:
    """A submission's row key: its absolute path, relative to `base` (the grade sheet's folder; the working folder
    when not given) when inside it, so `subs/x.ipynb`, `./subs/x.ipynb` and its absolute path are one row, and the
    same class graded from another working folder into the same sheet finds its rows."""
    r = Path(os.path.abspath(p))
    here = Path(os.path.abspath(base)) if base is not None else Path.cwd()
    return str(r.relative_to(here)) if r.is_relative_to(here) else str(r)


def _refusal(p: Path, folder: Optional[Path]) -> Optional[str]:
    if p.is_symlink():
        return "a symbolic link, not graded: hand in the notebook itself"
    if not stat.S_ISREG(p.lstat().st_mode):
        return "not a regular file (a FIFO, socket or device), not graded"
    if folder is not None and not p.resolve().is_relative_to(folder.resolve()):
        return f"outside the class folder {folder}, not graded"
    return None


def find_submissions(paths: Sequence[Path], base: Optional[Path] = None) -> list[Submission]:
    """The notebooks and zips named, or held by the named folders (recursively, checkpoints left out, symbolic links
    inside not followed; a folder named as a link is followed), in order, each with why it is refused (a symbolic
    link, a FIFO or other special file, a file outside its folder) or None; keys relative to `base`."""
    out: list[Submission] = []
    for p in map(Path, paths):
        if p.is_dir() and Path(os.path.abspath(p)) == Path("/"):
            raise AssignmentError(f"{p} is the root of the file system (an empty variable before the slash?): give "
                                  "the class folder")
        if p.is_dir():
            found = []
            for root, dirs, files in os.walk(p, followlinks=False):
                dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")
                found += [Path(root) / f for f in files if Path(f).suffix in (".ipynb", ".zip")]
            if not found:
                raise AssignmentError(f"{p} holds no notebooks (.ipynb) or otter exports (.zip)")
            out += [Submission((submission_key(q, base), q, _refusal(q, p))) for q in sorted(found)]
        elif p.suffix in (".ipynb", ".zip") and (p.exists() or p.is_symlink()):  # a file: a link, a FIFO refused
            out.append(Submission((submission_key(p, base), p, _refusal(p, None))))
        elif p.exists():
            raise AssignmentError(f"{p} is neither a notebook (.ipynb), an otter export (.zip) nor a folder")
        else:
            raise AssignmentError(f"{p} does not exist")
    seen: set[str] = set()
    return [s for s in out if not (s.key in seen or seen.add(s.key))]


def _read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, up to `limit`: opened without blocking (a FIFO put in its place never hangs the
    grader) and refused unless it is a regular file."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise AssignmentError(f"{path} is not a regular file")
        if st.st_size > limit:
            raise AssignmentError(f"{path} is over {limit >> 20} MB")
        return f.read(limit + 1)


def notebook_bytes(path: Path, name: Optional[str] = None) -> bytes:
    """The submitted notebook's bytes: the file, or the one notebook inside an otter export zip (only `.ipynb`
    members are read; links, absolute or `..` paths and everything else in the zip are ignored)."""
    path = Path(path)
    if path.suffix != ".zip":
        return _read_regular(path, MAX_NOTEBOOK)
    try:
        with zipfile.ZipFile(io.BytesIO(_read_regular(path, 4 * MAX_NOTEBOOK))) as z:
            members = [m for m in z.infolist() if m.filename.endswith(".ipynb") and not m.is_dir()
                       and not m.filename.startswith("/") and ".." not in m.filename.split("/")
                       and "__MACOSX" not in m.filename and ".ipynb_checkpoints" not in m.filename
                       and (m.external_attr >> 16) & 0o170000 != 0o120000]
            big = [m.filename for m in members if m.file_size > MAX_NOTEBOOK]
            if big:
                raise AssignmentError(f"{path}: its notebook {big[0]} is over {MAX_NOTEBOOK >> 20} MB")
            if len(members) > 1 and name:
                mine = [m for m in members if f'"assignment_name": "{name}"' in z.read(m).decode("utf-8", "replace")]
                members = mine or members
            if len(members) != 1:
                raise AssignmentError(f"{path} holds {len(members)} notebooks; an otter export holds one")
            return z.read(members[0])
    except zipfile.BadZipFile as e:
        raise AssignmentError(f"{path} is not a zip file ({e})") from None


class NotANotebook(ValueError):
    """A submission whose bytes are not a notebook the jail can run."""


def plain_notebook(raw: bytes) -> dict:
    """The notebook the jail runs: each cell's type and source as text, nothing else of the submitted file (its
    metadata, whatever kernel it names, outputs); NotANotebook, saying why, for bytes that are not a notebook (not
    JSON, nested too deeply, no list of cells, a cell that is not an object or a source that is not text)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise NotANotebook(type(e).__name__) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise NotANotebook("no list of cells")
    cells = []
    for i, c in enumerate(doc["cells"], 1):
        src = c.get("source", "") if isinstance(c, dict) else None
        if isinstance(src, list) and all(isinstance(x, str) for x in src):
            src = "".join(src)
        if not isinstance(src, str) or not isinstance(c.get("cell_type"), str):
            raise NotANotebook(f"cell {i} is not a cell with a type and a text source")
        cells.append({"cell_type": c["cell_type"], "metadata": {}, "source": src,
                      **({"outputs": [], "execution_count": None} if c["cell_type"] == "code" else {})})
    return {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}
