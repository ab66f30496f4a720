"""The questions beyond the paper about an episodic memory (chapter 9), as data, and their tests. The memory family's
methods (A-GEM, ER, MetaCL-A-GEM, MetaCL-λ with both references: `vocab.MEMORY_METHOD_TABLE`) are extensions: they
are never in the paper's tables, claims or verdicts (`claims.CLAIMS` reads the paper's files only); their results
files, results/<benchmark>-K<K>-memory-M<M>.json, lie beside the paper's (`memory_file`).

Four questions (`QUESTIONS`), each a family of paired per-seed tests a − b > 0 made by the claims' machinery
(`claims._row`: the paired t-test, its 95% interval and raw verdict; `claims.with_holm`: Holm's correction within the
question, all its K and M together): (a) each regulariser's MetaCL-λ against A-GEM with M = 1; (b) MetaCL-λ with
both references against each reference alone (the regulariser's MetaCL-λ, and MetaCL-A-GEM), with M = 1 (the budget
its γ is tuned at and its runs are made with, `memory_plan`); (c) MetaCL-A-GEM
against A-GEM; (d) ER with M = 1 against the best of the paper's methods at each K (`best_paper_method`: the highest
mean ACC of our own file). A method of the memory family is read from its memory file, the paper's methods from the
paper's file of the same K; two files are paired only where they hold the same runs' settings and references
(`check_pairing`), so that seed s of both starts from the same weights and permutations and FA reads the same
single-task references. A (K, M) without a file, or a file without a method's runs, reads "not yet run" with the
command that makes it. The words are the book's (chapter 9)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..data.specs import get_spec
from ..errors import FileFormatError
from ..keys import runs_by_key
from ..lab import memory_plan
from ..lab.store import rounding_differences
from ..lab.summary import summarize
from ..memory import images_per_step
from ..paths import REPO_ROOT
from ..vocab import (MEMORY_METHODS, METHOD_NAMES, PAPER_METHOD_NAMES, PAPER_REGULARISERS, method_label, method_name,
                     regulariser_of)
from .claims import RUN_KEYS, _row, claim_parts, claim_verdict, deciding_test, with_holm
from .stats import NOT_RUN

#: The memory budgets the chapter asks about: M examples per class of each past task (one stored image per class,
#: and five; `memory_plan.BUDGETS`). A file of another M that exists is read as well.
BUDGETS = memory_plan.BUDGETS
METRICS = ("ACC", "BT", "FA")
#: What makes a memory file: `make reproduce-memory`'s command for one K and M.
MEMORY_TUNE = "python -m metacl_lite tune --benchmark {benchmark} {args}"
MEMORY_COMMAND = ("python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds} --methods {methods} "
                  "--memory {M}{compile} --out results/{file}")
_NAME = re.compile(r"^(?P<benchmark>\w+)-K(?P<K>\d+)-memory-M(?P<M>\d+)\.json$")


def memory_file(benchmark: str, K: int, M: int) -> str:
    """The memory family's results file of a setting and budget, in results/: "pmnist-K20-memory-M1.json"."""
    return f"{benchmark}-K{K}-memory-M{M}.json"


def memory_files(benchmark: str = "pmnist", folder: Optional[Path] = None) -> dict[tuple, Path]:
    """{(K, M): path} of every memory file of `benchmark` in results/ (or `folder`), in order of K and M."""
    folder = Path(folder or REPO_ROOT / "results")
    found = {}
    for p in folder.glob(f"{benchmark}-K*-memory-M*.json"):
        m = _NAME.match(p.name)
        if m and m["benchmark"] == benchmark:
            found[(int(m["K"]), int(m["M"]))] = p
    return dict(sorted(found.items()))


