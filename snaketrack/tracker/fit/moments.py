"""Image moments of soft masks: area, centroid and second-order central moments.

Differentiable (plain torch), batched over masks ``(B, H, W)``, in float32 or
float64. A mask may be a crop of the full image (a region of interest): the
``roi_offset`` ``(u0, v0)`` [px] of its top-left pixel places the moments in
full-image coordinates.

Pixel convention (docs/conventions.md): pixel ``(u, v)`` has ``u`` the column (to the
right) and ``v`` the row (down), integer coordinates at pixel centres — the
same as ``cv2.moments``, so on a binary mask:

    area      m00 = Σ m                                  [px²]
    centroid  (cu, cv) = (m10 / m00, m01 / m00)          [px]
    second    (n20, n11, n02) = (mu20, mu11, mu02) / m00 [px²]

where ``mu_pq = Σ m (u − cu)^p (v − cv)^q`` are the central moments. The
second-order moments are *normalised by area* (the covariance of the pixel
positions, in px²): they describe orientation and elongation and are what
the Kalman filter observes beside the centroid. The scale-invariant ``nu_pq``
of OpenCV (``mu_pq / m00²`` for second order) is :meth:`Moments.nu`.

>>> import torch
>>> m = torch.zeros(1, 5, 7, dtype=torch.float64)
>>> m[0, 1:4, 2:6] = 1.0          # rows 1..3, columns 2..5
>>> mo = image_moments(m)
>>> mo.area.tolist(), mo.centroid.tolist()
([12.0], [[3.5, 2.0]])
>>> [round(v, 4) for v in mo.second[0].tolist()]   # var(u)=1.25, cov=0, var(v)=2/3
[1.25, 0.0, 0.6667]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from snaketrack.errors import InputError

#: Names of the entries of :func:`moment_vector` for ``order=2`` (centroid first).
OBSERVATION_NAMES = ("cu", "cv", "n20", "n11", "n02")


@dataclass(frozen=True)
class Moments:
    """Moments of a batch of masks.

    area: (B,) m00 [px²] (sum of mask values).
    centroid: (B, 2) (cu, cv) [px], full-image coordinates.
    second: (B, 3) (n20, n11, n02) = (mu20, mu11, mu02) / m00 [px²].
    """

    area: torch.Tensor
    centroid: torch.Tensor
    second: torch.Tensor

    def nu(self) -> torch.Tensor:
        """(B, 3) OpenCV's scale-invariant (nu20, nu11, nu02) = mu_pq / m00² (dimensionless)."""
        return self.second / self.area.unsqueeze(-1)

    def orientation(self) -> torch.Tensor:
        """(B,) angle [rad] of the major axis from the +u axis towards +v: ½·atan2(2 n11, n20 − n02)."""
        n20, n11, n02 = self.second.unbind(-1)
        return 0.5 * torch.atan2(2 * n11, n20 - n02)


def _check_mask(mask: torch.Tensor) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor):
        raise InputError(f"mask: got {type(mask).__name__}; expected a torch.Tensor (B, H, W)")
    if mask.ndim == 2:
        mask = mask.unsqueeze(0)
    if mask.ndim != 3:
        raise InputError(f"mask: shape {tuple(mask.shape)}; expected (B, H, W) or (H, W)")
    if not mask.is_floating_point():
        mask = mask.to(torch.float64 if mask.dtype == torch.bool else torch.float32)
    return mask


def _offsets(roi_offset, B: int, dtype, device) -> torch.Tensor:
    if roi_offset is None:
        return torch.zeros(B, 2, dtype=dtype, device=device)
    off = torch.as_tensor(roi_offset, dtype=dtype, device=device)
    if off.shape == (2,):
        off = off.expand(B, 2)
    if off.shape != (B, 2):
        raise InputError(f"roi_offset: shape {tuple(off.shape)}; expected (2,) or ({B}, 2) = (u0, v0) [px]")
    return off


def image_moments(
    mask: torch.Tensor,
    roi_offset: Optional[torch.Tensor | Sequence[float]] = None,
    eps: float = 1e-9,
) -> Moments:
    """Area, centroid and area-normalised second-order central moments of soft masks.

    mask: (B, H, W) or (H, W), values in [0, 1] (bool is accepted); a crop of
        the image whose top-left pixel is at ``roi_offset``.
    roi_offset: (2,) or (B, 2) (u0, v0) [px] of the crop in the full image; None = (0, 0).
    eps: floor of the area in the divisions [px²]; an empty mask gives area 0
        and centroid/second moments 0 — check ``area`` before using them.

    Central moments are summed about the centroid (two passes), not derived
    from raw moments, so they stay accurate far from the image origin.
    """
    mask = _check_mask(mask)
    B, H, W = mask.shape
    dtype, device = mask.dtype, mask.device
    off = _offsets(roi_offset, B, dtype, device)
    u = torch.arange(W, dtype=dtype, device=device)
    v = torch.arange(H, dtype=dtype, device=device)
    col = mask.sum(dim=1)  # (B, W): mass per column
    row = mask.sum(dim=2)  # (B, H): mass per row
    area = col.sum(dim=1)
    a = area.clamp_min(eps)
    cu_l = (col * u).sum(dim=1) / a  # local (crop) coordinates
    cv_l = (row * v).sum(dim=1) / a
    du = u.unsqueeze(0) - cu_l.unsqueeze(1)  # (B, W)
    dv = v.unsqueeze(0) - cv_l.unsqueeze(1)  # (B, H)
    n20 = (col * du * du).sum(dim=1) / a
    n02 = (row * dv * dv).sum(dim=1) / a
    n11 = torch.einsum("bhw,bh,bw->b", mask, dv, du) / a
    centroid = torch.stack([cu_l, cv_l], dim=-1) + off
    return Moments(area=area, centroid=centroid, second=torch.stack([n20, n11, n02], dim=-1))


def moment_vector(moments: Moments, order: int = 2) -> torch.Tensor:
    """The observation vector of the Kalman filter, (B, 2) or (B, 5).

    order 1: (cu, cv) [px] — the paper's observation (centroid only).
    order 2: (cu, cv, n20, n11, n02) [px, px, px², px², px²] (:data:`OBSERVATION_NAMES`).
    """
    if order == 1:
        return moments.centroid
    if order == 2:
        return torch.cat([moments.centroid, moments.second], dim=-1)
    raise InputError(f"moment order {order!r}; expected 1 (centroid) or 2 (centroid + second moments)")


def mask_moment_vector(
    mask: torch.Tensor, roi_offset=None, order: int = 2, eps: float = 1e-9
) -> torch.Tensor:
    """:func:`moment_vector` of :func:`image_moments` in one call: (B, 2) or (B, 5)."""
    return moment_vector(image_moments(mask, roi_offset, eps), order)
