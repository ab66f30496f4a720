"""The reproduction targets of a benchmark (issue 10), one row per K: whether the protocol is sound (β/γ tuned on
validation data at that K, every chosen value inside its grid, the seeds) and how near the paper we land.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..paths import REPO_ROOT
from ..vocab import regulariser_of
from .interpret import gaps, method_labels, rank_agreement
from ..data.specs import SPECS


#: Issue 10's targets for a reproduced setting of the paper: the mean |ours − paper| ACC at most this many points,
#: and every regularised method's |ours − paper| FA below this (single digits).
TARGET_ACC_GAP = 3.0
TARGET_FA_GAP = 10.0


def tuned_at_its_K(res: dict) -> Optional[bool]:
    """Whether every regularised method of a results file took β/γ tuned at the file's own K (`config.hparams_source`:
    "K=<K>: ..." or, at the benchmark's tuning K, "default: ..."); None when the file has no regularised method."""
    cfg = res["config"]
    K, spec = cfg["K"], SPECS[cfg["benchmark"]]
    src = cfg.get("hparams_source") or {}
    regularised = [m for m in cfg["methods"] if regulariser_of(m)]
    if not regularised:
        return None
    ok = (f"K={K}:",) + (("default:",) if K == spec.tuning_K else ())
    return all(str(src.get(m) or "").startswith(ok) for m in regularised)


def target_rows(benchmark: str = "pmnist", results_dir: Optional[Path] = None) -> list[dict[str, Any]]:
    """One row per K of the benchmark (`specs.BenchmarkSpec.all_Ks`): the results file's seeds, whether its β/γ were
    tuned at that K (`tuned_at_its_K`), the mean |ours − paper| ACC and the largest |ours − paper| FA of the regularised
    methods against `TARGET_ACC_GAP` and `TARGET_FA_GAP` (None where the paper has no table), how many ACC rows have
    the paper's mean outside our 95% interval with ours above it (`acc_above`) or below it (`acc_below`), Spearman's
    ρ, and whether every value chosen in the K's tuning file is interior to its grid (None without a tuning file)."""
    from ..lab.store import load, load_results

    folder = Path(results_dir) if results_dir else REPO_ROOT / "results"
    rows = []
    for K in SPECS[benchmark].all_Ks:
        row: dict[str, Any] = {"K": K, "in_paper": K in SPECS[benchmark].paper_Ks, "exists": False, "seeds": None,
                               "tuned_at_K": None, "acc_gap": None, "fa_max": None, "fa_method": None,
                               "rho": None, "interior": None, "acc_above": None, "acc_below": None}
        tuning = folder / f"tuning-{benchmark}-K{K}.json"
        if tuning.exists():
            row["interior"] = not any(load(tuning, "tuning").get("at_edge", {}).values())
        path = folder / f"{benchmark}-K{K}.json"
        if path.exists():
            res = load_results(path)
            g = gaps(res)
            fa = [(abs(d), m) for m, d in g["FA"]["by_method"].items() if regulariser_of(m)]
            row.update(exists=True, seeds=len(res["config"]["seeds"]), tuned_at_K=tuned_at_its_K(res),
                       acc_gap=g["ACC"]["mean_abs"], rho=rank_agreement(res)["rho"])
            if g["ACC"]["n"]:  # which way the ACC rows miss: the paper's mean outside our interval, above or below
                row["acc_above"] = sum(g["ACC"]["by_method"][m] > 0 for m in g["ACC"]["outside"])
                row["acc_below"] = sum(g["ACC"]["by_method"][m] < 0 for m in g["ACC"]["outside"])
            if fa:
                row["fa_max"], row["fa_method"] = max(fa)
        rows.append(row)
    return rows


def targets_frame(rows: list[dict[str, Any]], part: str = "all"):
    """The table of `target_rows` as a DataFrame of short cells: in two narrow parts for the book (each readable in a
    390-px window), `part="protocol"` (K, seeds, whether β/γ were tuned at that K, whether every tuned value is
    inside its grid) and `part="gaps"` (K, the mean |ours − paper| ACC and the largest |ours − paper| FA of a
    regularised method, each marked ✓ (target met) or ✗, and how many ACC rows have the paper's mean outside our
    interval, ours above / below it); or every column in one (`part="all"`)."""
    import pandas as pd

    yes = {True: "yes", False: "no", None: "–"}
    if part not in ("all", "protocol", "gaps"):
        raise ValueError(f"part is 'all', 'protocol' or 'gaps', not {part!r}")
    out = []
    for r in rows:
        acc, fa, way = _gap_cells(r) if r["exists"] else ("no results file yet", "–", "–")
        if r["exists"] and not r["in_paper"]:
            acc, fa, way = "beyond the paper", "–", "–" if part == "gaps" else way
        out.append({"K": r["K"], "Seeds": r["seeds"] if r["exists"] else "no results file yet",
                    "β/γ tuned at this K": yes[r["tuned_at_K"]] if r["exists"] else "–",
                    "Tuned values inside grid": yes[r["interior"]],
                    f"ACC gap (≤ {TARGET_ACC_GAP:g})": acc, f"Largest FA gap (< {TARGET_FA_GAP:g})": fa,
                    "Outside: above / below": way,
                    "ρ": ("–" if r["rho"] is None else f"{r['rho']:.2f}") if r["exists"] else "–"})
    df = pd.DataFrame(out)
    columns = {"protocol": [0, 1, 2, 3], "gaps": [0, 4, 5, 6], "all": [0, 1, 2, 4, 5, 6, 7, 3]}[part]
    return df.iloc[:, columns] if len(df) else df


def _gap_cells(r: dict[str, Any]) -> tuple[str, str, str]:
    """A row's ACC gap and largest FA gap, each marked ✓ (target met) or ✗, and which way the ACC rows miss."""
    def mark(v, ok):
        return "–" if v is None else f"{v:.1f} {'✓' if ok else '✗'}"

    fa = mark(r["fa_max"], r["fa_max"] is not None and r["fa_max"] < TARGET_FA_GAP)
    fa += f" ({method_labels()[r['fa_method']]})" if r["fa_method"] else ""
    acc = mark(r["acc_gap"], r["acc_gap"] is not None and r["acc_gap"] <= TARGET_ACC_GAP)
    way = "–" if r["acc_above"] is None else f"{r['acc_above']} / {r['acc_below']}"
    return acc, fa, way
