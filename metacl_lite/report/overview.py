"""Every setting of the paper at a glance: the settings (each (benchmark, K) with published numbers) and their pages,
the overview table of their committed results files, and what a setting's page shows while its file is missing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..data.datafiles import REPO_ROOT
from .commands import missing_commands, needs_download
from .interpret import interpretation, number
from .paper import paper_table
from ..data.specs import SPECS


def paper_settings() -> list[tuple[str, int]]:
    """Every (benchmark, K) the paper publishes numbers for, in the paper's order."""
    return [(b, K) for b, spec in SPECS.items() for K in spec.paper_Ks]


def page_stem(benchmark: str, K: int) -> str:
    """The reproduction page of a setting: the template is Permuted MNIST K = 20, the rest are its variants."""
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
            row.update(seeds=len(res["config"]["seeds"]), complete=info["incomplete"] is None,
                       gap_ACC=info["gaps"]["ACC"]["mean_abs"], rho=info["rank"]["rho"],
                       methods=len(res["config"]["methods"]))
        rows.append(row)
    return rows


def overview_markdown(rows: list[dict[str, Any]]) -> str:
    """The overview table, four narrow columns (links relative to book/reproduce/): the setting (a link to its page),
    the seeds of its results file ("none yet" without one), the mean |ours − paper| ACC ("ACC gap") and Spearman's
    ρ of the methods' ACC ("–" without a file); the page's caption says what the short headings mean."""
    lines = ["| Setting | Seeds | ACC gap | ρ |", "|:---|---:|---:|---:|"]
    for r in rows:
        link = f"[{r['title']}, K = {r['K']}]({r['page']}.md)"
        if r["exists"]:
            seeds = f"{r['seeds']}" + ("" if r["complete"] else " (incomplete)")
            lines.append(f"| {link} | {seeds} | "
                         f"{number(r['gap_ACC']) if r['gap_ACC'] is not None else '–'} | "
                         f"{number(r['rho'], 2) if r['rho'] is not None else '–'} |")
        else:
            lines.append(f"| {link} | none yet | – | – |")
    return "\n".join(lines)


def _why_missing(benchmark: str, K: int) -> str:
    if needs_download(benchmark, K):
        return "the run needs data that was not on the machine that built this page"
    return "it has not been run yet (it needs no download: the embedded MNIST subset has its data)"


def missing_markdown(benchmark: str, K: int) -> str:
    """The sentence a page shows instead of the interpretation when there is no results file for (benchmark, K)."""
    spec = SPECS[benchmark]
    return (f"**No interpretation yet.** There is no committed results file for {spec.title}, K = {K} "
            f"(`results/{benchmark}-K{K}.json`): {_why_missing(benchmark, K)}. Once the file exists, this paragraph "
            f"interprets it" + (" beside the paper's numbers." if paper_table(benchmark, K) else "."))


def missing_results_markdown(benchmark: str, K: int) -> str:
    """What a reproduction page shows in place of the committed table when there is no results file: why, the
    commands that make it and, where they tune at another K, why and what to do instead (`tuning_note_markdown`)."""
    from .commands import make_target_markdown

    note = tuning_note_markdown(benchmark, K)
    make = make_target_markdown(benchmark)
    return (f"**No results yet.** There is no committed results file for {SPECS[benchmark].title}, K = {K}: "
            f"{_why_missing(benchmark, K)}. These commands, run from the repository's root, make the file and its "
            f"tables:\n\n```text\n" + "\n".join(missing_commands(benchmark, K)) + "\n```"
            + (f"\n\n{note}" if note else "") + (f"\n\n{make}" if make else ""))


def tuning_cost(seeds: int = 5) -> tuple[int, int]:
    """(training runs of one `tune` at the default grids: every tunable method at every value of its grid and every
    tuning seed; training runs of `run` with `seeds` seeds: every method at every seed)."""
    from ..lab.hparams import strength_key
    from ..lab.tuning import BETA_GRID, GAMMA_GRID, TUNABLE, TUNING_SEEDS
    from ..training import METHODS

    grid = sum(len(GAMMA_GRID if strength_key(m) == "gamma" else BETA_GRID) for m in TUNABLE)
    return grid * len(TUNING_SEEDS), len(METHODS) * seeds


