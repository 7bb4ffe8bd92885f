"""Where a video moves: each frame against a background plate made of its neighbours, for the labeller.

A snake robot crawls; its ground stands still, or moves only as the camera does. Frames a fraction of a
second before and after frame ``i`` (``MotionConfig.offsets_s``) are registered onto it by a homography
of matched ORB features (RANSAC; the ground is the dominant plane: a static camera gives the identity),
and their per-pixel median is the plate: the ground with the robot gone from wherever it moved away. A
pixel moves when a colour channel differs from the plate by more than ``threshold`` grey levels; specks
are opened away.

The map sees what colour cannot: a grey robot on grey gravel, and a robot's end that a label has lost
(:class:`MotionGuidedBackend`). It also sees the robot's own cast shadow, things that stand off the
ground (parallax from a moving camera) and anything else that moves; and a part of the robot that did
not move over the whole span is not in it.

Its converse, the still pixels (:meth:`MotionMap.still`), are those every registered neighbour shows in
the same colour, within ``still_threshold``: under a still camera the ground, the posts and stumps and
their shadows, which a moving robot cannot be (it crosses its pixels within the span).

>>> import numpy as np
>>> ground = np.random.default_rng(0).integers(60, 200, (90, 160, 3), dtype=np.uint8)
>>> frames = []
>>> for k in range(31):        # a red square crossing a still textured ground
...     f = ground.copy(); f[40:50, 10 + 4 * k:20 + 4 * k] = (220, 30, 30); frames.append(f)
>>> m = MotionMap(lambda i: frames[i], len(frames), fps=30.0, config=MotionConfig(offsets_s=(-0.5, -0.25, 0.25, 0.5)))
>>> moving = m.motion(15)
>>> bool(moving[40:50, 70:80].all()), int(moving.sum())
(True, 100)
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional

import cv2
import numpy as np

from snaketrack.datasets.boxes import Box, dilate_mask
from snaketrack.errors import InputError


@dataclass(frozen=True)
class MotionConfig:
    """offsets_s: the neighbours of a frame that make its plate [s] (rounded to frames; a neighbour
    beyond the video's ends is taken on the other side); threshold: the least colour difference from the
    plate of a moving pixel [grey levels]; still_threshold: the most colour difference from every
    registered neighbour of a still pixel [grey levels] (None: :meth:`MotionMap.still` finds none);
    open_px: the opening that removes specks [px]; features: ORB features per frame; ransac_px: RANSAC's
    reprojection tolerance [px]; min_matches: fewer cross-checked matches leave a neighbour out; min_plates:
    fewer registered neighbours give no map; cache: frames (and their features) kept in memory."""

    offsets_s: tuple[float, ...] = (-1.0, -0.67, -0.33, 0.33, 0.67, 1.0)
    threshold: float = 25.0
    still_threshold: Optional[float] = 16.0
    open_px: int = 3
    features: int = 1500
    ransac_px: float = 2.0
    min_matches: int = 12
    min_plates: int = 3
    cache: int = 96

    def __post_init__(self) -> None:
        if not self.offsets_s or any(o == 0 for o in self.offsets_s):
            raise InputError(f"MotionConfig.offsets_s {self.offsets_s}: expected nonzero offsets")
        if self.min_plates < 1:
            raise InputError(f"MotionConfig.min_plates {self.min_plates}: expected >= 1")


class MotionMap:
    """The moving pixels of frame ``i`` of a video (module doc).

    frame: ``frame(i)`` → RGB uint8 (H, W, 3) of frame ``i``, or None past the video's end; n_frames: the
    video's length (None or 0: unknown, found by ``frame``); fps: its frame rate [1/s], which turns
    ``offsets_s`` into frames.
    """

    def __init__(self, frame: Callable[[int], Optional[np.ndarray]], n_frames: Optional[int], fps: float,
                 config: MotionConfig = MotionConfig()):
        self.config = config
        self._frame, self.n = frame, int(n_frames) if n_frames else None
        self.offsets = sorted({int(round(o * fps)) for o in config.offsets_s} - {0})
        self._orb = cv2.ORB_create(config.features)
        self._matcher = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
        self._cache: OrderedDict[int, tuple] = OrderedDict()  # i → (rgb, keypoints, descriptors)
        self._warps: tuple = (None, None)  # (i, frame i's registered neighbours or None)
        self._pairs: OrderedDict[tuple[int, int], tuple] = OrderedDict()  # (lo, hi) → matches (:meth:`matches`)

    def _get(self, i: int) -> Optional[tuple]:
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        if i < 0 or (self.n is not None and i >= self.n):
            return None
        rgb = self._frame(i)
        if rgb is None:
            return None
        rgb = np.asarray(rgb)
        kp, desc = self._orb.detectAndCompute(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), None)
        self._cache[i] = (rgb, kp, desc)
        while len(self._cache) > self.config.cache:
            self._cache.popitem(last=False)
        return self._cache[i]

    def neighbours(self, i: int) -> list[int]:
        """Frames whose registered median is frame ``i``'s plate."""
        out = []
        for o in self.offsets:
            j = i + o if self._get(i + o) is not None else i - o
            if j not in out and self._get(j) is not None:
                out.append(j)
        return out

    def homography(self, j: int, i: int) -> Optional[np.ndarray]:
        """(3, 3) homography taking frame ``j``'s pixels onto frame ``i``'s, or None (too few matches)."""
        (_, kj, dj), (_, ki, di) = self._get(j), self._get(i)
        if dj is None or di is None:
            return None
        qj, ti = self.matches(j, i)
        if len(qj) < self.config.min_matches:
            return None
        src = np.float32([kj[q].pt for q in qj])
        dst = np.float32([ki[t].pt for t in ti])
        H, _ = cv2.findHomography(src, dst, cv2.RANSAC, self.config.ransac_px)
        return H

    def matches(self, j: int, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The cross-checked ORB matches of frame ``j`` (query) against frame ``i``: their keypoint indices
        in ``j`` and in ``i``, int arrays (M,), in the order ``BFMatcher.match`` gives them (ascending
        query index).

        Frame ``i``'s plate registers ``i + k`` onto it, and ``i + k``'s plate registers ``i`` onto
        ``i + k``: one pair of frames, matched twice. Cross-checked matching is symmetric (the same pairs
        either way), so each pair is matched once, kept, and read in the order asked for; the
        homographies are then the ones matching each direction afresh would give, for half the
        matching (on a hand-held clip, matching took a third of the labeller's time)."""
        key = (min(i, j), max(i, j))
        if key in self._pairs:
            self._pairs.move_to_end(key)
            lo, hi = self._pairs[key]
        else:
            found = self._matcher.match(self._get(key[0])[2], self._get(key[1])[2])
            lo = np.array([m.queryIdx for m in found], np.intp)
            hi = np.array([m.trainIdx for m in found], np.intp)
            self._pairs[key] = (lo, hi)
            while len(self._pairs) > 8 * self.config.cache:
                self._pairs.popitem(last=False)
        if j == key[0]:
            return lo, hi
        order = np.argsort(hi, kind="stable")  # as if matched with j's descriptors as the queries
        return hi[order], lo[order]

    def registered(self, i: int) -> Optional[np.ndarray]:
        """Frame ``i``'s neighbours registered onto it, float32 (K, H, W, 3) (NaN where a neighbour does not
        reach), or None (fewer than ``min_plates`` registered); the last frame's are kept."""
        if self._get(i) is None:
            raise InputError(f"frame {i}: not in the video")
        if self._warps[0] == i:
            return self._warps[1]
        rgb = self._get(i)[0]
        h, w = rgb.shape[:2]
        warped = []
        for j in self.neighbours(i):
            H = self.homography(j, i)
            if H is not None:  # what a neighbour does not cover is NaN, left out of the median
                warped.append(cv2.warpPerspective(self._get(j)[0].astype(np.float32), H, (w, h),
                                                  flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                                                  borderValue=(np.nan, np.nan, np.nan)))
        out = np.stack(warped) if len(warped) >= self.config.min_plates else None
        self._warps = (i, out)
        return out

    def plate(self, i: int) -> Optional[np.ndarray]:
        """Frame ``i``'s background plate, float32 (H, W, 3) (NaN where no neighbour reaches), or None (fewer
        than ``min_plates`` neighbours registered)."""
        warped = self.registered(i)
        return None if warped is None else nan_median(warped)

    def still(self, i: int) -> Optional[np.ndarray]:
        """Frame ``i``'s still pixels, bool (H, W): every registered neighbour has the same colour there,
        within ``still_threshold`` in each channel (the ground, a post, a stump under a still camera; not a
        moving robot, which crosses its pixels within the span, but a stretch of it that stayed still for
        the whole span); None when there is no plate or ``still_threshold`` is None."""
        if self.config.still_threshold is None:
            return None
        warped = self.registered(i)
        if warped is None:
            return None
        rgb = self._get(i)[0].astype(np.float32)
        still = np.ones(rgb.shape[:2], bool)
        for w in warped:  # one neighbour at a time: ~8x faster than on the whole stack at once
            d = cv2.absdiff(w, rgb)
            still &= np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2]) < self.config.still_threshold
        return still  # NaN (a neighbour does not reach) compares False: not still

    def motion(self, i: int) -> Optional[np.ndarray]:
        """Frame ``i``'s moving pixels, bool (H, W), or None when it has no plate."""
        plate = self.plate(i)
        if plate is None:
            return None
        diff = np.abs(self._get(i)[0].astype(np.float32) - plate)
        moving = np.nan_to_num(diff, nan=0.0).max(-1) > self.config.threshold
        k = self.config.open_px
        if k > 1:
            moving = cv2.morphologyEx(moving.astype(np.uint8), cv2.MORPH_OPEN, np.ones((k, k), np.uint8)) > 0
        return moving


def nan_median(stack: np.ndarray) -> np.ndarray:
    """The median along axis 0 of the values that are not NaN (NaN where all are), as ``np.nanmedian``.

    The K values of every pixel are sorted at once by a sorting network (odd-even transposition: K
    passes of elementwise minima and maxima over whole images, NaN taken as +inf so it sorts last); a
    pixel with all K values takes the mean of the middle two (the middle one for odd K), and only the
    pixels with some NaN (a neighbour that does not reach them) pick theirs by their count. On a
    frame's six neighbours (360×640) 3.5× as fast as one ``np.sort`` along axis 0 where the borders are
    NaN, 6× where none is; the same values.

    >>> nan_median(np.array([[1.0, np.nan], [5.0, np.nan], [2.0, 4.0], [np.nan, np.nan]]))
    array([2., 4.])
    """
    K = stack.shape[0]
    nan = np.isnan(stack)
    srt = [np.where(nan[i], np.inf, stack[i]).astype(stack.dtype, copy=False) for i in range(K)]
    tmp = np.empty_like(srt[0])
    for p in range(K):
        for i in range(p % 2, K - 1, 2):
            np.minimum(srt[i], srt[i + 1], out=tmp)
            np.maximum(srt[i], srt[i + 1], out=srt[i + 1])
            srt[i], tmp = tmp, srt[i]
    out = ((srt[(K - 1) // 2] + srt[K // 2]) / 2).astype(stack.dtype)
    part = nan.any(axis=0)
    if part.any():
        k = K - nan[:, part].sum(axis=0)
        sub = np.stack([v[part] for v in srt])  # (K, pixels with some NaN), NaNs (as +inf) last
        lo = np.take_along_axis(sub, np.maximum((k - 1) // 2, 0)[None], axis=0)[0]
        hi = np.take_along_axis(sub, np.minimum(k // 2, K - 1)[None], axis=0)[0]
        out[part] = np.where(k > 0, (lo + hi) / 2, np.nan)
    return out


def motion_near(moving: np.ndarray, box: Box, join_px: int = 2, near: Optional[np.ndarray] = None) -> np.ndarray:
    """The pieces of ``moving`` (bool (H, W)) that reach into ``box``, or, given ``near`` (bool (H, W): the
    last good mask grown by the propagation margin), into ``near``; each piece joined across gaps of up to
    ``join_px`` px: the robot's motion, including an end a shrunken box no longer holds, without whatever
    else moves elsewhere in the frame (a box round a long diagonal robot also holds ground far from it,
    where a change of light on a glossy floor reads as motion).

    >>> m = np.zeros((20, 40), bool); m[5:8, 2:30] = True; m[15:18, 35:39] = True
    >>> int(motion_near(m, Box(0, 0, 10, 10)).sum())    # the bar reaching into the box, not the far speck
    84
    >>> near = np.zeros((20, 40), bool); near[16, 30:34] = True
    >>> int(motion_near(m, Box(0, 0, 40, 20), near=near).sum())  # the box holds both, ``near`` the speck
    12
    """
    h, w = moving.shape
    joined = dilate_mask(moving, join_px) if join_px > 0 else moving
    _, labels = cv2.connectedComponents(joined.astype(np.uint8), connectivity=8)
    if near is not None and near.shape == moving.shape and near.any():
        hit = np.unique(labels[near])
    else:
        b = box.clip(w, h)
        hit = np.unique(labels[b.y:b.y + b.h, b.x:b.x + b.w])
    hit = hit[hit > 0]
    return np.isin(labels, hit) & moving


class SequentialFrames:
    """``frame(i)`` over a :class:`~snaketrack.datasets.video.FrameSource` read forwards, as a labeller
    asks for frames (each frame's neighbours, a second either side): decoded once, the last ``keep``
    held; a frame before those reopens the source there. None past the end."""

    def __init__(self, source, keep: int = 96):
        self.source, self.keep = source, int(keep)
        self._buf: OrderedDict[int, np.ndarray] = OrderedDict()
        self._it = None
        self._next = 0  # the index the open iterator yields next
        self._end: Optional[int] = None

    def __call__(self, i: int) -> Optional[np.ndarray]:
        if i in self._buf:
            return self._buf[i]
        if i < 0 or (self._end is not None and i >= self._end):
            return None
        if self._it is None or i < self._next:
            self._buf.clear()
            self._it, self._next = self.source.frames(start=max(i - self.keep // 2, 0)), max(i - self.keep // 2, 0)
        for k, rgb in self._it:
            self._buf[k] = rgb
            self._next = k + 1
            while len(self._buf) > self.keep:
                self._buf.popitem(last=False)
            if k >= i:
                return self._buf.get(i)
        self._end, self._it = self._next, None
        return None
