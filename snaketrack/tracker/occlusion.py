"""Gaps in the observed mask along the predicted body: occluders and missing chunks.

A post in front of the robot, or a segmenter that misses a stretch of the
body, cuts the mask across its whole width. Refinement on the summed
squared difference then pushes the model out of the gap: joints bend and
the body slides to cover less of it, and the track degrades while the gap
lasts (docs/tracker.md, "Occlusions"). An edge error (erosion, dilation,
ragged boundary) never removes a full cross-section; a gap does.

:func:`gap_weights` walks the axes of the model's primitives at the
predicted pose (a sample every ~2 px) and calls a sample *unsupported*
when no mask pixel lies within the primitive's image radius plus a margin
of it (the distance transform of the mask's complement). Pixels within that
reach of an unsupported sample — model pixels with no mask anywhere across
the body there — get a small residual weight, so the model neither chases
the gap nor is held by it; everywhere else the weights stay 1. When most of
the body is unsupported the prediction itself is off, not occluded, and no
weights are changed.

Units: pixels; the returned weights are dimensionless.
"""
from __future__ import annotations

from typing import Optional

import cv2
import numpy as np
import torch


def axis_samples(renderer, x: np.ndarray, step_px: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Image points (n, 2) [px] along every primitive's axis at pose ``x`` (D,), and the primitive's
    image radius (n,) [px] at each; points behind the camera are left out."""
    with torch.no_grad():
        a, b, r = renderer.primitives(torch.as_tensor(np.asarray(x, float))[None])
    a, b = a[0].numpy(), b[0].numpy()
    r = np.broadcast_to(np.asarray(r, float).reshape(-1), (a.shape[0],))
    K = renderer.K.numpy()
    pts, rad = [], []
    for A, B, R in zip(a, b, r):
        if A[2] <= 1e-6 or B[2] <= 1e-6:
            continue
        ua, ub = (K @ A)[:2] / A[2], (K @ B)[:2] / B[2]
        n = int(np.ceil(np.linalg.norm(ub - ua) / step_px)) + 1
        s = np.linspace(0.0, 1.0, n)[:, None]
        pts.append(ua + s * (ub - ua))
        z = A[2] + s[:, 0] * (B[2] - A[2])
        rad.append(K[0, 0] * R / z)
    if not pts:
        return np.zeros((0, 2)), np.zeros(0)
    return np.concatenate(pts), np.concatenate(rad)


def gap_weights(renderer, x: np.ndarray, mask: np.ndarray, weight: float = 0.1, margin_px: float = 3.0,
                max_fraction: float = 0.5) -> Optional[np.ndarray]:
    """(H, W) residual weights that discount gaps of ``mask`` along the model at ``x`` (module doc).

    weight: the residual weight in a gap; margin_px: how far [px] beyond the
    body's edge a mask pixel still supports a sample (prediction error and
    erosion); max_fraction: above this fraction of unsupported samples the
    prediction is taken to be off and None is returned. None also when
    nothing is unsupported.
    """
    m = np.asarray(mask) > 0
    pts, rad = axis_samples(renderer, x)
    H, W = m.shape
    inside = (pts[:, 0] >= 0) & (pts[:, 0] <= W - 1) & (pts[:, 1] >= 0) & (pts[:, 1] <= H - 1)
    pts, rad = pts[inside], rad[inside]
    if len(pts) == 0 or not m.any():
        return None
    d_out = cv2.distanceTransform((~m).astype(np.uint8), cv2.DIST_L2, 3)
    iu, iv = np.rint(pts[:, 0]).astype(int), np.rint(pts[:, 1]).astype(int)
    gap = d_out[iv, iu] > rad + margin_px
    if not gap.any() or gap.mean() > max_fraction:
        return None
    reach = np.zeros((H, W), np.uint8)
    for (u, v), r in zip(pts[gap], rad[gap]):
        cv2.circle(reach, (int(round(u)), int(round(v))), int(np.ceil(r + margin_px)), 1, -1)
    w = np.ones((H, W))
    w[(reach > 0) & ~m] = weight
    return w
