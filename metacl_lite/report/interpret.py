"""What a results file says beside the paper, in words: pure functions of a results document (`store.load_results`)
that return the numbers (a dict, for glue and tests) and Markdown prose made from them. Nothing here is typed by hand:
every number comes from the results file, from `paper.py` or from scipy.

- `gaps`: where we agree (the paper's mean inside our 95% interval) and where we do not; the mean |ours − paper| per
  metric (ACC, BT, FA) and the largest gaps, named.
- `rank_agreement`: Spearman's ρ between our ACC and the paper's over the methods both tables have.
- `family_orderings`: for each regulariser (MAS, PI, EWC), does plain < MetaCL-β < MetaCL-λ hold in ACC, in ours and in
  the paper's table.
- `hparams_used`: the β/γ that produced the table, where they came from, and the open choices about Ω.
- `interval`: what the ± of our table is (a t-interval over seeds) and how wide it is beside the paper's.
- `relative_command`: a recorded command with machine paths (``--out /work/main/results/...``) made relative to the
  repository, as a reader types it.

`interpretation(res)` gathers all of them; `interpretation_markdown(res)` is the prose under each reproduction table;
`readme_summary(res)` the README's shorter form; `overview_rows()` the table of every setting of the paper.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Optional

from ..datafiles import REPO_ROOT
from .paper import PAPER_SOURCES, paper_table
from ..specs import SPECS

METRICS = ("ACC", "BT", "FA")
REGULARISERS = ("mas", "pi", "ewc")
#: The paper's claim per family: plain < MetaCL-β < MetaCL-λ in ACC.
FAMILY = ("", "-metacl-beta", "-metacl-lambda")
OPTIONS = ("omega_accumulate", "omega_normalise", "pi_xi")
#: What files made before the open-choice options existed were trained with (the only behaviour the code had then;
#: `grid.run_experiment` reads such files with these defaults too).
OPTION_DEFAULTS = {"omega_accumulate": "sum", "omega_normalise": "none", "pi_xi": 0.1}


def _labels() -> dict[str, str]:
    from ..training import METHODS

    return {**{m: METHODS[m].label for m in METHODS}, "joint": "Joint training (oracle)"}


def _method_order() -> list[str]:
    from ..training import METHODS

    return list(METHODS)


# ---------------------------------------------------------------------------------------------------------------------
# Commands


_ABS_PATH = re.compile(r"(?P<pre>^|[\s=\"'])(?P<path>/[^\s\"']*)")


def relative_command(command: Optional[str], root: Optional[Path | str] = None) -> Optional[str]:
    """`command` with every absolute path inside the repository `root` written relative to it, as a reader types it
    from the repository root: ``--out /work/main/results/x.json`` -> ``--out results/x.json`` (also ``--out=...``
    and quoted paths; the root itself becomes ``.``). Paths outside the repository are left as they are. None stays
    None."""
    if command is None:
        return None
    root = str(Path(REPO_ROOT if root is None else root)).rstrip("/") or "/"

    def repl(mo: re.Match) -> str:
        path = mo.group("path")
        if path == root or path == root + "/":
            rel = "."
        elif path.startswith(root + "/"):
            rel = path[len(root) + 1:]
        else:
            return mo.group(0)
        return mo.group("pre") + rel

    return _ABS_PATH.sub(repl, command)


def provenance_commands(res: dict, root: Optional[Path | str] = None) -> dict[str, Any]:
    """The commands a results file records, relative to the repository: the one that regenerates the file
    (`command`) and, for each contributing invocation that recorded its own (`command` or `argv`), that one
    (`invocations`, in order; None where an invocation recorded none)."""
    prov = res.get("provenance") or {}
    invs = []
    for inv in prov.get("invocations") or []:
        cmd = inv.get("command")
        if cmd is None and isinstance(inv.get("argv"), list):
            cmd = " ".join(map(str, inv["argv"]))
        invs.append(relative_command(cmd, root))
    return {"command": relative_command(prov.get("command"), root), "invocations": invs}


# ---------------------------------------------------------------------------------------------------------------------
# Numbers


def _rows(res: dict) -> list[dict]:
    from .tables import comparison_rows

    return comparison_rows(res)


def _summary(res: dict) -> dict:
    if "summary" in res:
        return res["summary"]
    from ..lab.summary import summarize

    return summarize(res)


def gaps(res: dict) -> dict[str, Any]:
    """Per metric: the mean |ours − paper| over the rows that have both (`mean_abs`, over `n` rows), every row's
    signed gap ours − paper (`by_method`), the rows ordered by |gap| (`largest`: [(method, gap), ...], largest
    first), and which rows agree (`within`: the paper's mean lies inside our 95% interval) and which do not
    (`outside`). A metric no row has both numbers for has mean_abs None."""
    summ = _summary(res)
    paper = paper_table(res["config"]["benchmark"], res["config"]["K"]) or {}
    out: dict[str, Any] = {}
    for k in METRICS:
        by = {}
        within, outside = [], []
        for m in _method_order() + ["joint"]:
            o, p = (summ.get(m) or {}).get(k), (paper.get(m) or {}).get(k)
            if not o or not p:
                continue
            d = o["mean"] - p[0]
            by[m] = d
            ci = o.get("ci95")
            if ci is not None and not (isinstance(ci, float) and math.isnan(ci)) and abs(d) <= ci:
                within.append(m)
            else:
                outside.append(m)
        largest = sorted(by.items(), key=lambda kv: -abs(kv[1]))
        out[k] = {"mean_abs": (sum(abs(d) for d in by.values()) / len(by)) if by else None, "n": len(by),
                  "by_method": by, "largest": largest, "within": within, "outside": outside}
    return out


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's ρ (average ranks for ties), as scipy.stats.spearmanr."""
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def rank_agreement(res: dict) -> dict[str, Any]:
    """Spearman's ρ between our mean ACC and the paper's over the methods (the oracle excluded) in both tables; None
    with fewer than three such methods."""
    summ = _summary(res)
    paper = paper_table(res["config"]["benchmark"], res["config"]["K"]) or {}
    common = [m for m in _method_order() if "ACC" in (summ.get(m) or {}) and (paper.get(m) or {}).get("ACC")]
    if len(common) < 3:
        return {"rho": None, "n": len(common), "methods": common}
    ours = [summ[m]["ACC"]["mean"] for m in common]
    theirs = [paper[m]["ACC"][0] for m in common]
    return {"rho": spearman(ours, theirs), "n": len(common), "methods": common,
            "best_ours": common[max(range(len(common)), key=lambda i: ours[i])],
            "best_paper": common[max(range(len(common)), key=lambda i: theirs[i])]}


def family_orderings(res: dict) -> dict[str, dict[str, Any]]:
    """For each regulariser with all three variants in our file or in the paper's table: the ACC of plain,
    MetaCL-β and MetaCL-λ (`ours`, `paper`; None where a table lacks one of them) and whether plain < MetaCL-β <
    MetaCL-λ holds strictly (`holds_ours`, `holds_paper`; None where there are no numbers)."""
    summ = _summary(res)
    paper = paper_table(res["config"]["benchmark"], res["config"]["K"]) or {}
    out = {}
    for imp in REGULARISERS:
        trio = [imp + suffix for suffix in FAMILY]
        ours = [summ[m]["ACC"]["mean"] for m in trio] if all("ACC" in (summ.get(m) or {}) for m in trio) else None
        theirs = [paper[m]["ACC"][0] for m in trio] if all((paper.get(m) or {}).get("ACC") for m in trio) else None
        if ours is None and theirs is None:
            continue
        holds = lambda a: None if a is None else bool(a[0] < a[1] < a[2])  # noqa: E731
        out[imp] = {"ours": ours, "paper": theirs, "holds_ours": holds(ours), "holds_paper": holds(theirs)}
    return out


def hparams_used(res: dict) -> dict[str, Any]:
    """The β/γ of each regularised method (`values`: method -> {"beta": ...} or {"gamma": ...}), where each came from
    (`sources`: method -> the file's `config.hparams_source` entry, None when the file does not record it), the open
    choices about Ω (`options`: the file-wide ones of `config.train`; `method_options`: per regularised method, from
    `config.method_options` where the file has it (choices decided per regulariser), else the file-wide ones;
    `options_where`: "method_options", "train", or None when the file predates the options and they are the
    defaults the code then had), the γ control, if the file is one (`gamma_control`), and whether the task gradients
    were compiled (`compile`: "off" in files that predate the option)."""
    cfg = res["config"]
    mh = cfg.get("method_hparams") or {}
    values = {m: dict(mh[m]) for m in _method_order() if mh.get(m)}
    src = cfg.get("hparams_source") or {}
    train = cfg.get("train") or {}
    options = {k: train.get(k, OPTION_DEFAULTS[k]) for k in OPTIONS}
    per = cfg.get("method_options")
    if isinstance(per, dict) and per:
        where = "method_options"
        method_options = {m: {k: per[m].get(k, options[k]) for k in OPTIONS} for m in _method_order() if m in per}
    else:
        where = "train" if all(k in train for k in OPTIONS) else None
        method_options = {m: dict(options) for m in _method_order()
                          if m in cfg.get("methods", []) and any(m.startswith(r) for r in REGULARISERS)}
    return {"values": values, "sources": {m: src.get(m) for m in values}, "options": options,
            "method_options": method_options, "options_where": where, "options_recorded": where is not None,
            "gamma_control": cfg.get("gamma_control"), "compile": train.get("compile", "off")}


def interval(res: dict) -> dict[str, Any]:
    """What our ± is: the 95% t-interval over the file's seeds, t_{0.975, n−1}·s/√n (`t`, `factor` = t/√n, so the
    half-width is `factor` sample standard deviations); whether a seed also draws the task permutations
    (`permuted`); the mean of our ACC half-widths and of the paper's ± over the rows that have both."""
    from scipy.stats import t as student_t

    cfg = res["config"]
    n = len(cfg["seeds"])
    summ = _summary(res)
    paper = paper_table(cfg["benchmark"], cfg["K"]) or {}
    ours, theirs = [], []
    for m, e in summ.items():
        ci = (e.get("ACC") or {}).get("ci95")
        p = (paper.get(m) or {}).get("ACC")
        if ci is not None and not (isinstance(ci, float) and math.isnan(ci)) and p:
            ours.append(ci)
            theirs.append(p[1])
    tval = float(student_t.ppf(0.975, n - 1)) if n > 1 else None
    spec = SPECS.get(cfg["benchmark"])
    return {"n_seeds": n, "seeds": list(cfg["seeds"]), "t": tval, "factor": (tval / math.sqrt(n)) if tval else None,
            "permuted": bool(spec.permuted) if spec else None,
            "mean_ci_ours": (sum(ours) / len(ours)) if ours else None,
            "mean_pm_paper": (sum(theirs) / len(theirs)) if theirs else None, "n_rows": len(ours)}


def interpretation(res: dict) -> dict[str, Any]:
    """Every number the prose uses, in one dict (for glue and tests)."""
    from .tables import incomplete_note

    cfg = res["config"]
    return {"benchmark": cfg["benchmark"], "K": cfg["K"], "paper_source": PAPER_SOURCES.get((cfg["benchmark"], cfg["K"])),
            "gaps": gaps(res), "rank": rank_agreement(res), "families": family_orderings(res),
            "hparams": hparams_used(res), "interval": interval(res), "incomplete": incomplete_note(res),
            "commands": provenance_commands(res)}


def glue_values(info: dict[str, Any]) -> dict[str, Any]:
    """A flat dict of the headline numbers (rounded as shown), for myst_nb's glue: gap_ACC, gap_BT, gap_FA, rho,
    n_seeds, and order_<reg>_ours / order_<reg>_paper ("holds" / "does not hold" / "–")."""
    out: dict[str, Any] = {f"gap_{k}": (round(v["mean_abs"], 1) if v["mean_abs"] is not None else "–")
                           for k, v in info["gaps"].items()}
    out["rho"] = round(info["rank"]["rho"], 2) if info["rank"]["rho"] is not None else "–"
    out["n_seeds"] = info["interval"]["n_seeds"]
    for imp, f in info["families"].items():
        for who in ("ours", "paper"):
            h = f[f"holds_{who}"]
            out[f"order_{imp}_{who}"] = "–" if h is None else ("holds" if h else "does not hold")
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Prose


def _num(x: float, nd: int = 1) -> str:
    return f"{x:.{nd}f}"


def _signed(x: float) -> str:
    return f"{x:+.1f}"


SYMBOLS = {"beta": "β", "gamma": "γ"}


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _chain(a: list[float]) -> str:
    """a0 → a1 → a2 with one decimal, or two where one decimal would show two neighbours equal."""
    nd = 2 if any(f"{a[i]:.1f}" == f"{a[i + 1]:.1f}" for i in range(len(a) - 1)) else 1
    return " → ".join(_num(x, nd) for x in a)


def _names(methods: list[str], labels: dict[str, str]) -> str:
    """Method labels joined by semicolons (a label may hold a comma: "MetaCL, w/o reg")."""
    return "; ".join(labels.get(m, m) for m in methods)


def _top_gaps(largest: list[tuple[str, float]], labels: dict[str, str], n: int = 2) -> str:
    return "; ".join(f"{labels.get(m, m)} ({_signed(d)})" for m, d in largest[:n])


def _family_sentence(imp: str, f: dict, labels: dict[str, str], no_paper: bool = False) -> str:
    name = imp.upper()
    parts = []
    if f["ours"] is not None:
        parts.append(f"ours {_chain(f['ours'])} ({'holds' if f['holds_ours'] else 'does not hold'})")
    else:
        parts.append("not in our file")
    if f["paper"] is not None:
        parts.append(f"the paper's {_chain(f['paper'])} ({'holds' if f['holds_paper'] else 'does not hold'})")
    else:
        parts.append("the paper has no numbers at this K" if no_paper else "not in the paper's table")
    return f"{name}: " + "; ".join(parts)


def _hparams_sentences(h: dict, labels: dict[str, str]) -> list[str]:
    out = []
    if h["gamma_control"] is not None:
        out.append(f"This is a γ control file (`--gamma {h['gamma_control']}`), not the main table.")
    if h["values"]:
        groups = []
        for imp in REGULARISERS:
            ms = [imp + s for s in FAMILY if imp + s in h["values"]]
            if ms:
                groups.append(", ".join(f"{labels[m]} " + ", ".join(f"{SYMBOLS.get(k, k)} = {_value(v)}"
                                                                   for k, v in h["values"][m].items())
                                        for m in ms))
        out.append("β and γ used: " + "; ".join(groups) + ".")
        srcs = h["sources"]
        if all(s is None for s in srcs.values()):
            out.append("The file does not record where they came from (it predates `config.hparams_source`); they "
                       "are the values `hparams.json` held when the file was made.")
        else:
            by_src: dict[Optional[str], list[str]] = {}
            for m, s in srcs.items():
                by_src.setdefault(s, []).append(m)
            if len(by_src) == 1:
                out.append(f"All of them come from `{relative_command(next(iter(by_src)))}` "
                           f"(`config.hparams_source`).")
            else:
                out.append("Where they came from (`config.hparams_source`): " + " ".join(
                    (f"`{relative_command(s)}`" if s is not None else "not recorded") + f" for {_names(ms, labels)}."
                    for s, ms in by_src.items()))
    else:
        out.append("No method of this file has a β or γ.")
    def opts(o: dict, xi: bool = True) -> str:  # PI's ξ only where PI is concerned
        return (f"Ω accumulated across tasks: `{o['omega_accumulate']}`; each task's Ω normalised: "
                f"`{o['omega_normalise']}`" + (f"; PI's ξ = {_value(o['pi_xi'])}" if xi else ""))

    distinct = {tuple(sorted(o.items())) for o in h["method_options"].values()}
    if h["options_where"] == "method_options" and len(distinct) > 1:
        groups = []
        for imp in REGULARISERS:
            ms = [m for m in h["method_options"] if m.startswith(imp)]
            kinds = {tuple(sorted(h["method_options"][m].items())) for m in ms}
            if len(kinds) == 1:
                groups.append(f"{imp.upper()}: {opts(h['method_options'][ms[0]], imp == 'pi')}")
            else:
                groups += [f"{labels[m]}: {opts(h['method_options'][m], imp == 'pi')}" for m in ms]
        out.append("Open choices the paper leaves open, decided per regulariser and recorded in the file "
                   "(`config.method_options`): " + ". ".join(groups) + ".")
    else:
        o = dict(distinct.pop()) if distinct else h["options"]
        if h["options_where"] == "method_options":
            out.append(f"Open choices the paper leaves open, the same for every regulariser, as recorded in the file "
                       f"(`config.method_options`): {opts(o)}.")
        elif h["options_where"] == "train":
            out.append(f"Open choices the paper leaves open, as recorded in the file (`config.train`): {opts(o)}.")
        else:
            out.append(f"Open choices the paper leaves open: the file predates the options, so it was made with the "
                       f"only behaviour the code then had, today's defaults: {opts(o)}.")
    if h.get("compile", "off") != "off":
        out.append(f"Task gradients compiled (`--compile {h['compile']}`, `config.train.compile`): equal to eager "
                   f"ones within float rounding, not bit for bit.")
    return out


def interpretation_markdown(res: dict, info: Optional[dict] = None) -> str:
    """The prose under a reproduction table: agreement, ranks, family orderings, the β/γ used, the interval."""
    info = info or interpretation(res)
    labels = _labels()
    g, r, fam, h, iv = info["gaps"], info["rank"], info["families"], info["hparams"], info["interval"]
    out = []
    if info["incomplete"]:
        out.append(f"**{info['incomplete']}**")
    if g["ACC"]["n"] == 0:
        out.append("**Where we agree and where we do not.** The paper publishes no numbers for this setting, so there "
                   "is nothing to compare with.")
    else:
        agree, off = g["ACC"]["within"], g["ACC"]["outside"]
        lines = [f"**Where we agree and where we do not.** In ACC, the paper's mean lies inside our 95% interval for "
                 f"{len(agree)} of {g['ACC']['n']} rows" + (f"; outside it for {_names(off, labels)}" if off else "")
                 + "."]
        for k in METRICS:
            v = g[k]
            if v["mean_abs"] is None:
                continue
            lines.append(f"- {k}: mean |ours − paper| = {_num(v['mean_abs'])} points over {v['n']} rows, the paper's "
                         f"mean inside our interval for {len(v['within'])}; the largest gaps (ours − paper): "
                         f"{_top_gaps(v['largest'], labels)}.")
        out.append("\n".join(lines))
        if r["rho"] is not None:
            same = r["best_ours"] == r["best_paper"]
            out.append(f"**Ranks.** Spearman's ρ between our ACC and the paper's over the {r['n']} methods is "
                       f"{_num(r['rho'], 2)} (1: the same order, 0: unrelated, −1: reversed). Our best method is "
                       f"{labels[r['best_ours']]}, " + ("as in the paper." if same else
                                                       f"the paper's is {labels[r['best_paper']]}."))
        else:
            out.append(f"**Ranks.** Fewer than three methods are in both tables ({r['n']}); no rank correlation.")
    if fam:
        held_o = [i.upper() for i, f in fam.items() if f["holds_ours"]]
        held_p = [i.upper() for i, f in fam.items() if f["holds_paper"]]
        with_ours = [i for i, f in fam.items() if f["ours"] is not None]
        with_paper = [i for i, f in fam.items() if f["paper"] is not None]
        head = (f"**The paper's ordering plain < MetaCL-β < MetaCL-λ (ACC).** It holds in our table for "
                f"{len(held_o)} of {len(with_ours)} regularisers" + (f" ({', '.join(held_o)})" if held_o else "")
                + ((f" and in the paper's for {len(held_p)} of {len(with_paper)}"
                    + (f" ({', '.join(held_p)})" if held_p else "")) if with_paper else
                   " (the paper publishes no numbers at this K)") + ".")
        out.append("\n".join([head] + [f"- {_family_sentence(i, f, labels, not with_paper)}." for i, f in fam.items()]))
    out.append("**What produced this table.** " + " ".join(_hparams_sentences(h, labels)))
    n = iv["n_seeds"]
    what = ("the task permutations, the initial weights and the batch order" if iv["permuted"]
            else "the initial weights and the batch order (the class split of the tasks is fixed)")
    if n > 1:
        text = (f"**What the ± means.** Ours: the 95% t-interval over {n} seeds, t₀.₉₇₅,{n - 1}·s/√{n} = "
                f"{_num(iv['factor'], 2)} sample standard deviations of the per-seed values. Each seed changes "
                f"{what}, so the interval covers that variation too and is wider than one over initialisations "
                f"alone would be.")
        if iv["mean_ci_ours"] is not None:
            text += (f" Over the {iv['n_rows']} rows with both, our ACC half-widths average "
                     f"{_num(iv['mean_ci_ours'])} points, the paper's ± {_num(iv['mean_pm_paper'])}; the paper does "
                     f"not say how its ± is computed.")
    else:
        text = f"**What the ± means.** This file has one seed, so there is no interval (each seed changes {what})."
    out.append(text)
    return "\n\n".join(out)


def readme_summary(res: dict, info: Optional[dict] = None) -> str:
    """The README's generated comparison beside a table: gaps per metric, ρ, the family orderings, the β/γ and the
    open choices, and the interval, as a Markdown list."""
    info = info or interpretation(res)
    labels = _labels()
    g, r, fam, h, iv = info["gaps"], info["rank"], info["families"], info["hparams"], info["interval"]
    out = []
    if info["incomplete"]:
        out.append(f"- {info['incomplete']}")
    if g["ACC"]["n"] == 0:
        out.append("- No published numbers to compare with.")
    for k in METRICS:
        v = g[k]
        if v["mean_abs"] is None:
            continue
        out.append(f"- {k}: mean |ours − paper| = {_num(v['mean_abs'])} points over {v['n']} rows "
                   f"(paper's mean inside our 95% interval: {len(v['within'])} of {v['n']}); largest gaps: "
                   f"{_top_gaps(v['largest'], labels)}.")
    if r["rho"] is not None:
        out.append(f"- Rank agreement of the methods' ACC with the paper's (Spearman ρ over {r['n']} methods): "
                   f"{_num(r['rho'], 2)}.")
    if fam:
        out.append("- plain < MetaCL-β < MetaCL-λ in ACC:")
        no_paper = all(f["paper"] is None for f in fam.values())
        out += [f"  - {_family_sentence(i, f, labels, no_paper)}." for i, f in fam.items()]
    for s in _hparams_sentences(h, labels):
        out.append(f"- {s}")
    if iv["n_seeds"] > 1:
        out.append(f"- ±: 95% t-interval over {iv['n_seeds']} seeds ({_num(iv['factor'], 2)} sample standard "
                   f"deviations); each seed also changes "
                   + ("the permutations and initial weights." if iv["permuted"] else "the initial weights."))
    return "\n".join(out)


def _needs_download(benchmark: str, K: int) -> bool:
    """Whether the run for (benchmark, K) needs data beyond the package (Permuted MNIST's embedded subset holds the
    training and validation images of every K up to its validation offset)."""
    return benchmark != "pmnist" or K > SPECS[benchmark].max_train_K


def _why_missing(benchmark: str, K: int) -> str:
    if _needs_download(benchmark, K):
        return "the run needs data that was not on the machine that built this page"
    return "it has not been run yet (it needs no download: the embedded MNIST subset has its data)"


def missing_markdown(benchmark: str, K: int) -> str:
    """The sentence a page shows instead of the interpretation when there is no results file for (benchmark, K)."""
    spec = SPECS[benchmark]
    return (f"**No interpretation yet.** There is no committed results file for {spec.title}, K = {K} "
            f"(`results/{benchmark}-K{K}.json`): {_why_missing(benchmark, K)}. Once the file exists, this paragraph "
            f"interprets it" + (" beside the paper's numbers." if paper_table(benchmark, K) else "."))


def missing_commands(benchmark: str, K: int, seeds: int = 5) -> list[str]:
    """The commands that make the results file of (benchmark, K), from the repository's root: the data where the
    package does not hold it, β/γ on the validation split (Permuted MNIST: at this K, as `make reproduce-pmnist`;
    the other benchmarks: once, at their tuning K), the run."""
    spec = SPECS[benchmark]
    out = [FETCH[benchmark]] if _needs_download(benchmark, K) else []
    if benchmark == "cub":
        out.append(CUB_WEIGHTS)
    tune_K = K if benchmark == "pmnist" else spec.tuning_K
    out.append(f"python -m metacl_lite tune --benchmark {benchmark} --K {tune_K}")
    out.append(f"python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds}")
    return out


def missing_results_markdown(benchmark: str, K: int) -> str:
    """What a reproduction page shows in place of the committed table when there is no results file."""
    return (f"**No results yet.** There is no committed results file for {SPECS[benchmark].title}, K = {K}: "
            f"{_why_missing(benchmark, K)}. These commands make the file and its table:\n\n```\n"
            + "\n".join(missing_commands(benchmark, K)) + "\n```")


# ---------------------------------------------------------------------------------------------------------------------
# All settings of the paper


def paper_settings() -> list[tuple[str, int]]:
    """Every (benchmark, K) the paper publishes numbers for, in the paper's order."""
    return [(b, K) for b, spec in SPECS.items() for K in spec.paper_Ks]


def page_stem(benchmark: str, K: int) -> str:
    """The reproduction page of a setting: the template is Permuted MNIST K = 20, the rest are its variants."""
    return "benchmark" if (benchmark, K) == ("pmnist", 20) else f"{benchmark}-K{K}"


def overview_rows(results_dir: Optional[Path] = None) -> list[dict[str, Any]]:
    """One row per setting of the paper: whether the committed results file exists, its seeds (and whether every row
    has them all), the mean |ours − paper| in ACC, ρ, and the page."""
    from ..lab.store import load_results

    results_dir = Path(results_dir) if results_dir else REPO_ROOT / "results"
    rows = []
    for b, K in paper_settings():
        path = results_dir / f"{b}-K{K}.json"
        row: dict[str, Any] = {"benchmark": b, "title": SPECS[b].title, "K": K, "file": f"results/{b}-K{K}.json",
                               "exists": path.exists(), "page": page_stem(b, K), "seeds": None,
                               "complete": None, "gap_ACC": None, "rho": None, "methods": None}
        if path.exists():
            res = load_results(path)
            info = interpretation(res)
            row.update(seeds=len(res["config"]["seeds"]), complete=info["incomplete"] is None,
                       gap_ACC=info["gaps"]["ACC"]["mean_abs"], rho=info["rank"]["rho"],
                       methods=len(res["config"]["methods"]))
        rows.append(row)
    return rows


def overview_markdown(rows: list[dict[str, Any]]) -> str:
    """The overview table (links relative to book/reproduce/)."""
    lines = ["| Setting | Results file | Seeds | Methods | mean \\|ours − paper\\| ACC | Spearman ρ (ACC) | Page |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        link = f"[{r['title']}, K = {r['K']}]({r['page']}.md)"
        if r["exists"]:
            seeds = f"{r['seeds']}" + ("" if r["complete"] else " (incomplete)")
            lines.append(f"| {r['title']}, K = {r['K']} | `{r['file']}` | {seeds} | {r['methods']} | "
                         f"{_num(r['gap_ACC']) if r['gap_ACC'] is not None else '–'} | "
                         f"{_num(r['rho'], 2) if r['rho'] is not None else '–'} | {link} |")
        else:
            lines.append(f"| {r['title']}, K = {r['K']} | not yet (needs the data) | – | – | – | – | {link} |")
    return "\n".join(lines)


#: Issue 10's targets for a reproduced setting of the paper: the mean |ours − paper| ACC at most this many points,
#: and every regularised method's |ours − paper| FA below this (single digits).
TARGET_ACC_GAP = 3.0
TARGET_FA_GAP = 10.0


def tuned_at_its_K(res: dict) -> Optional[bool]:
    """Whether every regularised method of a results file took β/γ tuned at the file's own K (`config.hparams_source`:
    "K=<K>: ..." or, at the benchmark's tuning K, "default: ..."); None when the file has no regularised method."""
    cfg = res["config"]
    K, spec = cfg["K"], SPECS[cfg["benchmark"]]
    src = cfg.get("hparams_source") or {}
    regularised = [m for m in cfg["methods"] if any(m.startswith(r) for r in REGULARISERS)]
    if not regularised:
        return None
    ok = (f"K={K}:",) + (("default:",) if K == spec.tuning_K else ())
    return all(str(src.get(m) or "").startswith(ok) for m in regularised)


def target_rows(benchmark: str = "pmnist", results_dir: Optional[Path] = None) -> list[dict[str, Any]]:
    """One row per K of the benchmark (`specs.BenchmarkSpec.all_Ks`): the results file's seeds, whether its β/γ were
    tuned at that K (`tuned_at_its_K`), the mean |ours − paper| ACC and the largest |ours − paper| FA of the regularised
    methods against `TARGET_ACC_GAP` and `TARGET_FA_GAP` (None where the paper has no table), how many ACC rows have
    the paper's mean outside our 95% interval with ours above it (`acc_above`) or below it (`acc_below`), Spearman's
    ρ, and whether every value chosen in the K's tuning file is interior to its grid (None without a tuning file)."""
    from ..lab.store import load, load_results

    folder = Path(results_dir) if results_dir else REPO_ROOT / "results"
    rows = []
    for K in SPECS[benchmark].all_Ks:
        row: dict[str, Any] = {"K": K, "in_paper": K in SPECS[benchmark].paper_Ks, "exists": False, "seeds": None,
                               "tuned_at_K": None, "acc_gap": None, "fa_max": None, "fa_method": None,
                               "rho": None, "interior": None, "acc_above": None, "acc_below": None}
        tuning = folder / f"tuning-{benchmark}-K{K}.json"
        if tuning.exists():
            row["interior"] = not any(load(tuning, "tuning").get("at_edge", {}).values())
        path = folder / f"{benchmark}-K{K}.json"
        if path.exists():
            res = load_results(path)
            g = gaps(res)
            fa = [(abs(d), m) for m, d in g["FA"]["by_method"].items() if any(m.startswith(r) for r in REGULARISERS)]
            row.update(exists=True, seeds=len(res["config"]["seeds"]), tuned_at_K=tuned_at_its_K(res),
                       acc_gap=g["ACC"]["mean_abs"], rho=rank_agreement(res)["rho"])
            if g["ACC"]["n"]:  # which way the ACC rows miss: the paper's mean outside our interval, above or below
                row["acc_above"] = sum(g["ACC"]["by_method"][m] > 0 for m in g["ACC"]["outside"])
                row["acc_below"] = sum(g["ACC"]["by_method"][m] < 0 for m in g["ACC"]["outside"])
            if fa:
                row["fa_max"], row["fa_method"] = max(fa)
        rows.append(row)
    return rows


def targets_markdown(rows: list[dict[str, Any]]) -> str:
    """The table of `target_rows`, each gap marked ✓ (target met) or ✗."""
    def mark(v, ok):
        return "–" if v is None else f"{_num(v)} {'✓' if ok else '✗'}"

    lines = [f"| K | Seeds | β/γ tuned at this K | mean \\|ours − paper\\| ACC (≤ {TARGET_ACC_GAP:g}) | largest "
             f"\\|ours − paper\\| FA of a regularised method (< {TARGET_FA_GAP:g}) | ACC rows outside our interval: "
             f"ours above / below the paper | Spearman ρ | tuned values interior |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        yes = {True: "yes", False: "no", None: "–"}
        if not r["exists"]:
            lines.append(f"| {r['K']} | no results file yet | – | – | – | – | – | {yes[r['interior']]} |")
            continue
        fa = mark(r["fa_max"], r["fa_max"] is not None and r["fa_max"] < TARGET_FA_GAP)
        fa += f" ({_labels()[r['fa_method']]})" if r["fa_method"] else ""
        acc = mark(r["acc_gap"], r["acc_gap"] is not None and r["acc_gap"] <= TARGET_ACC_GAP)
        if not r["in_paper"]:
            acc = fa = "– (beyond the paper)"
        rho = _num(r["rho"], 2) if r["rho"] is not None else "–"
        way = "–" if r["acc_above"] is None else f"{r['acc_above']} / {r['acc_below']}"
        lines.append(f"| {r['K']} | {r['seeds']} | {yes[r['tuned_at_K']]} | {acc} | {fa} | {way} | {rho} | "
                     f"{yes[r['interior']]} |")
    return "\n".join(lines)


#: How to get each benchmark's data (data_scripts/fetch.py; checksums are verified before anything is replaced).
CUB_WEIGHTS = "# ResNet-18 ImageNet weights: --weights FILE, $METACL_LITE_RESNET18 or the torch hub cache"
FETCH = {"pmnist": "python data_scripts/fetch.py mnist          # raw MNIST (md5-checked), for K beyond the embedded subset",
         "cifar100": "python data_scripts/fetch.py cifar100       # or --from cifar-100-python.tar.gz (md5-checked)",
         "cub": "python data_scripts/fetch.py cub            # or --from CUB_200_2011.tgz (md5-checked)"}


def setting_commands(benchmark: str, seeds: int) -> list[str]:
    """The commands that produce every results file of a benchmark, from the repository's root: fetch the data, choose
    β/γ on its validation split once (at the benchmark's tuning K), run each K the paper reports with `seeds` seeds."""
    spec = SPECS[benchmark]
    out = [FETCH[benchmark]]
    if benchmark == "cub":
        out.append(CUB_WEIGHTS)
    out.append(f"python -m metacl_lite tune --benchmark {benchmark}" + ("" if spec.tuning_K == 20 else
                                                                           f" --K {spec.tuning_K}"))
    out += [f"python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds}" for K in spec.paper_Ks]
    return out


def bench_estimate(bench: dict, seeds: int) -> dict[str, Any]:
    """What a committed speed-benchmark file (python -m metacl_lite bench --suite ...) says a full grid costs: the
    device, whether it is an extrapolation from a reduced run, the methods it timed, the per-run estimate (mean over
    them), and the grid of `seeds` seeds over those methods (the file's own estimate is for 3 seeds)."""
    per = bench["per_method"]
    mean_run = sum(r["full_run_s_estimate"] for r in per) / len(per)
    return {"suite": bench["suite"], "device": bench["device"],
            "device_long": (bench.get("provenance") or {}).get("device", bench["device"]),
            "reduced": bool(bench["reduced"]), "methods": [r["method"] for r in per], "n_methods": len(per),
            "mean_run_s": mean_run, "grid_s": bench["grid_s_estimate"] / 3 * seeds,
            "command": relative_command((bench.get("provenance") or {}).get("command")),
            "K": SPECS[bench["suite"]].tuning_K}


def bench_markdown(est: dict[str, Any], seeds: int) -> str:
    """The estimate in words, saying what kind of estimate it is."""
    from ..training import METHODS

    spec = SPECS[est["suite"]]
    kind = ("a rough linear extrapolation from a reduced run (fewer epochs and tasks) on the "
            f"{'CPU' if est['device'] == 'cpu' else est['device']}" if est["reduced"] else f"measured on {est['device']}")
    text = (f"**Time.** `{est['command']}` ({est['device_long']}; {kind}) puts one full run at about "
            f"{est['mean_run_s'] / 60:.0f} min on average at K = {est['K']}, and the {est['n_methods']} method(s) "
            f"it timed × {seeds} seeds at about {est['grid_s'] / 3600:.0f} h, without the references and the oracle")
    table = [m for m in (paper_table(est["suite"], est["K"]) or {}) if m in METHODS] or list(METHODS)
    if est["n_methods"] < len(table):
        text += (f"; the paper's table has {len(table)} methods, so the whole grid takes about "
                 f"{len(table) / est['n_methods']:.1f} times that")
    text += "."
    if max(spec.paper_Ks) > est["K"]:
        text += (f" Training steps grow in proportion to K (evaluation does not), so a larger K takes up to "
                 f"K/{est['K']} times as long.")
    if est["device"] == "cpu":
        text += (" No GPU figure is committed, so these are CPU numbers; on a GPU, "
                 f"`python -m metacl_lite bench --suite {est['suite']}` measures the real figure.")
    return text


def timings_markdown(doc: dict) -> str:
    """The committed per-page execution times (results/book-timings.json, written by data_scripts/book_timings.py)
    as a Markdown table, with the total of the cached pages and where the figures come from."""
    prov = doc.get("provenance") or {}
    lines = ["| Page | Execution (s) | How known |", "|---|---|---|"]
    for r in doc["pages"]:
        t = f"{r['execution_s']:.0f}" if r.get("execution_s") is not None else "–"
        lines.append(f"| `{r['page']}` | {t} | {r['status']} |")
    timed = [r for r in doc["pages"] if r.get("execution_s") is not None]
    head = (f"Read from a build's execution cache by `{relative_command(prov.get('command'))}` on {prov.get('device', '?')} "
            f"(commit `{(prov.get('git_commit') or '?')[:10]}`, {prov.get('started', '?')}): each figure is the wall "
            f"time of the page's last full execution. The {len(timed)} timed pages took "
            f"{sum(r['execution_s'] for r in timed) / 60:.0f} min together; the execution cache skips all of them on "
            f"a rebuild until their code changes." + (f" Conditions of the build: {prov['note']}" if prov.get("note")
                                                      else ""))
    return head + "\n\n" + "\n".join(lines)
