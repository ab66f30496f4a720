"""The book's reproduction pages, made with papermill from template notebooks, and the stamps of the other pages that
read results/ (`write_pages`, the `pages` command).

A reproduction page is the one template book/reproduce/templates/reproduction.md (MyST, read with jupytext) with
the page's parameters injected by papermill (`papermill.parameterize.parameterize_notebook`, the cell tagged
`injected-parameters` after the cell tagged `parameters`), written back as MyST: no second template language. The
parameter `tables` says which tables the setting has (`reproduction_kind`): "both" (a committed results file and the
paper's numbers), "ours" (a results file beyond the paper's K) or "paper" (the paper's numbers, no results file yet).
A template cell tagged `only-both`, `only-ours` or `only-paper` belongs to the pages of those kinds only, one tagged
`only-live` to the pages with a live run (`make_page` keeps the cells of its page and drops those tags).
One injected parameter, `shows`, names the committed results file the page shows and the start of its sha256: the
book's execution cache keys on a page's code, not on the files it reads, so a new results file changes the page,
which re-executes it, and `pages --check` reports the page stale until `pages` rewrites it.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Optional

from ..paths import REPO_ROOT
from ..data.specs import SPECS
from ..lab.atomic import write_text

REPRODUCE = REPO_ROOT / "book" / "reproduce"
TEMPLATES = REPRODUCE / "templates"
#: The one template of every reproduction page.
TEMPLATE = TEMPLATES / "reproduction.md"
#: Which tables a reproduction page has (`reproduction_kind`), the values of its `tables` parameter.
KINDS = ("both", "ours", "paper")
#: The reproduction page of Permuted MNIST, K = 20, with a live run (`live = True`): the
#: notebook `python -m metacl_lite notebook` runs for any setting (book/reproduce/benchmark.md).
BENCHMARK_PAGE = REPRODUCE / "benchmark.md"
BENCHMARK_PARAMS = {"benchmark": "pmnist", "K": 20, "live": True}

#: The book's other reproduction pages, made from the templates: file stem -> (title, parameters), in the order of
#: book/_toc.yml (after benchmark.md).
PAGES: dict[str, tuple[str, dict[str, Any]]] = {
    "pmnist-K50": ("Permuted MNIST, K = 50", {"K": 50, "live": False}),
    "pmnist-K200": ("Permuted MNIST, K = 200", {"K": 200, "live": False}),
    "pmnist-K500": ("Permuted MNIST, K = 500", {"K": 500, "live": False}),
    # fewer shots than the paper's (its future work): our numbers only, same protocol (`specs.BenchmarkSpec.extra_Ks`)
    "pmnist-K1": ("Permuted MNIST, K = 1 (beyond the paper)", {"K": 1, "live": False}),
    "pmnist-K5": ("Permuted MNIST, K = 5 (beyond the paper)", {"K": 5, "live": False}),
    "pmnist-K10": ("Permuted MNIST, K = 10 (beyond the paper)", {"K": 10, "live": False}),
    "cifar100-K20": ("Split CIFAR-100, K = 20", {"benchmark": "cifar100", "K": 20, "live": False}),
    "cifar100-K50": ("Split CIFAR-100, K = 50", {"benchmark": "cifar100", "K": 50, "live": False}),
    "cifar100-K200": ("Split CIFAR-100, K = 200", {"benchmark": "cifar100", "K": 200, "live": False}),
    "cifar100-K500": ("Split CIFAR-100, K = 500", {"benchmark": "cifar100", "K": 500, "live": False}),
    "cub-K10": ("Split CUB-200, K = 10", {"benchmark": "cub", "K": 10, "live": False}),
}


#: A comment line in the code of a page other than the reproduction pages that names the files of results/ it reads
#: and their digests (`stamped_pages`): as a reproduction page's `shows` parameter, a new file changes the page's
#: code, which re-executes it, and `pages --check` reports the page stale until then.
STAMP = "# shows: "


def files_stamp(names: Iterable[str], results_dir: Optional[Path] = None) -> str:
    """The stamp line of a page that reads the files `names` of results/: each name with the start of its sha256,
    or 'absent'."""
    folder = Path(results_dir or REPO_ROOT / "results")
    parts = []
    for name in names:
        parts.append(f"results/{name}, {_digest(folder / name)}")
    return STAMP + "; ".join(parts)


#: The training logs of claims 5 and 6 (`lab.dynamics`), read by the intro and chapters 7 and 8.
DYNAMICS = "dynamics-pmnist.json"


def memory_names(benchmark: str, K: Optional[int] = None, planned: bool = True) -> list[str]:
    """The memory family's results files of `benchmark` (at K, where given) that a page reads: with `planned`, every
    K of the paper's tables and budget M of chapter 9 (`findings.memory.BUDGETS`), present or not, then any other
    present; else the present ones only."""
    from ..findings.memory import BUDGETS, memory_file, memory_files

    ks = [K] if K is not None else list(SPECS[benchmark].paper_Ks)
    names = [memory_file(benchmark, k, M) for k in ks for M in BUDGETS] if planned else []
    return names + [p.name for (k, M), p in memory_files(benchmark).items() if k in ks and p.name not in names]


def stamped_pages() -> dict[Path, list[str]]:
    """Pages other than the reproduction pages that read files of results/, and which: the overview of every setting
    (each setting's results file, the speed benchmarks of the benchmarks we could not run, and for the targets table
    the Permuted MNIST files beyond the paper's K and every K's tuning file), "Running this book"
    (the page timings, the speed benchmarks, and the K = 20 results file whose times it sets beside them), the intro's
    findings and the claims chapter (the Permuted MNIST results and control files, and the training logs of claims 5
    and 6; the intro also the results files of the other benchmarks, whether each exists, for what is reproduced so
    far), the analysis chapter (the results files, those training logs, the tuning file of every
    K, the lambda story), the memory chapter (the Permuted MNIST results files at the paper's K and the memory files
    planned or present: `memory_names`), the reference page (the open choices, the K = 500 tuning file, the CPU and GPU speed
    benchmarks and the GPU tests' last run) and the instructors' page of the assignments (the grading times)."""
    from ..findings.evidence import CONTROLS, control_file
    from ..report.timings import DEVICE_FILES

    settings = [f"{b}-K{K}.json" for b, spec in SPECS.items() for K in spec.paper_Ks]
    pmnist = [f"pmnist-K{K}.json" for K in SPECS["pmnist"].paper_Ks]
    controls = [control_file("pmnist", K, c) for K in SPECS["pmnist"].paper_Ks for c in CONTROLS]
    chapters = REPO_ROOT / "book" / "chapters"
    targets = ([f"pmnist-K{K}.json" for K in SPECS["pmnist"].extra_Ks]
               + [f"tuning-pmnist-K{K}.json" for K in SPECS["pmnist"].all_Ks])
    return {REPRODUCE / "overview.md": settings + targets + ["bench-cifar100.json", "bench-cub.json",
                                                        "bench-cifar100-cuda.json", "bench-cub-cuda.json"],
            REPO_ROOT / "book" / "running.md": ["book-timings.json"] + [n for pair in DEVICE_FILES.values()
                                                                         for n in pair] + ["pmnist-K20.json"],
            REPO_ROOT / "book" / "intro.md": pmnist + controls + [DYNAMICS] + [n for n in settings if n not in pmnist],
            chapters / "07_claims.md": pmnist + controls + [DYNAMICS],
            chapters / "09_memory.md": pmnist + memory_names("pmnist"),
            chapters / "08_analysis.md": [f"pmnist-K{K}.json" for K in SPECS["pmnist"].all_Ks] + [DYNAMICS]
            + [f"tuning-pmnist-K{K}.json" for K in SPECS["pmnist"].all_Ks]
            + ["lambda-story-pmnist.json"],
            REPO_ROOT / "book" / "reference.md": ["open-choices-pmnist.json", "tuning-pmnist-K500.json"]
            + [f"bench-{n}.json" for n in ("pmnist-K500", "pmnist-K20", "cifar100", "cub", "pmnist-cuda",
                                           "cifar100-cuda", "cub-cuda")] + ["gpu-check.json"],
            REPO_ROOT / "book" / "assignments" / "instructors.md": ["grading-times.json"]}


def _stamped(text: str, stamp: Optional[str]) -> str:
    if stamp is None:
        return text
    return re.sub(rf"^{re.escape(STAMP)}.*$", lambda _: stamp, text, count=1, flags=re.M)


def _digest(path: Path) -> str:
    return f"sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}" if path.exists() else "absent"


def reproduction_kind(benchmark: str, K: int, results_dir: Optional[Path] = None) -> str:
    """Which tables the page of (benchmark, K) has: "both" (a committed results file and the paper's numbers),
    "ours" (a results file, no numbers in the paper) or "paper" (the paper's numbers, no results file yet); neither
    (a results file of ours deleted) raises FileFormatError naming the file and how to get it back."""
    from ..errors import FileFormatError, restore_advice
    from ..findings.paper import paper_table

    path = Path(results_dir or REPO_ROOT / "results") / f"{benchmark}-K{K}.json"
    results, paper = path.exists(), paper_table(benchmark, K) is not None
    if not results and not paper:
        raise FileFormatError(f"{path} is missing, and its reproduction page shows it (the paper has no numbers for "
                              f"{benchmark} K={K}): {restore_advice(path)}, or make it with `python -m metacl_lite "
                              f"run --benchmark {benchmark} --K {K}`")
    return "both" if results and paper else "ours" if results else "paper"


def _keeps(tags: list, kind: str, live: bool) -> bool:
    only = [t[5:] for t in tags if t.startswith("only-")]
    kinds = [k for k in only if k in KINDS]
    return (not kinds or kind in kinds) and ("live" not in only or live)


def make_page(template: Path, title: str, params: dict[str, Any], kind: Optional[str] = None) -> str:
    """The template's text with `params` injected by papermill after its `parameters` cell (the injected cell's code
    hidden) and its first heading set to `# Reproduction: <title>`, as MyST: the cells of a page of `kind` (default
    `params["tables"]`) and, with `params["live"]` False, none of the live run's (`only-*` tags, dropped)."""
    import jupytext
    from papermill.parameterize import parameterize_notebook

    nb = jupytext.read(str(template))
    kind = kind or params["tables"]
    nb.cells = [c for c in nb.cells if _keeps(c.metadata.get("tags", []), kind, bool(params.get("live", True)))]
    for cell in nb.cells:
        cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if not t.startswith("only-")]
    for cell in nb.cells:  # papermill expects every cell to have tags, and the notebook its own metadata
        cell.metadata.setdefault("tags", [])
    nb.metadata["papermill"] = {}
    nb = parameterize_notebook(nb, params, kernel_name="python3", language="python")
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata["tags"]:
            cell.metadata["tags"].append("hide-input")
        if not cell.metadata["tags"]:
            del cell.metadata["tags"]
    del nb.metadata["papermill"]
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    lines = first.source.split("\n")
    i = next(i for i, ln in enumerate(lines) if ln.startswith("# "))
    lines[i] = f"# Reproduction: {title}"
    first.source = "\n".join(lines)
    text = jupytext.writes(nb, fmt="md:myst")  # without the versions of jupytext's format (not the page's content)
    return re.sub(r"^    (format_version|jupytext_version): .*\n", "", text, flags=re.M)


def page_params(stem: str) -> tuple[Path, str, dict[str, Any], str]:
    """(the page's file, its title, its parameters with `shows` (the results file and the memory's files present at
    its K) and, but on benchmark.md, `tables`, its kind) for `stem` ("benchmark" or a key of PAGES). benchmark.md leaves `tables` empty (what the setting has), so that
    `python -m metacl_lite notebook` runs it for any benchmark and K."""
    if stem == "benchmark":
        title, params, path = "Permuted MNIST, K = 20", dict(BENCHMARK_PARAMS), BENCHMARK_PAGE
    else:
        title, params = PAGES[stem]
        params, path = {"benchmark": "pmnist", **params}, REPRODUCE / f"{stem}.md"
    name = f"{params['benchmark']}-K{params['K']}.json"
    kind = reproduction_kind(params["benchmark"], params["K"])
    params["shows"] = "; ".join(f"results/{n}, {_digest(REPO_ROOT / 'results' / n)}" for n in [name] + memory_names(
        params["benchmark"], params["K"], planned=False))  # and the memory's files at this K (chapter 9)
    if stem != "benchmark":
        params["tables"] = kind
    return path, title, params, kind


def write_pages(check: bool = False) -> list[Path]:
    """Write (or, with check, only list) the stale pages: every reproduction page (benchmark.md and PAGES, from
    their templates) and the `STAMP` lines of the other pages that read results/ (`stamped_pages`). Returns the
    pages that were (or would be) rewritten."""
    stale = []
    for stem in ["benchmark", *PAGES]:
        path, title, params, kind = page_params(stem)
        want = make_page(TEMPLATE, title, params, kind)
        if not path.exists() or path.read_text() != want:
            stale.append(path)
            if not check:
                write_text(path, want)
    for page, names in stamped_pages().items():
        if page.exists():
            old = page.read_text()
            new = _stamped(old, files_stamp(names))
            if new != old:
                stale.append(page)
                if not check:
                    write_text(page, new)
    return stale
