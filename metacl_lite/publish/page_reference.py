"""The records of the reference (`book/reference.md`): the open choices and the K = 500 tuning file's times, the CPU
speed benchmarks, each benchmark's GPU grid and the GPU tests' last run. Each `*_glue` function returns the glue
names the page's Markdown reads, written out in full. Numbers, records and tables only: the page's sentences are its
Markdown, and its hidden cells assert the premises they rest on."""
from __future__ import annotations

from .formatting import minus as _minus, table_md
from .page_running import elapsed_record


def choices_record(doc: dict) -> dict:
    """The open choices (`results/open-choices-pmnist.json`) for the reference: the command, the rule, the table of
    validation accuracies per variant and K and the per-seed margins of each regulariser's candidate over base."""
    import pandas as pd

    from ..lab.choices import choices_table
    from ..report.tables import signed

    t = choices_table(doc).reset_index()
    t["regulariser"] = t["regulariser"].str.upper()
    t["variant"] = [f"`{v}`" + (" **(decided)**" if d else " (candidate)" if c else "")
                    for v, c, d in zip(t["variant"], t["candidate"], t["decided"])]
    t = t.drop(columns=["candidate", "decided"]).rename(columns=lambda c: c.replace("K=", "val. ACC, K = "))
    t = t.astype(object).where(t.notna(), None)  # a variant not tuned at a K: "–", not "nan"
    margins = pd.DataFrame({r.upper(): {"decision": f"`{d['decision']}`", "candidate": f"`{d['candidate']}`",
                                        **{f"K = {K}": ", ".join(signed(x, "+.2f") for x in xs)
                                           for K, xs in (d.get("per_seed_margin") or {}).items()
                                           if d["candidate"] != "base"}}
                            for r, d in doc["decisions"].items()}).T.fillna("–")
    from IPython.display import Markdown

    return {"command": f"`{doc['provenance']['command']}`", "rule": doc["rule"],
            "table": Markdown(_minus(t.to_markdown(index=False, floatfmt=".2f", missingval="–"))),
            "margins": table_md(index=True, numparse=True, frame=margins)}



def cpu_bench_record(doc: dict) -> dict:
    """A CPU speed benchmark (`timings.cpu_bench`) for the reference: its command, device and commit, the GEMM rates
    and evaluation bounds (MNIST) or the reduced run's size and the grid's hours (CIFAR-100, CUB), and its tables."""
    import pandas as pd

    from ..report.timings import cpu_bench

    b = cpu_bench(doc)
    r = {"command": f"`{b['command']}`", "device": b["device"], "commit": f"`{b['commit']}`",
         "grids_kind": "grids" in b, "reduced": bool(b.get("reduced")),
         "legacy": "grids" in b and len(b["grids"]) > 0 and bool(b["grids"].legacy_min.notna().all())}
    m = b["methods"]
    if "grids" in b:
        g = b["grids"]
        r |= {"gemm": f"{b['gemm_gflops']:.0f}", "gemm_1": f"{b['gemm_gflops_1thread']:.0f}",
              "tflop": f"{b['eval_tflop']:.2f}", "bound": f"{b['bound_s']:.1f}", "bound_1": f"{b['bound_s_1thread']:.1f}",
              "grids": table_md(index=True, numparse=True, frame=pd.DataFrame({
                  "runs + references + oracles": [f"{a} + {f} + {o}" for a, f, o in zip(g.runs, g.references, g.oracle)],
                  "seeds": g.seeds, "today's defaults (min)": g.new_min.map("{:.1f}".format),
                  "× evaluation bound": g.x_bound.map("{:.2f}".format),
                  **({"legacy path (min)": g.legacy_min.map("{:.1f}".format),  # timed by files made before issue 41
                      "speed-up": g.speedup.map("{:.2f}×".format)} if g.legacy_min.notna().any() else {})},
                  index=g.index.rename("whole grid, K")), disable_numparse=True)}
        if m is not None and len(m):
            r["methods"] = table_md(index=True, numparse=True, frame=pd.DataFrame({"wall (s)": m.wall_s.map("{:.1f}".format),
                                             "peak RSS (MB)": m.peak_mb.map("{:.0f}".format),
                                             "× one-thread evaluation bound": m.x_bound.map("{:.2f}".format)}),
                               disable_numparse=True)
    else:
        r |= {"n_tasks": b["n_tasks"], "epochs": b["epochs"], "grid_h": f"{'~' if b['reduced'] else ''}{b['grid_h']:.1f}",
              "methods": table_md(index=True, numparse=True, frame=pd.DataFrame({
                  "measured (s)": m.wall_s.map("{:.1f}".format),
                  "full run (min)": [f"{'~' if x else ''}{v:.1f}" for x, v in zip(m.extrapolated, m.full_run_min)]}),
                  disable_numparse=True)}
    return r



