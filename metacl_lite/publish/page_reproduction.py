"""The records of the reproduction pages (`book/reproduce/templates/reproduction.md`, made into every
`book/reproduce/<benchmark>-K<K>.md` by `pages`): the setting, how the committed file was made, the live run, the
three tables, "What the comparison says" and, for a setting without a results file, what makes it. Each `*_glue`
function returns the glue names the page's Markdown reads, written out in full. Numbers, records and tables only: the
page's sentences are its Markdown, and its hidden cells assert the premises they rest on."""
from __future__ import annotations

from .formatting import code, markdown, minus as _minus
from .page_running import elapsed_record

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


def memory_results(benchmark: str, K: int) -> dict:
    """{M: results} of every memory file at (benchmark, K) (`findings.memory.memory_files`), in order of M."""
    from ..findings.memory import memory_files
    from ..lab.store import load_results

    return {M: load_results(p) for (k, M), p in memory_files(benchmark).items() if k == K}


def memory_rows(memory: dict) -> list[dict]:
    """The rows of the memory family's methods (extensions, chapter 9) from their files ({M: results}), each
    labelled with its budget M and marked as not in the paper ("A-GEM, M = 1 (not in the paper)"), in order of M and
    of the vocabulary."""
    from ..report.tables import EXTENSION_MARK, comparison_rows
    from ..vocab import MEMORY_METHODS, method_label

    return [{**r, "label": f"{method_label(r['method'])}, M = {M}{EXTENSION_MARK}"} for M, res in memory.items()
            for r in comparison_rows(res) if r["method"] in MEMORY_METHODS and r["n"]]


def curves(committed: dict, memory: dict) -> dict:
    """The reproduction page's accuracy curves (`tables.average_accuracy_curves`): the committed file's per method,
    then each memory method's per budget, keyed (method, M) (`plots.plot_accuracy_curves`)."""
    from ..report.tables import average_accuracy_curves
    from ..vocab import MEMORY_METHODS

    return {**average_accuracy_curves(committed), **{(m, M): c for M, res in memory.items()
                                                     for m, c in average_accuracy_curves(res).items()
                                                     if m in MEMORY_METHODS}}


def metric_tables(benchmark: str, K: int, committed) -> dict:
    """The three tables of a reproduction page, {"ACC"|"BT"|"FA": Markdown}: ours beside the paper's where both
    exist (`tables.comparison_rows`), ours alone, or the paper's alone (`tables.paper_rows`) without a results
    file. The rows of methods the paper did not run (an extension such as L2) come after the paper's rows and the
    joint oracle (`tables.ROW_ORDER`), and after them those of the memory's files at this K, where a results file
    exists (`memory_rows`)."""
    from ..findings.paper import paper_table
    from ..report.tables import comparison_rows, metric_table_markdown, paper_rows

    rows = comparison_rows(committed) + memory_rows(memory_results(benchmark, K)) if committed is not None \
        else paper_rows(benchmark, K)
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


def head_glue(s: dict, live: bool, run: dict) -> dict:
    """The head of the page and "A live run": the setting (`setting_record` `s`; "kind", which tables it has, for
    the runs of `python -m metacl_lite notebook` to read), whether the live run is on, and what it will train
    (`live_record` `run`)."""
    from IPython.display import Markdown

    return {"setting": s["setting"], "paper_source": s["paper_source"], "paper_table": s["paper_table"],
            "present": "present" if s["present"] else "not present", "kind": s["kind"], "live": str(live),
            "committed_file": Markdown(code(s["committed_file"])),
            "run_yourself": Markdown(f"```text\n{s['run_yourself']}\n```"),
            "run_n_methods": run["n_methods"], "run_labels": run["labels"], "run_seeds": run["seeds"],
            "run_tasks": run["tasks"], "run_epochs": run["epochs"], "run_protocol": run["protocol"],
            "run_device": run["device"], "run_out": run["out"]}


