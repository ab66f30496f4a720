"""The records of chapter 8 (`book/chapters/08_analysis.md`): Fig. 3's end points, MetaCL's gain per K, the learning
speed and gradient angles of claims 5 and 6's runs, the tuning grids' sensitivity and the tuned values per K, and the
numbers of the λ story. The `*_glue` functions return the glue names the chapter's Markdown reads, written out in
full. Numbers, records and tables only: the chapter's sentences are its Markdown, and its hidden cells assert the
premises they rest on. The page imports this module as `A`."""
from __future__ import annotations

from ..findings import claims as _C, stats as _S
from ..keys import runs_by_key
from ..report.commands import relative_command
from ..vocab import PAPER_REGULARISERS
from .formatting import code, listing, markdown


def pmnist_results(Ks) -> dict:
    """{K: results} for each K of `Ks` with a committed file results/pmnist-K<K>.json."""
    from ..lab.store import load_results
    from ..paths import REPO_ROOT

    files = {K: REPO_ROOT / "results" / f"pmnist-K{K}.json" for K in Ks}
    return {K: load_results(f) for K, f in files.items() if f.exists()}


def fig3_ends(results: dict) -> dict:
    """Fig. 3's end points per K: {K: {"seeds", "best", "worst" (method names), "final" {method: ACC %},
    "lambda_above" / "lambda_below" (the paper's regularisers whose MetaCL-λ ends above / at or below the plain)}."""
    from ..report.tables import average_accuracy_curves
    from ..vocab import method_name

    out = {}
    for K, res in results.items():
        f = {m: float(c[-1]) for m, c in average_accuracy_curves(res).items()}
        regs = [r for r in PAPER_REGULARISERS if method_name(r, "lambda") in f]
        above = [r for r in regs if f[method_name(r, "lambda")] > f[r]]
        out[K] = {"seeds": len(res["config"]["seeds"]), "best": max(f, key=f.get), "worst": min(f, key=f.get),
                  "final": f, "lambda_above": above, "lambda_below": [r for r in regs if r not in above]}
    return out


def fig3_table(ends: dict):
    """`fig3_ends` as the page's table: K, seeds, the method that ends highest and lowest (ACC %), fine-tune's."""
    import pandas as pd
    from ..vocab import method_label

    return pd.DataFrame([{"K": K, "seeds": e["seeds"],
                          "ends highest": f"{method_label(e['best'])} ({e['final'][e['best']]:.1f}%)",
                          "ends lowest": f"{method_label(e['worst'])} ({e['final'][e['worst']]:.1f}%)",
                          "fine-tune ends at": f"{e['final']['finetune']:.1f}%"} for K, e in ends.items()])


def gain_table(rows: list[dict]):
    """`claims.gain_by_K`'s rows per regulariser and variant: the K whose 95% interval lies above zero (a gain) and
    below it (a loss), "–" for none, and the largest mean gain with its K."""
    import pandas as pd
    from ..report.tables import signed

    out = []
    for (reg, variant), g in pd.DataFrame(rows).groupby(["regulariser", "variant"], sort=False):
        top = g.loc[g["mean"].idxmax()]
        out.append({"variant over plain": f"{variant} over {reg}",
                    "gain at K": listing(g.K[g.verdict == _S.CONFIRMED]) or "–",
                    "loss at K": listing(g.K[g.verdict == _S.REFUTED]) or "–",
                    "largest mean gain (points)": signed(top["mean"]), "at K": int(top["K"])})
    return pd.DataFrame(out)


def seeds_by_K(results: dict, Ks) -> list:
    """The distinct seed counts of the results files at `Ks` (one value: every file there has as many seeds)."""
    return sorted({len(res["config"]["seeds"]) for K, res in results.items() if K in Ks})