@dataclass
class MemoryEvidence:
    """What the questions read: the K and M asked about (`ks`, `ms`), the paper's results files by K (`results`) and
    the memory files by (K, M) (`memory`); what is absent reads "not yet run". `gaps`: per (K, M), where the memory
    file's single-task references differ from the paper's file's within `KERNEL_GAP` (`check_pairing`)."""

    ks: tuple
    ms: tuple
    results: dict
    memory: dict
    benchmark: str = "pmnist"
    gaps: dict = field(default_factory=dict)


#: How far (points of a task's accuracy) two files' single-task references of one seed may lie apart where they were
#: not made on the same, recorded CPU kernels and torch: other kernels round otherwise and may classify a test image
#: or two differently (0.01 points each on Permuted MNIST). Farther apart, the references are another setting's.
KERNEL_GAP = 0.1


def made_by(doc: dict, unit: str) -> Optional[dict]:
    """The invocation of a file's provenance that made `unit` ("references/4"), its last one; None where it did not
    record its `cpu_kernels` (made before they were, or on a Ray cluster) or no invocation names the unit."""
    invs = [i for i in (doc.get("provenance") or {}).get("invocations", []) if unit in i.get("units", ())]
    return invs[-1] if invs and isinstance(invs[-1].get("cpu_kernels"), dict) else None


def check_pairing(mem: dict, main: dict, name: str) -> list[dict]:
    """A memory file is paired seed by seed with the paper's file of its K only where both hold the same runs'
    settings (`claims.RUN_KEYS` but the seeds) and, on their common seeds, the same single-task references (FA's):
    equal, or, where the two were not made on the same recorded CPU kernels and torch (`made_by`,
    `lab.store.rounding_differences`), within
    `KERNEL_GAP` of each other on every task. FileFormatError naming the file otherwise. Returns the gaps allowed:
    per seed whose references differ, {"seed", "tasks": how many differ, "of": the tasks, "max": the largest gap}."""
    mc, pc = mem["config"], main["config"]
    other = f"results/{pc['benchmark']}-K{pc['K']}.json"
    differ = [k for k in RUN_KEYS if k != "seeds" and mc.get(k) != pc.get(k)]
    if differ:
        raise FileFormatError(f"{name} cannot be paired with {other}: {', '.join(differ)} differ")
    gaps = []
    for s in sorted(set(mem["references"]) & set(main["references"]), key=int):
        a, b = mem["references"][s]["acc"], main["references"][s]["acc"]
        if a == b:
            continue
        made = [made_by(doc, f"references/{s}") for doc in (mem, main)]
        gap = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")
        if gap > KERNEL_GAP or (None not in made and not rounding_differences(*made)):
            why = "made on the same CPU kernels and torch" if gap <= KERNEL_GAP else f"above {KERNEL_GAP:g}"
            raise FileFormatError(f"{name} cannot be paired with {other}: the single-task references of seed {s} "
                                  f"differ (by up to {gap:.2f} points, {why}): the two were not made on one stream; "
                                  f"make the memory file again from the paper's file's command and seeds")
        gaps.append({"seed": int(s), "tasks": sum(x != y for x, y in zip(a, b)), "of": len(a), "max": gap})
    return gaps


def check_named(doc: dict, K: int, M: int, name: str) -> dict:
    """`doc`, a memory file named for K and M, where its runs were made at that K with that budget and record a
    memory of whole, non-negative bytes (`memory.state_bytes`); FileFormatError naming the file otherwise."""
    c = doc["config"]
    budgets = {o.get("memory") for o in c.get("method_options", {}).values()}
    if c["K"] != K or budgets != {M}:
        raise FileFormatError(f"{name} holds runs of K={c['K']} with memory {sorted(budgets, key=str)}, not of the "
                              f"K={K}, M={M} its name says: rename it for what it holds, or make it again")
    bad = [k for k, r in doc.get("runs", {}).items()
           if any(type(v) is not int or v < 0 for v in r.get("state_bytes", {}).values())]
    if bad:
        raise FileFormatError(f"{name}: {bad[0]}'s state_bytes {doc['runs'][bad[0]]['state_bytes']} are not counts "
                              f"of bytes; rerun it (`--redo {bad[0].split('/')[0]}`)")
    return doc


