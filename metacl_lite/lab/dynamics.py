"""The training dynamics behind claims 5 and 6 (the paper's Figs. 4 and 5): one committed file, one stream per claim.

Claim 5 (learning speed, Fig. 4) reads the accuracy on the task being learnt after each of its epochs
(`TrainConfig.eval_every_epoch`); claim 6 (gradient angles, Fig. 5) reads the angles between the update g_x and
g1, g2 at each outer step (`TrainConfig.record_angles`). Neither is in a results file (those keep the accuracy
matrix only), so `python -m metacl_lite dynamics` trains both streams and writes their logs to
results/dynamics-<benchmark>.json. The claims chapter and the analysis chapter both read that file (or, with their
`live` option, train the same streams again with `measure`), so both show the same runs.

The file is written after every finished run (one unit: stream, method, seed) under a lock, like the results store
(`store.UnitFile`): an interrupted command resumes where it stopped, and a file made with other streams or other
method settings is refused unless the command starts over (`--force`). `provenance.command` regenerates the file.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from ..paths import REPO_ROOT
from ..errors import ConfigMismatch, CorruptUnit, FileFormatError, restore_advice
from ..keys import RunKey, unit_name
from .atomic import check_writable, jsonable, locked, read_json, write_json

KIND, SCHEMA = "dynamics", 1
#: The two streams: claim 5's learning speed at K = 20 over 10 tasks (fine-tune, MetaCL w/o reg, PI and PI's two
#: MetaCL variants), and claim 6's gradient angles at K = 50 over the paper's 20 tasks (Fig. 5 reads task 20) for
#: PI-MetaCL-β and PI-MetaCL-λ, the paper's example. What each run logs is `RECORDS[kind]`.
STREAMS = {"speed": {"K": 20, "n_tasks": 10,
                     "methods": ["finetune", "metacl", "pi", "pi-metacl-beta", "pi-metacl-lambda"]},
           "angles": {"K": 50, "n_tasks": 20, "methods": ["pi-metacl-beta", "pi-metacl-lambda"]}}
RECORDS = {"speed": ("eval_every_epoch", "epoch_acc"), "angles": ("record_angles", "angles")}
#: Ten seeds by default: both streams together take about 11 minutes of one CPU core (measured on the 2-core build
#: machine: about 0.75 s of CPU per task and method at K = 20 with an evaluation after every epoch, 0.7 s at K = 50).
#: The committed file holds the first 5 (its command says --seeds 5): it was made while that machine was shared
#: about eight ways; `python -m metacl_lite dynamics` adds seeds 5-9 to it, keeping the runs it holds.
DEFAULT_SEEDS = 10


def default_file(benchmark: str = "pmnist") -> Path:
    return REPO_ROOT / "results" / f"dynamics-{benchmark}.json"


def streams_config(streams: Mapping[str, Mapping], benchmark: str = "pmnist", hp: Optional[dict] = None) -> dict:
    """Per stream: K, n_tasks, methods, what is recorded, and each method's TrainConfig (`hparams.method_config`: its
    tuned β/γ and options), so that a file made with other settings is recognised."""
    from .hparams import method_config

    out = {}
    for kind, s in streams.items():
        flag, _ = RECORDS[kind]
        out[kind] = {"K": int(s["K"]), "n_tasks": int(s["n_tasks"]), "methods": list(s["methods"]), "record": flag,
                     "train": {m: method_config(benchmark, m, K=s["K"], hp=hp, **{flag: True}).to_dict()
                               for m in s["methods"]}}
    return out


def train_unit(benchmark: str, kind: str, stream: Mapping, method: str, seed: int, bench=None) -> dict:
    """One run of `method` on the stream of `kind` (`streams_config` entry), seed `seed`: the log that kind reads
    ("epoch_acc" or "angles"), the final average accuracy and the wall time. Only the final row of the accuracy
    matrix is evaluated (training does not depend on it)."""
    import numpy as np

    from ..data.benchmarks import make_benchmark
    from ..training import TrainConfig, run_stream

    bench = bench or make_benchmark(benchmark, stream["K"], n_tasks=stream["n_tasks"])  # permutations of seed 0
    cfg = TrainConfig(**stream["train"][method])
    r = run_stream(bench, method, cfg, seed=seed, show_progress=False, evaluate_rows="last")
    key = RECORDS[kind][1]
    return {key: jsonable(r.get(key, [])), "final_acc": float(np.nanmean(r["acc_matrix"][-1])),
            "wall_s": float(r["wall_s"])}


def as_logs(doc: Mapping, kind: str) -> dict:
    """The log of one stream in the form the claims read (`findings.claims.speed_tests`, `angle_tests`):
    {"K", "n_tasks", "seeds", "runs": {"method/seed": log}}, over the file's seeds whose runs all exist."""
    s = doc["config"]["streams"][kind]
    runs = doc["runs"].get(kind, {})
    seeds = [x for x in doc["config"]["seeds"] if all(str(RunKey(m, x)) in runs for m in s["methods"])]
    return {"K": s["K"], "n_tasks": s["n_tasks"], "seeds": seeds,
            "runs": {str(RunKey(m, x)): runs[str(RunKey(m, x))] for m in s["methods"] for x in seeds}}


