"""The live segmenter's window: the network looks where the robot was in the previous frame.

A robot covers a small part of a frame, and a segmenter's cost grows with the pixels it is given. With a
window, each frame is segmented only inside the previous frame's mask box grown by a margin
(``margin_px + margin_frac × the box's longer side``; 12 px + 5 % by default, measured in
docs/benchmarks.md, "The window"), at the same scale as the whole frame would be;
the robot probability outside it is 0. The box is that of the mask's robot (:func:`robot_pieces`: its
largest piece and the pieces near it, a piece of the previous frame's robot held at a wider gap): a
speck of false robot elsewhere does not stretch it over the frame. The window's size on the network's
input is rounded up to ``steps`` fixed fractions of the whole frame's, per axis, so that an inference
engine compiles a few input shapes only. The whole frame is segmented instead:

- on the first frame, after a frame size change, after a frame whose mask was empty, and every
  ``refresh`` frames (what left the window, or a piece of the robot beyond a wide gap, is found again);
- when the window would cover the whole frame anyway;
- and again on the same frame when the window's mask is empty or its robot pieces touch a side of
  the window that lies inside the frame (the robot left the window), or when they cover less than
  ``keep`` of the previous frame's robot pixels: DeepLabV3+ pools features over its whole input, so a
  crop's narrower context can lose a piece of the robot that the whole frame keeps, and a piece lost
  once would stay outside every later window until the next whole frame.

The masks equal the whole frame's inside the window, up to the crop's sub-pixel resampling and the
network's view of the crop's edge, ``margin_px`` away from the robot.

>>> w = Window((360, 640))
>>> proba = lambda images, size: np.ones((len(images), *size), np.float32)  # everything is robot
>>> w.follow(np.zeros((360, 640, 3), np.uint8), proba, 0.5).shape, w.searches, w.windows
((360, 640), 1, 0)
>>> w.box = (100, 140, 200, 300)   # the previous mask's rows [100, 140) and columns [200, 300)
>>> w.crop(360, 640)               # rows, columns and the network input (h, w) of the next window
(75, 165, 170, 330, 90, 160)
"""
from __future__ import annotations

import itertools
import math
from typing import Callable, Optional, Sequence

import cv2
import numpy as np
from scipy.spatial import cKDTree

from snaketrack.masks import body_width_px

ProbaAt = Callable[[Sequence[np.ndarray], tuple[int, int]], np.ndarray]
Box = tuple[int, int, int, int]  # rows [y0, y1) and columns [x0, x1) of a frame [px]

MARGIN_PX, MARGIN_FRAC = 12, 0.05  # the margin around a mask's box: px + fraction of the box's longer side
STEPS = 8  # window sizes per axis: 1/8, 2/8, … of the whole frame's input
KEEP = 0.75  # a window whose robot has less than this share of the previous frame's is not taken
GAP_WIDTHS = 3.0  # the robot's pieces lie within this many of its body widths of each other
HOLD_WIDTHS = 6.0  # … and a piece of the previous frame's robot stays within this many
THIN = 0.5  # a piece less thick than this share of the largest piece is not the robot's


