"""How far fitting the robot model could take a clip's labels: the fitted label at the true pose.

The labeller's fit (``snaketrack label`` with the robot known, ``snaketrack
fit-labels``) replaces a label by ``silhouette ∧ dilate(label, agree_px)``,
the silhouette drawn at the pose the tracker fits to the labels. For a
dataset with truth (``snaketrack sim video``) and a folder of its labels, this
gives the labels against truth (``iou_label``), the model's
silhouette at the true pose (``iou_model_at_truth``; it draws the links an
obstacle hides), the fitted label at the true pose (``iou_fitted_at_truth``:
what a perfect fit would give) and how well the true pose explains the labels
(``iou_model_at_truth_vs_label``). With ``--track`` (the ``track.csv`` of
``snaketrack track DATASET --masks LABELS``) the same at the fitted pose;
with ``--refine-steps N`` at the true pose refined against each label by the
tracker's refinement, where the fit's own objective leads from the truth
(:func:`snaketrack.bench.ceiling.measure_label_fit_ceiling`).

    snaketrack bench label-fit-ceiling DATASET LABELS/masks [--step 10] [--track TRACK/track.csv]
        [--refine-steps 60]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("dataset", type=Path, help="dataset folder with truth.jsonl and masks/")
    ap.add_argument("labels", type=Path, help="folder of the label masks (PNG, named like the frames)")
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--frames", type=int, default=None, help="the first N frames (default all)")
    ap.add_argument("--agree-px", type=int, default=2,
                    help="how far the silhouette may reach past the label [px] (the fit's default 2)")
    ap.add_argument("--track", type=Path, default=None, help="track.csv of the tracker run on the labels")
    ap.add_argument("--refine-steps", type=int, default=0,
                    help="also refine the true pose against each label this many steps (the tracker's refinement)")


def run(args: argparse.Namespace) -> dict:
    import cv2

    from snaketrack.bench.ceiling import measure_label_fit_ceiling

    cv2.setNumThreads(1)
    return measure_label_fit_ceiling(args.dataset, args.labels, args.step, args.frames, args.agree_px,
                                     args.track, args.refine_steps)


BENCHMARK = Benchmark("label-fit-ceiling", "how far fitting the robot model could take a clip's labels: the fitted "
                      "label at the true pose", add_arguments, run, quick={"frames": 10})
