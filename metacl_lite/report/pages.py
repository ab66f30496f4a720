"""The book's reproduction pages, made from template notebooks with papermill's parameter injection, and the stamps
of the other pages that read results/ (`write_pages`, the `pages` command)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Optional

from ..lab.atomic import write_text
from ..data.datafiles import REPO_ROOT
from ..data.specs import SPECS


#: The book's reproduction pages made from the template: file stem -> (title, parameters).
TEMPLATE = REPO_ROOT / "book" / "reproduce" / "benchmark.md"
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


#: The chapter number of the reproduction part: its overview is chapter 9, the template (Permuted MNIST, K = 20) 9.1
#: and its variants 9.2, 9.3, ... in the order of PAGES (the order of book/_toc.yml).
CHAPTER = 9
TEMPLATE_NUMBER = f"{CHAPTER}.1"


def variant_number(i: int) -> str:
    """The section number of the i-th variant (1-based) of PAGES: the template is 9.1, so the first variant 9.2."""
    return f"{CHAPTER}.{i + 1}"


#: Blocks of the template that a generated page keeps only where it has what they show: between a line
#: "% only-if: <condition>" and the next "% end-if" (MyST comments). Conditions: "results" (the committed results
#: file of the page's setting exists), "paper" (the paper publishes numbers for it), "table" (either), "compare"
#: (both), "live" (the page trains a live run: the section saying what it is goes where there is none). A glued figure
#: or table whose data the page cannot have would fail the book's build (a glue key that is never set), so the page
#: leaves the block out instead; `pages` regenerates it when the results file appears (its STAMP changes).
ONLY_IF = "% only-if: "
END_IF = "% end-if"


def page_conditions(benchmark: str, K: int, live: bool, results_dir: Optional[Path] = None) -> dict[str, bool]:
    """The `ONLY_IF` conditions of the page of (benchmark, K)."""
    from .paper import paper_table

    results = (Path(results_dir or REPO_ROOT / "results") / f"{benchmark}-K{K}.json").exists()
    paper = paper_table(benchmark, K) is not None
    return {"results": results, "paper": paper, "table": results or paper, "compare": results and paper,
            "live": live}


def keep_blocks(text: str, conditions: dict[str, bool]) -> str:
    """`text` without the `ONLY_IF` blocks whose condition is false (their marker lines go too)."""
    out, skip = [], False
    for ln in text.splitlines(keepends=True):
        if ln.startswith(ONLY_IF):
            skip = not conditions[ln[len(ONLY_IF):].strip()]
            if skip:
                continue
        elif ln.startswith(END_IF):
            was, skip = skip, False
            if was:
                continue
        if not skip:
            out.append(ln)
    return "".join(out)


def parameters_markdown(params: dict[str, Any]) -> str:
    """What a reproduction page was run with, as a reader reads it (a short list, not a Python dict): the setting,
    the live run (methods, seeds, stream, device, folder) or that there is none."""
    from ..training import METHODS

    spec = SPECS[params["benchmark"]]
    K = params["K"]
    lines = [f"- **Setting:** {spec.title}, K = {K} training images per class."]
    if params["live"]:
        names = list(METHODS) if params["methods"] == "all" else [m.strip() for m in params["methods"].split(",")]
        methods = (f"all {len(names)} methods" if params["methods"] == "all"
                   else f"{len(names)} method{'s' if len(names) > 1 else ''} ("
                   + ", ".join(METHODS[m].label for m in names) + ")")
        if params["quick"]:
            stream = "a smoke run of 3 tasks with 1 epoch each (not the paper's protocol)"
        else:
            tasks = params["n_tasks"] or spec.n_tasks
            epochs = params["epochs"] or spec.epochs
            same = not params["n_tasks"] and not params["epochs"]
            stream = f"{tasks} tasks of {epochs} epoch{'s' if epochs > 1 else ''}" + (" (the paper's)" if same else
                                                                                    " (not the paper's protocol)")
        device = params["device"] or spec.device
        seeds = params["seeds"]
        folder = f"`{params['out_dir']}`" if params["out_dir"] else "a temporary folder"
        lines.append(f"- **Live run:** {methods} and the joint oracle, {seeds} seed{'s' if seeds > 1 else ''}, "
                     f"{stream}, on `{device}`; its results file goes to {folder}.")
    else:
        lines.append("- **Live run:** none (`live = False`); the page shows the committed results.")
    return "\n".join(lines)


#: A comment line of the template's code that names the committed results file the page shows and its digest.
#: The book's execution cache keys on the code of a page, not on the files it reads, so `pages` writes this line
#: (in the template and in every variant): a new results file changes the page's code, which re-executes it, and
#: `pages --check` reports the page stale until then.
STAMP = "# shows: "


def files_stamp(names: Iterable[str], results_dir: Optional[Path] = None) -> str:
    """The stamp line of a page that reads the files `names` of results/: each name with the start of its sha256,
    or 'absent'."""
    import hashlib

    folder = Path(results_dir or REPO_ROOT / "results")
    parts = []
    for name in names:
        path = folder / name
        digest = f"sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}" if path.exists() else "absent"
        parts.append(f"results/{name}, {digest}")
    return STAMP + "; ".join(parts)


def results_stamp(benchmark: str, K: int, results_dir: Optional[Path] = None) -> str:
    """The stamp line of the page for (benchmark, K): the results file's path and the start of its sha256, or
    'absent'."""
    return files_stamp([f"{benchmark}-K{K}.json"], results_dir)


#: The training logs of claims 5 and 6 (`lab.dynamics`), read by the intro and chapters 7 and 8.
DYNAMICS = "dynamics-pmnist.json"


def stamped_pages() -> dict[Path, list[str]]:
    """Pages other than the reproduction pages that read files of results/, and which: the overview of every setting
    (each setting's results file, the speed benchmarks of the benchmarks we could not run, and for the targets table
    the Permuted MNIST files beyond the paper's K and every K's tuning file), "Running this book"
    (the page timings), the intro's findings and the claims chapter (the results and control files, and the training
    logs of claims 5 and 6) and the analysis chapter (the results files, those training logs, the tuning file of every
    K, the lambda story)."""
    from .claims import CONTROLS, control_file
    from .timings import DEVICE_FILES

    settings = [f"{b}-K{K}.json" for b, spec in SPECS.items() for K in spec.paper_Ks]
    pmnist = [f"pmnist-K{K}.json" for K in SPECS["pmnist"].paper_Ks]
    controls = [control_file("pmnist", K, c) for K in SPECS["pmnist"].paper_Ks for c in CONTROLS]
    chapters = REPO_ROOT / "book" / "chapters"
    targets = ([f"pmnist-K{K}.json" for K in SPECS["pmnist"].extra_Ks]
               + [f"tuning-pmnist-K{K}.json" for K in SPECS["pmnist"].all_Ks])
    return {TEMPLATE.parent / "overview.md": settings + targets + ["bench-cifar100.json", "bench-cub.json",
                                                        "bench-cifar100-cuda.json", "bench-cub-cuda.json"],
            REPO_ROOT / "book" / "running.md": ["book-timings.json"] + [n for pair in DEVICE_FILES.values()
                                                                         for n in pair],
            REPO_ROOT / "book" / "intro.md": pmnist + controls + [DYNAMICS],
            chapters / "07_claims.md": pmnist + controls + [DYNAMICS],
            chapters / "08_analysis.md": [f"pmnist-K{K}.json" for K in SPECS["pmnist"].all_Ks] + [DYNAMICS]
            + [f"tuning-pmnist-K{K}.json" for K in SPECS["pmnist"].all_Ks]
            + ["lambda-story-pmnist.json"]}


def _stamped(text: str, stamp: Optional[str]) -> str:
    if stamp is None:
        return text
    return re.sub(rf"^{re.escape(STAMP)}.*$", lambda _: stamp, text, count=1, flags=re.M)


#: The template's figure and table labels (`:name:` and the `{numref}`s to them): each page makes its own unique.
LABEL = re.compile(r"\b((?:fig|tab)-repro-[a-z]+)\b")


def make_variant(template_text: str, title: str, params: dict[str, Any], number: str = TEMPLATE_NUMBER,
                 stamp: Optional[str] = None, conditions: Optional[dict[str, bool]] = None,
                 labels: Optional[str] = None) -> str:
    """The template's text with its first heading replaced by `number. Reproduction: title`, its parameter
    defaults by `params`, (if given) its `STAMP` line by `stamp`, with `conditions`, without the `ONLY_IF`
    blocks whose condition is false (`keep_blocks`), and with `labels` (the page's name), every figure and table
    label and the references to it suffixed with it, so that labels stay unique across the book."""
    text = _stamped(template_text, stamp)
    if labels:
        text = LABEL.sub(lambda m: f"{m.group(1)}-{labels.lower()}", text)
    lines = (keep_blocks(text, conditions) if conditions is not None else text).splitlines(keepends=True)
    out, in_params, titled = [], False, False
    for ln in lines:
        if not titled and ln.startswith("# "):
            out.append(f"# {number}. Reproduction: {title}\n")
            titled = True
            continue
        if ln.startswith(":tags: [parameters"):
            in_params = True
        elif in_params and ln.startswith("```"):
            in_params = False
        elif in_params and "=" in ln and not ln.startswith("#"):
            name = ln.split("=", 1)[0].strip()
            if name in params:
                comment = ln.split("#", 1)[1] if "#" in ln else ""
                ln = f"{name} = {params[name]!r}" + (f"  #{comment}" if comment else "\n")
        out.append(ln)
    return "".join(out).replace(
        "This page is a parameterised notebook: the same source reproduces",
        f"This page is made from the notebook of section {TEMPLATE_NUMBER} by `python -m metacl_lite pages`, with "
        "the parameters below: the same source reproduces", 1)


def write_pages(check: bool = False) -> list[Path]:
    """Write (or, with check, list the stale) variant pages next to the template, the template's own `STAMP` line (the
    committed results file of its default parameters) and the `STAMP` lines of the other pages that read results/
    (`stamped_pages`)."""
    text = TEMPLATE.read_text()
    stale = []
    defaults = {"benchmark": "pmnist", "K": 20}  # the template's (tests check them against its parameters cell)
    own = _stamped(text, results_stamp(defaults["benchmark"], defaults["K"]))
    title = own.split("\n# ", 1)[1].split("\n", 1)[0]
    want_title = f"{TEMPLATE_NUMBER}. Reproduction: {SPECS[defaults['benchmark']].title}, K = {defaults['K']}"
    own = own.replace(f"\n# {title}\n", f"\n# {want_title}\n", 1)
    if own != text:
        stale.append(TEMPLATE)
        if not check:
            write_text(TEMPLATE, own)
        text = own
    for page, names in stamped_pages().items():
        if page.exists():
            old = page.read_text()
            new = _stamped(old, files_stamp(names))
            if new != old:
                stale.append(page)
                if not check:
                    write_text(page, new)
    for i, (stem, (title, params)) in enumerate(PAGES.items(), 1):
        p = TEMPLATE.parent / f"{stem}.md"
        point = {**defaults, **params}
        want = make_variant(text, title, params, variant_number(i), results_stamp(point["benchmark"], point["K"]),
                            page_conditions(point["benchmark"], point["K"], point.get("live", True)), labels=stem)
        if not p.exists() or p.read_text() != want:
            stale.append(p)
            if not check:
                write_text(p, want)
    return stale
