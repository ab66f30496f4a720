"""Command line: `python -m metacl_lite {run,table,tune,notebook,pages,readme,bench,assignments} ...` (see --help of each)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from .data import BENCHMARKS, DataError


def _seeds(a) -> list[int]:
    if a.seed_list:
        return [int(s) for s in a.seed_list.split(",") if s.strip()]
    if a.seeds <= 0:
        raise ValueError(f"--seeds must be a positive number of seeds, got {a.seeds}")
    return list(range(a.seeds))


def _positive(name):
    def conv(v):
        try:
            iv = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {v!r}")
        if iv <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {iv}")
        return iv
    return conv


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m metacl_lite",
                                description="MetaCL (AAAI 2020) reproduction: run, tabulate, tune, benchmark.")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="run methods x seeds (+ references and oracle) and write a results file")
    r.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    r.add_argument("--K", required=True, type=_positive("K"), help="training images per class (first K)")
    r.add_argument("--seeds", type=int, default=3, help="run seeds 0..N-1 (default 3)")
    r.add_argument("--seed-list", default=None, help="explicit comma-separated seeds (overrides --seeds)")
    r.add_argument("--methods", default=None, help="comma-separated methods (default: all eleven)")
    r.add_argument("--n-tasks", type=_positive("--n-tasks"), default=None, help="shorter stream (default: paper's)")
    r.add_argument("--epochs", type=_positive("--epochs"), default=None, help="epochs per task (default: paper's)")
    r.add_argument("--data", default="auto", choices=("auto", "embedded", "raw"), help="MNIST source")
    r.add_argument("--out", type=Path, default=None, help="results file (default results/<benchmark>-K<K>.json)")
    r.add_argument("--force", action="store_true", help="start over even if --out holds other results")
    r.add_argument("--weights", default=None, help="cub: ImageNet ResNet-18 weights file (default: torch hub cache)")
    r.add_argument("--random-init", action="store_true", help="cub: train ResNet-18 from random init (recorded)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars (papermill, CI)")

    t = sub.add_parser("table", help="print a results file beside the paper's table")
    t.add_argument("results", type=Path)
    t.add_argument("--format", choices=("text", "md"), default="text")

    u = sub.add_parser("tune", help="choose beta/gamma on a validation split (never the test set)")
    u.add_argument("--benchmark", default="pmnist", choices=BENCHMARKS)
    u.add_argument("--K", type=_positive("K"), default=None,
                   help="default 20 (cub: 10): the values every K uses; another K stores values for that K only")
    u.add_argument("--epochs", type=_positive("--epochs"), default=None)
    u.add_argument("--weights", default=None)
    u.add_argument("--random-init", action="store_true")
    u.add_argument("--n-tasks", type=_positive("--n-tasks"), default=10)
    u.add_argument("--seed-list", default="100,101")
    u.add_argument("--methods", default=None)
    u.add_argument("--out", type=Path, default=None)
    u.add_argument("--no-write", action="store_true", help="do not update hparams.json")
    u.add_argument("--no-progress", action="store_true")

    n = sub.add_parser("notebook", help="run a parameterised chapter with papermill (checked parameters)")
    n.add_argument("notebook", type=Path, help="a MyST (.md) or .ipynb chapter, e.g. book/reproduce/benchmark.md")
    n.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="a parameter (Python literal or string); repeatable")
    n.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2",
                   help="run the cross product of these values (repeatable), e.g. --grid K=20,50")
    n.add_argument("-o", "--out-dir", type=Path, default=Path("runs"), help="where executed notebooks go")

    g = sub.add_parser("pages", help="regenerate the book's reproduction pages from the template")
    g.add_argument("--check", action="store_true", help="exit 1 if a page is out of date, write nothing")

    m = sub.add_parser("readme", help="regenerate the README's result tables from the results files")
    m.add_argument("--check", action="store_true", help="exit 1 if the README is out of date, write nothing")

    b = sub.add_parser("bench", help="wall time and peak memory per method and for the whole grid")
    b.add_argument("--suite", default="pmnist", choices=("pmnist", "cifar100", "cub"),
                   help="pmnist: the real Table 1 grid; cifar100/cub: synthetic tensors of the real shapes")
    b.add_argument("--epochs", type=_positive("--epochs"), default=None, help="cifar100/cub: fewer epochs (CPU)")
    b.add_argument("--n-tasks", type=_positive("--n-tasks"), default=None, help="cifar100/cub: fewer tasks (CPU)")
    b.add_argument("--K", type=_positive("K"), default=20)
    b.add_argument("--methods", default=None)
    b.add_argument("--skip-grid", action="store_true", help="only the per-method runs")
    b.add_argument("--one", default=None, help=argparse.SUPPRESS)

    s = sub.add_parser("assignments", help="course assignments (otter-grader): list, generate, check, grade")
    ssub = s.add_subparsers(dest="acmd", required=True)
    ssub.add_parser("list", help="the assignments and their sources")
    sg = ssub.add_parser("generate", help="student + instructor versions (dist/assignments/) and the book pages; "
                                          "runs every test against the solutions first")
    sg.add_argument("names", nargs="*", help="assignments (default: all)")
    sg.add_argument("--dist", type=Path, default=None, help="output folder (default dist/assignments)")
    sg.add_argument("--no-run-tests", action="store_true", help="do not run the tests against the solutions")
    sg.add_argument("--pages-only", action="store_true", help="only refresh the student pages in book/assignments")
    sg.add_argument("--check", action="store_true", help="with --pages-only: exit 1 if a page is out of date")
    sc = ssub.add_parser("check", help="a student: run the visible tests on your notebook")
    sc.add_argument("notebook", type=Path)
    sc.add_argument("-q", "--question", default=None, help="one question (e.g. q2)")
    sr = ssub.add_parser("grade", help="the autograder: visible and hidden tests on a submitted notebook")
    sr.add_argument("notebook", type=Path)
    sr.add_argument("--dist", type=Path, default=None, help="where the autograders are (default dist/assignments)")
    return p


def _assignments(a) -> int:
    from . import assignments as A

    if a.acmd == "list":
        for name in A.list_assignments():
            print(f"{name}\t{A.source_path(name).relative_to(A.REPO_ROOT)}")
        return 0
    if a.acmd == "generate":
        names = a.names or A.list_assignments()
        for n in names:
            A.source_path(n)  # unknown names fail before any work
        if a.pages_only:
            changed = A.update_pages(names, check=a.check)
            for n in changed:
                print(("stale: " if a.check else "wrote ") + f"book/assignments/{n}.ipynb")
            if a.check and changed:
                print("run `python -m metacl_lite assignments generate --pages-only`", file=sys.stderr)
                return 1
            return 0
        dist = a.dist or A.DIST_DIR
        for n in names:
            out = A.generate(n, dist, run_tests=not a.no_run_tests)
            print(f"{n}: student {out['student']}\n{' ' * len(n)}  instructor {out['solution']}"
                  f"\n{' ' * len(n)}  autograder {out['autograder']}")
        for n in A.update_pages(names):
            print(f"wrote book/assignments/{n}.ipynb")
        return 0
    if a.acmd == "check":
        results = A.check(a.notebook, a.question)
        print(results.summary(public_only=True))
    else:
        results = A.grade(a.notebook, a.dist or A.DIST_DIR)
    for q, score, possible in A.score_table(results):
        print(f"{q}: {score:g} / {possible:g}")
    print(f"total: {results.total:g} / {results.possible:g}")
    if a.acmd == "check":  # the exit status tells a script whether every visible test passed
        return 0 if results.total == results.possible else 1
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        if a.cmd == "run":
            from .experiments import format_table, run_experiment

            methods = [m.strip() for m in a.methods.split(",")] if a.methods else None
            res = run_experiment(a.benchmark, a.K, _seeds(a), methods, a.out, a.n_tasks, a.epochs, a.data,
                                 show_progress=False if a.no_progress else None, force=a.force, weights=a.weights,
                                 random_init=a.random_init)
            print(format_table(res))
        elif a.cmd == "table":
            from .experiments import format_table, load_json

            if not a.results.exists():
                raise FileNotFoundError(f"{a.results} not found; make it with `python -m metacl_lite run ...`")
            print(format_table(load_json(a.results), a.format))
        elif a.cmd == "tune":
            from .experiments import TUNING_K, tune

            K = a.K or TUNING_K[a.benchmark]
            res = tune(a.benchmark, K, a.n_tasks, [int(s) for s in a.seed_list.split(",")],
                       a.methods.split(",") if a.methods else None, a.out, not a.no_write,
                       show_progress=False if a.no_progress else None, epochs=a.epochs, weights=a.weights,
                       random_init=a.random_init)
            for m, v in res["chosen"].items():
                print(f"{m:20s} {v}")
        elif a.cmd == "notebook":
            from .notebooks import declared_parameters, expand_grid, parse_value, run_notebook, validate

            if not a.notebook.exists():
                raise FileNotFoundError(f"notebook {a.notebook} not found")
            base = {k: parse_value(v) for k, v in a.param}
            runs = expand_grid(base, a.grid)
            defaults = declared_parameters(a.notebook)
            for params in runs:  # every combination is checked before any work starts
                validate(params, defaults)
            for params in runs:
                print(run_notebook(a.notebook, params, a.out_dir))
        elif a.cmd == "pages":
            from .notebooks import write_variants

            stale = write_variants(check=a.check)
            for p in stale:
                print(("stale: " if a.check else "wrote ") + str(p))
            if a.check and stale:
                return 1
        elif a.cmd == "readme":
            from .experiments import update_readme

            stale = update_readme(check=a.check)
            if a.check and stale:
                print("README.md tables are out of date; run `python -m metacl_lite readme`", file=sys.stderr)
                return 1
        elif a.cmd == "assignments":
            return _assignments(a)
        elif a.cmd == "bench":
            from .bench import main as bench_main

            return bench_main(a)
    except (ValueError, KeyError, DataError, FileNotFoundError, NotImplementedError, RuntimeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {msg}", file=sys.stderr)
        return 2
    return 0
