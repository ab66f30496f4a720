"""beta and gamma: where they live (hparams.json), what they may be, and where each value came from.

hparams.json, per benchmark::

    {"pmnist": {"methods": {"ewc": {"beta": 100.0}, "ewc-metacl-lambda": {"gamma": 100.0}, ...},
                "source": "results/tuning-pmnist-K20.json", "command": "python -m metacl_lite tune ...",
                "sources": {"l2": {"source": "results/tuning-pmnist-K20-l2.json", "command": ...}, ...},
                "by_K": {"200": {"methods": {...}, "source": ..., "command": ...}}}}

"sources" (optional) names the tuning of values chosen elsewhere than the entry's own "source" (`store`).

The entry may also hold "options": the open choices about Omega decided per regulariser on validation data
(`choices`: the options `vocab.OPTION_TABLE` declares open, e.g. {"ewc": {"omega_accumulate": "latest",
"omega_normalise": "minmax"}}), with "options_source" (the decision file); every K and every method of that regulariser
uses them unless the command line sets an option explicitly. Each value is checked by its declaration.

The top-level entry holds the values tuned at the benchmark's tuning K (`specs.BenchmarkSpec.tuning_K`), which every
K uses unless `by_K` has values of its own for it. The file is checked when it is read: unknown benchmarks, methods
or keys, a key a method does not use (beta for MetaCL-lambda, gamma for the others), and values that are not finite
non-negative numbers are refused before any work, naming the file and the key.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence, Union

from .atomic import locked, read_json, write_json
from ..errors import HparamsError, MissingHparams  # noqa: F401 (raised by grid as H.MissingHparams)
from ..data.specs import SPECS, BenchmarkSpec, get_spec
from ..vocab import BUDGET_OPTIONS, OMEGA_OPTIONS, REGULARISERS, check_option, memory_of
from ..training import ALL_METHODS, TrainConfig, get_method

HPARAMS_FILE = Path(__file__).resolve().parent / "hparams.json"
#: The package's own hparams.json, whose tuning files are those of results/ in its checkout (`check_sources`).
PACKAGED_FILE = HPARAMS_FILE
ENTRY_KEYS = {"methods", "source", "command", "sources", "by_K", "options", "options_source"}
#: Keys of a per-K entry (by_K.<K>): the options are decided once for every K.
K_ENTRY_KEYS = {"methods", "source", "command", "sources"}


def strength_key(method: str) -> Optional[str]:
    """The one strength a method takes: gamma for MetaCL-lambda (Alg. 2), beta for the plain methods (Eq. 2) and
    MetaCL-beta (Alg. 1), none for fine-tune and MetaCL w/o reg."""
    m = get_method(method)
    if m.regulariser is None:
        return None
    return "gamma" if m.balance == "lambda" else "beta"


def _check_methods(methods, where: str, path: Path) -> None:
    """An entry's "methods": each a regularised method with its one strength (`strength_key`), a finite number >= 0."""
    if not isinstance(methods, dict):
        raise HparamsError(f"{path}: {where}.methods must be an object")
    for m, vals in methods.items():
        if m not in ALL_METHODS:
            raise HparamsError(f"{path}: unknown method {m!r} in {where}.methods; choose from "
                               f"{', '.join(ALL_METHODS)}")
        key = strength_key(m)
        if key is None:
            raise HparamsError(f"{path}: {where}.methods.{m}: {m} has no beta/gamma; remove it")
        if not isinstance(vals, dict) or set(vals) != {key}:
            got = ", ".join(sorted(vals)) if isinstance(vals, dict) else type(vals).__name__
            raise HparamsError(f"{path}: {where}.methods.{m} must be {{\"{key}\": value}} ({m} uses {key}), got "
                               f"{got}")
        v = vals[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise HparamsError(f"{path}: {where}.methods.{m}.{key} = {v!r}; it must be a finite number >= 0")


def _check_options(options, where: str, path: Path) -> None:
    """An entry's "options": per regulariser, open choices (`vocab.OMEGA_OPTIONS`), each value checked by its
    declaration (`vocab.check_option`)."""
    if not isinstance(options, dict):
        raise HparamsError(f"{path}: {where}.options must be an object")
    for r, opts in options.items():
        if r not in REGULARISERS:
            raise HparamsError(f"{path}: {where}.options: unknown regulariser {r!r}; choose from "
                               f"{', '.join(sorted(REGULARISERS))}")
        if not isinstance(opts, dict) or set(opts) - set(OMEGA_OPTIONS):
            raise HparamsError(f"{path}: {where}.options.{r} must be an object with keys among "
                               f"{', '.join(OMEGA_OPTIONS)}")
        for name, value in opts.items():
            try:
                check_option(name, value)
            except ValueError as e:
                raise HparamsError(f"{path}: {where}.options.{r}: {e}") from None


def _check_entry(entry, where: str, path: Path, top: bool) -> None:
    """One benchmark's entry (`top`) or one of its by_K entries: its keys, methods, sources and options."""
    if not isinstance(entry, dict):
        raise HparamsError(f"{path}: {where} must be an object, got {type(entry).__name__}")
    allowed = ENTRY_KEYS if top else K_ENTRY_KEYS
    extra = set(entry) - allowed
    if extra:
        raise HparamsError(f"{path}: unknown key(s) {', '.join(sorted(extra))} in {where}; "
                           f"allowed: {', '.join(sorted(allowed))}")
    methods = entry.get("methods", {})
    _check_methods(methods, where, path)
    for k in ("source", "command", "options_source"):
        if k in entry and not isinstance(entry[k], str):
            raise HparamsError(f"{path}: {where}.{k} must be a string")
    sources = entry.get("sources", {})
    if not isinstance(sources, dict):
        raise HparamsError(f"{path}: {where}.sources must be an object")
    for m, src in sources.items():
        if m not in methods:
            raise HparamsError(f"{path}: {where}.sources.{m}: {m} has no value in {where}.methods; remove it")
        if (not isinstance(src, dict) or set(src) != {"source", "command"}
                or not all(isinstance(v, str) for v in src.values())):
            raise HparamsError(f"{path}: {where}.sources.{m} must be {{\"source\": file, \"command\": command}}")
    _check_options(entry.get("options", {}), where, path)
    if top:
        by_k = entry.get("by_K", {})
        if not isinstance(by_k, dict):
            raise HparamsError(f"{path}: {where}.by_K must be an object")
        for K, sub in by_k.items():
            if not K.isdigit() or int(K) <= 0:
                raise HparamsError(f"{path}: {where}.by_K key {K!r} must be a positive integer K")
            _check_entry(sub, f"{where}.by_K.{K}", path, top=False)


def validate(hp, path: Path) -> dict:
    """Check a parsed hparams.json (see the module docstring); return it unchanged."""
    if not isinstance(hp, dict):
        raise HparamsError(f"{path} must hold a JSON object, got {type(hp).__name__}")
    for b, entry in hp.items():
        if b not in SPECS:
            raise HparamsError(f"{path}: unknown benchmark {b!r}; choose from {', '.join(SPECS)}")
        _check_entry(entry, b, path, top=True)
    return hp


def load(path: Optional[Path] = None) -> dict:
    """hparams.json, validated ({} when there is none)."""
    path = Path(path or HPARAMS_FILE)
    if not path.exists():
        return {}
    return validate(read_json(path, "hyperparameter file", keep=True), path)


Bench = Union[str, BenchmarkSpec]  # a benchmark's name, or its spec resolved once by the caller (`run_experiment`)


def _entry(hp: dict, benchmark: str, method: str, K: Optional[int]) -> tuple[dict, str]:
    entry = hp.get(benchmark, {})
    per_k = entry.get("by_K", {}).get(str(K), {}) if K is not None else {}
    if method in per_k.get("methods", {}):
        return per_k, f"K={K}"
    return entry, "default"


def tuned_method(benchmark: Bench, method: str, K: Optional[int] = None, hp: Optional[dict] = None) -> str:
    """The method whose tuned beta/gamma `method` trains with: its own, wherever hparams.json has one (`tune --memory
    M` chooses it on the validation split, results/tuning-<b>-K<K>-memory-M<M>.json); only for a method of the memory
    family with none of its own yet, the fallback: its base method's (`vocab.memory_of`), MetaCL-lambda with both
    references taking MetaCL-lambda's gamma as Alg. 2 adds it (`balance.two_reference_balance`), which
    `hparams_source` records ("<base>'s gamma, ...")."""
    memory = memory_of(method)
    if memory is None or strength_key(method) is None:
        return method
    hp = load() if hp is None else hp
    return method if method in _entry(hp, get_spec(benchmark).name, method, K)[0].get("methods", {}) else memory.base


def tuned_at(benchmark: Bench, K: int, hp: Optional[dict] = None) -> dict[str, dict]:
    """The values tuned at exactly this K ({method: {"beta" or "gamma": value}}): by_K's entry for K, or the top-level
    entry when K is the benchmark's tuning K; {} when nothing was tuned at K (no fallback to another K)."""
    spec = get_spec(benchmark)
    hp = load() if hp is None else hp
    entry = hp.get(spec.name, {})
    if K == spec.tuning_K:
        return dict(entry.get("methods", {}))
    return dict(entry.get("by_K", {}).get(str(K), {}).get("methods", {}))


def method_hparams(benchmark: Bench, method: str, K: Optional[int] = None, hp: Optional[dict] = None) -> dict:
    """beta (plain and MetaCL-beta) or gamma (MetaCL-lambda) of a method: the values tuned at this K when there are
    any, else the default ones (tuned at the benchmark's tuning K). {} for methods without a penalty."""
    benchmark = get_spec(benchmark).name
    if strength_key(method) is None:
        return {}
    hp = load() if hp is None else hp
    tuned = tuned_method(benchmark, method, K, hp)
    values = _entry(hp, benchmark, tuned, K)[0].get("methods", {})
    if tuned not in values:
        raise MissingHparams(f"no tuned beta/gamma for {tuned} on {benchmark} in {HPARAMS_FILE}", [tuned])
    return dict(values[tuned])


def missing(benchmark: Bench, methods: Sequence[str], K: Optional[int] = None, hp: Optional[dict] = None) -> list[str]:
    """The methods that need beta/gamma and have none in hparams.json (`hp`: the file, already loaded)."""
    benchmark = get_spec(benchmark).name
    hp = load() if hp is None else hp
    tuned = {m: tuned_method(benchmark, m, K, hp) for m in methods}
    return [t for t in tuned.values() if strength_key(t) is not None
            and t not in _entry(hp, benchmark, t, K)[0].get("methods", {})]


def hparams_source(benchmark: Bench, methods: Sequence[str], K: Optional[int] = None,
                   hp: Optional[dict] = None) -> dict[str, str]:
    """Where each method's beta/gamma come from: 'K=200: <tuning file>' or 'default: <tuning file>'; for a value
    read from another method (`tuned_method`), "<that method>'s gamma, " before it."""
    benchmark = get_spec(benchmark).name
    hp, out = (load() if hp is None else hp), {}
    for m in methods:
        if strength_key(m) is not None:
            t = tuned_method(benchmark, m, K, hp)
            entry, which = _entry(hp, benchmark, t, K)
            out[m] = (f"{t}'s {strength_key(t)}, " if t != m else "") + \
                f"{which}: {entry.get('sources', {}).get(t, entry).get('source', '?')}"
    return out


def regulariser(method: str) -> Optional[str]:
    """The regulariser of a regularised method (one of vocab.REGULARISERS); None for fine-tune and MetaCL w/o reg."""
    return get_method(method).regulariser


def method_options(benchmark: Bench, method: str, hp: Optional[dict] = None) -> dict:
    """The open choices decided for the method's regulariser (hparams.json "options"; {} when none are decided or the
    method has no penalty)."""
    benchmark = get_spec(benchmark).name
    r = regulariser(method)
    if r is None:
        return {}
    hp = load() if hp is None else hp
    return dict(hp.get(benchmark, {}).get("options", {}).get(r, {}))


def method_config(benchmark: Bench, method: str, epochs: Optional[int] = None, K: Optional[int] = None,
                  hp: Optional[dict] = None, **overrides) -> TrainConfig:
    """The TrainConfig a method trains with: the benchmark's epochs (Appendix B), the method's tuned beta/gamma, and
    the open choices decided for its regulariser (`method_options`) unless `overrides` set them."""
    spec = get_spec(benchmark)
    overrides = {**method_options(spec, method, hp), **overrides}
    cfg = TrainConfig(epochs=epochs or spec.epochs, **overrides)
    for k, v in method_hparams(spec, method, K, hp).items():
        setattr(cfg, k, v)
    return cfg


def store_options(benchmark: str, options: dict[str, dict], source: str, path: Optional[Path] = None) -> None:
    """Record the open choices decided per regulariser (`choices`), under a lock."""
    path = Path(path or HPARAMS_FILE)
    with locked(path):
        hp = load(path)
        entry = hp.setdefault(benchmark, {})
        entry["options"], entry["options_source"] = options, source
        validate(hp, path)
        write_json(path, hp)


def store(benchmark: str, K: int, chosen: dict[str, dict], source: str, command: str,
          path: Optional[Path] = None) -> None:
    """Record tuned values: at the benchmark's tuning K as the default, at any other K under by_K (that K only).
    Read, update and write under a lock, so concurrent tunings of different methods keep each other's values.

    Provenance stays with each value: the entry's `source`/`command` name the tuning the entry's methods came from;
    values tuned elsewhere while methods of that tuning remain (an extension such as L2 tuned in a file of its own)
    carry theirs under `sources`, so the paper's methods keep naming the file and command that chose them."""
    path = Path(path or HPARAMS_FILE)
    with locked(path):
        hp = load(path)
        entry = hp.setdefault(benchmark, {})
        if K != get_spec(benchmark).tuning_K:
            entry = entry.setdefault("by_K", {}).setdefault(str(K), {})
        methods, sources = entry.setdefault("methods", {}), entry.get("sources", {})
        others = [m for m in methods if m not in chosen and m not in sources]  # still from the entry's own tuning
        if others and entry.get("source", source) != source:
            sources.update({m: {"source": source, "command": command} for m in chosen})
        else:
            entry["source"], entry["command"] = source, command
            for m in chosen:
                sources.pop(m, None)
        if sources:
            entry["sources"] = sources
        else:
            entry.pop("sources", None)
        methods.update(chosen)
        validate(hp, path)
        write_json(path, hp)


def sources_checked() -> bool:
    """Whether `run` checks the tuning files hparams.json names (`check_sources`): for the package's own file in a
    checkout, whose results/ holds them (an installed package ships no tuning files, nor does the grading jail's
    copy of the package, which has no results/; another hparams file, a test's, names files of its own)."""
    from ..paths import IN_CHECKOUT, REPO_ROOT

    return IN_CHECKOUT and (REPO_ROOT / "results").is_dir() and Path(HPARAMS_FILE) == Path(PACKAGED_FILE)


def check_sources(hp: dict, benchmark: Optional[Bench] = None, methods: Optional[Sequence[str]] = None,
                  K: Optional[int] = None, budgets: Optional[dict[str, dict]] = None) -> None:
    """Every tuning file hparams.json names (an entry's "source", or a method's under "sources") exists, is a tuning
    file, and chose the value hparams.json holds for the method; with `benchmark` only the values a run of `methods`
    at K reads. Relative paths are the repository's (`paths.REPO_ROOT`). A file missing, of another kind or that chose
    something else (a source pointing at another tuning) is an HparamsError naming the method, the file and the fix.
    `budgets` ({method: {budget: value}}, a run's `vocab.BUDGET_OPTIONS` per method): a value chosen at another budget
    (gamma of a MetaCL-lambda with a memory, tuned at M = 1, for a run at M = 5) is refused the same way, since
    hparams.json keeps one value per method and K."""
    from ..paths import REPO_ROOT
    from .store import load as load_file

    docs: dict[Path, dict] = {}
    for name, at_K, m, value, src in _named_sources(hp, benchmark, methods, K):
        path = Path(src) if Path(src).is_absolute() else REPO_ROOT / src
        where = name if at_K is None else f"{name}.by_K.{at_K}"
        retune = (f"python -m metacl_lite tune --benchmark {name}" + ("" if at_K is None else f" --K {at_K}")
                  + f" --methods {m}")
        if not path.is_file():
            raise HparamsError(f"{HPARAMS_FILE}: {where}.methods.{m} comes from {src}, which is missing: restore that "
                               f"tuning file (`git checkout -- {src}`), or tune {m} again (`{retune}`)")
        if path not in docs:
            docs[path] = load_file(path, "tuning")
        chose = (docs[path].get("chosen") or {}).get(m)
        if chose != value:
            raise HparamsError(f"{HPARAMS_FILE}: {where}.methods.{m} = {value} names {src} as its tuning, which chose "
                               f"{chose if chose is not None else 'no value'} for {m}: point {m}'s source at the tuning "
                               f"that chose it (`git diff {HPARAMS_FILE.name}` shows the edit), or tune it again "
                               f"(`{retune}`)")
        if budgets is not None:  # a run's: the check of every value (`pages`, `readme`) has no budget of its own
            _check_budget(docs[path], m, budgets.get(m, {}), where, src, retune)


def _check_budget(doc: dict, method: str, run: dict, where: str, src: str, retune: str) -> None:
    """The budgets (the memory's M) a tuning file gave `method` (its protocol's method_options) against a run's."""
    tuned = {k: v for k, v in doc.get("protocol", {}).get("method_options", {}).get(method, {}).items()
             if k in BUDGET_OPTIONS}
    other = {k: (tuned[k], run.get(k)) for k in tuned if run.get(k) != tuned[k]}
    if other:
        said = ", ".join(f"--{k} {was} (this run: {now})" for k, (was, now) in other.items())
        at = " ".join(f"--{k} {v}" for k, v in tuned.items())
        fix = " ".join(f"--{k} {now}" for k, (_, now) in other.items() if now is not None)
        raise HparamsError(f"{HPARAMS_FILE}: {where}.methods.{method} was chosen in {src} at {said}, a value for "
                           f"another budget: run {method} with {at}, or choose it at this budget first (`{retune} "
                           f"{fix}`; hparams.json keeps one value per method and K, so that replaces it)")


def _named_sources(hp: dict, benchmark: Optional[Bench], methods: Optional[Sequence[str]], K: Optional[int]):
    """(benchmark, the K of a per-K entry or None, method, its value, the tuning file named for it) for every value of
    hparams.json, or with `benchmark` for the values a run of `methods` at K reads (`_entry`)."""
    if benchmark is not None:
        name = get_spec(benchmark).name
        for m in {tuned_method(name, m, K, hp) for m in methods or () if strength_key(m) is not None}:
            entry, which = _entry(hp, name, m, K)  # a borrowed value (`tuned_method`): the method it is read from
            if m in entry.get("methods", {}):
                yield name, (None if which == "default" else K), m, entry["methods"][m], _source(entry, m)
        return
    for name, top in hp.items():
        for at_K, entry in [(None, top), *top.get("by_K", {}).items()]:
            for m, value in entry.get("methods", {}).items():
                yield name, at_K, m, value, _source(entry, m)


def _source(entry: dict, method: str) -> str:
    return entry.get("sources", {}).get(method, entry).get("source", "?")
