"""What a tracking run leaves behind: ``track.csv``, the overlay video, ``metrics.json``, plots.

- :class:`TrackWriter`: ``track.csv`` with DESIGN.md's columns (``frame, t,
  q_1…q_J, base_x, base_y, base_z, base_qw, base_qx, base_qy, base_qz,
  head_x, head_y, head_z, cov_trace, iou, status``; camera frame, metres,
  radians), one row per finished frame, flushed as it goes
  (:class:`snaketrack.io.CsvAppender`), plus optional extra columns
  (``iou_truth``).
- :class:`StateStream`: the same rows as JSON lines, one per finished frame,
  flushed at once, to standard output or a file (a pipe to a controller).
- :class:`OverlayVideo`: every frame with the observed mask's contour and
  the tracked robot's capsule axes drawn over it (as the paper's Fig. 5):
  cyan contour of the observed mask, magenta contour of the rendered
  silhouette, red link axes with white joints, a yellow head point, and the
  frame number, status and IoU in the corner.
- :func:`tracking_metrics`: the ``metrics.json`` figures against a
  dataset's ``truth.jsonl`` (names from DESIGN.md).
- :func:`plot_tracking`: estimated against true joint angles
  (``joint_angles.png``) and base position (``base_position.png``).
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import cv2
import numpy as np

from snaketrack.errors import FileFormatError, InputError
from snaketrack.io import CsvAppender

STATUS_COLOURS = {"tracked": (60, 220, 60), "coasting": (255, 170, 0), "lost": (255, 60, 60)}  # RGB


def track_columns(n_joints: int, extra: Sequence[str] = ()) -> list[str]:
    """The ``track.csv`` header of DESIGN.md for ``n_joints`` joint coordinates, then ``extra``."""
    return (["frame", "t"] + [f"q_{i + 1}" for i in range(n_joints)]
            + ["base_x", "base_y", "base_z", "base_qw", "base_qx", "base_qy", "base_qz",
               "head_x", "head_y", "head_z", "cov_trace", "iou", "status"] + list(extra))


class TrackWriter:
    """``track.csv`` written a row per finished frame (see module doc).

    ``write(state, **extra)`` takes a :class:`snaketrack.tracker.state.TrackState`
    (anything with ``as_row()``) or a dict of columns; ``extra`` fills the
    extra columns (e.g. ``iou_truth=0.93``).
    """

    def __init__(self, path: str | os.PathLike, n_joints: int, extra_columns: Sequence[str] = ()):
        self.path = Path(path)
        self.columns = track_columns(n_joints, extra_columns)
        self.n_joints = int(n_joints)
        self._csv = CsvAppender(self.path, self.columns)
        self.rows = 0

    def write(self, state: Any, **extra: Any) -> None:
        row = dict(state.as_row() if hasattr(state, "as_row") else state)
        n_q = sum(1 for k in row if k.startswith("q_"))
        if n_q != self.n_joints:
            raise InputError(f"{self.path}: a row with {n_q} joint angles; expected {self.n_joints}")
        row.update(extra)
        self._csv.write(row)
        self.rows += 1

    def close(self) -> None:
        self._csv.close()

    def __enter__(self) -> "TrackWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _plain(v: Any) -> Any:
    """A JSON value: numpy scalars as Python ones, NaN and ±inf as None."""
    if hasattr(v, "item"):
        v = v.item()
    return None if isinstance(v, float) and not math.isfinite(v) else v


class StateStream:
    """Each finished frame's ``track.csv`` row as one JSON line, flushed at once.

    ``target``: ``"-"`` for standard output, else a file path (created or overwritten; a named pipe
    works). Values as in ``track.csv`` (camera frame, metres, radians); NaN is written as ``null``.
    A consumer that cannot wait for the first frames' reading to settle runs with ``hold_frames=0``.
    """

    def __init__(self, target: str):
        self.target = str(target)
        if self.target == "-":
            self._f, self._own = sys.stdout, False
        else:
            try:
                self._f, self._own = open(self.target, "w", encoding="utf-8"), True
            except OSError as e:
                raise InputError(f"--states {self.target}: cannot write ({e.strerror})") from None

    def write(self, row: dict) -> None:
        self._f.write(json.dumps({k: _plain(v) for k, v in row.items()}, allow_nan=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._own:
            self._f.close()


# -- geometry helpers ------------------------------------------------------------------
def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two bool masks of the same shape; NaN when both are empty.

    >>> a = np.zeros((4, 4), bool); a[:2] = True
    >>> b = np.zeros((4, 4), bool); b[1:3] = True
    >>> round(mask_iou(a, b), 4)
    0.3333
    """
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    if a.shape != b.shape:
        raise InputError(f"IoU: mask shapes {a.shape} and {b.shape} differ")
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else float("nan")


