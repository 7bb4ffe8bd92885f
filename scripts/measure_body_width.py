"""How the tracker's accuracy, and what a correct track can score, follow the robot's width in the image.

For every scene, robot, seed and ``--widths`` W [px]: the clip
``{scene}-{robot}-s{seed}-w{W}`` is rendered into ``--data`` when absent
(``snaketrack sim video --body-width-px W``: the same motion through a
longer or shorter lens), tracked exactly as ``scripts/bench_tracker.py``
tracks its clips and scored (:mod:`snaketrack.tracker.body_width`):
``body_width_px`` (the median width the clip shows), the tracker's
``metrics.json`` figures, ``iou_ceiling`` and ``iou_model_ceiling``.

The benchmark's own clips are W = 11; ``--reuse DIR`` takes them from DIR
(``{scene}-{robot}-s{seed}``, as bench_tracker names them) instead of
rendering them again. Writes ``body_width.json`` (every run, rewritten after
each, so an interrupted sweep keeps what it finished and skips it when run
again) and ``body_width.png`` (joint error, base error, IoU and frames/s
against the body's width, the targets drawn) into ``--out``; prints one JSON
object last.

    MUJOCO_GL=egl .venv/bin/python scripts/measure_body_width.py --scenes handheld --robots arcsnake-4
        --widths 11 16 22 [--seeds 0] [--reuse bench_data] [--data bench_data/width] [--out bench_out/width]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.errors import SnaketrackError  # noqa: E402
from snaketrack.tracker.benchmark import ROBOTS, SCENES  # noqa: E402
from snaketrack.tracker.body_width import DEFAULT_WIDTH, SweepConfig, plot_body_width, sweep  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", nargs="+", default=list(SCENES), choices=list(SCENES))
    ap.add_argument("--robots", nargs="+", default=list(ROBOTS))
    ap.add_argument("--widths", nargs="+", type=float, default=[DEFAULT_WIDTH, 16.0, 22.0],
                    help="nominal body widths [px] (snaketrack sim video --body-width-px)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--data", default="bench_data/width",
                    help="folder for the rendered clips (default bench_data/width)")
    ap.add_argument("--reuse", default=None, help="folder of the benchmark's clips, used for the default width")
    ap.add_argument("--out", default="bench_out/width", help="folder for the tracks, body_width.json and .png")
    ap.add_argument("--size", default="640x360", help="image size WxH of rendered clips (default 640x360)")
    ap.add_argument("--ceiling-step", type=int, default=1, help="every N-th frame for iou_ceiling")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    from snaketrack.io import parse_size

    try:
        size = parse_size(args.size)
    except SnaketrackError as e:
        ap.error(f"--size: {e}")
    try:
        config = SweepConfig(scenes=tuple(args.scenes), robots=tuple(args.robots), widths=tuple(args.widths),
                             seeds=tuple(args.seeds), frames=args.frames, size=size, ceiling_step=args.ceiling_step)
    except SnaketrackError as e:
        ap.error(str(e))
    import torch

    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    out = Path(args.out)
    try:
        runs = sweep(Path(args.data), out, config, Path(args.reuse) if args.reuse else None,
                     log=lambda line: print(line, file=sys.stderr))
    except SnaketrackError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    plot_body_width(runs, out / "body_width.png")
    print(json.dumps({"runs": runs, "plot": str(out / "body_width.png")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
