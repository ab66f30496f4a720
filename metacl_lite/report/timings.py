"""How long things take, in words: what a committed speed-benchmark file says a full grid of a benchmark costs, and
the book's page execution times (results/book-timings.json, made by data_scripts/book_timings.py), page by page of
the current table of contents.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional, Sequence

from .commands import relative_command
from .paper import paper_table
from ..data.specs import SPECS


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


#: How a provenance note names the commit whose code ran when git_commit/git_dirty record another (a device copy of a
#: working tree reports its base commit with the tree's changes as uncommitted).
RAN_COMMIT = re.compile(r"code that ran is commit ([0-9a-f]{7,40})\b")


def provenance_note(prov: dict) -> str:
    """A file's provenance note: its own, or (a schema-1 file as `store.load` reads it, its one provenance block
    turned into an invocation) the latest invocation's; "" when none."""
    invs = [i for i in prov.get("invocations") or [] if isinstance(i, dict) and i.get("note")]
    return prov.get("note") or (invs[-1]["note"] if invs else "")


def ran_commit(prov: dict, noted: bool = False) -> str:
    """The commit whose code made a file, in Markdown: the one its provenance note names ("The code that ran is commit
    X") where it names one, with the commit that git_commit records beside it (`noted`: the text quotes the note
    right after, which says so: the commit alone); else git_commit (10 characters), "with uncommitted changes" where
    git_dirty says so."""
    recorded = f"`{(prov.get('git_commit') or '?')[:10]}`"
    mo = RAN_COMMIT.search(provenance_note(prov))
    if mo and noted:
        return f"commit `{mo.group(1)}`"
    if mo:
        return (f"commit `{mo.group(1)}`, the code that ran; its provenance records {recorded} with uncommitted "
                f"changes, the base of the tree that ran")
    return f"commit {recorded}" + (" with uncommitted changes" if prov.get("git_dirty") else "")


def target_mark(doc: dict, met: str = "✓", missed: str = "✗") -> str:
    """A GPU bench file's verdict against its target (`met` or `missed`), saying when the grid time it rests on was
    scaled from fewer timed seeds than the grid has (`grid_s` = measured wall × seeds / measured seeds)."""
    mark = met if doc["grid_s"] <= doc["target_s"] else missed
    if doc["measured_seeds"] < doc["seeds"]:
        mark += f" (scaled from {doc['measured_seeds']} timed seed{'s' if doc['measured_seeds'] > 1 else ''})"
    return mark


def mps_note(doc: dict) -> str:
    """", under NVIDIA MPS" where a GPU bench ran with the Multi-Process Service (its workers' kernels side by side)."""
    return ", under NVIDIA MPS" if doc.get("mps") else ""


def gpu_grid_markdown(doc: dict) -> str:
    """What a GPU speed-benchmark file (`bench --device cuda`, results/bench-<suite>-cuda.json) measured, in words:
    the whole grid's wall time beside its target, how many seeds were timed, the data and the workers."""
    prov = doc.get("provenance") or {}
    grid = f"{doc['seeds']} seeds took {duration(doc['grid_s'])}" + scaled_note(doc)
    return (f"**On a GPU.** `{relative_command(prov.get('command'))}` ({doc['device']}, {ran_commit(prov)}): the "
            f"whole grid at K = {doc['K']} (every method, the references and the oracle, at full size: "
            f"{doc['n_tasks']} tasks × {doc['epochs']} epochs) on {doc['data']}, {doc['workers']} worker processes "
            f"sharing the card{mps_note(doc)}: {grid}; the target for one H100 is {duration(doc['target_s'])}: "
            f"{target_mark(doc, 'met', 'missed')}.")


#: The speed-benchmark files that "Running this book" sets side by side: the CPU one and the GPU one of each benchmark.
DEVICE_FILES = {"pmnist": ("bench-pmnist-K20.json", "bench-pmnist-cuda.json"),
                "cifar100": ("bench-cifar100.json", "bench-cifar100-cuda.json"),
                "cub": ("bench-cub.json", "bench-cub-cuda.json")}


