"""Measure the tracker core on a dataset: errors against truth, IoU, time per frame.

Usage::

    snaketrack bench tracker-core DATA/drone-planar-s0 \
        --frames 40 --corrupt --truth-init [--config '{"refine": {"method": "adam"}}'] [--hide 10 40]

``--up-noise-deg X`` gives the tracker the up direction of the camera's true
attitude turned by X° of white noise per frame (``--up sim-imu`` of the
track command adds a 1° bias and uses 0.5° noise).
``--config`` is JSON for :class:`TrackerConfig` fields (``refine`` holds
:class:`RefineConfig` fields, ``filter`` :class:`FilterConfig` fields). ``--truth-init`` starts from frame 0's true
pose (measures tracking, not initialisation). Runs on one torch thread;
``cpu_ms_per_frame`` is process CPU time (fair on a shared machine),
``wall_ms_per_frame`` wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("dataset")
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--corrupt", action="store_true")
    ap.add_argument("--truth-init", action="store_true")
    ap.add_argument("--config", default="{}")
    ap.add_argument("--hide", type=int, nargs=2, default=None, metavar=("FIRST", "END"))
    ap.add_argument("--up-noise-deg", type=float, default=None,
                    help="give the tracker the true up direction with this much noise [deg]")


def run(a: argparse.Namespace) -> dict:
    import torch  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.config import RefineConfig, TrackerConfig
    from snaketrack.tracker.run.corrupt import MaskCorruptor
    from snaketrack.tracker.state import StateLayout
    from snaketrack.tracker.tracker import Tracker

    torch.set_num_threads(1)
    ds = Dataset(a.dataset)
    robot = load_robot(ds.meta["robot"])
    kw = json.loads(a.config)
    from snaketrack.tracker.filter import FilterConfig

    cfg = TrackerConfig(refine=RefineConfig(**kw.pop("refine", {})), filter=FilterConfig(**kw.pop("filter", {})),
                        **kw)
    trk = Tracker(robot, np.array(ds.meta["K"]), ds.meta["width"], ds.meta["height"], ds.meta["fps"], cfg)
    lay = StateLayout.for_robot(robot)
    corrupt = MaskCorruptor(0) if a.corrupt else None
    truth = ds.truth
    be, qe, iou, iou_t, wall, cpu, status = [], [], [], [], [], [], []
    for i in range(min(a.frames, len(ds))):
        m = ds.mask(i)
        if corrupt is not None:
            m = corrupt(m, i)
        if a.hide and a.hide[0] <= i < a.hide[1]:
            m = np.zeros_like(m)
        t0, c0 = time.perf_counter(), time.process_time()
        step_kw = {}
        if a.up_noise_deg is not None:
            from snaketrack.tracker.calib.gravity import up_from_camera_quat

            u = up_from_camera_quat(truth[i]["camera_quat_world"])
            u = u + np.radians(a.up_noise_deg) * np.random.default_rng([7, i]).normal(size=3)
            step_kw["up"] = u / np.linalg.norm(u)
        if i == 0:
            t = truth[0]
            guess = (lay.from_quat(t["joint_angles"], t["base_quat_cam"], t["base_position_cam"])
                     if a.truth_init else None)
            st = trk.start(m, guess, **step_kw)
        else:
            st = trk.step(m, **step_kw)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        t = truth[i]
        be.append(float(np.linalg.norm(st.base_position - t["base_position_cam"])))
        qe.append(float(np.abs(st.q - t["joint_angles"]).mean()))
        iou.append(st.iou)
        status.append(st.status)
        rm = trk.renderer.mask(st.pose_vector(lay))
        tm = ds.mask(i)
        iou_t.append(float((rm & tm).sum() / max((rm | tm).sum(), 1)))
    out = {
        "dataset": a.dataset,
        "config": kw | ({"refine": json.loads(a.config).get("refine")} if "refine" in a.config else {}),
        "frames": len(be), "corrupt": a.corrupt, "truth_init": a.truth_init, "up_noise_deg": a.up_noise_deg,
        "base_position_error_m": float(np.mean(be)), "joint_error_rad": float(np.mean(qe)),
        "iou": float(np.nanmean(iou)), "iou_truth": float(np.mean(iou_t)),
        "wall_ms_per_frame": 1000 * float(np.mean(wall[1:])), "cpu_ms_per_frame": 1000 * float(np.mean(cpu[1:])),
        "init_ms": 1000 * wall[0], "load_average": os.getloadavg()[0],
        "frames_lost": int(sum(s == "lost" for s in status)),
    }
    if a.hide:
        back = [i for i in range(a.hide[1], len(iou_t)) if status[i] == "tracked" and iou_t[i] >= 0.8]
        out["reacquire_frames"] = (back[0] - a.hide[1]) if back else None
    return out


BENCHMARK = Benchmark("tracker-core", "the tracker core on a dataset: errors against truth, IoU, time per frame",
                      add_arguments, run, quick={"frames": 5})
