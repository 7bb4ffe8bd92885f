"""Exact Kalman filter on vec(Ĵ): the UKF of the Jacobian paper, without sigma points.

The UKF of Løwer, Varagnolo and Stavdahl (their eq. 7) has the state x = vec(Ĵ) (row-major: x[:J] is the
first row of Ĵ, x[J:] the second), a random-walk process and the measurement

    x_{n+1} = x_n + η_n,          η ~ N(0, Q)
    ṙ_n     = Ĵ_n φ̇_n + ν_n = H_n x_n + ν_n,   H_n = blockdiag(φ̇_nᵀ, φ̇_nᵀ),  ν ~ N(0, R)

The measurement is *linear* in the state, so the unscented transform is exact
and the UKF's mean and covariance equal a plain Kalman filter's (tested
against filterpy's ``UnscentedKalmanFilter`` in tests/estimation/test_kf.py).
This module is that Kalman filter, vectorised over a batch of B independent
estimators (one per robot, or per hypothesis) sharing Q, R and the state size.

One step, in filterpy's order (predict, then update), each line as in code::

    P = P + Q                         # predict (F = I)
    S = H P Hᵀ + R                    # innovation covariance (B, 2, 2)
    K = P Hᵀ S⁻¹                      # Kalman gain (B, n, 2)
    y = ṙ − H x                       # residual
    x = x + K y
    P = P − K S Kᵀ                    # filterpy's form; kept symmetric

Shapes: J joints, n = 2J states, B batch. Units: Ĵ in m/rad (head velocity per
joint speed), Q in (m/rad)² per step, R in (m/s)², P in (m/rad)².

>>> import numpy as np
>>> kf = KalmanJacobianEstimator(2, KFConfig(q=0.0, r=1e-9, p0=1e3))
>>> Jt = np.array([[1.0, 2.0], [3.0, 4.0]])
>>> for phidot in ([1.0, 0.0], [0.0, 1.0], [1.0, 1.0]):
...     J_hat = kf.step(np.array(phidot), Jt @ np.array(phidot))
>>> np.allclose(J_hat, Jt, atol=1e-6)
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator

ArrayLike = Union[float, np.ndarray]


@dataclass(frozen=True)
class KFConfig:
    """Tuning of the Kalman (and unscented Kalman) Jacobian estimator; only the ratios of q, r, p0 matter for Ĵ.

    q: process noise Q on vec(Ĵ) per step [(m/rad)²], scalar (q·I), (2J,) diagonal or (2J, 2J); default 1e-3.
    r: measurement noise R on ṙ [(m/s)²], scalar (r·I), (2,) or (2, 2); default 1e-2.
    p0: initial covariance P₀ of vec(Ĵ) [(m/rad)²], scalar, (2J,) or (2J, 2J); default 1.
    j0: initial Ĵ₀ (2, J) [m/rad]; default None (zeros).
    """

    q: ArrayLike = 1e-3
    r: ArrayLike = 1e-2
    p0: ArrayLike = 1.0
    j0: Optional[np.ndarray] = None


def _initial_state(config: "KFConfig", J: int) -> np.ndarray:
    """vec(Ĵ₀) (2J,): zeros, or the configured ``j0`` (2, J) flattened row by row."""
    if config.j0 is None:
        return np.zeros(2 * J)
    j0 = np.asarray(config.j0, dtype=float)
    if j0.shape != (2, J):
        raise InputError(f"KFConfig.j0: shape {j0.shape}; expected (2, {J})")
    return j0.reshape(-1).copy()


def _cov(value: ArrayLike, n: int, name: str) -> np.ndarray:
    """A scalar, diagonal or full covariance as a symmetric (n, n) array."""
    a = np.asarray(value, dtype=float)
    if a.ndim == 0:
        m = float(a) * np.eye(n)
    elif a.shape == (n,):
        m = np.diag(a)
    elif a.shape == (n, n):
        m = 0.5 * (a + a.T)
    else:
        raise InputError(f"KFConfig.{name}: shape {a.shape}; expected a scalar, ({n},) or ({n}, {n})")
    if not np.all(np.isfinite(m)) or np.any(np.linalg.eigvalsh(m) < -1e-12 * max(1.0, np.abs(m).max())):
        raise InputError(f"KFConfig.{name}: not a finite positive semi-definite covariance")
    return m


def kf_step(x: np.ndarray, P: np.ndarray, phidot: np.ndarray, rdot: np.ndarray,
            Q: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One predict + update of B Kalman filters on vec(Ĵ), as plain arrays.

    x: (B, 2J) states [m/rad]; P: (B, 2J, 2J) covariances; phidot: (B, J)
    [rad/s]; rdot: (B, 2) measured head velocity [m/s]; Q: (2J, 2J) or
    (B, 2J, 2J); R: (2, 2) or (B, 2, 2). Returns new (x, P); inputs untouched.
    Uses H = blockdiag(φ̇ᵀ, φ̇ᵀ) without forming it.
    """
    J = phidot.shape[-1]
    P = P + Q                                               # P = P + Q
    # P Hᵀ: column c of Hᵀ is φ̇ placed in block c
    PHt = np.stack([P[..., :J] @ phidot[..., :, None], P[..., J:] @ phidot[..., :, None]], axis=-1)[..., 0, :]
    # H P Hᵀ: rows of H times PHt
    HPHt = np.stack([np.einsum("bj,bjc->bc", phidot, PHt[:, :J, :]),
                     np.einsum("bj,bjc->bc", phidot, PHt[:, J:, :])], axis=1)
    S = HPHt + R                                            # S = H P H' + R
    det = S[:, 0, 0] * S[:, 1, 1] - S[:, 0, 1] * S[:, 1, 0]
    Si = np.empty_like(S)
    Si[:, 0, 0] = S[:, 1, 1] / det
    Si[:, 1, 1] = S[:, 0, 0] / det
    Si[:, 0, 1] = -S[:, 0, 1] / det
    Si[:, 1, 0] = -S[:, 1, 0] / det
    K = PHt @ Si                                            # K = P H' S^-1
    hx = np.stack([np.einsum("bj,bj->b", x[:, :J], phidot), np.einsum("bj,bj->b", x[:, J:], phidot)], axis=1)
    y = rdot - hx                                           # y = z - Hx
    x = x + np.einsum("bnc,bc->bn", K, y)                   # x = x + Ky
    P = P - K @ S @ np.swapaxes(K, -1, -2)                  # P = P - K S K'
    P = 0.5 * (P + np.swapaxes(P, -1, -2))
    return x, P


