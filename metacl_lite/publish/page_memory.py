"""The records of chapter 9 (`book/chapters/09_memory.md`, beyond the paper: an episodic memory in place of the
regulariser): the check of the two-reference dual against a generic QP solver and by its KKT residuals, which memory
files exist and what is not yet run, the table of ACC/BT/FA per method, K and M, the γ each file used, and per
question (`findings.memory.QUESTIONS`) its tests and verdicts. The `*_glue` functions return the glue names the
chapter's Markdown reads, written out in full. Numbers, records and tables only: the chapter's sentences are its
Markdown, and its hidden cells assert the premises they rest on. The page imports this module as `R`."""
from __future__ import annotations

from ..findings import memory as _Q
from ..findings.stats import CONFIRMED, INCONCLUSIVE, NOT_RUN, REFUTED, format_p
from ..vocab import MEMORY_METHODS, PAPER_REGULARISERS, method_label, method_name
from .formatting import listing, markdown, pts

#: The kinds of random instances of the dual's check (every sixth instance of a kind): generic, the memory's
#: gradient parallel or antiparallel to the regulariser's, either zero, both zero.
KINDS = ("generic", "parallel", "antiparallel", "g2 zero", "gm zero", "both zero")


def instances(n: int = 100, seed: int = 0):
    """n random instances (g1, g2, gm, kind) of the two-reference problem, the kinds in turn (`KINDS`): dimensions 2
    to 39, each vector scaled by 10^u, u uniform in [-2, 2]; g1 turned against each reference with probability 1/2
    (reflected in its hyperplane), so that every active set is met."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for i in range(n):
        p, kind = int(rng.integers(2, 40)), KINDS[i % len(KINDS)]
        g1, g2, gm = (rng.normal(size=p) * 10 ** rng.uniform(-2, 2) for _ in range(3))
        if kind in ("parallel", "antiparallel"):
            gm = (1 if kind == "parallel" else -1) * rng.uniform(0.1, 10) * g2
        for ref in (g2, gm):
            if rng.random() < 0.5 and g1 @ ref > 0:
                g1 = g1 - 2 * (g1 @ ref) / (ref @ ref) * ref
        g2 = np.zeros(p) if kind in ("g2 zero", "both zero") else g2
        gm = np.zeros(p) if kind in ("gm zero", "both zero") else gm
        yield g1, g2, gm, kind


def dual_check(n: int = 100, seed: int = 0) -> dict:
    """The closed-form dual (`balance.two_reference_lambdas`) on `instances`: "n"; "kkt", the largest KKT residual
    (stationarity, primal, dual, complementarity; relative to the instance's scale, 1 + max|g1| and the references'
    norms); "slsqp", the largest difference from SciPy's SLSQP solving the QP with both constraints at once
    (`balance.balance_qp_numeric`, relative to 1 + max|g1|); "many", the largest difference from GEM's path
    (`balance.many_reference_lambdas`, relative as "kkt"); "active": the active sets met, per kind, as (λ2 > 0,
    λm > 0) pairs."""
    import numpy as np
    import torch

    from ..balance import (balance_qp_numeric, kkt_residuals, many_reference_lambdas, two_reference_balance,
                           two_reference_lambdas)

    kkt = slsqp = many = 0.0
    active: dict[str, set] = {k: set() for k in KINDS}
    for g1, g2, gm, kind in instances(n, seed):
        G1, G2, GM = (torch.tensor(v, dtype=torch.float64) for v in (g1, g2, gm))
        g, _ = two_reference_balance(G1, G2, GM)
        lam = two_reference_lambdas(G1, G2, GM)
        scale = (1 + np.abs(g1).max()) * max(1.0, np.linalg.norm(g2), np.linalg.norm(gm))
        kkt = max(kkt, max(kkt_residuals(G1, torch.stack([G2, GM]), g, lam).values()) / scale)
        R = torch.stack([G2, GM])
        many = max(many, float((G1 + many_reference_lambdas(G1, R) @ R - g).abs().max()) / scale)
        s, norms = np.abs(g1).max(), np.linalg.norm([g2, gm], axis=1, keepdims=True)
        ref = s * balance_qp_numeric(g1 / s, np.stack([g2, gm]) / np.where(norms > 0, norms, 1.0))  # scale-free
        slsqp = max(slsqp, float(np.abs(g.numpy() - ref).max() / (1 + s)))
        active[kind].add(tuple(bool(x > 0) for x in lam.tolist()))
    return {"n": n, "kkt": kkt, "slsqp": slsqp, "many": many, "active": active}


def several_check(n: int = 5, seed: int = 5) -> dict:
    """The generic solver with three constraints, and two solvers on two: on n random problems in 12 dimensions,
    "three_violation" (the largest violation of the three constraints by SLSQP's solution), "osqp" (the largest
    difference between OSQP's solution with two constraints and the closed form; None without the osqp package) and
    "gem" (the largest difference between GEM's path, `balance.many_reference_lambdas`, and SLSQP, with three
    constraints and with nineteen in 40 dimensions, relative to 1 + max|g1|)."""
    import importlib.util

    import numpy as np
    import torch

    from ..balance import balance_qp_numeric, many_reference_lambdas, two_reference_balance

    rng = np.random.default_rng(seed)
    worst, gem, osqp = 0.0, 0.0, 0.0 if importlib.util.find_spec("osqp") else None
    for size in [(4, 12)] * n + [(20, 40)] * n:
        g1, *refs = rng.normal(size=size)
        R = np.stack(refs)
        qp = balance_qp_numeric(g1, R)
        gem = max(gem, float(np.abs(g1 + many_reference_lambdas(*map(torch.tensor, (g1, R))).numpy() @ R - qp).max())
                  / (1 + np.abs(g1).max()))
        if size[0] > 4:
            continue
        worst = max(worst, float(np.maximum(0, -(R @ qp)).max()))
        if osqp is not None:
            closed, _ = two_reference_balance(*(torch.tensor(v) for v in (g1, refs[0], refs[1])))
            osqp = max(osqp, float(np.abs(balance_qp_numeric(g1, np.stack(refs[:2]), "osqp") - closed.numpy()).max()))
    return {"n": n, "three_violation": worst, "osqp": osqp, "gem": gem}


def dual_glue(d: dict, several: dict) -> dict:
    """The dual's checks (`dual_check`, `several_check`) as the page shows them."""
    from ..report.readable import sci

    generic = sorted(d["active"]["generic"])
    return {"dual_n": d["n"], "dual_kinds": listing(KINDS), "dual_kkt": sci(d["kkt"]), "dual_slsqp": sci(d["slsqp"]),
            "dual_generic_sets": len(generic), "several_n": several["n"], "several_gem": sci(several["gem"]),
            "several_violation": sci(several["three_violation"]), "dual_many": sci(d["many"]),
            "several_osqp": "–" if several["osqp"] is None else sci(several["osqp"])}


def _setting(K, M) -> str:
    return f"K = {K}" if M is None else f"K = {K}, M = {M}"


def by_K(settings) -> str:
    """(K, M) pairs grouped by K, as a page lists them: "K = 50 (M = 1, 5) and K = 200 (M = 1)"; "none"."""
    ms: dict = {}
    for K, M in settings:
        ms.setdefault(K, []).append(str(M))
    return listing(f"K = {K} (M = {', '.join(v)})" for K, v in ms.items()) or "none"


def files_glue(cov: dict) -> dict:
    """Which memory files exist, what is not yet run, and the commands of the whole grid (`findings.memory.coverage`
    `cov`)."""
    from IPython.display import Markdown

    block = "```text\n" + "\n".join(cov["grid_commands"]) + "\n```"
    short: dict = {}
    for K, M, m, n, of in cov["incomplete"]:
        short.setdefault((K, M, n, of), []).append(method_label(m))
    return {"mem_files": by_K(cov["files"]), "mem_absent": by_K(cov["absent"]),
            "mem_ks": "K = " + listing(sorted({K for K, _ in cov["files"]})) if cov["files"] else "none",
            "mem_runs_missing": "; ".join(f"{_setting(*k)}: {', '.join(map(method_label, v))}"
                                          for k, v in cov["runs_missing"].items()) or "none",
            "mem_incomplete": "; ".join(f"{_setting(K, M)}: {', '.join(v)} ({n} of {of} seeds)"
                                        for (K, M, n, of), v in short.items()) or "none",
            "mem_commands": Markdown(block)}


def gaps_glue(gaps: dict) -> dict:
    """Where a memory file's single-task references differ from the paper's file's within `findings.memory.KERNEL_GAP`
    (`MemoryEvidence.gaps`): "K = 50, M = 1: seed 4, 3/20 tasks, ≤ 0.01"; "none"."""
    said = [f"{_setting(K, M)}: seed {g['seed']}, {g['tasks']}/{g['of']} tasks, ≤ {g['max']:.2f}"
            for (K, M), gs in sorted(gaps.items()) for g in gs]
    return {"mem_ref_gaps": "; ".join(said) or "none"}


def state_record(costs: list[dict]) -> dict:
    """What the runs keep at the end of the stream per (K, M) (`findings.memory.state_costs`), in bytes: "memory",
    the largest any method of the file keeps (every method with a memory keeps the same), and "regulariser", a
    regulariser's Ω and anchor at that K, from whichever file of K has a regularised method (0 where none has)."""
    reg: dict = {}
    for c in costs:
        reg[c["K"]] = max(reg.get(c["K"], 0), c["regulariser"])
    out: dict = {}
    for c in costs:
        e = out.setdefault((c["K"], c["M"]), {"memory": 0, "regulariser": reg[c["K"]]})
        e["memory"] = max(e["memory"], c["memory"])
    return out


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def state_table(state: dict):
    """`state_record` as a table, in MB (10^6 bytes): the memory's examples, the regulariser's Ω and anchor ("–"
    where no file of K has a regulariser), and their ratio."""
    import pandas as pd

    rows = [{"K": K, "M": M, "memory (MB)": _mb(e["memory"]),
             "Ω and anchor (MB)": _mb(e["regulariser"]) if e["regulariser"] else "–",
             "memory / (Ω and anchor)": f"{e['memory'] / e['regulariser']:.2f}" if e["regulariser"] else "–"}
            for (K, M), e in sorted(state.items())]
    return pd.DataFrame(rows, columns=["K", "M", "memory (MB)", "Ω and anchor (MB)", "memory / (Ω and anchor)"])


def state_glue(state: dict, K: int) -> dict:
    """The sizes the chapter's sentence names at K (`state_record`): the regulariser's, and the memory's with M = 1
    and M = 5, each with its ratio to the regulariser's."""
    m1, m5 = state[(K, 1)], state[(K, 5)]
    return {"state_reg_mb": _mb(m1["regulariser"]), "state_m1_mb": _mb(m1["memory"]),
            "state_m5_mb": _mb(m5["memory"]), "state_m1_ratio": f"{m1['memory'] / m1['regulariser']:.2f}",
            "state_m5_ratio": f"{m5['memory'] / m5['regulariser']:.2f}"}


def plan_record() -> dict:
    """The memory grid (`lab.memory_plan`): "seeds" {K: seeds}, "fewer" (the fewest, K = 500's), "around" {K: K'}
    (the K whose values centre the tuning's window at K), "compile" {K: the runs' --compile} and "tuning_compile"
    {K: the --compile its tuning file records, where it exists}."""
    from ..lab import memory_plan as MP

    seeds = MP.decided_seeds()
    steps = MP.plan(seeds)
    return {"seeds": seeds, "fewer": min(seeds.values()),
            "around": {s.K: s.around for s in steps if s.around}, "compile": {s.K: s.compile for s in steps},
            "tuning_compile": {s.K: c for s in steps if s.tune and (c := MP.tuning_compile(s.K, s.M)) is not None}}


def plan_glue(plan: dict) -> dict:
    """The glued values of `plan_record`."""
    return {"plan_fewer": str(plan["fewer"])}


def _cell(entry: dict, metric: str) -> str:
    v = entry.get(metric)
    if v is None:
        return "–"
    return f"{v['mean']:.1f}" + ("" if v["ci95"] != v["ci95"] else f"\u00a0±\u00a0{v['ci95']:.1f}")


def results_table(ev: _Q.MemoryEvidence):
    """ACC, BT and FA (mean ± 95% t-interval over seeds) per K with a memory file: the paper's methods the questions
    compare with (fine-tune, MetaCL w/o reg, each regulariser's MetaCL-λ, and the best of the paper's methods at K
    where it is another), then every memory method at each M; "seeds": n, or "n of N" for a run not yet at every
    seed of its file."""
    import pandas as pd

    rows = []
    for K in sorted({K for K, _ in ev.memory}):
        main = ev.results.get(K)
        mine = ["finetune", "metacl", *(method_name(r, "lambda") for r in PAPER_REGULARISERS)]
        if main is not None and _Q.best_paper_method(main) not in mine:
            mine.append(_Q.best_paper_method(main))
        sources = [(None, main, mine)] + [(M, ev.memory[(K, M)], list(MEMORY_METHODS)) for k, M in ev.memory if k == K]
        for M, res, methods in sources:
            for m in methods:
                entry = (res or {}).get("summary", {}).get(m)
                if entry is None:
                    continue
                n, of = len(entry["seeds"]), len(res["config"]["seeds"])
                rows.append({"K": K, "method": method_label(m), "M": "–" if M is None else M,
                             "seeds": str(n) if n == of else f"{n} of {of}",
                             **{k: _cell(entry, k) for k in ("ACC", "BT", "FA")}})
    return pd.DataFrame(rows, columns=["K", "method", "M", "seeds", "ACC", "BT", "FA"])


def gamma_table(gammas: list[dict]):
    """The γ of each MetaCL-λ with both references per file (`findings.memory.gammas`) and where it comes from."""
    import pandas as pd

    return pd.DataFrame([{"K": g["K"], "M": g["M"], "method": method_label(g["method"]), "γ": f"{g['gamma']:g}",
                          "from (the file's hparams_source)": g["source"]} for g in gammas],
                        columns=["K", "M", "method", "γ", "from (the file's hparams_source)"])


def gamma_glue(gammas: list[dict]) -> dict:
    """Which two-reference methods' tuned γ equals their MetaCL-λ's at the same K ("gamma_same") and which differs
    ("gamma_other", each with both values), over the files of `findings.memory.gammas`."""
    same = [g for g in gammas if g["gamma"] == g["base_gamma"]]
    other = [g for g in gammas if g["gamma"] != g["base_gamma"]]
    return {"gamma_same": ", ".join(f"{method_label(g['method'])} (K = {g['K']})" for g in same) or "none",
            "gamma_other": ", ".join(f"{method_label(g['method'])} (K = {g['K']}: {g['gamma']:g}, against "
                                     f"{g['base_gamma']:g})" for g in other) or "none"}


def tests_table(rows: list[dict]):
    """A question's tests that ran, one row per test, K and M: the pair a − b and metric, K, M, the mean paired
    difference with its 95% interval, the seeds for (difference above 0, of n), p (Holm) and the verdicts."""
    import pandas as pd

    out = []
    for r in rows:
        if r["verdict"] == NOT_RUN:
            continue
        lo, hi = r["ci95"]
        ci = "" if lo != lo else f" ({pts(lo)} to {pts(hi)})".replace(" pts", "")
        holm = "not counted" if not r["counted"] else r["holm"]
        out.append({"a − b, metric": r["test"], "K": r["K"], "M": r["M"], "mean (95% interval)": pts(r["mean"]) + ci,
                    "seeds for": f"{r['n_agree']} of {r['n']}",
                    "p (Holm)": f"{format_p(r['p'])} ({format_p(r['p_holm'])})",
                    "verdict: Holm / raw": f"{holm} / {r['verdict']}"})
    return pd.DataFrame(out, columns=["a − b, metric", "K", "M", "mean (95% interval)", "seeds for", "p (Holm)",
                                      "verdict: Holm / raw"])


def deciding_record(ans: dict) -> dict:
    """A question's deciding test (`claims.deciding_test`) as the page names it: pair and metric, K, M, mean, p (Holm);
    "–" everywhere where none ran."""
    d = ans["deciding"]
    if d is None:
        return {"test": "–", "K": "–", "M": "–", "mean": "–", "p": "–"}
    return {"test": d["test"], "K": d["K"], "M": d["M"], "mean": pts(d["mean"]), "p": format_p(d["p_holm"])}


def parts_text(ans: dict) -> str:
    """A question's verdict per part (`claims.claim_parts`): "ACC: confirmed (3 confirmed of 3); ..."."""
    return "; ".join(f"{p['part']}: {p['verdict']} ({p['confirmed']} confirmed, {p['refuted']} refuted, "
                     f"{p['inconclusive']} inconclusive)" for p in ans["parts"]) or "–"


def questions_glue(rows: list[dict], ans: dict) -> dict:
    """Per question (a-d): its verdict, its verdict per part, its deciding test, how many of its tests ran and
    which did not yet, and its table of tests (`tests_table`)."""
    mine = {q: [r for r in rows if r["question"] == q] for q in ans}
    d = {q: deciding_record(a) for q, a in ans.items()}

    def md(q):
        return markdown(tests_table(mine[q]), ("left", "right", "right", "right", "right", "right", "left"))

    from IPython.display import Markdown

    return {"qa_verdict": ans["a"]["verdict"], "qa_parts": parts_text(ans["a"]), "qa_ran": ans["a"]["ran"],
            "qa_not_run": ans["a"]["not_run"], "qa_table": Markdown(md("a")),
            "qa_deciding": f"{d['a']['test']} at {_setting(d['a']['K'], d['a']['M'])}: {d['a']['mean']}, "
                           f"p (Holm) {d['a']['p']}",
            "qb_verdict": ans["b"]["verdict"], "qb_parts": parts_text(ans["b"]), "qb_ran": ans["b"]["ran"],
            "qb_not_run": ans["b"]["not_run"], "qb_table": Markdown(md("b")),
            "qb_deciding": f"{d['b']['test']} at {_setting(d['b']['K'], d['b']['M'])}: {d['b']['mean']}, "
                           f"p (Holm) {d['b']['p']}",
            "qc_verdict": ans["c"]["verdict"], "qc_parts": parts_text(ans["c"]), "qc_ran": ans["c"]["ran"],
            "qc_not_run": ans["c"]["not_run"], "qc_table": Markdown(md("c")),
            "qc_deciding": f"{d['c']['test']} at {_setting(d['c']['K'], d['c']['M'])}: {d['c']['mean']}, "
                           f"p (Holm) {d['c']['p']}",
            "qd_verdict": ans["d"]["verdict"], "qd_parts": parts_text(ans["d"]), "qd_ran": ans["d"]["ran"],
            "qd_not_run": ans["d"]["not_run"], "qd_table": Markdown(md("d")),
            "qd_deciding": f"{d['d']['test']} at {_setting(d['d']['K'], d['d']['M'])}: {d['d']['mean']}, "
                           f"p (Holm) {d['d']['p']}"}


def tests_at(rows: list[dict], question: str, metric: str, K: int, M: int, b=None) -> list[dict]:
    """A question's tests that ran in `metric` at (K, M) (against `b` only, where given)."""
    return [r for r in rows if r["question"] == question and r["metric"] == metric and r["K"] == K and r["M"] == M
            and r["verdict"] != NOT_RUN and (b is None or r["b"] == b)]


def span(rows: list[dict], question: str, metric: str, K: int, M: int, b=None) -> str:
    """The range of the mean differences of a question's tests in `metric` at (K, M) (against `b` only, where
    given): "+4.6 to +5.1 pts", one value for one test, "–" for none."""
    means = sorted(r["mean"] for r in tests_at(rows, question, metric, K, M, b))
    if not means:
        return "–"
    return pts(means[0]) if len(means) == 1 else f"{pts(means[0])[:-4]} to {pts(means[-1])}"


def whose(rows: list[dict], question: str, metric: str, K: int, M: int, verdict: str, b=None) -> list[str]:
    """The labels of method a in a question's tests in `metric` at (K, M) with that Holm verdict."""
    return [method_label(r["a"]) for r in tests_at(rows, question, metric, K, M, b) if r["holm"] == verdict]


def spans_at(rows: list[dict], ev: _Q.MemoryEvidence, K: int) -> dict:
    """What the chapter's sentences on questions (a)-(d) name at K, M = 1: the spans of the mean differences
    (`span`), the methods with a Holm verdict (`whose`; "" for none), and the best of the paper's methods at K."""
    lam = {r: method_name(r, "lambda") for r in PAPER_REGULARISERS}

    def against_reg(metric, verdict):  # the two-reference methods with that verdict against their regulariser alone
        return listing([a for x in lam.values() for a in whose(rows, "b", metric, K, 1, verdict, b=x)])

    return {"a_acc": span(rows, "a", "ACC", K, 1), "a_fa": span(rows, "a", "FA", K, 1),
            "a_bt_confirmed": listing(whose(rows, "a", "BT", K, 1, CONFIRMED)),
            **{f"a_{m.lower()}_{v}": listing(whose(rows, "a", m, K, 1, v)) for m in ("FA", "ACC")
               for v in (CONFIRMED, REFUTED, INCONCLUSIVE)},
            "b_reg_acc": ", ".join(span(rows, "b", "ACC", K, 1, b=x) for x in lam.values()),
            "b_reg_acc_inconclusive": against_reg("ACC", INCONCLUSIVE),
            "b_reg_bt_confirmed": against_reg("BT", CONFIRMED),
            "b_reg_bt_inconclusive": against_reg("BT", INCONCLUSIVE),
            "b_mem_acc": span(rows, "b", "ACC", K, 1, b="metacl-agem"),
            "b_mem_fa_lower": listing(whose(rows, "b", "FA", K, 1, REFUTED, b="metacl-agem")),
            "b_mem_fa_higher": listing(whose(rows, "b", "FA", K, 1, CONFIRMED, b="metacl-agem")),
            "c_bt": span(rows, "c", "BT", K, 1), "c_fa": span(rows, "c", "FA", K, 1),
            "d_best": method_label(_Q.best_paper_method(ev.results[K])), "d_acc": span(rows, "d", "ACC", K, 1)}


def each_K(values: dict) -> str:
    """{K: text} as the chapter lists a value at every K: "+4.6 to +5.1 pts at K = 20; +2.8 to +5.5 pts at K = 50"."""
    return "; ".join(f"{v} at K = {K}" for K, v in sorted(values.items())) or "–"


def where(values: dict) -> str:
    """{K: text} listed as `each_K` lists it, the K with an empty text left out: "EWC-MetaCL-λ at K = 200"; "none"
    where every text is empty."""
    return each_K({K: v for K, v in values.items() if v}) if any(values.values()) else "none"


def ks_where(rows: list[dict], question: str, metric: str, M: int, verdict: str) -> str:
    """The K at which a question's tests in `metric` at budget M have that Holm verdict: "K = 20, 50 and 200";
    "none"."""
    ks = sorted(K for K in {r["K"] for r in rows}
                if any(r["holm"] == verdict for r in tests_at(rows, question, metric, K, M)))
    return f"K = {listing(map(str, ks))}" if ks else "none"


def spans_glue(rows: list[dict], ev: _Q.MemoryEvidence) -> dict:
    """`spans_at` at every K with a memory file at M = 1, under the glue names the chapter reads: a span or a value
    at every K (`each_K`); the methods with a verdict at the K where there are some (`where`)."""
    at = {K: spans_at(rows, ev, K) for K, M in ev.memory if M == 1}

    def each(key):
        return each_K({K: a[key] for K, a in at.items()})

    def some(key):
        return where({K: a[key] for K, a in at.items()})

    return {"qa_acc_span": each("a_acc"), "qa_fa_span": each("a_fa"), "qa_bt_confirmed": some("a_bt_confirmed"),
            "qa_fa_confirmed": some("a_fa_confirmed"), "qa_fa_refuted": some("a_fa_refuted"),
            "qa_fa_inconclusive": some("a_fa_inconclusive"), "qa_acc_inconclusive": some("a_acc_inconclusive"),
            "qb_reg_acc_span": each("b_reg_acc"), "qb_reg_acc_inconclusive": some("b_reg_acc_inconclusive"),
            "qb_reg_bt_confirmed": some("b_reg_bt_confirmed"), "qb_reg_bt_inconclusive": some("b_reg_bt_inconclusive"),
            "qb_mem_acc_span": each("b_mem_acc"), "qb_mem_fa_lower": some("b_mem_fa_lower"),
            "qb_mem_fa_higher": some("b_mem_fa_higher"), "qc_bt_span": each("c_bt"), "qc_fa_span": each("c_fa"),
            "qc_bt_refuted": ks_where(rows, "c", "BT", 1, REFUTED),
            "qc_bt_inconclusive": ks_where(rows, "c", "BT", 1, INCONCLUSIVE),
            "qc_acc_refuted": ks_where(rows, "c", "ACC", 1, REFUTED),
            "qc5_fa_confirmed": ks_where(rows, "c", "FA", 5, CONFIRMED),
            "qc5_bt_refuted": ks_where(rows, "c", "BT", 5, REFUTED),
            "qc5_bt_inconclusive": ks_where(rows, "c", "BT", 5, INCONCLUSIVE),
            "qc5_acc_refuted": ks_where(rows, "c", "ACC", 5, REFUTED),
            "qc5_acc_inconclusive": ks_where(rows, "c", "ACC", 5, INCONCLUSIVE),
            "qd_best": each("d_best"), "qd_acc_span": each("d_acc")}


#: How the γ of a MetaCL-λ with both references stands to its MetaCL-λ's at the same K (`gamma_fa`).
GAMMA_ORDERS = ("larger", "same", "smaller")


def gamma_fa(gammas: list[dict], rows: list[dict]) -> list[dict]:
    """Question (b)'s FA test of each MetaCL-λ with both references against its regulariser alone at (K, M), beside
    the γ each used (`findings.memory.gammas`): "K", "M", "method", "regulariser" (its MetaCL-λ), "gamma" and
    "base_gamma", "order" (one of GAMMA_ORDERS: the two-reference γ against the MetaCL-λ's), "mean" (the FA
    difference, points) and "holm" (the test's Holm verdict); a pair whose test has not run is left out."""
    out = []
    for g in gammas:
        base = MEMORY_METHODS[g["method"]].base
        test = [r for r in tests_at(rows, "b", "FA", g["K"], g["M"], b=base) if r["a"] == g["method"]]
        if not test or g["base_gamma"] is None:
            continue
        order = "larger" if g["gamma"] > g["base_gamma"] else "smaller" if g["gamma"] < g["base_gamma"] else "same"
        out.append({"K": g["K"], "M": g["M"], "method": g["method"], "regulariser": base, "gamma": g["gamma"],
                    "base_gamma": g["base_gamma"], "order": order, "mean": test[0]["mean"], "holm": test[0]["holm"]})
    return out


def gamma_fa_glue(pairs: list[dict]) -> dict:
    """`gamma_fa` as the chapter's sentence on FA and γ reads it, one glue name per order ("qb_fa_larger",
    "qb_fa_same", "qb_fa_smaller"), each listing "PI-MetaCL-λ-mem at K = 20 (γ 300 against 100: FA −3.20 pts)"
    (two decimals: with the same γ the differences are hundredths); "none"."""
    def entry(p):
        gam = f"γ {p['gamma']:g}" + ("" if p["order"] == "same" else f" against {p['base_gamma']:g}")
        fa = p["mean"] if round(p["mean"], 2) else 0.0  # "+0.00", not "−0.00"
        return f"{method_label(p['method'])} at K = {p['K']} ({gam}: FA {pts(fa, fmt='+.2f')})"

    ordered = sorted(pairs, key=lambda p: (p["K"], list(MEMORY_METHODS).index(p["method"])))
    return {f"qb_fa_{o}": "; ".join(entry(p) for p in ordered if p["order"] == o) or "none" for o in GAMMA_ORDERS}


def er5_glue(ev: _Q.MemoryEvidence, top: dict) -> dict:
    """Where ER with M = 5 has the highest mean ACC of the chapter's table, from `top` ({K: `findings.memory.
    highest_mean` at K}, the K with an M = 5 file, as the chapter's asserts read it): "er5_leads", those K ("K = 20
    and K = 50"), and "er5_behind", each other K with ER's mean beside the best of the paper's methods and the
    highest ("73.9% at K = 200, against MAS-MetaCL-λ's 74.1% and PI-MetaCL-λ-mem's 77.3% at M = 1"); "none"."""
    leads, behind = [], []
    for K, (top, M, top_mean) in sorted(top.items()):
        if (top, M) == ("er", 5):
            leads.append(f"K = {K}")
            continue
        best = _Q.best_paper_method(ev.results[K])
        er, paper = (ev.memory[(K, 5)]["summary"]["er"], ev.results[K]["summary"][best])
        ahead = f"{method_label(best)}'s {paper['ACC']['mean']:.1f}%"
        if top != best:
            ahead += f" and {method_label(top)}'s {top_mean:.1f}% at M = {M}"
        behind.append(f"{er['ACC']['mean']:.1f}% at K = {K}, against {ahead}")
    return {"er5_leads": listing(leads) or "none", "er5_behind": "; ".join(behind) or "none"}


def policy_table(ev: _Q.MemoryEvidence, before: _Q.MemoryEvidence, stream: dict):
    """ACC (mean ± 95% t-interval) of each memory method at each (K, M) with a file of both memories: the end-of-task
    memory's (`before`), today's, and today's with Adam's state kept over the stream where run (`stream`: {(K, M):
    results})."""
    import pandas as pd

    rows = []
    for (K, M), res in sorted(ev.memory.items()):
        old, kept = (before.memory.get((K, M)) or {}).get("summary", {}), (stream.get((K, M)) or {}).get("summary", {})
        rows += [{"K": K, "M": M, "method": method_label(m), "end-of-task memory": _cell(old[m], "ACC"),
                  "balanced memory": _cell(s, "ACC"), "balanced, Adam's state kept": _cell(kept.get(m, {}), "ACC")}
                 for m, s in res["summary"].items() if m in MEMORY_METHODS and m in old]
    return pd.DataFrame(rows, columns=["K", "M", "method", "end-of-task memory", "balanced memory",
                                       "balanced, Adam's state kept"])


def changes_table(changes: list[dict]):
    """The tests whose Holm verdict changed with the memory (`findings.memory.verdict_changes`), a row each."""
    import pandas as pd

    return pd.DataFrame([{"question": f"({c['question']})", "a − b, metric": f"{method_label(c['a'])} − "
                          f"{method_label(c['b'])}, {c['metric']}", "K": c["K"], "M": c["M"],
                          **{f"{w}: mean, Holm": f"{pts(c['mean_' + w])}, {c[w]}" for w in ("before", "now")}}
                         for c in changes])


def compute_table(rows: dict):
    """`findings.memory.compute_rows` per budget ({M: rows}) as the page shows it: images per outer step (mean over
    the stream, most) and the measured step time with its ratio to fine-tune's."""
    import pandas as pd

    return pd.DataFrame([{"M": M, "method": method_label(r["method"]),
                          "images a step (mean)": f"{r['images_mean']:.0f}", "images a step (most)": r["images_max"],
                          "step (ms)": "–" if r["step_ms"] is None else f"{r['step_ms']:.1f}",
                          "× fine-tune's": "–" if r["vs_finetune"] is None else f"{r['vs_finetune']:.2f}"}
                         for M, rs in rows.items() for r in rs])
