"""The memory family's grid (metacl_lite.lab.memory_plan, issue 44 point 4): which files, methods and seeds; the
commands chapter 9 names for a file not yet run; and `make reproduce-memory` running exactly the plan, tuning first, stopping at a failed step."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metacl_lite.findings import memory as Q
from metacl_lite.lab import memory_plan as MP
from metacl_lite.paths import REPO_ROOT
from metacl_lite.vocab import MEMORY_METHODS

KNOB = ("mas-metacl-lambda-mem", "pi-metacl-lambda-mem", "ewc-metacl-lambda-mem", "mas-metacl-lambda-gem",
        "pi-metacl-lambda-gem", "ewc-metacl-lambda-gem")
PLAIN = ("agem", "er", "gem", "metacl-agem")


def test_every_memory_method_runs_at_m1_and_only_the_knobless_at_m5():
    assert [m for m in MEMORY_METHODS if MP.has_knob(m)] == list(KNOB)
    assert MP.methods_at(1) == tuple(MEMORY_METHODS) and MP.methods_at(5) == PLAIN
    steps = MP.plan({20: 10, 50: 10, 200: 10, 500: 5})
    assert [(s.K, s.M, s.seeds, s.tune) for s in steps] == [
        (20, 1, 10, True), (20, 5, 10, False), (50, 1, 10, True), (50, 5, 10, False),
        (200, 1, 10, True), (200, 5, 10, False), (500, 1, 5, True), (500, 5, 5, False)]
    # K = 500's knobs search a window around K = 200's values, as the paper's methods there (make reproduce-pmnist)
    assert [(s.K, s.around) for s in steps if s.tune] == [(20, None), (50, None), (200, None), (500, 200)]
    assert steps[-2].tune_args() == ["--K", "500", "--memory", "1", "--around", "200"]


def test_ten_seeds_as_the_papers_files_and_five_at_k500():
    """What the Makefile's comment and chapter 9 say: ten seeds at every K but 500, whose runs take longest."""
    assert MP.decided_seeds() == MP.SEEDS_AT == {20: 10, 50: 10, 200: 10, 500: 5}
    assert [s.seeds for s in MP.plan()] == [10, 10, 10, 10, 10, 10, 5, 5]


def test_a_file_not_yet_run_is_named_with_the_plans_commands_tuning_first():
    ev = Q.MemoryEvidence((20, 50), (1, 5), {}, {})
    seeds = {20: 10, 50: 10, 200: 10, 500: 5}
    one = Q.missing_commands(ev, 50, 1, seeds)
    assert one[0] == "python -m metacl_lite tune --benchmark pmnist --K 50 --memory 1"
    assert f"--seeds 10 --methods {','.join(MEMORY_METHODS)} --memory 1 --out results/pmnist-K50-memory-M1.json" \
        in one[1] and len(one) == 2
    assert Q.missing_commands(ev, 500, 1, seeds)[0] == \
        "python -m metacl_lite tune --benchmark pmnist --K 500 --memory 1 --around 200"
    five = Q.missing_commands(ev, 500, 5, seeds)  # compiled, as the paper's file at K = 500 it is paired with
    assert five == ["python -m metacl_lite run --benchmark pmnist --K 500 --seeds 5 --methods agem,er,gem,metacl-agem "
                    "--memory 5 --compile auto --out results/pmnist-K500-memory-M5.json"]


def test_make_reproduce_memory_runs_the_plan_tuning_first_and_stops_at_a_failed_step(tmp_path):
    """With a stand-in interpreter that logs each command (and the real plan): every line of the plan, its tuning
    before its run (K = 500's in a window around K = 200's values); a run that fails (K = 500, M = 1) ends make with
    an error and nothing after it runs."""
    log = tmp_path / "calls"
    fake = tmp_path / "py"
    fake.write_text(f"""#!/bin/bash
if [ "$2" = metacl_lite.lab.memory_plan ]; then exec {sys.executable} "$@"; fi
echo "$*" >> {log}
case "$*" in *"run --benchmark pmnist --K 500 --seeds 5 --methods agem,er,gem,metacl-agem,mas"*) exit 3;; esac
""")
    fake.chmod(0o755)
    r = subprocess.run(["make", "-s", "reproduce-memory", f"PY={fake}", "STAMP="], cwd=REPO_ROOT, text=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode != 0, r.stdout + r.stderr
    calls = [c.split()[2:] for c in log.read_text().splitlines()]
    expected = []
    for s in MP.plan():
        if s.tune:
            expected.append(["tune", "--benchmark", "pmnist", *s.tune_args()])
        expected.append(["run", "--benchmark", "pmnist", "--K", str(s.K), "--seeds", str(s.seeds), "--methods",
                         ",".join(s.methods), "--memory", str(s.M), *(["--compile", "auto"] if s.K == 500 else []),
                         "--out", f"results/pmnist-K{s.K}-memory-M{s.M}.json"])
        if (s.K, s.M) == (500, 1):
            break
    assert calls == expected


def test_the_runs_compile_as_the_paper_file_of_their_k_and_the_tuning_files_say_theirs(tmp_path):
    (tmp_path / "pmnist-K500.json").write_text(json.dumps({"config": {"train": {"compile": "auto"}}}))
    (tmp_path / "pmnist-K20.json").write_text(json.dumps({"config": {"train": {}}}))  # made before it was recorded
    assert [MP.paper_compile(K, tmp_path) for K in (500, 20, 50)] == ["auto", "off", "off"]  # K = 50: no file
    (tmp_path / "tuning-pmnist-K500-memory-M1.json").write_text(json.dumps({"protocol": {"compile": "on"}}))
    (tmp_path / "tuning-pmnist-K20-memory-M1.json").write_text(json.dumps({"protocol": {}}))
    assert [MP.tuning_compile(K, 1, tmp_path) for K in (500, 20, 50)] == ["on", "off", None]
    assert [s.compile for s in MP.plan({K: 10 for K in MP.KS}, tmp_path) if s.M == 1] == ["off", "off", "off", "auto"]
