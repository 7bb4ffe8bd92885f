"""Comparing bool masks: the one intersection-over-union every part of snaketrack reports, and the width of
a long, thin mask (:func:`body_width_px`).

Two empty masks agree (nothing is there, nothing was found), so their IoU is 1.0.
A frame where only one mask is empty scores 0.0.

>>> import numpy as np
>>> a = np.zeros((4, 4), bool); a[:2] = True
>>> b = np.zeros((4, 4), bool); b[1:3] = True
>>> round(mask_iou(a, b), 4), mask_iou(a, ~a), mask_iou(a & ~a, b & ~b)
(0.3333, 0.0, 1.0)
"""
from __future__ import annotations

import numpy as np

from snaketrack.errors import InputError


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two masks of the same shape (H, W) (bool, or nonzero = inside);
    1.0 when both are empty (module doc)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    if a.shape != b.shape:
        raise InputError(f"IoU: mask shapes {a.shape} and {b.shape} differ")
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else 1.0


def body_width_px(mask: np.ndarray) -> float:
    """The width [pixels] of a long, thin mask (bool (H, W)): twice its area over its outline's length (a
    ``w × L`` strip: ``2 w L / (2 L + 2 w)``, about ``w`` when ``L ≫ w``); 0 for an empty mask.

    >>> m = np.zeros((40, 220), bool); m[10:22, 10:210] = True   # 12 × 200
    >>> round(body_width_px(m), 1)
    11.4
    """
    import cv2  # deferred: the IoU needs no OpenCV

    m = np.asarray(mask, np.uint8)
    contours, _ = cv2.findContours(m, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    length = sum(cv2.arcLength(c, True) for c in contours)
    return 2.0 * float(m.sum()) / length if length > 0 else 0.0
