"""How the tracker's accuracy, and what a correct track can score, follow the robot's width in the image.

For every scene, robot, seed and ``--widths`` W [px]: the clip
``{scene}-{robot}-s{seed}-w{W}`` is rendered into ``--data`` when absent
(``snaketrack sim video --body-width-px W``: the same motion through a
longer or shorter lens), tracked exactly as ``snaketrack bench tracker``
tracks its clips and scored (:mod:`snaketrack.bench.body_width`):
``body_width_px`` (the median width the clip shows), the tracker's
``metrics.json`` figures, ``iou_ceiling`` and ``iou_model_ceiling``.

The benchmark's own clips are W = 11; ``--reuse DIR`` takes them from DIR
(``{scene}-{robot}-s{seed}``, as the tracker benchmark names them) instead of
rendering them again. Writes ``body_width.json`` (every run, rewritten after
each, so an interrupted sweep keeps what it finished and skips it when run
again) and ``body_width.png`` (joint error, base error, IoU and frames/s
against the body's width, the targets drawn) into ``--out``.

    snaketrack bench body-width --scenes handheld --robots arcsnake-4
        --widths 11 16 22 [--seeds 0] [--reuse DIR] [--data DIR] [--out bench_out/width]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from snaketrack.bench.body_width import DEFAULT_WIDTH, SweepConfig, plot_body_width, sweep
from snaketrack.bench.cache import cache_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.bench.tracking import ROBOTS, SCENES
from snaketrack.errors import InputError, SnaketrackError


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--scenes", nargs="+", default=list(SCENES), choices=list(SCENES))
    ap.add_argument("--robots", nargs="+", default=list(ROBOTS))
    ap.add_argument("--widths", nargs="+", type=float, default=[DEFAULT_WIDTH, 16.0, 22.0],
                    help="nominal body widths [px] (snaketrack sim video --body-width-px)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--data", type=Path, default=None,
                    help="folder for the rendered clips (default: the benchmark cache's width/)")
    ap.add_argument("--reuse", default=None, help="folder of the benchmark's clips, used for the default width")
    ap.add_argument("--out", default="bench_out/width", help="folder for the tracks, body_width.json and .png")
    ap.add_argument("--size", default="640x360", help="image size WxH of rendered clips (default 640x360)")
    ap.add_argument("--ceiling-step", type=int, default=1, help="every N-th frame for iou_ceiling")
    ap.add_argument("--threads", type=int, default=2)


def run(args: argparse.Namespace) -> dict:
    from snaketrack.io import parse_size

    try:
        size = parse_size(args.size)
    except SnaketrackError as e:
        raise InputError(f"--size: {e}") from None
    try:
        config = SweepConfig(scenes=tuple(args.scenes), robots=tuple(args.robots), widths=tuple(args.widths),
                             seeds=tuple(args.seeds), frames=args.frames, size=size, ceiling_step=args.ceiling_step)
    except SnaketrackError as e:
        raise InputError(str(e)) from None
    import torch

    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    out = Path(args.out)
    data = args.data if args.data is not None else cache_dir() / "width"
    runs = sweep(data, out, config, Path(args.reuse) if args.reuse else None,
                 log=lambda line: print(line, file=sys.stderr))
    plot_body_width(runs, out / "body_width.png")
    return {"runs": runs, "plot": str(out / "body_width.png")}


BENCHMARK = Benchmark("body-width", "the tracker's accuracy, and what a correct track can score, against the robot's "
                      "width in the image",
                      add_arguments, run,
                      quick={"frames": 10, "scenes": ["static"], "robots": ["arcsnake-4"], "widths": [16.0],
                             "ceiling_step": 5})
