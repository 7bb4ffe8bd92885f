"""What the true silhouette itself scores against the corrupted masks: the ceiling of the tracker's ``iou``.

For each dataset (``snaketrack sim video``), every ``--step``-th frame's
truth mask is corrupted as ``snaketrack track --corrupt-masks`` does
(:class:`snaketrack.tracker.corrupt.MaskCorruptor`, seeded by the
dataset's seed) and compared with the truth mask grown or shrunk by its
best uniform edge offset (:func:`snaketrack.tracker.corrupt.best_offset_iou`;
the tracker fits such an offset every frame). A silhouette model that
matched the robot exactly, at the true pose, would score about this as
its mean ``iou``: the ragged edge, the missing chunks and the false blobs
are beyond any offset, and the thinner the body in the image the more a
pixel of them costs. Prints one JSON line per dataset: ``iou_plain``
(the truth mask against the corrupted one), ``iou_ceiling`` (with the
best offset), ``frac_frames_ceiling_ge_0_9``, ``body_width_px`` (twice the
mean inscribed radius along the mask's skeleton), with ``--model``
``iou_model_ceiling`` (the same for the tracker's silhouette model rendered
at the true pose: it also draws the links a post hides, which the mask
lacks) and, with ``--track
DIR``, the tracker's own ``iou`` from ``DIR/<dataset name>/track.csv``
beside it.

    .venv/bin/python scripts/measure_iou_ceiling.py /work/data/handheld-arcsnake-s0 [...] [--step 1]
        [--model] [--track bench_out/tracker]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.datasets.layout import Dataset  # noqa: E402
from snaketrack.tracker.corrupt import MaskCorruptor, best_offset_iou  # noqa: E402
from snaketrack.masks import mask_iou  # noqa: E402


def body_width_px(mask: np.ndarray) -> float:
    """Twice the mean distance to the background along the mask's medial axis (skimage) [px]."""
    from skimage.morphology import medial_axis

    skel, dist = medial_axis(mask, return_distance=True)
    return float(2.0 * dist[skel].mean()) if skel.any() else float("nan")


def _model_at_truth(ds: Dataset):
    """A function frame -> the tracker's silhouette model rendered at the true pose (bool (H, W)), or None
    when the dataset has no truth."""
    if not ds.truth:
        return None
    import torch

    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.camera import Camera
    from snaketrack.tracker.render import SilhouetteRenderer
    from snaketrack.tracker.state import StateLayout

    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    renderer = SilhouetteRenderer(robot, cam.K, cam.width, cam.height)
    layout = StateLayout.for_robot(robot)

    def render(i: int) -> np.ndarray:
        tr = ds.truth[i]
        x = layout.from_quat(tr["joint_angles"], tr["base_quat_cam"], tr["base_position_cam"])
        with torch.no_grad():
            return renderer.full_image(torch.as_tensor(x, dtype=torch.float64)[None])[0].numpy() > 0.5

    return render


def measure(path: Path, step: int = 1, frames: int | None = None, model: bool = False) -> dict:
    """The ceiling figures of one dataset (module doc); ``model``: also ``iou_model_ceiling``."""
    ds = Dataset(path)
    corrupt = MaskCorruptor(int(ds.meta.get("seed", 0) or 0))
    n = len(ds) if frames is None else min(frames, len(ds))
    render = _model_at_truth(ds) if model else None
    plain, best, widths, best_model = [], [], [], []
    for i in range(0, n, step):
        m = ds.mask(i)
        if m is None or not (m > 0).any():
            continue
        m = m > 0
        observed = corrupt(m, i)
        plain.append(mask_iou(m, observed))
        best.append(best_offset_iou(m, observed)[0])
        if render is not None:
            best_model.append(best_offset_iou(render(i), observed)[0])
        if len(widths) < 30:
            widths.append(body_width_px(m))
    best_a = np.asarray(best)
    res = {"dataset": path.name, "frames": len(best), "iou_plain": float(np.mean(plain)),
           "iou_ceiling": float(np.mean(best_a)), "frac_frames_ceiling_ge_0_9": float(np.mean(best_a >= 0.9)),
           "body_width_px": float(np.nanmean(widths))}
    if best_model:
        res["iou_model_ceiling"] = float(np.nanmean(best_model))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--step", type=int, default=1, help="every STEP-th frame")
    ap.add_argument("--model", action="store_true",
                    help="also the tracker's silhouette model at the true pose (needs truth.jsonl)")
    ap.add_argument("--track", type=Path, default=None,
                    help="folder of tracks (DIR/<dataset name>/track.csv) whose mean iou to print beside")
    args = ap.parse_args(argv)
    if args.step < 1:
        ap.error(f"--step {args.step}: expected a positive integer")
    for path in args.datasets:
        if not (path / "meta.json").is_file():
            print(f"error: {path}: not a dataset folder (no meta.json)", file=sys.stderr)
            return 2
        res = measure(path, args.step, model=args.model)
        if args.track is not None:
            from snaketrack.io import read_csv_columns

            csv = args.track / path.name / "track.csv"
            if csv.is_file():
                res["tracker_iou"] = float(np.nanmean(np.asarray(read_csv_columns(csv)["iou"], float)))
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    cv2.setNumThreads(1)
    sys.exit(main())
