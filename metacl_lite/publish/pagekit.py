"""The book pages' one helper module: the small records and checks that several pages share (links to a claim or a
page, the premise a page's sentence rests on, tables for display). It returns numbers, records and tables; the
sentences are the pages' own Markdown. Sections by the pages that use them."""
from __future__ import annotations


# ---------------------------------------------------------------------------------------------------------------
# Shared by every page
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# The claims: intro.md and chapters/07_claims.md
# ---------------------------------------------------------------------------------------------------------------
from ..findings import claims as _C, stats as _S  # noqa: E402
from ..report.tables import minus as _minus  # noqa: E402

#: What a claim's parts are (`claims.claim_parts`), where they are not its metrics.
PART_KINDS = {"5": "method pair", "6": "statistic", "7": "control"}


def glue_all(prefix: str, record: dict) -> None:
    """Glue each value of `record` that a page shows (a string or a number) as `<prefix><key>`, not displayed."""
    from myst_nb import glue

    for key, value in record.items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            glue(f"{prefix}{key}", value, display=False)


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


def table_md(frame):
    """A table for a page's `{glue:md}` block: `frame` as Markdown (no index, numbers as formatted), so that its
    cells' Markdown (a link, bold) renders."""
    from IPython.display import Markdown

    return Markdown(frame.to_markdown(index=False, disable_numparse=True))


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




# ---------------------------------------------------------------------------------------------------------------
# The analysis: chapters/08_analysis.md
# ---------------------------------------------------------------------------------------------------------------
# Chapter 8's records are in publish/analysis.py (this module is over its 500 lines already).


# ---------------------------------------------------------------------------------------------------------------
# The reproductions: reproduce/*.md and the overview
# ---------------------------------------------------------------------------------------------------------------


def setting_record(benchmark: str, K: int) -> dict:
    """What the head of a reproduction page glues about its setting: "setting" ("Permuted MNIST, K = 20"),
    "paper_source" (where the paper's numbers are, or "none published for this K"), "paper_table" (its table alone,
    "Table 1"; "–" for none), "committed_file" (results/<benchmark>-K<K>.json), "present" (bool), "kind" (which tables
    exist: `pages.reproduction_kind`; "none" without either) and "run_yourself" (the `notebook` command of this
    setting)."""
    from ..data.specs import SPECS
    from ..findings.paper import PAPER_SOURCES
    from ..paths import REPO_ROOT
    from .pages import reproduction_kind

    name = f"results/{benchmark}-K{K}.json"
    try:
        kind = reproduction_kind(benchmark, K)
    except ValueError:
        kind = "none"
    source = PAPER_SOURCES.get((benchmark, K))
    return {"setting": f"{SPECS[benchmark].title}, K = {K}", "paper_source": source or "none published for this K",
            "paper_table": source.split(",")[0] if source else "–", "committed_file": name,
            "present": (REPO_ROOT / name).exists(), "kind": kind,
            "run_yourself": f"python -m metacl_lite notebook book/reproduce/benchmark.md -p benchmark {benchmark} "
                            f"-p K {K} -o runs/"}


def made_record(res: dict, name: str) -> dict:
    """How a committed results file was made: "n_seeds", "command" (from the repository's root), "commit" (the file's
    git_commit, 10 characters), "device", "invocations" (each invocation's seeds and wall-clock minutes, in order:
    "5 seeds in 11 min, then 5 seeds in 38 min"), and `elapsed_record`'s figures ("span_whole", "unit_whole",
    "together": the units' own times exceed the wall-clock time by over 5%, several ran at once). A file of schema 1
    (no invocation times) raises FileFormatError."""
    from ..report.commands import provenance_commands
    from ..report.timings import elapsed

    took = elapsed(res, name)
    seeds = lambda n: f"{n} seed{'s' if n > 1 else ''}"  # noqa: E731
    return {**elapsed_record(res, name), "n_seeds": len(res["config"]["seeds"]),
            "command": provenance_commands(res)["command"], "commit": (res["provenance"]["git_commit"] or "?")[:10],
            "device": res["provenance"]["device"],
            "invocations": ", then ".join(f"{seeds(i['seeds'])} in {i['span_min']:.0f} min"
                                          for i in took["invocations"])}


def live_record(benchmark: str, K: int, methods: list, seeds: int, epochs: int, n_tasks: int, quick: bool,
                device, out_dir: str) -> dict:
    """What a live run will train, before it trains: "n_methods", "labels" (the methods' labels, "; "-joined),
    "seeds", "tasks", "epochs", "protocol" ("the paper's", or "not the paper's": another stream, or `quick`'s smoke
    run of 3 tasks of 1 epoch), "device" and "out" (the folder, or "a temporary folder")."""
    from ..data.specs import SPECS
    from ..training import METHODS

    spec = SPECS[benchmark]
    return {"n_methods": len(methods), "labels": "; ".join(METHODS[m].label for m in methods), "seeds": seeds,
            "tasks": 3 if quick else n_tasks or spec.n_tasks, "epochs": 1 if quick else epochs or spec.epochs,
            "protocol": "the paper's" if not (quick or n_tasks or epochs) else "not the paper's",
            "device": device or spec.device, "out": out_dir or "a temporary folder"}


