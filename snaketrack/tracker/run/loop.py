"""Track a recorded video or dataset into an output folder: what ``snaketrack track`` does.

Inputs: a dataset folder (docs/conventions.md: ``frames/``, ``masks/``,
``meta.json``, optionally ``truth.jsonl``), an image folder or a video file,
read by :func:`snaketrack.datasets.video.open_frames`. Masks come from the
dataset (``truth``, the default for datasets), a folder of PNGs named like the
frames (``000000.png`` …), or a trained segmenter (``segmenter:MODEL.pt``).
Intrinsics come from a calibration file (OpenCV YAML/JSON) or the dataset's
``meta.json``. The frames go through one
:class:`~snaketrack.tracker.run.pipeline.TrackingSession`.

Outputs: ``track.csv`` (the columns of docs/conventions.md, plus ``iou_truth`` when the
dataset has truth masks; a row per finished frame), ``quality.csv`` (each
finished frame's skeleton residual, :mod:`snaketrack.tracker.run.quality`),
``overlay.mp4``, ``metrics.json`` (docs/tracking.md, "Outputs": the figures
that need no truth, and with ``truth.jsonl`` those against it),
``summary.json`` and plots; with ``states`` the rows as JSON lines to a file or
standard output, each flushed as it is written. An interrupted run writes the
frames it held as tracked.

``fps`` counts the tracker alone (the first frame's pose search, any later
searches and the reading hold's re-reading included), not reading,
segmentation, rendering or writing; ``fps_excluding_search`` leaves the
searches out (``search_s`` is their time). ``fps_wall`` is the frames over the tracking pass's wall
time: reading, segmenting, tracking and writing, as they overlap (a segmenter reads ahead on a thread of its
own, the writing follows on another). ``iou`` is the tracker's fit
against the observed mask with its fitted edge offset; ``iou_no_offset`` the
model's own silhouette against the observed mask; ``iou_truth`` against the
truth mask.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np
from tqdm import tqdm

from snaketrack.datasets.layout import read_mask
from snaketrack.datasets.video import open_frames
from snaketrack.device import resolve_device
from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.io import read_csv_columns, write_json
from snaketrack.models.robot import source_robot
from snaketrack.tracker.calib.camera import Camera, source_camera
from snaketrack.tracker.calib.gravity import open_up
from snaketrack.tracker.calib.selfcal import CalibrationFrame, estimate_up, refine_focal
from snaketrack.tracker.run.evaluation import plot_tracking, tracking_metrics
from snaketrack.tracker.run.outputs import OverlayVideo, StateStream, TrackWriter, overlay_frame
from snaketrack.tracker.run.overlap import ReadAhead, WriteBehind
from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession
from snaketrack.tracker.run.quality import HEADLINE, QualityWriter, plot_quality, quality_metrics
from snaketrack.training.segmenter import load_segmenter


@dataclass(frozen=True)
class RunOptions:
    """What a run does besides tracking.

    up: the up direction per frame: None/``"none"``, ``"sim-imu"`` (a synthetic dataset), an IMU CSV path, or
        ``"auto"``: the ground plane fitted to the robot's own track over the first ``calibration_frames``
        (:mod:`snaketrack.tracker.calib.selfcal`): a fixed camera's, or with ``track_ground`` a moving camera's
        first frame's, then followed through the ground's homography (``PipelineConfig.follow_up``).
    refine_focal: refine the focal length (fx = fy scaled alike) over the first ``calibration_frames``
        from the robot's known link lengths (:func:`~snaketrack.tracker.calib.selfcal.refine_focal`). Default False.
    calibration_frames: frames of the calibration pass of ``up="auto"`` and ``refine_focal``. Default 60.
    max_frames: stop after this many frames; None: all.
    video: write ``overlay.mp4``. Default True.
    plots: write the plots. Default True.
    progress: show a progress bar. Default True.
    states: also stream each finished row as a JSON line to this file, or ``"-"`` for standard output.
    segmenter_setting: ``live`` (default) or ``accurate``, for ``masks="segmenter:MODEL.pt"``.
    segmenter_flips: the segmenter's test-time flips (1, 2, 4); None: the setting's.
    segmenter_scale: the segmenter's input size over its trained size; None: the model file's.
    """

    up: Optional[str] = None
    max_frames: Optional[int] = None
    video: bool = True
    plots: bool = True
    progress: bool = True
    states: Optional[str] = None
    segmenter_setting: str = "live"
    segmenter_flips: Optional[int] = None
    segmenter_scale: Optional[float] = None
    refine_focal: bool = False
    calibration_frames: int = 60

    def __post_init__(self):
        if self.calibration_frames < 2:
            raise InputError(f"--calibration-frames {self.calibration_frames}; expected at least 2 frames")


def segmenter_file(spec: str) -> Path:
    """The model file of ``--masks segmenter:MODEL.pt``; a :class:`MissingFileError` when there is none."""
    model = Path(spec[len("segmenter:"):])
    if not model.is_file():
        raise MissingFileError(f"--masks {spec}: no such segmenter file {model}")
    return model


def open_segmenter(spec: str, setting: str = "live", flips: Optional[int] = None, device: str = "cpu",
                   scale: Optional[float] = None):
    """The segmenter of ``--masks segmenter:MODEL.pt`` in ``setting`` with ``flips`` (None: the setting's)
    at ``scale`` (None: the model file's) on ``device`` (a resolved torch device name; on a GPU the live
    setting runs the torch network: :func:`~snaketrack.training.segmenter.load_segmenter`)."""
    if scale is not None and not 0.25 <= float(scale) <= 4.0:
        raise InputError(f"--segmenter-scale {scale:g}: expected a factor between 0.25 and 4")
    return load_segmenter(segmenter_file(spec), device=device, setting=setting, flips=flips, scale=scale)


class MaskSource:
    """Each frame's observed mask for a recorded source: ``truth``, ``DIR`` or ``segmenter:MODEL.pt``.

    ``spec`` None means ``truth`` for a dataset. Calling it with a frame index gives the mask, bool (H, W)
    at the source's size, or None when the session's segmenter (``self.segmenter``) predicts it.
    ``segmenter_setting``: ``live`` or ``accurate``, ``segmenter_flips``: its test-time flips, None the
    setting's, ``segmenter_scale``: its input scale, None the model file's, ``device``: where it runs
    (:func:`open_segmenter`).
    """

    def __init__(self, spec: Optional[str], frames, segmenter_setting: str = "live",
                 segmenter_flips: Optional[int] = None, device: str = "cpu",
                 segmenter_scale: Optional[float] = None):
        self.frames, self.segmenter, self.dir = frames, None, None
        if spec is None:
            if not frames.has_masks:
                raise InputError("--masks: a video needs masks from a folder (--masks DIR) or a segmenter "
                                 "(--masks segmenter:MODEL.pt)")
            spec = "truth"
        self.kind = "truth"
        if spec == "truth":
            if not frames.has_masks:
                raise InputError(f"--masks truth: {frames.path} has no masks/ folder; give --masks DIR or "
                                 "--masks segmenter:MODEL.pt")
        elif spec.startswith("segmenter:"):
            self.kind, self.segmenter = "segmenter", open_segmenter(spec, segmenter_setting, segmenter_flips,
                                                                    device, segmenter_scale)
        else:
            d = Path(spec)
            if not d.is_dir():
                raise MissingFileError(f"--masks {spec}: no such folder; expected truth, DIR or segmenter:MODEL.pt")
            self.kind, self.dir = "dir", d

    def __call__(self, i: int) -> Optional[np.ndarray]:
        if self.kind == "segmenter":
            return None
        if self.kind == "truth":
            m = self.frames.mask(i)
            if m is None:
                raise MissingFileError(f"{self.frames.path}/masks: no mask for frame {i}")
        else:
            m = read_mask(self.dir / f"{self.frames.name(i)}.png")
        if m.shape != (self.frames.height, self.frames.width):
            raise InputError(f"mask of frame {i}: shape {m.shape}; expected ({self.frames.height}, "
                             f"{self.frames.width}) like the frames")
        return m


def open_session(source: str | os.PathLike, robot: Optional[str] = None, intrinsics=None,
                 masks: Optional[str] = None, config: PipelineConfig = PipelineConfig(),
                 segmenter_setting: str = "live", segmenter_flips: Optional[int] = None,
                 segmenter_scale: Optional[float] = None):
    """Open a recorded source for tracking: ``(frames, session, mask_source)``.

    ``robot``: a shipped name or YAML file; default the dataset's ``meta.json`` robot.
    ``intrinsics``: a calibration file or a :class:`~snaketrack.tracker.calib.camera.FieldOfView`; default the
    dataset's ``meta.json`` K.
    ``masks``: ``truth`` (default for datasets), a folder of PNGs or ``segmenter:MODEL.pt``, run in
    ``segmenter_setting`` (``live`` or ``accurate``) with ``segmenter_flips`` (None: the setting's) at
    ``segmenter_scale`` (None: the model file's), on ``config.device`` like the tracker.
    """
    frames = open_frames(source)
    robot = source_robot(robot, frames.meta)
    camera = source_camera(frames.meta, frames.width, frames.height, intrinsics, str(source))
    truth = frames.truth
    if truth is not None and len(truth[0].get("joint_angles", [])) != robot.dof:
        raise InputError(f"--robot {robot.name}: {robot.dof} joint angles, but {source}/truth.jsonl has "
                         f"{len(truth[0].get('joint_angles', []))}; expected the dataset's robot")
    device = resolve_device(config.device)
    mask_source = MaskSource(masks, frames, segmenter_setting, segmenter_flips, device, segmenter_scale)
    session = TrackingSession(robot, camera, frames.fps, config, segmenter=mask_source.segmenter,
                              truth_masks=frames.has_masks, device=device)
    return frames, session, mask_source


def open_up_source(frames, up: Optional[str], config: PipelineConfig = PipelineConfig()):
    """The up direction per frame of ``frames`` (``--up``: :func:`~snaketrack.tracker.calib.gravity.open_up`),
    or None; :class:`InputError` when ``config`` holds the robot to the ground and there is none."""
    up_source = open_up(up, frames.truth, int(frames.meta.get("seed", 0) or 0))
    if config.needs_up and up_source is None:
        flag = "--static-camera" if config.static_camera else "--track-ground"
        raise InputError(f"{flag} holds the robot to the ground, which needs its up direction: "
                         "give --up IMU.csv, --up auto or sim-imu for a synthetic dataset")
    return up_source


def constant_up(up) -> "Callable[[int], np.ndarray]":
    """An up source giving ``up`` (3,) [unit vector, camera frame] for every frame."""
    u = np.asarray(up, float) / np.linalg.norm(up)
    return lambda frame: u.copy()


def first_frame_up(up, first: int = 0) -> "Callable[[int], Optional[np.ndarray]]":
    """An up source giving ``up`` (3,) [unit vector, camera frame] for frame ``first`` only (the session
    follows it from there: ``PipelineConfig.follow_up``)."""
    u = np.asarray(up, float) / np.linalg.norm(up)
    return lambda frame: u.copy() if frame == first else None


class MaskMemo:
    """A segmenter whose masks are kept, keyed by the frame's bytes, so that the calibration passes, which
    track the same first frames several times, segment each frame once. ``predict(rgb)`` as the wrapped
    segmenter's; at most ``limit`` masks are kept (the oldest dropped)."""

    def __init__(self, segmenter, limit: int):
        self.segmenter, self.limit = segmenter, max(1, int(limit))
        self.masks: dict[bytes, np.ndarray] = {}
        self.hits = 0

    def predict(self, rgb: np.ndarray) -> np.ndarray:
        a = np.ascontiguousarray(rgb)
        key = hashlib.blake2b(a.tobytes(), digest_size=16).digest() + repr(a.shape).encode()
        if key in self.masks:
            self.hits += 1
            return self.masks[key]
        mask = np.asarray(self.segmenter.predict(rgb))
        if len(self.masks) >= self.limit:
            self.masks.pop(next(iter(self.masks)))
        self.masks[key] = mask
        return mask


def calibration_pass(frames, session, mask_source, up_source, n: int) -> list[CalibrationFrame]:
    """Track the first ``n`` frames of ``frames`` through ``session`` (a
    :class:`~snaketrack.tracker.run.pipeline.TrackingSession`, started here and closed) and keep the tracked
    ones (:class:`~snaketrack.tracker.calib.selfcal.CalibrationFrame`, in order). ``mask_source``, ``up_source``: as
    :func:`step_frames` takes them."""
    out: list[CalibrationFrame] = []

    def keep(results) -> None:
        for r in results:
            if r.state.status == "tracked" and r.mask.any():
                up = r.up if r.up is not None else (up_source(r.index) if up_source is not None else None)
                out.append(CalibrationFrame(r.index, r.mask, r.state.pose_vector(layout), up, float(r.state.iou),
                                            r.rotation, r.row.get("camera_height_ratio")))

    session.start()
    layout = session.tracker.layout
    try:
        for results in step_frames(frames, session, mask_source, up_source, stop=n):
            keep(results)
    finally:
        keep(session.close())
    return out


def self_calibrate(frames, session: TrackingSession, mask_source: "MaskSource", options: RunOptions,
                   config: PipelineConfig = PipelineConfig(), log: Optional[Callable[[str], None]] = None):
    """The session and up source of a run, after the calibration pass of ``--up auto`` and
    ``--refine-focal`` (:mod:`snaketrack.tracker.calib.selfcal`) when asked for: ``(session, up_source, report)``.

    The pass tracks the first ``options.calibration_frames`` frames with the given up direction (none
    for ``auto``) and no ground prior; ``--refine-focal`` then picks the focal length (the session is
    rebuilt with it unless the objective is flat, which is warned of), and ``--up auto`` fits the ground
    plane to the links of passes at that focal length (:func:`~snaketrack.tracker.calib.selfcal.estimate_up`).
    On a moving camera (``config.track_ground``) the passes and the run are given the first frame's up
    direction only and follow it over the ground (``PipelineConfig.follow_up``). ``report``: what was
    found (``focal``, ``up_auto``: :meth:`FocalFit.as_dict`, :meth:`PlaneFit.as_dict`), None without
    calibration. ``log``: called with progress lines.
    """
    auto = options.up == "auto"
    if not auto and not options.refine_focal:
        return session, open_up_source(frames, options.up, config), None
    given = None if auto else open_up_source(frames, options.up, config)
    n = options.calibration_frames
    camera = session.undistort.camera
    say = log or (lambda line: None)
    last: dict[str, Any] = {}

    moving = auto and config.track_ground
    if moving:
        config = replace(config, follow_up=True)
    segmenter = None if session.segmenter is None else MaskMemo(session.segmenter, n)

    def run_pass(up, frames_n: int = n):
        """The first ``frames_n`` frames tracked with the up source ``up`` (a callable, or None)."""
        if moving:
            c = replace(config, track_ground=up is not None, follow_up=up is not None, render=False)
        else:
            c = replace(config, static_camera=up is not None, track_ground=False, render=False)
        s = TrackingSession(session.robot, camera, session.fps, c, segmenter=segmenter, device=session.device)
        calib = calibration_pass(frames, s, mask_source, up, frames_n)
        last.update(session=s, calib=calib)
        return calib, s.tracker.layout

    def fitted_up(up):
        """The up source of a fitted up direction (3,): every frame's (fixed camera), or the first's."""
        if up is None:
            return None
        return first_frame_up(up) if moving else constant_up(up)

    def up_pass(up, short: bool):
        return run_pass(fitted_up(up), max(2, n // 2) if short else n)

    report: dict[str, Any] = {"calibration_frames": n}
    plane = None
    if auto:
        plane, _ = estimate_up(up_pass, session.robot, log=say)
    else:
        run_pass(given)
    if options.refine_focal:
        fit = refine_focal(session.robot, last["session"].camera, last["calib"], last["session"].tracker.config,
                           log=say)
        report["focal"] = fit.as_dict()
        if fit.flat:
            warnings.warn(f"--refine-focal: the fit does not fix the focal length (best {fit.focal_px:.1f} px "
                          f"± {100 * fit.se_rel:.0f} %); the view shows too little depth along the robot, "
                          f"keeping {fit.start_px:.1f} px", stacklevel=2)
        else:
            scale = fit.focal_px / fit.start_px
            K = camera.K.copy()
            K[0, 0] *= scale
            K[1, 1] *= scale
            camera = Camera.from_K(K, camera.width, camera.height, camera.dist)
            say(f"focal length {fit.start_px:.1f} -> {fit.focal_px:.1f} px (± {100 * fit.se_rel:.1f} %)")
            if auto and plane is not None:  # the plane again at the new focal length, from the last one
                plane, _ = estimate_up(up_pass, session.robot, up0=plane.up, log=say)
        report["K"] = camera.K.tolist()
    up_source = given
    if auto:
        if plane is None:
            raise InputError(f"--up auto: the robot's track over the first {n} frames spans no area of the ground "
                             "(too few frames tracked, or the body lay straight and still); give more "
                             "--calibration-frames or an IMU log")
        report["up_auto"] = {**plane.as_dict(), "followed": moving}
        say(f"up direction {np.round(plane.up, 4).tolist()} (± {report['up_auto']['tilt_sd_deg']:.2f}°)"
            + (" in the first frame, followed over the ground" if moving else ""))
        up_source = fitted_up(plane.up)
        if config.needs_up:  # hold the robot to the whole plane: its height too
            config = replace(config, ground_height=plane.height)
    if camera is not session.undistort.camera or auto:
        session = TrackingSession(session.robot, camera, session.fps, config, segmenter=session.segmenter,
                                  truth_masks=session.truth_masks, device=session.device)
    return session, up_source, report


def prepared_frames(frames, session: TrackingSession, mask_source: "MaskSource", up_source=None,
                    start: int = 0, stop: Optional[int] = None) -> Iterator[tuple]:
    """Frames ``[start, stop)`` of ``frames`` (``stop`` None: to the end) read and prepared for ``session``
    (:meth:`~snaketrack.tracker.run.pipeline.TrackingSession.prepare`: undistorted, resized, segmented):
    ``(prepared, up, truth_mask)`` each, the up direction and (when the session scores against truth)
    the truth mask beside it."""
    for i, rgb in frames.frames(start=start):
        if stop is not None and i >= stop:
            return
        up = up_source(i) if up_source is not None else None
        mask = mask_source(i)
        truth = None
        if session.truth_masks:  # the observed mask when it is the truth: read once
            truth = mask if mask_source.kind == "truth" else frames.mask(i)
        yield session.prepare(rgb, mask, i, up=up), up, truth


def step_frames(frames, session: TrackingSession, mask_source: "MaskSource", up_source=None,
                start: int = 0, stop: Optional[int] = None, ahead: bool = True) -> Iterator[list]:
    """Step the started ``session`` through frames ``[start, stop)`` of ``frames`` (``stop`` None: to the
    end), each with its mask, up direction and (when the session scores against truth) truth mask;
    yields each step's finished :class:`~snaketrack.tracker.run.pipeline.FrameResult` list. Neither starts
    nor closes the session. ``ahead``: the next frame is read and segmented in a thread of its own while
    this one is tracked (:class:`~snaketrack.tracker.run.overlap.ReadAhead`)."""
    items = prepared_frames(frames, session, mask_source, up_source, start, stop)
    if not ahead:
        for prepared, up, truth in items:
            yield session.track(prepared, up=up, truth_mask=truth)
        return
    with ReadAhead(items) as reader:
        for prepared, up, truth in reader:
            yield session.track(prepared, up=up, truth_mask=truth)


def track_source(source: str | os.PathLike, out: str | os.PathLike, robot: Optional[str] = None,
                 intrinsics=None, masks: Optional[str] = None,
                 config: PipelineConfig = PipelineConfig(), options: RunOptions = RunOptions()) -> dict:
    """Track ``source`` into the folder ``out`` (module doc); returns the summary (with ``metrics.json``'s
    figures when the source has truth, and its headline figures without truth)."""
    out = Path(out)
    frames, session, mask_source = open_session(source, robot, intrinsics, masks, config, options.segmenter_setting,
                                                options.segmenter_flips, options.segmenter_scale)
    log = (lambda line: print(line, file=sys.stderr)) if options.progress else None
    t0 = time.perf_counter()
    session, up_source, calibration = self_calibrate(frames, session, mask_source, options, config, log)
    if calibration is not None:  # a one-time cost before the first frame, outside fps
        calibration["seconds"] = time.perf_counter() - t0
    robot_model = session.robot
    n_total = len(frames) or None
    if options.max_frames is not None:
        if options.max_frames < 1:
            raise InputError(f"--max-frames {options.max_frames}; expected a positive number of frames")
        n_total = min(n_total, options.max_frames) if n_total else options.max_frames
    stream = StateStream(options.states) if options.states else None  # a bad target fails before any output
    out.mkdir(parents=True, exist_ok=True)
    writer = TrackWriter(out / "track.csv", robot_model.dof, session.extra_columns)
    quality = QualityWriter(out / "quality.csv", robot_model, session.camera.K)
    width, height = session.size
    video = OverlayVideo(out / "overlay.mp4", frames.fps, width, height) if options.video else None

    bar = tqdm(total=n_total, desc="track", unit="frame", mininterval=0.5, disable=not options.progress)

    def emit(results) -> None:
        for r in results:
            writer.write(r.row)
            quality.write(r)
            if stream is not None:
                stream.write(r.row)
            if video is not None:
                video.write(overlay_frame(r, robot_model, session.camera.K))

    n = 0
    session.start()
    wall0 = time.perf_counter()
    behind = WriteBehind(emit)  # rows, overlay drawing and encoding off the tracker's thread, in order
    try:
        try:
            for results in step_frames(frames, session, mask_source, up_source):
                behind.put(results)
                n += 1
                bar.update(1)
                if n_total is not None and n >= n_total:
                    break
        finally:  # the frames still held are written as tracked (interrupted or at the end)
            try:
                behind.put(session.close())
            finally:
                behind.close()
    finally:
        bar.close()
        writer.close()
        quality.close()
        if stream is not None:
            stream.close()
        if video is not None:
            video.close()
    if n == 0:
        raise FileFormatError(f"{source}: no frames were read")
    return _summarise(out, source, session, frames, n, masks, config, options, calibration,
                      wall_s=time.perf_counter() - wall0)


def _summarise(out: Path, source, session: TrackingSession, frames, n: int, masks: Optional[str],
               config: PipelineConfig, options: RunOptions, calibration: Optional[dict] = None,
               wall_s: float = float("nan")) -> dict:
    """``summary.json``, ``metrics.json`` and plots of a finished run; ``wall_s``: the tracking pass's wall
    time [s] (reading, segmenting, tracking and writing as they overlap)."""
    robot = session.robot
    track_time, search_s = session.track_time_s, session.search_time_s
    fps = n / track_time if track_time > 0 else float("nan")
    fps_tracking = n / (track_time - search_s) if track_time - search_s > 0 else float("nan")
    track = read_csv_columns(out / "track.csv")
    per_frame = read_csv_columns(out / "quality.csv")
    quality = quality_metrics(track, robot.dof, frames.fps, per_frame)
    summary: dict[str, Any] = {"source": str(source), "robot": robot.name, "frames": n, "fps": fps,
                               "fps_excluding_search": fps_tracking, "search_s": search_s,
                               "fps_wall": n / wall_s if wall_s > 0 else float("nan"),
                               "masks": masks or "truth", "corrupt_masks": bool(config.corrupt_masks),
                               "refine_steps": config.refine_steps, "up": options.up or "none",
                               "static_camera": bool(config.static_camera),
                               "track_ground": bool(config.track_ground),
                               "track_size": list(session.size), "device": session.device,
                               "flips": session.flips, "reread_frames": session.reread_frames}
    if calibration is not None:
        summary["calibration"] = calibration
    truth = frames.truth
    if truth is not None:
        metrics = tracking_metrics(track, truth, robot.dof, fps=fps)
        ino = np.asarray(track["iou_no_offset"], float)
        metrics.update(fps_excluding_search=fps_tracking, search_s=search_s,
                       iou_no_offset=float(np.nanmean(ino)) if np.isfinite(ino).any() else float("nan"))
        for k, v in quality.items():  # the truth-free figures beside them (frames, frames_lost: the same)
            metrics.setdefault(k, v)
        write_json(out / "metrics.json", metrics)
        summary.update(metrics)
    else:
        write_json(out / "metrics.json", quality)
        iou = np.asarray(track["iou"], float)
        summary.update(iou=float(np.nanmean(iou)) if np.isfinite(iou).any() else float("nan"),
                       **{k: quality[k] for k in HEADLINE})
    if options.plots:
        plot_tracking(track, truth, robot.dof, out, frames.fps, robot.joint_names)
        plot_quality(track, robot.dof, out, frames.fps, per_frame, robot.joint_names)
    write_json(out / "summary.json", summary)
    return summary
