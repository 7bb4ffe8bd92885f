"""The shared estimator interface (reset / step / predict) and the registry by name."""
import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator
from snaketrack.estimation.co import COConfig, COEstimator
from snaketrack.estimation.kf import KalmanJacobianEstimator, KFConfig, kf_step
from snaketrack.estimation.registry import ESTIMATORS, make_estimator
from snaketrack.estimation.ukf import SigmaConfig, UKFEstimator


def _pairs(rng, T, J):
    return rng.normal(0, 2, (T, J)), rng.normal(0, 0.3, (T, 2))


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_step_is_update_then_jacobian_and_reset_restarts(name):
    rng = np.random.default_rng(0)
    phidot, rdot = _pairs(rng, 30, 4)
    a, b = make_estimator(name, 4), make_estimator(name, 4)
    assert isinstance(a, JacobianEstimator) and a.name == name and a is not b
    first = []
    for n in range(30):
        if n:
            np.testing.assert_array_equal(a.predict(phidot[n]), a.jacobian @ phidot[n])
        J = a.step(phidot[n], rdot[n])
        b.update(phidot[n], rdot[n])
        assert J.shape == (2, 4)
        np.testing.assert_array_equal(J, b.jacobian)
        first.append(J)
    J[:] = 99.0                                   # the returned Ĵ is a copy
    np.testing.assert_array_equal(a.jacobian, b.jacobian)
    a.reset()
    np.testing.assert_array_equal(a.jacobian, np.zeros((2, 4)))
    again = [a.step(p, r) for p, r in zip(phidot, rdot)]
    np.testing.assert_array_equal(np.array(again[:-1]), np.array(first[:-1]))
    np.testing.assert_array_equal(again[-1], b.jacobian)


def test_registry_classes_and_settings_reach_their_estimator():
    assert ESTIMATORS == {"ukf": UKFEstimator, "co": COEstimator, "kf": KalmanJacobianEstimator}
    kf, co, sigma = KFConfig(q=2e-3), COConfig(min_phidot=0.1), SigmaConfig(alpha=0.5)
    ests = {name: make_estimator(name, 3, kf=kf, co=co, sigma=sigma) for name in ESTIMATORS}
    assert ests["ukf"].config is kf and ests["ukf"].sigma is sigma
    assert ests["kf"].config is kf and ests["co"].config is co
    assert make_estimator("kf", 3, kf=None).config == KFConfig()   # None: the default
    assert make_estimator("kf", 3, batch=5).jacobian.shape == (5, 2, 3)


def test_unknown_name_or_setting_is_a_one_line_input_error():
    with pytest.raises(InputError) as e:
        make_estimator("ekf", 3)
    assert str(e.value) == "estimator 'ekf': unknown; expected one of ukf, co, kf"
    with pytest.raises(InputError, match="no setting batch"):
        make_estimator("co", 3, batch=4)
    with pytest.raises(InputError, match="no setting gain"):
        make_estimator("ukf", 3, gain=1.0)


def test_batch_step_equals_single_estimators_and_plain_kf_step():
    rng = np.random.default_rng(1)
    B, J, T = 5, 3, 60
    cfg = KFConfig(q=1e-3, r=5e-3, p0=0.7)
    batch = make_estimator("kf", J, kf=cfg, batch=B)
    singles = [make_estimator("kf", J, kf=cfg) for _ in range(B)]
    x, P = np.zeros((B, 2 * J)), np.tile(0.7 * np.eye(2 * J), (B, 1, 1))
    for _ in range(T):
        phidot, rdot = rng.normal(0, 2, (B, J)), rng.normal(0, 0.3, (B, 2))
        Jb = batch.step(phidot, rdot)
        Js = np.stack([s.step(phidot[b], rdot[b]) for b, s in enumerate(singles)])
        x, P = kf_step(x, P, phidot, rdot, batch.Q, batch.R)
        np.testing.assert_allclose(Jb, Js, atol=1e-12, rtol=0)
        np.testing.assert_array_equal(Jb, x.reshape(B, 2, J))
    np.testing.assert_allclose(batch.covariance, np.stack([s.covariance for s in singles]), atol=1e-12, rtol=0)
    np.testing.assert_array_equal(batch.covariance, P)
    assert batch.predict(phidot).shape == (B, 2)
