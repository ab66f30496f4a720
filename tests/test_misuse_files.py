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


README = (REPO / "README.md").read_text()
TABLE_END, CLAIMS_BEGIN, CLAIMS_END = "<!-- END table -->\n", "<!-- BEGIN claims pmnist -->\n", "<!-- END claims -->\n"


def _line(text: str, marker: str) -> int:
    return text[:text.index(marker)].count("\n") + 1


@pytest.mark.parametrize("edit, line_of, says", [
    # the table's END deleted: README_MARK would run to the claims block's END and replace the lines between
    (lambda t: t.replace(TABLE_END, ""), "<!-- BEGIN table", "has no <!-- END table --> before the next block"),
    (lambda t: t.replace(TABLE_END, "").replace(CLAIMS_END, ""), "<!-- BEGIN table", "has no <!-- END table -->"),
    (lambda t: t.replace(CLAIMS_END, ""), CLAIMS_BEGIN, "has no <!-- END claims --> after it"),
    (lambda t: t.replace(CLAIMS_BEGIN, ""), CLAIMS_END, "<!-- END claims --> has no BEGIN before it"),
    (lambda t: t.replace(CLAIMS_END, TABLE_END), "claims END",  # its line: where the claims block's END was
     "closes the block <!-- BEGIN claims pmnist -->"),
    (lambda t: t.replace(CLAIMS_END, "<!-- END claims --> done\n"), "<!-- END claims --> done",
     "is not a block marker; write it alone on its line"),
], ids=["table-end", "every-end", "last-end", "begin", "kind", "not-alone"])
def test_a_readme_with_a_marker_out_of_place_is_refused_before_anything_is_written(edit, line_of, says, tmp_path):
    from metacl_lite.publish import readme as R

    path = tmp_path / "README.md"
    path.write_text(edit(README))
    before = path.read_bytes()
    want = _line(README, CLAIMS_END) if line_of == "claims END" else _line(path.read_text(), line_of)
    for check in (True, False):
        with pytest.raises(FileFormatError) as e:
            R.update_readme(path, check=check)
        assert str(e.value).startswith(f"{path}, line {want}: ") and says in str(e.value)
        assert path.read_bytes() == before


@pytest.mark.parametrize("argv", [["readme", "--check"], ["readme"]])
def test_the_readme_tool_exits_2_with_one_line_when_every_end_is_gone(argv, tmp_path, monkeypatch, capsys):
    from metacl_lite.publish import readme as R

    monkeypatch.setattr(R, "REPO_ROOT", tmp_path)
    path = tmp_path / "README.md"
    path.write_text(README.replace(TABLE_END, "").replace(CLAIMS_END, ""))
    before = path.read_bytes()
    assert tools_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}, line {_line(README, '<!-- BEGIN table')}: <!-- BEGIN table results/pmnist-K20.json -->" in err
    assert path.read_bytes() == before


def test_the_committed_readme_pairs_its_markers():
    from metacl_lite.publish import readme as R

    assert R.check_blocks(README, REPO / "README.md") == README.count("<!-- BEGIN ") == 2


@pytest.fixture
def no_training(monkeypatch):
    from metacl_lite.lab import dynamics as D

    def boom(*a, **k):
        raise AssertionError("trained before the options were checked")

    monkeypatch.setattr(D, "train_unit", boom)
    monkeypatch.setattr("metacl_lite.data.benchmarks.make_benchmark", boom)
    monkeypatch.setattr("metacl_lite.lab.hparams.load", boom)


@pytest.mark.parametrize("options, says", [
    (["--threads", "100000"], "threads=100000: at most"),
    (["--seed-list", str(2 ** 64)], f"seed {2 ** 64} is too large"),
    (["--seed-list", f"3,{2 ** 63}"], "seeds go up to 2^63 - 1"),
])
def test_dynamics_refuses_threads_and_seeds_out_of_range_before_any_work(options, says, tmp_path, no_training,
                                                                         capsys):
    import torch

    from metacl_lite.cli import main

    threads = torch.get_num_threads()
    out = tmp_path / "d.json"
    assert main(["dynamics", *options, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err
    assert not out.exists() and torch.get_num_threads() == threads


@pytest.mark.parametrize("threads", ["0", "-1"])
def test_dynamics_threads_must_be_positive(threads, tmp_path, no_training, capsys):
    from metacl_lite.cli import main

    with pytest.raises(SystemExit) as e:
        main(["dynamics", "--threads", threads, "--out", str(tmp_path / "d.json")])
    assert e.value.code == 2 and f"--threads must be positive, got {threads}" in capsys.readouterr().err


def test_the_dynamics_api_checks_its_seeds_and_threads_too(tmp_path, no_training):
    from metacl_lite.errors import UsageError
    from metacl_lite.lab.dynamics import measure

    for seeds, threads, says in (([2 ** 64], None, "too large"), ([0], 0, "threads=0"), ([], None, "no seeds")):
        with pytest.raises(UsageError, match=says):
            measure(seeds, out=tmp_path / "d.json", threads=threads)
    assert not (tmp_path / "d.json").exists()


@pytest.mark.parametrize("who", ["", "  "])
def test_where_refuses_an_empty_need_gpu(who, capsys):
    assert tools_main(["where", "--benchmark", "cub", "--device", "cpu", "--need-gpu", who]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--need-gpu" in err and "make reproduce-cub" in err


@pytest.mark.parametrize("argv", [["readme", "--check"], ["readme"]])
def test_a_readme_that_is_not_utf8_is_refused_in_one_line(argv, tmp_path, monkeypatch, capsys):
    from metacl_lite.publish import readme as R

    monkeypatch.setattr(R, "REPO_ROOT", tmp_path)
    path = tmp_path / "README.md"
    path.write_bytes(README.encode("utf-8").replace("β".encode(), b"\xdf", 1))  # saved as Latin-1 by an editor
    before = path.read_bytes()
    assert tools_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{path} is not UTF-8 text (byte" in err, err
    assert path.read_bytes() == before
    path.unlink()
    assert tools_main(argv) == 2 and f"{path} does not exist: restore it from git" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["readme", "--check"], ["pages"], ["pages", "--check"]])
def test_the_page_tools_in_an_installed_package_say_they_need_a_checkout(argv, monkeypatch, capsys):
    from metacl_lite import paths

    monkeypatch.setattr(paths, "IN_CHECKOUT", False)
    assert tools_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs" not in err and "installed package" in err and "pip install -e ." in err