def command(seeds: Sequence[int], streams: Mapping[str, Mapping], out: Path, benchmark: str = "pmnist") -> str:
    """The one command that regenerates a file made with these settings (flags at their defaults left out)."""
    from .commands import out_flag  # imports torch: not when the command line's parser reads STREAMS

    flags = "" if list(seeds) == list(range(len(seeds))) and len(seeds) == DEFAULT_SEEDS else \
        f" --seeds {len(seeds)}" if list(seeds) == list(range(len(seeds))) else f" --seed-list {','.join(map(str, seeds))}"
    for kind in ("speed", "angles"):
        s = streams.get(kind, STREAMS[kind])
        if (s["K"], s["n_tasks"]) != (STREAMS[kind]["K"], STREAMS[kind]["n_tasks"]):
            flags += f" --{kind} {s['K']}:{s['n_tasks']}"
    return "python -m metacl_lite dynamics" + flags + out_flag(out, default_file(benchmark))


def load_dynamics(path: Optional[Path] = None, benchmark: str = "pmnist") -> dict:
    """A dynamics file, checked: its kind, schema and the sections every reader needs (FileFormatError otherwise)."""
    path = Path(path or default_file(benchmark))
    doc = read_json(path, "dynamics file (python -m metacl_lite dynamics)")
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise FileFormatError(f"{path} is not a dynamics file (python -m metacl_lite dynamics)")
    if doc.get("schema") != SCHEMA:
        raise FileFormatError(f"{path} has schema {doc.get('schema')!r}; this version reads schema {SCHEMA}")
    for k in ("config", "runs", "provenance"):
        if not isinstance(doc.get(k), dict):
            raise FileFormatError(f"{path} has no {k}; make it again with `python -m metacl_lite dynamics`")
    from .store import _percent

    for kind, runs in doc["runs"].items():
        if not isinstance(runs, dict):
            raise FileFormatError(f"{path}: runs[{kind!r}] is {type(runs).__name__}, not an object of runs; "
                                  f"{restore_advice(path)}, or make it again")
        for key, unit in runs.items():
            log = RECORDS.get(kind, (None, None))[1]
            problem = (f"it is {unit!r}, not an object" if not isinstance(unit, dict)
                       else f"final_acc is {unit.get('final_acc')!r}, not an accuracy in percent (0 to 100)"
                       if not _percent(unit.get("final_acc"))
                       else f"{log} is {unit.get(log)!r}, not a list" if log and not isinstance(unit.get(log), list)
                       else None)
            if problem:
                raise CorruptUnit(path, f"runs/{kind}", key, problem)
    return doc


def _differences(old: Mapping, new: Mapping) -> list[str]:
    """How a file's config `old` differs from a run's `new`: the benchmark, the thread count of its CPU runs (files
    made before it was recorded used 1, the command's default: another count sums in another order), each stream's
    K, task count, record and method settings."""
    from .store import DIFFERS

    diff = []
    for key in ("benchmark",):
        if old.get(key) != new.get(key):
            diff.append(f"{key} {old.get(key)!r} vs {new.get(key)!r}")
    if "threads" in new and old.get("threads", 1) != new["threads"]:
        diff.append(DIFFERS.format("threads", old.get("threads", 1), new["threads"]))
    for kind, s in new["streams"].items():
        o = old.get("streams", {}).get(kind)
        if o is None:
            continue
        for k in ("K", "n_tasks", "record"):
            if o.get(k) != s[k]:
                diff.append(f"{kind} {k} {o.get(k)} vs {s[k]}")
        for m in set(o.get("train", {})) & set(s["train"]):
            if o["train"][m] != s["train"][m]:
                diff.append(f"{kind} settings of {m}")
    return diff


def _merged(old: Optional[dict], cfg: dict, inv: dict, out: Optional[Path]) -> dict:
    """The document a run of `cfg` writes: `old` (the file's; None for a new one) with the run's seeds and streams
    added. As the results store, a file made with other settings, another thread count or on a CPU that rounds
    otherwise is refused (ConfigMismatch)."""
    from .store import rounds_otherwise

    doc = old if old is not None else {"kind": KIND, "schema": SCHEMA, "config": {}, "runs": {},
                                       "provenance": {"invocations": []}}
    if old is not None:
        diff = _differences(old["config"], cfg) + rounds_otherwise(inv, old, out)
        if diff:
            raise ConfigMismatch(f"{out} was made with other settings ({', '.join(diff)})")
    seeds_all = sorted(set(doc["config"].get("seeds", [])) | set(cfg["seeds"]))
    doc["config"] = {**cfg, "seeds": seeds_all, "streams": {**doc["config"].get("streams", {}), **cfg["streams"]}}
    for kind in cfg["streams"]:
        doc["runs"].setdefault(kind, {})
    return doc


