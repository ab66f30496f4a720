"""The records of the claims' pages (intro.md and chapters/07_claims.md): each claim's verdict and the number
behind it, its parts, the estimates that point the other way, the paper's numbers against a part, the tests' tables,
the seeds and logs behind them. Numbers, short labels, records and tables; the sentences are the pages' Markdown.
Glueing and Markdown tables: `publish.pagekit`."""
from __future__ import annotations

from ..findings import claims as _C, stats as _S
from ..report.tables import minus as _minus

#: What a claim's parts are (`claims.claim_parts`), where they are not its metrics.
PART_KINDS = {"5": "method pair", "6": "statistic", "7": "control"}


def pts(x, unit: str = "points", fmt: str = "+.1f") -> str:
    """A difference with its unit and a real minus sign: "−0.8 pts", "+11.3°"; "–" for none."""
    if x is None or x != x:
        return "–"
    return _minus(format(x, fmt)) + ("°" if unit == "degrees" else " pts")


def at_K(row: dict) -> str:
    """" at K = 20" for a test at one K; "" for one across K (claim 4: its name says so)."""
    return "" if row["K"] is None or not isinstance(row["K"], int) else f" at K = {row['K']}"


def number_behind(h: dict) -> str:
    """The test behind a claim's verdict and its number (a summary cell): "EWC-MetaCL-β − EWC, BT at K = 20:
    −0.8 pts, p(Holm) 0.002"; "+0.4 pts against 8" for a threshold claim; "–" where no counted test ran."""
    if h["mean"] is None:
        return "–"
    against = f" against {h['threshold']:g}" if h["threshold"] else ""
    return f"{h['test']}{at_K(h)}: {pts(h['mean'], h['unit'])}{against}, p(Holm) {_S.format_p(h['p_holm'])}"


def part_counts(p: dict) -> str:
    """How many of a part's tests have each Holm verdict: "2 of 3 refuted, 1 inconclusive"."""
    each = [f"{p[v]} {v}" for v in (_S.CONFIRMED, _S.REFUTED, _S.INCONCLUSIVE) if p[v]]
    return ", ".join([each[0].replace(" ", f" of {p['n']} ", 1)] + each[1:])


def parts_list(h: dict, verdicts: bool = False) -> str:
    """A claim's parts with their counts: "ACC (3 of 3 confirmed), BT (2 of 3 refuted, 1 inconclusive)"; with
    `verdicts`, each part's verdict too: "ACC confirmed (3 of 3 confirmed); BT refuted (...)"."""
    if verdicts:
        return "; ".join(f"{p['part']} {p['verdict']} ({part_counts(p)})" for p in h["parts"])
    return ", ".join(f"{p['part']} ({part_counts(p)})" for p in h["parts"])


def verdicts(heads: list[dict]) -> dict:
    """{claim id: its Holm verdict}, the premise of every sentence that states a verdict."""
    return {h["claim"]: h["verdict"] for h in heads}


def head_record(h: dict) -> dict:
    """What the intro and the summary glue of one claim: its title, the test behind its verdict (`number_behind`),
    its parts (`parts_list`, with and without their verdicts) and the kind of its parts (metric, control, ...)."""
    return {"title": h["title"], "behind": number_behind(h), "parts": parts_list(h),
            "parts_verdicts": parts_list(h, verdicts=True), "part_kind": PART_KINDS.get(h["claim"], "metric")}


def other_way_record(o: dict) -> dict:
    """An undecided estimate that points the other way (`claims.headline`'s "other_way"): its test, K, mean (two
    decimals) and how many seeds lie on the claim's side."""
    return {"test": o["test"], "at_K": at_K(o), "mean": pts(o["mean"], o["unit"], "+.2f"),
            "seeds": f"{o['n_agree']} of {o['n']}"}


def paper_against_record(o: dict, benchmark: str) -> dict:
    """A counted test where the paper's own difference lies on the other side (`claims.headline`'s
    "paper_against"): its test, K, the paper's table at K ("Table 1"; "tables" across K), the paper's number and
    ours with its Holm p."""
    from ..findings.paper import PAPER_SOURCES

    table = PAPER_SOURCES[(benchmark, o["K"])].split(" (")[0] if o["K"] else "tables"
    return {"test": o["test"], "at_K": at_K(o), "table": table, "paper": pts(o["paper"], o["unit"]),
            "ours": pts(o["mean"], o["unit"], "+.2f"), "p_holm": _S.format_p(o["p_holm"])}


def summary_table(heads: list[dict]):
    """Chapter 7's summary: one row per claim, its number a link to its section, its title, verdict and the test
    behind it (`number_behind`)."""
    import pandas as pd

    return pd.DataFrame({"#": [f"{{ref}}`{h['claim']} <claim-{h['claim']}>`" for h in heads],
                         "claim": [h["title"] for h in heads], "verdict": [h["verdict"] for h in heads],
                         "the test behind it": [number_behind(h) for h in heads]})


def _num(x, fmt: str = "+.2f") -> str:
    return "–" if x is None or x != x else _minus(format(x, fmt))


