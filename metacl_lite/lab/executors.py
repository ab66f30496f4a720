"""Where the units of a grid run: in this process, in a pool of local worker processes, or on a Ray cluster.

Units are independent (each one seeds everything it uses), so they may run in any order and in any process; the
parent is the only writer of the results file and saves every unit as it arrives. A unit that fails is reported and
the others go on; a worker that dies loses only the unit it was running.

    serial     one unit after another in this process (workers=1; what tests and the book's live runs use)
    local      `workers` processes on this machine, `threads` intra-op threads each (default 1: small ops gain
               nothing from a second thread, and runs are independent, so one run per core is fastest)
    ray        Ray tasks (one CPU each) on the cluster at `address`, or on a local Ray instance when none is given
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from ..errors import UsageError

EXECUTORS = ("local", "ray")


@dataclass
class Failure:
    job: Any
    error: str


@dataclass
class Plan:
    """How to run: executor 'local' (serial when workers == 1) or 'ray'."""

    executor: str = "local"
    workers: int = 1
    threads: int = 1
    address: Optional[str] = None
    failures: list = field(default_factory=list)
    gpu_share: float = 0.0  # the fraction of a GPU each unit asks Ray for (`num_gpus`; 0: CPU units)


#: The most intra-op threads a worker may ask for: more than 4 per core only slows it down, and very large counts
#: crash torch's thread pool.
MAX_THREADS = 4 * (os.cpu_count() or 1)

#: Units that share one GPU by default: a unit of these small-batch streams keeps a GPU's launch queue busy for a
#: small part of the time (measured: `python -m metacl_lite bench --device cuda`), so several worker processes on one
#: card, or Ray tasks asking for 1/GPU_UNITS_PER_CARD of a GPU each, keep it busy.
GPU_UNITS_PER_CARD = 8


def unit_device(plan: Plan, where: str) -> str:
    """The device a unit of a run on `where` (`device.resolve`) trains on: on a GPU with Ray, each unit asks for
    1/GPU_UNITS_PER_CARD of a card (`plan.gpu_share`, unless set) and trains on the "cuda" Ray gives it; otherwise
    `where` itself."""
    from ..device import kind

    if kind(where) != "cuda" or plan.executor != "ray":
        return where
    plan.gpu_share = plan.gpu_share or 1.0 / GPU_UNITS_PER_CARD
    return "cuda"


def default_workers(gpu: bool = False, benchmark: Optional[str] = None, device: str = "cuda") -> int:
    """The cores this process may use; on a GPU, at most `GPU_UNITS_PER_CARD` worker processes sharing the card, and
    with `benchmark` no more than fit in the GPU's free memory (`gpu_fit`)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if not gpu:
        return cores
    n = min(cores, GPU_UNITS_PER_CARD)
    return n if benchmark is None else min(n, gpu_fit(benchmark, device))


#: The part of a GPU's free memory the default worker count plans to fill (the rest: allocator slack).
GPU_MEMORY_USE = 0.9
_said: set = set()


def gpu_fit(benchmark: str, device: str = "cuda") -> int:
    """How many units of `benchmark` fit side by side in the free memory of the GPU `device`: GPU_MEMORY_USE of it
    over the benchmark's memory per unit (`BenchmarkSpec.gpu_unit_gb`, an upper estimate), at least 1. Where that
    is below GPU_UNITS_PER_CARD it says so once (e.g. CUB on a 16 GB card: 2 workers)."""
    import torch

    from ..specs import get_spec

    spec = get_spec(benchmark)
    free = torch.cuda.mem_get_info(torch.device(device))[0]
    n = max(1, int(GPU_MEMORY_USE * free / (spec.gpu_unit_gb * 2 ** 30)))
    if n < GPU_UNITS_PER_CARD and (spec.name, device) not in _said:
        _said.add((spec.name, device))
        print(f"metacl-lite: {n} worker process(es) share {device} for {spec.title}: {free / 2 ** 30:.1f} GB free, "
              f"about {spec.gpu_unit_gb:g} GB per unit (an estimate); --workers N chooses another number",
              file=sys.stderr)
    return n


