"""How long things take, as numbers and records (the book's pages say what they mean): what a committed
speed-benchmark file says a full grid of a benchmark costs, the CPU and GPU figures side by side, the GPU tests' check,
and the book's page execution times (results/book-timings.json, made by data_scripts/book_timings.py), page by page of
the current table of contents.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional, Sequence

from .commands import relative_command
from ..keys import RunKey
from ..findings.paper import paper_table
from ..data.specs import SPECS


def bench_estimate(bench: dict, seeds: int) -> dict[str, Any]:
    """What a committed speed-benchmark file (python -m metacl_lite.tools bench --suite ...) says a full grid costs:
    the device, whether it is an extrapolation from a reduced run, the methods it timed, the per-run estimate (mean
    over them), the grid of `seeds` seeds over those methods (the file's own estimate is for 3 seeds), the methods of
    the paper's table (`n_table_methods`: the whole grid is n_table_methods / n_methods times that) and the paper's
    largest K (training steps grow in proportion to K)."""
    per = bench["per_method"]
    mean_run = sum(r["full_run_s_estimate"] for r in per) / len(per)
    return {"suite": bench["suite"], "device": bench["device"],
            "device_long": (bench.get("provenance") or {}).get("device", bench["device"]),
            "reduced": bool(bench["reduced"]), "methods": [r["method"] for r in per], "n_methods": len(per),
            "mean_run_s": mean_run, "grid_s": bench["grid_s_estimate"] / 3 * seeds,
            "command": relative_command((bench.get("provenance") or {}).get("command")),
            "K": SPECS[bench["suite"]].tuning_K, "n_table_methods": len(_table_methods(bench["suite"])),
            "max_paper_K": max(SPECS[bench["suite"]].paper_Ks), "cpu": bench["device"] == "cpu"}


def _table_methods(suite: str) -> list[str]:
    """The methods of the paper's table of `suite` at its tuning K (all eleven where it has none)."""
    from ..vocab import PAPER_METHOD_NAMES

    return ([m for m in (paper_table(suite, SPECS[suite].tuning_K) or {}) if m in PAPER_METHOD_NAMES]
            or list(PAPER_METHOD_NAMES))


def duration(s: float) -> str:
    """Seconds as a reader reads them: "44.7 s" under five minutes, else "7.9 min"."""
    return f"{s:.1f} s" if s < 300 else f"{s / 60:.1f} min"


#: The provenance field that records, as data, the commit whose code made a file when git_commit/git_dirty record
#: another (a device copy of a working tree reports its base commit with the tree's changes as uncommitted):
#: {"commit": "977ad48", "why": "..."} (`ran_commit` reads it).
RAN_COMMIT_FIELD = "ran_commit"
def provenance_note(prov: dict) -> str:
    """A file's provenance note: its own, or (a schema-1 file as `store.load` reads it, its one provenance block
    turned into an invocation) the latest invocation's; "" when none."""
    invs = [i for i in prov.get("invocations") or [] if isinstance(i, dict) and i.get("note")]
    return prov.get("note") or (invs[-1]["note"] if invs else "")


def ran_commit(prov: dict) -> dict[str, Any]:
    """The commit whose code made a file, as data: `commit`, the provenance's `RAN_COMMIT_FIELD` where it has one,
    else git_commit (10 characters); `why`, the reason recorded with it ("" for none); `from_note`, whether it
    differs from git_commit's record by such a record; `recorded`, what git_commit records; `dirty`, git_dirty;
    `note_beyond_commit`, what the provenance note says besides (the whole note)."""
    recorded = (prov.get("git_commit") or "?")[:10]
    invs = [i for i in prov.get("invocations") or [] if isinstance(i, dict) and i.get(RAN_COMMIT_FIELD)]
    field = prov.get(RAN_COMMIT_FIELD) or (invs[-1][RAN_COMMIT_FIELD] if invs else None)  # as `provenance_note`
    found = isinstance(field, dict) and bool(field.get("commit"))
    return {"commit": str(field["commit"]) if found else recorded, "why": str(field.get("why") or "") if found else "",
            "recorded": recorded, "from_note": found, "dirty": bool(prov.get("git_dirty")),
            "note_beyond_commit": provenance_note(prov)}


def note_beyond_commit(prov: dict) -> str:
    """What a file's provenance note says beyond the commit whose code ran (`ran_commit`); "" when nothing."""
    return ran_commit(prov)["note_beyond_commit"]


def gpu_grid(doc: dict) -> dict[str, Any]:
    """What a GPU speed-benchmark file (`bench --device cuda`, results/bench-<suite>-cuda.json) measured: the whole
    grid's wall time (`grid_s`, scaled to every seed from `measured_seeds` timed ones when `scaled`) beside its target
    (`met`), with the command, device, commit (`ran_commit`), data, workers, MPS, compile and precision, and the
    provenance note (`note`, `provenance_note`; `note_beyond_commit`, what it says besides the commit)."""
    prov = doc.get("provenance") or {}
    return {"command": relative_command(prov.get("command")), "device": doc["device"], **ran_commit(prov),
            "K": doc["K"], "n_methods": len(doc.get("methods") or ()), "n_tasks": doc["n_tasks"],
            "epochs": doc["epochs"], "data": doc["data"], "workers": doc["workers"], "mps": bool(doc.get("mps")),
            "compile": doc.get("compile", "off"), "precision": doc.get("precision", "float32"),
            "seeds": doc["seeds"], "grid_s": doc["grid_s"], "measured_seeds": doc["measured_seeds"],
            "wall_s_measured": doc.get("wall_s_measured"), "scaled": doc["measured_seeds"] < doc["seeds"],
            "target_s": doc["target_s"], "met": doc["grid_s"] <= doc["target_s"], "note": provenance_note(prov),
            "note_beyond_commit": note_beyond_commit(prov)}


def gpu_units(doc: dict):
    """A GPU bench file's units as a DataFrame (index: the method, "references" or "oracle"), each kind's mean wall
    time per unit while the units share the card (`wall_s`) and its largest peak GPU memory in GB (`peak_gb`; NaN in
    files made before units recorded it), in the methods' order."""
    import pandas as pd

    from ..training import METHODS

    rows = []
    for u in doc["units"]:
        section, _, key = u["unit"].partition("/")  # `keys.unit_name`: a run's key, or a reference's seed
        rows.append({"unit": RunKey.parse(key).method if section == "runs" else section, "wall_s": u["wall_s"],
                     "peak_gb": u.get("peak_gpu_mb", float("nan")) / 1024})
    df = pd.DataFrame(rows).groupby("unit", sort=False).agg(wall_s=("wall_s", "mean"), peak_gb=("peak_gb", "max"))
    order = [m for m in METHODS if m in df.index] + [k for k in df.index if k not in METHODS]
    return df.loc[order]


def reproduce_runs(benchmark: str, seeds: Optional[int] = None) -> list[dict[str, Any]]:
    """The training runs of `make reproduce-<benchmark>` (CIFAR-100 or CUB; `commands.make_target_steps`), step by
    step, at the protocol's default grids (a tuning grid extended at an edge adds runs): records {"step", "K", "runs":
    {unit kind: count}}, a unit kind a method, "references" (a seed's references, one unit as a bench file times them)
    or "oracle". Steps: "choices" at each decision K where the validation split can decide the open choices (every
    alternative's full grids at the tuning K; at the others, the plain method of each regulariser for its base alternative
    and at most one candidate, five values around the tuning K's), "tune" at each other K the validation images
    allow (every tunable method's full grid), then per paper K "run" (every method of the paper, `run`'s default, the
    references and the oracle, `seeds` seeds, default `commands.SEEDS`) and "controls" (the paper's MetaCL-λ methods
    once per γ control)."""
    from ..lab.choices import CANDIDATES, DECISION_KS, FAMILY, around
    from ..lab.hparams import strength_key
    from ..lab.lattice import BETA_GRID, GAMMA_GRID
    from ..lab.tuning import TUNABLE, TUNING_SEEDS
    from ..vocab import PAPER_METHOD_NAMES
    from .commands import SEEDS, make_target_steps
    from ..findings.evidence import CONTROLS

    seeds = SEEDS if seeds is None else seeds
    spec, make = SPECS[benchmark], make_target_steps(benchmark)
    n_grid = {m: len(GAMMA_GRID if strength_key(m) == "gamma" else BETA_GRID) * len(TUNING_SEEDS) for m in TUNABLE}
    steps, tune_Ks = [], list(make["own_Ks"])
    if all(K <= spec.val_offset for K in DECISION_KS):
        for K in DECISION_KS:
            runs: dict[str, int] = {}
            for v in CANDIDATES.values():
                for r in v.regularisers:
                    for m in (FAMILY[r] if K == spec.tuning_K else ()):
                        runs[m] = runs.get(m, 0) + n_grid[m]
            if K != spec.tuning_K:  # base and a candidate per regulariser, on five values
                runs = {r: 2 * len(around(1.0)) * len(TUNING_SEEDS) for r in FAMILY}
            steps.append({"step": "choices", "K": K, "runs": runs})
    else:
        tune_Ks = [spec.tuning_K] + tune_Ks
    steps += [{"step": "tune", "K": K, "runs": dict(n_grid)} for K in tune_Ks]
    lambdas = [m for m in PAPER_METHOD_NAMES if strength_key(m) == "gamma"]  # LAMBDAS of the Makefile
    for K in spec.paper_Ks:  # `run`'s default methods: the paper's (an extension such as L2 is not run)
        steps.append({"step": "run", "K": K, "runs": {**{m: seeds for m in PAPER_METHOD_NAMES}, "references": seeds,
                                                       "oracle": seeds}})
        steps.append({"step": "controls", "K": K, "runs": {m: seeds * len(CONTROLS) for m in lambdas}})
    return steps


def reproduce_gpu_estimate(doc: dict, seeds: Optional[int] = None) -> dict[str, Any]:
    """What `make reproduce-<suite>` would take on the GPU of a GPU bench file (`doc`, whose grid at K0 = doc["K"] was
    timed): an estimate. Each unit kind's measured wall time while sharing the card (`gpu_units`; a method the file
    did not time: the mean of those it did), divided by `concurrency` (the timed units' summed time over the grid's
    wall time: how many ran at once on average), times K/K0 (a run's training steps grow with K, its evaluation does
    not, so a larger K takes at most that), times each step's runs (`reproduce_runs`). Returns K0, concurrency,
    `steps` (each `reproduce_runs` record with `n_runs` and `s`, and `measured`: the file's own grid, the run step
    at K0 with the file's seeds where it timed every kind of unit, whose `s` is then the file's `grid_s`),
    `total_s`, `n_runs`, and the file's `grid_s`, `scaled`, `measured_seeds`, `wall_s_measured`, `seeds`,
    `device`."""
    from ..training import METHODS

    units = gpu_units(doc)["wall_s"]
    concurrency = sum(u["wall_s"] for u in doc["units"]) / doc["wall_s_measured"]
    methods = [m for m in units.index if m in METHODS]
    per = lambda kind: float(units[kind] if kind in units.index else units[methods].mean())  # noqa: E731
    K0, steps = doc["K"], []
    for st in reproduce_runs(doc["suite"], seeds):
        s = sum(n * per(kind) for kind, n in st["runs"].items()) / concurrency * st["K"] / K0
        steps.append({**st, "n_runs": sum(st["runs"].values()), "s": s,
                      "measured": st["step"] == "run" and st["K"] == K0 and st["runs"]["oracle"] == doc["seeds"]
                      and all(kind in units.index for kind in st["runs"])})
    return {"K0": K0, "concurrency": concurrency, "steps": steps, "total_s": sum(st["s"] for st in steps),
            "n_runs": sum(st["n_runs"] for st in steps), "grid_s": doc["grid_s"],
            "scaled": doc["measured_seeds"] < doc["seeds"], "measured_seeds": doc["measured_seeds"],
            "wall_s_measured": doc["wall_s_measured"], "seeds": doc["seeds"], "device": doc["device"]}


def gpu_check(doc: dict, current: Optional[Sequence[str]] = None):
    """The GPU tests' outcome (results/gpu-check.json, written by data_scripts/gpu_check.py) as a DataFrame (index:
    the test id; outcome, time_s), with `current` (the ids of the checkout's GPU tests, `gpu_test_ids`) the tests the
    check did not run (added or reparametrised since) as outcome "not run". `attrs` holds the figures: passed, failed,
    not_run, device, command, the commit (`ran_commit`) and the note (`note`; `note_beyond_commit`)."""
    import pandas as pd

    ran = {t["test"] for t in doc["tests"]}
    rows = [{"test": t["test"], "outcome": t["outcome"], "time_s": t["time_s"]} for t in doc["tests"]]
    rows += [{"test": t, "outcome": "not run", "time_s": float("nan")} for t in current or [] if t not in ran]
    df = pd.DataFrame(rows, columns=["test", "outcome", "time_s"]).set_index("test")
    prov = doc["provenance"]
    df.attrs = {"passed": doc["passed"], "failed": doc["failed"], "not_run": int((df["outcome"] == "not run").sum()),
                "device": doc["device"], "command": prov["command"], **ran_commit(prov), "note": provenance_note(prov),
                "note_beyond_commit": note_beyond_commit(prov)}
    return df


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


#: The speed-benchmark files that "Running this book" sets side by side: the CPU one and the GPU one of each benchmark.
DEVICE_FILES = {"pmnist": ("bench-pmnist-K20.json", "bench-pmnist-cuda.json"),
                "cifar100": ("bench-cifar100.json", "bench-cifar100-cuda.json"),
                "cub": ("bench-cub.json", "bench-cub-cuda.json")}


def cpu_bench(b: dict) -> dict[str, Any]:
    """A CPU speed-benchmark file's figures (`bench` without --device): the command, machine and commit, and
    `methods`, a DataFrame (index: method) of each timed run: `wall_s`, and for Permuted MNIST `peak_mb` and
    `x_bound` (wall time over the evaluation bound of one run, on one thread where the file measured that rate), for
    CIFAR-100/CUB `full_run_min` (`extrapolated` from a reduced run); Permuted MNIST's `gemm_gflops` (all cores,
    `gemm_gflops_1thread`), the evaluation's TFLOP and bounds, and `grids`, a DataFrame (index: K) of its whole grids:
    seeds, runs, references, oracle, `new_min` (today's defaults), `x_bound`, `legacy_min`, `speedup` (NaN unless
    the file timed the legacy path, as those made before issue 41 did); CIFAR-100/CUB's `grid_h` (3 seeds, without
    references and oracle)."""
    import pandas as pd

    prov = b["provenance"]
    out: dict[str, Any] = {"command": relative_command(prov["command"]), "device": prov["device"],
                           "commit": (prov.get("git_commit") or "?")[:10], "compile": b.get("compile", "off")}
    if "suite" in b:  # multi-head synthetic
        out["methods"] = pd.DataFrame([{"method": r["method"], "wall_s": r["wall_s"], "extrapolated": r["extrapolated"],
                                        "full_run_min": r["full_run_s_estimate"] / 60} for r in b["per_method"]],
                                      columns=["method", "wall_s", "extrapolated", "full_run_min"]).set_index("method")
        out.update(suite=b["suite"], n_tasks=b["n_tasks"], epochs=b["epochs"], reduced=bool(b["reduced"]),
                   grid_h=b["grid_s_estimate"] / 3600)
        return out
    bound = b.get("lower_bound_s_per_run_1thread") or b["lower_bound_s_per_run"]
    out["methods"] = pd.DataFrame([{"method": r["method"], "wall_s": r["wall_s"], "peak_mb": r["peak_mb"],
                                    "x_bound": r["wall_s"] / bound} for r in b["per_method"]],
                                  columns=["method", "wall_s", "peak_mb", "x_bound"]).set_index("method")
    out.update(gemm_gflops=b["gemm_gflops"], gemm_gflops_1thread=b.get("gemm_gflops_1thread"),
               eval_tflop=b["eval_tflop_per_run"], bound_s=b["lower_bound_s_per_run"],
               bound_s_1thread=b.get("lower_bound_s_per_run_1thread"))
    out["grids"] = pd.DataFrame([{"K": g["K"], "seeds": g["seeds"], "runs": g["runs"], "references": g["references"],
                                  "oracle": g["oracle"], "new_min": g["new"]["wall_s"] / 60,
                                  "x_bound": g["new"]["wall_s"] / g["lower_bound_s"],
                                  "legacy_min": g["legacy"]["wall_s"] / 60 if g.get("legacy") else float("nan"),
                                  "speedup": g.get("speedup", float("nan"))} for g in b.get("grids") or []],
                                columns=["K", "seeds", "runs", "references", "oracle", "new_min", "x_bound",
                                         "legacy_min", "speedup"]).set_index("K")
    return out


def elapsed(doc: dict, name: str) -> dict[str, Any]:
    """How long a results or tuning file took to make, from its provenance: over the invocations that computed units,
    `units`, `span_min` (each invocation's start to its last saved unit, summed: on a pool of workers the wall time),
    `unit_min` (the units' own wall times, about the workers times as much), `runs`, the last one's device and
    commit, and `invocations`, each one's `span_min`, `unit_min`, `units` and `seeds` (how many seeds its units
    belong to: a unit key ends with its seed), in order."""
    from datetime import datetime

    from ..errors import FileFormatError
    from ..keys import unit_seed

    invs = [i for i in doc.get("provenance", {}).get("invocations", [])
            if isinstance(i.get("units"), list) and i["units"] and i.get("started") and i.get("finished")]
    if not invs:
        raise FileFormatError(f"{name}: its provenance records no run with its start, end and units (files made "
                              f"before each run was recorded, schema 1, have none)")
    each = [{"span_min": (datetime.fromisoformat(i["finished"]) - datetime.fromisoformat(i["started"])).total_seconds()
             / 60, "unit_min": float(i["wall_s"]) / 60, "units": len(i["units"]),
             "seeds": len({unit_seed(u) for u in i["units"]})} for i in invs]
    return {"file": name, "units": sum(e["units"] for e in each), "span_min": sum(e["span_min"] for e in each),
            "runs": len(invs), "unit_min": sum(e["unit_min"] for e in each), "device": invs[-1]["device"],
            "commit": (invs[-1].get("git_commit") or "?")[:10], "invocations": each}


def device_table(docs: dict[str, dict]):
    """Each benchmark's whole grid on the CPU beside one GPU, from the committed speed-benchmark files (`docs`: file
    name -> document), as a DataFrame (index: the benchmark's title): `cpu_s` (Permuted MNIST: a whole grid timed
    with references and oracle, `cpu_seeds` seeds; CIFAR-100 and CUB: the mean timed run × the eleven methods × 5
    seeds, without them, on synthetic tensors, `cpu_extrapolated` where from a reduced run), `cpu_device`; `gpu_s`
    for `gpu_seeds` seeds with references and oracle, `gpu_scaled` (from `gpu_measured_seeds` timed seeds),
    `gpu_synthetic` (else `gpu_data`), `gpu_device`. A missing file gives NaN/None."""
    import pandas as pd

    from ..vocab import PAPER_METHOD_NAMES

    rows = {}
    for b, (cpu_name, gpu_name) in DEVICE_FILES.items():
        cpu, gpu = docs.get(cpu_name), docs.get(gpu_name)
        r: dict[str, Any] = {"cpu_s": float("nan"), "cpu_seeds": None, "cpu_whole_grid": None,
                             "cpu_extrapolated": None, "cpu_device": None, "gpu_s": float("nan"), "gpu_seeds": None,
                             "gpu_scaled": None, "gpu_measured_seeds": None, "gpu_synthetic": None, "gpu_data": None,
                             "gpu_device": None}
        if cpu is not None and "grids" in cpu:  # Permuted MNIST: whole grids timed
            g = cpu["grids"][0]
            r.update(cpu_s=g["new"]["wall_s"], cpu_seeds=g["seeds"], cpu_whole_grid=True, cpu_extrapolated=False,
                     cpu_device=cpu["provenance"]["device"])
        elif cpu is not None:  # the mean run of the methods it timed, times all eleven methods and five seeds
            est = bench_estimate(cpu, 5)
            r.update(cpu_s=est["mean_run_s"] * len(PAPER_METHOD_NAMES) * 5, cpu_seeds=5, cpu_whole_grid=False,
                     cpu_extrapolated=est["reduced"], cpu_device=est["device_long"])
        if gpu is not None:
            r.update(gpu_s=gpu["grid_s"], gpu_seeds=gpu["seeds"], gpu_scaled=gpu["measured_seeds"] < gpu["seeds"],
                     gpu_measured_seeds=gpu["measured_seeds"],
                     gpu_synthetic=bool(gpu.get("synthetic")), gpu_data=gpu["data"].split(",")[0],
                     gpu_device=gpu["device"].split(" (")[0])
        rows[SPECS[b].title] = r
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("benchmark")


def toc_pages(book: Path) -> list[str]:
    """The pages of a book's table of contents (`_toc.yml`), in order (root first), as paths relative to the book
    without suffix."""
    import yaml

    toc = yaml.safe_load((Path(book) / "_toc.yml").read_text())
    out = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                out.append(e["file"])
            walk(e.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return out


def page_source(book: Path, page: str) -> Optional[Path]:
    """The source file of a page of the table of contents (.md or .ipynb), or None."""
    return next((p for p in (Path(book) / f"{page}{ext}" for ext in (".md", ".ipynb")) if p.exists()), None)


def code_pages(book: Path) -> list[str]:
    """The pages of the table of contents that have code cells (the pages a build executes or could execute), in
    order."""
    import jupytext

    out = []
    for page in toc_pages(book):
        src = page_source(book, page)
        if src is not None and any(c.cell_type == "code" for c in jupytext.read(str(src)).cells):
            out.append(page)
    return out


def _interval(row: dict) -> Optional[tuple[datetime, datetime]]:
    """(start, end) of a page's recorded run: the cache record is made when the run ends ("executed", to the
    second) and the run took "execution_s"."""
    if row.get("execution_s") is None or not row.get("executed"):
        return None
    end = datetime.fromisoformat(row["executed"])
    return end - timedelta(seconds=row["execution_s"]), end


def overlapping_runs(rows: list[dict], slack_s: float = 1.0) -> dict[str, list[str]]:
    """page -> the other pages whose recorded runs overlapped its own by more than `slack_s` seconds (the record
    times are to the second). A build executes one page at a time, so an overlap means another build (or another
    program's notebooks) ran on the same machine at the same time, and the page's figure may include time spent
    waiting for the shared cores."""
    spans = {r["page"]: iv for r in rows if (iv := _interval(r)) is not None}
    out: dict[str, list[str]] = {}
    for page, (a0, a1) in spans.items():
        others = [q for q, (b0, b1) in spans.items()
                  if q != page and (min(a1, b1) - max(a0, b0)).total_seconds() > slack_s]
        if others:
            out[page] = others
    return out


def timings_table(doc: dict, pages: Optional[Sequence[str]] = None):
    """The committed per-page execution times (results/book-timings.json, written by data_scripts/book_timings.py)
    as a DataFrame: one row per page of `pages` (the pages with code of the current table of contents, `code_pages`;
    default: the file's own pages), in that order, the pages that the build did not execute (execute.exclude_patterns)
    in one row per pattern (`excluded`: how many pages). Columns: `execution_s` (NaN: not timed), `status` (the
    cache's: "cached", "force…", "not executed…", "no cached run of the current code"; "absent" for a page
    the file does not list (added to the book after that build)), `overlapped` (how many other pages' runs overlapped its run, `overlapping_runs`).
    `attrs` holds the figures above the table: device, commit, command, date, n_timed, total_s, untimed,
    n_overlapped, note."""
    import pandas as pd

    prov = doc.get("provenance") or {}
    by_page = {r["page"]: r for r in doc["pages"]}
    order = list(pages) if pages is not None else list(by_page)
    overlaps = overlapping_runs(doc["pages"])
    excluded: dict[str, list[str]] = {}  # exclude pattern -> the pages it keeps from running
    for page in order:
        status = by_page.get(page, {}).get("status") or ""
        if status.startswith("not executed"):
            excluded.setdefault(status.split(": ", 1)[-1].rstrip(")"), []).append(page)
    rows = []
    for page in order:
        r = by_page.get(page)
        pattern = next((pat for pat, group in excluded.items() if page in group), None)
        if pattern is not None:
            if page == excluded[pattern][0]:  # one row for all the pages of a pattern
                rows.append({"page": pattern, "execution_s": float("nan"), "status": "not executed",
                             "overlapped": 0, "excluded": len(excluded[pattern])})
        elif r is None:
            rows.append({"page": page, "execution_s": float("nan"), "status": "absent",
                         "overlapped": 0, "excluded": 0})
        else:
            rows.append({"page": page, "execution_s": r.get("execution_s", float("nan")),
                         "status": r.get("status") or "", "overlapped": len(overlaps.get(page, ())), "excluded": 0})
    df = pd.DataFrame(rows, columns=["page", "execution_s", "status", "overlapped", "excluded"]).set_index("page")
    timed = [r for r in doc["pages"] if r.get("execution_s") is not None and r["page"] in order]
    df.attrs = {"device": prov.get("device", "?"), "commit": (prov.get("git_commit") or "?")[:10],
                "command": relative_command(prov.get("command")).split(" --note ")[0],  # the note is its own field
                "date": (prov.get("started") or "?")[:10], "n_timed": len(timed),
                "total_s": sum(r["execution_s"] for r in timed),
                "untimed": len(order) - len(timed) - sum(len(g) for g in excluded.values()),
                "n_overlapped": len(overlaps), "note": prov.get("note") or ""}
    return df