def speed_frame(log: dict):
    """One row per method, seed and epoch: the accuracy on the task being learnt after that epoch, mean over tasks."""
    import pandas as pd
    from ..vocab import method_label

    return pd.DataFrame([{"method": method_label(k.method), "seed": k.seed, "epoch": e + 1, "accuracy (%)": float(acc)}
                         for k, log_ in runs_by_key(log["runs"])
                         for e, acc in enumerate(_S.epoch_accuracy(log_).mean(axis=0))])


def speed_table(rows: list[dict]):
    """`claims.speed_tests`' rows as one row per pair "a − b", one column per epoch: mean (verdict)."""
    import pandas as pd
    from ..report.tables import signed

    table: dict = {}
    for r in rows:
        pair, epoch = r["test"].split(", accuracy after epoch ")
        table.setdefault(pair, {})[f"epoch {epoch}"] = f"{signed(r['mean'])} ({r['verdict']})"
    return pd.DataFrame(table).T.rename_axis("a − b").reset_index()


def _interval(r: dict, unit: str = "") -> str:
    from ..report.tables import signed

    return f"{signed(r['mean'])}{unit} ({signed(r['ci95'][0])} to {signed(r['ci95'][1])})"


def speed_ends_table(rows: list[dict]):
    """Per pair of `claims.speed_tests`: the epochs with each verdict, and the difference with its 95% interval after
    the first and the last epoch."""
    import pandas as pd

    pairs: dict = {}
    for r in rows:
        pairs.setdefault(r["test"].split(", accuracy")[0], []).append(r)
    out = []
    for pair, rs in pairs.items():
        row = {"a − b": pair}
        for v in (_S.CONFIRMED, _S.REFUTED, _S.INCONCLUSIVE):
            row[f"{v} at epochs"] = listing(i + 1 for i, r in enumerate(rs) if r["verdict"] == v) or "–"
        row["after epoch 1 (95% interval)"] = _interval(rs[0])
        row[f"after epoch {len(rs)} (95% interval)"] = _interval(rs[-1])
        out.append(row)
    return pd.DataFrame(out)


def angle_frame(log: dict):
    """Fig. 5's long frame: one row per method, seed, task (2 and the last), angle and outer step, in degrees."""
    import numpy as np
    import pandas as pd
    from ..vocab import method_label

    last, rows = log["n_tasks"] - 1, []
    for (m, s), run in runs_by_key(log["runs"]):
        for task in (1, last):
            steps = [r for r in run["angles"] if r[0] == task]  # [task, cos<g1,gx>, cos<g2,gx>, lambda] per step
            for col, name in ((1, "∠(g1, gx)"), (2, "∠(g2, gx)")):
                for step, r in enumerate(steps):
                    if r[col] is not None and not np.isnan(r[col]):  # <g2, gx> is undefined where g2 = 0
                        rows.append({"method": method_label(m), "seed": s, "task": f"task {task + 1}",
                                     "angle": name, "step": step,
                                     "degrees": float(np.degrees(np.arccos(np.clip(r[col], -1, 1))))})
    return pd.DataFrame(rows)


def angle_summary(log: dict):
    """Means over seeds of each run's statistics on task 2 and the last task (degrees): mean and spread of the
    angle to g1, spread of the angle to g2; indexed by task and method, unrounded."""
    import pandas as pd
    from ..vocab import method_label

    last = log["n_tasks"] - 1
    per_seed = pd.DataFrame([{"method": method_label(k.method), "task": f"task {t + 1}",
                              "mean ∠(g1, gx)": _S.angle_mean(run, t, "g1"),
                              "spread of ∠(g1, gx)": _S.angle_spread(run, t, "g1"),
                              "spread of ∠(g2, gx)": _S.angle_spread(run, t, "g2")}
                             for k, run in runs_by_key(log["runs"]) for t in (1, last)])
    return per_seed.groupby(["task", "method"]).mean()


def angle_tests(log: dict) -> dict:
    """Claim 6's tests (`claims.angle_tests`) on task 2 and on the last task: {task index: [spread g1, spread g2,
    mean g1] rows}."""
    from ..findings import evidence as E

    ev = E.Evidence((log["K"],), {}, logs={"angles": log})
    return {1: _C.angle_tests(task=1)(ev), log["n_tasks"] - 1: _C.angle_tests()(ev)}


