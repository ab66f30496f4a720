"""The records that `book/reference.md`, `book/running.md` and chapter 3 glue into their Markdown
(`metacl_lite/publish/page_reference.py`, `page_running.py`, `page_dynamic_balance.py`; glueing in `formatting.py`),
pinned on the committed files to the numbers those pages showed when their
words were still built in the pages; the premises the reference asserts, shown to fail when a record changes; and the
reference's and the README's module maps, which must name every module of the package."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from metacl_lite.lab.store import load
from metacl_lite.publish import formatting as F, page_dynamic_balance as DB, page_reference as RF, page_running as RB
from metacl_lite.report.timings import DEVICE_FILES, device_table

ROOT = Path(__file__).resolve().parent.parent
R = ROOT / "results"
PACKAGE = ROOT / "metacl_lite"


def test_glue_record_glues_strings_as_markdown_and_numbers_as_they_are(monkeypatch):
    import myst_nb
    from IPython.display import Markdown

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.update({name: (value, display)}))
    F.glue_record({"x_n": 12, "x_cmd": "`run`", "x_table": Markdown("| a |")}, markdown=True)
    assert glued["x_n"] == (12, False)
    assert isinstance(glued["x_cmd"][0], Markdown) and glued["x_cmd"][0].data == "`run`"
    assert glued["x_table"][0].data == "| a |"


def test_cpu_bench_records_as_the_reference_showed_them():
    k20 = RF.cpu_bench_record(load(R / "bench-pmnist-K20.json", "bench"))
    assert (k20["grids_kind"], k20["reduced"]) == (True, False)
    assert [k20[k] for k in ("gemm", "gemm_1", "tflop", "bound", "bound_1")] == ["118", "74", "1.13", "9.6", "15.3"]
    assert k20["command"] == "`python -m metacl_lite.tools bench --K 20`" and k20["commit"] == "`e49eb9e17e`"
    assert "whole grid, K" in k20["grids"].data and "speed-up" in k20["grids"].data
    cifar = RF.cpu_bench_record(load(R / "bench-cifar100.json", "bench"))
    assert (cifar["grids_kind"], cifar["reduced"], cifar["n_tasks"], cifar["epochs"], cifar["grid_h"]) == (
        False, True, 2, 1, "~12.5")
    assert "full run (min)" in cifar["methods"].data and "~" in cifar["methods"].data


def test_gpu_grid_records_as_the_reference_showed_them():
    mnist = RF.gpu_grid_record(load(R / "bench-pmnist-cuda.json", "bench"))
    assert [mnist[k] for k in ("scaled", "met", "seeds", "grid", "target", "K", "n_tasks", "epochs", "workers")] == [
        False, True, 5, "44.7 s", "60.0 s", 20, 20, 5, 8]
    cub = RF.gpu_grid_record(load(R / "bench-cub-cuda.json", "bench"))
    assert [cub[k] for k in ("scaled", "met", "measured_seeds", "measured", "times", "grid", "target", "ratio")] == [
        True, False, 1, "8.4 min", "5", "42.1 min", "30.0 min", "1.4"]
    assert "peak GPU memory (GB)" in cub["units"].data or "wall per unit (s), sharing the GPU" in cub["units"].data


def test_gpu_check_record_counts_and_marks_the_tests_not_run():
    g = RF.gpu_check_record(json.loads((R / "gpu-check.json").read_text()), ROOT / "tests" / "test_gpu.py")
    assert (g["passed"], g["failed"], g["command"]) == (12, 0, "`python data_scripts/gpu_check.py`")
    rows = [r for r in g["table"].data.split("\n")[2:] if r.strip()]
    assert len(rows) == g["passed"] + g["failed"] + g["not_run"]
    assert sum(r.rstrip(" |").endswith("–") for r in rows) == g["not_run"]
    assert not any("test_" in r or "_" in r.split("|")[1] for r in rows)  # names in words


def test_elapsed_record_of_the_committed_K20_file():
    pm = RB.elapsed_record(json.loads((R / "pmnist-K20.json").read_text()), "results/pmnist-K20.json")
    assert [pm[k] for k in ("runs", "seeds_1", "min_1", "pace_1", "seeds_2", "min_2", "pace_2", "span_whole",
                            "unit_whole", "pace_fold_text", "together")] == [
        2, 5, "11", "2.3", 5, "38", "7.6", "49", "98", "3.3", True]
    k500 = RB.elapsed_record(json.loads((R / "tuning-pmnist-K500.json").read_text()), "results/tuning-pmnist-K500.json")
    assert re.fullmatch(r"\d+\.\d", k500["span"]) and re.fullmatch(r"`[0-9a-f]{7,40}`", k500["commit"])


def test_choices_record_marks_the_decided_variant_and_writes_minus_signs():
    c = RF.choices_record(json.loads((R / "open-choices-pmnist.json").read_text()))
    assert c["table"].data.count("**(decided)**") == 3 and "nan" not in c["table"].data
    margins = c["margins"].data
    assert "| MAS | `base`     | `max`       | +0.44, +0.28 | −1.03, +1.78 |" in margins
    assert "-1.03" not in margins


def test_timings_frame_reads_each_status():
    t = pd.DataFrame({"execution_s": [12.0, float("nan"), float("nan"), 400.0, 3.0],
                      "status": ["cached", "absent", "not executed", "force", "odd"],
                      "overlapped": [0, 0, 0, 0, 2], "excluded": [0, 0, 5, 0, 0]},
                     index=pd.Index(["a", "b", "c", "d", "e"], name="page"))
    f = RB.timings_frame(t)
    assert f["Time"].tolist() == ["12.0 s", "–", "–", "6.7 min", "3.0 s"]
    assert f["Note"].tolist() == ["", "not timed: not in the book then", "5 page(s), not executed",
                                  "runs on every build: see the table at the end", "overlapped 2 other run(s)"]
    assert f.index.name == "Page"


def test_device_frame_of_the_committed_benchmarks():
    benches = {n: json.loads((R / n).read_text()) for pair in DEVICE_FILES.values() for n in pair if (R / n).exists()}
    d = RB.device_frame(device_table(benches))
    assert d.loc["Permuted MNIST", "CPU"].startswith("6.5 min for 3 seeds with references and oracle")
    # the paper's eleven methods, whatever extensions the package trains besides (issue 35 item 3)
    assert d.loc["Split CUB-200", "CPU"].startswith("~163 h for 5 seeds without references and oracle")
    assert d.loc["Split CUB-200", "GPU"].startswith("about 42.1 min for 5 seeds, an estimate: 1 seed timed, × 5")
    assert d.loc["Permuted MNIST", "GPU"].startswith("44.7 s for 5 seeds, measured")


def test_balance_snapshot_is_an_image_with_its_alt_text():
    import numpy as np

    from tests.test_book_code import code_cells

    page = "\n".join(c for _, c in code_cells(ROOT / "book" / "chapters" / "03_dynamic_balance.md"))
    alt = eval(re.search(r"^ALT = (\(.*?\))$", page, re.S | re.M).group(1))  # the page's words
    html = DB.balance_snapshot(np.array([1.0, 0.3]), 140.0, 1.5, 0.6, 0.0, alt).data
    assert html.startswith('<img alt="The balance in two dimensions at |g2| = 1.50, 140°, beta = 0.60, gamma = 0.00:')
    assert "data:image/png;base64," in html


def _reference_premises() -> str:
    from tests.test_book_code import code_cells

    cells = [c for tags, c in code_cells(ROOT / "book" / "reference.md") if "remove-cell" in tags and "assert" in c]
    assert len(cells) == 1
    return cells[0]


@pytest.mark.parametrize("change", ["cub met", "pmnist scaled", "cifar100 mps", "K20 reduced", "all run",
                                    "K500 without legacy"])
def test_the_reference_fails_when_a_premise_of_its_sentences_changes(change):
    cpu = {n: RF.cpu_bench_record(load(R / f"bench-{n}.json", "bench"))
           for n in ("pmnist-K500", "pmnist-K20", "cifar100", "cub")}
    gpu = {s: RF.gpu_grid_record(load(R / f"bench-{s}-cuda.json", "bench")) for s in ("pmnist", "cifar100", "cub")}
    gc = RF.gpu_check_record(json.loads((R / "gpu-check.json").read_text()), ROOT / "tests" / "test_gpu.py")
    code = _reference_premises()
    exec(code, {"cpu": cpu, "gpu": gpu, "gc": gc})  # the committed files: every premise holds
    {"cub met": lambda: gpu["cub"].update(met=True), "pmnist scaled": lambda: gpu["pmnist"].update(scaled=True),
     "cifar100 mps": lambda: gpu["cifar100"].update(mps=True), "K20 reduced": lambda: cpu["pmnist-K20"].update(
        reduced=True), "all run": lambda: gc.update(not_run=0),
     "K500 without legacy": lambda: cpu["pmnist-K500"].update(legacy=False)}[change]()
    with pytest.raises(AssertionError, match="rewrite"):
        exec(code, {"cpu": cpu, "gpu": gpu, "gc": gc})


def _modules() -> set[str]:
    """Every module of the package as the module maps name it: `models`, `lab/store`; a subpackage's __init__ that
    holds code by the subpackage (`cli`, `tools`); the package's own __init__ and __main__ left out."""
    names = set()
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(PACKAGE).with_suffix("")
        if rel.name == "__main__" or rel.parts == ("__init__",) or (
                rel.name == "__init__" and not re.search(r"^(def|class) ", f.read_text(), re.M)):
            continue  # a subpackage's __init__ that only marks the folder: the table's heading names the folder
        names.add("/".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
    return names


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _map_problems(section: str) -> tuple[list[str], list[str]]:
    """A module map's (modules of the package it does not name, names in its tables' first column that are no module
    of the package)."""
    name = r"`([a-z_0-9]+(?:/[a-z_0-9]+)?)`"
    rows = [line.split("|")[1] for line in section.split("\n") if line.startswith("| `")]
    listed = {m for r in rows for m in re.findall(name, r)}
    return sorted(_modules() - set(re.findall(name, section))), sorted(listed - _modules())


def test_the_reference_module_map_names_every_module_and_no_other():
    section = _section((ROOT / "book" / "reference.md").read_text(), "## Layout, module by module")
    missing, stale = _map_problems(section)
    assert missing == [], "modules missing from the reference's map (book/reference.md)"
    assert stale == [], "the reference's map names modules the package does not have"
    # the check sees a row taken out and a module that went away
    assert _map_problems(section.replace("| `lab/lattice` |", "| |")) == (["lab/lattice"], [])
    assert _map_problems(section.replace("`lab/lattice`", "`lab/grid_lattice`"))[1] == ["lab/grid_lattice"]


def test_the_readme_layout_names_every_folder_of_the_package():
    section = _section((ROOT / "README.md").read_text(), "## Layout")
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert [f for f in folders if f"metacl_lite/{f}/" not in section] == []
    base = [m for m in _modules() if "/" not in m and (PACKAGE / f"{m}.py").exists()]
    assert [m for m in sorted(base) if not re.search(rf"\b{m}\b", section)] == []
    assert "benchmarks/" in section and "fasteval" in section
