"""``snaketrack fit-video``: track a robot in a video from one box: label, train a segmenter, track, judge.

::

    snaketrack fit-video VIDEO --robot NAME|FILE --box X,Y,W,H --out DIR
        [--intrinsics FILE | --fov-deg DEG] [--camera fixed|moving] [--head first|wave]
        [--minutes 20] [--epochs N] [--holdout 0.2] [--track-width 640] [--max-frames N]
        [--sam-checkpoint FILE] [--train-args 'FLAGS']

The stages of docs/your-robot.md, each the command a user would type, run in this process into ``--out``:

1. ``labels/``: ``snaketrack label VIDEO --box ... --robot ...`` (the labels fitted to the robot's model);
2. ``train/``, ``heldout/``: the good labels split in time, the last ``--holdout`` of the clip held out;
3. ``model.pt``: ``snaketrack train train/`` (the CPU recipe, ``--minutes`` of it);
4. the model's IoU on the held-out frames (``snaketrack eval-seg``, live and accurate settings);
5. ``track/``: ``snaketrack track VIDEO --masks segmenter:model.pt`` (``--camera fixed``: also ``--up auto
   --static-camera``, the ground plane from the robot's own track);
6. ``speed.json``: the segmenter's and the tracker's time per frame and the two together;

then the truth-free quality figures held against their limits
(:mod:`snaketrack.tracker.run.quality_flags`): a run whose labels or track left the robot is flagged in the
JSON and in a one-line warning.

``stages.json`` records each finished stage and its figures; run again with the same ``--out`` and the
finished stages are skipped. An interrupted stage leaves nothing the next run takes as finished: labelling
and training resume where they stopped, the track is written into ``track.partial/`` and renamed to
``track/`` when it is complete. The last line printed is one JSON object with the figures of every stage.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import cv2

from snaketrack.commands import Command, add_camera_arguments, command_parser
from snaketrack.errors import InputError

STAGES_JSON = "stages.json"
#: the flags a finished stage depends on: a run resumed with other values is refused
_RUN_KEYS = ("video", "robot", "box", "fov_deg", "intrinsics", "camera", "head", "minutes", "epochs", "holdout",
             "track_width", "max_frames", "sam_checkpoint", "train_args")
#: the track's figures the JSON repeats from its summary.json
_TRACK_KEYS = ("frames", "frames_lost", "frames_coasting", "flips", "silhouette_iou_mean", "silhouette_iou_p5",
               "skeleton_residual_px", "skeleton_residual_p95_px", "joint_second_difference_rad",
               "gait_frequency_hz", "gait_frequency_spread", "gait_power_fraction", "fps", "fps_excluding_search",
               "search_s", "fps_wall")


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("video", metavar="VIDEO", help="the video of the robot (a file or a folder of images)")
    p.add_argument("--robot", required=True, metavar="NAME|FILE",
                   help="shipped robot name or robot YAML file (snaketrack robot new writes one)")
    p.add_argument("--box", required=True, metavar="X,Y,W,H", help="the robot's box in the first frame [px]")
    p.add_argument("--out", required=True, metavar="DIR", help="folder of the run (resumed when it holds one)")
    add_camera_arguments(p, "a 65 deg horizontal field of view (a phone's)")
    p.add_argument("--camera", choices=("fixed", "moving"), default="fixed",
                   help="fixed: a camera on a tripod; the ground plane is fitted to the robot's own track and the "
                        "base held to it (track --up auto --static-camera); moving: a handheld or panning camera, "
                        "no ground prior (default fixed)")
    p.add_argument("--head", choices=("first", "wave"), default="first",
                   help="which end is the head (track --head): first keeps the first frame's reading (sidewinding, "
                        "backing up) or wave reads it from the body wave (crawling forward) (default first)")
    p.add_argument("--minutes", type=float, default=20.0, help="training time [min] (default 20)")
    p.add_argument("--epochs", type=int, default=None, help="at most this many training epochs (default: train's)")
    p.add_argument("--holdout", type=float, default=0.2,
                   help="share of the good labels held out at the clip's end to score the segmenter (default 0.2)")
    p.add_argument("--track-width", type=int, default=640,
                   help="tracking width [px]; a narrower video is tracked at its own width (default 640)")
    p.add_argument("--max-frames", type=int, default=None, metavar="N",
                   help="label and track the first N frames only (default: all)")
    p.add_argument("--sam-checkpoint", default=None, metavar="FILE",
                   help="label with Segment Anything from these weights instead of GrabCut")
    p.add_argument("--train-args", default="", metavar="'FLAGS'",
                   help="more flags for snaketrack train, in one quoted string (e.g. '--encoder mobilenet_v2'; one "
                        "flag alone is written --train-args=--no-live-int8)")


def run_stage(argv: list[str]) -> str:
    """Run ``snaketrack ARGV`` in this process; returns what it printed on standard output, which is passed
    on to standard error (standard output carries only this command's JSON)."""
    print("$ snaketrack " + " ".join(argv), file=sys.stderr, flush=True)
    args = command_parser(argv[0]).parse_args(argv[1:])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        args._run(args)
    text = buf.getvalue()
    sys.stderr.write(text)
    return text


def _last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


class Stages:
    """``stages.json``: the run's flags and the figures of each finished stage, written atomically."""

    def __init__(self, out: Path, run: dict[str, Any]):
        from snaketrack.io import read_json

        self.path = out / STAGES_JSON
        self.data: dict[str, Any] = {"run": run, "done": {}}
        if self.path.is_file():
            old = read_json(self.path)
            for key, value in old.get("run", {}).items():
                if run.get(key) != value:
                    raise InputError(f"--out {out} holds a run with {key} {value!r}, not {run.get(key)!r}; give "
                                     f"another --out, or the same flags to resume it")
            self.data["done"] = old.get("done", {})

    def get(self, name: str):
        return self.data["done"].get(name)

    def finish(self, name: str, figures: Any) -> Any:
        from snaketrack.io import write_json

        self.data["done"][name] = figures
        write_json(self.path, self.data)
        return figures


def _run(args: argparse.Namespace) -> int:
    from snaketrack.datasets.split import split_in_time
    from snaketrack.datasets.video import open_frames
    from snaketrack.io import read_json
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.run.quality_flags import flag_run

    for flag, value in (("--minutes", args.minutes), ("--track-width", args.track_width)):
        if not value > 0:
            raise InputError(f"{flag} {value}: expected a positive number")
    if args.max_frames is not None and args.max_frames < 1:
        raise InputError(f"--max-frames {args.max_frames}: expected a positive number of frames")
    robot = load_robot(args.robot)  # a bad robot file is refused before any stage runs
    video = open_frames(args.video)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stages = Stages(out, {k: getattr(args, k) for k in _RUN_KEYS})
    camera = (["--fov-deg", str(args.fov_deg)] if args.fov_deg is not None
              else ["--intrinsics", str(args.intrinsics)] if args.intrinsics else [])
    first = ["--max-frames", str(args.max_frames)] if args.max_frames else []
    n_frames = min(len(video), args.max_frames) if args.max_frames else len(video)
    figures: dict[str, Any] = {"video": str(args.video), "robot": robot.name, "frames": n_frames, "fps": video.fps}

    labels = out / "labels"
    if stages.get("labels") is None:
        backend = ["--backend", "sam", "--sam-checkpoint", str(args.sam_checkpoint)] if args.sam_checkpoint else []
        run_stage(["label", str(args.video), "--box", args.box, "--robot", str(args.robot), *camera, *backend,
                   *first, "--out", str(labels), "--json"])
        report = read_json(labels / "labels_report.json")
        stages.finish("labels", {"frames": report["frames"], "flagged": report["flagged_count"],
                                 "contact_sheet": str(labels / "labels_sheet.png")})
    figures["labels"] = stages.get("labels")

    if stages.get("split") is None:
        stages.finish("split", split_in_time(labels, out / "train", out / "heldout", args.holdout))
    figures["split"] = stages.get("split")

    model = out / "model.pt"
    if stages.get("train") is None:
        epochs = ["--epochs", str(args.epochs)] if args.epochs else []
        res = _last_json(run_stage(["train", str(out / "train"), "--minutes", f"{args.minutes:g}", *epochs,
                                    *shlex.split(args.train_args), "--out", str(model), "--json"]))
        stages.finish("train", {k: res.get(k) for k in ("epochs", "stopped_by_time", "chosen_val_iou",
                                                         "chosen_scale", "chosen_flips", "live_int8")})
    figures["train"] = stages.get("train")

    if stages.get("heldout") is None:
        stages.finish("heldout", {s: _last_json(run_stage(["eval-seg", str(out / "heldout"), "--model", str(model),
                                                            "--setting", s, "--json"]))["iou"]
                                  for s in ("live", "accurate")})
    figures["segmenter_heldout_iou"] = stages.get("heldout")

    track = out / "track"
    if stages.get("track") is None:
        width = min(int(args.track_width), int(video.width))  # a smaller video is tracked at its own size
        height = int(round(video.height * width / video.width / 2.0)) * 2
        partial = out / "track.partial"
        if partial.exists():  # an interrupted track: started again
            shutil.rmtree(partial)
        ground = ["--up", "auto", "--static-camera"] if args.camera == "fixed" else []
        with warnings.catch_warnings():  # the flags are given once, below, with the labels' figure
            warnings.filterwarnings("ignore", message="the track may have left the robot")
            run_stage(["track", str(args.video), "--robot", str(args.robot), *camera, "--masks", f"segmenter:{model}",
                       *ground, "--head", args.head, "--track-size", f"{width}x{height}", *first,
                       "--out", str(partial)])
        if track.exists():
            shutil.rmtree(track)
        partial.rename(track)
        summary = read_json(track / "summary.json")
        stages.finish("track", {k: summary.get(k) for k in _TRACK_KEYS} | {"track_size": summary["track_size"]})
    figures["track"] = stages.get("track")

    if stages.get("speed") is None:
        stages.finish("speed", _speed(model, out / "heldout", figures["track"]))
    figures["speed"] = stages.get("speed")

    figures["quality"] = flag_run(track, robot, float(video.fps), read_json(labels / "labels_report.json"))
    from snaketrack.io import to_json

    print(to_json(figures, indent=None))
    return 0


def _speed(model: Path, heldout: Path, track: dict, frames: int = 40) -> dict:
    """The segmenter's live setting per frame [ms] at the tracking size (the median over up to ``frames``
    held-out frames, the first two left out as warm-up), the tracker's per frame [ms] (its searches left
    out: ``fps_excluding_search``), and the rate of the two together [frames/s]."""
    import numpy as np

    from snaketrack.datasets.video import open_frames
    from snaketrack.training.segmenter import load_segmenter

    w, h = track["track_size"]
    seg = load_segmenter(model, setting="live")
    times = []
    for k, (_, rgb) in enumerate(open_frames(heldout).frames()):
        small = cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)
        t0 = time.perf_counter()
        seg.predict(small)
        times.append(time.perf_counter() - t0)
        if k + 1 >= frames:
            break
    seg_ms = 1000.0 * float(np.median(times[2:] if len(times) > 4 else times))
    fps = float(track.get("fps_excluding_search") or float("nan"))
    track_ms = 1000.0 / fps if fps > 0 else float("nan")
    return {"segmenter_ms": seg_ms, "tracker_ms": track_ms, "fps_together": 1000.0 / (seg_ms + track_ms),
            "size": [w, h]}


COMMANDS = [Command(name="fit-video",
                    help="from a video and one box to a judged track: label, train a segmenter, track, flag",
                    add_arguments=_add_arguments, run=_run,
                    description="Track a robot in a video from one box around it in the first frame and its robot "
                                "file: label the video, train a segmenter on the labels, track with it and judge "
                                "the track without truth, in one resumable run (docs/your-robot.md).")]
