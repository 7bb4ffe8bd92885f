"""``snaketrack track``: track a robot through a dataset or a video.

::

    snaketrack track DATASET|VIDEO --robot NAME|FILE [--intrinsics FILE | --fov-deg DEG]
        [--masks truth|DIR|segmenter:MODEL.pt [--segmenter-setting live|accurate] [--segmenter-flips 1|2|4]]
        [--up sim-imu|IMU.csv|auto|none]
        [--static-camera | --track-ground] [--head wave|first] [--refine-focal] [--calibration-frames 60]
        [--refine-steps 10] [--corrupt-masks] [--max-frames N] [--hold-frames 60] [--track-size WxH]
        [--states FILE|-] [--device cpu|cuda|cuda:N|auto] --out DIR

Argument parsing only: the run is :func:`snaketrack.tracker.run.loop.track_source`, its frames go through
one :class:`snaketrack.tracker.run.pipeline.TrackingSession`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from snaketrack.commands import (
    Command,
    add_camera_arguments,
    add_device_argument,
    add_setting_argument,
    add_threads_argument,
    apply_thread_policy,
    camera_of,
)
from snaketrack.errors import InputError
from snaketrack.extras import require


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="DATASET|VIDEO", help="dataset folder (frames/, masks/, meta.json) or video file")
    p.add_argument("--robot", default=None,
                   help="shipped robot name or robot YAML file (default: the dataset's meta.json robot)")
    add_camera_arguments(p, "the dataset's meta.json K, else a 65 deg horizontal field of view (a phone's)")
    p.add_argument("--masks", default=None,
                   help="truth (the dataset's masks/, default for datasets), DIR of PNG masks named like the "
                        "frames, or segmenter:MODEL.pt")
    p.add_argument("--refine-steps", type=int, default=None, help="refinement iterations per frame (default 10)")
    add_setting_argument(p, "live", "--segmenter-setting", "--segmenter-flips", "--segmenter-scale")
    p.add_argument("--corrupt-masks", action="store_true",
                   help="apply realistic segmentation errors to the masks (1-3 px bias, ragged edges, "
                        "missing chunks, false blobs)")
    p.add_argument("--corrupt-seed", type=int, default=None,
                   help="seed of --corrupt-masks (default: the dataset's seed, else 0)")
    p.add_argument("--max-frames", type=int, default=None, help="track at most N frames")
    p.add_argument("--no-video", action="store_true", help="skip overlay.mp4")
    p.add_argument("--up", default=None, metavar="sim-imu|FILE|auto|none",
                   help="the world's up direction in the camera frame per frame, to hold the robot to the "
                        "ground: an IMU CSV (frame, up_x, up_y, up_z), 'sim-imu' (a dataset's camera attitude "
                        "with 1° bias and 0.5° noise) or 'auto' (the ground plane fitted to the robot's own track "
                        "over the first --calibration-frames, tracked several times first; with --track-ground "
                        "the first frame's, then followed through the ground's homography); default none")
    p.add_argument("--refine-focal", action="store_true",
                   help="refine the focal length (fx = fy) from the robot's known link lengths over the first "
                        "--calibration-frames, then keep it (for --fov-deg; needs an oblique view: warns when the "
                        "fit does not fix it)")
    p.add_argument("--calibration-frames", type=int, default=60, metavar="N",
                   help="frames of the calibration passes of --up auto and --refine-focal (default 60)")
    p.add_argument("--static-camera", action="store_true",
                   help="the camera does not move relative to the ground (a tripod): hold the robot's base to the "
                        "ground's height, the median of its track or with --up auto the fitted plane's (needs --up)")
    p.add_argument("--track-ground", action="store_true",
                   help="the camera moves (handheld, drone): follow its height over the ground plane through the "
                        "frames (the ground's homography) and hold the robot's base to the ground (needs --up)")
    p.add_argument("--hold-frames", type=int, default=60, metavar="N",
                   help="hold up to N first frames until the body wave shows which end is the head, and re-read "
                        "them if the track turns round (default 60; 0: write every frame as it finishes)")
    p.add_argument("--head", default="wave", choices=("wave", "first"),
                   help="which end is the head: wave (the robot crawls forward: the track turns round when its "
                        "body wave runs from tail to head; default) or first (keep the first frame's reading: a "
                        "sidewinding robot, or one that backs up)")
    p.add_argument("--occluders", action="store_true",
                   help="things in front of the robot (legs, a shoe, a post) cut its mask for tens of frames: on a "
                        "frame whose prediction runs off a mask that has lost area, the hidden joints follow the "
                        "body wave, the prediction is trusted more and fits are judged by their unhidden part "
                        "(docs/tracking.md, 'Occluders in front of the robot')")
    p.add_argument("--silhouette", default="visual", choices=("visual", "visual-capsule", "capsules"),
                   help="the robot's silhouette model: 'visual' (bodies, caps and housings from the robot file, "
                        "cylindrical housings drawn as cylinders; default), 'visual-capsule' (the same with "
                        "cylindrical housings as capsules) or 'capsules' (the kinematic capsules only)")
    p.add_argument("--renderer", default="own", choices=("own", "pytorch3d"),
                   help="the silhouette renderer: 'own' (analytic capsules and cylinders; default) or 'pytorch3d' "
                        "(PyTorch3D's soft rasteriser on the robot's meshes, the paper's; needs `make pytorch3d`, "
                        "docs/renderer.md)")
    p.add_argument("--track-size", default=None, metavar="WxH",
                   help="track at this resolution: frames and masks resized, K scaled "
                        "(default: the source's own; the paper tracks at 640x360)")
    p.add_argument("--states", default=None, metavar="FILE|-",
                   help="also write each finished frame's state as a JSON line (track.csv's columns), flushed "
                        "at once, to FILE or standard output ('-'); with --hold-frames 0 every frame as it finishes")
    p.add_argument("--chunks", type=int, default=1, metavar="K",
                   help="track K overlapping chunks of a long video in parallel on Ray and stitch them "
                        "(docs/batch.md; no overlay video or state stream); default 1: one pass")
    p.add_argument("--chunk-overlap", type=int, default=30, metavar="N",
                   help="frames each chunk shares with the one before (default 30)")
    p.add_argument("--address", default=None, help="with --chunks: a Ray cluster (auto, ray://HOST:PORT)")
    p.add_argument("--workers", type=int, default=None, help="with --chunks: CPUs of the local Ray")
    add_device_argument(p, "the tracker and a segmenter (on a GPU the live setting runs the torch network: "
                           "OpenVINO and ONNX Runtime run on the CPU)")
    add_threads_argument(p)
    p.add_argument("--out", required=True, help="output folder (track.csv, overlay.mp4, metrics.json, plots)")


def _run(args: argparse.Namespace) -> int:
    from snaketrack.device import resolve_device
    from snaketrack.io import parse_size
    from snaketrack.tracker.run.loop import RunOptions, track_source
    from snaketrack.tracker.run.pipeline import PipelineConfig

    src = Path(args.source)
    resolve_device(args.device)  # a GPU not there: one line before anything is read (chunks resolve their own)
    apply_thread_policy(args)
    seed = args.corrupt_seed
    if seed is None:
        seed = 0
        meta = src / "meta.json"
        if src.is_dir() and meta.is_file():
            from snaketrack.io import read_json

            seed = int(read_json(meta).get("seed", 0) or 0)
    config = PipelineConfig(refine_steps=args.refine_steps, silhouette=args.silhouette, renderer=args.renderer,
                            static_camera=args.static_camera, track_ground=args.track_ground,
                            hold_frames=args.hold_frames, corrupt_masks=args.corrupt_masks, corrupt_seed=seed,
                            head=args.head, device=args.device, occluders=args.occluders,
                            track_size=parse_size(args.track_size, "--track-size") if args.track_size else None)
    if args.chunks != 1:
        from snaketrack.batch.chunks import track_chunked

        require("batch", "track --chunks")
        if args.up == "auto" or args.refine_focal:
            raise InputError("--chunks: --up auto and --refine-focal calibrate on the first frames in one pass")
        if args.states or args.max_frames:
            raise InputError("--chunks: tracks whole chunks in parallel; --states and --max-frames need one pass")
        summary = track_chunked(src, args.out, args.chunks, args.chunk_overlap, args.robot, camera_of(args),
                                args.masks, config, args.up, args.address, args.workers,
                                segmenter_setting=args.segmenter_setting, segmenter_flips=args.segmenter_flips,
                                segmenter_scale=args.segmenter_scale)
        seams = ", ".join(f"{s['frame']}{'' if s['agreed'] else ' (disagree)'}" for s in summary["seams"])
        print(f"frames={summary['frames']}  chunks={args.chunks}  seams at {seams}  wall_s={summary['wall_s']:.1f}")
        print(f"wrote {args.out}/track.csv")
        return 0
    options = RunOptions(up=args.up, max_frames=args.max_frames, video=not args.no_video, states=args.states,
                         segmenter_setting=args.segmenter_setting, segmenter_flips=args.segmenter_flips,
                         segmenter_scale=args.segmenter_scale,
                         refine_focal=args.refine_focal,
                         calibration_frames=args.calibration_frames)
    summary = track_source(src, args.out, args.robot, camera_of(args), args.masks, config, options)
    # iou: the fit with its edge offset, silhouette_iou_mean: the model's own silhouette; both means over frames
    keys = ("frames", "fps", "base_position_error_m", "joint_error_rad", "iou", "silhouette_iou_mean", "iou_truth",
            "frames_lost")
    report = sys.stderr if args.states == "-" else sys.stdout  # standard output carries the states then
    cal = summary.get("calibration") or {}
    if "focal" in cal:
        f = cal["focal"]
        print(f"focal_px={f['focal_px']:.1f} (start {f['start_px']:.1f}, ±{100 * f['se_rel']:.1f} %"
              f"{'; not fixed: kept the start' if f['flat'] else ''})", file=report)
    if "up_auto" in cal:
        print(f"up={[round(v, 4) for v in cal['up_auto']['up']]}", file=report)
    print("  ".join(f"{k}={summary[k]:.4g}" if isinstance(summary.get(k), float) else f"{k}={summary[k]}"
                    for k in keys if k in summary), file=report)
    print(f"wrote {args.out}/track.csv" + ("" if args.no_video else f", {args.out}/overlay.mp4"), file=report)
    if "joint_error_rad" not in summary:  # no truth: say when the truth-free figures say the track is wrong
        from snaketrack.datasets.video import open_frames
        from snaketrack.models.robot import source_robot
        from snaketrack.tracker.run.quality_flags import flag_run

        frames = open_frames(src)
        flag_run(args.out, source_robot(args.robot, getattr(frames, "meta", {}) or {}), float(frames.fps))
    return 0


COMMANDS = [Command(name="track", help="track a snake robot through a dataset or video (track.csv, overlay, metrics)",
                    add_arguments=_add_arguments, run=_run)]
