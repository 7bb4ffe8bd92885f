"""The UKF Jacobian estimator of Løwer, Varagnolo and Stavdahl, on filterpy's ``UnscentedKalmanFilter``.

State x = vec(Ĵ) (row-major, 2J entries), process x_{n+1} = x_n + η
(fx = identity, η ~ N(0, Q)), measurement ṙ_n = Ĵ φ̇_n + ν (hx(x, phidot)
= reshape(x, (2, J)) @ φ̇, ν ~ N(0, R)); the paper's eq. (7). Each
:meth:`UKFEstimator.update` calls filterpy's ``predict()`` then
``update(rdot, phidot=…)``.

Sigma points: Van der Merwe's scaled points (filterpy's
``MerweScaledSigmaPoints``) with alpha, beta, kappa exposed. Because hx is
linear in the state, every valid choice gives the same estimate in exact
arithmetic (the unscented transform of a linear map is exact); the defaults
alpha = 1, beta = 2, kappa = 0 put the points at ±√n·σ with equal weights,
the best-conditioned choice (tiny alpha makes the weights ~1/alpha² and loses
digits). Q, R, P₀ and Ĵ₀ come from the same :class:`~snaketrack.estimation.kf.KFConfig`
as the exact filter, which reproduces this one (tests/estimation/test_kf.py).

>>> import numpy as np
>>> ukf = UKFEstimator(3)
>>> ukf.step(np.array([1.0, 0.0, 0.0]), np.array([0.1, -0.2])).shape
(2, 3)
>>> ukf.covariance.shape, ukf.predict(np.ones(3)).shape
((6, 6), (2,))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator, as_vector
from snaketrack.estimation.kf import KFConfig, _cov, _initial_state


@dataclass(frozen=True)
class SigmaConfig:
    """Van der Merwe scaled sigma-point parameters (filterpy's names).

    alpha: spread, 0 < alpha ≤ 1; default 1.
    beta: prior-distribution term (2 for a Gaussian); default 2.
    kappa: secondary scaling (0 or 3 − n are usual); default 0.
    """

    alpha: float = 1.0
    beta: float = 2.0
    kappa: float = 0.0


class UKFEstimator(JacobianEstimator):
    """filterpy's unscented Kalman filter estimating the 2 × J head Jacobian.

    n_joints: J. kf: Q, R, P₀, Ĵ₀ (:class:`KFConfig`). sigma: :class:`SigmaConfig`.
    Interface: :class:`~snaketrack.estimation.base.JacobianEstimator`;
    ``jacobian`` (2, J) [m/rad], ``covariance`` (2J, 2J) of vec(Ĵ).
    """

    name = "ukf"
    configs = ("kf", "sigma")

    def __init__(self, n_joints: int, kf: KFConfig = KFConfig(), sigma: SigmaConfig = SigmaConfig()):
        if int(n_joints) < 1:
            raise InputError(f"n_joints = {n_joints}; expected a positive joint count")
        if not (0.0 < sigma.alpha <= 1.0):
            raise InputError(f"SigmaConfig.alpha = {sigma.alpha}; expected 0 < alpha <= 1")
        self.n_joints = J = int(n_joints)
        self.config, self.sigma = kf, sigma
        config = kf
        n = 2 * J
        # deferred: filterpy takes half a second to import, and the registry (`snaketrack estimate --help`) loads
        # this module
        from filterpy.kalman import MerweScaledSigmaPoints, UnscentedKalmanFilter

        points = MerweScaledSigmaPoints(n, alpha=sigma.alpha, beta=sigma.beta, kappa=sigma.kappa)
        f = UnscentedKalmanFilter(dim_x=n, dim_z=2, dt=1.0, hx=self._hx, fx=self._fx, points=points)
        f.Q = _cov(config.q, n, "q")
        f.R = _cov(config.r, 2, "r")
        self._P0 = _cov(config.p0, n, "p0")
        self._x0 = _initial_state(config, J)
        self.filter = f
        self.reset()

    @staticmethod
    def _fx(x: np.ndarray, dt: float) -> np.ndarray:
        return x  # random walk: Ĵ_{n+1} = Ĵ_n + η

    def _hx(self, x: np.ndarray, phidot: np.ndarray) -> np.ndarray:
        return x.reshape(2, self.n_joints) @ phidot  # ṙ = Ĵ φ̇

    def reset(self) -> None:
        """Back to Ĵ₀ and P₀."""
        self.filter.x = self._x0.copy()
        self.filter.P = self._P0.copy()

    def update(self, phidot: np.ndarray, rdot: np.ndarray) -> None:
        """Fuse one measurement: φ̇ (J,) [rad/s], ṙ (2,) [m/s]."""
        p = as_vector(phidot, self.n_joints, "phidot")
        r = as_vector(rdot, 2, "rdot")
        self.filter.predict()
        self.filter.update(r, phidot=p)

    @property
    def jacobian(self) -> np.ndarray:
        """Current Ĵ (2, J) [m/rad]; a copy."""
        return self.filter.x.reshape(2, self.n_joints).copy()

    @property
    def covariance(self) -> np.ndarray:
        """Covariance of vec(Ĵ) (2J, 2J) [(m/rad)²]; a copy."""
        return self.filter.P.copy()