def load_memory_evidence(benchmark: str = "pmnist", ks: Optional[Sequence[int]] = None,
                         ms: Sequence[int] = BUDGETS, folder: Optional[Path] = None,
                         memory_folder: Optional[Path] = None) -> MemoryEvidence:
    """The paper's results files at `ks` (default: the K of the paper's tables) and every memory file at those K
    (the budgets `ms` and any other found; in `memory_folder`, default `folder`: `PREVIOUS` holds the end-of-task
    memory's), each checked against its K's file (`check_pairing`, whose gaps the evidence keeps)."""
    from ..data.specs import SPECS
    from ..lab.store import load_results

    folder = Path(folder or REPO_ROOT / "results")
    ks = tuple(ks or SPECS[benchmark].paper_Ks)
    results = {K: load_results(folder / f"{benchmark}-K{K}.json") for K in ks
               if (folder / f"{benchmark}-K{K}.json").exists()}
    memory, gaps = {}, {}
    for (K, M), path in memory_files(benchmark, memory_folder or folder).items():
        if K in ks:
            memory[(K, M)] = check_named(load_results(path), K, M, f"results/{path.name}")
            if K in results:
                gaps[(K, M)] = check_pairing(memory[(K, M)], results[K], f"results/{path.name}")
    return MemoryEvidence(ks, tuple(sorted(set(ms) | {M for _, M in memory})), results, memory, benchmark, gaps)


def _source(ev: MemoryEvidence, K: int, M: int, method: str) -> tuple[Optional[dict], str]:
    """The file a method's runs are read from (None when absent) and its name: a memory method's memory file at
    (K, M), the paper's file of K for the others."""
    if method in MEMORY_METHODS:
        return ev.memory.get((K, M)), f"results/{memory_file(ev.benchmark, K, M)}"
    return ev.results.get(K), f"results/{ev.benchmark}-K{K}.json"


def missing_command(ev: MemoryEvidence, K: int, M: int, seeds_at: Optional[dict] = None,
                    step: Optional[memory_plan.Step] = None) -> str:
    """The command that makes the memory file of (K, M) as `make reproduce-memory` does (`memory_plan`): the methods
    run at budget M (`memory_plan.methods_at`), the seeds planned at K (`seeds_at`, default
    `memory_plan.decided_seeds`; the paper's file's seeds at a K the plan has not) and the --compile of the paper's
    file at K (the plan's `step` of (K, M) where the caller has it, else read from that file)."""
    seeds_at = memory_plan.decided_seeds() if seeds_at is None else seeds_at
    seeds = seeds_at.get(K) or (len(ev.results[K]["config"]["seeds"]) if K in ev.results else memory_plan.SEEDS)
    compile_ = step.compile if step is not None else memory_plan.paper_compile(K)
    return MEMORY_COMMAND.format(benchmark=ev.benchmark, K=K, M=M, seeds=seeds,
                                 methods=",".join(memory_plan.methods_at(M)), file=memory_file(ev.benchmark, K, M),
                                 compile="" if compile_ == "off" else f" --compile {compile_}")


def _missing(ev: MemoryEvidence, K: int, M: int, methods: Sequence[str]) -> list[dict]:
    """What a test at (K, M) lacks, as `claims._missing` says it: a file (and its command) or a file's runs."""
    out: dict[str, dict] = {}
    for m in methods:
        res, name = _source(ev, K, M, m)
        if res is None:
            command = missing_command(ev, K, M) if m in MEMORY_METHODS else \
                f"python -m metacl_lite run --benchmark {ev.benchmark} --K {K}"
            out.setdefault(name, {"kind": "file", "K": K, "M": M, "file": name, "command": command})
        elif m not in res["config"]["methods"]:
            out.setdefault(name, {"kind": "runs", "K": K, "M": M, "file": name, "methods": []})["methods"].append(m)
    return list(out.values())


