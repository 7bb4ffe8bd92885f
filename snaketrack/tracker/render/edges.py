"""Signed distances [px] from pixel rays to capsule and cylinder silhouette edges, with their derivatives.

For a unit pixel ray ``d`` (through the pixel centre, ``d ∝ K⁻¹ [u, v, 1]``)
and a capsule (axis segment ``A→B``, radius ``r``; a sphere when ``A = B``),
:func:`capsule_edge_px` takes the exact distance between the ray and the
axis segment,

    s* = clamp(argmin_s |P(s) − (P(s)·d) d|, 0, 1),  P(s) = A + s (B − A)
    dist = |P(s*) − (P(s*)·d) d|,   depth z = P(s*)·d,

and turns it into a signed distance to the silhouette edge in pixels,
``e = f (r − dist) / z`` (``f`` the focal length [px]), positive inside.
``dist ≤ r`` is exactly the condition for the ray to hit the capsule.
A flat-ended cylinder (the planar snake's joint housings) takes its edge
distance from :func:`cylinder_edge_px` instead: the outline of the hull of
its two end discs. Rays meeting a primitive closer than ``min_depth`` [m]
get ``e = −1000`` (not covered).

The derivatives ``∂e/∂A``, ``∂e/∂B`` are in closed form, without autograd
(:func:`capsule_edge_px_grad`, :func:`cylinder_edge_px_grad`; equal to
autograd through the forward functions in tests/tracker/test_edges.py).
:func:`edge_px` and :func:`edge_px_grads` evaluate a list of (pixel,
primitive) pairs holding both kinds, capsules first (:func:`kind_order`).

Vectors are stacked on dim 0: A, B, d are (3, ...) in the camera frame [m]
(OpenCV: x right, y down, z forward), r is (...) [m].
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import numpy as np
import torch


def capsule_edge_px(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                    min_depth: float) -> torch.Tensor:
    """Signed distance [px] to the silhouette edge of capsule (A, B, r) along unit rays d.

    Components first: A, Bp, d are (3, ...) (x, y, z stacked on dim 0), r (...);
    returns (...). Positive inside the silhouette.
    """
    Ex, Ey, Ez = Bp[0] - A[0], Bp[1] - A[1], Bp[2] - A[2]
    Ad = A[0] * d[0] + A[1] * d[1] + A[2] * d[2]
    Ed = Ex * d[0] + Ey * d[1] + Ez * d[2]
    a = Ex * Ex + Ey * Ey + Ez * Ez - Ed * Ed
    bq = A[0] * Ex + A[1] * Ey + A[2] * Ez - Ad * Ed
    c = A[0] * A[0] + A[1] * A[1] + A[2] * A[2] - Ad * Ad
    ok = a > 1e-12
    s = torch.where(ok, (-bq / torch.where(ok, a, torch.ones_like(a))).clamp(0.0, 1.0), torch.zeros_like(a))
    d2 = (a * s * s + 2 * bq * s + c).clamp_min(0.0)
    dist = torch.sqrt(d2 + 1e-14)
    z = Ad + s * Ed
    e = f * (r - dist) / z.clamp_min(min_depth)
    return torch.where(z > min_depth, e, torch.full_like(e, -1e3))


def capsule_edge_px_grad(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                         min_depth: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`capsule_edge_px` and its derivatives with respect to A and B, in closed form (no autograd).

    A, Bp, d: (3, Q); r: (Q,). Returns ``e`` (Q,), ``∂e/∂A`` (3, Q), ``∂e/∂B`` (3, Q).
    With ``E = B − A``, ``X⊥ = X − (X·d) d``, the closest axis point
    ``P = A + s E`` (``s = −(A⊥·E⊥)/|E⊥|²`` clamped to [0, 1]), ``dist = |P⊥|``,
    ``z = P·d``: ``∂dist/∂A = (1 − s) P⊥/dist``, ``∂dist/∂B = s P⊥/dist``
    (``s`` is stationary or clamped), and for an unclamped ``s``
    ``∂s/∂A = (A⊥ + (2s − 1) E⊥)/|E⊥|²``, ``∂s/∂B = −(A⊥ + 2s E⊥)/|E⊥|²``, so
    ``∂z/∂A = (1 − s) d + (E·d) ∂s/∂A``, ``∂z/∂B = s d + (E·d) ∂s/∂B``;
    ``e = f (r − dist)/z`` gives ``∂e = −(f ∂dist + e ∂z)/z``. Equal to
    autograd through :func:`capsule_edge_px` (tests/tracker/test_edges.py checks it).
    """
    E = Bp - A
    Ad = (A * d).sum(0)
    Ed = (E * d).sum(0)
    Ap = A - Ad * d  # A⊥
    Epp = E - Ed * d  # E⊥
    a = (Epp * Epp).sum(0)
    bq = (Ap * Epp).sum(0)
    ok = a > 1e-12
    a_safe = torch.where(ok, a, torch.ones_like(a))
    s_raw = -bq / a_safe
    s = torch.where(ok, s_raw.clamp(0.0, 1.0), torch.zeros_like(a))
    free = ok & (s_raw > 0.0) & (s_raw < 1.0)
    Pp = Ap + s * Epp  # P⊥
    dist = torch.sqrt((Pp * Pp).sum(0) + 1e-14)
    z = Ad + s * Ed
    front = z > min_depth
    zc = z.clamp_min(min_depth)
    e_raw = f * (r - dist) / zc
    e = torch.where(front, e_raw, torch.full_like(e_raw, -1e3))
    k = torch.where(front, -1.0 / zc, torch.zeros_like(zc))  # ∂e = k (f ∂dist + e ∂z)
    ndist = Pp * (f / dist)  # f ∂dist/∂P
    # ∂s terms only where s is free; scaled by (E·d) e for ∂z
    c = torch.where(free, Ed * e_raw / a_safe, torch.zeros_like(a))
    ds_common = c * Ap  # c A⊥
    sA = ds_common + (c * (2 * s - 1)) * Epp  # (E·d) e ∂s/∂A
    sB = -(ds_common + (c * 2 * s) * Epp)  # (E·d) e ∂s/∂B
    gA = k * ((1 - s) * (ndist + e_raw * d) + sA)
    gB = k * (s * (ndist + e_raw * d) + sB)
    return e, gA, gB