class Window:
    """Where the segmenter looks in the next frame of a video (module doc).

    size: the network input (h, w) [px] of a whole frame at the segmenter's scale; margin_px [frame px]
    and margin_frac: the margin around the previous mask's box; steps: window sizes per axis (1/steps,
    2/steps, … of the whole frame's input); refresh: frames between whole-frame passes; keep: the share of
    the previous frame's robot pixels below which a window's answer is not taken (0: always taken). Counts
    the frames segmented in a window (:attr:`windows`) and over the whole frame (:attr:`searches`).
    """

    def __init__(self, size: tuple[int, int], margin_px: int = MARGIN_PX, margin_frac: float = MARGIN_FRAC,
                 steps: int = STEPS, refresh: int = 30, keep: float = KEEP):
        self.size = (int(size[0]), int(size[1]))
        self.margin_px, self.margin_frac, self.steps = int(margin_px), float(margin_frac), int(steps)
        self.refresh, self.keep = int(refresh), float(keep)
        self._since = 0  # frames since the last whole-frame pass
        self.box: Optional[Box] = None  # the box of the previous mask's robot pieces
        self.robot: Optional[np.ndarray] = None  # those pieces, bool (H, W), of the frame last followed
        self.frame_shape: Optional[tuple[int, int]] = None
        self.windows = self.searches = 0

    def reset(self) -> None:
        """Forget the previous frame: the next one is segmented whole."""
        self.box = self.robot = None

    def _steps(self, lo: float, hi: float, n: int, net: int) -> int:
        """The window's length in steps (1 … :attr:`steps`) along one axis of ``n`` pixels whose whole-frame
        input is ``net`` px, for the wanted span ``[lo, hi)``."""
        lo, hi = max(0.0, lo), min(float(n), hi)
        return min(self.steps, max(1, math.ceil((hi - lo) * net / n / (net / self.steps) - 1e-9)))

    def _axis(self, lo: float, hi: float, n: int, net: int, k: int) -> tuple[int, int, int]:
        """Start and stop [frame px] along that axis of a window ``k`` steps long, centred on ``[lo, hi)``
        and kept in the frame, and its input size [px]."""
        if k == self.steps:
            return 0, n, net
        lo, hi = max(0.0, lo), min(float(n), hi)
        size = self._input(k, net)
        length = min(n, int(round(size * n / net)))
        start = int(round((lo + hi - length) / 2))
        start = min(max(start, 0), n - length)
        return start, start + length, size

    def _input(self, k: int, net: int) -> int:
        """The network input [px] along an axis whose whole-frame input is ``net`` px, of a window ``k``
        steps long."""
        return net if k == self.steps else math.ceil(k * net / self.steps)

    def _size(self, ky: int, kx: int) -> tuple[int, int]:
        """The network input (h, w) [px] of a window ``ky`` × ``kx`` steps."""
        return self._input(ky, self.size[0]), self._input(kx, self.size[1])

    def _ready_steps(self, ky: int, kx: int, ready: Callable[[tuple[int, int]], bool]) -> tuple[int, int]:
        """The smallest window of at least ``ky`` × ``kx`` steps whose input size is ``ready`` (the whole
        frame's is taken as ready); the wanted size is asked first, which lets the engine start on it."""
        if ready(self._size(ky, kx)):
            return ky, kx
        whole = (self.steps, self.steps)
        larger = sorted((k for k in itertools.product(range(ky, self.steps + 1), range(kx, self.steps + 1))
                         if k != (ky, kx)), key=lambda k: (math.prod(self._size(*k)), k))
        return next((k for k in larger if k == whole or ready(self._size(*k))), whole)

    def crop(self, H: int, W: int, ready: Optional[Callable[[tuple[int, int]], bool]] = None
             ) -> Optional[tuple[int, int, int, int, int, int]]:
        """The next window in an (H, W) frame: ``(y0, y1, x0, x1, h, w)``, rows ``[y0, y1)`` and columns
        ``[x0, x1)`` run at input size (h, w); None when the whole frame is to be segmented.

        ``ready((h, w))``: whether the network runs input size (h, w) without a wait (an engine that
        compiles each size on its first use); when the wanted size is not ready, the smallest larger window
        whose size is ready is taken (None: every size is ready)."""
        if self.box is None:
            return None
        y0, y1, x0, x1 = self.box
        m = margin(self.box, self.margin_px, self.margin_frac)
        ky, kx = self._steps(y0 - m, y1 + m, H, self.size[0]), self._steps(x0 - m, x1 + m, W, self.size[1])
        if ready is not None and (ky, kx) != (self.steps, self.steps):
            ky, kx = self._ready_steps(ky, kx, ready)
        if (ky, kx) == (self.steps, self.steps):
            return None
        ya, yb, h = self._axis(y0 - m, y1 + m, H, self.size[0], ky)
        xa, xb, w = self._axis(x0 - m, x1 + m, W, self.size[1], kx)
        return ya, yb, xa, xb, h, w

    def follow(self, rgb: np.ndarray, proba_at: ProbaAt, threshold: float,
               ready: Optional[Callable[[tuple[int, int]], bool]] = None) -> np.ndarray:
        """Robot probability float32 (H, W) of the RGB uint8 frame ``rgb`` (H, W, 3), the frame after the
        one last given; ``proba_at(images, (h, w))`` segments images resized to (h, w); a pixel is robot
        above ``threshold``; ``ready``: as :meth:`crop`'s. Its robot pieces (:func:`robot_pieces`) are left
        in :attr:`robot`."""
        H, W = rgb.shape[:2]
        if self.frame_shape != (H, W):
            self.frame_shape, self.box, self.robot = (H, W), None, None
        c = self.crop(H, W, ready) if self._since < self.refresh else None
        if c is not None:
            y0, y1, x0, x1, h, w = c
            pc = proba_at([rgb[y0:y1, x0:x1]], (h, w))[0]
            if pc.shape != (y1 - y0, x1 - x0):
                pc = cv2.resize(pc, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR)
            m = pc > threshold
            robot = robot_pieces(m, held=self._held(y0, y1, x0, x1))
            cut = ((y0 > 0 and robot[0].any()) or (y1 < H and robot[-1].any())
                   or (x0 > 0 and robot[:, 0].any()) or (x1 < W and robot[:, -1].any()))
            shrunk = self.robot is not None and robot.sum() < self.keep * self.robot.sum()
            if robot.any() and not cut and not shrunk:
                p = np.zeros((H, W), np.float32)
                p[y0:y1, x0:x1] = pc
                whole = np.zeros((H, W), bool)
                whole[y0:y1, x0:x1] = robot
                self.windows += 1
                self._since += 1
                self._remember(whole)
                return p
        p = proba_at([rgb], self.size)[0]
        if p.shape != (H, W):
            p = cv2.resize(p, (W, H), interpolation=cv2.INTER_LINEAR)
        self.searches += 1
        self._since = 1
        self._remember(robot_pieces(p > threshold, held=self._held(0, H, 0, W)))
        return p

    def _held(self, y0: int, y1: int, x0: int, x1: int) -> Optional[np.ndarray]:
        """The previous frame's robot pieces in rows ``[y0, y1)`` and columns ``[x0, x1)``, or None."""
        return None if self.robot is None else self.robot[y0:y1, x0:x1]

    def _remember(self, robot: np.ndarray) -> None:
        """Keep a frame's robot pieces (bool (H, W)) and their box (None when there are none)."""
        self.robot, self.box = robot, mask_box(robot)


