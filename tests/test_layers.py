"""The package's three layers: the method (`metacl_lite/*.py`, what chapters 1-6 teach), the lab that runs and
records grids (`metacl_lite/lab/`) and the reports that read results (`metacl_lite/report/`), with the command line
on top. Every import, at module level or inside a function, points downward (cli -> report -> lab -> method), and no
module reaches itself through others (no import circle). Both are read from the source with `ast`, nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "metacl_lite"
TOP = {"metacl_lite.cli", "metacl_lite.__main__"}
RANK = {"method": 0, "lab": 1, "report": 2, "cli": 3}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module in TOP or module.startswith("metacl_lite.tools"):  # the maintainers' tools sit beside the users' CLI
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in ("lab", "report") else "method"


def imports_of(path: Path, package: Path = PACKAGE) -> set[str]:
    """The package's modules that `path` imports anywhere in its body (a package `from x import y` counts as x.y
    when y is a module)."""
    me = module_name(path, package)
    is_pkg = path.name == "__init__.py"
    known = {module_name(p, package) for p in package.rglob("*.py")}
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == package.name}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if is_pkg else me.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != package.name:
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            out |= subs if subs else {target}
    return {m for m in out if m in known and m != me}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    return {module_name(p, package): imports_of(p, package) for p in sorted(package.rglob("*.py"))}


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, deps in graph.items() for b in deps
                  if not b.endswith("__init__") and RANK[layer(b)] > RANK[layer(a)])


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle (a list of modules, first == last), or [] when there is none. Package __init__ modules that
    import nothing are left out: a package is not a module that imports."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return []


def test_every_import_points_downward_and_none_closes_a_circle():
    graph = import_graph()
    assert {layer(m) for m in graph} == {"method", "lab", "report", "cli"}
    assert upward(graph) == []
    assert cycle(graph) == []


def test_the_method_layer_is_what_chapters_one_to_six_teach():
    method = {m.split(".", 1)[1] for m in import_graph() if layer(m) == "method" and m != "metacl_lite"}
    assert {"models", "data.specs", "balance", "importance", "reptile", "training", "metrics", "accel.compiled",
            "accel.device", "errors", "data.datafiles", "data.streams", "data.mnist", "data.cifar100", "data.cub",
            "data.benchmarks"} <= method
    assert not {m.rsplit(".", 1)[-1] for m in method} & {
        "store", "grid", "executors", "tuning", "choices", "hparams", "bench", "provenance", "atomic", "paper",
        "reports", "interpret", "overview", "targets", "timings", "claims", "plots", "notebooks", "lambda_story",
        "assignments"}


def test_only_the_method_sits_at_the_packages_top_level():
    """The package's top level holds the method's modules (what chapters 1-6 teach) with the errors and the command
    line; the data, the speed paths, the lab, the reports and the maintainers' tools are subpackages."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == {"__init__", "__main__", "cli", "errors", "balance", "reptile", "importance", "metrics", "models",
                       "training"}
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages == {"data", "accel", "lab", "report", "tools"}


@pytest.mark.parametrize("source, expect", [
    # one upward import inside a function of the method layer
    ({"training.py": "def f():\n    from .lab import grid\n"}, "upward"),
    # the lab asking the command line for something
    ({"lab/grid.py": "from ..cli import main\n"}, "upward"),
    # a report asking the maintainers' tools for something
    ({"report/a.py": "from ..tools import main\n"}, "upward"),
    # two report modules importing each other
    ({"report/a.py": "from .b import x\n", "report/b.py": "def g():\n    from . import a\n"}, "cycle"),
])
def test_the_check_fails_on_an_upward_import_or_a_circle(tmp_path, source, expect):
    pkg = tmp_path / "metacl_lite"
    for d in ("", "lab", "report", "tools"):
        (pkg / d).mkdir(parents=True, exist_ok=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("from .report import a\n")
    for f in ("training.py", "lab/grid.py", "report/a.py", "report/b.py"):
        (pkg / f).write_text("")
    for f, text in source.items():
        (pkg / f).write_text(text)
    graph = import_graph(pkg)
    assert bool(upward(graph)) == (expect == "upward")
    assert bool(cycle(graph)) == (expect == "cycle")
