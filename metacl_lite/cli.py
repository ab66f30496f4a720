"""Command line: `python -m metacl_lite {run,table,tune,choices,dynamics,notebook,assignments} ...` (see --help of
each); the maintainers' tools (pages, readme, bench, where, the GPU and browser checks) are `python -m metacl_lite.tools`.

This is the only module that knows the flag names: it checks every option before any work, turns the typed errors of
the lower modules into one line on stderr with the fix (exit status 2, no traceback), and writes the command lines
recorded in results files. Anything else (a bug) keeps its traceback.
"""
from __future__ import annotations

import argparse
import re
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from .errors import ConfigMismatch, CorruptUnit, LockedError, NotebookFailed, UnitsFailed, UserError
from .data.specs import BENCHMARKS, get_spec

#: `device.PRECISIONS`, spelled out: importing device.py would load torch before every command (a test keeps the two
#: equal)
PRECISIONS = ("float32", "tf32")


# Option types: checked by argparse, so a bad value exits 2 with the option named, before anything is imported
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


def _items(text: str, name: str) -> list[str]:
    items = [s.strip() for s in text.split(",")]
    if not text.strip() or any(not s for s in items):
        raise argparse.ArgumentTypeError(f"{name} takes a comma-separated list without empty items, got {text!r}")
    dup = sorted({s for s in items if items.count(s) > 1})
    if dup:
        raise argparse.ArgumentTypeError(f"{name}: {', '.join(dup)} given twice")
    return items


def _number_list(name: str, what: str, convert, ok=lambda v: True):
    """An argparse type: a comma-separated list of numbers (`convert` each; `ok` says which are allowed)."""
    def conv(text: str) -> list:
        out = []
        for s in _items(text, name):
            try:
                v = convert(s)
            except ValueError:
                v = None
            if v is None or not ok(v):
                raise argparse.ArgumentTypeError(f"{name}: {s!r} is not {what}")
            out.append(v)
        return out
    return conv


_seed_list = _number_list("--seed-list", "a non-negative integer", int, lambda v: v >= 0)


def _int_list(name):
    return _number_list(name, "a positive integer", int, lambda v: v > 0)


def _float_list(name):
    return _number_list(name, "a number", float)


def _positive_finite(name):
    def conv(text: str) -> float:  # a results file must be able to hold it: JSON has no inf or NaN
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not 0 < v < float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number > 0, got {text!r}")
        return v
    return conv


def _method_list(text: str, extra: tuple = ()) -> list[str]:
    from .training import METHODS

    items = _items(text, "--methods")
    bad = [m for m in items if m not in [*METHODS, *extra]]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown method {bad[0]!r}; choose from: {', '.join([*METHODS, *extra])}")
    return items


# The parser
def _device(text: str) -> str:
    text = text.strip()
    if text in ("auto", "cpu", "cuda") or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"--device {text!r}: choose auto, cpu, cuda or cuda:N")


def _device_option(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--device", type=_device, default=None,
                   help=help or "auto, cpu, cuda or cuda:N (default: cpu for pmnist, whose committed files were made "
                                "on the CPU; auto for cifar100 and cub); recorded in the file, which refuses units "
                                "from another device kind, GPU model or CPU kernels (cpu_kernels, torch's version)")


def _executor_options(p: argparse.ArgumentParser) -> None:
    _placement_options(p)
    p.add_argument("--compile", choices=("auto", "on", "off"), default="off",
                   help="compiled task gradients (torch.compile): auto compiles runs long enough to repay it; "
                        "compiled runs agree with eager ones within float rounding, not bit for bit (default off)")
    _precision_option(p)


def _placement_options(p: argparse.ArgumentParser) -> None:
    """Where the units train: the device, the worker processes and threads, the executor."""
    _device_option(p)
    p.add_argument("--workers", type=_positive("--workers"), default=None,
                   help="worker processes (default: the number of cores; on a GPU at most 8, sharing the card, and "
                        "no more than fit in its free memory; 1 runs every unit in this process)")
    p.add_argument("--threads", type=_positive("--threads"), default=None,
                   help="intra-op threads per worker (default 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local worker processes, or Ray tasks (pip install 'metacl-lite[cluster]')")
    p.add_argument("--address", default=None, help="ray: the cluster's address (default: a local Ray instance)")
    p.add_argument("--gpu-share", type=float, default=None, metavar="F",
                   help="ray on GPUs: the fraction of a GPU each unit asks for (default: as many units as fit in a "
                        "card's memory, at most 8)")


