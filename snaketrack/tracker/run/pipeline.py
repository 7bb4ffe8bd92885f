"""One tracking pipeline: frames (and masks) in, robot states out, frame by frame.

:class:`TrackingSession` is what ``snaketrack track``, ``snaketrack demo``,
the benchmarks and a live service share. Built from a robot, a
:class:`~snaketrack.tracker.calib.camera.Camera` (intrinsics, distortion, size) and
one frozen :class:`PipelineConfig`, it owns everything between a camera
frame and a state:

1. undistortion (when the calibration has distortion) and resizing to
   ``track_size`` (K scaled with the images);
2. the observed mask: given with the frame (in the source's geometry: it is
   undistorted and resized like the frame), or predicted by a segmenter on
   the frame as tracked; optionally corrupted like a real segmenter's
   (benchmarks) or hidden for chosen frames;
3. the up direction and, for a moving camera, the ground tracker that
   follows the camera's height over the ground plane;
4. the :class:`~snaketrack.tracker.tracker.Tracker` (prediction, refinement,
   first-frame search, re-acquisition);
5. the first-frames reading hold (:class:`~snaketrack.tracker.reading.ReadingHold`):
   until the body wave shows which end is the head, the first frames are held
   and re-read from the other end if the track turns round;
6. one render of each finished frame's silhouette, for its IoU against the
   observed (and truth) mask and for an overlay.

>>> from snaketrack.models.robot import load_robot
>>> from snaketrack.tracker.calib.camera import Camera
>>> robot = load_robot("planar-snake-11")
>>> camera = Camera.from_K([[400, 0, 159.5], [0, 400, 119.5], [0, 0, 1]], 320, 240)
>>> session = TrackingSession(robot, camera, fps=30.0)
>>> session.size, float(session.camera.K[0, 0])
((320, 240), 400.0)
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Optional

import cv2
import numpy as np

from snaketrack.device import check_device, resolve_device
from snaketrack.errors import InputError
from snaketrack.masks import mask_iou
from snaketrack.tracker.calib.camera import Undistorter
from snaketrack.tracker.calib.ground import GroundTracker
from snaketrack.tracker.config import TrackerConfig
from snaketrack.tracker.reading import ReadingHold
from snaketrack.tracker.render.renderers import check_renderer
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.run.corrupt import MaskCorruptor
from snaketrack.tracker.state import TrackState
from snaketrack.tracker.tracker import Tracker
from snaketrack.training.data import resize_to

#: A moving camera's ground prior starts once this many frames are tracked (``--track-ground``): the
#: height it holds comes from the track itself, and too few frames lock in an early depth bias.
MOVING_GROUND_MIN_FRAMES = 30


@dataclass(frozen=True)
class PipelineConfig:
    """How a :class:`TrackingSession` turns frames into states.

    refine_steps: refinement iterations per frame; None: the tracker's default (10).
    silhouette: the silhouette model, ``TrackerConfig.model`` (``visual``, ``visual-capsule``, ``capsules``).
    renderer: the silhouette renderer, ``TrackerConfig.renderer`` (``own`` or ``pytorch3d``). Default ``own``.
    static_camera: the camera is fixed to the ground (a tripod): hold the base to the ground's height; needs up.
    track_ground: the camera moves: follow its height over the ground plane and hold the base to it; needs up.
    follow_up: with ``track_ground``, the up direction need be given for the first frame only: later frames
        given none get it followed through the ground's homography (the camera's rotation;
        :class:`~snaketrack.tracker.calib.ground.GroundTracker` ``follow``). ``--up auto`` on a moving camera.
    ground_height: the camera's height over the ground at the first frame [m], when known (``--up auto``'s
        plane); with ``static_camera`` or ``track_ground`` the base is held to that ground from the first frame
        (``TrackerConfig.ground_height``) rather than to the track's own median height. None (default).
    hold_frames: first frames held until the head's end is settled [frames]; 0 releases every frame at once. Default 60.
    track_size: (width, height) [px] to track at, frames and masks resized and K scaled; None: the camera's size.
    corrupt_masks: corrupt observed masks like a real segmenter's (benchmarks). Default False.
    corrupt_seed: seed of the corruption. Default 0.
    hidden: frame ranges [start, stop) whose observed masks are emptied (the robot hidden; benchmarks).
    render: render each finished frame's silhouette (IoUs and overlays). Default True.
    head: which end is the head: ``wave`` (the robot crawls forward: the track is turned round when its body
        wave runs from its tail to its head; ``TrackerConfig.wave_check``) or ``first`` (the first frame's
        reading is kept throughout: a sidewinding robot, whose wave says little about its head, or one that
        backs up). Default ``wave``.
    refine_core: how refinement renders the silhouette and its Jacobian, ``RefineConfig.core`` (``auto``,
        ``compiled``, ``torch``). Default ``auto``.
    refine_budget_px: ``RefineConfig.budget_width_px`` (0: refinement on the image's own pixels). Default 12.
    refine_helpers: ``RefineConfig.helpers`` (``compiled``, ``numpy``). Default ``compiled``.
    refine_coarse_sigma_px: ``RefineConfig.coarse_sigma_px`` [px] (0: a tracked frame's every stage on the
        tracking grid). Default 2.
    occluders: things in front of the robot cut its mask for tens of frames (legs, a shoe, a post): on an
        occluded frame the hidden joints follow the body wave, the priors towards the prediction are four
        times tighter and fits are judged by their unhidden part (:data:`OCCLUDER_SETTINGS`). Default False.
    device: where torch renders the silhouettes and their Jacobians for refinement, the search and each
        finished frame's render: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (``cuda`` when torch sees a GPU;
        :func:`snaketrack.device.resolve_device`). On a GPU ``refine_core`` ``auto`` is the torch core (the
        compiled one runs on the CPU). Default ``auto``.
    """

    refine_steps: Optional[int] = None
    silhouette: str = "visual"
    renderer: str = "own"
    static_camera: bool = False
    track_ground: bool = False
    follow_up: bool = False
    ground_height: Optional[float] = None
    hold_frames: int = 60
    track_size: Optional[tuple[int, int]] = None
    corrupt_masks: bool = False
    corrupt_seed: int = 0
    hidden: tuple[tuple[int, int], ...] = ()
    render: bool = True
    head: str = "wave"
    refine_core: str = "auto"
    refine_budget_px: float = 12.0
    refine_helpers: str = "compiled"
    refine_coarse_sigma_px: float = 2.0
    occluders: bool = False
    device: str = "auto"

    def __post_init__(self):
        if self.refine_steps is not None and self.refine_steps < 0:
            raise InputError(f"--refine-steps {self.refine_steps}; expected a non-negative integer")
        if self.hold_frames < 0:
            raise InputError(f"--hold-frames {self.hold_frames}; expected a non-negative number of frames")
        if self.static_camera and self.track_ground:
            raise InputError("--static-camera and --track-ground: choose one (a fixed camera, or one that moves)")
        if self.follow_up and not self.track_ground:
            raise InputError("following the up direction through the ground's homography needs --track-ground")
        if self.ground_height is not None and not (self.needs_up and math.isfinite(self.ground_height)
                                                   and self.ground_height > 0):
            raise InputError(f"ground height {self.ground_height!r}: needs --static-camera or --track-ground and "
                             "a height > 0 m")
        if self.silhouette not in ("visual", "visual-capsule", "capsules"):
            raise InputError(f"--silhouette {self.silhouette!r}; expected visual, visual-capsule or capsules")
        if self.head not in ("wave", "first"):
            raise InputError(f"--head {self.head!r}; expected wave or first")

        check_renderer(self.renderer)
        check_device(self.device)  # whether its GPU is there: when a session is made

    @property
    def needs_up(self) -> bool:
        """Whether every frame needs the up direction (the ground priors hold the robot to the ground)."""
        return self.static_camera or self.track_ground


@dataclass(frozen=True)
class PreparedFrame:
    """A frame ready to track (:meth:`TrackingSession.prepare`).

    index: the source's frame number. rgb: RGB uint8 (h, w, 3) undistorted, at the tracking size.
    mask: the observed mask, bool (h, w), before any corruption or hiding the session applies.
    ground: with a ground tracker, whether it has followed this frame; then ``height`` (the camera's
    height over the ground relative to the first frame's, or None), ``up`` (the up direction (3,) the frame
    is tracked with, followed over the ground where it was not given) and ``rotation`` (the camera's
    followed rotation (3, 3), or None) are its figures.
    """

    index: int
    rgb: np.ndarray
    mask: np.ndarray
    ground: bool = False
    height: Optional[float] = None
    up: Optional[np.ndarray] = None
    rotation: Optional[np.ndarray] = None


@dataclass(frozen=True)
class FrameInput:
    """What a tracked frame's result is made from once the reading hold releases it (its state aside).

    index: the source's frame number. t: its time [s]. rgb: the frame as tracked, RGB uint8 (H, W, 3).
    mask: the observed mask as tracked, (H, W). ground: the camera's height over the ground relative to the
    first frame's, or None. truth_mask: the truth mask (H, W) at the source's size, or None. up: the up
    direction (3,) [camera frame] it was tracked with, or None. rotation: the camera's followed rotation
    (3, 3) from the first frame's, or None.
    """

    index: int
    t: float
    rgb: np.ndarray
    mask: np.ndarray
    ground: Optional[float] = None
    truth_mask: Optional[np.ndarray] = None
    up: Optional[np.ndarray] = None
    rotation: Optional[np.ndarray] = None


@dataclass
class FrameResult:
    """One finished frame.

    index: the source's frame number. t: its time [s].
    state: the :class:`~snaketrack.tracker.state.TrackState` (camera frame, metres, radians).
    row: the ``track.csv`` row (the state's columns, ``iou_no_offset``, and
        ``camera_height_ratio`` / ``iou_truth`` / the followed ``up_x, up_y, up_z`` when tracked with them).
    frame: the frame as tracked, RGB uint8 (H, W, 3) at the tracking size (undistorted).
    mask: the observed mask as tracked, bool (H, W).
    silhouette: the model's silhouette at the state, bool (H, W); None when not rendered.
    up: the up direction the frame was tracked with, (3,) [camera frame]; None: none.
    rotation: with ``follow_up``, the camera's rotation (3, 3) from the first frame's orientation to this
        frame's, as followed over the ground; None otherwise.
    """

    index: int
    t: float
    state: Any
    row: dict
    frame: np.ndarray
    mask: np.ndarray
    silhouette: Optional[np.ndarray] = None
    up: Optional[np.ndarray] = None
    rotation: Optional[np.ndarray] = None

    @property
    def status(self) -> str:
        """``tracked``, ``coasting`` or ``lost``."""
        return self.state.status


#: ``TrackerConfig`` settings of ``--occluders`` (docs/tracking.md, "Occluders in front of the robot")
OCCLUDER_SETTINGS = dict(wave_follow=True, occluded_prior_scale=0.25, occluded_visible_iou=True)


def on_moving_ground(config: TrackerConfig) -> TrackerConfig:
    """``config`` holding the robot's base to the ground under a moving camera (``--track-ground``): the
    ground prior on from :data:`MOVING_GROUND_MIN_FRAMES` tracked frames, per unit of the camera's height."""
    return replace(config, ground_window=-1, ground_min_frames=MOVING_GROUND_MIN_FRAMES)


