"""The records of the intro (`book/intro.md`): what the paper's claims come to, each with its verdict and the test
behind it (the claims chapter's records, `page_claims`), the seeds behind them and how near the paper each Permuted
MNIST K lands. `findings_glue` returns the glue names the intro's Markdown reads, written out in full; the intro's
hidden cell asserts the premises of its sentences."""
from __future__ import annotations

from .page_claims import head_record, other_way_record, paper_against_record, part_counts


def seeds_of(ev) -> dict:
    """The seeds behind the findings: "files", {K: seeds} of the results files; "logs", {stream: seeds} of the
    training logs of claims 5 ("speed") and 6 ("angles") that ran."""
    return {"files": {K: len(res["config"]["seeds"]) for K, res in ev.results.items()},
            "logs": {k: len(ev.logs[k]["seeds"]) for k in ("speed", "angles") if k in ev.logs and ev.logs[k]["runs"]}}


def gaps_to_paper(benchmark: str, target: float) -> dict:
    """How near the paper a benchmark's results files land (`overview.overview_rows`): the K whose mean |ours −
    paper| ACC is within `target` ("near") and above it ("far"), each {K: gap, one decimal}; and the titles of the
    other benchmarks with no results file at any K ("without": {title: its main-text table}) or at some K only
    ("partly")."""
    from ..findings.paper import PAPER_SOURCES
    from ..report.overview import overview_rows

    rows = overview_rows()
    mine = [r for r in rows if r["benchmark"] == benchmark and r["gap_ACC"] is not None]
    others: dict = {}
    for r in rows:
        if r["benchmark"] != benchmark:
            others.setdefault((r["title"], r["benchmark"]), []).append(r["exists"])
    table = {b: src.split(" (")[0] for (b, _), src in PAPER_SOURCES.items() if "main text" in src}
    return {"near": {r["K"]: f"{r['gap_ACC']:.1f}" for r in mine if r["gap_ACC"] <= target},
            "far": {r["K"]: f"{r['gap_ACC']:.1f}" for r in mine if r["gap_ACC"] > target},
            "without": {t: table[b] for (t, b), e in others.items() if not any(e)},
            "partly": [t for (t, b), e in others.items() if any(e) and not all(e)]}


def findings_glue(heads: dict, bound: dict, task2: dict, seeds: dict, gaps: dict, benchmark: str,
                  target: float) -> dict:
    """The intro's findings: per claim its title and the test behind its verdict (`page_claims.head_record` of
    `heads`, {claim: `claims.headline` row}) and, where its parts disagree, the parts; the estimates that point the
    other way (claims 1 and 4) and the paper's numbers against a part (2b, 4); claim 7's γ = β control; claim 6's
    bound and task 2 (`page_claims.largest_angles` `bound`, `task2_record` `task2`); the seeds (`seeds_of`) and the
    gaps to the paper per K (`gaps_to_paper`, within `target` points or not)."""
    c1, c2a, c2b, c3, c4, c5, c6, c7 = (head_record(heads[c]) for c in ("1", "2a", "2b", "3", "4", "5", "6", "7"))
    ow1, ow4 = (other_way_record(heads[c]["other_way"][0]) for c in ("1", "4"))
    pa2b, pa4 = (paper_against_record(heads[c]["paper_against"][0], benchmark) for c in ("2b", "4"))
    gap = {**gaps["near"], **gaps["far"]}
    return {"files_seeds": seeds["files"][20], "logs_seeds": seeds["logs"]["speed"],
            "c1_title": c1["title"], "c1_behind": c1["behind"], "c1_part_kind": c1["part_kind"],
            "c1_parts": c1["parts"],
            "c1_ow_mean": ow1["mean"], "c1_ow_seeds": ow1["seeds"],
            "c2a_title": c2a["title"], "c2a_behind": c2a["behind"], "c2a_part_kind": c2a["part_kind"],
            "c2a_parts": c2a["parts"],
            "c2b_title": c2b["title"], "c2b_behind": c2b["behind"], "c2b_part_kind": c2b["part_kind"],
            "c2b_parts": c2b["parts"], "c2b_pa_table": pa2b["table"], "c2b_pa_test": pa2b["test"],
            "c2b_pa_at_K": pa2b["at_K"], "c2b_pa_paper": pa2b["paper"],
            "c3_title": c3["title"], "c3_behind": c3["behind"],
            "c4_title": c4["title"], "c4_behind": c4["behind"], "c4_ow_test": ow4["test"], "c4_ow_mean": ow4["mean"],
            "c4_ow_seeds": ow4["seeds"], "c4_pa_test": pa4["test"], "c4_pa_paper": pa4["paper"],
            "c5_title": c5["title"], "c5_behind": c5["behind"],
            "c6_title": c6["title"], "c6_behind": c6["behind"], "c6_cap": bound["cap"], "c6_lam": bound["lam"],
            "c6_beta": bound["beta"], "c6_task2_decided": task2["decided"], "c6_task2_n": task2["n"],
            "c7_title": c7["title"], "c7_behind": c7["behind"], "c7_other_counts": part_counts(heads["7"]["parts"][0]),
            "target": f"{target:g}", "gap_20": gap[20], "gap_50": gap[50], "gap_200": gap[200], "gap_500": gap[500]}
