"""The kinematic chain's end points and their Jacobian as one compiled loop (numba).

The same quantities as :func:`snaketrack.models.chain.point_jacobian` (its numpy implementation is the
reference; tests/models/test_chain_kernel.py compares the two): the primitives' end points of one state
and their derivatives with respect to ``[q (J), δ (3), t (3)]``, in float64, without the few hundred
small numpy operations (a 3×3 product per joint axis, a cross product per point and axis) whose per-call
overhead, not their arithmetic, is what the reference costs.

:func:`available` says whether numba is importable; :class:`CompiledChain` is then what refinement uses,
and :class:`CompiledBody` (the body's centre, which the Kalman filter's depth damping evaluates a few times
a frame, and its plane normal, which the up prior holds each refinement step) what the tracker uses.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from snaketrack.jit import available, jit  # noqa: F401  (available: this module's kernels can run)
from snaketrack.models.robot import Robot

_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


@jit
def _link_frames(q, R, p, axis, joint_of, lengths):
    """The links' rotations (L, 3, 3) and origins (L, 3) [m] of one state, and each joint coordinate's axis
    (J, 3) in the camera frame; arguments as :func:`_points_and_jacobian`'s."""
    J = q.shape[0]
    L = lengths.shape[0] + 1
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
    return rots, origins, axes


@jit
def _points_and_jacobian(q, R, p, axis, joint_of, lengths, link, a_local, b_local):
    """End points (M, 2, 3) and their Jacobian (M, 2, 3, J + 6) of one state (module doc).

    q (J,) [rad]; R (3, 3) base rotation; p (3,) base origin [m]; axis (J,) each joint coordinate's axis
    (0, 1, 2: x, y, z); joint_of (J,) its joint; lengths (L − 1,) the links' lengths [m]; link (M,) each
    primitive's link; a_local, b_local (M, 3) its end points in its link's frame [m].
    """
    J = q.shape[0]
    M = link.shape[0]
    rots, origins, axes = _link_frames(q, R, p, axis, joint_of, lengths)
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


@jit
def _rotation(w):
    """Rodrigues: the rotation matrix (3, 3) of a rotation vector w (3,) [rad], with the Taylor series of
    :func:`snaketrack.models.rotations.axis_angle_to_matrix` below θ² = 1e-8."""
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    if t2 < 1e-8:
        a, b = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0
    else:
        t = math.sqrt(t2)
        a, b = math.sin(t) / t, (1.0 - math.cos(t)) / t2
    K = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    return np.eye(3) + a * K + b * (K @ K)


@jit
def _end_points(X, axis, joint_of, lengths, link, a_local, b_local):
    """The primitives' end points (B, M, 2, 3) [m] of pose vectors X (B, J + 6) ``[q, w, t]`` (w the base's
    rotation vector); other arguments as :func:`_points_and_jacobian`'s."""
    B = X.shape[0]
    J = axis.shape[0]
    M = link.shape[0]
    P = np.empty((B, M, 2, 3))
    for n in range(B):
        R = _rotation(X[n, J:J + 3])
        rots, origins, _ = _link_frames(X[n, :J], R, X[n, J + 3:J + 6], axis, joint_of, lengths)
        for m in range(M):
            lk = link[m]
            for e in range(2):
                loc = a_local[m] if e == 0 else b_local[m]
                for r in range(3):
                    P[n, m, e, r] = origins[lk, r] + rots[lk, r, 0] * loc[0] + rots[lk, r, 1] * loc[1] \
                        + rots[lk, r, 2] * loc[2]
    return P


@jit
def _body_centre(q, R, p, axis, joint_of, lengths, all_lengths):
    """Mean of the links' axis centres (3,) [m] of one state; all_lengths (L,) every link's length [m]."""
    rots, origins, _ = _link_frames(q, R, p, axis, joint_of, lengths)
    L = all_lengths.shape[0]
    c = np.zeros(3)
    for i in range(L):
        for r in range(3):
            c[r] += origins[i, r] + 0.5 * all_lengths[i] * rots[i, r, 0]
    return c / L


@jit
def _head_point(q, R, p, axis, joint_of, lengths, all_lengths):
    """The head point (3,) [m] of one state: the centre of the last link's axis."""
    rots, origins, _ = _link_frames(q, R, p, axis, joint_of, lengths)
    h = origins.shape[0] - 1
    return origins[h] + 0.5 * all_lengths[h] * rots[h, :, 0]


