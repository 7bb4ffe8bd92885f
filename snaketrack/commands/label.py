"""``snaketrack label``: auto-label a video with box-prompted SAM or GrabCut;
``snaketrack fit-labels``: make labels consistent with the robot model fitted to them.

``label``: frame 0 is prompted with ``--box``; each later frame with the
dilated box of the previous good mask. With the robot known, GrabCut's labels
are fitted to its model as they are written (``--no-fit``: not).
Writes a dataset folder (frames/, masks/, meta.json) plus labels.csv,
labels_report.json and, when frames are flagged, labels_flagged.png. Run
again on the same ``--out`` to continue.

``fit-labels``: tracks a label dataset with the robot's kinematic model
(:mod:`snaketrack.labelling.fit_labels`) and writes a new dataset whose
masks are the fitted silhouettes where they explain the labels, the labels
trimmed to them where they explain them less, the labels themselves elsewhere.
"""
from __future__ import annotations

import argparse
import json
import time

from snaketrack.commands import Command, add_camera_arguments, apply_threads, camera_of
from snaketrack.threads import LABEL_THREADS


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
                   help="shipped robot name or robot YAML file: the grabcut labels are fitted to its model, and the "
                        "guided backend is guided by it (default: the source's meta.json robot, if any)")
    p.add_argument("--fit", action=argparse.BooleanOptionalAction, default=None,
                   help="fit the robot model to the labels while labelling: its silhouette replaces a label it "
                        "explains (IoU >= 0.85) and trims one it explains less (>= 0.7) to within 1 px of it "
                        "(default: on for grabcut when the robot is known)")
    p.add_argument("--gate", action=argparse.BooleanOptionalAction, default=True,
                   help="with the labels fitted to the robot model, hold each label to it: the next frame's box "
                        "and prior from the model's predicted silhouette, what lies beyond it cut off, a cut that "
                        "disagrees cut again, a label the fitted model does not explain flagged off_model "
                        "(default: on; --no-gate: the fit alone)")
    p.add_argument("--band-cut", action=argparse.BooleanOptionalAction, default=True,
                   help="with the gate, cut a label the fitted model explains again by colour within a band around "
                        "the model's silhouette (half the body's width), so that the robot's dark housings, which "
                        "the box's cut takes for the floor's shade, are labelled and what is not of the robot's "
                        "colours in front of it is not (default: on)")
    p.add_argument("--body-beyond", action="store_true",
                   help="with the band cut, join the body past the model's ends in the robot's own colours (ones "
                        "the floor around the first label lacks) to the label and the fit (default: off; on a real "
                        "clip of a red robot it took in more than the body)")
    p.add_argument("--gate-reach", type=int, default=0, metavar="PX",
                   help="with the gate, refine the model from its prediction on each frame's cut within PX of the "
                        "predicted silhouette before gating: keeps the labels on a robot that moves fast in a clear "
                        "scene, but can move the model onto people or furniture beside the robot (default 0: off)")
    p.add_argument("--up", default=None, metavar="sim-imu|FILE|none",
                   help="the world's up direction in the camera frame per frame, which holds the fitted robot model "
                        "to the ground (what keeps it from sliding nearer the camera on a low view): an IMU CSV "
                        "(frame, up_x, up_y, up_z; a phone logs one), or 'sim-imu' (a synthetic dataset's camera "
                        "attitude with 1° bias and 0.5° noise); default none")
    p.add_argument("--track-ground", action="store_true",
                   help="the camera moves (handheld, drone): follow its height over the ground through the frames "
                        "and hold the fitted model's base to the ground (needs --up)")
    add_camera_arguments(p, "the source's meta.json K, else a 65 deg horizontal field of view; only the robot "
                            "model's fit and guide use the camera")
    p.add_argument("--sam-checkpoint", metavar="FILE",
                   help="local Segment Anything weights (required for --backend sam)")
    p.add_argument("--sam-model", choices=("vit_b", "vit_l", "vit_h"), default="vit_b",
                   help="SAM model type of the checkpoint (default vit_b)")
    p.add_argument("--device", default="cpu", help="torch device for SAM (default cpu)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help=f"torch's CPU threads (default: {LABEL_THREADS} for grabcut and guided, whose robot fit "
                        "works on small tensors while another core makes grabcut's next motion map; torch's, one "
                        "a core, for sam)")
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
    import torch

    from snaketrack.datasets.boxes import parse_box
    from snaketrack.datasets.video import open_frames
    from snaketrack.labelling.backends import build_backend
    from snaketrack.labelling.label import LabelConfig, label_video

    apply_threads(args)
    src = open_frames(args.source)
    box = parse_box(args.box, src.width, src.height)
    given = {"dilate_px": args.dilate, "reanchor_frames": args.reanchor}
    cfg = LabelConfig(**{k: v for k, v in given.items() if v is not None})
    backend = build_backend(args.backend or "default", src, args.robot, camera_of(args),
                            sam_checkpoint=args.sam_checkpoint, sam_model=args.sam_model, device=args.device,
                            stride=args.stride, motion=not args.no_motion, fit=args.fit, gate=args.gate,
                            up=args.up, track_ground=args.track_ground, band_cut=args.band_cut,
                            gate_reach_px=args.gate_reach, body_beyond=args.body_beyond)
    if args.threads is None and backend.name != "sam":
        torch.set_num_threads(LABEL_THREADS)
    t0 = time.perf_counter()
    res = label_video(src, args.out, backend, box, cfg, stride=args.stride, max_frames=args.max_frames)
    seconds = time.perf_counter() - t0
    summary = {"out": res.out, "frames": res.frames, "written": res.written, "flagged": res.flagged,
               "flag_counts": res.report["flag_counts"],
               "frames_per_s": round(res.written / seconds, 3) if seconds > 0 else None}
    fitter = getattr(backend, "fitter", None)
    if fitter is not None:
        summary["robot_fit"] = {**fitter.counts, "joined": fitter.joined}
    fit = res.report.get("fit") if getattr(backend, "gate_flags", None) is not None else None
    gate = None if fit is None else fit["gate_counts"]
    if gate is not None:
        summary["gate"] = dict(gate, gated=fit["gated_frames"])
    if args.json:
        print(json.dumps(summary))
    else:
        fitted = ""
        if fitter is not None:
            sheet = res.report.get("fit", {}).get("contact_sheet")
            fitted = (f"; of the {res.written} written, {fitter.counts['fit']} replaced by the fitted robot model "
                      f"and {fitter.counts['trim']} trimmed to it, {fitter.joined} took in its moving pixels, "
                      f"{fitter.counts['label']} kept as cut where the model did not explain them"
                      + (f" (to check first: {res.out}/{sheet})" if sheet else ""))
        if gate is not None:
            fitted += (f"; the gate changed {fit['gated_frames']} labels ("
                       + (", ".join(f"{k} {v}" for k, v in sorted(gate.items())) or "none") + ")")
        rate = f" at {summary['frames_per_s']:.2f} frames/s" if summary["frames_per_s"] else ""
        print(f"{res.out}: {res.frames} frames labelled ({res.written} now{rate}), {res.flagged} flagged"
              + (f" - see {res.out}/labels_flagged.png" if res.flagged else "") + fitted)
    return 0


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("labels", metavar="LABELS", help="a label dataset written by `snaketrack label`")
    p.add_argument("--robot", default=None,
                   help="shipped robot name or robot YAML file (default: the labels' meta.json robot)")
    add_camera_arguments(p, "the labels' meta.json K, else a 65 deg horizontal field of view (a phone's)")
    p.add_argument("--agree-px", type=int, default=2, metavar="PX",
                   help="how far the fitted silhouette may reach beyond the label [pixels] (default 2)")
    p.add_argument("--min-iou", type=float, default=0.7,
                   help="a frame keeps its label when the fitted silhouette overlaps it less (default 0.7)")
    p.add_argument("--replace-iou", type=float, default=0.85,
                   help="the fitted silhouette replaces a label it overlaps at least this much; a label it overlaps "
                        "less (down to --min-iou) is trimmed to it (default 0.85)")
    p.add_argument("--keep-edge", action="store_true",
                   help="never replace: keep the label's own edge and only cut what lies beyond the fitted "
                        "silhouette grown by --trim-px")
    p.add_argument("--trim-px", type=int, default=1, metavar="PX",
                   help="a trimmed label keeps what lies this close to the fitted silhouette [pixels] (default 1)")
    p.add_argument("--no-snap", action="store_true",
                   help="leave the edge of a replaced or trimmed label where the fit put it (default: moved onto the "
                        "frame's colour edge beside it, by at most a pixel)")
    p.add_argument("--out", required=True, metavar="DATASET", help="output dataset folder (resumed if it exists)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of a sentence")


def run_fit(args: argparse.Namespace) -> int:
    from snaketrack.labelling.fit_labels import FitConfig, fit_labels

    rep = fit_labels(args.labels, args.out, args.robot, camera_of(args),
                     FitConfig(agree_px=args.agree_px, min_iou=args.min_iou, replace_iou=args.replace_iou,
                               keep_edge=args.keep_edge, trim_px=args.trim_px, snap=not args.no_snap))
    if args.json:
        print(json.dumps(dict(rep, out=args.out)))
    else:
        print(f"{args.out}: of {rep['frames']} labels {rep['replaced']} replaced by the fitted silhouette and "
              f"{rep['trimmed']} trimmed to it (mean IoU with the label {rep['mean_iou_fit']:.3f}); "
              f"{rep['kept_label']} kept as labelled")
    return 0


COMMANDS = [Command(name="label", help="auto-label a video with box-prompted SAM or GrabCut",
                    add_arguments=add_arguments, run=run),
            Command(name="fit-labels", help="replace auto-labels by the robot model's silhouette fitted to them",
                    add_arguments=add_fit_arguments, run=run_fit)]
