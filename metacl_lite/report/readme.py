"""The README's generated blocks: our table beside the paper's, the generated comparison, the speed-benchmark figures,
the open choices, the reproduction targets and the time a file took, each made from its results file
(`python -m metacl_lite readme`). Nothing here is typed by hand."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from ..data.datafiles import REPO_ROOT
from .tables import format_table
from .timings import duration, mps_note, provenance_note, ran_commit, scaled_note, target_mark


def comparison_summary(res: dict) -> str:
    """The generated comparison beside a table (README `summary` blocks, `table` command): the gaps per metric, the
    rank agreement, the family orderings, the β/γ and open choices, and the interval; `interpret.readme_summary`,
    so the README and the book's pages say the same things from the same numbers."""
    from .interpret import readme_summary

    return readme_summary(res)


def gpu_bench_summary(b: dict) -> str:
    """The figures of a GPU speed-benchmark file (`bench --device cuda`) as Markdown: the whole grid beside its
    target, and each method's own wall time per unit while the units share the card (mean over the timed seeds)."""
    from .commands import relative_command

    prov = b["provenance"]
    per: dict[str, list[float]] = {}
    peak: dict[str, float] = {}  # the largest peak of each unit kind (files made before units recorded it: none)
    for u in b["units"]:
        section, key = u["unit"].split("/", 1)
        name = key.rsplit("/", 1)[0] if section == "runs" else {"references": "references (all tasks)",
                                                                 "oracle": "joint oracle"}[section]
        per.setdefault(name, []).append(u["wall_s"])
        if "peak_gpu_mb" in u:
            peak[name] = max(peak.get(name, 0.0), u["peak_gpu_mb"])
    from ..training import METHODS

    order = [m for m in METHODS if m in per] + [k for k in per if k not in METHODS]
    rows = ["| unit | wall per unit (s), sharing the GPU |" + (" peak GPU memory (GB) |" if peak else ""),
            "|---|---|" + ("---|" if peak else "")]
    rows += [f"| {k} | {sum(per[k]) / len(per[k]):.1f} |" + (f" {peak[k] / 1024:.1f} |" if peak else "")
             for k in order]
    return "\n".join([
        f"Measured by `{relative_command(prov['command'])}` on {b['device']} ({ran_commit(prov, noted=True)}).",
        f"Whole grid at K = {b['K']} ({len(b['methods'])} methods, the references and the oracle; {b['n_tasks']} tasks "
        f"× {b['epochs']} epochs) on {b['data']}, {b['workers']} worker processes sharing the GPU{mps_note(b)}, "
        f"task gradients "
        f"{'eager' if b['compile'] == 'off' else 'compiled (' + b['compile'] + ')'}"
        f"{'' if b.get('precision', 'float32') == 'float32' else ', in ' + b['precision'].upper()}: "
        f"**{b['seeds']} seeds in "
        f"{duration(b['grid_s'])}**" + scaled_note(b) + f"; target on one H100: {duration(b['target_s'])} {target_mark(b)}."
        + (f" {provenance_note(prov)}" if provenance_note(prov) else ""), "", *rows])


def gpu_test_ids(path: Path) -> Optional[list[str]]:
    """The test ids pytest gives the tests of a GPU test file (`tests/test_gpu.py`), read with `ast` without importing
    it: each `test_*` function, and for a `pytest.mark.parametrize` with literal values one id per value set, the
    values joined by "-" as pytest joins string parameters. None where the file is absent (an installed package) or a
    parametrisation is not a literal (then the ids cannot be known without pytest)."""
    import ast

    if not path.exists():
        return None
    ids = []
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        cases = [""]
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize":
                try:
                    values = ast.literal_eval(dec.args[1])
                except ValueError:
                    return None
                labels = ["-".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in values]
                cases = [f"{c}-{lab}" if c else lab for c in cases for lab in labels]
        ids += [f"{node.name}[{c}]" if c else node.name for c in cases]
    return ids


def gpu_check_summary(doc: dict, current: Optional[list[str]] = None) -> str:
    """The GPU tests' outcome (results/gpu-check.json, written by data_scripts/gpu_check.py) as Markdown. With
    `current` (the ids of the checkout's GPU tests, `gpu_test_ids`), the tests that the check did not run (added or
    reparametrised since it ran) are named as not yet run on a GPU, so an old check does not read as covering code
    written after it."""
    prov = doc["provenance"]
    lines = [f"`{prov['command']}` on {doc['device']} ({ran_commit(prov, noted=True)}): "
             f"**{doc['passed']} passed, {doc['failed']} failed**." + (f" {provenance_note(prov)}" if provenance_note(prov)
                                                                         else ""),
             "", "| test | outcome | s |", "|---|---|---|"]
    lines += [f"| `{t['test']}` | {t['outcome']} | {t['time_s']:.1f} |" for t in doc["tests"]]
    ran = {t["test"] for t in doc["tests"]}
    missing = [t for t in current or [] if t not in ran]
    if missing:
        lines += [f"| `{t}` | **not yet run on a GPU** | |" for t in missing]
        lines[0] += (f" The checkout's GPU tests include {len(missing)} that this check did not run (added or "
                     f"reparametrised after it): they are listed below as not yet run on a GPU.")
    return "\n".join(lines)


