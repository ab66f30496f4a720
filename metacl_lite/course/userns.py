"""Grading without root (`jail`'s rootless mode): the same jail, built in an unprivileged user namespace.

A grader that is not root starts the jail with bwrap's `--unshare-user --uid 0` as well (`jail.command`): inside, it
is root of a user namespace that maps only its own uid, with the same mounts and root as root mode has. The
submission's process then enters a nested user namespace (`nest`) that maps one uid, the grader's, onto that root:
it has no capability there, and every namespace count of that namespace is zero, so it can make no namespace of its
own. Its process limit counts the processes of that namespace (the kernel counts RLIMIT_NPROC per user namespace):
one submission's budget, which no other submission spends. What root mode gives that this mode gives up: the
submission runs as the grader's own uid on the machine (in namespaces), not as a uid of its own.

`remedies` says what to do where the machine refuses a mount in a new user namespace (`jail.probe` finds it before any
work); `end_namespace` waits, as the grader, until no process of a jail's PID namespace runs.
"""
from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

CLONE_NEWUSER = 0x10000000
#: the namespace counts of a user namespace (/proc/sys/user), all set to zero in the submission's
COUNTS = Path("/proc/sys/user")


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _in_container() -> bool:
    return any(os.path.exists(p) for p in ("/.dockerenv", "/run/.containerenv")) or \
        any(w in _read("/proc/1/cgroup") for w in ("docker", "containerd", "kubepods", "libpod"))


def remedies() -> str:
    """What to do where the machine refuses a mount in an unprivileged user namespace, the likely cause first."""
    hint = [text for cause, text in (
        (_read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1",
         "allow unprivileged user namespaces (Ubuntu 24.04's AppArmor refuses them: sudo sysctl "
         "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile with `userns,` for this Python)"),
        (_read("/proc/sys/kernel/unprivileged_userns_clone") == "0", "sudo sysctl kernel.unprivileged_userns_clone=1"),
        (_read("/proc/sys/user/max_user_namespaces") == "0", "sudo sysctl user.max_user_namespaces=15000"),
        (_in_container(), "in a container, start it with --security-opt seccomp=unconfined (its default seccomp "
                          "profile refuses new namespaces)")) if cause]
    hint = hint or ["allow unprivileged user namespaces (the sysctls kernel.apparmor_restrict_unprivileged_userns=0 "
                    "or user.max_user_namespaces; an AppArmor profile with `userns,`; in a container, "
                    "--security-opt seccomp=unconfined)"]
    hint = "; ".join([*hint, "or run the grader as root (sudo)"])
    return hint


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _drop_capabilities() -> None:
    """No capability left, none to regain: the bounding set emptied, then permitted, effective and inheritable."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # PR_CAPBSET_DROP; EINVAL: no such cap
            break
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), f"capset: {os.strerror(ctypes.get_errno())}")


def nest(uid: int, gid: int) -> None:
    """In the submission's process (root of the jail's user namespace): enter a nested user namespace where it is
    `uid`/`gid` (mapped onto that root), make every namespace count of it zero, and drop every capability."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWUSER): {os.strerror(ctypes.get_errno())}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} 0 1\n")
    _write("/proc/self/gid_map", f"{gid} 0 1\n")
    for f in sorted(COUNTS.glob("max_*_namespaces")):  # this namespace's own counts: no namespace can be made in it
        _write(str(f), "0")
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _drop_capabilities()


def pid_namespace(pid: str = "self") -> int:
    """The PID namespace of a process, as its inode number (0 when it has gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return 0


def start_time(pid: str = "self") -> int:
    """When a process started (clock ticks since boot; -1 when it has gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def _is_init(pid: str) -> bool:
    """Whether a process is the init of its own PID namespace (its last NSpid is 1)."""
    try:
        line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("NSpid:"))
    except (OSError, StopIteration):
        return False
    return line.split()[-1] == "1"


def end_namespace(ino: int, start: int = -1, wait_s: float = 60.0) -> int:
    """Return once no process of the PID namespace `ino` runs, killing any that still runs (up to `wait_s`); the
    number of processes that were still there. `start`: when its init started, so that a namespace made after this
    one had gone, which the kernel may give the same number, is left alone."""
    deadline, seen = time.monotonic() + wait_s, set()
    while ino and time.monotonic() < deadline:
        left = [p for p in os.listdir("/proc") if p.isdigit() and pid_namespace(p) == ino]
        if not left or any(_is_init(p) and start_time(p) != start for p in left if start >= 0):
            break  # gone, or the number is another jail's now
        seen.update(left)
        for p in left:
            try:
                os.kill(int(p), 9)
            except OSError:
                pass
        time.sleep(0.1)
    return len(seen)
