"""Rotations: axis-angle (tangent), quaternions (w, x, y, z) and matrices.

The torch functions are batched over leading dimensions and differentiable,
float32 or float64. Quaternions are stored scalar-first, as in docs/conventions.md.
The ``*_np`` functions are their numpy counterparts for one state (float64):
inner loops on a few 3-vectors, where torch's per-call overhead dominates.

Other numpy rotation work (quaternions, turning vectors, composing) uses
scipy's :class:`~scipy.spatial.transform.Rotation`. The ``*_np`` conversions
stay written out because the tracker calls them in its per-frame loops, where
scipy's per-call cost is larger: 28 µs against 16 µs for a rotation vector to
a matrix, 158 µs against 36 µs back (``python -m timeit``, one call, a loaded
2-core machine); they agree with it to 1e-14 (tests/models/test_rotations.py).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from snaketrack.errors import InputError

_AXES = {"x": 0, "y": 1, "z": 2}


def axis_rotation(axis: str, angle: torch.Tensor) -> torch.Tensor:
    """Rotation by ``angle`` (rad, shape ``(...)``) about a coordinate axis: ``(..., 3, 3)``.

    >>> import math
    >>> R = axis_rotation("z", torch.tensor(math.pi / 2))
    >>> [round(v, 6) + 0.0 for v in (R @ torch.tensor([1.0, 0, 0])).tolist()]
    [0.0, 1.0, 0.0]
    """
    if axis not in _AXES:
        raise InputError(f"joint axis {axis!r}; expected one of 'x', 'y', 'z'")
    c, s = torch.cos(angle), torch.sin(angle)
    one, zero = torch.ones_like(angle), torch.zeros_like(angle)
    if axis == "x":
        rows = [[one, zero, zero], [zero, c, -s], [zero, s, c]]
    elif axis == "y":
        rows = [[c, zero, s], [zero, one, zero], [-s, zero, c]]
    else:
        rows = [[c, -s, zero], [s, c, zero], [zero, zero, one]]
    return torch.stack([torch.stack(r, dim=-1) for r in rows], dim=-2)


def hat(v: torch.Tensor) -> torch.Tensor:
    """Skew-symmetric matrix of ``v`` (..., 3): ``hat(v) @ w == cross(v, w)``."""
    x, y, z = v.unbind(-1)
    zero = torch.zeros_like(x)
    return torch.stack(
        [torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1), torch.stack([-y, x, zero], -1)],
        dim=-2,
    )


def axis_angle_to_matrix(v: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula: rotation vector ``v`` (..., 3) [rad] to matrix (..., 3, 3).

    Smooth at ``v = 0`` (Taylor series there), so gradients are finite.
    """
    theta2 = (v * v).sum(-1, keepdim=True).unsqueeze(-1)  # (..., 1, 1)
    small = theta2 < 1e-8
    safe = torch.where(small, torch.ones_like(theta2), theta2)
    theta = torch.sqrt(safe)
    a = torch.where(small, 1 - theta2 / 6, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta2 / 24, (1 - torch.cos(theta)) / safe)
    K = hat(v)
    eye = torch.eye(3, dtype=v.dtype, device=v.device).expand(K.shape)
    return eye + a * K + b * (K @ K)


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Unit quaternion (..., 4) as (w, x, y, z) to rotation matrix (..., 3, 3). Normalises first."""
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return torch.stack([torch.stack(r, dim=-1) for r in rows], dim=-2)


def matrix_to_quat(R: torch.Tensor) -> torch.Tensor:
    """Rotation matrix (..., 3, 3) to unit quaternion (..., 4) (w, x, y, z) with w >= 0."""
    m00, m01, m02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    m10, m11, m12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    m20, m21, m22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    t = m00 + m11 + m22
    cands = torch.stack(
        [
            torch.stack([1 + t, m21 - m12, m02 - m20, m10 - m01], -1),
            torch.stack([m21 - m12, 1 + 2 * m00 - t, m01 + m10, m02 + m20], -1),
            torch.stack([m02 - m20, m01 + m10, 1 + 2 * m11 - t, m12 + m21], -1),
            torch.stack([m10 - m01, m02 + m20, m12 + m21, 1 + 2 * m22 - t], -1),
        ],
        dim=-2,
    )  # (..., 4, 4): each row proportional to q, best-conditioned has the largest norm
    norms = cands.norm(dim=-1)
    idx = norms.argmax(dim=-1, keepdim=True)
    q = torch.gather(cands, -2, idx.unsqueeze(-1).expand(*idx.shape, 4)).squeeze(-2)
    q = q / q.norm(dim=-1, keepdim=True)
    return torch.where(q[..., :1] < 0, -q, q)


def matrix_to_axis_angle(R: torch.Tensor) -> torch.Tensor:
    """Rotation matrix (..., 3, 3) to rotation vector (..., 3) [rad], angle in [0, pi]."""
    q = matrix_to_quat(R)
    w = q[..., :1].clamp(-1, 1)
    xyz = q[..., 1:]
    s = xyz.norm(dim=-1, keepdim=True)
    angle = 2 * torch.atan2(s, w)
    scale = torch.where(s > 1e-12, angle / s.clamp_min(1e-12), 2 / w.clamp_min(1e-12))
    return xyz * scale


# -- numpy, one state -------------------------------------------------------
def axis_rotation_np(axis: str, angle: float) -> np.ndarray:
    """Rotation (3, 3) by ``angle`` [rad] about coordinate axis ``axis`` ("x", "y" or "z"); numpy
    :func:`axis_rotation`."""
    c, s = math.cos(angle), math.sin(angle)
    if axis == "x":
        return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1.0, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def axis_angle_to_matrix_np(w: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation matrix (3, 3) of a rotation vector (3,) [rad]; numpy :func:`axis_angle_to_matrix`."""
    w = np.asarray(w, float)
    th = math.sqrt(float(w @ w))
    Kx = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    if th < 1e-8:
        return np.eye(3) + Kx + 0.5 * Kx @ Kx
    return np.eye(3) + (math.sin(th) / th) * Kx + ((1 - math.cos(th)) / th ** 2) * (Kx @ Kx)


