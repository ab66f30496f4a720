"""Parameterised chapters: run a MyST notebook of the book with papermill, after checking its parameters.

    python -m metacl_lite notebook book/reproduce/benchmark.md -p benchmark pmnist -p K 50 -o runs/
    python -m metacl_lite notebook book/reproduce/benchmark.md --grid K=20,50 --grid seeds=1,3 -o runs/

A chapter declares its parameters in the cell tagged `parameters` and then calls `check_parameters(...)`, so that
plain papermill on the .ipynb form is checked too (an unknown, ill-typed or invalid parameter stops the notebook in
its first cells, before any work). The command line checks the same things for every run before the first kernel
starts, and gives each grid point its own folder, so no point overwrites another's results file. A notebook's cell
tagged `injected-parameters` (a reproduction page's own setting, written by `pages.write_pages`) holds its defaults:
a run keeps them under the parameters it is given.
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

from ..lab.atomic import check_writable
from ..paths import PACKAGE_DIR, REPO_ROOT
from ..accel.device import DEVICE_CHOICES
from ..errors import FileFormatError, NotebookFailed, UsageError
from ..data.specs import MAX_SEEDS, SPECS


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


class _Invalid(ValueError):
    """A parameter value its check in VALUE_CHECKS refuses; `validate` says which parameter."""


def _benchmark(v: str, point: dict[str, Any]) -> None:
    if v not in SPECS:
        raise _Invalid(f"choose one of {', '.join(SPECS)}")


def _positive(v: int, point: dict[str, Any]) -> None:
    if v <= 0:
        raise _Invalid("give a positive integer (1, 2, ...)")


def _seeds(v: int, point: dict[str, Any]) -> None:
    _positive(v, point)
    if v > MAX_SEEDS:  # as `run --seeds` (the page trains seeds 0..v-1)
        raise _Invalid(f"at most {MAX_SEEDS} seeds per run (the paper's tables average 5)")


def _K(v: int, point: dict[str, Any]) -> None:
    _positive(v, point)
    spec = SPECS.get(point.get("benchmark"))  # an unknown benchmark is reported by its own check
    if spec and v > spec.max_K:
        raise _Invalid(f"{spec.title} has at most {spec.max_K} training images in its smallest class: give K <= "
                       f"{spec.max_K}")


def _epochs(v: int, point: dict[str, Any]) -> None:
    if v < 0:
        raise _Invalid("give 0 (the paper's number) or a positive integer")


def _n_tasks(v: int, point: dict[str, Any]) -> None:
    spec = SPECS.get(point.get("benchmark"))  # an unknown benchmark is reported by its own check
    if not (v == 0 or 2 <= v <= (spec.max_tasks if spec else math.inf)):
        raise _Invalid("give 0 (the paper's number) or at least 2 tasks (backward transfer needs a later task)"
                       + (f" and at most {spec.max_tasks} ({spec.title} has no more)" if spec else ""))


def _methods(v: str, point: dict[str, Any]) -> None:
    from ..training import METHODS

    if v == "all":
        return
    names = [m.strip() for m in v.split(",")]
    bad = [m for m in names if m not in METHODS]
    if bad:
        raise _Invalid(f"unknown method(s) {', '.join(map(repr, bad))}; give 'all' or a comma-separated list of "
                       f"{', '.join(METHODS)}")
    twice = sorted({m for m in names if names.count(m) > 1})
    if twice:
        raise _Invalid(f"{', '.join(twice)} listed twice; name each method once")


def _device(v: Optional[str], point: dict[str, Any]) -> None:
    ok = v is None or (isinstance(v, str) and (v in DEVICE_CHOICES or (v.startswith("cuda:") and v[5:].isdigit())))
    if not ok:
        raise _Invalid("give auto, cpu, cuda or cuda:N, or None (the benchmark's default: cpu for pmnist)")


#: Value checks by parameter name (the reproduction chapter's parameters), for every notebook that declares the name.
#: Each takes the value and the run's parameters (defaults included) and raises for a bad value, saying how to fix
#: it. `validate` applies them, so the command line (before any kernel starts) and `check_parameters` (inside the
#: notebook, under plain papermill) check the same things.
VALUE_CHECKS: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "benchmark": _benchmark, "K": _K, "seeds": _seeds, "methods": _methods,
    "epochs": _epochs, "n_tasks": _n_tasks, "device": _device,
}


def validate(params: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ParameterError for a parameter the notebook does not declare, one of the wrong type, or one whose value
    fails its check in VALUE_CHECKS."""
    unknown = sorted(set(params) - set(defaults))
    if unknown and not defaults:
        raise ParameterError(f"this notebook takes no parameters (it has no cell tagged 'parameters'), so "
                             f"{', '.join(unknown)} cannot be set: run it without -p/--grid, or choose a "
                             f"parameterised chapter such as book/reproduce/benchmark.md")
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s) {', '.join(unknown)}; "
                             f"this notebook takes: {', '.join(sorted(defaults))}")
    for k, v in params.items():
        if not _type_ok(v, defaults[k]):
            raise ParameterError(f"parameter {k}={v!r} has type {type(v).__name__}, "
                                 f"expected {type(defaults[k]).__name__} (default {defaults[k]!r})")
    point = {**defaults, **params}
    for k, v in params.items():
        try:
            if k in VALUE_CHECKS:
                VALUE_CHECKS[k](v, point)
        except _Invalid as e:
            raise ParameterError(f"parameter {k}={v!r} is invalid: {e}") from None


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