def _values(res: dict, method: str, metric: str) -> dict[int, float]:
    """{seed: the method's metric} from the file's summary (`load_results` computes it from the matrices; as
    `stats.seed_values`, without summarising the file again for every test)."""
    entry = (res.get("summary") or summarize(res)).get(method) or {}
    return dict(zip(entry["seeds"], entry[metric]["values"])) if metric in entry else {}


def pair_row(ev: MemoryEvidence, K: int, M: int, a: str, b: Optional[str], metric: str,
             part: Optional[str] = None) -> dict:
    """One test a − b > 0 in `metric` at (K, M), paired per seed over the seeds both files ran (`claims._row`, with
    "M" added); b None: the paper's file of K is missing, so no best method is known. A test of one seed (a file
    just begun) is shown, not counted ({"kind": "seeds", "n": 1}): it has no p-value to add to its family."""
    missing = _missing(ev, K, M, [m for m in (a, b) if m is not None])
    if b is None and not missing:
        missing = _missing(ev, K, M, PAPER_METHOD_NAMES[:1])
    diffs = None
    if not missing:
        (fa, _), (fb, _) = _source(ev, K, M, a), _source(ev, K, M, b)
        va, vb = _values(fa, a, metric), _values(fb, b, metric)
        diffs = {s: va[s] - vb[s] for s in sorted(va) if s in vb}
    test = f"{method_label(a)} − {method_label(b) if b else '?'}, {metric}"
    few = {"kind": "seeds", "n": len(diffs)} if diffs and len(diffs) < 2 else None  # a file begun: no test yet
    return {**_row(test, K, diffs, a, b, metric, missing=missing, part=part, excluded=few), "M": M}


def best_paper_method(res: dict) -> str:
    """The paper's method with the highest mean ACC in a results file (ours, over its seeds): the best of the
    paper's methods at that K, chosen on the same test runs it is then compared on."""
    s = res.get("summary") or summarize(res)
    return max((m for m in PAPER_METHOD_NAMES if m in s and "ACC" in s[m]), key=lambda m: s[m]["ACC"]["mean"])


def highest_mean(ev: MemoryEvidence, K: int) -> tuple[str, Optional[int], float]:
    """The method with the highest mean ACC at K, as (method, M, mean): the best of the paper's methods
    (`best_paper_method`, M None) against every memory method of every memory file of K (at its budget M)."""
    best = best_paper_method(ev.results[K])
    found = [(best, None, ev.results[K]["summary"][best]["ACC"]["mean"])]
    found += [(m, M, e["ACC"]["mean"]) for (k, M), res in sorted(ev.memory.items()) if k == K
              for m, e in res["summary"].items() if m in MEMORY_METHODS and "ACC" in e]
    return max(found, key=lambda f: f[2])


Pairs = Callable[[MemoryEvidence, int], Sequence[tuple]]


def pair_tests(pairs: Pairs, ms: Optional[Sequence[int]] = None, metrics: Sequence[str] = METRICS):
    """Tests at every K asked about and every M of `ms` (default: every budget): for each (a, b, part) of
    `pairs(ev, K)`, one `pair_row` per metric."""
    def evaluate(ev: MemoryEvidence) -> list[dict]:
        return [pair_row(ev, K, M, a, b, metric, part)
                for K in ev.ks for M in (ev.ms if ms is None else ms)
                for a, b, part in pairs(ev, K) for metric in metrics]
    return evaluate


def _both_vs_alone(ev, K):
    return [(method_name(r, "lambda") + "-mem", b, part) for r in PAPER_REGULARISERS
            for b, part in ((method_name(r, "lambda"), "regulariser alone"), ("metacl-agem", "memory alone"))]


def _er_vs_best(ev, K):
    return [("er", best_paper_method(ev.results[K]) if K in ev.results else None, None)]


