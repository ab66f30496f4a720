"""The one-time migration of results and tuning files written before today's format (`store.MIGRATE`:
``python -m metacl_lite.tools migrate [FILE ...]``, by default every results and tuning file under results/).

A file is rewritten once, under its lock and atomically, to what today's readers require (`files.outdated_results`,
`files.outdated_tuning`), its numbers unchanged:

* the kind and schema fields (files of schema 1 had neither);
* a provenance of schema 1 (one block per file) as its one invocation;
* a results file's config: the fields of `TrainConfig` added since the file was made, at their defaults (they were
  read so before), and the model (none), accelerator (the CPU) and threads (1) of files made before these were
  recorded;
* a tuning file of schema 1 (its grid and chosen values only) as units; a protocol without options or per-method
  options: none, and the file-wide ones for every method, as it was made;
* an invocation made before `cpu_kernels` was recorded: ``"cpu_kernels": null`` (not recorded, as on a Ray
  cluster), so that no reader treats a missing field as a format.

The file's provenance records the migration (``migrations``: when, the command, what was filled in). A file already
in today's format is left as it is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from ..data.specs import get_spec
from ..errors import FileFormatError
from ..keys import TuningKey
from ..paths import REPO_ROOT
from ..training import TrainConfig
from .atomic import locked, read_json, write_json
from .files import outdated_results, outdated_tuning
from .lattice import BETA_GRID, GAMMA_GRID
from .provenance import now, relative_to_repo
from .store import LATEST, MIGRATE, SCHEMA, kind_of, schema1_kind

#: Schema-1 tuning files validated Permuted MNIST on images 400-499 of each class (the embedded subset held 500).
SCHEMA1_VAL_OFFSET = {"pmnist": 400}

#: What a results file made before these were recorded was made with: no model options, the CPU, one thread.
RESULTS_DEFAULTS = {"model": {}, "accelerator": None, "threads": 1}


def _invocations(doc: dict) -> list[str]:
    """A provenance of schema 1 (one block per file) as schema 2's: that block becomes the one invocation."""
    prov = doc.get("provenance")
    if not isinstance(prov, dict) or "invocations" in prov:
        return []
    inv = {k: v for k, v in prov.items() if k not in ("command", "wall_s_total")}
    inv["wall_s"] = prov.get("wall_s_total")
    inv["units"] = "all (schema 1)"
    doc["provenance"] = {**{k: v for k, v in prov.items() if k in LATEST}, "command": prov.get("command"),
                         "wall_s_total": prov.get("wall_s_total"), "invocations": [inv]}
    return ["provenance.invocations"]


def _results(doc: dict) -> list[str]:
    """Fill in a results file's config (see the module docstring); the fields filled in."""
    config, filled = doc["config"], []
    for k, v in RESULTS_DEFAULTS.items():
        if k not in config:
            config[k] = v
            filled.append(k)
    train = config.get("train")
    if isinstance(train, dict):
        added = {f: v for f, v in TrainConfig().to_dict().items() if f not in train}
        train.update(added)
        filled += [f"train.{f}" for f in added]
    return filled


def _tuning_units(doc: dict) -> list[str]:
    """A tuning file of schema 1 (grid and chosen only) as units and a protocol."""
    if "units" in doc:
        return []
    grid = doc["grid"]
    betas = next((g["values"] for g in grid.values() if g["param"] == "beta"), list(BETA_GRID))
    gammas = next((g["values"] for g in grid.values() if g["param"] == "gamma"), list(GAMMA_GRID))
    spec = get_spec(doc["benchmark"])
    doc["protocol"] = {"benchmark": doc["benchmark"], "K": doc["K"], "n_tasks": doc["n_tasks"], "epochs": doc["epochs"],
                       "seeds": doc["seeds"], "beta_grid": betas, "gamma_grid": gammas,
                       "val_offset": SCHEMA1_VAL_OFFSET.get(doc["benchmark"], spec.val_offset),
                       "val_per_class": spec.val_per_class}
    if doc.get("model"):
        doc["protocol"]["model"] = doc["model"]
    doc["methods"] = list(grid)
    doc["units"] = {str(TuningKey(m, g["param"], v, s)): {"method": m, "param": g["param"], "value": v, "seed": s,
                                                          "val_acc": a}
                    for m, g in grid.items() for v, row in zip(g["values"], g["val_acc"])
                    for s, a in zip(doc["seeds"], row)}
    return ["units", "protocol"]


