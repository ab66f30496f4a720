"""One control group per jail (`jail`): whatever a submission forks or writes, its memory (tmpfs pages and kernel
memory counted, no swap), its processes and its share of the CPU are bounded as a whole, so that with `--jobs N` one
submission never takes a neighbour's.

cgroup v2 where the machine's unified hierarchy has the memory, pids and cpu controllers (GitHub's Ubuntu runners),
else v1 where those are mounted (a v1/v2 hybrid, this project's machines), as root. Without root, a delegated v2
subtree: the nearest cgroup above the grader's that it may write and that gives the three controllers to its children
(a systemd user slice: run the grader under `systemd-run --user --scope`). `where` says why there is none (''
when there is one); `Group` makes one beside the other jails', `procs` names where the jail's first process writes
its pid before it execs (so every process of the submission is born inside), and `remove` kills what is left and
removes the group.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from .userns import _read

#: a jail's bounds as a whole: memory (tmpfs pages and kernel memory included, no swap) and processes
LIMITS = {"memory_bytes": 4 * 2 ** 30, "pids": 512}
CONTROLLERS = ("memory", "pids", "cpu")
MOUNTS = Path("/sys/fs/cgroup")


def _own() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and '' for the unified (v2) hierarchy."""
    out = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            out[name] = path
    return out


def _v2_parent() -> Path | None:
    """The nearest cgroup at or above the grader's parent that it may write and whose children get the three
    controllers (the unified hierarchy's root itself for root)."""
    unified = MOUNTS / "unified" if (MOUNTS / "unified" / "cgroup.controllers").exists() else MOUNTS
    here = unified / _own().get("", "/").lstrip("/")
    for d in [here.parent, *here.parent.parents] if here != unified else [unified]:
        if unified not in (d, *d.parents):
            break
        if set(CONTROLLERS) <= set(_read(d / "cgroup.subtree_control").split()) and os.access(d, os.W_OK):
            return d
    return None


def where() -> tuple[str, list[Path]]:
    """('' and the folders new groups go under, one per hierarchy) where the machine gives this grader cgroups with
    the three controllers, else (why not, [])."""
    v2 = _v2_parent()
    if v2 is not None:
        return "", [v2]
    own = _own()
    if os.geteuid() == 0 and all(c in own and (MOUNTS / c / "cgroup.procs").exists() for c in CONTROLLERS):
        return "", [MOUNTS / c / own[c].lstrip("/") for c in CONTROLLERS]
    if os.geteuid() == 0:
        return "the machine mounts no cgroup hierarchy with the memory, pids and cpu controllers", []
    return ("no delegated cgroup gives this user the memory, pids and cpu controllers (run the grader under "
            "`systemd-run --user --scope`, or as root)"), []


class Group:
    """One jail's control group: made under each of `where`'s folders, named `name`."""

    def __init__(self, name: str):
        self.dirs = [p / name for p in where()[1]]
        for d in self.dirs:
            d.mkdir(exist_ok=True)
            self._limit(d)

    @staticmethod
    def _limit(d: Path) -> None:
        """The bounds that `d`'s hierarchy holds (v2: all; v1: its controller's). CPU: every group the default
        weight, so each jail is one scheduling entity, whatever it forks."""
        mem = LIMITS["memory_bytes"]
        v2, v1 = (("memory.max", mem), ("memory.swap.max", 0), ("pids.max", LIMITS["pids"])), \
            (("memory.limit_in_bytes", mem), ("memory.memsw.limit_in_bytes", mem))  # v1: in this order
        for key, value in v2 + v1:
            if (d / key).exists():
                (d / key).write_text(str(value))

    def procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def remove(self, wait_s: float = 30.0) -> None:
        """Kill every process left in the group, then remove it (its memory's charges go to the parent)."""
        deadline = time.monotonic() + wait_s
        for d in self.dirs:
            while d.exists() and time.monotonic() < deadline:
                pids = _read(d / "cgroup.procs").split()
                for pid in pids:
                    try:
                        os.kill(int(pid), 9)
                    except OSError:
                        pass
                try:
                    d.rmdir()
                except OSError:
                    time.sleep(0.05)


def attach(paths: list[str]) -> None:
    """In a new process before its exec: join the jail's groups."""
    for p in paths:
        with open(p, "w") as f:
            f.write(str(os.getpid()))
