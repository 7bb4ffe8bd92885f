"""GrabCut guided by the robot's kinematic model: the labeller's backend when the robot is known.

Box-prompted GrabCut (:mod:`~snaketrack.datasets.grabcut_backend`) sees
colours only: on grass it drops the robot's dark joint housings as
shadow, and it takes in a post or a stone that stands inside the box.
A user labelling a video of their robot also has its model (the tracker
needs it), so each frame is cut with the model's help:

1. GrabCut runs with the robot's silhouette fitted on the previous frame
   as a guide (``GrabCutBackend.predict(guide=...)``): the silhouette is
   "probably robot" even where it is dark, other robot-coloured pixels count
   only within ``near_px`` of it, and everything farther than ``far_px`` is
   certain background.
2. The tracker (:class:`~snaketrack.tracker.tracker.Tracker`) fits the
   model to that cut, and its silhouette at the fitted pose is the next
   frame's guide.
3. The label is the silhouette at the fitted pose cut to the guided cut
   grown by ``agree_px`` (:func:`~snaketrack.labelling.fit_labels.fitted_label`).

A frame the fit does not explain (the silhouette's IoU with the cut below
``min_iou``) keeps the cut as its label; a fit whose status is not
``tracked`` (or whose IoU is below ``guide_iou``) gives no guide to the next
frame, which is then cut from the box alone.
The first frame is cut from the box alone, then ``first_passes - 1`` times
again, each guided by the model fitted to the cut before. The tracker runs frame after frame, so a
resumed labelling run starts the model afresh from its first new frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.datasets.boxes import Box
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.errors import InputError
from snaketrack.labelling.fit_labels import fitted_label
from snaketrack.masks import mask_iou
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.tracker import Tracker


@dataclass(frozen=True)
class GuideConfig:
    """near_px: how far [pixels] from the guide robot-coloured pixels still start as "probably robot"
    (the robot's motion in one frame); far_px: pixels farther than this from the guide are certain
    background [pixels]; agree_px: how far the fitted silhouette may reach beyond the cut [pixels];
    min_iou: least IoU of the fitted silhouette with the cut for the fit to replace the cut; guide_iou:
    least IoU for the fitted silhouette to guide the next frame; min_area_px: a smaller cut is not
    fitted; first_passes: cuts of the first frame, each after the first guided by the model fitted to
    the one before."""

    near_px: int = 3
    far_px: int = 8
    agree_px: int = 2
    min_iou: float = 0.7
    guide_iou: float = 0.0
    min_area_px: int = 50
    first_passes: int = 3

    def __post_init__(self) -> None:
        if self.near_px < 0 or self.far_px < self.near_px:
            raise InputError(f"guide distances near {self.near_px}, far {self.far_px}: expected 0 <= near <= far")


class GuidedBackend:
    """GrabCut guided by a robot model fitted frame by frame (module doc).

    robot: :class:`~snaketrack.models.robot.Robot`; K: (3, 3) intrinsics [px]; width, height: the
    frames' size [px]; fps: frame rate [1/s].
    """

    name = "guided"

    def __init__(self, robot, K: np.ndarray, width: int, height: int, fps: float = 30.0,
                 config: GuideConfig = GuideConfig(), grabcut: Optional[GrabCutBackend] = None):
        self.config = config
        self.grabcut = grabcut or GrabCutBackend()
        self.tracker = Tracker(robot, np.asarray(K, float), width, height, fps=fps)
        self.renderer = SilhouetteRenderer(robot, np.asarray(K, float), width, height)
        self.size = (height, width)
        self.guide: Optional[np.ndarray] = None
        self.fits = 0

    def set_image(self, rgb: np.ndarray) -> None:
        if rgb.shape[:2] != self.size:
            raise InputError(f"frame {rgb.shape[1]}x{rgb.shape[0]}: the guided labeller was built for "
                             f"{self.size[1]}x{self.size[0]}")
        self.grabcut.set_image(rgb)

    def reset_image(self) -> None:
        self.grabcut.reset_image()

    def predict(self, box: Box, prior: Optional[np.ndarray] = None) -> np.ndarray:
        """The label of the current frame, bool (H, W); fits the model and keeps the next frame's guide."""
        cfg = self.config
        first = not self.tracker.started
        state = None
        for _ in range(max(1, cfg.first_passes) if first else 1):
            cut = self.grabcut.predict(box, prior, guide=self.guide, guide_near_px=cfg.near_px,
                                       guide_far_px=cfg.far_px)
            self.guide = None
            if not first:
                state = self.tracker.step(cut)  # every frame, so the tracker's clock runs with the video's
            if int(cut.sum()) < cfg.min_area_px:
                return cut
            if first:  # the first frame, cut again with the model's help: refit from the last pose
                state = self.tracker.start(cut, initial_guess=state)
            sil = self.renderer.mask(state.pose_vector(self.renderer.layout))
            iou = mask_iou(sil, cut)
            if state.status != "tracked" or not iou >= cfg.guide_iou:
                return cut
            self.guide = sil
        if not iou >= cfg.min_iou:
            return cut
        self.fits += 1
        return fitted_label(sil, cut, cfg.agree_px)
