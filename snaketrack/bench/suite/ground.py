"""How well the ground tracker follows the camera's height, against a synthetic dataset's truth.

For each dataset (``snaketrack sim video``; frames, masks, ``truth.jsonl``
with the camera's pose), runs :class:`snaketrack.tracker.calib.ground.GroundTracker`
on the frames with the simulated IMU's up direction
(:func:`snaketrack.tracker.calib.gravity.simulated_imu`, bias and noise settable)
and the truth masks as the robot's pixels, and compares the height ratio
it returns with the truth's camera height over the ground (z = 0) relative
to the first frame. Gives per dataset the relative error's mean and max |.|,
the last frame's error, keyframes, and ms per frame.

    snaketrack bench ground DATA/handheld-planar-s0 DATA/drone-planar-s15 \\
        [--imu-bias-deg 1.0 --imu-noise-deg 0.5] [--smooth-frames 20]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from snaketrack.bench.registry import Benchmark
from snaketrack.io import read_json

if TYPE_CHECKING:
    from snaketrack.tracker.calib.ground import GroundConfig


def measure(path: Path, bias_deg: float, noise_deg: float, config: GroundConfig, frames: int | None = None) -> dict:
    """The ground tracker over the first ``frames`` frames of ``path`` (None: all) against its truth."""
    import cv2  # deferred, as every import of run's work: bench --list imports none

    from snaketrack.datasets.layout import Dataset
    from snaketrack.tracker.calib.gravity import simulated_imu
    from snaketrack.tracker.calib.ground import GroundTracker

    meta = read_json(path / "meta.json")
    truth = [json.loads(line) for line in (path / "truth.jsonl").read_text().splitlines() if line.strip()]
    up = simulated_imu(truth, int(meta.get("seed", 0)), bias_deg, noise_deg)
    ds = Dataset(path)
    tracker = GroundTracker(np.array(meta["K"], float), config)
    heights, t_total = [], 0.0
    for i in range(min(len(ds), len(truth), frames or len(ds))):
        gray = cv2.cvtColor(ds.frame(i), cv2.COLOR_RGB2GRAY)
        mask = ds.mask(i) > 0
        t0 = time.perf_counter()
        heights.append(tracker.step(gray, up(i), mask))
        t_total += time.perf_counter() - t0
    z = np.array([row["camera_position_world"][2] for row in truth[:len(heights)]])
    err = np.array(heights, float) / (z / z[0]) - 1.0
    return {"dataset": str(path), "frames": len(heights), "rel_err_mean": float(np.nanmean(err)),
            "rel_err_max_abs": float(np.nanmax(np.abs(err))), "rel_err_last": float(err[-1]),
            "true_ratio_min": float((z / z[0]).min()), "true_ratio_max": float((z / z[0]).max()),
            "keyframes": tracker.keyframes, "ms_per_frame": 1000.0 * t_total / max(1, len(heights))}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--imu-bias-deg", type=float, default=1.0)
    ap.add_argument("--imu-noise-deg", type=float, default=0.5)
    ap.add_argument("--smooth-frames", type=int, default=None, help="GroundConfig.smooth_frames (default: its own)")
    ap.add_argument("--frames", type=int, default=None, help="the first N frames of each dataset (default all)")


def run(args: argparse.Namespace) -> dict:
    from snaketrack.tracker.calib.ground import GroundConfig  # deferred: bench --list imports none

    config = GroundConfig() if args.smooth_frames is None else replace(GroundConfig(), smooth_frames=args.smooth_frames)
    rows = []
    for path in args.datasets:
        row = measure(path, args.imu_bias_deg, args.imu_noise_deg, config, args.frames)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return {"imu_bias_deg": args.imu_bias_deg, "imu_noise_deg": args.imu_noise_deg,
            "smooth_frames": config.smooth_frames,
            "mean_abs_rel_err_mean": float(np.mean([abs(r["rel_err_mean"]) for r in rows])),
            "per_dataset": {Path(r["dataset"]).name: r for r in rows}}


BENCHMARK = Benchmark("ground", "the ground tracker's camera height against a synthetic clip's truth",
                      add_arguments, run, quick={"frames": 20})
