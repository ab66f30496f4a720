"""The results store: one JSON file per run of a grid (a results file, a tuning file), written after every finished
unit so that nothing computed is ever lost.

* Every write happens under an exclusive lock and merges: the file is read again, this process's new unit is added,
  and the whole is written atomically. Two processes filling the same file therefore both keep their units.
* A file made with another configuration is refused (`ConfigMismatch`), unless the caller starts over (`force`).
* A run that computes nothing changes nothing; each invocation that contributed units is recorded in
  ``provenance.invocations`` with the units it computed, and ``provenance.command`` regenerates the whole file.
* Every file is checked when it is read (`load`): a schema this version does not know, or a unit that no report could
  use (a NaN, a string, a missing accuracy matrix), is refused with a `CorruptUnit` naming the unit and how to remove
  it, before any training, so that no new unit is ever trained and then lost because an old one is bad.
"""
from __future__ import annotations

import math
import re
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from .atomic import check_writable, jsonable, locked, read_json, write_json
from ..errors import ConfigMismatch, CorruptUnit, FileFormatError, restore_advice
from ..accel.device import CPU_KERNEL_KEYS
from .provenance import invocation, now, relative_to_repo
from ..keys import RunKey, unit_name
from .summary import summarize
from ..data.specs import SPECS

#: One field in which a file's configuration differs from a run's, in the message that refuses the run.
DIFFERS = "{}: {!r} in the file, {!r} here"

SCHEMA = 2

#: The kinds of file the store reads, by their "kind" field (`schema1_kind` recognises those written before it).
KINDS = {"results": "a results file (python -m metacl_lite run)",
         "tuning": "a tuning file (python -m metacl_lite tune)",
         "bench": "a speed benchmark file (python -m metacl_lite.tools bench)"}


#: Fields of the latest contributing invocation repeated at the top of `provenance`, for readers.
LATEST = ("git_commit", "git_dirty", "packages", "device", "cpu_kernels", "python", "platform")


def kind_of(doc: Any) -> Optional[str]:
    """'results', 'tuning', 'bench' (the file's "kind" field), or None for anything else."""
    return doc["kind"] if isinstance(doc, dict) and doc.get("kind") in KINDS else None


def schema1_kind(doc: Any) -> Optional[str]:
    """The kind of a file written before the "kind" field existed (schema 1), recognised by its shape: what the
    one-time migration rewrote (`MIGRATE`), and what `load` refuses naming it; None for anything else."""
    if not isinstance(doc, dict) or "kind" in doc:
        return None
    if isinstance(doc.get("config"), dict) and isinstance(doc.get("runs"), dict):
        return "results"
    if "grid" in doc and "chosen" in doc:
        return "tuning"
    if "per_method" in doc:
        return "bench"
    return None


#: The one-time migration of a file written before today's format, in metacl-lite up to commit `MIGRATE_COMMIT`
#: (the last with it; no file under results/ needs it any more).
MIGRATE, MIGRATE_COMMIT = "python -m metacl_lite.tools migrate", "82768e1"


def migrate_advice(path: Path, what: str) -> FileFormatError:
    """The refusal of a file in a format before today's: what it lacks, and how to bring it to today's format (the
    migration of metacl-lite at `MIGRATE_COMMIT`, or the command in its provenance)."""
    return FileFormatError(f"{path} was written by an older metacl-lite ({what}): migrate it once with "
                           f"`{MIGRATE} {relative_to_repo(path)}` from metacl-lite at commit {MIGRATE_COMMIT} (the "
                           f"last with it), or regenerate it with the command in its provenance")


def what_is(doc: Any) -> str:
    """What a file's JSON is, as the refusals name it (`KINDS`, another kind it names, or its shape)."""
    got = kind_of(doc) or schema1_kind(doc)
    return (KINDS[got] if got else f"a {doc['kind']!r} file" if isinstance(doc, dict) and "kind" in doc
            else "an empty JSON object" if doc == {} else f"JSON of another shape ({type(doc).__name__})")