def gpu_check_record(doc: dict, test_file) -> dict:
    """The last run of the GPU tests (`timings.gpu_check`): command, device, commit, passed, failed, how many of the
    checkout's GPU tests it did not run, and the table (a test's name in words; "–" for the time of one not run)."""
    from ..report.timings import gpu_check, gpu_test_ids

    c = gpu_check(doc, gpu_test_ids(test_file))
    table = (c.assign(time_s=["–" if s != s else f"{s:.1f}" for s in c["time_s"]])
             .rename(index=lambda t: t.removeprefix("test_").replace("_", " ").replace("[", " ["))
             .rename(columns={"time_s": "s"}).rename_axis("GPU test"))
    return {"passed": c.attrs["passed"], "failed": c.attrs["failed"], "not_run": c.attrs["not_run"],
            "command": f"`{c.attrs['command']}`", "device": c.attrs["device"], "commit": f"`{c.attrs['commit']}`",
            "note_beyond_commit": c.attrs["note_beyond_commit"],
            "table": table_md(index=True, numparse=True, frame=table, disable_numparse=True, colalign=("left", "left", "right"))}



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


def choices_glue(choices: dict, tuning: dict, tuning_name: str) -> dict:
    """The head of the reference: the open choices (`choices_record` of results/open-choices-pmnist.json) and how
    long the K = 500 tuning file took (`page_running.elapsed_record`)."""
    ch, el = choices_record(choices), elapsed_record(tuning, tuning_name)
    return {"ch_command": ch["command"], "ch_rule": ch["rule"], "ch_table": ch["table"], "ch_margins": ch["margins"],
            "el_units": el["units"], "el_span": el["span"], "el_unit": el["unit"], "el_device": el["device"],
            "el_commit": el["commit"]}


