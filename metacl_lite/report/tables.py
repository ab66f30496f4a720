"""Our numbers beside the paper's: the rows of a results file's table (mean ± 95% interval per metric, the seeds
behind each row), the average-accuracy curves of Fig. 3, and the table as text or Markdown. Every number comes from a
results file or from `paper.py`."""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Optional

import numpy as np

from ..lab.summary import matrix_from_json
from ..metrics import average_accuracy_curve
from ..keys import runs_of
from ..data.specs import SPECS
from ..findings.paper import PAPER_SOURCES, paper_table
from ..vocab import METHOD_NAMES, OPTIONS, ORACLE, PAPER_METHOD_NAMES, in_paper, method_label

#: The tables' rows: the paper's eleven methods and the oracle in the paper's order, then the extensions the paper did
#: not run (L2's family), marked so, with "–" in the paper's columns.
ROW_ORDER = (*PAPER_METHOD_NAMES, ORACLE, *(m for m in METHOD_NAMES if not in_paper(m)))
EXTENSION_MARK = " (not in the paper)"


def row_label(method: str) -> str:
    """A table row's label: the paper's ("PI-MetaCL-λ"), the oracle's, or an extension's, marked as not in the paper
    ("L2-MetaCL-β (not in the paper)")."""
    if method == ORACLE:
        return "Joint training (oracle)"
    return method_label(method) + ("" if in_paper(method) else EXTENSION_MARK)


def average_accuracy_curves(res: dict) -> dict[str, np.ndarray]:
    """Fig. 3: the average accuracy after each task, mean over seeds, per method."""
    out = {}
    for m in res["config"]["methods"]:
        mats = [matrix_from_json(r["acc_matrix"]) for r in runs_of(res["runs"], m).values()]
        if mats:
            out[m] = np.mean([average_accuracy_curve(a) for a in mats], axis=0)
    return out


def _fmt(mean: Optional[float], ci: Optional[float]) -> str:
    if mean is None:
        return "–"
    return f"{mean:.1f}" if ci is None or (isinstance(ci, float) and math.isnan(ci)) else f"{mean:.1f} ± {ci:.1f}"


def _seed_cell(n: int, total: int) -> str:
    return str(n) if n == total else f"{n} of {total} (incomplete)"


def comparison_rows(res: dict) -> list[dict]:
    """One row per method of the file or the paper: ours and the paper's ACC/BT/FA (strings), the numeric
    differences, and how many seeds our row is made of (`n`, of `n_total`; `complete`)."""
    cfg = res["config"]
    paper = paper_table(cfg["benchmark"], cfg["K"]) or {}
    total = len(cfg["seeds"])
    rows = []
    for m in ROW_ORDER:
        ours = res.get("summary", {}).get(m)
        pap = paper.get(m)
        in_file = m in cfg["methods"] or m == ORACLE
        if ours is None and pap is None and not (in_file and m != ORACLE):
            continue
        n = len(ours["seeds"]) if ours else 0
        row = {"method": m, "label": row_label(m),
               "n": n, "n_total": total if in_file else 0, "complete": (n == total) if in_file else True,
               "Seeds": _seed_cell(n, total) if in_file else "–"}
        for k in ("ACC", "BT", "FA"):
            o = (ours or {}).get(k)
            p = (pap or {}).get(k)
            row[f"{k} ours"] = _fmt(o["mean"], o["ci95"]) if o else "–"
            row[f"{k} paper"] = _fmt(*p) if p else "–"
            row[f"{k} diff"] = (o["mean"] - p[0]) if (o and p) else None
        rows.append(row)
    return rows


def incomplete_rows(res: dict) -> list[dict]:
    """The rows of `comparison_rows` made from fewer seeds than the file asks for ([] when every row is complete)."""
    return [r for r in comparison_rows(res) if not r["complete"]]


def protocol_differs(res: dict) -> Optional[dict]:
    """How the file's stream differs from the paper's (the spec's tasks and epochs per task): {"n_tasks", "epochs"
    (None: the file does not say), "paper_n_tasks", "paper_epochs"}, so that a smoke run is never read beside the
    paper's numbers as if it were the same experiment; None when the stream is the paper's."""
    cfg = res["config"]
    spec = SPECS.get(cfg["benchmark"])
    epochs = (cfg.get("train") or {}).get("epochs")  # None: a file that does not say
    if spec is None or (cfg["n_tasks"] == spec.n_tasks and epochs in (None, spec.epochs)):
        return None
    return {"n_tasks": cfg["n_tasks"], "epochs": epochs, "paper_n_tasks": spec.n_tasks, "paper_epochs": spec.epochs}


def budget_text(cfg: dict) -> str:
    """The budgets a results file's methods were given (`vocab.BUDGET_OPTIONS`, as `lab.files.budgets` reads them
    from config.method_options), each as its label and value with its name: "M=1 (memory)"; "" for a file without
    one (the paper's)."""
    from ..lab.files import budgets

    return ", ".join(f"{OPTIONS[k].label}={v} ({k})" for k, vs in budgets(cfg).items() for v in sorted(vs))


#: What a γ control file's MetaCL-λ rows trained with (`grid.GAMMA_CONTROLS`), in the note of its table.
CONTROL_GAMMA = {"0": "γ = 0 (the pure projection)", "beta": "γ = the tuned β of each MetaCL-β counterpart"}


COLUMNS = ["label", "Seeds"] + [f"{k} {w}" for k in ("ACC", "BT", "FA") for w in ("ours", "paper")]
HEADS = ["Method", "Seeds"] + COLUMNS[2:]