@jit
def _body_normal(q, R, axis, joint_of, lengths):
    """The body's plane normal n (3,) and ∂n/∂[q, δ] (3, J + 3) of one state, as
    :func:`snaketrack.models.chain.body_normal` (its reference); arguments as :func:`_points_and_jacobian`'s."""
    J = q.shape[0]
    rots, _, axes = _link_frames(q, R, np.zeros(3), axis, joint_of, lengths)
    L = rots.shape[0]
    S = np.zeros((L + 1, 3))  # S[i] = Σ_{l ≥ i} z_l
    for i in range(L - 1, -1, -1):
        for r in range(3):
            S[i, r] = S[i + 1, r] + rots[i, r, 2]
    dm = np.empty((3, J + 3))
    for k in range(J):  # a_k × Σ_{l beyond joint k} z_l
        a, s = axes[k], S[joint_of[k] + 1]
        dm[0, k] = (a[1] * s[2] - a[2] * s[1]) / L
        dm[1, k] = (a[2] * s[0] - a[0] * s[2]) / L
        dm[2, k] = (a[0] * s[1] - a[1] * s[0]) / L
    s = S[0]  # column j: e_j × Σ_l z_l
    dm[0, J], dm[1, J], dm[2, J] = 0.0, -s[2] / L, s[1] / L
    dm[0, J + 1], dm[1, J + 1], dm[2, J + 1] = s[2] / L, 0.0, -s[0] / L
    dm[0, J + 2], dm[1, J + 2], dm[2, J + 2] = -s[1] / L, s[0] / L, 0.0
    m = S[0] / L
    nm = math.sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2])
    n = m / nm
    P = np.eye(3)
    for i in range(3):
        for j in range(3):
            P[i, j] -= n[i] * n[j]
    return n, (P @ dm) / nm


def _chain_arrays(robot: Robot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernels' description of the chain: each joint coordinate's axis index (J,) (0, 1, 2: x, y, z), its
    joint (J,), and the lengths (L − 1,) [m] of the links before the last."""
    axis, joint_of = [], []
    for i, joint in enumerate(robot.joints):
        for ax in joint.axes:
            axis.append(_AXIS_INDEX[ax])
            joint_of.append(i)
    lengths = np.ascontiguousarray(np.asarray(robot.lengths, float)[:len(robot.joints)])
    return np.asarray(axis, np.int64), np.asarray(joint_of, np.int64), lengths


class CompiledBody:
    """Three figures of the whole body, compiled, for one robot; arguments are arrays, ``q`` (J,) [rad] and the
    base's ``R0`` (3, 3) and ``t0`` (3,) [m] in the camera frame:

    - ``centre(q, R0, t0)``: the mean of the link centres of
      :func:`snaketrack.models.kinematics.forward_kinematics` (the reference), (3,) [m];
    - ``head(q, R0, t0)``: the head point of :func:`~snaketrack.models.kinematics.forward_kinematics` (the
      reference), the centre of the last link's axis, (3,) [m];
    - ``normal(q, R0)``: :func:`snaketrack.models.chain.body_normal` (the reference), n (3,) and
      ∂n/∂[q, δ] (3, J + 3).
    """

    def __init__(self, robot: Robot):
        self.axis, self.joint_of, self.lengths = _chain_arrays(robot)
        self.all_lengths = np.ascontiguousarray(np.asarray(robot.lengths, float))

    def centre(self, q, R0, t0) -> np.ndarray:
        return _body_centre(_f64(q), _f64(R0), _f64(t0), self.axis, self.joint_of, self.lengths, self.all_lengths)

    def head(self, q, R0, t0) -> np.ndarray:
        return _head_point(_f64(q), _f64(R0), _f64(t0), self.axis, self.joint_of, self.lengths, self.all_lengths)

    def normal(self, q, R0) -> tuple[np.ndarray, np.ndarray]:
        return _body_normal(_f64(q), _f64(R0), self.axis, self.joint_of, self.lengths)


def _f64(a) -> np.ndarray:
    """``a`` (an array or a tensor) as a contiguous float64 numpy array on the CPU."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    return np.ascontiguousarray(a, np.float64)


class CompiledChain:
    """:func:`snaketrack.models.chain.point_jacobian` of one robot and silhouette model, compiled.

    ``model``: the primitives (``link`` (M,), ``a_local``, ``b_local`` (M, 3) [m]), as the reference takes.
    ``chain(q, R0, t0)`` with ``q`` (J,), ``R0`` (3, 3), ``t0`` (3,) tensors gives the reference's
    ``(P (M, 2, 3), G (M, 2, 3, J + 6))`` as tensors of ``q``'s dtype.
    """

    def __init__(self, robot: Robot, model):
        self.axis, self.joint_of, self.lengths = _chain_arrays(robot)
        self.link = np.ascontiguousarray(np.asarray(model.link, np.int64))
        self.a_local = np.ascontiguousarray(np.asarray(model.a_local, float))
        self.b_local = np.ascontiguousarray(np.asarray(model.b_local, float))

    def end_points(self, x: np.ndarray) -> np.ndarray:
        """The primitives' end points (B, M, 2, 3) [m] of pose vectors ``x`` (B, J + 6), ``[q, w, t]`` as
        :class:`~snaketrack.tracker.state.StateLayout` packs them: ``SilhouetteRenderer.primitives``
        without autograd (its torch forward kinematics the reference)."""
        return _end_points(_f64(x), self.axis, self.joint_of, self.lengths, self.link,
                           self.a_local, self.b_local)

    def __call__(self, q: torch.Tensor, R0: torch.Tensor, t0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        P, G = _points_and_jacobian(_f64(q), _f64(R0), _f64(t0), self.axis, self.joint_of, self.lengths,
                                    self.link, self.a_local, self.b_local)
        return torch.from_numpy(P).to(q.dtype), torch.from_numpy(G).to(q.dtype)

