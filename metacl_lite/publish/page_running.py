"""The records of "Running this book" (`book/running.md`): the page timings, how long the K = 20 results file took
beside the CPU speed benchmark of its grid, and each benchmark's whole grid on the CPU beside one GPU. `running_glue`
and `device_glue` return the glue names the page's Markdown reads, written out in full. Numbers, records and tables
only: the page's sentences are its Markdown, and its hidden cells assert the premises they rest on. `elapsed_record`
(how long a file took) serves the reference and the reproduction pages as well."""
from __future__ import annotations

from .formatting import code


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


def running_glue(t, k20: dict, k20_name: str) -> dict:
    """The page's figures: the last timed build (`timings.timings_table`'s attrs, "tim_*", and the table "timings")
    and how the K = 20 results file was made (`elapsed_record`, "pm_*"). The page asserts the premises of the
    K = 20 item's words on `elapsed_record` itself."""
    from IPython.display import Markdown

    a, pm = t.attrs, elapsed_record(k20, k20_name)
    return {"tim_device": a["device"], "tim_commit": code(a["commit"]), "tim_command": code(a["command"]),
            "tim_date": a["date"], "tim_n_timed": a["n_timed"], "tim_total_min": f"{a['total_s'] / 60:.0f}",
            "tim_untimed": a["untimed"], "tim_n_overlapped": a["n_overlapped"],
            "timings": Markdown(timings_frame(t).to_markdown()),
            "pm_n_seeds": len(k20["config"]["seeds"]), "pm_runs": pm["runs"], "pm_seeds_1": pm["seeds_1"],
            "pm_min_1": pm["min_1"], "pm_pace_1": pm["pace_1"], "pm_seeds_2": pm["seeds_2"], "pm_min_2": pm["min_2"],
            "pm_pace_2": pm["pace_2"], "pm_span_whole": pm["span_whole"], "pm_unit_whole": pm["unit_whole"],
            "pm_pace_fold_text": pm["pace_fold_text"]}


def device_glue(benches: dict) -> dict:
    """The device table (`device_frame` of `timings.device_table`) and the CPU bench of Permuted MNIST's K = 20 grid
    ("pm_bench_*": seeds, minutes, minutes a seed) that the page sets beside the committed file."""
    from IPython.display import Markdown

    from ..report.timings import device_table

    grid = benches["bench-pmnist-K20.json"]["grids"][0]
    return {"device_table": Markdown(device_frame(device_table(benches)).to_markdown()),
            "pm_bench_seeds": grid["seeds"], "pm_bench_min": f"{grid['new']['wall_s'] / 60:.1f}",
            "pm_bench_seed_min": f"{grid['new']['wall_s'] / 60 / grid['seeds']:.1f}"}