def load(path: Path, kind: str, check_units: bool = True) -> dict:
    """Read a file that must be of `kind`; anything else raises FileFormatError naming the file and what it is.

    A schema this version does not read (newer than `SCHEMA`, or not a whole number) is refused, and so (unless
    check_units=False) is a unit no reader could use (`check_file_units`): a CorruptUnit names it and says how to
    remove it."""
    doc = read_json(path, KINDS[kind])
    if schema1_kind(doc) == kind:
        raise migrate_advice(path, "schema 1, without a kind field")
    if kind_of(doc) != kind:
        raise FileFormatError(f"{path} is {what_is(doc)}, not {KINDS[kind]}")
    schema = doc.get("schema", 1)  # files written before the field existed are schema 1
    if isinstance(schema, bool) or schema not in range(1, SCHEMA + 1):
        raise FileFormatError(f"{path} has schema {schema!r}; this version of metacl-lite reads schema {SCHEMA} (older "
                              f"ones once migrated by metacl-lite at commit {MIGRATE_COMMIT}): a file written by a "
                              f"newer version, or an edited one: update metacl-lite, or {restore_advice(path)}")
    prov = doc.get("provenance")  # a bench file has one provenance block by design; the grid's files, invocations
    if kind != "bench" and (schema < SCHEMA or isinstance(prov, dict) and "invocations" not in prov):
        raise migrate_advice(path, f"schema {schema}, one provenance block per file")
    if check_units:
        check_file_units(doc, kind, path)
    return doc


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _percent(a: Any) -> bool:
    """An accuracy: a finite number of percent, 0 to 100."""
    return _finite(a) and 0 <= a <= 100


def _accuracies(v: Any, name: str) -> Optional[str]:
    """Why `v` is not a non-empty list of accuracies in percent (None when it is)."""
    if not isinstance(v, list) or not v:
        return f"{name} is {'missing' if v is None else repr(v) + ', not a list of accuracies'}"
    bad = next((i for i, a in enumerate(v) if not _percent(a)), None)
    return None if bad is None else f"{name}[{bad}] is {v[bad]!r}, not an accuracy in percent (0 to 100)"


def _acc_matrix(m: Any) -> Optional[str]:
    """Why `m` is not a square accuracy matrix with finite numbers on and below the diagonal (None when it is); the
    entries above it are numbers or null (not evaluated)."""
    if not isinstance(m, list) or not m:
        return "acc_matrix is missing" if m is None else f"acc_matrix is {m!r}, not a list of rows"
    n = len(m)
    for i, row in enumerate(m):
        if not isinstance(row, list) or len(row) != n:
            return f"acc_matrix[{i}] is not a row of {n} entries (one per task)"
        for j, a in enumerate(row):
            if not (_percent(a) or (j > i and a is None)):
                return f"acc_matrix[{i}][{j}] is {a!r}, not an accuracy in percent (0 to 100)"
    return None


def _tuning_unit(u: dict) -> Optional[str]:
    if u.get("param") not in ("beta", "gamma") or not isinstance(u.get("method"), str):
        return "its method or param is missing"
    if not _finite(u.get("value")) or u["value"] < 0:
        return f"value is {u.get('value')!r}, not a finite number >= 0"
    if isinstance(u.get("seed"), bool) or not isinstance(u.get("seed"), int):
        return f"seed is {u.get('seed')!r}, not an integer"
    return None if _finite(u.get("val_acc")) else f"val_acc is {u.get('val_acc')!r}, not a finite number"


#: What each section of a file holds, checked unit by unit on reading: a function of the unit -> the problem or None.
UNIT_CHECKS: dict[str, dict[str, Callable[[dict], Optional[str]]]] = {
    "results": {"runs": lambda u: _acc_matrix(u.get("acc_matrix")),
                "references": lambda u: _accuracies(u.get("acc"), "acc"),
                "oracle": lambda u: _accuracies(u.get("acc"), "acc")},
    "tuning": {"units": _tuning_unit},
}


def check_file_units(doc: dict, kind: str, path: Path) -> None:
    """Raise CorruptUnit for the first unit of `doc` that no reader could use (`UNIT_CHECKS`), or, in a results file,
    for a run whose tasks are not as many as its seed's references (its FA could not be computed)."""
    for section, check in UNIT_CHECKS.get(kind, {}).items():
        units = doc.get(section, {})
        if not isinstance(units, dict):
            raise FileFormatError(f"{path}: {section!r} is {type(units).__name__}, not an object of units; "
                                  f"{restore_advice(path)}, or make it again")
        for key, unit in units.items():
            problem = check(unit) if isinstance(unit, dict) else f"it is {unit!r}, not an object"
            if problem:
                raise CorruptUnit(path, section, key, problem)
    if kind == "results":
        for key, run in doc.get("runs", {}).items():
            try:
                seed = str(RunKey.parse(key).seed)
            except ValueError:  # not a run key: no seed whose references it could be compared with
                continue
            ref = doc.get("references", {}).get(seed)
            if ref is not None and len(ref["acc"]) != len(run["acc_matrix"]):
                raise CorruptUnit(path, "runs", key, f"its {len(run['acc_matrix'])} tasks are not the "
                                                     f"{len(ref['acc'])} of references/{seed}")


