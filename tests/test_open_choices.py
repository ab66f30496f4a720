"""The choices the paper leaves open about Eq. 2's Omega across tasks, as options of `TrainConfig`: how each task's
Omega is normalised (`omega_normalise`) and combined with the running Omega (`omega_accumulate`). Expected values
are computed by hand (literals) or, for a real 2-task run, from each task's importance recomputed on the model saved
after that task and combined by the formulas written out here, not by `accumulate_importance`.
"""
import copy

import pytest
import torch

from metacl_lite.errors import UsageError
from metacl_lite.importance import accumulate_importance, ewc_fisher, mas_importance
from metacl_lite.data.mnist import permuted_mnist
from metacl_lite.models import mlp
from metacl_lite.training import RegState, TrainConfig, get_method, train_experience

OMEGA_1 = torch.tensor([0.0, 2.0, 4.0])
OMEGA_2 = torch.tensor([1.0, 1.0, 3.0])

#: (accumulate, normalise) -> Omega after task 1 and after task 2, by hand, for OMEGA_1 then OMEGA_2.
#: max: OMEGA_1 / 4 = [0, .5, 1], OMEGA_2 / 3 = [1/3, 1/3, 1];
#: minmax: (OMEGA_1 - 0) / 4 = [0, .5, 1], (OMEGA_2 - 1) / 2 = [0, 0, 1].
BY_HAND = {
    ("sum", "none"): ([0.0, 2.0, 4.0], [1.0, 3.0, 7.0]),
    ("latest", "none"): ([0.0, 2.0, 4.0], [1.0, 1.0, 3.0]),
    ("sum", "max"): ([0.0, 0.5, 1.0], [1 / 3, 5 / 6, 2.0]),
    ("latest", "max"): ([0.0, 0.5, 1.0], [1 / 3, 1 / 3, 1.0]),
    ("sum", "minmax"): ([0.0, 0.5, 1.0], [0.0, 0.5, 2.0]),
    ("latest", "minmax"): ([0.0, 0.5, 1.0], [0.0, 0.0, 1.0]),
}


@pytest.mark.parametrize("options", list(BY_HAND))
def test_each_option_changes_omega_as_documented(options):
    after_1, after_2 = BY_HAND[options]
    omega = accumulate_importance(None, OMEGA_1.clone(), *options)
    torch.testing.assert_close(omega, torch.tensor(after_1))
    omega = accumulate_importance(omega, OMEGA_2.clone(), *options)
    torch.testing.assert_close(omega, torch.tensor(after_2))


def test_degenerate_task_importance_normalises_to_zeros():
    """A task whose Omega is all zero (max) or constant (min-max) adds nothing, never NaN (A-GEM's guarded division)."""
    prev = torch.tensor([1.0, 2.0])
    torch.testing.assert_close(accumulate_importance(prev, torch.zeros(2), "sum", "max"), prev)
    torch.testing.assert_close(accumulate_importance(prev, torch.full((2,), 5.0), "sum", "minmax"), prev)
    torch.testing.assert_close(accumulate_importance(prev, torch.full((2,), 5.0), "latest", "minmax"), torch.zeros(2))


def test_defaults_are_the_committed_behaviour_and_every_option_is_recorded():
    cfg = TrainConfig()
    assert (cfg.omega_accumulate, cfg.omega_normalise, cfg.pi_xi) == ("sum", "none", 0.1)
    chosen = TrainConfig(omega_accumulate="latest", omega_normalise="minmax", pi_xi=1e-3)
    d = chosen.to_dict()
    assert (d["omega_accumulate"], d["omega_normalise"], d["pi_xi"]) == ("latest", "minmax", 1e-3)
    assert TrainConfig(**d) == chosen  # what a worker process rebuilds from a job's recorded config


@pytest.mark.parametrize("field,value,allowed", [("omega_accumulate", "mean", "sum, latest"),
                                                 ("omega_normalise", "l2", "none, max, minmax")])
def test_an_unknown_option_is_a_usage_error(field, value, allowed):
    with pytest.raises(UsageError, match=f"^{field}='{value}' is not an option; choose one of {allowed}$"):
        TrainConfig(**{field: value})


@pytest.fixture(scope="module")
def bench():
    return permuted_mnist(K=5, n_tasks=2, seed=0, split="val")


def by_hand(omega, normalise):
    """One task's Omega normalised as documented, written out independently of the code under test."""
    if normalise == "max":
        return omega / omega.max()
    if normalise == "minmax":
        return (omega - omega.min()) / (omega.max() - omega.min())
    return omega


#: Every option with MAS and with EWC, six runs in all (sum/none is also checked by tests/test_training.py).
RUNS = [("mas", mas_importance, ("sum", "max")), ("mas", mas_importance, ("latest", "none")),
        ("mas", mas_importance, ("latest", "minmax")), ("ewc-metacl-beta", ewc_fisher, ("sum", "none")),
        ("ewc-metacl-beta", ewc_fisher, ("sum", "minmax")), ("ewc-metacl-beta", ewc_fisher, ("latest", "max"))]


@pytest.mark.parametrize("name,measure,options", RUNS)
def test_the_loop_carries_the_documented_combination(bench, name, measure, options):
    """A real 2-task run (MLP 784-8-10, K=5): after task 1 the loop's Omega is task 1's importance on the model saved
    then, normalised; after task 2 it is the hand combination of both tasks' importances (task 2 trained under the
    penalty of the first Omega)."""
    accumulate, normalise = options
    cfg = TrainConfig(epochs=1, batch_size=10, bundle_size=5, beta=2.0, omega_accumulate=accumulate,
                      omega_normalise=normalise)
    torch.manual_seed(0)
    model, reg, gen = mlp(784, (8,), 10), RegState(), torch.Generator().manual_seed(0)
    train_experience(model, bench.train_stream[0], get_method(name), cfg, reg, gen)
    first = by_hand(measure(copy.deepcopy(model), bench.train_stream[0]), normalise)
    torch.testing.assert_close(reg.omega, first)
    train_experience(model, bench.train_stream[1], get_method(name), cfg, reg, gen)
    second = by_hand(measure(copy.deepcopy(model), bench.train_stream[1]), normalise)
    torch.testing.assert_close(reg.omega, first + second if accumulate == "sum" else second)
