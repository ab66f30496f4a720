"""Parameterised chapters: run a MyST notebook of the book with papermill, after checking its parameters.

    python -m metacl_lite notebook book/reproduce/benchmark.md -p benchmark pmnist -p K 50 -o runs/
    python -m metacl_lite notebook book/reproduce/benchmark.md --grid K=20,50 --grid seeds=1,3 -o runs/

A chapter declares its parameters in the cell tagged `parameters` and then calls `check_parameters(...)`, so that
plain papermill on the .ipynb form is checked too (an unknown, ill-typed or invalid parameter stops the notebook in
its first cells, before any work). The command line checks the same things for every run before the first kernel
starts, and gives each grid point its own folder, so no point overwrites another's results file.
"""
from __future__ import annotations

import ast
import contextlib
import itertools
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from ..lab.atomic import check_writable, write_text
from ..data.datafiles import PACKAGE_DIR, REPO_ROOT
from ..accel.device import DEVICE_CHOICES
from ..errors import FileFormatError, NotebookFailed, UsageError
from ..data.specs import SPECS


class ParameterError(UsageError):
    """A notebook parameter the notebook does not declare, of the wrong type or value, or a malformed grid."""


def _type_ok(value: Any, default: Any) -> bool:
    if default is None:
        return value is None or isinstance(value, (int, float, str, bool))
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, type(default))


def _benchmark(v: str, point: dict[str, Any]) -> Optional[str]:
    return None if v in SPECS else f"choose one of {', '.join(SPECS)}"


def _positive(v: int, point: dict[str, Any]) -> Optional[str]:
    return None if v > 0 else "give a positive integer (1, 2, ...)"


def _epochs(v: int, point: dict[str, Any]) -> Optional[str]:
    return None if v >= 0 else "give 0 (the paper's number) or a positive integer"


def _n_tasks(v: int, point: dict[str, Any]) -> Optional[str]:
    spec = SPECS.get(point.get("benchmark"))  # an unknown benchmark is reported by its own check
    if v == 0 or 2 <= v <= (spec.max_tasks if spec else math.inf):
        return None
    most = f" and at most {spec.max_tasks} ({spec.title} has no more)" if spec else ""
    return f"give 0 (the paper's number) or at least 2 tasks (backward transfer needs a later task){most}"


def _methods(v: str, point: dict[str, Any]) -> Optional[str]:
    from ..training import METHODS

    if v == "all":
        return None
    names = [m.strip() for m in v.split(",")]
    bad = [m for m in names if m not in METHODS]
    if bad:
        return f"unknown method(s) {', '.join(map(repr, bad))}; give 'all' or a comma-separated list of {', '.join(METHODS)}"
    twice = sorted({m for m in names if names.count(m) > 1})
    return f"{', '.join(twice)} listed twice; name each method once" if twice else None


def _device(v: Optional[str], point: dict[str, Any]) -> Optional[str]:
    ok = v is None or (isinstance(v, str) and (v in DEVICE_CHOICES or (v.startswith("cuda:") and v[5:].isdigit())))
    return None if ok else "give auto, cpu, cuda or cuda:N, or None (the benchmark's default: cpu for pmnist)"


#: Value checks by parameter name (the reproduction chapter's parameters), for every notebook that declares the name.
#: Each takes the value and the run's parameters (defaults included) and returns None for a good value, else how to
#: fix it. `validate` applies them, so the command line (before any kernel starts) and `check_parameters` (inside
#: the notebook, under plain papermill) check the same things.
VALUE_CHECKS: dict[str, Callable[[Any, dict[str, Any]], Optional[str]]] = {
    "benchmark": _benchmark, "K": _positive, "seeds": _positive, "methods": _methods,
    "epochs": _epochs, "n_tasks": _n_tasks, "device": _device,
}


def validate(params: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ParameterError for a parameter the notebook does not declare, one of the wrong type, or one whose value
    fails its check in VALUE_CHECKS."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s) {', '.join(unknown)}; "
                             f"this notebook takes: {', '.join(sorted(defaults))}")
    for k, v in params.items():
        if not _type_ok(v, defaults[k]):
            raise ParameterError(f"parameter {k}={v!r} has type {type(v).__name__}, "
                                 f"expected {type(defaults[k]).__name__} (default {defaults[k]!r})")
    point = {**defaults, **params}
    for k, v in params.items():
        problem = VALUE_CHECKS[k](v, point) if k in VALUE_CHECKS else None
        if problem:
            raise ParameterError(f"parameter {k}={v!r} is invalid: {problem}")


