"""Issue 36: the channel between the trusted grader and the jail carries plain data only, and the jail's copy of the
package holds no reference implementation (fast: no grading)."""
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from metacl_lite.course import channel as C
from metacl_lite.course import grading_refs as R
from metacl_lite.models import mlp

ROOT = Path(__file__).resolve().parents[1]


def cross(v, **kw):
    """What the other side builds from v: JSON text in between, as on the pipe."""
    return C.decode(json.loads(json.dumps(C.encode(v))), **kw)


def test_values_cross_as_fresh_plain_objects():
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    got = cross({"a": (1, 2.5, None, True), 3: [t, np.float32(1.5), Path("x/y")]})
    assert got["a"] == (1, 2.5, None, True) and type(got["a"][1]) is float
    assert type(got[3][0]) is torch.Tensor and got[3][0].dtype == torch.float64 and torch.equal(got[3][0], t)
    assert type(got[3][1]) is float and got[3][1] == 1.5 and got[3][2] == Path("x/y")
    net = mlp(in_dim=4, hidden=(3,), n_classes=2, n_heads=2, activation="tanh").double()
    back = cross(net)
    assert back is not net and type(back.body[1]) is torch.nn.Tanh and len(back.heads) == 2
    x = torch.randn(5, 4, dtype=torch.float64)
    assert torch.equal(back(x, 1), net(x, 1))
    import pandas as pd

    df = pd.DataFrame({"K": [10, 100], "method": ["pi", "ewc"], "ACC": [1.5, 2.5]})
    assert cross(df).equals(df)


def test_an_object_that_compares_equal_to_anything_arrives_as_its_value():
    class Eq(float):
        def __eq__(self, other):
            return True

    class T(torch.Tensor):
        def __eq__(self, other):
            return True

    got = cross(Eq(0.25))
    assert type(got) is float and got == 0.25 and got != 1.0
    t = cross(torch.zeros(3).as_subclass(T))
    assert type(t) is torch.Tensor and not bool((t == torch.ones(3)).all())


@pytest.mark.parametrize("bad", [object(), lambda: 1, iter([1]), {1, 2}])
def test_what_is_not_plain_data_does_not_cross(bad):
    with pytest.raises(C.ChannelError):
        C.encode(bad)


def test_the_grader_refuses_pickles_object_arrays_unknown_tags_and_files():
    buf = io.BytesIO()
    np.save(buf, np.array([object()], dtype=object), allow_pickle=True)
    import base64

    with pytest.raises(ValueError):  # numpy refuses the pickled array (allow_pickle=False)
        C.decode({"ndarray": base64.b64encode(buf.getvalue()).decode()})
    for msg in ({"pickle": "x"}, {"tuple": [1], "extra": 2}, {"file": ["a", "eA=="]}):
        with pytest.raises(C.ChannelError):
            C.decode(msg)  # a file without a landing folder: refused


def test_a_file_of_the_grader_crosses_as_a_copy(tmp_path):
    src = tmp_path / "fake-K10.json"
    src.write_text('{"a": 1}')
    land = tmp_path / "land"
    land.mkdir()
    got = C.decode(json.loads(json.dumps(C.encode({10: src}, ship=lambda p: True))), landing=land)
    assert got[10].read_text() == '{"a": 1}' and got[10].is_relative_to(land) and got[10] != src


@pytest.fixture
def files(tmp_path, monkeypatch):
    """The worker's file policy, its temporary folder inside its private folder as in `grading_worker.main`."""
    import tempfile

    from metacl_lite.course.grading_worker import Files

    private = tmp_path / "private"
    (private / "tmp").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(private / "tmp"))
    return Files(private)


def test_the_worker_sends_the_jail_only_files_it_made_itself(tmp_path, files):
    """a4's visible test passes the submission's `files` back to its `collect`: a path the submission named, to a
    file only the instructor can read, or a link to one from the worker's own folder, must not go as the file."""
    import tempfile

    secret = tmp_path / "instructor" / "grades.csv"
    secret.parent.mkdir()
    secret.write_text("SECRET")
    own = Path(tempfile.mkdtemp()) / "fake-K10.json"
    own.write_text("{}")
    link = own.parent / "link.json"
    link.symlink_to(secret)
    sent = C.encode({10: secret, 20: own, 30: link}, ship=files.may_ship)
    assert "SECRET" not in json.dumps(sent) and "U0VDUkVU" not in json.dumps(sent)  # nor its base64
    got = dict((k, v) for k, v in sent["dict"])
    assert got[10] == {"path": str(secret)} and got[30] == {"path": str(link)} and "file" in got[20]
    landed = files.decode({"file": ["pmnist-K10-live.json", "e30="]})  # what the jail sent lands, and may go back
    assert landed.read_text() == "{}" and landed.is_relative_to(files.landing) and files.may_ship(landed)


