"""The colour and shape rules around the GrabCut backend's cut, on numpy images and masks.

Before the cut: :func:`tone_map` (the image GrabCut sees), :func:`colour_hist`
and :func:`shadow_like` (which pixels start as robot or as shaded ground).
After it: :func:`close_gaps`, :func:`grow_dark`, :func:`peel_ground`,
:func:`remove_thick_blobs`, :func:`keep_large_components` and
:func:`refine_boundary` clean the mask; :func:`smooth_outline` is the
label's polish. :mod:`~snaketrack.datasets.grabcut_backend` says when each
applies and with which settings. Images are (H, W, 3) uint8, masks bool
(H, W), distances in pixels.
"""
from __future__ import annotations

from typing import Optional

import cv2
import numpy as np
from skimage.morphology import skeletonize

from snaketrack.errors import InputError

__all__ = ["tone_map", "colour_hist", "shadow_like", "close_gaps", "grow_dark", "peel_ground",
           "remove_thick_blobs", "keep_large_components", "refine_boundary", "smooth_outline"]


def tone_map(bgr: np.ndarray, tone: str, knee: float = 4.0) -> np.ndarray:
    """The image GrabCut sees: ``"linear"`` as is, ``"log"`` each channel as log(1 + v/knee), rescaled to 0–255.

    A log tone gives a dark robot part next to its cast shadow (40 vs 70 of
    255) about the same contrast as the shadow next to lit ground (70 vs
    125), so the graph cut does not prefer the shadow's outer edge, and
    a shadow (a multiplicative dimming) becomes a shift in colour space.
    """
    if tone == "linear":
        return bgr
    if tone == "log":
        f = np.log1p(bgr.astype(np.float32) / knee) * (255.0 / np.log1p(255.0 / knee))
        return np.clip(f + 0.5, 0, 255).astype(np.uint8)
    if tone == "loglab":
        lab = cv2.cvtColor(bgr, cv2.COLOR_BGR2Lab).astype(np.float32)
        lab[..., 0] = np.log1p(lab[..., 0] / knee) * (255.0 / np.log1p(255.0 / knee))
        return np.clip(lab + 0.5, 0, 255).astype(np.uint8)
    raise InputError(f"GrabCutConfig.tone {tone!r}: expected 'linear', 'log' or 'loglab'")


def grow_dark(img: np.ndarray, mask: np.ndarray, ring: np.ndarray, steps: int, ratio: float,
              shade_chroma: float = 0.0) -> np.ndarray:
    """Grow a mask into adjacent very dark pixels, one pixel layer per step.

    A pixel 8-adjacent to the mask joins it when its brightness (channel
    sum) is below ``ratio`` times the ring's median: the robot's dark joint
    housings and shaded underside, darker than the ground's cast shadows.
    With ``shade_chroma`` > 0, a dark pixel whose chromaticity (each channel
    over the channel sum) lies within ``shade_chroma`` of the ring's median
    and farther than that from grey does not join: the deep shade of a
    coloured ground (grass, brick) keeps its hue, a grey or black housing
    does not have it. On a grey ground the two cannot be told apart by
    colour, and every dark pixel may join.

    >>> img = np.full((7, 20, 3), (60, 120, 200), np.uint8)         # a brick-red ground (BGR)
    >>> img[1:, 6:] = (20, 40, 66)                                   # its deep shade to the right
    >>> img[3, 3:6] = (25, 25, 25); m = np.zeros((7, 20), bool); m[3, 3:5] = True
    >>> ring = np.zeros((7, 20), bool); ring[0] = True
    >>> int(grow_dark(img, m, ring, 3, 0.45).sum()), int(grow_dark(img, m, ring, 3, 0.45, 0.06).sum())
    (13, 3)
    """
    if ring.sum() < 16 or not mask.any():
        return mask
    f = img.astype(np.float32)
    ssum = f.sum(axis=-1)
    dark = ssum < ratio * float(np.median(ssum[ring]))
    if shade_chroma > 0:
        chrom = (f + 1.0) / (ssum[..., None] + 3.0)
        ground = np.linalg.norm(chrom - np.median(chrom[ring], axis=0), axis=-1) < shade_chroma
        grey = np.linalg.norm(chrom - 1.0 / 3.0, axis=-1) < shade_chroma
        dark &= ~(ground & ~grey)
    m = mask.astype(np.uint8)
    k = np.ones((3, 3), np.uint8)
    for _ in range(steps):
        grown = (cv2.dilate(m, k) > 0) & dark & (m == 0)
        if not grown.any():
            break
        m[grown] = 1
    return m > 0


