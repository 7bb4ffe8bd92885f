"""The world's up direction in the camera frame, per frame: an IMU log or a simulated IMU.

A robot crawls on the ground, and a silhouette of a thin body seen from
above hardly tells how its plane is tilted: tilt, depth and the edge offset
trade against each other. Phones, drones and gimbals measure gravity.
Given ``up = −g/|g|`` in the camera frame (OpenCV: x right, y down,
z forward), the tracker holds the robot's plane to the
ground it defines (:class:`snaketrack.tracker.fit.refine.RefineConfig`
``up_prior_rad``) and its first-frame search lifts the mask's axis onto that
plane only.

Sources (:func:`open_up`):

- a CSV log, columns ``frame, up_x, up_y, up_z`` (frames without a row get
  no prior; the vector need not be normalised);
- ``sim-imu``: for a synthetic dataset, an IMU simulated from the camera's
  attitude in ``truth.jsonl`` (``camera_quat_world``; the camera's, not the
  robot's): the true up direction turned by a constant mounting bias of
  ``bias_deg`` about a random axis and by white noise of ``noise_deg`` per
  axis and frame, seeded.

>>> up_from_camera_quat([1.0, 0.0, 0.0, 0.0]).tolist()  # camera axes = world axes: up is +z
[0.0, 0.0, 1.0]
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
from scipy.spatial.transform import Rotation

from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.io import read_csv_columns

UpSource = Callable[[int], Optional[np.ndarray]]
"""frame index → (3,) unit up vector in the camera frame, or None (no prior for that frame)."""


def up_from_camera_quat(quat_wxyz: Sequence[float]) -> np.ndarray:
    """World +z in the camera frame, (3,), from the camera's orientation ``R_wc`` (w, x, y, z)."""
    q = np.asarray(quat_wxyz, float)
    if q.shape != (4,) or not np.linalg.norm(q) > 0:
        raise InputError(f"quaternion {q.tolist()}: expected a non-zero (w, x, y, z)")
    return Rotation.from_quat(q, scalar_first=True).inv().apply([0.0, 0.0, 1.0])


def _rotate(v: np.ndarray, axis: np.ndarray, angle: float) -> np.ndarray:
    """``v`` (3,) turned by ``angle`` [rad] about ``axis`` (3,, any length)."""
    return Rotation.from_rotvec(angle * np.asarray(axis, float) / np.linalg.norm(axis)).apply(v)


def simulated_imu(truth: Sequence[dict], seed: int, bias_deg: float = 1.0, noise_deg: float = 0.5) -> UpSource:
    """Up readings of a simulated IMU (module doc) for the frames of ``truth`` (``truth.jsonl`` rows)."""
    if bias_deg < 0 or noise_deg < 0:
        raise InputError(f"simulated IMU: bias {bias_deg}°, noise {noise_deg}°; expected >= 0")
    rng = np.random.default_rng([int(seed), 4242])
    bias_axis = rng.normal(size=3)
    ups = []
    for i, row in enumerate(truth):
        if "camera_quat_world" not in row:
            raise FileFormatError(f"--up sim-imu: truth.jsonl frame {i} has no camera_quat_world; "
                                  "the simulated IMU needs the camera's attitude")
        u = _rotate(up_from_camera_quat(row["camera_quat_world"]), bias_axis, math.radians(bias_deg))
        noise = np.radians(noise_deg) * np.random.default_rng([int(seed), 4243, i]).normal(size=3)
        if np.linalg.norm(noise) > 0:
            u = _rotate(u, noise, float(np.linalg.norm(noise)))
        ups.append(u / np.linalg.norm(u))
    table = np.array(ups)

    def source(frame: int) -> Optional[np.ndarray]:
        return table[frame].copy() if 0 <= frame < len(table) else None

    return source


def load_up_csv(path: str | os.PathLike) -> UpSource:
    """An up log: CSV with columns ``frame, up_x, up_y, up_z`` (camera frame; normalised here)."""
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"{p}: up/IMU log not found")
    cols = read_csv_columns(p)
    missing = [c for c in ("frame", "up_x", "up_y", "up_z") if c not in cols]
    if missing:
        raise FileFormatError(f"{p}: missing column(s) {', '.join(missing)}; expected frame, up_x, up_y, up_z")
    frames = np.asarray(cols["frame"], float)
    vec = np.stack([np.asarray(cols[c], float) for c in ("up_x", "up_y", "up_z")], 1)
    norm = np.linalg.norm(vec, axis=1)
    bad = ~np.isfinite(norm) | (norm < 1e-9) | ~np.isfinite(frames)
    if bad.any():
        k = int(np.argmax(bad))
        raise FileFormatError(f"{p}: row {k + 1} has no usable up vector ({vec[k].tolist()}); expected a finite "
                              "non-zero 3-vector")
    table = {int(f): v / n for f, v, n in zip(frames, vec, norm)}

    def source(frame: int) -> Optional[np.ndarray]:
        v = table.get(int(frame))
        return None if v is None else v.copy()

    return source


def open_up(spec: Optional[str], truth: Optional[Sequence[dict]], seed: int = 0) -> Optional[UpSource]:
    """The up source named by ``--up``: ``None``/``"none"``, ``"sim-imu"`` (needs truth) or a CSV path."""
    if spec is None or spec == "none":
        return None
    if spec == "auto":
        raise InputError("--up auto is fitted by `snaketrack track` in passes over a recorded source's first frames, "
                         "in one run (not with --chunks or serve); here give an IMU CSV, sim-imu or none")
    if spec == "sim-imu":
        if truth is None:
            raise InputError("--up sim-imu: the source has no truth.jsonl (camera attitude); give an IMU CSV")
        return simulated_imu(truth, seed)
    return load_up_csv(spec)
