"""Adding a regulariser touches its `Importance` class (registered under its name by `@estimator`), its one line in the
vocabulary and its hparams entry, no other file (issue 35 item 3): a toy regulariser (Omega = 2 everywhere) is added to
a copy of the package, and `run` and `table` of that copy train it and show its rows after the paper's. One with an
option of its own also declares the option in the vocabulary (`vocab.Option`), and the config, the command line and
the checks pick it up."""
from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "metacl_lite"

REGISTRATION = '    Regulariser("toy", "Toy", False),\n'
TOY_CLASS = '''

@estimator("toy")
class Toy(Importance):
    """A toy regulariser for the test: Omega = its option toy_omega (2 by default) for every parameter."""

    def __init__(self, omega: float = 2.0):
        self.omega = omega

    @classmethod
    def from_config(cls, cfg) -> "Toy":
        return cls(cfg.toy_omega)

    def end_task(self, model: nn.Module, exp: Experience) -> torch.Tensor:
        return self.omega * torch.ones_like(parameters_to_vector(model.parameters())).detach()
'''
#: The toy's option, declared in the vocabulary: the config, the flags, the checks and the results files follow.
OPTION = '''    Option("toy_omega", 2.0, FinitePositive(), "Toy's Ω", "the toy's Omega, the same for every parameter",
           ("toy",)),
'''


def _changed(a: Path, b: Path, rel: Path = Path()) -> list[str]:
    """The files that differ between two package trees (caches left out)."""
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    out = [str(rel / n) for n in cmp.diff_files + cmp.left_only + cmp.right_only]
    for sub in cmp.common_dirs:
        out += _changed(a / sub, b / sub, rel / sub)
    return sorted(out)


def _add_toy(pkg: Path) -> None:
    vocab = pkg / "vocab.py"
    text = vocab.read_text()
    anchor = 'Regulariser("l2", "L2", False),\n'
    assert anchor in text
    table = "OPTION_TABLE: tuple[Option, ...] = (\n"
    assert table in text
    vocab.write_text(text.replace(anchor, anchor + REGISTRATION).replace(table, table + OPTION))
    (pkg / "importance.py").write_text((pkg / "importance.py").read_text() + TOY_CLASS)
    hp_path = pkg / "lab" / "hparams.json"
    hp = json.loads(hp_path.read_text())
    entry = hp["pmnist"]["by_K"].setdefault("5", {"methods": {}, "source": "a test", "command": "none"})
    entry["methods"].update({"toy": {"beta": 0.1}, "toy-metacl-beta": {"beta": 0.1},
                             "toy-metacl-lambda": {"gamma": 0.1}})
    hp_path.write_text(json.dumps(hp, indent=1))


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("copy")
    shutil.copytree(PACKAGE, root / "metacl_lite", ignore=shutil.ignore_patterns("__pycache__"))
    _add_toy(root / "metacl_lite")
    return root


def _run(root: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "METACL_LITE_DATA": str(ROOT / "data"), "METACL_LITE_PROGRESS": "0"}
    return subprocess.run([sys.executable, "-m", "metacl_lite", *argv], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_toy_regulariser_needs_three_edits_and_run_and_table_pick_it_up(copy):
    assert _changed(PACKAGE, copy / "metacl_lite") == ["importance.py", "lab/hparams.json", "vocab.py"]
    out = copy / "toy.json"
    r = _run(copy, "run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "1",
             "--workers", "1", "--no-progress", "--methods", "finetune,toy,toy-metacl-beta,toy-metacl-lambda",
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["config"]["methods"] == ["finetune", "toy", "toy-metacl-beta", "toy-metacl-lambda"]
    assert res["config"]["method_hparams"]["toy-metacl-lambda"] == {"gamma": 0.1}
    t = _run(copy, "table", str(out))
    assert t.returncode == 0, t.stderr
    lines = t.stdout.splitlines()
    toy = [line for line in lines if line.startswith("Toy")]
    assert [line.split("  ")[0] for line in toy] == ["Toy (not in the paper)", "Toy-MetaCL-β (not in the paper)",
                                                     "Toy-MetaCL-λ (not in the paper)"]
    assert lines.index(toy[0]) > max(i for i, line in enumerate(lines) if line.startswith("Joint training"))
    h = _run(copy, "run", "--help")
    assert "toy-metacl-lambda" not in h.stdout  # --methods is checked, not listed
    bad = _run(copy, "run", "--benchmark", "pmnist", "--K", "5", "--methods", "toy-metacl-sigma")
    assert bad.returncode == 2 and "toy-metacl-lambda" in bad.stderr  # the CLI's choices name it


def test_the_toys_option_is_a_flag_a_check_and_a_recorded_setting(copy):
    """The option declared with the toy (`OPTION`) is a flag of `run` with its help, refused with the flag named when
    its check fails, handed to the toy's class through the config, and recorded in the results file."""
    assert "--toy-omega" in _run(copy, "run", "--help").stdout
    bad = _run(copy, "run", "--benchmark", "pmnist", "--K", "5", "--methods", "toy", "--toy-omega", "0")
    assert bad.returncode == 2 and "--toy-omega must be a finite number > 0" in bad.stderr
    out = copy / "toy3.json"
    r = _run(copy, "run", "--benchmark", "pmnist", "--K", "5", "--n-tasks", "2", "--epochs", "1", "--seeds", "1",
             "--workers", "1", "--no-progress", "--methods", "toy", "--toy-omega", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["config"]["method_options"]["toy"]["toy_omega"] == res["config"]["train"]["toy_omega"] == 3.0
    assert "--toy-omega 3" in res["provenance"]["command"]


def test_the_installed_package_knows_no_toy():
    """The copy, not this checkout, holds the toy: the test above can fail if the package were used instead."""
    from metacl_lite import vocab

    assert "toy" not in vocab.REGULARISERS and "toy_omega" not in vocab.OPTIONS
