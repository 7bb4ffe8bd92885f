"""Kalman filter of the tracker: constant-velocity prediction, image-moment update.

Filter state ``x = [s; ṡ]`` (``2D`` entries), where ``s`` is the pose vector
of :mod:`snaketrack.tracker.state` (``D = J + 6``: joint angles [rad],
base rotation vector [rad], base translation [m]) and ``ṡ`` its rate
(rad/s, m/s). The names and equations follow filterpy (``x, P, F, Q, H, R,
K, y, S``); every step exists as a plain function and in
:class:`KalmanFilter`, which calls them.

Prediction (constant velocity, piecewise-constant white acceleration)::

    F = [[I, dt·I], [0, I]]
    Q = G·diag(σa²)·G',  G = [dt²/2·I; dt·I]       σa per entry [rad/s², m/s²]
    x = F x,  P = F P F' + Q

The paper assumes no process noise (Q = 0, ``P = F P F'``); this filter
keeps a small acceleration noise so that the gain never collapses to zero
over a long sequence (set the accelerations to 0 for the paper's model).

Update: the observation ``z`` is a vector of image moments of the observed
mask (:func:`snaketrack.tracker.fit.moments.moment_vector`: centroid [px],
optionally the area-normalised second moments [px²]); ``h(s)`` renders the
pose and returns the same moments of the rendered silhouette. ``H`` is
``∂h/∂s`` from torch autograd at the predicted pose (one forward pass and
one backward pass per moment), padded with zeros for the velocity half::

    y = z − h(x)                         # residual
    S = H P H' + R                       # residual covariance
    K = P H' S⁻¹                         # gain
    x = x + K y
    P = (I − K H) P (I − K H)' + K R K'  # Joseph form (stays symmetric PSD)

Velocity update after refinement (paper, Sec. III-D, eq. 9): refinement
moves the pose from the filter's ``s`` to ``s_ref``. The filter state then
becomes ``s = s_ref`` and::

    ṡ = g·(s_ref − s_prev)/dt + (1 − g)·ṡ_filter

where ``s_prev`` is the previous frame's final pose (after its own
refinement) and ``g`` is :attr:`FilterConfig.velocity_gain`. ``g = 1`` is
the paper's finite difference ``ẋ_t = (x_t − x_{t−1})/Δt``; smaller values
blend in the filter's own velocity (less noise from a jittery refinement).
``P`` is left as the update made it (the paper does not treat refinement as
a measurement either).

Depth damping: the rate is then changed so that a chosen point of the
body, the *anchor* ``a(s)`` (3,) [m] in the camera frame, moves along its
viewing ray ``r = a(s_ref)/|a(s_ref)|`` by only ``g_r`` =
:attr:`FilterConfig.depth_velocity_gain` of what the prediction would move
it. With ``Δ = (a(s_ref + ṡ·dt) − a(s_ref))/dt`` the anchor's predicted rate,
the base's translation rate becomes::

    ṫ = ṫ − (1 − g_r)·(Δ·r)·r

With the base translation as anchor (``a(s) = t``, the default) this
scales the base's own rate along its ray. The tracker anchors at the
body's centre (the mean of the link centres; ``TrackerConfig.depth_anchor``):
a crawling snake's base swings towards and away from the camera with the
gait while its centre moves slowly, so damping the base's rate also
damped a real swing and the track lagged it.

Depth is the direction one camera sees least: a silhouette moved along the
ray and turned a little scores almost the same, so refinement hardly
corrects it, and a finite-difference rate along it keeps the track moving
on (a swing of ±0.1–0.3 m every 15–20 frames on the short arcsnake seen
from a hand-held camera). ``g_r = 1`` is the paper's update.

>>> import numpy as np
>>> F = cv_transition(1, dt=0.1)
>>> x, P = predict(np.array([0.0, 2.0]), np.eye(2), F, np.zeros((2, 2)))
>>> x.tolist(), P.round(3).tolist()
([0.2, 2.0], [[1.01, 0.1], [0.1, 1.0]])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from snaketrack.errors import ConvergenceError, InputError, StateError


@dataclass(frozen=True)
class FilterConfig:
    """Noise parameters of :class:`KalmanFilter`, with units.

    Process noise, standard deviation of a piecewise-constant white
    acceleration of each pose entry:
        joint_accel_std [rad/s²], rotation_accel_std [rad/s²] (rotation
        vector), translation_accel_std [m/s²].
    Observation noise of the image moments:
        centroid_std_px [px] per centroid coordinate;
        second_moment_rel_std [1]: std of each second moment (n20, n11, n02)
        as a fraction of the observed ``n20 + n02`` [px²] (so it scales with
        the robot's size in the image); floor ``second_moment_min_std_px2`` [px²].
    Initial covariance (standard deviations) of the pose and its rate:
        init_joint_std [rad], init_rotation_std [rad], init_translation_std [m],
        init_joint_rate_std [rad/s], init_rotation_rate_std [rad/s],
        init_translation_rate_std [m/s].
    velocity_gain [1]: weight g of the finite-difference velocity after
        refinement (module doc); 1 is the paper's choice.
    depth_velocity_gain [1]: factor g_r on the anchor's predicted rate
        along its viewing ray after the velocity update (module doc, "Depth
        damping"); 1 is the paper's update. Default 0.25, for the
        tracker's anchor at the body's centre: on simulated clips it gives
        a lower arcsnake base error than 0.5 with the same joint error,
        while 0 worsens a static arcsnake clip. With the base as anchor 0.5
        suits better, since damping the base's rate also damps the gait's
        real swing.
    """

    joint_accel_std: float = 4.0
    rotation_accel_std: float = 2.0
    translation_accel_std: float = 0.5
    centroid_std_px: float = 2.0
    second_moment_rel_std: float = 0.05
    second_moment_min_std_px2: float = 1.0
    init_joint_std: float = 0.1
    init_rotation_std: float = 0.05
    init_translation_std: float = 0.05
    init_joint_rate_std: float = 1.0
    init_rotation_rate_std: float = 0.5
    init_translation_rate_std: float = 0.2
    velocity_gain: float = 1.0
    depth_velocity_gain: float = 0.25

    def __post_init__(self):
        for name, v in self.__dict__.items():
            if not np.isfinite(v) or v < 0:
                raise InputError(f"FilterConfig.{name} = {v!r}; expected a finite value >= 0")
        if self.centroid_std_px <= 0:
            raise InputError(f"FilterConfig.centroid_std_px = {self.centroid_std_px!r}; expected > 0 [px]")
        for name in ("velocity_gain", "depth_velocity_gain"):
            if getattr(self, name) > 1:
                raise InputError(f"FilterConfig.{name} = {getattr(self, name)!r}; expected in [0, 1]")

    def _per_entry(self, layout, joint: float, rot: float, trans: float) -> np.ndarray:
        v = np.empty(layout.dim)
        v[layout.q], v[layout.rot], v[layout.trans] = joint, rot, trans
        return v

    def accel_std(self, layout) -> np.ndarray:
        """(D,) acceleration standard deviations [rad/s², m/s²] in ``layout``'s order."""
        return self._per_entry(layout, self.joint_accel_std, self.rotation_accel_std, self.translation_accel_std)

    def initial_covariance(self, layout) -> np.ndarray:
        """(2D, 2D) diagonal initial covariance of ``[s; ṡ]``."""
        pos = self._per_entry(layout, self.init_joint_std, self.init_rotation_std, self.init_translation_std)
        vel = self._per_entry(layout, self.init_joint_rate_std, self.init_rotation_rate_std,
                              self.init_translation_rate_std)
        return np.diag(np.concatenate([pos, vel]) ** 2)

    def observation_noise(self, z: np.ndarray) -> np.ndarray:
        """R (m, m) for an observed moment vector ``z`` of length 2 (centroid) or 5 (+ second moments)."""
        z = np.asarray(z, float).reshape(-1)
        if z.size not in (2, 5):
            raise InputError(f"observation: {z.size} moments; expected 2 (cu, cv) or 5 (cu, cv, n20, n11, n02)")
        std = [self.centroid_std_px] * 2
        if z.size == 5:
            s2 = max(self.second_moment_rel_std * abs(z[2] + z[4]), self.second_moment_min_std_px2)
            std += [s2] * 3
        return np.diag(np.square(std))


# -- plain functions (filterpy names) ----------------------------------------------
def cv_transition(n: int, dt: float) -> np.ndarray:
    """F (2n, 2n) of the constant-velocity model on ``[s; ṡ]``: ``s += dt·ṡ``."""
    _check_dt(dt)
    F = np.eye(2 * n)
    F[:n, n:] = dt * np.eye(n)
    return F


def white_accel_noise(accel_std: np.ndarray, dt: float) -> np.ndarray:
    """Q (2n, 2n) for piecewise-constant white acceleration with stds ``accel_std`` (n,).

    Per entry ``[[dt⁴/4, dt³/2], [dt³/2, dt²]]·σ²`` (filterpy's
    ``Q_discrete_white_noise(dim=2)``), laid out as ``[s; ṡ]`` blocks.
    """
    _check_dt(dt)
    var = np.square(np.asarray(accel_std, float).reshape(-1))
    n = var.size
    Q = np.zeros((2 * n, 2 * n))
    idx = np.arange(n)
    Q[idx, idx] = dt**4 / 4 * var
    Q[idx, idx + n] = Q[idx + n, idx] = dt**3 / 2 * var
    Q[idx + n, idx + n] = dt**2 * var
    return Q


def predict(x: np.ndarray, P: np.ndarray, F: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prediction step: returns (x, P)."""
    x = F @ x  # x = F x
    P = F @ P @ F.T + Q  # P = F P F' + Q
    return x, P


def update(
    x: np.ndarray, P: np.ndarray, z: np.ndarray, H: np.ndarray, R: np.ndarray,
    hx: Optional[np.ndarray] = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Measurement update in Joseph form: returns (x, P, K, y, S).

    ``hx`` is the predicted measurement; None means the linear ``H x``.
    """
    z = np.asarray(z, float).reshape(-1)
    _check_update_shapes(x, P, z, H, R)
    if hx is None:
        hx = H @ x
    y = z - hx  # y = z - h(x)
    PHT = P @ H.T
    S = H @ PHT + R  # S = H P H' + R
    try:
        K = np.linalg.solve(S.T, PHT.T).T  # K = P H' S^-1  (S symmetric)
    except np.linalg.LinAlgError:
        raise ConvergenceError(f"Kalman update: residual covariance S is singular (S = {S.tolist()})") from None
    x = x + K @ y  # x = x + K y
    I_KH = np.eye(x.size) - K @ H
    P = I_KH @ P @ I_KH.T + K @ R @ K.T  # P = (I-KH)P(I-KH)' + KRK'
    return x, P, K, y, S


def observation_jacobian(
    h: Callable[[torch.Tensor], torch.Tensor], s: np.ndarray | torch.Tensor,
    dtype: torch.dtype = torch.float64, method: str = "loop",
) -> tuple[np.ndarray, np.ndarray]:
    """``(h(s), ∂h/∂s)`` as float64 numpy, (m,) and (m, D), by torch autograd.

    ``h`` maps a pose vector (D,) tensor to a moment vector (m,) tensor.
    method ``"loop"``: one forward pass, then one backward pass per output
    (m is 2 or 5, so reverse mode is the cheap direction); ``"jacrev"``:
    :func:`torch.func.jacrev` (vmapped backward passes; needs an ``h``
    without data-dependent Python control flow).
    """
    s_t = torch.as_tensor(np.asarray(s.detach().cpu() if isinstance(s, torch.Tensor) else s, dtype=float)).to(dtype)
    if method == "jacrev":
        def h_aux(v):
            out = h(v).reshape(-1)
            return out, out.detach()
        J, hx = torch.func.jacrev(h_aux, has_aux=True)(s_t)
        return hx.double().cpu().numpy(), J.detach().double().cpu().numpy()
    if method != "loop":
        raise InputError(f"jacobian method {method!r}; expected 'loop' or 'jacrev'")
    s_t = s_t.clone().requires_grad_(True)
    with torch.enable_grad():
        out = h(s_t).reshape(-1)
        rows = []
        for i in range(out.numel()):
            (g,) = torch.autograd.grad(out[i], s_t, retain_graph=i + 1 < out.numel(), allow_unused=True)
            rows.append(torch.zeros_like(s_t) if g is None else g)
    H = torch.stack(rows) if rows else torch.zeros(0, s_t.numel(), dtype=dtype)
    return out.detach().double().cpu().numpy(), H.detach().double().cpu().numpy()


def ekf_update(
    x: np.ndarray, P: np.ndarray, z: np.ndarray, h: Callable[[torch.Tensor], torch.Tensor], R: np.ndarray,
    H_pose: Optional[np.ndarray] = None, hx: Optional[np.ndarray] = None, dtype: torch.dtype = torch.float64,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """EKF update with ``h`` acting on the pose half of ``x = [s; ṡ]``: returns (x, P, K, y, S, H).

    ``H = [∂h/∂s, 0]`` (m, 2D); ``∂h/∂s`` and ``h(s)`` come from
    :func:`observation_jacobian` unless both ``H_pose`` and ``hx`` are given.
    """
    n = x.size // 2
    if H_pose is None or hx is None:
        hx, H_pose = observation_jacobian(h, x[:n], dtype=dtype)
    H = np.hstack([H_pose, np.zeros_like(H_pose)])
    x, P, K, y, S = update(x, P, z, H, R, hx=hx)
    return x, P, K, y, S, H


def velocity_update(x: np.ndarray, s_refined: np.ndarray, s_prev: np.ndarray, dt: float,
                    gain: float = 1.0, depth_gain: float = 1.0, trans: Optional[slice] = None,
                    anchor: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> np.ndarray:
    """``[s_ref; g·(s_ref − s_prev)/dt + (1 − g)·ṡ]`` (module doc): the state after refinement.

    ``trans``: the base translation's slice of the pose; with it the
    anchor's predicted rate along its viewing ray is multiplied by
    ``depth_gain`` (module doc, "Depth damping"). ``anchor``: pose (D,) →
    point (3,) [m] in the camera frame; default the base translation.
    """
    _check_dt(dt)
    n = x.size // 2
    s_refined = np.asarray(s_refined, float).reshape(-1)
    if s_refined.size != n or np.asarray(s_prev).size != n:
        raise InputError(f"velocity update: pose sizes {s_refined.size} and {np.asarray(s_prev).size}; expected {n}")
    v = gain * (s_refined - np.asarray(s_prev, float).reshape(-1)) / dt + (1 - gain) * x[n:]
    if trans is not None and depth_gain != 1.0:
        point = anchor or (lambda s: s[trans])
        a0 = np.asarray(point(s_refined), float)
        rate = (np.asarray(point(s_refined + v * dt), float) - a0) / dt
        norm = float(np.linalg.norm(a0))
        if norm > 0:
            r = a0 / norm
            v[trans] -= (1.0 - depth_gain) * float(rate @ r) * r
    return np.concatenate([s_refined, v])


def _check_dt(dt: float) -> None:
    if not np.isfinite(dt) or dt <= 0:
        raise InputError(f"time step dt = {dt!r} s; expected a positive number of seconds")


def _check_update_shapes(x, P, z, H, R) -> None:
    n, m = x.size, z.size
    if P.shape != (n, n):
        raise InputError(f"P: shape {P.shape}; expected ({n}, {n})")
    if H.shape != (m, n):
        raise InputError(f"H: shape {H.shape}; expected ({m}, {n}) for {m} measurements of {n} states")
    if R.shape != (m, m):
        raise InputError(f"R: shape {R.shape}; expected ({m}, {m})")
    if not np.all(np.isfinite(z)):
        raise InputError(f"observation z holds non-finite values {z.tolist()}")


# -- the class -----------------------------------------------------------------------
class KalmanFilter:
    """The tracker's filter on ``[s; ṡ]`` (module doc). Call order: :meth:`initialise`, then
    per frame :meth:`predict`, :meth:`update` (or skip it when nothing was
    observed), :meth:`set_refined`.

    layout: a :class:`snaketrack.tracker.state.StateLayout` (or anything with
        ``dim`` and the ``q``, ``rot``, ``trans`` slices).
    dt: frame interval [s]. config: :class:`FilterConfig`.
    anchor: pose (D,) → point (3,) [m] whose rate along its viewing ray the
        depth damping scales (module doc); default the base translation.

    Attributes (filterpy names): ``x`` (2D,), ``P``, ``F``, ``Q`` (2D, 2D);
    after an update ``H`` (m, 2D), ``R``, ``K``, ``y``, ``S``.
    """

    def __init__(self, layout, dt: float, config: FilterConfig = FilterConfig(),
                 anchor: Optional[Callable[[np.ndarray], np.ndarray]] = None):
        _check_dt(dt)
        self.layout, self.dt, self.config = layout, float(dt), config
        self.anchor = anchor
        self.n = int(layout.dim)
        self.F = cv_transition(self.n, self.dt)
        self.Q = white_accel_noise(config.accel_std(layout), self.dt)
        self.x: Optional[np.ndarray] = None
        self.P: Optional[np.ndarray] = None
        self.s_prev: Optional[np.ndarray] = None
        self.H = self.R = self.K = self.y = self.S = None

    def set_interval(self, dt: float) -> None:
        """The time to the next frame [s]: a live source skips frames while the tracker is busy, so the
        prediction and the velocity update use the real interval, not the nominal frame time."""
        _check_dt(dt)
        if dt != self.dt:
            self.dt = float(dt)
            self.F = cv_transition(self.n, self.dt)
            self.Q = white_accel_noise(self.config.accel_std(self.layout), self.dt)

    def initialise(self, s0: np.ndarray, velocity: Optional[np.ndarray] = None,
                   P0: Optional[np.ndarray] = None) -> None:
        """Start at pose ``s0`` (D,) with rate ``velocity`` (default 0) and covariance ``P0``."""
        s0 = np.asarray(s0, float).reshape(-1)
        if s0.size != self.n:
            raise InputError(f"initial pose: {s0.size} values; expected {self.n}")
        v = np.zeros(self.n) if velocity is None else np.asarray(velocity, float).reshape(-1)
        self.x = np.concatenate([s0, v])
        self.P = self.config.initial_covariance(self.layout) if P0 is None else np.array(P0, float)
        if self.P.shape != (2 * self.n, 2 * self.n):
            raise InputError(f"P0: shape {self.P.shape}; expected ({2 * self.n}, {2 * self.n})")
        self.s_prev = s0.copy()

    def _need_start(self) -> None:
        if self.x is None:
            raise StateError("KalmanFilter: call initialise(s0) before predict/update")

    @property
    def pose(self) -> np.ndarray:
        """Current pose estimate s (D,)."""
        self._need_start()
        return self.x[: self.n].copy()

    @property
    def velocity(self) -> np.ndarray:
        """Current rate estimate ṡ (D,)."""
        self._need_start()
        return self.x[self.n:].copy()

    @property
    def pose_covariance(self) -> np.ndarray:
        """(D, D) covariance of the pose half."""
        self._need_start()
        return self.P[: self.n, : self.n].copy()

    def predict(self) -> np.ndarray:
        """Constant-velocity prediction; returns the predicted pose (D,)."""
        self._need_start()
        self.x, self.P = predict(self.x, self.P, self.F, self.Q)
        return self.pose

    def update(self, z: np.ndarray, h: Callable[[torch.Tensor], torch.Tensor],
               R: Optional[np.ndarray] = None, H_pose: Optional[np.ndarray] = None,
               hx: Optional[np.ndarray] = None, dtype: torch.dtype = torch.float64) -> np.ndarray:
        """EKF update with observed moments ``z`` (m,) and the moment function ``h``; returns the pose."""
        self._need_start()
        z = np.asarray(z, float).reshape(-1)
        self.R = self.config.observation_noise(z) if R is None else np.asarray(R, float)
        self.x, self.P, self.K, self.y, self.S, self.H = ekf_update(
            self.x, self.P, z, h, self.R, H_pose=H_pose, hx=hx, dtype=dtype)
        return self.pose

    def update_linear(self, z: np.ndarray, H: np.ndarray, R: np.ndarray) -> np.ndarray:
        """Linear update ``z = H x + v`` with H (m, 2D) over the full state; returns the pose."""
        self._need_start()
        self.H, self.R = np.asarray(H, float), np.asarray(R, float)
        self.x, self.P, self.K, self.y, self.S = update(self.x, self.P, z, self.H, self.R)
        return self.pose

    def set_refined(self, s_refined: np.ndarray) -> None:
        """Velocity update after refinement (module doc); the refined pose becomes ``s_prev``."""
        self._need_start()
        self.x = velocity_update(self.x, s_refined, self.s_prev, self.dt, self.config.velocity_gain,
                                 self.config.depth_velocity_gain, self.layout.trans, self.anchor)
        self.s_prev = self.x[: self.n].copy()

    def coast(self) -> None:
        """End a frame without observation: the predicted pose becomes ``s_prev``."""
        self._need_start()
        self.s_prev = self.x[: self.n].copy()
