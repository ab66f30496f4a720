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

`interpretation(res)` gathers all of them (with the file's commands, `commands.provenance_commands`);
`interpretation_markdown(res)` is the prose under each reproduction table; `readme_summary(res)` the README's shorter
form. Every setting of the paper at a glance: `overview`; the reproduction targets: `targets`.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .commands import provenance_commands, relative_command
from .paper import PAPER_SOURCES, paper_table
from ..data.specs import SPECS
from ..importance import OMEGA_OPTIONS as OPTIONS, REGULARISERS
from ..training import TrainConfig, family

METRICS = ("ACC", "BT", "FA")
#: What files made before the open-choice options existed were trained with (the only behaviour the code had then;
#: `grid.run_experiment` reads such files with these defaults too): TrainConfig's defaults.
OPTION_DEFAULTS = {k: getattr(TrainConfig(), k) for k in OPTIONS}


def method_labels() -> dict[str, str]:
    """Every method's label, and the joint oracle's."""
    from ..training import METHODS

    return {**{m: METHODS[m].label for m in METHODS}, "joint": "Joint training (oracle)"}


def _method_order() -> list[str]:
    from ..training import METHODS

    return list(METHODS)


# ---------------------------------------------------------------------------------------------------------------------
# Numbers


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
        trio = list(family(imp))
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
    were compiled (`compile`: "off" in files that predate the option) and the precision of the products
    (`precision`: "float32" in files that predate the option)."""
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
            "gamma_control": cfg.get("gamma_control"), "compile": train.get("compile", "off"),
            "precision": train.get("precision", "float32"),
            "tuning_K": SPECS[cfg["benchmark"]].tuning_K if cfg.get("benchmark") in SPECS else None}


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
    return {"benchmark": cfg["benchmark"], "K": cfg["K"],
            "paper_source": PAPER_SOURCES.get((cfg["benchmark"], cfg["K"])),
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


def number(x: float, nd: int = 1) -> str:
    """`x` with `nd` decimals."""
    return f"{x:.{nd}f}"


def _signed(x: float) -> str:
    return f"{x:+.1f}"


SYMBOLS = {"beta": "β", "gamma": "γ"}


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _chain(a: list[float]) -> str:
    """a0 → a1 → a2 with one decimal, or two where one decimal would show two neighbours equal."""
    nd = 2 if any(f"{a[i]:.1f}" == f"{a[i + 1]:.1f}" for i in range(len(a) - 1)) else 1
    return " → ".join(number(x, nd) for x in a)


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


def _source(source: str, tuning_K: Optional[int] = None) -> str:
    """A `config.hparams_source` entry as a reader reads it: "K=200: results/t.json" -> "`results/t.json` (tuned at
    K = 200)", "default: results/t.json" -> "`results/t.json` (the default values, tuned at K = <tuning K>)"; any
    other entry as it is, its paths relative to the repository."""
    head, sep, rest = source.partition(": ")
    if sep and head.startswith("K=") and head[2:].isdigit():
        return f"`{relative_command(rest)}` (tuned at K = {head[2:]})"
    if sep and head == "default":
        at = f", tuned at K = {tuning_K}" if tuning_K is not None else ""
        return f"`{relative_command(rest)}` (the default values{at})"
    return f"`{relative_command(source)}`"


def _hparams_sentences(h: dict, labels: dict[str, str]) -> list[str]:
    out = []
    if h["gamma_control"] is not None:
        out.append(f"This is a γ control file (`--gamma {h['gamma_control']}`), not the main table.")
    if h["values"]:
        groups = []
        for imp in REGULARISERS:
            ms = [m for m in family(imp) if m in h["values"]]
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
                out.append(f"All of them come from {_source(next(iter(by_src)), h.get('tuning_K'))}, as "
                           f"`config.hparams_source` records.")
            else:
                out.append("Where they came from (`config.hparams_source`): " + " ".join(
                    (_source(s, h.get("tuning_K")) if s is not None else "not recorded")
                    + f" for {_names(ms, labels)}." for s, ms in by_src.items()))
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
    if h.get("precision", "float32") != "float32":
        out.append(f"Matrix products and convolutions in {h['precision'].upper()} (`--precision {h['precision']}`, "
                   f"`config.train.precision`), not float32: faster on a GPU, other numbers than a float32 run.")
    return out


def interpretation_markdown(res: dict, info: Optional[dict] = None) -> str:
    """The prose under a reproduction table: agreement, ranks, family orderings, the β/γ used, the interval."""
    info = info or interpretation(res)
    labels = method_labels()
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
            lines.append(f"- {k}: mean |ours − paper| = {number(v['mean_abs'])} points over {v['n']} rows, the paper's "
                         f"mean inside our interval for {len(v['within'])}; the largest gaps (ours − paper): "
                         f"{_top_gaps(v['largest'], labels)}.")
        out.append("\n".join(lines))
        if r["rho"] is not None:
            same = r["best_ours"] == r["best_paper"]
            out.append(f"**Ranks.** Spearman's ρ between our ACC and the paper's over the {r['n']} methods is "
                       f"{number(r['rho'], 2)} (1: the same order, 0: unrelated, −1: reversed). Our best method is "
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
                f"{number(iv['factor'], 2)} sample standard deviations of the per-seed values. Each seed changes "
                f"{what}, so the interval covers that variation too and is wider than one over initialisations "
                f"alone would be.")
        if iv["mean_ci_ours"] is not None:
            text += (f" Over the {iv['n_rows']} rows with both, our ACC half-widths average "
                     f"{number(iv['mean_ci_ours'])} points, the paper's ± {number(iv['mean_pm_paper'])}; the paper "
                     f"does not say how its ± is computed.")
    else:
        text = f"**What the ± means.** This file has one seed, so there is no interval (each seed changes {what})."
    out.append(text)
    return "\n\n".join(out)


def readme_summary(res: dict, info: Optional[dict] = None) -> str:
    """The README's generated comparison beside a table: gaps per metric, ρ, the family orderings, the β/γ and the
    open choices, and the interval, as a Markdown list."""
    info = info or interpretation(res)
    labels = method_labels()
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
        out.append(f"- {k}: mean |ours − paper| = {number(v['mean_abs'])} points over {v['n']} rows "
                   f"(paper's mean inside our 95% interval: {len(v['within'])} of {v['n']}); largest gaps: "
                   f"{_top_gaps(v['largest'], labels)}.")
    if r["rho"] is not None:
        out.append(f"- Rank agreement of the methods' ACC with the paper's (Spearman ρ over {r['n']} methods): "
                   f"{number(r['rho'], 2)}.")
    if fam:
        out.append("- plain < MetaCL-β < MetaCL-λ in ACC:")
        no_paper = all(f["paper"] is None for f in fam.values())
        out += [f"  - {_family_sentence(i, f, labels, no_paper)}." for i, f in fam.items()]
    for s in _hparams_sentences(h, labels):
        out.append(f"- {s}")
    if iv["n_seeds"] > 1:
        out.append(f"- ±: 95% t-interval over {iv['n_seeds']} seeds ({number(iv['factor'], 2)} sample standard "
                   f"deviations); each seed also changes "
                   + ("the permutations and initial weights." if iv["permuted"] else "the initial weights."))
    return "\n".join(out)
