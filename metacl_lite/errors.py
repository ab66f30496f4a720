"""Typed errors. Every error a user can fix (a bad option, a missing or corrupted file, a results file made with
another configuration) derives from `UserError`; the command line prints its message and exits 2, without a
traceback. Anything else is a bug and keeps its traceback. Lower modules never name command-line flags: they raise
these errors with the facts (which file, which key, which value), and `cli.py` adds the flag names."""
from __future__ import annotations


def restore_advice(path) -> str:
    """How to get a damaged file back: from git where git tracks it in this checkout (`git checkout -- path`), else
    from the user's own copy (a file outside the repository, or one git ignores, has no version in git)."""
    from .paths import REPO_ROOT, tracked

    hint = "restore it from your own copy (a backup)"
    if tracked(path):
        from pathlib import Path

        hint = f"restore it from git (`git checkout -- {Path(path).resolve().relative_to(REPO_ROOT)}`)"
    return hint


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and how to fix it."""


class UsageError(UserError, ValueError):
    """A bad argument value (an unknown method, K out of range, an empty list...)."""


class ConfigMismatch(UserError):
    """An existing results file was made with another configuration."""


class FileFormatError(UserError, ValueError):
    """A file that is not what it should be (invalid JSON, a tuning file where a results file was expected...)."""


class CorruptUnit(FileFormatError):
    """One unit of a results or tuning file that no reader could use (a NaN, a string, a missing accuracy matrix),
    found when the file is opened, before any training; the message names the unit and how to remove it."""

    def __init__(self, path, section: str, key: str, problem: str):
        self.path, self.section, self.key = path, section, key
        super().__init__(f"{path}: unit {section}/{key} is corrupt ({problem}); delete the entry {key!r} from "
                         f"{section!r} in that file (the other units are kept, and the next run trains that one "
                         f"again), or {restore_advice(path)}")


class HparamsError(UserError, ValueError):
    """hparams.json holds a value nobody meant (an unknown key, NaN, a negative strength, a string)."""


class MissingHparams(HparamsError):
    """Regularised methods (`methods`) have no tuned value for this benchmark (and K)."""

    def __init__(self, message: str, methods=()):
        super().__init__(message)
        self.methods = list(methods)


class LockedError(UserError):
    """Another process is writing the same file."""


class OutputError(UserError):
    """An output path that cannot be written (a directory, a read-only folder)."""


class UnitsFailed(RuntimeError):
    """Some units of a grid failed in worker processes (not a user error: their messages say why); the finished ones
    are saved and a rerun retries the failed ones."""

    def __init__(self, path, failures: list):
        self.path, self.failures = path, failures
        lines = "; ".join(f"{key}: {err}" for key, err in failures[:5])
        more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
        super().__init__(f"{len(failures)} unit(s) failed: {lines}{more}. Every finished unit is saved in {path}; "
                         f"the same command retries the failed ones")


class NotebookFailed(RuntimeError):
    """A cell of a notebook run by `notebook` raised; the executed notebook, with the traceback, is kept. `user`: the
    cell raised one of this package's user errors (its message says how to fix it)."""

    def __init__(self, notebook, cell: int, ename: str, evalue: str, executed):
        self.user = ename in {c.__name__ for c in _subclasses(UserError)}
        super().__init__(f"{notebook}: cell [{cell}] raised {ename}: {evalue}. The executed notebook, with the "
                         f"traceback, is {executed}")


def _subclasses(cls) -> list:
    return [cls] + [s for c in cls.__subclasses__() for s in _subclasses(c)]


def check_not_deleted(path) -> None:
    """Raise UsageError where `path` is a file git holds and the working tree lacks (a page or the README rewritten
    without it would lose its rows), naming how to restore it."""
    from pathlib import Path

    from .paths import REPO_ROOT, tracked

    if not Path(path).exists() and tracked(path):
        rel = Path(path).resolve().relative_to(REPO_ROOT)
        raise UsageError(f"{rel} is committed but missing here: restore it (git checkout -- {rel}), or `git rm` it "
                         "first if it should go")