@dataclass(frozen=True)
class Question:
    """One question beyond the paper: its id, a short title and its tests; `evaluate` gives one row per test, K and
    M with Holm's correction over all of them (`claims.with_holm`)."""

    id: str
    short: str
    tests: Callable[[MemoryEvidence], list[dict]]

    def evaluate(self, ev: MemoryEvidence) -> list[dict]:
        return with_holm([{"claim": self.id, "question": self.id, **r} for r in self.tests(ev)])


QUESTIONS = [
    Question("a", "MetaCL-λ against A-GEM (M = 1)",
             pair_tests(lambda ev, K: [(method_name(r, "lambda"), "agem", None) for r in PAPER_REGULARISERS],
                        ms=(1,))),
    Question("b", "both references against each alone", pair_tests(_both_vs_alone, ms=(1,))),
    Question("c", "MetaCL-A-GEM against A-GEM", pair_tests(lambda ev, K: [("metacl-agem", "agem", None)])),
    Question("d", "ER (M = 1) against the best of the paper's methods", pair_tests(_er_vs_best, ms=(1,),
                                                                                    metrics=("ACC",))),
]


def question_rows(ev: MemoryEvidence, questions: Sequence[Question] = tuple(QUESTIONS)) -> list[dict]:
    """Every test of every question, one row per test, K and M, with its raw and Holm verdicts."""
    return [r for q in questions for r in q.evaluate(ev)]


def answers(rows: Sequence[dict], questions: Sequence[Question] = tuple(QUESTIONS)) -> dict[str, dict]:
    """Per question id: "verdict" (the claims' rule on its Holm verdicts: `claims.claim_verdict`), "parts" (per
    metric, or per reference for (b): `claims.claim_parts`), "deciding" (`claims.deciding_test`'s row), "ran" and
    "not_run" (its tests that ran, and those not yet run), and "by" {(a, b, metric, K, M): Holm verdict} of the tests
    that ran."""
    out = {}
    for q in questions:
        mine = [r for r in rows if r["question"] == q.id]
        ran = [r for r in mine if r["n"] > 0]
        out[q.id] = {"short": q.short, "verdict": claim_verdict(mine), "parts": claim_parts(mine),
                     "deciding": deciding_test(mine), "ran": len(ran), "not_run": len(mine) - len(ran),
                     "by": {(r["a"], r["b"], r["metric"], r["K"], r["M"]): r["holm"] for r in ran}}
    return out


def coverage(ev: MemoryEvidence, rows: Sequence[dict]) -> dict:
    """Which (K, M) the questions have run: "files" (the memory files read), "absent" (the (K, M) asked about
    without a file, and the paper's K without their file), "runs_missing" {(K, M): the methods a file lacks that a
    question reads}, "incomplete" [(K, M, method, seeds, of)] (a memory method with fewer seeds than its file
    plans), "commands" (those that make the absent memory files) and "grid_commands" (those that make every memory
    file of `ev`'s K and budgets, in the plan's order: what `make reproduce-memory` runs)."""
    absent = [(K, M) for K in ev.ks for M in ev.ms if (K, M) not in ev.memory]
    seeds_at = memory_plan.decided_seeds()
    steps = memory_plan.plan(seeds_at)
    lacking: dict[tuple, set] = {}
    for r in rows:
        for m in r["missing"]:
            if m["kind"] == "runs":
                lacking.setdefault((m["K"], m["M"]), set()).update(m["methods"])
    incomplete = []
    for (K, M), res in ev.memory.items():
        s, n = res.get("summary") or summarize(res), len(res["config"]["seeds"])
        incomplete += [(K, M, m, len(s.get(m, {"seeds": []})["seeds"]), n) for m in res["config"]["methods"]
                       if len(s.get(m, {"seeds": []})["seeds"]) < n]
    return {"files": sorted(ev.memory), "absent": absent, "paper_absent": [K for K in ev.ks if K not in ev.results],
            "runs_missing": {k: sorted(v) for k, v in sorted(lacking.items())}, "incomplete": incomplete,
            "commands": [c for K, M in absent for c in missing_commands(ev, K, M, seeds_at, steps)],
            "grid_commands": [c for K in ev.ks for M in ev.ms for c in missing_commands(ev, K, M, seeds_at, steps)]}


