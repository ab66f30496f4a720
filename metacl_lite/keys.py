"""The keys of a file's units, as records: built and read back here only, so that nothing elsewhere joins or splits
strings to name a unit.

A results file keeps its method runs under "runs" keyed ``"{method}/{seed}"`` (`RunKey`), its references and oracle
under the seed alone; a tuning file keeps its units under ``"{method}/{param}={value!r}/{seed}"`` (`TuningKey`); the
λ story keeps one run per setting under ``"{method}/{gamma|beta}={setting}/K={K}"`` (`StoryKey`). A unit of any file
is named in provenance and messages as ``"{section}/{key}"`` (`unit_name`). Torch-free, as the vocabulary.
"""
from __future__ import annotations

from typing import Iterator, Mapping, NamedTuple, TypeVar

V = TypeVar("V")


class RunKey(NamedTuple):
    """One method's run through the stream with one seed: the key of a results file's "runs" section."""

    method: str
    seed: int

    def __str__(self) -> str:
        return f"{self.method}/{self.seed}"

    @classmethod
    def parse(cls, text: str) -> "RunKey":
        """"pi-metacl-lambda/3" -> RunKey("pi-metacl-lambda", 3); ValueError for anything else."""
        method, sep, seed = str(text).rpartition("/")
        if not sep or not method or "/" in method or not seed.lstrip("-").isdigit():
            raise ValueError(f"{text!r} is not a run key (method/seed)")
        return cls(method, int(seed))


class TuningKey(NamedTuple):
    """One (method, strength value, seed) of a tuning grid: the key of a tuning file's "units" section."""

    method: str
    param: str
    value: float
    seed: int

    def __str__(self) -> str:
        return f"{self.method}/{self.param}={self.value!r}/{self.seed}"


class StoryKey(NamedTuple):
    """One setting of the λ story at one K: the key of its "runs" section (`setting_name` is "gamma" for MetaCL-λ's
    γ, "beta" for MetaCL-β's β)."""

    method: str
    setting_name: str
    setting: str
    K: int

    def __str__(self) -> str:
        return f"{self.method}/{self.setting_name}={self.setting}/K={self.K}"

    @classmethod
    def parse(cls, text: str) -> "StoryKey":
        try:
            method, setting, k = str(text).split("/")
            name, value = setting.split("=", 1)
            assert k.startswith("K=")
            return cls(method, name, value, int(k[2:]))
        except (ValueError, AssertionError):
            raise ValueError(f"{text!r} is not a λ-story key (method/gamma=γ/K=K)") from None


def unit_name(section: str, key: object) -> str:
    """How provenance and messages name one unit of a file: "runs/pi/0", "references/3", "units/pi/lambda=1.0/0"."""
    return f"{section}/{key}"


def unit_seed(name: str) -> str:
    """The seed a unit's name (`unit_name`) ends with: "runs/pi/3" -> "3", "references/3" -> "3"."""
    return str(name).rsplit("/", 1)[-1]


def runs_by_key(runs: Mapping[str, V]) -> Iterator[tuple[RunKey, V]]:
    """A results file's "runs" section as (RunKey, run) pairs."""
    for k, r in runs.items():
        yield RunKey.parse(k), r


def runs_of(runs: Mapping[str, V], method: str) -> dict[int, V]:
    """The runs of one method, by seed."""
    return {k.seed: r for k, r in runs_by_key(runs) if k.method == method}
