"""The records of the claims chapter (`book/chapters/07_claims.md`), and of the claims' findings the intro states
(`page_intro`): each claim's verdict table (its verdict, the test behind it, its parts, the estimates that point the
other way, the paper's numbers against a part, the tests not counted), the tests' tables, the seeds and logs behind
them. `claims_glue`, `summary_glue`, `claim6_glue` and `claim7_glue` return the glue names the chapter's Markdown
reads, written out in full. Numbers, short labels, records and tables; the sentences are the page's Markdown."""
from __future__ import annotations

from ..findings import claims as _C, stats as _S
from .formatting import num as _num, pts, table_md

#: What a claim's parts are (`claims.claim_parts`), where they are not its metrics.
PART_KINDS = {"5": "method pair", "6": "statistic", "7": "control"}


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


def verdict_table(c, rows: list[dict], head: dict, benchmark: str):
    """Claim `c`'s verdict table, built from its tests `rows` (`claims.verdict_rows`) and its headline `head`
    (`claims.headline`): the verdict with Holm's correction and raw, the counts of the tests counted, the test
    behind the verdict, the verdict per K and per part where the claim has several, the undecided estimates that
    point the other way, the paper's numbers against a part, and the tests shown but not counted. A row only where
    the claim has it; the chapter's method paragraph says how to read each."""
    import pandas as pd

    v, b, h = verdict_record(rows), beyond_record(rows), head_record(head)
    out = {"verdict, Holm / raw": f"**{v['verdict']}** / {v['raw']}",
           "tests counted": f"{v['n']}: with Holm {v['holm']}; raw {v['raw_counts']}",
           "test behind it": f"{v['behind_test']}, {v['behind_column']}: {v['behind_mean']}, Holm p {v['behind_p']}"}
    if v["by_K"]:
        out["by K, Holm / raw"] = v["by_K"]
    if len(head["parts"]) > 1:
        out[f"by {h['part_kind']}, Holm"] = h["parts_verdicts"]
    if head["other_way"] and v["verdict"] == _S.INCONCLUSIVE:
        out["other way, undecided"] = "; ".join(f"{o['test']}{o['at_K']}: {o['mean']}, {o['seeds']} seeds for it"
                                                for o in map(other_way_record, head["other_way"]))
    if head["paper_against"]:
        out["paper against it"] = "; ".join(
            f"{r['part']}: {o['test']}{o['at_K']}: paper's {o['table']} {o['paper']}, ours {o['ours']}, p(Holm) "
            f"{o['p_holm']}" for r, o in ((r, paper_against_record(r, benchmark)) for r in head["paper_against"]))
    if b["n"]:
        out["not counted"] = f"{b['n']} at K = {b['ks']}, raw {b['raw_counts']}; stated at K = {b['stated']}"
    if b["others"]:
        out["not counted"] = f"{b['others']} repeated runs (below)"
    return pd.DataFrame({f"Claim {c.id}": list(out), "": list(out.values())})


#: Chapter 7's glue names per claim, written out: its quote, its verdict (the Holm one), its verdict table
#: (`verdict_table`), its tests' table (`tests_table`) and its figure (`plots.claim_differences`).
CLAIM_GLUE = {"1": ("quote_1", "verdict_1", "verdict_table_1", "claim_1", "fig_claim_1"),
              "2a": ("quote_2a", "verdict_2a", "verdict_table_2a", "claim_2a", "fig_claim_2a"),
              "2b": ("quote_2b", "verdict_2b", "verdict_table_2b", "claim_2b", "fig_claim_2b"),
              "3": ("quote_3", "verdict_3", "verdict_table_3", "claim_3", "fig_claim_3"),
              "4": ("quote_4", "verdict_4", "verdict_table_4", "claim_4", "fig_claim_4"),
              "5": ("quote_5", "verdict_5", "verdict_table_5", "claim_5", "fig_claim_5"),
              "6": ("quote_6", "verdict_6", "verdict_table_6", "claim_6", "fig_claim_6"),
              "7": ("quote_7", "verdict_7", "verdict_table_7", "claim_7", "fig_claim_7")}


def claims_glue(rows: list[dict], heads: dict, benchmark: str) -> dict:
    """Each claim of the registry (`claims.CLAIMS`) under its names of `CLAIM_GLUE`: its quote, its verdict, its
    verdict table, its tests' table and its figure of per-seed differences (the caller closes the figures)."""
    from IPython.display import Markdown

    from ..report.plots import claim_differences

    if list(CLAIM_GLUE) != [c.id for c in _C.CLAIMS]:
        raise ValueError(f"CLAIM_GLUE names claims {list(CLAIM_GLUE)}; the registry has {[c.id for c in _C.CLAIMS]}")
    frame, out = _C.differences_frame(rows), {}
    for c in _C.CLAIMS:
        mine = [r for r in rows if r["claim"] == c.id]
        quote_, verdict, verdict_table_, tests, fig = CLAIM_GLUE[c.id]
        out |= {quote_: Markdown(quote(c)), verdict: _C.claim_verdict(mine),
                verdict_table_: table_md(verdict_table(c, mine, heads[c.id], benchmark)),
                tests: table_md(tests_table(mine)), fig: claim_differences(frame, c.id)}
    return out


