"""The tracker's benchmark: its synthetic clips, how they are tracked, and the figures reported.

For every scene (static, handheld, drone) and robot (planar-snake-11,
arcsnake-4) the benchmark tracks a clip of ``snaketrack sim video``
(640×360, generated when absent, named ``{scene}-{planar|arcsnake}-s{seed}``;
the static planar clip without the posts) with corrupted truth masks
(``--corrupt-masks``, seeded by the clip's seed) and 10 refinement steps.
With an up direction the static scene's camera is declared fixed
(``--static-camera``) and the handheld and drone cameras follow their height
over the ground (``--track-ground``), as a user who knows the camera would
set them; each switch can be turned off.

Per clip it reports the ``metrics.json`` figures (docs/conventions.md names: ``fps``
includes the first frame's pose search and any later searches,
``fps_excluding_search`` does not, ``search_s`` is their time [s]; ``iou`` is
against the observed, corrupted mask with the tracker's fitted edge offset,
``iou_no_offset`` the model's own silhouette against it, ``iou_truth``
against the truth mask), the IoU ceilings of
:func:`snaketrack.bench.ceiling.measure_iou_ceiling` (``iou_ceiling``,
``iou_model_ceiling``) and ``reacquire_frames``: in a second run the observed
masks of frames ``[hide_start, hide_start + 30)`` are emptied (the robot
hidden), and the count is the frames from the first visible one until the
rendered silhouette's IoU against the *truth* mask reaches 0.8 (None if it
never does within the run). The renderer's timings come from
:func:`snaketrack.bench.render_timing.render_timing`.

>>> dataset_dir(Path("bench_data"), "drone", "arcsnake-4", 0).as_posix()
'bench_data/drone-arcsnake-s0'
>>> config, options = bench_options("static", seed=3, frames=100)
>>> config.static_camera, config.track_ground, config.corrupt_seed, options.max_frames
(True, False, 3, 100)
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from snaketrack.errors import InputError, SnaketrackError

#: The benchmark's robots and the short names of their clips.
SHORT = {"planar-snake-11": "planar", "arcsnake-4": "arcsnake"}
SCENES = ("static", "handheld", "drone")
ROBOTS = ("planar-snake-11", "arcsnake-4")
#: The robot is hidden (empty observed masks) for this many frames in the re-acquisition run.
HIDE_FRAMES = 30
#: The figures of ``snaketrack track``'s summary each clip reports.
REPORTED = ("base_position_error_m", "joint_error_rad", "joint_error_l2_rad", "iou", "iou_no_offset", "iou_truth",
            "fps", "fps_excluding_search", "search_s", "frames_lost", "frames", "head_position_error_m", "flips",
            "reread_frames", "device")


def dataset_dir(data: Path, scene: str, robot: str, seed: int) -> Path:
    """The clip's folder in ``data``: ``{scene}-{short robot name}-s{seed}`` (a robot file: its stem)."""
    return data / f"{scene}-{SHORT.get(robot, Path(robot).stem)}-s{seed}"


def obstacles_for(scene: str, robot: str) -> bool:
    """Whether the clip has posts: all but the static planar clip.

    Among the posts the planar snake crawls ~2.5 m in 10 s; a tripod that frames
    all of it sees the body only ~5.7 px wide, which the mask corruption's 1–3 px
    erosion wipes out. Without posts it undulates nearly in place (~22 px wide).
    """
    return not (scene == "static" and robot == "planar-snake-11")


def ensure_dataset(path: Path, scene: str, robot: str, seed: int, frames: int, body_width_px: float = 11.0,
                   size: tuple[int, int] = (640, 360), progress: bool = True) -> Path:
    """The clip at ``path``, rendered by :mod:`snaketrack.sim.video` when absent or shorter than ``frames``
    (continuing a shorter one).

    body_width_px: the robot's nominal width in the image [px] (``--body-width-px``: it sets the lens).
    size: (width, height) [px]. progress: show the renderer's progress and say what is rendered (stderr).
    Raises InputError when the folder holds a clip made with the posts set otherwise.
    """
    from snaketrack.datasets.layout import Dataset
    from snaketrack.io import read_json

    obstacles = obstacles_for(scene, robot)
    if (path / "meta.json").is_file():
        if bool(read_json(path / "meta.json").get("obstacles", True)) != obstacles:
            raise InputError(f"{path}: made with obstacles={not obstacles}; the benchmark expects "
                             f"obstacles={obstacles}; move it away")
        try:
            if len(Dataset(path)) >= frames:
                return path
        except SnaketrackError:  # frames not written yet: render resumes it
            pass
    from snaketrack.sim.video import VideoConfig
    from snaketrack.sim.video_dataset import render_video

    cfg = VideoConfig(scene=scene, robot=robot, frames=frames, seed=seed, width=size[0], height=size[1],
                      obstacles=obstacles, target_width_px=float(body_width_px))
    if progress:
        print(f"generating {path} ({frames} frames)", file=sys.stderr)
    render_video(cfg, path, resume=(path / "meta.json").is_file(), progress=progress, extras=False)
    return path


