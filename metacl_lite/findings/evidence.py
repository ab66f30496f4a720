"""The evidence of the claims (`findings.claims`): the results files per K, the control files of claim 7 and the
training logs of claims 5 and 6 (`dynamics_logs`: the committed file, or a live run), and a fingerprint of those
logs."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from ..paths import REPO_ROOT
from ..lab.provenance import relative_to_repo
from ..lab.store import load_results

#: The command that makes the training logs of claims 5 and 6 (results/dynamics-<benchmark>.json).
DYNAMICS_COMMAND = "python -m metacl_lite dynamics"

#: The control runs of claim 7: every MetaCL-λ with γ set to its MetaCL-β counterpart's β ("gamma=beta"), and with
#: γ = 0 ("gamma=0"), each kept in its own results file per K (`control_file`), made with the seeds of the main file.
CONTROLS = ("gamma=beta", "gamma=0")
CONTROL_COMMAND = ("python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds} --methods {methods} "
                   "--gamma {gamma}")


def control_file(benchmark: str, K: int, control: str) -> str:
    """results/ file of a control ("gamma=beta" or "gamma=0"): the file `run --gamma` writes by default."""
    from ..lab.grid import control_file as grid_control_file

    return grid_control_file(benchmark, K, control.split("=")[1])


@dataclass
class Evidence:
    """What the verdicts are made from: results files per K, the control runs of claim 7 (control -> K -> results
    file) and the training logs of claims 5-6 ("speed", "angles" -> `dynamics_logs`). Missing entries read "not yet
    run"."""

    ks: tuple
    results: dict
    controls: dict = field(default_factory=dict)
    logs: dict = field(default_factory=dict)
    benchmark: str = "pmnist"


def load_evidence(benchmark: str = "pmnist", ks: Sequence[int] = (20, 50, 200, 500),
                  folder: Optional[Path] = None, dynamics: bool = True) -> Evidence:
    """The results files results/<benchmark>-K<K>.json, the control files that exist and (dynamics=True) the
    training logs of claims 5 and 6 from results/dynamics-<benchmark>.json where it exists (`dynamics_logs`)."""
    folder = Path(folder or REPO_ROOT / "results")
    results = {K: load_results(folder / f"{benchmark}-K{K}.json") for K in ks
               if (folder / f"{benchmark}-K{K}.json").exists()}
    controls = {c: {K: load_results(folder / control_file(benchmark, K, c)) for K in ks
                    if (folder / control_file(benchmark, K, c)).exists()} for c in CONTROLS}
    logs = {}
    if dynamics and (folder / f"dynamics-{benchmark}.json").exists():
        logs = dynamics_logs(benchmark=benchmark, path=folder / f"dynamics-{benchmark}.json")
    return Evidence(tuple(ks), results, controls, logs, benchmark)


#: The pairs of claims 5 and 6: which (MetaCL, plain) pairs are compared; their runs are those of `lab.dynamics`.
SPEED_PAIRS = (("metacl", "finetune"), ("pi-metacl-beta", "pi"))
ANGLE_PAIR = ("pi-metacl-beta", "pi-metacl-lambda")  # Fig. 5's example
#: The settings of the one stream per claim that a page may change for a live run (None: the committed file's).
STREAM_PARAMETERS = ("speed_K", "speed_tasks", "speed_seeds", "angle_K", "angle_tasks", "angle_seeds")


def dynamics_logs(live: bool = False, speed_K: Optional[int] = None, speed_tasks: Optional[int] = None,
                  speed_seeds: Optional[int] = None, angle_K: Optional[int] = None, angle_tasks: Optional[int] = None,
                  angle_seeds: Optional[int] = None, benchmark: str = "pmnist", path: Optional[Path] = None) -> dict:
    """The one stream per claim behind claims 5 (learning speed, "speed") and 6 (gradient angles, "angles"), for
    every page that shows them: {"speed": log, "angles": log, "source": where they come from}, each log
    {"K", "n_tasks", "seeds", "runs": {"method/seed": log}} (`lab.dynamics.as_logs`).

    By default the committed file results/dynamics-<benchmark>.json (`python -m metacl_lite dynamics`) is read
    (without it: {"source"} only, and the claims read "not yet run"). live=True trains the same streams again on the
    page (their K, tasks and seeds, from the file, or the module's defaults without one); a setting given (not None)
    changes that stream and trains it live too (seeds: 0..N-1). Nothing is written. "source" is {"kind": "file"
    (read from `path`, made by `command`), "live" (trained here) or "missing" (no file at `path`: `command` makes
    it)}."""
    from ..lab import dynamics as D

    path = Path(path or D.default_file(benchmark))
    given = {k: v for k, v in dict(speed_K=speed_K, speed_tasks=speed_tasks, speed_seeds=speed_seeds,
                                    angle_K=angle_K, angle_tasks=angle_tasks, angle_seeds=angle_seeds).items()
             if v is not None}
    doc = D.load_dynamics(path) if path.exists() else None
    if not live and not given:
        if doc is None:
            return {"source": {"kind": "missing", "path": relative_to_repo(path), "command": DYNAMICS_COMMAND}}
        return {"speed": D.as_logs(doc, "speed"), "angles": D.as_logs(doc, "angles"),
                "source": {"kind": "file", "path": relative_to_repo(path), "command": doc["provenance"]["command"]}}
    streams = {k: dict(v) for k, v in (doc["config"]["streams"] if doc else D.STREAMS).items()}
    seeds = {k: list(doc["config"]["seeds"]) if doc else list(range(D.DEFAULT_SEEDS)) for k in streams}
    for kind, prefix in (("speed", "speed"), ("angles", "angle")):
        for setting, key in (("K", "K"), ("tasks", "n_tasks")):
            if f"{prefix}_{setting}" in given:
                streams[kind][key] = given[f"{prefix}_{setting}"]
        if f"{prefix}_seeds" in given:
            seeds[kind] = list(range(given[f"{prefix}_seeds"]))
    out = {"source": {"kind": "live", "path": None, "command": None}}
    for kind in ("speed", "angles"):
        out[kind] = D.as_logs(D.measure(seeds[kind], {kind: streams[kind]}, benchmark), kind)
    return out


def stream_fingerprint(logs: Mapping) -> str:
    """A short digest of the runs behind claims 5 and 6 (the logs' content), by which a test checks that two pages
    read the same stream for each claim."""
    import hashlib
    import json

    from ..lab.atomic import jsonable

    body = {k: logs[k] for k in ("speed", "angles") if k in logs}
    return hashlib.sha256(json.dumps(jsonable(body), sort_keys=True).encode()).hexdigest()[:16]
