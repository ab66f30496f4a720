"""Every setting of the paper at a glance: the settings (each (benchmark, K) with published numbers) and their pages,
the overview table of their committed results files, and what a setting's page shows while its file is missing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..datafiles import REPO_ROOT
from .commands import missing_commands, needs_download
from .interpret import interpretation, number
from .paper import paper_table
from ..specs import SPECS


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
    """The overview table (links relative to book/reproduce/)."""
    lines = ["| Setting | Results file | Seeds | Methods | mean \\|ours − paper\\| ACC | Spearman ρ (ACC) | Page |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        link = f"[{r['title']}, K = {r['K']}]({r['page']}.md)"
        if r["exists"]:
            seeds = f"{r['seeds']}" + ("" if r["complete"] else " (incomplete)")
            lines.append(f"| {r['title']}, K = {r['K']} | `{r['file']}` | {seeds} | {r['methods']} | "
                         f"{number(r['gap_ACC']) if r['gap_ACC'] is not None else '–'} | "
                         f"{number(r['rho'], 2) if r['rho'] is not None else '–'} | {link} |")
        else:
            lines.append(f"| {r['title']}, K = {r['K']} | not yet (needs the data) | – | – | – | – | {link} |")
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
    """What a reproduction page shows in place of the committed table when there is no results file."""
    return (f"**No results yet.** There is no committed results file for {SPECS[benchmark].title}, K = {K}: "
            f"{_why_missing(benchmark, K)}. These commands make the file and its table:\n\n```\n"
            + "\n".join(missing_commands(benchmark, K)) + "\n```")
