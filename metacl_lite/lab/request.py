"""What a grid command is asked to do, as one frozen record: `RunRequest` for `run` (a results file), `TuneRequest`
for `tune` (a tuning file). Each is built once, by `grid.run_request` and `tuning.tune_request`, which check every
value before any work (`checks`, `hparams`, the data, the output path, where the units run); the benchmark's spec is
looked up there once and carried on the request, and everything downstream (the file, its units, the executor)
reads the request instead of a list of keywords.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..accel.device import kind
from ..data.specs import BenchmarkSpec
from .executors import Location, Plan, unit_device


@dataclass(frozen=True, kw_only=True)
class Request:
    """What every grid command is asked: the benchmark (its spec), K, the stream's tasks, the methods and seeds, the
    file written (`out`), where the units run (`plan`, `loc`: `executors.locate`) and how (`model`, `compile`,
    `precision`, `options`: the open choices, checked). `force` starts the file over; `command(doc_or_config, out)`
    writes the command line that regenerates it (None: the CLI's own)."""

    spec: BenchmarkSpec
    K: int
    n_tasks: int
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    epochs: Optional[int]
    out: Path
    plan: Plan
    loc: Location
    model: dict
    compile: str = "off"
    precision: str = "float32"
    optimizer_state: str = "task"
    options: dict = field(default_factory=dict)
    force: bool = False
    show_progress: Optional[bool] = None
    command: Optional[Callable] = None

    @property
    def benchmark(self) -> str:
        """The benchmark's name, as the files record it."""
        return self.spec.name

    @property
    def where(self) -> str:
        """The resolved device the units train on (cpu, cuda or cuda:N)."""
        return self.loc.device

    @property
    def device_kind(self) -> str:
        """"cpu" or "cuda": what a unit's configuration and the file record."""
        return kind(self.loc.device)

    @property
    def unit_device(self) -> str:
        """The device each unit is told to use (`executors.unit_device`)."""
        return unit_device(self.plan, self.loc.device)

    @property
    def machine_counter(self) -> bool:
        """Whether each unit's machine is counted in provenance (Ray: the units run on the cluster's nodes)."""
        return self.plan.executor == "ray"


@dataclass(frozen=True, kw_only=True)
class RunRequest(Request):
    """A results file's grid (`grid.run_grid`): besides `Request`, the data `source`, the gamma control (`gamma`),
    the methods whose runs are discarded and trained again (`redo`, `redo_oracle`), and what the checks resolved:
    `config` (the file's configuration), `cfgs` (each method's training configuration, as a dict) and `base_cfg`
    (fine-tune's: the references' and the oracle's)."""

    source: str = "auto"
    gamma: Optional[str] = None
    redo: tuple[str, ...] = ()
    redo_oracle: bool = False
    config: dict = field(default_factory=dict)
    cfgs: dict = field(default_factory=dict)
    base_cfg: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class TuneRequest(Request):
    """A tuning file's grid (`tuning.tune_grid`): besides `Request`, the `protocol` recorded in the file, whether
    hparams.json is written (`write`; `write_hparams` as asked: None, True or False) and under which name of the
    tuning file (`source`), whether the protocol is the default one (`canonical`), and the files whose units stand in
    for a method's (`reuse`: {method: tuning file})."""

    protocol: dict
    write: bool = False
    write_hparams: Optional[bool] = None
    source: Optional[str] = None
    canonical: bool = False
    reuse: dict = field(default_factory=dict)
