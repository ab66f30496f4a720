"""The package's vocabulary, in one place and without torch: the regularisers (Eq. 2's importance estimators), MetaCL's
two balances (Alg. 1 and Alg. 2), the method names built from them, and the open choices about Omega.

Everything else derives from these: training's registry of methods, the command line's choices (which must answer
--help before torch loads), the figures' colours, the chapters, the Makefile and the tests. A method name is
`"{regulariser}-metacl-{variant}"` for MetaCL, the regulariser's own name for the plain method, and "finetune" or
"metacl" for the two methods without a penalty; `method_name` builds one and `parse_method` reads one back.
"""
from __future__ import annotations

from typing import NamedTuple, Optional


class Regulariser(NamedTuple):
    """One estimator of Eq. 2's importance Omega: its short name, the label of the paper's tables, and where its
    `Importance` class lives (module:class, imported by training only)."""

    name: str
    label: str
    estimator: str
    in_paper: bool  # whether the paper ran it (its claims and default runs); False: an extension of this package


#: Every regulariser the package trains, in the row order of the paper's Table 1 (the paper's own three first; an
#: extension the paper did not run comes after them). Which of them the paper's claims are about is the claims' own
#: data (`in_paper`, read as `PAPER_REGULARISERS`), not this list.
REGULARISER_TABLE: tuple[Regulariser, ...] = (
    Regulariser("mas", "MAS", "metacl_lite.importance:MAS", True),
    Regulariser("pi", "PI", "metacl_lite.importance:PI", True),
    Regulariser("ewc", "EWC", "metacl_lite.importance:EWC", True),
    Regulariser("l2", "L2", "metacl_lite.importance:L2", False),
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
#: The open choices about Omega that the paper leaves open (`TrainConfig` fields; `accumulate_importance` and `PI`).
OMEGA_OPTIONS: tuple[str, ...] = ("omega_accumulate", "omega_normalise", "pi_xi")

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
