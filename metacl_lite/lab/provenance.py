"""Where a result came from: the command that regenerates it, the git commit, package versions and the device."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional

import torch

from ..paths import IN_CHECKOUT, PACKAGE_DIR, REPO_ROOT
from ..accel.device import CPU_KERNEL_KEYS, cpu_kernels, describe


def _git(*args: str) -> Optional[str]:
    """git in the checkout that holds this package; None for an installed package (the folder it runs in may be some
    other repository, whose commit says nothing of this code: the package version is recorded instead)."""
    if not IN_CHECKOUT:
        return None
    try:
        return subprocess.run(["git", *args], cwd=PACKAGE_DIR.parent, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def device(where: str = "cpu", threads: Optional[int] = None) -> str:
    """Where the work of this process really ran (`where`: the resolved device of the run): the GPU's model and
    software, or the CPU's model, cores and threads. A visible GPU that the run did not use is not named."""
    return describe(where, threads)


def invocation(where: str = "cpu", text: Optional[str] = None, threads: Optional[int] = None) -> dict:
    """This process: git commit, packages (torch's version matters: 2.14 and 2.15 give different numbers), the
    device the run uses (`where`; `text`: its description where this process cannot see it, a Ray cluster's GPUs)
    and what decides how its CPU rounds (`cpu_kernels`; None with `text`: the units ran on other machines); on the CPU
    `threads`, the torch threads each unit runs with (default: this process's)."""
    pkgs = {}
    for name in ("metacl-lite", "torch", "torchvision", "numpy", "scipy"):
        try:
            pkgs[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pkgs[name] = None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(status) if status is not None else None,
            "python": sys.version.split()[0], "packages": pkgs, "platform": platform.platform(),
            "device": text or device(where, threads), "cpu_kernels": None if text else cpu_kernels(), "started": now()}


def rounding_differs(recorded: dict) -> Optional[str]:
    """Why this machine may round otherwise than the invocation `recorded` did (an entry of a file's
    provenance.invocations), so that its CPU numbers can be asked to agree only within float rounding; None when
    `recorded` holds torch's version and every field of `cpu_kernels`, all known and all equal to this machine's (the
    same CPU run then gives the same bits). Files made before `cpu_kernels` was recorded get a reason: the CPU's model
    name they record does not decide the kernels."""
    then = recorded.get("cpu_kernels")
    torch_then, torch_here = (recorded.get("packages") or {}).get("torch"), torch.__version__.split("+")[0]
    if torch_then != torch_here:
        why = f"torch {torch_then} made it, this is torch {torch_here}"
    elif not isinstance(then, dict):
        why = "the invocation records no cpu_kernels: made before they were recorded, or on a Ray cluster"
    else:
        here = cpu_kernels()
        why = "; ".join(f"{k} {then.get(k)} there, {here[k]} here" for k in CPU_KERNEL_KEYS
                        if then.get(k) != here[k] or here[k] is None) or None
    return why


def relative_to_repo(path: Path) -> str:
    """A path as the user would type it from the repository root (no machine path in committed files)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(p)
