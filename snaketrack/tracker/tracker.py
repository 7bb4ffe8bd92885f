"""The single-camera tracker session: masks in, :class:`TrackState` out.

Per frame (:meth:`Tracker.step`)::

    predict        constant velocity (KalmanFilter.predict, filter.py)
    [moment update image moments of the mask vs. the rendered prediction
                   (EKF, observation matrix by autograd; off by default, see below)]
    refine         Levenberg–Marquardt on the silhouette (refine.py), with the
                   coverage term and, given an up direction, the ground prior;
                   model pixels far from the mask or beyond a cut of it (a post)
                   are ignored (occlusion and cut weighting, ``_cut_weighted``)
    velocity       filter.set_refined: the paper's finite-difference velocity
    reading        flip the chain when its body wave runs tail-ward (reading.py)

Choices, measured (docs/tracker.md): LM refinement with the visual capsule
model and a fitted edge offset; the moment update is *off* by default
(``moment_update=False``) because once LM refinement runs it did not lower
the error (it measured slightly worse and costs a render plus five
backward passes a frame); turn it on to reproduce the paper's pipeline.

The up direction (``start``/``step``'s ``up``, from an IMU;
:mod:`snaketrack.tracker.gravity`) is optional. Without it a thin robot's
plane may tilt while it slides in depth and its edge offset erodes (the
silhouette hardly changes); with it the plane is held to the ground.
With ``ground_window`` the base is also held to the ground's height: on a
fixed camera the median of the track's heights; on a moving one the same
per unit of the camera's height over the ground, which ``start``/``step``
take as ``ground`` (relative to the first frame;
:class:`snaketrack.tracker.ground.GroundTracker` measures it from the
frames).

First frame without a given pose (:meth:`Tracker.initialise`): the mask's
largest component is skeletonised and its longest path taken as the
robot's axis; for a set of ground-plane hypotheses (plane normals tilted
0°, 35° and 60° from the optical axis in six directions, or, given the up
direction, the ground's normal and six normals 10° off it) and both
head/tail directions the path is lifted onto the plane at the depth that
makes its length the robot's, cut into links, and turned into a pose
vector; the starts are ranked by IoU and the best few refined by LM with a
coarse-to-fine edge. The best refined IoU wins. Head and tail look alike:
later searches keep the track's reading, and the body wave's direction
(a robot crawling forward sends it from head to tail) turns a track read
backwards round after ``wave_window`` frames.

Visibility: a mask with fewer than ``min_mask_px`` pixels means the robot is
not seen; the tracker coasts on its prediction (status ``coasting``) and,
after ``lost_after`` such frames, stops the motion (velocity zeroed) and
reports ``lost``. When a mask returns, it refines from the prediction; if
the IoU stays below ``reacquire_iou`` it runs the initialisation search
too and keeps the better. After a ``lost`` spell the first refinement
uses the search's coarse-to-fine edge schedule (the robot may have moved).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Optional

import cv2
import numpy as np
import torch

from snaketrack.errors import InputError, StateError
from snaketrack.models.kinematics import forward_kinematics, forward_kinematics_np
from snaketrack.models.robot import Robot
from snaketrack.tracker.axis import mask_axes
from snaketrack.tracker.filter import FilterConfig, KalmanFilter
from snaketrack.tracker.primitives import CapsuleModel
from snaketrack.tracker.refine import Observation, RefineConfig, Refiner, RefineResult
from snaketrack.tracker.render import SilhouetteRenderer, SilhouetteSettings
from snaketrack.tracker.state import StateLayout, TrackState


@dataclass(frozen=True)
class TrackerConfig:
    """Tracker settings (defaults are the measured choices, docs/tracker.md).

    refine: :class:`RefineConfig`; filter: :class:`FilterConfig`.
    model: silhouette model, ``"visual"`` (capsules, spheres and cylindrical
        housings from ``robot.visual``, :meth:`CapsuleModel.from_visual`),
        ``"visual-capsule"`` (the same with cylindrical housings as capsules,
        the model before rule C2, docs/notebook/tracker.md) or ``"capsules"`` (the
        kinematic capsules only).
    moment_update: run the filter's image-moment EKF update before refinement.
    moment_order: 1 (centroid, the paper) or 2 (+ second moments).
    min_mask_px: fewer mask pixels than this = robot not visible.
    lost_after: coasting frames before the status becomes ``lost``.
    reacquire_iou: below this IoU after refinement, run the initialisation search.
        Kept low: with 1–3 px mask bias and ragged edges a correct fit can
        score 0.6, and a needless search may swap head and tail.
    reinit_margin: while tracking, the search's result replaces the refined
        one only when its IoU is higher by this much.
    reacquired_iou: on the frame the robot comes back after being lost, the
        search also runs when the refinement from the held pose explains the
        mask less well than this, and the better of the two is kept: the
        robot moved while hidden, and the wide refinement from the old pose
        can stop in a poor fit (IoU 0.64 in the lost-and-found test with the
        centre-anchored depth damping, where the search finds 0.97).
    offset_warm_start: start each frame's edge offset from the last frame's
        (right when the mask bias is steady; the corrupted masks of
        ``--corrupt-masks`` draw a new bias every frame, so off by default).
    init_refine_steps: LM steps for each refined start of the search.
    init_candidates: how many of the ranked starts are refined. 30 steps × 5
        starts (was 10 × 3) measured on the demo's drone video, corrupted
        masks, first 30 frames: base error 0.279 → 0.088 m, joints 0.318 →
        0.109 rad (scripts/measure_tracker_init.py); costs ~3 s more per search.
    init_sigma_schedule: edge softness [px] schedule of the search's LM.
    init_plane_tilts: ground-plane hypotheses of the search besides the
        fronto-parallel one: (tilt from the optical axis [deg], number of
        azimuths) pairs.
    init_up_tilts: the same around the ground's normal when the up direction
        is known (``start``/``step``'s ``up``).
    init_out_of_plane_prior_rad: the searches' prior on the out-of-plane joint
        coordinates [rad] (None: the tracking one, ``RefineConfig.out_of_plane_prior_rad``).
        Kept at 0.15 when tracking went to 0.05: a search starts far from the pose
        and its result (which way the chain is read) changed under the tighter prior.
    init_offset_guess: start each refined start of the search from the edge
        offset that explains the mask's area (``_offset_guess``) instead of 0.
    init_join_min_frac: the search's mask axis chains on other components of
        at least this fraction of the largest one's area (a segmentation hole
        cut frame 0 of the corrupted static planar mask in two; 0: largest only).
    init_join_max_gaps: the search lifts the mask's axis joined across gaps
        under each of these × the path's length, each distinct axis once (the
        first is the usual one; (0.5,): that one only). The wide join: a post
        and a segmentation hole beside it cut static-arcsnake-s29's frame 0 in
        two; one part lifted to the robot's length put it 8.3 m deep (true
        2.5 m) and the fixed camera's ground prior then held the track
        0.6–1.3 m off: base 1.08 → 0.06 m. Rule J (docs/notebook/tracker.md): eight
        fresh clips unchanged.
    keep_reading: a search while tracking (not after a ``lost`` spell) tries
        only starts that read the chain as the track does (tail nearer the
        predicted tail than the predicted head); the body-wave check
        (``wave_check``) owns the reading. On since the wave check exists:
        without it a re-search on drone-arcsnake-s0 frame 4 read the chain
        backwards (base 0.55 m off until the wave check turned it round at
        frame 23). Six-clip benchmark (2 threads, up direction): arcsnake
        static / handheld / drone 0.273 / 0.172 / 0.062 m → 0.243 / 0.130 /
        0.031 m, planar clips unchanged. (Before the wave check it measured
        worse on handheld planar: 0.54 against 0.42 m.)
    wave_check, wave_window, wave_max_lag, wave_threshold: read the chain
        the right way round from its motion (:mod:`snaketrack.tracker.reading`):
        over the last ``wave_window`` tracked frames, a body wave running from
        the tracked tail to the tracked head (statistic below
        ``−wave_threshold``) means the track reads the robot backwards; the
        pose is flipped, refined and the filter restarted. Assumes a robot
        crawling forward by undulation (measured: +0.82 on the simulated
        gait's true joint angles, −0.82 on a track read backwards).
    keep_reading_results, reading_ref_iou, reading_ref_frames: the reading a
        search keeps is that of the last frame fitted with IoU ≥
        ``reading_ref_iou`` within ``reading_ref_frames`` frames (else the
        prediction), and a refined start that ends up read the other way is
        dropped (the search's loose priors let a start slide round).
        Handheld-arcsnake-s2 frame 176: two poor fits (IoU 0.63, 0.68) left
        a prediction standing on end; checked against it, the search
        accepted a fit read backwards (IoU 0.91, base 0.45 m off) that the
        body-wave check turned round only 19 frames later.
    warmup_keep_reading: the warm-up searches keep the first frame's reading
        of the chain (head vs tail); on corrupted drone-planar-s0 a warm-up
        search swapped head and tail on a better IoU by 0.02 and the track
        stayed read backwards (0.83 m base error over 300 frames).
    ground_window, ground_min_frames: the ground prior for a camera fixed
        relative to the ground (``snaketrack track --static-camera``; needs
        the up direction): once ``ground_min_frames`` frames are tracked, each
        refinement pulls the base's height along up to the median of the
        tracked heights (the last ``ground_window`` frames; −1 all of them; 0
        off) with std ``RefineConfig.height_prior_m``. Occlusions and a
        short robot's silhouette let the depth slide along the viewing ray;
        on a fixed camera that changes the height, which the robot on the
        ground keeps. Measured on static-arcsnake-s0 (corrupted masks, 300
        frames, mask-only start): 0.179 → 0.083 m. Not for moving cameras: a
        30-frame median lags the camera's height (drone arcsnake 0.06 →
        0.18 m); a robust line through the recent heights (Theil–Sen) and a
        constant-velocity filter on them followed the track's own drift
        (handheld arcsnake lost, 14 m and 4.4 m).
    warmup_frames, warmup_iou, warmup_margin: after the first frame, while
        no frame's fit has reached ``warmup_iou`` against its mask and for at
        most ``warmup_frames`` frames, the search runs again on each new mask
        (its starts plus the refined prediction) and replaces the tracked
        pose when its IoU is higher by ``warmup_margin``. Measured: the search
        on frame 0 of the corrupted drone and static planar datasets ended
        0.27 m and 2.7 m off, on frames 1, 3, 5, 6 and 10 within 0.05 m
        (docs/notebook/tracker.md): one corrupted mask can mislead it.
    depth_anchor: the point whose rate along its viewing ray the filter's
        depth damping scales (filter.py, "Depth damping"): ``"centre"``,
        the mean of the link centres, or ``"base"``, the base translation
        (the seventh session's anchor, used with the factor 0.5 there). A snake's base swings along the ray with
        the gait while its centre moves slowly (docs/notebook/tracker.md, "Depth
        damping at the body's centre").
    cut_weighting: the occlusion weighting also ignores a model pixel near
        the mask whose nearest point of the predicted body axis lies in the
        far zone (more than ``RefineConfig.far_px`` from the mask; rule X,
        docs/notebook/tracker.md): a post cuts the body's whole cross-section out of
        the mask, a segmentation bias only its sides, so the pixels beyond a
        cut are not pushed back as the 1–3 px band beside the body is.
        Without it a head behind a post folds out of the band.
    hold_backward: when :class:`~snaketrack.tracker.reading.ReadingHold`
        releases the first frames it held, it refines them again backwards
        from the settled track (:meth:`Tracker.refine_back`), each from the
        frame after it, and keeps whichever fit of a frame is better (IoU).
        On (rule H, docs/notebook/tracker.md): eleven fresh clips 0.0257 / 0.0447 →
        0.0249 / 0.0443 (base m / joints rad), no clip worse by more than
        0.0002 m or 0.0004 rad.
    hold_backward_heights: a held frame whose backward fit is kept gets that
        fit's height in ``heights``, the ground prior's record, so the first
        frames' depth (walking in from the search) weighs less in the ground.
        On (rule G2, docs/notebook/tracker.md): seven fresh clips 0.0335 / 0.0467 →
        0.0319 / 0.0466, the largest rise +0.0022 m.
    """

    refine: RefineConfig = field(default_factory=RefineConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    model: str = "visual"
    moment_update: bool = False
    moment_order: int = 2
    min_mask_px: int = 30
    lost_after: int = 5
    reacquire_iou: float = 0.35
    reacquired_iou: float = 0.8
    reinit_margin: float = 0.15
    offset_warm_start: bool = False
    ground_window: int = 0
    ground_min_frames: int = 5
    init_refine_steps: int = 30
    init_candidates: int = 5
    init_sigma_schedule: tuple[float, ...] = (4.0, 4.0, 2.0, 2.0, 1.0, 1.0)
    init_plane_tilts: tuple[tuple[float, int], ...] = ((35.0, 6), (60.0, 6))
    init_up_tilts: tuple[tuple[float, int], ...] = ((10.0, 6),)
    init_out_of_plane_prior_rad: Optional[float] = 0.15
    init_offset_guess: bool = True
    init_join_min_frac: float = 0.15
    init_join_max_gaps: tuple[float, ...] = (0.5, 1.5)
    keep_reading: bool = True
    keep_reading_results: bool = True
    reading_ref_iou: float = 0.8
    reading_ref_frames: int = 15
    warmup_frames: int = 10
    warmup_iou: float = 0.85
    warmup_margin: float = 0.02
    wave_check: bool = True
    wave_window: int = 20
    wave_max_lag: int = 5
    wave_threshold: float = 0.35
    warmup_keep_reading: bool = True
    depth_anchor: str = "centre"
    cut_weighting: bool = True
    hold_backward: bool = True
    hold_backward_heights: bool = True

    def __post_init__(self):
        if self.model not in ("visual", "visual-capsule", "capsules"):
            raise InputError(f"tracker model {self.model!r}; expected 'visual', 'visual-capsule' or 'capsules'")
        if self.moment_order not in (1, 2):
            raise InputError(f"moment_order = {self.moment_order!r}; expected 1 or 2")
        if self.depth_anchor not in ("centre", "base"):
            raise InputError(f"depth_anchor {self.depth_anchor!r}; expected 'centre' or 'base'")


class Tracker:
    """A tracking session (``start`` / ``step`` / ``reset``).

    robot: :class:`Robot`; K: (3, 3) intrinsics [px]; width, height: image size
    [px] of the masks; fps: frame rate [1/s]; config: :class:`TrackerConfig`.
    """

    def __init__(self, robot: Robot, K, width: int, height: int, fps: float = 30.0,
                 config: TrackerConfig = TrackerConfig()):
        if not fps > 0:
            raise InputError(f"fps = {fps!r}; expected > 0")
        self.robot, self.config, self.fps = robot, config, float(fps)
        self.width, self.height = int(width), int(height)
        if config.model == "capsules":
            model = CapsuleModel.capsules(robot)
        else:
            model = CapsuleModel.from_visual(robot, "capsule" if config.model == "visual-capsule" else "cylinder")
        self.renderer = SilhouetteRenderer(robot, K, width, height, model,
                                           SilhouetteSettings(sigma_px=config.refine.sigma_px))
        self.layout: StateLayout = self.renderer.layout
        # the link axes' height over the ground [m] of a robot lying on it: the mean link radius
        self.axis_height = float(np.mean([link.radius for link in robot.links]))
        self.refiner = Refiner(self.renderer, config.refine)
        oop = config.init_out_of_plane_prior_rad
        self.search_refiner = self.refiner if oop is None else \
            Refiner(self.renderer, replace(config.refine, out_of_plane_prior_rad=float(oop)))
        self.reset()

    def body_centre(self, x: np.ndarray) -> np.ndarray:
        """Mean of the link centres (3,) [m], camera frame, at pose ``x`` (D,)."""
        q, R, t = self.layout.unpack(x)
        return forward_kinematics_np(self.robot, q, R, t)["centres"].mean(axis=0)

    # -- session --------------------------------------------------------
    def reset(self) -> None:
        """Forget the track; the next call must be :meth:`start`."""
        anchor = self.body_centre if self.config.depth_anchor == "centre" else None
        self.filter = KalmanFilter(self.layout, 1.0 / self.fps, self.config.filter, anchor)
        self.frame = -1
        self.offset = 0.0
        self.n_coast = 0
        self.started = False
        self.warming = True
        self.search_time_s = 0.0
        self.last: Optional[TrackState] = None
        self.up: Optional[np.ndarray] = None
        self.yaw_hist: list[np.ndarray] = []
        self.flips = 0
        # True once the body wave has confirmed the track's reading of head and tail, or turned it
        # round; a consumer that can wait holds its first frames until then (reading.ReadingHold)
        self.reading_settled = not self._can_check_reading()
        # tracked frames' base heights along up, less the axis's height over the ground, per unit of the
        # camera's height (``ground``): −(camera height at the first frame) [m], the same on every frame
        self.heights: list[float] = []
        self.height_frames: list[int] = []  # the frame of each entry of ``heights``
        self.ground = 1.0  # this frame's camera height over the ground / the first frame's
        self.good: Optional[tuple[int, np.ndarray]] = None  # (frame, pose) of the last well-fitting frame

    def _check_mask(self, mask) -> np.ndarray:
        m = np.asarray(mask)
        if m.shape != (self.height, self.width):
            raise InputError(f"mask: shape {m.shape}; expected ({self.height}, {self.width})")
        return m > 0

    def start(self, first_mask, initial_guess=None, t: float = 0.0, up=None, ground=None) -> TrackState:
        """Begin a track on the first mask (H, W). ``initial_guess``: a pose vector (D,) or a
        :class:`TrackState` to refine from; None runs the initialisation search.
        ``up``: optional (3,) world up direction in the camera frame (IMU gravity, negated);
        the robot's plane is held near the ground it defines (``RefineConfig.up_prior_rad``).
        ``ground``: optional camera height over the ground relative to the first frame's (1 here; later
        frames: :class:`snaketrack.tracker.ground.GroundTracker`); with ``ground_window`` the ground prior
        follows the camera's height by it (a moving camera). None: unchanged since the last frame."""
        self.reset()
        m = self._check_mask(first_mask)
        self.up = None if up is None else np.asarray(up, float)
        self._set_ground(ground)
        self.frame = 0
        self.started = True
        if m.sum() < self.config.min_mask_px and initial_guess is None:
            raise InputError(f"first mask has {int(m.sum())} pixels; expected at least "
                             f"{self.config.min_mask_px} to initialise (or give initial_guess)")
        obs = self._observe(m)
        if initial_guess is not None:
            x0 = initial_guess.pose_vector(self.layout) if isinstance(initial_guess, TrackState) \
                else np.asarray(initial_guess, float)
            self.layout.check(x0, "initial guess")
            res = self.refiner.refine(x0, obs, steps=max(self.config.refine.steps, 5), up=self.up) \
                if m.sum() else None
        else:
            res = self.initialise(m, obs)
        x = res.x if res is not None else x0
        if res is not None:
            self.offset = res.offset_px
        self.filter.initialise(x)
        if res is not None and res.iou >= self.config.reading_ref_iou:
            self.good = (0, np.array(x, float))
        if self.up is not None:
            self.heights.append(self._height_sample(x))
            self.height_frames.append(self.frame)
        return self._record(x, t, res, "tracked")

    def step(self, mask, t: Optional[float] = None, up=None, ground=None) -> TrackState:
        """Track the next mask (H, W); returns its :class:`TrackState`. ``up``, ``ground``: as in :meth:`start`."""
        if not self.started:
            raise StateError("Tracker.step: call start(first_mask) first")
        m = self._check_mask(mask)
        self.up = None if up is None else np.asarray(up, float)
        self._set_ground(ground)
        self.frame += 1
        t = self.frame / self.fps if t is None else float(t)
        cfg = self.config
        pred = self.filter.predict()
        if m.sum() < cfg.min_mask_px:
            self.filter.coast()
            self.n_coast += 1
            status = "lost" if self.n_coast > cfg.lost_after else "coasting"
            if status == "lost":  # stop extrapolating: hold the last pose
                n = self.layout.dim
                self.filter.x[n:] = 0.0
            return self._record(pred, t, None, status)
        obs = self._observe(m)
        was_lost = self.n_coast > cfg.lost_after
        if cfg.moment_update and not was_lost:
            pred = self._moment_update(m)
        b0 = self.offset if cfg.offset_warm_start else 0.0
        if was_lost:  # the robot may have moved while hidden: a wide edge first
            res = self._wide_refiner().refine(pred, obs, steps=cfg.init_refine_steps, up=self.up)
            res = self.refiner.refine(res.x, obs, offset0=res.offset_px, steps=4, up=self.up)
        else:
            res = self.refiner.refine(pred, self._cut_weighted(pred, obs), offset0=b0, up=self.up,
                                      height=self._ground_height())
        reinit = False
        if res.iou < cfg.reacquire_iou or (was_lost and res.iou < cfg.reacquired_iou):
            # while tracking, keep the track's reading of the chain (tail vs head): a silhouette barely
            # tells them apart and a flipped search result puts the base a body length off
            orient = None if was_lost or not cfg.keep_reading else self._reading_reference(pred)
            alt = self.initialise(m, obs, extra=[pred], orient=orient)
            if alt.iou > res.iou + (0.0 if was_lost else cfg.reinit_margin):
                res, reinit = alt, True
        elif self.warming and self.frame <= cfg.warmup_frames and res.iou < cfg.warmup_iou:
            # warm-up: the first frame's pose came from one mask; search again on the next masks
            # until a fit explains its mask well (a single corrupted mask can mislead the search)
            alt = self.initialise(m, obs, extra=[pred, res.x],
                                  orient=res.x if cfg.warmup_keep_reading else None)
            if alt.iou > res.iou + cfg.warmup_margin:
                res, reinit = alt, True
        if self.warming and (res.iou >= cfg.warmup_iou or self.frame >= cfg.warmup_frames):
            self.warming = False
        self.n_coast = 0
        self.offset = res.offset_px
        if reinit or was_lost:
            self.yaw_hist = []
            self.filter.initialise(res.x)
        else:
            self.filter.set_refined(res.x)
        if cfg.wave_check:
            res = self._check_reading(res, obs)
        if self.up is not None:
            self.heights.append(self._height_sample(res.x))
            self.height_frames.append(self.frame)
        if res.iou >= cfg.reading_ref_iou:
            self.good = (self.frame, np.array(res.x, float))
        return self._record(res.x, t, res, "tracked")

    def _reading_reference(self, pred: np.ndarray) -> np.ndarray:
        """The pose whose reading of the chain a search keeps: the last well-fitting frame's, else ``pred``."""
        cfg = self.config
        if self.good is not None and self.frame - self.good[0] <= cfg.reading_ref_frames:
            return self.good[1]
        return pred

    def _height_sample(self, x: np.ndarray, up=None, ground: Optional[float] = None) -> float:
        """Pose ``x``'s entry of ``heights``: (up · base − axis height) / ground ratio [m]; ``up``,
        ``ground``: that frame's (default: the current frame's)."""
        up = self.up if up is None else up
        g = self.ground if ground is None else float(ground)
        return (float(up @ x[self.layout.dim - 3:]) - self.axis_height) / g

    def _ground_height(self, ground: Optional[float] = None) -> Optional[float]:
        """The base's height along up [m] that the ground prior holds (``ground_window``), or None.

        ``ground``: the camera's height ratio of the frame refined (default: the current frame's); on a
        fixed camera (ratio 1) this is the median of the tracked heights."""
        cfg = self.config
        if self.up is None or cfg.ground_window == 0 or len(self.heights) < cfg.ground_min_frames:
            return None
        g = self.ground if ground is None else ground
        c = np.median(self.heights[-cfg.ground_window:] if cfg.ground_window > 0 else self.heights)
        return float(self.axis_height + g * c)

    def _set_ground(self, ground) -> None:
        if ground is None:
            return  # unmeasured: the last ratio holds
        g = float(ground)
        if not (math.isfinite(g) and g > 0):
            raise InputError(f"ground = {ground!r}: expected the camera's height ratio, a positive number")
        self.ground = g

    def _can_check_reading(self) -> bool:
        from snaketrack.tracker.reading import yaw_indices

        return self.config.wave_check and len(yaw_indices(self.robot)) >= 2

    def _check_reading(self, res, obs):
        """Flip the track when its body wave runs from tail to head (see ``wave_check``)."""
        from snaketrack.tracker.reading import wave_direction, yaw_indices

        cfg = self.config
        idx = yaw_indices(self.robot)
        if len(idx) < 2:
            return res
        self.yaw_hist.append(np.asarray(res.x[self.layout.q])[idx])
        self.yaw_hist = self.yaw_hist[-cfg.wave_window:]
        if len(self.yaw_hist) < cfg.wave_window:
            return res
        s = wave_direction(np.array(self.yaw_hist), cfg.wave_max_lag)
        if s >= cfg.wave_threshold:
            self.reading_settled = True
        if s > -cfg.wave_threshold:
            return res
        alt = self._refine_flipped(res.x, obs, self.up)
        self.yaw_hist = []
        if alt.iou < res.iou - 0.1:  # the flipped body does not fit: keep the track, look again later
            return res
        self.flips += 1
        self.reading_settled = True
        self.good = None  # the last good frame was read the other way
        self.offset = alt.offset_px
        self.filter.initialise(alt.x)
        return alt

    def _refine_flipped(self, x: np.ndarray, obs: Observation, up, ground: Optional[float] = None):
        """The pose ``x`` read from the other end (reading.flip_pose), refined on ``obs``: wide edge, then 4
        steps; on a fixed camera (``ground_window``) both hold the base to the ground's height."""
        from snaketrack.tracker.reading import flip_pose

        xf = flip_pose(self.robot, self.layout, x)
        height = self._ground_height(ground)
        alt = self._wide_refiner().refine(xf, obs, steps=self.config.init_refine_steps, up=up, height=height)
        return self.refiner.refine(alt.x, obs, offset0=alt.offset_px, steps=4, up=up, height=height)

    def reread(self, state: TrackState, mask, up=None, ground: Optional[float] = None) -> TrackState:
        """A past frame's state read from the other end: its pose flipped (reading.flip_pose) and, when
        it was tracked, refined on that frame's mask (H, W); ``up``, ``ground``: that frame's, as in :meth:`start`. The session
        (filter, history) is untouched. What :class:`~snaketrack.tracker.reading.ReadingHold` does to
        the frames it held when the track is turned round."""
        from snaketrack.tracker.reading import flip_pose

        m = self._check_mask(mask)
        x = state.pose_vector(self.layout)
        up = None if up is None else np.asarray(up, float)
        if state.status != "tracked" or m.sum() < self.config.min_mask_px:
            return self._state(flip_pose(self.robot, self.layout, x), state.frame, state.t, None,
                               state.status, cov_trace=state.cov_trace)
        t0 = time.perf_counter()
        res = self._refine_flipped(x, self._observe(m), up, ground)
        self.search_time_s += time.perf_counter() - t0
        return self._state(res.x, state.frame, state.t, res, state.status)

    def fit(self, x: np.ndarray, mask, up=None, ground: Optional[float] = None) -> RefineResult:
        """One refinement of pose ``x`` (D,) on ``mask`` (H, W), as a tracked frame gets it: the occlusion
        and cut weighting around ``x``, held to ``x`` as its prediction, with the up prior (``up``) and the
        session's ground prior (``ground``: the frame's camera height ratio, as in :meth:`start`). The
        session (filter, history) is untouched. What :meth:`refine_back` and
        ``scripts/measure_pose_floor.py`` (started at the true pose) refine with."""
        m = self._check_mask(mask)
        x = np.asarray(x, float)
        up = None if up is None else np.asarray(up, float)
        obs = self._cut_weighted(x, self._observe(m))
        return self.refiner.refine(x, obs, up=up, height=self._ground_height(ground))

    def refine_back(self, state: TrackState, prediction: np.ndarray, mask, up=None,
                    ground: Optional[float] = None) -> TrackState:
        """A past frame's state refined again from ``prediction`` (D,), the pose of the frame after it,
        on that frame's mask (H, W); ``up``, ``ground``: that frame's, as in :meth:`start`. Returns the
        better fit (IoU) of the two. The filter and history are untouched; with
        ``hold_backward_heights`` the frame's entry in ``heights`` follows the new fit. What
        :class:`~snaketrack.tracker.reading.ReadingHold` does with ``hold_backward``."""
        m = self._check_mask(mask)
        if state.status != "tracked" or m.sum() < self.config.min_mask_px:
            return state
        up = None if up is None else np.asarray(up, float)
        res = self.fit(prediction, m, up, ground)
        if not res.iou > state.iou:
            return state
        if self.config.hold_backward_heights and up is not None and state.frame in self.height_frames:
            k = self.height_frames.index(state.frame)
            self.heights[k] = self._height_sample(res.x, up, 1.0 if ground is None else ground)
        return self._state(res.x, state.frame, state.t, res, state.status)

    # -- pieces ---------------------------------------------------------
    def _observe(self, m: np.ndarray, far: bool = True) -> Observation:
        """The mask prepared for refinement; ``far``: with the occlusion weighting of pixels far from it
        (``RefineConfig.far_px``). The searches go without it: from a wrong start, the push out of
        empty image is what tells a wrong reading of the mask from the right one."""
        r = self.config.refine
        step = r.cover_step_px if r.cover_weight > 0 else 0.0
        return Observation.from_mask(m, r.loss, r.dt_gain, r.dt_clip_px, skeleton_step_px=step,
                                     far_px=r.far_px if far else 0.0, far_weight=r.far_weight)

    def _cut_weighted(self, x: np.ndarray, obs: Observation) -> Observation:
        """``obs`` with the model pixels beyond a cut of the mask ignored (``TrackerConfig.cut_weighting``):
        outside the mask, pixels nearer to a point of pose ``x``'s projected body axis that lies in the
        far zone (more than ``RefineConfig.far_px`` from the mask) than to one that does not get
        ``RefineConfig.far_weight``. ``obs`` itself when the cut weighting or the occlusion weighting is off."""
        if not (self.config.cut_weighting and self._far_on and self.config.refine.far_weight < 1.0):
            return obs
        with torch.no_grad():
            a, b, _ = self.renderer.primitives(torch.as_tensor(np.asarray(x, float))[None])
        K = self.renderer.K.numpy()
        A, B = a[0].numpy(), b[0].numpy()
        front = (A[:, 2] > 1e-6) & (B[:, 2] > 1e-6)
        if not front.any():
            return obs
        ua = (A[front] @ K.T)[:, :2] / A[front, 2:3]
        ub = (B[front] @ K.T)[:, :2] / B[front, 2:3]
        n = max(int(np.ceil(np.linalg.norm(ub - ua, axis=1).max())), 1)  # at most ~1 px apart
        lam = np.linspace(0.0, 1.0, n + 1)[None, :, None]
        pts = (ua[:, None] + lam * (ub - ua)[:, None]).reshape(-1, 2)
        H, W = obs.mask.shape
        iu, iv = np.rint(pts[:, 0]).astype(int), np.rint(pts[:, 1]).astype(int)
        inside = (iu >= 0) & (iu < W) & (iv >= 0) & (iv < H)
        if not inside.any():
            return obs
        iu, iv = iu[inside], iv[inside]
        m = obs.mask.numpy() > 0.5
        # an axis point counts as off the mask only beyond the band (the far zone): a prediction a few
        # pixels past a free end, on a mask eroded by its bias, must still be pushed back
        on = obs.weight.numpy()[iv, iu] >= 1.0
        if on.all() or not on.any():
            return obs
        # the body's box, padded by its image radius and the occlusion band: weights elsewhere do not matter
        r_px = float((K[0, 0] * self.renderer.model.radius[front] / np.minimum(A[front, 2], B[front, 2])).max())
        pad = int(np.ceil(r_px + self.config.refine.far_px)) + 2
        u0, v0 = max(iu.min() - pad, 0), max(iv.min() - pad, 0)
        u1, v1 = min(iu.max() + pad + 1, W), min(iv.max() + pad + 1, H)
        seeds_off = np.ones((v1 - v0, u1 - u0), np.uint8)
        seeds_off[iv[~on] - v0, iu[~on] - u0] = 0
        seeds_on = np.ones_like(seeds_off)
        seeds_on[iv[on] - v0, iu[on] - u0] = 0
        d_off = cv2.distanceTransform(seeds_off, cv2.DIST_L2, 3)
        d_on = cv2.distanceTransform(seeds_on, cv2.DIST_L2, 3)
        cut = ~m[v0:v1, u0:u1] & (d_off < d_on)
        if not cut.any():
            return obs
        w = obs.weight.clone()
        w[v0:v1, u0:u1][torch.as_tensor(cut)] = self.config.refine.far_weight
        return replace(obs, weight=w)

    @property
    def _far_on(self) -> bool:
        r = self.config.refine
        return r.far_px > 0 and r.far_weight != 1.0

    def _record(self, x: np.ndarray, t: float, res, status: str) -> TrackState:
        cov = res.covariance if (res is not None and res.covariance is not None) else self.filter.pose_covariance
        st = self._state(x, self.frame, t, res, status, cov_trace=float(np.trace(cov)),
                         velocity=self.filter.velocity if self.filter.x is not None else None)
        self.last = st
        return st

    def _state(self, x: np.ndarray, frame: int, t: float, res, status: str, cov_trace: Optional[float] = None,
               velocity: Optional[np.ndarray] = None) -> TrackState:
        """The :class:`TrackState` of pose ``x`` (D,) and refinement result ``res`` (or None)."""
        xt = torch.as_tensor(np.asarray(x, float))[None]
        q, R0, t0 = self.layout.to_fk(xt)
        head = forward_kinematics(self.robot, q, R0, t0).head[0].numpy()
        if cov_trace is None:
            cov_trace = float(np.trace(res.covariance)) if res is not None and res.covariance is not None \
                else float("nan")
        return TrackState.from_pose_vector(
            self.layout, x, head, frame, t, cov_trace=cov_trace,
            iou=float(res.iou) if res is not None else float("nan"), status=status, velocity=velocity,
            loss=float(res.cost) if res is not None else float("nan"))

    def _moment_update(self, m: np.ndarray) -> np.ndarray:
        from snaketrack.tracker.moments import mask_moment_vector

        order = self.config.moment_order
        z = mask_moment_vector(torch.as_tensor(m, dtype=torch.float64)[None], order=order)[0].numpy()
        roi = self.renderer.screen_roi(torch.as_tensor(self.filter.pose)[None], 30.0)
        s = replace(self.renderer.settings, sigma_px=1.0)

        def h(x: torch.Tensor) -> torch.Tensor:
            sil, r = self.renderer(x[None], roi, s)
            return mask_moment_vector(sil, torch.tensor(r[:2], dtype=x.dtype), order=order)[0]

        return self.filter.update(z, h)

    # -- initialisation -------------------------------------------------
    def initial_poses(self, mask: np.ndarray) -> list[np.ndarray]:
        """Candidate pose vectors (D,) from the mask's skeleton (see module doc)."""
        out = []
        for path in self._search_axes(mask):
            if len(path) >= 3:
                out.extend(self._poses_from_path(path))
        return out

    def _search_axes(self, mask: np.ndarray) -> list[np.ndarray]:
        """The search's mask axes (:func:`mask_axes` with ``init_join_max_gaps``; the first is the usual
        one), computed once per mask: the starts and the offset guess both use them."""
        cached = getattr(self, "_axes_cache", None)
        if cached is None or cached[0] is not mask:
            cfg = self.config
            cached = (mask, mask_axes(mask, cfg.init_join_max_gaps, extend=True, join_min_frac=cfg.init_join_min_frac))
            self._axes_cache = cached
        return cached[1]

    def _poses_from_path(self, path: np.ndarray) -> list[np.ndarray]:
        """Candidate pose vectors (D,) from one mask axis ``path`` (n, 2) [px] (see :meth:`initial_poses`)."""
        tail_ext, head_ext = self._end_extents()
        K = self.renderer.K.numpy()
        rays = np.linalg.solve(K, np.vstack([path[:, 0], path[:, 1], np.ones(len(path))])).T
        # ground-plane hypotheses: normals (pointing away from the camera) tilted from the optical axis,
        # or, when the up direction is known, from the ground's own normal (the prior pulls them back)
        axis = np.array([0.0, 0.0, 1.0]) if self.up is None else -self.up / np.linalg.norm(self.up)
        if self.up is None:
            e1, e2 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
        else:
            e1 = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
            e1 /= np.linalg.norm(e1)
            e2 = np.cross(axis, e1)
        normals = [axis]
        tilts = self.config.init_plane_tilts if self.up is None else self.config.init_up_tilts
        for tilt_deg, n_az in tilts:
            tilt = math.radians(tilt_deg)
            for az in np.arange(n_az) * 2 * math.pi / n_az:
                normals.append(math.cos(tilt) * axis + math.sin(tilt) * (math.cos(az) * e1 + math.sin(az) * e2))
        out = []
        for n in normals:
            nd = rays @ n
            if (nd <= 1e-3).any():
                continue
            X = rays / nd[:, None]
            seg = np.linalg.norm(np.diff(X, axis=0), axis=1).sum()
            if seg <= 0:
                continue
            # the path runs from one end of the silhouette to the other: the chain plus its end caps
            X *= (self.robot.total_length + tail_ext + head_ext) / seg
            for Xd in (X, X[::-1]):
                x = self._chain_from_polyline(_trim_start(Xd, tail_ext), -n)
                if x is not None:
                    out.append(x)
        return out

    def _offset_guess(self, x: np.ndarray, mask: np.ndarray) -> float:
        """Edge offset [px] that explains the mask's area with the model at pose ``x`` (D,).

        ``(mask area − model area) / perimeter``, the perimeter taken as twice the
        length of the mask's axis, clipped to ±4 px: a mask eroded by 3 px starts
        the search eroded rather than leaving the depth to absorb it.
        """
        axes = self._search_axes(mask)
        axis_len = float(np.linalg.norm(np.diff(axes[0], axis=0), axis=1).sum()) if axes else 0.0
        if axis_len <= 0:
            return 0.0
        with torch.no_grad():
            sil, _ = self.renderer(torch.as_tensor(np.asarray(x, float))[None])
        area_model = float((sil > 0.5).sum())
        area_mask = float(np.count_nonzero(mask))
        return float(np.clip((area_mask - area_model) / (2.0 * axis_len), -4.0, 4.0))

    def _end_extents(self) -> tuple[float, float]:
        """How far [m] the silhouette model reaches behind the tail's origin and past the head link's end."""
        mdl = self.renderer.model
        L = float(self.robot.lengths[-1])
        last = self.robot.n_links - 1
        tail = max([float(r - min(a[0], b[0])) for k, a, b, r in zip(mdl.link, mdl.a_local, mdl.b_local, mdl.radius)
                    if k == 0] or [0.0])
        head = max([float(max(a[0], b[0]) + r - L) for k, a, b, r in
                    zip(mdl.link, mdl.a_local, mdl.b_local, mdl.radius) if k == last] or [0.0])
        return max(tail, 0.0), max(head, 0.0)

    def _chain_from_polyline(self, X: np.ndarray, up: np.ndarray) -> Optional[np.ndarray]:
        lengths = self.robot.lengths
        pts = [X[0]]
        k = 0
        for L in lengths:
            p = pts[-1]
            while k < len(X) - 1 and np.linalg.norm(X[k + 1] - p) < L:
                k += 1
            if k < len(X) - 1:
                a, b = X[k], X[k + 1]  # the crossing lies on segment a→b: solve |a + s(b−a) − p| = L
                d = b - a
                f = a - p
                A, B, C = d @ d, 2 * f @ d, f @ f - L * L
                disc = max(B * B - 4 * A * C, 0.0)
                s = (-B + math.sqrt(disc)) / (2 * A) if A > 0 else 0.0
                pts.append(a + np.clip(s, 0, 1) * d)
            else:
                dirv = (pts[-1] - pts[-2]) if len(pts) > 1 else (X[-1] - X[0])
                pts.append(p + L * dirv / max(np.linalg.norm(dirv), 1e-9))
        P = np.array(pts)
        u = np.diff(P, axis=0)
        u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-9)
        z = up / np.linalg.norm(up)
        x0 = u[0] - (u[0] @ z) * z
        if np.linalg.norm(x0) < 1e-6:
            return None
        x0 /= np.linalg.norm(x0)
        R0 = np.stack([x0, np.cross(z, x0), z], axis=1)
        q = []
        R = R0
        for i, joint in enumerate(self.robot.joints):
            ul = R.T @ u[i + 1]  # next link's direction in link i's frame
            yaw = math.atan2(ul[1], ul[0])
            for ax in joint.axes:
                if ax == "z":
                    q.append(yaw)
                else:
                    q.append(0.0)
            c, s = math.cos(yaw), math.sin(yaw)
            R = R @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
        q = np.clip(np.array(q), self.robot.lower, self.robot.upper)
        return self.layout.pack(q, R0, P[0])

    def _wide_refiner(self) -> Refiner:
        cfg = self.config
        return Refiner(self.renderer, replace(self.search_refiner.config, sigma_schedule=cfg.init_sigma_schedule,
                                              prior_q=2.0, prior_rot=2.0, prior_trans=2.0))

    def initialise(self, mask: np.ndarray, obs: Optional[Observation] = None, extra=(), orient=None):
        """Multi-start search for the pose of ``mask``; returns the best :class:`RefineResult`.

        ``orient``: a pose vector (D,); when given, only starts whose tail lies nearer
        to its tail than to its head are tried (the same reading of the chain), and
        with ``keep_reading_results`` a refined start that ends up read the other
        way is dropped unless no start keeps the reading.
        """
        t0 = time.perf_counter()
        try:
            return self._search(mask, obs, extra, orient)
        finally:
            self.search_time_s += time.perf_counter() - t0

    def _ends(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt = torch.as_tensor(np.asarray(x, float))[None]
        q, R0, t0 = self.layout.to_fk(xt)
        return t0[0].numpy(), forward_kinematics(self.robot, q, R0, t0).head[0].numpy()

    def _search(self, mask: np.ndarray, obs: Optional[Observation], extra, orient=None):
        cfg = self.config
        if obs is None or self._far_on:
            obs = self._observe(mask, far=False)
        starts = self.initial_poses(mask)
        if orient is not None:
            tail_o, head_o = self._ends(orient)

            def same_reading(x) -> bool:
                tail = self._ends(x)[0]
                return bool(np.linalg.norm(tail - tail_o) <= np.linalg.norm(tail - head_o))

            starts = [x for x in starts if same_reading(x)]
        starts = starts + [np.asarray(e, float) for e in extra]
        if not starts:
            raise InputError("initialisation: the mask has no usable skeleton; expected a visible robot")
        b0 = [self._offset_guess(x, mask) for x in starts] if cfg.init_offset_guess else [0.0] * len(starts)
        scored = sorted(((self.refiner.evaluate(x, obs, b0[i], sigma=2.0)[1], i) for i, x in enumerate(starts)),
                        reverse=True)
        wide = self._wide_refiner()
        best = fallback = None
        for _, i in scored[: cfg.init_candidates]:
            r = wide.refine(starts[i], obs, steps=cfg.init_refine_steps, offset0=b0[i], up=self.up)
            r = self.search_refiner.refine(r.x, obs, offset0=r.offset_px, steps=4, up=self.up)
            if orient is not None and cfg.keep_reading_results and not same_reading(r.x):
                if fallback is None or r.iou > fallback.iou:
                    fallback = r
                continue
            if best is None or r.iou > best.iou:
                best = r
        return best if best is not None else fallback


def _trim_start(X: np.ndarray, length: float) -> np.ndarray:
    """The polyline X (n, 3) without its first ``length`` [m] of arc length."""
    if length <= 0:
        return X
    seg = np.linalg.norm(np.diff(X, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] <= length:
        return X
    k = int(np.searchsorted(s, length, side="right")) - 1
    f = (length - s[k]) / max(seg[k], 1e-12)
    start = X[k] + f * (X[k + 1] - X[k])
    return np.concatenate([start[None], X[k + 1:]])
