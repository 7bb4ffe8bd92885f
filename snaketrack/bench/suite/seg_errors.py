"""Where a segmenter's errors lie on a dataset with masks: at the robot's edge or away from it.

    snaketrack bench seg-errors MODEL.pt DATASET [--every 10] [--band 2]

Gives the mean IoU and, as fractions of the union of predicted and
true pixels over the frames scored, the true positives, false pixels within
``--band`` px outside the true edge (a mask too fat) and farther out
(blobs), missed pixels within ``--band`` px inside the edge (too thin) and
deeper inside (holes), the number of far false blobs, and the five worst
frames.
"""
from __future__ import annotations

import argparse

import numpy as np

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("model")
    ap.add_argument("dataset")
    ap.add_argument("--every", type=int, default=10, help="score every k-th frame")
    ap.add_argument("--band", type=int, default=2, help="edge band half-width [px]")
    ap.add_argument("--threads", type=int, default=1)


def run(args: argparse.Namespace) -> dict:
    import cv2  # deferred: snaketrack bench --list imports none of a benchmark's work
    import torch

    from snaketrack.datasets.layout import Dataset
    from snaketrack.masks import mask_iou
    from snaketrack.training.segmenter import load_segmenter

    torch.set_num_threads(args.threads)
    seg, ds = load_segmenter(args.model), Dataset(args.dataset)
    k = np.ones((2 * args.band + 1,) * 2, np.uint8)
    acc = dict.fromkeys(("tp", "fp_edge", "fp_far", "fn_edge", "fn_deep"), 0)
    blobs, ious = 0, []
    for i in range(0, len(ds), args.every):
        p, t = seg.predict(ds.frame(i)), ds.mask(i) > 0
        outer = cv2.dilate(t.astype(np.uint8), k) > 0
        inner = cv2.erode(t.astype(np.uint8), k) > 0
        fp, fn = p & ~t, t & ~p
        acc["tp"] += int((p & t).sum())
        acc["fp_edge"] += int((fp & outer).sum())
        acc["fp_far"] += int((fp & ~outer).sum())
        acc["fn_edge"] += int((fn & ~inner).sum())
        acc["fn_deep"] += int((fn & inner).sum())
        blobs += cv2.connectedComponents((fp & ~outer).astype(np.uint8))[0] - 1
        ious.append((mask_iou(p, t), i))
    union = max(sum(acc.values()), 1)
    return {"model": args.model, "dataset": args.dataset, "frames": len(ious),
            "iou": float(np.mean([v for v, _ in ious])),
            **{key: round(v / union, 4) for key, v in acc.items()}, "fp_far_blobs": blobs,
            "worst": [(round(float(v), 3), i) for v, i in sorted(ious)[:5]]}


BENCHMARK = Benchmark("seg-errors", "where a segmenter's errors lie on a dataset with masks: at the robot's edge or "
                      "away from it", add_arguments, run, quick={"every": 50})
