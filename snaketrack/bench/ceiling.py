"""What the true silhouette itself scores against corrupted masks: the ceiling of the tracker's ``iou``.

For a dataset with masks (``snaketrack sim video``), every ``step``-th
frame's truth mask is corrupted as ``snaketrack track --corrupt-masks`` does
(:class:`~snaketrack.tracker.run.corrupt.MaskCorruptor`, seeded by the dataset's
seed) and compared with the truth mask grown or shrunk by its best uniform
edge offset (:func:`~snaketrack.tracker.run.corrupt.best_offset_iou`; the tracker
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

:func:`measure_label_fit_ceiling` asks the same of a labeller's fit
(``snaketrack label`` with the robot known, ``snaketrack fit-labels``): what
the fitted label ``silhouette ∧ dilate(label, agree_px)`` would score against
truth were the silhouette drawn at the true pose, and, given the track the
fit made from the labels, what it scores at the fitted pose.

>>> import numpy as np
>>> m = np.zeros((40, 80), bool); m[15:24, 5:75] = True   # a body 9 px across
>>> round(body_width_px(m))
9
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from snaketrack.errors import InputError, MissingFileError
from snaketrack.masks import mask_iou
from snaketrack.tracker.run.corrupt import MaskCorruptor, best_offset_iou


def body_width_px(mask: np.ndarray) -> float:
    """Twice the mean distance to the background along the medial axis (skimage) of the bool (H, W)
    ``mask`` [px]; NaN for an empty mask."""
    from skimage.morphology import medial_axis

    skel, dist = medial_axis(mask, return_distance=True)
    return float(2.0 * dist[skel].mean()) if skel.any() else float("nan")


def _truth_model(ds):
    """``(renderer, pose_at)`` of a :class:`~snaketrack.datasets.layout.Dataset` with truth: the tracker's
    :class:`~snaketrack.tracker.render.silhouette.SilhouetteRenderer` of its robot and camera, and a function frame
    index -> that frame's true pose vector (D,); None without truth."""
    if not ds.truth:
        return None
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import Camera
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer
    from snaketrack.tracker.state import StateLayout

    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    layout = StateLayout.for_robot(robot)

    def pose_at(i: int) -> np.ndarray:
        tr = ds.truth[i]
        return layout.from_quat(tr["joint_angles"], tr["base_quat_cam"], tr["base_position_cam"])

    return SilhouetteRenderer(robot, cam.K, cam.width, cam.height), pose_at


def model_at_truth(ds) -> Optional[Callable[[int], np.ndarray]]:
    """A function frame index -> the tracker's silhouette model rendered at that frame's true pose, bool
    (H, W) at the dataset's size; None when the :class:`~snaketrack.datasets.layout.Dataset` has no truth."""
    model = _truth_model(ds)
    if model is None:
        return None
    renderer, pose_at = model
    return lambda i: renderer.mask(pose_at(i))


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


def _track_poses(track: Path, layout) -> dict[int, np.ndarray]:
    """Pose vectors of a ``track.csv``'s tracked rows, by frame index."""
    from snaketrack.bench.pose_floor import track_pose
    from snaketrack.io import read_csv_columns

    c = read_csv_columns(track)
    return {int(c["frame"][r]): track_pose(c, r, layout) for r in range(len(c["frame"]))
            if str(c["status"][r]) == "tracked"}