def bench_summary(b: dict) -> str:
    """The figures of a speed-benchmark file (python -m metacl_lite bench) as Markdown."""
    if b.get("gpu"):
        return gpu_bench_summary(b)
    prov = b["provenance"]
    from .commands import relative_command

    head = (f"Measured by `{relative_command(prov['command'])}` on {prov['device']} "
            f"(commit `{(prov['git_commit'] or '?')[:10]}`).")
    if "suite" in b:  # multi-head synthetic
        rows = ["| method | measured (s) | full run (min) |", "|---|---|---|"]
        rows += [f"| {r['method']} | {r['wall_s']:.1f} | {'~' if r['extrapolated'] else ''}"
                 f"{r['full_run_s_estimate'] / 60:.1f} |" for r in b["per_method"]]
        note = (f"Synthetic tensors of the real shapes, {b['n_tasks']} task(s) × {b['epochs']} epoch(s) on "
                f"{b['device']}" + ("; REDUCED: full-run time = measured time × (full epochs × tasks) / (measured "
                                    "epochs × tasks), a rough linear extrapolation that also scales the evaluation"
                                    if b["reduced"] else "")
                + f". Whole grid (3 seeds, without references and oracle): "
                  f"{'~' if b['reduced'] else ''}{b['grid_s_estimate'] / 3600:.1f} h.")
        return "\n".join([head, note, "", *rows])
    one = b.get("lower_bound_s_per_run_1thread")  # files since the one-thread rate is measured
    bound = one or b["lower_bound_s_per_run"]
    rows = [f"| method | wall (s) | peak RSS (MB) | × {'one-thread ' if one else ''}evaluation bound |",
            "|---|---|---|---|"]
    rows += [f"| {r['method']} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} | "
             f"{r['wall_s'] / bound:.2f} |" for r in b["per_method"]]
    rate = (f"float32 GEMM {b['gemm_gflops']:.0f} GFLOP/s on all cores"
            + (f", {b['gemm_gflops_1thread']:.0f} GFLOP/s on one thread" if one else ""))
    lb = (f"takes at least {b['lower_bound_s_per_run']:.1f} s on all cores"
          + (f" and {one:.1f} s on one thread" + (" (each run below uses one thread, as the workers of a grid do)"
                                                   if b["per_method"] else "") if one else ""))
    out = [head, f"{rate}; the evaluation of one run ({b['eval_tflop_per_run']:.2f} TFLOP, 210 passes over 10 000 test "
                 f"images) {lb}."]
    if b["per_method"]:  # none with --skip-methods
        out += [""] + rows
    if b.get("grids"):
        out += ["", "| whole grid | runs + references + oracles | today's defaults | × evaluation bound | legacy path "
                    "| speed-up |", "|---|---|---|---|---|---|"]
        for g in b["grids"]:
            new, old = g["new"], g.get("legacy")
            out.append(f"| K = {g['K']}, {g['seeds']} seed(s) | {g['runs']} + {g['references']} + {g['oracle']} | "
                       f"{new['wall_s'] / 60:.1f} min | {new['wall_s'] / g['lower_bound_s']:.2f} | "
                       + (f"{old['wall_s'] / 60:.1f} min | {g['speedup']:.2f}× |" if old else "– | – |"))
        grads = ("eager gradients" if b.get("compile", "off") == "off" else
                 f"task gradients compiled (`--compile {b['compile']}`; equal to eager within float rounding)")
        out += ["", "Today's defaults: one worker process per core with one intra-op thread each, evaluation through "
                    f"`index_select` (the same accuracies as the legacy path, bit for bit), {grads}. Legacy "
                    "path: one process using every core's threads, evaluation through `x[:, perm]` copies, eager. The "
                    "evaluation bound is the runs' evaluation FLOPs at the measured GEMM rate of all cores."]
    g = b.get("grid")  # files written before the side-by-side grids
    if g:
        out += ["", f"Whole Table 1 grid ({g['runs']} runs + {g['references']} references + {g['oracle']} oracles): "
                    f"{g['wall_s'] / 60:.1f} min (target < {g['target_s'] / 60:.0f} min; evaluation bound "
                    f"{g['lower_bound_s'] / 60:.1f} min; peak RSS {g['peak_mb_max_child']:.0f} MB)."]
    return "\n".join(out)


