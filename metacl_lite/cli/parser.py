"""The users' command line's parser: every command, every flag and its help."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..vocab import BUDGET_OPTIONS, OPTIONS, Count
from .options import (BENCHMARKS, choice_options, executor_options, float_list, int_list, items_of, method_list,
                      option_flag, out_path, positive, seed_count, seed_list)


def redo_list(text: str) -> list[str]:
    """--redo: methods (or 'oracle'), checked as a list under its own name first."""
    items_of(text, "--redo")
    return method_list(text, ("oracle",))


#: How the command line reads a budget's value, by the kind of its declared check: a `Count` as a positive integer
#: (1.5, 1.0 and 0 refused, naming the flag).
BUDGET_TYPE = {Count: positive}


def budget_options(p: argparse.ArgumentParser) -> None:
    """One flag per budget of the vocabulary (`vocab.BUDGET_OPTIONS`: the memory's M), with its declared help; None
    here: a budget not given is its declared default, and one given to a run none of whose methods reads it is refused
    (`lab.checks.check_options`)."""
    for name in BUDGET_OPTIONS:
        o, flag = OPTIONS[name], option_flag(OPTIONS[name])
        p.add_argument(flag, type=BUDGET_TYPE[type(o.check)](flag), default=None,
                       help=f"{o.help} (default {o.default})")


#: The maintainers' tools, which `python -m metacl_lite.tools` runs (the users' command line ran them once).
TOOLS = ("bench", "pages", "readme", "where", "gpu-check", "browser-check")


class Parser(argparse.ArgumentParser):
    """The users' command line's parser: a maintainers' tool asked of it is refused with the command that runs it."""

    def error(self, message: str):
        asked = next((t for t in TOOLS if f"invalid choice: '{t}'" in message), None)
        if asked:
            message = f"{message}; {asked} is a maintainers' tool: run it as `python -m metacl_lite.tools {asked} ...`"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m metacl_lite",
                                description="MetaCL (AAAI 2020) reproduction: run, tabulate, tune, decide choices, notebooks, assignments.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for command in (run_parser, table_parser, tune_parser, choices_parser, notebook_parser, dynamics_parser,
                    assignments_parser):
        command(sub)
    return p


def run_parser(sub) -> None:
    """`run`: methods x seeds (+ references and oracle) into a results file (`lab.grid`)."""
    r = sub.add_parser("run", help="run methods x seeds (+ references and oracle) and write a results file")
    r.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    r.add_argument("--K", required=True, type=positive("K"), help="training images per class (first K)")
    r.add_argument("--seeds", type=seed_count("--seeds"), default=5, help="run seeds 0..N-1 (default 5, as the committed files)")
    r.add_argument("--seed-list", type=seed_list, default=None, help="explicit comma-separated seeds (overrides --seeds)")
    r.add_argument("--methods", type=method_list, default=None, help="comma-separated methods (default: the paper's eleven)")
    r.add_argument("--n-tasks", type=positive("--n-tasks"), default=None, help="shorter stream (default: paper's)")
    r.add_argument("--epochs", type=positive("--epochs"), default=None, help="epochs per task (default: paper's)")
    r.add_argument("--data", default="auto", choices=("auto", "embedded", "raw"), help="MNIST source")
    r.add_argument("--out", type=out_path(), default=None, help="results file (default results/<benchmark>-K<K>.json)")
    r.add_argument("--force", action="store_true", help="start over, discarding what --out holds")
    r.add_argument("--redo", type=redo_list, default=None, metavar="METHODS",
                   help="discard the finished runs of these methods (or 'oracle': the joint-training units) in --out "
                        "and train them again (e.g. after retuning); the file records what was discarded")
    r.add_argument("--weights", default=None, help="cub: ImageNet ResNet-18 weights file (default: torch hub cache)")
    r.add_argument("--random-init", action="store_true", help="cub: train ResNet-18 from random init (recorded)")
    r.add_argument("--gamma", choices=("beta", "0"), default=None,
                   help="a control run of MetaCL-lambda methods: gamma = the tuned beta of the MetaCL-beta counterpart, "
                        "or gamma = 0 (the pure projection); default out results/<benchmark>-K<K>-control-gamma-<X>.json")
    r.add_argument("--optimizer-state", choices=("task", "stream"), default="task",
                   help="Adam's state: new for each task (default, the protocol of every committed file) or kept over "
                        "the stream (as Avalanche keeps it); recorded")
    r.add_argument("--no-progress", action="store_true", help="no progress bars (papermill, CI)")
    choice_options(r)
    budget_options(r)
    executor_options(r)


