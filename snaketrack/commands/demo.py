"""``snaketrack demo``: the main job on a bundled default, end to end.

Renders a synthetic drone video of ``planar-snake-11`` crawling among the
obstacles of the Jacobian paper (MuJoCo physics and renderer, ground truth
kept), tracks it from masks corrupted like a real segmenter's, and writes
the overlay video, ``track.csv``, ``metrics.json`` and plots. The tracker
gets the up direction of a simulated IMU (the drone's camera attitude with
1° bias and 0.5° noise; ``--up none`` tracks from the masks alone), with
which the robot is held to the ground: at the tripod's height
(``--static-camera``) or at the moving camera's, followed through the
frames (``--track-ground``).
``make demo`` runs it into ``demo_out/``. Rerunning reuses a finished rendering of the same settings
(a longer one is tracked for ``--frames``); one of other settings is refused.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="demo_out", help="output folder (default: demo_out)")
    p.add_argument("--frames", type=int, default=150, help="frames to render and track (default: 150)")
    p.add_argument("--scene", default="drone", choices=["static", "handheld", "drone"], help="camera scene")
    p.add_argument("--robot", default="planar-snake-11", help="robot name or YAML file")
    p.add_argument("--seed", type=int, default=0, help="seed of the world, camera and noise")
    p.add_argument("--up", default="sim-imu", choices=["sim-imu", "none"],
                   help="the tracker's up direction: a simulated IMU (default) or none (masks alone)")


def _run(args: argparse.Namespace) -> int:
    from snaketrack.sim.video import VideoConfig
    from snaketrack.sim.video_dataset import render_video
    from snaketrack.tracker.run.loop import RunOptions, track_source
    from snaketrack.tracker.run.pipeline import PipelineConfig

    out = Path(args.out)
    data = out / f"{args.scene}-video"
    config = VideoConfig(scene=args.scene, robot=args.robot, frames=args.frames, seed=args.seed)
    done = _check_reuse(data, config)
    if not done:
        print(f"[1/2] rendering a {args.frames}-frame {args.scene} video of {args.robot} into {data}")
        render_video(config, data, resume=(data / "frames").is_dir())
    else:
        print(f"[1/2] reusing the rendered video in {data}")
    track_dir = out / "track"
    imu = ", up from a simulated IMU" if args.up == "sim-imu" else ""
    print(f"[2/2] tracking it (masks corrupted like a segmenter's{imu}) into {track_dir}")
    ground = args.up != "none"  # a tripod's height is fixed; a moving camera's is followed over the ground
    config = PipelineConfig(corrupt_masks=True, static_camera=ground and args.scene == "static",
                            track_ground=ground and args.scene != "static")
    summary = track_source(data, track_dir, args.robot, config=config,
                           options=RunOptions(up=args.up, max_frames=args.frames))
    print()
    print("outputs:")
    for name in ("video.mp4", "contact_sheet.png", "truth.jsonl"):
        if (data / name).exists():
            print(f"  {data / name}")
    for name in ("overlay.mp4", "track.csv", "metrics.json", "joint_angles.png", "base_position.png",
                 "camera_height.png", "quality.png"):
        if (track_dir / name).exists():
            print(f"  {track_dir / name}")
    keys = ("base_position_error_m", "joint_error_rad", "joint_error_l2_rad", "iou", "iou_truth", "fps", "frames_lost")
    print("metrics:", ", ".join(f"{k}={_fmt(summary[k])}" for k in keys if k in summary))
    return 0


def _check_reuse(data: Path, config) -> bool:
    """Whether ``data`` holds a finished rendering of ``config`` with at least its frames; an unfinished one
    of the same settings is resumed (False), one of other settings refused."""
    from snaketrack.io import read_json
    from snaketrack.sim.video import config_key

    if not (data / "meta.json").is_file():
        return False
    old = read_json(data / "meta.json").get("config") or {}
    want = config_key(config)
    differ = [f"{k} {old.get(k)!r}, asked {v!r}" for k, v in want.items() if k != "frames" and old.get(k) != v]
    if differ:
        raise InputError(f"{data}: holds a video rendered with other settings ({'; '.join(differ)}); give "
                         "another --out")
    have = len(list((data / "frames").glob("*.jpg"))) if (data / "frames").is_dir() else 0
    if have >= config.frames:
        return True
    if old.get("frames") != config.frames:
        raise InputError(f"{data}: holds a {old.get('frames')}-frame video; give another --out for "
                         f"{config.frames} frames")
    return False


def _fmt(v):
    if isinstance(v, list):
        return f"mean {sum(v) / len(v):.4f}" if v else "[]"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


COMMANDS = [Command("demo", "render a drone video of the snake among obstacles, track it, write outputs",
                    _add_arguments, _run)]
