"""GPU memory: how many units share a card by default (its free memory over a unit's), evaluation batches bounded in
size for large images, and each GPU unit's measured peak recorded. No GPU here: torch.cuda's memory queries are
stand-ins."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn

from metacl_lite.data.cub import NormalisedExperience
from metacl_lite.lab import executors as E
from metacl_lite.lab import grid as G
from metacl_lite.data.streams import Experience
from metacl_lite.training import TrainConfig, eval_batch_size, evaluate_tasks

GB = 2 ** 30


@pytest.fixture
def card(monkeypatch):
    """A 16-core machine with a GPU whose free memory the test sets (`card(free_gb)`)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(E, "_said", set())

    def set_free(free_gb: float):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (int(free_gb * GB), int(80 * GB)))

    return set_free


def test_the_default_worker_count_fits_the_gpus_free_memory(card, capsys):
    card(79.0)  # an H100: every benchmark gets GPU_UNITS_PER_CARD workers, as the committed GPU benches ran
    assert [E.default_workers(True, b) for b in ("pmnist", "cifar100", "cub")] == [8, 8, 8]
    assert capsys.readouterr().err == ""
    card(15.0)  # a 16 GB card: 0.9 x 15 GB over 6 GB per CUB unit, 2 GB per CIFAR-100 unit
    assert [E.default_workers(True, b) for b in ("pmnist", "cifar100", "cub")] == [8, 6, 2]
    err = capsys.readouterr().err
    assert "2 worker process(es) share cuda for Split CUB-200: 15.0 GB free, about 6 GB per unit (an estimate); " \
           "--workers N chooses another number" in err
    card(3.0)  # never fewer than one
    assert E.default_workers(True, "cub") == 1
    assert E.default_workers(False, "cub") == 16  # the CPU: one worker per core, whatever the GPU holds
    assert E.default_workers(True) == 8  # no benchmark named: the card's share alone


def test_the_cli_sizes_a_gpu_grid_by_the_cards_memory(card, monkeypatch):
    from metacl_lite import cli
    from metacl_lite.cli.options import plan_of

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    card(15.0)
    parse = cli.build_parser().parse_args
    assert plan_of(parse(["run", "--benchmark", "cub", "--K", "10"])).workers == 2
    assert plan_of(parse(["run", "--benchmark", "cub", "--K", "10", "--workers", "5"])).workers == 5
    assert plan_of(parse(["run", "--benchmark", "cub", "--K", "10", "--device", "cpu"])).workers == 16


def test_evaluation_batches_are_bounded_for_large_images_and_unchanged_for_small_ones():
    def exp(shape, n=10):
        return Experience(0, torch.zeros(n, *shape), torch.zeros(n, dtype=torch.long))

    assert eval_batch_size(exp((784,)), 10000) == 10000  # Permuted MNIST's test set: one batch, as before
    assert eval_batch_size(exp((3, 32, 32)), 10000) == 5461  # a CIFAR-100 task's 1 000 images: one batch
    assert eval_batch_size(exp((3, 224, 224)), 10000) == 111  # CUB: 2^24 floats / 150 528
    assert eval_batch_size(exp((3, 224, 224)), 50) == 50


class _Spy(nn.Module):
    """A multi-head model that records its batches and answers the class of each image's first pixel."""

    multi_head = True

    def __init__(self):
        super().__init__()
        self.batches, self.w = [], nn.Parameter(torch.zeros(1))

    def forward(self, x, task):
        self.batches.append((len(x), x.dtype))
        return nn.functional.one_hot((x[:, 0, 0, 0] > 0).long(), 2).float()


def test_cub_is_evaluated_in_bounded_batches_normalised_per_batch():
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (250, 3, 224, 224), generator=gen, dtype=torch.uint8)
    e = NormalisedExperience(0, x, torch.randint(0, 2, (250,), generator=gen))
    assert torch.equal(e.inputs(slice(111, 222)), e.inputs()[111:222])  # per batch: the same numbers
    model = _Spy()
    acc = evaluate_tasks(model, [e])
    assert model.batches == [(111, torch.float32), (111, torch.float32), (28, torch.float32)]
    want = ((e.inputs()[:, 0, 0, 0] > 0).long() == e.y).double().mean().item() * 100
    assert acc == [want]


def test_permuted_inputs_of_a_slice_are_the_slice_of_the_permuted_inputs():
    gen = torch.Generator().manual_seed(1)
    e = Experience(0, torch.randn(30, 784, generator=gen), torch.zeros(30, dtype=torch.long),
                   perm=torch.randperm(784, generator=gen))
    assert torch.equal(e.inputs(slice(5, 17)), e.inputs()[5:17]) and torch.equal(e.inputs()[:, 0], e.x[:, e.perm[0]])


def test_a_gpu_unit_records_its_peak_memory_and_a_cpu_unit_does_not(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda *a: calls.append("peak") or 1536 * 2 ** 20)
    monkeypatch.setattr(G, "run_stream", lambda *a, **k: calls.append("train") or {"acc_matrix": np.zeros((1, 1)),
                                                                                  "wall_s": 1.0})
    unit = G.Unit("run", 0, "finetune")
    out = G.execute_unit(unit, None, TrainConfig(device="cuda"))
    assert calls == ["reset", "train", "peak"] and out["peak_gpu_mb"] == 1536.0
    calls.clear()
    assert "peak_gpu_mb" not in G.execute_unit(unit, None, TrainConfig()) and calls == ["train"]



def test_where_says_how_many_workers_share_this_machines_card(card, monkeypatch, capsys):
    """`where` on a machine with a (16 GB) GPU: the card and the default worker count, which its memory sizes."""
    from metacl_lite.tools import main as tools_main
    from metacl_lite.accel import device as D

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    monkeypatch.setattr(D, "describe", lambda d, *_: f"{d}: GPU X (CUDA 13.0)")
    card(15.0)
    assert tools_main(["where", "--benchmark", "cub", "--need-gpu", "make reproduce-cub"]) == 0
    out, err = capsys.readouterr()
    assert out == "cub: units train on cuda, cuda: GPU X (CUDA 13.0); 2 worker process(es) sharing cuda\n"
    assert "2 worker process(es) share cuda for Split CUB-200: 15.0 GB free" in err
    assert tools_main(["where", "--benchmark", "pmnist", "--workers", "3"]) == 0  # pmnist: the CPU unless asked
    assert capsys.readouterr().out.startswith("pmnist: units train on cpu, ")
    assert tools_main(["where", "--benchmark", "pmnist", "--device", "cuda", "--workers", "3"]) == 0
    assert capsys.readouterr().out.endswith("; 3 worker process(es) sharing cuda\n")
