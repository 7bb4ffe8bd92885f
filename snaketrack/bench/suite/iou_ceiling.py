"""What the true silhouette itself scores against the corrupted masks: the ceiling of the tracker's ``iou``.

For each dataset (``snaketrack sim video``), every ``--step``-th frame's
truth mask is corrupted as ``snaketrack track --corrupt-masks`` does and
compared with the truth mask grown or shrunk by its best uniform edge offset
(:mod:`snaketrack.bench.ceiling`). Gives per dataset, in ``datasets``:
``iou_plain``, ``iou_ceiling``, ``frac_frames_ceiling_ge_0_9``,
``body_width_px``, with ``--model`` ``iou_model_ceiling`` (the tracker's
silhouette model rendered at the true pose) and, with ``--track DIR``, the
tracker's own mean ``iou`` from ``DIR/<dataset name>/track.csv`` beside it
(``tracker_iou``).

    snaketrack bench iou-ceiling DATASET [...] [--step 1] [--model] [--track bench_out/tracker]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--model", action="store_true",
                    help="also the tracker's silhouette model at the true pose (needs truth.jsonl)")
    ap.add_argument("--track", type=Path, default=None,
                    help="folder of tracks (DIR/<dataset name>/track.csv) whose mean iou to print beside")


def run(args: argparse.Namespace) -> dict:
    import cv2

    from snaketrack.bench.ceiling import measure_iou_ceiling
    from snaketrack.errors import InputError

    if args.step < 1:
        raise InputError(f"--step {args.step}: expected a positive integer")
    cv2.setNumThreads(1)
    out = []
    for path in args.datasets:
        csv = None if args.track is None else args.track / path.name / "track.csv"
        out.append(measure_iou_ceiling(path, args.step, model=args.model,
                                       track=csv if csv is not None and csv.is_file() else None))
    return {"datasets": out}


BENCHMARK = Benchmark("iou-ceiling", "what the true silhouette scores against the corrupted masks: the ceiling of the"
                      " tracker's iou", add_arguments, run, quick={"step": 30})
