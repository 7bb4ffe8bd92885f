"""Whether a segmenter places the robot alike wherever it lies in the frame.

    snaketrack bench seg-position MODEL.pt DATASET [--frames 5] [--shifts -180,-120,...]

Each of ``--frames`` frames of a dataset with truth masks (evenly spaced) is moved sideways by each
of ``--shifts`` pixels (borders reflected, the truth moved with it) and segmented at scale 1 with one
pass (no flips, no robot-piece rule, no edge step: the network's own mask). Gives, for each shift,
the robot's mean column, the predicted mask's centroid minus the truth's (x, y) [px, over predicted
pixels within 4 px of the truth] and the IoU; and the slope of the x offset against the robot's
column [px/px]. A translation-equivariant network gives the same offset at every shift (slope 0);
corner-aligned upsampling makes the offset drift by about 3 px across the frame (3/640 ≈ 0.005).
Shifts that push more than a tenth of the robot out of the frame are left out.
"""
from __future__ import annotations

import argparse

import numpy as np

from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("model")
    ap.add_argument("dataset")
    ap.add_argument("--frames", type=int, default=5, help="frames moved and segmented")
    ap.add_argument("--shifts", default="-180,-120,-60,0,60,120,180", help="sideways moves [px], comma-separated")
    ap.add_argument("--threads", type=int, default=1)


def run(args: argparse.Namespace) -> dict:
    import cv2  # deferred: snaketrack bench --list imports none of a benchmark's work
    import torch

    from snaketrack.datasets.layout import Dataset
    from snaketrack.masks import mask_iou
    from snaketrack.training.model import load_model
    from snaketrack.training.segmenter import Segmenter

    torch.set_num_threads(args.threads)
    model, config, _ = load_model(args.model)
    seg = Segmenter(model, config, scale=1.0, flips=1, region=False, edges=False)
    ds = Dataset(args.dataset)
    if not len(ds) or not ds.has_masks:
        raise InputError(f"{args.dataset}: expected a dataset with frames/ and masks/")
    picks = np.linspace(0, len(ds) - 1, args.frames).round().astype(int)
    pairs = [(ds.frame(i), ds.mask(i)) for i in picks]
    near = np.ones((9, 9), np.uint8)
    rows = []
    for sx in (int(s) for s in args.shifts.split(",")):
        offsets, ious, columns = [], [], []
        for rgb, truth in pairs:
            h, w = truth.shape
            M = np.float32([[1, 0, sx], [0, 1, 0]])
            moved = cv2.warpAffine(rgb, M, (w, h), borderMode=cv2.BORDER_REFLECT_101)
            t = cv2.warpAffine(truth.astype(np.uint8), M, (w, h), flags=cv2.INTER_NEAREST, borderValue=0) > 0
            if t.sum() < 0.9 * truth.sum():
                continue
            p = seg.predict(moved)
            ty, tx = np.nonzero(t)
            py, px = np.nonzero(p & (cv2.dilate(t.astype(np.uint8), near) > 0))
            if px.size == 0:
                continue
            offsets.append([px.mean() - tx.mean(), py.mean() - ty.mean()])
            ious.append(mask_iou(p, t))
            columns.append(tx.mean())
        if offsets:
            d = np.mean(offsets, axis=0)
            rows.append({"shift_px": sx, "robot_column_px": round(float(np.mean(columns)), 1),
                         "offset_x_px": round(float(d[0]), 3), "offset_y_px": round(float(d[1]), 3),
                         "iou": round(float(np.mean(ious)), 4), "frames": len(offsets)})
    slope = None
    if len(rows) >= 2:
        slope = float(np.polyfit([r["robot_column_px"] for r in rows], [r["offset_x_px"] for r in rows], 1)[0])
    return {"model": args.model, "dataset": args.dataset, "align_corners": config.align_corners,
            "shifts": rows, "offset_x_slope_px_per_px": None if slope is None else round(slope, 5)}


BENCHMARK = Benchmark("seg-position", "whether a segmenter places the robot alike wherever it lies in the frame",
                      add_arguments, run, quick={"frames": 1})
