"""The command line's option types and option groups, shared by the users' commands (`metacl_lite.cli`) and the
maintainers' tools (`metacl_lite.tools`): each checked by argparse, so a bad value exits 2 with the option named,
before anything is imported or computed."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional

from ..data.specs import BENCHMARKS, MAX_SEEDS, get_spec
from ..errors import UserError
from ..vocab import METHOD_NAMES, OMEGA_OPTIONS, OPTIONS, RUN_OPTIONS, FinitePositive, OneOf, Option


#: `device.PRECISIONS`, spelled out: importing device.py would load torch before every command (a test keeps the two
#: equal)
PRECISIONS = ("float32", "tf32")


# Option types: checked by argparse, so a bad value exits 2 with the option named, before anything is imported
def positive(name):
    def conv(v):
        try:
            iv = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {v!r}")
        if iv <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {iv}")
        return iv
    return conv


def seed_count(name: str = "--seeds"):
    """--seeds N: a positive integer, at most MAX_SEEDS."""
    base = positive(name)

    def conv(v):
        n = base(v)
        if n > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"{name} {n}: at most {MAX_SEEDS} seeds per command (the paper's tables "
                                             f"average 5); for particular seeds give --seed-list")
        return n
    return conv


def out_path(name: str = "--out"):
    """An output file: a path that does not end in a folder separator (`--out newdir/` names a folder, which the
    command would otherwise write as a file named newdir)."""
    def conv(text: str) -> Path:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{name} '': give a file name, e.g. {name} results/mine.json")
        if text.endswith(("/", os.sep)):
            raise argparse.ArgumentTypeError(f"{name} {text!r} names a folder; give a file in it, e.g. "
                                             f"{name} {text.rstrip('/' + os.sep)}/results.json")
        return Path(text)
    return conv


def items_of(text: str, name: str) -> list[str]:
    items = [s.strip() for s in text.split(",")]
    if not text.strip() or any(not s for s in items):
        raise argparse.ArgumentTypeError(f"{name} takes a comma-separated list without empty items, got {text!r}")
    dup = sorted({s for s in items if items.count(s) > 1})
    if dup:
        raise argparse.ArgumentTypeError(f"{name}: {', '.join(dup)} given twice")
    return items


def number_list(name: str, what: str, convert, ok=lambda v: True):
    """An argparse type: a comma-separated list of numbers (`convert` each; `ok` says which are allowed)."""
    def conv(text: str) -> list:
        out = []
        for s in items_of(text, name):
            try:
                v = convert(s)
            except ValueError:
                v = None
            if v is None or not ok(v):
                raise argparse.ArgumentTypeError(f"{name}: {s!r} is not {what}")
            out.append(v)
        return out
    return conv


seed_list = number_list("--seed-list", "a non-negative integer", int, lambda v: v >= 0)


def int_list(name):
    return number_list(name, "a positive integer", int, lambda v: v > 0)


def float_list(name):
    return number_list(name, "a number", float)


def positive_finite(name):
    def conv(text: str) -> float:  # a results file must be able to hold it: JSON has no inf or NaN
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not 0 < v < float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number > 0, got {text!r}")
        return v
    return conv


def method_list(text: str, extra: tuple = ()) -> list[str]:
    items = items_of(text, "--methods")
    bad = [m for m in items if m not in [*METHOD_NAMES, *extra]]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown method {bad[0]!r}; choose from: "
                                         f"{', '.join([*METHOD_NAMES, *extra])}")
    return items


# The parser
def device_arg(text: str) -> str:
    text = text.strip()
    if text in ("auto", "cpu", "cuda") or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"--device {text!r}: choose auto, cpu, cuda or cuda:N")


def device_option(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--device", type=device_arg, default=None,
                   help=help or "auto, cpu, cuda or cuda:N (default: cpu for pmnist, whose committed files were made "
                                "on the CPU; auto for cifar100 and cub); recorded in the file, which refuses units "
                                "from another device kind, GPU model or CPU kernels (cpu_kernels, torch's version)")


def executor_options(p: argparse.ArgumentParser) -> None:
    placement_options(p)
    p.add_argument("--compile", choices=("auto", "on", "off"), default="off",
                   help="compiled task gradients (torch.compile): auto compiles runs long enough to repay it; "
                        "compiled runs agree with eager ones within float rounding, not bit for bit (default off)")
    precision_option(p)


def placement_options(p: argparse.ArgumentParser) -> None:
    """Where the units train: the device, the worker processes and threads, the executor."""
    device_option(p)
    p.add_argument("--workers", type=positive("--workers"), default=None,
                   help="worker processes (default: the number of cores; on a GPU at most 8, sharing the card, and "
                        "no more than fit in its free memory; 1 runs every unit in this process)")
    p.add_argument("--threads", type=positive("--threads"), default=None,
                   help="intra-op threads per worker (default 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local worker processes, or Ray tasks (pip install 'metacl-lite[cluster]')")
    p.add_argument("--address", default=None, help="ray: the cluster's address (default: a local Ray instance)")
    p.add_argument("--gpu-share", type=float, default=None, metavar="F",
                   help="ray on GPUs: the fraction of a GPU each unit asks for (default: as many units as fit in a "
                        "card's memory, at most 8)")


def precision_option(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help=help or "matrix products and convolutions: float32 (default), or tf32 on a GPU (tensor "
                                "cores: faster, other numbers; recorded in the file, which refuses units of the other "
                                "precision)")


def option_flag(option: Option) -> str:
    """The command line's flag of a declared option: "omega_accumulate" -> "--omega-accumulate"."""
    return "--" + option.name.replace("_", "-")


