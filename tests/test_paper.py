"""The paper's numbers as data (metacl_lite.findings.paper), checked cell by cell against the paper's LaTeX source.

The LaTeX is read by a small parser of its own, written here and sharing no code with paper.py: every number in
paper.py must be in a results table of the LaTeX, and every numeric cell of every results table must be in paper.py.
"""
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

import pytest

from metacl_lite.findings.paper import PAPER_SOURCES, PAPER_TABLES, paper_table
from metacl_lite.data.specs import SPECS
from metacl_lite.training import TrainConfig
from metacl_lite.vocab import PAPER_METHOD_NAMES

REPO_ROOT = Path(__file__).resolve().parents[1]
TEX = REPO_ROOT.parent / "shared" / "paper" / "metacl_aaai2020.tex"

#: The captions' dataset names -> our benchmark keys.
BENCHMARKS = {"Permuted MNIST": "pmnist", "CIFAR-100": "cifar100", "CUB": "cub"}
#: The LaTeX row labels -> our method keys ("Fune tine" is Table 3's spelling of "Fine tune").
LABELS = {
    "Fine tune": "finetune", "Fune tine": "finetune", r"MetaCL, w/o \emph{reg}": "metacl",
    "MAS": "mas", r"MAS-MetaCL-$\beta$": "mas-metacl-beta", r"MAS-MetaCL-$\lambda$": "mas-metacl-lambda",
    "PI": "pi", r"PI-MetaCL-$\beta$": "pi-metacl-beta", r"PI-MetaCL-$\lambda$": "pi-metacl-lambda",
    "EWC": "ewc", r"EWC-MetaCL-$\beta$": "ewc-metacl-beta", r"EWC-MetaCL-$\lambda$": "ewc-metacl-lambda",
    "Joint training (oracle)": "joint",
}


@dataclass(frozen=True)
class Table:
    number: int  # as LaTeX numbers it: table and table* share one counter
    label: str
    caption: str
    where: str  # "main text", or the appendix whose text cites the table
    rows: list  # [[(line, cell text), ...], ...]: rows of cells, \hline and \cline removed


@dataclass(frozen=True)
class Cell:
    table: int
    line: int
    row: str  # the LaTeX row label
    benchmark: str
    K: int
    method: str
    metric: str
    value: Optional[tuple[float, float]]  # (mean, pm); None for "-"

    def where(self) -> str:
        return f"Table {self.table} (line {self.line}), row '{self.row}', K={self.K}, {self.metric}"


def latex() -> str:
    if not TEX.is_file():
        pytest.fail(f"the paper's LaTeX is missing: looked for {TEX} (../shared/paper/ beside the checkout)")
    return TEX.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def parse_tables(tex: str) -> tuple[Table, ...]:
    """Every table/table* environment of the LaTeX, its tabular split into rows of cells, with line numbers."""
    tex = re.sub(r"(?<!\\)%[^\n]*", lambda m: " " * len(m.group()), tex)  # comments out, offsets kept
    sections = [(m.start(), m.group(1).split(":")[0]) for m in re.finditer(r"\\section\{([^}]*)\}", tex)]

    def section_at(pos: int) -> str:
        return [title for start, title in sections if start < pos][-1]

    tables = []
    for number, env in enumerate(re.finditer(r"\\begin\{(table\*?)\}(.*?)\\end\{\1\}", tex, re.S), start=1):
        label = re.search(r"\\label\{([^}]*)\}", env.group(2)).group(1)
        caption = re.search(r"\\caption\{([^\\{}]*)", env.group(2)).group(1).strip()
        where = "main text"
        if section_at(env.start()).startswith("Appendix"):
            cited_in = {section_at(m.start()) for m in re.finditer(r"\\ref\{" + re.escape(label) + r"\}", tex)}
            assert len(cited_in) == 1, f"Table {number} ({label}) is cited from {cited_in or 'nowhere'}"
            where = cited_in.pop()
        tab = re.search(r"\\begin\{tabular\}\{[^}]*\}(.*?)\\end\{tabular\}", env.group(2), re.S)
        body, offset, rows = tab.group(1), env.start(2) + tab.start(1), []
        for chunk in body.split("\\\\"):  # rows end at "\\"
            text = re.sub(r"\\hline|\\cline\{[^}]*\}", lambda m: " " * len(m.group()), chunk)
            if text.strip():
                row, at = [], offset
                for c in text.split("&"):
                    row.append((tex.count("\n", 0, at + len(c) - len(c.lstrip())) + 1, c.strip()))
                    at += len(c) + 1
                rows.append(row)
            offset += len(chunk) + 2
        tables.append(Table(number, label, caption, where, rows))
    return tuple(tables)


