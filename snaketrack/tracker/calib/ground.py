"""The camera's height over the ground, followed through the video by the ground plane's homography.

A thin robot's silhouette hardly fixes its depth; the ground it lies on
does, once the ground's distance is known. On a tripod that distance is
constant (``snaketrack track --static-camera``). A handheld or flying camera
rises and falls (handheld clips: 1.39–1.72 m), but the ground plane shows
how: between a reference frame ``r`` and frame ``k`` the ground's pixels map
by a homography ``H`` (x_k ~ H x_r), and with the ground's normal ``n``
(the up direction, from the IMU) in both frames

    Hn = K⁻¹ H K / σ₂(K⁻¹ H K) = R − t n_rᵀ / d_r
    d_k / d_r = n_kᵀ Hn n_r

(``d``: the camera's height over the ground [m]; σ₂: the middle singular
value, which is 1 for every matrix of the form R + u vᵀ; derivation in
:func:`height_ratio`). No scale is needed: :class:`GroundTracker` returns
``D_k = d_k / d_0``, the height relative to the first frame, and the
tracker finds ``d_0`` from its own track (``Tracker`` ``ground_window``).
A 1° bias of the up direction enters only as (bias) × (camera motion /
height), a second-order term in the bias itself.

Without an IMU the same homography carries the up direction itself from
frame to frame (``GroundTracker(follow=True)``, ``--up auto`` on a moving
camera): on the ground's own directions ``v ⊥ n_r`` the homography is the
camera's rotation, ``Hn v = R v``, so two of them fix ``R``
(:func:`rotation_from_homography`) and ``n_k = R n_r``. An error ``ε`` in
``n_r`` tilts ``v`` out of the ground and costs ``|t| / d_r × ε`` in ``R``:
small, since the keyframe is a few frames back.

OpenCV does the image work: Shi–Tomasi corners (``goodFeaturesToTrack``)
away from the robot, pyramidal Lucas–Kanade flow frame to frame
(``calcOpticalFlowPyrLK``) and a RANSAC homography from the reference
frame's corners to their tracks (``findHomography``). The reference frame
(keyframe) is renewed when too few tracks survive; heights chain across
keyframes. Posts, rocks and the robot's shadow are off the plane or move:
RANSAC drops them.

>>> import numpy as np
>>> K = np.array([[800.0, 0, 320], [0, 800, 180], [0, 0, 1]])
>>> up = np.array([0.0, -0.6, -0.8])                   # the ground below and ahead (camera frame)
>>> t = np.array([0.0, 0.3, 0.0])  # the reference camera's centre, seen from the current one
>>> Hn = np.eye(3) - np.outer(t, up) / 2.0             # no rotation; reference camera 2 m above ground
>>> round(height_ratio(K @ Hn @ np.linalg.inv(K), K, up, up), 6)  # (2 + 0.6 * 0.3) / 2
1.09
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from snaketrack.errors import InputError
from snaketrack.models.rotations import perpendicular_np


def _normalised(H: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``K⁻¹ H K`` (3, 3) scaled to a middle singular value of 1 (:func:`height_ratio`); its sign is H's."""
    K = np.asarray(K, float)
    Hn = np.linalg.solve(K, np.asarray(H, float) @ K)
    s = np.linalg.svd(Hn, compute_uv=False)
    if not (np.all(np.isfinite(s)) and s[1] > 0):
        raise InputError("ground homography: singular or not finite")
    return Hn / s[1]


def height_ratio(H: np.ndarray, K: np.ndarray, up_ref: np.ndarray, up_cur: np.ndarray) -> float:
    """``d_cur / d_ref`` from a ground homography (module doc).

    H: (3, 3) pixel homography, reference frame → current frame, any scale
    or sign. K: (3, 3) intrinsics [px]. up_ref, up_cur: (3,) unit up
    directions in the two camera frames (OpenCV axes).

    Derivation: ground points satisfy ``n_rᵀ X_r = −d_r`` (the ground lies
    ``d_r`` below the camera along up); with ``X_k = R X_r + t`` that gives
    ``X_k = (R − t n_rᵀ / d_r) X_r``. Then ``Hn n_r = n_k − t / d_r``, and
    since camera r sits ``d_r`` above the ground, ``n_k · t = d_r − d_k``:
    ``n_kᵀ Hn n_r = d_k / d_r``. The middle singular value of ``R + u vᵀ``
    is 1, which fixes Hn's scale; the sign is the one that makes the
    ratio positive.
    """
    Hn = _normalised(H, K)
    return float(abs(np.asarray(up_cur, float) @ Hn @ np.asarray(up_ref, float)))


