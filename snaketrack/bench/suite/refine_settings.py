"""Benchmark of one refinement setting's two values, side by side in one process.

Two settings of the compiled core have a reference kept beside them: ``helpers`` (``RefineConfig.helpers``:
the primitives' end points and their Jacobian, the coverage term, the render's image box, the body's
normal, centre and head compiled, or their numpy and torch references) and ``coarse``
(``RefineConfig.coarse_sigma_px``: a tracked frame's stages at σ ≥ 2 px on blocks twice as wide, or on
the tracking grid throughout).
Each benchmark clip (``{scene}-{robot}-s{seed}``, rendered into ``--data`` when absent) is tracked as
``snaketrack bench tracker`` tracks it (masks corrupted, the simulated IMU's up direction, the reading
hold), ``--reps`` times with each value, alternated in one process, so that a machine whose speed drifts
between runs gives both the same share of it. Per clip and value: the tracker's frames/s of each run
(``fps`` as ``snaketrack track`` reports it) and the base position [m] and joint [rad] errors.

Usage::

    snaketrack bench refine-settings --setting helpers|coarse [--data DIR]
        [--scenes static handheld drone] [--robots planar-snake-11 arcsnake-4] [--frames 150] [--reps 3]
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

# setting: (PipelineConfig field, the value measured, its reference)
SETTINGS = {
    "helpers": ("refine_helpers", "compiled", "numpy"),
    "coarse": ("refine_coarse_sigma_px", 2.0, 0.0),
}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from snaketrack.bench.tracking import ROBOTS, SCENES

    ap.add_argument("--setting", choices=list(SETTINGS), default="helpers",
                    help="helpers: compiled against numpy; coarse: the soft-edged stages on blocks twice as wide "
                         "(2 px) against on the tracking grid (0) (default helpers)")
    add_data_argument(ap)
    ap.add_argument("--scenes", nargs="+", default=list(SCENES), choices=list(SCENES),
                    help="default: static handheld drone")
    ap.add_argument("--robots", nargs="+", default=list(ROBOTS), help="default: planar-snake-11 arcsnake-4")
    ap.add_argument("--seed", type=int, default=0, help="the clips' seed (default 0)")
    ap.add_argument("--frames", type=int, default=150, help="frames tracked per run (default 150)")
    ap.add_argument("--reps", type=int, default=3, help="runs per value, alternated (default 3)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.bench.tracking import bench_options, dataset_dir, ensure_dataset
    from snaketrack.tracker.run.loop import track_source

    if args.frames < 2 or args.reps < 1:
        raise InputError(f"--frames {args.frames}, --reps {args.reps}; expected at least 2 frames and 1 run")
    field, value, reference = SETTINGS[args.setting]
    names = {value: str(value), reference: str(reference)}
    torch.set_num_threads(max(1, args.threads))
    data = data_dir(args)
    result: dict = {"setting": args.setting, "field": field, "values": list(names.values()),
                    "frames": args.frames, "reps": args.reps, "threads": args.threads, "clips": {}}
    for scene in args.scenes:
        for robot in args.robots:
            path = ensure_dataset(dataset_dir(data, scene, robot, args.seed), scene, robot, args.seed, args.frames)
            config, options = bench_options(scene, args.seed, args.frames)
            runs: dict = {v: {"fps": [], "base_position_error_m": [], "joint_error_rad": []} for v in names}
            for _ in range(args.reps):
                for v in names:
                    with tempfile.TemporaryDirectory() as tmp:
                        out = track_source(path, Path(tmp), robot, config=replace(config, **{field: v}),
                                           options=options)
                    for k in runs[v]:
                        runs[v][k].append(float(out[k]))
            clip = result["clips"][path.name] = {names[v]: {k: [round(x, 6) for x in vals] for k, vals in r.items()}
                                                 for v, r in runs.items()}
            clip["fps_ratio"] = round(float(np.mean(runs[value]["fps"]) / np.mean(runs[reference]["fps"])), 4)
    return result


BENCHMARK = Benchmark("refine-settings", "a refinement setting (helpers, coarse) against its reference, alternated "
                      "in one process", add_arguments, run,
                      quick={"scenes": ["static"], "robots": ["arcsnake-4"], "frames": 6, "reps": 1})