def live_run(benchmark: str, K: int, methods: list, seeds: int, epochs: int, n_tasks: int, quick: bool, device,
             out_dir: str) -> dict:
    """Train the live run (`grid.run_experiment`, continuing a file already in `out_dir`): {"results": the results
    document or None, "error": None, or the message of the DataError (the data are not on this machine) or the
    ConfigMismatch (`out_dir` holds a file of another configuration, kept as it is) that stopped it}."""
    import tempfile
    from pathlib import Path

    from ..data.datafiles import DataError
    from ..errors import ConfigMismatch
    from ..lab.grid import run_experiment

    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp())
    try:
        res = run_experiment(benchmark, K, seeds=range(seeds), methods=methods, out=out / f"{benchmark}-K{K}-live.json",
                             n_tasks=(3 if quick else n_tasks or None), epochs=(1 if quick else epochs or None),
                             show_progress=False, device=device)
    except (DataError, ConfigMismatch) as e:
        return {"results": None, "error": str(e)}
    return {"results": res, "error": None}


def live_done(res: dict) -> dict:
    """A finished live run's figures: "wall_s" (whole seconds, as text), "seeds", "tasks", "epochs"."""
    cfg = res["config"]
    return {"wall_s": f"{res['provenance']['wall_s_total']:.0f}", "seeds": len(cfg["seeds"]),
            "tasks": cfg["n_tasks"], "epochs": cfg["train"]["epochs"]}


def markdown(df, align=None):
    """A DataFrame as a Markdown table (numbers as written, negative ones with the minus sign), for `glue`."""
    return df.map(_minus).to_markdown(index=False, disable_numparse=True, **({"colalign": align} if align else {}))


def metric_tables(benchmark: str, K: int, committed) -> dict:
    """The three tables of a reproduction page, {"ACC"|"BT"|"FA": Markdown}: ours beside the paper's where both
    exist (`tables.comparison_rows`), ours alone, or the paper's alone (`tables.paper_rows`) without a results
    file. The rows of methods the paper did not run (an extension such as L2) come after the paper's rows and the
    joint oracle (`tables.ROW_ORDER`)."""
    from ..findings.paper import paper_table
    from ..report.tables import comparison_rows, metric_table_markdown, paper_rows

    rows = comparison_rows(committed) if committed is not None else paper_rows(benchmark, K)
    paper = paper_table(benchmark, K) is not None
    return {k: metric_table_markdown(rows, k, ours=committed is not None, paper=paper) for k in ("ACC", "BT", "FA")}


def interpretation_tables(info: dict) -> dict:
    """The tables of "What the comparison says" (`report.interpret`), as DataFrames: "gaps_table" and "family_table"
    (with the paper's columns only where the paper has numbers), "hparams_table" (β/γ, the K and the file they were
    tuned at) and "options_table" (the open choices about Ω and PI's ξ). "gaps_table" is absent without the paper's
    numbers."""
    from ..report.interpret import family_frame, gaps_frame, hparams_frame

    hp = hparams_frame(info)
    out = {"family_table": family_frame(info) if info["paper_source"] else family_frame(info).iloc[:, :3],
           "hparams_table": hp[["Method", "β/γ", "Tuned at K", "File"]],
           "options_table": hp[["Method", "Ω accumulated", "Ω normalised", "PI's ξ"]]}
    if info["paper_source"]:
        out["gaps_table"] = gaps_frame(info)
    return out


def interpretation_values(info: dict) -> dict:
    """`interpret.glue_values` with negative numbers written with the minus sign, and "rho_text" (ρ, two decimals;
    "–" for none)."""
    from ..report.interpret import glue_values

    rho = info["rank"]["rho"]
    return {**{k: _minus(v) for k, v in glue_values(info).items()},
            "rho_text": "–" if rho is None else _minus(f"{rho:.2f}")}


