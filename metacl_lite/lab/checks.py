"""The checks of a grid's options, before any work (`grid.run_experiment` and `tuning.tune` call them): seeds,
methods, task and epoch counts, the open choices and the budgets (the options `vocab.OPTION_TABLE` declares open, and
the memory's M), the gamma controls of MetaCL-lambda (claim 7 of the book) and the model's options; each bad value
raises `UsageError` naming it."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..data.specs import BenchmarkSpec, get_spec
from ..errors import UsageError
from ..vocab import (BUDGET_OPTIONS, OMEGA_OPTIONS, OPTIONS, PAPER_METHOD_NAMES, PAPER_REGULARISERS, RUN_OPTIONS,
                     check_option, method_name, options_of, parse_method, regulariser_of)
from ..training import ALL_METHODS, METHODS

#: The largest seed plus one (torch.manual_seed and torch.Generator take seeds below 2^64; numpy's below 2^128).
MAX_SEED = 2 ** 63

#: The gamma controls of MetaCL-lambda (claim 7 of the book): gamma set to the beta tuned for the same regulariser's
#: MetaCL-beta ("beta": the same strength, plus the projection onto <g_x, g2> >= 0), or gamma = 0 ("0": the pure
#: projection, no fixed penalty at all).
GAMMA_CONTROLS = ("beta", "0")


def check_gamma_control(gamma: Optional[str], methods: Sequence[str]) -> None:
    if gamma is None:
        return
    if gamma not in GAMMA_CONTROLS:
        raise UsageError(f"--gamma {gamma!r}: choose beta (gamma = the MetaCL-beta counterpart's beta) or 0")
    bad = [m for m in methods if m not in METHODS or parse_method(m)[1] != "lambda"]  # METHODS: without a memory
    if bad:
        lams = ",".join(method_name(r, "lambda") for r in PAPER_REGULARISERS)
        raise UsageError(f"--gamma {gamma} applies to the paper's MetaCL-lambda methods only (with no memory), not "
                         f"{', '.join(bad)}; e.g. --methods {lams}")


def _distinct(items: Sequence, what: str, check: Callable) -> list:
    """`items` after `check(item)` on each, refusing an empty list and any item given twice."""
    out = []
    for x in items:
        check(x)
        if x in out:
            raise UsageError(f"{what} {x!r} is given twice")
        out.append(x)
    return out


def check_seeds(seeds: Sequence) -> list[int]:
    """Seeds: a non-empty list of distinct integers 0 <= s < 2^63 (torch's generators take no larger seed)."""
    def check(s):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise UsageError(f"seed {s!r} is not a non-negative integer")
        if s >= MAX_SEED:
            raise UsageError(f"seed {s} is too large: seeds go up to 2^63 - 1 ({MAX_SEED - 1})")

    out = _distinct(seeds, "seed", check)
    if not out:
        raise UsageError("no seeds given; need at least one")
    return out


def check_methods(methods: Optional[Sequence[str]], allowed: Optional[Sequence[str]] = None) -> list[str]:
    """Methods: None means the paper's (`vocab.PAPER_METHOD_NAMES`, those of them in `allowed`: an extension such
    as L2 runs only when named); otherwise a non-empty list of distinct names, each in `allowed` (default: all)."""
    if methods is None:
        return [m for m in PAPER_METHOD_NAMES if allowed is None or m in allowed]

    def check(m):
        if m not in ALL_METHODS:
            raise UsageError(f"unknown method {m!r}; choose from: {', '.join(ALL_METHODS)}")
        if allowed is not None and m not in allowed:
            raise UsageError(f"method {m!r} is not allowed here; choose from {', '.join(allowed)}")

    out = _distinct(methods, "method", check)
    if not out:
        raise UsageError("the list of methods is empty; leave it out to run all eleven")
    return out


def check_n_tasks(benchmark: str | BenchmarkSpec, n_tasks: Optional[int]) -> int:
    spec = get_spec(benchmark)
    n = spec.n_tasks if n_tasks is None else n_tasks
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise UsageError(f"n_tasks={n_tasks!r}: a stream needs at least 2 tasks (backward transfer compares a task "
                         f"before and after the next ones)")
    if n > spec.max_tasks:
        raise UsageError(f"n_tasks={n}: {spec.title} has at most {spec.max_tasks} tasks")
    return n


def check_epochs(epochs: Optional[int]) -> None:
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or not 0 < epochs <= 1000):
        raise UsageError(f"epochs={epochs!r} must be a whole number from 1 to 1000 (the paper trains 1 or 5 a task)")