def rotation_from_homography(H: np.ndarray, K: np.ndarray, up_ref: np.ndarray) -> np.ndarray:
    """The camera's rotation ``R`` (3, 3), reference frame → current frame (``X_cur = R X_ref + t``), from a
    ground homography (module doc).

    H: (3, 3) pixel homography, reference → current, any scale or sign. K: (3, 3) intrinsics [px].
    up_ref: (3,) the up direction in the reference camera's frame. ``Hn`` (H normalised as in
    :func:`height_ratio`) maps the ground's directions ``e₁, e₂ ⊥ up_ref`` as ``R`` does; ``R`` is the
    rotation nearest to that in least squares (orthogonal Procrustes on ``[e₁ e₂ e₁×e₂]``), with the
    sign of ``Hn`` that keeps it a rotation near the identity.

    >>> K = np.array([[800.0, 0, 320], [0, 800, 180], [0, 0, 1]])
    >>> c, s = np.cos(0.1), np.sin(0.1)
    >>> R = np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])            # the camera pitched by 0.1 rad
    >>> up = np.array([0.0, -0.6, -0.8])
    >>> t = np.array([0.05, 0.2, 0.0])
    >>> H = K @ (R - np.outer(t, up) / 2.0) @ np.linalg.inv(K)           # reference camera 2 m above ground
    >>> bool(np.allclose(rotation_from_homography(-3 * H, K, up), R))
    True
    """
    Hn = _normalised(H, K)

    n = np.asarray(up_ref, float) / np.linalg.norm(up_ref)
    e1, e2 = perpendicular_np(n)
    if (Hn @ e1) @ e1 + (Hn @ e2) @ e2 < 0:  # the sign of a rotation by less than 90°
        Hn = -Hn
    a, b = Hn @ e1, Hn @ e2
    src = np.stack([e1, e2, n], 1)
    dst = np.stack([a, b, np.cross(a, b)], 1)
    U, _, Vt = np.linalg.svd(dst @ src.T)
    D = np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Vt))])
    return U @ D @ Vt


@dataclass(frozen=True)
class GroundConfig:
    """Settings of :class:`GroundTracker` (pixels at the image's own size).

    max_corners, quality, min_distance_px: Shi–Tomasi corners per keyframe.
    robot_margin_px: the robot's mask is dilated by this before corners are
        taken, and tracks that enter it are dropped (the robot and its shadow
        move over the ground).
    lk_window_px, lk_levels: Lucas–Kanade window and pyramid levels.
    ransac_px: RANSAC reprojection threshold of the homography.
    min_inliers: fewer inliers and the frame's height is not measured
        (the last value is held).
    renew_fraction: a new keyframe when fewer than this fraction of its
        corners are still tracked (or fewer than ``2 × min_inliers``).
    smooth_frames: the height returned is the value now of a least-squares
        line through the last this-many measured heights (1: the raw
        measurement). Single frames jitter by up to 1 % as a keyframe's tracks
        thin out, and a keyframe renewed on such a frame kept its error for
        good (drone-planar-s15 frame 69: +1.5 %); the line has no lag while
        the camera's height changes steadily, but one that swings within a
        second lags (±11 % over 2.6 s: 3.5 % behind). 20 frames gives
        simulated clips tracked with ``--track-ground`` a lower base error
        than the raw height (1).
    """

    max_corners: int = 400
    quality: float = 0.01
    min_distance_px: float = 8.0
    robot_margin_px: int = 15
    lk_window_px: int = 21
    lk_levels: int = 3
    ransac_px: float = 1.0
    min_inliers: int = 40
    renew_fraction: float = 0.5
    smooth_frames: int = 20


