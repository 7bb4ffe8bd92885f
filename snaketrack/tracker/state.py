"""The tracked state: its record (:class:`TrackState`) and its vector layout (:class:`StateLayout`).

Pose vector (what refinement and the filter work on), ``D = J + 6`` entries::

    x = [ q_1 … q_J,   w_x, w_y, w_z,   t_x, t_y, t_z ]
          joint angles  base rotation    base translation
          [rad]         vector [rad]     [m], camera frame

- ``q`` in the robot file's joint order (:attr:`Robot.joint_names`).
- ``w`` is the rotation vector (axis × angle) of the base (link 1) frame in
  the camera frame: ``R0 = exp(hat(w))``. It is a minimal (tangent)
  parameterisation, kept continuous from frame to frame by
  :func:`unwrap_rotvec` (|w| may exceed π to avoid a jump).
- ``t`` is the origin of link 1 (tail end of its axis) in the camera frame
  (OpenCV: x right, y down, z forward).

The filter state is ``[x, ẋ]`` (``2D`` entries): the pose vector and its rate
(rad/s, rad/s, m/s). :meth:`StateLayout.to_fk` turns pose vectors into the
inputs of :func:`snaketrack.models.kinematics.forward_kinematics`, batched
and differentiable.

>>> import numpy as np, torch
>>> from snaketrack.models.robot import load_robot
>>> lay = StateLayout.for_robot(load_robot("planar-snake-11"))
>>> lay.dim, lay.q, lay.rot, lay.trans
(16, slice(0, 10, None), slice(10, 13, None), slice(13, 16, None))
>>> x = lay.pack(np.zeros(10), np.eye(3), np.array([0.0, 0.0, 1.5]))
>>> q, R0, t0 = lay.to_fk(torch.as_tensor(x)[None])
>>> t0.tolist()
[[0.0, 0.0, 1.5]]
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.models.robot import Robot
from snaketrack.models.rotations import (
    axis_angle_to_matrix,
    axis_angle_to_matrix_np,
    matrix_to_axis_angle,
    matrix_to_quat,
    quat_to_matrix,
)

STATUSES = ("tracked", "coasting", "lost")


@dataclass(frozen=True)
class StateLayout:
    """Where each quantity sits in a pose vector of length :attr:`dim` = J + 6."""

    n_joints: int
    joint_names: tuple[str, ...] = ()

    @classmethod
    def for_robot(cls, robot: Robot) -> "StateLayout":
        return cls(n_joints=robot.dof, joint_names=robot.joint_names)

    @property
    def dim(self) -> int:
        """Length D of the pose vector."""
        return self.n_joints + 6

    @property
    def filter_dim(self) -> int:
        """Length 2D of the filter state ``[x, ẋ]``."""
        return 2 * self.dim

    @property
    def q(self) -> slice:
        return slice(0, self.n_joints)

    @property
    def rot(self) -> slice:
        return slice(self.n_joints, self.n_joints + 3)

    @property
    def trans(self) -> slice:
        return slice(self.n_joints + 3, self.n_joints + 6)

    def names(self) -> list[str]:
        """Names of the pose-vector entries (joint names, ``w_x…``, ``t_x…``)."""
        jn = list(self.joint_names) or [f"q_{i + 1}" for i in range(self.n_joints)]
        return jn + ["w_x", "w_y", "w_z", "t_x", "t_y", "t_z"]

    def check(self, x: torch.Tensor | np.ndarray, what: str = "pose vector") -> None:
        if x.shape[-1] != self.dim:
            raise InputError(f"{what}: last dimension {x.shape[-1]}; expected {self.dim} (J + 6)")

    def to_fk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Pose vectors (B, D) to FK inputs ``q`` (B, J), ``R0`` (B, 3, 3), ``t0`` (B, 3). Differentiable."""
        self.check(x)
        return x[..., self.q], axis_angle_to_matrix(x[..., self.rot]), x[..., self.trans]

    def pack(self, q: np.ndarray, R0: np.ndarray, t0: np.ndarray,
             reference: Optional[np.ndarray] = None) -> np.ndarray:
        """One pose vector (D,) from joint angles (J,), rotation (3, 3) and translation (3,).

        ``reference``: a previous pose vector; the rotation vector is chosen
        continuous with it (see :func:`unwrap_rotvec`).
        """
        q = np.asarray(q, float).reshape(-1)
        if q.shape[0] != self.n_joints:
            raise InputError(f"joint angles: {q.shape[0]} values; expected {self.n_joints}")
        w = matrix_to_axis_angle(torch.as_tensor(np.asarray(R0, float))).numpy()
        if reference is not None:
            w = unwrap_rotvec(w, np.asarray(reference)[self.rot])
        return np.concatenate([q, w, np.asarray(t0, float).reshape(3)])

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q (J,), R0 (3, 3), t0 (3,)) of one pose vector (D,)."""
        x = np.asarray(x, float)
        self.check(x)
        return x[self.q].copy(), axis_angle_to_matrix_np(x[self.rot]), x[self.trans].copy()

    def from_quat(self, q: np.ndarray, quat_wxyz: np.ndarray, t0: np.ndarray,
                  reference: Optional[np.ndarray] = None) -> np.ndarray:
        """Pose vector from joint angles, base quaternion (w, x, y, z) and translation."""
        R = quat_to_matrix(torch.as_tensor(np.asarray(quat_wxyz, float))).numpy()
        return self.pack(q, R, t0, reference)


def unwrap_rotvec(w: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The rotation vector equivalent to ``w`` (same rotation) closest to ``reference``.

    Rotation vectors ``w + 2πk ŵ`` (k integer) give the same rotation; this
    picks the one nearest the reference so a filter sees no jump at |w| = π.

    >>> import numpy as np
    >>> unwrap_rotvec(np.array([0.0, 0.0, -3.1]), np.array([0.0, 0.0, 3.1])).round(4).tolist()
    [0.0, 0.0, 3.1832]
    """
    w = np.asarray(w, float)
    th = np.linalg.norm(w)
    if th < 1e-9:
        axis = np.asarray(reference, float)
        n = np.linalg.norm(axis)
        if n < 1e-9:
            return w
        axis = axis / n
    else:
        axis = w / th
    cands = [w + 2 * np.pi * k * axis for k in (-2, -1, 0, 1, 2)]
    return min(cands, key=lambda c: float(np.linalg.norm(c - reference)))


