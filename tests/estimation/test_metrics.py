"""The prediction metric, moving average and recovery time against direct computations."""
import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.estimation.co import COEstimator
from snaketrack.estimation.metrics import moving_average, mse, recovery_time, run_estimator


def test_run_estimator_predicts_next_step_from_previous_estimate():
    rng = np.random.default_rng(0)
    phidot, rdot = rng.normal(size=(20, 3)), rng.normal(size=(20, 2))
    run = run_estimator(COEstimator(3), phidot, rdot)
    assert np.isnan(run.prediction[0]).all()
    for n in range(1, 20):
        np.testing.assert_allclose(run.prediction[n], run.jacobian[n - 1] @ phidot[n], rtol=1e-12)
    assert run.step_s.shape == (20,) and run.name == "co"


def test_mse_per_component_skips_nan_and_mask():
    pred = np.array([[np.nan, np.nan], [1.0, 2.0], [3.0, 5.0], [0.0, 0.0]])
    truth = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [10.0, 10.0]])
    m = mse(pred, truth, mask=np.array([True, True, True, False]))
    assert m == pytest.approx({"mse_x": (1 + 4) / 2, "mse_y": (4 + 16) / 2})
    with pytest.raises(InputError):
        mse(pred[:, :1], truth[:, :1])


def test_moving_average_matches_convolution():
    x = np.random.default_rng(1).normal(size=50)
    w = 7
    full = np.convolve(x, np.ones(w) / w, mode="valid")
    np.testing.assert_allclose(moving_average(x, w)[w - 1:], full, rtol=1e-12)
    assert moving_average(x, w)[0] == pytest.approx(x[0])


def test_recovery_time_on_a_constructed_error():
    dt = 0.01
    t = np.arange(1000) * dt                     # 10 s
    e = np.full(t.size, 1.0)                     # pre-halt level 1
    e[(t >= 5) & (t < 7)] = 0.0                  # halted: no error
    e[(t >= 7) & (t < 7.5)] = 100.0              # transient of 0.5 s
    # 0.1 s trailing mean falls under 1.5 at t = 7.5 + 0.1 s (window fully past the transient)
    r = recovery_time(t, e, (5.0, 7.0), window_s=0.1, factor=1.5, hold_s=0.3)
    assert r == pytest.approx(0.6, abs=1.5 * dt)
    e[(t >= 8.0) & (t < 8.2)] = 100.0            # a relapse inside the hold window delays recovery
    r2 = recovery_time(t, e, (5.0, 7.0), window_s=0.1, factor=1.5, hold_s=0.6)
    assert r2 == pytest.approx(8.3 - 7.0, abs=1.5 * dt)
    e[t >= 7] = 100.0
    assert recovery_time(t, e, (5.0, 7.0)) is None
