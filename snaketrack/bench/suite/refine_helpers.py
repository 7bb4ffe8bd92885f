"""Benchmark of the compiled helpers around each render against their numpy references, side by side.

The compiled core renders with one compiled loop; around each render refinement also takes the primitives'
end points and their Jacobian, the coverage term and the render's image box (``RefineConfig.helpers``).
Each benchmark clip (``{scene}-{robot}-s{seed}``, rendered into ``--data`` when absent) is tracked as
``snaketrack bench tracker`` tracks it (masks corrupted, the simulated IMU's up direction, the reading
hold), ``--reps`` times with the compiled helpers and with their numpy references, alternated in one
process, so that a machine whose speed drifts between runs gives both the same share of it. Per clip and
setting: the tracker's frames/s of each run (``fps`` as ``snaketrack track`` reports it) and the base
position [m] and joint [rad] errors, which the two settings share to rounding.

Usage::

    snaketrack bench refine-helpers [--data DIR] [--scenes static handheld drone]
        [--robots planar-snake-11 arcsnake-4] [--frames 150] [--reps 3]
"""
from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

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
    ap.add_argument("--frames", type=int, default=150, help="frames tracked per run (default 150)")
    ap.add_argument("--reps", type=int, default=3, help="runs per setting, alternated (default 3)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.bench.tracking import bench_options, dataset_dir, ensure_dataset
    from snaketrack.tracker.config import HELPERS
    from snaketrack.tracker.run.loop import track_source

    if args.frames < 2 or args.reps < 1:
        raise InputError(f"--frames {args.frames}, --reps {args.reps}; expected at least 2 frames and 1 run")
    torch.set_num_threads(max(1, args.threads))
    data = data_dir(args)
    result: dict = {"frames": args.frames, "reps": args.reps, "threads": args.threads, "clips": {}}
    for scene in args.scenes:
        for robot in args.robots:
            path = ensure_dataset(dataset_dir(data, scene, robot, args.seed), scene, robot, args.seed, args.frames)
            config, options = bench_options(scene, args.seed, args.frames)
            runs: dict = {h: {"fps": [], "base_position_error_m": [], "joint_error_rad": []} for h in HELPERS}
            for _ in range(args.reps):
                for helpers in HELPERS:
                    with tempfile.TemporaryDirectory() as tmp:
                        out = track_source(path, Path(tmp), robot, config=replace(config, refine_helpers=helpers),
                                           options=options)
                    for k in runs[helpers]:
                        runs[helpers][k].append(float(out[k]))
            clip = result["clips"][path.name] = {h: {k: [round(v, 6) for v in vals] for k, vals in r.items()}
                                                 for h, r in runs.items()}
            clip["fps_ratio_compiled_over_numpy"] = round(float(np.mean(runs["compiled"]["fps"])
                                                              / np.mean(runs["numpy"]["fps"])), 4)
    return result


BENCHMARK = Benchmark("refine-helpers", "the compiled helpers around each render against their numpy references, "
                      "alternated in one process", add_arguments, run,
                      quick={"scenes": ["static"], "robots": ["arcsnake-4"], "frames": 6, "reps": 1})
