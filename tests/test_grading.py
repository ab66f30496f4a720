"""Grading gives the same score every time: every visible and hidden test of every assignment is seeded."""
import re
from pathlib import Path

import pytest

from metacl_lite.report import assignments as A

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", A.list_assignments())
def test_every_test_is_seeded(name):
    """Every visible and hidden test draws its random inputs from a fixed seed: the same score every time."""
    text = (ROOT / "book/assignments/source" / f"{name}.md").read_text()
    tests = re.findall(r"```\{code-cell\} ipython3\n(?:# HIDDEN\n)?(def test_.*?)```", text, re.S)
    assert tests
    for body in tests:
        draw = re.search(r"randn\(|rand\(|randint\(|\.normal\(|\.uniform\(|\.integers\(|mlp\(", body)
        if draw:
            seeded = re.search(r"(manual_seed|default_rng)\(\w+\)", body)
            assert seeded and seeded.start() < draw.start(), f"unseeded draw in {body.splitlines()[0]}"
        assert "SeedSequence()" not in body and "default_rng()" not in body, body.splitlines()[0]
