"""The memory family's grid on Permuted MNIST (issue 44, an extension): which results files `make reproduce-memory`
makes, with which methods and seeds, and the estimate of its CPU time that decided the seeds at K = 500.

The grid (`plan`): at each of the paper's K = 20, 50, 200, 500, a budget of M = 1 example per class of each past task
for every method of the memory family, and M = 5 for those without a knob (A-GEM, ER, MetaCL-A-GEM: a budget is
reported side by side, not tuned); a method with a knob (MetaCL-lambda with both references: its gamma) has it chosen
on the validation split at M = 1 first (`tune --memory 1`), so it runs at that budget only: on the whole grid, except
at K = 500, where it searches a window around the value tuned at K = 200 (`AROUND`, `tune --around 200`), as the
paper's methods were tuned at K = 500 (`make reproduce-pmnist`). Each file trains with the `--compile` of the paper's
file at its K (`paper_compile`: "auto" at K = 500), whose runs it is paired with. Ten seeds, as the paper's files; at
K = 500, whose units take longest, five (`SEEDS_AT`).

`python -m metacl_lite.lab.memory_plan` prints the grid one file a line, "K M seeds methods tune around compile" (tune:
"tune" where that K's knobs are chosen before the file is run, else "-"; around: the K whose values centre that
tuning's window, else "-"; compile: the run's --compile), which the Makefile reads. Torch-free: it reads the
vocabulary and the results files only.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple, Optional

from ..paths import REPO_ROOT
from ..vocab import MEMORY_METHODS, regulariser_of

BENCHMARK = "pmnist"
#: The paper's K on Permuted MNIST (Table 1), where the memory's methods run.
KS = (20, 50, 200, 500)
#: The budgets, M examples per class of each past task: M = 1 for every memory method, M = 5 for those without a knob.
BUDGETS = (1, 5)
#: Seeds per file: ten, as the paper's files; five at K = 500, whose units take longest (issues 44 and 52).
SEEDS_AT = {20: 10, 50: 10, 200: 10, 500: 5}
#: {K: K'}: the K whose tuned values centre a windowed search of the knobs at K (`tune --around K'`), as the paper's
#: methods at K = 500; the window's size for one method: gamma = 0 and two half-decades either side of the centre
#: (`lattice.WINDOW`), before any extension at an edge.
AROUND = {500: 200}


class Step(NamedTuple):
    """One results file of the grid: its K, budget M, seeds, methods, whether the knobs are tuned first, and the K
    whose values centre that tuning's window (None: the whole grid), and the run's --compile (`paper_compile`)."""

    K: int
    M: int
    seeds: int
    methods: tuple[str, ...]
    tune: bool
    around: Optional[int] = None
    compile: str = "off"

    def tune_args(self) -> list[str]:
        """The options of this step's tuning after `tune --benchmark B`: its K, budget and window."""
        return ["--K", str(self.K), "--memory", str(self.M)] + (["--around", str(self.around)] if self.around else [])


def has_knob(method: str) -> bool:
    """Whether a memory method has a value to choose on validation data: a regulariser's MetaCL-lambda as its base
    (gamma); A-GEM, ER and MetaCL-A-GEM (bases fine-tune and MetaCL w/o reg) have none."""
    return regulariser_of(MEMORY_METHODS[method].base) is not None


def methods_at(M: int) -> tuple[str, ...]:
    """The memory methods run with budget M: all at M = 1, those without a knob at the other budgets."""
    return tuple(m for m in MEMORY_METHODS if M == 1 or not has_knob(m))


def _recorded_compile(path: Path, *keys: str) -> Optional[str]:
    """The --compile a file records in the dict under `keys` ("off" where it records none); None without the file."""
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    for key in keys:
        doc = doc[key]
    return doc.get("compile", "off")


def paper_compile(K: int, folder: Path = REPO_ROOT / "results") -> str:
    """The --compile of the paper's results file at K ("off" where it records none): a memory file trains with the
    same, as its runs are paired seed by seed with that file's (`findings.memory.check_pairing` compares the training
    settings; compiled and eager task gradients round otherwise)."""
    return _recorded_compile(folder / f"{BENCHMARK}-K{K}.json", "config", "train") or "off"


def tuning_compile(K: int, M: int, folder: Path = REPO_ROOT / "results") -> Optional[str]:
    """The --compile of the memory's tuning file at K and budget M ("off": eager; None: no such file)."""
    return _recorded_compile(folder / f"tuning-{BENCHMARK}-K{K}-memory-M{M}.json", "protocol")


def plan(seeds_at: Optional[dict] = None, folder: Path = REPO_ROOT / "results") -> list[Step]:
    """The grid in the order it runs: for each K, M = 1 (knobs tuned first) then M = 5. `seeds_at` ({K: seeds}):
    `SEEDS_AT` unless given."""
    seeds_at = SEEDS_AT if seeds_at is None else seeds_at
    steps = []
    for K in KS:
        compile_ = paper_compile(K, folder)  # one read of the paper's file per K
        for M in BUDGETS:
            tune = M == 1 and any(map(has_knob, methods_at(M)))
            steps.append(Step(K, M, seeds_at[K], methods_at(M), tune, AROUND.get(K) if tune else None, compile_))
    return steps


def decided_seeds() -> dict[int, int]:
    """The seeds of each K's files (`SEEDS_AT`)."""
    return dict(SEEDS_AT)


def main(argv: list[str]) -> int:
    import argparse  # no options: one given (an old --estimate) is refused, not ignored

    argparse.ArgumentParser(prog="python -m metacl_lite.lab.memory_plan", description=__doc__.split("\n\n")[0]
                            ).parse_args(argv)
    for s in plan():
        print(s.K, s.M, s.seeds, ",".join(s.methods), "tune" if s.tune else "-", s.around or "-", s.compile)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
