"""The tracker's CPU time per frame across the robot's width in the image: the refinement's fast core
(the compiled kernel and the width budget) beside the torch reference, in one process.

For each nominal width W [px] the clip ``{scene}-{robot}-s{seed}-w{W}`` (:mod:`snaketrack.bench.body_width`;
rendered into ``--data`` when absent; W = 11 is the benchmark's clip, taken from ``--reuse``) is tracked
as ``snaketrack bench tracker`` tracks its clips, for ``--frames`` frames at ``--threads`` torch threads,
once per core (``--cores``, e.g. ``torch:0`` for the reference: the torch renderer on the image's own
pixels, and ``auto:12``: the compiled kernel, the image on blocks for a body wider than 12 px).

With ``--scales`` the benchmark's own clip is tracked at ``--scales`` × its size instead (``track_size``:
frames and masks resized, K scaled), so the body's width and the image's size grow together and no clip
is rendered. Per run:
``cpu_ms_per_frame`` (the process's CPU time over the run, reading and outputs included, per frame: on a
shared machine the wall clock also counts the waits for a core), ``fps`` (wall clock, as the tracker
benchmark reports it), the base and joint errors, and the clip's median ``body_width_px``. The cores alternate
clip by clip, so each pair ran under the same load.

    snaketrack bench refine-width --widths 9 11 16 22 34
        [--scene drone] [--robot planar-snake-11] [--frames 90] [--threads 1] [--cores torch:0 auto:12]
        [--data DIR] [--reuse DIR]
    snaketrack bench refine-width --scales 0.8 1 1.5 2 3 --scene static
        --robot arcsnake-4 [--reuse DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from snaketrack.bench.cache import cache_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--widths", nargs="+", type=float, default=[9.0, 11.0, 16.0, 22.0, 34.0])
    ap.add_argument("--scales", nargs="+", type=float, default=None,
                    help="track the benchmark's clip at these multiples of its size instead of rendering widths")
    ap.add_argument("--scene", default="drone", choices=["static", "handheld", "drone"])
    ap.add_argument("--robot", default="planar-snake-11")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cores", nargs="+", default=["torch:0", "auto:12"],
                    help="CORE:BUDGET pairs (refine core auto|compiled|torch, width budget [px], 0: none)")
    ap.add_argument("--data", type=Path, default=None,
                    help="folder of the clips of other widths (default: the benchmark cache's width/)")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="folder of the benchmark's clips, W = 11 (default: the benchmark cache)")


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.bench.body_width import ensure_clip, median_body_width
    from snaketrack.bench.tracking import bench_options, dataset_dir, ensure_dataset
    from snaketrack.io import read_json
    from snaketrack.tracker.run.loop import track_source

    torch.set_num_threads(max(1, args.threads))
    try:
        cores = [(c.split(":")[0], float(c.split(":")[1])) for c in args.cores]
    except (IndexError, ValueError):
        raise InputError(f"--cores {' '.join(args.cores)}: expected CORE:BUDGET pairs, e.g. torch:0 auto:12") from None
    data = args.data if args.data is not None else cache_dir() / "width"
    reuse = args.reuse if args.reuse is not None else cache_dir()
    runs = []
    for width, scale in ([(w, 1.0) for w in args.widths] if args.scales is None else
                         [(11.0, s) for s in args.scales]):
        if args.scales is None:
            ds = ensure_clip(data, args.scene, args.robot, args.seed, width, args.frames, reuse)
        else:
            ds = ensure_dataset(dataset_dir(reuse, args.scene, args.robot, args.seed), args.scene,
                                args.robot, args.seed, args.frames)
        meta = read_json(ds / "meta.json")
        seed = int(meta.get("seed", args.seed))
        body = median_body_width(ds, args.frames) * scale
        size = (int(round(meta["width"] * scale)), int(round(meta["height"] * scale)))
        for core, budget in cores:
            config, options = bench_options(args.scene, seed, args.frames)
            config = replace(config, refine_core=core, refine_budget_px=budget,
                             track_size=None if scale == 1.0 else size)
            with tempfile.TemporaryDirectory() as tmp:
                c0 = time.process_time()
                s = track_source(ds, Path(tmp), args.robot, config=config, options=options)
                cpu = time.process_time() - c0
            run = {"width": width, "scale": scale, "size": list(size), "body_width_px": body, "core": core,
                   "budget_px": budget,
                   "cpu_ms_per_frame": 1e3 * cpu / s["frames"], "fps": s["fps"], "frames": s["frames"],
                   "base_position_error_m": s.get("base_position_error_m"),
                   "joint_error_rad": s.get("joint_error_rad"), "iou": s.get("iou")}
            runs.append(run)
            print(json.dumps(run), file=sys.stderr)
    summary = {}
    for core, budget in cores:
        ms = [r["cpu_ms_per_frame"] for r in runs if r["core"] == core and r["budget_px"] == budget]
        summary[f"{core}:{budget:g}"] = {"cpu_ms_min": min(ms), "cpu_ms_max": max(ms),
                                         "max_over_min": max(ms) / min(ms)}
    return {"runs": runs, "summary": summary, "threads": torch.get_num_threads()}


BENCHMARK = Benchmark("refine-width", "the tracker's CPU time per frame across the robot's width in the image: the "
                      "refinement's fast core", add_arguments, run, quick={"frames": 5, "widths": [16.0]})
