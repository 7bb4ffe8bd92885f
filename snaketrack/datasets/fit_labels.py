"""Robot-fitted labels: auto-labels replaced by the robot model's silhouette fitted to them.

Box-prompted labels (GrabCut or SAM, :mod:`~snaketrack.datasets.label`)
err at the robot's edge: GrabCut's labels take in the cast-shadow fringe
beside the robot and the dark base of an obstacle it touches, and leave
out the lit rims of the joint housings. A user bringing up a segmenter for
a robot also has the robot's kinematic model (the tracker needs it), so the
labels can be made consistent with it: the tracker
(:mod:`snaketrack.tracker.tracker`) runs through the labelled video with the
labels as its masks, and each frame's label becomes the model's own
silhouette at the fitted state (no edge offset), cut to the label grown by
``agree_px`` (so parts an obstacle hides, which the label leaves out, stay
out):

    fitted = silhouette(x̂) ∧ dilate(label, agree_px)

With ``keep_edge`` the label keeps its own edge and the silhouette only
deletes what lies farther than ``trim_px`` (city-block distance) from it —
the glued blobs, the post bases, a false patch — so the label's edge, which
follows the rendered body rather than the capsule model, is kept:

    trimmed = label ∧ grow(silhouette(x̂), trim_px)

A frame keeps its label unchanged (``source = "label"`` in ``fit.csv``)
when the fit does not explain it: the tracker's state is not ``tracked``
(coasting, lost, no mask) or the silhouette overlaps the label by IoU < ``min_iou``.

Measured (docs/segmentation.md, "Robot-fitted labels"): on the drone video
the GrabCut labels' IoU against truth rises from 0.860 to 0.911 (fitted) and
to 0.889 (``keep_edge``); a segmenter trained on the fitted or the trimmed
labels scores on another video about as one trained on the GrabCut labels
(docs/segmenter-training.md, "Tried and not adopted").

Outputs (the dataset layout of docs/conventions.md): ``frames/`` (the label dataset's
files, copied byte for byte), ``masks/`` (the fitted labels), ``meta.json``
(the labels' meta plus ``labelling.robot_fit``), the labeller's
``labels.csv`` / ``labels_report.json`` copied (training skips the frames it
flagged), ``fit.csv`` (one row a frame, written as frames finish) and
``fit_report.json``. The tracker is sequential, so a rerun on the same
``out`` tracks again from frame 0 (a few seconds for 300 frames) and writes
only the frames not yet written: an interrupted run loses nothing.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import cv2
import numpy as np

from snaketrack.datasets.label_report import LABELS_CSV, REPORT_JSON
from snaketrack.datasets.layout import MASK_EXT, Dataset, encode_mask
from snaketrack.errors import InputError
from snaketrack.io import CsvAppender, atomic_write_bytes, read_csv_columns, read_json, write_json

FIT_CSV = "fit.csv"
FIT_REPORT = "fit_report.json"
FIT_COLUMNS = ["frame", "status", "iou_fit", "source", "area_label_px", "area_fitted_px"]


@dataclass(frozen=True)
class FitConfig:
    """agree_px: how far [pixels] the fitted silhouette may reach beyond the label;
    min_iou: the least IoU of silhouette and label for the fitted label to replace it;
    keep_edge: keep the label and only cut what lies more than trim_px [pixels,
    city-block] outside the fitted silhouette (agree_px then plays no part)."""

    agree_px: int = 2
    min_iou: float = 0.7
    keep_edge: bool = False
    trim_px: int = 1

    def __post_init__(self) -> None:
        if self.agree_px < 0:
            raise InputError(f"--agree-px {self.agree_px}: expected >= 0 pixels")
        if self.trim_px < 0:
            raise InputError(f"--trim-px {self.trim_px}: expected >= 0 pixels")
        if not 0.0 <= self.min_iou <= 1.0:
            raise InputError(f"--min-iou {self.min_iou}: expected a fraction in [0, 1]")


def fitted_label(silhouette: np.ndarray, label: np.ndarray, agree_px: int) -> np.ndarray:
    """``silhouette ∧ dilate(label, agree_px)``; bool (H, W) in, bool (H, W) out.

    >>> lab = np.zeros((9, 9), bool); lab[4, 2:7] = True
    >>> sil = np.zeros((9, 9), bool); sil[3:6, 1:8] = True; sil[0, 0] = True
    >>> fitted_label(sil, lab, 1).astype(int).sum(axis=0).tolist()   # (0, 0) and the far corners are cut
    [0, 1, 3, 3, 3, 3, 3, 1, 0]
    """
    label = np.asarray(label, bool)
    if agree_px > 0:
        disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * agree_px + 1, 2 * agree_px + 1))
        label = cv2.dilate(label.astype(np.uint8), disc) > 0
    return np.asarray(silhouette, bool) & label


def trimmed_label(silhouette: np.ndarray, label: np.ndarray, trim_px: int) -> np.ndarray:
    """``label ∧ grow(silhouette, trim_px)``, grown by a 3×3 cross ``trim_px`` times; bool (H, W).

    >>> sil = np.zeros((7, 9), bool); sil[3, 2:7] = True
    >>> lab = np.zeros((7, 9), bool); lab[2:5, 1:8] = True; lab[0, 0] = True
    >>> trimmed_label(sil, lab, 1).astype(int).sum(axis=0).tolist()   # the corners and (0, 0) are cut
    [0, 1, 3, 3, 3, 3, 3, 1, 0]
    """
    silhouette = np.asarray(silhouette, bool)
    if trim_px > 0:
        cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
        silhouette = cv2.dilate(silhouette.astype(np.uint8), cross, iterations=trim_px) > 0
    return np.asarray(label, bool) & silhouette


def fit_labels(labels: str | os.PathLike, out: str | os.PathLike, robot_spec: Optional[str] = None,
               intrinsics=None, config: FitConfig = FitConfig(),
               progress: bool = True) -> dict[str, Any]:
    """Write the robot-fitted labels of the label dataset ``labels`` to ``out`` (module doc).

    ``robot_spec``: a shipped robot name or robot YAML (default: the labels'
    meta.json ``robot_file`` or ``robot``); ``intrinsics``: an OpenCV
    calibration file or a ``FieldOfView`` (default: meta.json's ``K``). Returns the report dict
    (also ``out/fit_report.json``).
    """

    from snaketrack.masks import mask_iou
    from snaketrack.models.robot import source_robot
    from snaketrack.tracker.camera import source_camera
    from snaketrack.tracker.render import SilhouetteRenderer
    from snaketrack.tracker.tracker import Tracker

    labels, out = Path(labels), Path(out)
    ds = Dataset(labels)
    if not ds.has_masks:
        raise InputError(f"{labels}: no masks/ to fit; expected a label dataset from `snaketrack label`")
    if out.resolve() == labels.resolve():
        raise InputError(f"--out {out}: the same folder as the labels; choose a new folder")
    robot = source_robot(robot_spec, ds.meta)
    width, height = ds.width, ds.height
    camera = source_camera(ds.meta, width, height, intrinsics, str(labels))
    if camera.has_distortion and np.any(np.asarray(camera.dist) != 0):
        raise InputError("fit-labels: the calibration has lens distortion; label an undistorted video "
                         "(the fitted silhouette is drawn with the pinhole model)")

    fit_meta = dict(asdict(config), labels=str(labels.resolve()), robot=robot.name)
    if (out / "meta.json").is_file():
        before = read_json(out / "meta.json").get("labelling", {}).get("robot_fit")
        if before != fit_meta:
            raise InputError(f"--out {out}: holds a fit of other labels or settings ({before}); choose a new folder")
    (out / "masks").mkdir(parents=True, exist_ok=True)
    (out / "frames").mkdir(parents=True, exist_ok=True)
    meta = dict(ds.meta)
    labelling = dict(meta.get("labelling", {}))
    labelling["robot_fit"] = fit_meta
    meta["labelling"] = labelling
    write_json(out / "meta.json", meta)
    for name in (LABELS_CSV, REPORT_JSON):
        if (labels / name).is_file():
            shutil.copyfile(labels / name, out / name)
    done = set()  # frames listed in fit.csv: their masks were written first, so each is complete
    if (out / FIT_CSV).is_file():
        done = {int(f) for f in read_csv_columns(out / FIT_CSV)["frame"]}
    rows = CsvAppender(out / FIT_CSV, FIT_COLUMNS, resume=bool(done))

    tracker = Tracker(robot, camera.K, width, height, fps=ds.fps)
    renderer = SilhouetteRenderer(robot, camera.K, width, height)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(ds), desc="fit-labels", unit="frame", mininterval=0.5)
    n_fitted = n_kept = 0
    ious = []
    try:
        for i in range(len(ds)):
            label = ds.mask(i)
            if label is None:
                raise InputError(f"{labels}: frame {ds.frame_path(i).name} has no mask in masks/")
            state = tracker.start(label) if i == 0 else tracker.step(label)
            sil = renderer.mask(state.pose_vector(renderer.layout))
            iou = mask_iou(sil, label)
            use_fit = state.status == "tracked" and np.isfinite(iou) and iou >= config.min_iou
            if not use_fit:
                mask = label
            elif config.keep_edge:
                mask = trimmed_label(sil, label, config.trim_px)
            else:
                mask = fitted_label(sil, label, config.agree_px)
            if use_fit:
                n_fitted += 1
                ious.append(iou)
            else:
                n_kept += 1
            if i not in done:
                stem = ds.frame_path(i).stem
                shutil.copyfile(ds.frame_path(i), out / "frames" / ds.frame_path(i).name)
                atomic_write_bytes(out / "masks" / (stem + MASK_EXT), encode_mask(mask))
                rows.write({"frame": i, "status": state.status, "iou_fit": round(iou, 4),
                            "source": "fit" if use_fit else "label", "area_label_px": int(label.sum()),
                            "area_fitted_px": int(mask.sum())})
            if bar is not None:
                bar.update(1)
    finally:
        rows.close()
        if bar is not None:
            bar.close()
    report = {"frames": len(ds), "fitted": n_fitted, "kept_label": n_kept,
              "mean_iou_fit": float(np.mean(ious)) if ious else float("nan"),
              "config": asdict(config), "robot": robot.name, "labels": str(labels)}
    write_json(out / FIT_REPORT, report)
    return report

