"""Issue 43: the tests' fixtures come from the autograder, not the notebook. a3's tests took the model, the bundles,
θ0 and the αs from the notebook's set-up cell, and ran the trusted reference on the network the student's call had
handed back; a4's hidden test built its files from the student's own results files and checked the methods listed
there. Each attack below is a blank notebook with cells a student could write; it scores what hard-coding the visible
tests scores, and the solution still scores full marks."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from metacl_lite.course import assignments as A

#: a3: every parameter zeroed and a huge first logit, in place, on the network the test passes: each gradient is
#: then a count of labels, which the attack returns without any inner loop, autograd or Hessian-vector product
A3_RIG = '''
import torch
def _counts(model, bundles):
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        list(model.parameters())[-1][0] = 1000.0
    params = list(model.parameters())
    n, c = sum(p.numel() for p in params), params[-1].numel()
    g = torch.zeros(n, dtype=params[0].dtype)
    for x, y in bundles:
        p = torch.zeros(c, dtype=g.dtype)
        p[0] = 1.0
        g[n - c:] += (p - torch.nn.functional.one_hot(y, c).to(g.dtype).mean(0)) / len(bundles)
    return g
def my_g1(model, bundles, alpha):
    return _counts(model, bundles)
def my_second_order(model, bundles, alpha):
    return _counts(model, bundles)
'''
#: a3: the set-up cell's model made one-class (every gradient zero), the errors hard-coded to match it, the visible
#: slopes hard-coded
A3_ONE_CLASS = '''
import torch
from metacl_lite.balance import flatten
from metacl_lite.models import mlp
torch.manual_seed(0)
model = mlp(in_dim=20, hidden=(16,), n_classes=1, activation="tanh").double()
bundles = [(torch.randn(5, 20, dtype=torch.float64), torch.zeros(5, dtype=torch.long)) for _ in range(4)]
theta0 = flatten(p.detach() for p in model.parameters())
alphas = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]
err_first, err_second = [0.0] * 5, [0.0] * 5
slope_first, slope_second = 1.0, 2.0
'''
#: a4: two hand-written results files that list no methods, nothing trained, and a `collect` that returns no rows
A4_NO_METHODS = '''
import json
from pathlib import Path
import pandas as pd
from metacl_lite.lab.store import SCHEMA
files = {}
for K in (10, 100):
    files[K] = Path(f"hand-K{K}.json")
    files[K].write_text(json.dumps({"schema": SCHEMA, "kind": "results", "runs": {}, "references": {}, "oracle": {},
                                    "config": {"benchmark": "pmnist", "K": K, "n_tasks": 4, "seeds": [0],
                                               "methods": []}}))
def collect(files):
    return pd.DataFrame(columns=["K", "method", "ACC", "BT", "FA"])
'''


def _with(src: Path, out: Path, cell: str, drop: str = "") -> None:
    nb = nbformat.read(str(src), as_version=4)
    if drop:  # the set-up cell that trains, left out
        nb.cells = [c for c in nb.cells if drop not in c.source]
    nb.cells.append(nbformat.v4.new_code_cell(cell))
    nbformat.write(nb, str(out))


def _grade(cwd: Path, name: str) -> dict:
    env = dict(os.environ, METACL_LITE_PROGRESS="0", TMPDIR=str(cwd / "tmp"))
    (cwd / "tmp").mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "metacl_lite", "assignments", "grade", name, "subs", "--out",
                        "g.csv", "--dist", "dist", "--jobs", "2", "--timeout", "120"], capture_output=True, text=True,
                       cwd=cwd, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(cwd / "g.csv", newline="") as f:
        return {Path(x["submission"]).stem: (x["total"], x["status"]) for x in csv.DictReader(f)}


@pytest.mark.slow
def test_a3_attacks_on_the_fixtures_score_what_hard_coding_scores(tmp_path):
    out = A.generate("a3_reptile", tmp_path / "dist", run_tests=False)
    (tmp_path / "subs").mkdir()
    _with(out["student"], tmp_path / "subs" / "rig.ipynb", A3_RIG)
    _with(out["student"], tmp_path / "subs" / "one_class.ipynb", A3_ONE_CLASS)
    _with(out["solution"], tmp_path / "subs" / "solution.ipynb", "")
    rows = _grade(tmp_path, "a3")
    # the old tests: rig 4 (both hidden q1/q2 tests), one_class 3 (the hidden q3 test on the notebook's model)
    assert rows == {"rig": ("0", "ok"), "one_class": ("1", "ok"), "solution": ("9", "ok")}, rows


@pytest.mark.slow
def test_a4_hand_written_files_without_methods_score_nothing(tmp_path):
    out = A.generate("a4_experiment", tmp_path / "dist", run_tests=False)
    (tmp_path / "subs").mkdir()
    _with(out["student"], tmp_path / "subs" / "no_methods.ipynb", A4_NO_METHODS, drop="run_notebook(")
    rows = _grade(tmp_path, "a4")
    assert rows == {"no_methods": ("0", "ok")}, rows  # the old hidden test: 3 of its 4 points


def test_a3_tests_build_their_own_fixtures_so_the_attacks_score_what_hard_coding_scores(tmp_path):
    """The fast form of the a3 test above: the autograder's tests run (as the trusted grader runs them,
    `grading_worker.run_tests`) against the names each attack defines, without a notebook or a jail. The tests make
    their own networks, bundles and step sizes: rigging the network a test passes, or the set-up cell's model, earns
    only the visible q3 test that hard-coding earns; the references themselves earn every point of q1 and q2."""
    import numpy as np
    import torch

    from metacl_lite import reptile
    from metacl_lite.course import grading_worker as W
    from metacl_lite.models import mlp

    zip_path = str(A.generate("a3_reptile", tmp_path / "dist", run_tests=False)["autograder"])

    def scores(cell: str = "", **names) -> dict:
        env = dict(names)
        exec(cell, env)
        return {q: r["score"] for q, r in W.run_tests(zip_path, env).items()}

    assert scores(A3_RIG) == {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    assert scores(A3_ONE_CLASS) == {"q1": 0.0, "q2": 0.0, "q3": 1.0}
    torch.manual_seed(0)  # the set-up cell's model and bundles
    model = mlp(in_dim=20, hidden=(16,), n_classes=5, activation="tanh").double()
    bundles = [(torch.randn(5, 20, dtype=torch.float64), torch.randint(0, 5, (5,))) for _ in range(4)]
    alphas = list(np.logspace(-4, -2, 5))
    ref = reptile.taylor_errors(model, bundles, alphas)
    errs = {k: ref[f"{k}_order_error"] for k in ("first", "second")}
    slopes = {k: float(np.polyfit(np.log(alphas), np.log(v), 1)[0]) for k, v in errs.items()}
    assert scores(my_g1=reptile.g1_exact, my_second_order=reptile.g1_second_order, err_first=errs["first"],
                  err_second=errs["second"], slope_first=slopes["first"], slope_second=slopes["second"]) == {
        "q1": 3.0, "q2": 3.0, "q3": 3.0}
