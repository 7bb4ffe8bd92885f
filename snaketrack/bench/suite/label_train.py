"""Benchmark, end to end with the defaults: label one clip, train on its labels, segment clips of other scenes.

1. Label the training clip with ``--labeller`` (default: what ``snaketrack
   label`` runs without a backend flag; the first frame's box: the truth
   mask's box drawn tight), reusing
   the label suite's run when it exists (``snaketrack bench label-suite``,
   same ``--work``).
2. Train with ``snaketrack train``'s defaults (the CPU recipe) for
   ``--minutes`` on ``--threads`` torch threads.
3. Score the model against the truth masks of each ``--test`` clip (every
   ``--every``-th frame) with the accurate setting (the scale, test-time
   flips and threshold training chose), the same on each frame whole
   (``accurate_whole``), and the live setting. ``wall_ms_per_frame`` is the
   wall time of that scoring over its frames (loading the model, reading
   the frames and the first passes included): a rough figure; the
   segmenter's speed is ``snaketrack bench segmenter``'s.

Clips are the label suite's (rendered there when missing). Resumes: the
labels and the model are kept; a finished model is only scored.

    snaketrack bench label-train --minutes 20 --threads 1
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark
from snaketrack.errors import InputError

TRAIN = "drone-planar-grass-w14-s29"
TESTS = ["static-planar-brick-w14-s22", "handheld-planar-gravel-w11-s25", "handheld-planar-grass-w9-s26"]
SETTINGS = {"accurate": {"setting": "accurate"}, "accurate_whole": {"setting": "accurate", "window": False},
            "live": {"setting": "live"}}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--train", default=TRAIN, help="label-suite clip to label and train on")
    ap.add_argument("--test", action="append", default=None, help=f"clip of any label suite to score (repeatable; "
                                                                   f"default {', '.join(TESTS)})")
    ap.add_argument("--test-frames", type=int, default=200,
                    help="frames a test clip is rendered with when it is not yet (the held-out and fresh suites' "
                         "runs render 100)")
    ap.add_argument("--data", default=None, help="folder of the label suite's clips (default: the benchmark "
                                                "cache's label-suite/)")
    ap.add_argument("--work", default="bench_out/label-suite")
    ap.add_argument("--minutes", type=float, default=20.0, help="training budget (the default recipe's is 20)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads for training (default torch's)")
    ap.add_argument("--every", type=int, default=2, help="score every k-th test frame")
    ap.add_argument("--labeller", default="default", help="what labels the training clip: default (what "
                    "`snaketrack label` runs without a backend flag), grabcut or guided")
    ap.add_argument("--labels", default=None, help="train on this label dataset of the training clip instead of "
                                                   "labelling it (e.g. an earlier run's)")
    ap.add_argument("--encoder", default=None, help="the network's encoder (default the recipe's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a training setting over the recipe's: a TrainConfig field and a JSON value "
                         "(e.g. synthetic_ground=0.5)")
    ap.add_argument("--model", default=None, help="model file to write or, when it exists, to score")


def run(args: argparse.Namespace) -> dict:
    from snaketrack.bench.suite.label_suite import SUITES, clip_name, render, run_one, score, suite_dir
    from snaketrack.datasets.layout import Dataset
    from snaketrack.training.config import recipe_config
    from snaketrack.training.evaluate import evaluate_segmenter
    from snaketrack.training.segmenter import load_segmenter
    from snaketrack.training.train import train

    data = Path(args.data) if args.data else suite_dir()
    specs = {clip_name(*s): s for suite in SUITES.values() for s in suite}
    tests = args.test or TESTS
    for name in [args.train, *tests]:
        if name not in specs:
            raise InputError(f"{name}: not a clip of the label suite's suites ({', '.join(specs)})")
        render(data, specs[name], 200 if name == args.train else args.test_frames)
    if args.labels:
        labels = Path(args.labels)
        lab = score(data / args.train, labels, 200)
    else:
        lab = run_one((str(data / args.train), "tight", args.labeller, args.work, 200, None))
        labels = Path(args.work) / args.labeller / args.train / "tight"
    out = {"train_clip": args.train, "labeller": args.labeller, "labels": str(labels), "label_iou": lab["mean_iou"],
           "minutes": args.minutes, "threads": args.threads}
    print(json.dumps(out), file=sys.stderr, flush=True)
    model = Path(args.model or Path(args.work) / "e2e" / f"{args.train}-{args.labeller}-{args.minutes:g}min.pt")
    model.parent.mkdir(parents=True, exist_ok=True)
    if not model.is_file():
        extra = {"encoder": args.encoder} if args.encoder else {}
        for item in args.set:
            key, _, value = item.partition("=")
            extra[key] = json.loads(value)
        out["settings"] = extra
        res = train([str(labels)], model, recipe_config("cpu", time_limit_s=60.0 * args.minutes,
                                                         threads=args.threads, **extra))
        out.update(epochs=res.epochs_done, chosen=res.selection)
    seg = load_segmenter(model)
    out.update(model=str(model), scale=seg.scale, flips=seg.flips, threshold=seg.threshold, tests={})
    for name in tests:
        clip = data / name
        frames = range(0, len(Dataset(clip)), args.every)
        row = {}
        for setting, kw in SETTINGS.items():
            t0 = time.perf_counter()
            s = load_segmenter(model, **kw)
            ev = evaluate_segmenter(s, clip, batch_size=1, frames=frames)
            row[setting] = {"iou": ev["iou"], "frames": ev["frames"], "scale": s.scale, "flips": s.flips,
                            "backend": s.backend,
                            "wall_ms_per_frame": 1000 * (time.perf_counter() - t0) / max(ev["frames"], 1)}
        out["tests"][name] = row
        print(json.dumps({name: row}), file=sys.stderr, flush=True)
    out["all_tests_at_least_0.85"] = all(r["accurate"]["iou"] >= 0.85 for r in out["tests"].values())
    return out


BENCHMARK = Benchmark("label-train", "end to end with the defaults: label one clip, train on its labels, "
                      "segment clips of other scenes", add_arguments, run,
                      quick={"minutes": 0.05, "test_frames": 5, "every": 5})
