"""A label cut again by colour in a band around the robot model's fitted silhouette.

A box-prompted cut decides every pixel of its box by colour against the ground around the box; the robot's
dark joint housings on a grey floor have the floor's chromaticity and are darker than it, so the cut takes
them for the floor's shade and leaves them out, and the model fitted to that label follows it. The model's
silhouette at the fitted pose says where the body is to within a few pixels, but its capsules are not the
body's outline (the housings bulge past the links). So where the fit explains the label, the label is cut
again with both: GrabCut (``cv2.grabCut``, on the labeller's log-lightness Lab image,
:func:`~snaketrack.datasets.grabcut_rules.tone_map`) on a crop around the silhouette, started from

- certain robot: the label's pixels inside the silhouette, ``core_px`` in from their edge;
- probably robot: the rest of the silhouette and of the label;
- probably ground: the band within ``band_px`` of either;
- certain ground: everything farther.

No shade rule applies: within the band a dark pixel is what its colour says. Given the robot's colours
(:func:`robot_colours`: the colours of the first label cut so, ``colour_bins`` levels a channel, each held by
at least ``colour_min_count`` of its pixels), a pixel of the label or the silhouette whose colour the robot
does not have starts as probably ground instead, certain robot or not: a shoe or a chair leg in front of the
body lies inside the model's silhouette (which holds the hidden body too) and inside the label, and
started as robot, GrabCut's robot colour model would learn it. The band's width follows the
body's (``band_frac`` of the silhouette's width, :func:`body_width_px`, held within ``min_band_px`` and
``max_band_px``): a pixel farther from the model than that is not decided by this cut. A label the fit does
not explain (IoU with the silhouette below ``min_iou``) is returned as it is: the cut follows the image only
where the model vouches for the place. Within the band the cut may then disagree with the model (a shoe over
the body, cut out; a model that slid over it); a cut that keeps less than ``min_keep`` of the label's pixels
has lost the robot, and the label is returned as it is.

The gate (:mod:`~snaketrack.labelling.label_gate`) joins to the label the body past the model's ends, of
colours the robot has and the floor lacks (:func:`own_colours`, :func:`body_beyond`). Where a leg or a shoe
covers or touches the body, the shapes and colours here find it: a label wider than the body where the model
is not (:func:`wider_than_model`, cut to the model's width about its axis, :func:`axis_strip`), pieces of
colours the robot does not have (:func:`foreign`); the gate uses them when asked (``wide_frac``,
``foreign_fit``). A thing known to stand over the body, given as ``occluder``, starts the cut as certain
ground clear of the silhouette and the silhouette it may hide (:func:`covered_by`) as probably ground, so
that GrabCut learns its colours and gives back what beside it has the robot's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from snaketrack.datasets.boxes import dilate_mask, mask_to_box
from snaketrack.datasets.grabcut_rules import tone_map
from snaketrack.errors import InputError
from snaketrack.masks import body_width_px, mask_iou


@dataclass(frozen=True)
class BandConfig:
    """band_frac: the band's width as a fraction of the silhouette's width (:func:`body_width_px`); min_band_px,
    max_band_px: the band's width is held within these [pixels]; core_px: the certain robot lies this far in
    from the edge of the label's pixels inside the silhouette [pixels]; iterations: GrabCut's; min_iou: the
    least IoU of label and silhouette for the label to be cut again; min_keep: the least share of the label's
    pixels the cut must keep to be taken; colour_bins, colour_min_count: the robot's colours
    (:func:`robot_colours`) [levels a channel, a divisor of 256; pixels]; occluder_frac: the opening of
    :func:`foreign` [body widths]; occluder_near_px, cover_frac: the silhouette an occluder may hide
    (:func:`covered_by`; ``occluder_near_px`` also the margin of :func:`wider_than_model`) [pixels; body
    widths]; extend_frac, bridge_frac, ground_frac, thick_frac: the body past
    the model's ends (:func:`body_beyond`, :func:`own_colours`; ``extend_frac`` 0: not joined) [body widths];
    own_saturation, own_share: the least saturation of the robot's own colours and the least share of its
    pixels they must hold (:func:`own_colours`) [fractions];
    wide_frac: a label wider than a disc this many body widths across is wider than the body
    (:func:`wide_part`; 0, the default: not cut; 1.6 holds no body) [body widths]; width_rate: the gate
    follows the body's width by this share of each frame's (on frames without such a part); foreign_fit: the
    gate does not fit the model to pieces of colours the robot does not have (:func:`foreign`)."""

    band_frac: float = 0.5
    min_band_px: int = 2
    max_band_px: int = 12
    core_px: int = 1
    iterations: int = 2
    min_iou: float = 0.5
    min_keep: float = 0.3
    colour_bins: int = 16
    colour_min_count: int = 3
    occluder_frac: float = 0.4
    occluder_near_px: int = 2
    cover_frac: float = 1.5
    extend_frac: float = 2.0
    bridge_frac: float = 0.5
    ground_frac: float = 3.0
    thick_frac: float = 1.25
    own_saturation: float = 0.5
    own_share: float = 0.33
    wide_frac: float = 0.0
    width_rate: float = 0.05
    foreign_fit: bool = False

    def __post_init__(self) -> None:
        if not self.band_frac >= 0:
            raise InputError(f"band_frac {self.band_frac}: expected >= 0")
        if not 0 <= self.min_band_px <= self.max_band_px:
            raise InputError(f"band widths {self.min_band_px}, {self.max_band_px} px: expected 0 <= min <= max")
        if self.core_px < 0 or self.iterations < 1:
            raise InputError(f"core_px {self.core_px}, iterations {self.iterations}: expected >= 0 and >= 1")
        if self.colour_bins < 1 or 256 % self.colour_bins or self.colour_min_count < 1:
            raise InputError(f"colour_bins {self.colour_bins}, colour_min_count {self.colour_min_count}: expected a "
                             "divisor of 256 and >= 1")
        for name in ("occluder_frac", "cover_frac", "extend_frac", "bridge_frac", "ground_frac",
                     "thick_frac", "wide_frac"):
            if not getattr(self, name) >= 0:
                raise InputError(f"{name} {getattr(self, name)}: expected >= 0")
        if self.occluder_near_px < 0:
            raise InputError(f"occluder_near_px {self.occluder_near_px}: expected >= 0")
        for name in ("min_iou", "min_keep", "width_rate", "own_saturation", "own_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name} {getattr(self, name)}: expected a fraction in [0, 1]")


def band_px(silhouette: np.ndarray, config: BandConfig = BandConfig()) -> int:
    """The band's width [pixels] around ``silhouette`` (bool (H, W)): ``band_frac`` of its width, rounded, held
    within ``min_band_px`` and ``max_band_px``."""
    w = config.band_frac * body_width_px(silhouette)
    return int(np.clip(round(w), config.min_band_px, config.max_band_px))


def covered_by(occluder: np.ndarray, silhouette: np.ndarray, config: BandConfig = BandConfig()) -> np.ndarray:
    """The silhouette's pixels an occluder (a leg or a shoe over or against the body) may hide: those within
    ``cover_frac`` of the body's width (:func:`body_width_px`) and ``occluder_near_px`` of it; bool (H, W)
    each. A leg over the body hides what lies under it; what shows beside it has the robot's colours, which
    the band cut finds."""
    sil = np.asarray(silhouette, bool)
    occ = np.asarray(occluder, bool)
    if not occ.any():
        return np.zeros_like(sil)
    return sil & dilate_mask(occ, int(round(config.cover_frac * body_width_px(sil))) + config.occluder_near_px)


def foreign(rgb: np.ndarray, mask: np.ndarray, colours: Optional[np.ndarray], silhouette: np.ndarray,
            config: BandConfig = BandConfig()) -> np.ndarray:
    """The pieces of ``mask`` whose colours the robot does not have (``colours``, :func:`robot_colours`; None:
    none) and that an opening by a square ``occluder_frac`` of the body's width (``silhouette``'s,
    :func:`body_width_px`) on a side keeps: a white shoe, not a highlight or a blurred edge. rgb: uint8
    (H, W, 3); mask, silhouette: bool (H, W); bool (H, W).

    >>> img = np.full((40, 120, 3), 120, np.uint8); img[15:25, 10:110] = (230, 120, 20)   # an orange bar
    >>> img[10:30, 60:80] = 250; img[15, 30] = 250            # a white block over it, a white speck on it
    >>> m = np.zeros((40, 120), bool); m[15:25, 10:110] = True; m[10:30, 60:80] = True
    >>> table = np.zeros(16 ** 3, bool); table[_colour_index(img[20:21, 20:21], 16)] = True
    >>> np.argwhere(foreign(img, m, table, m)).min(0).tolist(), int(foreign(img, m, table, m).sum())
    ([10, 60], 400)
    """
    m = np.asarray(mask, bool)
    if colours is None or not m.any():
        return np.zeros_like(m)
    odd = m & ~colours[_colour_index(rgb, config.colour_bins)]
    side = 2 * max(1, int(round(config.occluder_frac * body_width_px(silhouette) / 2))) + 1
    return cv2.morphologyEx(odd.view(np.uint8), cv2.MORPH_OPEN, np.ones((side, side), np.uint8)) > 0


def own_colours(rgb: np.ndarray, mask: np.ndarray, config: BandConfig = BandConfig()) -> np.ndarray:
    """The robot's colours (:func:`robot_colours`) that the ground around ``mask`` does not have, saturated
    (``own_saturation``): bool (``colour_bins``³,); none when they hold less than ``own_share`` of the mask's
    pixels. The ground is the ring between the band (:func:`band_px`) and ``ground_frac`` body widths of the
    mask, a colour of it counted as :func:`robot_colours` counts. rgb: uint8 (H, W, 3); mask: bool (H, W)."""
    m = np.asarray(mask, bool)
    w = body_width_px(m)
    ring = dilate_mask(m, max(int(round(config.ground_frac * w)), 1)) & ~dilate_mask(m, band_px(m, config))
    ground = np.bincount(_colour_index(rgb, config.colour_bins)[ring], minlength=config.colour_bins ** 3)
    own = robot_colours(rgb, m, config) & (ground < config.colour_min_count) & _saturated(config)
    if np.count_nonzero(own[_colour_index(rgb, config.colour_bins)] & m) < config.own_share * np.count_nonzero(m):
        return np.zeros_like(own)  # a grey robot with a red nose: its own colours do not say where its body goes
    return own


def _saturated(config: BandConfig) -> np.ndarray:
    """Each colour bin's centre is at least ``own_saturation`` saturated (HSV's ``(max - min) / max``): bool
    (``colour_bins``³,). A grey robot's greys are a grey tether's and a grey shoe's too."""
    n = config.colour_bins
    q = (np.arange(n) + 0.5) * (256 // n)
    rgb = np.stack(np.meshgrid(q, q, q, indexing="ij"), -1).reshape(-1, 3)
    hi, lo = rgb.max(1), rgb.min(1)
    return (hi - lo) >= config.own_saturation * hi


def body_beyond(rgb: np.ndarray, label: np.ndarray, silhouette: np.ndarray, own: Optional[np.ndarray],
                config: BandConfig = BandConfig()) -> np.ndarray:
    """The body the label and the model's silhouette left out beyond the band: pixels of the robot's own
    colours (``own``, :func:`own_colours`; None: none) within ``extend_frac`` body widths of ``silhouette``
    (:func:`body_width_px`), joined to ``label`` by a closing with a square ``bridge_frac`` of the body's width
    on a side (the dark housings between the links); bool (H, W), none of it in ``label``. rgb: uint8
    (H, W, 3); label, silhouette: bool (H, W). Only pixels of those colours are added: the housings between
    them are the band cut's to find.

    >>> img = np.full((40, 200, 3), 120, np.uint8); img[15:25, 10:190] = (230, 120, 20)   # an orange bar
    >>> img[15:25, 100:104] = 30                                                         # a dark housing
    >>> img[2:6, 150:160] = (230, 120, 20)                                     # an orange thing apart
    >>> lab = np.zeros((40, 200), bool); lab[15:25, 10:80] = True; sil = lab.copy()
    >>> own = np.zeros(16 ** 3, bool); own[_colour_index(img[20:21, 20:21], 16)] = True
    >>> more = body_beyond(img, lab, sil, own)
    >>> np.argwhere(more).min(0).tolist(), np.argwhere(more).max(0).tolist()   # 2 widths (9 px) past its end
    ([15, 80], [24, 97])
    """
    lab = np.asarray(label, bool)
    sil = np.asarray(silhouette, bool)
    none = np.zeros_like(lab)
    w = body_width_px(sil)
    if own is None or w <= 0 or not lab.any():
        return none
    reach = dilate_mask(sil, int(round(config.extend_frac * w)))
    hue = own[_colour_index(rgb, config.colour_bins)] & reach & ~lab
    if not hue.any():
        return none
    k = 2 * max(1, int(round(config.bridge_frac * w / 2))) + 1
    joined = cv2.morphologyEx((hue | lab).view(np.uint8), cv2.MORPH_CLOSE, np.ones((k, k), np.uint8)) > 0
    joined &= reach
    n, comp = cv2.connectedComponents(joined.view(np.uint8), connectivity=8)
    touching = np.unique(comp[lab & joined])
    more = np.isin(comp, touching[touching > 0]) & hue  # the closing joins; what it fills is not added
    # a piece wider than the body (an opening by a square of ``thick_frac`` body widths keeps some of it) is
    # a thing of the robot's colours beside it, not the body
    n, comp = cv2.connectedComponents(more.view(np.uint8), connectivity=8)
    k = 2 * max(1, int(round(config.thick_frac * w / 2))) + 1
    thick = cv2.morphologyEx(more.view(np.uint8), cv2.MORPH_OPEN, np.ones((k, k), np.uint8)) > 0
    return more & ~np.isin(comp, np.unique(comp[thick]))


def wide_part(mask: np.ndarray, width_px: float, config: BandConfig = BandConfig()) -> np.ndarray:
    """The parts of ``mask`` (bool (H, W)) wider than the body: its opening by a disc ``wide_frac`` of the
    body's width ``width_px`` [pixels] across (every such disc that fits in it); bool (H, W). A body, its
    housings and its bends hold no such disc; a leg or a shoe over or against it, or the body's shadow
    beside it, do.

    >>> m = np.zeros((60, 200), bool); m[30:40, 10:190] = True; m[10:40, 90:120] = True   # a block on a body
    >>> wide = wide_part(m, 10.0, BandConfig(wide_frac=1.6))
    >>> np.argwhere(wide).min(0).tolist(), np.argwhere(wide).max(0).tolist()
    ([10, 90], [39, 119])
    """
    m = np.asarray(mask, np.uint8)
    d = 2 * max(1, int(round(config.wide_frac * width_px / 2))) + 1
    return cv2.morphologyEx(m, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (d, d))) > 0


