"""Mean IoU of a segmenter (or of any masks) against a dataset's masks.

IoU = |A ∩ B| / |A ∪ B| per frame (1.0 when both masks are empty), then
averaged over frames — the metric of eq. (10) of *Tracking Snake-like Robots in the Wild using only
a Single Camera*.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np
from tqdm import tqdm

from snaketrack.datasets.layout import Dataset
from snaketrack.errors import FileFormatError, InputError
from snaketrack.masks import mask_iou


def mean_iou(pred: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> float:
    """Mean per-frame IoU of two equally long sequences of bool masks (H, W).

    >>> a = np.zeros((2, 4, 4), bool); a[:, :2] = True
    >>> b = np.zeros((2, 4, 4), bool); b[:, :1] = True
    >>> mean_iou(a, b)
    0.5
    """
    if len(pred) != len(truth):
        raise FileFormatError(f"{len(pred)} predicted masks vs {len(truth)} truth masks")
    return float(np.mean([mask_iou(p, t) for p, t in zip(pred, truth)])) if len(pred) else float("nan")


def evaluate_segmenter(segmenter, dataset: str | os.PathLike, batch_size: int = 4,
                       frames: Optional[Sequence[int]] = None, progress: bool = False) -> dict:
    """``{"iou": mean IoU, "frames": n, "iou_per_frame": [...]}`` of ``segmenter`` on a dataset's masks,
    over ``frames`` (None: all). A segmenter that follows the robot in a window (both settings by default)
    forgets any earlier video and segments every frame from the first to the last of ``frames`` in order,
    as a video gives them; only ``frames`` are scored."""
    if int(batch_size) < 1:
        raise InputError(f"--batch-size {batch_size}: expected a positive number of frames")
    ds = Dataset(dataset)
    if not ds.has_masks:
        raise FileFormatError(f"{dataset}: no masks/ to compare with")
    idx = list(range(len(ds))) if frames is None else list(frames)
    scored = set(idx)
    if getattr(segmenter, "window", None) is not None:
        segmenter.reset()
        if idx:
            idx = list(range(min(idx), max(idx) + 1))
    ious: list[float] = []
    for s in tqdm(range(0, len(idx), batch_size), desc="eval-seg", unit="batch", disable=not progress):
        chunk = idx[s:s + batch_size]
        pred = segmenter.predict_batch([ds.frame(i) for i in chunk])
        for p, i in zip(pred, chunk):
            if i not in scored:
                continue
            t = ds.mask(i)
            if t is None:
                raise FileFormatError(f"{dataset}: frame {i} has no mask")
            ious.append(mask_iou(p, t))
    return {"iou": float(np.mean(ious)) if ious else float("nan"), "frames": len(ious), "iou_per_frame": ious}


def evaluate_dataset_masks(pred_root: str | os.PathLike, truth_root: str | os.PathLike) -> dict:
    """Mean IoU of one dataset's masks (e.g. auto-labels) against another's (e.g. truth), frame by frame."""
    a, b = Dataset(pred_root), Dataset(truth_root)
    n = min(len(a), len(b))
    ious = []
    for i in range(n):
        pa, pb = a.mask(i), b.mask(i)
        if pa is None or pb is None:
            raise FileFormatError(f"frame {i}: mask missing in {pred_root if pa is None else truth_root}")
        ious.append(mask_iou(pa, pb))
    return {"iou": float(np.mean(ious)) if ious else float("nan"), "frames": n, "iou_per_frame": ious}
