"""Batched forward kinematics of a snake chain, in torch (autograd through it).

Given joint angles ``q`` (B, J) [rad] and the base (link 1) pose — rotation
``R0`` (B, 3, 3) and translation ``t0`` (B, 3) [m] in some frame (world or
camera) — compute every link frame and capsule, following the conventions
of :mod:`snaketrack.models.robot`:

    R_1 = R0,  p_1 = t0
    R_{i+1} = R_i · Rot(a_1, q_1) · ... (the joint's axes in order)
    p_{i+1} = p_i + R_i · [L_i, 0, 0]

Capsule i runs from ``p_i`` to ``p_i + R_i [L_i, 0, 0]``. Works in float32
or float64 (the dtype of ``q``).

>>> import torch
>>> from snaketrack.models.robot import load_robot
>>> robot = load_robot("planar-snake-11")
>>> pose = forward_kinematics(robot, torch.zeros(1, robot.dof, dtype=torch.float64))
>>> [round(v, 9) for v in pose.ends[0, -1].tolist()]  # a straight snake along x
[1.1, 0.0, 0.0]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.models.robot import Robot
from snaketrack.models.rotations import axis_rotation


@dataclass(frozen=True)
class ChainPose:
    """Link frames and capsules of a batch of robot states.

    rotations: (B, N, 3, 3) link frame orientations (columns are the link's x, y, z axes).
    origins: (B, N, 3) link frame origins = capsule start points [m].
    ends: (B, N, 3) capsule end points [m] (head-side end of each link axis).
    radii: (N,) capsule radii [m].
    head: (B, 3) head point: centre of the head link's axis [m].
    """

    rotations: torch.Tensor
    origins: torch.Tensor
    ends: torch.Tensor
    radii: torch.Tensor
    head: torch.Tensor

    @property
    def starts(self) -> torch.Tensor:
        return self.origins

    @property
    def centres(self) -> torch.Tensor:
        """(B, N, 3) midpoints of the link axes [m]."""
        return 0.5 * (self.origins + self.ends)


def _check(robot: Robot, q: torch.Tensor, R0: Optional[torch.Tensor], t0: Optional[torch.Tensor]):
    if q.ndim != 2 or q.shape[1] != robot.dof:
        raise InputError(f"joint angles: shape {tuple(q.shape)}; expected (B, {robot.dof}) for {robot.name}")
    B = q.shape[0]
    if R0 is None:
        R0 = torch.eye(3, dtype=q.dtype, device=q.device).expand(B, 3, 3)
    if t0 is None:
        t0 = torch.zeros(B, 3, dtype=q.dtype, device=q.device)
    if R0.shape != (B, 3, 3):
        raise InputError(f"base rotation: shape {tuple(R0.shape)}; expected ({B}, 3, 3)")
    if t0.shape != (B, 3):
        raise InputError(f"base translation: shape {tuple(t0.shape)}; expected ({B}, 3)")
    return R0.to(q.dtype), t0.to(q.dtype)


def forward_kinematics(
    robot: Robot,
    q: torch.Tensor,
    base_rotation: Optional[torch.Tensor] = None,
    base_translation: Optional[torch.Tensor] = None,
) -> ChainPose:
    """Link frames and capsules for joint angles ``q`` (B, J) and base pose (see module doc)."""
    R, p = _check(robot, q, base_rotation, base_translation)
    dtype, device = q.dtype, q.device
    lengths = torch.as_tensor(robot.lengths, dtype=dtype, device=device)
    rots, origins, ends = [R], [p], []
    k = 0
    for i, joint in enumerate(robot.joints):
        end = p + R[..., :, 0] * lengths[i]
        ends.append(end)
        for axis in joint.axes:
            R = R @ axis_rotation(axis, q[:, k])
            k += 1
        p = end
        rots.append(R)
        origins.append(p)
    ends.append(p + R[..., :, 0] * lengths[-1])
    rotations = torch.stack(rots, dim=1)
    origins_t = torch.stack(origins, dim=1)
    ends_t = torch.stack(ends, dim=1)
    head = 0.5 * (origins_t[:, -1] + ends_t[:, -1])
    radii = torch.as_tensor(robot.radii, dtype=dtype, device=device)
    return ChainPose(rotations=rotations, origins=origins_t, ends=ends_t, radii=radii, head=head)


def forward_kinematics_np(
    robot: Robot,
    q: np.ndarray,
    base_rotation: Optional[np.ndarray] = None,
    base_translation: Optional[np.ndarray] = None,
) -> dict[str, np.ndarray]:
    """numpy convenience wrapper of :func:`forward_kinematics` (float64).

    Accepts one state (``q`` of shape (J,), base (3, 3) and (3,)) or a batch;
    returns a dict with ``rotations``, ``origins``, ``ends``, ``radii``,
    ``head``, ``centres`` with the batch dimension kept only if given.
    """
    q = np.asarray(q, dtype=float)
    single = q.ndim == 1
    qt = torch.as_tensor(np.atleast_2d(q), dtype=torch.float64)
    R0 = None if base_rotation is None else torch.as_tensor(np.asarray(base_rotation, float).reshape(-1, 3, 3))
    t0 = None if base_translation is None else torch.as_tensor(np.asarray(base_translation, float).reshape(-1, 3))
    with torch.no_grad():
        pose = forward_kinematics(robot, qt, R0, t0)
    out = {
        "rotations": pose.rotations.numpy(),
        "origins": pose.origins.numpy(),
        "ends": pose.ends.numpy(),
        "head": pose.head.numpy(),
        "centres": pose.centres.numpy(),
    }
    if single:
        out = {k: v[0] for k, v in out.items()}
    out["radii"] = pose.radii.numpy()
    return out


def planar_link_angles(robot: Robot, phi: np.ndarray, theta_base: float | np.ndarray = 0.0) -> np.ndarray:
    """Link angles θ (..., N) [rad] of a planar robot from joint angles φ (..., N−1).

    θ_1 = θ_base and θ_{i+1} = θ_i + φ_i (the notation of docs/conventions.md).

    >>> from snaketrack.models.robot import load_robot
    >>> planar_link_angles(load_robot("planar-snake-11"), np.full(10, 0.1))[-1].round(6)
    np.float64(1.0)
    """
    if not robot.is_planar:
        raise InputError(f"{robot.name}: link angles are defined for planar (yaw-only) robots")
    phi = np.asarray(phi, dtype=float)
    base = np.asarray(theta_base, dtype=float)[..., None]
    return np.concatenate([base, base + np.cumsum(phi, axis=-1)], axis=-1)