def check_options(options: Optional[dict], methods: Optional[Sequence[str]] = None,
                  limits: Optional[dict] = None) -> dict:
    """Only the options a run sets (`vocab.RUN_OPTIONS`: the open choices, the budgets), each with a value its
    declaration takes (`vocab.check_option`; within `limits`, e.g. {"K": 20}: the memory's M <= K). A budget is
    recorded only for the methods that read it (`recorded_options`); an open choice is the file's, recorded in
    config.train whatever its methods. Either, given to a run of `methods` none of which reads it, is refused."""
    options = dict(options or {})
    bad = sorted(set(options) - set(RUN_OPTIONS))
    if bad:
        raise UsageError(f"unknown option(s) {', '.join(bad)}; the open choices are {', '.join(OMEGA_OPTIONS)} and the "
                         f"budgets {', '.join(BUDGET_OPTIONS)}")
    for name, value in options.items():
        try:
            check_option(name, value, limits)
        except ValueError as e:
            raise UsageError(str(e)) from None
        readers = [m for m in ALL_METHODS if name in {o.name for o in options_of(m)}]  # PI's xi: PI's methods
        if methods is not None and not set(methods) & set(readers):
            raise UsageError(f"{name}={value!r} applies only to the methods that read it ({', '.join(readers)}); none "
                             f"of {', '.join(methods)} does: leave it out")
    return options


def option_values(train: dict) -> dict:
    """The open choices of a TrainConfig dict (their declared defaults filled in)."""
    return {k: train.get(k, OPTIONS[k].default) for k in OMEGA_OPTIONS}


def recorded_options(method: str) -> tuple[str, ...]:
    """The options a results file records for `method` (config.method_options): every open choice for a regularised
    method (as files always have, PI's xi beside EWC included), then the budgets its families read (the memory's M);
    () for the methods without a regulariser or a memory."""
    read = {o.name for o in options_of(method)}
    return (*(OMEGA_OPTIONS if regulariser_of(method) else ()), *(k for k in BUDGET_OPTIONS if k in read))


def method_option_values(train: dict, method: str) -> dict:
    """What a results file records for `method` in config.method_options, from its TrainConfig dict
    (`recorded_options`, declared defaults filled in)."""
    return {k: train.get(k, OPTIONS[k].default) for k in recorded_options(method)}


def run_options(options: dict, method: str) -> dict:
    """The options of a run (`check_options`) that `method` trains with: the open choices, and the budgets it reads."""
    return {k: v for k, v in options.items() if k not in BUDGET_OPTIONS or k in recorded_options(method)}


def effective_options(config: dict, method: str) -> dict:
    """The open choices a results file's `method` trained with: config["method_options"][method] (files since the
    choices are decided per regulariser), else the file-wide config["train"] (older files)."""
    per = config.get("method_options", {})
    return dict(per[method]) if method in per else option_values(config.get("train", {}))


def model_options(benchmark: str | BenchmarkSpec, weights: Optional[str] = None, random_init: bool = False) -> dict:
    """Model options recorded in the config; for ResNet-18 (CUB), checks now (before any work) that the weights are
    there."""
    if get_spec(benchmark).model != "resnet18":
        if weights or random_init:
            raise UsageError("the weights and random-init options apply to the ResNet-18 (cub) benchmark only")
        return {}
    if random_init:
        return {"weights": None, "random_init": True}
    from ..models import find_resnet18_weights

    return {"weights": str(find_resnet18_weights(weights)), "random_init": False}