def missing_record(benchmark: str, K: int) -> dict:
    """What the page of a setting without a results file glues: "needs_download" ("yes"/"no"), "commands" (those
    that make the file), "tune_commands" (tune at this K, then run; [] unless `tune_here` is "possible"), the tuning
    cost ("n_tune" runs against "n_run", "cmd_seeds"), "make_runs" (the seeds and K of `make reproduce-<benchmark>`),
    "tune_K", "K0" (Permuted MNIST's tuning K) and "shrink" (per larger K, how many tuned values are smaller than at
    K0: `overview.tuned_values_shrink`), the validation images ("val_first", "val_last"), "tune_here" ("not
    needed", "possible" or "not possible"), "make_target", "own_Ks" and "beyond_Ks"."""
    from ..data.specs import SPECS
    from ..report.commands import SEEDS, make_target_steps, missing_commands, needs_download
    from ..report.overview import tuned_values_shrink, tuning_cost

    spec, K0 = SPECS[benchmark], SPECS["pmnist"].tuning_K
    n_tune, n_run = tuning_cost(SEEDS)
    here = "not needed" if K == spec.tuning_K else "possible" if K <= spec.val_offset else "not possible"
    steps = make_target_steps(benchmark) or {"own_Ks": [], "beyond_Ks": []}
    commands = missing_commands(benchmark, K)
    return {"needs_download": "yes" if needs_download(benchmark, K) else "no", "commands": commands,
            "tune_commands": [f"python -m metacl_lite tune --benchmark {benchmark} --K {K}"]
            + [c for c in commands if c.startswith("python -m metacl_lite run")] if here == "possible" else [],
            "n_tune": n_tune, "n_run": n_run, "cmd_seeds": SEEDS,
            "make_runs": f"{SEEDS} seeds " + (f"at K = {spec.paper_Ks[0]}" if len(spec.paper_Ks) == 1 else
                                              "of every K (" + ", ".join(map(str, spec.paper_Ks)) + ")"),
            "tune_K": spec.tuning_K, "K0": K0,
            "shrink": "; ".join(f"K = {r['K']}: {r['smaller']} of {r['n']}" for r in tuned_values_shrink("pmnist")
                                if r["K"] > K0) or "–",
            "val_first": spec.val_offset, "val_last": spec.val_offset + spec.val_per_class - 1, "tune_here": here,
            "make_target": f"make reproduce-{benchmark}", "own_Ks": ", ".join(map(str, steps["own_Ks"])) or "none",
            "beyond_Ks": ", ".join(map(str, steps["beyond_Ks"])) or "none"}


def hours(s: float) -> str:
    """A long time as a reader reads it: minutes under an hour (`timings.duration`), else hours ("4.2 h", "19 h")."""
    from ..report.timings import duration

    return duration(s) if s < 3600 else f"{s / 3600:.1f} h" if s < 36000 else f"{s / 3600:.0f} h"


def overview_frame(rows: list):
    """Every setting at a glance (`overview.overview_rows`): Setting (a link to its page), Seeds ("none yet" without
    a results file; "(incomplete)" after a file with rows of fewer seeds), ACC gap (one decimal) and ρ (two)."""
    import pandas as pd

    return pd.DataFrame({
        "Setting": [f"[{r['title']}, K = {r['K']}]({r['page']}.md)" for r in rows],
        "Seeds": [("none yet" if not r["exists"] else f"{r['seeds']}" + ("" if r["complete"] else " (incomplete)"))
                  for r in rows],
        "ACC gap": ["–" if r["gap_ACC"] is None else f"{r['gap_ACC']:.1f}" for r in rows],
        "ρ": ["–" if r["rho"] is None else f"{r['rho']:.2f}" for r in rows]})


def cpu_estimate_record(bench: dict, seeds: int) -> dict:
    """A CPU speed benchmark's estimate of a whole grid (`timings.bench_estimate`) as the overview glues it: "command"
    (a code span), "device_long", "reduced" and "cpu" (bools), "run_min" (one full run, whole minutes), "K",
    "n_methods" timed, "grid_h" (them × `seeds` seeds, whole hours), "n_table_methods" of the paper's table, "fold"
    (the whole grid over the timed methods, one decimal), "max_paper_K" and "suite"."""
    from ..report.timings import bench_estimate

    e = bench_estimate(bench, seeds)
    return {"command": f"`{e['command']}`", "device_long": e["device_long"], "reduced": e["reduced"], "cpu": e["cpu"],
            "run_min": f"{e['mean_run_s'] / 60:.0f}", "K": e["K"], "n_methods": e["n_methods"],
            "grid_h": f"{e['grid_s'] / 3600:.0f}", "n_table_methods": e["n_table_methods"],
            "fold": f"{e['n_table_methods'] / e['n_methods']:.1f}", "max_paper_K": e["max_paper_K"],
            "suite": e["suite"]}


#: How the estimate's table names each step of `make reproduce-<benchmark>` (`timings.reproduce_runs`).
STEPS = {"choices": "open choices", "tune": "β/γ tuning", "run": "the grid", "controls": "γ controls"}


