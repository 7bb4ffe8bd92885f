"""The labeller's box-prompted backend for a name, its labels fitted to and gated by the robot model.

``snaketrack label`` builds its backend here (:func:`build_backend`); so do the labelling benchmarks, so
that they measure what the command runs.
"""
from __future__ import annotations

import warnings
from dataclasses import replace

from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.motion_backend import MotionGuidedBackend
from snaketrack.errors import InputError, SnaketrackError, SnaketrackWarning
from snaketrack.extras import require
from snaketrack.labelling.band_cut import BandConfig
from snaketrack.labelling.fit_labels import FittedBackend, LabelFitter
from snaketrack.labelling.guided_backend import GuidedBackend
from snaketrack.labelling.label_gate import GateConfig, GatedBackend, gate_tracker
from snaketrack.models.robot import source_robot
from snaketrack.tracker.calib.camera import DEFAULT_FOV_DEG, FieldOfView, source_camera
from snaketrack.tracker.calib.gravity import open_up


def build_backend(name: str, source=None, robot: str | None = None, intrinsics=None,
                  sam_checkpoint: str | None = None, sam_model: str = "vit_b", device: str = "cpu", stride: int = 1,
                  motion: bool = True, fit: bool | None = None, gate: bool = True, up: str | None = None,
                  track_ground: bool = False, band_cut: bool = True, gate_reach_px: int = 0,
                  body_beyond: bool = False):
    """The box-prompted backend ``label`` runs for ``--backend NAME``, its labels fitted to the robot model
    (:class:`~snaketrack.labelling.fit_labels.FittedBackend`) when ``fit``.

    ``default`` is what ``label`` runs without ``--backend``: SAM when a checkpoint is given, else
    GrabCut (higher mean IoU over the label suite than the guided backend, docs/benchmarks.md),
    guided by where the video moves (:mod:`~snaketrack.datasets.motion_backend`) when ``motion`` and
    ``source`` is given, else from the box and colours alone.
    ``guided`` needs the robot: ``robot``, or the source's meta.json names it.
    ``source``: the
    :class:`~snaketrack.datasets.video.FrameSource` (the guided backend's frame size, rate and camera);
    ``intrinsics``: a calibration file or ``FieldOfView`` (default: the source's meta.json ``K``).
    ``fit``: None fits the GrabCut backend's labels when the robot is known (``robot``, or the source's
    meta.json names it; the label suite's best, docs/benchmarks.md); True fits a SAM or GrabCut backend's
    (the robot must be known); False never. The guided backend fits the model itself.
    ``gate``: a fitted backend's labels are also held to the model
    (:class:`~snaketrack.labelling.label_gate.GatedBackend`); False: fitted only.
    ``up``, ``track_ground``: the fit's up source (``--up``, :func:`~snaketrack.tracker.calib.gravity.open_up`) and
    ground following (:class:`~snaketrack.labelling.fit_labels.LabelFitter`). ``band_cut``: a gated label the
    fitted model explains is cut again in a band around its silhouette (:mod:`~snaketrack.labelling.band_cut`).
    ``gate_reach_px``: the gate's ``GateConfig.reach_px`` (0: its prediction is not refined on the frame's cut).
    ``body_beyond``: with the band cut, the body past the model's ends in the robot's own colours joins the label
    (:func:`~snaketrack.labelling.band_cut.body_beyond`; ``BandConfig().extend_frac``).
    """
    meta = getattr(source, "meta", {}) or {}
    if name == "default":
        name = "sam" if sam_checkpoint else "grabcut"
    if fit and name == "guided":
        raise InputError("--fit: the guided backend fits the robot model itself; drop --fit")
    if fit and source is None:
        raise InputError("--fit needs the video it labels")
    fit_robot = None
    if fit or (fit is None and name == "grabcut" and source is not None):
        fit_robot = _fit_robot(robot, meta, required=bool(fit))
    backend = _box_backend(name, source, robot, intrinsics, sam_checkpoint, sam_model, device, stride, motion, meta)
    if fit_robot is None:
        if up not in (None, "none") or track_ground:
            raise InputError("--up and --track-ground hold the robot model's fit to the ground: they need the "
                             "robot (--robot) and the fit")
        return backend

    camera = _guide_camera(source, intrinsics, meta)
    fps = float(source.fps) / max(int(stride), 1)
    up_source = open_up(up, getattr(source, "truth", None), int(meta.get("seed", 0) or 0))
    ground = {"up_source": up_source, "track_ground": bool(track_ground)}
    if gate:
        gcfg = GateConfig(reach_px=int(gate_reach_px))
        if not band_cut:
            gcfg = replace(gcfg, band=None)
        elif body_beyond:
            gcfg = replace(gcfg, band=BandConfig())
        return GatedBackend(backend, LabelFitter(fit_robot, camera, fps=fps, tracker_config=gate_tracker(gcfg),
                                                 **ground), gcfg)
    return FittedBackend(backend, LabelFitter(fit_robot, camera, fps=fps, **ground))


def _fit_robot(robot, meta: dict, required: bool):
    """The robot the labels are fitted to: ``robot``, else the one the source's meta.json names; None when
    neither names one, or (not ``required``, with a warning) when the meta.json's does not load. ``required``
    (``--fit``): neither naming one, or one that does not load, is an error."""
    if not (robot or meta.get("robot_file") or meta.get("robot")):
        if required:
            raise InputError("--fit needs the robot: give --robot NAME|FILE (the source's meta.json names none)")
        return None
    try:
        return source_robot(robot, meta)
    except SnaketrackError as e:
        if required or robot:
            raise

        warnings.warn(f"labels not fitted to a robot model: {e}", SnaketrackWarning, stacklevel=3)
        return None


def _guide_camera(source, intrinsics, meta: dict):
    """The camera a robot-model guide or fit is drawn with: ``intrinsics``, else the source's meta.json ``K``,
    else a phone's field of view (the silhouette's shape barely depends on the focal length)."""
    if intrinsics is None and "K" not in meta:
        intrinsics = FieldOfView(DEFAULT_FOV_DEG)
    return source_camera(meta, source.width, source.height, intrinsics, str(source.path))


def _box_backend(name: str, source, robot, intrinsics, sam_checkpoint, sam_model, device, stride, motion,
                 meta: dict):
    """The box-prompted backend ``name`` itself (:func:`build_backend`)."""
    if name == "sam":
        from snaketrack.datasets.sam_backend import SamBackend  # deferred: the sam extra (segment_anything)

        if not sam_checkpoint:
            raise InputError("--backend sam needs --sam-checkpoint FILE (Segment Anything's weights, a file you "
                             "supply); or use --backend grabcut")
        require("sam", "--backend sam")
        return SamBackend(sam_checkpoint, sam_model, device=device)
    if name == "grabcut":
        if motion and source is not None:
            return MotionGuidedBackend(source, stride=stride)
        return GrabCutBackend()
    if name == "guided":
        if source is None:
            raise InputError("--backend guided needs the video it labels")
        cam = _guide_camera(source, intrinsics, meta)
        return GuidedBackend(source_robot(robot, meta), cam.K, source.width, source.height,
                             fps=float(source.fps) / max(int(stride), 1))
    raise InputError(f"--backend {name}: expected sam, grabcut or guided")
