"""Differentiable soft silhouettes of capsules under a pinhole camera (plain PyTorch).

The robot's silhouette model is a set of *primitives*: capsules (a segment
``A→B`` and a radius ``r``; a sphere is a capsule with ``A = B``), each fixed
to one link frame (:class:`CapsuleModel`). For every pixel ray ``d`` (unit,
through the pixel centre, ``d ∝ K⁻¹ [u, v, 1]``) and every primitive, the
renderer takes the exact distance between the ray and the primitive's axis
segment,

    s* = clamp(argmin_s |P(s) − (P(s)·d) d|, 0, 1),  P(s) = A + s (B − A)
    dist = |P(s*) − (P(s*)·d) d|,   depth z = P(s*)·d,

turns it into a signed distance to the silhouette edge in *pixels*,
``e = f (r − dist) / z + b`` (``f`` the focal length [px], ``b`` an optional
edge offset [px] that dilates (+) or erodes (−) the model), and a coverage
``c = sigmoid(e / σ)`` with the edge softness ``σ`` [px]. A pixel is covered
by the soft union ``o = 1 − Π_k (1 − c_k)``, computed as
``1 − exp(Σ log sigmoid(−e_k/σ))`` (stable).

``dist ≤ r`` is exactly the condition for the ray to hit the capsule, so at
``σ → 0`` this is a hard capsule rendering (tested against a brute-force
ray–capsule intersection in tests/tracker/test_render.py).

A primitive flagged as a flat-ended *cylinder* (``cylinders=``; the planar
snake's joint housings) takes its edge distance from :func:`_edge_px_cyl`
instead: the outline of the hull of its two end discs, tested against a
ray-traced cylinder; its derivatives are in closed form too
(:func:`_edge_px_cyl_grad`, checked against autograd).

Cost follows the robot's size in the image, not the frame's: each primitive
is evaluated only on the pixels of its own screen band (within its projected
radius, ``|b|`` and ``margin_sigmas · σ`` of its projected axis segment,
magnified for off-axis views; :func:`primitive_pixels`), as a flat list of
(pixel, primitive) pairs, and only inside the region of interest (ROI) asked
for. The soft union is a scatter-add over those pairs.

:func:`render_with_jacobian` gives the silhouette and its Jacobian with
respect to the primitives' end points (and the edge offset) in one pass
without autograd: each pair's coverage depends only on its own primitive,
so the per-pair derivatives ``∂e/∂(A, B)`` are taken in closed form
(:func:`_edge_px_grad`, :func:`_edge_px_cyl_grad`, checked against
autograd), only for the pairs near
a visible edge, and the soft union's product rule is applied by hand,
``∂o/∂e_k = (1 − o) c_k / σ``.

Shapes: B states, M primitives, pixels of an ROI ``(u0, v0, w, h)`` (top-left
pixel and size) flattened row-major, ``P = w·h``. Units: metres in the
camera frame (OpenCV: x right, y down, z forward), pixels in the image.

>>> import torch
>>> K = torch.tensor([[300.0, 0, 31.5], [0, 300.0, 23.5], [0, 0, 1]], dtype=torch.float64)
>>> A = torch.tensor([[[-0.05, 0.0, 1.0]]], dtype=torch.float64)
>>> B = torch.tensor([[[0.05, 0.0, 1.0]]], dtype=torch.float64)
>>> sil = soft_silhouette(A, B, torch.tensor([0.01], dtype=torch.float64), K, (0, 0, 64, 48),
...                       SilhouetteSettings(sigma_px=0.05))
>>> import math   # a 30 px × 6 px band and two half discs of radius 3 px
>>> abs(float(sil[0].sum()) - (30 * 6 + math.pi * 3 ** 2)) < 5
True
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from snaketrack.errors import InputError
from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.robot import Robot

ROI = tuple  # (u0, v0, w, h) in pixels

# The head cap, an ellipsoid of semi-axes (1.6c, c, 0.9c), as a capsule of
# radius 0.88c along x from -0.66c to +0.66c: the capsule of best mean IoU
# against its two views along the axis (0.922; the earlier 0.95c, ±0.6c: 0.902).
HEAD_RADIUS = 0.88
HEAD_HALF_LENGTH = 0.66


@dataclass(frozen=True)
class SilhouetteSettings:
    """Renderer settings.

    sigma_px: edge softness σ [px] of the sigmoid. Keep it sharp (≤ 0.5 px):
        a soft edge makes the soft union of overlapping parts fatter and
        biases depth (shared/notes/tracker-refinement.md).
    margin_sigmas: how far past the hard edge each primitive is evaluated,
        in units of σ (coverage there is below sigmoid(−margin) ≈ 2e-4 at 8).
    min_depth: rays meeting a primitive closer than this [m] are treated as
        not covered (the robot is behind the camera or clipped).
    """

    sigma_px: float = 0.5
    margin_sigmas: float = 8.0
    min_depth: float = 0.05


@dataclass(frozen=True)
class CapsuleModel:
    """Silhouette primitives fixed to link frames.

    link: (M,) link index (0-based) each primitive is attached to.
    a_local, b_local: (M, 3) end points of the axis segment in the link frame [m].
    radius: (M,) radius [m].
    cylinders: optional (M,) bool: the primitive is a flat-ended cylinder from
        ``a_local`` to ``b_local`` (the renderer draws its own edge,
        :func:`_edge_px_cyl`), not a capsule; None: none is.
    """

    link: np.ndarray
    a_local: np.ndarray
    b_local: np.ndarray
    radius: np.ndarray
    cylinders: Optional[np.ndarray] = None

    @property
    def n(self) -> int:
        return int(len(self.link))

    @classmethod
    def capsules(cls, robot: Robot) -> "CapsuleModel":
        """One capsule per link, the description's length and radius (the kinematic model)."""
        n = robot.n_links
        a = np.zeros((n, 3))
        b = np.zeros((n, 3))
        b[:, 0] = robot.lengths
        return cls(link=np.arange(n), a_local=a, b_local=b, radius=robot.radii.astype(float))

    @classmethod
    def from_visual(cls, robot: Robot, housings: str = "cylinder") -> "CapsuleModel":
        """The robot as it looks (``robot.visual``), approximated by capsules and spheres.

        Per link a capsule of the visual body radius; a sphere at each joint
        of the housing radius, or for a cylindrical housing (radius R,
        half-length h) along the joint axis: with ``housings="cylinder"`` the
        cylinder itself, drawn with its own edge (``cylinders``,
        :func:`_edge_px_cyl`); with ``housings="capsule"`` (the model before
        the twelfth session) a capsule of radius R from −h/2 to +h/2. IoU at
        the true pose against the masks (every 20th frame, hard edges),
        capsule → cylinder: static-planar-s0 0.967 → 0.996, static-planar-s23
        0.937 → 0.995, drone-planar-s0 0.974 → 0.986; the capsule made the
        static tracks sit too deep (docs/notebook/tracker.md, rule C2). A sphere for the
        tail cap; and for the ellipsoidal head cap
        (semi-axes 1.6c, c, 0.9c along x, y, z at the head end) a capsule
        along x (:data:`HEAD_RADIUS`, :data:`HEAD_HALF_LENGTH`). Modelling the housings raised IoU at the true
        pose from about 0.9 to 0.99 on rendered masks (tracker-refinement note).

        The body cylinders end flat; a capsule's half disc would reach past
        the flat end wherever the cap there is narrower than the body (the
        arcsnake's tail: body 0.026 m, cap 0.024 m), and a silhouette too
        long sits too deep. So the two free ends' body capsules are pulled
        in by the inset of :func:`free_end_inset`, which makes the end cover
        the flat-ended cylinder's area with its cap (seen square-on to the
        link's axis).
        """
        vis = robot.visual
        c = vis.cap_radius
        L_head = robot.lengths[-1]
        r_tail, r_head = vis.body_radius[0], vis.body_radius[-1]
        disc = lambda rad: (lambda x, y: x * x + y * y <= rad * rad)  # noqa: E731
        inset_tail = free_end_inset(r_tail, [disc(c)], [disc(c)])
        inset_head = free_end_inset(
            r_head,
            # the head ellipsoid seen from above (semi-axes 1.6c, c) and from the side (1.6c, 0.9c)
            [lambda x, y: (x / (1.6 * c)) ** 2 + (y / c) ** 2 <= 1,
             lambda x, y: (x / (1.6 * c)) ** 2 + (y / (0.9 * c)) ** 2 <= 1],
            [_capsule_2d(-HEAD_HALF_LENGTH * c, HEAD_HALF_LENGTH * c, HEAD_RADIUS * c)] * 2)
        n = robot.n_links
        if n == 1:  # one link: both insets on it, never past its middle
            inset_tail = min(inset_tail, 0.5 * L_head)
            inset_head = min(inset_head, 0.5 * L_head)
        if housings not in ("cylinder", "capsule"):
            raise InputError(f"housings {housings!r}; expected 'cylinder' or 'capsule'")
        links, A, B, R, cyl = [], [], [], [], []
        for i, L in enumerate(robot.lengths):
            links.append(i)
            A.append([inset_tail if i == 0 else 0.0, 0, 0])
            B.append([L - inset_head if i == n - 1 else L, 0, 0])
            R.append(vis.body_radius[i])
        unit = {"x": np.array([1.0, 0, 0]), "y": np.array([0, 1.0, 0]), "z": np.array([0, 0, 1.0])}
        for i in range(1, robot.n_links):  # housing attached to the child link, at its origin
            links.append(i)
            if vis.housing_shape == "cylinder" and housings == "cylinder":
                a = vis.housing_half_length * unit[robot.joints[i - 1].axes[0]]
                A.append(list(-a))
                B.append(list(a))
                cyl.append(len(R))
            elif vis.housing_shape == "cylinder":
                # a capsule along the joint axis, half the housing's half-length each way
                a = 0.5 * vis.housing_half_length * unit[robot.joints[i - 1].axes[0]]
                A.append(list(-a))
                B.append(list(a))
            else:
                A.append([0.0, 0, 0])
                B.append([0.0, 0, 0])
            R.append(vis.housing_radius)
        links.append(0)
        A.append([0.0, 0, 0])
        B.append([0.0, 0, 0])
        R.append(vis.cap_radius)
        L = robot.lengths[-1]
        links.append(robot.n_links - 1)
        A.append([L - HEAD_HALF_LENGTH * c, 0, 0])
        B.append([L + HEAD_HALF_LENGTH * c, 0, 0])
        R.append(HEAD_RADIUS * c)
        is_cyl = np.zeros(len(R), bool)
        is_cyl[cyl] = True
        return cls(link=np.array(links), a_local=np.array(A, float), b_local=np.array(B, float),
                   radius=np.array(R, float), cylinders=is_cyl if is_cyl.any() else None)

    def place(self, rotations: torch.Tensor, origins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Primitive end points (B, M, 3) in the camera frame from link frames (B, N, 3, 3), (B, N, 3)."""
        dt = origins.dtype
        idx = torch.as_tensor(self.link, device=origins.device)
        Rk = rotations[:, idx]
        ok = origins[:, idx]
        a = torch.as_tensor(self.a_local, dtype=dt, device=origins.device)
        b = torch.as_tensor(self.b_local, dtype=dt, device=origins.device)
        return ok + (Rk @ a[..., None])[..., 0], ok + (Rk @ b[..., None])[..., 0]


def _capsule_2d(x0: float, x1: float, r: float):
    """Indicator of a 2-D capsule (segment x0→x1 on the x axis, radius r [m]) on grids x, y."""
    return lambda x, y: (np.maximum(np.maximum(x0 - x, x - x1), 0.0) ** 2 + y * y) <= r * r


def free_end_inset(r: float, truth_caps, model_caps, cells_per_radius: int = 40) -> float:
    """Inset δ [m] of a body capsule's free end that matches a flat-ended cylinder's area.

    Seen square-on to its axis, a flat-ended cylinder of radius ``r`` [m]
    ending at x = 0 (body on x < 0) is a band; with its end cap it covers
    ``band ∪ cap``. The model's capsule, ending at x = −δ, covers
    ``capsule ∪ model cap``. The result is the δ in [0, r] at which the two
    areas agree (0 if the capsule is not larger even at δ = 0), found by
    bisection on a grid of ``r / cells_per_radius`` cells.

    ``truth_caps``, ``model_caps``: one indicator ``f(x, y) -> bool array``
    per view (same length); the areas are summed over the views.

    >>> none = lambda x, y: np.zeros(np.shape(x), bool)   # no cap: the half disc's area is a band πr/4 long
    >>> abs(free_end_inset(0.02, [none], [none]) - np.pi * 0.02 / 4) < 2e-5
    True
    >>> disc = lambda rad: (lambda x, y: x * x + y * y <= rad * rad)
    >>> round(free_end_inset(0.026, [disc(0.024)], [disc(0.024)]), 3)   # the arcsnake's tail
    0.007
    >>> free_end_inset(0.016, [disc(0.019)], [disc(0.019)])   # a cap wider than the body hides its end
    0.0
    """
    h = r / cells_per_radius
    reach = 4.0 * r
    for f in list(truth_caps) + list(model_caps):  # widen the grid until no cap touches its edge
        while True:
            ext = np.arange(-reach, reach, h) + 0.5 * h
            X, Y = np.meshgrid(ext, ext)
            m = f(X, Y)
            if not (m[0].any() or m[-1].any() or m[:, -1].any()):
                break
            reach *= 1.5
    x = np.arange(-2.0 * r, reach, h) + 0.5 * h  # cell centres
    y = np.arange(-reach, reach, h) + 0.5 * h
    X, Y = np.meshgrid(x, y)
    band = (X <= 0) & (np.abs(Y) <= r)
    target = sum(int((band | t(X, Y)).sum()) for t in truth_caps)
    caps = [m(X, Y) for m in model_caps]

    def area(d: float) -> int:
        body = _capsule_2d(-4.0 * r, -d, r)(X, Y)
        return sum(int((body | m).sum()) for m in caps)

    if area(0.0) <= target:
        return 0.0
    lo, hi = 0.0, r
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if area(mid) > target else (lo, mid)
    return 0.5 * (lo + hi)


def _check_inputs(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor):
    if starts.ndim != 3 or starts.shape[-1] != 3 or ends.shape != starts.shape:
        raise InputError(f"capsule end points: shapes {tuple(starts.shape)}, {tuple(ends.shape)}; expected (B, M, 3) each")
    if radii.shape != (starts.shape[1],):
        raise InputError(f"capsule radii: shape {tuple(radii.shape)}; expected ({starts.shape[1]},)")
    if K.shape != (3, 3):
        raise InputError(f"K: shape {tuple(K.shape)}; expected (3, 3)")


def _check_roi(roi: Sequence[int]) -> tuple[int, int, int, int]:
    if len(roi) != 4 or int(roi[2]) < 1 or int(roi[3]) < 1:
        raise InputError(f"roi = {tuple(roi)}; expected (u0, v0, w, h) with w, h >= 1")
    return tuple(int(v) for v in roi)  # type: ignore[return-value]


def _projected(starts, ends, radii, K, roi, pad_px):
    """Projected axis end points u, v (B, M, 2) in ROI pixels, their depth z (B, M, 2) [m],
    and the half-width [px] (B, M) of each primitive's silhouette band, padded by ``pad_px``.

    The half-width is ``f r / z_near · m + pad_px · m²`` with the off-axis
    magnification ``m = sqrt(1 + (ρ/f)²)`` (``ρ`` [px]: the farther end's
    distance from the principal point): a ball of radius ``r`` at an angle
    ``θ`` off the optical axis images as an ellipse stretched radially by
    ``1/cos θ`` relative to ``f r / z``, and an edge offset of ``pad_px`` by
    ``1/cos² θ``. One pixel of slack covers the second-order terms.
    """
    u0, v0, _, _ = roi
    # numpy: a handful of primitives, where torch's per-call overhead would dominate
    P = np.stack([starts.detach().double().cpu().numpy(), ends.detach().double().cpu().numpy()], axis=2)
    Kd = K.detach().double().cpu().numpy() if torch.is_tensor(K) else np.asarray(K, float)
    rad = radii.detach().double().cpu().numpy() if torch.is_tensor(radii) else np.asarray(radii, float)
    z = P[..., 2]
    zc = np.maximum(z, 1e-3)
    u = Kd[0, 0] * P[..., 0] / zc + Kd[0, 1] * P[..., 1] / zc + Kd[0, 2]
    v = Kd[1, 1] * P[..., 1] / zc + Kd[1, 2]
    f = 0.5 * float(Kd[0, 0] + Kd[1, 1])
    rho2 = ((u - Kd[0, 2]) ** 2 + (v - Kd[1, 2]) ** 2).max(axis=2)
    rpx = f * rad[None, :] / zc.min(axis=2)
    mag = np.sqrt(1.0 + (np.sqrt(rho2) + rpx) ** 2 / f ** 2)
    half = rpx * mag + pad_px * mag * mag + 1.0  # (B, M)
    return u - u0, v - v0, z, half


def primitive_boxes(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                    roi: Sequence[int], pad_px: float) -> np.ndarray:
    """Integer screen boxes (M, 4) = (u_lo, v_lo, u_hi, v_hi), inclusive, in ROI coordinates.

    The box of a primitive bounds the projections of both end points padded
    by the projected radius (at the nearer end's depth, magnified off-axis,
    see :func:`_projected`) and ``pad_px``; it is the union over the batch
    and clipped to the ROI. A primitive wholly behind the camera gets an
    empty box (lo > hi).
    """
    u0, v0, w, h = _check_roi(roi)
    u, v, z, half = _projected(starts, ends, radii, K, (u0, v0, w, h), pad_px)
    return _boxes(u, v, z, half, w, h)


def _boxes(u, v, z, half, w, h) -> np.ndarray:
    ulo = np.floor((u.min(axis=2) - half).min(axis=0))
    uhi = np.ceil((u.max(axis=2) + half).max(axis=0))
    vlo = np.floor((v.min(axis=2) - half).min(axis=0))
    vhi = np.ceil((v.max(axis=2) + half).max(axis=0))
    behind = (z.max(axis=2) < 1e-3).all(axis=0)
    boxes = np.stack([np.clip(ulo, 0, w - 1), np.clip(vlo, 0, h - 1), np.clip(uhi, -1, w - 1),
                      np.clip(vhi, -1, h - 1)], -1)
    boxes = np.clip(boxes, -1e6, 1e6).astype(np.int64)
    out = (uhi < 0) | (ulo > w - 1) | behind | (vhi < 0) | (vlo > h - 1)
    boxes[out, 2] = -1
    boxes[out, 0] = 0
    return boxes


def _band_spans(au, av, bu, bv, half, vv):
    """Pixel spans [lo, hi] (float) where rows ``vv`` meet the bands within ``half`` px of segments a→b.

    All arguments are arrays of one shape (one entry per row). The band (a
    2-D capsule) is convex, so each row meets it in one interval: the union
    of the row's intervals through the disc at a, the disc at b and the
    rectangle between them (a row that misses gets lo > hi).
    """
    lo = np.full(vv.shape, np.inf)
    hi = np.full(vv.shape, -np.inf)
    for cu, cv in ((au, av), (bu, bv)):
        dv = vv - cv
        inside = np.abs(dv) <= half
        du = np.sqrt(np.maximum(half * half - dv * dv, 0.0))
        lo = np.where(inside, np.minimum(lo, cu - du), lo)
        hi = np.where(inside, np.maximum(hi, cu + du), hi)
    eu, ev = bu - au, bv - av
    L = np.hypot(eu, ev)
    seg = L > 1e-9
    Ls = np.where(seg, L, 1.0)
    ex, ey = eu / Ls, ev / Ls
    dv = vv - av
    rlo = np.full(vv.shape, -np.inf)
    rhi = np.full(vv.shape, np.inf)
    ok = seg.copy()
    # along the axis: 0 <= ex (u − a_u) + ey dv <= L;  across: |−ey (u − a_u) + ex dv| <= half
    with np.errstate(divide="ignore", invalid="ignore"):
        for coef, offs, b0, b1 in ((ex, ey * dv, 0.0, L), (-ey, ex * dv, -half, half)):
            free = np.abs(coef) > 1e-12
            cs = np.where(free, coef, 1.0)
            t1, t2 = (b0 - offs) / cs, (b1 - offs) / cs
            rlo = np.where(free, np.maximum(rlo, np.minimum(t1, t2)), rlo)
            rhi = np.where(free, np.minimum(rhi, np.maximum(t1, t2)), rhi)
            ok &= free | ((offs >= b0) & (offs <= b1))
    ok &= rlo <= rhi
    lo = np.where(ok, np.minimum(lo, au + rlo), lo)
    hi = np.where(ok, np.maximum(hi, au + rhi), hi)
    return lo, hi


def primitive_pixels(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                     roi: Sequence[int], pad_px: float, band: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The (pixel, primitive) pairs to evaluate: ROI pixel indices (row-major) and primitive, int64 arrays.

    A pixel is listed for a primitive when its centre lies within the
    primitive's padded half-width (:func:`_projected`) of the projected axis
    segment of any state in the batch: a band along the segment rather than
    its whole bounding box (a diagonal link's box holds several times the
    pixels of its band). Conservative: every pixel whose signed edge
    distance exceeds ``−pad_px`` is listed (tests/tracker/test_render.py).
    Pairs come grouped by primitive, in primitive order. ``band=False``
    lists each primitive's whole screen box instead (the reference, for
    benchmarks).
    """
    u0, v0, w, h = _check_roi(roi)
    u, v, z, half = _projected(starts, ends, radii, K, (u0, v0, w, h), pad_px)
    boxes = _boxes(u, v, z, half, w, h)
    n_rows = np.maximum(np.where(boxes[:, 2] >= boxes[:, 0], boxes[:, 3] - boxes[:, 1] + 1, 0), 0)
    total = int(n_rows.sum())
    if total == 0:
        e = np.zeros(0, np.int64)
        return e, e
    M = boxes.shape[0]
    prim_r = np.repeat(np.arange(M), n_rows)
    vv_i = boxes[prim_r, 1] + (np.arange(total) - np.repeat(np.cumsum(n_rows) - n_rows, n_rows))
    vv = vv_i.astype(float)
    lo = np.full(total, np.inf)
    hi = np.full(total, -np.inf)
    for bi in range(u.shape[0] if band else 0):
        l_b, h_b = _band_spans(u[bi, prim_r, 0], v[bi, prim_r, 0], u[bi, prim_r, 1], v[bi, prim_r, 1],
                               half[bi, prim_r], vv)
        lo, hi = np.minimum(lo, l_b), np.maximum(hi, h_b)
    # the whole box row: asked for (band=False), or an end behind the camera (its projection is unbounded)
    unbounded = (z[:, prim_r].min(axis=(0, 2)) < 1e-3) | (not band)
    ul, uh = boxes[prim_r, 0], boxes[prim_r, 2]
    lo = np.where(unbounded, ul, np.maximum(np.ceil(lo), ul))
    hi = np.where(unbounded, uh, np.minimum(np.floor(hi), uh))
    n = np.where(hi >= lo, hi - lo + 1, 0).astype(np.int64)
    tot = int(n.sum())
    first = vv_i * w + np.where(n > 0, lo, 0).astype(np.int64)
    pix = np.repeat(first - (np.cumsum(n) - n), n) + np.arange(tot)
    return pix, np.repeat(prim_r, n)


def _pairs(pairs: tuple[np.ndarray, np.ndarray], w: int, device, roi=None, image_width: Optional[int] = None):
    """Torch (pixel, primitive) pairs from :func:`primitive_pixels`.

    With ``roi`` and ``image_width`` also the pixels' row-major index in the whole image.
    """
    pix_np, prim_np = pairs
    out = (torch.as_tensor(pix_np, device=device), torch.as_tensor(prim_np, device=device))
    if image_width is not None:
        u0, v0 = int(roi[0]), int(roi[1])
        g = (pix_np // w + v0) * int(image_width) + (pix_np % w + u0)
        out = out + (torch.as_tensor(g, device=device),)
    return out


_RAY_TABLES: dict = {}


def ray_table(K: torch.Tensor, width: int, height: int, dtype=torch.float32) -> torch.Tensor:
    """Unit rays (3, height·width) through every pixel centre of the image (cached per K, size, dtype)."""
    Kn = K.detach().double().cpu().numpy()
    key = (Kn.tobytes(), int(width), int(height), dtype)
    tab = _RAY_TABLES.get(key)
    if tab is None:
        if len(_RAY_TABLES) > 8:
            _RAY_TABLES.clear()
        pix = torch.arange(int(width) * int(height))
        tab = _rays(pix, (0, 0, int(width), int(height)), torch.as_tensor(Kn), torch.float64).T.to(dtype).contiguous()
        _RAY_TABLES[key] = tab
    return tab


def _rays(pix: torch.Tensor, roi: tuple[int, int, int, int], K: torch.Tensor, dtype) -> torch.Tensor:
    """Unit ray directions (Q, 3) through the centres of ROI pixels ``pix``."""
    u0, v0, w, _ = roi
    u = (pix % w).to(dtype) + u0
    v = torch.div(pix, w, rounding_mode="floor").to(dtype) + v0
    Kd = K.to(dtype)
    y = (v - Kd[1, 2]) / Kd[1, 1]
    x = (u - Kd[0, 2] - Kd[0, 1] * y) / Kd[0, 0]
    d = torch.stack([x, y, torch.ones_like(x)], -1)
    return d / d.norm(dim=-1, keepdim=True)


def _edge_px_cyl(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
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
    """:func:`_edge_px_cyl`'s forward pass with every intermediate kept (for :func:`_edge_px_cyl_grad`)."""
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


def _edge_px_cyl_grad(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                      min_depth: float, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_edge_px_cyl` and its derivatives with respect to A and B, in closed form (no autograd).

    A, Bp, d: (3, Q); r: (Q,). Returns ``e`` (Q,), ``∂e/∂A`` (3, Q), ``∂e/∂B`` (3, Q): the adjoints
    of :func:`_cyl_forward`'s steps in reverse order (``b_x`` is ∂e/∂x). Equal to autograd through
    :func:`_edge_px_cyl` (tests/tracker/test_render.py).
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


def _kind_order(cylinders: Optional[np.ndarray]) -> tuple[Optional[torch.Tensor], Optional[int]]:
    """The primitives reordered with the capsules first and the cylinders last: (the order (M,), None
    when they already are so; the number of capsules, None when there are no cylinders).

    The silhouette and its derivatives do not depend on the primitives' order, and
    :func:`primitive_pixels` lists the pairs grouped by primitive in that order, so in this order the
    capsule pairs are a leading slice of the pairs and the cylinder pairs the rest (:func:`_edges`).
    """
    if cylinders is None:
        return None, None
    cyl = np.asarray(cylinders, bool)
    if not cyl.any():
        return None, None
    n_cap = int(np.count_nonzero(~cyl))
    if not cyl[:n_cap].any():
        return None, n_cap
    return torch.as_tensor(np.argsort(cyl, kind="stable")), n_cap


def _edges(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float, min_depth: float,
           n_cap: Optional[int]) -> torch.Tensor:
    """Edge distance [px] of each pair (pairs on the last axis): :func:`_edge_px` for the first ``n_cap``
    pairs (capsules; None: all), :func:`_edge_px_cyl` for the rest (cylinders; :func:`_kind_order`)."""
    Q = A.shape[-1]
    if n_cap is None or n_cap >= Q:
        return _edge_px(A, Bp, r, d, f, min_depth)
    if n_cap <= 0:
        return _edge_px_cyl(A, Bp, r, d, f, min_depth)
    caps, cyls = _split(n_cap, A, Bp, r, d)
    return torch.cat([_edge_px(*caps, f, min_depth), _edge_px_cyl(*cyls, f, min_depth)], -1)


def _edge_grads(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float, min_depth: float,
                n_cap: Optional[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``∂e/∂A``, ``∂e/∂B`` (3, Q) of :func:`_edges` for one state's pairs (A, Bp, d (3, Q); r (Q,)), in
    closed form: :func:`_edge_px_grad` for the first ``n_cap`` pairs (capsules), :func:`_edge_px_cyl_grad`
    for the rest (cylinders)."""
    Q = A.shape[-1]
    if n_cap is None or n_cap >= Q:
        return _edge_px_grad(A, Bp, r, d, f, min_depth)[1:]
    if n_cap <= 0:
        return _edge_px_cyl_grad(A, Bp, r, d, f, min_depth)[1:]
    caps, cyls = _split(n_cap, A, Bp, r, d)
    _, gAk, gBk = _edge_px_grad(*caps, f, min_depth)
    _, gAc, gBc = _edge_px_cyl_grad(*cyls, f, min_depth)
    return torch.cat([gAk, gAc], -1), torch.cat([gBk, gBc], -1)


def _split(n: int, *pairs: torch.Tensor):
    """Pair tensors (pairs on the last axis) cut after the first ``n`` pairs: (leading slices, the rest)."""
    return [t[..., :n] for t in pairs], [t[..., n:] for t in pairs]


def _edge_px_grad(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
                  min_depth: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_edge_px` and its derivatives with respect to A and B, in closed form (no autograd).

    A, Bp, d: (3, Q); r: (Q,). Returns ``e`` (Q,), ``∂e/∂A`` (3, Q), ``∂e/∂B`` (3, Q).
    With ``E = B − A``, ``X⊥ = X − (X·d) d``, the closest axis point
    ``P = A + s E`` (``s = −(A⊥·E⊥)/|E⊥|²`` clamped to [0, 1]), ``dist = |P⊥|``,
    ``z = P·d``: ``∂dist/∂A = (1 − s) P⊥/dist``, ``∂dist/∂B = s P⊥/dist``
    (``s`` is stationary or clamped), and for an unclamped ``s``
    ``∂s/∂A = (A⊥ + (2s − 1) E⊥)/|E⊥|²``, ``∂s/∂B = −(A⊥ + 2s E⊥)/|E⊥|²``, so
    ``∂z/∂A = (1 − s) d + (E·d) ∂s/∂A``, ``∂z/∂B = s d + (E·d) ∂s/∂B``;
    ``e = f (r − dist)/z`` gives ``∂e = −(f ∂dist + e ∂z)/z``. Equal to
    autograd through :func:`_edge_px` (tests/tracker/test_render.py).
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


def _edge_px(A: torch.Tensor, Bp: torch.Tensor, r: torch.Tensor, d: torch.Tensor, f: float,
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


def soft_silhouette(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                    roi: Sequence[int], settings: SilhouetteSettings = SilhouetteSettings(),
                    offset_px: Optional[torch.Tensor] = None,
                    cylinders: Optional[np.ndarray] = None) -> torch.Tensor:
    """Soft silhouette (B, h, w) in [0, 1] of capsules inside ``roi = (u0, v0, w, h)``.

    starts, ends: (B, M, 3) axis end points in the camera frame [m]; radii (M,) [m];
    K: (3, 3) intrinsics [px]; offset_px: optional (B,) edge offset [px];
    cylinders: optional (M,) bool, primitives drawn as flat-ended cylinders (:func:`_edge_px_cyl`).
    Differentiable in ``starts``, ``ends``, ``radii`` and ``offset_px``;
    computed in the dtype of ``starts`` (float32 or float64).
    """
    _check_inputs(starts, ends, radii, K)
    roi = _check_roi(roi)
    u0, v0, w, h = roi
    Bn = starts.shape[0]
    sig = float(settings.sigma_px)
    pad = settings.margin_sigmas * sig
    if offset_px is not None:
        pad += float(offset_px.detach().abs().max()) if offset_px.numel() else 0.0
    order, n_cap_prims = _kind_order(cylinders)
    if order is not None:
        order = order.to(starts.device)
        starts, ends, radii = starts[:, order], ends[:, order], radii[order]
    pairs = primitive_pixels(starts, ends, radii, K, roi, pad)
    pix, prim = _pairs(pairs, w, starts.device)
    out = torch.zeros(Bn, w * h, dtype=starts.dtype, device=starts.device)
    if pix.numel() == 0:
        return out.view(Bn, h, w)
    d = _rays(pix, roi, K, starts.dtype).T[:, None]  # (3, 1, Q)
    f = 0.5 * float(K[0, 0] + K[1, 1])
    A = starts[:, prim].permute(2, 0, 1)  # (3, B, Q)
    Bp = ends[:, prim].permute(2, 0, 1)
    n_cap = None if n_cap_prims is None else int(np.searchsorted(pairs[1], n_cap_prims))
    e = _edges(A, Bp, radii.to(starts.dtype)[prim], d, f, settings.min_depth, n_cap)
    if offset_px is not None:
        e = e + offset_px.to(starts.dtype)[:, None]
    logout = F.logsigmoid(-e / sig)  # log(1 − c)
    L = out.index_add(1, pix, logout)
    return (-torch.expm1(L)).view(Bn, h, w)


@dataclass(frozen=True)
class RenderJacobian:
    """A silhouette and its derivatives (one state), from :func:`render_with_jacobian`.

    sil: (P,) soft silhouette over the ROI pixels (row-major).
    d_points: (P, M, 2, 3)-shaped derivatives are never formed; instead
    rows: (R,) ROI pixel indices that have a non-negligible derivative, and
    jac: (R, D) derivatives of ``sil[rows]`` with respect to the parameters
        whose end-point Jacobian was given (plus a last column for the edge
        offset when ``with_offset``).
    """

    sil: torch.Tensor
    rows: torch.Tensor
    jac: torch.Tensor


def render_with_jacobian(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                         roi: Sequence[int], point_jac: torch.Tensor,
                         settings: SilhouetteSettings = SilhouetteSettings(),
                         offset_px: float = 0.0, with_offset: bool = False,
                         tol: float = 1e-6, compute_dtype: Optional[torch.dtype] = None,
                         image_size: Optional[tuple[int, int]] = None, band: bool = True,
                         cylinders: Optional[np.ndarray] = None) -> RenderJacobian:
    """Silhouette of one state and its Jacobian, in one pass.

    starts, ends: (1, M, 3) [m]; point_jac: (M, 2, 3, D) derivatives of each
    primitive's start and end point with respect to D parameters (e.g. from
    ``torch.func.jacfwd`` through forward kinematics). Returns the ROI's soft
    silhouette (P,) and the non-zero rows of ``∂sil/∂params`` (R, D[+1]).
    ``compute_dtype``: dtype of the per-pixel work (float32 is about twice as
    fast and accurate to ~0.01 px at a few metres); outputs are in the
    dtype of ``starts``. ``image_size``: (W, H) of the image the ROI lies
    in; given, the pixel rays come from a cached table (:func:`ray_table`).
    The derivatives are in closed form (:func:`_edge_px_grad`; for the
    ``cylinders`` :func:`_edge_px_cyl_grad`), evaluated only for the pairs
    whose derivative exceeds ``tol``. ``band``: see
    :func:`primitive_pixels`.
    """
    _check_inputs(starts, ends, radii, K)
    if starts.shape[0] != 1:
        raise InputError(f"render_with_jacobian: batch of {starts.shape[0]} states; expected 1")
    roi = _check_roi(roi)
    _, _, w, h = roi
    dt = starts.dtype
    sig = float(settings.sigma_px)
    order, n_cap_prims = _kind_order(cylinders)
    if order is not None:  # capsules first: each kind's pairs are then one slice
        starts, ends = starts.index_select(1, order), ends.index_select(1, order)
        radii, point_jac = radii.index_select(0, order), point_jac.index_select(0, order)
    pixels = primitive_pixels(starts, ends, radii, K, roi, settings.margin_sigmas * sig + abs(offset_px), band)
    glob = None
    if image_size is not None:
        pix, prim, glob = _pairs(pixels, w, starts.device, roi, image_size[0])
    else:
        pix, prim = _pairs(pixels, w, starts.device)
    D = point_jac.shape[-1] + (1 if with_offset else 0)
    if pix.numel() == 0:
        z = torch.zeros(0, dtype=torch.long)
        return RenderJacobian(torch.zeros(w * h, dtype=dt), z, torch.zeros(0, D, dtype=dt))
    cdt = compute_dtype or dt
    if glob is not None:
        d = ray_table(K, image_size[0], image_size[1], cdt).index_select(1, glob)  # (3, Q)
    else:
        d = _rays(pix, roi, K, cdt).T.contiguous()  # (3, Q)
    f = 0.5 * float(K[0, 0] + K[1, 1])
    S0 = starts[0].detach().to(cdt).T.contiguous()  # (3, M)
    E0 = ends[0].detach().to(cdt).T.contiguous()
    rad = radii.detach().to(cdt)
    # forward over all pairs; derivatives only for the pairs that have one (near a visible edge)
    n_cap = None if n_cap_prims is None else int(np.searchsorted(pixels[1], n_cap_prims))  # pairs by primitive
    e = _edges(S0.index_select(1, prim), E0.index_select(1, prim), rad.index_select(0, prim), d, f,
               settings.min_depth, n_cap)
    e = e + offset_px
    logout = F.logsigmoid(-e / sig)
    L = torch.zeros(w * h, dtype=cdt).index_add(0, pix, logout)
    sil = -torch.expm1(L)
    c = torch.sigmoid(e / sig)
    # o = 1 − Π(1 − c_k):  ∂o/∂e_k = Π_{j≠k}(1 − c_j) · dc_k/de_k = (1 − o)/(1 − c_k) · c_k(1 − c_k)/σ
    wgt = (1.0 - sil.index_select(0, pix)) * c / sig
    keep = torch.nonzero(wgt > tol).squeeze(1)
    pix_k, prim_k, wk = pix.index_select(0, keep), prim.index_select(0, keep), wgt.index_select(0, keep)
    n_cap_k = None if n_cap is None else int(torch.searchsorted(keep, n_cap))  # the kept capsule pairs
    gA, gB = _edge_grads(S0.index_select(1, prim_k), E0.index_select(1, prim_k), rad.index_select(0, prim_k),
                         d.index_select(1, keep), f, settings.min_depth, n_cap_k)
    M = starts.shape[1]
    gAB = torch.cat([gA, gB], 0) * wk  # (6, Q): ∂o/∂(A, B) per pair
    # rows: ROI pixels with a derivative; inv: each kept pair's row (a lookup table, no sort)
    seen = torch.zeros(w * h, dtype=torch.bool)
    seen[pix_k] = True
    rows = torch.nonzero(seen).squeeze(1)
    lut = torch.zeros(w * h, dtype=torch.long)
    lut[rows] = torch.arange(rows.numel())
    inv = lut.index_select(0, pix_k)
    # per pair: ∂o/∂θ = Σ_c ∂o/∂(A, B)_c · G[prim, c]; then summed per row (most rows hold one pair)
    G6 = point_jac.to(cdt).reshape(M, 6, -1)  # (M, 2, 3, D) → (A_x, A_y, A_z, B_x, B_y, B_z) per primitive
    Dp = G6.shape[-1]
    # the pairs come grouped by primitive (``_pairs`` lists them box by box): one small product per primitive
    counts = torch.bincount(prim_k, minlength=M).tolist()
    gT = gAB.T  # (Qk, 6)
    jp = torch.empty(gT.shape[0], Dp, dtype=cdt)
    lo = 0
    for m, n_m in enumerate(counts):
        if n_m:
            torch.mm(gT[lo:lo + n_m], G6[m], out=jp[lo:lo + n_m])
            lo += n_m
    jac = torch.zeros(rows.numel(), Dp, dtype=cdt).index_add_(0, inv, jp)
    if with_offset:
        jac = torch.cat([jac, torch.zeros(rows.numel(), 1, dtype=cdt).index_add(0, inv, wk[:, None])], 1)
    sil, jac = sil.to(dt), jac.to(dt)
    return RenderJacobian(sil, rows, jac)


class SilhouetteRenderer:
    """Renders a robot's silhouette from pose vectors (see :mod:`snaketrack.tracker.state`).

    ``robot``: the robot; ``K`` (3, 3) [px]; ``width``, ``height`` [px];
    ``model``: its :class:`CapsuleModel` (default: :meth:`CapsuleModel.from_visual`);
    ``settings``: :class:`SilhouetteSettings`, overridable per call.

    ``renderer(x)`` with pose vectors ``x`` (B, J + 6) gives ``(sil, roi)``:
    the soft silhouette (B, h, w) over the ROI (default: the robot's padded
    screen box, clipped to the image), and the ROI ``(u0, v0, w, h)``.
    """

    def __init__(self, robot: Robot, K, width: int, height: int, model: Optional[CapsuleModel] = None,
                 settings: SilhouetteSettings = SilhouetteSettings()):
        from snaketrack.tracker.state import StateLayout

        self.robot = robot
        self.K = torch.as_tensor(np.asarray(K, dtype=float))
        if self.K.shape != (3, 3):
            raise InputError(f"K: shape {tuple(self.K.shape)}; expected (3, 3)")
        self.width, self.height = int(width), int(height)
        self.model = model if model is not None else CapsuleModel.from_visual(robot)
        self.settings = settings
        self.layout = StateLayout.for_robot(robot)

    def primitives(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Primitive end points (B, M, 3), (B, M, 3) and radii (M,) of pose vectors (B, D)."""
        q, R0, t0 = self.layout.to_fk(x)
        pose = forward_kinematics(self.robot, q, R0, t0)
        a, b = self.model.place(pose.rotations, pose.origins)
        return a, b, torch.as_tensor(self.model.radius, dtype=x.dtype)

    def screen_roi(self, x: torch.Tensor, pad_px: float = 4.0) -> tuple[int, int, int, int]:
        """The image box (u0, v0, w, h) holding the silhouettes of all states ``x`` (B, D)."""
        a, b, r = self.primitives(x.detach())
        full = (0, 0, self.width, self.height)
        boxes = primitive_boxes(a, b, r, self.K, full, pad_px)
        good = boxes[:, 2] >= boxes[:, 0]
        if not good.any():
            return (0, 0, 1, 1)
        bx = boxes[good]
        ul, vl = int(bx[:, 0].min()), int(bx[:, 1].min())
        uh, vh = int(bx[:, 2].max()), int(bx[:, 3].max())
        return (ul, vl, max(uh - ul + 1, 1), max(vh - vl + 1, 1))

    def __call__(self, x: torch.Tensor, roi: Optional[Sequence[int]] = None,
                 settings: Optional[SilhouetteSettings] = None, offset_px: Optional[torch.Tensor] = None):
        s = settings or self.settings
        if x.ndim != 2:
            raise InputError(f"pose vectors: shape {tuple(x.shape)}; expected (B, {self.layout.dim})")
        if roi is None:
            roi = self.screen_roi(x, s.margin_sigmas * s.sigma_px + 2.0)
        a, b, r = self.primitives(x)
        return soft_silhouette(a, b, r, self.K.to(x.dtype), roi, s, offset_px, self.model.cylinders), tuple(roi)

    def full_image(self, x: torch.Tensor, settings: Optional[SilhouetteSettings] = None) -> torch.Tensor:
        """Silhouette (B, H, W) over the whole image."""
        return self(x, (0, 0, self.width, self.height), settings)[0]

    def with_settings(self, **kw) -> "SilhouetteRenderer":
        return SilhouetteRenderer(self.robot, self.K.numpy(), self.width, self.height, self.model,
                                  replace(self.settings, **kw))
