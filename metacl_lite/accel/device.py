"""Where a run trains: the device option (`auto`, `cpu`, `cuda`, `cuda:N`), resolved and checked before any work; the
settings that make a GPU run repeat itself bit for bit; and a benchmark's tensors placed on the device once.

What carries over, and what does not:
- The same seed, configuration, software (torch, CUDA, cuDNN) and GPU model give bit-identical accuracy matrices:
  cuDNN and the other kernels run their deterministic algorithms (`torch.use_deterministic_algorithms`, cuDNN
  `deterministic`, no cuDNN autotuning, cuBLAS with a fixed workspace, `CUBLAS_WORKSPACE_CONFIG`), TF32 is off
  (float32 matrix products in full float32, as on the CPU), and dropout draws from the CUDA generator seeded with
  the run's seed.
- Another GPU model, CUDA or torch version may choose other kernels, which sum in another order: the numbers differ
  within float rounding per step, and, as between any two roundings, the differences grow over a long stream. A CPU
  and a GPU run of the same seed agree to float rounding per step, not bit for bit. So a results file records the
  device kind (`TrainConfig.device`) and the GPU model (`config["accelerator"]`), and refuses units made elsewhere.
- On the CPU, the same seed, configuration, torch version and thread count give bit-identical numbers on a machine
  whose `cpu_kernels` (torch's CPU capability, the processor's vendor, family and model, the BLAS library) are the
  same; the processor's model name alone does not decide (`provenance.rounding_differs`).
- Batch order and initial weights come from CPU generators on every device (the same mini-batches everywhere).
- TF32 (`--precision tf32`, GPU only) is off unless asked for: it changes the numbers, so a file records it
  (`TrainConfig.precision`) and refuses units made with the other precision.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import re
from pathlib import Path
from typing import Optional

import torch

from ..errors import UsageError

#: What `--device` accepts besides `cuda:N`.
DEVICE_CHOICES = ("auto", "cpu", "cuda")
#: The kinds a results file records (`TrainConfig.device`).
DEVICE_KINDS = ("cpu", "cuda")
#: cuBLAS's deterministic workspace (NVIDIA's cuBLAS documentation, "Results reproducibility").
CUBLAS_WORKSPACE = ":4096:8"
#: The float precision of matrix products and convolutions (`TrainConfig.precision`): "float32" (the default, as
#: on the CPU) or, on a GPU only, "tf32" (tensor cores with 10-bit mantissas for the products' inputs: several times
#: faster convolutions, other numbers). An explicit option, recorded in every file and refused when mixed.
PRECISIONS = ("float32", "tf32")

# cuBLAS reads its workspace setting when it makes its first handle (a process's first GPU matrix product), so it is
# set when this package is imported, before any training of ours; a process that ran GPU matrix products before it
# imported metacl_lite keeps cuBLAS's default workspace, with which deterministic GEMMs are not guaranteed. A value
# the user set is kept.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)


def resolve(choice: str) -> str:
    """`auto` -> `cuda` when a GPU is usable, else `cpu`; `cpu`, `cuda` and `cuda:N` as given, after checking that
    the GPU exists (a UsageError before any work, naming the option and the fix)."""
    choice = str(choice).strip()
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return "cpu"
    index = None
    if choice.startswith("cuda:"):
        try:
            index = int(choice[5:])
        except ValueError:
            index = -1
        if index < 0:
            raise UsageError(f"--device {choice!r}: write cuda:N with N a GPU index (0, 1, ...)")
    elif choice != "cuda":
        raise UsageError(f"--device {choice!r} is not a device; choose auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise UsageError(f"--device {choice}: no CUDA GPU is usable here (torch {torch.__version__}, built with "
                         f"CUDA {torch.version.cuda or 'none'}); use --device cpu, or install a CUDA build of torch "
                         f"on a machine with an NVIDIA GPU")
    if index is not None and index >= torch.cuda.device_count():
        raise UsageError(f"--device {choice}: this machine has {torch.cuda.device_count()} GPU(s), cuda:0 to "
                         f"cuda:{torch.cuda.device_count() - 1}")
    return choice


def kind(device: str) -> str:
    """`cpu` or `cuda` (what a results file records)."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def accelerator(device: str) -> Optional[str]:
    """The GPU model a run on `device` uses (recorded in the results file's config and refused when mixed), or None
    on the CPU."""
    if kind(device) != "cuda":
        return None
    return torch.cuda.get_device_name(torch.device(device))


def describe(device: str, threads: Optional[int] = None) -> str:
    """Where work really ran, for provenance: the GPU with torch's CUDA and cuDNN versions, or the CPU with the torch
    threads of each unit (`threads`; default this process's)."""
    if kind(device) == "cuda":
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return (f"cuda: {accelerator(device)} (CUDA {torch.version.cuda}, cuDNN {cudnn}, torch "
                f"{torch.__version__}{', MPS' if mps_active() else ''})")
    return f"cpu: {cpu_name()} ({os.cpu_count()} cores, torch threads {threads or torch.get_num_threads()})"


