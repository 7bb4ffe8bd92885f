"""The OAL world's head displacement against ground friction, with and without obstacles.

For each floor friction μ and seed: 10 s with obstacles, without obstacles
(isotropic ground friction), and with the paper's halt (5–7 s, both resume
modes). Prints a table on stderr; gives per-μ means and the worst
no-obstacle/obstacle ratio over the seeds.

    snaketrack bench sweep-oal-friction [--mu 0.3 0.5 0.7 1.0] [--seeds 0 1 2 3 4]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--mu", type=float, nargs="+", default=[0.3, 0.5, 0.7, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--duration", type=float, default=10.0)


def run(args: argparse.Namespace) -> dict:
    from snaketrack.sim.oal import OALConfig, simulate_oal

    def log(line: str) -> None:
        print(line, file=sys.stderr)

    out = {}
    log(f"{'mu':>5} {'seed':>4} {'obst_m':>7} {'free_m':>7} {'ratio':>6} "
        f"{'halt_ref_m':>10} {'halt_phase_m':>12} {'rms_rad':>8}")
    for mu in args.mu:
        rows = []
        for seed in args.seeds:
            kw = dict(floor_friction=mu, seed=seed, duration=args.duration)
            go = simulate_oal(OALConfig(**kw)).summary()
            free = simulate_oal(OALConfig(obstacles=False, **kw)).summary()
            href = simulate_oal(OALConfig(halt=(5.0, 7.0), resume="reference", **kw)).summary()
            hph = simulate_oal(OALConfig(halt=(5.0, 7.0), resume="phase", **kw)).summary()
            ratio = free["head_displacement_m"] / max(go["head_displacement_m"], 1e-9)
            rows.append((go["head_displacement_m"], free["head_displacement_m"], ratio,
                         href["head_displacement_m"], hph["head_displacement_m"], go["tracking_rms_rad"]))
            log(f"{mu:5.2f} {seed:4d} {rows[-1][0]:7.3f} {rows[-1][1]:7.3f} {ratio:6.3f} {rows[-1][3]:10.3f} "
                f"{rows[-1][4]:12.3f} {rows[-1][5]:8.4f}")
        a = np.array(rows)
        out[f"mu_{mu:g}"] = {
            "obstacles_displacement_m": round(float(a[:, 0].mean()), 4),
            "no_obstacles_displacement_m": round(float(a[:, 1].mean()), 4),
            "worst_ratio_x": round(float(a[:, 2].max()), 4),
            "halt_reference_displacement_m": round(float(a[:, 3].mean()), 4),
            "halt_phase_displacement_m": round(float(a[:, 4].mean()), 4),
            "tracking_rms_rad": round(float(a[:, 5].mean()), 4),
        }
    return out


BENCHMARK = Benchmark("sweep-oal-friction", "the OAL world's head displacement against ground friction, with and "
                      "without obstacles", add_arguments, run, quick={"mu": [0.5], "seeds": [0], "duration": 7.5})