def elapsed_summary(doc: dict, name: str) -> str:
    """How long a results or tuning file took to make, from its provenance: for each invocation that computed units,
    the time from its start to its last saved unit (on a pool of workers this is the wall time; the units' own wall
    times add up to about the workers times as much)."""
    from datetime import datetime

    from ..errors import FileFormatError
    from ..lab.store import upgrade

    invs = [i for i in upgrade(doc, "results").get("provenance", {}).get("invocations", [])
            if isinstance(i.get("units"), list) and i["units"] and i.get("started") and i.get("finished")]
    if not invs:
        raise FileFormatError(f"{name}: its provenance records no run with its start, end and units (files made "
                              f"before each run was recorded, schema 1, have none); remove the elapsed block or "
                              f"point it at a newer file")
    span = sum((datetime.fromisoformat(i["finished"]) - datetime.fromisoformat(i["started"])).total_seconds()
               for i in invs)
    units = sum(len(i["units"]) for i in invs)
    last = invs[-1]
    return (f"`{name}`: {units} units in {span / 60:.1f} min from the start of "
            + ("its run to its last unit" if len(invs) == 1 else f"each of its {len(invs)} runs to its last unit")
            + f" (the units' own wall times add up to {sum(float(i['wall_s']) for i in invs) / 60:.1f} min), on "
              f"{last['device']}, commit `{(last.get('git_commit') or '?')[:10]}`.")


README_MARK = re.compile(r"(<!-- BEGIN (table|summary|bench|choices|targets|elapsed|gpucheck) (\S+) -->\n)(.*?)"
                         r"(<!-- END \2 -->)", re.S)


def _not_yet(benchmark: str, K: int) -> str:
    """A README block whose results file (of a setting we reproduce) is not made yet: what makes it."""
    from .commands import missing_commands
    from ..data.specs import get_spec

    get_spec(benchmark)  # a block naming an unknown benchmark is a typo, not a file to come
    return (f"No results file yet (`results/{benchmark}-K{K}.json`); these commands make it:\n\n```bash\n"
            + "\n".join(missing_commands(benchmark, K)) + "\n```")


def update_readme(path: Optional[Path] = None, check: bool = False) -> bool:
    """Replace each `<!-- BEGIN table results/X.json -->...<!-- END table -->` block of the README with the table made
    from that results file (`summary` blocks: `comparison_summary`; `bench` blocks: `bench_summary`). Returns True
    when something was (or, with check, would be) changed."""
    from ..lab import store

    path = Path(path) if path else REPO_ROOT / "README.md"
    text = path.read_text()

    def repl(mo):
        if mo.group(2) == "choices":
            from ..lab.atomic import read_json
            from ..lab.choices import choices_markdown

            return mo.group(1) + choices_markdown(read_json(REPO_ROOT / mo.group(3), "decision file")) + "\n" + mo.group(5)
        if mo.group(2) == "targets":
            from .targets import target_rows, targets_markdown

            return mo.group(1) + targets_markdown(target_rows(mo.group(3))) + "\n" + mo.group(5)
        if mo.group(2) == "gpucheck":
            from ..lab.atomic import read_json

            return mo.group(1) + gpu_check_summary(read_json(REPO_ROOT / mo.group(3), "GPU check file"),
                                                   gpu_test_ids(REPO_ROOT / "tests" / "test_gpu.py")) + "\n" + mo.group(5)
        if mo.group(2) == "elapsed":
            from ..lab.atomic import read_json

            return mo.group(1) + elapsed_summary(read_json(REPO_ROOT / mo.group(3), "results file"), mo.group(3)) + \
                "\n" + mo.group(5)
        kind = "bench" if mo.group(2) == "bench" else "results"
        setting = re.fullmatch(r"results/([a-z0-9]+)-K(\d+)\.json", mo.group(3))
        if kind == "results" and setting and not (REPO_ROOT / mo.group(3)).exists():
            body = (_not_yet(setting.group(1), int(setting.group(2))) if mo.group(2) == "table" else
                    f"No summary yet: `{mo.group(3)}` does not exist.")
            return mo.group(1) + body + "\n" + mo.group(5)
        res = store.load(REPO_ROOT / mo.group(3), kind)
        body = {"table": lambda: format_table(res, "md"), "summary": lambda: comparison_summary(res),
                "bench": lambda: bench_summary(res)}[mo.group(2)]()
        return mo.group(1) + body + "\n" + mo.group(5)

    new = README_MARK.sub(repl, text)
    if new != text and not check:
        from ..lab.atomic import write_text

        write_text(path, new)
    return new != text
