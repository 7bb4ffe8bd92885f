"""Synthetic joint speeds and head velocities with a known, slowly changing Jacobian.

Used by the tests and as a stand-in for the obstacle world: it returns the
same arrays as :func:`snaketrack.sim.oal.simulate_oal` needs to give the
experiments (t, phi, phidot, head_vxy), plus the true Jacobian.

J(t) (2 × J) [m/rad] drifts smoothly: J_ij(t) = A_ij + B_ij sin(ω_ij t + c_ij)
with ω ≤ ``drift_rad_s``. Joint speeds follow a travelling wave
φ̇_k = a ω_g cos(ω_g t + (π/3) k) plus a little seeded noise so the input is
rich enough (persistently exciting) to identify all of J. A halt multiplies
φ̇ by an envelope that falls to zero over ``ramp_s`` at t_stop and rises
again at t_resume; ``halt_jitter`` [rad/s] adds white noise to φ̇ while halted
(a real robot never stands perfectly still).

>>> s = synthetic_trajectory(duration=1.0, dt=0.01, n_joints=4, seed=1)
>>> s.phidot.shape, s.head_vxy.shape, s.jacobian.shape
((100, 4), (100, 2), (100, 2, 4))
>>> bool(np.allclose(s.head_vxy, np.einsum("tij,tj->ti", s.jacobian, s.phidot)))
True
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class SyntheticTrajectory:
    """t (T,) [s]; phi, phidot (T, J) [rad, rad/s]; head_vxy (T, 2) = J(t) φ̇ [m/s];
    head_xy (T, 2) its integral [m]; jacobian (T, 2, J) the true J(t) [m/rad]."""

    t: np.ndarray
    phi: np.ndarray
    phidot: np.ndarray
    head_xy: np.ndarray
    head_vxy: np.ndarray
    jacobian: np.ndarray


def synthetic_trajectory(duration: float = 10.0, dt: float = 1 / 240, n_joints: int = 10, seed: int = 0,
                         halt: Optional[tuple[float, float]] = None, drift_rad_s: float = 0.5,
                         gait_rad_s: float = 4.0, amplitude: float = 1.0, ramp_s: float = 0.05,
                         excitation: float = 0.3, halt_jitter: float = 0.0) -> SyntheticTrajectory:
    """A trajectory whose true Jacobian is known; see the module docstring. Same seed, same arrays."""
    rng = np.random.default_rng(seed)
    T = int(round(duration / dt))
    t = np.arange(T) * dt
    J = n_joints
    A = rng.normal(0.0, 0.1, (2, J))
    B = rng.uniform(0.02, 0.08, (2, J))
    w = rng.uniform(0.2, 1.0, (2, J)) * drift_rad_s
    c = rng.uniform(0, 2 * np.pi, (2, J))
    Jt = A + B * np.sin(w * t[:, None, None] + c)
    k = np.arange(1, J + 1)
    phase = gait_rad_s * t[:, None] + (np.pi / 3) * k
    phidot = amplitude * gait_rad_s * np.cos(phase)
    # slow, smooth extra excitation per joint (two random sinusoids), so φ̇ spans all directions
    f = rng.uniform(0.5, 3.0, (2, J))
    p = rng.uniform(0, 2 * np.pi, (2, J))
    phidot = phidot + excitation * gait_rad_s * (np.sin(f[0] * t[:, None] + p[0]) + np.sin(f[1] * t[:, None] + p[1]))
    if halt is not None:
        t0, t1 = halt
        env = np.clip((t0 - t) / ramp_s, 0, 1) + np.clip((t - t1) / ramp_s, 0, 1)
        phidot = phidot * np.clip(env, 0, 1)[:, None]
        still = (t >= t0) & (t < t1)
        phidot[still] += rng.normal(0.0, halt_jitter, (int(still.sum()), J)) if halt_jitter > 0 else 0.0
    phi = np.cumsum(phidot, axis=0) * dt
    v = np.einsum("tij,tj->ti", Jt, phidot)
    xy = np.cumsum(v, axis=0) * dt
    return SyntheticTrajectory(t=t, phi=phi, phidot=phidot, head_xy=xy, head_vxy=v, jacobian=Jt)


def _write_table(path, columns, data) -> None:
    lines = [",".join(columns)]
    for row in data:
        lines.append(",".join(v if isinstance(v, str) else repr(float(v)) for v in row))
    Path(path).write_text("\n".join(lines) + "\n")


def write_states_csv(path, s: SyntheticTrajectory, with_velocities: bool = True) -> None:
    """Write ``s`` as a states.csv (θ from φ with θ_1 = 0); without velocity columns if asked."""
    J = s.phi.shape[1]
    theta = np.cumsum(np.concatenate([np.zeros((s.t.size, 1)), s.phi], axis=1), axis=1)
    cols = ["t"] + [f"phi_{j + 1}" for j in range(J)]
    parts = [s.t[:, None], s.phi]
    if with_velocities:
        cols += [f"phidot_{j + 1}" for j in range(J)]
        parts.append(s.phidot)
    cols += [f"theta_{i + 1}" for i in range(J + 1)] + ["head_x", "head_y"]
    parts += [theta, s.head_xy]
    if with_velocities:
        cols += ["head_vx", "head_vy"]
        parts.append(s.head_vxy)
    _write_table(path, cols, np.column_stack(parts))


def track_rows(s: SyntheticTrajectory, plane: str = "xy", lost=()) -> list[dict]:
    """``s`` as track.csv rows (dicts keyed by column): joint angles as q_*, the head
    path in ``plane`` of the camera frame (the third coordinate 2 m), identity base pose; rows in
    ``lost`` get status ``lost`` and NaN joint and head values."""
    T, J = s.phi.shape
    head = np.zeros((T, 3))
    idx = {"xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}[plane]
    head[:, idx[0]], head[:, idx[1]] = s.head_xy[:, 0], s.head_xy[:, 1]
    other = ({0, 1, 2} - set(idx)).pop()
    head[:, other] = 2.0
    rows = []
    for n in range(T):
        gone = n in lost
        row = {"frame": n, "t": float(s.t[n])}
        row.update({f"q_{j + 1}": np.nan if gone else float(v) for j, v in enumerate(s.phi[n])})
        row.update(base_x=0.0, base_y=0.0, base_z=2.0, base_qw=1.0, base_qx=0.0, base_qy=0.0, base_qz=0.0)
        row.update({k: np.nan if gone else float(v) for k, v in zip(("head_x", "head_y", "head_z"), head[n])})
        row.update(cov_trace=0.01, iou=0.9, status="lost" if gone else "tracked")
        rows.append(row)
    return rows


def write_track_csv(path, s: SyntheticTrajectory, plane: str = "xy", lost=()) -> None:
    """Write :func:`track_rows` as a track.csv (NaN as an empty field)."""
    rows = track_rows(s, plane, lost)

    def fmt(v):
        if isinstance(v, str):
            return v
        if isinstance(v, int):
            return str(v)
        return "" if np.isnan(v) else repr(float(v))

    lines = [",".join(rows[0])] + [",".join(fmt(v) for v in r.values()) for r in rows]
    Path(path).write_text("\n".join(lines) + "\n")
