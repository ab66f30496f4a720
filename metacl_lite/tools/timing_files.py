"""The one-time migration of the speed-benchmark files (`bench`), the GPU check's file (data_scripts/gpu_check.py)
and the λ story's file (`lab.lambda_story`) made before today's format, run by ``python -m metacl_lite.tools
migrate`` beside the results and tuning files (`lab.migrate`): numbers unchanged, each file's provenance recording
the migration (`migrations`)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional, Sequence

from ..lab.store import MIGRATE
from ..report.timings import RAN_COMMIT_FIELD

#: How files made before `RAN_COMMIT_FIELD` named the commit that ran: a sentence of their provenance note.
_RAN_SENTENCE = re.compile(r"\s*The code that ran is commit (?P<commit>[0-9a-f]{7,40})\b(?:\s*\((?P<why>[^)]*)\))?\.?")
#: A maintainers' tool recorded as run through the users' command line, before it moved to `metacl_lite.tools`.
_TOOL_THROUGH_CLI = re.compile(r"(python3? -m metacl_lite) (bench|pages|readme|where)\b")
#: A module recorded as run with -m that has moved since -> where it runs today.
_MOVED_MODULE = re.compile(r"(-m )metacl_lite\.report\.lambda_story\b")
#: The kinds of file this migration rewrites.
TIMING_KINDS = ("bench", "gpu-check", "lambda-story")


def timing_kind(doc: Any) -> Optional[str]:
    """"bench" for a speed-benchmark file (also one made before files named their kind), "gpu-check" for the GPU
    check's file, "lambda-story" for the λ story's, None for anything else."""
    if not isinstance(doc, dict):
        return None
    got = doc["kind"] if "kind" in doc else "bench" if "per_method" in doc else None
    return got if got in TIMING_KINDS else None


def migrate_timing_doc(doc: dict, command: str) -> list[str]:
    """Rewrite, in place and once, a speed-benchmark or GPU-check document made before today's format, its numbers
    unchanged: its kind where it named none; the commit that ran, where a sentence of the provenance note named it,
    as the field `RAN_COMMIT_FIELD` (the note keeps what it says besides, or goes); a maintainers' tool recorded as
    run through the users' command line (`python -m metacl_lite bench`) as it runs today (`python -m
    metacl_lite.tools bench`), and a moved module as it runs today (`python -m metacl_lite.report.lambda_story` ->
    `python -m metacl_lite.lab.lambda_story`). The provenance records the migration (`migrations`: when, `command`,
    the fields filled in, as `lab.migrate` records it). Returns the fields filled in ([]: already current)."""
    from ..lab.provenance import now

    filled, prov = [], doc.setdefault("provenance", {})
    if "kind" not in doc:
        doc["kind"] = timing_kind(doc)
        filled.append("kind")
    mo = _RAN_SENTENCE.search(prov.get("note") or "")
    if mo and RAN_COMMIT_FIELD not in prov:
        prov[RAN_COMMIT_FIELD] = {"commit": mo["commit"], "why": mo["why"] or ""}
        rest = (prov["note"][:mo.start()] + prov["note"][mo.end():]).strip()
        if rest:
            prov["note"] = rest
        else:
            del prov["note"]
        filled.append(f"provenance.{RAN_COMMIT_FIELD}")
    if isinstance(prov.get("command"), str) and _TOOL_THROUGH_CLI.search(prov["command"]):
        prov["command"] = _TOOL_THROUGH_CLI.sub(r"\1.tools \2", prov["command"])
        filled.append("provenance.command")
    if isinstance(prov.get("command"), str) and _MOVED_MODULE.search(prov["command"]):
        prov["command"] = _MOVED_MODULE.sub(r"\1metacl_lite.lab.lambda_story", prov["command"])
        filled.append("provenance.command")
    if filled:
        prov.setdefault("migrations", []).append({"when": now(), "command": command, "filled": filled})
    return filled


def migrate_timing_files(paths: Optional[Sequence[Path]] = None, command: Optional[str] = None
                         ) -> dict[Path, list[str]]:
    """Migrate speed-benchmark and GPU-check files (`migrate_timing_doc`), each under its lock and atomically
    (default: those under results/); {path: the fields filled in}. A file of another kind raises FileFormatError."""
    from ..errors import FileFormatError
    from ..lab.atomic import locked, read_json, write_json
    from ..paths import REPO_ROOT

    if paths is None:
        paths = [p for p in sorted((REPO_ROOT / "results").glob("*.json"))
                 if timing_kind(read_json(p, "results-folder file"))]
    out = {}
    for path in map(Path, paths):
        with locked(path):
            doc = read_json(path, "speed benchmark or GPU check file")
            if timing_kind(doc) is None:
                raise FileFormatError(f"{path} is not a speed benchmark or GPU check file: leave it out")
            out[path] = migrate_timing_doc(doc, command or MIGRATE)
            if out[path]:
                write_json(path, doc)
    return out
