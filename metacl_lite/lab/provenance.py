"""Where a result came from: the command that regenerates it, the git commit, package versions and the device."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional

from ..data.datafiles import IN_CHECKOUT, PACKAGE_DIR, REPO_ROOT
from ..accel.device import describe


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


def device(where: str = "cpu") -> str:
    """Where the work of this process really ran (`where`: the resolved device of the run): the GPU's model and
    software, or the CPU's model, cores and threads. A visible GPU that the run did not use is not named."""
    return describe(where)


def invocation(where: str = "cpu", text: Optional[str] = None) -> dict:
    """This process: git commit, packages (torch's version matters: 2.14 and 2.15 give different numbers), and the
    device the run uses (`where`; `text`: its description where this process cannot see it, a Ray cluster's GPUs)."""
    pkgs = {}
    for name in ("metacl-lite", "torch", "torchvision", "numpy", "scipy"):
        try:
            pkgs[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pkgs[name] = None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(status) if status is not None else None,
            "python": sys.version.split()[0], "packages": pkgs, "platform": platform.platform(),
            "device": text or device(where), "started": now()}


def relative_to_repo(path: Path) -> str:
    """A path as the user would type it from the repository root (no machine path in committed files)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(p)
