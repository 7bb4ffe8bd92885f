"""The kinematic chain of one state in numpy, with the closed-form derivatives refinement needs.

The same chain as :func:`snaketrack.models.kinematics.forward_kinematics` (see its module doc for
the conventions), evaluated in float64 numpy: a few dozen 3×3 products, where torch's per-call
overhead would dominate. Derivatives are taken with respect to ``[q (J), δ (3), t (3)]``: the
joint coordinates, a rotation increment applied on the left of the base rotation
(``exp(δ) R0``, at δ = 0) and the base translation.

>>> from snaketrack.models.robot import load_robot
>>> robot = load_robot("planar-snake-11")
>>> rots, origins, axes, pivots, joint_of = chain_frames(robot, np.zeros(robot.dof), np.eye(3), np.zeros(3))
>>> len(rots), len(axes), [round(v, 9) for v in origins[-1].tolist()]
(11, 10, [1.0, 0.0, 0.0])
"""
from __future__ import annotations

import numpy as np
import torch

from snaketrack.models.robot import Robot
from snaketrack.models.rotations import axis_rotation_np

_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


def chain_frames(robot: Robot, q: np.ndarray, R: np.ndarray, p: np.ndarray):
    """The link frames and joint axes of one state.

    ``q`` (J,) [rad], base rotation ``R`` (3, 3) and origin ``p`` (3,) [m]. Returns the link rotations
    and origins (lists of L arrays (3, 3) and (3,)), and per joint coordinate its axis (3,) and pivot
    (3,) [m], both in the frame ``R`` and ``p`` are given in, and the index of its joint (lists of J).
    """
    lengths = np.asarray(robot.lengths, float)
    rots, axes, joint_of = _rotations(robot, q, R)
    origins = [p]
    for i in range(len(robot.joints)):
        p = p + rots[i][:, 0] * lengths[i]
        origins.append(p)
    pivots = [origins[i + 1] for i in joint_of]
    return rots, origins, axes, pivots, joint_of


def _rotations(robot: Robot, q: np.ndarray, R: np.ndarray) -> tuple[list, list, list]:
    """The link rotations (L arrays (3, 3)), joint axes (J arrays (3,)) and each axis's joint index of
    :func:`chain_frames` (which do not depend on the base position)."""
    q, R = np.asarray(q, float), np.array(R, float)  # a copy: the result outlives the caller's array
    rots, axes, joint_of = [R], [], []
    k = 0
    for i, joint in enumerate(robot.joints):
        for ax in joint.axes:
            axes.append(R[:, _AXIS_INDEX[ax]])
            joint_of.append(i)
            R = R @ axis_rotation_np(ax, q[k])
            k += 1
        rots.append(R)
    return rots, axes, joint_of


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b over the last axis (3), broadcast: np.cross's arithmetic without its per-call overhead."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack(np.broadcast_arrays(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def body_normal(robot: Robot, q: np.ndarray, R0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The body's plane normal and its derivatives: ``n`` (3,), the normalised mean of the links'
    z axes, and ``∂n/∂[q, δ]`` (3, J + 3) with the base rotation ``exp(δ) R0`` (δ = 0 here).

    ``∂z_l/∂q_k = a_k × z_l`` for links beyond joint coordinate k (axis ``a_k`` in the camera
    frame), ``∂z_l/∂δ_j = e_j × z_l``.
    """
    q = np.asarray(q, float)
    rots, _, axes, _, joint_of = chain_frames(robot, q, np.asarray(R0, float), np.zeros(3))
    Z = np.stack([r[:, 2] for r in rots])  # (L, 3)
    J = len(axes)
    S = np.cumsum(Z[::-1], axis=0)[::-1]  # S[i] = Σ_{l ≥ i} z_l; a × Σ z_l = Σ a × z_l
    dm = np.empty((3, J + 3))
    dm[:, :J] = _cross(np.stack(axes), S[np.asarray(joint_of) + 1]).T
    dm[:, J:] = _cross(np.eye(3), S[0]).T  # column j: Σ_l e_j × z_l
    dm /= len(Z)
    m = Z.mean(0)
    nm = float(np.linalg.norm(m))
    n = m / nm
    return n, (np.eye(3) - np.outer(n, n)) @ dm / nm


def point_jacobian(robot: Robot, model, q: torch.Tensor, R0: torch.Tensor, t0: torch.Tensor):
    """Primitive end points (M, 2, 3) [m] and their derivatives (M, 2, 3, D) [m/rad, m/m].

    ``model``: the silhouette model's primitives (``link`` (M,), ``a_local``, ``b_local`` (M, 3) [m]
    in their link's frame, as :class:`snaketrack.tracker.render.silhouette.CapsuleModel`). With respect to
    ``[q (J), δ (3), t (3)]`` where the base rotation is ``exp(δ) R0`` (δ = 0 here) and ``t`` the
    base translation, for one state (``q`` (J,), ``R0`` (3, 3), ``t0`` (3,)), returned as tensors of
    ``q``'s dtype. Closed form for revolute joints: ``∂P/∂q_k = a_k × (P − p_k)`` for points beyond
    joint k (axis ``a_k`` and pivot ``p_k`` in the camera frame), ``∂P/∂δ_j = e_j × (P − t)``,
    ``∂P/∂t = I``. Tested against autograd (tests/tracker/test_refine.py).
    """
    dt = q.dtype
    qn = q.detach().cpu().numpy().astype(float)
    R = R0.detach().cpu().numpy().astype(float)
    p = t0.detach().cpu().numpy().astype(float)
    rots, origins, axes, pivots, joint_of = chain_frames(robot, qn, R, p)
    rots_a, orig_a = np.stack(rots), np.stack(origins)
    link = np.asarray(model.link)
    Rk, ok = rots_a[link], orig_a[link]
    a = ok + np.einsum("mij,mj->mi", Rk, np.asarray(model.a_local, float))
    b = ok + np.einsum("mij,mj->mi", Rk, np.asarray(model.b_local, float))
    P = np.stack([a, b], axis=1)  # (M, 2, 3)
    M, Jn = P.shape[0], len(axes)
    G = np.zeros((M, 2, 3, Jn + 6))
    if Jn:
        ax_a, piv = np.stack(axes), np.stack(pivots)  # (Jn, 3)
        beyond = link[:, None] >= (np.asarray(joint_of)[None, :] + 1)  # (M, Jn)
        cr = _cross(ax_a[None, None], P[:, :, None, :] - piv[None, None])  # (M, 2, Jn, 3)
        G[..., :Jn] = (cr * beyond[:, None, :, None]).transpose(0, 1, 3, 2)
    rel = P - p  # e_j × rel, column j of ∂P/∂δ
    G[..., 1, Jn], G[..., 2, Jn] = -rel[..., 2], rel[..., 1]
    G[..., 0, Jn + 1], G[..., 2, Jn + 1] = rel[..., 2], -rel[..., 0]
    G[..., 0, Jn + 2], G[..., 1, Jn + 2] = -rel[..., 1], rel[..., 0]
    G[..., 0, Jn + 3] = G[..., 1, Jn + 4] = G[..., 2, Jn + 5] = 1.0
    return torch.as_tensor(P, dtype=dt), torch.as_tensor(G, dtype=dt)
