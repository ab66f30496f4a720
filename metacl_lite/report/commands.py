"""The commands a reader types, from the repository's root: those a results file records, with machine paths
(``--out /work/main/results/...``) made relative to the repository, and those that make a results file not made yet
(the data where the package does not hold it, β/γ on the validation split, the run).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from ..paths import REPO_ROOT
from ..data.specs import SPECS


# ---------------------------------------------------------------------------------------------------------------------
# Recorded commands


_ABS_PATH = re.compile(r"(?P<pre>^|[\s=\"'])(?P<path>/[^\s\"']*)")


def relative_command(command: Optional[str], root: Optional[Path | str] = None) -> Optional[str]:
    """`command` with every absolute path inside the repository `root` written relative to it, as a reader types it
    from the repository root: ``--out /work/main/results/x.json`` -> ``--out results/x.json`` (also ``--out=...``
    and quoted paths; the root itself becomes ``.``). Paths outside the repository are left as they are. None stays
    None."""
    if command is None:
        return None
    root = str(Path(REPO_ROOT if root is None else root)).rstrip("/") or "/"

    def repl(mo: re.Match) -> str:
        path = mo.group("path")
        if path == root or path == root + "/":
            rel = "."
        elif path.startswith(root + "/"):
            rel = path[len(root) + 1:]
        else:
            return mo.group(0)
        return mo.group("pre") + rel

    return _ABS_PATH.sub(repl, command)


def provenance_commands(res: dict, root: Optional[Path | str] = None) -> dict[str, Any]:
    """The commands a results file records, relative to the repository: the one that regenerates the file
    (`command`) and, for each contributing invocation that recorded its own (`command` or `argv`), that one
    (`invocations`, in order; None where an invocation recorded none)."""
    prov = res.get("provenance") or {}
    invs = []
    for inv in prov.get("invocations") or []:
        cmd = inv.get("command")
        if cmd is None and isinstance(inv.get("argv"), list):
            cmd = " ".join(map(str, inv["argv"]))
        invs.append(relative_command(cmd, root))
    return {"command": relative_command(prov.get("command"), root), "invocations": invs}


# ---------------------------------------------------------------------------------------------------------------------
# The commands that make a results file


#: How to get each benchmark's data (data_scripts/fetch.py; checksums are verified before anything is replaced).
CUB_WEIGHTS = "# ResNet-18 ImageNet weights: --weights FILE, $METACL_LITE_RESNET18 or the torch hub cache"
FETCH = {"pmnist": "python data_scripts/fetch.py mnist          # raw MNIST (md5-checked), for K beyond the embedded subset",
         "cifar100": "python data_scripts/fetch.py cifar100       # or --from cifar-100-python.tar.gz (md5-checked)",
         "cub": "python data_scripts/fetch.py cub            # or --from CUB_200_2011.tgz (md5-checked)"}


def needs_download(benchmark: str, K: int) -> bool:
    """Whether the run for (benchmark, K) needs data beyond the package (Permuted MNIST's embedded subset holds the
    training and validation images of every K up to its validation offset)."""
    return benchmark != "pmnist" or K > SPECS[benchmark].max_train_K


#: The seeds of a results file that the pages' and the overview's commands make: those of `make reproduce-cifar100`,
#: `make reproduce-cub` and the lower K of `make reproduce-pmnist` (the paper ran each method 3 times).
SEEDS = 5
#: The seeds of `make reproduce-pmnist` at the paper's K (20, 50, 200, 500), where the claims are tested.
PAPER_K_SEEDS = 10


def missing_commands(benchmark: str, K: int, seeds: Optional[int] = None) -> list[str]:
    """The commands that make the results file of (benchmark, K), from the repository's root: the data where the
    package does not hold it, β/γ on the validation split (Permuted MNIST: at this K, as `make reproduce-pmnist`;
    the other benchmarks: once, at their tuning K), the run, with the seeds of the make target (default)."""
    spec = SPECS[benchmark]
    if seeds is None:
        seeds = PAPER_K_SEEDS if benchmark == "pmnist" and K in spec.paper_Ks else SEEDS
    out = [FETCH[benchmark]] if needs_download(benchmark, K) else []
    if benchmark == "cub":
        out.append(CUB_WEIGHTS)
    tune_K = K if benchmark == "pmnist" else spec.tuning_K
    out.append(f"python -m metacl_lite tune --benchmark {benchmark} --K {tune_K}")
    out.append(f"python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds}")
    return out


def setting_commands(benchmark: str, seeds: int = SEEDS) -> list[str]:
    """The commands that produce every results file of a benchmark, from the repository's root: fetch the data, choose
    β/γ on its validation split once (at the benchmark's tuning K), run each K the paper reports with `seeds` seeds."""
    spec = SPECS[benchmark]
    out = [FETCH[benchmark]]
    if benchmark == "cub":
        out.append(CUB_WEIGHTS)
    out.append(f"python -m metacl_lite tune --benchmark {benchmark} --K {spec.tuning_K}")
    out += [f"python -m metacl_lite run --benchmark {benchmark} --K {K} --seeds {seeds}" for K in spec.paper_Ks]
    return out


def make_target_steps(benchmark: str) -> Optional[dict[str, Any]]:
    """What `make reproduce-<benchmark>` (the Makefile) does for CIFAR-100 and CUB, as a record: the benchmark's
    tuning K (`tuning_K`), the other paper K it tunes again at because their validation images allow it (`own_Ks`),
    those beyond them that take the tuning K's values (`beyond_Ks`), the validation images (`val_first`, `val_last`,
    per class) and whether it also fetches the ImageNet ResNet-18 weights (`weights`). None for Permuted MNIST
    (`make reproduce-pmnist`)."""
    if benchmark == "pmnist":
        return None
    spec = SPECS[benchmark]
    return {"tuning_K": spec.tuning_K,
            "own_Ks": [K for K in spec.paper_Ks if K != spec.tuning_K and K <= spec.val_offset],
            "beyond_Ks": [K for K in spec.paper_Ks if K > spec.val_offset],
            "val_first": spec.val_offset, "val_last": spec.val_offset + spec.val_per_class - 1,
            "weights": benchmark == "cub"}
