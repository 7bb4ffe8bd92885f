"""What the tracker's objective leaves of the pose error when it starts at the truth: the floor under its errors.

For a dataset with truth (``snaketrack sim video``), every ``step``-th
frame's mask is corrupted as ``snaketrack track --corrupt-masks`` does
(:class:`~snaketrack.tracker.run.corrupt.MaskCorruptor`, seeded by the dataset's
seed; ``clean``: the truth mask itself) and the tracker's per-frame
refinement (:meth:`~snaketrack.tracker.tracker.Tracker.fit`, with its
occlusion and cut weighting) is started at the true pose, with the
prediction it is held to also at the true pose, and the up direction of
``up`` (``sim-imu`` as in the benchmark; no ground-height prior). Where it
settles is the pose the mask, the model and the priors prefer near the
truth: a tracker that started every frame at the truth would still be off
by this much. Each frame is fitted on its own, so no error carries from one
frame to the next.

:func:`measure_pose_floor` returns ``floor_joint_error_rad`` (mean per-joint
absolute error), ``floor_base_error_m``, ``floor_iou`` (against the mask the
refinement saw). Given a ``track.csv`` also, on the same frames where the
track is ``tracked``, the track's own ``track_joint_error_rad``,
``track_base_error_m`` and ``track_iou``, and ``refit_iou``: the same
refinement started at the track's pose. When ``refit_iou`` is about
``floor_iou`` the objective does not tell the track's pose from the truth's,
and the error between them is beyond what the masks show.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.tracker.run.corrupt import MaskCorruptor


def track_pose(cols: dict, k: int, layout) -> np.ndarray:
    """Row ``k`` of a track.csv's columns (``q_1..q_n``, ``base_qw..base_qz``, ``base_x..base_z``) as a pose
    vector (D,) of ``layout`` (a :class:`~snaketrack.tracker.state.StateLayout`)."""
    q = [cols[f"q_{j + 1}"][k] for j in range(layout.n_joints)]
    quat = [cols[c][k] for c in ("base_qw", "base_qx", "base_qy", "base_qz")]
    base = [cols[c][k] for c in ("base_x", "base_y", "base_z")]
    return layout.from_quat(np.asarray(q, float), np.asarray(quat, float), np.asarray(base, float))


def measure_pose_floor(path: Path, step: int = 1, frames: Optional[int] = None, clean: bool = False,
                       up: str = "sim-imu", track: Optional[Path] = None, prior_scale: float = 1.0,
                       progress: bool = False) -> dict:
    """The floor figures of the dataset folder ``path`` (module doc): errors [rad, m] and IoUs.

    step: every ``step``-th frame; frames: the first ``frames`` (None: all). clean: fit the truth masks,
    not corrupted ones. up: ``sim-imu`` or ``none``. track: a ``track.csv`` to compare on the same frames.
    prior_scale: the factor on the prediction prior's standard deviations. progress: a tqdm bar.
    """
    from dataclasses import replace

    from snaketrack.datasets.layout import open_dataset
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import Camera
    from snaketrack.tracker.calib.gravity import open_up
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    if step < 1:
        raise InputError(f"step {step}; expected a positive integer")
    ds = open_dataset(path)
    path = ds.root
    truth = ds.truth
    if not truth:
        raise InputError(f"{path}: no truth.jsonl; the floor is measured against the true poses")
    if not ds.has_masks:
        raise InputError(f"{path}: no masks/; the floor is measured on the truth masks")
    seed = int(ds.meta.get("seed", 0) or 0)
    robot = load_robot(ds.meta.get("robot", "planar-snake-11"))
    cam = Camera.from_meta(ds.meta)
    if not (np.isfinite(prior_scale) and prior_scale > 0):
        raise InputError(f"prior scale {prior_scale!r}: expected a positive factor")
    config = TrackerConfig()
    r = config.refine
    config = replace(config, refine=replace(r, prior_q=r.prior_q * prior_scale, prior_rot=r.prior_rot * prior_scale,
                                            prior_trans=r.prior_trans * prior_scale))
    tracker = Tracker(robot, cam.K, cam.width, cam.height, fps=ds.fps, config=config)
    layout = tracker.layout
    corrupt = None if clean else MaskCorruptor(seed)
    up_source = open_up(up, truth, seed)
    cols = rows = None
    if track is not None:
        from snaketrack.io import read_csv_columns

        cols = read_csv_columns(track)
        rows = {int(f): k for k, f in enumerate(np.asarray(cols["frame"], float))}
    n = len(ds) if frames is None else min(frames, len(ds))
    out: dict[str, list] = {k: [] for k in ("jf", "bf", "if", "jt", "bt", "it", "ir")}
    frames_it = range(0, n, step)
    if progress:
        from tqdm import tqdm

        frames_it = tqdm(frames_it, desc=f"floor {path.name}", unit="frame", mininterval=0.5)
    for i in frames_it:
        m = ds.mask(i)
        if m is None or not (m > 0).any() or i >= len(truth):
            continue
        m = m > 0
        observed = m if corrupt is None else corrupt(m, i)
        if not observed.any():
            continue
        tr = truth[i]
        q_true = np.asarray(tr["joint_angles"], float)
        t_true = np.asarray(tr["base_position_cam"], float)
        x_true = layout.from_quat(q_true, np.asarray(tr["base_quat_cam"], float), t_true)
        u = None if up_source is None else up_source(i)
        res = tracker.fit(x_true, observed, up=u)
        q, _, t = layout.unpack(res.x)
        out["jf"].append(np.abs(q - q_true).mean())
        out["bf"].append(np.linalg.norm(t - t_true))
        out["if"].append(res.iou)
        if rows is not None and i in rows and cols["status"][rows[i]] == "tracked":
            x_track = track_pose(cols, rows[i], layout)
            q_k, _, t_k = layout.unpack(x_track)
            out["jt"].append(np.abs(q_k - q_true).mean())
            out["bt"].append(np.linalg.norm(t_k - t_true))
            out["it"].append(float(cols["iou"][rows[i]]))
            out["ir"].append(tracker.fit(x_track, observed, up=u).iou)
    if not out["jf"]:
        raise InputError(f"{path}: no frame with a robot in its mask among the first {n}")
    res = {"dataset": path.name, "frames": len(out["jf"]), "masks": "truth" if clean else "corrupted",
           "prior_scale": float(prior_scale),
           "floor_joint_error_rad": float(np.mean(out["jf"])), "floor_base_error_m": float(np.mean(out["bf"])),
           "floor_iou": float(np.mean(out["if"]))}
    if out["jt"]:
        res.update(track_frames=len(out["jt"]), track_joint_error_rad=float(np.mean(out["jt"])),
                   track_base_error_m=float(np.mean(out["bt"])), track_iou=float(np.mean(out["it"])),
                   refit_iou=float(np.mean(out["ir"])))
    return res
