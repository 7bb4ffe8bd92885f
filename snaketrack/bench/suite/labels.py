"""Benchmark: GrabCut auto-labels vs truth, and a DeepLabV3+ trained on them.

1. Label a synthetic drone video (default: the benchmark cache's drone-planar-s0, made
   by ``snaketrack sim video --scene drone --frames 300 --seed 0``) with the
   GrabCut backend, prompted on frame 0 with the truth mask's box grown by
   ``--box-margin`` pixels (standing in for the user's box); mean IoU of
   the labels against the truth masks. With ``--fit-robot`` the labels are
   then replaced by the robot model's silhouette fitted to them
   (:mod:`snaketrack.labelling.fit_labels`, into ``WORK/<labels>-fit``) and
   scored the same way; with ``--keep-edge`` as well the labels keep their
   own edge and the silhouette only cuts what lies beyond it (``-trim``).
2. Train DeepLabV3+ on those labels within ``--minutes`` on this CPU
   (``--labels DIR`` trains on an existing dataset instead, e.g. the
   truth masks of the training video for the upper bound).
3. Evaluate it against the truth masks of other synthetic videos (another
   scene and seed; ``--test-video`` may be given several times; e.g. made
   by ``snaketrack sim video --scene handheld --frames 300 --seed 1``), at
   the checkpoint, inference scale, test-time flips and threshold training chose on the
   training video's validation split (stored in the model file; the test
   videos play no part in any choice). ``segment_wall_ms_per_frame`` is the
   wall time of that scoring over its frames (reading and scoring included),
   not the segmenter's speed: that is ``snaketrack bench segmenter``'s.

Every stage resumes (labels and training continue where they stopped).

    snaketrack bench labels --work bench_out/labels
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from snaketrack.bench.cache import cache_dir
from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--train-video", default=None,
                    help="the dataset to label and train on (default: the benchmark cache's drone-planar-s0)")
    ap.add_argument("--test-video", action="append", default=None,
                    help="a test dataset with truth masks (repeatable; default: the benchmark cache's "
                         "handheld-planar-s1)")
    ap.add_argument("--work", default="bench_out/labels", help="folder for the labels and the model")
    ap.add_argument("--box-margin", type=int, default=5)
    ap.add_argument("--encoder", default="resnet18")
    ap.add_argument("--input-size", default="640x360", help="network input WIDTHxHEIGHT")
    ap.add_argument("--crop-size", default="160x160")
    ap.add_argument("--epochs", type=int, default=200, help="upper bound; --minutes ends the run")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--lr-step-epoch", type=int, default=6, help="for --schedule step")
    ap.add_argument("--schedule", default="cosine")
    ap.add_argument("--loss", default="bce+dice")
    ap.add_argument("--p-robot", type=float, default=0.9)
    ap.add_argument("--architecture", default="DeepLabV3Plus")
    ap.add_argument("--labels", default=None,
                    help="train on this existing label dataset (e.g. truth masks as an upper bound) "
                         "instead of labelling")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--max-val-frames", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--test-stride", type=int, default=2, help="evaluate every k-th test frame")
    ap.add_argument("--train-truth-stride", type=int, default=0,
                    help="also score every k-th frame of the training video against its truth (0: no)")
    ap.add_argument("--scales", default="1,1.25,1.5", help="inference scales training may choose on validation")
    ap.add_argument("--tie-tolerance", type=float, default=0.002)
    ap.add_argument("--no-select-last", action="store_true")
    ap.add_argument("--ignore-edge", type=int, default=0)
    ap.add_argument("--ground-colour", type=float, default=0.0)
    ap.add_argument("--zoom", default="0.7,2.0",
                    help="training zoom range LOW,HIGH (the robot is 1-1.8x as wide in the test videos)")
    ap.add_argument("--rotate", type=float, default=30.0, help="training rotations within +-DEG")
    ap.add_argument("--flips", default="1,4", help="test-time flip counts the final choice may pick (1,2,4)")
    ap.add_argument("--shadow", type=float, default=0.0, help="probability of a synthetic cast shadow")
    ap.add_argument("--synthetic-ground", type=float, default=0.0,
                    help="probability of pasting the robot onto a procedural ground")
    ap.add_argument("--average-from", type=float, default=None,
                    help="average the weights from this fraction of the run on (default: off)")
    ap.add_argument("--seed", type=int, default=0, help="training seed (shuffling, augmentation, init)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="forward passes in float32 or under bfloat16 autocast (training and evaluation)")
    ap.add_argument("--out-name", default=None, help="model file name inside --work")
    ap.add_argument("--fit-robot", action="store_true",
                    help="train on the robot-fitted labels (snaketrack fit-labels) of the GrabCut labels")
    ap.add_argument("--keep-edge", action="store_true",
                    help="with --fit-robot: keep the labels' edge, only cut what lies beyond the fitted silhouette")
    ap.add_argument("--skip-train", action="store_true")


def run(args: argparse.Namespace) -> dict:
    args.train_video = args.train_video or str(cache_dir() / "drone-planar-s0")
    args.test_video = args.test_video or [str(cache_dir() / "handheld-planar-s1")]
    import cv2

    cv2.setNumThreads(1)

    from snaketrack.datasets.boxes import mask_to_box
    from snaketrack.datasets.grabcut_backend import GrabCutBackend
    from snaketrack.datasets.layout import Dataset
    from snaketrack.datasets.video import open_frames
    from snaketrack.labelling.label import LabelConfig, label_video
    from snaketrack.training.config import TrainConfig
    from snaketrack.training.evaluate import evaluate_dataset_masks, evaluate_segmenter
    from snaketrack.training.model import parse_input_size
    from snaketrack.training.segmenter import load_segmenter
    from snaketrack.training.train import train

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    truth = Dataset(args.train_video)
    box = mask_to_box(truth.mask(0)).expand(args.box_margin).clip(truth.width, truth.height)
    labels = Path(args.labels) if args.labels else work / "labels-grabcut"
    t0 = time.perf_counter()
    if args.labels:
        res = None
    else:
        res = label_video(open_frames(args.train_video), labels, GrabCutBackend(), box, LabelConfig())
    label_s = time.perf_counter() - t0
    lab_eval = evaluate_dataset_masks(labels, args.train_video)
    from dataclasses import asdict

    from snaketrack.datasets.grabcut_backend import GrabCutConfig

    out = {"grabcut_config": asdict(GrabCutConfig()), "label_config": asdict(LabelConfig()),
           "train_video": args.train_video, "test_video": args.test_video, "box": str(box),
           "labels": str(labels), "label_frames": lab_eval["frames"],
           "label_flagged": res.flagged if res else None, "grabcut_label_iou": lab_eval["iou"],
           "grabcut_label_s_per_frame": label_s / max(res.written, 1) if res and res.written else None}
    if args.fit_robot:
        from snaketrack.labelling.fit_labels import FitConfig, fit_labels

        fitted = work / (labels.name + ("-trim" if args.keep_edge else "-fit"))
        t0 = time.perf_counter()
        rep = fit_labels(labels, fitted, config=FitConfig(keep_edge=args.keep_edge), progress=False)
        out.update(fit_s_per_frame=(time.perf_counter() - t0) / rep["frames"], fit_fitted=rep["fitted"],
                   fit_kept_label=rep["kept_label"],
                   fit_label_iou=evaluate_dataset_masks(fitted, args.train_video)["iou"])
        labels = fitted
    print(json.dumps(out), file=sys.stderr, flush=True)
    if not args.skip_train:
        model = work / (args.out_name or f"{args.architecture.lower()}-{args.encoder}.pt")
        cfg = TrainConfig(encoder=args.encoder, input_size=parse_input_size(args.input_size),
                          crop_size=parse_input_size(args.crop_size, "--crop-size") if args.crop_size else None,
                          epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                          lr_step_epoch=args.lr_step_epoch, time_limit_s=60 * args.minutes,
                          max_val_frames=args.max_val_frames, threads=args.threads, schedule=args.schedule,
                          loss=args.loss, p_robot=args.p_robot, architecture=args.architecture,
                          scales=tuple(float(v) for v in args.scales.split(",")),
                          tie_tolerance=args.tie_tolerance, select_last=not args.no_select_last,
                          ignore_edge=args.ignore_edge, ground_colour=args.ground_colour, seed=args.seed,
                          zoom=tuple(float(v) for v in args.zoom.split(",")), rotate_deg=args.rotate,
                          flips=tuple(int(v) for v in args.flips.split(",")),
                          average_from=args.average_from, shadow=args.shadow, precision=args.precision,
                          synthetic_ground=args.synthetic_ground)
        t0 = time.perf_counter()
        tr = train([str(labels)], model, cfg)
        train_s = time.perf_counter() - t0
        seg = load_segmenter(model)  # the stored choice: checkpoint, scale, threshold
        sel = tr.selection or {}
        out.update({"encoder": args.encoder, "input_size": args.input_size, "crop_size": args.crop_size,
                    "epochs_done": tr.epochs_done, "stopped_by_time": tr.stopped_by_time,
                    "lr": args.lr, "schedule": args.schedule, "loss": args.loss, "p_robot": args.p_robot,
                    "architecture": args.architecture, "ignore_edge": args.ignore_edge,
                    "ground_colour": args.ground_colour, "zoom": args.zoom, "rotate": args.rotate, "flips": args.flips,
                    "average_from": args.average_from, "shadow": args.shadow,
                    "synthetic_ground": args.synthetic_ground, "n_averaged": sel.get("n_averaged"),
                    "precision": seg.precision,
                    "lr_step_epoch": args.lr_step_epoch,
                    "batch_size": args.batch_size, "threads": args.threads, "seed": args.seed,
                    "train_wall_min": train_s / 60 if tr.history else None,
                    "selection_s": sel.get("seconds"),
                    "train_epoch_s": [h["seconds"] for h in tr.history],
                    "best_epoch_val_iou_vs_labels": tr.best_val_iou,
                    "chosen_epoch": sel.get("epoch"), "chosen_scale": seg.scale, "chosen_flips": seg.flips,
                    "chosen_threshold": seg.threshold,
                    "chosen_val_iou_vs_labels": sel.get("iou"), "model": str(model), "tests": {}})
        print(json.dumps(out), file=sys.stderr, flush=True)
        for tv in args.test_video:
            t0 = time.perf_counter()
            test = Dataset(tv)
            ev = evaluate_segmenter(seg, tv, batch_size=4, progress=True,
                                    frames=range(0, len(test), args.test_stride))
            out["tests"][tv] = {"frames": ev["frames"], "iou": ev["iou"],
                                "segment_wall_ms_per_frame": 1000 * (time.perf_counter() - t0) / max(ev["frames"], 1)}
            print(json.dumps({tv: out["tests"][tv]}), file=sys.stderr, flush=True)
        if args.train_truth_stride > 0:
            ev_train = evaluate_segmenter(seg, args.train_video, batch_size=4,
                                          frames=range(0, len(truth), args.train_truth_stride))
            out["trained_iou_train_video_truth"] = ev_train["iou"]
    return out


BENCHMARK = Benchmark("labels", "GrabCut auto-labels against truth, and a DeepLabV3+ trained on them",
                      add_arguments, run, quick={"minutes": 0.05, "epochs": 1, "test_stride": 50})
