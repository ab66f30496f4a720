"""The maintainers' commands (`python -m metacl_lite.tools`, parsed in `__init__`): each returns an exit status;
a user's error raises `UserError` (exit 2, one line, no traceback)."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable

from ..cli.options import plan_of, where_of
from ..paths import REPO_ROOT
from ..data.specs import get_spec
from ..errors import UserError


def _where_cmd(a) -> int:
    """Where the units of `run`/`tune`/`choices` with these options would train (`executors.locate`: on a Ray
    cluster, its GPUs), and how many share a GPU, on stdout; `--need-gpu WHO`: exit 2 (before anything else, as the
    make targets use it) where that is the CPU."""
    from ..accel.device import cpu_name, describe, kind
    from ..errors import UsageError
    from ..lab.executors import locate

    if a.need_gpu is not None and not a.need_gpu.strip():
        raise UsageError("--need-gpu '': WHO names what needs the GPU in the refusal, e.g. --need-gpu 'make "
                         "reproduce-cub'; an empty one would leave it unnamed")
    if a.need_gpu and a.device == "cpu":  # the advice below would be the option already given
        raise UsageError(f"{a.need_gpu} needs a CUDA GPU, and you chose --device cpu: give --device cuda (or auto) to "
                         f"check for a GPU, or leave out --need-gpu to train on the CPU")
    spec = get_spec(a.benchmark)
    choice = a.device or spec.device

    def check(where: Callable[[], Any]) -> Any:
        try:
            return where()
        except UsageError as e:  # a device that is not there
            raise UsageError(f"{a.need_gpu} needs a CUDA GPU: {e}") if a.need_gpu else e from None

    if a.executor != "ray":
        check(lambda: where_of(a))  # before the plan, which sizes itself by the GPU
    plan = plan_of(a)  # an executor that cannot start is its own error, not a missing GPU
    loc = check(lambda: locate(plan, choice, spec.name))
    if a.need_gpu and kind(loc.device) != "cuda":
        raise UsageError(
            f"{a.need_gpu} needs a CUDA GPU, and --device {choice} trains on the CPU ("
            + (f"{spec.title}'s default" if choice == "cpu"
               else "the Ray cluster has no live node with a GPU" if a.executor == "ray"
               else "no CUDA GPU is usable here")
            + (f"; {spec.title}'s grids take days on the CPU" if spec.device == "auto" else "")  # CIFAR-100, CUB
            + "): run it where a GPU is, or train on the CPU anyway with --device cpu (make: DEVICE=cpu)")
    gpu = kind(loc.device) == "cuda"
    place = loc.text or (describe(loc.device) if gpu else f"{cpu_name()}, {os.cpu_count()} cores")
    print(f"{spec.name}: units train on {loc.device}, {place}; "
          + ((f"each unit asks Ray for {plan.gpu_share:.4g} of a GPU" if gpu else "each unit asks Ray for one CPU")
             if a.executor == "ray" else
             f"{plan.workers} worker process(es)" + (f" sharing {loc.device}" if gpu
                                                     else f", {plan.threads} thread(s) each")))
    return 0


def _in_checkout(what: str) -> None:
    """The maintainers' tools that rewrite the README and the book's pages need the checkout they belong to."""
    from ..paths import IN_CHECKOUT, PACKAGE_DIR
    from ..errors import UsageError

    if not IN_CHECKOUT:
        raise UsageError(f"`{what}` rewrites files of a checkout of the metacl-lite repository (README.md, book/), and "
                         f"this metacl_lite is an installed package ({PACKAGE_DIR}): run it from a clone, installed "
                         "with `pip install -e .`")


def _pages(a) -> int:
    from ..publish.pages import write_pages

    _in_checkout("pages")
    check_stamped_files()
    check_tunings()
    stale = write_pages(check=a.check)
    for p in stale:
        print(("stale: " if a.check else "wrote ") + str(p))
    return 1 if a.check and stale else 0


def check_stamped_files() -> None:
    """Every file of results/ whose hash `pages` stamps into a page, read by its kind's reader (`store.check_any`):
    a file no reader could use (a null unit, a key given twice) is refused before any page names its hash."""
    from ..lab.dynamics import KIND as DYNAMICS, load_dynamics
    from ..lab.store import check_any
    from ..errors import check_not_deleted
    from ..publish.pages import PAGES, page_params, stamped_pages

    names = {n for ns in stamped_pages().values() for n in ns}
    names |= {page_params(stem)[2]["shows"].split(",")[0].removeprefix("results/") for stem in ["benchmark", *PAGES]}
    for name in sorted(names):
        path = REPO_ROOT / "results" / name
        check_not_deleted(path)
        other = check_any(path) if path.is_file() else None
        if isinstance(other, dict) and other.get("kind") == DYNAMICS:
            load_dynamics(path)


def check_tunings() -> None:
    """The tuning files hparams.json names, each there and choosing the value it holds (`hparams.check_sources`):
    the pages and the README show values whose origin must be in results/."""
    from ..lab import hparams as H

    H.check_sources(H.load())


def _readme(a) -> int:
    from ..publish.readme import update_readme

    _in_checkout("readme")
    check_tunings()
    stale = update_readme(check=a.check)
    if a.check and stale:
        print("README.md tables are out of date; run `python -m metacl_lite.tools readme`", file=sys.stderr)
        return 1
    return 0


def _bench(a) -> int:
    from ..lab.bench import bench_gpu, bench_multihead, bench_pmnist

    if a.device not in (None, "cpu"):
        for flag, given in (("--epochs", a.epochs), ("--n-tasks", a.n_tasks), ("--skip-grid", a.skip_grid),
                            ("--grids", a.grids is not None),
                            ("--K", a.K is not None), ("--skip-methods", a.skip_methods)):
            if given:  # each is a CPU-bench option; the GPU bench would ignore it
                raise UserError(f"{flag} does not apply with --device {a.device} (the GPU bench times the whole grid "
                                f"of --suite at its paper K, at full size); drop it")
        bench_gpu(a.suite, a.device, seeds=a.grid_seeds or 5,
                  measured_seeds=a.measured_seeds, workers=a.workers, methods=a.methods, compile=a.compile,
                  out=a.out, precision=a.precision)
        return 0
    for flag, given in (("--workers", a.workers), ("--measured-seeds", a.measured_seeds),
                        ("--precision", a.precision != "float32")):
        if given:
            raise UserError(f"{flag} applies to bench --device cuda only; drop it")
    if a.suite == "pmnist":
        for flag, given in (("--epochs", a.epochs), ("--n-tasks", a.n_tasks)):
            if given:  # the Table 1 grid is timed at full size on the CPU too
                raise UserError(f"{flag} applies to --suite cifar100/cub only (--suite pmnist times full runs); "
                                f"drop it")
        if a.skip_methods and a.methods:  # the grids are every method's; --methods picks the per-method runs
            raise UserError("--methods picks the per-method runs, which --skip-methods skips; drop it "
                            "(or --skip-methods)")
        return bench_pmnist(a.K or 20, a.methods, skip_grid=a.skip_grid, grids=a.grids or [20],
                            grid_seeds=a.grid_seeds or 3, compile=a.compile, skip_methods=a.skip_methods, out=a.out)
    for flag, given in (("--skip-methods", a.skip_methods), ("--compile", a.compile != "off")):
        if given:
            raise UserError(f"{flag} applies to --suite pmnist only (the {a.suite} suite times synthetic tensors "
                            f"per method); drop it")
    for flag, given in (("--K", a.K is not None), ("--grids", a.grids is not None), ("--grid-seeds", a.grid_seeds),
                        ("--skip-grid", a.skip_grid)):
        if given:  # the multi-head CPU bench would ignore each
            raise UserError(f"{flag} does not apply to bench --suite {a.suite} on the CPU (it times each method on "
                            f"synthetic tensors); drop it")
    return bench_multihead(a.suite, a.epochs, a.n_tasks, a.methods, out=a.out)


def _script(name: str) -> Callable[[Any], int]:
    """A subcommand that runs data_scripts/`name` in this interpreter with the options that follow it."""
    def run(a) -> int:
        path = REPO_ROOT / "data_scripts" / name
        if not path.exists():
            raise UserError(f"{path} is not here: the checks run from a checkout of the repository")
        return subprocess.call([sys.executable, str(path), *a.args], cwd=REPO_ROOT)
    return run


COMMANDS = {"where": _where_cmd, "pages": _pages, "readme": _readme, "bench": _bench,
            "gpu-check": _script("gpu_check.py"), "browser-check": _script("check_book_browser.py")}
