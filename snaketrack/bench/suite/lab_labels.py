"""Benchmark: auto-labels and the track on them in an ordinary lab, against truth, beside the same scene clear.

Six clips of the ``lab`` scene (``snaketrack sim video --scene lab``: the
low handheld camera that pans, office carpet, two people's legs walking
across the robot, an office chair, a tether from the robot's tail end, a
door frame at the image edge; docs/video.md), both shipped robots, seeds
61-66 (used by no other benchmark), each rendered twice at the same seed:
with the distractors and without them (``--distractors none``: the same
robot motion, camera, ground, light and noise). Rendered into ``--data``
when missing.

``--body-width-px`` and ``--no-obstacles`` render them as ``sim video`` does
(a phone that follows the robot sees it wider than the default 11 px).

Each clip is labelled as a user would: ``snaketrack label CLIP --box B
--robot NAME [--label-flags]`` with one box on frame 0 (the truth mask's box
grown by 10 px), then tracked on those labels (``snaketrack track CLIP
--masks LABELS --up sim-imu --track-ground``). Reported per clip, with and
without distractors: the labels' mean IoU against the truth masks and the
IoU of every 50-frame block, flagged frames, where the label errors lie (as
``snaketrack bench label-suite`` splits them: ``extra_far`` holds shoes,
chair and cable taken in), and the track's base position error [m] and
joint error [rad] against truth, with their ratios lab / clear.

Every stage resumes (a finished label or track run is only scored). Prints
the per-clip table on stderr; the result is one JSON object.

    MUJOCO_GL=egl snaketrack bench lab-labels --data DATA/lab-labels --work bench_out/lab-labels
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from snaketrack.bench.registry import Benchmark

# (robot, seed); seeds not used by any other benchmark
CLIPS = [
    ("planar-snake-11", 61),
    ("planar-snake-11", 62),
    ("planar-snake-11", 63),
    ("arcsnake-4", 64),
    ("arcsnake-4", 65),
    ("arcsnake-4", 66),
]
BOX_MARGIN = 10
BLOCK = 50


def clip_name(robot: str, seed: int, clear: bool, width_px: float | None = None, obstacles: bool = True) -> str:
    """The clip's folder name: ``lab-ROBOT-sSEED[-wW][-open][-clear]``."""
    return (f"lab-{robot.split('-')[0]}-s{seed}" + (f"-w{width_px:g}" if width_px else "")
            + ("" if obstacles else "-open") + ("-clear" if clear else ""))


def _env() -> dict:
    return dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
                PYOPENGL_PLATFORM=os.environ.get("PYOPENGL_PLATFORM", "egl"))


def render(data: Path, robot: str, seed: int, clear: bool, frames: int, width_px: float | None = None,
           obstacles: bool = True) -> Path:
    """Render one clip (resumed when interrupted); its dataset folder."""
    out = data / clip_name(robot, seed, clear, width_px, obstacles)
    if (out / "meta.json").is_file() and len(list((out / "masks").glob("*.png"))) >= frames:
        return out
    cmd = [sys.executable, "-m", "snaketrack", "sim", "video", "--scene", "lab", "--robot", robot,
           "--seed", str(seed), "--frames", str(frames), "--no-extras", "--out", str(out)]
    if clear:
        cmd += ["--distractors", "none"]
    if width_px:
        cmd += ["--body-width-px", f"{width_px:g}"]
    if not obstacles:
        cmd.append("--no-obstacles")
    if out.exists():
        cmd.append("--resume")
    subprocess.run(cmd, check=True, env=_env(), stdout=subprocess.DEVNULL)
    return out


