"""Every setting of the paper at a glance, as records for book/reproduce/overview.md and the pages of settings without
a results file: the settings (each (benchmark, K) with published numbers) and their pages, the overview rows of their
committed results files, and what tuning once at a benchmark's tuning K costs and moves.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..paths import REPO_ROOT
from .interpret import interpretation
from ..data.specs import SPECS


def paper_settings() -> list[tuple[str, int]]:
    """Every (benchmark, K) the paper publishes numbers for, in the paper's order."""
    return [(b, K) for b, spec in SPECS.items() for K in spec.paper_Ks]


def page_stem(benchmark: str, K: int) -> str:
    """The reproduction page of a setting: the template is Permuted MNIST K = 20, the rest follow it."""
    return "benchmark" if (benchmark, K) == ("pmnist", 20) else f"{benchmark}-K{K}"


def overview_rows(results_dir: Optional[Path] = None) -> list[dict[str, Any]]:
    """One row per setting of the paper: whether the committed results file exists, its seeds (and whether every row
    has them all), the mean |ours − paper| in ACC, ρ, and the page."""
    from ..lab.store import load_results

    results_dir = Path(results_dir) if results_dir else REPO_ROOT / "results"
    rows = []
    for b, K in paper_settings():
        path = results_dir / f"{b}-K{K}.json"
        row: dict[str, Any] = {"benchmark": b, "title": SPECS[b].title, "K": K, "file": f"results/{b}-K{K}.json",
                               "exists": path.exists(), "page": page_stem(b, K), "seeds": None,
                               "complete": None, "gap_ACC": None, "rho": None, "methods": None}
        if path.exists():
            res = load_results(path)
            info = interpretation(res)
            row.update(seeds=len(res["config"]["seeds"]), complete=not info["incomplete"],
                       gap_ACC=info["gaps"]["ACC"]["mean_abs"], rho=info["rank"]["rho"],
                       methods=len(res["config"]["methods"]))
        rows.append(row)
    return rows


def tuning_cost(seeds: int = 5) -> tuple[int, int]:
    """(training runs of one `tune` at the default grids: every tunable method at every value of its grid and every
    tuning seed; training runs of `run` with `seeds` seeds: every method of its default, the paper's, at every
    seed)."""
    from ..lab.hparams import strength_key
    from ..lab.tuning import BETA_GRID, GAMMA_GRID, TUNABLE, TUNING_SEEDS
    from ..vocab import PAPER_METHOD_NAMES

    grid = sum(len(GAMMA_GRID if strength_key(m) == "gamma" else BETA_GRID) for m in TUNABLE)
    return grid * len(TUNING_SEEDS), len(PAPER_METHOD_NAMES) * seeds


def tuned_values_shrink(benchmark: str = "pmnist", hp: Optional[dict] = None) -> list[dict[str, Any]]:
    """Per K tuned on its own (other than the benchmark's tuning K), how many of the paper's regularised methods'
    chosen β/γ are smaller than at the tuning K (`smaller`, of `n` methods tuned at both), from hparams.json
    (`lab.hparams.tuned_at`). The memory's γ (chapter 9, tuned for its own methods) is not counted."""
    from ..lab.hparams import tuned_at
    from ..lab.tuning import TUNABLE

    spec = SPECS[benchmark]
    base = tuned_at(benchmark, spec.tuning_K, hp)
    out = []
    for K in spec.all_Ks:
        here = tuned_at(benchmark, K, hp) if K != spec.tuning_K else {}
        common = [m for m in TUNABLE if m in here and m in base]
        if common:
            value = lambda e: next(iter(e.values()))  # noqa: E731  (beta or gamma: one value per method)
            out.append({"K": K, "n": len(common), "smaller": sum(value(here[m]) < value(base[m]) for m in common)})
    return out