def cylinder_edge_px(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                     min_depth: float, eps: float = 1e-12) -> torch.Tensor:
    """Signed edge distance [px] (positive inside) of flat-ended cylinders, axis A→B, radius r.

    A, Bp, d: (3, Q) or (3, B, Q); r: broadcastable. A cylinder is the convex hull
    of its two end discs, so its outline is the hull of two ellipses (semi-axes
    r and r |cos θ|, θ between the axis and the line of sight ``v`` to its
    centre ``m``); stretched by 1/|cos θ| along the projected axis that hull is a
    stadium of radius r. Each pixel ray is met with the plane through ``m``
    normal to ``v``; the stadium's signed distance there, divided by the
    stretch's gradient, is the outline distance [m] at depth |m|, times f/|m| in
    pixels. Orthographic about ``m`` (a cylinder 0.05 m across at 2.5 m: under
    0.1 px); |cos θ| is held above 0.05 (a cylinder seen side-on).
    """
    return _cyl_forward(A, Bp, r, d, f, min_depth, eps).e


def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a × b for vectors stacked on dim 0, (3, ...)."""
    return torch.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _cyl_forward(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                 min_depth: float, eps: float) -> SimpleNamespace:
    """:func:`cylinder_edge_px`'s forward pass with every intermediate kept (for
    :func:`cylinder_edge_px_grad`)."""
    m = 0.5 * (A + Bp)
    w = 0.5 * (Bp - A)  # the half axis
    h = torch.sqrt((w * w).sum(0) + eps)
    u = w / h
    zm = torch.sqrt((m * m).sum(0) + eps)
    v = m / zm
    c = (u * v).sum(0)
    ca = c.abs().clamp_min(0.05)
    p = u - c * v
    sn = torch.sqrt((p * p).sum(0) + eps)
    y = p / sn
    x = _cross(v, y)
    dv = (d * v).sum(0)
    dvc = dv.clamp_min(1e-6)
    k = zm / dvc
    q = d * k - m
    qx = (q * x).sum(0)
    qy = (q * y).sum(0)
    ys = qy / ca
    L = h * sn / ca
    dy = ys - torch.maximum(torch.minimum(ys, L), -L)
    # (r − dist) / |∇ dist| with ∇ in the unstretched plane: |∇| = sqrt(qx² + dy²/c²) / dist
    D = qx * qx + dy * dy + eps
    sq = torch.sqrt(D)
    N = qx * qx + dy * dy / (ca * ca) + eps
    g = torch.sqrt(D / N)
    e_m = (r - sq) * g
    e_raw = f * e_m / zm
    front = (zm > min_depth) & (dv > 0)
    e = torch.where(front, e_raw, torch.full_like(e_raw, -1e3))
    return SimpleNamespace(m=m, w=w, h=h, u=u, zm=zm, v=v, c=c, ca=ca, p=p, sn=sn, y=y, x=x, dv=dv, dvc=dvc,
                           q=q, qx=qx, ys=ys, L=L, dy=dy, D=D, sq=sq, N=N, g=g, e_raw=e_raw, front=front, e=e)


def cylinder_edge_px_grad(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                          min_depth: float, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`cylinder_edge_px` and its derivatives with respect to A and B, in closed form (no autograd).

    A, Bp, d: (3, Q); r: (Q,). Returns ``e`` (Q,), ``∂e/∂A`` (3, Q), ``∂e/∂B`` (3, Q): the adjoints
    of :func:`_cyl_forward`'s steps in reverse order (``b_x`` is ∂e/∂x). Equal to autograd through
    :func:`cylinder_edge_px` (tests/tracker/test_edges.py checks it).
    """
    t = _cyl_forward(A, Bp, r, d, f, min_depth, eps)
    m, w, h, u, zm, v, c, ca, p, sn, y, x = t.m, t.w, t.h, t.u, t.zm, t.v, t.c, t.ca, t.p, t.sn, t.y, t.x
    dv, dvc, q, qx, ys, L, dy, D, sq, N, g, e_raw, front, e = (
        t.dv, t.dvc, t.q, t.qx, t.ys, t.L, t.dy, t.D, t.sq, t.N, t.g, t.e_raw, t.front, t.e)

    one = front.to(A.dtype)
    b_em = one * f / zm
    b_zm = -one * e_raw / zm
    b_sq = -g * b_em
    b_g = (r - sq) * b_em
    b_D = b_sq / (2 * sq) + b_g * g / (2 * D)
    b_N = -b_g * g / (2 * N)
    b_qx = 2 * qx * (b_D + b_N)
    b_dy = 2 * dy * (b_D + b_N / (ca * ca))
    b_ca = -2 * dy * dy / (ca * ca * ca) * b_N
    out = ((ys > L) | (ys < -L)).to(A.dtype)
    b_ys = out * b_dy
    b_L = -out * torch.sign(ys) * b_dy
    b_h = b_L * sn / ca
    b_sn = b_L * h / ca
    b_ca = b_ca - b_L * L / ca - b_ys * ys / ca
    b_qy = b_ys / ca
    b_q = b_qx * x + b_qy * y
    b_x = b_qx * q
    b_y = b_qy * q
    b_k = (b_q * d).sum(0)
    b_m = -b_q
    b_zm = b_zm + b_k / dvc
    b_dv = torch.where(dv > 1e-6, -b_k * zm / (dvc * dvc), torch.zeros_like(dv))
    b_v = b_dv * d + _cross(y, b_x)
    b_y = b_y + _cross(b_x, v)
    b_p = b_y / sn
    b_sn = b_sn - (b_y * p).sum(0) / (sn * sn)
    b_p = b_p + b_sn * p / sn
    b_u = b_p
    b_c = -(b_p * v).sum(0) + b_ca * torch.sign(c) * (c.abs() > 0.05).to(A.dtype)
    b_v = b_v - c * b_p + b_c * u
    b_u = b_u + b_c * v
    b_m = b_m + b_v / zm
    b_zm = b_zm - (b_v * m).sum(0) / (zm * zm)
    b_m = b_m + b_zm * m / zm
    b_w = b_u / h
    b_h = b_h - (b_u * w).sum(0) / (h * h)
    b_w = b_w + b_h * w / h
    return e, 0.5 * (b_m - b_w), 0.5 * (b_m + b_w)


