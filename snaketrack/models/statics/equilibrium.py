"""Equilibrium of every link for given tensions and weights: one backward sweep of the static model.

For each link the force and moment balance (eqs. 13–14) holds with cable
forces (eqs. 1–4), contact forces and moments (eqs. 5–10) and the link's
weight at its mass centre (eqs. 11–12). The contact cannot carry a moment
about the rolling axis, so the y-component of the moment balance gives
``a·sin(θ/2) + b·cos(θ/2) + c = 0`` (eq. 16) for the link's top angle,
solved in closed form; the root with ``|θ| < π/2`` nearest the previous
value is taken. The links are solved from the distal link towards the base;
the contact force and moment found on link i's top are handed to link i−1's
bottom with eq. (17).

Choices where the paper is vague or its extracted text misleads:

- The coefficients of eq. (16) are built from the vector balance rather than
  typed from the printed a, b, c; on the distal link the bottom cable and
  contact terms are absent (its cables end there), which the printed
  intermediate-link formula would get wrong.
- Sign hand-over: eqs. (1) and (6) written for link i−1's *bottom* use the
  negative of the angle θ_{i−1} found as link i's *top* angle (the garbled
  "θ_{i−1} = −θ_{i−1}" of Sec. 3.2.2, which follows from eq. 19). Reported
  angles are the top angles, the paper's θ_1..θ_{n−1}, positive when the
  joint bends towards the link's +x.
- World gravity is taken into link 1 with the exact inverse of eq. (18);
  the printed ``Rz(π − α)Ry(π)`` agrees with it only for gravity along z.
- Links 2..n carry weight ``m·g`` each; link 1 is the base.

Everything is written with plain Python floats and :mod:`math` (measured
faster than numpy for these 3-vectors; see ``snaketrack bench statics``).
Units: metres, radians, newtons, kilograms, m/s².
"""
from __future__ import annotations

import math
from typing import Optional

from snaketrack.models.statics.robot import StaticsRobot


class Geometry:
    """Per-robot, per-tension constants of eqs. (1)–(4) summed over the cables.

    For link parity p (0: odd links, α_i = α; 1: even links, α_i = −α):
    S = ΣT, (Cx, Cy) = Σ T·r·(cos φ, sin φ), Ht = Σ T·l_t,z, Hb = Σ T·l_b,z.
    """

    __slots__ = ("n", "L", "R", "h", "alpha", "ca", "sa", "S", "Cx", "Cy", "Ht", "Hb", "tip_z")

    def __init__(self, robot: StaticsRobot, tensions: tuple[float, float, float, float]):
        T1, T2, T3, T4 = tensions
        L, R, r, a = robot.length, robot.contact_radius, robot.cable_distance, robot.alpha
        self.n = robot.n_links
        self.L, self.R, self.h = L, R, 0.5 * L - R
        self.alpha = (a, -a)
        self.ca = (math.cos(a), math.cos(-a))
        self.sa = (math.sin(a), math.sin(-a))
        # Sec. 3.2.2: odd links φ = {0, −α, π, π−α} carry {T4, T1, T2, T3};
        # even links φ = {0, π+α, π, α} carry {T1, T2, T3, T4}.
        cables = (
            ((0.0, T4), (-a, T1), (math.pi, T2), (math.pi - a, T3)),
            ((0.0, T1), (math.pi + a, T2), (math.pi, T3), (a, T4)),
        )
        self.S, self.Cx, self.Cy, self.Ht, self.Hb = [], [], [], [], []
        for p, cab in enumerate(cables):
            ai = self.alpha[p]
            self.S.append(sum(t for _, t in cab))
            self.Cx.append(sum(t * r * math.cos(ph) for ph, t in cab))
            self.Cy.append(sum(t * r * math.sin(ph) for ph, t in cab))
            # eq. (4): top exit height; eq. (2): bottom exit height.
            self.Ht.append(sum(t * (self.h + math.sqrt(R * R - (r * math.cos(ph)) ** 2)) for ph, t in cab))
            self.Hb.append(sum(t * (-self.h - math.sqrt(R * R - (r * math.cos(ph + ai)) ** 2)) for ph, t in cab))
        self.tip_z = -0.5 * L


