"""The package's vocabulary, in one place and without torch: the regularisers (Eq. 2's importance estimators), MetaCL's
two balances (Alg. 1 and Alg. 2), the method names built from them, the episodic memory's family and its methods (A-GEM,
ER: extensions, `MEMORY_TABLE`, `MEMORY_METHOD_TABLE`), and the options each method family reads (PI's xi, EWC's
Fisher, the open choices about Omega, the memory's budget M), with their defaults and checks (`Option`,
`OPTION_TABLE`).

Everything else derives from these: training's registry of methods and its `TrainConfig` (one field per option), the
command line's choices and flags (which must answer --help before torch loads), the checks of options wherever they
come from (`check_option`), the tuning of the open choices (`ALTERNATIVES`), the tables, the figures' colours, the
chapters, the Makefile and the tests. A regulariser's `Importance` class registers itself under its name
(`importance.estimator`), the memory's class under its family's (`memory.memory_family`). A method name is
`"{regulariser}-metacl-{variant}"` for MetaCL, the regulariser's own name for the plain method, and "finetune" or
"metacl" for the two methods without a penalty; `method_name` builds one and `parse_method` reads one back. A method
of the memory family is one of these (its `base`) with the memory added (`MemoryMethod`), named in its table.
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


class Count(NamedTuple):
    """An option's check: the value is a whole number >= 1, an int (not a bool, nor a float such as 1.0 or 1.5: a
    budget is counted)."""

    def __call__(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("must be a whole number >= 1 (an integer, not 1.0 or 1.5)")


#: What an option is (`Option.role`): "open", one of the choices the paper leaves open, decided per regulariser on
#: validation data (hparams.json's "options", `lab/choices`), set on the command line and recorded per method in a
#: results file (config.method_options); "setting", a setting of the package, recorded in config.train only;
#: "budget", a resource the method is given (the memory's M): neither open nor tuned, set on the command line,
#: recorded per method that reads it (config.method_options), one value per results file, and reported.
ROLES: tuple[str, ...] = ("open", "setting", "budget")


class Option(NamedTuple):
    """One option a method family reads. `name`: its `TrainConfig` field, its key in results files and in
    hparams.json's "options", and its flag (--name, with dashes); `default`: its value unless set; `check` raises a
    ValueError saying what the value must be (`check_option`); `label`: its column in the tables; `help`: the
    command line's; `applies_to`: the families (regularisers, the memory) whose training reads it; `role`: what it is
    (`ROLES`: an open choice, a setting of the package, or a budget); `at_most`: a quantity of the run the value may
    not exceed, checked where the run is known (`check_option`'s `limits`: the memory's M <= K).

    A new family declares its options here, one `Option` each, and reads them from the run's `TrainConfig` in its
    class (`importance.Importance.from_config`, `memory.EpisodicMemory.from_config`); the config, the flags, the checks,
    the tuning and the tables follow."""

    name: str
    default: Any
    check: Callable[[Any], None]
    label: str
    help: str
    applies_to: tuple[str, ...]
    role: str = "open"
    at_most: Optional[str] = None

    @property
    def open(self) -> bool:
        """Whether the option is one of the choices the paper leaves open (role "open")."""
        return self.role == "open"


#: Every option of the method families, in the order of `TrainConfig`'s fields.
OPTION_TABLE: tuple[Option, ...] = (
    Option("fisher", "empirical", OneOf(FISHER_KINDS), "EWC's Fisher",
           "EWC's Fisher: per sample with the observed labels (empirical), or the true one over all classes "
           "(expected, about ten times slower)", ("ewc",), role="setting"),
    Option("pi_xi", 0.1, FinitePositive(), "PI's ξ",
           "PI's damping xi: 0.1 as Zenke et al. on Permuted MNIST; A-GEM's code uses 1e-3", ("pi",)),
    Option("omega_accumulate", "sum", OneOf(OMEGA_ACCUMULATE), "Ω accumulated",
           "Omega across tasks: summed (SI, MAS) or the latest task's only (A-GEM's code for EWC and MAS)",
           REGULARISERS),
    Option("omega_normalise", "none", OneOf(OMEGA_NORMALISE), "Ω normalised",
           "each task's Omega: as is, divided by its maximum, or min-max scaled to [0, 1] (A-GEM's code for EWC)",
           REGULARISERS),
    Option("memory", 1, Count(), "M",
           "examples per class of each past task kept in the episodic memory (the memory's methods: A-GEM, ER, ...), "
           "1 <= M <= K", ("episodic",), role="budget", at_most="K"),
)
OPTIONS: dict[str, Option] = {o.name: o for o in OPTION_TABLE}
#: The open choices (`Option.open`) in the order of the flags, the tables and a results file's method_options: the
#: choices about Omega that every regulariser reads first, then a family's own (PI's xi).
OMEGA_OPTIONS: tuple[str, ...] = tuple(o.name for o in sorted((o for o in OPTION_TABLE if o.open),
                                                               key=lambda o: -len(o.applies_to)))
#: The budgets (role "budget": the memory's M), after the open choices in a results file's method_options.
BUDGET_OPTIONS: tuple[str, ...] = tuple(o.name for o in OPTION_TABLE if o.role == "budget")
#: The options `run` takes on its command line and records per method: the open choices, then the budgets.
RUN_OPTIONS: tuple[str, ...] = (*OMEGA_OPTIONS, *BUDGET_OPTIONS)


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


def registrar(registry: dict, known: tuple[str, ...], decorator: str, what: str,
              table: str) -> Callable[[str], Callable[[type], type]]:
    """The class decorator `@decorator(name)` with which a class registers itself in `registry` under `name`, a name of
    the vocabulary's `table` (`what`: "a regulariser", "a memory"); another class under a taken name is refused.
    `importance.estimator` and `memory.memory_family` are two."""
    def decorate(name: str) -> Callable[[type], type]:
        def register(cls: type) -> type:
            if name not in known:
                raise ValueError(f"@{decorator}({name!r}): {name!r} is not {what} of the vocabulary; add its line to "
                                 f"vocab.{table}")
            if registry.get(name, cls).__qualname__ != cls.__qualname__:
                raise ValueError(f"@{decorator}({name!r}) is already {registry[name].__qualname__}, not "
                                 f"{cls.__qualname__}")
            registry[name] = cls
            return cls
        return register
    return decorate


def check_option(name: str, value: Any, limits: Optional[dict] = None) -> None:
    """A ValueError "name=value must be ..." (or "... is not an option; choose one of ...") where `value` is not one
    the declared option `name` takes, or exceeds the run's quantity its declaration names (`Option.at_most`, looked up
    in `limits`, e.g. {"K": 20}: "memory=30 must be at most K=20"); nothing for a good value."""
    o = OPTIONS[name]
    try:
        o.check(value)
    except ValueError as e:
        raise ValueError(f"{name}={value!r} {e}") from None
    top = (limits or {}).get(o.at_most)
    if top is not None and value > top:
        raise ValueError(f"{name}={value!r} must be at most {o.at_most}={top}")


def families_of(name: str) -> tuple[str, ...]:
    """The families a method belongs to, or a family by its name: its regulariser and its memory ("pi-metacl-lambda"
    -> ("pi",), "agem" -> ("episodic",), "mas-metacl-lambda-mem" -> ("mas", "episodic")); () for the baselines and the
    oracle."""
    if name in REGULARISERS or name in MEMORIES:
        return (name,)
    memory = MEMORY_METHODS[name].memory if name in MEMORY_METHODS else None
    return tuple(f for f in (regulariser_of(name), memory) if f is not None)


def options_of(name: str) -> tuple[Option, ...]:
    """The options a method reads (those declared for its families: its regulariser, its memory), or a family by its
    name: "pi-metacl-beta" and "pi" -> PI's xi and the choices about Omega, "agem" -> the memory's M; () for the
    baselines and the oracle."""
    families = families_of(name)
    return tuple(o for o in OPTION_TABLE if set(families) & set(o.applies_to))

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
    "lambda"), "pi" -> ("pi", None), "finetune" and "metacl" -> (None, None); a method of the memory family reads as
    its base method ("mas-metacl-lambda-mem" -> ("mas", "lambda"), "agem" -> (None, None); `memory_of` says which
    memory it adds). A ValueError for any other name."""
    if name in BASELINES:
        return None, None
    if name in MEMORY_METHODS:
        return parse_method(MEMORY_METHODS[name].base)
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
    """The label of the paper's tables: "PI-MetaCL-λ", "PI", "Fine tune"; a memory method's own ("A-GEM")."""
    if name in BASELINES:
        return BASELINES[name]
    if name in MEMORY_METHODS:
        return MEMORY_METHODS[name].label
    regulariser, variant = parse_method(name)
    label = REGULARISER_LABELS[regulariser]
    return label if variant is None else f"{label}-{VARIANTS[variant]}"