def done_glue(res: dict) -> dict:
    """A finished live run (`live_done`) and how many methods it trained, the joint oracle aside."""
    done = live_done(res)
    return {"done_wall_s": done["wall_s"], "done_seeds": done["seeds"], "done_tasks": done["tasks"],
            "done_epochs": done["epochs"], "live_n_methods": len([m for m in res["summary"] if m != "joint"])}


def made_glue(made: dict) -> dict:
    """How the committed results file was made (`made_record`), its command and commit as code."""
    from IPython.display import Markdown

    return {"made_n_seeds": made["n_seeds"], "made_command": Markdown(code(made["command"])),
            "made_commit": Markdown(code(made["commit"])), "made_device": made["device"],
            "made_span_whole": made["span_whole"], "made_unit_whole": made["unit_whole"], "made_runs": made["runs"],
            "made_invocations": made["invocations"]}


def missing_glue(need: dict) -> dict:
    """A setting without a results file (`missing_record` `need`): the commands as a text block, the tuning's cost,
    the validation images and what `make reproduce-<benchmark>` does."""
    from IPython.display import Markdown

    def block(lines):
        return Markdown("```text\n" + "\n".join(lines) + "\n```" if lines else "")

    return {"needs_download": need["needs_download"], "commands": block(need["commands"]),
            "tune_commands": block(need["tune_commands"]), "make_target": Markdown(code(need["make_target"])),
            "n_tune": need["n_tune"], "n_run": need["n_run"], "cmd_seeds": need["cmd_seeds"],
            "make_runs": need["make_runs"], "tune_K": need["tune_K"], "K0": need["K0"], "shrink": need["shrink"],
            "val_first": need["val_first"], "val_last": need["val_last"], "tune_here": need["tune_here"],
            "own_Ks": need["own_Ks"], "beyond_Ks": need["beyond_Ks"]}


def tables_glue(benchmark: str, K: int, committed) -> dict:
    """The three tables (`metric_tables`)."""
    from IPython.display import Markdown

    t = metric_tables(benchmark, K, committed)
    return {"tab_ACC": Markdown(t["ACC"]), "tab_BT": Markdown(t["BT"]), "tab_FA": Markdown(t["FA"])}


def interpretation_glue(info: dict) -> dict:
    """"What the comparison says" (`interpretation_values`, `interpretation_tables`): the gaps to the paper (its
    table only where the paper has numbers), the ranking, the families' order, the interval's figures and the
    settings the file was made with."""
    from IPython.display import Markdown

    v, t = interpretation_values(info), interpretation_tables(info)
    return {"incomplete": v["incomplete"], "n_ACC": v["n_ACC"], "within_ACC": v["within_ACC"],
            "outside_ACC": v["outside_ACC"], "rank_n": v["rank_n"], "rho_text": v["rho_text"],
            "best_ours": v["best_ours"], "best_paper": v["best_paper"], "n_held_ours": v["n_held_ours"],
            "n_fam_ours": v["n_fam_ours"], "held_ours": v["held_ours"], "n_held_paper": v["n_held_paper"],
            "n_fam_paper": v["n_fam_paper"], "held_paper": v["held_paper"], "options_where": v["options_where"],
            "gamma_control": v["gamma_control"], "compile": v["compile"], "precision": v["precision"],
            "n_seeds": v["n_seeds"], "t_df": v["t_df"], "factor": v["factor"], "permuted": v["permuted"],
            "n_rows": v["n_rows"], "mean_ci_ours": v["mean_ci_ours"], "mean_pm_paper": v["mean_pm_paper"],
            "family_table": Markdown(markdown(t["family_table"])),
            "hparams_table": Markdown(markdown(t["hparams_table"])),
            "options_table": Markdown(markdown(t["options_table"])),
            **({"gaps_table": Markdown(markdown(t["gaps_table"]))} if "gaps_table" in t else {})}