def _tuning(doc: dict) -> list[str]:
    """Fill in a tuning file (see the module docstring); the fields filled in."""
    from .tuning import TUNABLE

    filled = _tuning_units(doc)
    p = doc["protocol"]
    if "options" not in p:
        p["options"] = {}
        filled.append("protocol.options")
    if "method_options" not in p:
        p["method_options"] = {m: dict(p["options"]) for m in TUNABLE}
        filled.append("protocol.method_options")
    return filled


def _kind(doc: dict) -> Optional[str]:
    """The kind of a file of today's format or of schema 1 (`store.schema1_kind`); None for anything else."""
    return kind_of(doc) or schema1_kind(doc)


def outdated(doc: dict) -> Optional[str]:
    """What a results or tuning document lacks of today's format (None: nothing, or not such a file)."""
    got = _kind(doc)
    if got not in ("results", "tuning"):
        return None
    if "kind" not in doc or "invocations" not in (doc.get("provenance") or {"invocations": []}):
        return "schema 1"
    old = outdated_results(doc.get("config", {})) if got == "results" else outdated_tuning(doc)
    return old or _without_cpu_kernels(doc)


def _without_cpu_kernels(doc: dict) -> Optional[str]:
    """Whether invocations of the file's provenance do not record `cpu_kernels` (made before they were recorded)."""
    invs = (doc.get("provenance") or {}).get("invocations", [])
    n = sum(isinstance(i, dict) and "cpu_kernels" not in i for i in invs)
    return f"{n} invocations without cpu_kernels" if n else None


def migrate_doc(doc: dict, command: str) -> list[str]:
    """Migrate one results or tuning document in place (nothing where it is current); the fields filled in."""
    if outdated(doc) is None:
        return []
    got = _kind(doc)
    filled = ([] if "kind" in doc else ["kind"]) + _invocations(doc)
    filled += _results(doc) if got == "results" else _tuning(doc)
    if _without_cpu_kernels(doc):  # not recorded when they ran: said so (null), as a Ray cluster's invocation says it
        for inv in doc["provenance"]["invocations"]:
            inv.setdefault("cpu_kernels", None)
        filled.append("provenance.invocations.cpu_kernels (null: not recorded)")
    doc["schema"], doc["kind"] = SCHEMA, got
    prov = doc.setdefault("provenance", {"invocations": []})
    prov.setdefault("migrations", []).append({"when": now(), "command": command, "filled": filled})
    return filled


def migrate_file(path: Path, command: str = MIGRATE) -> list[str]:
    """Migrate one file, under its lock and atomically (`migrate_doc`); the fields filled in ([]: already current).
    A file that is neither a results nor a tuning file raises FileFormatError naming it."""
    path = Path(path)
    with locked(path):
        doc = read_json(path, "results or tuning file")
        if _kind(doc) not in ("results", "tuning"):
            raise FileFormatError(f"{path} is neither a results file nor a tuning file: `migrate` rewrites only "
                                  f"those; leave it out")
        filled = migrate_doc(doc, command)
        if filled:
            write_json(path, doc)
    return filled


def committed_files(folder: Optional[Path] = None) -> list[Path]:
    """The results and tuning files under results/ (and its folders), the default of `migrate`."""
    out = []
    for path in sorted(Path(folder or REPO_ROOT / "results").glob("**/*.json")):
        try:
            doc = read_json(path, "results-folder file")
        except FileFormatError:
            continue  # not this command's to read: `pages` refuses it with its own message
        if _kind(doc) in ("results", "tuning"):
            out.append(path)
    return out


def migrate(paths: Iterable[Path] = ()) -> dict[Path, list[str]]:
    """Migrate `paths` (default: `committed_files`), each recorded as migrated by the command that names them;
    {path: the fields filled in}."""
    given = [Path(p) for p in paths]
    missing = [p for p in given if not p.exists()]
    if missing:
        raise FileFormatError(f"{missing[0]} not found: give `migrate` results or tuning files")
    command = MIGRATE + "".join(f" {relative_to_repo(p)}" for p in given)
    return {p: migrate_file(p, command) for p in given or committed_files()}
