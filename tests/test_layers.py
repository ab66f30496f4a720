"""The package's layers, bottom up: the base (errors, paths, progress bars, the vocabulary, the units' keys), the data, the speed paths
(`accel/`), the method (`metacl_lite/*.py`, what chapters 1-6 teach), the lab that runs and records grids (`lab/`),
the findings (`findings/`: the paper's numbers, its claims and their statistics), the results read into tables,
frames and figures (`report/`), then two wings side by side, publishing (`publish/`: the book's pages, the README,
papermill runs) and the course (`course/`: assignments, kit, grading), with the command line and the maintainers'
tools on top. Every import, at module level or inside a function, points downward, the two side-by-side wings never
import each other, and no module reaches itself through others (no import circle). Read from the source with `ast`,
nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "metacl_lite"
BASE = {"errors", "paths", "progress", "vocab", "keys"}
WINGS = ("data", "accel", "lab", "findings", "report", "publish", "course", "cli", "tools")
RANK = {"base": 0, "data": 1, "accel": 2, "method": 3, "lab": 4, "findings": 5, "report": 6, "publish": 7,
        "course": 7, "cli": 8}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    if module == "metacl_lite.__main__" or (len(parts) > 1 and parts[1] in ("cli", "tools")):
        return "cli"  # the maintainers' tools sit beside the users' command line
    if len(parts) > 1 and parts[1] in WINGS:
        return parts[1]
    return "base" if len(parts) == 1 or parts[1] in BASE else "method"


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
    """Every import that points up, or sideways into another wing of the same rank (publishing and the course)."""
    return sorted(f"{a} -> {b}" for a, deps in graph.items() for b in deps
                  if not b.endswith("__init__") and (RANK[layer(b)] > RANK[layer(a)] or (
                      RANK[layer(b)] == RANK[layer(a)] and layer(b) != layer(a))))


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
    assert {layer(m) for m in graph} == set(RANK)
    assert upward(graph) == []
    assert cycle(graph) == []


def test_the_method_layer_is_what_chapters_one_to_six_teach():
    modules = {m.split(".", 1)[1]: layer(m) for m in import_graph() if m != "metacl_lite"}
    assert {m for m, where in modules.items() if where == "method"} == {
        "models", "balance", "importance", "reptile", "training", "metrics", "memory"}
    assert {m for m, where in modules.items() if where == "base"} <= {"errors", "paths", "progress", "vocab", "keys"}
    assert {"data.specs", "data.datafiles", "data.streams", "data.mnist", "data.cifar100", "data.cub",
            "data.benchmarks"} <= {m for m, where in modules.items() if where == "data"}
    assert {m for m, where in modules.items() if where == "accel"} == {"accel", "accel.device", "accel.compiled"}


def test_each_wing_holds_one_concern():
    """report/ reads results into tables, frames and figures; the findings, the publishing and the course tooling
    are wings of their own; the lab holds what trains (the λ story too)."""
    modules = {m.split(".", 1)[1] for m in import_graph() if m != "metacl_lite"}
    assert {"findings.paper", "findings.claims", "findings.stats", "findings.evidence"} <= modules
    assert {"publish.pages", "publish.readme", "publish.notebooks"} <= modules
    assert {"course.assignments", "course.grading", "course.grading_refs", "course.grading_worker",
            "course.kit"} <= modules
    assert {"lab.lambda_story"} <= modules
    assert {m for m in modules if m.startswith("report.")} == {
        "report.tables", "report.plots", "report.readable", "report.commands", "report.interpret",
        "report.overview", "report.targets", "report.timings"}


def test_only_the_method_and_the_base_sit_at_the_packages_top_level():
    """The package's top level holds the method's modules (what chapters 1-6 teach) and the base (errors, paths,
    progress bars, the vocabulary, the units' keys); the data, the speed paths, the lab, the wings, the command line and the
    maintainers' tools are subpackages."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules <= {"__init__", "__main__", "errors", "paths", "progress", "vocab", "keys", "balance", "reptile",
                       "importance", "metrics", "models", "training", "memory"}
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages == set(WINGS)


@pytest.mark.parametrize("source, expect", [
    # one upward import inside a function of the method layer
    ({"training.py": "def f():\n    from .lab import grid\n"}, "upward"),
    # the lab asking the command line for something
    ({"lab/grid.py": "from ..cli import main\n"}, "upward"),
    # a report asking the maintainers' tools for something
    ({"report/a.py": "from ..tools import main\n"}, "upward"),
    # the speed paths asking the method for something (the inner loop is passed in instead)
    ({"accel/compiled.py": "from ..reptile import inner_loop\n"}, "upward"),
    # the data asking the speed paths for something
    ({"data/cub.py": "from ..accel import compiled\n"}, "upward"),
    # the course asking publishing for something: two wings of one rank
    ({"course/kit.py": "from ..publish import pages\n"}, "upward"),
    # two report modules importing each other
    ({"report/a.py": "from .b import x\n", "report/b.py": "def g():\n    from . import a\n"}, "cycle"),
])
def test_the_check_fails_on_an_upward_import_or_a_circle(tmp_path, source, expect):
    pkg = tmp_path / "metacl_lite"
    for d in ("", "data", "accel", "lab", "report", "publish", "course", "tools"):
        (pkg / d).mkdir(parents=True, exist_ok=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("from .report import a\n")
    for f in ("training.py", "reptile.py", "data/cub.py", "accel/compiled.py", "lab/grid.py", "report/a.py",
              "report/b.py", "publish/pages.py", "course/kit.py"):
        (pkg / f).write_text("")
    for f, text in source.items():
        (pkg / f).write_text(text)
    graph = import_graph(pkg)
    assert bool(upward(graph)) == (expect == "upward")
    assert bool(cycle(graph)) == (expect == "cycle")