def _precision_option(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help=help or "matrix products and convolutions: float32 (default), or tf32 on a GPU (tensor "
                                "cores: faster, other numbers; recorded in the file, which refuses units of the other "
                                "precision)")


def _choice_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--omega-accumulate", choices=("sum", "latest"), default=None,
                   help="Omega across tasks: summed (default) or the latest task's only")
    p.add_argument("--omega-normalise", choices=("none", "max", "minmax"), default=None,
                   help="each task's Omega: as is (default), divided by its maximum, or min-max scaled to [0, 1]")
    p.add_argument("--pi-xi", type=_positive_finite("--pi-xi"), default=None, help="PI's damping xi (default 0.1)")


def _options(a) -> dict:
    return {k: v for k, v in (("omega_accumulate", a.omega_accumulate), ("omega_normalise", a.omega_normalise),
                              ("pi_xi", a.pi_xi)) if v is not None}


def _where(a) -> str:
    """Where this command trains: its --device, else the benchmark's default, resolved (exit 2 for a missing GPU)."""
    from .accel.device import resolve

    return resolve(a.device or get_spec(_benchmark(a)).device)


def _benchmark(a) -> str:
    return getattr(a, "benchmark", None) or getattr(a, "suite", "pmnist")


def _plan(a):
    from .accel.device import kind
    from .lab.executors import check_plan, default_workers

    workers, cores = a.workers, default_workers()
    if a.executor != "ray" and (workers is None or workers > cores):
        where = _where(a)
        if workers is None:
            workers = default_workers(kind(where) == "cuda", _benchmark(a), where)
        elif kind(where) != "cuda":  # more local CPU workers than cores: each would wait for the others
            raise UserError(f"--workers {workers}: this machine has {cores} cores, and a local grid on the CPU runs "
                            f"at most one worker per core; give --workers {cores} or fewer (or --executor ray)")
    return check_plan(a.executor, workers, a.threads, a.address, a.gpu_share)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m metacl_lite",
                                description="MetaCL (AAAI 2020) reproduction: run, tabulate, tune, decide choices, notebooks, assignments.")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="run methods x seeds (+ references and oracle) and write a results file")
    r.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    r.add_argument("--K", required=True, type=_positive("K"), help="training images per class (first K)")
    r.add_argument("--seeds", type=_positive("--seeds"), default=5, help="run seeds 0..N-1 (default 5, as the committed files)")
    r.add_argument("--seed-list", type=_seed_list, default=None, help="explicit comma-separated seeds (overrides --seeds)")
    r.add_argument("--methods", type=_method_list, default=None, help="comma-separated methods (default: all eleven)")
    r.add_argument("--n-tasks", type=_positive("--n-tasks"), default=None, help="shorter stream (default: paper's)")
    r.add_argument("--epochs", type=_positive("--epochs"), default=None, help="epochs per task (default: paper's)")
    r.add_argument("--data", default="auto", choices=("auto", "embedded", "raw"), help="MNIST source")
    r.add_argument("--out", type=Path, default=None, help="results file (default results/<benchmark>-K<K>.json)")
    r.add_argument("--force", action="store_true", help="start over, discarding what --out holds")
    r.add_argument("--redo", type=lambda t: _method_list(t, ("oracle",)), default=None, metavar="METHODS",
                   help="discard the finished runs of these methods (or 'oracle': the joint-training units) in --out "
                        "and train them again (e.g. after retuning); the file records what was discarded")
    r.add_argument("--weights", default=None, help="cub: ImageNet ResNet-18 weights file (default: torch hub cache)")
    r.add_argument("--random-init", action="store_true", help="cub: train ResNet-18 from random init (recorded)")
    r.add_argument("--gamma", choices=("beta", "0"), default=None,
                   help="a control run of MetaCL-lambda methods: gamma = the tuned beta of the MetaCL-beta counterpart, "
                        "or gamma = 0 (the pure projection); default out results/<benchmark>-K<K>-control-gamma-<X>.json")
    r.add_argument("--no-progress", action="store_true", help="no progress bars (papermill, CI)")
    _choice_options(r)
    _executor_options(r)

    t = sub.add_parser("table", help="print a results file beside the paper's table")
    t.add_argument("results", type=Path)
    t.add_argument("--format", choices=("text", "md"), default="text")

    u = sub.add_parser("tune", help="choose beta/gamma on a validation split (never the test set)")
    u.add_argument("--benchmark", default="pmnist", choices=BENCHMARKS)
    u.add_argument("--K", type=_positive("K"), default=None,
                   help="default: the benchmark's tuning K (20; cub 10), whose values every K uses; another K stores "
                        "values for that K only")
    u.add_argument("--methods", type=_method_list, default=None, help="regularised methods (default: all nine)")
    u.add_argument("--n-tasks", type=_positive("--n-tasks"), default=None, help="tasks in the tuning stream (default: the benchmark's full stream, 20 for pmnist)")
    u.add_argument("--epochs", type=_positive("--epochs"), default=None)
    u.add_argument("--seed-list", type=_seed_list, default=None, help="tuning seeds (default 100,101)")
    u.add_argument("--beta-grid", type=_float_list("--beta-grid"), default=None)
    u.add_argument("--gamma-grid", type=_float_list("--gamma-grid"), default=None)
    u.add_argument("--weights", default=None)
    u.add_argument("--random-init", action="store_true")
    u.add_argument("--out", type=Path, default=None,
                   help="default: results/tuning-<benchmark>-K<K>.json for the default protocol, "
                        "runs/tuning-...-<hash>.json for any other")
    u.add_argument("--around", type=_positive("--around"), default=None, metavar="K",
                   help="search each method in a window of half-decades centred on its value tuned at this K "
                        "(hparams.json), extended where the best value is on an edge, instead of the whole grid")
    u.add_argument("--window", type=_positive("--window"), default=None,
                   help="half-decades searched on each side of the centre with --around (default 2)")
    u.add_argument("--force", action="store_true", help="start over, discarding what --out holds")
    w = u.add_mutually_exclusive_group()
    w.add_argument("--write-hparams", action="store_true",
                   help="write the chosen values to hparams.json even when the protocol is not the default one")
    w.add_argument("--no-write", action="store_true", help="never update hparams.json")
    u.add_argument("--no-progress", action="store_true")
    _choice_options(u)
    _executor_options(u)

    c = sub.add_parser("choices", help="decide the paper's open choices about Omega on validation data (tunes every "
                                       "variant at each K, resumable) and write results/open-choices-<benchmark>.json")
    c.add_argument("--benchmark", default="pmnist", choices=BENCHMARKS)
    c.add_argument("--K", type=_int_list("--K"), default=None,
                   help="which decision K to run now, in order (default 20,200; the tuning K first); the decision "
                        "always needs both")
    c.add_argument("--summary-only", action="store_true", help="run nothing; rewrite the summary from the files")
    c.add_argument("--no-progress", action="store_true")
    _executor_options(c)

    n = sub.add_parser("notebook", help="run a parameterised chapter with papermill (checked parameters)")
    n.add_argument("notebook", type=Path, help="a MyST (.md) or .ipynb chapter, e.g. book/reproduce/benchmark.md")
    n.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="a parameter (Python literal or string); repeatable")
    n.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2",
                   help="run the cross product of these values (repeatable), e.g. --grid K=20,50; one output each")
    n.add_argument("-o", "--out-dir", type=Path, default=Path("runs"), help="where executed notebooks go")

    _dynamics_parser(sub)
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
    from .course import grading, kit

    grading.add_parser(ssub), kit.add_parser(ssub)
    return p


