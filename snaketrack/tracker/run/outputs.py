"""What a tracking run writes as it goes: ``track.csv``, the state stream, the overlay video.

- :class:`TrackWriter`: ``track.csv`` with the columns of docs/conventions.md (``frame, t,
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
- :func:`overlay_frame`: that overlay for a finished
  :class:`~snaketrack.tracker.run.pipeline.FrameResult`.

The figures against truth (``metrics.json``, plots) are in
:mod:`snaketrack.tracker.run.evaluation`.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import cv2
import numpy as np

from snaketrack.errors import InputError
from snaketrack.io import CsvAppender
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.video_writer import Mp4Writer

STATUS_COLOURS = {"tracked": (60, 220, 60), "coasting": (255, 170, 0), "lost": (255, 60, 60)}  # RGB


def track_columns(n_joints: int, extra: Sequence[str] = ()) -> list[str]:
    """The ``track.csv`` header for ``n_joints`` joint coordinates, then ``extra``."""
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
def link_axes_cam(robot: Any, q: np.ndarray, base_rotation: np.ndarray, base_position: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Link axis start and end points (N, 3) and the head point (3,) in the camera frame [m]."""
    fk = forward_kinematics_np(robot, np.asarray(q, float), np.asarray(base_rotation, float),
                               np.asarray(base_position, float))
    return fk["origins"], fk["ends"], fk["head"]


def link_axes_uv(robot: Any, q: np.ndarray, base_rotation: np.ndarray, base_position: np.ndarray,
                 K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The link axes projected with ``K`` (3, 3): start and end points (N, 2, 2) and the head point (2,)
    [px]; NaN behind the camera."""
    starts, ends, head = link_axes_cam(robot, q, base_rotation, base_position)
    K = np.asarray(K, float)
    return project_points(K, np.stack([starts, ends], axis=1)), project_points(K, head)


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


class OverlayVideo(Mp4Writer):
    """The overlay frames as an H.264 MP4 (:class:`~snaketrack.video_writer.Mp4Writer`: written under a
    temporary name and renamed on :meth:`close`, so a finished video is never half-written). Frames are RGB
    uint8."""


def overlay_frame(result: Any, robot: Any, K: np.ndarray) -> np.ndarray:
    """The overlay image (RGB uint8 (H, W, 3)) of one finished
    :class:`~snaketrack.tracker.run.pipeline.FrameResult`, drawn with the tracking camera's ``K`` (3, 3)."""
    state = result.state
    axes, head = link_axes_uv(robot, state.q, state.base_rotation, state.base_position, K) \
        if state.has_pose else (None, None)
    text = f"frame {result.index}  {state.status}  IoU {state.iou:.2f}" if np.isfinite(state.iou) else \
        f"frame {result.index}  {state.status}"
    return draw_overlay(result.frame, result.mask, axes, head, result.silhouette, text,
                        state.status)