def wider_than_model(mask: np.ndarray, silhouette: np.ndarray, width_px: float,
                     config: BandConfig = BandConfig()) -> np.ndarray:
    """The parts of ``mask`` wider than the body (:func:`wide_part`, ``width_px`` [pixels]) where the model's
    ``silhouette`` grown by ``occluder_near_px`` is not as wide (the body's near end seen from low down is
    wider than its middle); bool (H, W) each."""
    return wide_part(mask, width_px, config) & ~wide_part(dilate_mask(silhouette, config.occluder_near_px),
                                                          width_px, config)


def axis_strip(silhouette: np.ndarray, width_px: float) -> np.ndarray:
    """``silhouette`` (bool (H, W)) no wider than ``width_px`` [pixels, as :func:`body_width_px` measures]
    about its axis: eroded by half the excess of its own width over it; bool (H, W).

    >>> sil = np.zeros((60, 200), bool); sil[20:40, 10:190] = True    # 20 × 180: body_width_px 18
    >>> strip = axis_strip(sil, 10.0); int(strip[:, 100].sum()), bool(strip[25:35, 100].all())
    (12, True)
    """
    sil = np.asarray(silhouette, bool)
    e = int(round((body_width_px(sil) - width_px) / 2))
    if e <= 0:
        return sil
    return cv2.erode(sil.view(np.uint8), np.ones((2 * e + 1, 2 * e + 1), np.uint8)) > 0


