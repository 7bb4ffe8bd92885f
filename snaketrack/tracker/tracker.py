"""The single-camera tracker session: masks in, :class:`TrackState` out.

Per frame (:meth:`Tracker.step`)::

    predict        constant velocity (KalmanFilter.predict, filter.py); with wave_follow, on an
                   occluded frame (the prediction off a mask that has lost area, occlusion.py),
                   the yaw joints that follow a leader from its track (wave_follow.py)
    refine         Levenberg–Marquardt on the silhouette (refine.py), with the
                   coverage term and, given an up direction, the ground prior;
                   model pixels far from the mask or beyond a cut of it (a post)
                   are ignored (occlusion.py)
    velocity       filter.set_refined: the paper's finite-difference velocity
    reading        flip the chain when its body wave runs tail-ward (reading.py)

The up direction (``start``/``step``'s ``up``, from an IMU; :mod:`snaketrack.tracker.calib.gravity`) is
optional: with it the robot's plane is held to the ground, and with ``ground_window`` its base to the
ground's height (:mod:`snaketrack.tracker.calib.ground_prior`; on a moving camera per unit of the camera's
height over the ground, ``start``/``step``'s ``ground``).

First frame without a given pose: the multi-start search of :mod:`snaketrack.tracker.fit.search`
(:meth:`Tracker.initialise`). Head and tail look alike: later searches keep the track's reading, and
the body wave's direction (a robot crawling forward sends it from head to tail) turns a track read
backwards round after ``wave_window`` frames.

Visibility: a mask with fewer than ``min_mask_px`` pixels means the robot is not seen; the tracker
coasts on its prediction (status ``coasting``) and, after ``lost_after`` such frames, stops the motion
(velocity zeroed) and reports ``lost``. The first mask after a ``lost`` spell is refined from the held
pose with the search's coarse-to-fine edge (the robot may have moved); whenever a fit's IoU stays below
``reacquire_iou`` the search runs too and the better result is kept.

Skipped frames: a live source that runs ahead of the tracker hands it the newest frame, so the interval
since the last fit may be several frame times. Past ``gap_frames`` of them and up to ``gap_max_frames``,
a fit whose IoU falls more than ``gap_margin`` below the last frame's is retried from the last fit with
the search's coarse-to-fine edge (``gap_refine_steps``) and the better kept: tracked every 2nd or 3rd
frame this keeps the fit on the body where the prediction let it slide off and re-search
(docs/benchmarks.md, "Skipped frames").
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Optional

import numpy as np
import torch

from snaketrack.errors import InputError, StateError
from snaketrack.models import chain_kernel
from snaketrack.models.chain_kernel import CompiledBody
from snaketrack.models.kinematics import forward_kinematics, forward_kinematics_np
from snaketrack.models.robot import Robot
from snaketrack.tracker.calib.ground_prior import GroundPrior
from snaketrack.tracker.config import TrackerConfig
from snaketrack.tracker.filter import KalmanFilter
from snaketrack.tracker.fit.observation import Observation, observe
from snaketrack.tracker.fit.occlusion import cut_weighted, hidden_fraction, visible_iou
from snaketrack.tracker.fit.refine import Refiner, RefineResult
from snaketrack.tracker.fit.search import PoseSearch
from snaketrack.tracker.reading import flip_pose, wave_direction, yaw_indices
from snaketrack.tracker.render.primitives import CapsuleModel
from snaketrack.tracker.render.renderers import make_renderer
from snaketrack.tracker.render.silhouette import SilhouetteRenderer, SilhouetteSettings
from snaketrack.tracker.state import StateLayout, TrackState
from snaketrack.tracker.wave_follow import wave_follow_for


class Tracker:
    """A tracking session (``start`` / ``step`` / ``reset``).

    robot: :class:`Robot`; K: (3, 3) intrinsics [px]; width, height: image size
    [px] of the masks; fps: frame rate [1/s]; config: :class:`TrackerConfig`; device: where the
    silhouettes and their Jacobians are computed (a torch device name, :func:`snaketrack.device.resolve_device`;
    default the CPU; refinement's ``core="auto"`` is the torch core on a GPU).

    ``offset``: the edge offset [px] of the last refinement (``RefineConfig.estimate_offset``; it grows
    (+) or shrinks (−) the model's outline to the mask's), 0 before the first.
    """

    def __init__(self, robot: Robot, K, width: int, height: int, fps: float = 30.0,
                 config: TrackerConfig = TrackerConfig(), device: str = "cpu"):
        if not fps > 0:
            raise InputError(f"fps = {fps!r}; expected > 0")
        self.robot, self.config, self.fps = robot, config, float(fps)
        self.width, self.height = int(width), int(height)
        self.renderer: SilhouetteRenderer = make_renderer(config.renderer, robot, K, width, height,
                                                          CapsuleModel.named(robot, config.model),
                                                          SilhouetteSettings(sigma_px=config.refine.sigma_px),
                                                          device=device)
        self.layout: StateLayout = self.renderer.layout
        self.refiner = Refiner(self.renderer, config.refine)
        oop = config.init_out_of_plane_prior_rad
        # the searches start far from the answer: their soft-edged stages stay on the full grid
        search_refine = replace(config.refine, coarse_sigma_px=0.0,
                                **({} if oop is None else {"out_of_plane_prior_rad": float(oop)}))
        self.search_refiner = Refiner(self.renderer, search_refine)
        # the search's hypotheses (ranking, coarse-to-fine LM) are drawn by the own renderer (search.py)
        if type(self.renderer) is SilhouetteRenderer:
            self.search_renderer, coarse, coarse_search = self.renderer, self.refiner, self.search_refiner
        else:
            self.search_renderer = SilhouetteRenderer(robot, K, width, height, self.renderer.model,
                                                      self.renderer.settings)
            coarse = Refiner(self.search_renderer, config.refine)
            coarse_search = Refiner(self.search_renderer, search_refine)
        self._coarse_refiners = (coarse, coarse_search)
        k = config.occluded_prior_scale
        self.occluded_refiner = self.refiner if k == 1.0 else \
            Refiner(self.renderer, replace(config.refine, prior_q=config.refine.prior_q * k,
                                           prior_rot=config.refine.prior_rot * k,
                                           prior_trans=config.refine.prior_trans * k))
        # the body's centre (which the filter's depth damping evaluates a few times a frame) and head point
        # compiled with the refinement's other helpers (forward_kinematics the reference)
        self._body = CompiledBody(robot) if config.refine.helpers == "compiled" and chain_kernel.available() \
            else None
        self.reset()

    def body_centre(self, x: np.ndarray) -> np.ndarray:
        """Mean of the link centres (3,) [m], camera frame, at pose ``x`` (D,)."""
        q, R, t = self.layout.unpack(x)
        if self._body is not None:
            return self._body.centre(q, R, t)
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
        self.wave = wave_follow_for(self.robot, self.config)
        self.hidden = 0.0  # fraction of the last refined frame's predicted axis off its mask (occlusion.py)
        self.last_occluded = -10 ** 9  # the last frame refined as occluded
        self.flips = 0
        # True once the body wave has confirmed the track's reading of head and tail, or turned it
        # round; a consumer that can wait holds its first frames until then (reading.ReadingHold)
        self.reading_settled = not self._can_check_reading()
        self.ground_prior = GroundPrior(self.robot, self.config.ground_window, self.config.ground_min_frames,
                                        self.config.ground_height)
        self.search = PoseSearch(self.search_renderer, self.config, *self._coarse_refiners,
                                 final_refiner=self.search_refiner)
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
        frames: :class:`snaketrack.tracker.calib.ground.GroundTracker`); with ``ground_window`` the ground prior
        follows the camera's height by it (a moving camera). None: unchanged since the last frame."""
        self.reset()
        self.t_prev = float(t)
        m = self._check_mask(first_mask)
        self.up = None if up is None else np.asarray(up, float)
        self.ground_prior.set_ratio(ground)
        if m.sum() < self.config.min_mask_px and initial_guess is None:
            raise InputError(f"first mask has {int(m.sum())} pixels; expected at least "
                             f"{self.config.min_mask_px} to initialise (or give initial_guess)")
        self.frame = 0
        self.started = True
        obs = observe(m, self.config.refine)
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
        if self.wave is not None:
            self.wave.add(x[self.layout.q])
        if self.up is not None:
            self.ground_prior.add(self.frame, x[self.layout.trans], self.up)
        return self._record(x, t, res, "tracked")

    def step(self, mask, t: Optional[float] = None, up=None, ground=None) -> TrackState:
        """Track the next mask (H, W); returns its :class:`TrackState`. ``up``, ``ground``: as in :meth:`start`."""
        if not self.started:
            raise StateError("Tracker.step: call start(first_mask) first")
        m = self._check_mask(mask)
        self.up = None if up is None else np.asarray(up, float)
        self.ground_prior.set_ratio(ground)
        self.frame += 1
        t = self.frame / self.fps if t is None else float(t)
        # frames skipped (a live source) or a varying rate: predict over the real interval; the nominal
        # one is kept when they agree to a nanosecond, so a recorded clip's track does not depend on rounding
        dt = t - self.t_prev
        self.filter.set_interval(dt if dt > 0 and abs(dt - 1.0 / self.fps) > 1e-9 else 1.0 / self.fps)
        self.t_prev = t
        cfg = self.config
        pred = self.filter.predict()
        if m.sum() < cfg.min_mask_px:
            self.filter.coast()
            self.n_coast += 1
            status = "lost" if self.n_coast > cfg.lost_after else "coasting"
            if status == "lost":  # stop extrapolating: hold the last pose
                n = self.layout.dim
                self.filter.x[n:] = 0.0
                if self.wave is not None:
                    self.wave.reset()
            elif self.wave is not None:
                self.wave.add(pred[self.layout.q])
            return self._record(pred, t, None, status)
        obs = observe(m, self.config.refine)
        was_lost = self.n_coast > cfg.lost_after
        occluded = False
        if was_lost:  # the robot may have moved while hidden: a wide edge first
            res = self.search.wide_refiner.refine(pred, obs, steps=cfg.init_refine_steps, up=self.up)
            res = self.refiner.refine(res.x, obs, offset0=res.offset_px, steps=4, up=self.up)
        else:
            self.hidden = hidden_fraction(obs, self.renderer, pred) if self._occlusion_on() else 0.0
            # a prediction off its mask is an occluder's doing only where the mask has lost area too: a
            # track that has left the robot has its full mask beside it
            occluded = self._occlusion_on() and self.hidden >= cfg.occluded_axis_fraction and \
                m.sum() < cfg.occluded_area_ratio * self.renderer.mask(pred, self.offset).sum()
            if occluded:  # the hidden joints are seen no more: they follow the wave
                self.last_occluded = self.frame
                pred = self._wave_predicted(pred)
            refiner = self.occluded_refiner if occluded else self.refiner
            obs_cut = self._cut_weighted(pred, obs)
            height = self.ground_prior.height(self.up)
            res = refiner.refine(pred, obs_cut, offset0=0.0, up=self.up, height=height)
            gap = cfg.gap_frames > 0 and cfg.gap_frames < dt * self.fps < cfg.gap_max_frames + 1e-6
            if gap and not occluded and self.last is not None and self.last.iou is not None and \
                    res.iou < self.last.iou - cfg.gap_margin:
                # frames were skipped (a live source behind) and the fit lost ground: the prediction may
                # have carried a poor fit's rate over the gap, or the robot moved past the edge's reach;
                # the last fit brought to this mask with the search's coarse-to-fine edge is tried too.
                # Over longer gaps such a fit keeps a fair IoU with the body slid along itself, where a
                # failed fit would have called the search: so only up to gap_max_frames
                wide = self.search.wide_refiner.refine(self.filter.s_prev, obs, steps=cfg.gap_refine_steps,
                                                       up=self.up)  # from the last frame's final pose
                alt = refiner.refine(wide.x, obs_cut, offset0=wide.offset_px, up=self.up, height=height)
                if alt.iou > res.iou:
                    res = alt
            if occluded and cfg.occluded_visible_iou:
                res = replace(res, iou=visible_iou(obs_cut, self.renderer.mask(res.x, res.offset_px)))
        reinit = False
        if res.iou < cfg.reacquire_iou or (was_lost and res.iou < cfg.reacquired_iou):
            # while tracking, keep the track's reading of the chain (tail vs head): a silhouette barely
            # tells them apart and a flipped search result puts the base a body length off
            orient = None if was_lost or not cfg.keep_reading else self._reading_reference(pred)
            alt = self.initialise(m, obs, extra=[pred], orient=orient)
            if not was_lost and occluded and cfg.occluded_visible_iou:  # judged as the track is
                alt = replace(alt, iou=visible_iou(obs_cut, self.renderer.mask(alt.x, alt.offset_px)))
            if alt.iou > res.iou + (0.0 if was_lost else cfg.reinit_margin):
                res, reinit = alt, True
        elif self.warming and self.frame <= cfg.warmup_frames and res.iou < cfg.warmup_iou:
            # warm-up: the first frame's pose came from one mask; search again on the next masks
            # until a fit explains its mask well (a single corrupted mask can mislead the search), or
            # until a search made afresh on a new mask does no better than the track: it confirms it
            alt = self.initialise(m, obs, extra=[pred, res.x], orient=res.x)
            if alt.iou > res.iou + cfg.warmup_margin:
                res, reinit = alt, True
            else:
                self.warming = False
        if self.warming and (res.iou >= cfg.warmup_iou or self.frame >= cfg.warmup_frames):
            self.warming = False
        self.n_coast = 0
        self.offset = res.offset_px
        if reinit or was_lost:
            self.yaw_hist = []
            if self.wave is not None:
                self.wave.reset()
            self.filter.initialise(res.x)
        else:
            self.filter.set_refined(res.x)
        if cfg.wave_check:
            res = self._check_reading(res, obs)
        if self.wave is not None:
            self.wave.add(res.x[self.layout.q])
        if self.up is not None:
            self.ground_prior.add(self.frame, res.x[self.layout.trans], self.up)
        if res.iou >= cfg.reading_ref_iou:
            self.good = (self.frame, np.array(res.x, float))
        return self._record(res.x, t, res, "tracked")

    def _reading_reference(self, pred: np.ndarray) -> np.ndarray:
        """The pose whose reading of the chain a search keeps: the last well-fitting frame's, else ``pred``."""
        cfg = self.config
        if self.good is not None and self.frame - self.good[0] <= cfg.reading_ref_frames:
            return self.good[1]
        return pred

    def _can_check_reading(self) -> bool:
        return self.config.wave_check and len(yaw_indices(self.robot)) >= 2

    def _check_reading(self, res, obs):
        """Flip the track when its body wave runs from tail to head (see ``wave_check``)."""
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
        if self._occlusion_on() and self.frame - self.last_occluded < cfg.wave_window:
            return res  # the window's wave is partly the prediction's, not the robot's: no turning round
        alt = self._refine_flipped(res.x, obs, self.up)
        self.yaw_hist = []
        if alt.iou < res.iou - 0.1:  # the flipped body does not fit: keep the track, look again later
            return res
        self.flips += 1
        if self.wave is not None:
            self.wave.reset()
        self.reading_settled = True
        self.good = None  # the last good frame was read the other way
        self.offset = alt.offset_px
        self.filter.initialise(alt.x)
        return alt

    def _refine_flipped(self, x: np.ndarray, obs: Observation, up, ground: Optional[float] = None):
        """The pose ``x`` read from the other end (reading.flip_pose), refined on ``obs``: wide edge, then 4
        steps; on a fixed camera (``ground_window``) both hold the base to the ground's height."""
        xf = flip_pose(self.robot, self.layout, x)
        height = self.ground_prior.height(self.up, ground)
        alt = self.search.wide_refiner.refine(xf, obs, steps=self.config.init_refine_steps, up=up, height=height)
        return self.refiner.refine(alt.x, obs, offset0=alt.offset_px, steps=4, up=up, height=height)

    def reread(self, state: TrackState, mask, up=None, ground: Optional[float] = None) -> TrackState:
        """A past frame's state read from the other end: its pose flipped (reading.flip_pose) and, when
        it was tracked, refined on that frame's mask (H, W); ``up``, ``ground``: that frame's, as in
        :meth:`start`. The session (filter, history) is untouched. What
        :class:`~snaketrack.tracker.reading.ReadingHold` does to the frames it held when the track is
        turned round."""
        m = self._check_mask(mask)
        x = state.pose_vector(self.layout)
        up = None if up is None else np.asarray(up, float)
        if state.status != "tracked" or m.sum() < self.config.min_mask_px:
            return self._state(flip_pose(self.robot, self.layout, x), state.frame, state.t, None,
                               state.status, cov_trace=state.cov_trace)
        t0 = time.perf_counter()
        res = self._refine_flipped(x, observe(m, self.config.refine), up, ground)
        self.search_time_s += time.perf_counter() - t0
        return self._state(res.x, state.frame, state.t, res, state.status)

    def fit(self, x: np.ndarray, mask, up=None, ground: Optional[float] = None) -> RefineResult:
        """One refinement of pose ``x`` (D,) on ``mask`` (H, W), as a tracked frame gets it: the occlusion
        and cut weighting around ``x``, held to ``x`` as its prediction, with the up prior (``up``) and the
        session's ground prior (``ground``: the frame's camera height ratio, as in :meth:`start`). The
        session (filter, history) is untouched. What :meth:`refine_back` and
        ``snaketrack bench pose-floor`` (started at the true pose) refine with."""
        m = self._check_mask(mask)
        x = np.asarray(x, float)
        up = None if up is None else np.asarray(up, float)
        obs = self._cut_weighted(x, observe(m, self.config.refine))
        return self.refiner.refine(x, obs, up=up, height=self.ground_prior.height(self.up, ground))

    def refine_back(self, state: TrackState, prediction: np.ndarray, mask, up=None,
                    ground: Optional[float] = None) -> TrackState:
        """A past frame's state refined again from ``prediction`` (D,), the pose of the frame after it,
        on that frame's mask (H, W); ``up``, ``ground``: that frame's, as in :meth:`start`. Returns the
        better fit (IoU) of the two. The filter and history are untouched; with
        ``hold_backward_heights`` the frame's entry in the ground prior's record follows the new fit. What
        :class:`~snaketrack.tracker.reading.ReadingHold` does with ``hold_backward``."""
        m = self._check_mask(mask)
        if state.status != "tracked" or m.sum() < self.config.min_mask_px:
            return state
        up = None if up is None else np.asarray(up, float)
        res = self.fit(prediction, m, up, ground)
        if not res.iou > state.iou:
            return state
        if self.config.hold_backward_heights and up is not None:
            self.ground_prior.replace(state.frame, res.x[self.layout.trans], up, 1.0 if ground is None else ground)
        return self._state(res.x, state.frame, state.t, res, state.status)

    # -- pieces ---------------------------------------------------------
    def _occlusion_on(self) -> bool:
        """Whether anything is done differently on an occluded frame (``wave_follow``,
        ``occluded_prior_scale``, ``occluded_visible_iou``)."""
        cfg = self.config
        return self.wave is not None or cfg.occluded_prior_scale != 1.0 or cfg.occluded_visible_iou

    def _wave_predicted(self, pred: np.ndarray) -> np.ndarray:
        """The filter's prediction ``pred`` (D,) with the yaw joints that follow a leader predicted from its
        track while the body wave holds (:class:`~snaketrack.tracker.wave_follow.WaveFollow`)."""
        if self.wave is None:
            return pred
        out = np.array(pred, float)
        out[self.layout.q] = np.clip(self.wave.predict(out[self.layout.q]), self.robot.lower, self.robot.upper)
        return out

    def _cut_weighted(self, x: np.ndarray, obs: Observation) -> Observation:
        """``obs`` with the model pixels beyond a cut of the mask around pose ``x`` ignored
        (:func:`~snaketrack.tracker.fit.occlusion.cut_weighted`); ``obs`` itself with ``cut_weighting`` off."""
        if not self.config.cut_weighting:
            return obs
        r = self.config.refine
        return cut_weighted(obs, self.renderer, x, r.far_px, r.far_weight)

    def _record(self, x: np.ndarray, t: float, res, status: str) -> TrackState:
        cov = res.covariance if (res is not None and res.covariance is not None) else self.filter.pose_covariance
        st = self._state(x, self.frame, t, res, status, cov_trace=float(np.trace(cov)),
                         velocity=self.filter.velocity if self.filter.x is not None else None)
        self.last = st
        return st

    def _state(self, x: np.ndarray, frame: int, t: float, res, status: str, cov_trace: Optional[float] = None,
               velocity: Optional[np.ndarray] = None) -> TrackState:
        """The :class:`TrackState` of pose ``x`` (D,) and refinement result ``res`` (or None)."""
        if self._body is not None:
            head = self._body.head(*self.layout.unpack(x))
        else:
            q, R0, t0 = self.layout.to_fk(torch.as_tensor(np.asarray(x, float))[None])
            head = forward_kinematics(self.robot, q, R0, t0).head[0].numpy()
        if cov_trace is None:
            cov_trace = float(np.trace(res.covariance)) if res is not None and res.covariance is not None \
                else float("nan")
        return TrackState.from_pose_vector(
            self.layout, x, head, frame, t, cov_trace=cov_trace,
            iou=float(res.iou) if res is not None else float("nan"), status=status, velocity=velocity,
            loss=float(res.cost) if res is not None else float("nan"))

    # -- search ---------------------------------------------------------
    def initialise(self, mask: np.ndarray, obs: Optional[Observation] = None, extra=(), orient=None):
        """Multi-start search for the pose of ``mask`` (:meth:`PoseSearch.run`, with the current up
        direction); returns the best :class:`RefineResult`.

        ``orient``: a pose vector (D,); when given, only starts whose tail lies nearer
        to its tail than to its head are tried (the same reading of the chain), and
        with ``keep_reading_results`` a refined start that ends up read the other
        way is dropped unless no start keeps the reading.
        """
        t0 = time.perf_counter()
        try:
            return self.search.run(mask, obs, extra, orient, self.up)
        finally:
            self.search_time_s += time.perf_counter() - t0
