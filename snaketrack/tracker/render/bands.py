"""Which pixels each silhouette primitive is evaluated on: its screen box and band, and the pixel rays.

Cost follows the robot's size in the image, not the frame's: each primitive
is evaluated only on the pixels of its own screen band (within its projected
radius, the edge offset and ``margin_sigmas · σ`` of its projected axis
segment, magnified for off-axis views; :func:`primitive_pixels`), as a flat
list of (pixel, primitive) pairs, and only inside the region of interest
(ROI) asked for. :func:`pixel_rays` and :func:`ray_table` give the unit
rays through those pixels' centres.

ROIs are ``(u0, v0, w, h)``: top-left pixel and size [px]; ROI pixel indices
are row-major, ``v · w + u`` in ROI coordinates. Primitives are given by
their axis end points (B, M, 3) and radii (M,) in the camera frame [m].
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from snaketrack.errors import InputError


def check_roi(roi: Sequence[int]) -> tuple[int, int, int, int]:
    """``roi`` as four ints (u0, v0, w, h) [px]; InputError unless it has four entries and w, h >= 1."""
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
    u0, v0, w, h = check_roi(roi)
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
    distance exceeds ``−pad_px`` is listed (tests/tracker/test_bands.py checks it).
    Pairs come grouped by primitive, in primitive order. ``band=False``
    lists each primitive's whole screen box instead (the reference, for
    benchmarks).
    """
    u0, v0, w, h = check_roi(roi)
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


def pair_tensors(pairs: tuple[np.ndarray, np.ndarray], w: int, device, roi=None,
                 image_width: Optional[int] = None):
    """Torch (pixel, primitive) pairs from :func:`primitive_pixels` (ROI width ``w`` [px]).

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


def ray_table(K: torch.Tensor, width: int, height: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """Unit rays (3, height·width) through every pixel centre of the image, on ``device`` (None: the CPU;
    cached per K, size, dtype and device)."""
    Kn = K.detach().double().cpu().numpy()
    device = torch.device(device or "cpu")
    key = (Kn.tobytes(), int(width), int(height), dtype, device)
    tab = _RAY_TABLES.get(key)
    if tab is None:
        if len(_RAY_TABLES) > 8:
            _RAY_TABLES.clear()
        pix = torch.arange(int(width) * int(height), device="cpu")  # built in float64 on the CPU, then moved
        tab = pixel_rays(pix, (0, 0, int(width), int(height)), torch.from_numpy(Kn), torch.float64)
        tab = tab.T.to(device=device, dtype=dtype).contiguous()
        _RAY_TABLES[key] = tab
    return tab


def pixel_rays(pix: torch.Tensor, roi: tuple[int, int, int, int], K: torch.Tensor, dtype) -> torch.Tensor:
    """Unit ray directions (Q, 3) through the centres of ROI pixels ``pix``, on their device."""
    u0, v0, w, _ = roi
    u = (pix % w).to(dtype) + u0
    v = torch.div(pix, w, rounding_mode="floor").to(dtype) + v0
    Kd = K.to(device=pix.device, dtype=dtype)
    y = (v - Kd[1, 2]) / Kd[1, 1]
    x = (u - Kd[0, 2] - Kd[0, 1] * y) / Kd[0, 0]
    d = torch.stack([x, y, torch.ones_like(x)], -1)
    return d / d.norm(dim=-1, keepdim=True)