#: How the command line reads the value of an option, by the kind of its declared check: argparse's choices for a
#: `OneOf`, a converter (that names the flag in its error) for the others.
ARGUMENT_OF = {OneOf: lambda check, flag: {"choices": check.choices},
               FinitePositive: lambda check, flag: {"type": positive_finite(flag)}}


def choice_options(p: argparse.ArgumentParser) -> None:
    """One flag per open choice of the vocabulary (`vocab.OMEGA_OPTIONS`), with its declared help and default (None
    here: an option not given is the decided one, `hparams.method_options`, or the declared default)."""
    for name in OMEGA_OPTIONS:
        o, flag = OPTIONS[name], option_flag(OPTIONS[name])
        p.add_argument(flag, default=None, help=f"{o.help} (default {o.default})",
                       **ARGUMENT_OF[type(o.check)](o.check, flag))


def omega_options_of(a) -> dict:
    """The open choices given on the command line, and the budgets (`vocab.RUN_OPTIONS`; `run`'s flags only)."""
    return {k: getattr(a, k) for k in RUN_OPTIONS if getattr(a, k, None) is not None}


def where_of(a) -> str:
    """Where this command trains: its --device, else the benchmark's default, resolved (exit 2 for a missing GPU)."""
    from ..accel.device import resolve

    return resolve(a.device or get_spec(benchmark_of(a)).device)


def benchmark_of(a) -> str:
    return getattr(a, "benchmark", None) or getattr(a, "suite", "pmnist")


def plan_of(a):
    from ..accel.device import kind
    from ..lab.executors import check_plan, default_workers

    workers, cores = a.workers, default_workers()
    if a.executor != "ray" and (workers is None or workers > cores):
        where = where_of(a)
        if workers is None:
            workers = default_workers(kind(where) == "cuda", benchmark_of(a), where)
        elif kind(where) != "cuda":  # more local CPU workers than cores: each would wait for the others
            raise UserError(f"--workers {workers}: this machine has {cores} cores, and a local grid on the CPU runs "
                            f"at most one worker per core; give --workers {cores} or fewer (or --executor ray)")
    return check_plan(a.executor, workers, a.threads, a.address, a.gpu_share)
