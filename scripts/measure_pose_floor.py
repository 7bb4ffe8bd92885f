"""What the tracker's objective leaves of the pose error when it starts at the truth: the floor under its errors.

For each dataset with truth (``snaketrack sim video``), the tracker's
per-frame refinement is started at the true pose on every ``--step``-th
frame's corrupted mask (``--clean``: the truth mask itself), with
``--up sim-imu`` as in the benchmark (:mod:`snaketrack.tracker.pose_floor`).
Prints one JSON line per dataset: ``floor_joint_error_rad``,
``floor_base_error_m``, ``floor_iou``; with ``--track DIR``
(``DIR/<dataset name>/track.csv``) also, on the same frames, the track's own
``track_joint_error_rad``, ``track_base_error_m`` and ``track_iou``, and
``refit_iou``: the same refinement started at the track's pose.

    .venv/bin/python scripts/measure_pose_floor.py bench_data/handheld-arcsnake-s0 [...] [--step 5]
        [--clean] [--up sim-imu|none] [--prior-scale 1] [--track bench_out/tracker]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.errors import SnaketrackError  # noqa: E402
from snaketrack.tracker.pose_floor import measure_pose_floor  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--clean", action="store_true", help="the truth masks, not corrupted ones")
    ap.add_argument("--up", default="sim-imu", choices=("sim-imu", "none"),
                    help="the up direction, as snaketrack track --up (default sim-imu)")
    ap.add_argument("--prior-scale", type=float, default=1.0,
                    help="widen the prior towards the prediction (the truth here) this many times")
    ap.add_argument("--track", type=Path, default=None,
                    help="folder of tracks (DIR/<dataset name>/track.csv) to compare on the same frames")
    args = ap.parse_args(argv)
    if args.step < 1:
        ap.error(f"--step {args.step}: expected a positive integer")
    for path in args.datasets:
        csv = None if args.track is None else args.track / path.name / "track.csv"
        try:
            res = measure_pose_floor(path, args.step, clean=args.clean, up=args.up,
                                     track=csv if csv is not None and csv.is_file() else None,
                                     prior_scale=args.prior_scale, progress=sys.stderr.isatty())
        except SnaketrackError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    cv2.setNumThreads(1)
    sys.exit(main())
