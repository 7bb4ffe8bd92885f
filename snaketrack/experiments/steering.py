"""Steering a snake's head through waypoints with an online-estimated head Jacobian.

The Jacobian paper's use of Ĵ (its Fig. 3, after Yip and Camarillo): a
desired head velocity ṙ_d becomes joint velocities through the estimate's
pseudo-inverse, φ̇ = Ĵ⁺ ṙ_d. On an undulating snake the joints are already
busy with the gait, so here the pseudo-inverse resolves only a *correction*,
and only along a steering direction b (J,) of joint space: by default all
joints together (b = 1, a curvature bias on the whole body, which turns a
crawling snake towards the side it bends to), or the head joint alone
(b = e_J, the gentle setting among the posts):

    g      = (Ĵ b)⊥ṙ̄                              (2,)  [m/rad]   head velocity per unit rate along b, across ṙ̄
    e      = (ṙ_d − ṙ̄)⊥ṙ̄                         (2,)  [m/s]     desired minus smoothed head velocity, across ṙ̄
    δ̇      = k · gᵀ e / (gᵀ g + λ²)              [rad/s]        damped least squares: (Ĵ b)⁺ e
    δ     ← clip(e^(−Δt/τ) δ + δ̇ Δt, ±δ_max)    [rad]          τ: the leak back to the plain gait
    Δφ     = δ b                                 (J,)  [rad]     the joint offset added to the undulation

with ṙ_d = v · (P − p)/‖P − p‖ towards the current waypoint P from the head p
(world frame, metres), keeping only its part across ṙ̄ (the robot cannot speed up by turning, and
the along-track part would only wind δ up), ṙ̄ the head's mean velocity over about one gait
period (its displacement over that window: the undulation's own sway averages out), k the gain and λ the damping
that keeps δ̇ bounded when Ĵ b is small. Only the part of Ĵ b across the travel turns the head, so
only it enters the damped inverse (``lateral``; with the whole of Ĵ b, a large along-track part
the gait's undulation leaves in Ĵ b shrank the correction when it was most needed). With a short
leak τ the offset is in effect proportional to the turn still wanted: δ ≈ k τ (Ĵ b)⁺ e. Ĵ comes from an estimator of
:mod:`snaketrack.estimation` (the UKF by default) fed with the same states:
(φ̇_n, ṙ_n) as differences over the last ``baseline`` states (two by default: a tracked head's
frame-to-frame jitter halves), with measurement noise ``rate_noise``. The sign and size
of the turn come from Ĵ alone: nothing tells the law which way a bend turns the robot.

:class:`HeadSteering` is the whole steering law as a state machine with no I/O:
``step(state, head_world)`` takes one received state and returns the
:class:`GaitCommand` to send. What it may read is only what it is given.

>>> round(float(turning_rate(np.array([[1.0, 0, 0], [0, 2.0, 0]]), np.array([0.5, 0.0]), np.ones(3), 1.0, 0.0)), 6)
0.1
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from snaketrack.errors import InputError
from snaketrack.estimation.kf import KFConfig
from snaketrack.estimation.registry import make_estimator

STEERING_JOINTS = ("all", "head")


@dataclass(frozen=True)
class SteeringConfig:
    """The steering law's settings (module doc). The defaults are the open floor's;
    :meth:`channel` gives the gentle settings for the obstacle channel.

    speed: |ṙ_d| [m/s]; default 0.25 (about the gait's own speed on the wheels).
    gain: k (dimensionless); default 3.
    damping: λ [m/rad]; default 0.2 (truth-fed on the floor, seeds 0-11: 0.02 and 0.1 let a poorly
        learnt, small (Ĵ b)⊥ swing δ from limit to limit, and some seeds missed a waypoint).
    offset_limit: δ_max [rad] per joint; default 0.15 (a uniform 0.15 rad turns the wheeled robot on
        a circle of about 0.5 m radius).
    smoothing: the window of ṙ̄ [s], the head's displacement over it divided by its length; default 1.5
        (one gait period is 2π/ω = 1.57 s).
    tolerance: the controller takes a waypoint as reached within this distance of the head as it sees it
        [m]; default 0.08, inside the closed loop's 0.1 m (a tracked head is 2-5 cm off: in-process runs
        with 3 cm of noise on the head reached every waypoint within 0.1 m on 7 of 12 seeds when the
        controller also used 0.1, on 10 of 12 with 0.08; without noise on 12 of 12 with either).
    leak: time constant τ [s] of δ's decay back to 0 (0: none); default 0.3.
    lateral: use only the part of Ĵ b across ṙ̄ (module doc); default True.
    baseline: the estimator's (φ̇, ṙ) are differences over this many states (1: consecutive states,
        φ̇ the state's own rates when it has them); default 2.
    rate_noise: the estimator's measurement noise R on ṙ [(m/s)²] (None: its default, 1e-2); default 0.1.
        A tracked head jitters by about 2 cm from frame to frame, 0.4 m/s in a one-frame difference:
        in-process runs with that much noise on the head (and 0.03 rad on q) reached every waypoint on
        2 of 8 seeds with one-frame differences and R = 1e-2, on 10 of 12 with 2 and 0.1.
    joints: the steering direction b: ``all`` (b = 1, a curvature bias) or ``head`` (b = e_J); default all.
    estimator: registry name of the Jacobian estimator; default ``ukf``.
    """

    speed: float = 0.25
    gain: float = 3.0
    damping: float = 0.2
    offset_limit: float = 0.15
    smoothing: float = 1.5
    tolerance: float = 0.08
    leak: float = 0.3
    joints: str = "all"
    lateral: bool = True
    baseline: int = 2
    rate_noise: Optional[float] = 0.1
    estimator: str = "ukf"

    @classmethod
    def channel(cls) -> "SteeringConfig":
        """Among the posts the rows do most of the guiding and larger corrections lever the body out
        of them (measured, truth-fed: δ_max 0.2 on the head joint, 0.1 on the last three joints or
        0.02 on all ten left the channel on some of seeds 0-2; 0.1 on the head joint on none):
        k = 0.3, λ = 0.02 m/rad, δ_max = 0.1 rad on the head joint, τ = 2 s, the whole of Ĵ b, the
        estimator fed consecutive states with its own R, a waypoint reached within 0.1 m."""
        return cls(gain=0.3, damping=0.02, offset_limit=0.1, leak=2.0, joints="head", lateral=False, baseline=1,
                   rate_noise=None, tolerance=0.1)

    def __post_init__(self):
        if not (isinstance(self.baseline, int) and self.baseline >= 1):
            raise InputError(f"SteeringConfig.baseline = {self.baseline!r}; expected a positive number of states")
        if self.joints not in STEERING_JOINTS:
            raise InputError(f"SteeringConfig.joints = {self.joints!r}; expected one of {', '.join(STEERING_JOINTS)}")
        for name in ("speed", "gain", "offset_limit", "smoothing", "tolerance"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"SteeringConfig.{name} = {v!r}; expected a positive number")
        if not (math.isfinite(self.damping) and self.damping >= 0):
            raise InputError(f"SteeringConfig.damping = {self.damping!r}; expected >= 0 [m/rad]")


@dataclass(frozen=True)
class GaitCommand:
    """What the controller sends the robot: hold the joint offset ``offset`` (J,) [rad] on the undulation.

    t: the time [s] of the state it answers (simulated time). frame: that state's frame number.
    waypoint: index of the waypoint aimed at.
    """

    t: float
    frame: int
    offset: np.ndarray
    waypoint: int = 0


def turning_rate(jacobian: np.ndarray, error: np.ndarray, direction: np.ndarray, gain: float,
                 damping: float, across: Optional[np.ndarray] = None) -> float:
    """δ̇ = k gᵀ e / (gᵀ g + λ²), g = Ĵ b [rad/s]: the damped pseudo-inverse of Ĵ b applied to ``error``.

    jacobian: Ĵ (2, J) [m/rad]; error: e (2,) [m/s]; direction: b (J,); gain: k; damping: λ [m/rad].
    across: a velocity (2,) [m/s]; when given, g is only the part of Ĵ b across it.
    """
    g = np.asarray(jacobian, float) @ np.asarray(direction, float)
    if across is not None:
        g = cross_track(g, across)
    e = np.asarray(error, float)
    den = float(g @ g) + damping * damping
    if den <= 0.0:
        return 0.0
    return gain * float(g @ e) / den


def cross_track(error: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """The part of ``error`` (2,) across ``velocity`` (2,) (both [m/s]); all of it when ``velocity`` is zero.

    >>> cross_track(np.array([0.3, 0.4]), np.array([2.0, 0.0])).tolist()
    [0.0, 0.4]
    """
    e, v = np.asarray(error, float), np.asarray(velocity, float)
    n2 = float(v @ v)
    return e.copy() if n2 == 0.0 else e - (float(e @ v) / n2) * v


def desired_velocity(head: np.ndarray, target: np.ndarray, speed: float) -> np.ndarray:
    """ṙ_d (2,) [m/s]: ``speed`` towards ``target`` from ``head`` (both (2,) [m]); zero on the target.

    >>> desired_velocity(np.zeros(2), np.array([3.0, 4.0]), 0.5).tolist()
    [0.3, 0.4]
    """
    d = np.asarray(target, float) - np.asarray(head, float)
    n = float(np.hypot(*d))
    return np.zeros(2) if n == 0.0 else speed * d / n


class HeadSteering:
    """Waypoint steering from received states (module doc).

    targets: (K, 2) waypoints in the world [m]. n_joints: J. config: :class:`SteeringConfig`.
    direction: b (J,); default from ``config.joints`` (all: ones; head: e_J). estimator: a
    :class:`~snaketrack.estimation.base.JacobianEstimator`; default from ``config.estimator``.

    ``step(t, frame, q, qdot, head_world, status)`` → :class:`GaitCommand`. ``reach_times``: the time
    each waypoint was reached by the head *as the controller saw it* (None: not yet). Once every
    waypoint is reached it keeps aiming at the last one (the robot does not stop by itself).
    """

    def __init__(self, targets: Sequence[Sequence[float]], n_joints: int, config: SteeringConfig = SteeringConfig(),
                 direction: Optional[np.ndarray] = None, estimator=None):
        arr = np.asarray(targets, float)
        if arr.ndim != 2 or arr.shape[1] != 2 or len(arr) == 0 or not np.all(np.isfinite(arr)):
            raise InputError(f"waypoints: shape {arr.shape}; expected (K >= 1, 2) finite points [m]")
        self.targets, self.config, self.n_joints = arr, config, int(n_joints)
        if direction is None:
            direction = np.ones(self.n_joints) if config.joints == "all" else np.eye(self.n_joints)[-1]
        self.direction = np.asarray(direction, float)
        if self.direction.shape != (self.n_joints,):
            raise InputError(f"steering direction: shape {self.direction.shape}; expected ({self.n_joints},)")
        if estimator is None:
            kf = None if config.rate_noise is None else KFConfig(r=config.rate_noise)
            estimator = make_estimator(config.estimator, self.n_joints, kf=kf)
        self.estimator = estimator
        self.index = 0
        self.reach_times: list[Optional[float]] = [None] * len(arr)
        self.delta = 0.0
        self.rdot_bar: Optional[np.ndarray] = None
        self._track: list[tuple[float, np.ndarray]] = []  # (t, head) over the smoothing window
        self._prev: list[tuple[float, np.ndarray, np.ndarray]] = []  # (t, q, head), the last baseline + 1
        self.last_rdot = np.full(2, np.nan)

    @property
    def done(self) -> bool:
        return self.index >= len(self.targets)

    @property
    def aim(self) -> int:
        """Index of the waypoint aimed at (the last once all are reached)."""
        return min(self.index, len(self.targets) - 1)

    def command(self, t: float, frame: int) -> GaitCommand:
        return GaitCommand(t=float(t), frame=int(frame), offset=self.delta * self.direction,
                           waypoint=self.aim)

    def restart_differences(self) -> None:
        """Forget the previous state (the next one starts new differences), e.g. after the reading of
        head and tail changed: a difference across it would be a body length's jump."""
        self._prev = []
        self._track = []

    def step(self, t: float, frame: int, q: np.ndarray, qdot: Optional[np.ndarray], head: np.ndarray,
             status: str = "tracked") -> GaitCommand:
        """One received state: time t [s], joint angles q (J,) [rad], rates qdot (J,) or None,
        head (2,) in the world [m], tracking status. Returns the command to send."""
        c = self.config
        q = np.asarray(q, float)
        head = np.asarray(head, float)[:2]
        if status == "lost" or not (np.all(np.isfinite(q)) and np.all(np.isfinite(head))):
            self._prev = []  # no measurement: hold δ, restart the differences
            return self.command(t, frame)
        while not self.done and float(np.hypot(*(self.targets[self.index] - head))) <= c.tolerance:
            self.reach_times[self.index] = float(t)
            self.index += 1
        self._prev = (self._prev + [(float(t), q, head)])[-(c.baseline + 1):]
        if len(self._prev) < 2:
            return self.command(t, frame)
        prev = self._prev[0]
        dt = float(t) - prev[0]
        if not dt > 0:
            return self.command(t, frame)
        rdot = (head - prev[2]) / dt
        own_rates = c.baseline == 1 and qdot is not None and np.all(np.isfinite(qdot))
        phidot = np.asarray(qdot, float) if own_rates else (q - prev[1]) / dt
        self.last_rdot = rdot
        jac = self.estimator.step(phidot, rdot)
        if not self._track:
            self._track.append((prev[0], prev[2]))
        self._track.append((float(t), head))
        while len(self._track) > 2 and self._track[1][0] <= float(t) - c.smoothing:
            self._track.pop(0)  # keep the newest sample at or before the window's start
        t0, p0 = self._track[0]
        self.rdot_bar = (head - p0) / (float(t) - t0)
        error = cross_track(desired_velocity(head, self.targets[self.aim], c.speed) - self.rdot_bar, self.rdot_bar)
        rate = turning_rate(jac, error, self.direction, c.gain, c.damping, self.rdot_bar if c.lateral else None)
        leak = math.exp(-dt / c.leak) if c.leak > 0 else 1.0
        self.delta = float(np.clip(leak * self.delta + rate * dt, -c.offset_limit, c.offset_limit))
        return self.command(t, frame)
