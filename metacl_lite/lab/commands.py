"""The pieces of the command lines recorded in results files. Each kind of file has one lab function that writes the
one command regenerating it from the file's configuration (`grid.run_command`, `tuning.tune_command`,
`choices.choices_command`); they spell the CLI's flags, and `tests/test_cli.py` parses every recorded command back
with the CLI's parser and checks that it gives the same configuration, so the two cannot drift apart. Paths are
relative to the repository: no machine path in committed files."""
from __future__ import annotations

import shlex
from pathlib import Path

from ..vocab import OMEGA_OPTIONS
from ..training import TrainConfig
from .provenance import relative_to_repo


def out_flag(out: Path, default: Path) -> str:
    """' --out PATH' (shell-quoted: a path with spaces reruns as one argument), or '' where `out` is the default."""
    return "" if Path(out).resolve() == Path(default).resolve() else f" --out {shlex.quote(relative_to_repo(out))}"


def option_flags(train: dict) -> str:
    d = TrainConfig().to_dict()
    return "".join(f" --{k.replace('_', '-')} {train[k]:g}" if isinstance(train[k], float) else
                   f" --{k.replace('_', '-')} {train[k]}"
                   for k in OMEGA_OPTIONS if k in train and train[k] != d[k])