class NoRoot(Exception):
    """Eq. (16) has no root with |θ| < π/2 on link ``link``."""

    def __init__(self, link: int):
        self.link = link


def sweep(geo: Geometry, grav: Optional[list], prev: list) -> tuple[list, list, list]:
    """One backward sweep (Algorithm 2): the bending angles θ_1..θ_{n−1} [rad].

    grav: per link i (index i−1) the weight vector G_i in {i} [N], or None.
    prev: previous angles, for choosing the root of eq. (16).
    Returns (theta, sin(theta/2), cos(theta/2)), three lists of n−1 floats.
    Raises NoRoot when eq. (16) has no root with |θ| < π/2.
    """
    n = geo.n
    R, h = geo.R, geo.h
    S_, Cx_, Cy_, Ht_, Hb_, ca_, sa_ = geo.S, geo.Cx, geo.Cy, geo.Ht, geo.Hb, geo.ca, geo.sa
    sqrt, atan2 = math.sqrt, math.atan2
    theta = [0.0] * (n - 1)
    hsin = [0.0] * (n - 1)
    hcos = [1.0] * (n - 1)
    # Bottom loads of the current link (all zero on the distal link).
    Fx = Fy = Fz = 0.0
    Mx = My = Mz = 0.0
    shs = 0.0  # sin(s/2), s = bottom angle in the link's own convention (= −θ_i)
    chs = 1.0
    Gx = Gy = Gz = 0.0
    for i in range(n, 1, -1):
        p = (i - 1) & 1  # 0 for odd i, 1 for even i
        S, Cx, Cy, Ht = S_[p], Cx_[p], Cy_[p], Ht_[p]
        if grav is not None:
            Gx, Gy, Gz = grav[i - 1]
        if i == n:
            # Distal link: no bottom cables, contact force or moment.
            Kx, Ky, Kz = Gx, Gy, Gz
            Mbx = Mby = Mbz = 0.0
        else:
            ca, sa, Hb = ca_[p], sa_[p], Hb_[p]
            # eq. (1): bottom cable direction u_b
            ubx, uby, ubz = -shs * ca, shs * sa, -chs
            Kx = S * ubx + Fx + Gx
            Ky = S * uby + Fy + Gy
            Kz = S * ubz + Fz + Gz
            # eq. (6): bottom contact point
            lx, ly, lz = R * ubx, R * uby, -h - R * chs
            # cables (eq. 2): (Cx, Cy, Hb) × u_b; contact: l_cb × F_cb + M_cb
            Mbx = Cy * ubz - Hb * uby + ly * Fz - lz * Fy + Mx
            Mby = Hb * ubx - Cx * ubz + lz * Fx - lx * Fz + My
            Mbz = Cx * uby - Cy * ubx + lx * Fy - ly * Fx + Mz
        # eq. (16): y-moment balance, A sin(θ/2) + B cos(θ/2) + C = 0, solved in
        # closed form: with A = ρ cos ψ, B = ρ sin ψ it reads sin(x + ψ) = −C/ρ = sin q,
        # so x = q − ψ or π − q − ψ. Keep |x| < π/4 (cos x > |sin x|) nearest prev/2.
        A = Ht - h * S + R * Kz
        B = -Cx - R * Kx
        C = Mby - h * Kx
        rho = sqrt(A * A + B * B)
        if rho == 0.0 or abs(C) > rho:
            raise NoRoot(i)
        sq = -C / rho
        cq = sqrt(1.0 - sq * sq)
        cp, sp = A / rho, B / rho
        s1, c1 = sq * cp - cq * sp, cq * cp + sq * sp  # x1 = q − ψ
        s2, c2 = sq * cp + cq * sp, sq * sp - cq * cp  # x2 = π − q − ψ
        ok1 = c1 > abs(s1)
        ok2 = c2 > abs(s2)
        if ok1 and ok2:
            ref = 0.5 * prev[i - 2]
            x1, x2 = atan2(s1, c1), atan2(s2, c2)
            if abs(x1 - ref) <= abs(x2 - ref):
                x, sx, cx = x1, s1, c1
            else:
                x, sx, cx = x2, s2, c2
        elif ok1:
            x, sx, cx = atan2(s1, c1), s1, c1
        elif ok2:
            x, sx, cx = atan2(s2, c2), s2, c2
        else:
            raise NoRoot(i)
        theta[i - 2] = 2.0 * x
        hsin[i - 2] = sx
        hcos[i - 2] = cx
        if i == 2:
            break
        # Top contact force (eq. 13) and moment (eq. 14) on link i; M_ty = 0.
        Ftx = -(S * sx + Kx)
        Fty = -Ky
        Ftz = -(S * cx + Kz)
        Mtx = -(Cy * cx + Mbx - (h + R * cx) * Fty)
        Mtz = -(Mbz - Cy * sx + R * sx * Fty)
        # eq. (17): hand over to link i−1: F_cb = −Rz(α_i) Ry(−θ) F_ct, same for M.
        ct, st = cx * cx - sx * sx, 2.0 * sx * cx
        ca, sa = ca_[p], sa_[p]
        wx, wz = ct * Ftx - st * Ftz, st * Ftx + ct * Ftz
        Fx, Fy, Fz = sa * Fty - ca * wx, -(sa * wx + ca * Fty), -wz
        wx, wz = ct * Mtx - st * Mtz, st * Mtx + ct * Mtz
        Mx, My, Mz = -ca * wx, -sa * wx, -wz
        # link i−1's bottom angle is −θ_{i−1}: sin(−x), cos(−x)
        shs, chs = -sx, cx
    return theta, hsin, hcos