def perpendicular_np(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors (3,) ``e1, e2`` perpendicular to ``n`` (3,) and to each other, with ``e1 × e2`` along
    ``n`` (a right-handed frame ``[e1 e2 n̂]``).

    >>> e1, e2 = perpendicular_np(np.array([0.0, 0.0, 2.0]))
    >>> e1.tolist(), e2.tolist()
    ([0.0, 1.0, 0.0], [-1.0, 0.0, 0.0])
    """
    n = np.asarray(n, float) / np.linalg.norm(n)
    e1 = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(n, e1)


def matrix_to_axis_angle_np(R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) [rad], angle in [0, π], of a rotation matrix (3, 3); numpy
    :func:`matrix_to_axis_angle`, through the quaternion of the best-conditioned of Shepperd's four forms."""
    m = np.asarray(R, float)
    t = m[0, 0] + m[1, 1] + m[2, 2]
    cands = np.array([
        [1 + t, m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]],
        [m[2, 1] - m[1, 2], 1 + 2 * m[0, 0] - t, m[0, 1] + m[1, 0], m[0, 2] + m[2, 0]],
        [m[0, 2] - m[2, 0], m[0, 1] + m[1, 0], 1 + 2 * m[1, 1] - t, m[1, 2] + m[2, 1]],
        [m[1, 0] - m[0, 1], m[0, 2] + m[2, 0], m[1, 2] + m[2, 1], 1 + 2 * m[2, 2] - t],
    ])  # each row proportional to the quaternion (w, x, y, z)
    norms = np.sqrt((cands * cands).sum(1))
    q = cands[int(np.argmax(norms))]
    q = q / math.sqrt(float(q @ q))
    if q[0] < 0:
        q = -q
    w = min(float(q[0]), 1.0)
    s = math.sqrt(float(q[1:] @ q[1:]))
    scale = 2.0 * math.atan2(s, w) / s if s > 1e-12 else 2.0 / max(w, 1e-12)
    return q[1:] * scale
