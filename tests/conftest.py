import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import pytest

os.environ.setdefault("METACL_LITE_PROGRESS", "0")


@pytest.fixture(autouse=True)
def torch_threads_restored():
    """Each test starts with the session's torch thread count: a command run in this process that sets its own (the
    lambda story's main, a benchmark) does not leave every later test on one thread (it did: the second half of the
    suite trained at half speed)."""
    import torch

    n = torch.get_num_threads()
    yield
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


@pytest.fixture
def hparams_file(tmp_path, monkeypatch):
    """An isolated hparams.json (the committed one is never touched by tests); returns a writer."""
    from metacl_lite.lab import hparams as H

    path = tmp_path / "hparams.json"
    monkeypatch.setattr(H, "HPARAMS_FILE", path)

    def write(obj):
        path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    write(json.loads((H.Path(H.__file__).parent / "hparams.json").read_text()))
    return write


@pytest.fixture
def hparams_before_memory_tuning(hparams_file):
    """The isolated hparams.json as it was before any memory method had a gamma of its own (`tune --memory`): each
    MetaCL-lambda with both references then borrows its base's (`hparams.tuned_method`)."""
    from metacl_lite.lab import hparams as H
    from metacl_lite.vocab import MEMORY_METHODS

    hp = json.loads(H.HPARAMS_FILE.read_text())
    for entry in (hp["pmnist"], *hp["pmnist"].get("by_K", {}).values()):
        for key in ("methods", "sources"):
            for m in MEMORY_METHODS:
                entry.get(key, {}).pop(m, None)
    return hparams_file(hp)


@contextlib.contextmanager
def serve(folder):
    """An HTTP server on 127.0.0.1 serving `folder` (a stand-in for the official download sites); yields its URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{httpd.server_port}/"
        finally:
            httpd.shutdown()


@pytest.fixture
def fake_units(monkeypatch):
    """Replace the training of a grid's unit by a record of what it would train with (fast, deterministic): each unit
    returns 50% everywhere. Returns the list of (unit, TrainConfig) calls."""
    import numpy as np

    from metacl_lite.lab import grid as G

    calls = []

    def fake(unit, bench, cfg, evaluate_rows="all"):
        calls.append((unit, cfg))
        n = bench.n_tasks
        if unit.kind == "run":
            return {"acc_matrix": [[50.0 if j <= i else np.nan for j in range(n)] for i in range(n)], "wall_s": 1.0}
        return {"acc": [50.0] * n, "wall_s": 1.0}

    monkeypatch.setattr(G, "execute_unit", fake)
    return calls


@pytest.fixture
def peaked_units(fake_units, monkeypatch):
    """`fake_units` whose accuracy peaks at a strength (beta or gamma) of 1, 0 scoring lowest: a tuning grid then has
    a best value, as a real one has (a grid whose values all score the same decides nothing: `lattice.choose`)."""
    import math

    from metacl_lite.lab import grid as G

    fake = G.execute_unit

    def peaked(unit, bench, cfg, evaluate_rows="all"):
        r = fake(unit, bench, cfg, evaluate_rows)
        s = max(cfg.beta, cfg.gamma)
        d = -5.0 if s <= 0 else -math.log10(s) ** 2
        if "acc_matrix" in r:
            r["acc_matrix"] = [[a + d for a in row] for row in r["acc_matrix"]]
        return r

    monkeypatch.setattr(G, "execute_unit", peaked)
    return fake_units


ROOT = Path(__file__).resolve().parents[1]
#: The reproduction page's live-run setting, and what the book built by the tests sets instead.
LIVE_DEFAULT, LIVE_QUICK = "quick = False  # smoke run", "quick = True  # smoke run"


class BookBuild(NamedTuple):
    result: subprocess.CompletedProcess  # jupyter-book's exit code and output
    html: Path  # the built site
    executed: Path  # MyST-NB's executed notebooks and their glue records (<page>.glue.json)

    def glue(self, page: str) -> dict:
        """What a page ("chapters/07_claims") glued in this build; nothing if it glued nothing."""
        from metacl_lite.publish.notebooks import glued_values

        assert (self.executed / f"{page}.ipynb").exists(), f"{page} was not executed by the book build"
        record = self.executed / f"{page}.glue.json"
        return glued_values(record) if record.exists() else {}


def build_book(src: Path, out: Path) -> subprocess.CompletedProcess:
    """`jupyter-book build` as `make book` runs it (warnings as errors), into `out`."""
    jb = str(Path(sys.executable).parent / "jupyter-book")
    return subprocess.run([jb, "build", str(src), "--path-output", str(out), "--warningiserror", "--builder", "html"],
                          capture_output=True, text=True)


@pytest.fixture(scope="session")
def book_build(tmp_path_factory) -> BookBuild:
    """The whole book, built once per test session with every page executed, as `make book` builds it, except that
    the reproduction page's live run is its quick one (3 tasks of 1 epoch instead of the paper's stream: four minutes
    less on a 2-core CPU; the full-size run is the same code on more data, and `make book` runs it). The copy sits
    beside a link to the package, for chapter 5's listings of its source. Tests of what a chapter computes read the
    executed pages' glued values from here instead of executing the chapter a second time."""
    tmp = tmp_path_factory.mktemp("book")
    shutil.copytree(ROOT / "book", tmp / "book", ignore=shutil.ignore_patterns("_build", ".jupyter_cache"))
    (tmp / "metacl_lite").symlink_to(ROOT / "metacl_lite", target_is_directory=True)
    page = tmp / "book" / "reproduce" / "benchmark.md"
    text = page.read_text()
    assert text.count(LIVE_DEFAULT) == 1, f"{page.name}: its parameters cell no longer says {LIVE_DEFAULT!r}"
    page.write_text(text.replace(LIVE_DEFAULT, LIVE_QUICK))
    out = tmp / "out"
    return BookBuild(build_book(tmp / "book", out), out / "_build" / "html", out / "_build" / "jupyter_execute")


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """tests/test_grading.py's class graded once, as root where the tests run as root: (working folder, the
    command's result). Session-wide: test_grading_rootless.py compares an unprivileged grader's sheet with it."""
    from test_grading import TIMEOUT, grade, make_submissions

    cwd = tmp_path_factory.mktemp("grading")
    make_submissions(cwd / "dist", cwd / "subs")
    package = Path(__file__).resolve().parents[1] / "metacl_lite" / "balance.py"
    before = package.read_bytes()
    try:
        r = grade(cwd, "a1", "subs", "--out", "grades.csv", "--feedback", "fb", "--timeout", TIMEOUT, "--dist",
                  "dist", "--jobs", "2")
    finally:
        after = package.read_bytes()
        if after != before:  # whatever happened, the checkout is left as it was (a grader without root cannot)
            package.write_bytes(before)
    assert after == before, "a submission changed the instructor's package"
    return cwd, r