def _kf_step_one(x: np.ndarray, P: np.ndarray, phidot: np.ndarray, rdot: np.ndarray,
                 Q: np.ndarray, R: np.ndarray) -> None:
    """:func:`kf_step` for one filter, in place on x (2J,) and P (2J, 2J); fewer numpy calls."""
    J = phidot.shape[0]
    P += Q                                                  # P = P + Q
    HPt = np.empty((2, 2 * J))                              # (P H')' = H P (P symmetric)
    np.dot(phidot, P[:J], out=HPt[0])
    np.dot(phidot, P[J:], out=HPt[1])
    PHt = HPt.T
    S = np.array([[HPt[0, :J] @ phidot, HPt[0, J:] @ phidot],
                  [HPt[1, :J] @ phidot, HPt[1, J:] @ phidot]]) + R   # S = H P H' + R
    det = S[0, 0] * S[1, 1] - S[0, 1] * S[1, 0]
    Si = np.array([[S[1, 1], -S[0, 1]], [-S[1, 0], S[0, 0]]]) / det
    K = PHt @ Si                                            # K = P H' S^-1
    y = rdot - np.array([x[:J] @ phidot, x[J:] @ phidot])   # y = z - Hx
    x += K @ y                                              # x = x + Ky
    P -= K @ (S @ K.T)                                      # P = P - K S K'
    P[...] = 0.5 * (P + P.T)


class KalmanJacobianEstimator(JacobianEstimator):
    """Exact Kalman filter estimating the 2 × J head Jacobian, one or a batch.

    n_joints: J. kf: :class:`KFConfig`. batch: None for one estimator
    (arrays without a batch axis) or B for B estimators stepped at once
    (every array gains a leading B axis: ``step`` takes φ̇ (B, J) and ṙ (B, 2)
    and returns Ĵ (B, 2, J)).

    Interface: :class:`~snaketrack.estimation.base.JacobianEstimator`;
    ``jacobian`` (2, J) [m/rad] and ``covariance`` (2J, 2J) of vec(Ĵ), row-major.
    """

    name = "kf"
    configs = ("kf",)

    def __init__(self, n_joints: int, kf: KFConfig = KFConfig(), batch: Optional[int] = None):
        if int(n_joints) < 1:
            raise InputError(f"n_joints = {n_joints}; expected a positive joint count")
        if batch is not None and int(batch) < 1:
            raise InputError(f"batch = {batch}; expected None or a positive count")
        self.n_joints = J = int(n_joints)
        self.config = config = kf
        self.batch = None if batch is None else int(batch)
        n = 2 * J
        self.Q = _cov(config.q, n, "q")
        self.R = _cov(config.r, 2, "r")
        self._P0 = _cov(config.p0, n, "p0")
        self._x0 = _initial_state(config, J)
        self.reset()

    def reset(self) -> None:
        """Back to Ĵ₀ and P₀."""
        B = 1 if self.batch is None else self.batch
        self.x = np.tile(self._x0, (B, 1))
        self.P = np.tile(self._P0, (B, 1, 1))

    def _batched(self, a: np.ndarray, width: int, name: str) -> np.ndarray:
        a = np.asarray(a, dtype=float)
        want = (width,) if self.batch is None else (self.batch, width)
        if a.shape != want:
            raise InputError(f"{name}: shape {a.shape}; expected {want}")
        return a.reshape(-1, width)

    def update(self, phidot: np.ndarray, rdot: np.ndarray) -> None:
        """Fuse one measurement: joint speeds φ̇ (J,) [rad/s], head velocity ṙ (2,) [m/s] (batch: (B, …))."""
        p = self._batched(phidot, self.n_joints, "phidot")
        r = self._batched(rdot, 2, "rdot")
        if self.batch is None:
            _kf_step_one(self.x[0], self.P[0], p[0], r[0], self.Q, self.R)
        else:
            self.x, self.P = kf_step(self.x, self.P, p, r, self.Q, self.R)

    def predict(self, phidot: np.ndarray) -> np.ndarray:
        """Predicted head velocity Ĵ φ̇ [m/s], (2,) (batch: (B, 2))."""
        p = self._batched(phidot, self.n_joints, "phidot")
        out = np.einsum("bij,bj->bi", self.x.reshape(-1, 2, self.n_joints), p)
        return out[0] if self.batch is None else out

    @property
    def jacobian(self) -> np.ndarray:
        """Current Ĵ [m/rad], (2, J) (batch: (B, 2, J)); a copy."""
        J = self.x.reshape(-1, 2, self.n_joints).copy()
        return J[0] if self.batch is None else J

    @property
    def covariance(self) -> np.ndarray:
        """Covariance of vec(Ĵ) (row-major) [(m/rad)²], (2J, 2J) (batch: (B, 2J, 2J)); a copy."""
        return self.P[0].copy() if self.batch is None else self.P.copy()