def _assignments(a) -> int:
    from .course import assignments as A

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
    if getattr(a, "run", None):  # grade, kit: their modules' commands
        return a.run(a)
    results = A.check(a.notebook, a.question)
    print(results.summary(public_only=True))
    for q, score, possible in A.score_table(results):
        print(f"{q}: {score:g} / {possible:g}")
    print(f"total: {results.total:g} / {results.possible:g}")
    print("visible tests only: the grade adds hidden tests, worth more (each question says its points)")
    return 0 if results.total == results.possible else 1  # tells a script whether every visible test passed


# Commands
def _run(a) -> int:
    from .lab.grid import run_experiment
    from .report.tables import format_table

    seeds = a.seed_list if a.seed_list is not None else list(range(a.seeds))
    res = run_experiment(a.benchmark, a.K, seeds, a.methods, a.out, a.n_tasks, a.epochs, a.data,
                         show_progress=False if a.no_progress else None, force=a.force, weights=a.weights,
                         random_init=a.random_init, plan=_plan(a), compile=a.compile, options=_options(a),
                         gamma=a.gamma, redo=a.redo or (), device=a.device, precision=a.precision)
    print(format_table(res))
    return 0


def _table(a) -> int:
    from .lab import store
    from .report.tables import format_table

    if not a.results.exists():
        raise UserError(f"{a.results} not found; make it with `python -m metacl_lite run ...`")
    print(format_table(store.load_results(a.results), a.format))
    return 0


