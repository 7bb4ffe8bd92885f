"""Benchmark of tracking with skipped frames: every ``s``-th frame of a clip, as a live source hands a tracker
that runs behind it, with and without the retry after a gap (``TrackerConfig.gap_frames``).

Each benchmark clip (``{scene}-{robot}-s{seed}``, rendered into ``--data`` when absent) is tracked over
``--frames`` steps of frames ``0, s, 2s, …`` with their own times (``t = k/fps``), truth masks corrupted
like a segmenter's, no reading hold, once with the tracker's settings and once with ``gap_frames=0``, in
one process. Per clip, stride and setting: the pose searches run after the first frame and their time
[s], the CPU time per tracked frame [ms], the fit's IoU with its mask (mean and 5th percentile) and the
base position [m] and joint [rad] errors against the truth (means; a track read from the wrong end
counts as it stands).

Usage::

    snaketrack bench skipped-frames [--data DIR] [--scenes static handheld drone]
        [--robots planar-snake-11 arcsnake-4] [--strides 2,3,5] [--frames 40]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from snaketrack.bench.cache import add_data_argument, data_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from snaketrack.bench.tracking import ROBOTS, SCENES

    add_data_argument(ap)
    ap.add_argument("--scenes", nargs="+", default=list(SCENES), choices=list(SCENES),
                    help="default: static handheld drone")
    ap.add_argument("--robots", nargs="+", default=list(ROBOTS), help="default: planar-snake-11 arcsnake-4")
    ap.add_argument("--seed", type=int, default=0, help="the clips' seed (default 0)")
    ap.add_argument("--strides", default="2,3,5", help="frames from one tracked frame to the next (default 2,3,5)")
    ap.add_argument("--frames", type=int, default=40, help="frames tracked per clip and stride (default 40)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")


def track_at_stride(frames, robot, camera, stride: int, n: int, gap_frames: float | None = None) -> dict:
    """Frames ``0, stride, 2·stride, …`` of the clip ``frames`` (``n`` of them) tracked at their own times;
    ``gap_frames``: the tracker's setting (None: its default). The figures of the module doc."""
    from dataclasses import replace

    from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession

    session = TrackingSession(robot, camera, frames.fps, PipelineConfig(hold_frames=0, corrupt_masks=True,
                                                                        render=False)).start()
    tracker = session.tracker
    if gap_frames is not None:
        tracker.config = replace(tracker.config, gap_frames=float(gap_frames))
    searches = []
    search = tracker.initialise

    def counted(*a, **k):
        searches.append(tracker.frame)
        return search(*a, **k)

    tracker.initialise = counted
    ious, base, joints = [], [], []
    cpu0 = time.thread_time()
    n = min(n, (len(frames) - 1) // stride + 1)
    for j in range(n):
        i = j * stride
        for r in session.step(frames.frame(i), frames.mask(i), t=i / frames.fps, index=i):
            truth = frames.truth[r.index] if frames.truth is not None else None
            if r.state.has_pose and r.state.iou is not None:
                ious.append(float(r.state.iou))
            if truth is not None and r.state.has_pose:
                base.append(float(np.linalg.norm(np.asarray(r.state.base_position) - truth["base_position_cam"])))
                dq = np.asarray(r.state.q, float) - np.asarray(truth["joint_angles"], float)
                joints.append(float(np.mean(np.abs(np.angle(np.exp(1j * dq))))))
    cpu_ms = 1000 * (time.thread_time() - cpu0) / max(n, 1)
    iou = np.asarray(ious, float)
    return {"frames": n, "searches": len([f for f in searches if f > 0]), "search_s": round(session.search_time_s, 3),
            "cpu_ms_per_frame": round(cpu_ms, 1),
            "iou_mean": float(iou.mean()) if iou.size else float("nan"),
            "iou_p5": float(np.percentile(iou, 5)) if iou.size else float("nan"),
            "base_error_m": float(np.mean(base)) if base else float("nan"),
            "joint_error_rad": float(np.mean(joints)) if joints else float("nan")}


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.bench.tracking import dataset_dir, ensure_dataset
    from snaketrack.datasets.video import open_frames
    from snaketrack.models.robot import source_robot
    from snaketrack.tracker.calib.camera import source_camera
    from snaketrack.tracker.config import TrackerConfig

    try:
        strides = [int(s) for s in str(args.strides).split(",")]
    except ValueError:
        raise InputError(f"--strides {args.strides!r}; expected whole numbers like 2,3,5") from None
    if not strides or min(strides) < 1 or args.frames < 2:
        raise InputError(f"--strides {args.strides!r}, --frames {args.frames}; expected strides ≥ 1 and ≥ 2 frames")
    torch.set_num_threads(max(1, args.threads))
    data = data_dir(args)
    result: dict = {"gap_frames": TrackerConfig().gap_frames, "frames": args.frames, "clips": {}}
    for scene in args.scenes:
        for robot_name in args.robots:
            path = ensure_dataset(dataset_dir(data, scene, robot_name, args.seed), scene, robot_name, args.seed,
                                  (args.frames - 1) * max(strides) + 1)
            frames = open_frames(path)
            robot = source_robot(None, frames.meta)
            camera = source_camera(frames.meta, frames.width, frames.height)
            clip = result["clips"][path.name] = {}
            for s in strides:
                clip[f"stride_{s}"] = {"retry": track_at_stride(frames, robot, camera, s, args.frames),
                                       "no_retry": track_at_stride(frames, robot, camera, s, args.frames, 0.0)}
    return result


BENCHMARK = Benchmark("skipped-frames", "tracking every s-th frame (a live source skipping) with and without the "
                      "retry after a gap", add_arguments, run,
                      quick={"scenes": ["static"], "robots": ["arcsnake-4"], "strides": "3", "frames": 6})