def table_parser(sub) -> None:
    """`table`: a results file beside the paper's table."""
    t = sub.add_parser("table", help="print a results file beside the paper's table")
    t.add_argument("results", type=Path)
    t.add_argument("--format", choices=("text", "md"), default="text")


def tune_parser(sub) -> None:
    """`tune`: β/γ chosen on a validation split (`lab.tuning`)."""
    u = sub.add_parser("tune", help="choose beta/gamma on a validation split (never the test set)")
    u.add_argument("--benchmark", default="pmnist", choices=BENCHMARKS)
    u.add_argument("--K", type=positive("K"), default=None,
                   help="default: the benchmark's tuning K (20; cub 10), whose values every K uses; another K stores "
                        "values for that K only")
    u.add_argument("--methods", type=method_list, default=None,
                   help="methods with a beta or gamma (default: the paper's nine; with a budget such as --memory, the "
                        "methods with a gamma that read it)")
    u.add_argument("--n-tasks", type=positive("--n-tasks"), default=None, help="tasks in the tuning stream (default: the benchmark's full stream, 20 for pmnist)")
    u.add_argument("--epochs", type=positive("--epochs"), default=None)
    u.add_argument("--seed-list", type=seed_list, default=None, help="tuning seeds (default 100,101)")
    u.add_argument("--beta-grid", type=float_list("--beta-grid"), default=None)
    u.add_argument("--gamma-grid", type=float_list("--gamma-grid"), default=None)
    u.add_argument("--weights", default=None)
    u.add_argument("--random-init", action="store_true")
    u.add_argument("--out", type=out_path(), default=None,
                   help="default: results/tuning-<benchmark>-K<K>.json for the default protocol, "
                        "runs/tuning-...-<hash>.json for any other")
    u.add_argument("--around", type=positive("--around"), default=None, metavar="K",
                   help="search each method in a window of half-decades centred on its value tuned at this K "
                        "(hparams.json), extended where the best value is on an edge, instead of the whole grid")
    u.add_argument("--window", type=positive("--window"), default=None,
                   help="half-decades searched on each side of the centre with --around (default 2)")
    u.add_argument("--force", action="store_true", help="start over, discarding what --out holds")
    w = u.add_mutually_exclusive_group()
    w.add_argument("--write-hparams", action="store_true",
                   help="write the chosen values to hparams.json even when the protocol is not the default one")
    w.add_argument("--no-write", action="store_true", help="never update hparams.json")
    u.add_argument("--no-progress", action="store_true")
    choice_options(u)
    budget_options(u)
    executor_options(u)


def choices_parser(sub) -> None:
    """`choices`: the paper's open choices about Ω decided on validation data (`lab.choices`)."""
    c = sub.add_parser("choices", help="decide the paper's open choices about Omega on validation data (tunes every "
                                       "alternative at each K, resumable) and write results/open-choices-<benchmark>.json")
    c.add_argument("--benchmark", default="pmnist", choices=BENCHMARKS)
    c.add_argument("--K", type=int_list("--K"), default=None,
                   help="which decision K to run now, in order (default 20,200; the tuning K first); the decision "
                        "always needs both")
    c.add_argument("--summary-only", action="store_true", help="run nothing; rewrite the summary from the files")
    c.add_argument("--no-progress", action="store_true")
    executor_options(c)


