"""``snaketrack track``: track a robot through a dataset or a video.

::

    snaketrack track DATASET|VIDEO --robot NAME|FILE [--intrinsics FILE]
        [--masks truth|DIR|segmenter:MODEL.pt] [--refine-steps 10]
        [--corrupt-masks] [--max-frames N] [--hold-frames 60] [--track-size WxH] [--states FILE|-] --out DIR

Inputs: a dataset folder (DESIGN.md layout: ``frames/``, ``masks/``,
``meta.json``, optionally ``truth.jsonl``) or a video file read with
OpenCV. Masks come from the dataset (``truth``, the default for datasets),
a folder of PNGs named like the frames (``000000.png`` …), or a trained
segmenter (``segmenter:MODEL.pt``, loaded with
:func:`snaketrack.training.segmenter.load_segmenter`). Intrinsics come from
``--intrinsics`` (OpenCV YAML/JSON) or the dataset's ``meta.json``; frames
and masks are undistorted when the calibration has distortion, then resized
to ``--track-size`` when one is given (K scaled with them).

Outputs in ``--out``: ``track.csv`` (DESIGN.md columns, plus ``iou_truth``
when the dataset has truth masks; a row per finished frame), ``overlay.mp4``,
``summary.json``; with ``truth.jsonl`` also ``metrics.json`` (DESIGN.md
names) and ``joint_angles.png`` / ``base_position.png``; with ``--states`` the
rows as JSON lines to a file or standard output, each flushed as it is written.

``fps`` counts the tracker alone (``start``/``step``, the first frame's pose
search and any later searches included), not reading, segmentation,
rendering the overlay or writing; ``fps_excluding_search`` leaves the
searches out (``search_s`` is their time). ``iou`` is the tracker's fit
against the observed mask *with* its fitted edge offset ``b`` (the model
silhouette dilated/eroded by ``b`` px, absorbing the mask's boundary bias);
``iou_no_offset`` is the model's own silhouette (``b = 0``) against the
observed mask; ``iou_truth`` the model's own silhouette against the truth mask.

Rows are written as frames finish, except the first ones: up to
``--hold-frames`` (60) are held until the body wave has shown which end is
the head (``wave_window``, 20 tracked frames, for a robot crawling forward),
and re-read from the other end if the tracker turns the track round then
(:class:`snaketrack.tracker.reading.ReadingHold`), so a first frame read
backwards does not leave a second of rows a body length off. The re-reading
counts as search time. An interrupted run writes what it held as tracked.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from snaketrack.commands import Command
from snaketrack.errors import FileFormatError, InputError, MissingFileError

VIDEO_EXTS = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".webm", ".mpg", ".mpeg")


# -- frame sources -----------------------------------------------------------------------
class DatasetFrames:
    """Frames, truth masks and truth of a dataset folder."""

    def __init__(self, root: Path):
        from snaketrack.datasets.layout import Dataset

        self.ds = Dataset(root)
        self.root = Path(root)
        self.fps = self.ds.fps
        self.meta = self.ds.meta
        self.truth = self.ds.truth
        self.n = len(self.ds)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        for i in range(self.n):
            yield i, self.ds.frame(i)

    def name(self, i: int) -> str:
        return self.ds.frame_path(i).stem

    def truth_mask(self, i: int) -> Optional[np.ndarray]:
        return self.ds.mask(i) if self.ds.has_masks else None

    def size(self) -> tuple[int, int]:
        return self.ds.width, self.ds.height


class VideoFrames:
    """Frames of a video file, read with OpenCV (RGB uint8)."""

    def __init__(self, path: Path):
        import cv2

        self.path = Path(path)
        if not self.path.is_file():
            raise MissingFileError(f"{self.path}: no such video file")
        cap = cv2.VideoCapture(str(self.path))
        ok, first = cap.read() if cap.isOpened() else (False, None)
        if not ok or first is None:
            cap.release()
            raise FileFormatError(f"{self.path}: not a readable video (OpenCV could not decode a frame)")
        self.fps = float(cap.get(cv2.CAP_PROP_FPS)) or 30.0
        self.n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) or 0
        self._h, self._w = first.shape[:2]
        cap.release()
        self.meta: dict = {}
        self.truth = None

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        import cv2

        cap = cv2.VideoCapture(str(self.path))
        i = 0
        try:
            while True:
                ok, bgr = cap.read()
                if not ok:
                    break
                yield i, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
                i += 1
        finally:
            cap.release()
        if i == 0:
            raise FileFormatError(f"{self.path}: not a readable video (no frames decoded)")

    def name(self, i: int) -> str:
        return f"{i:06d}"

    def truth_mask(self, i: int) -> None:
        return None

    def size(self) -> tuple[int, int]:
        return self._w, self._h


def open_source(source: str | os.PathLike):
    p = Path(source)
    if p.is_dir():
        return DatasetFrames(p)
    if not p.exists():
        raise MissingFileError(f"{p}: no such dataset folder or video file")
    return VideoFrames(p)


# -- mask sources --------------------------------------------------------------------------
class MaskSource:
    """Where each frame's observed mask comes from (``--masks``)."""

    def __init__(self, spec: Optional[str], frames, size: tuple[int, int]):
        self.frames, self.size = frames, size
        self.kind, self.dir, self.segmenter = "truth", None, None
        is_dataset = isinstance(frames, DatasetFrames)
        if spec is None:
            if not is_dataset:
                raise InputError("--masks: a video needs masks from a folder (--masks DIR) or a segmenter "
                                 "(--masks segmenter:MODEL.pt)")
            spec = "truth"
        if spec == "truth":
            if not is_dataset or not frames.ds.has_masks:
                raise InputError(f"--masks truth: {getattr(frames, 'root', getattr(frames, 'path', '?'))} has no "
                                 "masks/ folder; give --masks DIR or --masks segmenter:MODEL.pt")
        elif spec.startswith("segmenter:"):
            model = Path(spec[len("segmenter:"):])
            if not model.is_file():
                raise MissingFileError(f"--masks {spec}: no such segmenter file {model}")
            try:
                from snaketrack.training.segmenter import load_segmenter
            except ImportError as e:
                raise InputError(f"--masks {spec}: the segmenter module is not available ({e})") from None
            self.kind, self.segmenter = "segmenter", load_segmenter(model)
        else:
            d = Path(spec)
            if not d.is_dir():
                raise MissingFileError(f"--masks {spec}: no such folder; expected truth, DIR or segmenter:MODEL.pt")
            self.kind, self.dir = "dir", d

    def __call__(self, i: int, rgb: np.ndarray) -> np.ndarray:
        """Frame ``i``'s mask, bool: the dataset's or the folder's (the source's size), or the segmenter's
        prediction on ``rgb`` (the frame as the tracker sees it, undistorted and resized: its size)."""
        w, h = self.size if self.kind != "segmenter" else (rgb.shape[1], rgb.shape[0])
        if self.kind == "truth":
            m = self.frames.truth_mask(i)
            if m is None:
                raise MissingFileError(f"{self.frames.root}/masks: no mask for frame {i}")
        elif self.kind == "segmenter":
            m = np.asarray(self.segmenter.predict(rgb)) > 0
        else:
            from snaketrack.datasets.layout import read_mask

            m = read_mask(self.dir / f"{self.frames.name(i)}.png")
        if m.shape != (h, w):
            raise InputError(f"mask of frame {i}: shape {m.shape}; expected ({h}, {w}) like the frames")
        return m


