"""Does observing second-order moments help the filter?

Runs the Kalman filter of :mod:`snaketrack.tracker.filter` with the image-moment
update only (no silhouette refinement) on a synthetic dataset, starting from
the true pose at frame 0, once observing the centroid alone (the paper's
choice, order 1) and once the centroid plus the area-normalised second
moments (order 2), with truth or corrupted masks. The observation function
``h`` is the soft silhouette renderer followed by the moments; its Jacobian
comes from autograd. Gives the mean errors per
variant.

    snaketrack bench moment-observation [--data DATA/drone-planar-s0] [--frames 60]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from snaketrack.bench.cache import cache_dir
from snaketrack.bench.registry import Benchmark


def track_clip(ds, robot, frames: int, order: int, corrupt: bool, use_update: bool = True) -> dict:
    import torch  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.tracker.calib.camera import Camera
    from snaketrack.tracker.filter import FilterConfig, KalmanFilter
    from snaketrack.tracker.fit.moments import mask_moment_vector
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer
    from snaketrack.tracker.run.corrupt import MaskCorruptor
    from snaketrack.tracker.state import StateLayout

    cam = Camera.from_meta(ds.meta)
    ren = SilhouetteRenderer(robot, cam.K, cam.width, cam.height)
    lay = StateLayout.for_robot(robot)
    truth = ds.truth
    cor = MaskCorruptor(int(ds.meta.get("seed", 0))) if corrupt else None

    def h(s: torch.Tensor) -> torch.Tensor:
        sil, roi = ren(s[None])
        return mask_moment_vector(sil, torch.tensor(roi[:2], dtype=s.dtype), order=order)[0]

    def true_x(i, ref=None):
        t = truth[i]
        return lay.from_quat(t["joint_angles"], t["base_quat_cam"], t["base_position_cam"], ref)

    kf = KalmanFilter(lay, dt=1 / ds.fps, config=FilterConfig())
    x0 = true_x(0)
    kf.initialise(x0)
    eb, eq = [], []
    ref = x0
    for i in range(1, frames):
        kf.predict()
        m = ds.mask(i)
        if cor is not None:
            m = cor(m, i)
        if use_update and m.any():
            z = mask_moment_vector(torch.as_tensor(m, dtype=torch.float64)[None], order=order)[0].numpy()
            kf.update(z, h)
        kf.coast()
        xt = true_x(i, ref)
        ref = xt
        s = kf.pose
        eb.append(float(np.linalg.norm(s[lay.trans] - xt[lay.trans])))
        eq.append(float(np.mean(np.abs(s[lay.q] - xt[lay.q]))))
    return {"base_position_error_m": float(np.mean(eb)), "joint_error_rad": float(np.mean(eq)),
            "final_base_error_m": eb[-1]}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=None,
                    help="a dataset with truth (default: the benchmark cache's drone-planar-s0)")
    ap.add_argument("--frames", type=int, default=60)


def run(args: argparse.Namespace) -> dict:
    import torch  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.datasets.layout import Dataset
    from snaketrack.models.robot import load_robot

    torch.set_num_threads(2)
    data = args.data or str(cache_dir() / "drone-planar-s0")
    ds = Dataset(data)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    out: dict = {"data": data, "frames": args.frames}
    t0 = time.perf_counter()
    out["prediction_only"] = track_clip(ds, robot, args.frames, 1, False, use_update=False)
    for corrupt in (False, True):
        for order in (1, 2):
            key = f"order{order}_{'corrupt' if corrupt else 'truth'}_masks"
            out[key] = track_clip(ds, robot, args.frames, order, corrupt)
            print(key, out[key], file=sys.stderr)
    out["wall_s"] = time.perf_counter() - t0
    return out


BENCHMARK = Benchmark("moment-observation", "does observing second-order moments help the filter?", add_arguments, run,
                      quick={"frames": 5})