def make_tracker(robot, camera, fps: float, refine_steps: Optional[int] = None, static_camera: bool = False,
                 track_ground: bool = False, silhouette: str = "visual", head: str = "wave",
                 ground_height: Optional[float] = None, refine_core: str = "auto",
                 refine_budget_px: float = 12.0, renderer: str = "own", device: str = "cpu",
                 occluders: bool = False, refine_helpers: str = "compiled", refine_coarse_sigma_px: float = 2.0):
    """The :class:`~snaketrack.tracker.tracker.Tracker` for this camera (its K and size) and frame rate [1/s];
    ``static_camera`` / ``track_ground`` set the ground prior, ``silhouette`` the model (``TrackerConfig.model``),
    ``head`` the reading of the chain, ``ground_height`` a known camera height, ``renderer`` the silhouette
    renderer (:class:`PipelineConfig`), ``device`` the torch device it renders on (a resolved name),
    ``occluders`` the occluded frames' settings (:data:`OCCLUDER_SETTINGS`)."""
    config = TrackerConfig(model=silhouette, renderer=renderer, wave_check=head == "wave",
                           **(OCCLUDER_SETTINGS if occluders else {}))
    config = replace(config, refine=replace(config.refine, core=refine_core, budget_width_px=float(refine_budget_px),
                                            helpers=refine_helpers,
                                            coarse_sigma_px=float(refine_coarse_sigma_px)))
    if refine_steps is not None:
        config = replace(config, refine=replace(config.refine, steps=int(refine_steps)))
    if static_camera:
        config = replace(config, ground_window=-1)
    if track_ground:
        config = on_moving_ground(config)
    if ground_height is not None:
        config = replace(config, ground_height=float(ground_height))
    return Tracker(robot, camera.K, camera.width, camera.height, fps=fps, config=config, device=device)