# -- the run ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrackOptions:
    """What ``snaketrack track`` does besides tracking (its flags, as a record).

    refine_steps: refinement iterations per frame (None: the tracker's default).
    corrupt_masks / corrupt_seed: apply :class:`snaketrack.tracker.corrupt.MaskCorruptor`.
    max_frames: stop after this many frames (None: all).
    video: write ``overlay.mp4``. plots: write the plots when truth exists.
    hide: frame ranges [start, stop) whose observed masks are emptied (the
        robot is hidden; used by the benchmark's re-acquisition test).
    progress: show a tqdm bar.
    up: the world's up direction per frame (:mod:`snaketrack.tracker.gravity`):
        None/``"none"``, ``"sim-imu"`` (datasets with truth) or an IMU CSV path.
    static_camera: the camera does not move relative to the ground (a tripod):
        the tracker holds the base's height along up to the median of its track
        (``TrackerConfig.ground_window`` = −1); needs ``up``.
    track_ground: the camera moves (handheld, drone): follow its height over
        the ground plane through the frames (:class:`snaketrack.tracker.ground.GroundTracker`,
        the ground's homography) and hold the base to the ground at that
        height; needs ``up``; not with ``static_camera``.
    hold_frames: hold up to this many first frames until the body wave has
        settled which end is the head, and re-read them if the track is turned
        round (:class:`snaketrack.tracker.reading.ReadingHold`); 0 writes every
        frame as it finishes.
    silhouette: the silhouette model, ``TrackerConfig.model``.
    track_size: (width, height) [px] to track at: frames and masks are resized
        after undistortion (a frame by area interpolation when shrinking,
        linear when enlarging; a mask keeps the pixels at least half covered) and K with them (:meth:`Camera.resized`); the mask
        corruption applies at this size, and ``overlay.mp4`` is drawn at it.
        None: the source's own size. The paper tracks at 640×360.
    states: also write each finished frame's row as a JSON line, flushed at
        once, to this file or ``"-"`` (standard output): a controller can read
        the states as they come (:class:`snaketrack.tracker.outputs.StateStream`).
    """

    refine_steps: Optional[int] = None
    corrupt_masks: bool = False
    corrupt_seed: int = 0
    max_frames: Optional[int] = None
    video: bool = True
    plots: bool = True
    hide: tuple[tuple[int, int], ...] = ()
    progress: bool = True
    up: Optional[str] = None
    static_camera: bool = False
    track_ground: bool = False
    hold_frames: int = 60
    silhouette: str = "visual"
    track_size: Optional[tuple[int, int]] = None
    states: Optional[str] = None