@dataclass(frozen=True)
class TrackState:
    """One frame's tracking result (camera frame, SI units).

    frame: frame index; t: time [s].
    q: (J,) joint angles [rad], robot file order.
    base_quat: (4,) base (link 1) orientation in the camera frame, (w, x, y, z), w ≥ 0.
    base_position: (3,) link 1 origin in the camera frame [m].
    head: (3,) head point (centre of the head link's axis) in the camera frame [m].
    cov_trace: trace of the pose covariance (mixed units rad² and m²; a
        confidence figure, larger is less certain).
    iou: IoU of the rendered silhouette against the observed mask (NaN when
        nothing was observed).
    status: ``'tracked'``, ``'coasting'`` (no usable mask; the prediction is
        reported) or ``'lost'`` (coasting too long; waiting to re-acquire).
    velocity: (D,) rate of the pose vector (see module doc), or None.
    loss: final refinement loss (per pixel), NaN when not refined.
    """

    frame: int
    t: float
    q: np.ndarray
    base_quat: np.ndarray
    base_position: np.ndarray
    head: np.ndarray
    cov_trace: float = float("nan")
    iou: float = float("nan")
    status: str = "tracked"
    velocity: Optional[np.ndarray] = field(default=None, compare=False)
    loss: float = float("nan")

    def __post_init__(self):
        if self.status not in STATUSES:
            raise InputError(f"TrackState.status = {self.status!r}; expected one of {', '.join(STATUSES)}")

    @property
    def base_rotation(self) -> np.ndarray:
        """(3, 3) base rotation matrix (columns: link 1's x, y, z axes in the camera frame)."""
        return quat_to_matrix(torch.as_tensor(np.asarray(self.base_quat, float))).numpy()

    def pose_vector(self, layout: StateLayout, reference: Optional[np.ndarray] = None) -> np.ndarray:
        """The pose vector (D,) of this state (see module doc)."""
        return layout.from_quat(self.q, self.base_quat, self.base_position, reference)

    @classmethod
    def from_pose_vector(cls, layout: StateLayout, x: np.ndarray, head: np.ndarray, frame: int, t: float,
                         **kw) -> "TrackState":
        """Build a record from a pose vector (D,) and the head point (3,) [m]."""
        q, R, t0 = layout.unpack(x)
        quat = matrix_to_quat(torch.as_tensor(R)).numpy()
        return cls(frame=int(frame), t=float(t), q=q, base_quat=quat, base_position=t0,
                   head=np.asarray(head, float).reshape(3), **kw)

    @classmethod
    def before_start(cls, n_joints: int, frame: int, t: float) -> "TrackState":
        """A frame before the track could start (the robot not yet seen): ``lost``, every pose entry NaN."""
        nan = float("nan")
        return cls(frame=int(frame), t=float(t), q=np.full(n_joints, nan), base_quat=np.full(4, nan),
                   base_position=np.full(3, nan), head=np.full(3, nan), status="lost")

    @property
    def has_pose(self) -> bool:
        """Whether the state holds a pose (False only :meth:`before_start`)."""
        return bool(np.all(np.isfinite(self.base_position)))

    def with_status(self, status: str, **kw) -> "TrackState":
        return replace(self, status=status, **kw)

    def as_row(self) -> dict:
        """The ``track.csv`` columns as a dict (``q_1…q_J``, ``base_*``, ``head_*``, …)."""
        row: dict = {"frame": self.frame, "t": self.t}
        for i, v in enumerate(np.asarray(self.q).tolist()):
            row[f"q_{i + 1}"] = v
        for k, v in zip(("base_x", "base_y", "base_z"), np.asarray(self.base_position).tolist()):
            row[k] = v
        for k, v in zip(("base_qw", "base_qx", "base_qy", "base_qz"), np.asarray(self.base_quat).tolist()):
            row[k] = v
        for k, v in zip(("head_x", "head_y", "head_z"), np.asarray(self.head).tolist()):
            row[k] = v
        row.update(cov_trace=self.cov_trace, iou=self.iou, status=self.status)
        return row
