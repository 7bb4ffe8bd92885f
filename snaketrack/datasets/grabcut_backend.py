"""GrabCut (OpenCV) behind the labeller's box-prompt protocol: no weights needed.

``cv2.grabCut`` is run on a crop around the prompt box (the box plus a
margin of background), which is what makes it affordable per frame. It
starts from a mask, not the bare rectangle: outside the box is certain
background; inside, a pixel starts as "probably robot" when its colour
is much commoner inside the box than in a wide ring around it (colour
histogram back-projection: the ring sees the same ground and obstacles
as the box, so what is special to the box is the robot), and, when the
labeller passes the last good mask as ``prior``, it also lies near that
mask; ground in shade (the ring's chromaticity, darker than ``shadow_dark``
but brighter than ``shadow_floor`` times the ring's brightness: cast
shadows, not the robot's darker joints and underside) is certain
background. A pixel coloured away from grey counts as shade down to
``shadow_deep_floor``: on grass or brick the deep shade beside the robot
keeps the ground's hue, which a grey or black housing does not have.

**A collapsed cut.** When the robot's colours overlap the ground's (a grey
robot on gravel whose stones span its greys), the two colour models
overlap and one cut keeps only the robot's distinct parts (a red head, the
dark joints): on the label suite's grey-arcsnake gravel clips it kept
36–62 % of the pixels the colour contrast had marked (every other clip
0.45–1.14). A cut that keeps less than ``collapse_frac`` of them is run
again with the marked pixels whose colour the ring hardly has (ratio below
``sure_ratio``, 1 px in from their edge) held as certain robot. Held on
every frame instead, these seeds took in flowers and sticks on the drone
clips of the planar snake (0.842 → 0.702); held only after a collapse,
the suite's mean rose from 0.795 to 0.820 (drone arcsnake on gravel
0.486 → 0.739, static 0.773 → 0.821, no clip lower by more than 0.007).
When the ground has the body's colours too often for any of them to be
held (a bluish-grey body on pinkish-grey gravel whose stones take every
grey), a guided cut collapses onto the red head again; the second cut then
also holds the guide's pixels that are neither the ground's colour nor its
shade (``collapse_chroma``: farther than that from the ring's median
chromaticity, brighter than ``shadow_dark`` of its brightness: a cast
shadow tinted by the sky is as far in colour, but dark).

The cut runs on ``tone="loglab"``: Lab colour with the lightness on a
log scale, so the robot's dark underside against its cast shadow (≈ 40 vs
70 of 255) is as strong an edge as that shadow against lit ground (70 vs
125), and the cut does not snap to the shadow's outer edge.

After GrabCut: dark gaps shorter than ``close_factor`` times the typical
half-width are closed (joint housings between coloured links); the mask
grows up to ``grow_dark_steps`` pixels into adjacent pixels darker than
``grow_dark_ratio`` of the ring (joints, underside), except those of the
ground's hue (``grow_dark_shade``, the same test); up to ``peel_steps``
layers of edge pixels that are washed out (less saturated than
``peel_sat_frac`` of the mask's median) and not dark are peeled off
(robot colour mixed with ground or shadow), on a coloured robot only (the
median saturation of the mask's core, 2 px in from its edge, at least
``peel_min_sat``, 0.35; decided on the core, a washed-out rim cannot turn the
peel off and so keep itself: the planar snake's is
0.69–0.81 in the label suite's first frames, the red and black COBRA robot's
in real footage 0.43–0.46, the grey arcsnake's 0.15–0.26, whose edges
peeling wore away a few pixels a frame). Inside a guide it is decided
again near each edge pixel (``peel_local_px``): a cut that collapsed onto
the grey arcsnake's red head and dark joints and got its grey links back
looks coloured as a whole, and the peel took the links' edges as ground
(on a cut of drone-arcsnake-gravel's frame 48, 114 of the 549 robot pixels
it held). With ``thin_object`` parts
much thicker than the typical width are cut off; connected pieces
smaller than ``min_component_frac`` of the largest are dropped, unless
they overlap the last good mask (``keep_prior_pieces``: an end of the
robot cut off by a post it crawls behind, which would otherwise be lost
from then on, the next prompt box no longer holding it). The
label written (:meth:`GrabCutBackend.polish`) is that mask with its
outline smoothed (:func:`smooth_outline`, σ ``smooth_px``) and its edge
pixels then decided by their colour (:func:`unmix_edges`: a pixel beside
the edge that is clearly more robot than ground, a share above
0.5 + ``edge_margin`` of the local robot colour, joins the label; one
clearly less leaves it); the labeller guards and propagates the
unpolished mask. On the robots of the label suite (9–14 px wide) one
pixel of edge is a tenth of the area: the edge step lifted its mean from
0.820 to 0.827 (the planar snake's clips by 0.008–0.022; the grey
arcsnake's moved by −0.010 to +0.009) and that of six clips it was not
tuned on from 0.748 to 0.758, each of them up. A margin of 0, every edge
pixel decided either way, lost up to 0.024 on the grey arcsnake, whose
shaded rim and cast shadow are neither colour, and up to 0.025 on the
planar snake. Last, the edge is moved onto the frame's own colour edge
beside it where there is one, by at most a pixel (:func:`snap_edges`, a
guided filter of the label by the frame; ``edge_snap``): on the
label suite's fitted labels every 8th frame, the mean rose 0.845 →
0.855 and on the unfitted ones 0.835 → 0.843, no clip losing more than
0.0005 (a radius of 4–7 px or a threshold of 0.05–0.125 within 0.003 of
that; two passes lost up to 0.004 on a clip). OpenCV's RNG, from which
GrabCut's k-means draws, is seeded before each cut (``rng_seed``). A
speckled frame (asphalt seen through a GIF's dithered palette) is
median-filtered before anything else (``speckle_level``): on raw speckle
the colour models see noise and the cut keeps a few hundred pixels of the
robot.

What these rules measure, with the commands: docs/benchmarks.md, "Labels on scenes the
labeller was not tuned on". They
assume a coloured robot whose dark parts are darker than cast shadows; a grey robot
on grey ground is what the motion guide and the collapsed cut are for. A
colour-likelihood re-decision of the boundary band (``refine_band_px``),
``thin_object`` and Lab histograms (``colour_space``) are off by default: they
did not lift the labels.

>>> import numpy as np
>>> from snaketrack.datasets.boxes import Box
>>> from snaketrack.masks import mask_iou
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

from snaketrack.datasets.boxes import Box, dilate_mask, mask_to_box
from snaketrack.datasets.grabcut_rules import (
    close_gaps,
    colour_hist,
    drop_foreign_pieces,
    grow_dark,
    keep_large_components,
    peel_ground,
    refine_boundary,
    remove_thick_blobs,
    shadow_like,
    smooth_outline,
    tone_map,
    unlike_ground,
)
from snaketrack.errors import InputError, StateError
from snaketrack.mask_edges import snap_edges, unmix_edges


@dataclass(frozen=True)
class GrabCutConfig:
    """iterations: GrabCut EM iterations; margin_frac: background margin around the box (fraction of the larger box
    side, at least ``margin_px_min`` pixels); prior_dilate_px: how far from the last good mask a pixel still
    counts as "probably robot" [pixels]; min_component_frac: smallest kept component relative to the largest;
    ring_frac: width of the background ring for the colour contrast (fraction of the larger box side); bins:
    colour histogram bins per channel; contrast_ratio: a box pixel starts as "probably robot" when its colour's
    ring frequency is below this times its box frequency; thin_object, thick_factor: cut parts thicker than
    ``thick_factor`` times the typical width; use_prior: keep the initial robot guess near the last good mask;
    colour_space: "bgr" or "lab"; refine_band_px, refine_bins: boundary refinement band [pixels] and its
    histogram bins (0 turns it off); shadow_chroma, shadow_dark, shadow_floor: shade detection (chromaticity
    distance to the ring's, brightness range as fractions of the ring's); shadow_deep_floor: the lower end of
    that range for a pixel that is not grey (None: ``shadow_floor`` for all); shadow_soft: shade starts as
    "probably" (True) or "certain" background; close_factor: closing disc over the typical half-width (0: off);
    tone: the image GrabCut cuts, "linear" (BGR), "log" (log BGR) or "loglab" (Lab, log lightness), tone_knee:
    the log's knee [grey levels]; grow_dark_steps, grow_dark_ratio, grow_dark_shade: growth into adjacent dark
    pixels [pixels, fraction of the ring's brightness, chromaticity distance under which a dark pixel coloured
    like the ground is its shade and is not grown into (0: off)]; peel_steps, peel_sat_frac, peel_floor,
    peel_min_sat, peel_local_px: edge peeling [pixels, fraction of the mask's median saturation, fraction of the
    ring's brightness, the least median saturation of a mask's core that is peeled, the σ with which that is
    read again near each edge pixel inside a guide (0: not)] (:func:`peel_ground`); rng_seed: seed of OpenCV's
    RNG before each cut (GrabCut's k-means initialisation draws from it; None leaves it alone, and the masks
    then depend on what used the RNG before);
    smooth_px, smooth_keep_frac: the outline smoothing of :meth:`GrabCutBackend.polish` [pixels, fraction of the
    area it may remove]; keep_prior_pieces: also keep the pieces smaller than ``min_component_frac`` that
    overlap the last good mask (an end of the robot cut off by a post it crawls behind); foreign_share: of those
    pieces, keep only the ones with at least this share of their pixels in the robot's colours
    (:func:`drop_foreign_pieces`: a floor marking the robot crawled over is not an end of it; 0: off);
    speckle_level, speckle_median: a frame whose fine texture (:func:`speckle_level`) exceeds ``speckle_level``
    grey levels is median-filtered with a ``speckle_median`` px kernel before the cut (0: never);
    collapse_frac, sure_ratio: when the cut keeps less than ``collapse_frac`` of the pixels that started as
    "probably robot", it is run again with those whose colour's ring frequency is below ``sure_ratio`` times its
    box frequency (eroded by 1 px) held as certain robot (0: never); collapse_chroma: in that second cut a guide's
    pixels farther than this from the ring's median chromaticity and brighter than ``shadow_dark`` times its
    brightness (:func:`unlike_ground`, eroded by 1 px) are held as robot too (0: off); edge_margin, edge_sigma_px,
    edge_min_contrast: the written label's edge pixels decided by their colour (:func:`unmix_edges`: the margin
    around a half share of robot, the local colours' σ [pixels], the least robot-ground contrast [grey levels];
    ``edge_margin`` None: off); edge_snap: the written label's edge then moved onto the frame's colour edge
    (:func:`snap_edges`). See the module doc."""

    iterations: int = 1
    margin_frac: float = 0.15
    margin_px_min: int = 12
    prior_dilate_px: int = 12
    min_component_frac: float = 0.05
    ring_frac: float = 0.5
    bins: int = 16
    contrast_ratio: float = 0.2
    thin_object: bool = False
    use_prior: bool = True
    colour_space: str = "bgr"
    refine_band_px: int = 0
    shadow_chroma: float = 0.06
    shadow_dark: float = 0.85
    shadow_soft: bool = False
    shadow_floor: float = 0.55
    shadow_deep_floor: Optional[float] = 0.15
    close_factor: float = 2.0
    refine_bins: int = 32
    thick_factor: float = 1.7
    tone: str = "loglab"
    tone_knee: float = 4.0
    grow_dark_steps: int = 4
    grow_dark_ratio: float = 0.45
    grow_dark_shade: float = 0.06
    peel_steps: int = 3
    peel_sat_frac: float = 0.75
    peel_floor: float = 0.5
    peel_min_sat: float = 0.35
    peel_local_px: float = 3.0
    rng_seed: Optional[int] = 0
    smooth_px: float = 1.5
    smooth_keep_frac: float = 0.75
    keep_prior_pieces: bool = True
    foreign_share: float = 0.5
    speckle_level: float = 15.0
    speckle_median: int = 5
    sure_ratio: float = 0.1
    collapse_frac: float = 0.5
    edge_margin: Optional[float] = 0.3
    edge_sigma_px: float = 3.0
    edge_min_contrast: float = 20.0
    collapse_chroma: float = 0.04
    edge_snap: bool = True

    def __post_init__(self) -> None:
        if self.tone not in ("linear", "log", "loglab"):
            raise InputError(f"GrabCutConfig.tone {self.tone!r}: expected 'linear', 'log' or 'loglab'")
        if self.iterations < 1:
            raise InputError(f"GrabCutConfig.iterations {self.iterations}: expected >= 1")
        if self.bins < 1 or 256 % self.bins:
            raise InputError(f"GrabCutConfig.bins {self.bins}: expected a divisor of 256")


class GrabCutBackend:
    """Box-prompted GrabCut segmenter (see module doc)."""

    name = "grabcut"

    def __init__(self, config: GrabCutConfig = GrabCutConfig()):
        self.config = config
        self._bgr: Optional[np.ndarray] = None
        self._image: Optional[np.ndarray] = None  # the frame held, BGR, for the polish

    def set_image(self, rgb: np.ndarray) -> None:
        """Hold the frame (RGB uint8 (H, W, 3)) for the next prompts; a speckled frame (:func:`speckle_level`
        above ``speckle_level``) is median-filtered first."""
        rgb = np.ascontiguousarray(rgb)
        if self.config.speckle_level > 0 and speckle_level(rgb) > self.config.speckle_level:
            rgb = cv2.medianBlur(rgb, self.config.speckle_median)
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        self._image = bgr
        self._bgr = cv2.cvtColor(bgr, cv2.COLOR_BGR2Lab) if self.config.colour_space == "lab" else bgr
        self._feat = tone_map(bgr, self.config.tone, self.config.tone_knee)

    def reset_image(self) -> None:
        self._bgr = self._image = None

    def polish(self, mask: np.ndarray) -> np.ndarray:
        """The label written for a mask :meth:`predict` returned on the frame held: its outline smoothed
        (:func:`smooth_outline`), its edge pixels decided by their colour (:func:`unmix_edges`), then its
        edge moved onto the frame's colour edge by at most a pixel (:func:`snap_edges`).

        The labeller judges and propagates the unpolished mask (smoothing
        it before propagation lost the robot in the handheld video), and
        writes this one.
        """
        cfg = self.config
        label = smooth_outline(mask, cfg.smooth_px, cfg.smooth_keep_frac)
        if cfg.edge_margin is not None and self._image is not None:
            label = unmix_edges(self._image, label, cfg.edge_margin, cfg.edge_sigma_px, cfg.edge_min_contrast)
        if cfg.edge_snap and self._image is not None:
            label = snap_edges(self._image, label)
        return label

    def predict(self, box: Box, prior: Optional[np.ndarray] = None, guide: Optional[np.ndarray] = None,
                guide_near_px: int = 3, guide_far_px: int = 8, guide_shade: bool = True,
                background: Optional[np.ndarray] = None) -> np.ndarray:
        """Mask bool (H, W) of the object in ``box`` (pixels); ``prior`` the last good mask or None.

        ``guide``: where the object is expected, bool (H, W) (a model's silhouette), or None. With
        it, "probably robot" also takes in the guide and keeps to within ``guide_near_px`` of it
        (shade there is no longer certain background: a robot's dark parts), and pixels farther
        than ``guide_far_px`` from it are certain background before the cut and cut off after it
        (a post or another object inside the box) [pixels]. ``guide_shade`` False: ground in shade
        stays certain background inside the guide too (a guide that holds the robot's cast shadow).
        ``background``: bool (H, W), pixels known not to be the object (the still scene of a video), or
        None: certain background before the cut, guide or not, and cut off after it.
        """
        if self._bgr is None:
            raise StateError("GrabCutBackend.predict called before set_image(); call set_image(rgb) first")
        cfg = self.config
        H, W = self._bgr.shape[:2]
        has_guide = guide is not None and guide.shape == (H, W) and bool(guide.any())
        if has_guide:  # the prompt box also takes in the guide: a part of the robot the last mask lost
            box = box.union(mask_to_box(guide).expand(guide_far_px))
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
        feat = np.ascontiguousarray(self._feat[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w])
        has_prior = prior is not None and prior.shape == (H, W) and bool(prior.any())
        guide_c = not_robot = None  # not_robot: certain background before the cut, cut off after it
        if has_guide:
            # the crop holds the guide and guide_far_px around it (the box took it in): dilate the crop
            guide_c = guide[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w]
            not_robot = ~dilate_mask(guide_c, guide_far_px)
            near = dilate_mask(guide_c, guide_near_px)
        if background is not None and background.shape == (H, W):
            bg_c = background[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w]
            not_robot = bg_c if not_robot is None else not_robot | bg_c
        gc_mask, sure = self._contrast_init(crop, inside, box, roi, ring_mask, prior if has_prior else None)
        if guide_c is not None:
            gc_mask[inside & (gc_mask == cv2.GC_PR_FGD) & ~near] = cv2.GC_PR_BGD
            gc_mask[inside & guide_c & (guide_shade | (gc_mask != cv2.GC_BGD))] = cv2.GC_PR_FGD
        if not_robot is not None:
            gc_mask[not_robot] = cv2.GC_BGD
        if cfg.rng_seed is not None:
            cv2.setRNGSeed(int(cfg.rng_seed))  # same frame and prompt, same mask
        likely = gc_mask == cv2.GC_PR_FGD
        fg = _cut(feat, gc_mask.copy(), cfg.iterations)
        if fg is not None and cfg.collapse_frac > 0 and (fg & likely).sum() < cfg.collapse_frac * likely.sum():
            # the cut kept too little of what the colours marked: robot and ground colour models overlap
            # (a grey robot on gravel) and it fell back onto the robot's distinct parts (a red head, dark
            # joints); cut again with the colours the ring hardly has held as robot
            sure &= likely
            if guide_c is not None and cfg.collapse_chroma > 0:
                # the guide's pixels whose colour is not the ground's and that are brighter than its shade (a
                # grey robot's bluish links on pinkish gravel, not its cast shadow's tinted ground) are robot too
                core = likely & guide_c & unlike_ground(self._image[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w],
                                                        ring_mask[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w] > 0,
                                                        cfg.collapse_chroma, cfg.shadow_dark)
                sure |= cv2.erode(core.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
            if sure.any():
                gc_mask[sure] = cv2.GC_FGD
                if cfg.rng_seed is not None:
                    cv2.setRNGSeed(int(cfg.rng_seed))
                fg = _cut(feat, gc_mask, cfg.iterations)
        if fg is None:
            return out  # degenerate colour model (e.g. a flat crop): an empty answer, flagged upstream
        if cfg.close_factor > 0:
            fg = close_gaps(fg, cfg.close_factor) & inside
        if cfg.thin_object:
            fg = remove_thick_blobs(fg, cfg.thick_factor)
        if cfg.grow_dark_steps > 0:
            fg = grow_dark(crop, fg, ring_mask[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w] > 0, cfg.grow_dark_steps,
                            cfg.grow_dark_ratio, cfg.grow_dark_shade) & inside
        if cfg.peel_steps > 0:
            fg = peel_ground(crop, fg, ring_mask[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w] > 0, cfg.peel_steps,
                              cfg.peel_sat_frac, cfg.peel_floor, cfg.peel_min_sat, cfg.peel_local_px, guide_c)
        if not_robot is not None:
            fg &= ~not_robot
        keep = guide_c
        if keep is None and cfg.keep_prior_pieces and has_prior:  # a piece cut off by a post, not a stone
            keep = prior[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w]
        fg = keep_large_components(fg, cfg.min_component_frac, also=keep)
        if keep is not None and cfg.foreign_share > 0:  # a floor marking the robot left behind is not an end
            fg = drop_foreign_pieces(crop, fg, cfg.min_component_frac, min_share=cfg.foreign_share)
        if cfg.refine_band_px > 0:
            fg = refine_boundary(crop, fg, cfg.refine_band_px, cfg.refine_bins)
        out[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w] = fg
        return out


    def _contrast_init(self, crop: np.ndarray, inside: np.ndarray, box: Box, roi: Box, ring_mask: np.ndarray,
                       prior: Optional[np.ndarray]) -> np.ndarray:
        """GrabCut labels from the box alone: colours special to the box start as "probably robot"."""
        cfg = self.config
        H, W = self._bgr.shape[:2]
        box_mask = np.zeros((H, W), np.uint8)
        box_mask[box.y:box.y + box.h, box.x:box.x + box.w] = 1
        p_bg = colour_hist(self._bgr, ring_mask, cfg.bins)
        p_box = colour_hist(self._bgr, box_mask, cfg.bins)
        q = (crop // (256 // cfg.bins)).astype(np.intp)
        ratio = p_bg[q[..., 0], q[..., 1], q[..., 2]] / np.maximum(p_box[q[..., 0], q[..., 1], q[..., 2]], 1e-12)
        likely = inside & (ratio < cfg.contrast_ratio)
        if cfg.use_prior and prior is not None:
            near = dilate_mask(prior, cfg.prior_dilate_px)[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w]
            likely &= near
        gc_mask = np.where(inside, cv2.GC_PR_BGD, cv2.GC_BGD).astype(np.uint8)
        gc_mask[likely] = cv2.GC_PR_FGD
        if cfg.shadow_chroma > 0:
            shadow = inside & shadow_like(crop, ring_mask[roi.y:roi.y + roi.h, roi.x:roi.x + roi.w] > 0,
                                           cfg.shadow_chroma, cfg.shadow_dark, cfg.shadow_floor, cfg.shadow_deep_floor)
            gc_mask[shadow] = cv2.GC_PR_BGD if cfg.shadow_soft else cv2.GC_BGD
            likely &= ~shadow
        if not likely.any():
            gc_mask[inside] = cv2.GC_PR_FGD
        sure = cv2.erode((likely & (ratio < cfg.sure_ratio)).astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
        return gc_mask, sure


def speckle_level(rgb: np.ndarray) -> float:
    """How speckled a frame is: the median absolute difference [grey levels] between its grey image and that
    image median-filtered over 5×5 px. Asphalt filmed through a GIF's dithered palette: 42; concrete, grass,
    gravel and brick in video: 1–5.

    >>> flat = np.full((32, 32, 3), 120, np.uint8)
    >>> noisy = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    >>> speckle_level(flat), speckle_level(noisy) > 15
    (0.0, True)
    """
    g = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    return float(np.median(np.abs(g.astype(np.int16) - cv2.medianBlur(g, 5).astype(np.int16))))


def _cut(feat: np.ndarray, gc_mask: np.ndarray, iterations: int) -> Optional[np.ndarray]:
    """Run ``cv2.grabCut`` from ``gc_mask`` (GC_* labels) on ``feat``; the foreground (bool) or
    None when OpenCV refuses (degenerate colour model, e.g. a flat crop)."""
    bgd = np.zeros((1, 65), np.float64)
    fgd = np.zeros((1, 65), np.float64)
    try:
        cv2.grabCut(feat, gc_mask, None, bgd, fgd, iterations, cv2.GC_INIT_WITH_MASK)
    except cv2.error:
        return None
    return (gc_mask == cv2.GC_FGD) | (gc_mask == cv2.GC_PR_FGD)
