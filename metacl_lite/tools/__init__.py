"""The maintainers' tools, apart from the users' command line (`python -m metacl_lite`):

    python -m metacl_lite.tools {pages,readme,bench,where,gpu-check,browser-check} ...

`pages` regenerates the book's reproduction pages, `readme` the README's generated blocks, `bench` times the grids,
`where` says where a grid's units would train (the make targets' GPU check), `gpu-check` runs the GPU tests
(data_scripts/gpu_check.py) and `browser-check` the built book in headless Chromium
(data_scripts/check_book_browser.py). Options are checked as the users' commands check theirs, with the same
helpers (`metacl_lite.cli.options`), and a user's error exits 2 without a traceback.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # nothing imported with the package (see `build_parser`)
    import argparse


def build_parser() -> argparse.ArgumentParser:
    # imported here, not with the package: `python -m metacl_lite.tools` imports this package before its __main__,
    # whose guard turns a Ctrl-C in the first moments into one word instead of a traceback
    import argparse

    from ..cli.options import BENCHMARKS, placement_options

    p = argparse.ArgumentParser(prog="python -m metacl_lite.tools",
                                description="MetaCL reproduction, the maintainers' tools: pages, README, speed, "
                                            "placement, GPU and browser checks.")
    sub = p.add_subparsers(dest="cmd", required=True)

    w = sub.add_parser("where", help="say where a grid's units would train (device, GPU, how many share it), "
                                     "training nothing")
    w.add_argument("--benchmark", choices=BENCHMARKS, default="pmnist")
    placement_options(w)
    w.add_argument("--need-gpu", metavar="WHO", default=None,
                   help="exit 2 unless the units would train on a GPU; WHO (e.g. 'make reproduce-cub') names what "
                        "needs it in the message")

    g = sub.add_parser("pages", help="regenerate the book's reproduction pages from the template")
    g.add_argument("--check", action="store_true", help="exit 1 if a page is out of date, write nothing")

    m = sub.add_parser("readme", help="regenerate the README's result tables from the results files")
    m.add_argument("--check", action="store_true", help="exit 1 if the README is out of date, write nothing")

    bench_parser(sub)

    for name, script in (("gpu-check", "gpu_check.py"), ("browser-check", "check_book_browser.py")):
        sub.add_parser(name, help=f"run data_scripts/{script} (its own options follow; --help shows them)",
                       add_help=False)
    return p


def bench_parser(sub) -> None:
    """`bench`: the speed benchmark's options (`lab.bench`)."""
    from ..cli.options import BENCHMARKS, device_option, int_list, method_list, out_path, positive, precision_option

    b = sub.add_parser("bench", help="wall time and peak memory per method and for the whole grid")
    b.add_argument("--suite", default="pmnist", choices=BENCHMARKS,
                   help="pmnist: the real Table 1 grid; cifar100/cub: synthetic tensors of the real shapes")
    b.add_argument("--epochs", type=positive("--epochs"), default=None, help="cifar100/cub: fewer epochs (CPU)")
    b.add_argument("--n-tasks", type=positive("--n-tasks"), default=None, help="cifar100/cub: fewer tasks (CPU)")
    b.add_argument("--K", type=positive("K"), default=None, help="CPU bench: training images per class (default 20)")
    b.add_argument("--methods", type=method_list, default=None)
    skip = b.add_mutually_exclusive_group()
    skip.add_argument("--skip-grid", action="store_true", help="only the per-method runs")
    skip.add_argument("--skip-methods", action="store_true", help="pmnist: only the whole grids")
    b.add_argument("--grids", type=int_list("--grids"), default=None,
                   help="pmnist: the K of each whole grid to time (default 20; e.g. 20,500)")
    b.add_argument("--grid-seeds", type=positive("--grid-seeds"), default=None,
                   help="seeds per timed grid (default 3; with --device cuda 5, as the targets)")
    b.add_argument("--compile", choices=("auto", "on", "off"), default="off",
                   help="pmnist: compiled task gradients")
    device_option(b, help="default: the CPU (every --suite, the per-method runs and grids above); cuda, cuda:N or "
                           "auto: the whole grid of --suite at its paper K on a GPU, written to "
                           "results/bench-<suite>-cuda.json (refused where no GPU is usable)")
    precision_option(b, help="--device cuda: matrix products and convolutions in float32 (default) or tf32 (tensor "
                              "cores: faster, other numbers; recorded in the file)")
    b.add_argument("--workers", type=positive("--workers"), default=None,
                   help="--device cuda: units sharing the GPU (default 8, or fewer: the cores, and as many as fit "
                        "in the GPU's free memory)")
    b.add_argument("--out", type=out_path(), default=None,
                   help="where the figures go (default results/bench-pmnist-K<K>.json, results/bench-<suite>.json "
                        "for cifar100/cub, with --device cuda results/bench-<suite>-cuda.json; a partial run that "
                        "would replace a fuller file there is refused)")
    b.add_argument("--measured-seeds", type=positive("--measured-seeds"), default=None,
                   help="--device cuda: time this many of the --grid-seeds and scale to all (each seed is the same "
                        "work; the file says so)")


def main(argv: Optional[list[str]] = None) -> int:
    try:
        from ..cli import dispatch
        from .commands import COMMANDS

        p = build_parser()
        a, extra = p.parse_known_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the command line loads or the options are read: nothing started
        return interrupted()
    if a.cmd in ("gpu-check", "browser-check"):
        a.args = extra  # the script's own options, checked by its parser
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    return dispatch(a, COMMANDS)


def interrupted() -> int:
    """Ctrl-C before a command started: one word on stderr, exit 130, a second press ignored (as `cli.interrupted`,
    which may be the very import the press interrupted)."""
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("\ninterrupted", file=sys.stderr)
    return 130