def kind_order(cylinders: Optional[np.ndarray]) -> tuple[Optional[torch.Tensor], Optional[int]]:
    """The primitives reordered with the capsules first and the cylinders last: (the order (M,), None
    when they already are so; the number of capsules, None when there are no cylinders).

    The silhouette and its derivatives do not depend on the primitives' order, and
    :func:`~snaketrack.tracker.render.bands.primitive_pixels` lists the pairs grouped by primitive in that
    order, so in this order the capsule pairs are a leading slice of the pairs and the cylinder pairs
    the rest (:func:`edge_px`).
    """
    if cylinders is None:
        return None, None
    cyl = np.asarray(cylinders, bool)
    if not cyl.any():
        return None, None
    n_cap = int(np.count_nonzero(~cyl))
    if not cyl[:n_cap].any():
        return None, n_cap
    return torch.from_numpy(np.argsort(cyl, kind="stable")), n_cap


def edge_px(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float, min_depth: float,
            n_cap: Optional[int]) -> torch.Tensor:
    """Edge distance [px] of each pair (pairs on the last axis): :func:`capsule_edge_px` for the first
    ``n_cap`` pairs (capsules; None: all), :func:`cylinder_edge_px` for the rest (cylinders;
    :func:`kind_order`)."""
    Q = A.shape[-1]
    if n_cap is None or n_cap >= Q:
        return capsule_edge_px(A, Bp, r, d, f, min_depth)
    if n_cap <= 0:
        return cylinder_edge_px(A, Bp, r, d, f, min_depth)
    caps, cyls = _split(n_cap, A, Bp, r, d)
    return torch.cat([capsule_edge_px(*caps, f, min_depth), cylinder_edge_px(*cyls, f, min_depth)], -1)