def _colour_index(rgb: np.ndarray, bins: int) -> np.ndarray:
    """Each pixel's colour bin, int (H, W), of ``bins`` levels a channel."""
    q = (np.asarray(rgb) // (256 // bins)).astype(np.intp)
    return (q[..., 0] * bins + q[..., 1]) * bins + q[..., 2]


def robot_colours(rgb: np.ndarray, mask: np.ndarray, config: BandConfig = BandConfig()) -> np.ndarray:
    """The colours of ``mask``'s pixels ``core_px`` in from its edge: bool (``colour_bins``³,), a bin true when
    at least ``colour_min_count`` of them fall in it. rgb: uint8 (H, W, 3); mask: bool (H, W).

    >>> img = np.zeros((10, 10, 3), np.uint8); img[:, 5:] = (240, 120, 10)
    >>> m = np.zeros((10, 10), bool); m[:, 4:] = True
    >>> table = robot_colours(img, m); int(table.sum()), bool(table[_colour_index(img, 16)[0, 9]])
    (1, True)
    """
    k = 2 * config.core_px + 1
    core = cv2.erode(np.asarray(mask, np.uint8), np.ones((k, k), np.uint8)) > 0
    counts = np.bincount(_colour_index(rgb, config.colour_bins)[core], minlength=config.colour_bins ** 3)
    return counts >= config.colour_min_count


def band_cut(rgb: np.ndarray, label: np.ndarray, silhouette: np.ndarray, config: BandConfig = BandConfig(),
             colours: Optional[np.ndarray] = None, occluder: Optional[np.ndarray] = None
             ) -> tuple[np.ndarray, bool]:
    """``label`` cut again by colour within a band around ``silhouette`` (module doc): ``(mask, taken)``, the
    new label and whether the cut replaced ``label`` (False: ``label`` itself, the fit or the cut did not
    qualify). rgb: uint8 (H, W, 3); label, silhouette: bool (H, W); colours: the robot's
    (:func:`robot_colours`), or None (every colour may be the robot's); occluder: bool (H, W), a thing in
    front of or against the body, or None: certain ground clear of the silhouette, and the silhouette's pixels
    it may hide (:func:`covered_by`) start as probably ground.

    >>> img = np.full((40, 120, 3), 120, np.uint8); img[15:25, 10:110] = (230, 120, 20)   # an orange bar
    >>> img[12:28, 50:60] = 40                                                             # a dark housing
    >>> truth = np.zeros((40, 120), bool); truth[15:25, 10:110] = True; truth[12:28, 50:60] = True
    >>> sil = np.zeros_like(truth); sil[15:25, 10:110] = True                              # the model's capsule
    >>> mask, taken = band_cut(img, sil.copy(), sil)
    >>> taken, round(mask_iou(sil, truth), 3), round(mask_iou(mask, truth), 3)
    (True, 0.943, 1.0)
    """
    label = np.asarray(label, bool)
    sil = np.asarray(silhouette, bool)
    if not sil.any() or not label.any() or mask_iou(label, sil) < config.min_iou:
        return label, False
    band = band_px(sil, config)
    reach = dilate_mask(sil | label, band)
    h, w = label.shape
    box = mask_to_box(reach).expand(band + 4).clip(w, h)
    sl = (slice(box.y, box.y + box.h), slice(box.x, box.x + box.w))
    crop = np.ascontiguousarray(np.asarray(rgb)[sl])
    like = colours[_colour_index(crop, config.colour_bins)] if colours is not None else True
    gc = np.full((box.h, box.w), cv2.GC_BGD, np.uint8)
    gc[reach[sl]] = cv2.GC_PR_BGD
    gc[(sil | label)[sl] & like] = cv2.GC_PR_FGD
    k = 2 * config.core_px + 1
    core = (cv2.erode((label & sil)[sl].view(np.uint8), np.ones((k, k), np.uint8)) > 0) & like
    if not core.any() or (gc == cv2.GC_BGD).sum() + (gc == cv2.GC_PR_BGD).sum() < 16:
        return label, False
    gc[core] = cv2.GC_FGD
    if occluder is not None and np.any(occluder):
        gc[covered_by(occluder, sil, config)[sl] & (gc != cv2.GC_BGD)] = cv2.GC_PR_BGD
        # certain ground only clear of the silhouette: a leg's outline there may hold the body's edge
        gc[(np.asarray(occluder, bool) & ~dilate_mask(sil, config.occluder_near_px))[sl]] = cv2.GC_BGD
    if not ((gc == cv2.GC_FGD) | (gc == cv2.GC_PR_FGD)).any():
        return label, False
    bgr = cv2.cvtColor(crop, cv2.COLOR_RGB2BGR)
    feat = np.ascontiguousarray(tone_map(bgr, "loglab"))
    cv2.setRNGSeed(0)  # GrabCut's k-means draws from OpenCV's RNG: same frame, same label
    try:
        cv2.grabCut(feat, gc, None, np.zeros((1, 65)), np.zeros((1, 65)), config.iterations,
                    cv2.GC_INIT_WITH_MASK)
    except cv2.error:  # a degenerate colour model (a flat crop)
        return label, False
    out = np.zeros_like(label)
    out[sl] = (gc == cv2.GC_FGD) | (gc == cv2.GC_PR_FGD)
    if np.count_nonzero(out & label) < config.min_keep * np.count_nonzero(label):
        return label, False
    return out, True
