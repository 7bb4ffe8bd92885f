"""What the true silhouette itself scores against the corrupted masks: the ceiling of the tracker's ``iou``.

For each dataset (``snaketrack sim video``), every ``--step``-th frame's
truth mask is corrupted as ``snaketrack track --corrupt-masks`` does and
compared with the truth mask grown or shrunk by its best uniform edge offset
(:mod:`snaketrack.tracker.ceiling`). Prints one JSON line per dataset:
``iou_plain``, ``iou_ceiling``, ``frac_frames_ceiling_ge_0_9``,
``body_width_px``, with ``--model`` ``iou_model_ceiling`` (the tracker's
silhouette model rendered at the true pose) and, with ``--track DIR``, the
tracker's own mean ``iou`` from ``DIR/<dataset name>/track.csv`` beside it
(``tracker_iou``).

    .venv/bin/python scripts/measure_iou_ceiling.py bench_data/handheld-arcsnake-s0 [...] [--step 1]
        [--model] [--track bench_out/tracker]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.errors import SnaketrackError  # noqa: E402
from snaketrack.tracker.ceiling import measure_iou_ceiling  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--model", action="store_true",
                    help="also the tracker's silhouette model at the true pose (needs truth.jsonl)")
    ap.add_argument("--track", type=Path, default=None,
                    help="folder of tracks (DIR/<dataset name>/track.csv) whose mean iou to print beside")
    args = ap.parse_args(argv)
    if args.step < 1:
        ap.error(f"--step {args.step}: expected a positive integer")
    for path in args.datasets:
        csv = None if args.track is None else args.track / path.name / "track.csv"
        try:
            res = measure_iou_ceiling(path, args.step, model=args.model,
                                      track=csv if csv is not None and csv.is_file() else None)
        except SnaketrackError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    cv2.setNumThreads(1)
    sys.exit(main())
