"""Measure the GrabCut labeller against truth masks on synthetic videos, in process.

The labeller is what ``snaketrack label`` runs by default without SAM weights: GrabCut guided by where
the video moves (``--no-motion``: from the box and colours alone).

For each video: frame 0 is prompted with the truth mask's box grown by
``--box-margin`` pixels (the stand-in for the user's box, as in
``snaketrack bench labels``); every later frame with the labeller's own
propagated box. Truth masks are read only for that first box and for
scoring. Nothing is written to disk. Prints per video the mean IoU, the
number of flagged frames and ms per frame.

    snaketrack bench label-errors --videos DATA/drone-planar-s0 --set iterations=6
"""
from __future__ import annotations

import argparse
import ast
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

from snaketrack.bench.cache import cache_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError

#: the tracker benchmark's clips, in the benchmark cache (rendered by ``snaketrack bench tracker``)
DEFAULT_CLIPS = ["drone-planar-s0", "static-planar-s0", "handheld-planar-s0", "drone-arcsnake-s0",
                 "handheld-arcsnake-s0", "static-arcsnake-s0"]


def _overrides(pairs: list[str], cls) -> dict:
    names = {f.name for f in fields(cls)}
    out = {}
    for p in pairs:
        k, _, v = p.partition("=")
        if k not in names:
            raise InputError(f"--set {p}: {cls.__name__} has no field {k!r}; fields: {sorted(names)}")
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k] = v
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--videos", nargs="+", default=None,
                    help="dataset folders with truth masks (default: the tracker benchmark's six clips in the cache)")
    ap.add_argument("--frames", type=int, default=None, help="first N frames of each video (default all)")
    ap.add_argument("--box-margin", type=int, default=5)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="GrabCutConfig overrides")
    ap.add_argument("--label-set", nargs="*", default=[], metavar="KEY=VALUE", help="LabelConfig overrides")
    ap.add_argument("--threads", type=int, default=1, help="cv2.setNumThreads")
    ap.add_argument("--per-frame", action="store_true", help="also list per-frame IoU in the JSON")
    ap.add_argument("--no-motion", action="store_true", help="GrabCut from the box and colours alone")


def run(args: argparse.Namespace) -> dict:
    import cv2
    import numpy as np

    from snaketrack.datasets.boxes import mask_to_box
    from snaketrack.datasets.grabcut_backend import GrabCutBackend, GrabCutConfig
    from snaketrack.datasets.layout import Dataset
    from snaketrack.datasets.motion_backend import MotionGuidedBackend
    from snaketrack.datasets.video import open_frames
    from snaketrack.labelling.label import LabelConfig, Labeller
    from snaketrack.masks import mask_iou

    cv2.setNumThreads(args.threads)
    gcfg = GrabCutConfig(**_overrides(args.set, GrabCutConfig))
    lcfg = LabelConfig(**_overrides(args.label_set, LabelConfig))
    result = {"grabcut_config": asdict(gcfg), "label_config": asdict(lcfg), "motion": not args.no_motion,
              "videos": {}}
    for v in args.videos or [str(cache_dir() / name) for name in DEFAULT_CLIPS]:
        ds = Dataset(v)
        n = len(ds) if args.frames is None else min(args.frames, len(ds))
        box = mask_to_box(ds.mask(0)).expand(args.box_margin).clip(ds.width, ds.height)
        backend = GrabCutBackend(gcfg) if args.no_motion else \
            MotionGuidedBackend(open_frames(v), grabcut=GrabCutBackend(gcfg))
        lab = Labeller(backend, lcfg)
        ious, flagged, secs = [], 0, 0.0
        for i in range(n):
            rgb = ds.frame(i)
            t0 = time.perf_counter()
            if not args.no_motion:
                backend.seek(i)
            fl = lab.start(rgb, box) if i == 0 else lab.step(rgb)
            secs += time.perf_counter() - t0
            ious.append(mask_iou(fl.mask, ds.mask(i)))
            flagged += bool(fl.flags)
        r = {"frames": n, "mean_iou": float(np.mean(ious)), "min_iou": float(np.min(ious)),
             "frac_below_0_7": float(np.mean(np.array(ious) < 0.7)), "flagged": flagged,
             "ms_per_frame": 1000 * secs / n}
        if args.per_frame:
            r["iou"] = [round(x, 3) for x in ious]
        result["videos"][Path(v).name] = r
        print(f"{Path(v).name}: mean IoU {r['mean_iou']:.4f}, min {r['min_iou']:.3f}, flagged {flagged}, "
              f"{r['ms_per_frame']:.0f} ms/frame", file=sys.stderr, flush=True)
    result["mean_iou_all"] = float(np.mean([r["mean_iou"] for r in result["videos"].values()]))
    return result


BENCHMARK = Benchmark("label-errors", "the GrabCut labeller against truth masks on synthetic videos, in process",
                      add_arguments, run, quick={"frames": 5})
