"""The jail a submission's code runs in while it is graded (`grading_worker` starts it; `jail_runner` runs inside).
What it isolates, and why, is told on the book's instructors' page (book/assignments/instructors.md).

    bwrap --unshare-net --unshare-pid --unshare-ipc --unshare-uts --as-pid-1 --die-with-parent ... \\
        python -s -m metacl_lite.course.jail FD    (the config file, open)

Bubblewrap (`command`) makes the namespaces (without root, a user namespace as well: `userns`) and the jail's root: a
fresh tmpfs that holds only the system's software, the Python, the data and the package copy whose withheld
references are stubs, bound read-only; a few devices, the PID namespace's /proc, what the grader hides covered, the
root read-only, `pivot_root` to it and loopback only. Then `main`, root there and the namespace's `init` (handling no
signal), mounts the writable places (`writable`: each a tmpfs bounded in bytes and in files, which bwrap cannot
bound), takes a new session keyring and forks the submission's process: limits, its uid (`Slot`; without root a
nested user namespace, `userns.nest`), the seccomp filter (`submission_filter`), exec of `jail_runner`. The whole jail
is in a control group of its own (`cgroup`), joined before the first exec.

Nothing outlives a row: every process is in the PID namespace, which the kernel empties when init dies; init never
changes its credentials, so it keeps the parent-death signal of `bwrap --die-with-parent`, and dies with `bwrap`,
which dies with the grader's worker (PR_SET_PDEATHSIG), which dies with the grader or on a timeout.
"""
from __future__ import annotations

import ctypes
import json
import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import userns

USER = "metacl-grader"
#: limits inside the jail: address space, processes of the submission's uid, file size; the sizes of its writable
#: places (each a tmpfs of its own: what a submission writes never reaches the grading machine's disk) and the files
#: each tmpfs holds
LIMITS = {"as_bytes": 16 * 2 ** 30, "nproc": 512, "fsize_bytes": 2 * 2 ** 30, "tmp_size": "1g", "shm_size": "512m",
          "scratch_size": "1g", "inodes": 16384}
#: the submissions' uids: UID_BASE + a slot drawn at random and held by a lock (`Slot`), far above the users and
#: systemd's dynamic and container ranges' starts
UID_BASE = 0x70000000
UID_SPAN = 1 << 24
#: where the slots' locks are (root's, shared by every grader on the machine)
SLOTS = Path("/run/lock/metacl-grader")
#: the file of the worker's private folder where the jail writes its PID namespace (`end_jail` reads it)
PIDNS = "jail.pidns"


class Slot:
    """A submission's uid while it is graded: no other submission graded now on this machine (by this grader or
    another, in this container or another that shares /run/lock) holds it, so a process limit counts that
    submission's processes only. Drawn at random from 2**24 (two graders that share no lock folder meet with a
    chance of one in sixteen million a pair of rows), held by an exclusive lock until `release`. Without root, the
    grader's own uid (the submission's user namespace is its own), and nothing is held."""

    def __init__(self):
        import fcntl
        import secrets

        if rootless():
            self.uid, self._lock = os.getuid(), None
            return
        SLOTS.mkdir(parents=True, mode=0o700, exist_ok=True)
        while True:
            self.uid = UID_BASE + secrets.randbelow(UID_SPAN)
            self._lock = open(SLOTS / str(self.uid), "w")
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                self._lock.close()

    def release(self) -> None:
        if self._lock is not None:
            (SLOTS / str(self.uid)).unlink(missing_ok=True)
            self._lock.close()


def end_jail(private: Path) -> None:
    """Return once no process of a submission graded in `private` runs: none in its jail's PID namespace (which the
    jail wrote there, with its init's start time, before the submission started; no process leaves its PID
    namespace)."""
    try:
        userns.end_namespace(*map(int, (Path(private) / PIDNS).read_text().split()))
    except (OSError, ValueError, TypeError):
        pass  # no jail was started, so nothing of the submission ran


class JailUnavailable(RuntimeError):
    """The machine cannot build the jail (no bwrap, namespaces refused)."""


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