def notebook_parser(sub) -> None:
    """`notebook`: a parameterised chapter run with papermill."""
    n = sub.add_parser("notebook", help="run a parameterised chapter with papermill (checked parameters)")
    n.add_argument("notebook", type=Path, help="a MyST (.md) or .ipynb chapter, e.g. book/reproduce/benchmark.md")
    n.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="a parameter (Python literal or string); repeatable")
    n.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2",
                   help="run the cross product of these values (repeatable), e.g. --grid K=20,50; one output each")
    n.add_argument("-o", "--out-dir", type=Path, default=Path("runs"), help="where executed notebooks go")


def assignments_parser(sub) -> None:
    """`assignments`: the course's assignments (list, generate, check, and the grading and kit commands)."""
    s = sub.add_parser("assignments", help="course assignments (otter-grader): list, generate, check, grade")
    ssub = s.add_subparsers(dest="acmd", required=True)
    ssub.add_parser("list", help="the assignments and their sources")
    sg = ssub.add_parser("generate", help="student + instructor versions (dist/assignments/) and the book pages; "
                                          "runs every test against the solutions first")
    sg.add_argument("names", nargs="*", help="assignments (default: all)")
    sg.add_argument("--dist", type=str, default=None, help="output folder (default dist/assignments)")
    sg.add_argument("--no-run-tests", action="store_true", help="do not run the tests against the solutions")
    sg.add_argument("--pages-only", action="store_true", help="only refresh the student pages in book/assignments")
    sg.add_argument("--check", action="store_true", help="only compare the book pages with the sources (implies "
                    "--pages-only; dist/ is left alone): exit 1 if a page is out of date")
    sc = ssub.add_parser("check", help="a student: run the visible tests on your notebook")
    sc.add_argument("notebook", type=Path)
    sc.add_argument("-q", "--question", default=None, help="one question (e.g. q2)")
    from ..course import grading, kit

    grading.add_parser(ssub), kit.add_parser(ssub)


def dynamics_parser(sub) -> None:
    """`dynamics`: the training logs of claims 5 and 6 (Figs. 4 and 5), results/dynamics-pmnist.json
    (`lab.dynamics`)."""
    from ..lab.dynamics import DEFAULT_SEEDS, STREAMS

    def stream(kind):
        def conv(text: str) -> dict:
            try:
                K, n = (int(x) for x in text.split(":"))
            except ValueError:
                raise argparse.ArgumentTypeError(f"--{kind} {text!r}: write K:n_tasks, e.g. 20:10") from None
            if K < 1 or n < 2:
                raise argparse.ArgumentTypeError(f"--{kind} {text!r}: K >= 1 and at least 2 tasks")
            return {**STREAMS[kind], "K": K, "n_tasks": n}
        return conv

    d = sub.add_parser("dynamics", help="train the streams of claims 5 and 6 (learning speed, gradient angles) and "
                                        "write their logs (default results/dynamics-pmnist.json)")
    d.add_argument("--seeds", type=seed_count("--seeds"), default=DEFAULT_SEEDS,
                   help=f"run seeds 0..N-1 (default {DEFAULT_SEEDS})")
    d.add_argument("--seed-list", type=seed_list, default=None, help="explicit comma-separated seeds")
    for kind in STREAMS:
        d.add_argument(f"--{kind}", type=stream(kind), default=STREAMS[kind], metavar="K:N_TASKS",
                       help=f"the {kind} stream (default {STREAMS[kind]['K']}:{STREAMS[kind]['n_tasks']})")
    d.add_argument("--out", type=out_path(), default=None, help="default results/dynamics-pmnist.json")
    d.add_argument("--force", action="store_true", help="start over, discarding what --out holds")
    d.add_argument("--threads", type=positive("--threads"), default=1, help="torch intra-op threads (default 1)")
