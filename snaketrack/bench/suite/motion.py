"""Benchmark: the labeller's motion map, each pair of frames matched once against each direction afresh;
with ``--labeller``, the default labeller with its motion maps made ahead against made in turn.

:class:`~snaketrack.datasets.motion.MotionMap` registers a frame's neighbours onto it by homographies of
cross-checked ORB matches. Frame ``i``'s plate needs ``i + k`` matched against ``i``, and ``i + k``'s
needs ``i`` against ``i + k``: the map matches each pair once (:meth:`MotionMap.matches`). The reference
here matches every direction afresh, as ``BFMatcher.match`` and ``cv2.findHomography`` are called
directly. Both maps run over the same frames in one process, one OpenCV thread; the masks must be equal.

``--labeller``: ``snaketrack label``'s default (motion-guided GrabCut, labels fitted to the clip's robot,
from the truth mask's box on frame 0) labels each clip twice in one process, with the torch and OpenCV
threads it would have: as it runs, each frame's motion map made in a thread of its own while the frame
before is cut, fitted and written (:class:`~snaketrack.datasets.motion_backend.MotionGuidedBackend`),
and the reference, each map made when its frame is cut. The labels must be equal.

Clips are the label suite's (``snaketrack bench label-suite``), rendered into ``--data`` when missing.

    snaketrack bench motion --frames 60
    snaketrack bench motion --labeller --frames 60
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError


def suite_specs(clips: str) -> list[tuple]:
    """The label suite's clips whose names hold one of the comma-separated substrings ``clips``."""
    from snaketrack.bench.suite.label_suite import SUITE, clip_name

    specs = [s for s in SUITE if any(c in clip_name(*s) for c in clips.split(","))]
    if not specs:
        raise InputError(f"--clips {clips}: no label-suite clip matches")
    return specs


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=None,
                    help="folder of the label suite's clips (default: the benchmark cache's label-suite/)")
    ap.add_argument("--clips", default="handheld-planar-grass,drone-arcsnake-gravel,static-planar-brick",
                    help="comma-separated substrings of suite clip names")
    ap.add_argument("--frames", type=int, default=60, help="frames a clip, from its first")
    ap.add_argument("--labeller", action="store_true", help="time the default labeller, maps made ahead "
                    "against made in turn")
    ap.add_argument("--threads", type=int, default=None, help="with --labeller: torch's threads (default: "
                    "snaketrack label's, one; 0: torch's own, one a core)")


def run(args: argparse.Namespace) -> dict:
    import cv2
    import numpy as np

    from snaketrack.bench.suite.label_suite import render, suite_dir
    from snaketrack.datasets.layout import Dataset
    from snaketrack.datasets.motion import MotionMap

    class Afresh(MotionMap):
        """The reference: each direction of each pair matched afresh."""

        def homography(self, j, i):
            (_, kj, dj), (_, ki, di) = self._get(j), self._get(i)
            if dj is None or di is None:
                return None
            found = self._matcher.match(dj, di)
            if len(found) < self.config.min_matches:
                return None
            src = np.float32([kj[m.queryIdx].pt for m in found])
            dst = np.float32([ki[m.trainIdx].pt for m in found])
            return cv2.findHomography(src, dst, cv2.RANSAC, self.config.ransac_px)[0]

    if args.labeller:
        return labeller(args)
    cv2.setNumThreads(1)
    rows = {}
    for spec in suite_specs(args.clips):
        root = render(Path(args.data) if args.data else suite_dir(), spec, max(args.frames, 200))
        ds = Dataset(root)
        frames = [ds.frame(i) for i in range(len(ds))]
        n = min(args.frames, len(frames))
        times, masks = {}, {}
        for name, cls in (("afresh", Afresh), ("pairs_once", MotionMap)):
            m = cls(lambda i, f=frames: f[i] if 0 <= i < len(f) else None, len(frames), fps=ds.fps)
            t0 = time.perf_counter()
            masks[name] = [m.motion(i) for i in range(n)]
            times[name] = time.perf_counter() - t0
        equal = all((a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
                    for a, b in zip(masks["afresh"], masks["pairs_once"]))
        rows[root.name] = {"frames": n, "afresh_ms": round(1000 * times["afresh"] / n, 1),
                           "pairs_once_ms": round(1000 * times["pairs_once"] / n, 1),
                           "speedup_x": round(times["afresh"] / times["pairs_once"], 3), "masks_equal": equal}
        print(root.name, rows[root.name], file=sys.stderr, flush=True)
    return {"clips": rows, "opencv_threads": 1}

def labeller(args) -> dict:
    import shutil
    import tempfile

    import numpy as np
    import torch

    from snaketrack.bench.suite.label_suite import render, suite_dir
    from snaketrack.datasets.boxes import mask_to_box
    from snaketrack.datasets.layout import Dataset
    from snaketrack.datasets.video import open_frames
    from snaketrack.labelling.backends import build_backend
    from snaketrack.labelling.label import LabelConfig, label_video
    from snaketrack.threads import LABEL_THREADS

    specs = suite_specs(args.clips)
    if args.threads != 0:
        torch.set_num_threads(args.threads or LABEL_THREADS)
    rows = {}
    work = Path(tempfile.mkdtemp(prefix="bench_motion_"))
    try:
        for spec in specs:
            root = render(Path(args.data) if args.data else suite_dir(), spec, max(args.frames, 200))
            truth = Dataset(root)
            box = mask_to_box(truth.mask(0)).clip(truth.width, truth.height)
            times, labels = {}, {}
            for name in ("in_turn", "ahead"):
                source = open_frames(str(root))
                backend = build_backend("default", source, fit=None)
                guided = backend.backend  # the fit wraps the motion-guided cut
                if name == "in_turn":
                    guided.maps = guided._make  # each frame's maps made when it is cut, nothing ahead
                t0 = time.perf_counter()
                label_video(source, work / name / root.name, backend, box, LabelConfig(), max_frames=args.frames,
                            progress=False)
                times[name] = time.perf_counter() - t0
                out = Dataset(work / name / root.name)
                labels[name] = [out.mask(i) for i in range(len(out))]
            equal = len(labels["in_turn"]) == len(labels["ahead"]) and all(
                np.array_equal(a, b) for a, b in zip(labels["in_turn"], labels["ahead"]))
            n = len(labels["ahead"])
            rows[root.name] = {"frames": n, "in_turn_ms": round(1000 * times["in_turn"] / n, 1),
                               "ahead_ms": round(1000 * times["ahead"] / n, 1),
                               "speedup_x": round(times["in_turn"] / times["ahead"], 3), "labels_equal": equal}
            print(root.name, rows[root.name], file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"clips": rows, "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count()}


BENCHMARK = Benchmark("motion", "the labeller's motion map: frame pairs matched once against afresh (--labeller: maps "
                      "made ahead)",
                      add_arguments, run, quick={"frames": 3, "clips": "static-planar-brick"})
