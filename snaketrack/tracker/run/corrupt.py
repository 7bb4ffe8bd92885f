"""Realistic segmentation errors on truth masks, seeded.

So the tracker can be measured before a segmenter exists, ``--corrupt-masks``
degrades each truth mask the way a segmenter does:

1. a boundary bias: erosion or dilation by ``r`` px, ``r`` uniform in
   ``[bias_min_px, bias_max_px]`` (1–3 px), sign chosen at random per frame;
2. a ragged boundary: the boundary is displaced by smooth noise of standard
   deviation ``ragged_std_px`` px and correlation length ``ragged_scale_px``;
3. a missing chunk in ``missing_chunk_prob`` of the frames (5 %): a disc of
   radius ``chunk_frac`` × the mask's bounding-box diagonal removed around a
   random mask pixel;
4. a false blob in ``false_blob_prob`` of the frames (2 %): a filled ellipse
   with semi-axes in ``blob_axes_px`` placed anywhere in the frame.

Steps 1–2 act on the mask's signed distance ``d`` [px] (:func:`signed_distance`)
plus the ragged-boundary noise field ``n``: erosion keeps ``d + n > r``,
dilation ``d + n ≥ −r``; with ``n = 0`` these are exactly erosion and
dilation by a Euclidean disc of radius ``r``.

Frame ``i`` of seed ``s`` draws from ``numpy.random.default_rng([s, i])``, so
a frame's corruption does not depend on which frames were corrupted before
it (the same seed gives the same bytes, in any order).

>>> import numpy as np
>>> m = np.zeros((40, 60), bool); m[15:25, 10:50] = True
>>> c = MaskCorruptor(seed=0)
>>> bool(np.array_equal(c(m, 3), c(m, 3))), c(m, 3).shape
(True, (40, 60))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from snaketrack.errors import InputError
from snaketrack.masks import mask_iou


@dataclass(frozen=True)
class CorruptionConfig:
    """Parameters of :class:`MaskCorruptor` (module doc); lengths in pixels, probabilities in [0, 1]."""

    bias_min_px: float = 1.0
    bias_max_px: float = 3.0
    ragged_std_px: float = 0.8
    ragged_scale_px: float = 4.0
    missing_chunk_prob: float = 0.05
    chunk_frac: tuple[float, float] = (0.06, 0.15)
    false_blob_prob: float = 0.02
    blob_axes_px: tuple[float, float] = (4.0, 20.0)

    def __post_init__(self):
        if not 0 <= self.bias_min_px <= self.bias_max_px:
            raise InputError(f"CorruptionConfig: bias range [{self.bias_min_px}, {self.bias_max_px}] px; "
                             "expected 0 <= min <= max")
        for name in ("missing_chunk_prob", "false_blob_prob"):
            p = getattr(self, name)
            if not 0 <= p <= 1:
                raise InputError(f"CorruptionConfig.{name} = {p!r}; expected a probability in [0, 1]")
        if self.ragged_std_px < 0 or self.ragged_scale_px <= 0:
            raise InputError(f"CorruptionConfig: ragged_std_px = {self.ragged_std_px}, ragged_scale_px = "
                             f"{self.ragged_scale_px}; expected >= 0 and > 0")


def signed_distance(mask: np.ndarray) -> np.ndarray:
    """Signed Euclidean distance [px] of a bool mask: inside ``+d_in``, outside ``−d_out``.

    ``d_in`` is a mask pixel's distance to the nearest background pixel
    (≥ 1), ``d_out`` a background pixel's distance to the nearest mask pixel.
    Erosion by a disc of radius r keeps ``d > r``; dilation keeps ``d ≥ −r``.
    """
    m = np.asarray(mask, bool).astype(np.uint8)
    if not m.any():
        return np.full(m.shape, -np.inf)
    if m.all():
        return np.full(m.shape, np.inf)
    inside = cv2.distanceTransform(m, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    outside = cv2.distanceTransform(1 - m, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    return np.where(m > 0, inside, -outside).astype(np.float64)


def offset_mask(d: np.ndarray, offset_px: float) -> np.ndarray:
    """The mask of signed distance ``d`` (:func:`signed_distance`) grown by a disc of radius
    ``offset_px`` [px] (> 0, dilation: ``d ≥ −offset``) or shrunk by one of radius −``offset_px``
    (< 0, erosion: ``d > −offset``)."""
    return d >= -offset_px if offset_px >= 0 else d > -offset_px


def _smooth_noise(rng: np.random.Generator, shape: tuple[int, int], std: float, scale: float) -> np.ndarray:
    if std == 0:
        return np.zeros(shape)
    h, w = shape
    # draw on a coarse grid and upsample (cheap, and smooth over ~scale px)
    gh, gw = max(2, int(np.ceil(h / scale)) + 1), max(2, int(np.ceil(w / scale)) + 1)
    g = rng.standard_normal((gh, gw)).astype(np.float32)
    n = cv2.resize(g, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float64)
    sd = n.std()
    return n * (std / sd) if sd > 0 else n


class MaskCorruptor:
    """Applies the corruption of the module doc; ``corruptor(mask, frame_index) -> bool mask``.

    ``last_events`` records what the last call did: ``bias_px`` (+ erosion,
    − dilation), ``missing_chunk`` and ``false_blob`` (bools).
    """

    def __init__(self, seed: int = 0, config: CorruptionConfig = CorruptionConfig()):
        self.seed = int(seed)
        self.config = config
        self.last_events: dict = {}

    def rng(self, frame_index: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, int(frame_index)])

    def __call__(self, mask: np.ndarray, frame_index: int) -> np.ndarray:
        m = np.asarray(mask)
        if m.ndim != 2:
            raise InputError(f"mask: shape {m.shape}; expected (H, W)")
        m = m > 0
        cfg = self.config
        rng = self.rng(frame_index)
        # draw every random number in a fixed order, whatever the mask holds
        r = rng.uniform(cfg.bias_min_px, cfg.bias_max_px)
        sign = 1.0 if rng.random() < 0.5 else -1.0
        noise = _smooth_noise(rng, m.shape, cfg.ragged_std_px, cfg.ragged_scale_px)
        chunk = rng.random() < cfg.missing_chunk_prob
        chunk_u, chunk_f = rng.random(), rng.uniform(*cfg.chunk_frac)
        blob = rng.random() < cfg.false_blob_prob
        blob_c = rng.random(2)
        blob_ax = rng.uniform(*cfg.blob_axes_px, size=2)
        blob_angle = rng.uniform(0, 180)

        out = m
        if m.any():
            d = signed_distance(m) + noise
            out = offset_mask(d, -sign * r)  # sign + erodes
        if chunk and out.any():
            vs, us = np.nonzero(out)
            k = min(int(chunk_u * len(us)), len(us) - 1)
            diag = float(np.hypot(us.max() - us.min() + 1, vs.max() - vs.min() + 1))
            rad = max(1, int(round(chunk_f * diag)))
            hole = np.zeros(out.shape, np.uint8)
            cv2.circle(hole, (int(us[k]), int(vs[k])), rad, 1, -1)
            out = out & (hole == 0)
        if blob:
            h, w = out.shape
            b = np.zeros(out.shape, np.uint8)
            centre = (int(blob_c[0] * (w - 1)), int(blob_c[1] * (h - 1)))
            cv2.ellipse(b, centre, (int(round(blob_ax[0])), int(round(blob_ax[1]))), float(blob_angle), 0, 360, 1, -1)
            out = out | (b > 0)
        self.last_events = {"bias_px": sign * r, "missing_chunk": bool(chunk), "false_blob": bool(blob)}
        return out


def corrupt_mask(mask: np.ndarray, frame_index: int, seed: int = 0,
                 config: Optional[CorruptionConfig] = None) -> np.ndarray:
    """One corrupted mask (bool (H, W)); see :class:`MaskCorruptor`."""
    return MaskCorruptor(seed, config or CorruptionConfig())(mask, frame_index)


#: Edge offsets [px] tried by :func:`best_offset_iou`: the corruption's bias is 1–3 px either way.
CEILING_OFFSETS_PX = tuple(np.round(np.arange(-4.0, 4.0 + 1e-9, 0.25), 2))


def best_offset_iou(truth: np.ndarray, observed: np.ndarray,
                    offsets_px=CEILING_OFFSETS_PX) -> tuple[float, float]:
    """The IoU against ``observed`` of ``truth`` grown (+) or shrunk (−) by its best uniform edge offset.

    truth, observed: bool (H, W) masks. Returns (IoU, offset [px]), the
    smallest offset of those that score best; (NaN, NaN)
    when ``truth`` is empty. The tracker fits such an offset per frame
    (``RefineConfig.estimate_offset``), so this is what the true silhouette
    itself scores against a corrupted mask in the tracker's ``iou``: the
    ragged edge, missing chunks and false blobs are beyond any offset, and a
    model-based tracker's ``iou`` stays near or below it (docs/tracking.md,
    "What a track can score").

    >>> m = np.zeros((40, 60), bool); m[15:25, 10:50] = True
    >>> grown = signed_distance(m) >= -2.0
    >>> iou, off = best_offset_iou(m, grown); round(iou, 3), off
    (1.0, 2.0)
    """
    t = np.asarray(truth, bool)
    o = np.asarray(observed, bool)
    if t.shape != o.shape:
        raise InputError(f"IoU ceiling: mask shapes {t.shape} and {o.shape} differ")
    if not t.any():
        return float("nan"), float("nan")
    d = signed_distance(t)
    best, best_off = -1.0, float("nan")
    for off in sorted(offsets_px, key=abs):  # ties (offsets under 1 px change no pixel) go to the smallest
        iou = mask_iou(offset_mask(d, off), o)  # the disc morphology of MaskCorruptor's bias
        if iou > best:
            best, best_off = iou, float(off)
    return best, best_off