def mask_box(mask: np.ndarray) -> Optional[Box]:
    """The box (y0, y1, x0, x1) of a bool mask's pixels, None when it has none.

    >>> m = np.zeros((10, 30), bool); m[2:8, 2:12] = True
    >>> mask_box(m), mask_box(m[:1])
    ((2, 8, 2, 12), None)
    """
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    if rows.size == 0:
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def margin(box: Box, margin_px: float, margin_frac: float) -> float:
    """The margin [px] around ``box``: ``margin_px`` plus ``margin_frac`` of its longer side."""
    y0, y1, x0, x1 = box
    return margin_px + margin_frac * max(y1 - y0, x1 - x0)


def robot_pieces(mask: np.ndarray, gap_widths: float = GAP_WIDTHS, held: Optional[np.ndarray] = None,
                 hold_widths: float = HOLD_WIDTHS, thin: float = THIN) -> np.ndarray:
    """The robot of a one-robot ``mask`` (bool (H, W)): its largest piece (8-connected), and every piece that
    lies within ``gap_widths`` body widths of the pieces taken so far, repeated until none is added; bool
    (H, W). The body width is that of the largest piece, 2 × area / perimeter [px]. A post or stump that
    hides the robot between two pieces is about as wide as the robot; specks of false robot (stones,
    sticks, shadows on a ground the segmenter was not trained on) lie farther off, however large.

    A piece less thick than ``thin`` × the largest piece's thickness (twice the largest distance from
    one of its pixels to a pixel outside the mask) is never taken, nor anything reached only through it:
    every piece of the robot a stump leaves in view is as thick as its body, a stick or a cable beside it
    is thinner.

    held: the robot of the previous frame of a video (bool (H, W)), or None. A piece that overlaps it
    stays within ``hold_widths`` body widths: the gap behind a stump widens and narrows by a pixel or two
    from frame to frame, and a piece of the robot should not come and go with it.

    >>> m = np.zeros((60, 200), bool); m[20:30, 10:80] = True   # a body 10 px wide
    >>> m[20:30, 95:140] = True                                  # the rest of it, beyond a 15 px post
    >>> m[45:58, 170:195] = True                                 # a stone as large, 30 px away
    >>> r = robot_pieces(m); int(r.sum()), bool(r[25, 100]), bool(r[50, 180])
    (1150, True, False)
    """
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 2:
        return mask.astype(bool)
    area = stats[1:, cv2.CC_STAT_AREA]
    largest = int(np.argmax(area)) + 1
    width = body_width_px(labels == largest)
    gap = np.full(n, gap_widths * width)  # each piece's reach [px]
    if held is not None:
        gap[np.unique(labels[held.astype(bool) & (labels > 0)])] = max(gap_widths, hold_widths) * width
    # the nearest pixels of two pieces lie on their edges: measure between edge pixels only
    edge = mask.astype(bool) & ~(cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0)
    ys, xs = np.nonzero(edge)
    points, owner = np.column_stack([ys, xs]).astype(np.float64), labels[ys, xs]
    y0, y1, x0, x1 = mask_box(mask)  # the distances inside the mask's box only, the frame's edge outside
    crop = np.pad(mask[y0:y1, x0:x1].astype(np.uint8), 1)
    inside = cv2.distanceTransform(crop, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    thickness = np.zeros(n, np.float32)
    np.maximum.at(thickness, labels[y0:y1, x0:x1].ravel(), inside.ravel())
    thick = thickness >= thin * thickness[largest]  # the pieces that may be the robot's
    kept = np.zeros(n, bool)
    kept[largest] = True
    ring = np.array([largest])  # the pieces taken last: only they can reach a piece not taken yet
    while ring.size:
        rest = thick[owner] & ~kept[owner]
        if not rest.any():
            break
        d, _ = cKDTree(points[np.isin(owner, ring)]).query(points[rest], distance_upper_bound=gap.max() + 1e-6)
        ring = np.unique(owner[rest][d <= gap[owner[rest]]])
        kept[ring] = True
    return kept[labels]
