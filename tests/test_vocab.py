"""The torch-free vocabulary (metacl_lite.vocab, issue 35 item 2): method names built and read back, the paper's
methods as data, and no torch behind it or behind the command line's parser."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from metacl_lite import vocab
from metacl_lite.findings.paper import PAPER_TABLES


def test_method_names_are_built_and_read_back():
    assert vocab.method_name("pi", "lambda") == "pi-metacl-lambda" and vocab.method_name("pi") == "pi"
    assert vocab.parse_method("pi-metacl-lambda") == ("pi", "lambda") and vocab.parse_method("ewc") == ("ewc", None)
    assert vocab.parse_method("finetune") == (None, None) and vocab.parse_method("metacl") == (None, None)
    for name in vocab.METHOD_NAMES:  # the pair is an inverse on every method (a memory's: on its base method)
        r, v = vocab.parse_method(name)
        memory = vocab.memory_of(name)
        assert r is None or vocab.method_name(r, v) == (memory.base if memory else name)
    for bad in ("sgd", "pi-metacl-sigma", "si-metacl-beta", "pi-metacl-", "joint"):
        with pytest.raises(ValueError, match="unknown method"):
            vocab.parse_method(bad)
    with pytest.raises(ValueError, match="unknown regulariser 'si'"):
        vocab.method_name("si")
    with pytest.raises(ValueError, match="unknown variant 'sigma'"):
        vocab.method_name("pi", "sigma")


def test_labels_are_the_papers():
    assert [vocab.method_label(m) for m in ("finetune", "metacl", "mas", "pi-metacl-beta", "ewc-metacl-lambda")] == [
        "Fine tune", "MetaCL, w/o reg", "MAS", "PI-MetaCL-β", "EWC-MetaCL-λ"]
    assert vocab.method_label("l2-metacl-lambda") == "L2-MetaCL-λ"


def test_the_papers_methods_are_its_table_and_l2_is_an_extension():
    """The paper's eleven (run's default) are the rows of its Table 1 as findings.paper holds them; L2's family comes
    after them and is not in the paper, then the memory family's methods, not in the paper either."""
    table1 = [m for m in PAPER_TABLES[("pmnist", 20)] if m != vocab.ORACLE]
    assert list(vocab.PAPER_METHOD_NAMES) == table1
    assert vocab.METHOD_NAMES == (*table1, "l2", "l2-metacl-beta", "l2-metacl-lambda", *vocab.MEMORY_METHODS)
    assert "l2" in vocab.REGULARISERS and "l2" not in vocab.PAPER_REGULARISERS
    assert vocab.in_paper("joint") and vocab.in_paper("pi") and not vocab.in_paper("l2-metacl-beta")


def test_the_makefile_reads_its_lists_from_the_vocabulary():
    out = subprocess.run([sys.executable, "-m", "metacl_lite.vocab", "lambdas"], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ",".join(vocab.method_name(r, "lambda") for r in vocab.PAPER_REGULARISERS)
    bad = subprocess.run([sys.executable, "-m", "metacl_lite.vocab", "nosuch"], capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown list 'nosuch'" in bad.stderr


@pytest.mark.parametrize("module", ["metacl_lite.vocab", "metacl_lite.cli"])
def test_importing_the_vocabulary_and_the_command_line_loads_no_torch(module):
    parse = "from metacl_lite.cli import build_parser; build_parser(); " if module.endswith("cli") else ""
    code = (f"import sys, json, {module}; {parse}"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True).stdout)
    assert loaded == []


def test_the_torch_check_sees_torch():
    """The check above can fail: a module that imports torch is seen."""
    code = ("import sys, json, metacl_lite.training; "
            "print(json.dumps(sorted(m for m in sys.modules if m == 'torch')))")
    assert json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     check=True).stdout) == ["torch"]


def test_the_memory_familys_methods_are_extensions_read_as_their_base_methods():
    """A method of the memory family (issue 44) names the method it adds the memory to; it reads as that method
    (`parse_method`), its label is its own, its families are its regulariser's and the memory's, and it is not the
    paper's."""
    assert list(vocab.MEMORY_METHODS) == ["agem", "er", "gem", "metacl-agem",
                                          *(vocab.method_name(r, "lambda") + "-mem" for r in vocab.PAPER_REGULARISERS),
                                          *(vocab.method_name(r, "lambda") + "-gem" for r in vocab.PAPER_REGULARISERS)]
    assert vocab.memory_of("ewc-metacl-lambda-gem") == ("ewc-metacl-lambda-gem", "EWC-MetaCL-λ-GEM",
                                                         "ewc-metacl-lambda", "constrain", "episodic")
    assert vocab.parse_method("agem") == vocab.parse_method("er") == vocab.parse_method("metacl-agem") == (None, None)
    assert vocab.parse_method("pi-metacl-lambda-mem") == ("pi", "lambda") and vocab.memory_of("pi") is None
    assert vocab.memory_of("pi-metacl-lambda-mem").base == "pi-metacl-lambda"
    assert [vocab.method_label(m) for m in ("agem", "er", "metacl-agem", "pi-metacl-lambda-mem")] == [
        "A-GEM", "ER", "MetaCL-A-GEM", "PI-MetaCL-λ-mem"]
    assert vocab.families_of("pi-metacl-lambda-mem") == ("pi", "episodic") and vocab.families_of("er") == ("episodic",)
    assert vocab.families_of("finetune") == () and vocab.families_of("episodic") == ("episodic",)
    assert not any(vocab.in_paper(m) for m in vocab.MEMORY_METHODS)
    assert not set(vocab.MEMORY_METHODS) & set(vocab.PAPER_METHOD_NAMES)
    for bad in ("l2-metacl-lambda-mem", "pi-metacl-beta-mem", "agem-mem"):
        with pytest.raises(ValueError, match="unknown method"):
            vocab.parse_method(bad)
    out = subprocess.run([sys.executable, "-m", "metacl_lite.vocab", "memory-methods"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == ",".join(vocab.MEMORY_METHODS)