def ensure_dataset_apart(path: Path, scene: str, robot: str, seed: int, frames: int) -> Path:
    """:func:`ensure_dataset` in a process of its own, so that the renderer's threads leave this process's CPU
    time alone (a benchmark that times tracking afterwards). Raises SnaketrackError when rendering fails."""
    import multiprocessing as mp

    p = mp.get_context("spawn").Process(target=ensure_dataset, args=(path, scene, robot, seed, frames))
    p.start()
    p.join()
    if p.exitcode != 0:
        raise SnaketrackError(f"rendering {path} failed (exit status {p.exitcode})")
    return path


def bench_options(scene: str, seed: int, frames: int, up: str = "sim-imu", refine_steps: int = 10,
                  hold_frames: int = 60, silhouette: str = "visual", static_camera: bool = True,
                  track_ground: bool = True, refine_core: str = "auto", refine_budget_px: float = 12.0,
                  renderer: str = "own"):
    """The benchmark's ``(PipelineConfig, RunOptions)`` for one clip.

    Masks corrupted with the clip's ``seed``; at most ``frames`` frames; no video, plots or progress bar.
    With an ``up`` source (``sim-imu``, ``auto`` or an IMU CSV; ``none``: no ground prior) the static scene's camera
    is declared fixed (``static_camera``) and a moving camera follows its height over the ground
    (``track_ground``).
    """
    from snaketrack.tracker.run.loop import RunOptions
    from snaketrack.tracker.run.pipeline import PipelineConfig

    fixed = scene == "static" and up != "none" and static_camera
    moving = scene != "static" and up != "none" and track_ground
    config = PipelineConfig(refine_steps=refine_steps, corrupt_masks=True, corrupt_seed=seed,
                            static_camera=fixed, track_ground=moving, hold_frames=hold_frames, silhouette=silhouette,
                            refine_core=refine_core, refine_budget_px=refine_budget_px, renderer=renderer)
    return config, RunOptions(up=up, max_frames=frames, video=False, plots=False, progress=False)


def reacquire_frames(track_csv: Path, hide_end: int, threshold: float = 0.8) -> Optional[int]:
    """Frames from ``hide_end`` (the first visible frame) to the first row of ``track_csv`` whose
    ``iou_truth`` reaches ``threshold``; None if none does."""
    from snaketrack.io import read_csv_columns

    cols = read_csv_columns(track_csv)
    frames = cols["frame"].astype(int)
    iou = cols["iou_truth"]
    for f, v in zip(frames, iou):
        if f >= hide_end and np.isfinite(v) and v >= threshold:
            return int(f - hide_end)
    return None


@dataclass(frozen=True)
class BenchmarkConfig:
    """What the benchmark runs.

    frames: frames tracked per clip (and rendered when the clip is absent). Default 300.
    seed: the clips' seed (their folder names; a clip's own ``meta.json`` seed seeds its corruption). Default 0.
    scenes: scenes of ``snaketrack sim video``. Default static, handheld, drone.
    robots: robot names. Default planar-snake-11, arcsnake-4.
    refine_steps: refinement iterations per frame. Default 10.
    up: the up direction, ``none``, ``sim-imu`` or ``auto`` (fitted to the track's first frames). Default none.
    static_camera: declare the static scene's camera fixed (with an up direction). Default True.
    track_ground: the moving cameras follow their height over the ground (with an up direction). Default True.
    hold_frames: first frames held until the head's end is settled [frames]. Default 60.
    silhouette: the tracker's silhouette model (``visual``, ``visual-capsule``, ``capsules``). Default visual.
    renderer: the tracker's silhouette renderer (``own``, ``pytorch3d``). Default own.
    reacquire: also run each clip with the robot hidden and count ``reacquire_frames``. Default True.
    hide_start: first hidden frame of that run. Default 60.
    reacquire_tail: frames tracked after the robot reappears. Default 60.
    timing_reps: repetitions of each timed renderer pass. Default 20.
    refine_core: how refinement renders the silhouette and its Jacobian (``RefineConfig.core``). Default auto.
    refine_budget_px: ``RefineConfig.budget_width_px`` (0: refinement on the image's own pixels). Default 12.
    """

    frames: int = 300
    seed: int = 0
    scenes: tuple[str, ...] = SCENES
    robots: tuple[str, ...] = ROBOTS
    refine_steps: int = 10
    up: str = "none"
    static_camera: bool = True
    track_ground: bool = True
    hold_frames: int = 60
    silhouette: str = "visual"
    renderer: str = "own"
    reacquire: bool = True
    hide_start: int = 60
    reacquire_tail: int = 60
    timing_reps: int = 20
    refine_core: str = "auto"
    refine_budget_px: float = 12.0

    def __post_init__(self):
        if self.frames < 1:
            raise InputError(f"--frames {self.frames}; expected a positive number of frames")
        if not self.scenes or not self.robots:
            raise InputError("--scenes and --robots: expected at least one of each")
        bad = [s for s in self.scenes if s not in SCENES]
        if bad:
            raise InputError(f"--scenes {' '.join(bad)}; expected some of {', '.join(SCENES)}")
        if self.up not in ("none", "sim-imu", "auto"):
            raise InputError(f"--up {self.up!r}; expected none, sim-imu or auto")


