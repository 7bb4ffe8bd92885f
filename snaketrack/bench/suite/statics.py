"""Benchmark of the static model with gravity compensation (snaketrack.models.statics).

Times one full solve (Algorithm 4, ε = 1e-12) for the paper's timing case,
the 6-link robot of Sec. 4.1 in steel, ground-mounted, spatial orientation
(α = 90°, tensions [3.7, 2.4, 1.8, 5.1] N), at ω = 1 and ω = 0.1, beside the
paper's MATLAB times (8.5 ms and 116.4 ms, Sec. 3.4, i9 2.3 GHz laptop). Also
times the planar Table 1 steel case and, to back the choice of plain floats,
the gravity update (Algorithm 1) written with floats vs with numpy arrays.
Each figure is the best of 7 rounds.

Prints a few lines on stderr.

    snaketrack bench statics [--repeats 1000]
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time

import numpy as np

from snaketrack.bench.registry import Benchmark
from snaketrack.models import statics as st
from snaketrack.models.statics.equilibrium import Geometry, gravity_vectors, weight_in_link1
from snaketrack.models.statics.kinematics import world_from_link1

PAPER_MS = {"omega1": 8.5, "omega01": 116.4}


def _time_ms(fn, number: int, rounds: int = 7) -> float:
    """Best over ``rounds`` of the mean time per call [ms].

    The minimum, as ``timeit`` recommends: on a shared machine the other
    rounds measure the neighbours' load rather than this code.
    """
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number * 1e3)
    return min(out)


def _gravity_numpy(robot, w1, theta):
    """Algorithm 1 with numpy 3×3 matrices (the alternative to the float version)."""
    a = robot.alpha
    out = [np.asarray(w1)]
    g = np.asarray(w1, dtype=float)
    for u in range(2, robot.n_links + 1):
        au = a if u % 2 == 1 else -a
        c, s = math.cos(-au), math.sin(-au)
        rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        ct, sn = math.cos(theta[u - 2]), math.sin(theta[u - 2])
        ry = np.array([[ct, 0.0, sn], [0.0, 1.0, 0.0], [-sn, 0.0, ct]])
        g = ry @ (rz @ g)
        out.append(g)
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--repeats", type=int, default=1000, help="solves per timing round at omega = 1")


def run(args: argparse.Namespace) -> dict:
    robot = st.load_statics_robot("rolling-joint-6", material="steel", alpha=math.pi / 2)
    T = (3.7, 2.4, 1.8, 5.1)
    g = st.mount_gravity("ground")
    cfg1, cfg01 = st.StaticsConfig(omega=1.0), st.StaticsConfig(omega=0.1)
    r1 = st.solve_statics(robot, T, g, cfg1)
    r01 = st.solve_statics(robot, T, g, cfg01)
    n1 = max(1, args.repeats)
    n01 = max(1, args.repeats // 10)
    ms1 = _time_ms(lambda: st.solve_statics(robot, T, g, cfg1), n1)
    ms01 = _time_ms(lambda: st.solve_statics(robot, T, g, cfg01), n01)

    planar = st.load_statics_robot("rolling-joint-6", material="steel")
    rp = st.solve_statics(planar, (0.0, 2.4, 0.0, 5.1), g, cfg1)
    msp = _time_ms(lambda: st.solve_statics(planar, (0.0, 2.4, 0.0, 5.1), g, cfg1), n1)

    geo = Geometry(robot, T)
    w1 = weight_in_link1(robot, g, world_from_link1(robot.alpha))
    th = list(r1.bending_angles)
    gf = gravity_vectors(geo, w1, th)
    gn = _gravity_numpy(robot, w1, th)
    assert np.allclose(np.array(gf[1:]), np.array(gn[1:]), atol=1e-15)
    us_float = _time_ms(lambda: gravity_vectors(geo, w1, th), 20000) * 1e3
    us_numpy = _time_ms(lambda: _gravity_numpy(robot, w1, th), 5000) * 1e3

    print(f"spatial steel ground, omega=1:   {ms1:.3f} ms/solve, {r1.iterations} sweeps "
          f"(paper, MATLAB: {PAPER_MS['omega1']} ms)", file=sys.stderr)
    print(f"spatial steel ground, omega=0.1: {ms01:.3f} ms/solve, {r01.iterations} sweeps "
          f"(paper, MATLAB: {PAPER_MS['omega01']} ms)", file=sys.stderr)
    print(f"planar steel ground (Table 1), omega=1: {msp:.3f} ms/solve, {rp.iterations} sweeps", file=sys.stderr)
    print(f"gravity update (Algorithm 1): floats {us_float:.2f} us, numpy {us_numpy:.2f} us", file=sys.stderr)
    out = {
        "case": "rolling-joint-6 steel, ground, alpha=90deg, T=[3.7,2.4,1.8,5.1] N, eps=1e-12",
        "solve_ms_omega1": round(ms1, 4),
        "solve_ms_omega01": round(ms01, 4),
        "paper_solve_ms_omega1": PAPER_MS["omega1"],
        "paper_solve_ms_omega01": PAPER_MS["omega01"],
        "speedup_vs_paper_omega1_x": round(PAPER_MS["omega1"] / ms1, 2),
        "speedup_vs_paper_omega01_x": round(PAPER_MS["omega01"] / ms01, 2),
        "iterations_omega1": r1.iterations,
        "iterations_omega01": r01.iterations,
        "planar_table1_steel_ground_solve_ms_omega1": round(msp, 4),
        "planar_table1_steel_ground_iterations": rp.iterations,
        "gravity_update_float_us": round(us_float, 3),
        "gravity_update_numpy_us": round(us_numpy, 3),
        "float_vs_numpy_x": round(us_numpy / us_float, 2),
        "target_ms_omega1": 1.0,
        "meets_target": ms1 <= 1.0,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
    }
    return out


BENCHMARK = Benchmark("statics", "the static model with gravity compensation (snaketrack.models.statics)",
                      add_arguments, run, quick={"repeats": 10})