@pytest.fixture
def no_gpu(monkeypatch):
    """A machine without a usable CUDA GPU, whatever this one has."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A machine that says it has a GPU, "GPU X", with 79 GB free (for the checks and the records only: the units are
    `fake_units`, and no determinism or precision flag of this process is changed)."""
    import torch

    from metacl_lite import training
    from metacl_lite.lab import grid, provenance

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (79 * 2 ** 30, 80 * 2 ** 30))
    monkeypatch.setattr(grid, "deterministic", lambda d: None)
    monkeypatch.setattr(training, "deterministic", lambda d: None)
    monkeypatch.setattr(training, "set_precision", lambda p, d: None)
    monkeypatch.setattr(provenance, "describe", lambda d, *_: "cuda: GPU X" if str(d).startswith("cuda") else "cpu: Y")


@pytest.fixture
def no_measuring(monkeypatch):
    """A benchmark that measures anything (the GEMM rate, a timed child, synthetic tensors) fails the test: for the
    refusals that must come before any measurement."""
    from metacl_lite.data import synthetic
    from metacl_lite.lab import bench

    def boom(*a, **k):
        raise AssertionError("measured before the options were checked")

    monkeypatch.setattr(bench, "matmul_gflops", boom)
    monkeypatch.setattr(bench, "in_child", boom)
    monkeypatch.setattr(synthetic, "synthetic_benchmark", boom)


#: The uid that grading without root runs as when the tests run as root (CI): nobody's (issue 42, point 5).
UNPRIVILEGED_UID = 65534


def _world_reachable(path: Path) -> bool:
    """Whether every uid can reach `path` (each folder above it searchable, the file itself executable by others)."""
    p = Path(os.path.realpath(path))
    return all(os.stat(d).st_mode & 0o001 for d in p.parents) and bool(os.stat(p).st_mode & 0o001)


