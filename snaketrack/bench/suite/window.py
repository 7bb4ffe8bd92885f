"""The live segmenter's window, setting by setting: time and IoU over whole clips followed in order.

For each ``--window`` setting (keyword arguments of :class:`snaketrack.training.window.Window`, as JSON;
``{}`` is the default window), the ``live`` setting of ``--model`` segments every frame of each clip in
order, twice: the first pass compiles each input size the engine meets, the second is timed (mean ms per
frame, its whole-frame passes included). Its masks are scored against the clip's truth masks on every
frame and on every ``--every``-th (the frames ``snaketrack bench segmenter`` scores), with the worst
frame, and the counts of frames segmented in a window and whole. ``--accurate`` also scores the
``accurate`` setting on every ``--every``-th frame (≈ 2 s a frame on two cores), for the difference
the live target is about.

``--first-pass N`` measures instead what a live run meets at its start: N times in turn, a freshly
loaded ``live`` segmenter (nothing compiled but the whole frame's size) segments each clip once in order,
its window waiting for each new input size to compile (``wait``) or taking a larger compiled window while
the engine compiles the new size in the background (``background``, the default); per-frame latency
(median, p99, max, frames over 250 ms, the median of the frames segmented whole), the pass's time and
its IoU.

Usage::

    snaketrack bench window --model MODEL.pt --videos CLIP[,CLIP…] --threads 2 [--accurate] \\
        [--window NAME='{"margin_px": 24, "margin_frac": 0.15, "steps": 4, "keep": 0}' …]
    snaketrack bench window --model MODEL.pt --videos CLIP[,CLIP…] --threads 2 --first-pass 3 \\
        [--frames 200]

Prints one JSON line per clip and setting on stderr; the result holds one object per clip (``clips``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark


def measure(seg, frames, truth, every: int) -> dict:
    """Mean ms per frame of a second pass of ``seg.predict`` over ``frames`` in order, and IoU of its masks."""
    import numpy as np

    from snaketrack.masks import mask_iou

    ms = []
    for _ in range(2):
        seg.reset()
        seg.window.windows = seg.window.searches = 0
        t = time.perf_counter()
        masks = [seg.predict(f) for f in frames]
        ms.append(1000 * (time.perf_counter() - t) / len(frames))
    ious = [mask_iou(m, t) for m, t in zip(masks, truth)]
    return {"ms": round(ms[1], 1), "first_pass_ms": round(ms[0], 1), "fps": round(1000 / ms[1], 1),
            "iou": round(float(np.mean(ious)), 4), f"iou_every{every}": round(float(np.mean(ious[::every])), 4),
            "worst": round(float(np.min(ious)), 3), "window_frames": seg.window.windows,
            "whole_frames": seg.window.searches}


def first_pass(model: str, frames, truth, background: bool) -> dict:
    """Per-frame latency [ms] and IoU of a freshly loaded ``live`` segmenter's one pass over ``frames``;
    ``background``: whether its window takes a compiled larger size while a new one compiles."""
    import numpy as np

    from snaketrack.masks import mask_iou
    from snaketrack.training.segmenter import load_segmenter

    seg = load_segmenter(model, setting="live", wait=not background)
    ms, masks, whole = [], [], []
    for f in frames:
        searches, t = seg.window.searches, time.perf_counter()
        masks.append(seg.predict(f))
        ms.append(1000 * (time.perf_counter() - t))
        whole.append(seg.window.searches > searches)
    ms = np.array(ms)
    network = seg.network
    return {"median_ms": round(float(np.median(ms)), 1), "p99_ms": round(float(np.percentile(ms, 99)), 1),
            "max_ms": round(float(ms.max()), 1), "frames_over_250ms": int((ms > 250).sum()),
            "whole_frame_median_ms": round(float(np.median(ms[np.array(whole)])), 1),
            "pass_s": round(float(ms.sum()) / 1000, 2),
            "iou": round(float(np.mean([mask_iou(m, t) for m, t in zip(masks, truth)])), 4),
            "sizes_compiled": len(getattr(network, "requests", {})), "window_frames": seg.window.windows,
            "whole_frames": seg.window.searches}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", required=True, help="a model file written by snaketrack train")
    ap.add_argument("--videos", required=True, help="dataset folders with truth masks, comma-separated")
    ap.add_argument("--window", action="append", default=[], metavar="NAME=JSON",
                    help="a window setting to measure (repeatable; default: the default window only)")
    ap.add_argument("--every", type=int, default=8, help="also score every K-th frame (default 8)")
    ap.add_argument("--accurate", action="store_true", help="score the accurate setting on every K-th frame")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--first-pass", type=int, default=0, metavar="N",
                    help="measure a fresh segmenter's first pass, waiting for each new size and not, N times each")
    ap.add_argument("--frames", type=int, default=None, help="the first N frames of each clip (default all)")


def run(args: argparse.Namespace) -> dict:
    import torch

    from snaketrack.datasets.layout import Dataset
    from snaketrack.training.evaluate import evaluate_segmenter
    from snaketrack.training.segmenter import load_segmenter
    from snaketrack.training.window import Window

    if args.threads:
        torch.set_num_threads(args.threads)
    windows = {"default": {}}
    if args.window:
        windows = {}
        for item in args.window:
            name, _, text = item.partition("=")
            windows[name] = json.loads(text)
    out = []
    for clip in args.videos.split(","):
        ds = Dataset(clip)
        n = min(len(ds), args.frames or len(ds))
        frames = [ds.frame(i) for i in range(n)]
        truth = [ds.mask(i) for i in range(n)]
        res: dict[str, object] = {"clip": Path(clip).name, "frames": len(frames)}
        if args.first_pass:
            runs: dict[str, list] = {"wait": [], "background": []}
            for _ in range(args.first_pass):
                for name in runs:
                    runs[name].append(first_pass(args.model, frames, truth, background=name == "background"))
                    print(json.dumps({res["clip"]: {name: runs[name][-1]}}), file=sys.stderr, flush=True)
            out.append({**res, **runs})
            continue
        if args.accurate:
            acc = evaluate_segmenter(load_segmenter(args.model, setting="accurate"), clip,
                                     frames=range(0, len(frames), args.every))
            res[f"accurate_iou_every{args.every}"] = round(acc["iou"], 4)
        seg = load_segmenter(args.model, setting="live")
        for name, kw in windows.items():
            seg.window = Window(seg.size, **kw)
            res[name] = measure(seg, frames, truth, args.every)
            print(json.dumps({res["clip"]: {name: res[name]}}), file=sys.stderr, flush=True)
        out.append(res)
    return {"clips": out}


BENCHMARK = Benchmark("window", "the live segmenter's window, setting by setting: time and IoU over whole clips "
                      "followed in order", add_arguments, run, quick={"every": 10})
