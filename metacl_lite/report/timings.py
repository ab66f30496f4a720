"""How long things take, in words: what a committed speed-benchmark file says a full grid of a benchmark costs, and
the book's page execution times (results/book-timings.json).
"""
from __future__ import annotations

from typing import Any

from .commands import relative_command
from .paper import paper_table
from ..specs import SPECS


def bench_estimate(bench: dict, seeds: int) -> dict[str, Any]:
    """What a committed speed-benchmark file (python -m metacl_lite bench --suite ...) says a full grid costs: the
    device, whether it is an extrapolation from a reduced run, the methods it timed, the per-run estimate (mean over
    them), and the grid of `seeds` seeds over those methods (the file's own estimate is for 3 seeds)."""
    per = bench["per_method"]
    mean_run = sum(r["full_run_s_estimate"] for r in per) / len(per)
    return {"suite": bench["suite"], "device": bench["device"],
            "device_long": (bench.get("provenance") or {}).get("device", bench["device"]),
            "reduced": bool(bench["reduced"]), "methods": [r["method"] for r in per], "n_methods": len(per),
            "mean_run_s": mean_run, "grid_s": bench["grid_s_estimate"] / 3 * seeds,
            "command": relative_command((bench.get("provenance") or {}).get("command")),
            "K": SPECS[bench["suite"]].tuning_K}


def bench_markdown(est: dict[str, Any], seeds: int) -> str:
    """The estimate in words, saying what kind of estimate it is."""
    from ..training import METHODS

    spec = SPECS[est["suite"]]
    kind = ("a rough linear extrapolation from a reduced run (fewer epochs and tasks) on the "
            f"{'CPU' if est['device'] == 'cpu' else est['device']}" if est["reduced"]
            else f"measured on {est['device']}")
    text = (f"**Time.** `{est['command']}` ({est['device_long']}; {kind}) puts one full run at about "
            f"{est['mean_run_s'] / 60:.0f} min on average at K = {est['K']}, and the {est['n_methods']} method(s) "
            f"it timed × {seeds} seeds at about {est['grid_s'] / 3600:.0f} h, without the references and the oracle")
    table = [m for m in (paper_table(est["suite"], est["K"]) or {}) if m in METHODS] or list(METHODS)
    if est["n_methods"] < len(table):
        text += (f"; the paper's table has {len(table)} methods, so the whole grid takes about "
                 f"{len(table) / est['n_methods']:.1f} times that")
    text += "."
    if max(spec.paper_Ks) > est["K"]:
        text += (f" Training steps grow in proportion to K (evaluation does not), so a larger K takes up to "
                 f"K/{est['K']} times as long.")
    if est["device"] == "cpu":
        text += (" These are CPU numbers; `python -m metacl_lite bench --suite "
                 f"{est['suite']} --device cuda` times the whole grid on a GPU.")
    return text


def duration(s: float) -> str:
    """Seconds as a reader reads them: "44.7 s" under five minutes, else "7.9 min"."""
    return f"{s:.1f} s" if s < 300 else f"{s / 60:.1f} min"


def scaled_note(doc: dict) -> str:
    """" (scaled from N timed seed(s), T: every seed is the same work)" for a GPU bench file that timed fewer seeds
    than its grid has; "" when every seed was timed."""
    if doc["measured_seeds"] >= doc["seeds"]:
        return ""
    return (f" (scaled from {doc['measured_seeds']} timed seed(s), {duration(doc['wall_s_measured'])}: every seed is "
            f"the same work)")