def row_name(r: dict) -> str:
    """A test's name in the tables: "PI-MetaCL-λ − PI-MetaCL-β, ACC (vs 8)" for a threshold test."""
    return r["test"] + (f" (vs {r['threshold']:g})" if r["threshold"] else "")


def tests_table(rows: list[dict]):
    """One row per test and K of a claim: the verdict "Holm / raw" first (bold where counted, "not counted"
    otherwise), the mean difference with its 95% interval, the seeds for the claim, the paper's own difference and
    the p-value with the Holm-adjusted one in brackets."""
    import pandas as pd

    def deg(r):
        return "°" if r["unit"] == "degrees" else ""

    return pd.DataFrame([{
        "test": row_name(r), "K": "–" if r["K"] is None else r["K"],
        "verdict: Holm / raw": (f"**{r['holm']}**" if r["counted"] else r["holm"]) + f" / {r['verdict']}",
        "mean difference [95% interval]": "–" if r["n"] == 0 else
        f"{_num(r['mean'])}{deg(r)} [{_num(r['ci95'][0])}, {_num(r['ci95'][1])}]",
        "seeds for": f"{r['n_agree']}/{r['n']}", "paper": _num(r["paper"]),
        "p (Holm)": _S.format_p(r["p"]) + (f" ({_S.format_p(r['p_holm'])})" if r["counted"] and r["n"] > 0 else "")}
        for r in rows])


def _counts(vs: list[str]) -> str:
    return ", ".join(f"{vs.count(k)} {k}" for k in (_S.CONFIRMED, _S.REFUTED, _S.INCONCLUSIVE))


def verdict_record(rows: list[dict]) -> dict:
    """A claim's verdict under its table: "verdict" and "raw" (`claims.claim_verdict`), "n" the counted tests that
    ran and "not_run" those that did not, "holm"/"raw_counts" how many have each verdict ("4 confirmed, 0 refuted,
    1 inconclusive"), the deciding test ("behind_test", "behind_column", "behind_mean", "behind_p"; `claims.
    deciding_test`) and "by_K", the verdict per K column, Holm / raw ("" where the claim has one column)."""
    counted = [r for r in rows if r["counted"]]
    ran = [r for r in counted if r["verdict"] != _S.NOT_RUN]
    d = _C.deciding_test(rows) or {}
    cols = list(dict.fromkeys(_C.column(r) for r in ran))
    by = {c: [r for r in ran if _C.column(r) == c] for c in cols}
    return {"verdict": _C.claim_verdict(rows), "raw": _C.claim_verdict(rows, holm=False), "n": len(ran),
            "not_run": len(counted) - len(ran), "holm": _counts([r["holm"] for r in ran]),
            "raw_counts": _counts([r["verdict"] for r in ran]), "behind_test": row_name(d) if d else "–",
            "behind_column": _C.column(d) if d else "–", "behind_mean": _num(d.get("mean")) + (
                "°" if d.get("unit") == "degrees" else ""), "behind_p": _S.format_p(d["p_holm"]) if d else "–",
            "by_K": "; ".join(f"{c} {_C.claim_verdict(rs)} / {_C.claim_verdict(rs, holm=False)}"
                              for c, rs in by.items()) if len(cols) > 1 else ""}


def beyond_record(rows: list[dict]) -> dict:
    """A claim's tests shown beyond where the paper states it (not counted): "n", their "ks", their raw verdicts
    ("raw_counts"), where the paper states it ("scope": "main" or "all"; "stated": its K) and "others": how many
    tests are not counted for another reason."""
    out = [r for r in rows if not r["counted"]]
    beyond = [r for r in out if r["excluded"]["kind"] == "beyond"]
    ex = beyond[0]["excluded"] if beyond else {"scope": None, "ks": ()}
    return {"n": len(beyond), "ks": ", ".join(dict.fromkeys(str(r["K"]) for r in beyond)),
            "raw_counts": _counts([r["verdict"] for r in beyond if r["verdict"] != _S.NOT_RUN]),
            "scope": ex["scope"], "stated": ", ".join(map(str, ex["ks"])), "others": len(out) - len(beyond)}


def repeats_table(rows: list[dict]):
    """The tests a claim shows but does not count because their runs repeat the main file's (claim 7's γ = β
    controls where the tuned γ is β): the test, K, its raw verdict, the settings the runs share, on how many seeds
    the accuracy matrices are the same, and the main file's comparison it repeats."""
    import pandas as pd

    def config(same):
        c = same.get("configuration")
        return "–" if c is None else ", ".join(f"{k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}"
                                                for k, v in c.items()) or "no settings"

    reps = [r for r in rows if not r["counted"] and r["excluded"]["kind"] == "repeats"]
    return pd.DataFrame([{"test": row_name(r), "K": r["K"], "raw": r["verdict"],
                          "same configuration": config(r["excluded"]["same"]),
                          "same accuracy matrices": f"{r['excluded']['same'].get('matrices', 0)} seeds",
                          "repeats": f"{r['excluded']['test']} of {r['excluded']['file']} (claim "
                                     f"{r['excluded']['claim']})"} for r in reps])


