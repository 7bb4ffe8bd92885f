"""Where a tracked frame's time goes: one benchmark clip tracked under cProfile, time grouped by stage.

Tracks ``--clip`` (a ``snaketrack sim video`` folder, or a video with ``--robot``) as
``snaketrack bench tracker`` tracks its clips (corrupted truth masks, the simulated IMU's up
direction, ``--static-camera`` / ``--track-ground`` by scene) for ``--frames`` frames at
``--threads`` torch intra-op threads, first without the profiler (the plain ms per frame) and then
under cProfile, which counts the process's CPU time (on a shared machine the wall clock also counts
the waits for a core). Each stage's row is the cumulative time of the functions that make it (nested
stages are listed indented and counted in their parent), per tracked frame [ms] and as a share of
the profiled run. cProfile adds a cost per Python call, so the Python-heavy stages read a little
high; ``plain_ms_per_frame`` is the figure without it.

    snaketrack bench profile-tracker --clip DATA/drone-planar-s0
        [--frames 120] [--threads 1] [--core auto] [--budget-width 12] [--top 0]

Prints the table on stderr.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark

#: Stages: (name, depth, [(file suffix, function name), ...]); a stage's time is the largest
#: cumulative time among its functions' entries (the outermost call).
STAGES = [
    ("read frame + truth mask", 0, [("run.py", "__call__"), ("layout.py", "frames"), ("layout.py", "mask")]),
    ("undistort / resize", 0, [("camera.py", "frame"), ("camera.py", "mask")]),
    ("corrupt mask", 0, [("corrupt.py", "__call__")]),
    ("ground tracker (moving camera)", 0, [("ground.py", "step")]),
    ("tracker.step", 0, [("tracker.py", "step"), ("tracker.py", "start")]),
    ("observe (weights, skeleton)", 1, [("observation.py", "observe")]),
    ("predict (filter)", 1, [("filter.py", "predict")]),
    ("cut weighting", 1, [("occlusion.py", "cut_weighted")]),
    ("refine (LM)", 1, [("refine.py", "_lm")]),
    ("point Jacobian (FK)", 2, [("refine.py", "_points_and_jac")]),
    ("render + Jacobian", 2, [("silhouette.py", "render_with_jacobian"),
                              ("silhouette.py", "render_with_jacobian_compiled")]),
    ("band pixels", 3, [("bands.py", "primitive_pixels"), ("render_kernel.py", "band_pairs")]),
    ("edge distances", 3, [("edges.py", "edge_px")]),
    ("edge derivatives", 3, [("edges.py", "edge_px_grads")]),
    ("compiled kernel: silhouette (edges, union)", 3, [("render_kernel.py", "silhouette_edges")]),
    ("compiled kernel: Jacobian rows (where used)", 3, [("render_kernel.py", "jacobian_rows")]),
    ("coverage term", 2, [("refine_terms.py", "coverage_terms"), ("coverage_kernel.py", "coverage_terms_compiled")]),
    ("up / ground terms", 2, [("refine_terms.py", "ground_terms")]),
    ("linear solve", 2, [("__init__", "solve"), ("~", "<built-in method torch._C._linalg.linalg_solve>")]),
    ("covariance (inverse)", 2, [("~", "<built-in method torch._C._linalg.linalg_inv>")]),
    ("final cost / IoU", 2, [("refine.py", "_cost_iou")]),
    ("search (first frame, re-acquisition)", 1, [("tracker.py", "initialise")]),
    ("filter update", 1, [("filter.py", "set_refined"), ("filter.py", "initialise")]),
    ("reading check", 1, [("tracker.py", "_check_reading")]),
    ("state record (FK of head)", 1, [("tracker.py", "_record")]),
    ("reading hold", 0, [("reading.py", "push"), ("reading.py", "flush")]),
    ("outputs: model mask, IoUs, row", 0, [("pipeline.py", "_finish")]),
    ("outputs: CSV writers", 0, [("outputs.py", "write"), ("quality.py", "write")]),
]


def _stage_times(stats: pstats.Stats) -> dict[str, float]:
    best: dict[str, float] = {}
    for (fname, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for name, _depth, funcs in STAGES:
            for suffix, fn in funcs:
                if func == fn and (fname.endswith(suffix) or (suffix == "~" and fname == "~")
                                   or (suffix == "__init__" and "linalg" in fname)):
                    best[name] = max(best.get(name, 0.0), ct)
    return best


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--clip", required=True, help="a snaketrack sim video folder (the benchmark's clips)")
    ap.add_argument("--robot", default=None, help="the robot, when the clip does not name it")
    ap.add_argument("--frames", type=int, default=120, help="frames tracked (default 120)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--core", default="auto", choices=["auto", "compiled", "torch"],
                    help="refinement's core (RefineConfig.core; default auto)")
    ap.add_argument("--budget-width", type=float, default=12.0,
                    help="refinement's width budget [px] (RefineConfig.budget_width_px; 0: none; default 12)")
    ap.add_argument("--stats-out", default=None, help="also write the raw cProfile statistics to this file")
    ap.add_argument("--top", type=int, default=0, help="also print the N functions of largest own time")


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.bench.tracking import bench_options
    from snaketrack.tracker.run.loop import track_source

    torch.set_num_threads(max(1, args.threads))
    clip = Path(args.clip)
    scene = clip.name.split("-")[0]
    if scene not in ("static", "handheld", "drone"):
        scene = "handheld"
    from snaketrack.io import read_json

    meta = read_json(clip / "meta.json") if (clip / "meta.json").is_file() else {}
    config, options = bench_options(scene, int(meta.get("seed", 0)), args.frames, refine_core=args.core,
                                    refine_budget_px=args.budget_width)
    robot = args.robot or meta.get("robot")
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        plain = track_source(clip, Path(tmp) / "plain", robot, config=config, options=options)
        plain_wall, plain_cpu = time.perf_counter() - t0, time.process_time() - c0
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        profiled = track_source(clip, Path(tmp) / "prof", robot, config=config, options=options)
        prof.disable()
    stats = pstats.Stats(prof, stream=sys.stderr)
    if args.stats_out:
        stats.dump_stats(args.stats_out)
    n = int(profiled["frames"])
    total = sum(tt for (_cc, _nc, tt, _ct, _c) in stats.stats.values())  # type: ignore[attr-defined]
    times = _stage_times(stats)
    rows = []
    print(f"{'stage':<44} {'ms/frame':>9} {'share':>6}", file=sys.stderr)
    for name, depth, _ in STAGES:
        t = times.get(name, 0.0)
        rows.append({"stage": name, "depth": depth, "ms_per_frame": 1e3 * t / n, "share": t / total})
        print(f"{'  ' * depth + name:<44} {1e3 * t / n:9.2f} {100 * t / total:5.1f}%", file=sys.stderr)
    print(f"{'profiled run, all':<44} {1e3 * total / n:9.2f}", file=sys.stderr)
    if args.top:
        stats.sort_stats("tottime").print_stats(args.top)
    return {"clip": str(clip), "frames": n, "threads": torch.get_num_threads(), "core": args.core,
            "budget_width_px": args.budget_width,
            "plain_fps": plain["fps"], "plain_ms_per_frame": 1e3 / plain["fps"],
            "plain_wall_s": plain_wall,
            "plain_cpu_s": plain_cpu, "profiled_ms_per_frame": 1e3 * total / n,
            "base_position_error_m": plain.get("base_position_error_m"),
            "joint_error_rad": plain.get("joint_error_rad"), "stages": rows}


BENCHMARK = Benchmark("profile-tracker", "where the tracker's time goes per frame, by stage (cProfile over one clip)",
                      add_arguments, run, quick={"frames": 5})
