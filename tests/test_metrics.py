"""ACC, BT, FA on a hand-made accuracy matrix, and the confidence interval."""
import math

import numpy as np
import pytest

from metacl_lite.metrics import (all_metrics, average_accuracy, average_accuracy_curve, backward_transfer,
                                 forward_adaptation, mean_ci95)

NAN = float("nan")
A = np.array([[90.0, NAN, NAN],
              [80.0, 85.0, NAN],
              [70.0, 88.0, 60.0]])
REF = [88.0, 80.0, 65.0]


def test_acc():
    assert average_accuracy(A) == pytest.approx((70 + 88 + 60) / 3)


def test_bt_min_over_tasks_after_learning():
    # task 1: min(70-90, 70-80) = -20; task 2: min over i=2 only: 88-85 = +3  -> mean -8.5
    assert backward_transfer(A) == pytest.approx((-20 + 3) / 2)


def test_fa():
    assert forward_adaptation(A, REF) == pytest.approx(((90 - 88) + (85 - 80) + (60 - 65)) / 3)


def test_curve_and_all():
    np.testing.assert_allclose(average_accuracy_curve(A), [90, 82.5, (70 + 88 + 60) / 3])
    assert all_metrics(A, REF) == {"ACC": pytest.approx((70 + 88 + 60) / 3), "BT": pytest.approx((-20 + 3) / 2),
                                   "FA": pytest.approx(((90 - 88) + (85 - 80) + (60 - 65)) / 3)}


def test_bad_matrices():
    with pytest.raises(ValueError, match=r"square \(n, n\), got shape \(2, 3\)"):
        average_accuracy(np.ones((2, 3)))
    bad = A.copy()
    bad[2, 1] = NAN
    with pytest.raises(ValueError, match="NaN on or below the diagonal"):
        average_accuracy(bad)
    with pytest.raises(ValueError, match=r"one reference accuracy per task \(3\)"):
        forward_adaptation(A, [1.0, 2.0])
    with pytest.raises(ValueError, match="at least two tasks"):
        backward_transfer(np.array([[50.0]]))


def test_ci95_t_interval():
    mean, hw = mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert hw == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))
    assert math.isnan(mean_ci95([5.0])[1])
