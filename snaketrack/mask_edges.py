"""A mask's edge decided by colour: each pixel beside it read as a mix of the robot's colour and the ground's.

A thin robot (10 px wide at 640×360) loses a tenth of its IoU for every pixel its mask's edge is off;
a labeller's cut and a segmenter's thresholded probability are both off by about that, both ways
(a blurred rim left out, a mixed ground pixel taken in). :func:`unmix_edges` moves the edge by one
pixel where the colours on either side say so clearly, and leaves it elsewhere. Used on the written
labels (:mod:`snaketrack.datasets.grabcut_backend`) and on the segmenter's masks
(:mod:`snaketrack.training.segmenter`).
"""
from __future__ import annotations

import cv2
import numpy as np


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
    rows, cols = np.flatnonzero(m.any(axis=1)), np.flatnonzero(m.any(axis=0))
    if rows.size == 0 or margin >= 0.5:
        return m.copy()
    pad = int(np.ceil(ring_px[1] + 3 * sigma_px))
    y0, y1 = max(rows[0] - pad, 0), min(rows[-1] + pad + 1, m.shape[0])
    x0, x1 = max(cols[0] - pad, 0), min(cols[-1] + pad + 1, m.shape[1])
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