def check_parameters(namespace: dict, defaults: dict[str, Any], names_before: Iterable[str]) -> dict[str, Any]:
    """Call in the cell after `parameters`: checks what papermill injected. `names_before` are the global names that
    existed at the end of the parameters cell (`_names = set(globals())` as its last line); any new global holding
    plain data (what papermill injects) is an unknown parameter."""
    data = (int, float, str, bool, list, dict, tuple, type(None))  # what papermill can inject
    extra = {k: namespace[k] for k in set(namespace) - set(names_before)
             if not k.startswith("_") and isinstance(namespace[k], data)}
    current = {k: namespace[k] for k in defaults}
    validate({**extra, **current}, defaults)
    return current


def declared_parameters(path: Path) -> dict[str, Any]:
    """The parameters (name -> default, as a Python value) of a MyST or .ipynb notebook's cell tagged `parameters`,
    as `papermill.inspect_notebook` reads them ({} if there is no such cell). Names starting with `_` are the cell's
    own helpers, not parameters."""
    import jupytext
    import papermill

    with tempfile.TemporaryDirectory() as tmp:  # papermill inspects an .ipynb file
        ipynb = Path(tmp) / "notebook.ipynb"
        jupytext.write(_read(path), str(ipynb))
        found = papermill.inspect_notebook(ipynb)
    out = {}
    for name, p in found.items():
        if name.startswith("_"):
            continue
        try:  # papermill gives the default's source text
            out[name] = ast.literal_eval(p["default"])
        except (ValueError, SyntaxError):
            raise FileFormatError(f"{path}: the default of parameter {name}, {p['default']}, is not a Python "
                                  f"literal; write a literal such as 20, 'pmnist' or True") from None
    return out


def _read(path: Path):
    import jupytext

    return jupytext.read(str(path))


def parse_value(text: str) -> Any:
    """-p values: Python literals (20, 1.5, True, None, 'x'); anything else is a string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def tag(params: dict[str, Any]) -> str:
    """A file name for a set of parameters: {'K': 20, 'seeds': 1} -> 'K20-seeds1' (sorted by name; characters other
    than letters, digits and . , + = - become _); 'defaults' for none."""
    text = "-".join(f"{k}{v}" for k, v in sorted(params.items())) or "defaults"
    return re.sub(r"[^\w.,+=-]", "_", text)


@contextlib.contextmanager
def kernel_imports_this_checkout():
    """While it lasts, kernels started from here import this `metacl_lite` (the checkout running this code), not
    whichever one is installed: the folder holding this package goes first on PYTHONPATH, which a kernel inherits
    from this process's environment (papermill starts it with that environment, in the notebook's folder)."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_DIR.parent)] + ([old] if old else []))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def run_notebook(path: Path, params: dict[str, Any], out_dir: Path, kernel: str = "python3",
                 progress: bool = False) -> Path:
    """Check `params` against the notebook's declared parameters, then execute it with papermill into `out_dir`.

    The executed notebook is out_dir/<notebook>-<tag of params>.ipynb; it stays there when the run fails (with the
    error in it). If the notebook declares `out_dir`, it is set to `out_dir` unless given, so results files land
    beside the executed notebook. The kernel imports the `metacl_lite` of this checkout
    (`kernel_imports_this_checkout`)."""
    import jupytext
    import papermill

    path = Path(path)
    defaults = declared_parameters(path)
    params = dict(params)
    validate(params, defaults)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if "out_dir" in defaults and "out_dir" not in params:
        params["out_dir"] = str(out_dir.resolve())
    ipynb = out_dir / f"{path.stem}.input.ipynb"
    jupytext.write(_read(path), str(ipynb))
    target = out_dir / f"{path.stem}-{tag({k: v for k, v in params.items() if k != 'out_dir'})}.ipynb"
    try:
        with kernel_imports_this_checkout():
            papermill.execute_notebook(str(ipynb), str(target), parameters=params, kernel_name=kernel,
                                       cwd=str(path.parent.resolve()), progress_bar=progress)
    except papermill.PapermillExecutionError as e:  # one line, not papermill's traceback of the kernel's traceback
        raise NotebookFailed(path, e.exec_count, e.ename, e.evalue, target) from None
    finally:  # the executed notebook (with the error, if any) stays in target; the temporary input goes
        ipynb.unlink(missing_ok=True)
    return target


def expand_grid(base: dict[str, Any], grid: list[str]) -> list[dict[str, Any]]:
    """--grid K=20,50 --grid seeds=1,3  ->  the cross product of the lists, each merged into `base`.

    Raises ParameterError for an axis that is not NAME=v1,v2,..., has an empty or a repeated value, or names a
    parameter already given (in `base` or another axis)."""
    axes: dict[str, list[Any]] = {}
    for g in grid:
        name, eq, text = g.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise ParameterError(f"--grid takes NAME=v1,v2,..., got {g!r}")
        if name in axes or name in base:
            raise ParameterError(f"parameter {name} is given twice (with -p and --grid, or in two --grid); "
                                 f"give it once")
        texts = [t.strip() for t in text.split(",")]
        if "" in texts:
            raise ParameterError(f"--grid {g!r} has an empty value; give NAME=v1,v2,... with no empty entry")
        values = [parse_value(t) for t in texts]
        reprs = [repr(v) for v in values]
        twice = sorted({r for r in reprs if reprs.count(r) > 1})
        if twice:
            raise ParameterError(f"--grid {g!r} lists {', '.join(twice)} twice; give each value once "
                                 f"(a repeated point would overwrite its own results)")
        axes[name] = values
    return [{**base, **dict(zip(axes, combo))} for combo in itertools.product(*axes.values())]