def mps_active(proc: Path = Path("/proc")) -> bool:
    """Whether NVIDIA's Multi-Process Service runs on this machine (its control daemon, `nvidia-cuda-mps-control -d`,
    as a process): under it the kernels of the worker processes that share a GPU can run side by side instead of
    taking turns, which can change a grid's time but not its numbers (the same kernels run). Linux: read from /proc."""
    for comm in proc.glob("[0-9]*/comm"):
        try:
            if comm.read_text().startswith("nvidia-cuda-mps"):
                return True
        except OSError:
            pass
    return False


def cpu_name() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


#: What decides how a CPU rounds a run's float sums (`cpu_kernels`), as provenance records it.
CPU_KERNEL_KEYS = ("capability", "vendor", "family", "model", "blas")
#: Where Linux describes the processor.
CPUINFO = Path("/proc/cpuinfo")
#: The lines of /proc/cpuinfo that name the processor (x86's names; ARM's: implementer, architecture, part).
CPUINFO_KEYS = {"vendor": ("vendor_id", "CPU implementer"), "family": ("cpu family", "CPU architecture"),
                "model": ("model", "CPU part")}


def cpu_kernels(cpuinfo: Optional[Path] = None) -> dict:
    """What decides how this machine's CPU rounds (`CPU_KERNEL_KEYS`), recorded in every invocation's provenance and
    compared by `provenance.rounding_differs`: torch's CPU capability (the vector kernels it dispatches to, e.g.
    "AVX512" or "AVX2": they sum in different orders), the processor's vendor, family and model numbers (Linux:
    /proc/cpuinfo; elsewhere the vendor `platform` knows, family and model None) and the BLAS library torch was built
    with (its BLAS_INFO, e.g. "mkl"). The model *name* (`cpu_name`, e.g. "AMD EPYC") does not decide: one name covers
    processors of several generations, with other vector units."""
    found: dict = dict.fromkeys(CPUINFO_KEYS)
    try:
        for line in (cpuinfo or CPUINFO).read_text().splitlines():
            key, _, value = line.partition(":")
            for field, names in CPUINFO_KEYS.items():
                if found[field] is None and key.strip() in names:
                    found[field] = value.strip()
    except OSError:
        found["vendor"] = platform.processor() or platform.machine() or None
    blas = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return {"capability": torch.backends.cpu.get_cpu_capability(), **found, "blas": blas.group(1) if blas else None}


def deterministic(device: str) -> None:
    """The settings that make a GPU run repeat itself bit for bit (see the module docstring). Every run, reference and
    oracle sets them before it trains (`training._on_device`), whoever calls it: the grid, tuning, the chapters'
    live cells, the Python API. On the CPU nothing changes (its kernels are deterministic for a fixed thread
    count)."""
    if kind(device) != "cuda":
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # warn_only: an op without a deterministic kernel warns instead of stopping a run; the GPU tests check that two
    # runs of every network are bit-identical, so such an op would not go unnoticed.
    torch.use_deterministic_algorithms(True, warn_only=True)
    if str(device).startswith("cuda:"):
        torch.cuda.set_device(torch.device(device))


def check_precision(precision: str, device: str = "cuda") -> None:
    """A UsageError, before any work, for a precision that is not in `PRECISIONS` or that `device` cannot compute
    in (the CPU computes in float32 only)."""
    if precision not in PRECISIONS:
        raise UsageError(f"precision={precision!r} is not an option; choose one of {', '.join(PRECISIONS)}")
    if precision != "float32" and kind(device) != "cuda":
        raise UsageError(f"precision={precision!r} (--precision) needs a GPU (--device cuda): the CPU computes in "
                         f"float32 only; leave --precision out there")


def set_precision(precision: str, device: str) -> None:
    """The precision of a run's matrix products and convolutions (`PRECISIONS`), set at the start of every unit (a
    worker process may train units of several files). On the CPU only "float32" exists (`TrainConfig` refuses
    "tf32" there), so nothing changes."""
    check_precision(precision)
    if kind(device) != "cuda":
        return
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def determinism_settings() -> dict:
    """The settings `deterministic` makes, as this process has them (recorded by the GPU check)."""
    return {"cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "cublas_workspace": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}


def to_device(obj, device: str, _memo: Optional[dict] = None):
    """A copy of a dataclass (an Experience, a Benchmark and its streams) with every tensor moved to `device`, each
    tensor once (Permuted MNIST's tasks share their test images: they stay shared). On the CPU, `obj` itself."""
    if kind(device) == "cpu":
        return obj
    memo = {} if _memo is None else _memo

    def move(v):
        if isinstance(v, torch.Tensor):
            if id(v) not in memo:
                memo[id(v)] = v.to(device)
            return memo[id(v)]
        if isinstance(v, list):
            return [move(x) for x in v]
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return to_device(v, device, memo)
        return v

    changes = {f.name: move(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
    return dataclasses.replace(obj, **changes)


def benchmark_on(bench, device: str):
    """`bench` with its streams on `device`, made once per benchmark and device (kept on the benchmark object)."""
    if kind(device) == "cpu":
        return bench
    cache = bench.__dict__.setdefault("_on_device", {})
    if device not in cache:
        cache[device] = to_device(bench, device)
        cache[device].__dict__["_on_device"] = {device: cache[device]}
    return cache[device]


@contextlib.contextmanager
def torch_threads(n: Optional[int]):
    """torch's intra-op thread count set to `n` (None: left as it is) while the block runs; the caller's after."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
