"""GrabCut (OpenCV) behind the labeller's box-prompt protocol: no weights needed.

``cv2.grabCut`` is run on a crop around the prompt box (the box plus a
margin of background), which is what makes it affordable per frame. The
first frame is initialised from the rectangle alone; later frames, when
the labeller passes the last good mask as ``prior``, start from a
better guess: inside the box, pixels near the last mask are "probably
robot", the rest "probably background" (outside the box is certain
background). The initial "probably robot" pixels are those whose colour
is much commoner inside the box than in a wide ring around it (colour
histogram back-projection): the ring sees the same ground and obstacles
as the box, so what is special to the box is the robot. With
``thin_object`` (on: snake robots are thin), parts of the result much
thicker than its typical width — round obstacles GrabCut glued to the
robot — are cut off. The result keeps only the connected pieces holding
at least ``min_component_frac`` of the largest, which drops speckle.

>>> import numpy as np
>>> from snaketrack.datasets.boxes import Box, mask_iou
>>> from snaketrack.datasets.toy import toy_video
>>> frames, truth = toy_video(1, 160, 120, seed=0)
>>> gc = GrabCutBackend()
>>> gc.set_image(frames[0])
>>> m = gc.predict(Box(20, 20, 130, 85))
>>> mask_iou(m, truth[0]) > 0.8
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from snaketrack.datasets.boxes import Box, dilate_mask
from snaketrack.errors import StateError


@dataclass(frozen=True)
class GrabCutConfig:
    """iterations: GrabCut EM iterations; margin_frac: background margin around the box
    (fraction of the larger box side, at least ``margin_px_min`` pixels); prior_dilate_px:
    how far from the last good mask a pixel still counts as "probably robot" [pixels];
    min_component_frac: smallest kept component relative to the largest."""

    iterations: int = 4
    margin_frac: float = 0.15
    margin_px_min: int = 12
    prior_dilate_px: int = 12
    min_component_frac: float = 0.05
    ring_frac: float = 0.5
    bins: int = 16
    contrast_ratio: float = 0.2
    thin_object: bool = True
    use_prior: bool = True
    colour_space: str = "bgr"
    thick_factor: float = 1.7


class GrabCutBackend:
    """Box-prompted GrabCut segmenter (see module doc)."""

    name = "grabcut"

    def __init__(self, config: GrabCutConfig = GrabCutConfig()):
        self.config = config
        self._bgr: Optional[np.ndarray] = None

    def set_image(self, rgb: np.ndarray) -> None:
        """Hold the frame (RGB uint8 (H, W, 3)) for the next prompts."""
        bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
        self._bgr = cv2.cvtColor(bgr, cv2.COLOR_BGR2Lab) if self.config.colour_space == "lab" else bgr

    def reset_image(self) -> None:
        self._bgr = None

    def predict(self, box: Box, prior: Optional[np.ndarray] = None) -> np.ndarray:
        """Mask bool (H, W) of the object in ``box`` (pixels); ``prior`` the last good mask or None."""
        if self._bgr is None:
            raise StateError("GrabCutBackend.predict called before set_image(); call set_image(rgb) first")
        cfg = self.config
        H, W = self._bgr.shape[:2]
        box = box.clip(W, H)
        out = np.zeros((H, W), bool)
        if box.w < 2 or box.h < 2:
            return out
        # background colours from a wide ring around the box; colours much commoner inside the
        # box than in the ring start as "probably robot" (histogram back-projection), the rest
        # of the box as "probably background"; outside the box is certain background
        margin = max(int(round(cfg.margin_frac * max(box.w, box.h))), cfg.margin_px_min)
        roi = box.expand(margin).clip(W, H)
        crop = np.ascontiguousarray(self._bgr[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w])
        bx, by = box.x - roi.x, box.y - roi.y
        inside = np.zeros(crop.shape[:2], bool)
        inside[by:by + box.h, bx:bx + box.w] = True
        ring = box.expand(max(int(round(cfg.ring_frac * max(box.w, box.h))), cfg.margin_px_min)).clip(W, H)
        ring_mask = np.zeros((H, W), np.uint8)
        ring_mask[ring.y:ring.y + ring.h, ring.x:ring.x + ring.w] = 1
        ring_mask[box.y:box.y + box.h, box.x:box.x + box.w] = 0
        if ring_mask.sum() < 16 or (~inside).sum() < 16:
            return out
        box_mask = np.zeros((H, W), np.uint8)
        box_mask[box.y:box.y + box.h, box.x:box.x + box.w] = 1
        p_bg = _colour_hist(self._bgr, ring_mask, cfg.bins)
        p_box = _colour_hist(self._bgr, box_mask, cfg.bins)
        q = (crop // (256 // cfg.bins)).astype(np.intp)
        ratio = p_bg[q[..., 0], q[..., 1], q[..., 2]] / np.maximum(p_box[q[..., 0], q[..., 1], q[..., 2]], 1e-12)
        likely = inside & (ratio < cfg.contrast_ratio)
        if cfg.use_prior and prior is not None and prior.shape == (H, W) and prior.any():
            near = dilate_mask(prior, cfg.prior_dilate_px)[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w]
            likely &= near
        gc_mask = np.where(inside, cv2.GC_PR_BGD, cv2.GC_BGD).astype(np.uint8)
        gc_mask[likely] = cv2.GC_PR_FGD
        if not likely.any():
            gc_mask[inside] = cv2.GC_PR_FGD
        bgd = np.zeros((1, 65), np.float64)
        fgd = np.zeros((1, 65), np.float64)
        try:
            cv2.grabCut(crop, gc_mask, None, bgd, fgd, cfg.iterations, cv2.GC_INIT_WITH_MASK)
        except cv2.error:
            return out  # degenerate colour model (e.g. a flat crop): an empty answer, flagged upstream
        fg = (gc_mask == cv2.GC_FGD) | (gc_mask == cv2.GC_PR_FGD)
        if cfg.thin_object:
            fg = _remove_thick_blobs(fg, cfg.thick_factor)
        fg = _keep_large_components(fg, cfg.min_component_frac)
        out[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w] = fg
        return out


def _keep_large_components(mask: np.ndarray, min_frac: float) -> np.ndarray:
    n, lab, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 2:
        return mask
    areas = stats[1:, cv2.CC_STAT_AREA]
    keep = np.flatnonzero(areas >= min_frac * areas.max()) + 1
    return np.isin(lab, keep)


def _colour_hist(bgr: np.ndarray, mask: np.ndarray, bins: int) -> np.ndarray:
    """Normalised colour histogram (bins, bins, bins) of the pixels where ``mask`` is set."""
    h = cv2.calcHist([bgr], [0, 1, 2], mask.astype(np.uint8), [bins] * 3, [0, 256] * 3)
    h = cv2.GaussianBlur(h.reshape(bins, bins * bins), (3, 3), 0).reshape(bins, bins, bins)  # light smoothing
    return h / max(float(h.sum()), 1.0)


def _remove_thick_blobs(mask: np.ndarray, factor: float) -> np.ndarray:
    """Drop the parts of a mask much thicker than its typical width (a snake's prior).

    The typical half-width is the area over twice the skeleton's length
    (exact for a band); regions where a disc ``factor`` times wider fits
    (found by a morphological opening) are removed — the round obstacles
    GrabCut sometimes glues to a thin robot.
    """
    from skimage.morphology import skeletonize

    m = mask.astype(np.uint8)
    if m.sum() < 20:
        return mask
    skel = int(np.count_nonzero(skeletonize(m > 0)))
    r = float(m.sum()) / max(2.0 * skel, 1.0)
    R = int(np.ceil(factor * r))
    if R < 2:
        return mask
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * R + 1, 2 * R + 1))
    thick = cv2.morphologyEx(m, cv2.MORPH_OPEN, disc)
    if not thick.any():
        return mask
    thick = cv2.dilate(thick, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5)))
    return mask & (thick == 0)
