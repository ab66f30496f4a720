"""The records of "Running this book" (`book/running.md`), the reference (`book/reference.md`) and chapter 3's widget:
the open choices, the CPU speed benchmarks, the GPU tests' last run, the page timings, each benchmark's grid on the
CPU beside one GPU, and the balance drawn at one setting of the sliders. Numbers, records and tables only: the
pages' sentences are their Markdown, and their hidden cells assert the premises they rest on. The records these pages
share with others (`glue_all`, `table_md`, `elapsed_record`, `gpu_grid_record`) are in `pagekit`."""
from __future__ import annotations

from ..report.tables import minus as _minus
from .pagekit import table_md


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
         "grids_kind": "grids" in b, "reduced": bool(b.get("reduced"))}
    m = b["methods"]
    if "grids" in b:
        g = b["grids"]
        r |= {"gemm": f"{b['gemm_gflops']:.0f}", "gemm_1": f"{b['gemm_gflops_1thread']:.0f}",
              "tflop": f"{b['eval_tflop']:.2f}", "bound": f"{b['bound_s']:.1f}", "bound_1": f"{b['bound_s_1thread']:.1f}",
              "grids": table_md(index=True, numparse=True, frame=pd.DataFrame({
                  "runs + references + oracles": [f"{a} + {f} + {o}" for a, f, o in zip(g.runs, g.references, g.oracle)],
                  "seeds": g.seeds, "today's defaults (min)": g.new_min.map("{:.1f}".format),
                  "× evaluation bound": g.x_bound.map("{:.2f}".format),
                  "legacy path (min)": g.legacy_min.map("{:.1f}".format), "speed-up": g.speedup.map("{:.2f}×".format)},
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


#: How a page's status in `results/book-timings.json` reads in the running page's table.
TIMING_NOTES = {"cached": "", "absent": "not timed: not in the book then", "not executed": "not executed (excluded)",
                "no cached run of the current code": "not timed: no run of its current code",
                "force": "runs on every build: see the table at the end"}


def timings_frame(t):
    """The committed page times (`timings.timings_table`) as the running page's table: the time and a note."""
    import pandas as pd

    from ..report.timings import duration

    return pd.DataFrame({
        "Time": [duration(s) if s == s else "–" for s in t["execution_s"]],
        "Note": [f"{x} page(s), not executed" if x else f"overlapped {o} other run(s)" if o else
                 TIMING_NOTES["force"] if st.startswith("force") else TIMING_NOTES.get(st, st)
                 for st, o, x in zip(t["status"], t["overlapped"], t["excluded"])]}, index=t.index).rename_axis("Page")


#: The cells of the running page's device table (`device_frame`), filled from `timings.device_table`'s columns.
DEVICE_CELLS = {
    "cpu_whole": "{time} for {n} seeds with references and oracle, one worker process per core, measured",
    "cpu_runs": "~{hours:.0f} h for {n} seeds without references and oracle (the mean timed run × 11), synthetic tensors "
                "of the real shapes, {how}",
    "cpu_how": {True: "extrapolated from a reduced run", False: "measured"},
    "gpu_scaled": "about {time} for {n} seeds, an estimate: {m:.0f} seed{s} timed, × {times:g}",
    "gpu_measured": "{time} for {n} seeds, measured",
    "gpu_on": ", with references and oracle, on {data}",
    "synthetic": "synthetic tensors of the exact shapes"}


def device_frame(d):
    """Each benchmark's whole grid on the CPU beside one GPU (`timings.device_table`), one cell a device: the time,
    the seeds, what was timed and on which machine (`DEVICE_CELLS`); "–" where a device has no figure."""
    import pandas as pd

    from ..report.timings import duration

    C = DEVICE_CELLS
    cpu = [("–" if c != c else (C["cpu_whole"].format(time=duration(c), n=n) if whole else
                                C["cpu_runs"].format(hours=c / 3600, n=n, how=C["cpu_how"][bool(ex)])) + f" ({dev})")
           for c, n, whole, ex, dev in zip(d.cpu_s, d.cpu_seeds, d.cpu_whole_grid, d.cpu_extrapolated, d.cpu_device)]
    gpu = [("–" if g != g else (C["gpu_scaled"].format(time=duration(g), n=n, m=m, s="s" if m > 1 else "", times=n / m)
                                if sc else C["gpu_measured"].format(time=duration(g), n=n))
            + C["gpu_on"].format(data=C["synthetic"] if syn else data) + f" ({dev})")
           for g, n, m, syn, data, sc, dev in zip(d.gpu_s, d.gpu_seeds, d.gpu_measured_seeds, d.gpu_synthetic,
                                                 d.gpu_data, d.gpu_scaled, d.gpu_device)]
    return pd.DataFrame({"CPU": cpu, "GPU": gpu}, index=d.index).rename_axis("Benchmark")


def balance_snapshot(g1, angle_deg: float, g2_norm: float, beta: float, gamma: float, alt: str):
    """Chapter 3's interactive balance at one setting of the sliders: the figure as an image (`plots.png_html`; a
    plain plt.show() gives the static page an image without any alt text). `alt`, the page's words, is filled with
    `title` (the panel's title, `plots.balance_title`), `beta` and `gamma`."""
    import matplotlib.pyplot as plt

    from ..report.plots import balance_g2, balance_title, plot_balance_2d, png_html

    fig, ax = plt.subplots(figsize=(4.6, 5.8))
    plot_balance_2d(g1, balance_g2(g2_norm, angle_deg), beta=beta, gamma=gamma, ax=ax)
    ax.set_title(balance_title(g2_norm, angle_deg), fontsize=10)
    fig.tight_layout()
    image = png_html(fig, alt.format(title=balance_title(g2_norm, angle_deg), beta=beta, gamma=gamma))
    plt.close(fig)
    return image