def _save(out: Path, fresh: bool, cfg: dict, inv: dict, kind: str, key: RunKey, unit: dict) -> dict:
    """Write one finished run into the file `out` under its lock (read again first: another process may have added
    runs; `fresh`: start it over), with this invocation's record in its provenance; the document written."""
    from .store import LATEST

    with locked(out):
        doc = _merged(None if fresh or not out.exists() else load_dynamics(out), cfg, inv, out)
        doc["runs"][kind][str(key)] = unit
        prov = doc["provenance"]
        prov["invocations"] = [i for i in prov.get("invocations", []) if i.get("id") != inv["id"]] + [dict(inv)]
        prov["wall_s_total"] = sum(float(i.get("wall_s") or 0.0) for i in prov["invocations"])
        for k in LATEST:  # the latest invocation's, for readers (as the results store)
            prov[k] = inv[k]
        prov["command"] = command(doc["config"]["seeds"], cfg["streams"], out, cfg["benchmark"])
        write_json(out, doc)
    return doc


@dataclass(frozen=True)
class DynamicsRequest:
    """What `dynamics` is asked, checked once by `dynamics_request` before any work: the benchmark, the seeds, each
    stream's configuration (`streams_config`: K, tasks, methods, what is recorded, their TrainConfigs, read from
    hparams.json once), the file (`out`; None: a page's live run, nothing written), whether it starts over
    (`force`), progress lines, and torch's intra-op threads (None: as they are)."""

    benchmark: str
    seeds: tuple[int, ...]
    streams: dict
    out: Optional[Path] = None
    force: bool = False
    show_progress: bool = False
    threads: Optional[int] = None


def dynamics_request(seeds: Sequence[int], streams: Optional[Mapping[str, Mapping]] = None,
                     benchmark: str = "pmnist", out: Optional[Path] = None, force: bool = False,
                     show_progress: bool = False, threads: Optional[int] = None) -> DynamicsRequest:
    """The request of `measure`: the seeds and threads checked (UsageError), the file writable, the streams'
    configurations read."""
    from .checks import check_seeds
    from .executors import check_plan
    from .hparams import load

    seeds = tuple(check_seeds(seeds))  # the cheap checks first: nothing is read before they pass
    threads = None if threads is None else check_plan(threads=threads).threads
    out = None if out is None else check_writable(Path(out))
    return DynamicsRequest(benchmark, seeds, streams_config(streams or STREAMS, benchmark, load()), out, force,
                           show_progress, threads)


def measure(*args, **kwargs) -> dict:
    """Train every (stream, method, seed) not yet in the file and return the whole document:
    `measure_request(dynamics_request(...))`."""
    return measure_request(dynamics_request(*args, **kwargs))


def measure_request(req: DynamicsRequest) -> dict:
    """Train every (stream, method, seed) of `req` not yet in `req.out` and return the whole document. With a file
    each finished run is written at once under a lock (resumable; a file made with other settings raises
    ConfigMismatch unless `req.force`); without one (a page's live run) nothing is written. `req.threads` holds
    while it trains; the caller's setting is restored after."""
    from ..accel.device import torch_threads

    with torch_threads(req.threads) as threads:
        return _measure(req, threads)


def _measure(req: DynamicsRequest, threads: int) -> dict:
    import sys

    from ..data.benchmarks import make_benchmark
    from .provenance import invocation, now
    from .store import LATEST

    out, seeds = req.out, list(req.seeds)
    cfg = {"benchmark": req.benchmark, "seeds": seeds, "streams": req.streams, "threads": threads}
    inv = {"id": uuid.uuid4().hex[:12], **invocation(threads=cfg["threads"]), "units": [], "wall_s": 0.0}
    doc = _merged(None if out is None or req.force or not out.exists() else load_dynamics(out), cfg, inv, out)
    fresh, benches = req.force, {}
    for seed in seeds:  # seed by seed: an interrupted file holds whole seeds of both streams
        for kind, s in cfg["streams"].items():
            for m in s["methods"]:
                key = RunKey(m, seed)
                if str(key) in doc["runs"][kind]:
                    continue
                if kind not in benches:
                    benches[kind] = make_benchmark(req.benchmark, s["K"], n_tasks=s["n_tasks"])
                unit = train_unit(req.benchmark, kind, s, m, seed, benches[kind])
                if req.show_progress:
                    print(f"{kind} {key}: {unit['wall_s']:.0f} s", file=sys.stderr, flush=True)
                inv["units"].append(unit_name(kind, key))
                inv["wall_s"] += unit["wall_s"]
                inv["finished"] = now()
                if out is None:
                    doc["runs"][kind][str(key)] = unit
                else:
                    doc, fresh = _save(out, fresh, cfg, inv, kind, key, unit), False
    if out is None:
        doc["provenance"] = {**{k: inv[k] for k in LATEST},
                             "command": command(seeds, cfg["streams"], default_file(req.benchmark), req.benchmark),
                             "invocations": [inv], "wall_s_total": inv["wall_s"], "live": True}
    return jsonable(doc)
