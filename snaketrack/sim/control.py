"""Joint controllers and point-of-sight guidance of the planar snake (head-tracking paper, eqs. 32–37).

All joint angles here are in the paper's convention ``φ_i = θ_i − θ_{i+1}``
(Sibilska-Mroziewicz et al.; see :mod:`snaketrack.models.planar_dynamics`);
the simulator converts to snaketrack's ``φ_i = θ_{i+1} − θ_i``
(docs/conventions.md) when it writes outputs. The joint limit ±40° is
symmetric, so the bookkeeping is the same in both conventions.

Pieces, each a plain function:

- :func:`joint_reference`: lateral-undulation gait, eq. 33,
  ``φ_ref,i = α sin(ω t + (i−1) δ) + φ_o``.
- :func:`heading_offset`: eqs. 34–36, ``φ_o = k_θ (θ̄ − θ̄_ref)`` clamped to
  ``±offset_limit``. The paper prints ``θ̄_ref = −tan⁻¹(d_y/d_x)``, which is
  Liljebäck's line-of-sight law written for a cross-track error (``d_y = −y``);
  with ``d = P − p`` (eq. 31) pointing at the target the same law is
  ``θ̄_ref = atan2(d_y, d_x)``, which is what the authors' MATLAB code computes
  (it adds ``−atan2(d_y, d_x)`` to ``θ̄``) and what we use (with the printed
  sign the robot turns away from the targets). ``θ̄ − θ̄_ref`` is wrapped to
  [−π, π] (``math.remainder``) unless ``wrap=False`` (the authors' code does
  not wrap).
- :func:`single_joint_control`: SJC, eq. 32, ``u = k_p(φ_ref − φ) − k_d φ̇``.
- :func:`couple`: CC, eq. 37, ``u_mod,1 = u_1``, ``u_mod,i = u_i + ½ u_{i−1}``.
- :func:`apply_broken`: a broken joint receives no command (its output is 0).
  The controller does not know which joints are broken (the paper: "the
  information about a fault does not have to be available to the
  controller"), so coupling uses the neighbour's *computed* signal and the
  fault zeroes the command at the actuator afterwards.
- :class:`JointController`: the above chained; output ``u`` is the commanded
  joint acceleration ``φ̈`` (partial feedback linearisation, as in the
  authors' MATLAB code).
- :class:`PointOfSight`: targets in turn, each reached within a tolerance.
- :func:`joint_limit_stats`: time beyond ±40° (the red lines of Figs. 15–18).

>>> c = JointController(ControllerConfig(coupling="cc", broken_joints=(2,)), n_joints=3)
>>> c.command(0.0, np.zeros(3), np.zeros(3), phi_offset=0.0).round(4).tolist()
[0.0, 0.0, 0.3896]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from snaketrack.errors import InputError, StateError

__all__ = [
    "GaitParams",
    "ControllerConfig",
    "joint_reference",
    "heading_offset",
    "single_joint_control",
    "couple",
    "apply_broken",
    "JointController",
    "PointOfSight",
    "JointLimitStats",
    "joint_limit_stats",
    "wrap_angle",
]

DEG = np.pi / 180.0
PAPER_TARGETS = ((1.0, 1.0), (3.0, 1.0), (4.0, 0.0), (6.0, -1.0), (8.0, -1.0))


@dataclass(frozen=True)
class GaitParams:
    """Lateral undulation gait (eq. 33): amplitude α [rad], frequency ω [rad/s], phase shift δ [rad]."""

    amplitude_rad: float = 20 * DEG
    frequency_rad_s: float = 50 * DEG
    phase_shift_rad: float = 30 * DEG


@dataclass(frozen=True)
class ControllerConfig:
    """Joint controller, heading law and fault settings (defaults: the authors' MATLAB code).

    kp [1/s²], kd [1/s]: SJC gains of eq. 32 (output is a joint acceleration).
    k_theta: heading gain of eq. 34 (dimensionless).
    offset_limit_rad: clamp on |φ_o| (40°).
    coupling: ``"sjc"`` (eq. 32 alone) or ``"cc"`` (eq. 37).
    coupling_gain: the ½ of eq. 37.
    broken_joints: 1-based joint numbers (1 = between links 1 and 2, tail end)
        that receive no command.
    joint_limit_rad: mechanical limit used for the bookkeeping (40°).
    """

    kp: float = 1.0
    kd: float = 2.0
    k_theta: float = 1.0
    offset_limit_rad: float = 40 * DEG
    coupling: str = "sjc"
    coupling_gain: float = 0.5
    broken_joints: tuple[int, ...] = ()
    joint_limit_rad: float = 40 * DEG
    gait: GaitParams = field(default_factory=GaitParams)

    def __post_init__(self) -> None:
        if self.coupling not in ("sjc", "cc"):
            raise InputError(f"ControllerConfig.coupling = {self.coupling!r}; expected 'sjc' or 'cc'")
        if self.offset_limit_rad <= 0:
            raise InputError(f"ControllerConfig.offset_limit_rad = {self.offset_limit_rad!r}; expected > 0")


def wrap_angle(a: np.ndarray | float) -> np.ndarray | float:
    """Wrap angles [rad] to (−π, π]."""
    w = np.mod(np.asarray(a, dtype=float) + np.pi, 2 * np.pi) - np.pi
    w = np.where(w == -np.pi, np.pi, w)
    return float(w) if np.ndim(w) == 0 else w


def joint_reference(t: float, n_joints: int, gait: GaitParams, phi_offset: float = 0.0) -> np.ndarray:
    """Eq. 33: ``φ_ref,i = α sin(ω t + (i−1) δ) + φ_o`` for i = 1..n_joints, shape (n_joints,) [rad].

    >>> joint_reference(0.0, 2, GaitParams(1.0, 1.0, np.pi / 2)).round(6).tolist()
    [0.0, 1.0]
    """
    i = np.arange(n_joints)
    return gait.amplitude_rad * np.sin(gait.frequency_rad_s * t + i * gait.phase_shift_rad) + phi_offset


def heading_offset(
    theta: np.ndarray, point: np.ndarray, target: np.ndarray, k_theta: float, limit_rad: float, wrap: bool = True
) -> float:
    """Eqs. 34–36: joint offset φ_o [rad] that steers the tracked point to the target.

    theta: (N,) link angles [rad]; point, target: (2,) [m]. ``θ̄`` is the mean
    link angle (eq. 35), ``θ̄_ref = atan2(d_y, d_x)`` (module docstring),
    ``φ_o = clip(k_θ · wrap(θ̄ − θ̄_ref), ±limit)``; with ``wrap=False`` the
    difference is used as it is (the authors' code), which differs only when
    it exceeds π in magnitude.

    >>> round(heading_offset(np.zeros(3), np.zeros(2), np.array([1.0, 1.0]), 1.0, 0.7), 6)
    -0.7
    >>> round(heading_offset(np.zeros(3), np.zeros(2), np.array([1.0, -0.1]), 1.0, 0.7), 6)
    0.099669
    """
    dx = float(target[0]) - float(point[0])  # eq. 31
    dy = float(target[1]) - float(point[1])
    theta_ref = math.atan2(dy, dx)  # eq. 36 (sign: see module docstring)
    theta_bar = float(np.add.reduce(theta)) / len(theta)  # eq. 35
    err = theta_bar - theta_ref
    if wrap:
        err = math.remainder(err, 2 * math.pi)  # wrapped to [−π, π]
    return min(max(k_theta * err, -limit_rad), limit_rad)


def single_joint_control(phi: np.ndarray, phi_dot: np.ndarray, phi_ref: np.ndarray, kp: float, kd: float) -> np.ndarray:
    """SJC, eq. 32: ``u = k_p (φ_ref − φ) − k_d φ̇`` (..., n) — a commanded φ̈ [rad/s²]."""
    return kp * (np.asarray(phi_ref) - np.asarray(phi)) - kd * np.asarray(phi_dot)


def couple(u: np.ndarray, gain: float = 0.5) -> np.ndarray:
    """CC, eq. 37: ``u_mod,1 = u_1``, ``u_mod,i = u_i + gain · u_{i−1}`` (i ≥ 2).

    >>> couple(np.array([1.0, 2.0, 4.0])).tolist()
    [1.0, 2.5, 5.0]
    """
    u = np.asarray(u, dtype=float)
    out = u.copy()
    out[..., 1:] += gain * u[..., :-1]
    return out


def _broken_mask(broken: Sequence[int], n_joints: int) -> np.ndarray:
    mask = np.zeros(n_joints, dtype=bool)
    for j in broken:
        if int(j) != j or not (1 <= j <= n_joints):
            raise InputError(f"broken joint {j!r}; expected an integer joint number in 1..{n_joints}")
        mask[int(j) - 1] = True
    return mask


def apply_broken(u: np.ndarray, broken: Sequence[int]) -> np.ndarray:
    """Zero the commands of broken joints (1-based numbers); returns a copy.

    >>> apply_broken(np.array([1.0, 2.0, 3.0]), (2,)).tolist()
    [1.0, 0.0, 3.0]
    """
    u = np.array(u, dtype=float)
    u[..., _broken_mask(broken, u.shape[-1])] = 0.0
    return u


class JointController:
    """Eq. 33 reference → SJC (32) → optional CC (37) → broken joints zeroed.

    ``command(t, φ, φ̇, φ_o)`` returns the commanded joint accelerations
    (n_joints,) [rad/s²] in the paper's sign convention.
    """

    def __init__(self, config: ControllerConfig, n_joints: int):
        self.config = config
        self.n_joints = n_joints
        self.broken_mask = _broken_mask(config.broken_joints, n_joints)

    def command(self, t: float, phi: np.ndarray, phi_dot: np.ndarray, phi_offset: float) -> np.ndarray:
        cfg = self.config
        ref = joint_reference(t, self.n_joints, cfg.gait, phi_offset)
        u = single_joint_control(phi, phi_dot, ref, cfg.kp, cfg.kd)
        if cfg.coupling == "cc":
            u = couple(u, cfg.coupling_gain)
        u[self.broken_mask] = 0.0
        return u


class PointOfSight:
    """Point-of-sight guidance: aim at each target in turn (seed §3.1).

    targets: (K, 2) [m]; tolerance_m: a target counts as reached when the
    tracked point comes within this distance. :meth:`reached` records the
    time and moves on to the next target.

    >>> g = PointOfSight([(1.0, 0.0), (2.0, 0.0)], tolerance_m=0.05)
    >>> g.check(0.0, np.array([0.97, 0.0])), g.index, g.reach_times
    (True, 1, [0.0, None])
    """

    def __init__(self, targets: Sequence[Sequence[float]], tolerance_m: float = 0.05):
        arr = np.asarray(targets, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != 2 or len(arr) == 0:
            raise InputError(f"targets has shape {arr.shape}; expected (K >= 1, 2) points in metres")
        if not tolerance_m > 0:
            raise InputError(f"tolerance_m = {tolerance_m!r}; expected a positive distance in metres")
        self.targets = arr
        self.tolerance_m = float(tolerance_m)
        self.index = 0
        self.reach_times: list[Optional[float]] = [None] * len(arr)

    @property
    def done(self) -> bool:
        return self.index >= len(self.targets)

    @property
    def target(self) -> np.ndarray:
        if self.done:
            raise StateError("PointOfSight.target: every target is already reached")
        return self.targets[self.index]

    def distance(self, point: np.ndarray) -> float:
        """Distance [m] from the tracked point to the current target."""
        return float(np.hypot(*(self.target - np.asarray(point, dtype=float))))

    def reached(self, t: float) -> None:
        """Record the current target as reached at time t [s] and switch to the next."""
        if self.done:
            raise StateError("PointOfSight.reached: every target is already reached")
        self.reach_times[self.index] = float(t)
        self.index += 1

    def check(self, t: float, point: np.ndarray) -> bool:
        """Switch target if ``point`` is within tolerance; returns whether it switched."""
        if not self.done and self.distance(point) <= self.tolerance_m:
            self.reached(t)
            return True
        return False


@dataclass(frozen=True)
class JointLimitStats:
    """Time spent beyond the joint limit (uniformly sampled trajectories).

    beyond_limit_fraction: fraction of samples with any |φ_i| > limit.
    per_joint_fraction: (n_joints,) fraction per joint.
    max_abs_rad: (n_joints,) largest |φ_i| [rad].
    """

    beyond_limit_fraction: float
    per_joint_fraction: tuple[float, ...]
    max_abs_rad: tuple[float, ...]


def joint_limit_stats(phi: np.ndarray, limit_rad: float = 40 * DEG) -> JointLimitStats:
    """Bookkeeping of the ±limit lines; ``phi`` is (T, n_joints) sampled at a uniform step.

    >>> s = joint_limit_stats(np.array([[0.0, 0.8], [0.1, 0.1]]), 0.7)
    >>> s.beyond_limit_fraction, s.per_joint_fraction
    (0.5, (0.0, 0.5))
    """
    phi = np.asarray(phi, dtype=float)
    if phi.ndim != 2 or len(phi) == 0:
        raise InputError(f"phi has shape {phi.shape}; expected (T >= 1, n_joints)")
    over = np.abs(phi) > limit_rad
    return JointLimitStats(
        beyond_limit_fraction=float(over.any(axis=1).mean()),
        per_joint_fraction=tuple(float(v) for v in over.mean(axis=0)),
        max_abs_rad=tuple(float(v) for v in np.abs(phi).max(axis=0)),
    )
