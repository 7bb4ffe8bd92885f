"""How the tracker's accuracy, and what a correct track can score, follow the robot's width in the image.

For every scene, robot, seed and ``--widths`` W [px]: the clip ``{scene}-{robot}-s{seed}-w{W}`` is
rendered into ``--data`` when absent (``snaketrack sim video --body-width-px W``: W sets the focal
length, so the same motion is seen through a longer or shorter lens; a moving camera is pulled back
where the robot would leave the frame), tracked exactly as ``scripts/bench_tracker.py`` tracks its
clips (corrupted masks, 10 refinement steps, ``--up sim-imu``, a fixed camera declared, moving
cameras following their height over the ground), and scored:

- ``body_width_px``: the median over the frames of the truth's ``body_width_px`` (mask area over
  projected axis length), the width the clip really shows;
- the tracker's ``metrics.json`` figures (``base_position_error_m``, ``joint_error_rad``, ``iou``,
  ``iou_truth``, ``fps``, ...);
- ``iou_ceiling``: what the truth mask itself scores against the same corrupted masks with its best
  edge offset (``scripts/measure_iou_ceiling.py``), the most any correct track can reach, and
  ``iou_model_ceiling``: the same for the tracker's silhouette model at the true pose, which also
  draws the links a post hides.

The benchmark's own clips are W = 11 (the default of ``snaketrack sim video``); ``--reuse DIR``
takes them from DIR (``{scene}-{robot}-s{seed}``, as bench_tracker names them) instead of
rendering them again: the same seed gives the same bytes. Writes ``body_width.json`` (every run,
rewritten after each, so an interrupted sweep keeps what it finished and skips it when run again)
and ``body_width.png`` (joint error, base error, IoU and frames/s against the body's width, the issue's
targets drawn) into ``--out``; prints one JSON object last.

    MUJOCO_GL=egl .venv/bin/python scripts/measure_body_width.py --scenes handheld --robots arcsnake-4
        --widths 11 16 22 [--seeds 0] [--reuse /work/data] [--data /work/data/width] [--out bench_out/width]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench_tracker import SHORT, bench_options, dataset_dir, ensure_dataset  # noqa: E402

DEFAULT_WIDTH = 11.0  # VideoConfig.target_width_px: the benchmark's clips
TARGETS = {"joint_error_rad": 0.05, "base_position_error_m": 0.027, "iou": 0.90}
KEEP = ("base_position_error_m", "joint_error_rad", "joint_error_l2_rad", "iou", "iou_no_offset", "iou_truth",
        "fps", "frames_lost", "frames")


def clip_name(scene: str, robot: str, seed: int, width: float, size: tuple[int, int] = (640, 360)) -> str:
    """bench_tracker's ``{scene}-{robot}-s{seed}``, then ``-w{width}``, and ``-{W}x{H}`` when not 640×360."""
    name = f"{dataset_dir(Path(), scene, robot, seed).name}-w{width:g}"
    return name if tuple(size) == (640, 360) else f"{name}-{size[0]}x{size[1]}"


def ensure_clip(data: Path, scene: str, robot: str, seed: int, width: float, frames: int,
                reuse: Path | None = None, progress: bool = True, size: tuple[int, int] = (640, 360)) -> Path:
    """The clip's folder, rendered when absent (or the benchmark's own from ``reuse`` for the default width
    at 640×360)."""
    from snaketrack.datasets.layout import Dataset

    if reuse is not None and width == DEFAULT_WIDTH and tuple(size) == (640, 360):
        bench = dataset_dir(reuse, scene, robot, seed)
        if (bench / "meta.json").is_file() and len(Dataset(bench)) >= frames:
            return bench
    return ensure_dataset(data / clip_name(scene, robot, seed, width, size), scene, robot, seed, frames,
                          body_width_px=width, size=size, progress=progress)


def median_body_width(ds: Path, frames: int) -> float:
    widths = []
    with open(ds / "truth.jsonl") as f:
        for i, line in enumerate(f):
            if i >= frames:
                break
            w = json.loads(line).get("body_width_px")
            if w is not None and np.isfinite(w):
                widths.append(float(w))
    if not widths:
        raise SystemExit(f"{ds}: truth.jsonl has no body_width_px")
    return float(np.median(widths))


