"""The reference implementations that an assignment asks students to write, withheld while grading.

While `grading` grades a submission, the kernel's IPython startup file (run before any cell of the notebook) calls
`withhold(assignment)`: it loads a trusted copy of each reference (a private copy of its module, so that the copy's
own calls are untouched), then replaces the package's functions with ones that raise, so a submission that calls
`metacl_lite.balance.dynamic_lambda` instead of computing λ fails. The hidden tests take their expected values from
`reference(...)`: the trusted copy while grading, the package's function otherwise (`otter assign`'s own run of the
tests against the solution, `assignments check`). While grading, `reference` gives the trusted copy only to the test
files (code compiled from a `tests/*.py` file), so a submission cannot call it in place of its own function either;
the copies are held in its closure, not in a module attribute.

`protect()` (the same startup file) snapshots otter's test runner and the assertion helpers the tests use, and puts
them back before every cell runs and before every test case, so a cell that overrides them
(`test_case.call_func = ...`, `torch.testing.assert_close = ...`) changes nothing by the time otter's checks run, and a
test case during which a student's function overrides one fails (as does one that calls sys.exit). It is a guard, not
a sandbox: the student's code runs in the same process as the tests and can still reach what is not on the list.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

#: assignment -> the references its hidden tests compare with ("module.name" under metacl_lite)
WITHHELD = {
    "a1_dynamic_balance": ("balance.dynamic_lambda", "balance.dynamic_balance", "balance.kkt_residuals"),
    "a2_importance": ("importance.PathIntegral", "importance.mas_importance"),
    "a3_reptile": ("reptile.g1_exact", "reptile.g1_second_order", "reptile.taylor_errors"),
}


class Withheld(RuntimeError):
    """A reference implementation called while it is withheld (grading)."""


def _stub(dotted: str):
    def withheld(*args, **kwargs):
        raise Withheld(f"metacl_lite.{dotted} is withheld while grading: the question asks you to write it")

    withheld.__name__ = dotted.rsplit(".", 1)[1]
    return withheld


def _private_copy(module: str):
    """A second, private instance of metacl_lite.<module> (same file, own globals; its relative imports resolve to the
    package's shared modules)."""
    real = importlib.import_module(f"metacl_lite.{module}")
    spec = importlib.util.spec_from_file_location(f"metacl_lite._trusted_{module}", real.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def withhold(assignment: str) -> None:
    """Keep trusted copies of the assignment's references, then make the package's own raise when called, and
    `reference` hand the copies to the test files only."""
    copies: dict[str, Any] = {}
    trusted: dict[str, Any] = {}
    for dotted in WITHHELD.get(assignment, ()):
        module, name = dotted.rsplit(".", 1)
        if module not in copies:
            copies[module] = _private_copy(module)
        trusted[dotted] = getattr(copies[module], name)
    for dotted in WITHHELD.get(assignment, ()):
        module, name = dotted.rsplit(".", 1)
        setattr(importlib.import_module(f"metacl_lite.{module}"), name, _stub(dotted))

    def reference_while_grading(dotted: str):
        if dotted not in trusted:
            return _package(dotted)
        caller = Path(sys._getframe(1).f_code.co_filename)
        if caller.suffix != ".py" or caller.parent.name != "tests":
            raise Withheld(f"reference({dotted!r}) is for the autograder's tests; the question asks you to write it")
        return trusted[dotted]

    reference_while_grading.__doc__ = reference.__doc__
    globals()["reference"] = reference_while_grading


def _package(dotted: str):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(f"metacl_lite.{module}"), name)


def reference(dotted: str):
    """The reference `module.name` the hidden tests compare with: the package's function (while grading, `withhold`
    replaces this function by one that gives the test files a trusted copy)."""
    return _package(dotted)


#: (module, attribute or None for every attribute of a class/module) put back before each cell while grading
PROTECTED = (("otter.test_files.exception_test", "test_case"), ("otter.test_files.exception_test", "ExceptionTestFile"),
             ("otter.test_files.abstract_test", "TestFile"), ("otter.test_files", "GradingResults"),
             ("otter.check.notebook", "Notebook"), ("otter.execute.checker", "Checker"),
             ("torch.testing", "assert_close"), ("numpy.testing", "assert_allclose"), ("builtins", None),
             ("pickle", "dump"), ("dill", "dump"))


def _code(v) -> bool:
    """Functions, methods and classes: what an override would replace (data attributes are otter's state)."""
    return callable(v) or isinstance(v, (classmethod, staticmethod, property))


def _targets():
    """(object, name, value) for every protected attribute: a class's own methods, a module's functions, or one
    module attribute."""
    out = []
    for module, name in PROTECTED:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        if name is None:
            out += [(mod, k, v) for k, v in vars(mod).items() if _code(v)]
            continue
        obj = getattr(mod, name)
        out.append((mod, name, obj))
        if isinstance(obj, type):
            out += [(obj, k, v) for k, v in vars(obj).items() if _code(v) and k != "__class__"]
    return out


def protect(shell=None) -> None:
    """Put the protected attributes back as they were now, before each cell (an IPython pre_run_cell hook) and before
    each test case; a test case during which one of them was overridden, or that calls sys.exit, fails."""
    from otter.test_files.exception_test import test_case

    setter = setattr

    def changed() -> list[str]:
        return [f"{getattr(o, '__name__', o)}.{n}" for o, n, v in saved if o.__dict__.get(n, _MISSING) is not v]

    def restore(*_):
        for obj, name, value in saved:
            if obj.__dict__.get(name, _MISSING) is not value:
                setter(obj, name, value)

    def fail(why: str):  # raised one frame down: otter reads the failing line two frames below its runner
        raise AssertionError(why)

    def guarded_call(self, global_environment):
        restore()
        why = None
        try:  # otter's call_func, inlined: otter reads the failing line in the frame two below its runner
            self.test_func(**{arg: global_environment if arg == "env" else global_environment.get(arg)
                              for arg in self._get_func_params()})
        except SystemExit as e:
            why = f"the submission called sys.exit({e.code!r}) during the test"
        finally:
            overridden = changed()
            restore()
        if overridden:
            why = f"the submission overrode {', '.join(overridden[:3])} during the test"
        if why:
            fail(why)

    test_case.call_func = guarded_call
    saved = _targets()
    shell = shell or get_ipython()  # noqa: F821 - defined in the kernel that runs the startup file
    shell.events.register("pre_run_cell", restore)


_MISSING = object()


#: the IPython startup file that the grading kernel runs before the notebook
STARTUP = "from metacl_lite.course.grading_refs import protect, withhold\nwithhold({name!r})\nprotect(get_ipython())\n"


def startup_code(assignment: str) -> str:
    return STARTUP.format(name=assignment)