def plan_runs(notebook: Path, params: Iterable[tuple[str, str]], grid: list[str],
              out_dir: Path) -> list[tuple[dict[str, Any], Path]]:
    """The runs of the `notebook` command as (parameters, folder), every one checked (`validate`, and its folder
    writable) before any runs.

    `params` are the -p NAME VALUE pairs (values parsed by `parse_value`), `grid` the --grid NAME=v1,v2 axes. Without
    a grid there is one run, in `out_dir`. With a grid each point runs in its own folder, out_dir/<tag of the point's
    grid values> (e.g. runs/K20-seeds1/), where the notebook's `out_dir` parameter points too: each point keeps its
    executed notebook and its results file."""
    notebook = Path(notebook)
    if not notebook.is_file() or notebook.suffix not in (".md", ".ipynb"):
        raise UsageError(f"notebook {notebook} not found or not a .md/.ipynb file; "
                         f"give a chapter such as book/reproduce/benchmark.md")
    base: dict[str, Any] = {}
    for name, text in params:
        if name in base:
            raise ParameterError(f"parameter {name} is given twice; give it once")
        base[name] = parse_value(text)
    defaults = declared_parameters(notebook)
    points = expand_grid(base, grid)
    if not grid:
        runs = [(base, Path(out_dir))]
    elif "out_dir" in base and "out_dir" in defaults:
        raise ParameterError("parameter out_dir cannot be set for a grid: each grid point writes into its own "
                             "folder under the output folder (-o)")
    else:
        names = [g.partition("=")[0].strip() for g in grid]
        runs = [(p, Path(out_dir) / tag({k: p[k] for k in names})) for p in points]
        folders = [str(f) for _, f in runs]
        if len(set(folders)) < len(folders):
            raise ParameterError(f"two grid points would share a folder ({', '.join(folders)}); "
                                 f"use grid values that differ in letters or digits")
    for p, folder in runs:
        validate(p, defaults)
        check_writable(folder / f"{notebook.stem}.ipynb")
    for device in sorted({p["device"] for p, _ in runs if p.get("device") is not None}):
        _check_device(device)  # a GPU that is not there: refused here, before a kernel starts and runs cells
    return runs


def _check_device(device: str) -> None:
    """`device.resolve`'s check of a notebook's `device` parameter (cuda or cuda:N needs that GPU here), its
    message in the notebook command's words (-p device instead of --device)."""
    from ..accel.device import resolve

    try:
        resolve(device)
    except UsageError as e:
        raise UsageError(str(e).replace("--device ", "-p device ")) from None


def run_cli(notebook: Path, params: list[tuple[str, str]], grid: list[str], out_dir: Path) -> list[Path]:
    """The `notebook` command: check every run (`plan_runs`, raising ParameterError/UsageError before any kernel
    starts), then execute them in order; returns the executed notebooks."""
    return [run_notebook(notebook, p, folder) for p, folder in plan_runs(notebook, params, grid, out_dir)]


def glued_values(ipynb: Path) -> dict[str, Any]:
    """The values a notebook recorded with myst_nb's `glue` (for tests that assert on what a chapter computed): from
    an executed notebook (papermill's), or from the `<page>.glue.json` record a book build leaves beside its
    executed copy of the page (MyST-NB moves the glued outputs there)."""
    ipynb = Path(ipynb)
    doc = json.loads(ipynb.read_text())
    if ipynb.name.endswith(".glue.json"):
        outputs = list(doc.values())
    else:
        outputs = [o for cell in doc["cells"] for o in cell.get("outputs", [])]
    out: dict[str, Any] = {}
    for o in outputs:
        sb = o.get("metadata", {}).get("scrapbook", {})
        data = o.get("data", {})
        key = next((k for k in (sb.get("mime_prefix", "") + "text/plain", "text/plain") if k in data), None)
        if sb.get("name") is not None and key is not None:
            name, txt = sb["name"], "".join(data[key])
            try:
                out[name] = ast.literal_eval(txt)
            except (ValueError, SyntaxError):
                out[name] = txt
    return out


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
    from .evidence import CONTROLS, control_file
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


def write_variants(check: bool = False) -> list[Path]:
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