def measure_label_fit_ceiling(path: Path, labels: Path, step: int = 1, frames: Optional[int] = None,
                              agree_px: int = 2, track: Optional[Path] = None, refine_steps: int = 0) -> dict:
    """How far a model fit could take the labels in ``labels`` (PNG masks named like the frames of the
    dataset ``path``, which needs ``truth.jsonl``).

    Every ``step``-th of the first ``frames`` frames (None: all) with a non-empty truth mask, scored
    against truth: ``iou_label`` (the label), ``iou_model_at_truth`` (the tracker's silhouette model at
    the true pose: it draws the links an obstacle hides), ``iou_fitted_at_truth`` (that silhouette ∧
    ``dilate(label, agree_px)``, the fitted label a perfect pose would give), and
    ``iou_model_at_truth_vs_label`` (how well the true pose explains the label). With ``track`` (the
    ``track.csv`` of ``snaketrack track DATASET --masks LABELS``), on its tracked frames:
    ``iou_model_at_fit``, ``iou_fitted_at_fit`` and ``iou_model_at_fit_vs_label``, the silhouettes drawn
    without the tracker's edge offset; ``fit_frames`` counts them. With ``refine_steps`` > 0: the true pose
    refined against each label by the tracker's refinement (:class:`~snaketrack.tracker.fit.refine.Refiner`,
    its default settings, that many steps), ``iou_model_refined``, ``iou_fitted_refined`` and
    ``iou_model_refined_vs_label``: where the fit's own objective leads from the truth.
    """
    from snaketrack.datasets.layout import open_dataset, read_mask
    from snaketrack.labelling.fit_labels import fitted_label

    if step < 1:
        raise InputError(f"step {step}; expected a positive integer")
    if refine_steps < 0:
        raise InputError(f"refine steps {refine_steps}; expected a non-negative integer")
    labels = Path(labels)
    if not labels.is_dir():
        raise MissingFileError(f"{labels}: no such folder of label masks")
    ds = open_dataset(path)
    model = _truth_model(ds)
    if model is None:
        raise MissingFileError(f"{ds.root}: no truth.jsonl; the ceiling needs the true poses")
    renderer, pose_at = model
    poses = {} if track is None else _track_poses(Path(track), renderer.layout)
    refiner = None
    if refine_steps:
        from snaketrack.tracker.config import RefineConfig
        from snaketrack.tracker.fit.observation import observe
        from snaketrack.tracker.fit.refine import Refiner

        refine_cfg = RefineConfig()
        refiner = Refiner(renderer, refine_cfg)
    n = len(ds) if frames is None else min(frames, len(ds))
    rows: dict[str, list[float]] = {k: [] for k in ("label", "model_truth", "fitted_truth", "truth_vs_label",
                                                     "model_fit", "fitted_fit", "fit_vs_label",
                                                     "model_ref", "fitted_ref", "ref_vs_label")}
    for i in range(0, n, step):
        m = ds.mask(i)
        if m is None or not (m > 0).any():
            continue
        truth = m > 0
        label = read_mask(labels / f"{ds.frame_path(i).stem}.png")
        x_true = pose_at(i)
        sil = renderer.mask(x_true)
        rows["label"].append(mask_iou(label, truth))
        rows["model_truth"].append(mask_iou(sil, truth))
        rows["fitted_truth"].append(mask_iou(fitted_label(sil, label, agree_px), truth))
        rows["truth_vs_label"].append(mask_iou(sil, label))
        if i in poses:
            fit = renderer.mask(poses[i])
            rows["model_fit"].append(mask_iou(fit, truth))
            rows["fitted_fit"].append(mask_iou(fitted_label(fit, label, agree_px), truth))
            rows["fit_vs_label"].append(mask_iou(fit, label))
        if refiner is not None and label.any():
            ref = renderer.mask(refiner.refine(x_true, observe(label, refine_cfg), steps=refine_steps).x)
            rows["model_ref"].append(mask_iou(ref, truth))
            rows["fitted_ref"].append(mask_iou(fitted_label(ref, label, agree_px), truth))
            rows["ref_vs_label"].append(mask_iou(ref, label))
    if not rows["label"]:
        raise InputError(f"{ds.root}: no frame with a non-empty truth mask among those measured")
    mean = {k: float(np.mean(v)) if v else float("nan") for k, v in rows.items()}
    res = {"dataset": ds.root.name, "frames": len(rows["label"]), "agree_px": int(agree_px),
           "iou_label": mean["label"], "iou_model_at_truth": mean["model_truth"],
           "iou_fitted_at_truth": mean["fitted_truth"], "iou_model_at_truth_vs_label": mean["truth_vs_label"]}
    if track is not None:
        res.update({"fit_frames": len(rows["model_fit"]), "iou_model_at_fit": mean["model_fit"],
                    "iou_fitted_at_fit": mean["fitted_fit"], "iou_model_at_fit_vs_label": mean["fit_vs_label"]})
    if refiner is not None:
        res.update({"refine_steps": int(refine_steps), "refined_frames": len(rows["model_ref"]),
                    "iou_model_refined": mean["model_ref"], "iou_fitted_refined": mean["fitted_ref"],
                    "iou_model_refined_vs_label": mean["ref_vs_label"]})
    return res
