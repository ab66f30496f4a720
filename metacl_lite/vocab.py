"""The package's vocabulary, in one place and without torch: the regularisers (Eq. 2's importance estimators), MetaCL's
two balances (Alg. 1 and Alg. 2), the method names built from them, and the options each method family reads (PI's
xi, EWC's Fisher, the open choices about Omega), with their defaults and checks (`Option`, `OPTION_TABLE`).

Everything else derives from these: training's registry of methods and its `TrainConfig` (one field per option), the
command line's choices and flags (which must answer --help before torch loads), the checks of options wherever they
come from (`check_option`), the tuning of the open choices (`ALTERNATIVES`), the tables, the figures' colours, the
chapters, the Makefile and the tests. A regulariser's `Importance` class registers itself under its name
(`importance.estimator`). A method name is `"{regulariser}-metacl-{variant}"` for MetaCL, the regulariser's own
name for the plain method, and "finetune" or "metacl" for the two methods without a penalty; `method_name` builds one
and `parse_method` reads one back.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional


class Regulariser(NamedTuple):
    """One estimator of Eq. 2's importance Omega: its short name and the label of the paper's tables. Its
    `Importance` class registers itself under the name (`importance.estimator`); the options it reads are
    `options_of(name)`."""

    name: str
    label: str
    in_paper: bool  # whether the paper ran it (its claims and default runs); False: an extension of this package


#: Every regulariser the package trains, in the row order of the paper's Table 1 (the paper's own three first; an
#: extension the paper did not run comes after them). Which of them the paper's claims are about is the claims' own
#: data (`in_paper`, read as `PAPER_REGULARISERS`), not this list.
REGULARISER_TABLE: tuple[Regulariser, ...] = (
    Regulariser("mas", "MAS", True),
    Regulariser("pi", "PI", True),
    Regulariser("ewc", "EWC", True),
    Regulariser("l2", "L2", False),
)
REGULARISERS: tuple[str, ...] = tuple(r.name for r in REGULARISER_TABLE)
#: The regularisers the paper ran (Table 1's families): what the claims test and what `run` trains by default.
PAPER_REGULARISERS: tuple[str, ...] = tuple(r.name for r in REGULARISER_TABLE if r.in_paper)
REGULARISER_LABELS: dict[str, str] = {r.name: r.label for r in REGULARISER_TABLE}

#: MetaCL's two balances of a regulariser (Alg. 1: a fixed beta; Alg. 2: the dynamic lambda of Eqs. 3-5) -> the
#: label's suffix.
VARIANTS: dict[str, str] = {"beta": "MetaCL-β", "lambda": "MetaCL-λ"}
#: The two methods without a penalty -> their labels.
BASELINES: dict[str, str] = {"finetune": "Fine tune", "metacl": "MetaCL, w/o reg"}
#: The joint-training oracle's name in results files and tables.
ORACLE = "joint"

#: How the running Omega takes in a finished task's Omega, and how that Omega is normalised first.
OMEGA_ACCUMULATE: tuple[str, ...] = ("sum", "latest")
OMEGA_NORMALISE: tuple[str, ...] = ("none", "max", "minmax")
#: EWC's two Fisher informations (`importance.ewc_fisher`): per sample with the observed labels, or the true one.
FISHER_KINDS: tuple[str, ...] = ("empirical", "expected")


class OneOf(NamedTuple):
    """An option's check: the value is one of `choices` (the command line offers them)."""

    choices: tuple[str, ...]

    def __call__(self, value: Any) -> None:
        if value not in self.choices:
            raise ValueError(f"is not an option; choose one of {', '.join(self.choices)}")