def check_invocations(doc: dict, path: Path) -> None:
    """The invocations of a file's provenance as the CPU check reads them: a list of objects, each `cpu_kernels` an
    object or null (not recorded; a missing one is a format before today's, refused: `migrate_advice`); anything
    else (a string, a list: an edited file) is a FileFormatError, so the check is never skipped on a file it cannot
    read."""
    prov = doc.get("provenance")
    if prov is None:
        return
    invs = prov.get("invocations", []) if isinstance(prov, dict) else None
    if not isinstance(invs, list):
        raise FileFormatError(f"{path}: provenance.invocations is not a list of invocations; "
                              f"{restore_advice(path)}")
    for i, inv in enumerate(invs):
        if isinstance(inv, dict) and "cpu_kernels" not in inv:
            raise migrate_advice(path, f"provenance.invocations[{i}] without cpu_kernels")
        then = inv.get("cpu_kernels") if isinstance(inv, dict) else None
        if not isinstance(inv, dict) or not (then is None or isinstance(then, dict)):
            what = f"cpu_kernels is {then!r}" if isinstance(inv, dict) else f"it is {inv!r}"
            raise FileFormatError(f"{path}: provenance.invocations[{i}] is corrupt ({what}, not an object), so which "
                                  f"CPU made its units cannot be told; {restore_advice(path)}")


def rounds_otherwise(here_inv: dict, doc: dict, path: Path) -> list[str]:
    """Where the invocation `here_inv` trains on this machine's CPU: how the CPU units already in `doc` were made on
    a CPU that rounds otherwise (torch's version, or a field of `cpu_kernels`: AVX2 and AVX-512 kernels sum in other
    orders), so that one file never mixes numbers that cannot be made equal. Invocations that record no
    `cpu_kernels` (made before they were recorded; a Ray cluster's, whose nodes `unit_machines` counts) are not
    compared: what decided their rounding is unknown; a `cpu_kernels` that is not an object is refused as corrupt
    (`check_invocations`)."""
    check_invocations(doc, path)
    here = here_inv.get("cpu_kernels")
    if here is None or not str(here_inv.get("device", "")).startswith("cpu"):
        return []
    diff: list[str] = []
    for inv in (doc.get("provenance") or {}).get("invocations", []):
        if inv.get("id") == here_inv["id"] or not inv.get("units") or not isinstance(inv.get("cpu_kernels"), dict):
            continue
        diff += rounding_differences(here_inv, inv)
    return list(dict.fromkeys(diff))


def rounding_differences(here: dict, then: dict) -> list[str]:
    """How invocation `then` (an entry of provenance.invocations) rounds otherwise than `here`: torch's version and
    each field of `cpu_kernels` that differ (`DIFFERS` lines, `then`'s value first); [] when all are equal. Both must
    record their `cpu_kernels` as objects: what decided an unrecorded invocation's rounding is unknown."""
    torch_here, torch_then = ((i.get("packages") or {}).get("torch") for i in (here, then))
    k_here, k_then = here["cpu_kernels"], then["cpu_kernels"]
    return ([DIFFERS.format("torch", torch_then, torch_here)] if torch_then != torch_here else []) + [
        DIFFERS.format(f"cpu_kernels.{k}", k_then.get(k), k_here.get(k)) for k in CPU_KERNEL_KEYS
        if k_then.get(k) != k_here.get(k)]


