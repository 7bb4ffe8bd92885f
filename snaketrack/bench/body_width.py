"""How the tracker's accuracy, and what a correct track can score, follow the robot's width in the image.

For every scene, robot, seed and nominal width W [px] of a :class:`SweepConfig`,
the clip ``{scene}-{robot}-s{seed}-w{W}`` is rendered when absent
(``snaketrack sim video --body-width-px W``: W sets the focal length, so the
same motion is seen through a longer or shorter lens; a moving camera is
pulled back where the robot would leave the frame), tracked exactly as the
benchmark tracks its clips (:func:`snaketrack.bench.tracking.bench_options`:
corrupted masks, 10 refinement steps, ``--up sim-imu``, a fixed camera
declared, moving cameras following their height over the ground), and scored
(:func:`measure_clip`):

- ``body_width_px``: the median over the frames of the truth's
  ``body_width_px`` (mask area over projected axis length), the width the
  clip really shows;
- the tracker's ``metrics.json`` figures (``base_position_error_m``,
  ``joint_error_rad``, ``iou``, ``iou_truth``, ``fps``, ...), and
  ``cpu_ms_per_frame``, the process's CPU time per frame over the track;
- ``iou_ceiling`` and ``iou_model_ceiling`` of
  :func:`snaketrack.bench.ceiling.measure_iou_ceiling`: the most any
  correct track can reach, for the truth mask and for the tracker's model.

The benchmark's own clips are W = 11 (the default of ``snaketrack sim
video``); ``reuse`` takes them from the benchmark's folder instead of
rendering them again (the same seed gives the same bytes). :func:`sweep`
keeps every run in ``body_width.json``, rewritten after each, so an
interrupted sweep keeps what it finished and skips it when run again.

>>> clip_name("handheld", "arcsnake-4", 0, 16.0)
'handheld-arcsnake-s0-w16'
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from snaketrack.bench.tracking import ROBOTS, SCENES, SHORT, bench_options, dataset_dir, ensure_dataset
from snaketrack.errors import FileFormatError, InputError

#: VideoConfig.target_width_px: the nominal width [px] of the benchmark's clips.
DEFAULT_WIDTH = 11.0
#: The tracker's accuracy targets, drawn on the plot.
TARGETS = {"joint_error_rad": 0.05, "base_position_error_m": 0.027, "iou": 0.90}
#: The figures of ``snaketrack track``'s summary each run keeps.
KEEP = ("base_position_error_m", "joint_error_rad", "joint_error_l2_rad", "iou", "iou_no_offset", "iou_truth",
        "fps", "frames_lost", "frames")


def clip_name(scene: str, robot: str, seed: int, width: float, size: tuple[int, int] = (640, 360)) -> str:
    """The benchmark's ``{scene}-{robot}-s{seed}``, then ``-w{width}``, and ``-{W}x{H}`` when not 640×360."""
    name = f"{dataset_dir(Path(), scene, robot, seed).name}-w{width:g}"
    return name if tuple(size) == (640, 360) else f"{name}-{size[0]}x{size[1]}"


def ensure_clip(data: Path, scene: str, robot: str, seed: int, width: float, frames: int,
                reuse: Optional[Path] = None, progress: bool = True, size: tuple[int, int] = (640, 360)) -> Path:
    """The clip's folder in ``data``, rendered when absent; for the default width at 640×360 the benchmark's
    own clip from ``reuse`` when it has ``frames`` frames."""
    from snaketrack.datasets.layout import Dataset

    if reuse is not None and width == DEFAULT_WIDTH and tuple(size) == (640, 360):
        bench = dataset_dir(reuse, scene, robot, seed)
        if (bench / "meta.json").is_file() and len(Dataset(bench)) >= frames:
            return bench
    return ensure_dataset(data / clip_name(scene, robot, seed, width, size), scene, robot, seed, frames,
                          body_width_px=width, size=size, progress=progress)


def median_body_width(ds: Path, frames: int) -> float:
    """The median of ``body_width_px`` [px] over the first ``frames`` rows of the clip's ``truth.jsonl``."""
    widths = []
    with open(ds / "truth.jsonl") as f:
        for i, line in enumerate(f):
            if i >= frames:
                break
            w = json.loads(line).get("body_width_px")
            if w is not None and np.isfinite(w):
                widths.append(float(w))
    if not widths:
        raise FileFormatError(f"{ds}: truth.jsonl has no body_width_px")
    return float(np.median(widths))


