"""Command line: `python -m metacl_lite {run,table,tune,choices,dynamics,notebook,assignments} ...` (see --help of
each); the maintainers' tools (pages, readme, bench, where, the GPU and browser checks) are `python -m metacl_lite.tools`.

This package is the only place that knows the flag names (`options` the types and groups, `parser` the
commands' flags, `commands` what each does): it checks every option before any work, turns the typed errors of
the lower modules into one line on stderr with the fix (exit status 2, no traceback), and writes the command lines
recorded in results files. Anything else (a bug) keeps its traceback.
"""
from __future__ import annotations

import codecs
import os
import re
import signal
import sys
from typing import Any, Callable, Optional

from ..errors import ConfigMismatch, CorruptUnit, LockedError, MissingHparams, NotebookFailed, UnitsFailed, UserError
from .commands import COMMANDS
from .parser import build_parser
from ..vocab import PAPER_METHOD_NAMES, regulariser_of


def _hint(e: UserError, a) -> str:
    """What to do next, in terms of this command's flags (the lower modules do not know them)."""
    hint = ""
    if isinstance(e, ConfigMismatch):
        retuned = sorted(set(re.findall(r"method_(?:hparams|options)\[([^\]]+)\]", str(e))))
        hint = ((f"train the retuned methods again, keeping every other unit, with --redo {','.join(retuned)}; or "
                 if retuned and getattr(a, "cmd", None) == "run" else "")
                + "write elsewhere with --out FILE, or start over with --force (which discards what the file holds)")
    elif isinstance(e, MissingHparams):
        missing = e.methods or [m for m in (getattr(a, "methods", None) or []) if regulariser_of(m)]
        nine = {m for m in PAPER_METHOD_NAMES if regulariser_of(m)}  # tune's default: no --methods for all of them
        hint = (f"choose them first with `python -m metacl_lite tune --benchmark {a.benchmark}"
                + (f" --K {a.K}" if getattr(a, "K", None) else "")
                + (f" --methods {','.join(missing)}`" if missing and set(missing) != nine else "`"))
    elif isinstance(e, CorruptUnit) and e.section == "runs" and a.cmd == "run" and _run_method(e.key):
        hint = f"or train that method's runs again with --redo {_run_method(e.key)}"
    elif isinstance(e, LockedError):
        hint = "two runs may share a file only one write at a time; this one gave up waiting"
    return hint


def _run_method(key: str) -> str | None:
    """The method of a results file's run key (`keys.RunKey`), or None where the key is not one."""
    from ..keys import RunKey

    try:
        return RunKey.parse(key).method
    except ValueError:
        return None


#: How the command line spells its non-ASCII characters on a terminal or pipe that cannot show them
#: (PYTHONIOENCODING=ascii, a C locale): the method names' Greek letters in words, so that EWC-MetaCL-β and -λ stay
#: apart; anything else as a backslash escape.
ASCII_SPELLING = {"β": "beta", "λ": "lambda", "γ": "gamma", "Ω": "Omega", "ξ": "xi", "±": "+/-", "−": "-", "–": "-",
                  "—": "-", "…": "...", "×": "x", "≥": ">=", "≤": "<=", "°": " deg", "✓": "yes", "✗": "no",
                  "’": "'", "“": '"', "”": '"', "→": "->", "·": "."}


def _spell(err: UnicodeEncodeError):
    bad = err.object[err.start:err.end]
    return "".join(ASCII_SPELLING.get(c, c.encode("ascii", "backslashreplace").decode()) for c in bad), err.end


codecs.register_error("metacl-spell", _spell)


def plain_streams() -> None:
    """Make stdout and stderr print what their encoding cannot show as `ASCII_SPELLING` says, instead of raising
    UnicodeEncodeError (after `run` has trained and saved, its table would otherwise end it with exit 1)."""
    for stream in (sys.stdout, sys.stderr):
        enc = getattr(stream, "encoding", None) or "ascii"
        try:
            "βλ±−".encode(enc)
        except (UnicodeEncodeError, LookupError):
            try:
                stream.reconfigure(errors="metacl-spell")
            except (AttributeError, ValueError):  # not a text stream of io (a test's capture): left as it is
                pass


def _out_of(a) -> Optional[str]:
    out = getattr(a, "out", None)
    return str(out) if out else None


def main(argv: Optional[list[str]] = None) -> int:
    try:
        a = build_parser().parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the options are read: nothing started
        return interrupted()
    return dispatch(a, COMMANDS)


def interrupted() -> int:
    """Ctrl-C before a command started: one word on stderr, exit 130, a second press ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("\ninterrupted", file=sys.stderr)
    return 130


def dispatch(a, commands: dict[str, Callable[[Any], int]]) -> int:
    """Run `commands[a.cmd]`: a user's error is one line on stderr (exit 2, no traceback), failed units exit 1, a bug
    keeps its traceback (also for `python -m metacl_lite.tools`)."""
    plain_streams()
    try:
        return commands[a.cmd](a)
    except UserError as e:
        hint = _hint(e, a)
        print(f"error: {e}" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return 2
    except (UnitsFailed, NotebookFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if getattr(e, "user", False) else 1
    except BrokenPipeError:  # `table ... | head`: the reader went away; nothing to say, no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        return 141
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second press while this exits changes nothing
        if a.cmd in ("run", "tune", "choices"):
            print(f"\ninterrupted: every finished unit is saved{' in ' + _out_of(a) if _out_of(a) else ''}; run the "
                  f"same command again to resume", file=sys.stderr)
        else:
            print("\ninterrupted", file=sys.stderr)
        return 130
