"""An observed mask prepared for refinement (:class:`Observation`): the mask, its per-pixel residual
weights and, for the coverage term, samples of its skeleton.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import cv2
import numpy as np
import torch
from skimage.morphology import skeletonize

from snaketrack.errors import InputError
from snaketrack.tracker.fit.occlusion import far_from, far_weighting_on

if TYPE_CHECKING:
    from snaketrack.tracker.config import RefineConfig


@dataclass(frozen=True)
class Observation:
    """An observed mask prepared for refinement.

    mask: (H, W) float64 tensor of 0/1; area: its pixel count;
    weight: (H, W) residual weights (all ones for ``ssd``; ``far_weight`` on pixels
        more than ``far_px`` [px] from every mask pixel, the occlusion weighting);
    skeleton: (n, 2) pixel coordinates (u, v) of the mask's skeleton, every
        ``step`` px, for the coverage term (None unless asked for).
    """

    mask: torch.Tensor
    area: float
    weight: torch.Tensor
    skeleton: Optional[np.ndarray] = None

    @classmethod
    def from_mask(cls, mask: np.ndarray, loss: str = "ssd", dt_gain: float = 0.5,
                  dt_clip_px: float = 20.0, skeleton_step_px: float = 0.0, far_px: float = 0.0,
                  far_weight: float = 1.0) -> "Observation":
        """``mask`` (H, W) (non-zero: the robot) with residual weights for ``loss`` (``"dt"``: 1 + ``dt_gain`` ×
        the distance [px] to the mask's boundary, clipped at ``dt_clip_px``), ``far_weight`` on the far zone
        (more than ``far_px`` [px] from the mask; 0 px: none) and skeleton samples every
        ``skeleton_step_px`` [px] (0: none)."""
        m = np.asarray(mask) > 0
        if m.ndim != 2:
            raise InputError(f"mask: shape {m.shape}; expected (H, W)")
        skel = _skeleton_samples(m, skeleton_step_px) if skeleton_step_px > 0 else None
        if loss == "dt" and m.any():
            m8 = m.astype(np.uint8)
            d_in = cv2.distanceTransform(m8, cv2.DIST_L2, 3)
            d_out = cv2.distanceTransform(1 - m8, cv2.DIST_L2, 3)
            w = 1.0 + dt_gain * np.minimum(np.maximum(d_in, d_out), dt_clip_px)
        else:
            w = np.ones(m.shape)
        if far_weighting_on(far_px, far_weight) and m.any():
            w[far_from(m, far_px)] = far_weight
        return cls(torch.as_tensor(m, dtype=torch.float64), float(m.sum()),
                   torch.as_tensor(w, dtype=torch.float64), skel)

    def to(self, device) -> "Observation":
        """The observation with its mask and weight on ``device`` (itself when they are there)."""
        device = torch.device(device)
        if self.mask.device == device and self.weight.device == device:
            return self
        return Observation(self.mask.to(device), self.area, self.weight.to(device), self.skeleton)

    def crop(self, roi, what: torch.Tensor) -> torch.Tensor:
        u0, v0, w, h = roi
        return what[v0:v0 + h, u0:u0 + w].reshape(-1)



def observe(mask: np.ndarray, config: "RefineConfig", far: bool = True) -> Observation:
    """``mask`` (H, W) prepared for refinement with ``config``'s loss, coverage samples and, with ``far``,
    the occlusion weighting of pixels far from it (``RefineConfig.far_px``). The tracker's searches go
    without it: from a wrong start, the push out of empty image is what tells a wrong reading of the
    mask from the right one."""
    r = config
    step = r.cover_step_px if r.cover_weight > 0 else 0.0
    return Observation.from_mask(mask, r.loss, r.dt_gain, r.dt_clip_px, skeleton_step_px=step,
                                 far_px=r.far_px if far else 0.0, far_weight=r.far_weight)


def _skeleton_samples(mask: np.ndarray, step_px: float) -> np.ndarray:
    """Skeleton pixels (n, 2) (u, v) of a bool mask (H, W), thinned to about one every ``step_px``."""
    u0, v0, bw, bh = cv2.boundingRect(mask.astype(np.uint8))
    if bw == 0:
        return np.zeros((0, 2))
    sk = skeletonize(mask[v0:v0 + bh, u0:u0 + bw])
    sv, su = np.nonzero(sk)
    pts = np.stack([su + u0, sv + v0], 1).astype(float)
    if step_px > 1 and len(pts):
        cell = np.floor(pts / step_px).astype(np.int64)
        _, keep = np.unique(cell[:, 0] * 1_000_003 + cell[:, 1], return_index=True)
        pts = pts[np.sort(keep)]
    return pts