def link_axes_cam(robot: Any, q: np.ndarray, base_rotation: np.ndarray, base_position: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Link axis start and end points (N, 3) and the head point (3,) in the camera frame [m]."""
    from snaketrack.models.kinematics import forward_kinematics_np

    fk = forward_kinematics_np(robot, np.asarray(q, float), np.asarray(base_rotation, float),
                               np.asarray(base_position, float))
    return fk["origins"], fk["ends"], fk["head"]


def project_points(K: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Pinhole projection of camera-frame points (..., 3) [m] to pixels (..., 2); NaN behind the camera."""
    p = np.asarray(points, float)
    z = p[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = K[0, 0] * p[..., 0] / z + K[0, 2]
        v = K[1, 1] * p[..., 1] / z + K[1, 2]
    uv = np.stack([u, v], axis=-1)
    uv[z <= 1e-6] = np.nan
    return uv


# -- overlay ------------------------------------------------------------------------------
_SHIFT = 4  # sub-pixel drawing: coordinates × 2^4


def _pt(uv: np.ndarray) -> tuple[int, int]:
    return int(round(uv[0] * (1 << _SHIFT))), int(round(uv[1] * (1 << _SHIFT)))


def draw_overlay(
    rgb: np.ndarray,
    observed_mask: Optional[np.ndarray] = None,
    axes_uv: Optional[np.ndarray] = None,
    head_uv: Optional[np.ndarray] = None,
    rendered_mask: Optional[np.ndarray] = None,
    text: str = "",
    status: str = "tracked",
) -> np.ndarray:
    """One overlay frame (RGB uint8 (H, W, 3)), see module doc.

    axes_uv: (N, 2, 2) pixel end points of each link axis (start, end);
    head_uv: (2,) head point; masks bool (H, W).
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise InputError(f"overlay frame: dtype {rgb.dtype}, shape {rgb.shape}; expected uint8 (H, W, 3)")
    img = rgb.copy()
    h, w = img.shape[:2]
    thick = max(1, int(round(min(h, w) / 360)))
    for mask, colour in ((observed_mask, (0, 255, 255)), (rendered_mask, (255, 0, 255))):
        if mask is None:
            continue
        if mask.shape != (h, w):
            raise InputError(f"overlay mask: shape {mask.shape}; expected ({h}, {w})")
        contours, _ = cv2.findContours(np.asarray(mask, np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        cv2.drawContours(img, contours, -1, colour, thick, cv2.LINE_AA)
    if axes_uv is not None:
        colour = (255, 40, 40) if status == "tracked" else STATUS_COLOURS.get(status, (255, 40, 40))
        for (a, b) in np.asarray(axes_uv, float):
            if np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and max(abs(a).max(), abs(b).max()) < 1e5:
                cv2.line(img, _pt(a), _pt(b), colour, thick + 1, cv2.LINE_AA, _SHIFT)
        for (a, _) in np.asarray(axes_uv, float)[1:]:
            if np.all(np.isfinite(a)) and abs(a).max() < 1e5:
                cv2.circle(img, _pt(a), (thick + 1) << _SHIFT, (255, 255, 255), -1, cv2.LINE_AA, _SHIFT)
    if head_uv is not None and np.all(np.isfinite(head_uv)) and np.abs(head_uv).max() < 1e5:
        cv2.circle(img, _pt(head_uv), (thick + 3) << _SHIFT, (255, 230, 0), -1, cv2.LINE_AA, _SHIFT)
    if text:
        scale = 0.45 * thick
        cv2.putText(img, text, (6, int(18 * thick)), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), thick + 2, cv2.LINE_AA)
        cv2.putText(img, text, (6, int(18 * thick)), cv2.FONT_HERSHEY_SIMPLEX, scale,
                    STATUS_COLOURS.get(status, (255, 255, 255)), thick, cv2.LINE_AA)
    return img


class OverlayVideo:
    """An MP4 (``mp4v``) of overlay frames, written frame by frame with OpenCV.

    The file is written under a temporary name and renamed on :meth:`close`,
    so a finished video is never half-written. Frames are RGB uint8.
    """

    def __init__(self, path: str | os.PathLike, fps: float, width: int, height: int):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.stem}.part{self.path.suffix}")
        self.size = (int(width), int(height))
        self._w = cv2.VideoWriter(str(self._tmp), cv2.VideoWriter_fourcc(*"mp4v"), float(fps), self.size)
        if not self._w.isOpened():
            raise FileFormatError(f"{self.path}: OpenCV cannot open an mp4v video writer")
        self.frames = 0

    def write(self, rgb: np.ndarray) -> None:
        if (rgb.shape[1], rgb.shape[0]) != self.size:
            raise InputError(f"{self.path}: frame size {rgb.shape[1]}x{rgb.shape[0]}; expected {self.size[0]}x{self.size[1]}")
        self._w.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        self.frames += 1

    def close(self) -> None:
        if self._w is not None:
            self._w.release()
            self._w = None
            if self.frames:
                os.replace(self._tmp, self.path)
            elif self._tmp.exists():
                self._tmp.unlink()

    def __enter__(self) -> "OverlayVideo":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- metrics ----------------------------------------------------------------------------
def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def _track_arrays(track: dict[str, np.ndarray], n_joints: int) -> dict[str, np.ndarray]:
    for key in ("frame", "base_x", "status"):
        if key not in track:
            raise FileFormatError(f"track: no {key!r} column; expected DESIGN.md's track.csv columns")
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
        raise FileFormatError(f"truth.jsonl: missing field {e.args[0]!r}; expected DESIGN.md's truth names") from None
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
    """``metrics.json`` figures of a track against truth (DESIGN.md names).

    track: ``track.csv`` columns (as :func:`snaketrack.io.read_csv_columns` reads them).
    truth: ``truth.jsonl`` records, matched on ``frame``.
    fps: frames per second of the tracker itself (segmentation excluded).
    iou_truth: per-frame IoU of the rendered silhouette against the truth
        mask; default the track's ``iou_truth`` column when present.

    All frames count (lost and coasting ones too), so a tracker cannot
    improve its error by giving up. Means ignore NaNs (e.g. an IoU of a
    frame with an empty mask).

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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snaketrack.io import atomic_write_bytes

    out_dir = Path(out_dir)
    tr = _track_arrays(track, n_joints)
    gt = _truth_arrays(truth, tr["frame"], n_joints) if truth else None
    t = tr["frame"] / float(fps)
    lost = tr["status"] != "tracked"
    names = list(joint_names) if joint_names else [f"q_{i + 1}" for i in range(n_joints)]
    paths = []

    def save(fig, name: str) -> None:
        import io

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