def angle_tests_table(tests: dict):
    """`angle_tests` as the page's table: task, statistic, mean difference, its 95% interval, seeds for, verdict."""
    import pandas as pd
    from ..report.tables import signed

    return pd.DataFrame([{"task": t + 1, "PI-MetaCL-β − PI-MetaCL-λ": r["test"].split(", ", 1)[1].rsplit(" on ", 1)[0],
                          "mean difference (°)": signed(r["mean"]),
                          "95% interval": f"{signed(r['ci95'][0])} to {signed(r['ci95'][1])}",
                          "seeds for": f"{r['n_agree']}/{r['n']}", "verdict": r["verdict"]}
                         for t, rs in tests.items() for r in rs])


def angle_record(summary, tests: dict, n_tasks: int, beta: str, lam: str) -> dict:
    """The numbers of the angles paragraph: the mean angle to g1 on task 2 and the last task of `beta` and `lam`
    (method labels) and its growth, and the tests of the mean on both tasks and of the spread on the last
    ("mean_first", "mean_last", "spread_last": each mean, lo, hi and verdict), signed with one decimal."""
    from ..report.tables import signed

    col, t2, tl, last = "mean ∠(g1, gx)", "task 2", f"task {n_tasks}", n_tasks - 1
    rec = {"tasks": n_tasks}
    for key, m in (("b", beta), ("l", lam)):
        a, z = float(summary.loc[(t2, m), col]), float(summary.loc[(tl, m), col])
        rec.update({f"{key}_first": f"{a:.1f}", f"{key}_last": f"{z:.1f}", f"{key}_growth": signed(z - a),
                    f"{key}_growth_value": z - a})
    for key, r in (("mean_first", tests[1][2]), ("mean_last", tests[last][2]), ("spread_last", tests[last][0])):
        rec.update({f"{key}": signed(r["mean"]), f"{key}_lo": signed(r["ci95"][0]), f"{key}_hi": signed(r["ci95"][1]),
                    f"{key}_verdict": r["verdict"], f"{key}_value": r["mean"]})
    return rec


def sensitivity_frame(tuning: dict):
    """The tuning grid at one K, one row per method and value: method label, param (β/γ), regulariser, variant
    (fixed β, fixed β (MetaCL), dynamic λ (+γ)), value, value for a log axis (γ = 0 at 1e-3), validation ACC."""
    import pandas as pd
    from ..vocab import REGULARISER_LABELS, method_label, parse_method

    rows = []
    for m, gr in tuning["grid"].items():
        reg, variant = parse_method(m)
        kind = {"beta": "fixed β", "gamma": "dynamic λ (+γ)"}[gr["param"]]
        for v, acc in zip(gr["values"], gr["mean_val_acc"]):
            rows.append({"method": method_label(m), "param": {"beta": "β", "gamma": "γ"}[gr["param"]],
                         "regulariser": REGULARISER_LABELS[reg],
                         "variant": kind + (" (MetaCL)" if variant == "beta" else ""),
                         "value": v, "β or γ": max(v, 1e-3), "validation ACC": acc})
    return pd.DataFrame(rows)


def _near_best(s, within: float = 1.0) -> int:
    return int((s >= s.max() - within).sum())


def sensitivity_table(sens):
    """Per method: what it tunes, the best validation ACC, its range over the grid and how many values come within
    1 point of the best ("2 of 13")."""
    import pandas as pd

    p = sens.groupby(["method", "param"], sort=False)["validation ACC"].agg(
        best="max", range=lambda s: s.max() - s.min(), near=_near_best, n="size").reset_index()
    return pd.DataFrame({"method": p.method, "tunes": p.param, "best ACC": p.best.map("{:.1f}".format),
                         "range": p.range.map("{:.1f}".format),
                         "near best": [f"{a} of {b}" for a, b in zip(p.near, p.n)]})