def _value(text: str, where: str) -> Optional[tuple[float, float]]:
    bold = re.fullmatch(r"\\textbf\{(.*)\}", text, re.S)
    text = (bold.group(1) if bold else text).strip()
    if text == "-":
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*\$\\pm\$\s*(\d+(?:\.\d+)?)", text)
    assert m, f"{where}: cannot read the cell {text!r}"
    return float(m.group(1)), float(m.group(2))


def results_cells(tex: str) -> list[Cell]:
    """Every numeric cell ("mean $\\pm$ pm" or "-") of every "Experiment results on <dataset> dataset" table."""
    cells = []
    for t in parse_tables(tex):
        m = re.fullmatch(r"Experiment results on (.+) dataset", t.caption)
        if not m:
            assert not any("$\\pm$" in c for row in t.rows for _, c in row), \
                f"Table {t.number} ({t.caption!r}) holds numbers but is not read as a results table"
            continue
        assert m.group(1) in BENCHMARKS, f"Table {t.number}: unknown dataset {m.group(1)!r}"
        bench = BENCHMARKS[m.group(1)]
        head, metric_row = ([c for _, c in row] for row in t.rows[:2])
        Ks = []
        for span, title in re.findall(r"\\multicolumn\{(\d+)\}\{[^}]*\}\{([^}]*)\}", " & ".join(head)):
            Ks += [int(re.search(r"K=(\d+)", title).group(1))] * int(span)
        assert metric_row[0] == "Method", f"Table {t.number}: second row is not the metric header: {metric_row}"
        metrics = [re.sub(r"\s*\(\\%\)", "", c) for c in metric_row[1:]]
        assert len(metrics) == len(Ks) and set(metrics) == {"ACC", "BT", "FA"}, f"Table {t.number}: {metrics}"
        for (line, row), *values in t.rows[2:]:
            assert row in LABELS, f"Table {t.number} (line {line}): row label '{row}' not in LABELS"
            assert len(values) == len(Ks), f"Table {t.number} (line {line}), row '{row}': {len(values)} cells"
            for K, metric, (line, text) in zip(Ks, metrics, values):
                cell = Cell(t.number, line, row, bench, K, LABELS[row], metric, None)
                cells.append(replace(cell, value=_value(text, cell.where())))
    return cells


def _fmt(v: Optional[tuple[float, float]]) -> str:
    return "-" if v is None else f"{v[0]} ± {v[1]}"


def test_parser_reads_the_papers_tables():
    """The parser finds the five results tables, all their cells, and reads cells as the LaTeX prints them."""
    tables = {t.number: t for t in parse_tables(latex())}
    assert {n: t.label for n, t in tables.items()} == {
        1: "Tab:MNIST", 2: "Tab:CIFAR", 3: "Tab:CUB", 4: "Tab:arch_cifar_100", 5: "Tab:dataset_statistics",
        6: "Tab:MNIST_Permutation", 7: "Tab:CIFAR100"}
    cells = results_cells(latex())
    per_table = {n: sum(c.table == n for c in cells) for n in tables}
    # Tables 1-3: 11 rows x 3 metrics; Tables 6-7: 9 rows (8 methods + oracle) x 4 K x 3 metrics.
    assert per_table == {1: 33, 2: 33, 3: 33, 4: 0, 5: 0, 6: 108, 7: 108}
    by = {(c.table, c.method, c.K, c.metric): c for c in cells}
    # Read by eye from the LaTeX (lines 497, 700, 756, 687):
    assert by[(3, "ewc", 10, "FA")].value == (-17.4, 2.2) and by[(3, "ewc", 10, "FA")].line == 497
    assert by[(6, "pi-metacl-beta", 500, "BT")].value == (-23.2, 3.4)
    assert by[(6, "pi-metacl-beta", 500, "BT")].line == 700
    assert by[(7, "joint", 200, "ACC")].value == (60.4, 2.7) and by[(7, "joint", 500, "BT")].value is None
    assert by[(6, "mas-metacl-beta", 500, "FA")].value == (-6.1, 0.2)  # a \textbf cell
    # the paper's row order
    assert [c.method for c in cells if c.table == 1 and c.metric == "ACC"] == list(PAPER_METHOD_NAMES)
    assert set(LABELS.values()) == set(PAPER_METHOD_NAMES) | {"joint"}


def test_every_number_in_paper_py_is_the_latex_number():
    """Each (benchmark, K, method, metric) -> (mean, pm) | None of paper.py equals every LaTeX cell for it."""
    cells = results_cells(latex())
    for (bench, K), table in PAPER_TABLES.items():
        for method, entry in table.items():
            for metric, value in entry.items():
                found = [c for c in cells if (c.benchmark, c.K, c.method, c.metric) == (bench, K, method, metric)]
                assert found, f"paper.py ({bench}, K={K}) {method} {metric}: no such cell in the LaTeX results tables"
                for c in found:
                    assert c.value == value, \
                        f"{c.where()} [{bench} {method}]: LaTeX {_fmt(c.value)}, paper.py {_fmt(value)}"


