"""Exact Kalman filter against filterpy's UnscentedKalmanFilter (the paper's UKF)."""
import numpy as np
import pytest
from filterpy.kalman import KalmanFilter, MerweScaledSigmaPoints, UnscentedKalmanFilter

from snaketrack.errors import InputError
from snaketrack.estimation.kf import KalmanJacobianEstimator, KFConfig, kf_step
from snaketrack.estimation.ukf import SigmaConfig, UKFEstimator


def _spd(rng, n, scale):
    A = rng.normal(size=(n, n))
    return scale * (A @ A.T / n + 0.1 * np.eye(n))


def _filterpy_ukf(J, Q, R, P0, x0, alpha=1.0, beta=2.0, kappa=0.0):
    """filterpy's UKF set up directly (independent of snaketrack.estimation.ukf)."""
    pts = MerweScaledSigmaPoints(2 * J, alpha=alpha, beta=beta, kappa=kappa)
    f = UnscentedKalmanFilter(2 * J, 2, 1.0, hx=lambda x, phidot: x.reshape(2, J) @ phidot,
                              fx=lambda x, dt: x, points=pts)
    f.Q, f.R, f.P, f.x = Q.copy(), R.copy(), P0.copy(), x0.copy()
    return f


@pytest.mark.parametrize("J", [1, 4, 10])
def test_exact_kf_equals_filterpy_ukf(J):
    rng = np.random.default_rng(J)
    n = 2 * J
    Q, R, P0 = _spd(rng, n, 1e-3), _spd(rng, 2, 1e-2), _spd(rng, n, 1.0)
    x0 = rng.normal(0, 0.1, n)
    kf = KalmanJacobianEstimator(J, KFConfig(q=Q, r=R, p0=P0, j0=x0.reshape(2, J)))
    ref = _filterpy_ukf(J, Q, R, P0, x0)
    for _ in range(300):
        phidot, rdot = rng.normal(0, 3, J), rng.normal(0, 0.5, 2)
        np.testing.assert_allclose(kf.predict(phidot), ref.x.reshape(2, J) @ phidot, atol=1e-8, rtol=0)
        kf.update(phidot, rdot)
        ref.predict()
        ref.update(rdot, phidot=phidot)
        np.testing.assert_allclose(kf.jacobian.reshape(-1), ref.x, atol=1e-8, rtol=0)
        np.testing.assert_allclose(kf.covariance, ref.P, atol=1e-8, rtol=0)


def test_batch_equals_filterpy_ukf_per_member():
    rng = np.random.default_rng(11)
    B, J = 6, 3
    kf = KalmanJacobianEstimator(J, KFConfig(), batch=B)
    refs = [_filterpy_ukf(J, kf.Q, kf.R, kf._P0, np.zeros(2 * J)) for _ in range(B)]
    for _ in range(100):
        phidot, rdot = rng.normal(0, 3, (B, J)), rng.normal(0, 0.5, (B, 2))
        kf.update(phidot, rdot)
        for b, f in enumerate(refs):
            f.predict()
            f.update(rdot[b], phidot=phidot[b])
    np.testing.assert_allclose(kf.jacobian.reshape(B, -1), np.stack([f.x for f in refs]), atol=1e-8, rtol=0)
    np.testing.assert_allclose(kf.covariance, np.stack([f.P for f in refs]), atol=1e-8, rtol=0)
    assert kf.predict(phidot).shape == (B, 2)


def test_batched_step_equals_single_path_and_filterpy_linear_kf():
    """kf_step on a batch of one equals filterpy's linear KalmanFilter with H = blockdiag(φ̇ᵀ, φ̇ᵀ)."""
    rng = np.random.default_rng(12)
    J = 4
    n = 2 * J
    Q, R = _spd(rng, n, 1e-3), _spd(rng, 2, 1e-2)
    lin = KalmanFilter(dim_x=n, dim_z=2)
    lin.F, lin.Q, lin.R, lin.P, lin.x = np.eye(n), Q, R, np.eye(n), np.zeros(n)
    x, P = np.zeros((1, n)), np.eye(n)[None]
    for _ in range(50):
        phidot, rdot = rng.normal(0, 3, J), rng.normal(0, 0.5, 2)
        x, P = kf_step(x, P, phidot[None], rdot[None], Q, R)
        lin.predict()
        H = np.zeros((2, n))
        H[0, :J], H[1, J:] = phidot, phidot
        lin.update(rdot, H=H)
    np.testing.assert_allclose(x[0], lin.x, atol=1e-8)
    np.testing.assert_allclose(P[0], lin.P, atol=1e-8)


@pytest.mark.parametrize("sigma", [SigmaConfig(), SigmaConfig(alpha=0.5, beta=2.0, kappa=1.0), SigmaConfig(alpha=0.1)])
def test_ukf_wrapper_equals_exact_kf_for_any_sigma_points(sigma):
    rng = np.random.default_rng(13)
    J = 5
    cfg = KFConfig(q=2e-3, r=5e-3, p0=0.5)
    kf, ukf = KalmanJacobianEstimator(J, cfg), UKFEstimator(J, cfg, sigma)
    for _ in range(200):
        phidot, rdot = rng.normal(0, 3, J), rng.normal(0, 0.5, 2)
        kf.update(phidot, rdot)
        ukf.update(phidot, rdot)
    np.testing.assert_allclose(ukf.jacobian, kf.jacobian, atol=1e-8)
    np.testing.assert_allclose(ukf.covariance, kf.covariance, atol=1e-8)


def test_reset_and_input_errors():
    kf = KalmanJacobianEstimator(2, KFConfig(j0=np.array([[1.0, 2.0], [3.0, 4.0]])))
    kf.update(np.ones(2), np.zeros(2))
    kf.reset()
    np.testing.assert_array_equal(kf.jacobian, [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(InputError, match="phidot"):
        kf.update(np.ones(3), np.zeros(2))
    with pytest.raises(InputError, match="KFConfig.q"):
        KalmanJacobianEstimator(2, KFConfig(q=np.ones(3)))
    with pytest.raises(InputError, match="positive semi-definite"):
        KalmanJacobianEstimator(2, KFConfig(r=-1.0))
    with pytest.raises(InputError, match=r"\(4, 2\)"):
        KalmanJacobianEstimator(2, batch=4).update(np.ones(2), np.zeros(2))
    with pytest.raises(InputError, match="alpha"):
        UKFEstimator(2, sigma=SigmaConfig(alpha=0.0))