def summary_glue(ev, rows: list[dict], heads: dict) -> dict:
    """The summary and the method: the summary's and the files' tables, the parts of the claims whose parts disagree
    (1, 2a, 2b), what Holm's correction changes (`holm_changes`), the training logs (`logs_record`), the level and
    what the seeds can show (`seeds_record`), and claim 3's mean and seeds (which tests/test_claims.py reads)."""
    from IPython.display import Markdown

    from ..findings.evidence import stream_fingerprint

    c1, c2a, c2b = (head_record(heads[c]) for c in ("1", "2a", "2b"))
    holm, logs, s = holm_changes(heads.values(), rows), logs_record(ev.logs), seeds_record(_C.seed_power(rows))
    claim3 = next(r for r in rows if r["claim"] == "3")
    verdict = {c: _C.claim_verdict([r for r in rows if r["claim"] == c]) for c in ("1", "2a", "2b")}
    return {"summary_table": table_md(summary_table(heads.values())), "files_table": table_md(files_table(ev.results)),
            "c1_verdict": verdict["1"], "c1_part_kind": c1["part_kind"], "c1_parts_verdicts": c1["parts_verdicts"],
            "c2a_verdict": verdict["2a"], "c2a_part_kind": c2a["part_kind"],
            "c2a_parts_verdicts": c2a["parts_verdicts"],
            "c2b_verdict": verdict["2b"],
            "c2b_part_kind": c2b["part_kind"], "c2b_parts_verdicts": c2b["parts_verdicts"],
            "holm_n": holm["n"], "holm_undone": holm["undone"],
            "logs_speed_K": logs.get("speed_K", "–"), "logs_speed_tasks": logs.get("speed_tasks", "–"),
            "logs_speed_seeds": logs.get("speed_seeds", "–"), "logs_angles_K": logs.get("angles_K", "–"),
            "logs_angles_tasks": logs.get("angles_tasks", "–"), "logs_angles_seeds": logs.get("angles_seeds", "–"),
            "logs_from": Markdown(logs["source"]), "stream_id": stream_fingerprint(ev.logs), "alpha": f"{_S.ALPHA:g}",
            "seeds_n": s["n"], "seeds_m": s["m"], "seeds_alpha": s["alpha"], "seeds_sign_p": s["sign_p"],
            "seeds_t": s["t"], "seeds_effect": s["effect"], "seeds_effect_holm": s["effect_holm"], "seeds_sd": s["sd"],
            "seeds_effect_pts": s["effect_pts"], "seeds_effect_holm_pts": s["effect_holm_pts"],
            "seeds_power": s["power"], "seeds_one_in": s["one_in"],
            "claim3_mean": round(claim3["mean"], 2), "claim3_n": claim3["n"]}


def claim6_glue(ev) -> dict:
    """Claim 6's notes: the projection's bound against the largest angles (`largest_angles`) and the statistics on
    task 2 (`task2_record`)."""
    bound, task2 = largest_angles(ev), task2_record(ev)
    return {"c6_cap": bound.get("cap", "–"), "c6_lam": bound.get("lam", "–"), "c6_beta": bound.get("beta", "–"),
            "c6_lam_label": bound.get("lam_label", "–"), "c6_beta_label": bound.get("beta_label", "–"),
            "c6_task2_n": task2["n"], "c6_task2_decided": task2["decided"],
            "c6_task2_verdict0": task2.get("verdict0", "–"), "c6_task2_mean0": task2.get("mean0", "–"),
            "c6_task2_verdict1": task2.get("verdict1", "–"), "c6_task2_mean1": task2.get("mean1", "–"),
            "c6_task2_verdict2": task2.get("verdict2", "–"), "c6_task2_mean2": task2.get("mean2", "–")}


def claim7_glue(rows: list[dict], head: dict) -> dict:
    """Claim 7's notes: its verdict, the γ = β control's counts and the test behind its verdict (its first part),
    and the table of the controls that repeat the main file's runs (`repeats_table`)."""
    g_beta, mine = head["parts"][0], [r for r in rows if r["claim"] == "7"]
    return {"c7_verdict": _C.claim_verdict(mine), "c7_gbeta_counts": part_counts(g_beta),
            "c7_gbeta_behind": number_behind(g_beta["deciding"]), "repeats_7": table_md(repeats_table(mine))}