def sensitivity_by_regulariser(sens):
    """Per regulariser: the range of the validation ACC over the grid of γ, of the plain method's β and of MetaCL-β's
    β (points), γ's range over the mean of the two β ranges ("ratio"), and whether γ's plateau within 1 point of the
    best holds more grid values than either β's ("wider")."""
    import pandas as pd

    g = sens.groupby(["regulariser", "variant"], sort=False)["validation ACC"]
    rng, near = g.agg(lambda s: s.max() - s.min()), g.agg(_near_best)
    out = []
    for reg in sens.regulariser.unique():
        b, bm, lam = rng[(reg, "fixed β")], rng[(reg, "fixed β (MetaCL)")], rng[(reg, "dynamic λ (+γ)")]
        out.append({"regulariser": reg, "γ": lam, "β (plain)": b, "β (MetaCL-β)": bm, "ratio": lam / ((b + bm) / 2),
                    "wider": bool(near[(reg, "dynamic λ (+γ)")] > max(near[(reg, "fixed β")],
                                                                      near[(reg, "fixed β (MetaCL)")]))})
    return pd.DataFrame(out)


def tuned_values(curves):
    """The chosen β/γ per method (rows, in `tuning.TUNABLE`'s order, labels) and K (columns), and whether each lies
    on an edge of the grid: (chosen, edge)."""
    from ..lab.tuning import TUNABLE
    from ..vocab import method_label

    best = curves[curves.chosen].assign(method=lambda d: d.method.map(method_label))
    order = [method_label(m) for m in TUNABLE]
    chosen = best.pivot(index="method", columns="K", values="value").reindex(order)
    return chosen, best.pivot(index="method", columns="K", values="at_edge").reindex(order)


def tuned_table(chosen, edge, Ks):
    """The chosen values at `Ks` as the page's table ("–": not tuned; "(edge)": on an edge of the grid)."""
    import pandas as pd

    shown = pd.DataFrame({f"K = {k}": [("–" if pd.isna(v) else f"{v:g}" + (" (edge)" if e is True else ""))
                                       for v, e in zip(chosen[k], edge[k])] for k in chosen.columns if k in Ks},
                         index=chosen.index)
    return shown.reset_index()


def tuned_steps(chosen):
    """How the chosen values move from one tuned K to the next: per step, how many methods went lower, higher or
    stayed, of how many."""
    import pandas as pd

    out = []
    for a, b in zip(chosen.columns, chosen.columns[1:]):
        ratio = (lambda d: d[b] / d[a])(chosen[[a, b]].dropna())
        up, down = int((ratio > 1).sum()), int((ratio < 1).sum())
        out.append({"K": f"{a} to {b}", "lower": down, "higher": up, "unchanged": len(ratio) - up - down,
                    "methods": len(ratio)})
    return pd.DataFrame(out)


def story_record(doc: dict) -> dict:
    """The provenance of the λ story's file: its command, commit (10 characters), torch, minutes, device, streams
    ("K = 20 on 20 tasks, ..."), seeds, "short" (the K measured on fewer than 20 tasks), "unmeasured" (the paper's K
    not measured) and "current" (its β, γ and options are those of hparams.json)."""
    from ..data.specs import SPECS
    from ..lab import lambda_story as L

    prov, streams = doc["provenance"], {int(k): v for k, v in doc["config"]["streams"].items()}
    return {"command": relative_command(prov["command"]), "commit": (prov["git_commit"] or "?")[:10],
            "torch": prov["packages"]["torch"], "minutes": f"{prov['wall_s_total'] / 60:.0f}",
            "device": prov["device"], "streams": ", ".join(f"K = {K} on {n} tasks" for K, n in streams.items()),
            "seeds": listing(doc["config"]["seeds"]), "short": [K for K, n in streams.items() if n < 20],
            "unmeasured": listing(K for K in SPECS[doc["benchmark"]].paper_Ks if K not in streams),
            "current": L.hparams_current(doc)}