def measure_clip(ds: Path, scene: str, robot: str, out: Path, frames: int, ceiling_step: int = 1) -> dict:
    """Track the clip ``ds`` into ``out`` as the benchmark does and score it (module doc); wall time [s]
    and the process's CPU time per frame [ms]."""
    from snaketrack.bench.ceiling import measure_iou_ceiling
    from snaketrack.io import read_json
    from snaketrack.tracker.run.loop import track_source

    seed = int(read_json(ds / "meta.json").get("seed", 0))
    t0, c0 = time.perf_counter(), time.process_time()
    config, options = bench_options(scene, seed, frames)
    s = track_source(ds, out, robot, config=config, options=options)
    res = {k: s.get(k) for k in KEEP}
    res["wall_s"] = time.perf_counter() - t0
    # the process's CPU time per frame: unlike frames/s, it holds on a machine other jobs share
    res["cpu_ms_per_frame"] = 1e3 * (time.process_time() - c0) / max(int(s.get("frames") or frames), 1)
    ceiling = measure_iou_ceiling(ds, frames=frames, step=ceiling_step, model=True)
    res["iou_ceiling"], res["iou_model_ceiling"] = ceiling["iou_ceiling"], ceiling["iou_model_ceiling"]
    res["body_width_px"] = median_body_width(ds, frames)
    return res


@dataclass(frozen=True)
class SweepConfig:
    """The clips of a sweep.

    scenes: scenes of ``snaketrack sim video``. Default static, handheld, drone.
    robots: robot names. Default planar-snake-11, arcsnake-4.
    widths: nominal body widths [px] (``--body-width-px``). Default 11, 16, 22.
    seeds: the clips' seeds. Default 0.
    frames: frames per clip. Default 300.
    size: (width, height) [px] of rendered clips. Default (640, 360).
    ceiling_step: every N-th frame for ``iou_ceiling``. Default 1.
    """

    scenes: tuple[str, ...] = SCENES
    robots: tuple[str, ...] = ROBOTS
    widths: tuple[float, ...] = (DEFAULT_WIDTH, 16.0, 22.0)
    seeds: tuple[int, ...] = (0,)
    frames: int = 300
    size: tuple[int, int] = (640, 360)
    ceiling_step: int = 1

    def __post_init__(self):
        if any(w <= 0 for w in self.widths):
            raise InputError(f"widths {list(self.widths)}; expected positive widths in pixels")
        if self.frames < 1:
            raise InputError(f"frames {self.frames}; expected a positive number of frames")
        if self.ceiling_step < 1:
            raise InputError(f"ceiling step {self.ceiling_step}; expected a positive integer")
        bad = [s for s in self.scenes if s not in SCENES]
        if bad:
            raise InputError(f"scenes {' '.join(bad)}; expected some of {', '.join(SCENES)}")


def sweep(data: Path, out: Path, config: SweepConfig = SweepConfig(), reuse: Optional[Path] = None,
          log: Optional[Callable[[str], None]] = None) -> list[dict]:
    """Every clip of ``config`` rendered into ``data`` (or taken from ``reuse``), tracked into
    ``out/<clip name>`` and scored; returns the runs of ``out/body_width.json``, those it already held
    first (not run again), each with its scene, robot, seed, ``width_nominal_px``, ``frames_asked``, size and
    dataset. ``log`` is called with each new run as a JSON line."""
    data, out, c = Path(data), Path(out), config
    size = tuple(c.size)
    out.mkdir(parents=True, exist_ok=True)
    record = out / "body_width.json"
    runs = json.loads(record.read_text())["runs"] if record.is_file() else []
    done = {(r["scene"], r["robot"], r["seed"], r["width_nominal_px"], r.get("frames_asked", r.get("frames")),
             tuple(r.get("size", (640, 360)))) for r in runs}
    for scene in c.scenes:
        for robot in c.robots:
            for seed in c.seeds:
                for w in c.widths:
                    if (scene, robot, seed, w, c.frames, size) in done:
                        continue
                    ds = ensure_clip(data, scene, robot, seed, w, c.frames, reuse, size=size)
                    res = measure_clip(ds, scene, robot, out / clip_name(scene, robot, seed, w, size), c.frames,
                                       c.ceiling_step)
                    res.update(scene=scene, robot=robot, seed=seed, width_nominal_px=w, frames_asked=c.frames,
                               size=list(size), dataset=str(ds))
                    runs.append(res)
                    if log is not None:
                        log(json.dumps(res))
                    tmp = record.with_suffix(".json.tmp")
                    tmp.write_text(json.dumps({"runs": runs}, indent=1))
                    tmp.replace(record)
    return runs


def plot_body_width(runs: list[dict], path: Path) -> None:
    """Joint error, base error, IoU and frames/s against the measured body width, one line per clip
    (scene, robot, seed), the targets dotted; written as an image to ``path``."""
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
    fig.suptitle("the tracker's targets (dotted) against the robot's width in the image", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