def tuned_values_shrink(benchmark: str = "pmnist", hp: Optional[dict] = None) -> list[dict[str, Any]]:
    """Per K tuned on its own (other than the benchmark's tuning K), how many methods' chosen β/γ are smaller than at
    the tuning K (`smaller`, of `n` methods tuned at both), from hparams.json (`lab.hparams.tuned_at`)."""
    from ..lab.hparams import tuned_at

    spec = SPECS[benchmark]
    base = tuned_at(benchmark, spec.tuning_K, hp)
    out = []
    for K in spec.all_Ks:
        here = tuned_at(benchmark, K, hp) if K != spec.tuning_K else {}
        common = [m for m in here if m in base]
        if common:
            value = lambda e: next(iter(e.values()))  # noqa: E731  (beta or gamma: one value per method)
            out.append({"K": K, "n": len(common), "smaller": sum(value(here[m]) < value(base[m]) for m in common)})
    return out


def tuning_note_markdown(benchmark: str, K: int) -> Optional[str]:
    """Why the commands of a setting choose β/γ at the benchmark's tuning K rather than at K (CIFAR-100 at K = 50,
    200, 500), what chapter 8 shows that costs, and the commands that tune at K itself where its validation images
    allow it (K at most `val_offset`); None where the commands tune at K already."""
    from .commands import missing_commands as _cmds

    spec = SPECS[benchmark]
    tune_K = spec.tuning_K
    if benchmark == "pmnist" or K == tune_K:
        return None
    n_tune, n_run = tuning_cost()
    moves = tuned_values_shrink("pmnist")
    larger = [r for r in moves if r["K"] > SPECS["pmnist"].tuning_K]
    K0 = SPECS["pmnist"].tuning_K
    ks = ", ".join(str(r["K"]) for r in larger)
    if larger and all(r["smaller"] == r["n"] for r in larger):
        smaller_sentence = (f"On Permuted MNIST, where every K is tuned on its own, chapter 8 (\"How β and γ move "
                            f"with K\") shows that the values chosen at K = {ks} are smaller than those chosen at "
                            f"K = {K0} for every regularised method: values chosen at K = {K0} are too strong for the "
                            f"larger K (they over-regularise), and the regularised rows understate those methods.")
    elif larger:
        smaller_sentence = (f"On Permuted MNIST, where every K is tuned on its own, chapter 8 (\"How β and γ move "
                            f"with K\") shows the values chosen at larger K smaller than at K = {K0} for "
                            + "; ".join(f"{r['smaller']} of {r['n']} methods at K = {r['K']}" for r in larger)
                            + f": values chosen at K = {K0} can over-regularise the larger K.")
    else:
        smaller_sentence = ("Chapter 8 (\"How β and γ move with K\") shows on Permuted MNIST how the chosen values "
                            "move with K.")
    head = (f"**Why `--K {tune_K}`.** Tuning trains every regularised method at every value of its grid: "
            f"{n_tune} runs of the stream at the default grids, against {n_run} for the five-seed run. To keep a "
            f"first reproduction of {spec.title} affordable, the commands choose β and γ once, at K = {tune_K}, "
            f"and every K uses them. That is not neutral. "
            + smaller_sentence)
    if K <= spec.val_offset:
        run = [c for c in _cmds(benchmark, K) if c.startswith("python -m metacl_lite run")]
        return (head + f" With the time, tune at K = {K} itself before the run (`run` then takes the values tuned "
                f"at this K, and the page's \"What produced this table\" says so):\n\n```text\n"
                f"python -m metacl_lite tune --benchmark {benchmark} --K {K}\n" + "\n".join(run) + "\n```")
    return (head + f" Tuning at K = {K} itself is not possible: the validation images are images {spec.val_offset} to "
            f"{spec.val_offset + spec.val_per_class - 1} of each class, which a run at K = {K} trains on, so `tune` "
            f"stops at K = {spec.val_offset}. Read this K's regularised rows as made with values that are probably "
            f"too strong.")

