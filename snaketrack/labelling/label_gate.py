"""The label gate: every label held to the robot model fitted from the first frame on.

A box-prompted labeller grows each frame's box from the last label, so once a shoe, a chair leg or a tether
that touches the robot is taken in, the next box takes in more, and nothing says so. With the robot's model
known, the model fitted to the labels so far (:class:`~snaketrack.labelling.fit_labels.LabelFitter`, started on
the first frame's label) says where the robot is next, and each frame is labelled against it:

1. **Prior and box.** The last fitted pose is drawn and moved with the image of the floor around it since
   the last frame (:func:`follow_camera`: a handheld camera that pans moves the whole image by tens of
   pixels a frame, the robot itself a pixel or two): the *predicted silhouette*. (With ``follow_px`` 0, the
   tracker's constant-velocity prediction instead: on a panning camera it carries last frame's pan
   into this one, and the gate then cuts the robot off.) The prompt box is its box grown by ``box_px``, not
   the last label's, and it is the backend's prior (the motion-guided backend keeps the moving pieces near
   it, so a leg stepping beside the robot is not its guide). With ``reach_px`` > 0 (off by default) the model is
   then refined from the predicted pose on the backend's cut within ``reach_px`` of the predicted silhouette (the
   tracker's :meth:`~snaketrack.tracker.tracker.Tracker.fit`, on the cut moved back with the camera into the last
   frame's image; the tracker's session untouched), and its silhouette, moved with the camera, replaces the
   predicted one when it agrees with that cut better by ``align_margin`` (IoU) and its area is within
   ``align_area`` of the predicted one's (``aligned``; a robot's apparent size changes little in a frame, a fit
   that grew it took in a thing beside it, a chair or a person); a cut that holds more than ``align_cut_ratio``
   times the predicted silhouette's area within ``reach_px`` of it holds such a thing, and is not fitted to: a
   robot whose ends move farther in a frame than ``far_px`` would otherwise outrun the prediction, and the gate
   would cut its moving ends off, frame after frame. A thing touching the body pulls this fit only as far as the
   tracker's priors towards the prediction let it, and must make the silhouette agree with the cut better.
2. **Cut at the model's boundary.** Whatever the backend cut farther than ``far_px`` from the predicted
   silhouette is not robot, whatever the colours say, and is cut off; so is a thick piece of the cut that
   reaches beyond ``near_px`` of it (:func:`cut_blobs`: a shoe resting against the body, which within
   ``far_px`` would pull the fit towards it) (``cut_off_model``, when at least ``min_px`` pixels go).
3. **Re-cut.** A cut that still agrees with the predicted silhouette less than ``recut_iou`` (IoU) is cut again
   by GrabCut guided by the silhouette itself (``GrabCutBackend.predict(guide=...)``: the silhouette "probably
   robot", pixels farther than ``far_px`` certain background); the re-cut replaces the cut when it agrees
   better (``recut``).
4. **Fit and gate.** The model is fitted to the label within ``fit_px`` of the predicted silhouette (what is
   left of a thing touching the body must not pull the fit, and with it the next prediction, towards it),
   which the fit replaces or trims as
   :class:`~snaketrack.labelling.fit_labels.FittedBackend` does; what of the label still lies farther than
   ``off_px`` from the fitted silhouette is cut (``trimmed_to_model``), and a label whose IoU with the
   fitted silhouette stays below ``drop_iou`` is flagged ``off_model``: written (the dataset stays aligned
   with the video), listed with the labeller's other flags, skipped by training.
5. **Band cut.** A label that is not flagged is cut again by colour in a band around the fitted silhouette
   (:func:`~snaketrack.labelling.band_cut.band_cut`, ``band``; ``band_cut``): the robot's dark housings that
   the box's cut took for the floor's shade join it, and what is not of the robot's colours (those of the
   first label cut so) in front of the body leaves it.
6. **The body past the model's ends** (opt-in: ``band.extend_frac`` > 0, ``label --body-beyond``). Before the fit,
   the body past the prediction's ends in the robot's own colours
   (:func:`~snaketrack.labelling.band_cut.body_beyond`) joins the label and the fit (``body_beyond``). Two more
   rules are in ``BandConfig``, off by default: with ``foreign_fit``, pieces of colours the robot does not have
   are not fitted (``foreign``); with ``wide_frac`` above 0, where the label is wider than the body and the
   prediction is not (a leg or a shoe over or against the body,
   :func:`~snaketrack.labelling.band_cut.wider_than_model`), only the body's width about the predicted axis is
   fitted, and the label keeps the fitted silhouette's axis strip of that width (``wide``).

The first frame has no prediction: it is cut from the user's box (what the cut holds outside the box is cut
off, ``cut_off_box``: the box is where the user said the robot is), the model is fitted to that cut, and the
frame is cut again guided by the fitted silhouette as in 3 (``recut``), so that a tether or a shoe inside the
box does not shape the model every later frame is held to.

The first frame's re-cut is taken only when the model fitted to the box's cut and the re-cut each agree with
that cut to ``trust_iou`` (a fit that found the robot elsewhere guides nothing). A frame whose model is not
``tracked`` (coasting, lost) is labelled as without the gate, from the last good label's box. The reasons
of each frame are the ``gate`` column of ``fit.csv`` (``followed``: the prediction was moved with the
camera); ``labels_report.json`` counts them (``fit.gate_counts``).

On a low view (a phone held near the floor) give the fit the up direction and, on a moving camera, the
ground (:class:`~snaketrack.labelling.fit_labels.LabelFitter`, ``snaketrack label --up ... --track-ground``):
a model fitted to masks alone trades tilt against depth there, and a label a distractor spoils pulls it
nearer the camera frame by frame. With the band cut (step 5) they lowered three of four lab clips' labels
(docs/benchmarks.md, "A phone that follows the robot"): not a default.

Cost: the prediction is two silhouettes drawn and one refinement a frame; a re-cut is one more GrabCut, only
on a frame whose cut disagrees. The fit's tracker runs its pose search on the first frame and on at most
``warmup_frames`` after it (:func:`gate_tracker`), not the tracker's ten: with the label held to the model the
search rarely helps, and on labels a distractor spoiled it runs every frame of the warm-up at seconds a frame.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

import cv2
import numpy as np

from snaketrack.datasets.boxes import Box, dilate_mask, mask_to_box
from snaketrack.errors import InputError
from snaketrack.labelling.band_cut import (
    BandConfig,
    axis_strip,
    band_cut,
    body_beyond,
    foreign,
    own_colours,
    robot_colours,
    wider_than_model,
)
from snaketrack.labelling.fit_labels import FittedBackend, LabelFitter, fit_row, trimmed_label
from snaketrack.masks import body_width_px, mask_iou
from snaketrack.tracker.config import TrackerConfig


@dataclass(frozen=True)
class GateConfig:
    """box_px: the prompt box's margin around the predicted silhouette [pixels]; far_px: a cut's pixels farther
    than this from the predicted silhouette are cut off [pixels]; near_px, blob_px: beyond ``near_px`` of the
    predicted silhouette, pieces of the cut thicker than ``2 blob_px + 1`` are cut off (:func:`cut_blobs`)
    [pixels]; fit_px: the model is fitted to the label within this of its predicted silhouette [pixels] (a rim
    of a thing touching the body must not pull it); recut_iou: a cut agreeing less with the
    predicted silhouette (IoU) is cut again guided by it; off_px: a label's pixels farther than this from the
    fitted silhouette are cut [pixels, city-block]; drop_iou: a label agreeing less with the fitted silhouette
    (IoU) is flagged ``off_model``; trust_iou: on the first frame, only a fit and a re-cut that agree this
    well (IoU) with the box's cut are taken; min_px: fewer pixels cut off are not recorded as a reason [pixels];
    warmup_frames: frames after the first on which the fit's tracker may search for its pose again;
    follow_px: the predicted silhouette is moved with the image of the ground around it, corners within this
    of it (and outside it) tracked from the last frame (:func:`follow_camera`; 0: not moved) [pixels];
    reach_px: the model is refined from the predicted pose on the backend's cut within this of the predicted
    silhouette (0, the default: not) [pixels]; 24 keeps the labels on a fast robot in a clear scene, and
    with people and chairs beside the robot moves the model onto them (docs/benchmarks.md, "Labels in an
    ordinary lab"); align_margin: the refined silhouette replaces the predicted one when it
    agrees with that cut better by this (IoU) and align_area: its area differs from the predicted one's by at
    most this fraction; align_cut_ratio: a cut holding more than this times the predicted silhouette's area
    within ``reach_px`` of it is not fitted to; band: a
    label the fitted model explains is cut again in a band around its silhouette
    (:func:`~snaketrack.labelling.band_cut.band_cut`; None: not)."""

    box_px: int = 15
    near_px: int = 1
    blob_px: int = 1
    far_px: int = 5
    fit_px: int = 3
    recut_iou: float = 0.6
    off_px: int = 3
    drop_iou: float = 0.5
    trust_iou: float = 0.5
    min_px: int = 20
    warmup_frames: int = 2
    follow_px: int = 80
    reach_px: int = 0
    align_margin: float = 0.02
    align_area: float = 0.25
    align_cut_ratio: float = 1.5
    band: Optional[BandConfig] = BandConfig(extend_frac=0.0)  # the body past the model's ends: opt-in

    def __post_init__(self) -> None:
        for name in ("box_px", "near_px", "blob_px", "far_px", "fit_px", "off_px", "min_px", "warmup_frames",
                     "follow_px", "reach_px", "align_cut_ratio"):
            if getattr(self, name) < 0:
                raise InputError(f"gate {name} {getattr(self, name)}: expected >= 0")
        for name in ("recut_iou", "drop_iou", "trust_iou", "align_margin", "align_area"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"gate {name} {getattr(self, name)}: expected a fraction in [0, 1]")


def gate_tracker(config: GateConfig = GateConfig()):
    """The fit's :class:`~snaketrack.tracker.config.TrackerConfig` under the gate: the defaults with the
    warm-up searches cut to ``config.warmup_frames`` (module doc)."""
    return replace(TrackerConfig(), warmup_frames=int(config.warmup_frames))


def cut_blobs(cut: np.ndarray, silhouette: np.ndarray, near_px: int, blob_px: int) -> np.ndarray:
    """``cut`` without the thick pieces it holds beyond ``near_px`` of ``silhouette``; bool (H, W) each.

    The pixels of the cut farther than ``near_px`` from the silhouette (square) are its excess; the excess an
    opening by a ``2 blob_px + 1`` square keeps, grown back by ``blob_px`` within the excess, is a thing
    touching the body (a shoe, a chair leg), not the body: a robot that moved farther than the prediction
    leaves a ribbon along its edge as thin as the error, which the opening removes and the cut keeps.

    >>> sil = np.zeros((20, 30), bool); sil[8:11, 2:28] = True
    >>> cut = sil.copy(); cut[11:19, 10:20] = True; cut[11:13, 2:8] = True   # a blob and a 2-px ribbon
    >>> kept = cut_blobs(cut, sil, 1, 2)
    >>> int(kept[11:19, 10:20].sum()), int(kept[11:13, 2:8].sum()), bool(kept[sil].all())
    (10, 12, True)
    """
    cut = np.asarray(cut, bool)
    excess = cut & ~dilate_mask(silhouette, near_px)
    if blob_px <= 0 or not excess.any():
        return cut
    k = np.ones((2 * blob_px + 1, 2 * blob_px + 1), np.uint8)
    thick = cv2.morphologyEx(excess.view(np.uint8), cv2.MORPH_OPEN, k) > 0
    return cut & ~(dilate_mask(thick, blob_px) & excess)


def follow_camera(prev_gray: np.ndarray, gray: np.ndarray, silhouette: np.ndarray, near_px: int = 80,
                  clear_px: int = 6, min_points: int = 12) -> Optional[np.ndarray]:
    """The image motion from ``prev_gray`` to ``gray`` (uint8 (H, W) each) of the scene around ``silhouette``
    (bool (H, W), in the last frame): a (2, 3) similarity (rotation, scale, shift) [pixels], or None when too
    few corners follow.

    The robot's prediction comes from its own motion in the camera's frame; a handheld camera that pans
    moves the whole image by tens of pixels between frames, which the prediction knows nothing of. Corners
    within ``near_px`` of the silhouette but ``clear_px`` clear of it (mostly the floor it lies on) are
    tracked by pyramidal Lucas-Kanade and a similarity is fitted to them by RANSAC (``cv2``'s
    ``estimateAffinePartial2D``): a leg stepping past is an outlier.

    >>> rng = np.random.default_rng(0)
    >>> a = (rng.random((120, 160)) * 255).astype(np.uint8); a = cv2.GaussianBlur(a, (5, 5), 1.5)
    >>> b = np.roll(a, (3, -5), axis=(0, 1))                       # the scene moved 5 px left, 3 px down
    >>> sil = np.zeros_like(a, bool); sil[55:65, 40:120] = True
    >>> np.round(follow_camera(a, b, sil)[:, 2]).tolist()
    [-5.0, 3.0]
    """
    ring = dilate_mask(silhouette, near_px) & ~dilate_mask(silhouette, clear_px)
    pts = cv2.goodFeaturesToTrack(prev_gray, maxCorners=300, qualityLevel=0.01, minDistance=5,
                                  mask=ring.view(np.uint8) * 255)
    if pts is None or len(pts) < min_points:
        return None
    nxt, st, _ = cv2.calcOpticalFlowPyrLK(prev_gray, gray, pts, None, winSize=(21, 21), maxLevel=3)
    ok = st.reshape(-1).astype(bool)
    if ok.sum() < min_points:
        return None
    A, inliers = cv2.estimateAffinePartial2D(pts[ok], nxt[ok], method=cv2.RANSAC, ransacReprojThreshold=2.0)
    if A is None or inliers is None or int(inliers.sum()) < min_points:
        return None
    return A


def moved(mask: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``mask`` (bool (H, W)) moved by the (2, 3) affine ``A`` [pixels] (nearest neighbour)."""
    h, w = mask.shape
    return cv2.warpAffine(mask.view(np.uint8), A, (w, h), flags=cv2.INTER_NEAREST) > 0


def cut_off_model(cut: np.ndarray, silhouette: np.ndarray, far_px: int) -> np.ndarray:
    """``cut ∧ dilate(silhouette, far_px)`` (square, :func:`~snaketrack.datasets.boxes.dilate_mask`); bool (H, W).

    >>> sil = np.zeros((5, 12), bool); sil[2, 1:5] = True
    >>> cut = np.zeros((5, 12), bool); cut[2, 1:11] = True
    >>> np.flatnonzero(cut_off_model(cut, sil, 2)[2]).tolist()   # a blob beyond 2 px of the model goes
    [1, 2, 3, 4, 5, 6]
    """
    return np.asarray(cut, bool) & dilate_mask(silhouette, far_px)


class GatedBackend(FittedBackend):
    """A box-prompted backend whose labels are held to the robot model fitted to them (module doc).

    backend: the box-prompted backend (:class:`~snaketrack.datasets.grabcut_backend.GrabCutBackend` or
    :class:`~snaketrack.datasets.motion_backend.MotionGuidedBackend`); fitter: a
    :class:`~snaketrack.labelling.fit_labels.LabelFitter` (best built with :func:`gate_tracker`); config:
    :class:`GateConfig`. After each frame, ``gate_flags`` holds the labeller flags it raised (``off_model``)
    and ``last_fit`` the frame's ``fit.csv`` row with its ``gate`` reasons (counted by the labels report).
    """

    def __init__(self, backend, fitter: LabelFitter, config: GateConfig = GateConfig()):
        super().__init__(backend, fitter)
        self.config = config
        self._grabcut = getattr(backend, "grabcut", backend)
        self._predicted: Optional[np.ndarray] = None
        self._pred_x: Optional[np.ndarray] = None  # the pose drawn as the predicted silhouette
        self._frame_predicted: Optional[np.ndarray] = None
        self._reasons: list[str] = []
        self.gate_flags: tuple[str, ...] = ()
        self._gray: Optional[np.ndarray] = None
        self._prev_gray: Optional[np.ndarray] = None
        self._colours: Optional[np.ndarray] = None  # the robot's colours for the band cut (band_cut.robot_colours)
        self._own: Optional[np.ndarray] = None  # the robot's colours the ground lacks (band_cut.own_colours)
        self._width: Optional[float] = None  # the body's width [px] (masks.body_width_px), followed slowly

    @property
    def robot_fit(self) -> dict[str, Any]:
        return dict(super().robot_fit, gate=asdict(self.config))

    def predicted_silhouette(self) -> Optional[np.ndarray]:
        """The silhouette (bool (H, W)) of the pose the next frame starts from (module doc, 1: the last fitted
        pose, moved with the camera in :meth:`predict`), or None when the model is not tracked (not started,
        coasting, lost) or did not explain the last label."""
        tr = self.fitter.tracker
        if not tr.started or tr.last is None or tr.last.status != "tracked":
            return None
        if self.last_fit is None or not np.isfinite(float(self.last_fit["iou_fit"])):
            return None  # no silhouette was fitted to the last label
        # a fit that explained the last label poorly still guides: the cut without a guide is worse (a
        # panning camera's motion map takes in the whole scene), and the tracker's status says when it is lost
        f = tr.filter
        x = (f.x if self.config.follow_px > 0 else f.F @ f.x)[:tr.layout.dim]
        sil = tr.renderer.mask(x)
        self._pred_x = np.array(x, float)
        return sil if sil.any() else None

    def prompt_box(self, width: int, height: int) -> Optional[Box]:
        """The next frame's prompt: the predicted silhouette's box grown by ``box_px``, or None (the labeller
        grows the last good label's box instead)."""
        self._predicted = self.predicted_silhouette()
        if self._predicted is None:
            return None
        box = mask_to_box(self._predicted).expand(self.config.box_px).clip(width, height)
        return box if box.area > 0 else None

    def set_image(self, rgb: np.ndarray) -> None:
        self._prev_gray = self._gray
        self._gray = cv2.cvtColor(np.asarray(rgb), cv2.COLOR_RGB2GRAY)
        super().set_image(rgb)
        self._reasons = []
        self.gate_flags = ()

    def predict(self, box, prior: Optional[np.ndarray] = None) -> np.ndarray:
        cfg = self.config
        pred = self._frame_predicted = self._predicted
        self._predicted = None  # one frame's
        if pred is None or pred.shape != self._frame.shape[:2]:
            self._frame_predicted = None
            cut = np.asarray(self.backend.predict(box, prior), bool)
            tr = self.fitter.tracker
            if tr.started:
                return cut
            # the first frame: the user's box says where the robot is (a guide the backend took from what
            # moves may have led its cut to a person walking past)
            inside = cut & box.to_mask(cut.shape[1], cut.shape[0])
            if np.count_nonzero(cut & ~inside) >= cfg.min_px:
                self._reasons.append("cut_off_box")
            cut = inside
            if np.count_nonzero(cut) < tr.config.min_mask_px:
                return cut
            # the first frame: cut again guided by the model fitted to the box's cut (a tether or a shoe in
            # the user's box must not shape the model every later frame is held to)
            up = self.fitter.up_source(self._index) if self.fitter.up_source and self._index is not None else None
            sil = tr.renderer.mask(tr.start(cut, up=up).pose_vector(tr.layout))
            tr.reset()
            if mask_iou(sil, cut) < cfg.trust_iou:  # the model did not find the robot in the cut: no guide
                return cut
            again = np.asarray(self._grabcut.predict(box, None, guide=sil, guide_far_px=cfg.far_px), bool)
            again = cut_off_model(cut_blobs(again, sil, cfg.near_px, cfg.blob_px), sil, cfg.far_px)
            if np.count_nonzero(again) >= tr.config.min_mask_px and mask_iou(again, cut) >= cfg.trust_iou:
                self._reasons.append("recut")
                return again
            return cut
        pred, box, A = self._followed(pred, box)
        cut = np.asarray(self.backend.predict(box, pred), bool)
        pred = self._frame_predicted = self._aligned(pred, cut, A)
        gated = cut_off_model(cut_blobs(cut, pred, cfg.near_px, cfg.blob_px), pred, cfg.far_px)
        if np.count_nonzero(cut & ~gated) >= cfg.min_px:
            self._reasons.append("cut_off_model")
        agree = mask_iou(gated, pred)
        if agree < cfg.recut_iou:
            again = np.asarray(self._grabcut.predict(box, pred, guide=pred, guide_far_px=cfg.far_px), bool)
            again = cut_off_model(cut_blobs(again, pred, cfg.near_px, cfg.blob_px), pred, cfg.far_px)
            if mask_iou(again, pred) > agree:
                gated = again
                self._reasons.append("recut")
        return gated

    def _followed(self, pred: np.ndarray, box):
        """The predicted silhouette moved with the camera since the last frame (:func:`follow_camera`), and
        the prompt box around it; as given when the camera's motion is not found."""
        cfg = self.config
        if cfg.follow_px <= 0 or self._prev_gray is None or self._prev_gray.shape != self._gray.shape:
            return pred, box, None
        A = follow_camera(self._prev_gray, self._gray, pred, cfg.follow_px)
        if A is None:
            return pred, box, None
        shifted = moved(pred, A)
        if not shifted.any():
            return pred, box, None
        h, w = pred.shape
        self._reasons.append("followed")
        return shifted, mask_to_box(shifted).expand(cfg.box_px).clip(w, h), A

    def _aligned(self, pred: np.ndarray, cut: np.ndarray, A: Optional[np.ndarray]) -> np.ndarray:
        """The predicted silhouette ``pred`` (bool (H, W), moved with the camera by ``A``, (2, 3), or not moved:
        None) fitted to the backend's ``cut`` of the frame (bool (H, W)) within ``reach_px`` of it (module doc,
        1); ``pred`` unless the fitted silhouette agrees with that cut better by ``align_margin`` (IoU) and its
        area is within ``align_area`` (a fraction) of ``pred``'s; ``pred`` too when that cut holds more than
        ``align_cut_ratio`` times ``pred``'s area.

        The model is refined from the predicted pose on the cut brought back into the last frame's image (the
        pose is the camera's of the last frame; the camera's motion is a motion of the image), and its
        silhouette is moved forward with the camera again. The tracker's session is untouched."""
        cfg = self.config
        tr = self.fitter.tracker
        x = self._pred_x
        if cfg.reach_px <= 0 or x is None or not cut.any():
            return pred
        near = cut & dilate_mask(pred, cfg.reach_px)
        n = np.count_nonzero(near)
        if n < tr.config.min_mask_px or n > cfg.align_cut_ratio * np.count_nonzero(pred):
            return pred  # (a cut holding much more than the robot near it holds something else: legs, a chair)
        back = near if A is None else moved(near, cv2.invertAffineTransform(A))
        up = self.fitter.up_source(self._index) if self.fitter.up_source and self._index is not None else None
        res = tr.fit(x, back, up=up)
        sil = tr.renderer.mask(res.x)
        if A is not None:
            sil = moved(sil, A)
        area = np.count_nonzero(sil) / np.count_nonzero(pred)
        if abs(area - 1.0) > cfg.align_area or mask_iou(sil, near) < mask_iou(pred, near) + cfg.align_margin:
            return pred  # (a silhouette that grew or shrank by more took in a thing beside the robot)
        self._reasons.append("aligned")
        return sil

    def _band_cut(self, label: np.ndarray, sil: np.ndarray) -> np.ndarray:
        """``label`` cut again in a band around the fitted silhouette ``sil`` (module doc, 5), its edge then
        finished as the GrabCut backend finishes a label (when it is one); ``label`` when the cut is not taken."""
        cut, taken = band_cut(self._frame, label, sil, self.config.band, self._colours)
        if not taken:
            return label
        if self._colours is None:  # the robot's colours, from the first label cut so (the first frame's, mostly)
            self._colours = robot_colours(self._frame, cut, self.config.band)
            if self.config.band.extend_frac > 0:  # only the body past the model's ends (6) needs them
                self._own = own_colours(self._frame, cut, self.config.band)
        self._reasons.append("band_cut")
        finish = getattr(self._grabcut, "polish", None)
        return np.asarray(finish(cut), bool) if finish is not None else cut

    def polish(self, mask: np.ndarray) -> np.ndarray:
        cfg = self.config
        polish = getattr(self.backend, "polish", None)
        moving = self.backend.moving() if hasattr(self.backend, "moving") else None
        label = polish(mask) if polish is not None else mask
        pred = self._frame_predicted
        # the model is fitted to the label within fit_px of its prediction: a rim of a thing touching the body,
        # left within far_px, must not pull the fit towards it (it would pull the next prediction further)
        seen = label & dilate_mask(pred, cfg.fit_px) if pred is not None else label
        if pred is not None and cfg.band is not None and cfg.band.foreign_fit and self._colours is not None:
            odd = foreign(self._frame, seen, self._colours, pred, cfg.band)
            if np.count_nonzero(odd) >= cfg.min_px:
                seen = seen & ~odd
                self._reasons.append("foreign")
        if pred is not None and cfg.band is not None and cfg.band.extend_frac > 0 and self._own is not None:
            more = body_beyond(self._frame, label, pred, self._own, cfg.band)  # the body past the model's ends
            if np.count_nonzero(more) >= cfg.min_px:
                label, seen = label | more, seen | more
                self._reasons.append("body_beyond")
        wide = None
        if pred is not None and cfg.band is not None and cfg.band.wide_frac > 0 and self._width:
            # a shoe on the body (not where the model is as wide): not fitted, lest the model fatten over it
            wide = wider_than_model(label, pred, self._width, cfg.band)
            if np.count_nonzero(wide) >= cfg.min_px:  # the model's width about its predicted axis is fitted
                seen = seen & ~(wide & ~axis_strip(pred, self._width))
                self._reasons.append("wide")
            else:
                wide = None
        res = self.fitter(seen, self._frame, moving, self._index)
        out = res.mask if pred is None else res.mask | label
        sil = self.fitter.silhouette
        if res.status == "tracked" and sil is not None and self._frame is not None:
            kept = trimmed_label(sil, out, cfg.off_px)
            if np.count_nonzero(out & ~kept) >= cfg.min_px:
                self._reasons.append("trimmed_to_model")
            out = kept
            if cfg.band is not None and cfg.band.wide_frac > 0:  # the width only the wide rule (6) uses
                w = body_width_px(sil)
                if self._width is None:
                    self._width = w
                elif wide is None:
                    self._width += cfg.band.width_rate * (w - self._width)
            if wide is not None:  # where the label is wider than the body it keeps the model's width about its axis
                out = out & ~(wide & ~axis_strip(sil, self._width))
            if mask_iou(out, sil) < cfg.drop_iou:
                self._reasons.append("off_model")
                self.gate_flags = ("off_model",)
            elif cfg.band is not None:
                out = self._band_cut(out, sil)
        self.last_fit = dict(fit_row(label, res), area_fitted_px=int(np.count_nonzero(out)),
                             gate="+".join(self._reasons))
        return out
