"""Misuse that would lose work (issue 31): a benchmark's --out that names a results or tuning file, and a README whose
generated blocks lost a marker. Each is one line and exit 2 before anything is written; the file is unchanged."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from metacl_lite.errors import FileFormatError
from metacl_lite.lab import bench as B
from metacl_lite.tools import main as tools_main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_measuring(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("measured before --out was checked")

    monkeypatch.setattr(B, "matmul_gflops", boom)
    monkeypatch.setattr(B, "in_child", boom)
    import metacl_lite.data.synthetic as S

    monkeypatch.setattr(S, "synthetic_benchmark", boom)


@pytest.mark.parametrize("committed, what", [("pmnist-K20.json", "a results file"),
                                             ("tuning-pmnist-K20.json", "a tuning file"),
                                             ("dynamics-pmnist.json", "a 'dynamics' file")])
@pytest.mark.parametrize("options", [["--K", "20"], ["--K", "20", "--skip-grid", "--methods", "ewc"],
                                     ["--suite", "cub", "--methods", "finetune", "--epochs", "1", "--n-tasks", "1"]],
                         ids=["pmnist", "pmnist-partial", "cub"])
def test_bench_refuses_an_out_that_is_not_a_bench_file(committed, what, options, tmp_path, no_measuring, capsys):
    out = tmp_path / committed
    shutil.copy(REPO / "results" / committed, out)
    before = out.read_bytes()
    assert tools_main(["bench", *options, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{out} is {what}" in err and "not a speed benchmark file" in err and "give --out a new file" in err
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [committed]


def test_the_gpu_bench_checks_its_out_the_same_way(tmp_path):
    out = tmp_path / "r.json"
    shutil.copy(REPO / "results" / "pmnist-K1.json", out)
    with pytest.raises(FileFormatError, match="is a results file"):
        B.check_bench_out(out, {"gpu": True, "methods": ["ewc"], "seeds": 5})


def test_a_bench_file_is_still_a_bench_out(tmp_path):
    out = tmp_path / "b.json"
    shutil.copy(REPO / "results" / "bench-pmnist-K20.json", out)
    doc = json.loads(out.read_text())
    assert B.check_bench_out(out, {"per_method": doc["per_method"], "grids": doc["grids"]}) == out
