"""Parameterised chapters: run a MyST notebook of the book with papermill, after checking its parameters.

    python -m metacl_lite notebook book/reproduce/benchmark.md -p benchmark pmnist -p K 50 -o runs/
    python -m metacl_lite notebook book/reproduce/benchmark.md --grid K=20,50 --grid seeds=1,3 -o runs/

A chapter declares its parameters in the cell tagged `parameters` and then calls `check_parameters(...)`, so that
plain papermill on the .ipynb form is checked too (an unknown or ill-typed parameter stops the notebook in its first
cells, before any work).
"""
from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path
from typing import Any, Iterable, Optional

from .data import REPO_ROOT


class ParameterError(ValueError):
    pass


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


def validate(params: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ParameterError for a parameter the notebook does not declare, or one of the wrong type."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s) {', '.join(unknown)}; "
                             f"this notebook takes: {', '.join(sorted(defaults))}")
    for k, v in params.items():
        if not _type_ok(v, defaults[k]):
            raise ParameterError(f"parameter {k}={v!r} has type {type(v).__name__}, "
                                 f"expected {type(defaults[k]).__name__} (default {defaults[k]!r})")


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
    """The parameters (name -> default) of a MyST or .ipynb notebook's cell tagged `parameters` ({} if none)."""
    nb = _read(path)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            out = {}
            for node in ast.parse(cell.source).body:
                if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                        and not node.targets[0].id.startswith("_")):
                    out[node.targets[0].id] = ast.literal_eval(node.value)
            return out
    return {}  # no parameters cell: the notebook takes no parameters


def _read(path: Path):
    import jupytext

    return jupytext.read(str(path))


def parse_value(text: str) -> Any:
    """-p values: Python literals (20, 1.5, True, None, 'x'); anything else is a string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def run_notebook(path: Path, params: dict[str, Any], out_dir: Path, kernel: str = "python3",
                 progress: bool = False) -> Path:
    """Check `params` against the notebook's declared parameters, then execute it with papermill into `out_dir`.

    The executed notebook is named after the notebook and its parameters. If the notebook declares `out_dir`, it is
    set to `out_dir` unless given, so results files land beside the executed notebook."""
    import papermill

    path = Path(path)
    defaults = declared_parameters(path)
    params = dict(params)
    validate(params, defaults)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if "out_dir" in defaults and "out_dir" not in params:
        params["out_dir"] = str(out_dir.resolve())
    tag = "-".join(f"{k}{v}" for k, v in sorted(params.items()) if k != "out_dir") or "defaults"
    ipynb = out_dir / f"{path.stem}.input.ipynb"
    import jupytext

    jupytext.write(_read(path), str(ipynb))
    target = out_dir / f"{path.stem}-{tag}.ipynb".replace("/", "_")
    try:
        papermill.execute_notebook(str(ipynb), str(target), parameters=params, kernel_name=kernel,
                                   cwd=str(path.parent.resolve()), progress_bar=progress)
    finally:  # the executed notebook (with the error, if any) stays in target; the temporary input goes
        ipynb.unlink(missing_ok=True)
    return target


def expand_grid(base: dict[str, Any], grid: list[str]) -> list[dict[str, Any]]:
    """--grid K=20,50 --grid seeds=1,3  ->  the cross product of the lists, each merged into `base`."""
    axes = []
    for g in grid:
        if "=" not in g:
            raise ParameterError(f"--grid takes NAME=v1,v2,..., got {g!r}")
        k, vals = g.split("=", 1)
        axes.append([(k, parse_value(v)) for v in vals.split(",")])
    return [{**base, **dict(combo)} for combo in itertools.product(*axes)] if axes else [dict(base)]


def glued_values(ipynb: Path) -> dict[str, Any]:
    """The values a notebook recorded with myst_nb's `glue` (for tests that assert on what a chapter computed)."""
    nb = json.loads(Path(ipynb).read_text())
    out: dict[str, Any] = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            sb = o.get("metadata", {}).get("scrapbook", {})
            key = sb.get("mime_prefix", "") + "text/plain"
            if sb.get("name") is not None and key in o.get("data", {}):
                name, txt = sb["name"], "".join(o["data"][key])
                try:
                    out[name] = ast.literal_eval(txt)
                except (ValueError, SyntaxError):
                    out[name] = txt
    return out


#: The book's reproduction pages made from the template: file stem -> (title, parameters).
TEMPLATE = REPO_ROOT / "book" / "reproduce" / "benchmark.md"
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "pmnist-K50": ("Permuted MNIST, K = 50", {"K": 50, "live": False}),
    "pmnist-K200": ("Permuted MNIST, K = 200", {"K": 200, "live": False}),
    "pmnist-K500": ("Permuted MNIST, K = 500", {"K": 500, "live": False}),
    "cifar100-K20": ("Split CIFAR-100, K = 20", {"benchmark": "cifar100", "K": 20, "live": False}),
    "cifar100-K50": ("Split CIFAR-100, K = 50", {"benchmark": "cifar100", "K": 50, "live": False}),
    "cifar100-K200": ("Split CIFAR-100, K = 200", {"benchmark": "cifar100", "K": 200, "live": False}),
    "cifar100-K500": ("Split CIFAR-100, K = 500", {"benchmark": "cifar100", "K": 500, "live": False}),
    "cub-K10": ("Split CUB-200, K = 10", {"benchmark": "cub", "K": 10, "live": False}),
}


def make_variant(template_text: str, title: str, params: dict[str, Any]) -> str:
    """The template's text with its first heading replaced by `title` and its parameter defaults by `params`."""
    lines = template_text.splitlines(keepends=True)
    out, in_params, titled = [], False, False
    for ln in lines:
        if not titled and ln.startswith("# "):
            out.append(f"# 7. Reproduction: {title}\n")
            titled = True
            continue
        if ln.startswith(":tags: [parameters]"):
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
        "This page is the parameterised notebook of chapter 7, made for the parameters below by "
        "`python -m metacl_lite pages`. It is the same source that reproduces", 1)


def write_variants(check: bool = False) -> list[Path]:
    """Write (or, with check, list the stale) variant pages next to the template."""
    text = TEMPLATE.read_text()
    stale = []
    for stem, (title, params) in VARIANTS.items():
        p = TEMPLATE.parent / f"{stem}.md"
        want = make_variant(text, title, params)
        if not p.exists() or p.read_text() != want:
            stale.append(p)
            if not check:
                p.write_text(want)
    return stale