class FinitePositive(NamedTuple):
    """An option's check: the value is a finite number > 0 (JSON, and so a results file, holds no inf or NaN)."""

    def __call__(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise ValueError("must be a finite positive number (a results file holds no inf)")


class Option(NamedTuple):
    """One option a method family reads. `name`: its `TrainConfig` field, its key in results files and in
    hparams.json's "options", and its flag (--name, with dashes); `default`: its value unless set; `check` raises a
    ValueError saying what the value must be (`check_option`); `label`: its column in the tables; `help`: the
    command line's; `applies_to`: the families (regularisers) whose training reads it; `open`: one of the choices the
    paper leaves open, set on the command line, decided per regulariser on validation data (hparams.json's "options",
    `lab/choices`) and recorded per method in a results file (config.method_options); otherwise a setting of the
    package, recorded in config.train only.

    A new family declares its options here, one `Option` each, and reads them from the run's `TrainConfig` in its
    class (`importance.Importance.from_config`); the config, the flags, the checks, the tuning and the tables follow."""

    name: str
    default: Any
    check: Callable[[Any], None]
    label: str
    help: str
    applies_to: tuple[str, ...]
    open: bool = True


#: Every option of the method families, in the order of `TrainConfig`'s fields.
OPTION_TABLE: tuple[Option, ...] = (
    Option("fisher", "empirical", OneOf(FISHER_KINDS), "EWC's Fisher",
           "EWC's Fisher: per sample with the observed labels (empirical), or the true one over all classes "
           "(expected, about ten times slower)", ("ewc",), open=False),
    Option("pi_xi", 0.1, FinitePositive(), "PI's ξ",
           "PI's damping xi: 0.1 as Zenke et al. on Permuted MNIST; A-GEM's code uses 1e-3", ("pi",)),
    Option("omega_accumulate", "sum", OneOf(OMEGA_ACCUMULATE), "Ω accumulated",
           "Omega across tasks: summed (SI, MAS) or the latest task's only (A-GEM's code for EWC and MAS)",
           REGULARISERS),
    Option("omega_normalise", "none", OneOf(OMEGA_NORMALISE), "Ω normalised",
           "each task's Omega: as is, divided by its maximum, or min-max scaled to [0, 1] (A-GEM's code for EWC)",
           REGULARISERS),
)
OPTIONS: dict[str, Option] = {o.name: o for o in OPTION_TABLE}
#: The open choices (`Option.open`) in the order of the flags, the tables and a results file's method_options: the
#: choices about Omega that every regulariser reads first, then a family's own (PI's xi).
OMEGA_OPTIONS: tuple[str, ...] = tuple(o.name for o in sorted((o for o in OPTION_TABLE if o.open),
                                                               key=lambda o: -len(o.applies_to)))


class Alternative(NamedTuple):
    """One setting of the open choices that `lab/choices` tries on validation data against the declared defaults
    ("base"): its name (its tuning files carry it), the options it sets (the others keep their defaults) and what it
    is (whose code it comes from)."""

    name: str
    options: dict
    what: str

    @property
    def regularisers(self) -> tuple[str, ...]:
        """The paper's regularisers, alphabetically (the decision files' order), whose family reads every option it
        sets (`options_of`): all three for the choices about Omega, PI alone for its xi."""
        return tuple(r for r in sorted(PAPER_REGULARISERS) if set(self.options) <= {o.name for o in options_of(r)})


#: The alternatives for the open choices, the methods' own code (`importance.accumulate_importance` cites each).
#: Min-max normalisation is tried with the latest task's Omega only, as A-GEM's code for EWC does.
ALTERNATIVES: tuple[Alternative, ...] = (
    Alternative("base", {},
                "Omega summed over tasks, each task's Omega as estimated, PI's xi = 0.1 (SI's code on Permuted MNIST)"),
    Alternative("latest", {"omega_accumulate": "latest"},
                "the latest task's Omega only (A-GEM's code for EWC and MAS)"),
    Alternative("max", {"omega_normalise": "max"}, "each task's Omega divided by its maximum, summed"),
    Alternative("latest-minmax", {"omega_accumulate": "latest", "omega_normalise": "minmax"},
                "the latest task's Omega, min-max scaled (A-GEM's code for EWC; equal to max-scaled here)"),
    Alternative("xi1e-3", {"pi_xi": 0.001}, "PI's xi = 1e-3 (A-GEM's code)"),
)


def check_option(name: str, value: Any) -> None:
    """A ValueError "name=value must be ..." (or "... is not an option; choose one of ...") where `value` is not one
    the declared option `name` takes; nothing for a good value."""
    try:
        OPTIONS[name].check(value)
    except ValueError as e:
        raise ValueError(f"{name}={value!r} {e}") from None


def options_of(name: str) -> tuple[Option, ...]:
    """The options a method reads (those declared for its family: its regulariser), or a family by its name:
    "pi-metacl-beta" and "pi" -> PI's xi and the choices about Omega; () for the baselines and the oracle."""
    family_name = regulariser_of(name) or name
    return tuple(o for o in OPTION_TABLE if family_name in o.applies_to)

_SEP = "-metacl-"


def method_name(regulariser: str, variant: Optional[str] = None) -> str:
    """The method of `regulariser` balanced by `variant` ("beta" or "lambda"), or the plain method (variant None):
    ("pi", "lambda") -> "pi-metacl-lambda", ("pi", None) -> "pi"."""
    if regulariser not in REGULARISERS:
        raise ValueError(f"unknown regulariser {regulariser!r}: one of {', '.join(REGULARISERS)}")
    if variant is None:
        return regulariser
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
    return f"{regulariser}{_SEP}{variant}"


def parse_method(name: str) -> tuple[Optional[str], Optional[str]]:
    """(regulariser, variant) of a method name, the inverse of `method_name`: "pi-metacl-lambda" -> ("pi",
    "lambda"), "pi" -> ("pi", None), "finetune" and "metacl" -> (None, None). A ValueError for any other name."""
    if name in BASELINES:
        return None, None
    regulariser, sep, variant = name.partition(_SEP)
    if regulariser in REGULARISERS and (not sep or variant in VARIANTS):
        return regulariser, (variant if sep else None)
    raise ValueError(f"unknown method {name!r}")


def regulariser_of(name: str) -> Optional[str]:
    """The regulariser of a method name ("pi-metacl-beta" -> "pi"); None for the baselines, the oracle and any name
    that is no method (a results file's keys, read leniently)."""
    try:
        return parse_method(name)[0]
    except ValueError:
        return None


def family(regulariser: str) -> tuple[str, ...]:
    """A regulariser's three methods: plain (Eq. 2), MetaCL-β (Alg. 1) and MetaCL-λ (Alg. 2), e.g. ("pi",
    "pi-metacl-beta", "pi-metacl-lambda")."""
    return (method_name(regulariser), *(method_name(regulariser, v) for v in VARIANTS))


def method_label(name: str) -> str:
    """The label of the paper's tables: "PI-MetaCL-λ", "PI", "Fine tune"."""
    if name in BASELINES:
        return BASELINES[name]
    regulariser, variant = parse_method(name)
    label = REGULARISER_LABELS[regulariser]
    return label if variant is None else f"{label}-{VARIANTS[variant]}"


#: Every method name, in the paper's row order: the two baselines, then each regulariser's family.
METHOD_NAMES: tuple[str, ...] = (*BASELINES, *(m for r in REGULARISERS for m in family(r)))
#: The paper's eleven methods (Table 1), the default of `run`: the two baselines and the paper's regularisers' families.
PAPER_METHOD_NAMES: tuple[str, ...] = (*BASELINES, *(m for r in PAPER_REGULARISERS for m in family(r)))


def in_paper(name: str) -> bool:
    """Whether a method (or the joint oracle) is one the paper ran; False for an extension such as "l2-metacl-beta"."""
    return name == ORACLE or name in PAPER_METHOD_NAMES


if __name__ == "__main__":  # the Makefile's lists: python -m metacl_lite.vocab lambdas|regularisers|methods
    import sys

    what = sys.argv[1] if len(sys.argv) > 1 else "methods"
    lists = {"regularisers": REGULARISERS, "paper-regularisers": PAPER_REGULARISERS, "methods": METHOD_NAMES,
             "paper-methods": PAPER_METHOD_NAMES,
             "lambdas": tuple(method_name(r, "lambda") for r in PAPER_REGULARISERS)}
    if what not in lists:
        sys.exit(f"python -m metacl_lite.vocab: unknown list {what!r}; one of {', '.join(lists)}")
    print(",".join(lists[what]))