def peel_ground(img: np.ndarray, mask: np.ndarray, ring: np.ndarray, steps: int, sat_frac: float,
                 floor: float, min_sat: float = 0.0, local_px: float = 0.0,
                 local_in: Optional[np.ndarray] = None) -> np.ndarray:
    """Peel washed-out, not-dark pixels off a coloured robot's edge, one pixel layer per step.

    An edge pixel (in the mask, 4-adjacent to outside) is dropped when its
    saturation ((max − min) / max of its channels) is below ``sat_frac``
    times the mask's median saturation and its brightness (channel sum) is
    above ``floor`` times the ring's median: a mix of the robot's colour
    with ground or cast shadow, not the much darker robot parts (joints,
    the shaded underside), which stay. Nothing is peeled when the median
    saturation of the mask's core (eroded by 2 px, where no ground is
    mixed in) is below ``min_sat``: a grey robot's own edge is as washed
    out as such a mix. With ``local_px`` > 0, within ``local_in`` (bool
    (H, W): where the robot is known to be, such as where the video moves)
    the same is decided near each pixel, by the core's mean saturation
    there (Gaussian weights, σ ``local_px`` [pixels]): the grey links of a
    robot whose red head makes the whole mask look coloured are its own
    grey edge, not a mix, and stay. ``img`` (H, W, 3) uint8; ``mask``,
    ``ring`` bool (H, W).

    >>> img = np.full((9, 9, 3), 120, np.uint8); img[2:7, 2:7] = (200, 40, 40); img[2:7, 6] = (150, 120, 120)
    >>> m = np.zeros((9, 9), bool); m[2:7, 2:7] = True; ring = ~m
    >>> int(peel_ground(img, m, ring, 1, 0.75, 0.5).sum()), int(peel_ground(img, m, ring, 1, 0.75, 0.5, 0.9).sum())
    (20, 25)
    """
    if ring.sum() < 16 or mask.sum() < 20:
        return mask
    f = img.astype(np.float32) + 1.0
    ssum = f.sum(axis=-1)
    sat = (f.max(-1) - f.min(-1)) / f.max(-1)
    robot_sat = float(np.median(sat[mask]))
    core = cv2.erode(mask.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    if core.sum() < 20:
        core = mask
    if float(np.median(sat[core])) < min_sat:
        return mask
    i_ref = float(np.median(ssum[ring]))
    washed = (sat < sat_frac * robot_sat) & (ssum > floor * i_ref)
    if local_px > 0 and local_in is not None:
        weight = cv2.GaussianBlur(core.astype(np.float32), (0, 0), local_px)
        near = cv2.GaussianBlur(np.where(core, sat, 0.0).astype(np.float32), (0, 0), local_px)
        grey = (weight > 1e-3) & (near < min_sat * weight)  # the core's mean saturation there below min_sat
        washed &= ~(grey & local_in)
    m = mask.copy()
    cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
    for _ in range(steps):
        drop = m & (cv2.erode(m.astype(np.uint8), cross) == 0) & washed
        if not drop.any():
            break
        m &= ~drop
    return m


def keep_large_components(mask: np.ndarray, min_frac: float, also: Optional[np.ndarray] = None) -> np.ndarray:
    """The connected pieces (8-connected) of ``mask`` with at least ``min_frac`` of the largest one's
    area, and, given ``also`` (bool, the mask's shape), every piece that overlaps it.

    >>> m = np.zeros((5, 12), bool); m[1:4, 0:8] = True; m[2, 10] = True
    >>> int(keep_large_components(m, 0.5).sum()), int(keep_large_components(m, 0.5, also=m & (np.arange(12) > 9)).sum())
    (24, 25)
    """
    n, lab, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 2:
        return mask
    areas = stats[1:, cv2.CC_STAT_AREA]
    keep = np.flatnonzero(areas >= min_frac * areas.max()) + 1
    if also is not None:
        keep = np.union1d(keep, np.unique(lab[also & (lab > 0)]))
    return np.isin(lab, keep)


def drop_foreign_pieces(img: np.ndarray, mask: np.ndarray, min_frac: float, bins: int = 8,
                        min_share: float = 0.5, rare: float = 0.002) -> np.ndarray:
    """Drop the small pieces of ``mask`` whose colours are not the robot's.

    The large pieces (at least ``min_frac`` of the largest one's area) are the robot; a smaller piece
    (an end cut off by a post, or a floor marking the robot crawled over) stays only when at least
    ``min_share`` of its pixels have colours (``img`` (H, W, 3) uint8, ``bins`` per channel) that hold
    at least ``rare`` of the large pieces' pixels.

    >>> img = np.zeros((4, 12, 3), np.uint8); img[:, :6] = (0, 0, 200); img[:, 10] = (200, 0, 0)
    >>> m = np.zeros((4, 12), bool); m[:, :6] = True; m[:, 10] = True
    >>> int(drop_foreign_pieces(img, m, 0.5).sum())
    24
    """
    n, lab, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 2:
        return mask
    areas = stats[1:, cv2.CC_STAT_AREA]
    large = np.isin(lab, np.flatnonzero(areas >= min_frac * areas.max()) + 1)
    robot = colour_hist(img, large, bins) >= rare
    q = (img // (256 // bins)).astype(np.intp)
    known = robot[q[..., 0], q[..., 1], q[..., 2]]
    out = mask.copy()
    for k in np.flatnonzero(areas < min_frac * areas.max()) + 1:
        piece = lab == k
        if known[piece].mean() < min_share:
            out[piece] = False
    return out


def colour_hist(bgr: np.ndarray, mask: np.ndarray, bins: int) -> np.ndarray:
    """Normalised colour histogram (bins, bins, bins) of the pixels where ``mask`` is set."""
    h = cv2.calcHist([bgr], [0, 1, 2], mask.astype(np.uint8), [bins] * 3, [0, 256] * 3)
    h = cv2.GaussianBlur(h.reshape(bins, bins * bins), (3, 3), 0).reshape(bins, bins, bins)  # light smoothing
    return h / max(float(h.sum()), 1.0)


def remove_thick_blobs(mask: np.ndarray, factor: float) -> np.ndarray:
    """Drop the parts of a mask much thicker than its typical width (a snake's prior).

    The typical half-width is the area over twice the skeleton's length
    (exact for a band); regions where a disc ``factor`` times wider fits
    (found by a morphological opening) are removed — the round obstacles
    GrabCut sometimes glues to a thin robot.
    """
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


def refine_boundary(img: np.ndarray, mask: np.ndarray, band_px: int = 2, bins: int = 32) -> np.ndarray:
    """Re-label the pixels within ``band_px`` of a mask's edge by colour likelihood.

    Colour histograms (``bins`` per channel) of the sure inside (mask
    eroded by ``band_px``) and the sure outside (a ring beyond the mask
    dilated by ``band_px``) classify each pixel of the band: robot when its
    colour is likelier inside than outside. ``img`` (H, W, 3) uint8, ``mask``
    bool (H, W); returns a new bool mask.
    """
    m = mask.astype(np.uint8)
    k = np.ones((3, 3), np.uint8)
    core = cv2.erode(m, k, iterations=band_px)
    if core.sum() < 20:
        return mask
    grown = cv2.dilate(m, k, iterations=band_px)
    outside = (cv2.dilate(m, k, iterations=band_px + 20) > 0) & (grown == 0)
    if outside.sum() < 20:
        return mask
    p_in = colour_hist(img, core, bins)
    p_out = colour_hist(img, outside.astype(np.uint8), bins)
    band = (grown > 0) & (core == 0)
    q = (img[band] // (256 // bins)).astype(np.intp)
    out = mask.copy()
    out[band] = p_in[q[:, 0], q[:, 1], q[:, 2]] > p_out[q[:, 0], q[:, 1], q[:, 2]]
    return out


def unlike_ground(img: np.ndarray, ring: np.ndarray, chroma_tol: float, dark: float) -> np.ndarray:
    """Pixels that are neither the ground nor its shade: farther than ``chroma_tol`` from the ring's median
    chromaticity (each channel over the channel sum) and brighter than ``dark`` times the ring's median
    brightness. Bool (H, W); none when the ring has fewer than 16 pixels. Gravel in video lies about 0.01
    from its own median chromaticity, a grey robot's bluish links on it 0.05-0.10; the ground in a cast
    shadow tinted by the sky is as far in colour, but dark.

    >>> img = np.full((4, 12, 3), (135, 140, 155), np.uint8)   # pinkish-grey gravel (BGR)
    >>> img[:, 4:8] = (185, 165, 150)                          # a bluish-grey link
    >>> img[:, 8:] = (95, 75, 65)                              # shade tinted blue
    >>> ring = np.zeros((4, 12), bool); ring[:, :4] = True
    >>> unlike_ground(img, ring, 0.04, 0.85)[0].astype(int).tolist()
    [0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    """
    if ring.sum() < 16:
        return np.zeros(img.shape[:2], bool)
    chrom, s, c_ref, i_ref = _against_ring(img, ring)
    return (np.linalg.norm(chrom - c_ref, axis=-1) > chroma_tol) & (s > dark * i_ref)


def _against_ring(img: np.ndarray, ring: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Each pixel's chromaticity (channel over channel sum, (H, W, 3)) and brightness (channel sum + 3,
    (H, W)), and the ring's medians of both."""
    f = img.astype(np.float32) + 1.0
    s = f.sum(axis=-1)
    chrom = f / s[..., None]
    return chrom, s, np.median(chrom[ring], axis=0), float(np.median(s[ring]))


def shadow_like(img: np.ndarray, ring: np.ndarray, chroma_tol: float, dark: float,
                floor: float = 0.0, deep_floor: float | None = None) -> np.ndarray:
    """Pixels that look like the ground in shade: the ring's chromaticity, darker than it.

    Chromaticity is each channel over the channel sum; a pixel within
    ``chroma_tol`` of the ring's median chromaticity whose brightness is
    below ``dark`` times the ring's median is shadow-like. (A cast shadow
    dims the ground but keeps its colour; the robot's colours differ.)
    Above ``floor`` times the ring's brightness only: darker pixels may be
    the robot's black or grey housings, which on a grey ground have the
    ground's chromaticity too. ``deep_floor`` (below ``floor``): a pixel
    farther than ``chroma_tol`` from grey counts as shade down to this
    brightness, since a grey housing does not have a coloured ground's hue
    (the deep shade beside a robot on brick or grass).

    >>> img = np.full((4, 16, 3), (60, 120, 200), np.uint8); img[1:, 12:] = (18, 36, 60)  # red ground, deep shade
    >>> img[1:, :2] = (18, 18, 18)                                                         # a black housing
    >>> ring = np.zeros((4, 16), bool); ring[0] = True
    >>> int(shadow_like(img, ring, 0.06, 0.85, 0.55).sum()), int(shadow_like(img, ring, 0.06, 0.85, 0.55, 0.15).sum())
    (0, 12)
    """
    if ring.sum() < 16:
        return np.zeros(img.shape[:2], bool)
    chrom, s, c_ref, i_ref = _against_ring(img, ring)
    bright_enough = s > floor * i_ref
    if deep_floor is not None and deep_floor < floor:
        coloured = np.linalg.norm(chrom - 1.0 / 3.0, axis=-1) >= chroma_tol
        bright_enough |= coloured & (s > deep_floor * i_ref)
    return (np.linalg.norm(chrom - c_ref, axis=-1) < chroma_tol) & (s < dark * i_ref) & bright_enough


def smooth_outline(mask: np.ndarray, sigma_px: float, keep_frac: float = 0.75) -> np.ndarray:
    """Smooth a mask's outline: Gaussian blur (σ = ``sigma_px`` pixels) of the mask, thresholded at 0.5.

    Removes one- or two-pixel notches and bumps (a ragged cast-shadow
    fringe, a grain of gravel glued to the edge, a notch in a lit edge),
    which a robot of cylinders does not have; straight edges stay where
    they are. When smoothing would remove more than ``1 - keep_frac`` of
    the area (a robot only a few pixels wide) the mask is returned as it
    is. ``mask`` bool (H, W); returns a new bool (H, W).

    >>> m = np.zeros((20, 20), bool); m[5:15, 5:15] = True; m[4, 9] = True   # a square with a 1-pixel bump
    >>> s = smooth_outline(m, 1.5)
    >>> bool(s[4, 9]), bool(s[10, 10]), int(s.sum()) in range(90, 101)
    (False, True, True)
    """
    m = np.asarray(mask, bool)
    if sigma_px <= 0 or m.sum() < 20:
        return m.copy()
    s = cv2.GaussianBlur(m.astype(np.float32), (0, 0), float(sigma_px)) > 0.5
    return s if s.sum() >= keep_frac * m.sum() else m.copy()


def close_gaps(mask: np.ndarray, factor: float) -> np.ndarray:
    """Morphological closing with a disc ``factor`` times the mask's typical half-width.

    Fills dark robot parts (joints) that look like shade and were left out
    between the robot's coloured segments.
    """
    m = mask.astype(np.uint8)
    if m.sum() < 20:
        return mask
    r = float(m.sum()) / max(2.0 * np.count_nonzero(skeletonize(m > 0)), 1.0)
    R = int(np.ceil(factor * r))
    if R < 1:
        return mask
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * R + 1, 2 * R + 1))
    return cv2.morphologyEx(m, cv2.MORPH_CLOSE, disc) > 0
