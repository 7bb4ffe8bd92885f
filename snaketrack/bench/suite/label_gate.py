"""Benchmark: the label gate against the labeller without it, on rendered clips with truth masks.

Each clip (a dataset folder with truth masks, e.g. ``snaketrack sim video --scene lab``) is labelled as a
user would, one box on frame 0 (the truth mask's box grown by 10 px) and the robot the clip's meta.json
names, three ways: ``gate`` (``snaketrack label CLIP --box B --robot R``, the default), ``fit`` (``--no-gate``:
the labels fitted to the model only) and ``plain`` (``--no-fit``: GrabCut guided by where the video moves,
no model). Reported per clip and labeller: the labels' mean IoU against truth, the IoU of every 50-frame
block, the flagged frames, the gate's reasons, and frames/s (the ``label`` command's own figure; all
labellers of a clip run one after the other in the same conditions, so compare them within a clip). Every
run resumes: a finished one is only scored. Prints one row a clip and labeller on stderr.

    snaketrack bench label-gate CLIP [CLIP ...] --work bench_out/label-gate --frames 150
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from snaketrack.bench.registry import Benchmark

BOX_MARGIN = 10
BLOCK = 50
LABELLERS = {"gate": [], "gate-noband": ["--no-band-cut"], "gate-ground": ["--up", "sim-imu", "--track-ground"],
             "gate-reach": ["--gate-reach", "24"],
             "fit": ["--no-gate"], "plain": ["--no-fit"]}


def label(clip: Path, out: Path, flags: list[str], frames: int) -> dict:
    """Run ``snaketrack label`` on ``clip`` into ``out`` (once); the command's JSON summary."""
    from snaketrack.datasets.boxes import mask_to_box
    from snaketrack.datasets.layout import Dataset

    summary = out / "summary.json"
    if summary.is_file():
        return json.loads(summary.read_text())
    truth = Dataset(clip)
    robot = truth.meta.get("robot_file") or truth.meta["robot"]
    box = mask_to_box(truth.mask(0)).expand(BOX_MARGIN).clip(truth.width, truth.height)
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
               PYOPENGL_PLATFORM=os.environ.get("PYOPENGL_PLATFORM", "egl"))
    done = subprocess.run([sys.executable, "-m", "snaketrack", "label", str(clip), "--box",
                           f"{box.x},{box.y},{box.w},{box.h}", "--robot", robot, "--max-frames", str(frames),
                           "--out", str(out), "--json", *flags], check=True, env=env, capture_output=True, text=True)
    res = json.loads(done.stdout.strip().splitlines()[-1])
    summary.write_text(json.dumps(res))
    return res


def score(clip: Path, labels: Path, frames: int) -> dict:
    """Mean IoU of the labels against the clip's truth masks, and of every ``BLOCK`` frames."""
    import numpy as np

    from snaketrack.datasets.layout import Dataset
    from snaketrack.masks import mask_iou

    truth, lab = Dataset(clip), Dataset(labels)
    n = min(len(truth), len(lab), frames)
    ious = np.array([mask_iou(lab.mask(i), truth.mask(i)) for i in range(n)])
    blocks = [float(ious[s:s + BLOCK].mean()) for s in range(0, n, BLOCK)]
    return {"frames": n, "mean_iou": float(ious.mean()), "blocks": blocks, "min_block": min(blocks)}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("clips", nargs="+", help="dataset folders with truth masks")
    ap.add_argument("--work", default="bench_out/label-gate", help="folder for the labels")
    ap.add_argument("--frames", type=int, default=150, help="frames a clip")
    ap.add_argument("--labellers", default=",".join(LABELLERS),
                    help="comma-separated of gate, gate-noband (--no-band-cut), gate-ground (--up sim-imu "
                         "--track-ground), gate-reach (--gate-reach 24), fit, plain")


def run(args: argparse.Namespace) -> dict:
    rows = []
    for clip in map(Path, args.clips):
        for name in args.labellers.split(","):
            out = Path(args.work) / f"{clip.name}-{name}"
            res = label(clip, out, LABELLERS[name], args.frames)
            row = {"clip": clip.name, "labeller": name, **score(clip, out, args.frames),
                   "flagged": res["flagged"], "frames_per_s": res.get("frames_per_s"), "gate": res.get("gate")}
            rows.append(row)
            print(f"{row['clip']:24s} {name:6s} IoU {row['mean_iou']:.3f} min50 {row['min_block']:.3f} "
                  f"blocks {' '.join(f'{b:.2f}' for b in row['blocks'])} flagged {row['flagged']} "
                  f"{row['frames_per_s']} frames/s", file=sys.stderr, flush=True)
    return {"frames": args.frames, "rows": rows}


BENCHMARK = Benchmark("label-gate", "the label gate against the labeller without it, on rendered clips with truth "
                      "masks", add_arguments, run, quick={"frames": 5, "labellers": "plain"})