def parse_size(text: str) -> tuple[int, int]:
    """``"640x360"`` → (640, 360); a one-line :class:`InputError` for anything else."""
    try:
        w, h = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise InputError(f"size {text!r}; expected WIDTHxHEIGHT in pixels, e.g. 640x360") from None
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise InputError(f"size {text!r}; expected 16..8192 px on each side")
    return w, h


class _Resize:
    """Frames and masks to the tracking size (identity when it is the source's)."""

    def __init__(self, size: tuple[int, int], source_size: tuple[int, int]):
        self.size, self.active = tuple(size), tuple(size) != tuple(source_size)

    def frame(self, image: np.ndarray) -> np.ndarray:
        from snaketrack.training.data import resize_to  # area filter when shrinking, linear when enlarging

        return resize_to(image, self.size[::-1]) if self.active else image

    def mask(self, mask: np.ndarray) -> np.ndarray:
        import cv2

        if not self.active:
            return mask
        m = cv2.resize(np.asarray(mask, dtype=np.uint8) * 255, self.size, interpolation=cv2.INTER_AREA)
        return m >= 128


#: A moving camera's ground prior starts once this many frames are tracked: the camera height it holds
#: comes from the track itself, and five frames locked in drone-arcsnake-s0's early depth bias (base
#: 0.028 m against 0.020 with 30; docs/notebook/tracker.md, "The camera's height over the ground").
MOVING_GROUND_MIN_FRAMES = 30


def make_tracker(robot, camera, fps: float, refine_steps: Optional[int] = None, static_camera: bool = False,
                 track_ground: bool = False, silhouette: str = "visual"):
    """The tracker session of :mod:`snaketrack.tracker.tracker` for this camera and frame rate;
    ``static_camera``: hold the base to the ground's height (``TrackerConfig.ground_window`` −1);
    ``track_ground``: the same for a moving camera whose height ratio is passed per frame;
    ``silhouette``: ``TrackerConfig.model``."""
    from dataclasses import replace

    from snaketrack.tracker.tracker import Tracker, TrackerConfig

    config = TrackerConfig(model=silhouette)
    if refine_steps is not None:
        config = replace(config, refine=replace(config.refine, steps=int(refine_steps)))
    if static_camera:
        config = replace(config, ground_window=-1)
    if track_ground:
        config = replace(config, ground_window=-1, ground_min_frames=MOVING_GROUND_MIN_FRAMES)
    return Tracker(robot, camera.K, camera.width, camera.height, fps=fps, config=config)


