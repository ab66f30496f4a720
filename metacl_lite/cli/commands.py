"""The users' commands: each takes the parsed options and calls the package (imported on use, so that --help and a
bad option answer at once, before torch loads)."""
from __future__ import annotations

import sys

from ..errors import UserError
from .options import omega_options_of, plan_of


def _assignments(a) -> int:
    from ..course import assignments as A

    if a.acmd == "list":
        for name in A.list_assignments():
            print(f"{name}\t{A.source_path(name).relative_to(A.REPO_ROOT)}")
        return 0
    if a.acmd == "generate":
        from ..course.grading import full_name

        names = [full_name(n) for n in a.names] or A.list_assignments()  # a1 as grade takes it; unknown: before work
        if a.pages_only or a.check:  # --check only compares the pages: it never replaces dist/
            changed = A.update_pages(names, check=a.check)
            for n in changed:
                print(("stale: " if a.check else "wrote ") + f"book/assignments/{n}.ipynb")
            if a.check and changed:
                print("run `python -m metacl_lite assignments generate --pages-only`", file=sys.stderr)
                return 1
            return 0
        dist = A.check_dist(A.nonempty_path(a.dist, "--dist") if a.dist is not None else A.DIST_DIR)  # before work
        for n in names:
            out = A.generate(n, dist, run_tests=not a.no_run_tests)
            print(f"{n}: student {out['student']}\n{' ' * len(n)}  instructor {out['solution']}"
                  f"\n{' ' * len(n)}  autograder {out['autograder']}")
        for n in A.update_pages(names):
            print(f"wrote book/assignments/{n}.ipynb")
        return 0
    if getattr(a, "run", None):  # grade, kit: their modules' commands
        return a.run(a)
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        notebook = a.notebook
        if notebook.suffix == ".zip":  # an otter export, as `grade` takes it: its one notebook is checked
            from ..course.submissions import notebook_bytes
            (notebook := Path(tmp) / notebook.with_suffix(".ipynb").name).write_bytes(notebook_bytes(a.notebook))
        results = A.check(notebook, a.question)
    print(results.summary(public_only=True))
    for q, score, possible in A.score_table(results):
        print(f"{q}: {score:g} / {possible:g}")
    print(f"total: {results.total:g} / {results.possible:g}")
    print("visible tests only: the grade adds hidden tests, worth more (each question says its points)")
    return 0 if results.total == results.possible else 1  # tells a script whether every visible test passed


