"""What the true silhouette itself scores against corrupted masks: the ceiling of the tracker's ``iou``.

For a dataset with masks (``snaketrack sim video``), every ``step``-th
frame's truth mask is corrupted as ``snaketrack track --corrupt-masks`` does
(:class:`~snaketrack.tracker.corrupt.MaskCorruptor`, seeded by the dataset's
seed) and compared with the truth mask grown or shrunk by its best uniform
edge offset (:func:`~snaketrack.tracker.corrupt.best_offset_iou`; the tracker
fits such an offset every frame). A silhouette model that matched the robot
exactly, at the true pose, would score about this as its mean ``iou``: the
ragged edge, the missing chunks and the false blobs are beyond any offset,
and the thinner the body in the image the more a pixel of them costs.

:func:`measure_iou_ceiling` returns ``iou_plain`` (the truth mask against the
corrupted one), ``iou_ceiling`` (with the best offset),
``frac_frames_ceiling_ge_0_9``, ``body_width_px`` (:func:`body_width_px` of
the first 30 masks, averaged), with ``model`` also ``iou_model_ceiling`` (the
same for the tracker's silhouette model rendered at the true pose: it also
draws the links a post hides, which the mask lacks) and, given a
``track.csv``, the tracker's own mean ``iou`` beside it (``tracker_iou``).

>>> import numpy as np
>>> m = np.zeros((40, 80), bool); m[15:24, 5:75] = True   # a body 9 px across
>>> round(body_width_px(m))
9
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.masks import mask_iou
from snaketrack.tracker.corrupt import MaskCorruptor, best_offset_iou


def body_width_px(mask: np.ndarray) -> float:
    """Twice the mean distance to the background along the medial axis (skimage) of the bool (H, W)
    ``mask`` [px]; NaN for an empty mask."""
    from skimage.morphology import medial_axis

    skel, dist = medial_axis(mask, return_distance=True)
    return float(2.0 * dist[skel].mean()) if skel.any() else float("nan")


def model_at_truth(ds) -> Optional[Callable[[int], np.ndarray]]:
    """A function frame index -> the tracker's silhouette model rendered at that frame's true pose, bool
    (H, W) at the dataset's size; None when the :class:`~snaketrack.datasets.layout.Dataset` has no truth."""
    if not ds.truth:
        return None
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
        return renderer.mask(layout.from_quat(tr["joint_angles"], tr["base_quat_cam"], tr["base_position_cam"]))

    return render


def measure_iou_ceiling(path: Path, step: int = 1, frames: Optional[int] = None, model: bool = False,
                        track: Optional[Path] = None) -> dict:
    """The ceiling figures of the dataset folder ``path`` (module doc).

    step: every ``step``-th frame; frames: the first ``frames`` frames (None: all); frames with an empty
    mask are skipped. model: also ``iou_model_ceiling`` (needs ``truth.jsonl``). track: a ``track.csv``
    whose mean ``iou`` to report as ``tracker_iou``.
    """
    from snaketrack.datasets.layout import open_dataset

    if step < 1:
        raise InputError(f"step {step}; expected a positive integer")
    ds = open_dataset(path)
    path = ds.root
    corrupt = MaskCorruptor(int(ds.meta.get("seed", 0) or 0))
    n = len(ds) if frames is None else min(frames, len(ds))
    render = model_at_truth(ds) if model else None
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
    if track is not None:
        from snaketrack.io import read_csv_columns

        res["tracker_iou"] = float(np.nanmean(np.asarray(read_csv_columns(track)["iou"], float)))
    return res