def run_tracking(source: str | os.PathLike, robot_spec: Optional[str], out: str | os.PathLike,
                 intrinsics: Optional[str] = None, masks: Optional[str] = None,
                 options: TrackOptions = TrackOptions()) -> dict:
    """Track ``source`` into ``out`` (module doc); returns the summary dict (``metrics.json`` figures when truth exists)."""
    from snaketrack.models.robot import source_robot
    from snaketrack.tracker.camera import Undistorter, source_camera
    from snaketrack.tracker.corrupt import MaskCorruptor
    from snaketrack.tracker.outputs import (
        OverlayVideo, StateStream, TrackWriter, draw_overlay, link_axes_cam, mask_iou, plot_tracking, project_points,
        tracking_metrics,
    )
    import torch

    from snaketrack.tracker.reading import ReadingHold
    from snaketrack.tracker.render import SilhouetteRenderer
    from snaketrack.io import read_csv_columns, write_json

    out = Path(out)
    frames = open_source(source)
    width, height = frames.size()
    robot = source_robot(robot_spec, frames.meta)
    camera = source_camera(frames.meta, width, height, intrinsics, str(source))
    truth = frames.truth
    if truth is not None and len(truth[0].get("joint_angles", [])) != robot.dof:
        raise InputError(f"--robot {robot.name}: {robot.dof} joint angles, but {source}/truth.jsonl has "
                         f"{len(truth[0].get('joint_angles', []))}; expected the dataset's robot")
    mask_source = MaskSource(masks, frames, (width, height))
    undistort = Undistorter(camera)
    cam = undistort.output_camera
    resize = _Resize(options.track_size or (width, height), (width, height))
    if resize.active:
        cam = cam.resized(*resize.size)
        width, height = resize.size
    corrupt = MaskCorruptor(options.corrupt_seed) if options.corrupt_masks else None
    from snaketrack.tracker.gravity import open_up

    up_source = open_up(options.up, truth, int(frames.meta.get("seed", 0) or 0))
    for flag, on in (("--static-camera", options.static_camera), ("--track-ground", options.track_ground)):
        if on and up_source is None:
            raise InputError(f"{flag} holds the robot to the ground, which needs its up direction: "
                             "give --up IMU.csv (or sim-imu for a synthetic dataset)")
    if options.static_camera and options.track_ground:
        raise InputError("--static-camera and --track-ground: choose one (a fixed camera, or one that moves)")
    tracker = make_tracker(robot, cam, frames.fps, options.refine_steps, static_camera=options.static_camera,
                           track_ground=options.track_ground, silhouette=options.silhouette)
    ground = None
    if options.track_ground:
        import cv2

        from snaketrack.tracker.ground import GroundTracker

        ground = GroundTracker(cam.K)
    renderer = SilhouetteRenderer(robot, cam.K, width, height)
    layout = renderer.layout
    has_truth_masks = isinstance(frames, DatasetFrames) and frames.ds.has_masks

    n_total = len(frames) if len(frames) else None
    if options.max_frames is not None:
        if options.max_frames < 1:
            raise InputError(f"--max-frames {options.max_frames}; expected a positive number of frames")
        n_total = min(n_total, options.max_frames) if n_total else options.max_frames
    stream = StateStream(options.states) if options.states else None  # a bad target fails before any output
    out.mkdir(parents=True, exist_ok=True)
    extra = (["iou_truth"] if has_truth_masks else []) + ["iou_no_offset"] + \
        (["camera_height_ratio"] if options.track_ground else [])
    writer = TrackWriter(out / "track.csv", robot.dof, extra)
    video = OverlayVideo(out / "overlay.mp4", frames.fps, width, height) if options.video else None
    it = iter(frames)
    bar = None
    if options.progress:
        from tqdm import tqdm

        bar = tqdm(total=n_total, desc="track", unit="frame", mininterval=0.5)
    track_time = 0.0
    n = 0
    hide = options.hide
    hold = ReadingHold(tracker, options.hold_frames)

    def emit(state, i: int, rgb: np.ndarray, mask: np.ndarray, ground_ratio: Optional[float] = None) -> None:
        """Write one finished frame: its track.csv row and overlay frame."""
        row_extra: dict[str, Any] = {"frame": i, "t": i / frames.fps}  # the source's numbering
        # the model's own silhouette (no edge offset): iou_no_offset, iou_truth, overlay
        x = state.pose_vector(layout)
        with torch.no_grad():
            rendered = renderer.full_image(torch.as_tensor(x, dtype=torch.float64)[None])[0].numpy() > 0.5
        row_extra["iou_no_offset"] = mask_iou(rendered, mask > 0) if mask.any() else float("nan")
        if options.track_ground:
            row_extra["camera_height_ratio"] = float("nan") if ground_ratio is None else ground_ratio
        if has_truth_masks:
            tm = resize.mask(undistort.mask(frames.truth_mask(i)))
            row_extra["iou_truth"] = mask_iou(rendered, tm)
        row = {**state.as_row(), **row_extra}
        writer.write(row)
        if stream is not None:
            stream.write(row)
        if video is not None:
            starts, ends, head = link_axes_cam(robot, state.q, state.base_rotation, state.base_position)
            axes = project_points(cam.K, np.stack([starts, ends], axis=1))
            text = f"frame {i}  {state.status}  IoU {state.iou:.2f}" if np.isfinite(state.iou) else \
                f"frame {i}  {state.status}"
            video.write(draw_overlay(rgb, mask, axes, project_points(cam.K, head), rendered, text, state.status))

    try:
        try:
            for i, rgb in it:
                if n_total is not None and n >= n_total:
                    break
                rgb = undistort.frame(rgb)
                if mask_source.kind == "segmenter":  # segmented from the undistorted frame at the tracking size
                    rgb = resize.frame(rgb)
                    mask = mask_source(i, rgb)
                else:  # masks in the source's own geometry
                    mask = resize.mask(undistort.mask(mask_source(i, rgb)))
                    rgb = resize.frame(rgb)
                if corrupt is not None:
                    mask = corrupt(mask, i)
                if any(a <= i < b for a, b in hide):
                    mask = np.zeros_like(mask)
                t0 = time.perf_counter()
                kw = {"up": up_source(i)} if up_source is not None else {}
                if ground is not None:
                    kw["ground"] = ground.step(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), kw["up"], mask > 0)
                state = tracker.start(mask, **kw) if n == 0 else tracker.step(mask, **kw)
                if n == 0 and state is None:  # a start() that does not report a state
                    raise InputError("tracker.start returned no state")
                done = hold.push(state, mask, kw.get("up"), payload=(i, rgb, mask, kw.get("ground")),
                                 ground=kw.get("ground"))
                track_time += time.perf_counter() - t0
                for st, payload in done:
                    emit(st, *payload)
                n += 1
                if bar is not None:
                    bar.update(1)
        finally:  # the frames still held are written as tracked (interrupted or at the end)
            for st, payload in hold.flush():
                emit(st, *payload)
    finally:
        if bar is not None:
            bar.close()
        writer.close()
        if stream is not None:
            stream.close()
        if video is not None:
            video.close()
    if n == 0:
        raise FileFormatError(f"{source}: no frames were read")
    fps = n / track_time if track_time > 0 else float("nan")
    search_s = float(getattr(tracker, "search_time_s", 0.0))
    fps_tracking = n / (track_time - search_s) if track_time - search_s > 0 else float("nan")
    track = read_csv_columns(out / "track.csv")
    summary: dict[str, Any] = {"source": str(source), "robot": robot.name, "frames": n, "fps": fps,
                               "fps_excluding_search": fps_tracking, "search_s": search_s,
                               "masks": masks or "truth", "corrupt_masks": bool(options.corrupt_masks),
                               "refine_steps": options.refine_steps, "up": options.up or "none",
                               "static_camera": bool(options.static_camera),
                               "track_ground": bool(options.track_ground),
                               "track_size": [width, height],
                               "flips": int(getattr(tracker, "flips", 0)), "reread_frames": hold.reread_frames}
    if truth is not None:
        metrics = tracking_metrics(track, truth, robot.dof, fps=fps)
        ino = np.asarray(track["iou_no_offset"], float)
        metrics.update(fps_excluding_search=fps_tracking, search_s=search_s,
                       iou_no_offset=float(np.nanmean(ino)) if np.isfinite(ino).any() else float("nan"))
        write_json(out / "metrics.json", metrics)
        summary.update(metrics)
        if options.plots:
            plot_tracking(track, truth, robot.dof, out, frames.fps, robot.joint_names)
    else:
        status = np.asarray(track["status"]).astype(str)
        iou = np.asarray(track["iou"], float)
        summary.update(iou=float(np.nanmean(iou)) if np.isfinite(iou).any() else float("nan"),
                       frames_lost=int(np.count_nonzero(status == "lost")))
        if options.plots:
            plot_tracking(track, None, robot.dof, out, frames.fps, robot.joint_names)
    write_json(out / "summary.json", summary)
    return summary