def run_one(job: tuple) -> dict:
    """Label one clip and track it on its labels; the scores."""
    from snaketrack.bench.suite.label_suite import score
    from snaketrack.datasets.boxes import mask_to_box
    from snaketrack.datasets.layout import Dataset

    clip, robot, work, frames, track_it, flags = job
    clip = Path(clip)
    truth = Dataset(clip)
    box = mask_to_box(truth.mask(0)).expand(BOX_MARGIN).clip(truth.width, truth.height)
    labels = Path(work) / "labels" / clip.name
    if not (labels / "labels_report.json").is_file():
        subprocess.run([sys.executable, "-m", "snaketrack", "label", str(clip), "--box",
                        f"{box.x},{box.y},{box.w},{box.h}", "--robot", robot, "--max-frames", str(frames),
                        "--out", str(labels), "--json", *flags], check=True, env=_env(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    row = {"clip": clip.name, "robot": robot, **score(clip, labels, frames)}
    if not track_it:
        return row
    track = Path(work) / "track" / clip.name
    if not (track / "metrics.json").is_file():
        subprocess.run([sys.executable, "-m", "snaketrack", "track", str(clip), "--masks", str(labels / "masks"),
                        "--robot", robot, "--up", "sim-imu", "--track-ground", "--no-video", "--threads", "1",
                        "--max-frames", str(frames), "--out", str(track)], check=True, env=_env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = json.loads((track / "metrics.json").read_text())
    row.update(base_error_m=m.get("base_position_error_m"), joint_error_rad=m.get("joint_error_rad"),
               track_iou_truth=m.get("iou_truth"), frames_lost=m.get("frames_lost"))
    return row


def _ratio(lab: dict, clear: dict, key: str):
    a, b = lab.get(key), clear.get(key)
    return a / b if a is not None and b else None


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default="bench_data/lab-labels", help="folder of the rendered clips")
    ap.add_argument("--work", default="bench_out/lab-labels", help="folder for the labels and tracks")
    ap.add_argument("--frames", type=int, default=150, help="frames a clip")
    ap.add_argument("--workers", type=int, default=2, help="clips labelled and tracked in parallel")
    ap.add_argument("--only", default=None, help="comma-separated substrings: run the clips whose name has one")
    ap.add_argument("--body-width-px", type=float, default=None, metavar="PX",
                    help="the clips' body width in the image (sim video's --body-width-px; default its 11 px)")
    ap.add_argument("--no-obstacles", action="store_true", help="an empty floor instead of the OAL posts")
    ap.add_argument("--label-flags", default="", metavar="FLAGS",
                    help="more flags for `snaketrack label`, space-separated (e.g. '--up sim-imu --track-ground')")
    ap.add_argument("--render-only", action="store_true", help="render the clips, then stop")
    ap.add_argument("--no-track", action="store_true", help="score the labels only, without tracking on them")


def run(args: argparse.Namespace) -> dict:
    from multiprocessing.pool import ThreadPool

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    obstacles = not args.no_obstacles
    names = {(r, s, c): clip_name(r, s, c, args.body_width_px, obstacles) for r, s in CLIPS for c in (False, True)}
    specs = [k for k, name in names.items() if args.only is None or any(o in name for o in args.only.split(","))]
    clips = [render(data, r, s, c, args.frames, args.body_width_px, obstacles) for r, s, c in specs]
    if args.render_only:
        return {"rendered": [str(c) for c in clips]}
    flags = args.label_flags.split()
    jobs = [(str(c), r, args.work, args.frames, not args.no_track, flags) for c, (r, s, _) in zip(clips, specs)]
    with ThreadPool(max(1, args.workers)) as pool:
        rows = pool.map(run_one, jobs, chunksize=1)
    by = {r["clip"]: r for r in rows}
    pairs = []
    for r, s in CLIPS:
        lab, clear = by.get(names[(r, s, False)]), by.get(names[(r, s, True)])
        if lab is None or clear is None:
            continue
        pairs.append({"clip": lab["clip"], "robot": r, "seed": s, "lab": lab, "clear": clear,
                      "base_error_ratio": _ratio(lab, clear, "base_error_m"),
                      "joint_error_ratio": _ratio(lab, clear, "joint_error_rad")})

    def opt(v, f="6.3f"):
        return "     -" if v is None else format(v, f)

    print(f"{'clip':22s} {'IoU':>6s} {'min50':>6s}  {'blocks':23s} {'flag':>4s} {'xFar':>6s} {'mOth':>6s} "
          f"{'IoU clr':>7s} {'base m':>7s} {'clr':>7s} {'joint':>7s} {'clr':>7s} {'b/c':>5s} {'j/c':>5s}",
          file=sys.stderr)
    for p in pairs:
        a, c = p["lab"], p["clear"]
        print(f"{p['clip']:22s} {a['mean_iou']:6.3f} {a['min_block']:6.3f}  "
              f"{' '.join(f'{b:.2f}' for b in a['blocks']):23s} {a['flagged']:4d} {a['extra_far']:6.3f} "
              f"{a['missed_other']:6.3f} {c['mean_iou']:7.3f} {opt(a.get('base_error_m'), '7.4f')} "
              f"{opt(c.get('base_error_m'), '7.4f')} {opt(a.get('joint_error_rad'), '7.4f')} "
              f"{opt(c.get('joint_error_rad'), '7.4f')} {opt(p['base_error_ratio'], '5.2f')} "
              f"{opt(p['joint_error_ratio'], '5.2f')}", file=sys.stderr)
    labs = [p["lab"] for p in pairs]
    return {"frames": args.frames, "clips": len(pairs), "label_flags": flags,
            "mean_iou_lab": sum(r["mean_iou"] for r in labs) / len(labs) if labs else None,
            "mean_iou_clear": sum(p["clear"]["mean_iou"] for p in pairs) / len(pairs) if pairs else None,
            "worst_iou_lab": min(r["mean_iou"] for r in labs) if labs else None,
            "worst_block_lab": min(r["min_block"] for r in labs) if labs else None,
            "pairs": pairs}


BENCHMARK = Benchmark("lab-labels", "labels and the track on them in an ordinary lab, beside the same scene clear",
                      add_arguments, run, quick={"frames": 5, "only": "s61", "no_track": True})
