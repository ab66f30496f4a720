"""Metrics ("Metrics" section): the accuracy matrix a_{i,j}, ACC, BT and FA (Eqs. 15-17), each task's forgetting
and 95% intervals over seeds.

Accuracy matrices are (n, n) arrays in percent with a[i, j] = accuracy on task j after training through task i
(0-based here); entries with j > i are NaN (not evaluated).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _check(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"accuracy matrix must be square (n, n), got shape {a.shape}")
    if np.isnan(np.tril(a)).any():
        raise ValueError("accuracy matrix has NaN on or below the diagonal")
    return a


def average_accuracy(a: np.ndarray) -> float:
    """ACC = 1/n sum_j a_{n,j}  (Eq. 15)."""
    a = _check(a)
    return float(a[-1].mean())


def average_accuracy_curve(a: np.ndarray) -> np.ndarray:
    """Average accuracy after each task i, 1/i sum_{j<=i} a_{i,j} (the curves of Fig. 3)."""
    a = _check(a)
    return np.array([a[i, : i + 1].mean() for i in range(len(a))])


def forgetting(a: np.ndarray) -> np.ndarray:
    """Each task's forgetting at the end of the stream, f_j = max_{j<=i<n} a_{i,j} - a_{n,j} (j < n): its best accuracy
    before the last task, where a_{i,j} exists, minus its final one (Chaudhry et al. 2018, "Riemannian Walk for
    Incremental Learning"). n - 1 values, in points."""
    a = _check(a)
    return np.array([a[j: len(a) - 1, j].max() - a[-1, j] for j in range(len(a) - 1)])


def backward_transfer(a: np.ndarray) -> float:
    """BT = 1/(n-1) sum_{j<n} min_{j<=i<n} (a_{n,j} - a_{i,j})  (Eq. 16): the mean `forgetting`, negated."""
    if len(_check(a)) < 2:
        raise ValueError("BT needs at least two tasks")
    return 0.0 - float(np.mean(forgetting(a)))  # 0.0 - x: no negative zero where nothing is forgotten


def forward_adaptation(a: np.ndarray, reference: Sequence[float]) -> float:
    """FA = 1/n sum_i (a_{i,i} - a*_i)  (Eq. 17), with a*_i the accuracy of a randomly initialised model trained on
    task i only."""
    a = _check(a)
    ref = np.asarray(reference, dtype=np.float64)
    if ref.shape != (len(a),):
        raise ValueError(f"need one reference accuracy per task ({len(a)}), got shape {ref.shape}")
    return float(np.mean(np.diag(a) - ref))


def all_metrics(a: np.ndarray, reference: Sequence[float]) -> dict[str, float]:
    return {"ACC": average_accuracy(a), "BT": backward_transfer(a), "FA": forward_adaptation(a, reference)}


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% confidence interval over seeds: t_{0.975, n-1} * s / sqrt(n).

    s is the sample standard deviation (ddof=1). With one seed the half-width is NaN.
    """
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        raise ValueError("no values")
    if len(v) == 1:
        return float(v[0]), float("nan")
    from scipy.stats import t

    return float(v.mean()), float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