class Memory(NamedTuple):
    """A family of methods that keep an episodic memory of past tasks' training images: its name (its options'
    `applies_to`, its class's registration, `memory.memory_family`) and its label. None is in the paper."""

    name: str
    label: str
    in_paper: bool


#: The memory families: the episodic memory of A-GEM and ER (M examples per class of each past task; option "memory").
MEMORY_TABLE: tuple[Memory, ...] = (Memory("episodic", "episodic memory", False),)
MEMORIES: tuple[str, ...] = tuple(m.name for m in MEMORY_TABLE)


class MemoryMethod(NamedTuple):
    """A method of a memory family (an extension: never in the paper's tables, claims or verdicts): its name, label,
    the method it adds the memory to (`base`: its update, regulariser and balance) and how the memory enters (`use`):
    "project", the step is projected onto the memory gradient's half-space as well (A-GEM: Eq. 3 with the memory's
    gradient for g2; with a regulariser, both references); "replay", the memory's batch joins the current one's loss
    (ER); "constrain", the step is projected onto every past task's half-space (GEM: one reference per task)."""

    name: str
    label: str
    base: str
    use: str
    memory: str = "episodic"


#: The memory family's methods: A-GEM (Chaudhry et al., ICLR 2019), experience replay (Chaudhry et al. 2019, "On Tiny
#: Episodic Memories in Continual Learning"), GEM (Lopez-Paz and Ranzato, NeurIPS 2017), MetaCL's Reptile gradient (Alg. 2) projected as A-GEM projects, and
#: MetaCL-λ of the paper's regularisers with both references, the regulariser's and the memory's, and with the
#: regulariser's and GEM's constraints (one per past task).
MEMORY_METHOD_TABLE: tuple[MemoryMethod, ...] = (
    MemoryMethod("agem", "A-GEM", "finetune", "project"),
    MemoryMethod("er", "ER", "finetune", "replay"),
    MemoryMethod("gem", "GEM", "finetune", "constrain"),
    MemoryMethod("metacl-agem", "MetaCL-A-GEM", "metacl", "project"),
    *(MemoryMethod(method_name(r, "lambda") + "-mem", f"{REGULARISER_LABELS[r]}-{VARIANTS['lambda']}-mem",
                   method_name(r, "lambda"), "project") for r in PAPER_REGULARISERS),
    *(MemoryMethod(method_name(r, "lambda") + "-gem", f"{REGULARISER_LABELS[r]}-{VARIANTS['lambda']}-GEM",
                   method_name(r, "lambda"), "constrain") for r in PAPER_REGULARISERS),
)
MEMORY_METHODS: dict[str, MemoryMethod] = {m.name: m for m in MEMORY_METHOD_TABLE}