def speed_glue(cpu: dict, gpu: dict, gc: dict) -> dict:
    """The Speed section: the CPU benchmarks `cpu` ({file's name: `cpu_bench_record`}), the GPU grids `gpu`
    ({benchmark: `gpu_grid_record`}) and the GPU tests' last run `gc` (`gpu_check_record`)."""
    k500, k20, cifar, cub = (cpu[n] for n in ("pmnist-K500", "pmnist-K20", "cifar100", "cub"))
    g_pm, g_cifar, g_cub = (gpu[b] for b in ("pmnist", "cifar100", "cub"))
    return {"b_pmnist_K500_command": k500["command"], "b_pmnist_K500_device": k500["device"],
            "b_pmnist_K500_commit": k500["commit"], "b_pmnist_K500_gemm": k500["gemm"],
            "b_pmnist_K500_gemm_1": k500["gemm_1"], "b_pmnist_K500_tflop": k500["tflop"],
            "b_pmnist_K500_bound": k500["bound"], "b_pmnist_K500_bound_1": k500["bound_1"],
            "b_pmnist_K500_grids": k500["grids"], "b_pmnist_K20_command": k20["command"],
            "b_pmnist_K20_device": k20["device"], "b_pmnist_K20_commit": k20["commit"],
            "b_pmnist_K20_gemm": k20["gemm"], "b_pmnist_K20_gemm_1": k20["gemm_1"],
            "b_pmnist_K20_tflop": k20["tflop"], "b_pmnist_K20_bound": k20["bound"],
            "b_pmnist_K20_bound_1": k20["bound_1"], "b_pmnist_K20_methods": k20["methods"],
            "b_pmnist_K20_grids": k20["grids"], "g_pmnist_command": g_pm["command"],
            "g_pmnist_device": g_pm["device"], "g_pmnist_commit": g_pm["commit"], "g_pmnist_K": g_pm["K"],
            "g_pmnist_n_methods": g_pm["n_methods"], "g_pmnist_n_tasks": g_pm["n_tasks"],
            "g_pmnist_epochs": g_pm["epochs"], "g_pmnist_data": g_pm["data"], "g_pmnist_workers": g_pm["workers"],
            "g_pmnist_seeds": g_pm["seeds"], "g_pmnist_grid": g_pm["grid"], "g_pmnist_target": g_pm["target"],
            "g_pmnist_units": g_pm["units"], "g_cifar100_command": g_cifar["command"],
            "g_cifar100_device": g_cifar["device"], "g_cifar100_commit": g_cifar["commit"],
            "g_cifar100_K": g_cifar["K"], "g_cifar100_n_methods": g_cifar["n_methods"],
            "g_cifar100_n_tasks": g_cifar["n_tasks"], "g_cifar100_epochs": g_cifar["epochs"],
            "g_cifar100_data": g_cifar["data"], "g_cifar100_workers": g_cifar["workers"],
            "g_cifar100_grid": g_cifar["grid"], "g_cifar100_seeds": g_cifar["seeds"],
            "g_cifar100_measured_seeds": g_cifar["measured_seeds"], "g_cifar100_measured": g_cifar["measured"],
            "g_cifar100_times": g_cifar["times"], "g_cifar100_target": g_cifar["target"],
            "g_cifar100_units": g_cifar["units"], "g_cub_command": g_cub["command"], "g_cub_device": g_cub["device"],
            "g_cub_commit": g_cub["commit"], "g_cub_K": g_cub["K"], "g_cub_n_methods": g_cub["n_methods"],
            "g_cub_n_tasks": g_cub["n_tasks"], "g_cub_epochs": g_cub["epochs"], "g_cub_data": g_cub["data"],
            "g_cub_workers": g_cub["workers"], "g_cub_grid": g_cub["grid"], "g_cub_seeds": g_cub["seeds"],
            "g_cub_measured_seeds": g_cub["measured_seeds"], "g_cub_measured": g_cub["measured"],
            "g_cub_times": g_cub["times"], "g_cub_target": g_cub["target"], "g_cub_ratio": g_cub["ratio"],
            "g_cub_units": g_cub["units"], "gc_command": gc["command"], "gc_device": gc["device"],
            "gc_commit": gc["commit"], "gc_passed": gc["passed"], "gc_failed": gc["failed"],
            "gc_not_run": gc["not_run"], "gc_table": gc["table"], "b_cifar100_command": cifar["command"],
            "b_cifar100_device": cifar["device"], "b_cifar100_commit": cifar["commit"],
            "b_cifar100_n_tasks": cifar["n_tasks"], "b_cifar100_epochs": cifar["epochs"],
            "b_cifar100_grid_h": cifar["grid_h"], "b_cifar100_methods": cifar["methods"],
            "b_cub_command": cub["command"], "b_cub_device": cub["device"], "b_cub_commit": cub["commit"],
            "b_cub_n_tasks": cub["n_tasks"], "b_cub_epochs": cub["epochs"], "b_cub_grid_h": cub["grid_h"],
            "b_cub_methods": cub["methods"]}