def pct_range(frame, col: str) -> str:
    """The range over K and regulariser of a per-run fraction (mean over seeds), in whole percent: "31–100%"."""
    v = 100 * frame.groupby(["K", "regulariser"])[col].mean()
    lo, hi = f"{v.min():.0f}", f"{v.max():.0f}"
    return f"{lo}%" if lo == hi else f"{lo}–{hi}%"


def story_frames(sf) -> dict:
    """The story frame's three settings: {"tuned": MetaCL-λ with its tuned γ, "zero": γ = 0, "beta": MetaCL-β}."""
    from ..lab import lambda_story as L

    return {k: sf[sf.setting == L.SETTING_NAMES[s]] for k, s in
            (("tuned", ("lambda", "tuned")), ("zero", ("lambda", "zero")), ("beta", ("beta", "tuned")))}


def story_numbers(sf) -> dict:
    """The numbers of the λ story's paragraphs: per setting the ranges (`pct_range`) of λ active, λ > γ, Adam's step
    uphill on g2, the penalty rising after Adam's step and along −g; the median λ/γ's range; the largest share of
    steps whose gradient points uphill on the penalty; how many (K, regulariser) pairs have MetaCL-λ's share of
    rising steps within 10 points of MetaCL-β's, above it and below it; how many end with a higher ACC at γ = 0."""
    import pandas as pd

    f = story_frames(sf)
    mean = {k: v.groupby(["K", "regulariser"]) for k, v in f.items()}
    ratio = mean["tuned"]["lambda_over_gamma_median"].mean()
    rise = {k: mean[k]["frac_increase"].mean() for k in f}
    diff = rise["tuned"] - rise["beta"]
    acc_z, acc_l = mean["zero"]["final ACC"].mean(), mean["tuned"]["final ACC"].mean()
    rec = {f"{k}_{c}": pct_range(f[k], c) for k in f for c in
           ("frac_lambda_pos", "frac_lambda_gt_gamma", "frac_step_against_g2", "frac_increase",
            "frac_increase_along_g")}
    rec.update({"ratio_min": f"{ratio.min():.2g}", "ratio_max": f"{ratio.max():.2g}",
                "lambda_larger": sorted((int(K), r) for K, r in ratio.index[ratio > 1]),
                "g_against": float(pd.concat([f["tuned"], f["zero"]]).frac_g_against_g2.max()),
                "pairs": len(diff), "within": int((diff.abs() <= 0.1).sum()), "higher": int((diff > 0.1).sum()),
                "lower": int((diff < -0.1).sum()), "zero_rise_min": float(rise["zero"].min()),
                "tuned_rise_min": float(rise["tuned"].min()), "zero_acc_higher": int((acc_z > acc_l).sum()),
                "seeds_n": sf.seed.nunique()})
    return rec


def speed_glue(dyn: dict) -> dict:
    """The learning speed's stream (`page_claims.logs_record`): its K, tasks and seeds, and where its logs come from
    (without code spans: the sentence is text)."""
    from .page_claims import logs_record

    logs = logs_record(dyn)
    return {"speed_speed_K": logs.get("speed_K", "–"), "speed_speed_tasks": logs.get("speed_tasks", "–"),
            "speed_speed_seeds": logs.get("speed_seeds", "–"), "speed_source": logs["source"].replace("`", "")}


def angle_glue(a: dict, seeds: int) -> dict:
    """The angles paragraph (`angle_record` `a`) and the stream's seeds."""
    return {"angle_tasks": a["tasks"], "angle_b_growth": a["b_growth"], "angle_b_first": a["b_first"],
            "angle_b_last": a["b_last"], "angle_l_growth": a["l_growth"], "angle_l_first": a["l_first"],
            "angle_l_last": a["l_last"], "angle_seeds": seeds, "angle_mean_last": a["mean_last"],
            "angle_mean_last_lo": a["mean_last_lo"], "angle_mean_last_hi": a["mean_last_hi"],
            "angle_mean_first": a["mean_first"], "angle_mean_first_lo": a["mean_first_lo"],
            "angle_mean_first_hi": a["mean_first_hi"], "angle_spread_last": a["spread_last"],
            "angle_spread_last_lo": a["spread_last_lo"], "angle_spread_last_hi": a["spread_last_hi"]}


