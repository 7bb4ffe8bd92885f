"""Does arcsnake-4 crawl upright? Base roll, heights and progress vs collision shape and pitch wave.

For each collision shape of the segments (``capsule``: a round section;
``box``: the square section arcsnake-4.yaml has), pitch-wave
amplitude and seed: one OAL run (with the posts, and on an empty floor) of
``--duration`` s, measured on the base link (link 1) from the recorded qpos:

- roll: rotation of link 1 about its own axis (Z-Y-X Euler roll, unwrapped) [rad];
- up: cosine between link 1's z axis and the world's up (1 = upright, −1 = upside down);
- z: height of link 1's origin (tail end of its axis) [m] (radius 0.026 = lying on the floor);
- link_z_max: highest link origin or head end [m];
- displacement: net head displacement (and its x part) [m].

Prints a table on stderr; gives the worst case per (shape, pitch amplitude,
obstacles).

    snaketrack bench sweep-arcsnake-roll [--pitch 0 0.05 0.1 0.15] [--seeds 0 1 2] [--duration 10]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from snaketrack.bench.registry import Benchmark
from snaketrack.models.robot import ROBOTS_DIR

if TYPE_CHECKING:
    from snaketrack.sim.oal import OALConfig


def robot_file(shape: str, folder: Path) -> str:
    """arcsnake-4.yaml with its collision shape set to ``shape``, written into ``folder``."""
    data = yaml.safe_load((ROBOTS_DIR / "arcsnake-4.yaml").read_text())
    data["collision"] = {"shape": shape}
    path = folder / f"arcsnake-4-{shape}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def measure(config: OALConfig) -> dict:
    import mujoco  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.sim.oal import oal_model, simulate_oal

    res = simulate_oal(config)
    model, robot = oal_model(config)
    data = mujoco.MjData(model)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)]
    roll, up, z, zmax = [], [], [], []
    for q in res.qpos:
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        R = data.xmat[ids[0]].reshape(3, 3)
        roll.append(math.atan2(R[2, 1], R[2, 2]))
        up.append(R[2, 2])
        z.append(data.xpos[ids[0], 2])
        head_end = data.xpos[ids[-1], 2] + robot.links[-1].length * data.xmat[ids[-1]][6]
        zmax.append(max(data.xpos[ids, 2].max(), head_end))
    roll = np.unwrap(np.array(roll))
    s = res.summary()
    return {"roll_abs_max_rad": float(np.abs(roll).max()), "roll_span_rad": float(roll.max() - roll.min()),
            "up_mean": float(np.mean(up)), "up_min": float(np.min(up)),
            "base_z_min_m": float(np.min(z)), "base_z_max_m": float(np.max(z)), "link_z_max_m": float(np.max(zmax)),
            "head_displacement_m": s["head_displacement_m"], "head_displacement_x_m": s["head_displacement_x_m"],
            "tracking_rms_rad": s["tracking_rms_rad"]}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--shapes", nargs="+", default=["capsule", "box"])
    ap.add_argument("--pitch", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.15])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--duration", type=float, default=10.0)


def run(args: argparse.Namespace) -> dict:
    from snaketrack.sim.oal import OALConfig  # deferred: snaketrack bench --list imports none of it

    worst = {}
    print(f"{'shape':>7} {'pitch':>5} {'obst':>4} {'seed':>4} {'|roll|max':>9} {'span':>6} {'up_min':>6} "
          f"{'z_base':>13} {'z_link_max':>10} {'disp_m':>6} {'dx_m':>6}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            path = robot_file(shape, Path(tmp))
            for amp in args.pitch:
                for obstacles in (True, False):
                    rows = []
                    for seed in args.seeds:
                        m = measure(OALConfig(robot=path, pitch_amplitude=amp, obstacles=obstacles, seed=seed,
                                              duration=args.duration))
                        rows.append(m)
                        print(f"{shape:>7} {amp:5.2f} {int(obstacles):4d} {seed:4d} {m['roll_abs_max_rad']:9.2f} "
                              f"{m['roll_span_rad']:6.2f} {m['up_min']:6.2f} "
                              f"{m['base_z_min_m']:.3f}-{m['base_z_max_m']:.3f} {m['link_z_max_m']:10.3f} "
                              f"{m['head_displacement_m']:6.3f} {m['head_displacement_x_m']:6.3f}", file=sys.stderr)
                    key = f"{shape}_pitch{amp:g}_{'obstacles' if obstacles else 'free'}"
                    worst[key] = {
                        "roll_abs_max_rad": max(r["roll_abs_max_rad"] for r in rows),
                        "up_min": min(r["up_min"] for r in rows),
                        "base_z_max_m": max(r["base_z_max_m"] for r in rows),
                        "link_z_max_m": max(r["link_z_max_m"] for r in rows),
                        "head_displacement_mean_m": float(np.mean([r["head_displacement_m"] for r in rows])),
                    }
    return {"duration_s": args.duration, "seeds": args.seeds, "worst": worst}


BENCHMARK = Benchmark("sweep-arcsnake-roll", "does arcsnake-4 crawl upright? base roll, heights and progress against "
                      "collision shape and pitch",
                      add_arguments, run, quick={"shapes": ["capsule"], "pitch": [0.0], "seeds": [0], "duration": 1.0})