def format_table(res: dict, fmt: str = "text", spell: Callable[[str], str] = str) -> str:
    """Our table beside the paper's (fmt: "text" or "md"), with each row's seed count and a visible mark on rows made
    from fewer seeds than the file asks for. `spell` rewrites every text before the columns are padded (the command
    line's ASCII spelling, for an output that cannot show β or ±: padded after, the columns stay aligned)."""
    cfg = res["config"]
    rows = comparison_rows(res)
    notes = []
    differs, short, control = protocol_differs(res), incomplete_rows(res), cfg.get("gamma_control")
    if control is not None:  # its MetaCL-λ rows are not the tuned methods of the paper's columns
        notes.append(f"γ CONTROL: the MetaCL-λ rows trained with {CONTROL_GAMMA.get(str(control), repr(control))}, "
                     f"not their tuned γ; the paper's columns are its tuned methods, and the main table is "
                     f"results/{cfg['benchmark']}-K{cfg['K']}.json.")
    if differs:
        ours = f"{differs['n_tasks']} tasks" + (f", {differs['epochs']} epoch(s) per task"
                                                if differs["epochs"] is not None else "")
        notes.append(f"NOT THE PAPER'S PROTOCOL: {ours} (the paper: {differs['paper_n_tasks']} tasks, "
                     f"{differs['paper_epochs']} epochs per task); its numbers are not comparable with these.")
    if short:
        notes.append(f"INCOMPLETE: {len(short)} row(s) are made from fewer than the {len(cfg['seeds'])} seeds of the "
                     f"file ({', '.join(r['label'] for r in short)}); rerun the file's command to finish them.")
    budget = budget_text(cfg)
    if fmt == "md":
        lines = [line for n in notes for line in (f"**{n}**", "")] + ([f"Budget: {budget}.", ""] if budget else [])
        lines += ["| " + " | ".join(HEADS) + " |", "|" + "---|" * len(HEADS)]
        lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in rows]
        return "\n".join(lines)
    title = (f"{cfg['benchmark']} K={cfg['K']}, {cfg['n_tasks']} tasks, {len(cfg['seeds'])} seed(s)"
             f"{', ' + budget if budget else ''}; ours: mean ± 95% "
             f"CI (t-interval over seeds); paper: {PAPER_SOURCES.get((cfg['benchmark'], cfg['K']), 'no published numbers')}")
    cells = [[spell(str(r[c])) for c in COLUMNS] for r in rows]
    heads = [spell(h) for h in HEADS]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [spell(title)] + [spell(n) for n in notes] + [line(heads), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------------------
# The reproduction pages' tables: one narrow table per metric (readable in a 390-px window)


def paper_rows(benchmark: str, K: int) -> list[dict]:
    """The rows of `comparison_rows` for a setting without a results file: the paper's numbers only ("–" for ours),
    in the order of the methods; [] when the paper has no table for (benchmark, K)."""
    paper = paper_table(benchmark, K) or {}
    rows = []
    for m in ROW_ORDER:
        if m not in paper:
            continue
        row = {"method": m, "label": row_label(m), "n": 0,
               "n_total": 0, "complete": True, "Seeds": "–"}
        for k in ("ACC", "BT", "FA"):
            p = paper[m].get(k)
            row.update({f"{k} ours": "–", f"{k} paper": _fmt(*p) if p else "–", f"{k} diff": None})
        rows.append(row)
    return rows


#: A hyphen-minus that signs a number: before a digit (or ".5"), not inside a word, a name or a range (MAS-MetaCL-β,
#: images 400-499, 1e-3), nor after another hyphen (a command's --option).
_SIGN = re.compile(r"(?<![\w\-−.])-(?=\.?\d)")


def minus(text: Any) -> Any:
    """`text` with the hyphen-minus of every negative number written as the minus sign U+2212 ("(-5.9)" ->
    "(−5.9)"), hyphens in words, names and ranges kept; anything but a string is returned as it is."""
    return _SIGN.sub("−", text) if isinstance(text, str) else text


def signed(x: float, fmt: str = "+.1f") -> str:
    """`x` formatted with `fmt` (default: sign and one decimal), its minus the minus sign U+2212."""
    return minus(format(x, fmt))


def _cell(text: str) -> str:
    """A table cell as a reader expects it: a minus sign for a negative number, and "mean ± ci" kept on one line
    (no-break spaces), so that a narrow column does not split it."""
    return minus(text).replace(" ± ", "\u00a0±\u00a0")


def metric_table_markdown(rows: list[dict], metric: str, ours: bool = True, paper: bool = True) -> str:
    """One metric of `comparison_rows` (or `paper_rows`) as a Markdown table of at most three columns, readable in a
    390-px window: Method, Ours and Paper (`ours`/`paper` False drop a column; the differences are the pages'
    figure). A row made from fewer seeds than the file asks for says so after its method."""
    heads = ["Method"] + (["Ours"] if ours else []) + (["Paper"] if paper else [])
    lines = ["| " + " | ".join(heads) + " |", "|:---|" + "---:|" * (len(heads) - 1)]
    for r in rows:
        label = r["label"] + ("" if r["complete"] else f" ({r['n']} of {r['n_total']} seeds)")
        cells = [label] + ([_cell(r[f"{metric} ours"])] if ours else []) + ([_cell(r[f"{metric} paper"])] if paper
                                                                             else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def live_frame(res: dict):
    """A live run's own numbers (no paper column: a short run is not the paper's experiment), one row per method
    run: Method, ACC, BT, FA (mean ± 95% interval, as the pages' tables write them)."""
    import pandas as pd

    rows = [{"Method": r["label"], **{k: _cell(r[f"{k} ours"]) for k in ("ACC", "BT", "FA")}}
            for r in comparison_rows(res) if r["n"]]
    return pd.DataFrame(rows, columns=["Method", "ACC", "BT", "FA"])