def sensitivity_glue(tuning: dict, by_reg) -> dict:
    """The tuning grid the sensitivity is read on (K, tasks, seeds) and the regularisers whose γ has the wider
    range (`sensitivity_by_regulariser` `by_reg`)."""
    return {"sens_K": tuning["K"], "sens_tasks": tuning["n_tasks"], "sens_seeds": listing(tuning["seeds"]),
            "sens_wider": listing(by_reg.regulariser[by_reg.wider])}


def tuned_glue(chosen, edge, paper_Ks) -> dict:
    """The tuned values per K (`tuned_values`' `chosen`, `edge`): the tables below the paper's K and at them, the
    steps between K, and the K tuned."""
    from IPython.display import Markdown

    from .formatting import table_md

    low = [k for k in chosen.columns if k < min(paper_Ks)]
    paper = [k for k in chosen.columns if k >= min(paper_Ks)]
    return {"tuning_K_table_low": Markdown(markdown(tuned_table(chosen, edge, low), ("left",) + ("right",) * len(low))),
            "tuning_K_table_paper": Markdown(markdown(tuned_table(chosen, edge, paper),
                                                      ("left",) + ("right",) * len(paper))),
            "tuning_K_steps": table_md(tuned_steps(chosen)), "tuning_Ks": listing(chosen.columns)}


def story_tables_glue(sf) -> dict:
    """The λ story's tables (`lambda_story.lambda_table`, and `setting_table` of the penalty along −g and of the
    final ACC)."""
    from IPython.display import Markdown

    from ..lab import lambda_story as L

    def md(table):
        return Markdown(markdown(table, ("right", "left") + ("right",) * (len(table.columns) - 2)))

    return {"story_lambda_table": md(L.lambda_table(sf)),
            "story_along_table": md(L.setting_table(sf, "frac_increase_along_g")),
            "story_acc_table": md(L.setting_table(sf, "final ACC", percent=False))}


def story_glue(prov: dict, rec: dict) -> dict:
    """The λ story's numbers: its file's provenance (`story_record` `prov`) and the paragraphs' figures
    (`story_numbers` `rec`)."""
    from IPython.display import Markdown

    return {"story_command": Markdown(code(prov["command"])), "story_commit": prov["commit"],
            "story_torch": prov["torch"], "story_minutes": prov["minutes"], "story_device": prov["device"],
            "story_streams": prov["streams"], "story_seeds": prov["seeds"], "story_unmeasured": prov["unmeasured"],
            "story_tuned_frac_lambda_pos": rec["tuned_frac_lambda_pos"],
            "story_tuned_frac_lambda_gt_gamma": rec["tuned_frac_lambda_gt_gamma"],
            "story_ratio_min": rec["ratio_min"], "story_ratio_max": rec["ratio_max"],
            "story_tuned_frac_step_against_g2": rec["tuned_frac_step_against_g2"],
            "story_zero_frac_step_against_g2": rec["zero_frac_step_against_g2"],
            "story_beta_frac_step_against_g2": rec["beta_frac_step_against_g2"],
            "story_zero_frac_increase": rec["zero_frac_increase"],
            "story_zero_frac_increase_along_g": rec["zero_frac_increase_along_g"],
            "story_tuned_frac_increase": rec["tuned_frac_increase"],
            "story_beta_frac_increase": rec["beta_frac_increase"], "story_within": rec["within"],
            "story_pairs": rec["pairs"], "story_higher": rec["higher"], "story_lower": rec["lower"],
            "story_seeds_n": rec["seeds_n"], "story_zero_acc_higher": rec["zero_acc_higher"]}
