"""Lateral-undulation gait references φ_d(t) and their rates, with ramp and halt.

The Jacobian paper's gait (its eq. 9) for joint k = 1..J:

    φ_d,k(t) = A · sin(ω t + δ k),   A = π/3 rad, ω = 4 rad/s, δ = π/3 rad.

**Wave direction.** The paper prints ``−(π/3)·k``; with snaketrack's
numbering (links and joints counted from the *tail*, link N is the head;
docs/conventions.md) the wave must travel from head to tail for the snake to
push forward off the obstacles, and that needs ``+δ k`` with δ > 0: the phase
of joint k is ωt + δk, so a crest (constant phase) moves to smaller k, i.e.
towards the tail. Flipping the sign drives the snake backwards. ``phase_lag``
is therefore +π/3 by default.

**Gait time.** References are a function of a *gait time* τ(t), not of t:

- before a halt τ = t;
- during a halt ``[t_stop, t_resume)`` τ = t_stop and τ' = 0: the references
  freeze at the shape reached at t_stop and their rates are zero, so the
  joints stop quickly under the PD law (the paper's experiment 2);
- after the halt, ``resume="reference"``: τ = t, so the references jump back
  to φ_d(t) as if the halt had never happened (a step in the references at
  t_resume, which gives estimators a visible transient of about 0.3 s);
  ``resume="phase"``: τ = t − (t_resume − t_stop), the wave continues from the
  frozen phase with no jump (continuous references, no transient).

**Amplitude ramp.** The amplitude is multiplied by a smoothstep
s(τ) = 3u² − 2u³, u = clip(τ / ramp_time, 0, 1) (C¹, so the reference rate is
continuous); ``ramp_time = 0`` disables it and starts on eq. 9 directly (a
step at t = 0 from the straight start).

**2-DOF robots** (yaw then pitch per joint, e.g. ``arcsnake-4``): the wave
above drives the yaw axes (joint index k = 1..number of joints); the pitch
axes get an optional small wave ``pitch_amplitude · sin(ω τ + δ k + π/2)``
(zero by default); roll axes stay at zero. References are clipped to the
robot file's joint limits times ``limit_margin`` (the clipped reference's
rate is set to zero where it is clipped).

Units: rad, rad/s, s.

>>> import numpy as np
>>> from snaketrack.models.robot import load_robot
>>> g = Gait(load_robot("planar-snake-11"), GaitParams(ramp_time=0.0))
>>> phi, phidot = g.reference(np.array([0.0]))
>>> bool(np.allclose(phi[0, 0], np.pi / 3 * np.sin(np.pi / 3)))
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.models.robot import Robot

RESUME_MODES = ("reference", "phase")


@dataclass(frozen=True)
class GaitParams:
    """Parameters of the undulation gait (see module doc).

    amplitude: A [rad] of the yaw wave (π/3, the paper's).
    omega: ω [rad/s] temporal frequency (4, the paper's).
    phase_lag: δ [rad] between consecutive joints; + for tail-to-head numbering.
    ramp_time: [s] of gait time over which the amplitude rises from 0 (0 = none).
    pitch_amplitude: [rad] of the pitch wave on 2-DOF robots (0 = none).
    halt: (t_stop, t_resume) [s] or None.
    resume: ``"reference"`` or ``"phase"`` (how the gait resumes after a halt).
    limit_margin: fraction of the joint limits the references are clipped to.
    """

    amplitude: float = math.pi / 3
    omega: float = 4.0
    phase_lag: float = math.pi / 3
    ramp_time: float = 1.0
    pitch_amplitude: float = 0.0
    halt: Optional[tuple[float, float]] = None
    resume: str = "reference"
    limit_margin: float = 0.95

    def __post_init__(self) -> None:
        for name in ("amplitude", "omega", "ramp_time", "pitch_amplitude"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"gait {name} = {v!r}; expected a finite non-negative number")
        if not math.isfinite(self.phase_lag):
            raise InputError(f"gait phase_lag = {self.phase_lag!r}; expected a finite number [rad]")
        if self.resume not in RESUME_MODES:
            raise InputError(f"gait resume = {self.resume!r}; expected one of {', '.join(RESUME_MODES)}")
        if not (0 < self.limit_margin <= 1):
            raise InputError(f"gait limit_margin = {self.limit_margin!r}; expected a number in (0, 1]")
        if self.halt is not None:
            h = tuple(self.halt)
            if len(h) != 2 or not all(math.isfinite(float(x)) for x in h) or not (0 <= h[0] < h[1]):
                raise InputError(f"gait halt = {self.halt!r}; "
                                 "expected (t_stop, t_resume) with 0 <= t_stop < t_resume [s]")


def gait_time(t: np.ndarray, halt: Optional[tuple[float, float]], resume: str) -> tuple[np.ndarray, np.ndarray]:
    """Gait time τ(t) and its rate τ'(t) (both shaped like ``t``) for a halt and resume mode.

    >>> tau, rate = gait_time(np.array([4.0, 6.0, 8.0]), (5.0, 7.0), "phase")
    >>> tau.tolist(), rate.tolist()
    ([4.0, 5.0, 6.0], [1.0, 0.0, 1.0])
    >>> gait_time(np.array([8.0]), (5.0, 7.0), "reference")[0].tolist()
    [8.0]
    """
    t = np.asarray(t, dtype=float)
    tau = t.copy()
    rate = np.ones_like(t)
    if halt is None:
        return tau, rate
    t0, t1 = float(halt[0]), float(halt[1])
    during = (t >= t0) & (t < t1)
    tau[during] = t0
    rate[during] = 0.0
    if resume == "phase":
        after = t >= t1
        tau[after] = t[after] - (t1 - t0)
    elif resume != "reference":
        raise InputError(f"resume = {resume!r}; expected one of {', '.join(RESUME_MODES)}")
    return tau, rate


def _smoothstep(tau: np.ndarray, T: float) -> tuple[np.ndarray, np.ndarray]:
    """s(τ) = 3u² − 2u³ with u = clip(τ/T) and ds/dτ; s ≡ 1 when T = 0."""
    if T <= 0:
        return np.ones_like(tau), np.zeros_like(tau)
    u = np.clip(tau / T, 0.0, 1.0)
    s = u * u * (3.0 - 2.0 * u)
    inside = (tau > 0) & (tau < T)
    ds = np.where(inside, 6.0 * u * (1.0 - u) / T, 0.0)
    return s, ds


class Gait:
    """Joint references for one robot: ``reference(t) -> (φ_d (T, J), φ̇_d (T, J))``.

    Joint coordinates follow the robot file's order (``robot.joint_names``).
    """

    def __init__(self, robot: Robot, params: GaitParams = GaitParams()):
        self.robot = robot
        self.params = params
        amp, phase0 = [], []
        for k, joint in enumerate(robot.joints, start=1):
            for axis in joint.axes:
                if axis == "z":
                    amp.append(params.amplitude)
                    phase0.append(params.phase_lag * k)
                elif axis == "y":
                    amp.append(params.pitch_amplitude)
                    phase0.append(params.phase_lag * k + math.pi / 2)
                else:
                    amp.append(0.0)
                    phase0.append(0.0)
        self.amp = np.array(amp)
        self.phase0 = np.array(phase0)
        self.lower = robot.lower * params.limit_margin
        self.upper = robot.upper * params.limit_margin

    def reference(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """References at times ``t`` (T,) [s]: φ_d (T, J) [rad] and φ̇_d = dφ_d/dt (T, J) [rad/s]."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if t.ndim != 1:
            raise InputError(f"gait times: shape {t.shape}; expected (T,)")
        p = self.params
        tau, rate = gait_time(t, p.halt, p.resume)
        s, ds = _smoothstep(tau, p.ramp_time)
        arg = p.omega * tau[:, None] + self.phase0[None, :]
        sin, cos = np.sin(arg), np.cos(arg)
        phi = s[:, None] * self.amp * sin
        dphi_dtau = ds[:, None] * self.amp * sin + s[:, None] * self.amp * p.omega * cos
        phidot = dphi_dtau * rate[:, None]
        clipped = (phi < self.lower) | (phi > self.upper)
        phi = np.clip(phi, self.lower, self.upper)
        phidot = np.where(clipped, 0.0, phidot)
        return phi, phidot