def largest_angles(ev) -> dict:
    """Claim 6 against the projection's bound (`claims.largest_angle`): the bound, MetaCL-λ's and MetaCL-β's
    largest angle ⟨g2, gx⟩ on the last task (one decimal) and their labels; {} without training logs."""
    from ..findings import evidence as E
    from ..vocab import method_label

    top = _C.largest_angle(ev)
    if not top:
        return {}
    beta, lam = E.ANGLE_PAIR
    return {"cap": f"{_C.PROJECTION_CAP:g}", "lam": f"{top[lam]:.1f}", "beta": f"{top[beta]:.1f}",
            "lam_label": method_label(lam), "beta_label": method_label(beta),
            "bounded": top[lam] <= _C.PROJECTION_CAP < top[beta]}


def task2_record(ev) -> dict:
    """Claim 6's statistics on task 2 (raw verdicts), where the paper sees "similar compromise at the beginning":
    per statistic its verdict and mean ("+4.78°"), keyed by position, and how many of them the seeds decide."""
    first = _C.angle_tests(task=1)(ev)
    out = {"n": len(first), "decided": sum(r["verdict"] in (_S.CONFIRMED, _S.REFUTED) for r in first),
           "metrics": [r["metric"] for r in first]}
    for i, r in enumerate(first):
        out[f"verdict{i}"], out[f"mean{i}"] = r["verdict"], pts(r["mean"], r["unit"], "+.2f")
    return out


def seeds_record(pw: dict) -> dict:
    """`claims.seed_power` at its one seed count, formatted as the chapter shows it: n, m, alpha, the sign test's
    best p, t, the detectable effects in s and in points, the power and the 'one time in N'."""
    (k,) = pw["ns"]
    q = pw[k]
    return {"n": k, "m": pw["m"], "alpha": f"{pw['alpha']:g}", "sign_p": f"{q['sign_p']:.3g}", "t": f"{q['t']:.2f}",
            "effect": f"{q['effect']:.2f}", "effect_holm": f"{q['effect_holm']:.2f}", "sd": f"{pw['sd']:.2f}",
            "effect_pts": f"{q['effect'] * pw['sd']:.2f}", "effect_holm_pts": f"{q['effect_holm'] * pw['sd']:.2f}",
            "power": f"{pw['power']:.0%}", "one_in": round(1 / (1 - pw["power"])),
            "reaches_alpha": q["sign_p"] < pw["alpha"], "reaches_holm": q["sign_p"] < pw["alpha"] / pw["m"]}


def holm_changes(heads: list[dict], rows: list[dict]) -> dict:
    """What Holm's correction changes: the claims whose verdict it changes ("changed", raw → Holm), the tests
    counted that ran ("n") and how many of them are decided raw but inconclusive within their family."""
    counted = [r for r in rows if r["counted"] and r["n"] > 0]
    return {"changed": [(h["claim"], h["raw"], h["verdict"]) for h in heads if h["raw"] != h["verdict"]],
            "n": len(counted), "undone": sum(r["verdict"] in (_S.CONFIRMED, _S.REFUTED)
                                              and r["holm"] == _S.INCONCLUSIVE for r in counted)}


def files_table(results: dict):
    """The results files behind the claims: one row per K, its seeds and the command that made it."""
    import pandas as pd

    from ..report.commands import relative_command

    return pd.DataFrame([{"K": K, "seeds": len(res["config"]["seeds"]),
                          "command": f"`{relative_command(res['provenance']['command'])}`"}
                         for K, res in results.items()])


def seeds_of(ev) -> dict:
    """The seeds behind the findings: "files", {K: seeds} of the results files; "logs", {stream: seeds} of the
    training logs of claims 5 ("speed") and 6 ("angles") that ran."""
    return {"files": {K: len(res["config"]["seeds"]) for K, res in ev.results.items()},
            "logs": {k: len(ev.logs[k]["seeds"]) for k in ("speed", "angles") if k in ev.logs and ev.logs[k]["runs"]}}


def quote(claim) -> str:
    """A claim's words in the paper as a Markdown block quote, with where the paper says them."""
    return f"> {claim.quote}\n>\n> — {claim.where}"


#: Where the training logs of claims 5 and 6 come from (`evidence.dynamics_logs`' "source" kind), as chapter 7's
#: evidence line names it.
LOG_SOURCES = {"file": "read from `{path}`, made by `{command}`",
               "live": "trained on this page (a live run; nothing written)",
               "missing": "no training logs: {path} does not exist (`{command}` makes it)"}


def logs_record(logs: dict) -> dict:
    """The streams of claims 5 ("speed_") and 6 ("angles_"): K, tasks and seeds of each, and "source" (`LOG_SOURCES`
    filled in); the streams' fields are absent without training logs."""
    src = logs["source"]
    out = {"source": LOG_SOURCES[src["kind"]].format(**src)}
    for k in ("speed", "angles"):
        if k in logs:
            out.update({f"{k}_K": logs[k]["K"], f"{k}_tasks": logs[k]["n_tasks"], f"{k}_seeds": len(logs[k]["seeds"])})
    return out


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
