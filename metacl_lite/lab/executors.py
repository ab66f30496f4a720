"""Where the units of a grid run: in this process, in a pool of local worker processes, or on a Ray cluster.

Units are independent (each one seeds everything it uses), so they may run in any order and in any process; the
parent is the only writer of the results file and saves every unit as it arrives. A unit that fails is reported and
the others go on; a worker that dies loses only the unit it was running.

    serial     one unit after another in this process (workers=1; what tests and the book's live runs use)
    local      `workers` processes on this machine, `threads` intra-op threads each (default 1: small ops gain
               nothing from a second thread, and runs are independent, so one run per core is fastest)
    ray        Ray tasks (one CPU each) on the cluster at `address`, or on a local Ray instance when none is given
Each is a class behind one interface (`Executor`; `EXECUTORS` by name); the Ray cluster itself is `cluster`'s.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional

from ..errors import UsageError
from .cluster import RAY_CPUS, UNKNOWN_MODEL, connect, ray_cpus, ray_gpu_models, ray_options

#: The executors a plan names (`Plan.executor`); the classes that run them: `EXECUTORS`.
CHOICES = ("local", "ray")


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
    gpu_share: float = 0.0  # the fraction of a GPU each unit asks Ray for (`num_gpus`; 0: CPU units), set by locate
    gpu_request: Optional[float] = None  # Ray: the share the user asked for (--gpu-share), instead of the sized one
    accelerator_type: Optional[str] = None  # Ray: the GPU model (Ray's accelerator_type) every unit is pinned to


#: The most intra-op threads a worker may ask for (more per core only slows it; very many crash torch's pool).
MAX_THREADS = 4 * (os.cpu_count() or 1)

#: Units that share one GPU by default (at most; fewer where they do not fit, `units_per_card`): a unit of these
#: small-batch streams keeps a GPU's launch queue busy a small part of the time (`python -m metacl_lite.tools bench
#: --device cuda`), so several worker processes on one card, or Ray tasks with a share of a GPU each, keep it busy.
GPU_UNITS_PER_CARD = 8


def unit_device(plan: Plan, where: str) -> str:
    """The device a unit of a run on `where` (`device.resolve`) trains on: on a GPU with Ray, each unit asks for
    `plan.gpu_share` of a card (set by `locate` from the card's memory; 1/GPU_UNITS_PER_CARD where nothing set it)
    and trains on the "cuda" Ray gives it; otherwise `where` itself."""
    from ..accel.device import kind

    if kind(where) != "cuda" or plan.executor != "ray":
        return where
    plan.gpu_share = plan.gpu_share or plan.gpu_request or 1.0 / GPU_UNITS_PER_CARD
    return "cuda"


class Location(NamedTuple):
    """Where a grid's units train: the resolved device (`device.resolve`: cpu, cuda or cuda:N), the GPU model that
    the results file records and refuses others of (None on the CPU), and the words for the file's provenance where
    this process cannot see the device (a Ray cluster's GPUs; None: this machine's, described as usual)."""

    device: str
    accelerator: Optional[str]
    text: Optional[str] = None


def locate(plan: Plan, choice: str, benchmark: Optional[str] = None) -> Location:
    """Where the units of a grid run by `plan` train, for the device option `choice` (auto, cpu, cuda, cuda:N),
    checked before any work (UsageError).

    Locally (and with Ray on the CPU): `device.resolve` and this machine's GPU. With `--executor ray` and a GPU: the
    cluster's GPUs, not this machine's (the machine that starts the grid may have none): "auto" is "cuda" when a live
    node has a GPU, "cuda" needs one, and "cuda:N" is refused (Ray places each unit on a GPU). A results file holds
    one GPU model, so the units are pinned to one (Ray's `accelerator_type`; where the cluster mixes models, the one
    with the most GPUs, said on stderr), and its full name is what a unit sees (one probe task on a share of a GPU).
    Every unit also reports the GPU it ran on, and a unit from another model is not saved (`grid.checked_units`).
    Each unit asks for 1/n of a GPU (`plan.gpu_share`; `plan.gpu_request` where the user chose it), n = as many of
    `benchmark`'s units as fit in the probed card's memory, at most GPU_UNITS_PER_CARD (`units_per_card`: the local
    default's rule). On the CPU with Ray, the text names the cluster's CPUs (the units' machines, not this one)."""
    from ..accel.device import accelerator, resolve

    choice = str(choice).strip()
    if plan.executor != "ray":
        where = resolve(choice)
        return Location(where, accelerator(where))
    if choice == "cpu":
        return _ray_cpu(plan, why="--device cpu")
    if choice.startswith("cuda:"):
        raise UsageError(f"--device {choice}: with --executor ray, Ray places each unit on one of the cluster's GPUs; "
                         f"use --device cuda")
    if choice not in ("auto", "cuda"):
        resolve(choice)  # the usual message for a device that is none
    models = ray_gpu_models()
    if not models:
        if choice == "auto":
            return _ray_cpu(plan, why="the Ray cluster has no live node with a GPU")
        raise UsageError("--device cuda: the Ray cluster has no live node with a GPU; add GPU nodes (`ray start "
                         "--address HEAD --num-gpus N`) or use --device cpu")
    model = max(sorted(models), key=lambda m: models[m])
    if len(models) > 1:
        counts = ", ".join(f"{m}: {models[m]:g}" for m in sorted(models))
        print(f"metacl-lite: the Ray cluster has GPUs of several models ({counts}); this grid's units run on {model} "
              f"only (a results file holds one GPU model)", file=sys.stderr)
    plan.accelerator_type = None if model == UNKNOWN_MODEL else model
    import ray

    plan.gpu_share = plan.gpu_request or 1.0 / GPU_UNITS_PER_CARD
    name, memory = ray.get(ray.remote(**ray_options(plan))(_gpu_probe).remote())
    if plan.gpu_request is None and benchmark is not None:
        plan.gpu_share = 1.0 / units_per_card(benchmark, memory, f"each {name}", "Ray units", "memory",
                                              hint="each unit asks Ray for that share of a GPU (num_gpus); "
                                                   "--gpu-share F chooses another")
    pinned = f" (units pinned to accelerator_type {model})" if plan.accelerator_type else ""
    return Location("cuda", name, f"ray cluster: {models[model]:g} GPU(s) of {name}{pinned}")


def _ray_cpu(plan: Plan, why: str) -> Location:
    """A Ray grid on the cluster's CPUs (`why`); a GPU share asked for (--gpu-share) would be ignored: refused."""
    if plan.gpu_request is not None:
        raise UsageError(f"--gpu-share {plan.gpu_request:g}: this grid's units train on the CPU ({why}) and ask Ray "
                         f"for no GPU; drop --gpu-share")
    return Location("cpu", None, RAY_CPUS.format(**ray_cpus()))


def _gpu_probe() -> tuple[str, int]:
    """What a unit on the cluster's GPU sees: the card's name and its memory in bytes."""
    import torch

    return torch.cuda.get_device_name(), torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory


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
    """How many units of `benchmark` fit side by side in the free memory of the GPU `device` (`units_per_card`)."""
    import torch

    free = torch.cuda.mem_get_info(torch.device(device))[0]
    return units_per_card(benchmark, free, device, "worker process(es)", "free",
                          hint="--workers N chooses another number")


def units_per_card(benchmark: str, memory: int, card: str, who: str, what: str, hint: str) -> int:
    """How many units of `benchmark` fit side by side in `memory` bytes of one GPU: GPU_MEMORY_USE of it over the
    benchmark's memory per unit (`BenchmarkSpec.gpu_unit_gb`, an upper estimate), at least 1 and at most
    GPU_UNITS_PER_CARD. Where that is below GPU_UNITS_PER_CARD it says so once on stderr, with `hint` (e.g. CUB on
    a 16 GB card: "2 worker process(es) share cuda ... 15.0 GB free"; `what`: free, or memory for the whole card)."""
    from ..data.specs import get_spec

    spec = get_spec(benchmark)
    n = min(GPU_UNITS_PER_CARD, max(1, int(GPU_MEMORY_USE * memory / (spec.gpu_unit_gb * 2 ** 30))))
    if n < GPU_UNITS_PER_CARD and (spec.name, card) not in _said:
        _said.add((spec.name, card))
        print(f"metacl-lite: {n} {who} share {card} for {spec.title}: {memory / 2 ** 30:.1f} GB {what}, "
              f"about {spec.gpu_unit_gb:g} GB per unit (an estimate); {hint}",
              file=sys.stderr)
    return n


def check_plan(executor: str = "local", workers: Optional[int] = None, threads: Optional[int] = None,
               address: Optional[str] = None, gpu_share: Optional[float] = None) -> Plan:
    """Check the options before any work: a known executor, positive counts, a GPU share in (0, 1] for Ray only, Ray
    importable and reachable."""
    if executor not in CHOICES:
        raise UsageError(f"unknown executor {executor!r}; choose one of {', '.join(CHOICES)}")
    for name, v in (("workers", workers), ("threads", threads)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise UsageError(f"{name}={v!r} must be a positive integer")
    if threads is not None and threads > MAX_THREADS:
        raise UsageError(f"threads={threads}: at most {MAX_THREADS} intra-op threads per worker (this machine has "
                         f"{default_workers()} cores)")
    if address and executor != "ray":
        raise UsageError("an address is for the ray executor only")
    if gpu_share is not None:
        if executor != "ray":
            raise UsageError(f"--gpu-share {gpu_share:g} is for the ray executor only (locally, --workers N sets how "
                             f"many worker processes share the GPU)")
        if isinstance(gpu_share, bool) or not 0 < gpu_share <= 1:
            raise UsageError(f"--gpu-share {gpu_share!r}: give the fraction of a GPU each unit asks Ray for, in (0, 1] "
                             f"(e.g. 0.25: four units per GPU)")
    plan = Plan(executor, workers or (default_workers() if executor == "ray" else 1), threads or 1, address,
                gpu_request=gpu_share)
    if executor == "ray":
        connect(plan.address, plan.workers)
    return plan


def _init_worker(threads: int, own_ctrl_c: bool = False, parent: Optional[int] = None) -> None:
    """First, Linux: end with the parent (a SIGKILLed `run` would leave its workers training, each holding its
    memory), and now where `parent` died before this worker could ask (a run ended while its pool starts: the worker
    would wait on its queue for good). Elsewhere the workers notice the broken pipe at their next unit."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if parent is not None and os.getppid() != parent:
            os._exit(1)
    except (OSError, AttributeError):
        pass
    import torch

    if not own_ctrl_c:  # a local worker: Ctrl-C is the parent's to handle (it ends the workers; see _stop_pool)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)


def _call(fn: Callable, job: Any, threads: int) -> Any:
    _init_worker(threads, own_ctrl_c=True)  # a Ray task: Ray's own worker process, stopped by ray.cancel
    return fn(job)


#: The longest this process's main thread sleeps at a time while it waits for units (or for a grading thread). A
#: Ctrl-C the kernel hands to another thread of the process (the pool's own threads; Linux under gVisor does, and so
#: does a signal sent to one thread) only sets a flag that the main thread reads when it wakes: a wait without a
#: timeout would keep the press unanswered until a unit ends, minutes later. Waking costs nothing measurable.
POLL_S = 0.5
#: Units that stop ending for STALL times the longest wait between two ends, and STALL_S, are said once (stderr).
STALL, STALL_S = 10, 600


def result(future) -> Any:
    """`future.result()`, woken every POLL_S seconds so that a Ctrl-C is answered at once (see POLL_S)."""
    from concurrent.futures import TimeoutError as Pending

    while True:
        try:
            return future.result(timeout=POLL_S)
        except Pending:
            continue


#: Seconds a worker is given to end on SIGTERM after Ctrl-C before it is killed.
STOP_WAIT_S = 10.0


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """After Ctrl-C: end the local workers now (a unit can train for minutes) and wait until they are gone, with
    further Ctrl-C ignored meanwhile, so that a second press neither hangs the exit nor prints tracebacks."""
    from multiprocessing.connection import wait as ended

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for proc in procs:
            proc.terminate()
        # each worker's end seen through its sentinel (the pool's own thread reaps it): one that outlives SIGTERM
        # (a loaded machine, a unit in a C call) is killed, so the pool's shutdown never waits on a unit
        left = {proc.sentinel: proc for proc in procs}
        deadline = time.monotonic() + STOP_WAIT_S
        while left and time.monotonic() < deadline:
            for sentinel in ended(list(left), timeout=max(0.0, deadline - time.monotonic())):
                left.pop(sentinel, None)
        for proc in left.values():
            proc.kill()
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        signal.signal(signal.SIGINT, before)


class Executor:
    """One way of running a grid's units, behind one interface: `run(fn, jobs, done)` calls `fn(job)` for every job
    and `done(job, result, error)` in this process as each one ends (in completion order; `error`, the unit's
    exception as text, else None). The polling and the Ctrl-C rules are written here once: the units are waited for
    POLL_S at a time (see POLL_S), and a Ctrl-C (KeyboardInterrupt) ends the units still running (`stop`) before it
    goes on to the caller. Each executor says how to `start` the units, whether some are still `running`, which
    `ended` within a timeout (as (job, result, error)), how to `stop` them and `close` after the last; `guard` is what
    holds while they run (a signal handler, torch's threads)."""

    def __init__(self, plan: Plan):
        self.plan = plan

    def run(self, fn: Callable[[Any], Any], jobs: list, done: Callable[..., None]) -> None:
        with self.guard():
            try:
                self.start(fn, jobs)
                last, longest, said = time.monotonic(), 0.0, False
                while self.running():
                    for job, result, error in self.ended(POLL_S):
                        longest, last, said = max(longest, (now := time.monotonic()) - last), now, False
                        done(job, result, error)
                    if longest and not said and (quiet := time.monotonic() - last) > max(STALL * longest, STALL_S):
                        print(f"metacl-lite: no unit has ended for {quiet / 60:.0f} min, over {STALL} times the "
                              f"longest wait so far ({longest / 60:.1f} min): one may be stuck", file=sys.stderr)
                        said = True
            except KeyboardInterrupt:
                self.stop()
                raise
            self.close()

    @contextmanager
    def guard(self) -> Iterator[None]:
        yield

    def start(self, fn: Callable[[Any], Any], jobs: list) -> None: ...

    def running(self) -> bool: ...

    def ended(self, timeout: float) -> Iterable[tuple[Any, Any, Optional[str]]]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class SerialExecutor(Executor):
    """One unit after another in this process, with the plan's intra-op threads (as in a worker; this process's own
    setting, a notebook's, is put back afterwards). A unit's exception propagates (a failed unit is a bug here), and
    so does Ctrl-C, at once."""

    @contextmanager
    def guard(self) -> Iterator[None]:
        from ..accel.device import torch_threads

        with torch_threads(self.plan.threads):
            yield

    def start(self, fn, jobs):
        self.fn, self.todo = fn, list(jobs)

    def running(self):
        return bool(self.todo)

    def ended(self, timeout):
        job = self.todo.pop(0)
        return [(job, self.fn(job), None)]


class RayExecutor(Executor):
    """Ray tasks, one per unit (`ray_options`: one CPU, a GPU unit's share of one card of the plan's model); Ctrl-C
    cancels those not ended."""

    def start(self, fn, jobs):
        import ray

        remote = ray.remote(**ray_options(self.plan))(_call)
        self.refs = {remote.remote(fn, job, self.plan.threads): job for job in jobs}

    def running(self):
        return bool(self.refs)

    def ended(self, timeout):
        import ray

        ready, _ = ray.wait(list(self.refs), num_returns=1, timeout=timeout)
        for ref in ready:
            job = self.refs.pop(ref)
            try:
                yield job, ray.get(ref), None
            except ray.exceptions.RayError as e:
                yield job, None, f"{type(e).__name__}: {e}"

    def stop(self):
        import ray

        for ref in getattr(self, "refs", ()):  # none where Ctrl-C came while they were submitted
            ray.cancel(ref, force=True)


class PoolExecutor(Executor):
    """`plan.workers` spawned worker processes on this machine (at most one per unit), `plan.threads` threads each. A
    worker that dies loses only its unit. Ctrl-C: the first press ends the workers at once (`_stop_pool`; a unit can
    train for minutes) and the run; every later press does nothing until the caller has said its last words
    (`_settling`)."""

    def __init__(self, plan: Plan):
        super().__init__(plan)
        self.pool: Optional[ProcessPoolExecutor] = None
        self.pressed: list = []

    def first_press(self, signum, frame):
        """The SIGINT handler while the units run: the first press ends the grid (KeyboardInterrupt; `running` too);
        the handler makes every later press do nothing, so none lands between the two (`_stop_pool` skipped)."""
        if self.pressed:
            return
        self.pressed.append(signum)
        raise KeyboardInterrupt

    @contextmanager
    def guard(self) -> Iterator[None]:
        own = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) not in (
            signal.SIG_IGN, None)  # Ctrl-C ignored (a background job) stays ignored; other threads cannot set handlers
        before = signal.signal(signal.SIGINT, self.first_press) if own else None
        try:
            yield
        finally:
            if own:
                signal.signal(signal.SIGINT, _settling(before) if self.pressed else before)

    def start(self, fn, jobs):
        import multiprocessing

        self.pool = ProcessPoolExecutor(max_workers=min(self.plan.workers, max(len(jobs), 1)),
                                        mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                                        initargs=(self.plan.threads, False, os.getpid()))
        self.futures = {self.pool.submit(fn, job): job for job in jobs}
        self.pending = set(self.futures)

    def running(self):
        if self.pressed:  # a press whose KeyboardInterrupt was lost where it landed (a finaliser ignores exceptions)
            raise KeyboardInterrupt
        return bool(self.pending)

    def ended(self, timeout):
        finished, self.pending = wait(self.pending, timeout=timeout, return_when=FIRST_COMPLETED)
        for f in finished:
            try:
                yield self.futures[f], f.result(), None
            except BrokenProcessPool as e:
                yield self.futures[f], None, f"a worker process died ({e})"
            except Exception as e:  # the unit's own error, reported with its job
                yield self.futures[f], None, f"{type(e).__name__}: {e}"

    def stop(self):
        self.pressed.append(signal.SIGINT)  # also where this process raised it itself: later presses do nothing
        if self.pool is not None:
            _stop_pool(self.pool)

    def close(self):
        self.pool.shutdown()


#: The executors by name: a plan's executor (`CHOICES`), "local" with one worker being "serial" (`executor_of`).
EXECUTORS: dict[str, type[Executor]] = {"serial": SerialExecutor, "local": PoolExecutor, "ray": RayExecutor}


def executor_of(plan: Plan) -> Executor:
    """The executor that runs `plan`'s units."""
    serial = plan.executor == "local" and plan.workers == 1
    return EXECUTORS["serial" if serial else plan.executor](plan)


def run_all(fn: Callable[[Any], Any], jobs: Iterable[Any], on_result: Callable[[Any, Any], None], plan: Plan,
            progress: Optional[Callable[[], None]] = None) -> list[Failure]:
    """Run `fn(job)` for every job as `plan` says (`executor_of`); call `on_result(job, result)` in this process as
    each one finishes (in completion order). Returns the failures (each job's exception as text); finished jobs are
    kept."""
    failures: list[Failure] = []

    def done(job, result, error):
        if error is None:
            on_result(job, result)
        else:
            failures.append(Failure(job, error))
        if progress:
            progress()

    executor_of(plan).run(fn, list(jobs), done)
    return failures


#: Seconds after a grid stopped on Ctrl-C during which further presses (a double tap) are ignored.
SETTLE_S = 2.0


def _settling(before):
    """The SIGINT handler after a grid stopped on Ctrl-C: presses in the next SETTLE_S seconds do nothing (the caller
    is printing its last words and exiting), later ones are handled as before the grid (a notebook's kernel can be
    interrupted again)."""
    until = time.monotonic() + SETTLE_S

    def handler(signum, frame):
        if time.monotonic() < until:
            return
        signal.signal(signal.SIGINT, before)
        if callable(before):
            return before(signum, frame)
        if before == signal.SIG_DFL:
            raise KeyboardInterrupt

    return handler
