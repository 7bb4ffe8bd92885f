"""Tracking error over the first frames from the mask-only initialisation, per search setting.

    snaketrack bench tracker-init DATASET [--frames 30] [--settings 10x3 30x5]

Masks are corrupted with MaskCorruptor(0); the tracker starts without a pose.
Gives per setting (LM steps × refined starts) the mean base position error [m]
and mean absolute joint error [rad] over the frames.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from snaketrack.bench.registry import Benchmark


def track_first_frames(ds, robot, frames, steps, cands):
    from dataclasses import replace

    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.run.corrupt import MaskCorruptor
    from snaketrack.tracker.tracker import Tracker

    tr = Tracker(robot, ds.K, ds.width, ds.height, ds.fps,
                 replace(TrackerConfig(), init_refine_steps=steps, init_candidates=cands))
    corrupt = MaskCorruptor(0)
    base, joint = [], []
    t0 = time.perf_counter()
    for i in range(frames):
        m = corrupt(ds.mask(i), i)
        st = tr.start(m) if i == 0 else tr.step(m)
        truth = ds.truth[i]
        base.append(np.linalg.norm(st.base_position - np.asarray(truth["base_position_cam"])))
        joint.append(np.mean(np.abs(st.q - np.asarray(truth["joint_angles"]))))
    return {"base_position_error_m": float(np.mean(base)), "joint_error_rad": float(np.mean(joint)),
            "frame0_base_error_m": float(base[0]), "wall_s": time.perf_counter() - t0}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset")
    p.add_argument("--frames", type=int, default=30)
    p.add_argument("--settings", nargs="+", default=["10x3", "30x5"])


def run(a: argparse.Namespace) -> dict:
    import torch

    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot

    torch.set_num_threads(2)
    ds = Dataset(a.dataset)
    robot = load_robot(ds.meta.get("robot_file") or ds.meta["robot"])
    out = {}
    for s in a.settings:
        steps, cands = (int(v) for v in s.split("x"))
        out[s] = track_first_frames(ds, robot, a.frames, steps, cands)
        print(s, out[s], file=sys.stderr, flush=True)
    return out


BENCHMARK = Benchmark("tracker-init", "tracking error over the first frames from the mask-only initialisation, per "
                      "search setting", add_arguments, run, quick={"frames": 3, "settings": ["10x3"]})