def device_table(docs: dict[str, dict]) -> str:
    """Each benchmark's whole grid on the CPU beside one GPU, from the committed speed-benchmark files (`docs`: file
    name -> document; a missing file shows as "not measured"), saying what each figure is: measured or scaled or
    extrapolated, and on which data (a GPU file's `synthetic`/`data` fields; the CPU files of CIFAR-100 and CUB are
    always synthetic tensors of the real shapes)."""
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
                 f"(the mean of {est['n_methods']} timed method(s) × {len(METHODS)}), on synthetic tensors of the real "
                 f"shapes, {'extrapolated from a reduced run' if est['reduced'] else 'measured'} "
                 f"({est['device_long']})")
        if gpu is None:
            g_text = "not measured"
        else:
            scaled = gpu["measured_seeds"] < gpu["seeds"]
            g_text = (f"{duration(gpu['grid_s'])} for {gpu['seeds']} seeds with references and oracle"
                      + (" on synthetic tensors of the exact shapes (not the dataset's images)" if gpu.get("synthetic")
                         else f" on {gpu['data'].split(',')[0]}") + ", "
                      + (f"scaled from {gpu['measured_seeds']} measured" if scaled else "measured")
                      + f" ({gpu['device'].split(' (')[0]})")
        lines.append(f"| {SPECS[b].title} | {c} | {g_text} |")
    return "\n".join(lines)


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


def _page_link(page: str) -> str:
    """A page of the book as a MyST link that shows its title (titles wrap in a narrow column; paths do not)."""
    return f"{{doc}}`/{page}`"


def _status_words(row: dict) -> str:
    status = row.get("status") or ""
    if status == "cached":
        return ""
    if status.startswith("force"):
        return "runs on every build: see the table at the end"
    if status.startswith("not executed"):
        return "not executed (excluded)"
    if status == "no cached run of the current code":
        return "not timed: no run of its current code"
    return status


def timings_markdown(doc: dict, pages: Optional[Sequence[str]] = None) -> str:
    """The committed per-page execution times (results/book-timings.json, written by data_scripts/book_timings.py)
    as a Markdown table: one row per page of `pages` (the pages with code of the current table of contents,
    `code_pages`; default: the file's own pages), in that order, the pages that the build did not execute
    (execute.exclude_patterns) in one row per pattern. A page the file does not list is shown as not timed (added to
    the book after that build); a page whose run overlapped other pages' runs (`overlapping_runs`) says so. The
    text above the table says where the figures come from and what they add up to."""
    prov = doc.get("provenance") or {}
    by_page = {r["page"]: r for r in doc["pages"]}
    order = list(pages) if pages is not None else list(by_page)
    overlaps = overlapping_runs(doc["pages"])
    excluded: dict[str, list[str]] = {}  # exclude pattern -> the pages it keeps from running
    for page in order:
        status = by_page.get(page, {}).get("status") or ""
        if status.startswith("not executed"):
            excluded.setdefault(status.split(": ", 1)[-1].rstrip(")"), []).append(page)
    lines = ["| Page | Time | Note |", "|---|---|---|"]
    for page in order:
        r = by_page.get(page)
        pattern = next((pat for pat, group in excluded.items() if page in group), None)
        if pattern is not None:
            if page == excluded[pattern][0]:  # one row for all the pages of a pattern
                lines.append(f"| `{pattern}` | – | {len(excluded[pattern])} page(s), not executed |")
        elif r is None:
            lines.append(f"| {_page_link(page)} | – | not timed: not in the book then |")
        else:
            t = duration(r["execution_s"]) if r.get("execution_s") is not None else "–"
            note = f"overlapped {len(overlaps[page])} other run(s)" if page in overlaps else _status_words(r)
            lines.append(f"| {_page_link(page)} | {t} | {note} |")
    text = "\n".join(lines)
    timed = [r for r in doc["pages"] if r.get("execution_s") is not None and r["page"] in order]
    untimed = len(order) - len(timed) - sum(len(g) for g in excluded.values())
    command = relative_command(prov.get("command")).split(" --note ")[0]  # the note is quoted below
    head = (f"From one full build of the book on {prov.get('device', '?')}, at commit "
            f"`{(prov.get('git_commit') or '?')[:10]}`, read from its execution cache by `{command}` on "
            f"{(prov.get('started') or '?')[:10]}: each figure is the wall time of the page's last full run in that "
            f"build. The {len(timed)} timed pages took {sum(r['execution_s'] for r in timed) / 60:.0f} min "
            f"together; {untimed} executed page(s) have no figure.")
    if overlaps:
        head += (f" A build runs one page at a time, yet the runs of {len(overlaps)} pages overlapped other pages' "
                 f"runs: another build shared the machine, and those figures may include time spent waiting.")
    if prov.get("note"):
        head += f" Conditions of the build, as recorded: {prov['note']}"
    return head + "\n\n" + text