def unprivileged_python(where: Path) -> list[str]:
    """A command that runs this environment's Python as UNPRIVILEGED_UID (the tests run as root): `setpriv` to that
    uid, with a virtual environment made under `where` (which it can enter) from this Python, or, where this Python
    lives where that uid cannot enter (root's home), from the system's own Python of the same version; its `.pth`
    file adds this environment's site-packages as a site folder (so the editable install's own `.pth` is read)."""
    import sysconfig

    assert os.geteuid() == 0, "only root runs a command as another uid"
    assert shutil.which("setpriv"), "grading without root is tested under setpriv (util-linux): install it"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.base_prefix) / "bin" / version, Path("/usr/bin") / version, Path("/usr/local/bin") / version]
    base = next((p for p in candidates if p.exists() and _world_reachable(p)), None)
    assert base, f"no {version} that uid {UNPRIVILEGED_UID} can run: {[str(c) for c in candidates]}"
    env = where / "python"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(env)], check=True, capture_output=True)
    site = subprocess.run([str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "zz_metacl_environment.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    subprocess.run(["chmod", "-R", "a+rX", str(env)], check=True)
    cmd = ["setpriv", f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}", "--clear-groups", "--",
           str(env / "bin" / "python")]
    r = subprocess.run([*cmd, "-c", "import torch, metacl_lite, otter"], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, f"uid {UNPRIVILEGED_UID} cannot run the package with {base}: {r.stderr[-2000:]}"
    return cmd


def give_to_unprivileged(folder: Path) -> None:
    """Make `folder` (and all below it) UNPRIVILEGED_UID's, and the folders above it searchable, so that a grader
    run as that uid reads and writes there as an instructor in their own folder."""
    folder = Path(folder).resolve()
    for top, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(top, name), UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    os.chown(folder, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    for d in folder.parents:
        if not os.stat(d).st_mode & 0o001:
            os.chmod(d, os.stat(d).st_mode | 0o001)


@pytest.fixture(scope="session")
def as_unprivileged():
    """The command prefix that runs this environment's Python as an unprivileged uid (`unprivileged_python`), in a
    temporary folder that uid can enter; removed after the session."""
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="metacl-rootless-", dir="/tmp"))
    os.chmod(where, 0o755)
    try:
        yield unprivileged_python(where)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def runs_a_submission(proc) -> bool:
    """Whether a process (psutil's) runs a submission's code in a jail of a grader run by these tests: as root, as a
    submission's own uid; without root, as the tests' own uid in a PID namespace other than theirs."""
    from metacl_lite.course import jail, userns

    try:
        uid = proc.uids().real
        if os.geteuid() == 0:
            return jail.UID_BASE <= uid < jail.UID_BASE + jail.UID_SPAN
        return uid == os.getuid() and userns.pid_namespace(str(proc.pid)) not in (0, userns.pid_namespace())
    except Exception:  # noqa: BLE001 - gone meanwhile
        return False


def secret_lines(name: str, min_len: int = 15) -> list[str]:
    """What a student must never see, read from the source: solution code (between `# BEGIN SOLUTION` and
    `# END SOLUTION` in code cells), solution text (written answers and rubrics, between the otter SOLUTION fences),
    and the names of the hidden tests. Lines shorter than `min_len` are skipped (too generic to search for)."""
    out: list[str] = []
    in_block = in_code = in_inline = hidden_cell = False
    cell_first = False
    from metacl_lite.course.assignments import source_path

    lines = source_path(name).read_text().splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("```{code-cell}"):
            in_code, cell_first = True, True
            continue
        if in_code and s == "```":
            in_code = hidden_cell = False
            continue
        if s == "```otter" and i + 1 < len(lines):
            nxt = lines[i + 1].strip().upper()
            if nxt.startswith("# BEGIN SOLUTION"):
                in_block = True
            elif nxt.startswith("# END SOLUTION"):
                in_block = False
            continue
        if in_code:
            if cell_first:
                cell_first = False
                if s.startswith(":"):  # MyST cell options
                    cell_first = True
                    continue
                hidden_cell = s.upper() == "# HIDDEN"
            if s.startswith("# BEGIN SOLUTION"):
                in_inline = True
            elif s.startswith("# END SOLUTION"):
                in_inline = False
            elif in_inline or (hidden_cell and s.startswith("def test_")):
                out.append(s)
        elif in_block and s and not s.startswith("#"):
            out.append(s)
    return [s for s in out if len(s) >= min_len]
