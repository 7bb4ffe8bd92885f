"""What the tracker's objective leaves of the pose error when it starts at the truth: the floor under its errors.

For each dataset with truth (``snaketrack sim video``), the tracker's
per-frame refinement is started at the true pose on every ``--step``-th
frame's corrupted mask (``--clean``: the truth mask itself), with
``--up sim-imu`` as in the benchmark (:mod:`snaketrack.bench.pose_floor`).
Gives per dataset, in ``datasets``: ``floor_joint_error_rad``,
``floor_base_error_m``, ``floor_iou``; with ``--track DIR``
(``DIR/<dataset name>/track.csv``) also, on the same frames, the track's own
``track_joint_error_rad``, ``track_base_error_m`` and ``track_iou``, and
``refit_iou``: the same refinement started at the track's pose.

    snaketrack bench pose-floor DATASET [...] [--step 5]
        [--clean] [--up sim-imu|none] [--prior-scale 1] [--track bench_out/tracker]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--clean", action="store_true", help="the truth masks, not corrupted ones")
    ap.add_argument("--up", default="sim-imu", choices=("sim-imu", "none"),
                    help="the up direction, as snaketrack track --up (default sim-imu)")
    ap.add_argument("--prior-scale", type=float, default=1.0,
                    help="widen the prior towards the prediction (the truth here) this many times")
    ap.add_argument("--track", type=Path, default=None,
                    help="folder of tracks (DIR/<dataset name>/track.csv) to compare on the same frames")


def run(args: argparse.Namespace) -> dict:
    import cv2

    from snaketrack.bench.pose_floor import measure_pose_floor

    if args.step < 1:
        raise InputError(f"--step {args.step}: expected a positive integer")
    cv2.setNumThreads(1)
    out = []
    for path in args.datasets:
        csv = None if args.track is None else args.track / path.name / "track.csv"
        out.append(measure_pose_floor(path, args.step, clean=args.clean, up=args.up,
                                      track=csv if csv is not None and csv.is_file() else None,
                                      prior_scale=args.prior_scale, progress=sys.stderr.isatty()))
    return {"datasets": out}


BENCHMARK = Benchmark("pose-floor", "the tracker's objective started at the truth: the floor under its pose errors",
                      add_arguments, run, quick={"step": 30})
