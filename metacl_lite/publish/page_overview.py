"""The records of the overview of the reproductions (`book/reproduce/overview.md`): every setting at a glance, the
targets, and for the benchmarks we could not run, the CPU estimate, the GPU grid and `make reproduce-<benchmark>` on
one GPU. Each `*_glue` function returns the glue names the page's Markdown reads, written out in full. Numbers,
records and tables only: the page's sentences are its Markdown, and its hidden cells assert the premises they rest
on."""
from __future__ import annotations

from .formatting import hours, listing, markdown

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


def overview_glue(rows: list, targets: list) -> dict:
    """The head of the overview and its tables: how many settings have a results file (`overview.overview_rows`),
    the targets (`targets.target_rows` as `targets.targets_frame`'s two tables), the seeds of the commands and, for
    CIFAR-100 and CUB, the commands that make their files and what `make reproduce-<benchmark>` tunes and runs."""
    from IPython.display import Markdown

    from ..data.specs import SPECS
    from ..report.commands import SEEDS, make_target_steps, setting_commands
    from ..report.targets import TARGET_ACC_GAP, TARGET_FA_GAP, targets_frame

    def commands(b):
        return Markdown("```text\n" + "\n".join(setting_commands(b, SEEDS)) + "\n```")

    def runs(b):
        Ks = SPECS[b].paper_Ks
        return f"{SEEDS} seeds " + (f"at K = {Ks[0]}" if len(Ks) == 1 else "of every K")

    cifar, cub = make_target_steps("cifar100"), make_target_steps("cub")
    return {"target_acc": f"{TARGET_ACC_GAP:g}", "target_fa": f"{TARGET_FA_GAP:g}",
            "extra_Ks": listing(SPECS["pmnist"].extra_Ks), "n_settings": len(rows),
            "n_committed": sum(r["exists"] for r in rows), "cmd_seeds": SEEDS,
            "cifar_tune_K": SPECS["cifar100"].tuning_K, "cub_tune_K": SPECS["cub"].tuning_K,
            "overview_table": Markdown(markdown(overview_frame(rows), ("left", "right", "right", "right"))),
            "targets_protocol": Markdown(markdown(targets_frame(targets, "protocol"),
                                                  ("right", "right", "left", "left"))),
            "targets_gaps": Markdown(markdown(targets_frame(targets, "gaps"), ("right", "left", "left", "left"))),
            "commands_cifar100": commands("cifar100"), "commands_cub": commands("cub"),
            "make_cifar100_own": " and ".join(map(str, cifar["own_Ks"])) or "none",
            "make_cifar100_beyond": " and ".join(map(str, cifar["beyond_Ks"])) or "none",
            "make_cifar100_runs": runs("cifar100"), "make_cub_val": f"{cub['val_first']}-{cub['val_last']}",
            "make_cub_runs": runs("cub")}


def estimates_glue(cpu: dict, gpu: dict, total: dict) -> dict:
    """The time of CIFAR-100's and CUB's grids: per benchmark, the CPU estimate (`cpu_estimate_record`), the GPU grid
    (`page_reference.gpu_grid_record`) and `make reproduce-<benchmark>` on one GPU (`total_estimate_record`), each
    {benchmark: record}."""
    from IPython.display import Markdown

    cpu_c, gpu_c, total_c = cpu["cifar100"], gpu["cifar100"], total["cifar100"]
    cpu_u, gpu_u, total_u = cpu["cub"], gpu["cub"], total["cub"]
    align = ("left", "right", "right", "right")
    return {"total_table_cifar100": Markdown(markdown(total_c["table"], align)),
            "total_table_cub": Markdown(markdown(total_u["table"], align)),
            "cpu_cifar100_command": cpu_c["command"], "cpu_cifar100_device_long": cpu_c["device_long"],
            "cpu_cifar100_run_min": cpu_c["run_min"], "cpu_cifar100_K": cpu_c["K"],
            "cpu_cifar100_n_methods": cpu_c["n_methods"], "cpu_cifar100_grid_h": cpu_c["grid_h"],
            "gpu_cifar100_command": gpu_c["command"], "gpu_cifar100_K": gpu_c["K"],
            "gpu_cifar100_device": gpu_c["device"], "gpu_cifar100_commit": gpu_c["commit"],
            "gpu_cifar100_n_tasks": gpu_c["n_tasks"], "gpu_cifar100_epochs": gpu_c["epochs"],
            "gpu_cifar100_data": gpu_c["data"], "gpu_cifar100_workers": gpu_c["workers"],
            "gpu_cifar100_measured_seeds": gpu_c["measured_seeds"], "gpu_cifar100_measured": gpu_c["measured"],
            "gpu_cifar100_seeds": gpu_c["seeds"], "gpu_cifar100_grid": gpu_c["grid"],
            "gpu_cifar100_times": gpu_c["times"], "gpu_cifar100_target": gpu_c["target"],
            "total_cifar100_total": total_c["total"], "total_cifar100_n_runs": total_c["n_runs"],
            "total_cifar100_K0": total_c["K0"], "total_cifar100_measured_seeds": total_c["measured_seeds"],
            "total_cifar100_seeds": total_c["seeds"], "total_cifar100_times": total_c["times"],
            "total_cifar100_concurrency": total_c["concurrency"], "cpu_cub_command": cpu_u["command"],
            "cpu_cub_device_long": cpu_u["device_long"], "cpu_cub_run_min": cpu_u["run_min"],
            "cpu_cub_K": cpu_u["K"], "cpu_cub_n_methods": cpu_u["n_methods"], "cpu_cub_grid_h": cpu_u["grid_h"],
            "cpu_cub_n_table_methods": cpu_u["n_table_methods"], "cpu_cub_fold": cpu_u["fold"],
            "gpu_cub_command": gpu_u["command"], "gpu_cub_K": gpu_u["K"], "gpu_cub_device": gpu_u["device"],
            "gpu_cub_commit": gpu_u["commit"], "gpu_cub_n_tasks": gpu_u["n_tasks"],
            "gpu_cub_epochs": gpu_u["epochs"], "gpu_cub_data": gpu_u["data"], "gpu_cub_workers": gpu_u["workers"],
            "gpu_cub_measured_seeds": gpu_u["measured_seeds"], "gpu_cub_measured": gpu_u["measured"],
            "gpu_cub_seeds": gpu_u["seeds"], "gpu_cub_grid": gpu_u["grid"], "gpu_cub_times": gpu_u["times"],
            "gpu_cub_target": gpu_u["target"], "gpu_cub_ratio": gpu_u["ratio"], "total_cub_total": total_u["total"],
            "total_cub_n_runs": total_u["n_runs"], "total_cub_K0": total_u["K0"],
            "total_cub_measured_seeds": total_u["measured_seeds"], "total_cub_seeds": total_u["seeds"],
            "total_cub_times": total_u["times"], "total_cub_concurrency": total_u["concurrency"]}