def _tune(a) -> int:
    from .lab.lattice import BETA_GRID, GAMMA_GRID, WINDOW
    from .lab.tuning import TUNING_SEEDS, tune
    if a.window is not None and a.around is None:
        raise UserError("--window sets the width of an --around search; give --around K too")

    write = True if a.write_hparams else (False if a.no_write else None)
    res = tune(a.benchmark, a.K, a.n_tasks, a.seed_list or TUNING_SEEDS, a.methods, a.out, write,
               show_progress=False if a.no_progress else None, beta_grid=a.beta_grid or BETA_GRID,
               gamma_grid=a.gamma_grid or GAMMA_GRID, epochs=a.epochs, weights=a.weights,
               random_init=a.random_init, force=a.force, plan=_plan(a), compile=a.compile, options=_options(a),
               around=a.around, window=a.window or WINDOW, device=a.device, precision=a.precision)
    for m, v in res["chosen"].items():
        print(f"{m:20s} {v}" + ("   (at the edge of the grid: extend it)" if res["at_edge"].get(m) else ""))
    print(("hparams.json updated" if res["hparams_written"] else "hparams.json not changed")
          + ("" if res["canonical"] else " (not the default tuning protocol; --write-hparams writes it)"))
    return 0


def _choices(a) -> int:
    from .lab import choices as CH

    if a.device is not None and a.executor != "ray":  # a GPU that is not there: refused before any line is printed
        from .accel.device import resolve                   # or unit trained (Ray: the cluster's GPUs, checked by tune)
        resolve(a.device)

    for flag, given in (("--compile", a.compile != "off"), ("--precision", a.precision != "float32")):
        if given:  # its variants and their tunings train eagerly in float32, as the files they are compared with
            raise UserError(f"{flag} does not apply to choices (its variants train eagerly in float32, like the "
                            f"tunings they are compared with); drop it")
    Ks = a.K or list(CH.DECISION_KS)
    bad = [K for K in Ks if K not in CH.DECISION_KS]
    if bad:
        raise UserError(f"--K {','.join(map(str, bad))}: the open choices are decided at K = "
                        f"{', '.join(map(str, CH.DECISION_KS))} only (nothing would read tunings at other K)")
    if not a.summary_only:
        for K in Ks:
            CH.execute(a.benchmark, K, _plan(a), show_progress=False if a.no_progress else None, device=a.device)
    doc = CH.write_summary(a.benchmark, CH.choices_command(a.benchmark, CH.DECISION_KS))  # decided at every decision K
    for r, d in doc["decisions"].items():
        print(f"{r:4s} {d['decision']}" + (f" (missing: {', '.join(d['missing'])})" if d.get("missing") else
                                           f" (candidate: {d['candidate']}; margin over base per K: "
                                           + ", ".join(f"K={K}: {m:+.2f}" for K, m in d["margin_over_base"].items())
                                           + ")"))
    print(f"wrote {CH.relative_to_repo(CH.summary_file(a.benchmark))}")
    if not any(d["decision"] == "undecided" for d in doc["decisions"].values()):
        t = CH.apply(a.benchmark, doc, _plan(a), show_progress=False if a.no_progress else None, device=a.device)
        if t is not None:
            print(f"hparams.json: the decided options, and the K={t['K']} values of its canonical tuning file "
                  f"(made from the winning variants' units, nothing trained again)")
    return 0


