"""Where the ground prior holds the base: the track's record of its heights along up.

A robot lies on the ground, so its base's height along the up direction is steady relative to
the ground. On a camera fixed relative to the ground (``TrackerConfig.ground_window``), the
height the refinement's ground prior (:func:`snaketrack.tracker.fit.refine_terms.ground_terms`)
pulls the base to is the median of the tracked heights; on a moving camera the heights are kept
per unit of the camera's height over the ground (its ratio to the first frame's, ``ground``, from
:class:`snaketrack.tracker.calib.ground.GroundTracker`) and scaled back by the current frame's.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.models.robot import Robot


class GroundPrior:
    """The record of tracked heights and the height it gives the ground prior.

    robot: sets ``axis_height``, the link axes' height over the ground [m] of a robot lying on it (the
    mean link radius); window: tracked heights the median takes (−1: all; 0: the prior is off);
    min_frames: entries needed before the prior starts; known: the camera's height over the ground at the
    first frame [m], when known: the prior holds the base to it from the start (the entries are kept but unused).

    ``heights``: per tracked frame with an up direction, (up · base − axis_height) / ratio [m], which is
    −(the camera's height over the ground at the first frame) on every frame; ``frames``: the frame of
    each entry; ``ratio``: this frame's camera height over the ground / the first frame's (1 until set).
    """

    def __init__(self, robot: Robot, window: int, min_frames: int, known: Optional[float] = None):
        self.axis_height = float(np.mean([link.radius for link in robot.links]))
        self.window, self.min_frames = int(window), int(min_frames)
        if known is not None and not (math.isfinite(known) and known > 0):
            raise InputError(f"ground height {known!r}: expected the camera's height over the ground, > 0 m")
        self.known = None if known is None else float(known)
        self.heights: list[float] = []
        self.frames: list[int] = []
        self.ratio = 1.0

    def set_ratio(self, ground) -> None:
        """This frame's camera height ratio ``ground`` (> 0); None: unmeasured, the last ratio holds."""
        if ground is None:
            return
        g = float(ground)
        if not (math.isfinite(g) and g > 0):
            raise InputError(f"ground = {ground!r}: expected the camera's height ratio, a positive number")
        self.ratio = g

    def sample(self, t: np.ndarray, up: np.ndarray, ratio: Optional[float] = None) -> float:
        """The entry of ``heights`` of base translation ``t`` (3,) [m] with up direction ``up`` (3,):
        (up · t − axis_height) / ratio [m]; ``ratio``: that frame's (default: the current one)."""
        g = self.ratio if ratio is None else float(ratio)
        return (float(up @ t) - self.axis_height) / g

    def add(self, frame: int, t: np.ndarray, up: np.ndarray) -> None:
        """Record frame ``frame``'s base translation ``t`` (3,) [m] with the current ratio."""
        self.heights.append(self.sample(t, up))
        self.frames.append(frame)

    def replace(self, frame: int, t: np.ndarray, up: np.ndarray, ratio: float) -> None:
        """Replace frame ``frame``'s entry, if it has one, by base translation ``t`` (3,) [m] seen with
        ``up`` (3,) and camera height ratio ``ratio``."""
        if frame in self.frames:
            self.heights[self.frames.index(frame)] = self.sample(t, up, ratio)

    def height(self, up: Optional[np.ndarray], ratio: Optional[float] = None) -> Optional[float]:
        """The base's height along up [m] that the ground prior holds, or None (no up direction, the
        prior off, or fewer than ``min_frames`` entries). ``ratio``: the camera's height ratio of the
        frame refined (default: the current one); on a fixed camera (ratio 1) this is the median of the
        tracked heights, or with a ``known`` camera height the ground's."""
        if up is None or self.window == 0:
            return None
        g = self.ratio if ratio is None else ratio
        if self.known is not None:
            return float(self.axis_height - g * self.known)
        if len(self.heights) < self.min_frames:
            return None
        c = np.median(self.heights[-self.window:] if self.window > 0 else self.heights)
        return float(self.axis_height + g * c)
