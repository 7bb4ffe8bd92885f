"""Kinematics of the rolling-joint robot: link poses and the tip for given bending angles.

Frames (Sec. 2.1.1)
    Link frame {i}: origin at the link's mass centre (the middle of its axis),
    z along the axis towards the base, y parallel to the axis of the top
    contact cylinder (the one nearer the base). The world frame {w} has its
    origin at the centre of the base of link 1 (its end away from the body,
    ``z1 = +L/2``), z along the robot's straight axis towards the body, and
    ``T_w1 = Tl(0, 0, L/2)·Rz(α − π)·Ry(π)`` (eq. 18). Link i in link i−1:
    ``T_{i−1,i} = Rz(α_i)·Ry(−θ_{i−1})·Tl(x0, 0, z0)`` (eq. 19). The tip is the
    centre of the distal link's free end, ``(0, 0, −L/2)`` in {n}.

:func:`tip_from_half_angles` is the solver's float-only path (Algorithm 3);
:func:`link_transforms`, :func:`backbone_points` and :func:`tip_position` are
the numpy forms for drawing and checks. Units: metres, radians.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from snaketrack.errors import InputError
from snaketrack.models.statics.robot import StaticsRobot

if TYPE_CHECKING:
    from snaketrack.models.statics.equilibrium import Geometry


def world_from_link1(alpha: float):
    """Rotation of eq. (18), Rz(α − π)·Ry(π), as a 3×3 nested tuple."""
    c, s = math.cos(alpha - math.pi), math.sin(alpha - math.pi)
    # Rz(ψ) @ diag(−1, 1, −1)
    return ((-c, -s, 0.0), (-s, c, 0.0), (0.0, 0.0, -1.0))


def tip_from_half_angles(geo: Geometry, hsin: list, hcos: list, rw1) -> tuple[float, float, float]:
    """Algorithm 3 / eqs. (18)–(20): tip position in the world frame [m].

    geo: the robot's constants (:class:`~snaketrack.models.statics.equilibrium.Geometry`);
    hsin, hcos: sin and cos of θ_1/2..θ_{n−1}/2; rw1: :func:`world_from_link1` of α.
    """
    R, hL = geo.R, 0.5 * geo.L
    ca_, sa_ = geo.ca, geo.sa
    vx, vy, vz = 0.0, 0.0, geo.tip_z
    for i in range(geo.n, 1, -1):
        p = (i - 1) & 1
        sh, ch = hsin[i - 2], hcos[i - 2]
        ct, st = ch * ch - sh * sh, 2.0 * sh * ch
        # eq. (19): l = L/2 − R(1 − cos(θ/2)) + m R sin(θ/2), m = tan(θ/2), i.e. L/2 − R + R / cos(θ/2);
        # T_l(x0, 0, z0) with x0 = −l sin θ, z0 = −l (1 + cos θ)
        l = hL - R + R / ch
        vx -= l * st
        vz -= l * (1.0 + ct)
        # Rz(α_i) Ry(−θ)
        wx, wz = ct * vx - st * vz, st * vx + ct * vz
        ca, sa = ca_[p], sa_[p]
        vx, vy, vz = ca * wx - sa * vy, sa * wx + ca * vy, wz
    # eq. (18): world = Tl(0, 0, L/2) Rz(α−π) Ry(π) v
    (a, b, c), (d, e, f), (g, hh, k) = rw1
    return (a * vx + b * vy + c * vz, d * vx + e * vy + f * vz, g * vx + hh * vy + k * vz + hL)


def link_transforms(robot: StaticsRobot, angles: Sequence[float]) -> np.ndarray:
    """World pose of every link frame for given bending angles (eqs. 18–20).

    angles: (n−1,) θ_1..θ_{n−1} [rad]. Returns (n, 4, 4) homogeneous
    transforms ``T_wi`` [m]; link frame origins are the mass centres.
    """
    n = robot.n_links
    th = np.asarray(angles, dtype=float).reshape(-1)
    if th.shape != (n - 1,):
        raise InputError(f"angles has shape {th.shape}; expected ({n - 1},) for {robot.name}")
    L, R, a = robot.length, robot.contact_radius, robot.alpha

    def rz(p):
        c, s = math.cos(p), math.sin(p)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def ry(p):
        c, s = math.cos(p), math.sin(p)
        return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])

    def hom(rot=None, d=None):
        T = np.eye(4)
        if rot is not None:
            T[:3, :3] = rot
        if d is not None:
            T[:3, 3] = d
        return T

    out = np.empty((n, 4, 4))
    T = hom(d=(0.0, 0.0, 0.5 * L)) @ hom(rz(a - math.pi)) @ hom(ry(math.pi))
    out[0] = T
    for i in range(2, n + 1):
        t = th[i - 2]
        m = math.tan(0.5 * t)
        l = 0.5 * L - R * (1.0 - math.cos(0.5 * t)) + m * R * math.sin(0.5 * t)
        x0, z0 = -2.0 * m * l / (m * m + 1.0), -2.0 * l / (m * m + 1.0)
        alpha_i = a if i % 2 == 1 else -a
        T = T @ hom(rz(alpha_i)) @ hom(ry(-t)) @ hom(d=(x0, 0.0, z0))
        out[i - 1] = T
    return out


def backbone_points(robot: StaticsRobot, angles: Sequence[float]) -> np.ndarray:
    """Points along the robot's axis in the world frame [m], for drawing.

    Returns (2n, 3): for each link its top end and bottom end (base to tip);
    the first point is the world origin and the last the tip.
    """
    Ts = link_transforms(robot, angles)
    hL = 0.5 * robot.length
    pts = []
    for T in Ts:
        pts.append(T[:3, :3] @ (0.0, 0.0, hL) + T[:3, 3])
        pts.append(T[:3, :3] @ (0.0, 0.0, -hL) + T[:3, 3])
    return np.array(pts)


def tip_position(robot: StaticsRobot, angles: Sequence[float]) -> np.ndarray:
    """Tip ``(0, 0, −L/2)`` of the distal link in the world frame [m], shape (3,)."""
    T = link_transforms(robot, angles)[-1]
    return T[:3, :3] @ np.array([0.0, 0.0, -0.5 * robot.length]) + T[:3, 3]
