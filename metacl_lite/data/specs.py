"""One specification per benchmark: everything the paper fixes about it (Appendix B and C) and the choices we made,
in one place. Data loading, models, the grid, tuning, the speed benchmark, the command-line defaults and the
parameterised notebooks all read these values instead of repeating them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    title: str
    n_tasks: int  # tasks per stream (Appendix C)
    epochs: int  # epochs per task (Appendix B)
    classes_per_task: int
    multi_head: bool
    input_shape: tuple[int, ...]
    model: str  # models.build_model's architecture: "mlp" | "cifar_cnn" | "resnet18"
    loader: str  # benchmarks.make_benchmark's builder: "permuted_mnist" | "split_cifar100" | "split_cub"
    # validation: training images [val_offset, val_offset + val_per_class) of each class, never trained on at
    # K <= val_offset. Permuted MNIST: 500-599, beyond every K the paper uses (the embedded subset holds them);
    # CIFAR-100 has only 500 training images per class, so 400-499 (tuning there needs K <= 400).
    val_offset: int
    val_per_class: int
    tuning_K: int  # the K at which `tune` chooses the default beta/gamma
    paper_Ks: tuple[int, ...]  # the K values with published numbers (Table 1-3, Appendix D)
    max_tasks: int  # the most tasks a stream may have (Permuted MNIST: 1,000, fifty times the paper's stream)
    max_K: int  # the fewest training images of any class in the official training set: the largest possible K
    permuted: bool  # the seed draws the task permutations (Permuted MNIST); class splits are fixed otherwise
    extra_Ks: tuple[int, ...] = ()  # K values we reproduce beyond the paper's (its future work: fewer shots)
    # the default of --device: "cpu" where the committed files were made on the CPU (Permuted MNIST: a default of
    # "auto" would silently train on a GPU, whose numbers differ in rounding); "auto" where a CPU run is impractical
    device: str = "cpu"
    # GPU memory one unit (a run, a seed's references, an oracle) may take, in GB, for the default number of worker
    # processes that share a card (`executors.default_workers`): an upper estimate from the sizes involved (CUDA
    # context ~0.5 GB, the streams on the device, the largest batch's activations), not a measurement;
    # `bench --device cuda` records each unit's measured peak (`peak_gpu_mb`)
    gpu_unit_gb: float = 1.0

    @property
    def max_train_K(self) -> int:
        """The largest K whose training images never overlap the validation images."""
        return self.val_offset

    @property
    def all_Ks(self) -> tuple[int, ...]:
        """The paper's K values and ours beyond them, ascending."""
        return tuple(sorted(set(self.paper_Ks) | set(self.extra_Ks)))


SPECS: dict[str, BenchmarkSpec] = {
    "pmnist": BenchmarkSpec("pmnist", "Permuted MNIST", n_tasks=20, epochs=5, classes_per_task=10, multi_head=False,
                            input_shape=(784,), model="mlp", loader="permuted_mnist", val_offset=500,
                            val_per_class=100, tuning_K=20, paper_Ks=(20, 50, 200, 500), max_tasks=1000, max_K=5421,
                            permuted=True, extra_Ks=(1, 5, 10)),
    "cifar100": BenchmarkSpec("cifar100", "Split CIFAR-100", n_tasks=10, epochs=60, classes_per_task=10,
                              multi_head=True, input_shape=(3, 32, 32), model="cifar_cnn", loader="split_cifar100",
                              val_offset=400, val_per_class=100, tuning_K=20, paper_Ks=(20, 50, 200, 500),
                              max_tasks=10, max_K=500, permuted=False, device="auto", gpu_unit_gb=2.0),
    "cub": BenchmarkSpec("cub", "Split CUB-200", n_tasks=10, epochs=20, classes_per_task=20, multi_head=True,
                         input_shape=(3, 224, 224), model="resnet18", loader="split_cub", val_offset=20,
                         val_per_class=9, tuning_K=10, paper_Ks=(10,), max_tasks=10, max_K=29, permuted=False, device="auto",
                         # uint8 streams 1.2 GB, the oracle's float inputs 1.2 GB, ResNet-18 at batch 100 ~2 GB
                         gpu_unit_gb=6.0),
}

#: The most seeds one command runs (`run --seeds N`, the notebook's `seeds`): the paper's tables use 5, the training
#: logs 10; a million-seed grid would take years of CPU, and a list of 10^12 seeds does not fit in memory.
MAX_SEEDS = 1000

#: Benchmark names, in the paper's order.
BENCHMARKS: tuple[str, ...] = tuple(SPECS)


def get_spec(name: str | BenchmarkSpec) -> BenchmarkSpec:
    """The specification of the benchmark `name`; a specification is returned as it is (so that a caller can resolve
    it once and hand it down)."""
    if isinstance(name, BenchmarkSpec):
        return name
    if name not in SPECS:
        raise UsageError(f"unknown benchmark {name!r}; choose one of {', '.join(SPECS)}")
    return SPECS[name]
