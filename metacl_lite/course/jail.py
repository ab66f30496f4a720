"""The jail a submission's code runs in while it is graded (`grading_worker` starts it; `jail_runner` runs inside).

    unshare --net --mount --pid --ipc --uts --fork --kill-child --mount-proc --propagation private \\
        python -m metacl_lite.course.jail CONFIG.json

`main` runs as root inside the new namespaces, then:

* every mount is remounted read-only (the checkout, the environment, the data: a read-only view of everything);
* fresh, size-limited tmpfs over /tmp, /var/tmp and /dev/shm, and empty tmpfs over what a submission must not read:
  the autograders (`--dist`), the assignment sources with their solutions, the package's own source and git
  history, the class folders, the feedback folder and the grader's private folder (its autograder copy);
* the submission's scratch folder (its only writable place, owned by the jail user) and a copy of the package whose
  withheld references are stubs (`grading_refs.sanitize`) are mounted back in;
* loopback up in a network namespace of its own (no other interface: no network);
* limits (address space, processes of the jail user, file size, CPU time, no core files), no new privileges, then
  the unprivileged user `metacl-grader` (created when missing), and `jail_runner` is exec'd.

Everything in the jail lives in one PID namespace: when its first process dies, or the grader kills it (SIGKILL on a
timeout, on SIGTERM/SIGHUP/SIGINT of the grader, or when the grader dies: `--kill-child` and PR_SET_PDEATHSIG), the
kernel kills every process of the submission, daemons included.
"""
from __future__ import annotations

import ctypes
import json
import os
import pwd
import resource
import shutil
import subprocess
import sys
from pathlib import Path

USER = "metacl-grader"
#: limits inside the jail: address space, processes of the jail user, file size, CPU seconds
LIMITS = {"as_bytes": 16 * 2 ** 30, "nproc": 512, "fsize_bytes": 2 * 2 ** 30, "tmp_size": "2g", "shm_size": "1g"}


MS_BIND, MS_REC = 4096, 16384


class JailUnavailable(RuntimeError):
    """The machine cannot build the jail (not root, no unshare, namespaces refused)."""


def ensure_user() -> tuple[int, int]:
    """The jail user's uid and gid, created (a system user without a home or a shell) when missing."""
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        if os.geteuid() != 0:
            raise JailUnavailable(f"the grader runs submissions as the user {USER!r}, which does not exist; run the "
                                  "grader as root once (it creates the user), or create it: "
                                  f"useradd --system --no-create-home --shell /usr/sbin/nologin {USER}") from None
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        r = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                           capture_output=True, text=True)
        if r.returncode not in (0, 9):  # 9: created meanwhile by another grader
            raise JailUnavailable(f"cannot create the user {USER!r}: {r.stderr.strip()}")
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


def check_available() -> None:
    """Raise JailUnavailable (saying why and what to do) unless this machine can build the jail."""
    if os.geteuid() != 0:
        raise JailUnavailable("grading runs each submission in a jail (namespaces, read-only mounts, an unprivileged "
                              "user), which needs root: run the grader as root (sudo), as on the course's grading "
                              "machine and in CI")
    for tool in ("unshare", "mount", "ip"):
        if not shutil.which(tool):
            raise JailUnavailable(f"the jail needs `{tool}` (util-linux / iproute2): run data_scripts/system_deps.sh")
    r = subprocess.run(["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "true"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise JailUnavailable("this machine refuses new namespaces (unshare --net --mount --pid: "
                              f"{r.stderr.strip()}); a container needs CAP_SYS_ADMIN (docker run --privileged or "
                              "--cap-add SYS_ADMIN --security-opt seccomp=unconfined)")


def command(config: Path) -> list[str]:
    """The command line that starts the jail on a config file (`main`'s argument)."""
    return ["unshare", "--net", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc",
            "--propagation", "private", sys.executable, "-I", "-m", "metacl_lite.course.jail", str(config)]


def _mount(*args: str) -> None:
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise JailUnavailable(f"mount {' '.join(args)}: {r.stderr.strip()}")


def _mountpoints() -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].replace("\\040", " ")
        if mp not in out:
            out.append(mp)
    return out


def _pdeathsig() -> None:
    """Die with SIGKILL when the parent (the grader's worker) dies."""
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _no_new_privs() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    except (OSError, AttributeError):
        pass


def main(argv=None) -> int:
    """Inside the new namespaces, as root: build the view, drop to the jail user, exec the runner."""
    conf = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    keep = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in conf["binds_rw"] + conf["binds_ro"]}
    for mp in _mountpoints():  # a read-only view of everything
        if mp.startswith("/proc"):
            continue
        subprocess.run(["mount", "-o", "remount,bind,ro", mp], capture_output=True)
    _mount("-t", "tmpfs", "-o", f"size={LIMITS['tmp_size']},mode=1777,nosuid,nodev", "tmpfs", "/tmp")
    for extra in ("/var/tmp", "/dev/shm"):
        if os.path.isdir(extra):
            _mount("-t", "tmpfs", "-o", f"size={LIMITS['shm_size']},mode=1777,nosuid,nodev", "tmpfs", extra)
    for p in conf["hidden"]:
        if os.path.isdir(p):
            _mount("-t", "tmpfs", "-o", "size=1m,mode=0755,nosuid,nodev", "tmpfs", p)
        elif os.path.exists(p):
            _mount("--bind", "/dev/null", p)
    libc = ctypes.CDLL(None, use_errno=True)
    for p, fd in keep.items():  # back into view: the scratch folder (writable), the package copy, the data
        os.makedirs(p, exist_ok=True)
        if libc.mount(f"/proc/self/fd/{fd}".encode(), p.encode(), None, MS_BIND | MS_REC, None) != 0:
            raise JailUnavailable(f"cannot bind {p} into the jail: {os.strerror(ctypes.get_errno())}")
        _mount("-o", "remount,bind," + ("ro" if p in conf["binds_ro"] else "rw,nosuid,nodev"), p)
        os.close(fd)
    subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True)  # kernels talk over loopback only
    uid, gid = conf["uid"], conf["gid"]
    resource.setrlimit(resource.RLIMIT_AS, (LIMITS["as_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (LIMITS["nproc"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMITS["fsize_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if conf.get("cpu_seconds"):
        resource.setrlimit(resource.RLIMIT_CPU, (int(conf["cpu_seconds"]),) * 2)
    os.chdir(conf["cwd"])
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    _no_new_privs()
    for fd in conf.get("fds", []):
        os.set_inheritable(fd, True)
    os.execve(sys.executable, [sys.executable, "-s", "-m", "metacl_lite.course.jail_runner", *conf["runner_args"]],
              conf["env"])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
