"""Benchmark of latency compensation: a tracked state carried forward against the truth it is carried to.

Tracks a synthetic clip with truth (``truth.jsonl``) frame by frame as the service does (no reading
hold: each state uses only the frames up to its own), then for each state and each horizon of ``h``
frames (``h/fps`` seconds) compares with the truth at frame ``k + h``:

- ``held``: the state as tracked (what a client has without compensation);
- ``forecast``: the state carried forward by ``h/fps`` (:func:`snaketrack.tracker.run.forecast.forecast`,
  what ``/snake/state``'s ``predicted_*`` fields carry).

Errors: base position and head point [m] (Euclidean, camera frame) and joint angles [rad] (mean
absolute), each the median over the frames after the first ``--skip`` (the track settling);
``tracked``: the states against the truth of their own frames (the error before any latency).

Usage::

    snaketrack bench forecast --clip DATA/drone-planar-s0
        [--frames 120] [--horizons 1,2,3,6] [--corrupt-masks]

The result gives, per horizon (in frames and milliseconds) the held and
forecast errors.
"""
from __future__ import annotations

import argparse

import numpy as np

from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError


def _errors(state, truth: dict) -> tuple[float, float, float]:
    q = np.asarray(truth["joint_angles"], float)
    dq = np.angle(np.exp(1j * (np.asarray(state.q, float) - q)))
    return (float(np.linalg.norm(np.asarray(state.base_position) - truth["base_position_cam"])),
            float(np.linalg.norm(np.asarray(state.head) - truth["head_position_cam"])),
            float(np.mean(np.abs(dq))))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--clip", required=True, help="a dataset folder with truth.jsonl")
    ap.add_argument("--frames", type=int, default=120, help="frames tracked (default 120)")
    ap.add_argument("--horizons", default="1,2,3,6", help="horizons [frames] (default 1,2,3,6)")
    ap.add_argument("--skip", type=int, default=10, help="first frames left out of the errors (default 10)")
    ap.add_argument("--corrupt-masks", action="store_true", help="corrupt the truth masks like a segmenter's")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.datasets.video import open_frames
    from snaketrack.models.robot import source_robot
    from snaketrack.tracker.calib.camera import source_camera
    from snaketrack.tracker.run.forecast import forecast
    from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession

    torch.set_num_threads(args.threads)
    frames = open_frames(args.clip)
    if frames.truth is None:
        raise InputError(f"{args.clip} has no truth.jsonl")
    robot = source_robot(None, frames.meta)
    camera = source_camera(frames.meta, frames.width, frames.height)
    session = TrackingSession(robot, camera, frames.fps, PipelineConfig(hold_frames=0, render=False,
                                                                        corrupt_masks=args.corrupt_masks)).start()
    truth = {int(r.get("frame", k)): r for k, r in enumerate(frames.truth)}
    states = {}
    for i, rgb in frames.frames():
        if i >= args.frames:
            break
        for r in session.step(rgb, frames.mask(i), index=i):
            states[r.index] = r.state
    horizons = [int(h) for h in args.horizons.split(",")]
    result: dict = {"clip": args.clip, "frames": len(states), "fps": frames.fps, "flips": session.flips,
                    "corrupt_masks": bool(args.corrupt_masks)}
    names = ("base_m", "head_m", "joint_rad")
    now = [_errors(s, truth[k]) for k, s in states.items()
           if k >= args.skip and k in truth and s.has_pose and s.status == "tracked"]
    result["tracked"] = {f"{n}": float(v) for n, v in zip(names, np.median(now, axis=0))} if now else {}
    for h in horizons:
        held, ahead = [], []
        for k, s in states.items():
            if k < args.skip or k + h not in truth or not s.has_pose or s.status != "tracked":
                continue
            f = forecast(s, robot, h / frames.fps)
            if f is None:
                continue
            held.append(_errors(s, truth[k + h]))
            ahead.append(_errors(f, truth[k + h]))
        held_m, ahead_m = np.median(held, axis=0), np.median(ahead, axis=0)
        result[f"h{h}"] = {"ms": 1000.0 * h / frames.fps, "n": len(held),
                           **{f"held_{n}": float(v) for n, v in zip(names, held_m)},
                           **{f"forecast_{n}": float(v) for n, v in zip(names, ahead_m)}}
    return result


BENCHMARK = Benchmark("forecast", "latency compensation: a tracked state carried forward against the truth it is "
                      "carried to", add_arguments, run, quick={"frames": 15, "skip": 2, "horizons": "1,2"})
