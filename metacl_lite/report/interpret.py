"""What a results file says beside the paper, as numbers: pure functions of a results document (`store.load_results`)
that return records (dicts and DataFrames) for the reproduction pages to glue; the sentences that say what they mean
are the pages' own text (book/reproduce/templates/). Every number comes from the results file, from `paper.py` or
from scipy.

- `gaps`: where we agree (the paper's mean inside our 95% interval) and where we do not; the mean |ours − paper| per
  metric (ACC, BT, FA) and the largest gaps, named.
- `rank_agreement`: Spearman's ρ between our ACC and the paper's over the methods both tables have.
- `family_orderings`: for each regulariser (MAS, PI, EWC), does plain < MetaCL-β < MetaCL-λ hold in ACC, in ours and in
  the paper's table.
- `hparams_used`: the β/γ that produced the table, where they came from, and the open choices about Ω.
- `interval`: what the ± of our table is (a t-interval over seeds) and how wide it is beside the paper's.

`interpretation(res)` gathers all of them (with the file's commands, `commands.provenance_commands`); `glue_values`
flattens them into the values a page glues, `gaps_frame`, `family_frame` and `hparams_frame` into its tables. Every
setting of the paper at a glance: `overview`; the reproduction targets: `targets`.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .commands import provenance_commands, relative_command
from ..findings.paper import PAPER_SOURCES, paper_table
from ..data.specs import SPECS
from ..vocab import BUDGET_OPTIONS, OMEGA_OPTIONS, OPTIONS, REGULARISERS, family, options_of, regulariser_of

METRICS = ("ACC", "BT", "FA")


def method_labels() -> dict[str, str]:
    """Every method's label (the memory family's too), and the joint oracle's."""
    from ..training import ALL_METHODS

    return {**{m: ALL_METHODS[m].label for m in ALL_METHODS}, "joint": "Joint training (oracle)"}