def measure_clip(ds: Path, scene: str, robot: str, out: Path, frames: int, ceiling_step: int = 1) -> dict:
    """Track one clip as the benchmark does and score it (see the module docstring)."""
    import measure_iou_ceiling
    from snaketrack.io import read_json
    from snaketrack.tracker.run import track_source

    seed = int(read_json(ds / "meta.json").get("seed", 0))
    t0 = time.perf_counter()
    config, options = bench_options(scene, seed, frames)
    s = track_source(ds, out, robot, config=config, options=options)
    res = {k: s.get(k) for k in KEEP}
    res["wall_s"] = time.perf_counter() - t0
    ceiling = measure_iou_ceiling.measure(ds, frames=frames, step=ceiling_step, model=True)
    res["iou_ceiling"], res["iou_model_ceiling"] = ceiling["iou_ceiling"], ceiling["iou_model_ceiling"]
    res["body_width_px"] = median_body_width(ds, frames)
    return res


def plot(runs: list[dict], path: Path) -> None:
    """Joint error, base error, IoU and frames/s against the measured body width, one line per clip."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 4.2))
    panels = (("joint_error_rad", "mean joint error [rad]"), ("base_position_error_m", "mean base error [m]"),
              ("iou", "IoU against the corrupted masks\n(dashed: the truth mask's ceiling, x: the model's)"),
              ("fps", "frames/s (2 threads)"))
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["scene"], r["robot"], r["seed"]), []).append(r)
    for (scene, robot, seed), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["body_width_px"])
        w = [r["body_width_px"] for r in rs]
        label = f"{scene} {SHORT.get(robot, robot)} s{seed}"
        for ax, (key, _) in zip(axes, panels):
            line, = ax.plot(w, [r[key] for r in rs], "o-", label=label)
            if key == "iou":
                ax.plot(w, [r["iou_ceiling"] for r in rs], "--", color=line.get_color(), alpha=0.6)
                model = [(x, r["iou_model_ceiling"]) for x, r in zip(w, rs) if "iou_model_ceiling" in r]
                if model:
                    ax.plot(*zip(*model), "x", color=line.get_color(), ms=8)
    for ax, (key, title) in zip(axes, panels):
        target = TARGETS.get(key, 5.0 if key == "fps" else None)
        if target is not None:
            ax.axhline(target, color="k", lw=0.8, ls=":")
        ax.set_xlabel("body width in the image [px] (median)")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("issue 3's targets (dotted) against the robot's width in the image", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", nargs="+", default=["static", "handheld", "drone"],
                    choices=["static", "handheld", "drone"])
    ap.add_argument("--robots", nargs="+", default=["planar-snake-11", "arcsnake-4"])
    ap.add_argument("--widths", nargs="+", type=float, default=[DEFAULT_WIDTH, 16.0, 22.0],
                    help="nominal body widths [px] (snaketrack sim video --body-width-px)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--data", default="/work/data/width", help="folder for the rendered clips")
    ap.add_argument("--reuse", default=None, help="folder of the benchmark's clips, used for the default width")
    ap.add_argument("--out", default="bench_out/width", help="folder for the tracks, body_width.json and .png")
    ap.add_argument("--size", default="640x360", help="image size WxH of rendered clips (default 640x360)")
    ap.add_argument("--ceiling-step", type=int, default=1, help="every N-th frame for iou_ceiling")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if any(w <= 0 for w in args.widths) or args.frames < 1:
        ap.error("widths and frames must be positive")
    from snaketrack.io import parse_size
    from snaketrack.errors import InputError

    try:
        size = parse_size(args.size)
    except InputError as e:
        ap.error(f"--size: {e}")
    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = out / "body_width.json"
    runs = json.loads(record.read_text())["runs"] if record.is_file() else []
    done = {(r["scene"], r["robot"], r["seed"], r["width_nominal_px"], r.get("frames_asked", r.get("frames")),
             tuple(r.get("size", (640, 360)))) for r in runs}
    for scene in args.scenes:
        for robot in args.robots:
            for seed in args.seeds:
                for w in args.widths:
                    if (scene, robot, seed, w, args.frames, size) in done:
                        continue
                    ds = ensure_clip(data, scene, robot, seed, w, args.frames,
                                     Path(args.reuse) if args.reuse else None, size=size)
                    res = measure_clip(ds, scene, robot, out / clip_name(scene, robot, seed, w, size), args.frames,
                                       args.ceiling_step)
                    res.update(scene=scene, robot=robot, seed=seed, width_nominal_px=w, frames_asked=args.frames,
                               size=list(size), dataset=str(ds))
                    runs.append(res)
                    print(json.dumps(res), file=sys.stderr)
                    tmp = record.with_suffix(".json.tmp")
                    tmp.write_text(json.dumps({"runs": runs}, indent=1))
                    tmp.replace(record)
    plot(runs, out / "body_width.png")
    print(json.dumps({"runs": runs, "plot": str(out / "body_width.png")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
