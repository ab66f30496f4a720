"""The results store: one JSON file per run of a grid (a results file, a tuning file), written after every finished
unit so that nothing computed is ever lost.

* Every write happens under an exclusive lock and merges: the file is read again, this process's new unit is added,
  and the whole is written atomically. Two processes filling the same file therefore both keep their units.
* A file made with another configuration is refused (`ConfigMismatch`), unless the caller starts over (`force`).
* A run that computes nothing changes nothing; each invocation that contributed units is recorded in
  ``provenance.invocations`` with the units it computed, and ``provenance.command`` regenerates the whole file.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from .atomic import check_writable, jsonable, locked, read_json, write_json
from ..errors import ConfigMismatch, FileFormatError
from .provenance import invocation, now

SCHEMA = 2

#: What each kind of file looks like; `kind_of` recognises files written before the "kind" field existed (schema 1).
KINDS = {"results": "a results file (python -m metacl_lite run)",
         "tuning": "a tuning file (python -m metacl_lite tune)",
         "bench": "a speed benchmark file (python -m metacl_lite bench)"}


#: Fields of the latest contributing invocation repeated at the top of `provenance`, for readers.
LATEST = ("git_commit", "git_dirty", "packages", "device", "python", "platform")


def kind_of(doc: Any) -> Optional[str]:
    """'results', 'tuning', 'bench', or None for anything else."""
    if not isinstance(doc, dict):
        return None
    if doc.get("kind") in KINDS:
        return doc["kind"]
    if isinstance(doc.get("config"), dict) and isinstance(doc.get("runs"), dict):
        return "results"
    if "grid" in doc and "chosen" in doc:
        return "tuning"
    if "per_method" in doc:
        return "bench"
    return None


def load(path: Path, kind: str) -> dict:
    """Read a file that must be of `kind`; anything else raises FileFormatError naming the file and what it is."""
    doc = read_json(path, KINDS[kind])
    got = kind_of(doc)
    if got != kind:
        what = KINDS[got] if got else ("an empty JSON object" if doc == {} else f"JSON of another shape "
                                       f"({type(doc).__name__})")
        raise FileFormatError(f"{path} is {what}, not {KINDS[kind]}")
    return upgrade(doc, kind)


def upgrade(doc: dict, kind: str) -> dict:
    """Files of schema 1 (one provenance block per file) read as schema 2: that block becomes the one invocation."""
    prov = doc.get("provenance")
    if isinstance(prov, dict) and "invocations" not in prov:
        inv = {k: v for k, v in prov.items() if k not in ("command", "wall_s_total")}
        inv["wall_s"] = prov.get("wall_s_total")
        inv["units"] = "all (schema 1)"
        doc["provenance"] = {**{k: v for k, v in prov.items() if k in LATEST}, "command": prov.get("command"),
                             "wall_s_total": prov.get("wall_s_total"), "invocations": [inv]}
    return doc


class UnitFile:
    """A file of independent units, written after each one under a lock.

    sections: the names of the dicts that hold units (e.g. runs, references, oracle).
    compatible(old_doc) -> list of differences (empty when `old_doc` may be continued).
    merge(doc) -> None: fold this process's header (config, ...) into a document read from disk.
    finalize(doc) -> None: recompute derived fields (summary, chosen values, the regenerating command).
    where: the device the units are trained on (`device.resolve`), recorded in this invocation's provenance.
    """

    def __init__(self, path: Path, kind: str, header: dict, sections: Iterable[str],
                 compatible: Callable[[dict], list], merge: Callable[[dict], None],
                 finalize: Callable[[dict], None], where: str = "cpu"):
        self.path = check_writable(Path(path))
        self.kind, self.header, self.sections = kind, header, tuple(sections)
        self.compatible, self.merge, self.finalize = compatible, merge, finalize
        self.doc: dict = {}
        self.fresh = False  # start over (force): the first write replaces what is there
        self.inv = {"id": uuid.uuid4().hex[:12], **invocation(where), "units": [], "wall_s": 0.0}

    def _read(self) -> Optional[dict]:
        if not self.path.exists():
            return None
        doc = load(self.path, self.kind)
        diff = self.compatible(doc)
        if diff:
            raise ConfigMismatch(f"{self.path} was made with a different configuration ({', '.join(diff)})")
        return doc

    def open(self, force: bool = False) -> dict:
        """Load what is there (checking that it may be continued), or start a new document."""
        old = None if force else self._read()
        self.fresh = force and self.path.exists()
        self.doc = self._merged(old)
        return self.doc

    def _merged(self, old: Optional[dict]) -> dict:
        doc = old if old is not None else {}
        doc["schema"], doc["kind"] = SCHEMA, self.kind
        for s in self.sections:
            doc.setdefault(s, {})
        self.merge(doc)
        return doc

    def discard(self, select: Callable[[str, str], bool], forget: Callable[[dict], None], why: str) -> list[str]:
        """Remove the finished units for which select(section, key) holds, and call forget(doc) to drop what the
        header says of them, before `open`. The compatibility check applies to what is left (what is discarded is what
        would fail it); nothing is removed when the rest fails it too. provenance.discarded records the units, when,
        and why. Returns the removed units."""
        if not self.path.exists():
            return []
        with locked(self.path):
            doc = load(self.path, self.kind)
            gone = [f"{s}/{k}" for s in self.sections for k in list(doc.get(s, {})) if select(s, k)]
            for unit in gone:
                s, _, k = unit.partition("/")
                del doc[s][k]
            forget(doc)
            diff = self.compatible(doc)
            if diff:  # the rest of the file cannot be continued either: discard nothing
                raise ConfigMismatch(f"{self.path} was made with a different configuration ({', '.join(diff)})")
            if gone:
                prov = doc.setdefault("provenance", {"invocations": []})
                prov.setdefault("discarded", []).append({"units": gone, "when": now(), "why": why,
                                                         "by": self.inv["id"]})
            write_json(self.path, doc)
        return gone

    def done(self, section: str) -> set:
        return set(self.doc.get(section, {}))

    def add(self, section: str, key: str, value: dict, info: Optional[dict] = None) -> None:
        """Save one finished unit: under the lock, read the file again, add the unit, write it atomically."""
        with locked(self.path):
            old = None if self.fresh else self._read()
            self.fresh = False
            doc = self._merged(old)
            doc[section][key] = jsonable(value)
            if info:
                for k, v in info.items():
                    doc.setdefault(k, jsonable(v))
            self.inv["units"].append(f"{section}/{key}")
            self.inv["wall_s"] += float(value.get("wall_s", 0.0))
            self.inv["finished"] = now()
            prov = doc.setdefault("provenance", {"invocations": []})
            invs = [i for i in prov.get("invocations", []) if i.get("id") != self.inv["id"]]
            prov["invocations"] = invs + [dict(self.inv)]
            prov["wall_s_total"] = sum(float(i.get("wall_s") or 0.0) for i in prov["invocations"])
            for k in LATEST:  # the latest invocation's, for readers
                prov[k] = self.inv[k]
            self.finalize(doc)
            write_json(self.path, doc)
            self.doc = doc



def load_results(path: Path) -> dict:
    """A results file (python -m metacl_lite run); anything else raises FileFormatError naming the file."""
    return load(path, "results")