def spelled(text: str) -> str:
    """`text` as stdout will show it: what its encoding cannot write spelled as the command line spells it
    (`cli.ASCII_SPELLING`, the "metacl-spell" error handler), so that a table padded after this stays aligned."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        return text.encode(enc, "metacl-spell").decode(enc)
    except LookupError:  # an encoding Python does not know: plain ASCII
        return text.encode("ascii", "metacl-spell").decode("ascii")


# Commands
def _run(a) -> int:
    from ..lab.grid import run_grid, run_request
    from ..report.tables import format_table

    seeds = a.seed_list if a.seed_list is not None else list(range(a.seeds))
    req = run_request(a.benchmark, a.K, seeds=seeds, methods=a.methods, out=a.out, n_tasks=a.n_tasks,
                      epochs=a.epochs, source=a.data, show_progress=False if a.no_progress else None, force=a.force,
                      weights=a.weights, random_init=a.random_init, plan=plan_of(a), compile=a.compile,
                      options=omega_options_of(a), gamma=a.gamma, redo=a.redo or (), device=a.device,
                      precision=a.precision, optimizer_state=a.optimizer_state)
    res = run_grid(req)
    print(format_table(res, spell=spelled))
    return 0


def _table(a) -> int:
    if not a.results.exists():  # before importing torch (lab.store): a typo is told at once
        raise UserError(f"{a.results} not found; make it with `python -m metacl_lite run ...`")
    from ..lab import store
    from ..report.tables import format_table

    print(format_table(store.load_results(a.results), a.format, spelled))
    return 0


def _tune(a) -> int:
    from ..lab.lattice import BETA_GRID, GAMMA_GRID, WINDOW
    from ..lab.tuning import TUNING_SEEDS, tune_grid, tune_request
    if a.window is not None and a.around is None:
        raise UserError("--window sets the width of an --around search; give --around K too")
    if a.window is not None and a.window > 8:  # 10^4 times the centre each way: past that, no float holds the grid
        raise UserError(f"--window {a.window}: at most 8 half-decades each side of the centre (default {WINDOW})")
    if a.around is not None and (a.beta_grid or a.gamma_grid):
        raise UserError("--beta-grid and --gamma-grid set a full grid; an --around search makes its own window "
                        "(--window): give one or the other")

    write = True if a.write_hparams else (False if a.no_write else None)
    req = tune_request(a.benchmark, a.K, n_tasks=a.n_tasks, seeds=a.seed_list or TUNING_SEEDS, methods=a.methods,
                       out=a.out, write_hparams=write, show_progress=False if a.no_progress else None,
                       beta_grid=a.beta_grid or BETA_GRID, gamma_grid=a.gamma_grid or GAMMA_GRID, epochs=a.epochs,
                       weights=a.weights, random_init=a.random_init, force=a.force, plan=plan_of(a),
                       compile=a.compile, options=omega_options_of(a), around=a.around, window=a.window or WINDOW,
                       device=a.device, precision=a.precision)
    res = tune_grid(req)
    for m, v in res["chosen"].items():
        print(f"{m:20s} {v}" + ("   (at the edge of the grid: extend it)" if res["at_edge"].get(m) else ""))
    for m, g in res["grid"].items():
        if m in req.methods and g["complete"] and m not in res["chosen"]:
            print(f"{m:20s} every {g['param']} scored {g['mean_val_acc'][0]:.4f}: the grid decided nothing, none written")
    print(("hparams.json updated" if res["hparams_written"] else "hparams.json not changed")
          + ("" if res["canonical"] else " (not the default tuning protocol; --write-hparams writes it)"))
    return 0


def _choices(a) -> int:
    from ..lab import choices as CH

    if a.device is not None and a.executor != "ray":  # a GPU that is not there: refused before any line is printed
        from ..accel.device import resolve                   # or unit trained (Ray: the cluster's GPUs, checked by tune)
        resolve(a.device)

    for flag, given in (("--compile", a.compile != "off"), ("--precision", a.precision != "float32")):
        if given:  # its alternatives and their tunings train eagerly in float32, as the files they are compared with
            raise UserError(f"{flag} does not apply to choices (its alternatives train eagerly in float32, like the "
                            f"tunings they are compared with); drop it")
    Ks = a.K or list(CH.DECISION_KS)
    bad = [K for K in Ks if K not in CH.DECISION_KS]
    if bad:
        raise UserError(f"--K {','.join(map(str, bad))}: the open choices are decided at K = "
                        f"{', '.join(map(str, CH.DECISION_KS))} only (nothing would read tunings at other K)")
    if not a.summary_only:
        for K in Ks:
            CH.execute(a.benchmark, K, plan_of(a), show_progress=False if a.no_progress else None, device=a.device)
    doc = CH.write_summary(a.benchmark, CH.choices_command(a.benchmark, CH.DECISION_KS))  # decided at every decision K
    for r, d in doc["decisions"].items():
        print(f"{r:4s} {d['decision']}" + (f" (missing: {', '.join(d['missing'])})" if d.get("missing") else
                                           f" (candidate: {d['candidate']}; margin over base per K: "
                                           + ", ".join(f"K={K}: {m:+.2f}" for K, m in d["margin_over_base"].items())
                                           + ")"))
    print(f"wrote {CH.relative_to_repo(CH.summary_file(a.benchmark))}")
    if not any(d["decision"] == "undecided" for d in doc["decisions"].values()):
        t = CH.apply(a.benchmark, doc, plan_of(a), show_progress=False if a.no_progress else None, device=a.device)
        if t is not None:
            print(f"hparams.json: the decided options, and the K={t['K']} values of its canonical tuning file "
                  f"(made from the winning alternatives' units, nothing trained again)")
    return 0


def _notebook(a) -> int:
    from ..publish.notebooks import run_cli
    for path in run_cli(a.notebook, a.param, a.grid, a.out_dir):
        print(path)
    return 0


def _dynamics(a) -> int:
    from ..lab.dynamics import default_file, dynamics_request, measure_request
    out = a.out or default_file()
    seeds = a.seed_list if a.seed_list is not None else list(range(a.seeds))
    measure_request(dynamics_request(seeds, {"speed": a.speed, "angles": a.angles}, out=out, force=a.force,
                                     show_progress=True, threads=a.threads))
    print(f"wrote {out}", file=sys.stderr)
    return 0


COMMANDS = {"run": _run, "table": _table, "tune": _tune, "choices": _choices, "notebook": _notebook,
            "assignments": _assignments, "dynamics": _dynamics}
