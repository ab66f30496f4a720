"""The summary a results file stores beside its accuracy matrices: per method, each seed's ACC, BT and FA (Eqs. 15-17)
and their mean with a 95% t-interval. Written by the grid after every unit, read by every report."""
from __future__ import annotations

import numpy as np

from ..metrics import all_metrics, mean_ci95


def matrix_from_json(rows: list) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=np.float64)


def summarize(res: dict) -> dict:
    """Per method: each seed's ACC, BT, FA (FA needs that seed's references) and the mean ± 95% t-interval."""
    summary: dict = {}
    for m in res["config"]["methods"] + ["joint"]:
        per: dict[str, list] = {"ACC": [], "BT": [], "FA": [], "seeds": []}
        for s in res["config"]["seeds"]:
            if m == "joint":
                if str(s) in res["oracle"]:
                    per["ACC"].append(float(np.mean(res["oracle"][str(s)]["acc"])))
                    per["seeds"].append(s)
                continue
            run, ref = res["runs"].get(f"{m}/{s}"), res["references"].get(str(s))
            if run is None or ref is None:
                continue
            met = all_metrics(matrix_from_json(run["acc_matrix"]), ref["acc"])
            for k in ("ACC", "BT", "FA"):
                per[k].append(met[k])
            per["seeds"].append(s)
        if not per["seeds"]:
            continue
        entry = {"seeds": per["seeds"]}
        for k in ("ACC", "BT", "FA"):
            if per[k]:
                mean, ci = mean_ci95(per[k])
                entry[k] = {"mean": mean, "ci95": ci, "values": per[k]}
        summary[m] = entry
    return summary