def _method_order() -> list[str]:
    from ..training import ALL_METHODS

    return list(ALL_METHODS)


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
    """For each regulariser with all three of its methods in our file or in the paper's table: the ACC of plain,
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
    were compiled (`compile`: "off" in files that predate the option), the precision of the products
    (`precision`: "float32" in files that predate the option) and the budgets the methods that read one were given
    (`budgets`: {name: value}, e.g. {"memory": 1}; `method_budgets`: per such method; {} in the paper's files)."""
    cfg = res["config"]
    mh = cfg.get("method_hparams") or {}
    values = {m: dict(mh[m]) for m in _method_order() if mh.get(m)}
    src = cfg.get("hparams_source") or {}
    train = cfg.get("train") or {}
    options = {k: train.get(k, OPTIONS[k].default) for k in OMEGA_OPTIONS}  # the declared default where not recorded
    per = cfg.get("method_options")
    if isinstance(per, dict) and per:
        where = "method_options"
        method_options = {m: {k: per[m].get(k, options[k]) for k in OMEGA_OPTIONS} for m in _method_order() if m in per}
    else:
        where = "train" if all(k in train for k in OMEGA_OPTIONS) else None
        method_options = {m: dict(options) for m in _method_order()
                          if m in cfg.get("methods", []) and regulariser_of(m)}
    budgets = {m: {k: o[k] for k in BUDGET_OPTIONS if k in o} for m, o in (per or {}).items()
               if m in cfg.get("methods", []) and set(o) & set(BUDGET_OPTIONS)}
    return {"values": values, "sources": {m: src.get(m) for m in values}, "options": options,
            "budgets": {k: v for b in budgets.values() for k, v in b.items()}, "method_budgets": budgets,
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
    """Every number a reproduction page's interpretation uses, in one dict (for glue and tests): the gaps, the rank
    agreement, the family orderings, the β/γ and open choices, the interval, the labels of the rows made from fewer
    seeds than the file asks for (`incomplete`, [] when complete) and the file's commands."""
    from .tables import incomplete_rows

    cfg = res["config"]
    return {"benchmark": cfg["benchmark"], "K": cfg["K"],
            "paper_source": PAPER_SOURCES.get((cfg["benchmark"], cfg["K"])),
            "gaps": gaps(res), "rank": rank_agreement(res), "families": family_orderings(res),
            "hparams": hparams_used(res), "interval": interval(res), "incomplete": [r["label"] for r in incomplete_rows(res)],
            "commands": provenance_commands(res)}


def chain(a: list[float]) -> str:
    """a0 → a1 → a2 with one decimal, or two where one decimal would show two neighbours equal."""
    nd = 2 if any(f"{a[i]:.1f}" == f"{a[i + 1]:.1f}" for i in range(len(a) - 1)) else 1
    return " → ".join(f"{x:.{nd}f}" for x in a)


def _labels(methods: list[str], labels: dict[str, str]) -> str:
    """Method labels joined by semicolons (a label may hold a comma: "MetaCL, w/o reg"); "none" for none."""
    return "; ".join(labels.get(m, m) for m in methods) or "none"


def _r(x: Optional[float], nd: int = 1) -> Any:
    return "–" if x is None else round(x, nd)


def glue_values(info: dict[str, Any]) -> dict[str, Any]:
    """The values a reproduction page glues into its interpretation (rounded as shown; "–" where there is none):

    - per metric k of ACC, BT, FA: gap_k (the mean |ours − paper|), n_k (rows with both), within_k (rows whose
      paper's mean lies inside our 95% interval), largest_k (the two largest gaps, "label (+d)"); outside_ACC (the
      labels of the ACC rows outside our interval);
    - rho, rank_n (methods in both tables), best_ours, best_paper (labels);
    - per regulariser r: order_r_ours / order_r_paper ("holds", "does not hold" or "–") and chain_r_ours /
      chain_r_paper (plain → MetaCL-β → MetaCL-λ ACC); held_ours, n_held_ours, n_fam_ours (and the same for paper);
    - n_seeds, t_df (n − 1), factor (t/√n), mean_ci_ours, mean_pm_paper, n_rows, permuted ("yes"/"no");
    - gamma_control, options_where, compile, precision; incomplete (labels, "none"); budget ("M=1", "none")."""
    labels = method_labels()
    g, r, fam, h, iv = info["gaps"], info["rank"], info["families"], info["hparams"], info["interval"]
    out: dict[str, Any] = {}
    for k, v in g.items():
        out[f"gap_{k}"] = _r(v["mean_abs"])
        out[f"n_{k}"] = v["n"]
        out[f"within_{k}"] = len(v["within"])
        out[f"largest_{k}"] = "; ".join(f"{labels.get(m, m)} ({d:+.1f})" for m, d in v["largest"][:2]) or "–"
    out["outside_ACC"] = _labels(g["ACC"]["outside"], labels)
    out["rho"] = _r(r["rho"], 2)
    out["rank_n"] = r["n"]
    out["best_ours"] = labels.get(r.get("best_ours"), "–")
    out["best_paper"] = labels.get(r.get("best_paper"), "–")
    for imp, f in fam.items():
        for who in ("ours", "paper"):
            hold = f[f"holds_{who}"]
            out[f"order_{imp}_{who}"] = "–" if hold is None else ("holds" if hold else "does not hold")
            out[f"chain_{imp}_{who}"] = "–" if f[who] is None else chain(f[who])
    for who in ("ours", "paper"):
        held = [i.upper() for i, f in fam.items() if f[f"holds_{who}"]]
        out[f"held_{who}"] = ", ".join(held) or "none"
        out[f"n_held_{who}"] = len(held)
        out[f"n_fam_{who}"] = sum(f[who] is not None for f in fam.values())
    out["n_seeds"] = iv["n_seeds"]
    out["t_df"] = iv["n_seeds"] - 1
    out["factor"] = _r(iv["factor"], 2)
    out["mean_ci_ours"] = _r(iv["mean_ci_ours"])
    out["mean_pm_paper"] = _r(iv["mean_pm_paper"])
    out["n_rows"] = iv["n_rows"]
    out["permuted"] = "yes" if iv["permuted"] else "no"
    out["gamma_control"] = "none" if h["gamma_control"] is None else h["gamma_control"]
    out["options_where"] = h["options_where"] or "none"
    out["compile"] = h["compile"]
    out["precision"] = h["precision"]
    out["incomplete"] = "; ".join(info["incomplete"]) or "none"
    out["budget"] = ", ".join(f"{OPTIONS[k].label}={v}" for k, v in h["budgets"].items()) or "none"
    return out


SYMBOLS = {"beta": "β", "gamma": "γ"}


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def source_record(source: Optional[str], tuning_K: Optional[int] = None) -> dict[str, Any]:
    """A `config.hparams_source` entry as a record: the file (relative to the repository) and the K it was tuned at.
    "K=200: results/t.json" -> {"file": "results/t.json", "K": 200}; "default: results/t.json" -> the file and the
    benchmark's tuning K (`tuning_K`); any other entry -> the entry as the file, K None; None -> both None. A value read
    from another method (`hparams.tuned_method`: "pi-metacl-lambda's gamma, K=50: results/t.json") names it under
    "from"."""
    if source is None:
        return {"file": None, "K": None}
    lender, sep, rest = source.partition("'s ")  # "<method>'s gamma, K=50: ...": a value read from another method
    if sep and ", " in rest and " " not in lender:
        return {**source_record(rest.partition(", ")[2], tuning_K), "from": lender}
    head, sep, rest = source.partition(": ")
    if sep and head.startswith("K=") and head[2:].isdigit():
        return {"file": relative_command(rest), "K": int(head[2:])}
    if sep and head == "default":
        return {"file": relative_command(rest), "K": tuning_K}
    return {"file": relative_command(source), "K": None}


def _option_cell(method: str, name: str, value: Any) -> str:
    """A method's value of an open choice in the tables: `sum` (a choice), 0.1 (a number), "–" where the method's
    family does not read the option (`vocab.options_of`: PI's ξ beside EWC)."""
    if name not in {o.name for o in options_of(method)}:
        return "–"
    return f"`{value}`" if isinstance(value, str) else f"{value:g}"


def hparams_frame(info: dict[str, Any]):
    """The β/γ of each regularised method and where it came from, with the open choices it was trained with: one row
    per method (Method, β/γ, tuned at K, file, then one column per open choice, `vocab.OMEGA_OPTIONS` under its
    declared label: Ω accumulated, Ω normalised, PI's ξ; "–" where a cell does not apply or the file does not record
    it); where the file gave its methods a budget (`vocab.BUDGET_OPTIONS`: the memory's M), one column per budget under
    its label, "–" for the methods that do not read it (the paper's files have none, and no such column)."""
    import pandas as pd

    h = info["hparams"]
    budgets = [k for k in BUDGET_OPTIONS if k in h.get("budgets", {})]
    labels = method_labels()
    rows = []
    for m in _method_order():
        if m not in h["values"] and m not in h["method_options"]:
            continue
        src = source_record(h["sources"].get(m), h.get("tuning_K"))
        o = h["method_options"].get(m, h["options"])
        rows.append({"Method": labels[m],
                     "β/γ": (", ".join(f"{SYMBOLS.get(k, k)} = {_value(v)}" for k, v in h["values"].get(m, {}).items())
                             or "–") + (f" ({labels.get(src['from'], src['from'])}'s)" if "from" in src else ""),
                     "Tuned at K": "–" if src["K"] is None else src["K"],
                     "File": "–" if src["file"] is None else f"`{src['file']}`",
                     **{OPTIONS[k].label: _option_cell(m, k, o[k]) for k in OMEGA_OPTIONS},
                     **{OPTIONS[k].label: _value(h["method_budgets"].get(m, {}).get(k, "–")) for k in budgets}})
    return pd.DataFrame(rows, columns=["Method", "β/γ", "Tuned at K", "File",
                                       *(OPTIONS[k].label for k in (*OMEGA_OPTIONS, *budgets))])


def gaps_frame(info: dict[str, Any]):
    """The gaps per metric (`gaps`): Metric, mean |ours − paper| (points), rows with both, rows whose paper's mean
    lies inside our 95% interval, and the two largest gaps (ours − paper); metrics no row has both numbers for are
    left out."""
    import pandas as pd

    g = glue_values(info)
    rows = [{"Metric": k, "Mean gap": g[f"gap_{k}"], "Rows": g[f"n_{k}"], "Inside": g[f"within_{k}"],
             "Largest (ours − paper)": g[f"largest_{k}"]} for k in METRICS if info["gaps"][k]["mean_abs"] is not None]
    return pd.DataFrame(rows, columns=["Metric", "Mean gap", "Rows", "Inside", "Largest (ours − paper)"])


def family_frame(info: dict[str, Any]):
    """The ordering plain < MetaCL-β < MetaCL-λ in ACC per regulariser: our chain and whether it holds, the
    paper's and whether it holds ("–" where a table lacks the numbers)."""
    import pandas as pd

    g = glue_values(info)
    rows = [{"Regulariser": imp.upper(), "Ours": g[f"chain_{imp}_ours"], "Holds (ours)": g[f"order_{imp}_ours"],
             "Paper": g[f"chain_{imp}_paper"], "Holds (paper)": g[f"order_{imp}_paper"]}
            for imp in info["families"]]
    return pd.DataFrame(rows, columns=["Regulariser", "Ours", "Holds (ours)", "Paper", "Holds (paper)"])