# -- CLI ----------------------------------------------------------------------------------------
def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="DATASET|VIDEO", help="dataset folder (DESIGN.md layout) or video file")
    p.add_argument("--robot", default=None,
                   help="shipped robot name or robot YAML file (default: the dataset's meta.json robot)")
    p.add_argument("--intrinsics", default=None,
                   help="OpenCV calibration (YAML from cv2.FileStorage, or JSON: camera_matrix, dist_coeffs); "
                        "default: the dataset's meta.json K")
    p.add_argument("--masks", default=None,
                   help="truth (the dataset's masks/, default for datasets), DIR of PNG masks named like the "
                        "frames, or segmenter:MODEL.pt")
    p.add_argument("--refine-steps", type=int, default=None, help="refinement iterations per frame (default 10)")
    p.add_argument("--corrupt-masks", action="store_true",
                   help="apply realistic segmentation errors to the masks (1-3 px bias, ragged edges, "
                        "missing chunks, false blobs)")
    p.add_argument("--corrupt-seed", type=int, default=None,
                   help="seed of --corrupt-masks (default: the dataset's seed, else 0)")
    p.add_argument("--max-frames", type=int, default=None, help="track at most N frames")
    p.add_argument("--no-video", action="store_true", help="skip overlay.mp4")
    p.add_argument("--up", default=None, metavar="sim-imu|FILE|none",
                   help="the world's up direction in the camera frame per frame, to hold the robot to the "
                        "ground: an IMU CSV (frame, up_x, up_y, up_z) or 'sim-imu' (a dataset's camera attitude "
                        "with 1° bias and 0.5° noise); default none")
    p.add_argument("--static-camera", action="store_true",
                   help="the camera does not move relative to the ground (a tripod): hold the robot's base to the "
                        "ground's height, the median of its track (needs --up)")
    p.add_argument("--track-ground", action="store_true",
                   help="the camera moves (handheld, drone): follow its height over the ground plane through the "
                        "frames (the ground's homography) and hold the robot's base to the ground (needs --up)")
    p.add_argument("--hold-frames", type=int, default=60, metavar="N",
                   help="hold up to N first frames until the body wave shows which end is the head, and re-read "
                        "them if the track turns round (default 60; 0: write every frame as it finishes)")
    p.add_argument("--silhouette", default="visual", choices=("visual", "visual-capsule", "capsules"),
                   help="the robot's silhouette model: 'visual' (bodies, caps and housings from the robot file, "
                        "cylindrical housings drawn as cylinders; default), 'visual-capsule' (the same with cylindrical "
                        "housings as capsules, the model before the twelfth session) or 'capsules' (the kinematic "
                        "capsules only)")
    p.add_argument("--track-size", default=None, metavar="WxH",
                   help="track at this resolution: frames and masks resized, K scaled "
                        "(default: the source's own; the paper tracks at 640x360)")
    p.add_argument("--states", default=None, metavar="FILE|-",
                   help="also write each finished frame's state as a JSON line (track.csv's columns), flushed "
                        "at once, to FILE or standard output ('-'); with --hold-frames 0 every frame as it finishes")
    p.add_argument("--out", required=True, help="output folder (track.csv, overlay.mp4, metrics.json, plots)")


