"""Track your own robot in one go: label a video from one box, train a segmenter, track, judge the track.

The recipe of docs/your-robot.md, stage by stage, each through the ``snaketrack`` command a user would
type, into ``--out``:

1. ``labels/``: ``snaketrack label VIDEO --box X,Y,W,H`` (GrabCut, or SAM with ``--sam-checkpoint``);
2. ``train/`` and ``heldout/``: the labelled frames split in time: the last ``--holdout`` of the clip is
   held out (never trained or validated on), the rest trains;
3. ``model.pt``: ``snaketrack train train/`` (the default CPU recipe, ``--minutes`` of it);
4. ``heldout-iou.json``: ``snaketrack eval-seg`` of the model on the held-out frames against their labels;
5. ``track/``: ``snaketrack track VIDEO --masks segmenter:model.pt --track-size`` (``--track-width`` wide;
   with ``--camera fixed``, the default, also ``--up auto --static-camera``: the ground plane from the
   robot's own track) with ``metrics.json``'s figures of a track without truth, and ``quality.png``;
6. ``speed.json``: the segmenter's and the tracker's time per frame, measured on the held-out frames and
   in the tracking run, and the two together.

Run it again with the same ``--out`` to resume: a finished stage is skipped (labelling and tracking
resume where they stopped). The last line printed is one JSON object with the figures.

Usage::

    .venv/bin/python scripts/real_footage.py VIDEO --robot cobra-12 --box 280,245,545,190 --out runs/cobra
        [--fov-deg 65 | --intrinsics camera.yaml] [--minutes 20] [--holdout 0.2] [--track-width 640]
        [--camera fixed|moving] [--head first|wave]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.errors import SnaketrackError  # noqa: E402


def _snaketrack(*args: str, json_out: bool = False) -> dict:
    """Run ``snaketrack ARGS`` as a user would; its JSON summary when ``json_out``."""
    cmd = [sys.executable, "-m", "snaketrack", *map(str, args)] + (["--json"] if json_out else [])
    print("$ snaketrack " + " ".join(map(str, args)), file=sys.stderr, flush=True)
    res = subprocess.run(cmd, stdout=subprocess.PIPE if json_out else None, text=True)
    if res.returncode != 0:
        raise SnaketrackError(f"snaketrack {args[0]} failed (exit {res.returncode})")
    return json.loads(res.stdout.strip().splitlines()[-1]) if json_out else {}


def split_in_time(labels: Path, train: Path, heldout: Path, holdout: float) -> dict:
    """Link the frames of the dataset ``labels`` into ``train`` (the first ``1 - holdout`` of the clip) and
    ``heldout`` (the rest), each renumbered from 0 with its own ``meta.json``; flagged frames are left out."""
    from snaketrack.datasets.label_report import flagged_frames
    from snaketrack.datasets.layout import MASK_EXT, frame_name
    from snaketrack.io import read_json, write_json

    if not 0.0 < holdout < 1.0:
        raise SnaketrackError(f"--holdout {holdout}; expected a fraction in (0, 1)")
    masks = sorted((labels / "masks").glob(f"*{MASK_EXT}"))
    flagged = flagged_frames(labels)
    frames = [int(p.stem) for p in masks if int(p.stem) not in flagged]
    if len(frames) < 10:
        raise SnaketrackError(f"{labels}: {len(frames)} good labelled frames; expected at least 10")
    cut = int(round(len(frames) * (1.0 - holdout)))
    meta = read_json(labels / "meta.json")
    for out, part in ((train, frames[:cut]), (heldout, frames[cut:])):
        for sub in ("frames", "masks"):
            (out / sub).mkdir(parents=True, exist_ok=True)
        for k, i in enumerate(part):
            for sub, ext in (("frames", None), ("masks", MASK_EXT)):
                src = labels / sub / (frame_name(i) if ext is None else frame_name(i, ext))
                dst = out / sub / (frame_name(k) if ext is None else frame_name(k, ext))
                if not dst.exists():
                    os.link(src, dst)
        write_json(out / "meta.json", {**meta, "source_frames": [part[0], part[-1]]})
    return {"train_frames": cut, "heldout_frames": len(frames) - cut, "heldout_from_frame": frames[cut]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("video", help="the video of the robot")
    ap.add_argument("--robot", required=True, help="shipped robot name or robot YAML file")
    ap.add_argument("--box", required=True, metavar="X,Y,W,H", help="the robot's box in the first frame [pixels]")
    ap.add_argument("--out", required=True, help="folder of the run (resumed if it exists)")
    cam = ap.add_mutually_exclusive_group()
    cam.add_argument("--fov-deg", type=float, default=None, help="horizontal field of view [deg] (default 65)")
    cam.add_argument("--intrinsics", default=None, help="an OpenCV calibration file (snaketrack calibrate)")
    ap.add_argument("--sam-checkpoint", default=None, help="label with SAM from these weights instead of GrabCut")
    ap.add_argument("--minutes", type=float, default=20.0, help="training time [min] (default 20)")
    ap.add_argument("--holdout", type=float, default=0.2, help="share of the clip held out, at its end (default 0.2)")
    ap.add_argument("--track-width", type=int, default=640,
                    help="tracking width [px]; a narrower video is tracked at its own width (default 640)")
    ap.add_argument("--head", choices=("first", "wave"), default="first",
                    help="which end is the head (snaketrack track --head): first (keep the first frame's reading; "
                         "sidewinding) or wave (the robot crawls forward) (default first)")
    ap.add_argument("--camera", choices=("fixed", "moving"), default="fixed",
                    help="fixed (a tripod: the ground plane estimated from the robot's own track, --up auto "
                         "--static-camera) or moving (no ground prior) (default fixed)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    camera = (["--fov-deg", args.fov_deg] if args.fov_deg is not None
              else ["--intrinsics", args.intrinsics] if args.intrinsics else [])
    try:
        from snaketrack.datasets.video import open_frames

        video = open_frames(args.video)
        width = min(int(args.track_width), int(video.width))  # a smaller video is tracked at its own size
        height = int(round(video.height * width / video.width / 2.0)) * 2
        figures: dict = {"video": str(args.video), "robot": args.robot, "frames": len(video), "fps": video.fps}

        labels = out / "labels"
        backend = ["--backend", "sam", "--sam-checkpoint", args.sam_checkpoint] if args.sam_checkpoint else []
        res = _snaketrack("label", args.video, "--box", args.box, *backend, "--out", labels, json_out=True)
        figures["labels"] = {"frames": res["frames"], "flagged": res["flagged"], "flag_counts": res["flag_counts"],
                             "contact_sheet": str(labels / "labels_sheet.png")}

        split = split_in_time(labels, out / "train", out / "heldout", args.holdout)
        figures["split"] = split
        model = out / "model.pt"
        if not model.is_file():
            _snaketrack("train", out / "train", "--minutes", args.minutes, "--out", model)
        iou_file = out / "heldout-iou.json"
        if not iou_file.is_file():
            res = {s: _snaketrack("eval-seg", out / "heldout", "--model", model, "--setting", s, json_out=True)
                   for s in ("live", "accurate")}
            iou_file.write_text(json.dumps(res))
        figures["segmenter_heldout_iou"] = {s: r["iou"] for s, r in json.loads(iou_file.read_text()).items()}

        track = out / "track"
        if not (track / "summary.json").is_file():
            ground = ["--up", "auto", "--static-camera"] if args.camera == "fixed" else []
            _snaketrack("track", args.video, "--robot", args.robot, *camera, "--masks", f"segmenter:{model}",
                        *ground, "--head", args.head, "--track-size", f"{width}x{height}", "--out", track)
        summary = json.loads((track / "summary.json").read_text())
        figures["track"] = {k: summary.get(k) for k in (
            "frames", "frames_lost", "frames_coasting", "flips", "silhouette_iou_mean", "silhouette_iou_p5",
            "skeleton_residual_px", "skeleton_residual_p95_px", "joint_second_difference_rad",
            "gait_frequency_hz", "gait_frequency_spread", "gait_power_fraction", "fps",
            "fps_excluding_search", "search_s")}
        figures["speed"] = _speed(out / "speed.json", model, out / "heldout", summary)
    except SnaketrackError as e:
        print(f"real_footage: {e}", file=sys.stderr)
        return 2
    print(json.dumps(figures))
    return 0


def _speed(path: Path, model: Path, heldout: Path, summary: dict) -> dict:
    """The segmenter's live setting per frame [ms] at the tracking size, the tracker's per frame [ms] (its
    first-frame search left out), and the rate of the two together [frames/s]."""
    if path.is_file():
        return json.loads(path.read_text())
    import numpy as np

    from snaketrack.datasets.video import open_frames
    from snaketrack.training.segmenter import load_segmenter

    w, h = summary["track_size"]
    seg = load_segmenter(model, setting="live")
    frames = open_frames(heldout)
    import cv2

    times = []
    for k, (_, rgb) in enumerate(frames.frames()):
        small = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)
        t0 = time.perf_counter()
        seg.predict(small)
        times.append(time.perf_counter() - t0)
        if k >= 40:
            break
    seg_ms = 1000.0 * float(np.median(times[2:]))
    track_ms = 1000.0 / float(summary["fps_excluding_search"])
    res = {"segmenter_ms": seg_ms, "tracker_ms": track_ms, "fps_together": 1000.0 / (seg_ms + track_ms),
           "size": [w, h]}
    path.write_text(json.dumps(res))
    return res


if __name__ == "__main__":
    sys.exit(main())