def gpu_grid_markdown(doc: dict) -> str:
    """What a GPU speed-benchmark file (`bench --device cuda`, results/bench-<suite>-cuda.json) measured, in words:
    the whole grid's wall time beside its target, how many seeds were timed, the data and the workers."""
    prov = doc.get("provenance") or {}
    grid = f"{doc['seeds']} seeds took {duration(doc['grid_s'])}" + scaled_note(doc)
    met = doc["grid_s"] <= doc["target_s"]
    return (f"**On a GPU.** `{relative_command(prov.get('command'))}` ({doc['device']}, commit "
            f"`{(prov.get('git_commit') or '?')[:10]}`): the whole grid at K = {doc['K']} (every method, the "
            f"references and the oracle, at full size: {doc['n_tasks']} tasks × {doc['epochs']} epochs) on "
            f"{doc['data']}, {doc['workers']} worker processes sharing the card: {grid}; the target for one H100 is "
            f"{duration(doc['target_s'])} ({'met' if met else 'missed'}).")


#: The speed-benchmark files that "Running this book" sets side by side: the CPU one and the GPU one of each benchmark.
DEVICE_FILES = {"pmnist": ("bench-pmnist-K20.json", "bench-pmnist-cuda.json"),
                "cifar100": ("bench-cifar100.json", "bench-cifar100-cuda.json"),
                "cub": ("bench-cub.json", "bench-cub-cuda.json")}


def device_table(docs: dict[str, dict]) -> str:
    """Each benchmark's whole grid on the CPU beside one GPU, from the committed speed-benchmark files (`docs`: file
    name -> document; a missing file shows as "not measured"), saying what each figure is."""
    lines = ["| Benchmark | CPU | GPU |", "|---|---|---|"]
    for b, (cpu_name, gpu_name) in DEVICE_FILES.items():
        cpu, gpu = docs.get(cpu_name), docs.get(gpu_name)
        if cpu is None:
            c = "not measured"
        elif "grids" in cpu:  # Permuted MNIST: whole grids timed
            g = cpu["grids"][0]
            c = (f"{duration(g['new']['wall_s'])} for {g['seeds']} seeds with references and oracle, measured "
                 f"({cpu['provenance']['device']})")
        else:  # the mean run of the methods it timed, times all eleven methods and five seeds
            from ..training import METHODS

            est = bench_estimate(cpu, 5)
            c = (f"~{est['mean_run_s'] * len(METHODS) * 5 / 3600:.0f} h for 5 seeds without references and oracle "
                 f"(the mean of {est['n_methods']} timed method(s) × {len(METHODS)}), "
                 f"{'extrapolated from a reduced run' if est['reduced'] else 'measured'} ({est['device_long']})")
        if gpu is None:
            g_text = "not measured"
        else:
            scaled = gpu["measured_seeds"] < gpu["seeds"]
            g_text = (f"{duration(gpu['grid_s'])} for {gpu['seeds']} seeds with references and oracle, "
                      + (f"scaled from {gpu['measured_seeds']} measured" if scaled else "measured")
                      + f" ({gpu['device'].split(' (')[0]})")
        lines.append(f"| {SPECS[b].title} | {c} | {g_text} |")
    return "\n".join(lines)


def timings_markdown(doc: dict) -> str:
    """The committed per-page execution times (results/book-timings.json, written by data_scripts/book_timings.py)
    as a Markdown table, with the total of the cached pages and where the figures come from."""
    prov = doc.get("provenance") or {}
    lines = ["| Page | Execution (s) | How known |", "|---|---|---|"]
    for r in doc["pages"]:
        t = f"{r['execution_s']:.0f}" if r.get("execution_s") is not None else "–"
        lines.append(f"| `{r['page']}` | {t} | {r['status']} |")
    timed = [r for r in doc["pages"] if r.get("execution_s") is not None]
    head = (f"Read from a build's execution cache by `{relative_command(prov.get('command'))}` on "
            f"{prov.get('device', '?')} "
            f"(commit `{(prov.get('git_commit') or '?')[:10]}`, {prov.get('started', '?')}): each figure is the wall "
            f"time of the page's last full execution. The {len(timed)} timed pages took "
            f"{sum(r['execution_s'] for r in timed) / 60:.0f} min together; the execution cache skips all of them on "
            f"a rebuild until their code changes." + (f" Conditions of the build: {prov['note']}" if prov.get("note")
                                                      else ""))
    return head + "\n\n" + "\n".join(lines)