def _notebook(a) -> int:
    from .report.notebooks import run_cli
    for path in run_cli(a.notebook, a.param, a.grid, a.out_dir):
        print(path)
    return 0


def _dynamics_parser(sub) -> None:
    """`dynamics`: the training logs of claims 5 and 6 (Figs. 4 and 5), results/dynamics-pmnist.json
    (`lab.dynamics`)."""
    from .lab.dynamics import DEFAULT_SEEDS, STREAMS

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
    d.add_argument("--seeds", type=_positive("--seeds"), default=DEFAULT_SEEDS,
                   help=f"run seeds 0..N-1 (default {DEFAULT_SEEDS})")
    d.add_argument("--seed-list", type=_seed_list, default=None, help="explicit comma-separated seeds")
    for kind in STREAMS:
        d.add_argument(f"--{kind}", type=stream(kind), default=STREAMS[kind], metavar="K:N_TASKS",
                       help=f"the {kind} stream (default {STREAMS[kind]['K']}:{STREAMS[kind]['n_tasks']})")
    d.add_argument("--out", type=Path, default=None, help="default results/dynamics-pmnist.json")
    d.add_argument("--force", action="store_true", help="start over, discarding what --out holds")
    d.add_argument("--threads", type=_positive("--threads"), default=1, help="torch intra-op threads (default 1)")


def _dynamics(a) -> int:
    from .lab.dynamics import default_file, measure
    out = a.out or default_file()
    seeds = a.seed_list if a.seed_list is not None else list(range(a.seeds))
    measure(seeds, {"speed": a.speed, "angles": a.angles}, out=out, force=a.force, show_progress=True,
            threads=a.threads)
    print(f"wrote {out}", file=sys.stderr)
    return 0


COMMANDS = {"run": _run, "table": _table, "tune": _tune, "choices": _choices, "notebook": _notebook,
            "assignments": _assignments, "dynamics": _dynamics}


def _hint(e: UserError, a) -> str:
    """What to do next, in terms of this command's flags (the lower modules do not know them)."""
    from .lab.hparams import MissingHparams

    hint = ""
    if isinstance(e, ConfigMismatch):
        retuned = sorted(set(re.findall(r"method_(?:hparams|options)\[([^\]]+)\]", str(e))))
        hint = ((f"train the retuned methods again, keeping every other unit, with --redo {','.join(retuned)}; or "
                 if retuned and getattr(a, "cmd", None) == "run" else "")
                + "write elsewhere with --out FILE, or start over with --force (which discards what the file holds)")
    elif isinstance(e, MissingHparams):
        hint = (f"choose them first with `python -m metacl_lite tune --benchmark {a.benchmark}"
                + (f" --K {a.K}`" if getattr(a, "K", None) else "`"))
    elif isinstance(e, CorruptUnit) and e.section == "runs" and a.cmd == "run":
        hint = f"or train that method's runs again with --redo {e.key.split('/')[0]}"
    elif isinstance(e, LockedError):
        hint = "two runs may share a file only one write at a time; this one gave up waiting"
    return hint


def _out_of(a) -> Optional[str]:
    out = getattr(a, "out", None)
    return str(out) if out else None


def main(argv: Optional[list[str]] = None) -> int:
    return dispatch(build_parser().parse_args(argv), COMMANDS)


def dispatch(a, commands: dict[str, Callable[[Any], int]]) -> int:
    """Run `commands[a.cmd]`: a user's error is one line on stderr (exit 2, no traceback), failed units exit 1, a bug
    keeps its traceback (also for `python -m metacl_lite.tools`)."""
    try:
        return commands[a.cmd](a)
    except UserError as e:
        hint = _hint(e, a)
        print(f"error: {e}" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return 2
    except (UnitsFailed, NotebookFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if getattr(e, "user", False) else 1
    except BrokenPipeError:  # `table ... | head`: the reader went away; nothing to say, no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        return 141
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second press while this exits changes nothing
        if a.cmd in ("run", "tune", "choices"):
            print(f"\ninterrupted: every finished unit is saved{' in ' + _out_of(a) if _out_of(a) else ''}; run the "
                  f"same command again to resume", file=sys.stderr)
        else:
            print("\ninterrupted", file=sys.stderr)
        return 130