def check_plan(executor: str = "local", workers: Optional[int] = None, threads: Optional[int] = None,
               address: Optional[str] = None) -> Plan:
    """Check the options before any work: a known executor, positive counts, Ray importable and reachable."""
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    for name, v in (("workers", workers), ("threads", threads)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise UsageError(f"{name}={v!r} must be a positive integer")
    if threads is not None and threads > MAX_THREADS:
        raise UsageError(f"threads={threads}: at most {MAX_THREADS} intra-op threads per worker (this machine has "
                         f"{default_workers()} cores)")
    if address and executor != "ray":
        raise UsageError("an address is for the ray executor only")
    plan = Plan(executor, workers or (default_workers() if executor == "ray" else 1), threads or 1, address)
    if executor == "ray":
        _ray_init(plan)
    return plan


def _ray_init(plan: Plan) -> None:
    try:
        import ray
    except ImportError:
        raise UsageError("the ray executor needs Ray, which is not installed; install it with "
                         "`pip install 'metacl-lite[cluster]'` (or `pip install ray`)") from None
    if ray.is_initialized():
        return
    if plan.address and plan.address != "auto":
        _check_reachable(plan.address)
    try:
        if plan.address:
            ray.init(address=plan.address, log_to_driver=False, configure_logging=False)
        else:
            ray.init(num_cpus=plan.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"cannot reach a Ray cluster at {plan.address or 'a new local instance'}: {e}") from None


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A cluster address must answer a TCP connection within `timeout` s (Ray itself retries for minutes)."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"Ray address {address!r} is not HOST:PORT (or ray://HOST:PORT)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise UsageError(f"cannot reach a Ray cluster at {address}: {e}; check the address and that the head node "
                         f"is running (`ray start --head` prints it)") from None


def _init_worker(threads: int) -> None:
    import torch

    _die_with_parent()
    torch.set_num_threads(threads)


def _die_with_parent() -> None:
    """Linux: end this worker when its parent dies (a SIGKILLed `run` would otherwise leave its workers training,
    each holding its memory). Elsewhere nothing: the workers notice the broken pipe at their next unit."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _call(fn: Callable, job: Any, threads: int) -> Any:
    _init_worker(threads)
    return fn(job)


def run_all(fn: Callable[[Any], Any], jobs: Iterable[Any], on_result: Callable[[Any, Any], None], plan: Plan,
            progress: Optional[Callable[[], None]] = None) -> list[Failure]:
    """Run `fn(job)` for every job as `plan` says; call `on_result(job, result)` in this process as each one
    finishes (in completion order). Returns the failures (each job's exception as text); finished jobs are kept."""
    jobs = list(jobs)
    failures: list[Failure] = []

    def done(job, result=None, error=None):
        if error is None:
            on_result(job, result)
        else:
            failures.append(Failure(job, error))
        if progress:
            progress()

    if plan.executor == "local" and plan.workers == 1:
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(plan.threads)  # as in a worker; put back afterwards (a notebook's own setting)
        try:
            for job in jobs:  # in this process: exceptions (and Ctrl-C) propagate; a failed unit is a bug here
                done(job, fn(job))
        finally:
            torch.set_num_threads(before)
        return failures
    if plan.executor == "ray":
        import ray

        remote = ray.remote(num_cpus=1, num_gpus=plan.gpu_share)(_call)  # a GPU unit: a share of one card
        refs = {remote.remote(fn, job, plan.threads): job for job in jobs}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                job = refs.pop(ready[0])
                try:
                    done(job, ray.get(ready[0]))
                except ray.exceptions.RayError as e:
                    done(job, error=f"{type(e).__name__}: {e}")
        except KeyboardInterrupt:
            for r in refs:
                ray.cancel(r, force=True)
            raise
        return failures
    import multiprocessing

    pool = ProcessPoolExecutor(max_workers=min(plan.workers, max(len(jobs), 1)),
                               mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                               initargs=(plan.threads,))
    futures = {pool.submit(fn, job): job for job in jobs}
    try:
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                try:
                    result = f.result()
                except BrokenProcessPool as e:
                    done(futures[f], error=f"a worker process died ({e})")
                except Exception as e:  # the unit's own error, reported with its job
                    done(futures[f], error=f"{type(e).__name__}: {e}")
                else:
                    done(futures[f], result)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)  # the workers got the same SIGINT and stop too
        raise
    pool.shutdown()
    return failures
