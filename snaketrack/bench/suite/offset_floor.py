"""The edge offset's floor, measured: each clip tracked with ``RefineConfig.offset_floor`` unbounded and at
the given fractions of the body's smallest projected radius.

The refinement fits an edge offset ``b`` [px] that grows or shrinks the model's silhouette by a constant
width (mask bias). An empty silhouette costs nothing, so on a mask eroded to fragments an unbounded
``b`` shrinks a thin body away, the fit says nothing, and the tracker falls back on its search (seconds
a frame). The floor keeps ``b`` above ``−offset_floor`` × the smallest projected radius.

Each clip (a dataset with truth, e.g. ``snaketrack sim video --width 320 --height 180 --body-width-px 6``)
is tracked with corrupted masks (``--corrupt-masks``), torch on one thread, otherwise as ``snaketrack
track`` tracks it, once per floor. Reported per clip and floor: joint and base errors, the IoU of the
rendered silhouette against the truth mask, the time spent in searches and the whole track's time.

Usage::

    snaketrack bench offset-floor DATASET [DATASET ...]
        [--floors inf 0.85] [--max-frames N]

Prints a table per clip on stderr.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from snaketrack.bench.registry import Benchmark


def track_with_floor(clip: str, floor: float, max_frames: int | None = None) -> dict:
    """Track ``clip`` with corrupted masks and the edge offset's floor ``floor`` (inf: unbounded)."""
    import numpy as np

    from snaketrack.tracker.reading import ReadingHold
    from snaketrack.tracker.run.evaluation import tracking_metrics
    from snaketrack.tracker.run.loop import open_session, step_frames
    from snaketrack.tracker.run.pipeline import PipelineConfig
    from snaketrack.tracker.tracker import Tracker

    frames, session, masks = open_session(clip, config=PipelineConfig(corrupt_masks=True))
    session.start()
    t = session.tracker
    config = replace(t.config, refine=replace(t.config.refine, offset_floor=float(floor)))
    session.tracker = Tracker(session.robot, session.camera.K, *session.size, fps=session.fps, config=config)
    session.hold = ReadingHold(session.tracker, session.config.hold_frames)
    rows = []
    t0 = time.perf_counter()
    for results in step_frames(frames, session, masks, stop=max_frames):
        rows += [r.row for r in results]
    rows += [r.row for r in session.close()]
    wall = time.perf_counter() - t0
    columns = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    m = tracking_metrics(columns, frames.truth, session.robot.dof)
    return {"joint_error_rad": m["joint_error_rad"], "base_position_error_m": m["base_position_error_m"],
            "iou_truth": m["iou_truth"], "search_s": session.search_time_s, "track_s": wall}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("datasets", nargs="+", help="dataset folders with truth")
    ap.add_argument("--floors", nargs="+", type=float, default=[float("inf"), 0.85],
                    help="offset floors, fractions of the smallest projected radius (inf: unbounded)")
    ap.add_argument("--max-frames", type=int, default=None, help="track only the first N frames")


def run(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(1)
    result = {}
    for clip in args.datasets:
        name = Path(clip).name
        result[name] = {}
        print(f"{name}: floor, joints [rad], base [m], IoU with truth, search [s], track [s]", file=sys.stderr)
        for floor in args.floors:
            r = track_with_floor(clip, floor, args.max_frames)
            result[name][str(floor)] = {k: round(float(v), 4) for k, v in r.items()}
            print(f"  {floor:>5}  {r['joint_error_rad']:.4f}  {r['base_position_error_m']:.3f}  "
                  f"{r['iou_truth']:.3f}  {r['search_s']:6.1f}  {r['track_s']:6.1f}", file=sys.stderr, flush=True)
    return result


BENCHMARK = Benchmark("offset-floor", "the edge offset's floor: each clip tracked with it unbounded and at fractions "
                      "of the body's radius",
                      add_arguments, run, quick={"max_frames": 5, "floors": [0.85]})