def _run(args: argparse.Namespace) -> int:
    src = Path(args.source)
    if args.refine_steps is not None and args.refine_steps < 0:
        raise InputError(f"--refine-steps {args.refine_steps}; expected a non-negative integer")
    if args.hold_frames < 0:
        raise InputError(f"--hold-frames {args.hold_frames}; expected a non-negative number of frames")
    seed = args.corrupt_seed
    if seed is None:
        seed = 0
        meta = src / "meta.json"
        if src.is_dir() and meta.is_file():
            from snaketrack.io import read_json

            seed = int(read_json(meta).get("seed", 0) or 0)
    opts = TrackOptions(refine_steps=args.refine_steps, corrupt_masks=args.corrupt_masks, corrupt_seed=seed,
                        max_frames=args.max_frames, video=not args.no_video, up=args.up,
                        static_camera=args.static_camera, track_ground=args.track_ground,
                        hold_frames=args.hold_frames, silhouette=args.silhouette,
                        track_size=parse_size(args.track_size) if args.track_size else None, states=args.states)
    summary = run_tracking(src, args.robot, args.out, args.intrinsics, args.masks, opts)
    keys = ("frames", "fps", "base_position_error_m", "joint_error_rad", "iou", "iou_truth", "frames_lost")
    report = sys.stderr if args.states == "-" else sys.stdout  # standard output carries the states then
    print("  ".join(f"{k}={summary[k]:.4g}" if isinstance(summary.get(k), float) else f"{k}={summary[k]}"
                    for k in keys if k in summary), file=report)
    print(f"wrote {args.out}/track.csv" + ("" if args.no_video else f", {args.out}/overlay.mp4"), file=report)
    return 0


COMMANDS = [Command(name="track", help="track a snake robot through a dataset or video (track.csv, overlay, metrics)",
                    add_arguments=_add_arguments, run=_run)]
