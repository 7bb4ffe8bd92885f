"""A track against the truth of a synthetic dataset: ``metrics.json`` and plots.

- :func:`tracking_metrics`: the ``metrics.json`` figures against a
  dataset's ``truth.jsonl`` (names in docs/conventions.md).
- :func:`plot_tracking`: estimated against true joint angles
  (``joint_angles.png``) and base position (``base_position.png``), and the
  camera's height over the ground when it was followed (``camera_height.png``).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from snaketrack.errors import FileFormatError, InputError
from snaketrack.io import atomic_write_bytes


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def _track_arrays(track: dict[str, np.ndarray], n_joints: int) -> dict[str, np.ndarray]:
    for key in ("frame", "base_x", "status"):
        if key not in track:
            raise FileFormatError(f"track: no {key!r} column; expected the track.csv columns (docs/conventions.md)")
    q = np.stack([np.asarray(track[f"q_{i + 1}"], float) for i in range(n_joints)], axis=1)
    base = np.stack([np.asarray(track[k], float) for k in ("base_x", "base_y", "base_z")], axis=1)
    head = np.stack([np.asarray(track[k], float) for k in ("head_x", "head_y", "head_z")], axis=1)
    return {"frame": np.asarray(track["frame"], float).astype(int), "q": q, "base": base, "head": head,
            "status": np.asarray(track["status"]).astype(str)}


def _truth_by_frame(truth: Sequence[dict]) -> dict[int, dict]:
    return {int(r.get("frame", i)): r for i, r in enumerate(truth)}


def _truth_arrays(truth: Sequence[dict], frames: np.ndarray, n_joints: int) -> dict[str, np.ndarray]:
    by_frame = _truth_by_frame(truth)
    missing = [int(f) for f in frames if int(f) not in by_frame]
    if missing:
        raise FileFormatError(f"truth.jsonl: no record for frame {missing[0]} of the track")
    rows = [by_frame[int(f)] for f in frames]
    try:
        q = np.array([r["joint_angles"] for r in rows], float).reshape(len(rows), -1)
        base = np.array([r["base_position_cam"] for r in rows], float).reshape(len(rows), 3)
        head = np.array([r.get("head_position_cam", [np.nan] * 3) for r in rows], float).reshape(len(rows), 3)
    except KeyError as e:
        raise FileFormatError(f"truth.jsonl: missing field {e.args[0]!r}; "
                              "expected the truth.jsonl fields (docs/conventions.md)") from None
    if q.shape[1] != n_joints:
        raise FileFormatError(f"truth.jsonl: {q.shape[1]} joint angles; the robot has {n_joints}")
    return {"q": q, "base": base, "head": head}


def tracking_metrics(
    track: dict[str, np.ndarray],
    truth: Sequence[dict],
    n_joints: int,
    fps: float = float("nan"),
    iou_truth: Optional[Iterable[float]] = None,
) -> dict[str, Any]:
    """``metrics.json`` figures of a track against truth.

    track: ``track.csv`` columns (as :func:`snaketrack.io.read_csv_columns` reads them).
    truth: ``truth.jsonl`` records, matched on ``frame``.
    fps: frames per second of the tracker itself (segmentation excluded).
    iou_truth: per-frame IoU of the rendered silhouette against the truth
        mask; default the track's ``iou_truth`` column when present.

    All frames count (lost and coasting ones too), so a tracker cannot
    improve its error by giving up. Means ignore NaNs (e.g. an IoU of a
    frame with an empty mask, or the pose of a frame before the robot was
    first seen, which counts as lost).

    - ``base_position_error_m``: mean ‖base − base_true‖ [m];
    - ``joint_error_rad``: mean over frames and joints of |q − q_true|
      (wrapped to [−π, π)) [rad]; ``joint_error_per_joint_rad`` per joint;
    - ``joint_error_l2_rad``: mean over frames of ‖q − q_true‖₂ [rad];
    - ``head_position_error_m``: mean ‖head − head_true‖ [m];
    - ``iou``: mean rendered-vs-observed IoU; ``iou_truth``: rendered vs truth mask;
    - ``fps``; ``frames``; ``frames_lost`` (status ``lost``); ``frames_coasting``.
    """
    tr = _track_arrays(track, n_joints)
    if len(tr["frame"]) == 0:
        raise InputError("track: no frames to compare with truth")
    gt = _truth_arrays(truth, tr["frame"], n_joints)
    dq = np.abs(_wrap(tr["q"] - gt["q"]))
    base_err = np.linalg.norm(tr["base"] - gt["base"], axis=1)
    head_err = np.linalg.norm(tr["head"] - gt["head"], axis=1)
    if iou_truth is None and "iou_truth" in track:
        iou_truth = track["iou_truth"]

    def mean(a) -> float:
        a = np.asarray(a, float)
        a = a[np.isfinite(a)]
        return float(a.mean()) if a.size else float("nan")

    return {
        "base_position_error_m": mean(base_err),
        "joint_error_rad": mean(dq),
        "joint_error_l2_rad": mean(np.linalg.norm(dq, axis=1)),
        "joint_error_per_joint_rad": [mean(dq[:, j]) for j in range(n_joints)],
        "head_position_error_m": mean(head_err),
        "iou": mean(track.get("iou", [np.nan])),
        "iou_truth": mean(iou_truth) if iou_truth is not None else float("nan"),
        "fps": float(fps),
        "frames": int(len(tr["frame"])),
        "frames_lost": int(np.count_nonzero(tr["status"] == "lost")),
        "frames_coasting": int(np.count_nonzero(tr["status"] == "coasting")),
    }


def plot_tracking(track: dict[str, np.ndarray], truth: Optional[Sequence[dict]], n_joints: int,
                  out_dir: str | os.PathLike, fps: float = 30.0, joint_names: Optional[Sequence[str]] = None
                  ) -> list[Path]:
    """Write ``joint_angles.png`` and ``base_position.png`` (estimate, and truth when given), and with a
    ``camera_height_ratio`` column (``--track-ground``) ``camera_height.png``; returns the paths."""
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    out_dir = Path(out_dir)
    tr = _track_arrays(track, n_joints)
    gt = _truth_arrays(truth, tr["frame"], n_joints) if truth else None
    t = tr["frame"] / float(fps)
    lost = tr["status"] != "tracked"
    names = list(joint_names) if joint_names else [f"q_{i + 1}" for i in range(n_joints)]
    paths = []

    def save(fig, name: str) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        atomic_write_bytes(out_dir / name, buf.getvalue())
        paths.append(out_dir / name)

    cols = 2 if n_joints > 4 else 1
    rows = int(np.ceil(n_joints / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 1.6 * rows + 0.8), sharex=True, squeeze=False)
    for j in range(rows * cols):
        ax = axes[j % rows, j // rows]
        if j >= n_joints:
            ax.axis("off")
            continue
        ax.plot(t, np.degrees(tr["q"][:, j]), color="tab:red", lw=1.2, label="estimate")
        if gt is not None:
            ax.plot(t, np.degrees(gt["q"][:, j]), color="k", lw=1.0, ls="--", label="truth")
        if lost.any():
            ax.plot(t[lost], np.degrees(tr["q"][lost, j]), ".", color="tab:orange", ms=2, label="not tracked")
        ax.set_ylabel(f"{names[j]} [deg]", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    fig.suptitle("joint angles: estimate vs truth" if gt is not None else "joint angles (estimate)")
    fig.tight_layout()
    save(fig, "joint_angles.png")

    fig, axes = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
    for k, name in enumerate(("x", "y", "z")):
        axes[k].plot(t, tr["base"][:, k], color="tab:blue", lw=1.2, label="estimate")
        if gt is not None:
            axes[k].plot(t, gt["base"][:, k], color="k", lw=1.0, ls="--", label="truth")
        axes[k].set_ylabel(f"base {name} [m]")
    axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("base position in the camera frame")
    fig.tight_layout()
    save(fig, "base_position.png")

    if "camera_height_ratio" in track:  # --track-ground: the camera's height the ground tracker followed
        ratio = np.asarray(track["camera_height_ratio"], float)
        fig, ax = plt.subplots(figsize=(7, 2.8))
        ax.plot(t, ratio, color="tab:green", lw=1.2, label="ground tracker")
        rows = _truth_by_frame(truth) if truth else {}
        z = [rows.get(int(f), {}).get("camera_position_world", [np.nan] * 3)[2] for f in tr["frame"]] \
            if truth else []
        if len(z) and np.isfinite(z[0]) and z[0] > 0:
            ax.plot(t, np.asarray(z, float) / z[0], color="k", lw=1.0, ls="--", label="truth")
        ax.set_ylabel("height / first frame's")
        ax.set_xlabel("time [s]")
        ax.legend(fontsize=8)
        fig.suptitle("the camera's height over the ground")
        fig.tight_layout()
        save(fig, "camera_height.png")
    return paths

