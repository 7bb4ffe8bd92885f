"""The kinematic chain's end points and their Jacobian as one compiled loop (numba).

The same quantities as :func:`snaketrack.models.chain.point_jacobian` (its numpy implementation is the
reference; tests/models/test_chain_kernel.py compares the two): the primitives' end points of one state
and their derivatives with respect to ``[q (J), δ (3), t (3)]``, in float64, without the few hundred
small numpy operations (a 3×3 product per joint axis, a cross product per point and axis) whose per-call
overhead, not their arithmetic, is what the reference costs.

:func:`available` says whether numba is importable; :class:`CompiledChain` is then what refinement uses.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from snaketrack.jit import available, jit  # noqa: F401  (available: this module's kernels can run)
from snaketrack.models.robot import Robot

_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


@jit
def _points_and_jacobian(q, R, p, axis, joint_of, lengths, link, a_local, b_local):
    """End points (M, 2, 3) and their Jacobian (M, 2, 3, J + 6) of one state (module doc).

    q (J,) [rad]; R (3, 3) base rotation; p (3,) base origin [m]; axis (J,) each joint coordinate's axis
    (0, 1, 2: x, y, z); joint_of (J,) its joint; lengths (L − 1,) the links' lengths [m]; link (M,) each
    primitive's link; a_local, b_local (M, 3) its end points in its link's frame [m].
    """
    J = q.shape[0]
    L = lengths.shape[0] + 1
    M = link.shape[0]
    rots = np.empty((L, 3, 3))
    origins = np.empty((L, 3))
    axes = np.empty((J, 3))
    Rc = R.copy()
    rots[0] = Rc
    k = 0
    for i in range(L - 1):
        while k < J and joint_of[k] == i:
            a = axis[k]
            axes[k] = Rc[:, a]
            # Rc ← Rc · rot(a, q_k): the two columns other than a turn, (ci, cj) in cyclic order after a
            ci, cj = (a + 1) % 3, (a + 2) % 3
            c, s = math.cos(q[k]), math.sin(q[k])
            for r in range(3):
                u, v = Rc[r, ci], Rc[r, cj]
                Rc[r, ci] = c * u + s * v
                Rc[r, cj] = -s * u + c * v
            k += 1
        rots[i + 1] = Rc
    origins[0] = p
    for i in range(L - 1):
        for r in range(3):
            origins[i + 1, r] = origins[i, r] + rots[i, r, 0] * lengths[i]
    P = np.empty((M, 2, 3))
    G = np.zeros((M, 2, 3, J + 6))
    for m in range(M):
        lk = link[m]
        for e in range(2):
            loc = a_local[m] if e == 0 else b_local[m]
            for r in range(3):
                P[m, e, r] = origins[lk, r] + rots[lk, r, 0] * loc[0] + rots[lk, r, 1] * loc[1] \
                    + rots[lk, r, 2] * loc[2]
            x, y, z = P[m, e, 0], P[m, e, 1], P[m, e, 2]
            for k in range(J):
                if lk >= joint_of[k] + 1:  # the point lies beyond joint coordinate k: a_k × (P − pivot)
                    piv = origins[joint_of[k] + 1]
                    dx, dy, dz = x - piv[0], y - piv[1], z - piv[2]
                    ax, ay, az = axes[k, 0], axes[k, 1], axes[k, 2]
                    G[m, e, 0, k] = ay * dz - az * dy
                    G[m, e, 1, k] = az * dx - ax * dz
                    G[m, e, 2, k] = ax * dy - ay * dx
            rx, ry, rz = x - p[0], y - p[1], z - p[2]  # e_j × (P − t), column j of ∂P/∂δ
            G[m, e, 1, J], G[m, e, 2, J] = -rz, ry
            G[m, e, 0, J + 1], G[m, e, 2, J + 1] = rz, -rx
            G[m, e, 0, J + 2], G[m, e, 1, J + 2] = -ry, rx
            G[m, e, 0, J + 3] = 1.0
            G[m, e, 1, J + 4] = 1.0
            G[m, e, 2, J + 5] = 1.0
    return P, G


class CompiledChain:
    """:func:`snaketrack.models.chain.point_jacobian` of one robot and silhouette model, compiled.

    ``model``: the primitives (``link`` (M,), ``a_local``, ``b_local`` (M, 3) [m]), as the reference takes.
    ``chain(q, R0, t0)`` with ``q`` (J,), ``R0`` (3, 3), ``t0`` (3,) tensors gives the reference's
    ``(P (M, 2, 3), G (M, 2, 3, J + 6))`` as tensors of ``q``'s dtype.
    """

    def __init__(self, robot: Robot, model):
        axis, joint_of = [], []
        for i, joint in enumerate(robot.joints):
            for ax in joint.axes:
                axis.append(_AXIS_INDEX[ax])
                joint_of.append(i)
        self.axis = np.asarray(axis, np.int64)
        self.joint_of = np.asarray(joint_of, np.int64)
        self.lengths = np.ascontiguousarray(np.asarray(robot.lengths, float)[:len(robot.joints)])
        self.link = np.ascontiguousarray(np.asarray(model.link, np.int64))
        self.a_local = np.ascontiguousarray(np.asarray(model.a_local, float))
        self.b_local = np.ascontiguousarray(np.asarray(model.b_local, float))

    def __call__(self, q: torch.Tensor, R0: torch.Tensor, t0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        P, G = _points_and_jacobian(_np64(q), _np64(R0), _np64(t0), self.axis, self.joint_of, self.lengths,
                                    self.link, self.a_local, self.b_local)
        return torch.from_numpy(P).to(q.dtype), torch.from_numpy(G).to(q.dtype)


def _np64(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float64)