def total_estimate_record(doc: dict, seeds: int) -> dict:
    """`make reproduce-<suite>` on one GPU (`timings.reproduce_gpu_estimate` of a GPU bench file): "total" (`hours`),
    "n_runs", "K0" (the timed grid's K), "scaled", "measured_seeds", "seeds", "times" (seeds over measured seeds),
    "concurrency" (one decimal) and "table" (Step, K, Runs, GPU time, "(timed)" after the step the file measured)."""
    import pandas as pd

    from ..report.timings import reproduce_gpu_estimate

    e = reproduce_gpu_estimate(doc, seeds)
    table = pd.DataFrame({"Step": [STEPS[st["step"]] for st in e["steps"]], "K": [st["K"] for st in e["steps"]],
                          "Runs": [st["n_runs"] for st in e["steps"]],
                          "GPU time": [hours(st["s"]) + (" (timed)" if st["measured"] else "") for st in e["steps"]]})
    return {"total": hours(e["total_s"]), "n_runs": e["n_runs"], "K0": e["K0"], "scaled": e["scaled"],
            "measured_seeds": e["measured_seeds"], "seeds": e["seeds"], "times": f"{e['seeds'] / e['measured_seeds']:g}",
            "concurrency": f"{e['concurrency']:.1f}", "table": table}


# ---------------------------------------------------------------------------------------------------------------
# Running this book and the reference: running.md, reference.md, chapters 1-6
# ---------------------------------------------------------------------------------------------------------------
def glue_record(prefix: str, record: dict) -> None:
    """Glue every value of `record` as `<prefix><key>`, not displayed: a number as itself (for `{glue:text}`), a
    string as Markdown (for `{glue:md}`, so that code spans render), a Markdown or DataFrame table as it is."""
    from IPython.display import Markdown
    from myst_nb import glue

    for key, value in record.items():
        glue(f"{prefix}{key}", Markdown(value) if isinstance(value, str) else value, display=False)


def _md(frame, **kw):
    from IPython.display import Markdown

    return Markdown(frame.to_markdown(**kw))


def elapsed_record(doc: dict, name: str) -> dict:
    """How long a results or tuning file took (`timings.elapsed`), as the pages show it: units, minutes (one
    decimal), device, commit, and the invocations' seeds, minutes and minutes a seed (whole minutes, one decimal)."""
    from ..report.timings import elapsed

    e = elapsed(doc, name)
    pace = [i["span_min"] / i["seeds"] for i in e.get("invocations", []) if i.get("seeds")]
    return {"units": e["units"], "runs": e["runs"], "span": f"{e['span_min']:.1f}", "unit": f"{e['unit_min']:.1f}",
            "span_whole": f"{e['span_min']:.0f}", "unit_whole": f"{e['unit_min']:.0f}", "device": e["device"],
            "commit": f"`{e['commit']}`", "together": e["unit_min"] > 1.05 * e["span_min"],
            "pace_fold": max(pace) / min(pace) if pace else 1.0, "pace_fold_text": f"{max(pace) / min(pace):.1f}"
            if pace else "1.0",
            **{f"seeds_{n}": i["seeds"] for n, i in enumerate(e.get("invocations", []), 1)},
            **{f"min_{n}": f"{i['span_min']:.0f}" for n, i in enumerate(e.get("invocations", []), 1)},
            **{f"pace_{n}": f"{p:.1f}" for n, p in enumerate(pace, 1)}}


#: The columns of a GPU grid's per-unit table (`timings.gpu_units`) as the reference heads them.
GPU_UNIT_COLUMNS = {"wall_s": "wall per unit (s), sharing the GPU", "peak_gb": "peak GPU memory (GB)"}


def gpu_grid_record(doc: dict) -> dict:
    """A GPU grid's benchmark (`timings.gpu_grid`, `gpu_units`) for the reference: what ran and where, the grid's
    time (measured or scaled from the timed seeds), the time we aim for and the ratio, and the per-unit table."""
    from ..report.timings import duration, gpu_grid, gpu_units

    g = gpu_grid(doc)
    u = gpu_units(doc).dropna(axis=1, how="all").rename(columns=GPU_UNIT_COLUMNS)
    return {**{k: g[k] for k in ("K", "n_methods", "n_tasks", "epochs", "workers", "seeds", "measured_seeds",
                                  "scaled", "met", "mps", "compile", "precision", "note_beyond_commit")},
            "command": f"`{g['command']}`", "device": g["device"], "commit": f"`{g['commit']}`", "data": g["data"],
            "grid": duration(g["grid_s"]), "measured": duration(g["wall_s_measured"]),
            "times": f"{g['seeds'] / g['measured_seeds']:g}", "target": duration(g["target_s"]),
            "ratio": f"{g['grid_s'] / g['target_s']:.1f}", "units": _md(u, floatfmt=".1f")}
