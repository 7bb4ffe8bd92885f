"""Occlusion weighting: model pixels where an occluder, not a pose error, explains empty image.

Two zones of the observed mask get the weight ``RefineConfig.far_weight`` (0: ignored) for model
pixels, so that refinement does not bend the hidden links out of the gap and the prior towards the
prediction holds them:

- the **far zone** (:func:`far_from`): pixels more than ``RefineConfig.far_px`` from every mask pixel,
  beyond the mask's 1–3 px bias and ragged edge (:meth:`Observation.from_mask
  <snaketrack.tracker.fit.observation.Observation.from_mask>` applies it);
- the **cut** (:func:`cut_weighted`): outside the mask, the pixels nearer to a point of the predicted
  body axis that lies in the far zone than to one that does not. A post cuts the body's whole
  cross-section out of the mask, a segmentation bias only its sides: the pixels beyond a cut lie
  next to the band the far zone leaves, and without this a head behind a post folds out of the band.

A frame whose predicted axis lies partly in the far zone (:func:`hidden_fraction`) is occluded: its fit is
judged by the IoU of the unhidden part (:func:`visible_iou`), so that a body slid along the visible part
of the mask, which covers it better, does not win the tracker's re-acquisition search over the body
that continues behind the occluder.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import cv2
import numpy as np
import torch

from snaketrack.masks import mask_iou

if TYPE_CHECKING:
    from snaketrack.tracker.fit.observation import Observation
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer


def far_from(mask: np.ndarray, dist_px: float) -> np.ndarray:
    """Bool (H, W): the pixels more than ``dist_px`` [px] (Euclidean, pixel centres) from every pixel of the
    non-empty bool ``mask`` (H, W).

    The distance transform runs on the mask's bounding box grown by ``dist_px``: every mask pixel lies in
    it, so the distances there are exact, and every pixel outside it is farther than ``dist_px``.
    """
    m8 = np.asarray(mask, bool).astype(np.uint8)
    x, y, bw, bh = cv2.boundingRect(m8)
    pad = int(math.ceil(dist_px)) + 1
    v0, v1 = max(y - pad, 0), min(y + bh + pad, m8.shape[0])
    u0, u1 = max(x - pad, 0), min(x + bw + pad, m8.shape[1])
    far = np.ones(m8.shape, bool)
    d = cv2.distanceTransform(1 - m8[v0:v1, u0:u1], cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    far[v0:v1, u0:u1] = d > dist_px
    return far


def far_weighting_on(far_px: float, far_weight: float) -> bool:
    """Whether the far-zone weighting changes anything: a zone wider than 0 px with a weight other than 1."""
    return far_px > 0 and far_weight != 1.0


def cut_weighted(obs: "Observation", renderer: "SilhouetteRenderer", x: np.ndarray, far_px: float,
                 far_weight: float) -> "Observation":
    """``obs`` with the model pixels beyond a cut of the mask given weight ``far_weight``: outside the mask,
    pixels nearer to a point of pose ``x``'s (D,) projected body axis that lies in the far zone (more than
    ``far_px`` [px] from the mask, where ``obs.weight`` is below 1) than to one that does not. ``obs`` itself
    when the far-zone weighting is off (``far_px`` 0 or ``far_weight`` 1) or nothing is cut."""
    if not (far_px > 0 and far_weight < 1.0):
        return obs
    axis = _axis_pixels(renderer, x, obs.mask.shape)
    if axis is None:
        return obs
    iu, iv, r_px = axis
    H, W = obs.mask.shape
    m = obs.mask.numpy() > 0.5
    # an axis point counts as off the mask only beyond the band (the far zone): a prediction a few
    # pixels past a free end, on a mask eroded by its bias, must still be pushed back
    on = obs.weight.numpy()[iv, iu] >= 1.0
    if on.all() or not on.any():
        return obs
    # the body's box, padded by its image radius and the occlusion band: weights elsewhere do not matter
    pad = int(np.ceil(r_px + far_px)) + 2
    u0, v0 = max(iu.min() - pad, 0), max(iv.min() - pad, 0)
    u1, v1 = min(iu.max() + pad + 1, W), min(iv.max() + pad + 1, H)
    seeds_off = np.ones((v1 - v0, u1 - u0), np.uint8)
    seeds_off[iv[~on] - v0, iu[~on] - u0] = 0
    seeds_on = np.ones_like(seeds_off)
    seeds_on[iv[on] - v0, iu[on] - u0] = 0
    d_off = cv2.distanceTransform(seeds_off, cv2.DIST_L2, 3)
    d_on = cv2.distanceTransform(seeds_on, cv2.DIST_L2, 3)
    cut = ~m[v0:v1, u0:u1] & (d_off < d_on)
    if not cut.any():
        return obs
    w = obs.weight.clone()
    w[v0:v1, u0:u1][torch.as_tensor(cut)] = far_weight
    return replace(obs, weight=w)


def hidden_fraction(obs: "Observation", renderer: "SilhouetteRenderer", x: np.ndarray) -> float:
    """Fraction in [0, 1] of pose ``x``'s (D,) projected body axis (points about 1 px apart, those in the
    image) that lies in ``obs``'s far zone (weight below 1: more than ``far_px`` from the mask); 0 when the
    axis is off the image or the far-zone weighting is off. Where the predicted body runs off its mask: a
    leg or a shoe in front of it, or a prediction that has left the robot."""
    axis = _axis_pixels(renderer, x, obs.mask.shape)
    if axis is None:
        return 0.0
    iu, iv, _ = axis
    return float((obs.weight.numpy()[iv, iu] < 1.0).mean())


def _axis_pixels(renderer: "SilhouetteRenderer", x: np.ndarray, shape) -> "tuple[np.ndarray, np.ndarray, float] | None":
    """Pixels (u, v) (n,) ints of pose ``x``'s (D,) projected body axis, about 1 px apart, inside an image of
    ``shape`` (H, W), and the body's largest image radius [px]; None when no link is in front of the camera
    or no axis point is in the image."""
    with torch.no_grad():
        a, b, _ = renderer.primitives(torch.as_tensor(np.asarray(x, float))[None])
    K = renderer.K.numpy()
    A, B = a[0].numpy(), b[0].numpy()
    front = (A[:, 2] > 1e-6) & (B[:, 2] > 1e-6)
    if not front.any():
        return None
    ua = (A[front] @ K.T)[:, :2] / A[front, 2:3]
    ub = (B[front] @ K.T)[:, :2] / B[front, 2:3]
    n = max(int(np.ceil(np.linalg.norm(ub - ua, axis=1).max())), 1)  # at most ~1 px apart
    lam = np.linspace(0.0, 1.0, n + 1)[None, :, None]
    pts = (ua[:, None] + lam * (ub - ua)[:, None]).reshape(-1, 2)
    H, W = shape
    iu, iv = np.rint(pts[:, 0]).astype(int), np.rint(pts[:, 1]).astype(int)
    inside = (iu >= 0) & (iu < W) & (iv >= 0) & (iv < H)
    if not inside.any():
        return None
    r_px = float((K[0, 0] * renderer.model.radius[front] / np.minimum(A[front, 2], B[front, 2])).max())
    return iu[inside], iv[inside], r_px


def visible_iou(obs: "Observation", silhouette: np.ndarray) -> float:
    """IoU of a model's bool ``silhouette`` (H, W) against ``obs``'s mask, the model's pixels of weight 0 (far
    zone, beyond a cut: :func:`cut_weighted`) left out: how well the unhidden part of a pose fits a mask
    that an occluder cuts. 0 when both are empty."""
    sil = np.asarray(silhouette, bool) & (obs.weight.numpy() > 0)
    m = obs.mask.numpy() > 0.5
    return mask_iou(sil, m) if sil.any() or m.any() else 0.0
