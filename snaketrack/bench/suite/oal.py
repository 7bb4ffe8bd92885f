"""Speed of the OAL world: simulate_oal (MuJoCo + the Python PD law + recording) vs MuJoCo alone.

The reference, measured in the same process on the same model, is MuJoCo
alone on the same trajectory: each step loads the run's recorded state
(qpos, and qvel recovered from consecutive qpos with ``mj_differentiatePos``)
and torque and calls ``mj_step`` once, with no Python controller and no
recording. ``overhead_x`` = simulate_oal time / reference time; ``*_cpu_ms`` is process
CPU time, a steadier figure when other jobs share the cores.

    snaketrack bench oal [--duration 10] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=3)


def run(args: argparse.Namespace) -> dict:
    import mujoco  # deferred, as every import of run's work: bench --list imports none

    from snaketrack.sim.oal import OALConfig, oal_model, simulate_oal

    out = {}
    for label, obstacles in (("obstacles", True), ("no_obstacles", False)):
        cfg = OALConfig(duration=args.duration, obstacles=obstacles)
        simulate_oal(OALConfig(duration=0.1, obstacles=obstacles))  # warm-up
        best, best_cpu, result = np.inf, np.inf, None
        for _ in range(args.repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            result = simulate_oal(cfg)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        model, _ = oal_model(cfg)
        data = mujoco.MjData(model)
        qpos = result.qpos
        qvel = np.zeros((len(qpos), model.nv))
        for n in range(1, len(qpos)):
            mujoco.mj_differentiatePos(model, qvel[n], cfg.dt, qpos[n - 1], qpos[n])
        ref = np.inf
        for _ in range(args.repeats):
            mujoco.mj_resetData(model, data)
            t0 = time.perf_counter()
            for n in range(len(qpos)):
                data.qpos[:] = qpos[n]
                data.qvel[:] = qvel[n]
                data.ctrl[:] = result.torque[n]
                mujoco.mj_step(model, data)
            ref = min(ref, time.perf_counter() - t0)
        steps = cfg.steps
        out[f"{label}_sim_steps_per_s"] = round(steps / best, 1)
        out[f"{label}_mujoco_only_steps_per_s"] = round(steps / ref, 1)
        out[f"{label}_step_us"] = round(1e6 * best / steps, 2)
        out[f"{label}_mujoco_only_step_us"] = round(1e6 * ref / steps, 2)
        out[f"{label}_overhead_x"] = round(best / ref, 3)
        out[f"{label}_run_10s_ms"] = round(1e3 * best * 10.0 / args.duration, 1)
        # CPU time of this process: less sensitive to other jobs sharing the cores
        out[f"{label}_run_10s_cpu_ms"] = round(1e3 * best_cpu * 10.0 / args.duration, 1)
    out["sim_steps_per_s"] = out["obstacles_sim_steps_per_s"]
    return out


BENCHMARK = Benchmark("oal", "speed of the OAL world: simulate_oal (MuJoCo + the Python PD law + recording) vs MuJoCo"
                      " alone", add_arguments, run, quick={"duration": 0.5, "repeats": 1})
