"""The book pages' shared helper module: the small records and checks that several pages share (links to a claim or a
page, the premise a page's sentence rests on, tables for display). It returns numbers, records and tables; the
sentences are the pages' own Markdown. Sections by the pages that use them."""
from __future__ import annotations

from ..report.tables import minus as _minus


# ---------------------------------------------------------------------------------------------------------------
# Shared by every page
# ---------------------------------------------------------------------------------------------------------------


def glue_all(prefix: str, record: dict, markdown: bool = False) -> None:
    """Glue the values of `record` as `<prefix><key>`, not displayed. By default each value a page shows as text (a
    string or a number, for `{glue:text}`); with markdown=True every value, a string as Markdown (for `{glue:md}`, so
    that code spans and links render), a number, table or figure as it is."""
    from IPython.display import Markdown
    from myst_nb import glue

    for key, value in record.items():
        if markdown:
            glue(f"{prefix}{key}", Markdown(value) if isinstance(value, str) else value, display=False)
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            glue(f"{prefix}{key}", value, display=False)


def table_md(frame, index: bool = False, numparse: bool = False, **kw):
    """A table for a page's `{glue:md}` block: `frame` as Markdown (by default without its index and with numbers as
    formatted), so that its cells' Markdown (a link, bold) renders; `kw` goes to `DataFrame.to_markdown`."""
    from IPython.display import Markdown

    return Markdown(frame.to_markdown(index=index, **({} if numparse else {"disable_numparse": True}), **kw))


# ---------------------------------------------------------------------------------------------------------------
# The analysis and the claims: their records are modules of their own (publish/analysis.py, publish/verdicts.py)
# ---------------------------------------------------------------------------------------------------------------


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
            "ratio": f"{g['grid_s'] / g['target_s']:.1f}", "units": table_md(u, index=True, numparse=True, floatfmt=".1f")}
