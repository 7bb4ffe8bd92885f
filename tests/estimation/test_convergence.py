"""Both estimators converge on synthetic data with a known, slowly changing Jacobian."""
import numpy as np
import pytest

from snaketrack.estimation.co import COEstimator
from snaketrack.estimation.kf import KalmanJacobianEstimator, KFConfig
from snaketrack.estimation.metrics import recovery_time, run_estimator
from snaketrack.estimation.synthetic import synthetic_trajectory
from snaketrack.estimation.ukf import UKFEstimator


def _rich(J, seed, T=1200, dt=1 / 120):
    """Persistently exciting φ̇ (white, 3 rad/s) and a slowly drifting J(t) (periods ≥ 12 s)."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) * dt
    A, B = rng.normal(0, 0.1, (2, J)), rng.uniform(0.02, 0.05, (2, J))
    w, c = rng.uniform(0.1, 0.5, (2, J)), rng.uniform(0, 2 * np.pi, (2, J))
    Jt = A + B * np.sin(w * t[:, None, None] + c)
    phidot = rng.normal(0, 3, (T, J))
    return t, Jt, phidot, np.einsum("tij,tj->ti", Jt, phidot)


@pytest.mark.parametrize("J", [4, 10])
@pytest.mark.parametrize("make", [lambda J: COEstimator(J),
                                  lambda J: KalmanJacobianEstimator(J, KFConfig(q=1e-6, r=1e-4)),
                                  lambda J: UKFEstimator(J, KFConfig(q=1e-6, r=1e-4))], ids=["co", "kf", "ukf"])
def test_jacobian_converges_to_the_truth(J, make):
    t, Jt, phidot, rdot = _rich(J, seed=J)
    run = run_estimator(make(J), phidot, rdot)
    rel = np.linalg.norm(run.jacobian - Jt, axis=(1, 2)) / np.linalg.norm(Jt, axis=(1, 2))
    assert rel[0] > 0.3                        # starts far (Ĵ₀ = 0 and one update)
    assert rel[t >= 2.0].max() < 0.03          # then follows the drifting J within 3 %


def test_predictions_converge_on_a_gait_like_input():
    """A travelling-wave gait excites only part of J; the predicted ṙ still converges for both."""
    s = synthetic_trajectory(duration=4.0, dt=1 / 120, n_joints=10, seed=2)
    power = np.mean(s.head_vxy ** 2)
    for est in (COEstimator(10), KalmanJacobianEstimator(10)):
        run = run_estimator(est, s.phidot, s.head_vxy)
        e = np.sum((run.prediction - s.head_vxy) ** 2, axis=1)
        assert np.mean(e[s.t >= 2.0]) < 1e-2 * power


def test_halt_kf_recovers_co_does_not():
    """Documented halt behaviour: with noise on ṙ and jitter in φ̇ while halted, CO's Ĵ diverges
    and its error after resuming stays above its pre-halt level; the Kalman filter is back within a second
    (J drifted during the halt); CO with the reset option does far better than without."""
    from snaketrack.estimation.co import COConfig

    s = synthetic_trajectory(duration=6.0, dt=1 / 120, n_joints=6, seed=5, halt=(2.5, 4.0), halt_jitter=1e-3)
    rng = np.random.default_rng(0)
    meas = s.head_vxy + rng.normal(0, 3e-3, s.head_vxy.shape)
    out = {}
    for name, est in {"co": COEstimator(6), "kf": KalmanJacobianEstimator(6),
                      "co_reset": COEstimator(6, COConfig(reset_after_halt=True))}.items():
        run = run_estimator(est, s.phidot, meas)
        sq = np.sum((run.prediction - s.head_vxy) ** 2, axis=1)
        pre = np.nanmean(sq[(s.t >= 1.0) & (s.t < 2.5)])
        post = np.nanmean(sq[s.t >= 4.5])
        out[name] = (run, recovery_time(s.t, sq, (2.5, 4.0)), pre, post)
    run, rec, pre, post_co = out["co"]
    post = post_co
    halted = (s.t >= 2.6) & (s.t < 4.0)
    assert np.linalg.norm(run.jacobian[halted][-1]) > 5 * np.linalg.norm(s.jacobian[halted][-1])
    assert rec is None and post > 5 * pre
    _, rec, pre, post = out["kf"]
    assert rec is not None and rec < 1.0 and post < 2 * pre
    _, rec, pre, post = out["co_reset"]
    assert post < 0.05 * post_co               # far better than without the reset (it re-learns J from zero)
