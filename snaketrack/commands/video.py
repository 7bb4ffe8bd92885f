"""``snaketrack sim video``: synthetic field video of a snake robot with ground truth."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace

from snaketrack.commands import Command


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from snaketrack.sim.lab import DISTRACTORS
    from snaketrack.sim.scene import GROUNDS
    from snaketrack.sim.video import VIDEO_SCENES

    p.add_argument("--scene", required=True, choices=VIDEO_SCENES,
                   help="camera: tripod, handheld (drift and shake), drone (follows from 2-4 m above), "
                        "low-handheld (a phone held 0.2-0.4 m above the floor that pans and tilts to follow); "
                        "lab: the low-handheld camera over office carpet with people's legs, a chair, a tether "
                        "and a door frame beside the robot")
    p.add_argument("--robot", default="planar-snake-11", help="shipped robot name or robot YAML file")
    p.add_argument("--frames", type=int, required=True, help="number of frames")
    p.add_argument("--seed", type=int, default=0, help="seeds physics, scene, camera and noise (default 0)")
    p.add_argument("--width", type=int, default=640, help="image width [px] (default 640)")
    p.add_argument("--height", type=int, default=360, help="image height [px] (default 360)")
    p.add_argument("--fps", type=float, default=30.0, help="frame rate (default 30)")
    p.add_argument("--body-width-px", type=float, default=11.0, metavar="PX",
                   help="the robot body's nominal width in the image [px], which sets the focal length "
                        "(default 11; a moving camera is pulled back where the robot would leave the frame)")
    p.add_argument("--no-obstacles", action="store_true", help="empty floor instead of the OAL posts")
    p.add_argument("--ground", choices=GROUNDS, default=None,
                   help="ground texture (default: drawn from the random seed)")
    p.add_argument("--distractors", default=None, metavar="LIST",
                   help=f"lab distractors beside the robot, comma-separated of {','.join(DISTRACTORS)}, or none "
                        "(default: all of them for --scene lab, none otherwise); the mask stays the robot's "
                        "visible pixels")
    p.add_argument("--clean", action="store_true", help="no blur, noise or JPEG degradation")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out (same flags)")
    p.add_argument("--no-extras", action="store_true", help="skip video.mp4 and contact_sheet.png")
    p.add_argument("--out", required=True, help="dataset folder to write (refused if it already holds frames)")


def _run(args: argparse.Namespace) -> int:
    from snaketrack.sim.degrade import Degradation
    from snaketrack.sim.lab import parse_distractors
    from snaketrack.sim.scene import SceneConfig
    from snaketrack.sim.video import VideoConfig
    from snaketrack.sim.video_dataset import render_video

    config = VideoConfig(scene=args.scene, robot=args.robot, frames=args.frames, seed=args.seed,
                         width=args.width, height=args.height, fps=args.fps, obstacles=not args.no_obstacles,
                         target_width_px=args.body_width_px,
                         distractors=None if args.distractors is None else parse_distractors(args.distractors))
    if args.ground:
        config = replace(config, scene_config=SceneConfig(ground=args.ground))
    if args.clean:
        config = replace(config, degradation=Degradation(enabled=False))
    summary = render_video(config, args.out, resume=args.resume, progress=True, extras=not args.no_extras)
    print(json.dumps(summary))
    print(f"dataset: {args.out} (frames/, masks/, meta.json, truth.jsonl"
          + ("" if args.no_extras else ", video.mp4, contact_sheet.png") + ")")
    return 0


COMMANDS = [Command(name="sim video", help="render a synthetic video dataset with ground truth (MuJoCo)",
                    add_arguments=_add_arguments, run=_run)]