def edge_px_grads(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float, min_depth: float,
                  n_cap: Optional[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``∂e/∂A``, ``∂e/∂B`` (3, Q) of :func:`edge_px` for one state's pairs (A, Bp, d (3, Q); r (Q,)),
    in closed form: :func:`capsule_edge_px_grad` for the first ``n_cap`` pairs (capsules),
    :func:`cylinder_edge_px_grad` for the rest (cylinders)."""
    Q = A.shape[-1]
    if n_cap is None or n_cap >= Q:
        return capsule_edge_px_grad(A, Bp, r, d, f, min_depth)[1:]
    if n_cap <= 0:
        return cylinder_edge_px_grad(A, Bp, r, d, f, min_depth)[1:]
    caps, cyls = _split(n_cap, A, Bp, r, d)
    _, gAk, gBk = capsule_edge_px_grad(*caps, f, min_depth)
    _, gAc, gBc = cylinder_edge_px_grad(*cyls, f, min_depth)
    return torch.cat([gAk, gAc], -1), torch.cat([gBk, gBc], -1)


def _split(n: int, *pairs: torch.Tensor):
    """Pair tensors (pairs on the last axis) cut after the first ``n`` pairs: (leading slices, the rest)."""
    return [t[..., :n] for t in pairs], [t[..., n:] for t in pairs]
