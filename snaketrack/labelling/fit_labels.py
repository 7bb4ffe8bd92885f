"""Robot-fitted labels: auto-labels made consistent with the robot model fitted to them.

Box-prompted labels (GrabCut or SAM, :mod:`~snaketrack.labelling.label`)
err at the robot's edge: GrabCut's labels take in the cast-shadow fringe
beside the robot and the dark base of an obstacle it touches, and leave
out the lit rims of the joint housings. A user bringing up a segmenter for
a robot also has the robot's kinematic model (the tracker needs it), so the
labels can be made consistent with it: the tracker
(:mod:`snaketrack.tracker.tracker`) runs through the labels as its masks
(:class:`LabelFitter`), and each frame's label is decided by how well the
model's silhouette at the fitted state explains it (IoU of silhouette and label):

- IoU ≥ ``replace_iou`` (0.85): the model explains the label, and its silhouette
  replaces it, cut to the label grown by ``agree_px`` (so
  parts an obstacle hides, which the label leaves out, stay out)::

      fitted = silhouette(x̂) ∧ dilate(label, agree_px)

- ``min_iou`` (0.7) ≤ IoU < ``replace_iou``, or any IoU ≥ ``min_iou`` with
  ``keep_edge``: the label keeps its own edge, which follows the rendered
  body rather than the model's capsules, and the silhouette only deletes
  what lies farther than ``trim_px`` (city-block distance) from it — the
  glued blobs, the post bases, a false patch::

      trimmed = label ∧ grow(silhouette(x̂), trim_px)

- otherwise (IoU < ``min_iou``, or the tracker's state is not ``tracked``:
  coasting, lost, no mask) the label is kept (on a video, joined: below).

The silhouette is the model's at the fitted state, drawn with the edge offset ``b`` the tracker fits
with the pose (it grows or shrinks the model's outline to the mask's) where ``b`` < 0, and without it
otherwise (``narrow_by_offset``). A label wider than the model (``b`` > 0) is so by its fringe — the
shade beside the body, blur — and the model's own outline is the body's. A model wider than the label
(``b`` < 0) is one fitted too near the camera: without an up direction, on an oblique view from low
down, tilt and depth trade against each other and the outline comes out too wide by a few pixels all
round; the outline narrowed by ``b`` is the body's (docs/segmentation.md, "Fitted to the robot").

While labelling a video (:class:`FittedBackend` over the motion-guided backend), the label of every frame
the tracker tracked — replaced, trimmed or kept — also takes in the silhouette's pixels that move (the
motion map's, against the background plate) and that it left out, every such pixel by default
(``join_moving_px`` 1; a larger value keeps only pieces that an opening by a square of that side keeps)::

      joined = fitted ∪ open(silhouette(x̂) ∧ moving ∧ ¬fitted, join_moving_px)

The model puts the body there and the ground there has changed: a link of the ground's colour that the
cut left out (a grey link on gravel, or the half of the robot a cut lost for a few frames, which the
tracker holds), a dark housing's rim, the one- or two-pixel rim of a body whose edge the cut drew inside
the body's. A link hidden by a post is still, and stays out; the robot's cast shadow moves but lies
outside the silhouette; where the silhouette reaches a pixel past the body, the snap below moves the edge
back onto the frame's.

A label the fit replaced, trimmed or joined to then has its edge moved onto the frame's
colour edge beside it, by at most a pixel (``snap``,
:func:`~snaketrack.mask_edges.snap_edges`): the model's outline is a capsule's,
the frame's is the body's.

Where the fitted model and the label agree closely (a robot seen from above on
open ground) the model's outline is nearer the truth than GrabCut's; where they
agree less (the model's capsules against a body whose housings bulge, a view
from low down, parts behind obstacles) replacing costs more than it gains, and
trimming still removes what lies off the body. Measured on the label suite
(docs/benchmarks.md, "Labels on scenes the labeller was not tuned on").

:func:`fit_labels` writes a fitted copy of a label dataset (``snaketrack
fit-labels``); :class:`FittedBackend` fits while labelling (``snaketrack
label`` with the robot known), and the labeller records each frame's fit in
the dataset's ``fit.csv``, as :func:`fit_labels` does (:func:`fit_row`).

Outputs of :func:`fit_labels` (the dataset layout of docs/conventions.md): ``frames/`` (the label dataset's
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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional

import cv2
import numpy as np
from tqdm import tqdm

from snaketrack.datasets.label_report import FIT_COLUMNS, FIT_CSV, LABELS_CSV, REPORT_JSON
from snaketrack.datasets.layout import MASK_EXT, Dataset, encode_mask
from snaketrack.errors import InputError
from snaketrack.io import CsvAppender, atomic_write_bytes, read_csv_columns, read_json, write_json
from snaketrack.mask_edges import snap_edges
from snaketrack.masks import mask_iou
from snaketrack.models.robot import source_robot
from snaketrack.tracker.calib.camera import source_camera
from snaketrack.tracker.calib.ground import GroundTracker
from snaketrack.tracker.config import TrackerConfig
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.run.pipeline import on_moving_ground
from snaketrack.tracker.tracker import Tracker

FIT_REPORT = "fit_report.json"


@dataclass(frozen=True)
class FitConfig:
    """agree_px: how far [pixels] the fitted silhouette may reach beyond the label it replaces;
    min_iou: the least IoU of silhouette and label for the fit to replace or trim the label;
    replace_iou: the least IoU for the silhouette to replace the label (below it, down to min_iou, the
    label is trimmed); keep_edge: never replace, only trim; trim_px: a trimmed label keeps what lies
    within this many pixels [city-block] of the fitted silhouette; snap: a label replaced, trimmed or joined
    to has its edge moved onto the frame's colour edge (:func:`~snaketrack.mask_edges.snap_edges`);
    join_moving_px: a tracked frame's label takes in the silhouette's moving pixels it left out, in pieces
    an opening by a square of this side [pixels] keeps (:func:`joined_moving`; 1: every such pixel; 0: not;
    only with the video's motion, while labelling); narrow_by_offset: the silhouette is drawn with the
    tracker's fitted edge offset where that is negative (module doc)."""

    agree_px: int = 2
    min_iou: float = 0.7
    replace_iou: float = 0.85
    keep_edge: bool = False
    trim_px: int = 1
    snap: bool = True
    join_moving_px: int = 1
    narrow_by_offset: bool = True

    def __post_init__(self) -> None:
        if self.agree_px < 0:
            raise InputError(f"--agree-px {self.agree_px}: expected >= 0 pixels")
        if self.trim_px < 0:
            raise InputError(f"--trim-px {self.trim_px}: expected >= 0 pixels")
        if not 0.0 <= self.min_iou <= 1.0:
            raise InputError(f"--min-iou {self.min_iou}: expected a fraction in [0, 1]")
        if self.join_moving_px < 0:
            raise InputError(f"join_moving_px {self.join_moving_px}: expected >= 0 pixels")
        if not 0.0 <= self.replace_iou <= 1.0:
            raise InputError(f"--replace-iou {self.replace_iou}: expected a fraction in [0, 1]")


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


def joined_moving(label: np.ndarray, silhouette: np.ndarray, moving: np.ndarray, piece_px: int) -> np.ndarray:
    """``label ∪ open(silhouette ∧ moving ∧ ¬label, piece_px)``: the silhouette's moving pixels the label left
    out, in pieces an opening by a ``piece_px`` square keeps, join it; bool (H, W) each.

    >>> lab = np.zeros((8, 12), bool); lab[2:6, 1:6] = True
    >>> sil = np.zeros((8, 12), bool); sil[2:6, 1:11] = True; sil[1, 1:6] = True
    >>> moving = np.ones((8, 12), bool); moving[:, 9:] = False
    >>> joined_moving(lab, sil, moving, 3).astype(int).sum(axis=0).tolist()   # the 1-px rim stays out
    [0, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0]
    """
    label = np.asarray(label, bool)
    add = np.asarray(silhouette, bool) & np.asarray(moving, bool) & ~label
    if piece_px > 1:
        add = cv2.morphologyEx(add.view(np.uint8), cv2.MORPH_OPEN, np.ones((piece_px, piece_px), np.uint8)) > 0
    return label | add


@dataclass(frozen=True)
class FittedFrame:
    """One frame's fit: mask bool (H, W), the label written; status: the tracker's; iou: of the fitted
    silhouette with the label (NaN without a silhouette); source: ``fit`` (the silhouette replaced the
    label), ``trim`` (the label trimmed to it) or ``label`` (kept as cut; on a video it may still have taken in
    the silhouette's moving pixels)."""

    mask: np.ndarray
    status: str
    iou: float
    source: str


def fit_row(label: np.ndarray, res: FittedFrame) -> dict[str, Any]:
    """A frame's row of ``fit.csv`` (:data:`~snaketrack.datasets.label_report.FIT_COLUMNS` but ``frame``) from
    the label it was given (bool (H, W)) and the fit's :class:`FittedFrame`."""
    return {"status": res.status, "iou_fit": round(res.iou, 4), "source": res.source,
            "area_label_px": int(np.count_nonzero(label)), "area_fitted_px": int(np.count_nonzero(res.mask)),
            "gate": ""}


class LabelFitter:
    """The robot model fitted to labels frame by frame, and each label decided by the fit (module doc).

    robot: :class:`~snaketrack.models.robot.Robot`; camera: the labels' pinhole
    :class:`~snaketrack.tracker.calib.camera.Camera` (its size is the frames'; lens distortion is refused: the
    silhouette is drawn without it); fps: the labels' frame rate [1/s]. Call it with each frame's label,
    in order, its frame (RGB uint8 (H, W, 3)) for ``FitConfig.snap`` and, on a video, its moving pixels
    (bool (H, W), :meth:`~snaketrack.datasets.motion.MotionMap.motion`) for ``FitConfig.join_moving_px``.
    ``tracker_config``: the tracker's :class:`~snaketrack.tracker.config.TrackerConfig` (None: its defaults).
    ``up_source``: the world's up direction in the camera frame per source frame
    (:func:`~snaketrack.tracker.calib.gravity.open_up`; the call's ``index``), which holds the model's plane to the
    ground; ``track_ground``: the camera moves, and its height over the ground is followed through the frames
    (:class:`~snaketrack.tracker.calib.ground.GroundTracker`, as ``snaketrack track --track-ground``) to hold the
    model's base to the ground; needs ``up_source``. Seen from low down, a model fitted to a mask alone trades
    tilt against depth, and a label a distractor spoils then pulls it nearer the camera frame by frame; the
    ground holds it.
    ``silhouette``: the last call's silhouette at the fitted state, bool (H, W), or None (the model not started).
    """

    def __init__(self, robot, camera, fps: float = 30.0, config: FitConfig = FitConfig(), tracker_config=None,
                 up_source=None, track_ground: bool = False):
        if camera.has_distortion and np.any(np.asarray(camera.dist) != 0):
            raise InputError("the calibration has lens distortion, and the fitted silhouette is drawn with the "
                             "pinhole model: label an undistorted video")
        if track_ground and up_source is None:
            raise InputError("following the ground (--track-ground) needs the up direction: give --up")
        width, height = camera.size
        self.config = config
        tracker_config = tracker_config or TrackerConfig()
        if track_ground:
            tracker_config = on_moving_ground(tracker_config)
        self.up_source = up_source
        self.ground = GroundTracker(camera.K) if track_ground else None
        self.tracker = Tracker(robot, camera.K, width, height, fps=fps, config=tracker_config)
        self.renderer = SilhouetteRenderer(robot, camera.K, width, height)
        self.silhouette: Optional[np.ndarray] = None
        self.counts = {"fit": 0, "trim": 0, "label": 0}
        self.joined = 0  # labels (of any source) that took in the silhouette's moving pixels

    def ground_of(self, index: Optional[int], frame: Optional[np.ndarray],
                  label: Optional[np.ndarray] = None) -> dict[str, Any]:
        """The tracker's ``up`` and ``ground`` keywords for source frame ``index`` (RGB ``frame``; ``label``
        keeps the ground tracker's corners off the robot); empty without an up source. Call once a frame."""
        if self.up_source is None or index is None:
            return {}
        up = self.up_source(int(index))
        kw: dict[str, Any] = {"up": up}
        if self.ground is not None and frame is not None:
            gray = cv2.cvtColor(np.asarray(frame), cv2.COLOR_RGB2GRAY)
            kw["ground"] = self.ground.step(gray, up, None if label is None else np.asarray(label, bool))
        return kw

    def __call__(self, label: np.ndarray, frame: Optional[np.ndarray] = None,
                 moving: Optional[np.ndarray] = None, index: Optional[int] = None) -> FittedFrame:
        """Fit the model to the label of source frame ``index`` (for the up source; None: none) and decide
        the label (class doc)."""
        cfg = self.config
        label = np.asarray(label, bool)
        if not self.tracker.started and np.count_nonzero(label) < self.tracker.config.min_mask_px:
            self.counts["label"] += 1  # too small to start the model on: it starts on a later label
            return FittedFrame(label, "lost", float("nan"), "label")
        kw = self.ground_of(index, frame, label)
        state = self.tracker.step(label, **kw) if self.tracker.started else self.tracker.start(label, **kw)
        narrow = min(self.tracker.offset, 0.0) if cfg.narrow_by_offset else 0.0
        sil = self.silhouette = self.renderer.mask(state.pose_vector(self.renderer.layout), narrow)
        iou = mask_iou(sil, label)
        if state.status != "tracked" or not iou >= cfg.min_iou:
            mask, source = label, "label"
        elif cfg.keep_edge or iou < cfg.replace_iou:
            mask, source = trimmed_label(sil, label, cfg.trim_px), "trim"
        else:
            mask, source = fitted_label(sil, label, cfg.agree_px), "fit"
        changed = source != "label"
        if state.status == "tracked" and cfg.join_moving_px > 0 and moving is not None:
            joined = joined_moving(mask, sil, moving, cfg.join_moving_px)
            if np.any(joined & ~mask):
                changed = True
                self.joined += 1
            mask = joined
        if changed and cfg.snap and frame is not None:
            mask = snap_edges(frame, mask)
        self.counts[source] += 1
        return FittedFrame(mask, state.status, float(iou), source)


class FittedBackend:
    """A box-prompted backend whose written labels are fitted to the robot model while labelling.

    The backend's own masks prompt the next frame and pass the labeller's quality guard, as they would
    without the fit; only the label written (the backend's ``polish``, then ``fitter`` with the frame and,
    from a backend with ``moving()``, the frame's moving pixels) changes.
    backend: a :class:`~snaketrack.labelling.label.BoxPredictor`; fitter: a :class:`LabelFitter`, called on
    every frame in order (a resumed labelling run starts the fit afresh from its first new frame).
    """

    def __init__(self, backend, fitter: LabelFitter):
        self.backend = backend
        self.fitter = fitter
        self.name = backend.name
        self._frame: Optional[np.ndarray] = None
        self._index: Optional[int] = None  # the source frame's index, from ``seek``
        self.last_fit: Optional[dict[str, Any]] = None  # the last label's row of fit.csv (:func:`fit_row`)

    @property
    def robot_fit(self) -> dict[str, Any]:
        """The fit's settings, for the dataset's meta.json (``labelling.robot_fit``)."""
        return dict(asdict(self.fitter.config), robot=self.fitter.tracker.robot.name)

    def seek(self, index: int) -> None:
        self._index = int(index)
        if hasattr(self.backend, "seek"):
            self.backend.seek(index)

    def close(self) -> None:
        if hasattr(self.backend, "close"):
            self.backend.close()

    def set_image(self, rgb: np.ndarray) -> None:
        self._frame = rgb
        self.backend.set_image(rgb)

    def reset_image(self) -> None:
        self._frame = None
        self.backend.reset_image()

    def predict(self, box, prior: Optional[np.ndarray] = None) -> np.ndarray:
        return self.backend.predict(box, prior)

    def polish(self, mask: np.ndarray) -> np.ndarray:
        polish = getattr(self.backend, "polish", None)
        moving = self.backend.moving() if hasattr(self.backend, "moving") else None
        label = polish(mask) if polish is not None else mask
        res = self.fitter(label, self._frame, moving, self._index)
        self.last_fit = fit_row(label, res)
        return res.mask


def fit_labels(labels: str | os.PathLike, out: str | os.PathLike, robot_spec: Optional[str] = None,
               intrinsics=None, config: FitConfig = FitConfig(),
               progress: bool = True) -> dict[str, Any]:
    """Write the robot-fitted labels of the label dataset ``labels`` to ``out`` (module doc).

    ``robot_spec``: a shipped robot name or robot YAML (default: the labels'
    meta.json ``robot_file`` or ``robot``); ``intrinsics``: an OpenCV
    calibration file or a ``FieldOfView`` (default: meta.json's ``K``). ``config.join_moving_px`` does not
    apply: the labels' frames are not the video's motion (the join is made while labelling). Returns the report dict
    (also ``out/fit_report.json``).
    """
    labels, out = Path(labels), Path(out)
    config = replace(config, join_moving_px=0)  # a label dataset holds the frames labelled, not the video's motion
    ds = Dataset(labels)
    if not ds.has_masks:
        raise InputError(f"{labels}: no masks/ to fit; expected a label dataset from `snaketrack label`")
    if out.resolve() == labels.resolve():
        raise InputError(f"--out {out}: the same folder as the labels; choose a new folder")
    robot = source_robot(robot_spec, ds.meta)
    width, height = ds.width, ds.height
    camera = source_camera(ds.meta, width, height, intrinsics, str(labels))

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

    fitter = LabelFitter(robot, camera, fps=ds.fps, config=config)
    bar = None
    if progress:
        bar = tqdm(total=len(ds), desc="fit-labels", unit="frame", mininterval=0.5)
    ious = []
    try:
        for i in range(len(ds)):
            label = ds.mask(i)
            if label is None:
                raise InputError(f"{labels}: frame {ds.frame_path(i).name} has no mask in masks/")
            # a frame written before needs the fit (the tracker is sequential), not its snapped mask
            res = fitter(label, ds.frame(i) if config.snap and i not in done else None)
            if res.source != "label":
                ious.append(res.iou)
            if i not in done:
                stem = ds.frame_path(i).stem
                shutil.copyfile(ds.frame_path(i), out / "frames" / ds.frame_path(i).name)
                atomic_write_bytes(out / "masks" / (stem + MASK_EXT), encode_mask(res.mask))
                rows.write({"frame": i, **fit_row(label, res)})
            if bar is not None:
                bar.update(1)
    finally:
        rows.close()
        if bar is not None:
            bar.close()
    n = fitter.counts
    report = {"frames": len(ds), "fitted": n["fit"] + n["trim"], "replaced": n["fit"], "trimmed": n["trim"],
              "kept_label": n["label"],
              "mean_iou_fit": float(np.mean(ious)) if ious else float("nan"),
              "config": asdict(config), "robot": robot.name, "labels": str(labels)}
    write_json(out / FIT_REPORT, report)
    return report