def bench_clip(data: Path, out: Path, scene: str, robot: str, config: BenchmarkConfig = BenchmarkConfig()) -> dict:
    """Track one scene's clip of one robot into ``out/{scene}-{short}`` and score it (module doc).

    data: the folder of the clips (rendered into it when absent). Returns the clip's figures, wall times [s]."""
    from snaketrack.bench.ceiling import measure_iou_ceiling
    from snaketrack.io import read_json
    from snaketrack.tracker.run.loop import track_source

    c = config
    ds = ensure_dataset(dataset_dir(data, scene, robot, c.seed), scene, robot, c.seed, c.frames)
    seed = int(read_json(ds / "meta.json").get("seed", c.seed))
    run_dir = out / f"{scene}-{SHORT.get(robot, robot)}"
    pipeline, opts = bench_options(scene, seed, c.frames, up=c.up, refine_steps=c.refine_steps,
                                   hold_frames=c.hold_frames, silhouette=c.silhouette,
                                   static_camera=c.static_camera, track_ground=c.track_ground,
                                   refine_core=c.refine_core, refine_budget_px=c.refine_budget_px,
                                   renderer=c.renderer)
    t0, c0 = time.perf_counter(), time.process_time()
    s = track_source(ds, run_dir, robot, config=pipeline, options=opts)
    res = {k: s.get(k) for k in REPORTED}
    res["wall_s"] = time.perf_counter() - t0
    # the process's CPU time over the whole run (reading, outputs and scoring included), per frame: on a
    # shared machine the wall clock also counts the waits for a core
    res["cpu_ms_per_frame"] = 1e3 * (time.process_time() - c0) / max(int(s.get("frames") or 1), 1)
    ceiling = measure_iou_ceiling(ds, frames=c.frames, model=True)
    res["iou_ceiling"], res["iou_model_ceiling"] = ceiling["iou_ceiling"], ceiling["iou_model_ceiling"]
    cal = s.get("calibration") or {}
    if "up_auto" in cal:  # the fitted up direction against the camera's true attitude at the first frame
        from snaketrack.datasets.layout import Dataset
        from snaketrack.tracker.calib.gravity import up_from_camera_quat

        truth_up = up_from_camera_quat(Dataset(ds).truth[0]["camera_quat_world"])
        cos = float(np.clip(np.dot(cal["up_auto"]["up"], truth_up), -1.0, 1.0))
        res["up_auto"] = {**cal["up_auto"], "error_deg": float(np.degrees(np.arccos(cos)))}
    res["static_camera"] = pipeline.static_camera
    res["track_ground"] = pipeline.track_ground
    res["silhouette"] = c.silhouette
    res["renderer"] = c.renderer
    if c.reacquire:
        hide = (c.hide_start, c.hide_start + HIDE_FRAMES)
        ensure_dataset(ds, scene, robot, c.seed, hide[1] + c.reacquire_tail)
        hopts = replace(opts, max_frames=hide[1] + c.reacquire_tail)
        t1 = time.perf_counter()
        track_source(ds, run_dir / "hidden", robot, config=replace(pipeline, hidden=(hide,)), options=hopts)
        res["reacquire_frames"] = reacquire_frames(run_dir / "hidden" / "track.csv", hide[1])
        res["reacquire_hidden_frames"] = list(hide)
        res["reacquire_wall_s"] = time.perf_counter() - t1
    return res


def run_benchmark(data: Path, out: Path, config: BenchmarkConfig = BenchmarkConfig(),
                  log: Optional[Callable[[str], None]] = None) -> dict:
    """Every clip of ``config`` (:func:`bench_clip`) and the renderer's timings, as one summary.

    data: the folder of the clips; out: the folder of the tracks; log: called with a line per finished clip
    (``scene/robot: {JSON figures}``).
    The timings run on the drone planar clip when present, else on the first scene's clip of the first robot.
    """
    import torch

    from snaketrack.bench.render_timing import render_timing

    data, out, c = Path(data), Path(out), config
    results: dict = {}
    for scene in c.scenes:
        for robot in c.robots:
            key = f"{scene}/{robot}"
            results[key] = bench_clip(data, out, scene, robot, c)
            if log is not None:
                log(f"{key}: {json.dumps(results[key])}")
    drone = dataset_dir(data, "drone", "planar-snake-11", c.seed)
    timing_clip = drone if (drone / "meta.json").is_file() else \
        ensure_dataset(dataset_dir(data, c.scenes[0], c.robots[0], c.seed), c.scenes[0], c.robots[0], c.seed, c.frames)
    timing = render_timing(timing_clip, reps=max(1, c.timing_reps))
    return {"per_scene": results, **timing,
            "mean_fps": float(np.mean([r["fps"] for r in results.values()])) if results else None,
            "refine_steps": c.refine_steps, "frames": c.frames, "torch_threads": torch.get_num_threads(),
            "up": c.up, "hold_frames": c.hold_frames, "refine_core": c.refine_core,
            "refine_budget_px": c.refine_budget_px}
