"""How far fitting the robot model could take a clip's labels: the fitted label at the true pose.

The labeller's fit (``snaketrack label`` with the robot known, ``snaketrack
fit-labels``) replaces a label by ``silhouette ∧ dilate(label, agree_px)``,
the silhouette drawn at the pose the tracker fits to the labels. For a
dataset with truth (``snaketrack sim video``) and a folder of its labels, this
prints one JSON line: the labels against truth (``iou_label``), the model's
silhouette at the true pose (``iou_model_at_truth``; it draws the links an
obstacle hides), the fitted label at the true pose (``iou_fitted_at_truth``:
what a perfect fit would give) and how well the true pose explains the labels
(``iou_model_at_truth_vs_label``). With ``--track`` (the ``track.csv`` of
``snaketrack track DATASET --masks LABELS``) the same at the fitted pose;
with ``--refine-steps N`` at the true pose refined against each label by the
tracker's refinement, where the fit's own objective leads from the truth
(:func:`snaketrack.tracker.ceiling.measure_label_fit_ceiling`).

    python scripts/measure_label_fit_ceiling.py DATASET LABELS/masks [--step 10] [--track TRACK/track.csv]
        [--refine-steps 60]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.errors import SnaketrackError  # noqa: E402
from snaketrack.tracker.ceiling import measure_label_fit_ceiling  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", type=Path, help="dataset folder with truth.jsonl and masks/")
    ap.add_argument("labels", type=Path, help="folder of the label masks (PNG, named like the frames)")
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--frames", type=int, default=None, help="the first N frames (default all)")
    ap.add_argument("--agree-px", type=int, default=2,
                    help="how far the silhouette may reach past the label [px] (the fit's default 2)")
    ap.add_argument("--track", type=Path, default=None, help="track.csv of the tracker run on the labels")
    ap.add_argument("--refine-steps", type=int, default=0,
                    help="also refine the true pose against each label this many steps (the tracker's refinement)")
    args = ap.parse_args(argv)
    try:
        res = measure_label_fit_ceiling(args.dataset, args.labels, args.step, args.frames, args.agree_px,
                                        args.track, args.refine_steps)
    except SnaketrackError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    cv2.setNumThreads(1)
    sys.exit(main())