def _which(tool: str):
    """A system tool's path, also where root's sbin folders are not on the PATH (`sudo -E`, say)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin:/usr/bin:/bin")


def python_dirs(repo_root: Path) -> list[Path]:
    """The folders this Python runs from, as the jail binds them read-only: its prefix and base prefix (as named and
    resolved: a virtual environment's `python` may be a link into another) and the folders its installation adds to
    its path (a `.pth` file's), but not the working folder or the script's (the path's first entry), nothing in the
    temporary folder and nothing inside the checkout other than an environment's site-packages (the jail's package
    copy stands in for the source)."""
    out = []
    for p in (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent):
        out += [p.absolute(), p.resolve()]
    prefixes = tuple(out)
    away = (repo_root, Path.cwd().resolve(), Path(tempfile.gettempdir()).resolve())
    for entry in sys.path[1:]:
        p = Path(entry).resolve() if entry else None
        if p is None or any(p == q or q in p.parents for q in prefixes):
            continue
        site = p.name in ("site-packages", "dist-packages")  # an environment's, named by a `.pth` file
        if any(p == q or q in p.parents or p in q.parents for q in away) and not site:
            continue
        out.append(p)
    out = [p for p in dict.fromkeys(out) if p.is_dir() and p != Path("/")]
    return [p for p in out if not any(q in p.parents for q in out)]  # a folder inside another is bound with it


def rootless() -> bool:
    """Whether the jail is built without root (`userns`): the grader is not root."""
    return os.geteuid() != 0


#: bwrap's options that make the jail without root: a new user namespace, the grader root in it (`userns`)
AS_ROOT_OF_A_USERNS = ("--unshare-user", "--uid", "0", "--gid", "0")


def probe(rootless: bool) -> str:
    """Why this machine cannot build the jail ('' when it can): a tmpfs mounted in a new mount, PID and network
    namespace (without root, in a new user namespace as well), with a new /proc, as the jail does."""
    cmd = [_which("bwrap") or "bwrap", *(AS_ROOT_OF_A_USERNS if rootless else ()), "--unshare-pid", "--unshare-net",
           "--cap-add", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "mount", "-t", "tmpfs", "-o", "size=1m",
           "metacl-probe", "/tmp"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cmd[0]}: {e}"
    return "" if r.returncode == 0 else " ".join(r.stderr.split())[:200] or f"exit status {r.returncode}"


def check_available() -> None:
    """Raise JailUnavailable (saying why and what to do) unless this machine can build the jail (`probe`)."""
    for tool, package in (("bwrap", "bubblewrap"), ("mount", "mount")):
        if not _which(tool):
            raise JailUnavailable(f"the jail needs `{tool}` ({package}): run data_scripts/system_deps.sh")
    try:
        import pyseccomp  # noqa: F401 - the submission's filter (`submission_filter`)
    except (ImportError, OSError) as e:
        raise JailUnavailable(f"the jail's seccomp filter needs libseccomp and its binding pyseccomp ({e}): "
                              "pip install -e '.[assignments]', and libseccomp2 from the system's packages") from None
    mode = rootless()
    why = probe(mode)
    if why and mode:
        raise JailUnavailable(f"grading without root builds the jail in a user namespace, and this machine "
                              f"refuses a mount there ({why}): {userns.remedies()}")
    if why:
        raise JailUnavailable(f"this machine refuses new namespaces or a mount in them ({why}); a container needs "
                              "CAP_SYS_ADMIN (docker run --privileged or --cap-add SYS_ADMIN --security-opt "
                              "seccomp=unconfined)")


#: the machine's software the jail's root holds (read-only, where present), beside the Python, the data and the
#: package copy that the grader names: no home, no /opt, /srv, /mnt, /var or /run, no checkout
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
#: the devices a Python process uses
DEVICES = ("null", "zero", "full", "random", "urandom")


def command(conf: dict, config_fd: int) -> list[str]:
    """Bubblewrap's command line that builds the jail's namespaces and root (`build_root`) and starts `main` in it,
    as the namespace's init, on the config file open as `config_fd`; its environment: the package copy's path only."""
    user = AS_ROOT_OF_A_USERNS if conf.get("rootless") else ()
    return [_which("bwrap"), "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", *user, "--as-pid-1",
            "--die-with-parent", "--cap-add", "ALL", *build_root(conf), "--clearenv", "--setenv", "PYTHONPATH",
            conf["env"]["PYTHONPATH"], "--setenv", "PATH", "/usr/sbin:/usr/bin:/sbin:/bin", sys.executable, "-s",
            "-m", "metacl_lite.course.jail", str(config_fd)]


def build_root(conf: dict) -> list[str]:
    """Bubblewrap's steps for the jail's file system, on its fresh tmpfs, every one read-only: the system's software
    (`SYSTEM`, symbolic links kept as links), the grader's Python, the data and the package copy (`binds_ro`), the
    scratch folder (`binds_rw`, where `writable` puts the submission's copy), the places `writable` mounts, a few
    devices on a small /dev and the PID namespace's /proc. Whatever else is on the machine, world-readable or not, is
    not there; and what the grader hides (`hidden`) is covered even where it lies inside a bound folder."""
    steps, bound = [], []
    for top in SYSTEM:
        if os.path.islink(top):
            steps += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            steps += ["--ro-bind", top, top]
            bound.append(top)
    steps += ["--dir", "/tmp", "--dir", "/var/tmp", "--size", str(2 ** 20), "--tmpfs", "/dev"]  # PLACES: `writable`
    steps += [x for name in DEVICES if os.path.exists("/dev/" + name) for x in ("--dev-bind", "/dev/" + name,
                                                                                 "/dev/" + name)]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        steps += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{name}"]
    steps += ["--symlink", "/proc/self/fd", "/dev/fd", "--dir", "/dev/shm", "--remount-ro", "/dev", "--proc", "/proc"]
    for src in sorted([*conf["binds_ro"], *conf["binds_rw"]], key=len):  # parents first: one inside another stays
        if os.path.isdir(src):  # the folders above it made world-readable (bwrap's own are the owner's)
            steps += ["--perms", "0755", "--dir", src, "--ro-bind", src, src]
            bound.append(src)
    for p in conf["hidden"]:  # inside a bound folder (the class folder inside the data, say): covered
        if any(b == p or b.startswith(p.rstrip("/") + "/") for b in bound) or \
                not any(p.startswith(b.rstrip("/") + "/") for b in bound):
            continue  # only the bound folders below it are there, or it is not there at all
        if os.path.isdir(p):
            steps += ["--size", "4096", "--tmpfs", p, "--remount-ro", p]
        elif os.path.lexists(p):
            steps += ["--ro-bind", "/dev/null", p]
    return [*steps, "--remount-ro", "/"]


def _mount(*args: str) -> None:
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise JailUnavailable(f"mount {' '.join(args)}: {r.stderr.strip()}")


def _pdeathsig(sig: int = signal.SIGKILL) -> None:
    """Get `sig` when the parent dies (the jail's `bwrap` when the grader's worker dies; the worker, SIGTERM, when
    the grader does, even by SIGKILL, so that it kills its jail and removes its folder)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _tmpfs(dst: str, size: str, opts: str) -> None:
    """A tmpfs of `size` bytes and at most LIMITS['inodes'] files (the kernel's default, half the pages of memory,
    lets a flood of empty files take gigabytes of kernel memory while `df` shows none used; bwrap's tmpfs has no
    such bound)."""
    _mount("-t", "tmpfs", "-o", f"size={size},nr_inodes={LIMITS['inodes']},{opts},nosuid,nodev", "tmpfs", dst)


#: the writable places of every jail, each a tmpfs of its own, and their sizes (`LIMITS`)
PLACES = (("/tmp", "tmp_size"), ("/var/tmp", "shm_size"), ("/dev/shm", "shm_size"))


def writable(conf: dict) -> None:
    """In the jail, before the submission: its writable places (`PLACES`), each a fresh tmpfs bounded in bytes and in
    files (`_tmpfs`), with the folders bwrap bound below them bound again on top, as they were (read-only, their
    covers kept); and the scratch folder (`binds_rw`) at its own path, a tmpfs owned by the submission's uid that
    holds a copy of what the grader put there (the notebook): what it writes stays in memory, within the size."""
    binds = [b for b in {*conf["binds_ro"], *conf["binds_rw"]} if os.path.isdir(b)]
    kept = {b: os.open(b, os.O_PATH) for b in binds if any(b.startswith(p + "/") for p, _ in PLACES)}
    files = {src: {n: Path(src, n).read_bytes() for n in os.listdir(src)
                   if os.path.isfile(os.path.join(src, n)) and not os.path.islink(os.path.join(src, n))}
             for src in conf["binds_rw"]}
    for place, size in PLACES:
        _tmpfs(place, LIMITS[size], "mode=1777")
    libc = ctypes.CDLL(None, use_errno=True)
    for b in sorted({*kept, *files}, key=len):  # parents first
        os.makedirs(b, exist_ok=True)
        if b in files:
            _tmpfs(b, LIMITS["scratch_size"], f"mode=0755,uid={conf['uid']},gid={conf['gid']}")
            for name, data in files[b].items():
                Path(b, name).write_bytes(data)
                os.chown(os.path.join(b, name), conf["uid"], conf["gid"])
        elif libc.mount(f"/proc/self/fd/{kept[b]}".encode(), b.encode(), None, 0x5000, None) != 0:  # MS_BIND|MS_REC
            raise JailUnavailable(f"cannot bind {b} again: {os.strerror(ctypes.get_errno())}")


#: the socket families a submission may open: local sockets, loopback IP (its kernels) and netlink (the C library's
#: interface queries); not AF_VSOCK, which no network namespace scopes, nor any other
FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
#: clone's namespace flags (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
NAMESPACE_FLAGS = (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000)
#: the calls refused whole: the keyrings, new namespaces and io_uring (the usual entry points of local exploits)
REFUSED = ("add_key", "request_key", "keyctl", "unshare", "setns", "io_uring_setup", "io_uring_enter",
           "io_uring_register")


def submission_filter():
    """The seccomp filter a submission runs under, the same with root and without, written with libseccomp (its
    binding `pyseccomp`): `REFUSED` and clone with a namespace flag fail with EPERM; clone3, whose flags lie in memory
    a filter cannot read, with ENOSYS (the C library then uses clone); a socket of a family not in `FAMILIES` with
    EAFNOSUPPORT; and every call of another architecture (an x86_64 process's 32-bit or x32 calls) with EPERM. Built
    by `main`, loaded by `become_submission`."""
    import errno

    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.EPERM))
    for call in REFUSED:
        f.add_rule(sc.ERRNO(errno.EPERM), call)
    for flag in NAMESPACE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for family in set(range(max(FAMILIES))) - set(FAMILIES):
        f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.EQ, family))
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.GT, max(FAMILIES)))
    return f