def test_every_latex_cell_is_in_paper_py():
    """Nothing left out: every numeric cell of every results table has its (benchmark, K, method, metric) there."""
    for c in results_cells(latex()):
        entry = (paper_table(c.benchmark, c.K) or {}).get(c.method)
        assert entry is not None and c.metric in entry, f"{c.where()} [{c.benchmark} {c.method}]: missing in paper.py"
        assert entry[c.metric] == c.value, \
            f"{c.where()} [{c.benchmark} {c.method}]: LaTeX {_fmt(c.value)}, paper.py {_fmt(entry[c.metric])}"
    assert paper_table("pmnist", 7) is None


def test_paper_sources_name_the_tables_that_hold_the_numbers():
    """PAPER_SOURCES[(benchmark, K)] = "Table n (where) [and Table m (where)], <caption's dataset>, K=<K>"."""
    tables = {t.number: t for t in parse_tables(latex())}
    held: dict = {}
    for c in results_cells(latex()):
        held.setdefault((c.benchmark, c.K), set()).add(c.table)
    assert set(PAPER_SOURCES) == set(held) == set(PAPER_TABLES)
    names = {v: k for k, v in BENCHMARKS.items()}
    for (bench, K), numbers in held.items():
        for n in numbers:
            assert tables[n].caption == f"Experiment results on {names[bench]} dataset"
        parts = " and ".join(f"Table {n} ({tables[n].where})" for n in sorted(numbers))
        expected = f"{parts}, {names[bench]}, K={K}"
        assert PAPER_SOURCES[(bench, K)] == expected, \
            f"PAPER_SOURCES[{(bench, K)}] = {PAPER_SOURCES[(bench, K)]!r}; the LaTeX tables give {expected!r}"
    assert tables[6].where == tables[7].where == "Appendix D" and tables[1].where == "main text"


def test_specs_and_train_config_follow_appendix_b_and_c():
    """Appendix C's statistics table (Table 5) and Appendix B's batch sizes, learning rates and epochs, as
    specs.SPECS and TrainConfig hold them; the K values with published numbers are those of the results tables."""
    tex = latex()
    stats = next(t for t in parse_tables(tex) if t.label == "Tab:dataset_statistics")
    columns = {"Perm. MNIST": "pmnist", "CIFAR": "cifar100", "CUB": "cub"}
    names = [columns[c] for _, c in stats.rows[0][1:]]
    assert sorted(names) == sorted(SPECS), names
    rows = {row[0][1]: dict(zip(names, (c for _, c in row[1:]))) for row in stats.rows[1:]}

    def same(ours, paper, what):
        assert ours == paper, f"{what}: ours {ours}, the paper {paper}"

    for name, spec in SPECS.items():
        same(spec.n_tasks, int(rows["Num. of tasks"][name]), f"{name} n_tasks (Table 5)")
        same(spec.classes_per_task, int(rows["Num. of classes per tasks"][name]), f"{name} classes_per_task")
        same(spec.multi_head, rows["Evaluation protocol"][name] == "multi-head", f"{name} multi_head")
        dims = tuple(int(d) for d in re.findall(r"\d+", rows["Input size"][name]))
        assert spec.input_shape in (dims, (math.prod(dims),)), \
            f"{name} input_shape: ours {spec.input_shape}, the paper {dims} (or flattened, as the MLP takes MNIST)"
        images, K = map(int, re.fullmatch(r"(\d+) \$\(K=(\d+)\)\$",
                                          rows["Num. of low-shot training images per task"][name]).groups())
        same(spec.classes_per_task * K, images, f"{name} low-shot images per task at K={K}")
        same(set(spec.paper_Ks), {c.K for c in results_cells(tex) if c.benchmark == name}, f"{name} paper_Ks")
    text = " ".join(tex.split())
    batch, bundle = re.search(r"sizes of mini-batch and mini-bundle are \$(\d+), (\d+)\$", text).groups()
    same((TrainConfig.batch_size, TrainConfig.bundle_size), (int(batch), int(bundle)), "batch_size, bundle_size")
    inner, outer = re.search(r"SGD with \$lr=([\d.]+)\$ as the inner optimizer and Adam \S+ with \$lr=([\d.]+)\$",
                             text).groups()
    same((TrainConfig.inner_lr, TrainConfig.outer_lr), (float(inner), float(outer)), "inner_lr, outer_lr")
    epochs = re.search(r"We optimize (\d+), (\d+) and (\d+) epochs for each task on Permutated MNIST, CUB, and "
                       r"CIFAR-100", text).groups()
    same([SPECS[b].epochs for b in ("pmnist", "cub", "cifar100")], [int(e) for e in epochs],
         "epochs of pmnist, cub, cifar100")
