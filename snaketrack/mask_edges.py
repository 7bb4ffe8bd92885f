"""A mask's edge decided by colour: each pixel beside it read as a mix of the robot's colour and the ground's.

A thin robot (10 px wide at 640×360) loses a tenth of its IoU for every pixel its mask's edge is off;
a labeller's cut and a segmenter's thresholded probability are both off by about that, both ways
(a blurred rim left out, a mixed ground pixel taken in). :func:`unmix_edges` moves the edge by one
pixel where the colours on either side say so clearly, and leaves it elsewhere. Used on the written
labels (:mod:`snaketrack.datasets.grabcut_backend`) and on the segmenter's masks
(:mod:`snaketrack.training.segmenter`).

:func:`snap_edges` then lets the image's own edges place the mask's: the mask is smoothed by a guided
filter with the frame as guide (He, Sun and Tang, "Guided Image Filtering", 2013: in each small window
the output is an affine function of the pixel's colour fitted to the mask there), so its 0.5 level
follows a colour edge where one runs beside the mask's edge. Used after :func:`unmix_edges` on both.
"""
from __future__ import annotations

import cv2
import numpy as np


def _padded_box(mask: np.ndarray, pad: int) -> tuple[int, int, int, int] | None:
    """``(y0, y1, x0, x1)``: the box of a bool mask's pixels grown by ``pad`` [pixels] and clipped to the
    image, as slice bounds; None for an empty mask."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    return (max(rows[0] - pad, 0), min(rows[-1] + pad + 1, mask.shape[0]),
            max(cols[0] - pad, 0), min(cols[-1] + pad + 1, mask.shape[1]))


def unmix_edges(img: np.ndarray, mask: np.ndarray, margin: float = 0.3, sigma_px: float = 3.0,
                min_contrast: float = 20.0, inner_px: float = 2.0, ring_px: tuple[float, float] = (3.0, 5.0)
                ) -> np.ndarray:
    """Move a mask's edge by one pixel where the pixels on either side of it say so by their colour.

    A pixel on the edge (inside or outside, 1 px from it) is a mix of the robot's colour beside it and the
    ground's. The robot's local colour ``R`` is the Gaussian-weighted mean (σ ``sigma_px``) of the mask's
    pixels more than ``inner_px`` inside its edge, the ground's ``G`` that of the pixels ``ring_px`` outside;
    the pixel's share of robot is ``a = (c − G)·(R − G) / |R − G|²``. An outside pixel with
    ``a > 0.5 + margin`` joins the mask, an inside one with ``a < 0.5 − margin`` leaves it; where ``|R − G|``
    is under ``min_contrast`` (grey levels) nothing moves. The margin leaves the ambiguous pixels (a grey
    body's shaded rim, its cast shadow) as the cut decided them. ``img`` (H, W, 3) uint8 in any channel
    order (the share does not depend on it), ``mask`` bool (H, W); returns a new bool (H, W).

    >>> img = np.full((20, 30, 3), 200, np.uint8); img[6:14, 5:25] = (20, 180, 230)   # a yellow bar on grey
    >>> m = np.zeros((20, 30), bool); m[7:13, 5:25] = True                            # the cut lost a row each side
    >>> int(m.sum()), int(unmix_edges(img, m).sum())
    (120, 160)
    """
    m = np.asarray(mask, bool)
    box = _padded_box(m, int(np.ceil(ring_px[1] + 3 * sigma_px)))
    if box is None or margin >= 0.5:
        return m.copy()
    y0, y1, x0, x1 = box
    mc = m[y0:y1, x0:x1].astype(np.uint8)
    if int(mc.sum()) < 20:
        return m.copy()
    d_in = cv2.distanceTransform(mc, cv2.DIST_L2, 3)
    d_out = cv2.distanceTransform(1 - mc, cv2.DIST_L2, 3)
    band = ((d_in > 0) & (d_in <= 1.0)) | ((d_out > 0) & (d_out <= 1.0))
    robot = d_in > inner_px
    if robot.sum() < 10:
        robot = d_in > 1.0
    ground = (d_out > ring_px[0]) & (d_out <= ring_px[1])
    # one blur of [colour × robot weight, robot weight, colour × ground weight, ground weight]
    c = img[y0:y1, x0:x1].astype(np.float32)
    stack = np.zeros(mc.shape + (8,), np.float32)
    stack[robot, :3], stack[robot, 3] = c[robot], 1.0
    stack[ground, 4:7], stack[ground, 7] = c[ground], 1.0
    blurred = cv2.GaussianBlur(stack, (0, 0), sigma_px)[band]
    r = blurred[:, :3] / np.maximum(blurred[:, 3:4], 1e-6)
    g = blurred[:, 4:7] / np.maximum(blurred[:, 7:8], 1e-6)
    dv = r - g
    n2 = (dv * dv).sum(-1)
    a = ((c[band] - g) * dv).sum(-1) / np.maximum(n2, 1e-6)
    inside = mc[band] == 1
    keep = np.where(n2 > min_contrast ** 2, np.where(inside, a >= 0.5 - margin, a > 0.5 + margin), inside)
    out = m.copy()
    out[y0:y1, x0:x1][band] = keep
    return out


def guided_filter(guide: np.ndarray, src: np.ndarray, radius_px: int, eps: float) -> np.ndarray:
    """The colour guided filter of ``src`` by ``guide`` (He, Sun and Tang 2013, algorithm 1, colour guide).

    In every (2r+1)² window ``w_k`` the output is ``a_kᵀ I + b_k``, with ``a_k, b_k`` minimising
    ``Σ_{i∈w_k} (a_kᵀ I_i + b_k − p_i)² + |w_k| ε |a_k|²``; each pixel's output averages the models of the
    windows that hold it. guide: float (H, W, 3), colours in [0, 1]; src: float (H, W); radius_px: r
    [pixels]; eps: ε > 0, the ridge on ``a`` [colour units²] (larger: smoother, less edge-following). Windows
    at the image's border are reflected (OpenCV's ``BORDER_REFLECT_101``). Returns float32 (H, W).
    """
    if not eps > 0:
        raise ValueError(f"guided_filter: eps {eps}; expected > 0")
    g = np.asarray(guide, np.float32)
    p = np.asarray(src, np.float32)
    k = (2 * int(radius_px) + 1,) * 2

    def mean(x: np.ndarray) -> np.ndarray:
        return cv2.boxFilter(x, -1, k)

    m_i = mean(g)                                                    # (H, W, 3)
    m_p = mean(p)
    cov_ip = mean(g * p[..., None]) - m_i * m_p[..., None]           # (H, W, 3)
    pairs = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
    second = mean(np.stack([g[..., i] * g[..., j] for i, j in pairs], -1))
    s00, s01, s02, s11, s12, s22 = (second[..., n] - m_i[..., i] * m_i[..., j] for n, (i, j) in enumerate(pairs))
    s00, s11, s22 = s00 + eps, s11 + eps, s22 + eps
    # a = Σ⁻¹ cov by the symmetric 3×3 adjugate (positive definite for eps > 0), elementwise over the image
    c00, c01, c02 = s11 * s22 - s12 * s12, s02 * s12 - s01 * s22, s01 * s12 - s02 * s11
    c11, c12, c22 = s00 * s22 - s02 * s02, s01 * s02 - s00 * s12, s00 * s11 - s01 * s01
    det = s00 * c00 + s01 * c01 + s02 * c02
    v0, v1, v2 = cov_ip[..., 0], cov_ip[..., 1], cov_ip[..., 2]
    a = np.stack([c00 * v0 + c01 * v1 + c02 * v2, c01 * v0 + c11 * v1 + c12 * v2,
                  c02 * v0 + c12 * v1 + c22 * v2], -1) / det[..., None]  # (H, W, 3)
    b = m_p - (a * m_i).sum(-1)
    return (mean(a) * g).sum(-1) + mean(b)


def snap_edges(img: np.ndarray, mask: np.ndarray, radius_px: int = 5, eps: float = 3e-4, delta: float = 0.1,
               band_px: int = 1) -> np.ndarray:
    """Move a mask's edge onto the image's colour edge beside it, by at most ``band_px`` pixels.

    The mask ``p`` is smoothed by :func:`guided_filter` with the image as guide (``radius_px`` [pixels],
    ``eps`` [(colour/255)²]) into ``q``; the same filter on a flat image is two box means of ``p``, ``q0``,
    so ``q − q0`` is the part of the smoothing the image's colours drive. A pixel within ``band_px``
    (chessboard distance) of the mask's edge leaves the mask where ``q − q0 < −delta`` and joins it where
    ``q − q0 > delta``; elsewhere, and wherever the image is flat, the mask stays as it was (a thin mask on
    a flat image is not eroded). img (H, W, 3) uint8 in any channel order, mask bool (H, W); returns a new
    bool (H, W).

    >>> img = np.full((24, 40, 3), 190, np.uint8); img[8:16, 4:36] = (30, 60, 200)   # a blue bar on grey
    >>> m = np.zeros((24, 40), bool); m[7:17, 4:36] = True                           # a row too many each side
    >>> int(m.sum()), int(snap_edges(img, m).sum()), int(snap_edges(np.full_like(img, 190), m).sum())
    (320, 256, 320)
    """
    m = np.asarray(mask, bool)
    r = int(radius_px)
    box = _padded_box(m, 2 * r + int(band_px) + 1)
    if box is None or band_px < 1:
        return m.copy()
    y0, y1, x0, x1 = box
    mc = m[y0:y1, x0:x1]
    p = mc.astype(np.float32)
    q = guided_filter(img[y0:y1, x0:x1].astype(np.float32) / 255.0, p, r, eps)
    q0 = cv2.boxFilter(cv2.boxFilter(p, -1, (2 * r + 1,) * 2), -1, (2 * r + 1,) * 2)
    drive = q - q0
    square = np.ones((2 * int(band_px) + 1,) * 2, np.uint8)
    m8 = mc.astype(np.uint8)
    band = cv2.dilate(m8, square).astype(bool) & ~cv2.erode(m8, square, borderType=cv2.BORDER_REPLICATE).astype(bool)
    out = m.copy()
    out[y0:y1, x0:x1][band] = np.where(mc, drive > -delta, drive > delta)[band]
    return out