def memory_of(name: str) -> Optional[MemoryMethod]:
    """The memory a method adds to its base method (`MemoryMethod`), None for a method without one."""
    return MEMORY_METHODS.get(name)


#: Every method name, in the paper's row order: the two baselines, then each regulariser's family, then the memory's.
METHOD_NAMES: tuple[str, ...] = (*BASELINES, *(m for r in REGULARISERS for m in family(r)), *MEMORY_METHODS)
#: The paper's eleven methods (Table 1), the default of `run`: the two baselines and the paper's regularisers' families.
PAPER_METHOD_NAMES: tuple[str, ...] = (*BASELINES, *(m for r in PAPER_REGULARISERS for m in family(r)))


def in_paper(name: str) -> bool:
    """Whether a method (or the joint oracle) is one the paper ran; False for an extension such as "l2-metacl-beta"."""
    return name == ORACLE or name in PAPER_METHOD_NAMES


if __name__ == "__main__":  # the Makefile's lists: python -m metacl_lite.vocab lambdas|regularisers|methods
    import sys

    what = sys.argv[1] if len(sys.argv) > 1 else "methods"
    lists = {"regularisers": REGULARISERS, "paper-regularisers": PAPER_REGULARISERS, "methods": METHOD_NAMES,
             "paper-methods": PAPER_METHOD_NAMES, "memory-methods": tuple(MEMORY_METHODS),
             "lambdas": tuple(method_name(r, "lambda") for r in PAPER_REGULARISERS)}
    if what not in lists:
        sys.exit(f"python -m metacl_lite.vocab: unknown list {what!r}; one of {', '.join(lists)}")
    print(",".join(lists[what]))