@pytest.mark.parametrize("name", ["/etc/passwd", "../../../../etc/passwd", "a4-runs/../../x.json", "/"])
def test_a_name_the_submission_sends_names_nothing_on_the_grading_machine(files, name):
    got = files.decode({"path": name})
    assert got == files.nowhere or files.nowhere in got.parents, got
    assert ".." not in got.parts and not got.exists()
    assert C.decode({"path": name}) == Path(name)  # the jail's side takes the grader's names as they are


def test_the_jails_copy_of_the_package_holds_stubs_for_every_withheld_reference(tmp_path):
    pkg = tmp_path / "metacl_lite"
    shutil.copytree(ROOT / "metacl_lite", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for assignment, names in R.WITHHELD.items():
        done = R.sanitize(pkg, assignment)
        assert done == sorted(names)
    for dotted in (d for names in R.WITHHELD.values() for d in names):
        module, name = dotted.rsplit(".", 1)
        text = (pkg / f"{module}.py").read_text()
        original = (ROOT / "metacl_lite" / f"{module}.py").read_text()
        assert f"metacl_lite.{dotted} is withheld while grading" in text
        assert text != original and len(text) < len(original)
    compile((pkg / "balance.py").read_text(), "balance.py", "exec")  # still a module
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "balance.py").write_text("x = 1\n")
    with pytest.raises(LookupError, match="defines no dynamic_balance, dynamic_lambda, kkt_residuals"):
        R.sanitize(tmp_path / "stale", "a1_dynamic_balance")


def test_written_answers_are_exported_per_question():
    import nbformat

    from metacl_lite.course import sheet as S

    nb = nbformat.read(str(ROOT / "book/assignments/a1_dynamic_balance.ipynb"), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "**Question 4**" in c.source)
    nb.cells[at + 1].source = "Because g2 = 0 makes every g feasible: MY OWN ANSWER."
    text = S.written_answers(nbformat.writes(nb).encode(), "subs/alice.ipynb", {"q4": 2.0})
    assert text.startswith("# Written answers: subs/alice.ipynb")
    assert "## q4 (2 points, graded by hand)" in text and "> **Question 4** (written, 2 points" in text
    assert "MY OWN ANSWER" in text and "grader.check" not in text
    assert "(the question's cell is missing)" in S.written_answers(b"{}", "x", {"q4": 2.0})


def test_without_root_on_a_machine_that_refuses_user_namespaces_the_grader_says_what_to_do(monkeypatch):
    """Issue 42 (5): without root the jail is built in a user namespace; where the machine refuses a mount there,
    the grader says why and what to do (tests/test_grading_rootless.py: the whole command, exit 2)."""
    from metacl_lite.course import jail

    asked = []
    monkeypatch.setattr(jail.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(jail, "probe", lambda rootless: asked.append(rootless) or "bwrap: setting up uid map: "
                                                                                 "Operation not permitted")
    with pytest.raises(jail.JailUnavailable, match="user namespace.*Operation not permitted.*run the grader as root"):
        jail.check_available()
    assert asked == [True]


def test_as_root_on_a_machine_that_refuses_namespaces_the_grader_says_what_to_do(monkeypatch):
    """As root the probe makes the same namespaces and mount but the user namespace; where it fails, the grader says
    why, and that a container needs CAP_SYS_ADMIN."""
    from metacl_lite.course import jail

    asked = []
    monkeypatch.setattr(jail.os, "geteuid", lambda: 0)
    monkeypatch.setattr(jail, "probe", lambda rootless: asked.append(rootless) or "bwrap: Creating new namespace "
                                                                                 "failed: Operation not permitted")
    with pytest.raises(jail.JailUnavailable, match=r"refuses new namespaces or a mount in them \(bwrap: Creating "
                                                   r"new namespace failed: Operation not permitted\); a container "
                                                   r"needs CAP_SYS_ADMIN"):
        jail.check_available()
    assert asked == [False]


def test_the_jail_binds_the_python_and_its_added_folders_not_the_working_folder_the_temporary_one_or_the_checkout(
        tmp_path, monkeypatch):
    import sys

    from metacl_lite.course import jail

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    added = next(p.resolve() for p in (Path("/usr/share"), Path("/etc"))  # one a .pth file could add, outside the
                 if not any(q in (p.resolve(), *p.resolve().parents) for q in prefixes))  # prefixes (the system's: /usr)
    monkeypatch.setattr(sys, "path", [str(work), "", str(ROOT), str(ROOT / "metacl_lite"), str(tmp_path), "/",
                                      str(added), "/nonexistent-metacl"])
    got = jail.python_dirs(ROOT)
    assert prefixes <= {p.resolve() for p in got} and added in got
    assert not [p for p in got if p == Path("/") or ROOT in (p, *p.parents) and p.resolve() not in prefixes
                or tmp_path in (p, *p.parents)], got
