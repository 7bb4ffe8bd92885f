"""GrabCut guided by motion: the labeller's default backend on a video.

Box-prompted GrabCut (:mod:`~snaketrack.datasets.grabcut_backend`) sees colours only. On a video it also has
the frames around the one it labels, and so where things move
(:class:`~snaketrack.datasets.motion.MotionMap`). Each frame is cut with a guide
(``GrabCutBackend.predict(guide=...)``): the moving pieces that come within ``reach_px`` of the last good mask
(:func:`~snaketrack.datasets.motion.motion_near`; the prompt box on the first frame), with the last good mask
within ``far_px`` of them (a part of the robot that moved too little to leave the plate stays in, unless it is
still, below; a still object that the last label took in and that the robot has left drops out). The guide's
pixels start as "probably robot"; pixels farther than ``far_px`` from it are certain background before the cut
and cut off after it (a post, a stone, ground of the robot's colour), and the prompt box takes in the whole
guide, so an end of the robot that a label lost, and that moves, is found again. The still pixels
(:meth:`~snaketrack.datasets.motion.MotionMap.still`: the same colour in every neighbour) are certain
background too, inside the guide as well (a stump the last label took in, or shade beside the robot, within
``far_px`` of what moves). A frame whose map is missing (fewer registered neighbours than
``MotionConfig.min_plates``) or whose guide is smaller than ``min_guide_px`` is cut from the box alone.

**Ahead of the labeller.** A frame's motion map needs only the video, not the labels, so while frame ``i`` is
cut (and fitted, and written) a thread of its own makes frame ``i + stride``'s: with torch on one thread the
labeller runs 1.06–1.45× as fast on two cores, with the same labels (``snaketrack bench motion --labeller``).
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.datasets.boxes import Box, dilate_mask
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.motion import MotionConfig, MotionMap, SequentialFrames, motion_near
from snaketrack.errors import InputError


@dataclass(frozen=True)
class MotionGuideConfig:
    """near_px: how far [px] from the guide robot-coloured pixels still start as "probably robot";
    reach_px: a moving piece joins the guide when it comes this close [px] to the last good mask (the box
    when there is none); extend_px: of such a piece, the part within this distance [px] of the last good
    mask (a light change on a glossy floor joined to the robot's motion stays out); min_moving_frac: a frame
    whose motion within ``reach_px`` of the last good mask covers less than this fraction of its area is cut
    without a guide (the robot paused: the guide would hold only the part that still moves);
    far_px: pixels farther than this from the guide are certain background [px]; join_px: gaps [px]
    across which a moving piece counts as reaching into the box; min_guide_px: a smaller guide is not
    used [px]; shade: whether the guide's pixels in shade start as "probably robot" (False: ground in shade
    stays certain background, as from the box alone: the robot's cast shadow moves with it); motion: the
    motion map's settings."""

    near_px: int = 3
    reach_px: int = 30
    extend_px: int = 40
    min_moving_frac: float = 0.2
    far_px: int = 8
    join_px: int = 2
    min_guide_px: int = 30
    shade: bool = False
    motion: MotionConfig = MotionConfig()

    def __post_init__(self) -> None:
        if self.near_px < 0 or self.far_px < self.near_px:
            raise InputError(f"guide distances near {self.near_px}, far {self.far_px}: expected 0 <= near <= far")


class MotionGuidedBackend:
    """GrabCut guided by the video's motion (module doc). source: the
    :class:`~snaketrack.datasets.video.FrameSource` being labelled; :meth:`seek` names the source frame
    the next :meth:`set_image` holds (:func:`~snaketrack.labelling.label.label_video` calls it; without
    it, frames are counted from 0 by ``stride``)."""

    name = "grabcut"

    def __init__(self, source, config: MotionGuideConfig = MotionGuideConfig(),
                 grabcut: Optional[GrabCutBackend] = None, stride: int = 1):
        self.config = config
        self.grabcut = grabcut or GrabCutBackend()
        self.motion = MotionMap(SequentialFrames(source, keep=config.motion.cache), len(source) or None,
                                float(source.fps), config.motion)
        self.stride = max(int(stride), 1)
        self._index: Optional[int] = None
        self._seeked = False
        self.guided = self.unguided = 0  # frames cut with a guide and from the box alone
        # while labelling, the map is used from one thread only (its caches are not shared), made on first use
        self._worker: Optional[ThreadPoolExecutor] = None
        self._maps: dict[int, Future] = {}  # frame → its (moving, still) being made or made

    def maps(self, index: int) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """Frame ``index``'s moving and still pixels (bool (H, W) each, or None: :meth:`MotionMap.motion`,
        :meth:`MotionMap.still`); the next frame's are then started in the background."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="motion-map")
        if index not in self._maps:
            self._maps[index] = self._worker.submit(self._make, index)
        ahead = index + self.stride
        if ahead not in self._maps and (self.motion.n is None or ahead < self.motion.n):
            self._maps[ahead] = self._worker.submit(self._make, ahead)
        for k in [k for k in self._maps if k not in (index, ahead)]:
            self._maps.pop(k).cancel()  # a frame labelled before, or a guess the labeller did not follow
        return self._maps[index].result()

    def _make(self, index: int) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        moving = self.motion.motion(index)
        return moving, (self.motion.still(index) if moving is not None else None)

    def moving(self) -> Optional[np.ndarray]:
        """The held frame's moving pixels, bool (H, W), or None (no map: too few registered neighbours)."""
        return self.maps(self._index)[0] if self._index is not None else None

    def close(self) -> None:
        """Stop the background thread (a frame waiting is dropped, one being made is finished); the next
        :meth:`maps` starts another."""
        for f in self._maps.values():
            f.cancel()
        self._maps.clear()
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None

    def seek(self, index: int) -> None:
        """The next :meth:`set_image` holds source frame ``index``."""
        self._index, self._seeked = int(index), True

    def set_image(self, rgb: np.ndarray) -> None:
        if not self._seeked:
            self._index = 0 if self._index is None else self._index + self.stride
        self._seeked = False
        self.grabcut.set_image(rgb)

    def reset_image(self) -> None:
        self.grabcut.reset_image()

    def polish(self, mask: np.ndarray) -> np.ndarray:
        return self.grabcut.polish(mask)

    def predict(self, box: Box, prior: Optional[np.ndarray] = None) -> np.ndarray:
        """Mask bool (H, W) of the robot in ``box`` (pixels) in the held frame; ``prior``: the last good mask
        or None."""
        cfg = self.config
        moving, still = self.maps(self._index) if self._index is not None else (None, None)
        guide = None
        if moving is not None:
            has_prior = prior is not None and prior.shape == moving.shape and bool(prior.any())
            near = dilate_mask(prior, cfg.reach_px) if has_prior else None
            guide = motion_near(moving, box, cfg.join_px, near=near)
            if has_prior:
                guide &= dilate_mask(prior, cfg.extend_px)
                if (guide & near).sum() < cfg.min_moving_frac * prior.sum():
                    guide = None  # the robot paused: cut from the box and the last mask
                else:
                    # only the part of the last mask near what moves: a still thing the last label took in
                    # (a stump beside the robot) must not stay in the guide after the robot has left it
                    guide |= prior & dilate_mask(guide, cfg.far_px)
            if guide is not None and guide.sum() < cfg.min_guide_px:
                guide = None
        still = still if guide is not None else None
        self.guided += guide is not None
        self.unguided += guide is None
        return self.grabcut.predict(box, prior, guide=guide, guide_near_px=cfg.near_px, guide_far_px=cfg.far_px,
                                    guide_shade=cfg.shade, background=still)