def missing_commands(ev: MemoryEvidence, K: int, M: int, seeds_at: dict,
                     steps: Optional[Sequence[memory_plan.Step]] = None) -> list[str]:
    """The commands that make the memory file of (K, M): the tuning of its methods' knobs first where the plan
    tunes them at M (`memory_plan.Step.tune`), then the run (`missing_command`). `steps`: the plan with `seeds_at`,
    where the caller has it."""
    step = next((s for s in (steps or memory_plan.plan(seeds_at)) if (s.K, s.M) == (K, M)), None)
    tunes = [MEMORY_TUNE.format(benchmark=ev.benchmark, args=" ".join(step.tune_args()))] if step and step.tune else []
    return tunes + [missing_command(ev, K, M, seeds_at, step)]


def gammas(ev: MemoryEvidence) -> list[dict]:
    """The γ of each MetaCL-λ with both references in every memory file: its value, where it came from (the file's
    `config.hparams_source`) and whether it is borrowed from the regulariser's MetaCL-λ (the source names that
    method's γ, as `run` records it until the memory's own tuning exists), and "base_gamma", the γ of that MetaCL-λ
    in the paper's file of K (None without it)."""
    out = []
    for (K, M), res in ev.memory.items():
        cfg = res["config"]
        for m in cfg["methods"]:
            if "gamma" in cfg["method_hparams"].get(m, {}):
                source, base = (cfg.get("hparams_source") or {}).get(m, ""), MEMORY_METHODS[m].base
                base_hp = ev.results[K]["config"]["method_hparams"].get(base, {}) if K in ev.results else {}
                out.append({"K": K, "M": M, "method": m, "gamma": cfg["method_hparams"][m]["gamma"],
                            "source": source, "borrowed": source.startswith(f"{base}'s gamma"),
                            "base_gamma": base_hp.get("gamma")})
    return out


def state_costs(ev: MemoryEvidence) -> list[dict]:
    """What the runs of each memory file carry from task to task at the end of the stream, in bytes, as the runs
    record it (`memory.state_bytes`): per K, M and method, "memory" (the memory's examples) and "regulariser" (Omega
    and the anchor, two copies of the parameters; 0 without a regulariser). Every seed of a method keeps as much (a
    FileFormatError names the file where they differ); a run that did not record it is left out."""
    out = []
    for (K, M), res in sorted(ev.memory.items()):
        per: dict = {}
        for key, run in runs_by_key(res.get("runs", {})):
            if "state_bytes" in run:
                per.setdefault(key.method, set()).add(tuple(sorted(run["state_bytes"].items())))
        for m in [m for m in MEMORY_METHODS if m in per]:
            if len(per[m]) != 1:
                raise FileFormatError(f"{memory_file(ev.benchmark, K, M)}: the seeds of {m} record different "
                                      f"state_bytes ({sorted(per[m])}); rerun it (`--redo {m}`)")
            out.append({"K": K, "M": M, "method": m, **dict(next(iter(per[m])))})
    return out


#: The memory files of the end-of-task memory (each task's M per class joining when it ended, before `memory.POLICY`):
#: the previous answers, which the chapter sets beside today's (`verdict_changes`).
PREVIOUS = REPO_ROOT / "results" / "memory-end-of-task"


