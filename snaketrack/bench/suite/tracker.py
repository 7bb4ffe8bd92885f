"""Benchmark of the single-camera tracker on synthetic clips: accuracy, speed and re-acquisition.

Tracks a clip per scene (static, handheld, drone) and robot
(planar-snake-11, arcsnake-4), rendered into ``--data`` when absent, with
corrupted truth masks, and times the silhouette renderer beside its dense
reference (:mod:`snaketrack.bench.tracking`,
:mod:`snaketrack.bench.render_timing`; docs/tracking.md, "Benchmark").
Per clip it reports the ``metrics.json`` figures, the IoU ceilings and
``reacquire_frames`` (the robot hidden for 30 frames from ``--hide-start``).

Usage::

    snaketrack bench tracker [--data DIR] [--frames 300]
        [--scenes static handheld drone] [--robots planar-snake-11 arcsnake-4] [--out bench_out/tracker]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from snaketrack.bench.cache import add_data_argument, data_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.bench.tracking import ROBOTS, SCENES, BenchmarkConfig, run_benchmark
from snaketrack.errors import InputError, SnaketrackError


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_data_argument(ap)
    ap.add_argument("--out", default="bench_out/tracker", help="folder for the tracks (default bench_out/tracker)")
    ap.add_argument("--frames", type=int, default=300, help="frames per clip (default 300)")
    ap.add_argument("--seed", type=int, default=0, help="the clips' seed (default 0)")
    ap.add_argument("--scenes", nargs="+", default=list(SCENES), help="default: static handheld drone")
    ap.add_argument("--robots", nargs="+", default=list(ROBOTS), help="default: planar-snake-11 arcsnake-4")
    ap.add_argument("--refine-steps", type=int, default=10, help="refinement iterations per frame (default 10)")
    ap.add_argument("--no-reacquire", action="store_true", help="skip the hidden-robot runs")
    ap.add_argument("--hide-start", type=int, default=60, help="first hidden frame of the re-acquisition run")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    ap.add_argument("--up", default="none", choices=["none", "sim-imu", "auto"],
                    help="the tracker's up direction: none, the simulated IMU of snaketrack.tracker.calib.gravity, or "
                         "auto (the ground plane of the track's first frames, snaketrack.tracker.calib.selfcal)")
    ap.add_argument("--no-static-camera", action="store_true",
                    help="do not tell the tracker that the static scene's camera is fixed (--static-camera of "
                         "snaketrack track, which needs --up)")
    ap.add_argument("--no-track-ground", action="store_true",
                    help="do not follow the moving cameras' height over the ground (handheld and drone scenes; "
                         "snaketrack track --track-ground, which needs --up)")
    ap.add_argument("--hold-frames", type=int, default=60,
                    help="first frames held until the body wave settles the reading (snaketrack track --hold-frames)")
    ap.add_argument("--silhouette", default="visual", choices=["visual", "visual-capsule", "capsules"],
                    help="the tracker's silhouette model (snaketrack track --silhouette)")
    ap.add_argument("--renderer", default="own", choices=["own", "pytorch3d"],
                    help="the tracker's silhouette renderer (snaketrack track --renderer)")
    ap.add_argument("--timing-reps", type=int, default=20,
                    help="repetitions of each timed renderer pass (the dense reference runs a quarter of them)")
    ap.add_argument("--reacquire-tail", type=int, default=60,
                    help="frames tracked after the robot reappears in the re-acquisition run")
    ap.add_argument("--core", default="auto", choices=["auto", "compiled", "torch"],
                    help="how refinement renders the silhouette and its Jacobian: the compiled kernel, the torch "
                         "reference, or auto (compiled when numba is installed)")
    ap.add_argument("--budget-width", type=float, default=12.0,
                    help="refinement evaluates the image on k x k blocks for a body wider than this [px] "
                         "(k: the body's width over it, rounded up; 0: always on the image's pixels; default 12)")


def run(args: argparse.Namespace) -> dict:
    try:
        config = BenchmarkConfig(frames=args.frames, seed=args.seed, scenes=tuple(args.scenes),
                                 robots=tuple(args.robots), refine_steps=args.refine_steps, up=args.up,
                                 static_camera=not args.no_static_camera, track_ground=not args.no_track_ground,
                                 hold_frames=args.hold_frames, silhouette=args.silhouette, renderer=args.renderer,
                                 reacquire=not args.no_reacquire, hide_start=args.hide_start,
                                 reacquire_tail=args.reacquire_tail, timing_reps=args.timing_reps,
                                 refine_core=args.core, refine_budget_px=args.budget_width)
    except SnaketrackError as e:
        raise InputError(str(e)) from None
    import torch

    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    return run_benchmark(data_dir(args), Path(args.out), config, log=lambda line: print(line, file=sys.stderr))


BENCHMARK = Benchmark("tracker", "the single-camera tracker on synthetic clips: accuracy, speed and re-acquisition",
                      add_arguments, run,
                      quick={"frames": 12, "scenes": ["static"], "robots": ["arcsnake-4"], "no_reacquire": True,
                             "timing_reps": 1, "hold_frames": 0})
