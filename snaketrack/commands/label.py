"""``snaketrack label``: auto-label a video with box-prompted SAM or GrabCut;
``snaketrack fit-labels``: replace the labels by the robot model's silhouette fitted to them.

``label``: frame 0 is prompted with ``--box``; each later frame with the
dilated box of the previous good mask. Writes a dataset folder (frames/,
masks/, meta.json) plus labels.csv, labels_report.json and, when frames are
flagged, labels_flagged.png. Run again on the same ``--out`` to continue.

``fit-labels``: tracks the label dataset with the robot's kinematic model
(:mod:`snaketrack.datasets.fit_labels`) and writes a new dataset whose
masks are the fitted silhouettes cut to the labels grown by ``--agree-px``;
frames the fit cannot explain keep their label.
"""
from __future__ import annotations

import argparse
import json

from snaketrack.commands import Command, add_camera_arguments, camera_of
from snaketrack.errors import InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="VIDEO|FRAMES_DIR", help="a video file, a folder of images or a dataset folder")
    p.add_argument("--box", required=True, metavar="X,Y,W,H",
                   help="the robot's box in the first frame [pixels]: top-left x, y, width, height")
    p.add_argument("--backend", choices=("sam", "guided", "grabcut"), default=None,
                   help="box-prompted segmenter: sam (Segment Anything), grabcut (from the box, guided by where "
                        "the video moves) or guided "
                        "(GrabCut guided by the robot's model fitted frame by frame; needs --robot or a dataset "
                        "naming it) (default: sam with --sam-checkpoint, else grabcut)")
    p.add_argument("--no-motion", action="store_true",
                   help="grabcut from the box and colours alone, not guided by where the video moves")
    p.add_argument("--robot", default=None,
                   help="shipped robot name or robot YAML file, for the guided backend (default: the source's "
                        "meta.json robot, if any)")
    add_camera_arguments(p, "the source's meta.json K, else a 65 deg horizontal field of view; only the guided "
                            "backend uses the camera")
    p.add_argument("--sam-checkpoint", metavar="FILE",
                   help="local Segment Anything weights (required for --backend sam)")
    p.add_argument("--sam-model", choices=("vit_b", "vit_l", "vit_h"), default="vit_b",
                   help="SAM model type of the checkpoint (default vit_b)")
    p.add_argument("--device", default="cpu", help="torch device for SAM (default cpu)")
    p.add_argument("--dilate", type=int, default=None, metavar="PX",
                   help="dilation of the previous mask before mask-to-box [pixels] (default 15)")
    p.add_argument("--reanchor", type=int, default=None, metavar="N",
                   help="take the N-th of consecutive masks flagged area_jump that agree with each other as "
                        "good, after a label that drifted slowly (default 3; 0: never)")
    p.add_argument("--stride", type=int, default=1, metavar="K", help="label every K-th frame (default 1)")
    p.add_argument("--max-frames", type=int, default=None, metavar="N", help="stop after N dataset frames")
    p.add_argument("--out", required=True, metavar="DATASET", help="output dataset folder (resumed if it exists)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of a sentence")


def run(args: argparse.Namespace) -> int:
    from snaketrack.datasets.boxes import parse_box
    from snaketrack.datasets.label import LabelConfig, label_video
    from snaketrack.datasets.video import open_frames

    src = open_frames(args.source)
    box = parse_box(args.box, src.width, src.height)
    given = {"dilate_px": args.dilate, "reanchor_frames": args.reanchor}
    cfg = LabelConfig(**{k: v for k, v in given.items() if v is not None})
    backend = build_backend(args.backend or "default", src, args.robot, camera_of(args),
                            sam_checkpoint=args.sam_checkpoint, sam_model=args.sam_model, device=args.device,
                            stride=args.stride, motion=not args.no_motion)
    res = label_video(src, args.out, backend, box, cfg, stride=args.stride, max_frames=args.max_frames)
    summary = {"out": res.out, "frames": res.frames, "written": res.written, "flagged": res.flagged,
               "flag_counts": res.report["flag_counts"]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{res.out}: {res.frames} frames labelled ({res.written} now), {res.flagged} flagged"
              + (f" - see {res.out}/labels_flagged.png" if res.flagged else ""))
    return 0