def verdict_changes(before: Sequence[dict], now: Sequence[dict]) -> list[dict]:
    """The tests of the questions (`question_rows`) run in both `before` and `now` whose verdict with Holm's
    correction differs: question, a, b, metric, K, M, and both verdicts and means."""
    key = lambda r: (r["question"], r["a"], r["b"], r["metric"], r["K"], r["M"])  # noqa: E731
    old = {key(r): r for r in before if r["verdict"] != NOT_RUN}
    return [{**dict(zip(("question", "a", "b", "metric", "K", "M"), key(r))), "before": old[key(r)]["holm"],
             "now": r["holm"], "mean_before": old[key(r)]["mean"], "mean_now": r["mean"]}
            for r in now if r["verdict"] != NOT_RUN and key(r) in old and old[key(r)]["holm"] != r["holm"]]


def compute_rows(ev: MemoryEvidence, K: int, M: int, step_ms: dict[str, float]) -> list[dict]:
    """What an outer step of each method costs at (K, M): the images it passes through the network, mean over the
    stream's steps and most (`memory.images_per_step`, the memory holding min(t C K, M C T) examples after t tasks),
    and its measured time (`step_ms`: {method: ms}, a bench file's; None where it has none) with its ratio to
    fine-tune's. Fine-tune, MetaCL w/o reg and each regulariser's MetaCL-λ, then the file's memory methods."""
    cfg = ev.memory[(K, M)]["config"]
    C, T = get_spec(ev.benchmark).classes_per_task, cfg["n_tasks"]
    batch, held = min(cfg["train"]["batch_size"], C * K), [min(t * C * K, M * C * T) for t in range(T)]
    methods = ["finetune", "metacl", *(method_name(r, "lambda") for r in PAPER_REGULARISERS),
               *(m for m in MEMORY_METHODS if m in cfg["methods"])]
    rows = []
    for m in methods:
        n = [images_per_step(MEMORY_METHODS[m].use if m in MEMORY_METHODS else None, batch, h) for h in held]
        ms = step_ms.get(m)
        rows.append({"method": m, "images_mean": sum(n) / T, "images_max": max(n), "step_ms": ms,
                     "vs_finetune": ms / step_ms["finetune"] if ms and step_ms.get("finetune") else None})
    return rows


#: The three groups of the ACC-against-K figure: the paper's regularisers with MetaCL-λ, the memory alone, both.
GROUPS = ("regulariser", "memory", "both")


def acc_by_K(ev: MemoryEvidence) -> list[dict]:
    """The ACC-against-K figure's points: per K, group (`GROUPS`), method and M (None for the paper's methods) with
    runs, the mean ACC over seeds, its 95% t-interval (lo, hi), n and the seeds its file plans ("of";
    `lab.summary.summarize`). The regulariser
    group: fine-tune and each paper regulariser's MetaCL-λ; the memory group: A-GEM, ER and MetaCL-A-GEM; both: the
    MetaCL-λ with both references."""
    out = []
    groups = {"finetune": "regulariser", **{method_name(r, "lambda"): "regulariser" for r in PAPER_REGULARISERS},
              **{m: "memory" if regulariser_of(m) is None else "both" for m in MEMORY_METHODS}}
    sources = [(K, None, res) for K, res in ev.results.items()] + [(K, M, res) for (K, M), res in ev.memory.items()]
    for K, M, res in sources:
        s = res.get("summary") or summarize(res)
        for m, g in groups.items():
            if m in s and "ACC" in s[m] and (M is None) == (m not in MEMORY_METHODS):
                acc = s[m]["ACC"]
                half = acc["ci95"] if acc["ci95"] == acc["ci95"] else 0.0
                out.append({"K": K, "M": M, "group": g, "method": m, "mean": acc["mean"], "lo": acc["mean"] - half,
                            "hi": acc["mean"] + half, "n": len(s[m]["seeds"]), "of": len(res["config"]["seeds"])})
    return sorted(out, key=lambda r: (GROUPS.index(r["group"]), METHOD_NAMES.index(r["method"]), r["M"] or 0, r["K"]))