class GroundTracker:
    """Follows the camera's height over the ground plane, relative to the first frame (module doc).

    ``step(gray, up, robot_mask=None)`` per frame, in order: gray (H, W)
    uint8 image (undistorted), up (3,) unit up direction in the camera
    frame, robot_mask (H, W) bool or None. Returns ``D_k = d_k / d_0``
    (float), or None while it has no measurement (no up direction yet, or
    too little textured ground); after a gap the last height is held.

    With ``follow`` the up direction need only be given once (the first
    frame's): a frame given ``up=None`` gets the last keyframe's turned by
    the camera's rotation since (:func:`rotation_from_homography`), held
    through frames without a measurement. ``up`` (3,) is then the last
    frame's up direction and ``rotation`` (3, 3) the camera's rotation from
    the first frame's orientation to the last frame's (the identity when
    the up direction was given every frame).
    """

    def __init__(self, K, config: GroundConfig = GroundConfig(), follow: bool = False):
        self.K = np.asarray(K, float)
        if self.K.shape != (3, 3):
            raise InputError(f"ground tracker: K of shape {self.K.shape}; expected (3, 3)")
        self.config = config
        self.follow = bool(follow)
        self.reset()

    def reset(self) -> None:
        self.prev: Optional[np.ndarray] = None   # last gray frame
        self.ref_pts: Optional[np.ndarray] = None  # (N, 2) corners in the keyframe
        self.cur_pts: Optional[np.ndarray] = None  # (N, 2) their tracks in the last frame
        self.ref_up: Optional[np.ndarray] = None
        self.ref_height = 1.0  # D of the keyframe
        self.height: Optional[float] = None  # D of the last frame measured (smoothed)
        self.raw: list[tuple[int, float]] = []  # (frame, measured D), the last smooth_frames
        self.frame = -1
        self.n_ref = 0
        self.keyframes = 0
        self.up: Optional[np.ndarray] = None  # the last frame's up direction
        self.rotation = np.eye(3)  # camera rotation, first frame → last frame (followed)
        self.ref_rotation = np.eye(3)  # the keyframe's

    def _exclusion(self, shape, robot_mask) -> np.ndarray:
        keep = np.full(shape, 255, np.uint8)
        if robot_mask is not None and np.any(robot_mask):
            r = self.config.robot_margin_px
            k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
            keep[cv2.dilate(np.asarray(robot_mask, np.uint8), k) > 0] = 0
        return keep

    def _new_keyframe(self, gray, up, keep: np.ndarray, height: float) -> None:
        """Corners of ``gray`` where ``keep`` (the ground away from the robot, :meth:`_exclusion`) is set."""
        c = self.config
        pts = cv2.goodFeaturesToTrack(gray, c.max_corners, c.quality, c.min_distance_px, mask=keep)
        pts = np.zeros((0, 2), np.float32) if pts is None else pts.reshape(-1, 2).astype(np.float32)
        self.ref_pts, self.cur_pts = pts, pts.copy()
        self.ref_up, self.ref_height, self.n_ref = np.asarray(up, float), float(height), len(pts)
        self.ref_rotation = self.rotation.copy()
        self.keyframes += 1

    def step(self, gray, up, robot_mask=None) -> Optional[float]:
        gray = np.asarray(gray)
        if gray.ndim != 2 or gray.dtype != np.uint8:
            raise InputError(f"ground tracker: image of shape {gray.shape}, {gray.dtype}; expected (H, W) uint8")
        followed = up is None and self.follow and self.up is not None
        if up is None and not followed:  # nothing to measure against; start again when up comes
            self.prev = None
            return self.height
        if not followed:
            up = np.asarray(up, float) / np.linalg.norm(up)
            self.up = up
        c = self.config
        self.frame += 1
        keep = self._exclusion(gray.shape, robot_mask)
        if self.prev is None or self.prev.shape != gray.shape:
            base = 1.0 if self.height is None else self.height
            self._new_keyframe(gray, self.up, keep, base)
            self.prev, self.height = gray, base
            return self.height
        measured = False
        if len(self.cur_pts):
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(self.prev, gray, self.cur_pts.reshape(-1, 1, 2), None,
                                                  winSize=(c.lk_window_px, c.lk_window_px), maxLevel=c.lk_levels)
            ok = st.reshape(-1).astype(bool)
            nxt = nxt.reshape(-1, 2)
            h, w = gray.shape
            inside = (nxt[:, 0] >= 0) & (nxt[:, 0] < w - 1) & (nxt[:, 1] >= 0) & (nxt[:, 1] < h - 1)
            xi = np.clip(nxt[:, 0].round().astype(int), 0, w - 1)
            yi = np.clip(nxt[:, 1].round().astype(int), 0, h - 1)
            ok &= inside & (keep[yi, xi] > 0)  # tracks the robot or its margin has covered are dropped
            self.ref_pts, self.cur_pts = self.ref_pts[ok], nxt[ok]
            if len(self.cur_pts) >= c.min_inliers:
                H, inl = cv2.findHomography(self.ref_pts, self.cur_pts, cv2.RANSAC, c.ransac_px)
                if H is not None and inl is not None and int(inl.sum()) >= c.min_inliers:
                    try:
                        if followed:
                            R = rotation_from_homography(H, self.K, self.ref_up)
                            self.up, self.rotation = R @ self.ref_up, R @ self.ref_rotation
                        self._measured(self.ref_height * height_ratio(H, self.K, self.ref_up, self.up))
                        measured = True
                    except InputError:
                        pass
        self.prev = gray
        if not measured or len(self.cur_pts) < max(2 * c.min_inliers, c.renew_fraction * self.n_ref):
            self._new_keyframe(gray, self.up, keep, self.height if self.height is not None else 1.0)
        return self.height

    def _measured(self, d: float) -> None:
        """Take a raw height measurement of this frame; ``height`` becomes the smoothed value."""
        self.raw = (self.raw + [(self.frame, float(d))])[-max(1, self.config.smooth_frames):]
        if len(self.raw) < 3:
            self.height = float(d)
            return
        f, v = np.array(self.raw).T
        _, now = np.polyfit(f - self.frame, v, 1)  # the line's value at this frame
        self.height = float(now)
