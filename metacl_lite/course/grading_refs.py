"""The reference implementations that an assignment asks students to write: trusted in the grader, absent in the jail.

The hidden tests take their expected values from `reference("balance.dynamic_lambda")`, which is the package's own
function: they run in the trusted grader process (`grading_worker`), never in the student's. The student's code runs
in a jail (`jail`) that sees no source of the package but a copy in which `sanitize` has replaced each withheld
function or class by a stub that raises: no private copy, `importlib.reload`, frame, closure or `gc` walk can recover
a reference there, because none exists in that process or on its disk.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

#: assignment -> the references its hidden tests compare with ("module.name" under metacl_lite)
WITHHELD = {
    "a1_dynamic_balance": ("balance.dynamic_lambda", "balance.dynamic_balance", "balance.kkt_residuals"),
    "a2_importance": ("importance.PathIntegral", "importance.mas_importance"),
    "a3_reptile": ("reptile.g1_exact", "reptile.g1_second_order", "reptile.taylor_errors"),
}


def reference(dotted: str):
    """The reference `module.name` the hidden tests compare with (in the jail: a stub that raises)."""
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(f"metacl_lite.{module}"), name)


def _stub(dotted: str, kind: str) -> str:
    why = (f"metacl_lite.{dotted} is withheld while grading (reference() is for the autograder's tests): "
           "the question asks you to write it")
    name = dotted.rsplit(".", 1)[1]
    if kind == "class":
        return f"class {name}:\n    def __init__(self, *args, **kwargs):\n        raise RuntimeError({why!r})\n"
    return f"def {name}(*args, **kwargs):\n    raise RuntimeError({why!r})\n"


def sanitize(package: Path, assignment: str) -> list[str]:
    """In a copy of the package (`package` is its `metacl_lite` folder), replace the assignment's withheld functions
    and classes by stubs that raise; returns what was replaced. A name not found is an error (the list is stale)."""
    done = []
    by_module: dict[str, list[str]] = {}
    for dotted in WITHHELD.get(assignment, ()):
        module, name = dotted.rsplit(".", 1)
        by_module.setdefault(module, []).append(name)
    for module, names in by_module.items():
        path = Path(package) / (module.replace(".", "/") + ".py")
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        spans = []
        for node in ast.parse("".join(lines)).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                spans.append((start, node.end_lineno, _stub(f"{module}.{node.name}", kind), node.name))
        missing = set(names) - {s[3] for s in spans}
        if missing:
            raise LookupError(f"metacl_lite.{module} defines no {', '.join(sorted(missing))} (grading_refs.WITHHELD)")
        for start, end, stub, name in sorted(spans, reverse=True):
            lines[start - 1:end] = [stub]
            done.append(f"{module}.{name}")
        path.write_text("".join(lines), encoding="utf-8")
    return sorted(done)