class UnitFile:
    """A file of independent units, written after each one under a lock.

    sections: the names of the dicts that hold units (e.g. runs, references, oracle).
    A kind of file (`files.ResultsFile`, `files.TuningFile`) holds its rules for continuing a file as methods:
    compatible(old_doc) -> list of differences (empty when `old_doc` may be continued); merge(doc) -> None: fold this
    process's header (config, ...) into a document read from disk; finalize(doc) -> None: recompute derived fields
    (summary, chosen values, the regenerating command). A plain UnitFile takes them as functions (default: any file
    may be continued, nothing to merge or derive).
    where: the device the units are trained on (`device.resolve`), recorded in this invocation's provenance
    (`where_text`: its description, when this process cannot see it: `executors.locate`; `threads`: the torch threads
    of each CPU unit, which the description names).
    """

    def __init__(self, path: Path, kind: str, header: dict, sections: Iterable[str],
                 compatible: Optional[Callable[[dict], list]] = None, merge: Optional[Callable[[dict], None]] = None,
                 finalize: Optional[Callable[[dict], None]] = None, where: str = "cpu",
                 where_text: Optional[str] = None, threads: Optional[int] = None):
        self.path = check_writable(Path(path))
        self.kind, self.header, self.sections = kind, header, tuple(sections)
        self._rules = (compatible, merge, finalize)
        self.doc: dict = {}
        self.fresh = False  # start over (force): the first write replaces what is there
        self.rounding: list[str] = []  # how the file's CPU units round otherwise (`open(until_work=True)`)
        self.inv = {"id": uuid.uuid4().hex[:12], **invocation(where, where_text, threads), "units": [], "wall_s": 0.0}

    def compatible(self, old: dict) -> list:
        """The differences that keep `old` (a document read from disk) from being continued by this process."""
        return self._rules[0](old) if self._rules[0] else []

    def merge(self, doc: dict) -> None:
        """Fold this process's header into `doc` (read from disk, or new)."""
        if self._rules[1]:
            self._rules[1](doc)

    def finalize(self, doc: dict) -> None:
        """Recompute the fields of `doc` derived from its units, before it is written."""
        if self._rules[2]:
            self._rules[2](doc)

    def _read(self, rounding: bool = True) -> Optional[dict]:
        """The document on disk, refused where this process may not continue it (`compatible`; with `rounding`, also
        where its CPU units were made on a CPU that rounds otherwise)."""
        if not self.path.exists():
            return None
        doc = load(self.path, self.kind)
        diff = self.compatible(doc) + (self._rounds_otherwise(doc) if rounding else [])
        if diff:
            raise self._mismatch(diff)
        return doc

    def _mismatch(self, diff: list[str]) -> ConfigMismatch:
        return ConfigMismatch(f"{self.path} was made with a different configuration ({', '.join(diff)})")

    def _rounds_otherwise(self, doc: dict) -> list[str]:
        return rounds_otherwise(self.inv, doc, self.path)

    def open(self, force: bool = False, until_work: bool = False) -> dict:
        """Load what is there (checking that it may be continued), or start a new document. `until_work`: a file whose
        CPU units were made on a CPU that rounds otherwise is read, and `refuse_other_rounding` refuses it once the
        caller knows that units remain to train (a finished file is read on any machine, as `make reproduce-memory`
        passes over the files of earlier sessions); `add` refuses it in any case."""
        old = None if force else self._read(rounding=not until_work)
        self.rounding = self._rounds_otherwise(old) if old is not None and until_work else []
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

    def refuse_other_rounding(self) -> None:
        """Before the first unit trains: refuse a file opened `until_work` whose CPU units a CPU that rounds otherwise
        made (`rounds_otherwise`: one file never mixes numbers that cannot be made equal)."""
        if self.rounding:
            raise self._mismatch(self.rounding)

    def discard(self, select: Callable[[str, str], bool], forget: Callable[[dict], None], why: str) -> list[str]:
        """Remove the finished units for which select(section, key) holds, and call forget(doc) to drop what the
        header says of them, before `open`. The compatibility check applies to what is left (what is discarded is what
        would fail it); nothing is removed when the rest fails it too. provenance.discarded records the units, when,
        and why. Returns the removed units."""
        if not self.path.exists():
            return []
        with locked(self.path):
            doc = load(self.path, self.kind, check_units=False)  # a corrupt unit may be among those discarded
            pairs = [(s, k) for s in self.sections for k in list(doc.get(s, {})) if select(s, k)]
            for s, k in pairs:
                del doc[s][k]
            gone = [unit_name(s, k) for s, k in pairs]
            check_file_units(doc, self.kind, self.path)  # what is kept must be usable
            forget(doc)
            diff = self.compatible(doc) + self._rounds_otherwise(doc)
            if diff:  # the rest of the file cannot be continued either: discard nothing
                raise self._mismatch(diff)
            if gone:
                prov = doc.setdefault("provenance", {"invocations": []})
                prov.setdefault("discarded", []).append({"units": gone, "when": now(), "why": why,
                                                         "by": self.inv["id"]})
            write_json(self.path, doc)
        return gone

    def done(self, section: str) -> set:
        return set(self.doc.get(section, {}))

    def note_machine(self, machine: str) -> None:
        """Count the unit about to be saved under the machine it ran on (`unit_machines` of this invocation, written
        with the unit): with Ray the units run on the cluster's nodes, which the invocation's `device` cannot name."""
        counts = self.inv.setdefault("unit_machines", {})
        counts[machine] = counts.get(machine, 0) + 1

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
            self.inv["units"].append(unit_name(section, key))
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