def injected_parameters(path: Path) -> dict[str, Any]:
    """The values of a notebook's cell tagged `injected-parameters` (papermill's; a reproduction page's own
    parameters, `pages.make_page`), {} without one."""
    cells = [c for c in _read(Path(path)).cells if "injected-parameters" in c.metadata.get("tags", [])]
    out = {}
    for node in (ast.parse(cells[0].source).body if cells else []):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def declared_parameters(path: Path) -> dict[str, Any]:
    """The parameters (name -> default, as a Python value) of a MyST or .ipynb notebook's cell tagged `parameters`,
    as `papermill.inspect_notebook` reads them ({} if there is no such cell), with the values of its injected
    parameters over them (a reproduction page's own: its benchmark and K). Names starting with `_` are the cell's
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
    return {**out, **{k: v for k, v in injected_parameters(path).items() if k in out}}


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


def reproduction_page(name: str) -> Path:
    """The book's reproduction notebook `name` (`benchmark`): book/reproduce/<name>.md of the checkout, else
    <name>.md or <name>.ipynb in the working folder (a copy downloaded from the book, for an installed package)."""
    here = Path.cwd()
    for p in (REPO_ROOT / "book" / "reproduce" / f"{name}.md", here / f"{name}.md", here / f"{name}.ipynb"):
        if p.is_file():
            return p
    raise UsageError(f"the book's reproduction notebook {name}.md is neither in {REPO_ROOT / 'book' / 'reproduce'} "
                     f"nor in {here}: download it from the book's Reproductions page into this folder")


def run_notebook(path: Path, params: dict[str, Any], out_dir: Path, kernel: str = "python3",
                 progress: bool = False) -> Path:
    """Check `params` against the notebook's declared parameters, then execute it with papermill into `out_dir`,
    with the notebook's own injected parameters (a reproduction page's setting) under `params`.

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
            papermill.execute_notebook(str(ipynb), str(target), parameters={**injected_parameters(path), **params},
                                       kernel_name=kernel,
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
        from ..paths import IN_CHECKOUT
        raise UsageError(f"notebook {notebook} not found or not a .md/.ipynb file; " + (
            "give a chapter such as book/reproduce/benchmark.md" if IN_CHECKOUT else "an installed metacl-lite holds "
            "no chapters: give the path of one in a clone of the repository, or in the book's notebooks download "
            "(metacl-lite-notebooks.zip, linked at the foot of every page)"))
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