class Resize:
    """Frames and masks to the tracking size ``(width, height)`` [px] (identity at the source's size)."""

    def __init__(self, size: tuple[int, int], source_size: tuple[int, int]):
        self.size, self.active = tuple(size), tuple(size) != tuple(source_size)

    def frame(self, image: np.ndarray) -> np.ndarray:
        """A frame by area interpolation when shrinking, linear when enlarging."""
        return resize_to(image, self.size[::-1]) if self.active else image

    def mask(self, mask: np.ndarray) -> np.ndarray:
        """A mask keeps the pixels at least half covered."""
        if not self.active:
            return mask
        m = cv2.resize(np.asarray(mask, dtype=np.uint8) * 255, self.size, interpolation=cv2.INTER_AREA)
        return m >= 128


class TrackingSession:
    """Track one robot through one camera's frames (module doc).

    robot: a :class:`~snaketrack.models.robot.Robot`.
    camera: the source's :class:`~snaketrack.tracker.calib.camera.Camera` (K, distortion, size in pixels).
    fps: the source's frame rate [1/s]; a frame's time is ``index / fps`` unless given.
    config: a :class:`PipelineConfig`.
    segmenter: anything with ``predict(rgb) -> mask`` (a trained model from
        :func:`snaketrack.training.segmenter.load_segmenter`); used for frames given without a mask.
    truth_masks: the caller passes ``truth_mask`` with each frame: rows gain ``iou_truth``.
    device: where torch runs the tracker (``cpu``, ``cuda``, ``cuda:N`` or ``auto``); None: ``config.device``.
        ``self.device`` is the resolved name (:func:`snaketrack.device.resolve_device`). The segmenter runs
        where it was loaded (:func:`~snaketrack.training.segmenter.load_segmenter` ``device``).

    ``start()``, then ``step(frame, mask=None, up=None, t=None)`` per frame; it returns the
    frames finished by that step, in order (usually the frame itself; none while the first frames
    are held; several when the hold releases them). ``close()`` returns those still held. Until a
    mask shows the robot (``TrackerConfig.min_mask_px``), each frame is finished at once as ``lost``
    with no pose (:meth:`~snaketrack.tracker.state.TrackState.before_start`: NaN entries), and the
    track starts on the first mask that does.
    """

    def __init__(self, robot, camera, fps: float = 30.0, config: PipelineConfig = PipelineConfig(),
                 segmenter: Any = None, truth_masks: bool = False, device: Optional[str] = None):
        self.device = resolve_device(config.device if device is None else device)
        self.robot, self.fps, self.config = robot, float(fps), config
        self.segmenter, self.truth_masks = segmenter, bool(truth_masks)
        self.undistort = Undistorter(camera)
        self.resize = Resize(config.track_size or camera.size, camera.size)
        cam = self.undistort.output_camera
        self.camera = cam.resized(*self.resize.size) if self.resize.active else cam
        self.corrupt = None
        if config.corrupt_masks:
            self.corrupt = MaskCorruptor(config.corrupt_seed)
        # the ground tracker follows the frames as they are prepared (the thread ahead of the tracker's)
        self.ground = GroundTracker(self.camera.K, follow=config.follow_up) if config.track_ground else None
        self.tracker = None
        self.frames = 0  # frames stepped since start()
        self.started = False  # whether the tracker has begun a track (a mask large enough was seen)
        self.track_time_s = 0.0
        self._renderer = None

    # -- the session ---------------------------------------------------------------------
    @property
    def size(self) -> tuple[int, int]:
        """(width, height) [px] of the frames as tracked."""
        return self.camera.size

    @property
    def extra_columns(self) -> list[str]:
        """``track.csv`` columns after the state's columns, in order."""
        return (["iou_truth"] if self.truth_masks else []) + ["iou_no_offset"] + \
            (["camera_height_ratio"] if self.config.track_ground else []) + \
            (["up_x", "up_y", "up_z"] if self.config.follow_up else [])

    def start(self) -> "TrackingSession":
        """A fresh track: a new tracker and reading hold, and a new ground tracker when one had tracked (frames
        prepared before the first start keep the ground tracker that followed them: start a session again
        only between frames, not while another thread prepares them)."""
        c = self.config
        restart = self.tracker is not None
        self.tracker = make_tracker(self.robot, self.camera, self.fps, c.refine_steps, static_camera=c.static_camera,
                                    track_ground=c.track_ground, silhouette=c.silhouette, head=c.head,
                                    ground_height=c.ground_height, refine_core=c.refine_core,
                                    refine_budget_px=c.refine_budget_px, refine_helpers=c.refine_helpers,
                                    refine_coarse_sigma_px=c.refine_coarse_sigma_px,
                                    renderer=c.renderer, device=self.device,
                                    occluders=c.occluders)
        if restart and c.track_ground:
            self.ground = GroundTracker(self.camera.K, follow=c.follow_up)
        self.hold = ReadingHold(self.tracker, c.hold_frames)
        self.frames, self.started, self.track_time_s = 0, False, 0.0
        return self

    def step(self, frame: np.ndarray, mask: Optional[np.ndarray] = None, up: Optional[np.ndarray] = None,
             t: Optional[float] = None, index: Optional[int] = None,
             truth_mask: Optional[np.ndarray] = None) -> list[FrameResult]:
        """Track one frame: :meth:`prepare`, then :meth:`track`.

        frame: RGB uint8 (H, W, 3) at the camera's size, as captured (distorted).
        mask: the observed mask, bool (H, W) at the camera's size; None: the segmenter's.
        up: the world's up direction in the camera frame, (3,); the ground priors hold the robot to
            the ground it defines (None: no prior for this frame).
        t: the frame's time [s]; default ``index / fps``. index: its number; default the count of steps.
        truth_mask: the true mask (same geometry as ``mask``) when ``truth_masks``.
        Returns the frames this step finished (class doc).
        """
        i = self.frames if index is None else int(index)
        return self.track(self.prepare(frame, mask, i, up=up), up=up, t=t, truth_mask=truth_mask)

    def prepare(self, frame: np.ndarray, mask: Optional[np.ndarray] = None, index: int = 0,
                up: Optional[np.ndarray] = None) -> PreparedFrame:
        """Frame ``index`` undistorted and resized to the tracking size, and its observed mask: ``mask``
        (bool (H, W) at the camera's size) undistorted and resized alike, or, when None, the segmenter's
        on the prepared frame; with ``track_ground``, the ground tracker follows the frame (``up``: its up
        direction (3,), camera frame, or None). Needs nothing of the track: it may run in another thread,
        ahead of :meth:`track` (:class:`~snaketrack.tracker.run.overlap.ReadAhead`), one frame at a time in
        the source's order."""
        i = int(index)
        rgb = self.undistort.frame(frame)
        if mask is None:
            if self.segmenter is None:
                raise InputError(f"frame {i}: no mask given and the session has no segmenter")
            rgb = self.resize.frame(rgb)  # segmented as tracked: undistorted, at the tracking size
            mask = np.asarray(self.segmenter.predict(rgb)) > 0
            if mask.shape != rgb.shape[:2]:
                raise InputError(f"segmenter mask of frame {i}: shape {mask.shape}; expected {rgb.shape[:2]}")
        else:
            mask = self.resize.mask(self.undistort.mask(mask))
            rgb = self.resize.frame(rgb)
        if self.ground is None:
            return PreparedFrame(i, rgb, mask)
        height = self.ground.step(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), up, mask > 0)
        rotation = None
        if self.config.follow_up:
            up = self.ground.up if up is None else up
            rotation = self.ground.rotation.copy()
        return PreparedFrame(i, rgb, mask, True, height, None if up is None else np.array(up, float), rotation)

    def track(self, prepared: PreparedFrame, up: Optional[np.ndarray] = None, t: Optional[float] = None,
              truth_mask: Optional[np.ndarray] = None) -> list[FrameResult]:
        """Track a :meth:`prepare`-d frame (``up``, ``t``, ``truth_mask`` as :meth:`step`); the frames
        finished (class doc). Frames are tracked in the order given."""
        if self.tracker is None:
            self.start()
        i, rgb, mask = prepared.index, prepared.rgb, prepared.mask
        # the benchmarks' corruption stays in the tracker's thread (outside its time): a second thread's numpy
        # work holds the interpreter's lock the tracker's Python waits for (docs/benchmarks.md, "Threads")
        if self.corrupt is not None:
            mask = self.corrupt(mask, i)
        if any(a <= i < b for a, b in self.config.hidden):
            mask = np.zeros_like(mask)
        time_s = i / self.fps if t is None else float(t)
        if not self.started and int(np.count_nonzero(mask)) < self.tracker.config.min_mask_px:
            self.frames += 1  # nothing to start from: the frame is lost, and the next one tries again
            return [self._finish(TrackState.before_start(self.robot.dof, i, time_s),
                                 FrameInput(i, time_s, rgb, mask, None, truth_mask, up))]
        t0 = time.perf_counter()
        kw: dict[str, Any] = {}
        rotation = None
        if self.ground is not None:
            if not prepared.ground:
                raise InputError(f"frame {i}: prepared without following the ground; prepare each frame with the "
                                 "pipeline that tracks it")
            kw["ground"] = prepared.height
            if self.config.follow_up:
                up = prepared.up if up is None else up
                rotation = prepared.rotation
        if up is not None:
            kw["up"] = up
        state = self.tracker.step(mask, t=time_s, **kw) if self.started else \
            self.tracker.start(mask, t=time_s, **kw)
        self.started = True
        if state is None:
            raise InputError(f"frame {i}: the tracker returned no state")
        frame = FrameInput(i, time_s, rgb, mask, kw.get("ground"), truth_mask, up, rotation)
        done = self.hold.push(state, mask, up, payload=frame, ground=frame.ground)
        self.track_time_s += time.perf_counter() - t0
        self.frames += 1
        return [self._finish(s, f) for s, f in done]

    def close(self) -> list[FrameResult]:
        """The frames still held, as tracked (at the end of the input, or when it is interrupted)."""
        if self.tracker is None:
            return []
        return [self._finish(s, f) for s, f in self.hold.flush()]

    # -- figures of the run ----------------------------------------------------------------
    @property
    def search_time_s(self) -> float:
        """Time the first-frame (and re-acquisition) searches took [s], within ``track_time_s``."""
        return float(getattr(self.tracker, "search_time_s", 0.0))

    @property
    def flips(self) -> int:
        """How often the tracker turned the track round (head and tail swapped)."""
        return int(getattr(self.tracker, "flips", 0))

    @property
    def reading_settled(self) -> bool:
        """Whether the tracker has settled which end of the chain is the head (the body wave has shown which
        way the robot crawls, or the reading is not checked); True before the track starts. While False, the
        track may still turn round."""
        return bool(self.tracker.reading_settled) if self.tracker is not None else True

    @property
    def reread_frames(self) -> int:
        """Held frames re-read from the other end when the track turned round."""
        return self.hold.reread_frames if self.tracker is not None else 0

    # -- one finished frame ------------------------------------------------------------------
    def render(self, state) -> np.ndarray:
        """The model's own silhouette (no edge offset) at ``state``, bool (H, W) at the tracking size."""
        if self._renderer is None:
            self._renderer = SilhouetteRenderer(self.robot, self.camera.K, *self.size, device=self.device)
        return self._renderer.mask(state.pose_vector(self._renderer.layout))

    def _finish(self, state, frame: FrameInput) -> FrameResult:
        i, t, rgb, mask, ground = frame.index, frame.t, frame.rgb, frame.mask, frame.ground
        truth_mask, up, rotation = frame.truth_mask, frame.up, frame.rotation
        extra: dict[str, Any] = {"frame": i, "t": t}
        silhouette = self.render(state) if self.config.render and state.has_pose else None
        if silhouette is not None:
            extra["iou_no_offset"] = mask_iou(silhouette, mask > 0) if mask.any() else float("nan")
        else:
            extra["iou_no_offset"] = float("nan")
        if self.config.track_ground:
            extra["camera_height_ratio"] = float("nan") if ground is None else ground
        if self.config.follow_up:
            extra.update(zip(("up_x", "up_y", "up_z"), [float("nan")] * 3 if up is None else map(float, up)))
        if self.truth_masks:
            if truth_mask is not None and not state.has_pose:  # nothing drawn: no overlap with a robot in view
                extra["iou_truth"] = 0.0 if np.any(truth_mask) else float("nan")
            elif truth_mask is None or silhouette is None:
                extra["iou_truth"] = float("nan")
            else:
                extra["iou_truth"] = mask_iou(silhouette, self.resize.mask(self.undistort.mask(truth_mask)))
        return FrameResult(i, t, state, {**state.as_row(), **extra}, rgb, mask, silhouette,
                           None if up is None else np.asarray(up, float).copy(), rotation)