def _gravity_vectors_cs(geo: Geometry, g1: tuple, cos_t: list, sin_t: list) -> list:
    """Algorithm 1 / eq. (15): each link's weight in its own frame [N].

    g1: the weight m·g expressed in link frame {1}; cos_t, sin_t: cos and sin
    of θ_1..θ_{n−1}. Returns a list indexed by link − 1 (entry 0, the base
    link, is unused).
    """
    gx, gy, gz = g1
    ca_, sa_ = geo.ca, geo.sa
    out = [g1] * geo.n
    for u in range(2, geo.n + 1):
        p = (u - 1) & 1
        ca, sa = ca_[p], sa_[p]
        # G(u) = Ry(θ_{u−1}) Rz(−α_u) G(u−1)
        wx, wy = ca * gx + sa * gy, -sa * gx + ca * gy
        ct, st = cos_t[u - 2], sin_t[u - 2]
        gx, gy, gz = ct * wx + st * gz, wy, -st * wx + ct * gz
        out[u - 1] = (gx, gy, gz)
    return out


def gravity_vectors(geo: Geometry, g1: tuple, theta: list) -> list:
    """:func:`_gravity_vectors_cs` for angles θ [rad]."""
    return _gravity_vectors_cs(geo, g1, [math.cos(t) for t in theta], [math.sin(t) for t in theta])


def gravity_vectors_half(geo: Geometry, g1: tuple, hsin: list, hcos: list) -> list:
    """:func:`_gravity_vectors_cs` from sin and cos of the half angles θ/2."""
    return _gravity_vectors_cs(geo, g1, [c * c - s * s for s, c in zip(hsin, hcos)],
                               [2.0 * s * c for s, c in zip(hsin, hcos)])


def weight_in_link1(robot: StaticsRobot, gravity: tuple, rw1) -> tuple[float, float, float]:
    """m·g_world expressed in link frame {1} with the exact inverse of eq. (18) [N].

    gravity: (3,) world gravity [m/s²]; rw1: the rotation of
    :func:`~snaketrack.models.statics.kinematics.world_from_link1`.
    """
    m = robot.link_mass
    gx, gy, gz = (m * gravity[0], m * gravity[1], m * gravity[2])
    # R^T v
    return (
        rw1[0][0] * gx + rw1[1][0] * gy + rw1[2][0] * gz,
        rw1[0][1] * gx + rw1[1][1] * gy + rw1[2][1] * gz,
        rw1[0][2] * gx + rw1[1][2] * gy + rw1[2][2] * gz,
    )