def build_backend(name: str, source=None, robot: str | None = None, intrinsics=None,
                  sam_checkpoint: str | None = None, sam_model: str = "vit_b", device: str = "cpu", stride: int = 1,
                  motion: bool = True):
    """The box-prompted backend ``label`` runs for ``--backend NAME``.

    ``default`` is what ``label`` runs without ``--backend``: SAM when a checkpoint is given, else
    GrabCut (higher mean IoU over the label suite than the guided backend, docs/segmentation.md),
    guided by where the video moves (:mod:`~snaketrack.datasets.motion_backend`) when ``motion`` and
    ``source`` is given, else from the box and colours alone.
    ``guided`` needs the robot: ``robot``, or the source's meta.json names it.
    ``source``: the
    :class:`~snaketrack.datasets.video.FrameSource` (the guided backend's frame size, rate and camera);
    ``intrinsics``: a calibration file or ``FieldOfView`` (default: the source's meta.json ``K``).
    """
    meta = getattr(source, "meta", {}) or {}
    if name == "default":
        name = "sam" if sam_checkpoint else "grabcut"
    if name == "sam":
        from snaketrack.datasets.sam_backend import SamBackend

        if not sam_checkpoint:
            raise InputError("--backend sam needs --sam-checkpoint FILE (Segment Anything's weights, a file you "
                             "supply); or use --backend grabcut")
        return SamBackend(sam_checkpoint, sam_model, device=device)
    if name == "grabcut":
        from snaketrack.datasets.grabcut_backend import GrabCutBackend

        if motion and source is not None:
            from snaketrack.datasets.motion_backend import MotionGuidedBackend

            return MotionGuidedBackend(source, stride=stride)
        return GrabCutBackend()
    if name == "guided":
        from snaketrack.datasets.guided_backend import GuidedBackend
        from snaketrack.models.robot import source_robot
        from snaketrack.tracker.camera import source_camera

        if source is None:
            raise InputError("--backend guided needs the video it labels")
        if intrinsics is None and "K" not in meta:
            from snaketrack.tracker.camera import DEFAULT_FOV_DEG, FieldOfView

            intrinsics = FieldOfView(DEFAULT_FOV_DEG)  # the guide's shape barely depends on the focal length
        cam = source_camera(meta, source.width, source.height, intrinsics, str(source.path))
        return GuidedBackend(source_robot(robot, meta), cam.K, source.width, source.height,
                             fps=float(source.fps) / max(int(stride), 1))
    raise InputError(f"--backend {name}: expected sam, grabcut or guided")


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("labels", metavar="LABELS", help="a label dataset written by `snaketrack label`")
    p.add_argument("--robot", default=None,
                   help="shipped robot name or robot YAML file (default: the labels' meta.json robot)")
    add_camera_arguments(p, "the labels' meta.json K, else a 65 deg horizontal field of view (a phone's)")
    p.add_argument("--agree-px", type=int, default=2, metavar="PX",
                   help="how far the fitted silhouette may reach beyond the label [pixels] (default 2)")
    p.add_argument("--min-iou", type=float, default=0.7,
                   help="a frame keeps its label when the fitted silhouette overlaps it less (default 0.7)")
    p.add_argument("--keep-edge", action="store_true",
                   help="keep the label's own edge; only cut what lies beyond the fitted silhouette grown by --trim-px")
    p.add_argument("--trim-px", type=int, default=1, metavar="PX",
                   help="with --keep-edge: how far the label may reach beyond the fitted silhouette [pixels] "
                        "(default 1)")
    p.add_argument("--out", required=True, metavar="DATASET", help="output dataset folder (resumed if it exists)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of a sentence")


def run_fit(args: argparse.Namespace) -> int:
    from snaketrack.datasets.fit_labels import FitConfig, fit_labels

    rep = fit_labels(args.labels, args.out, args.robot, camera_of(args),
                     FitConfig(agree_px=args.agree_px, min_iou=args.min_iou,
                               keep_edge=args.keep_edge, trim_px=args.trim_px))
    if args.json:
        print(json.dumps(dict(rep, out=args.out)))
    else:
        what = "trimmed to" if args.keep_edge else "replaced by"
        print(f"{args.out}: {rep['fitted']} of {rep['frames']} labels {what} the fitted silhouette "
              f"(mean IoU with the label {rep['mean_iou_fit']:.3f}); {rep['kept_label']} kept as labelled")
    return 0


COMMANDS = [Command(name="label", help="auto-label a video with box-prompted SAM or GrabCut",
                    add_arguments=add_arguments, run=run),
            Command(name="fit-labels", help="replace auto-labels by the robot model's silhouette fitted to them",
                    add_arguments=add_fit_arguments, run=run_fit)]