#: What a results file's config must hold for any report to read it.
RESULTS_CONFIG = ("benchmark", "K", "n_tasks", "seeds", "methods")


def load_results(path: Path) -> dict:
    """A results file (python -m metacl_lite run), checked (`load`), with its summary computed again from its
    matrices: the stored one is derived data, and an edited or stale summary must never reach a report. Anything
    else raises FileFormatError naming the file."""
    doc = load(path, "results")
    config = doc.get("config")
    missing = [k for k in RESULTS_CONFIG if k not in config] if isinstance(config, dict) else ["config"]
    missing += [s for s in ("runs", "references", "oracle") if not isinstance(doc.get(s), dict)]
    if missing:
        raise FileFormatError(f"{path} is not a complete results file (no {', '.join(missing)}); make it again with "
                              f"`python -m metacl_lite run`, or {restore_advice(path)}")
    check_config(doc, path)
    doc["summary"] = summarize(doc)
    return doc


#: The names `run` gives a results file (`grid.default_out`): the setting's, or a gamma control's.
SETTING_NAME = re.compile(r"(?P<benchmark>[a-z0-9]+)-K(?P<K>\d+)(?:-control-gamma-[a-z0-9]+)?\.json")


def check_config(doc: dict, path: Path) -> None:
    """A results file's config agrees with its units and its name: as many tasks (`n_tasks`) as every run's matrix
    and every seed's references and oracle hold, and, for a file named as `run` names them (`SETTING_NAME`), the
    benchmark and K of that name. Anything else (an edited config, a renamed file) is a FileFormatError naming the
    file, so that no table reads numbers under another setting's name."""
    cfg = doc["config"]
    n = cfg["n_tasks"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise FileFormatError(f"{path}: config.n_tasks is {n!r}, not a number of tasks; {restore_advice(path)}")
    for section, key, tasks in _task_counts(doc):
        if tasks != n:
            raise FileFormatError(f"{path}: config.n_tasks is {n}, but {section}/{key} holds {tasks} tasks (an edited "
                                  f"config); {restore_advice(path)}, or make it again with `python -m metacl_lite "
                                  f"run`")
    named = SETTING_NAME.fullmatch(Path(path).name)
    if named and named["benchmark"] in SPECS:
        said = (named["benchmark"], int(named["K"]))
        if (cfg["benchmark"], cfg["K"]) != said:
            raise FileFormatError(f"{path}: its name says {said[0]} K={said[1]}, its config {cfg['benchmark']} "
                                  f"K={cfg['K']!r} (an edited config, or a file renamed): {restore_advice(path)}, "
                                  f"or give it the name of its own setting")


def _task_counts(doc: dict):
    """(section, key, how many tasks) of every unit of a results file."""
    for key, run in doc["runs"].items():
        yield "runs", key, len(run["acc_matrix"])
    for section in ("references", "oracle"):
        for key, unit in doc[section].items():
            yield section, key, len(unit["acc"])


def check_any(path: Path) -> Optional[dict]:
    """Read and check a file of results/ as its kind's own reader does (FileFormatError or CorruptUnit otherwise):
    a results file (`load_results`), a tuning or bench file (`load`); any other JSON file of results/ (open choices,
    timings, the GPU check) must at least be valid JSON without a key given twice (`read_json`). Returns the JSON of
    a file of a kind this module does not read (a dynamics file: `dynamics.load_dynamics` checks it), else None. For
    the commands that publish what the files hold (`pages`): a file no reader could use is refused there, before its
    hash or its numbers reach a page."""
    doc = read_json(Path(path), "results-folder file")
    got = kind_of(doc)
    if got == "results":
        load_results(Path(path))
    elif got is not None:
        load(Path(path), got)
    else:
        return doc
    return None