def _limits(conf: dict) -> None:
    for res, n in ((resource.RLIMIT_AS, LIMITS["as_bytes"]), (resource.RLIMIT_NPROC, LIMITS["nproc"]),
                   (resource.RLIMIT_FSIZE, LIMITS["fsize_bytes"]), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(res, (n, n))
    if conf.get("cpu_seconds"):
        resource.setrlimit(resource.RLIMIT_CPU, (int(conf["cpu_seconds"]),) * 2)


def become_submission(conf: dict, seccomp) -> None:
    """In the submission's process, before its exec: limits, the submission's uid and group (without root: its
    nested user namespace, entered before the limits, so that the process limit is that namespace's own count of
    processes, above which the grader's limit stands), then the filter `seccomp` (`submission_filter`; loading it
    sets no-new-privileges first)."""
    os.chdir(conf["cwd"])
    if conf.get("rootless"):
        userns.nest(conf["inner_uid"], conf["inner_gid"])
        _limits(conf)
    else:
        _limits(conf)
        os.setgroups([])
        os.setgid(conf["gid"])
        os.setuid(conf["uid"])
    seccomp.load()


def init(conf: dict, seccomp) -> int:
    """The namespace's init, root: fork the submission's process (`become_submission`, exec the runner), reap, and
    end with it (which ends every other process in the namespace). Init never changes its credentials, so it keeps
    its parent-death signal; it handles no signal, so none sent from inside the namespace reaches it (the kernel
    drops those an init does not handle), in both modes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python's own handler, the one a submission could reach
    fds = conf.get("fds", [])
    pid = os.fork()
    if pid == 0:
        try:
            become_submission(conf, seccomp)
            for fd in fds:
                os.set_inheritable(fd, True)
            os.execve(sys.executable, [sys.executable, "-s", "-m", "metacl_lite.course.jail_runner",
                                       *conf["runner_args"]], conf["env"])
        except BaseException as e:  # noqa: BLE001 - nothing may run on as root
            os.write(2, f"the jail could not start the submission: {type(e).__name__}: {e}\n".encode())
        os._exit(127)
    for fd in fds:  # the channel is the submission's: its end closes the grader's pipes
        os.close(fd)
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            return 1
        if done == pid:
            return os.waitstatus_to_exitcode(status) % 256


def main(argv=None) -> int:
    """Inside the jail bwrap built, as root there: the writable places, a new session keyring, then be its init."""
    import pyseccomp as sc

    with os.fdopen(int((argv or sys.argv[1:])[0])) as f:
        conf = json.load(f)
    with os.fdopen(conf["pidns_fd"], "w") as f:  # the worker's file (`end_jail`), before the submission starts
        f.write(f"{userns.pid_namespace()} {userns.start_time()}")
    writable(conf)
    # a new, empty session keyring (keyctl JOIN_SESSION_KEYRING, no name): the grader's is left behind
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(sc.resolve_syscall(sc.system_arch(), "keyctl")), ctypes.c_long(1), None) < 0:
        raise JailUnavailable(f"cannot leave the grader's session keyring: {os.strerror(ctypes.get_errno())}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(init(conf, submission_filter()))


if __name__ == "__main__":
    sys.exit(main())
