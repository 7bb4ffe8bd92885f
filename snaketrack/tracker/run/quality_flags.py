"""Say when a track is wrong without truth: the truth-free figures of a finished run held against limits.

A run whose labels or track left the robot (a mask that took in a person's legs or a chair, a model
stretched between them) still tracks every frame, so ``frames_lost`` alone says nothing. These figures
do, each against a limit of :data:`LIMITS` (docs/your-robot.md, "Judging a track without truth"):

- ``silhouette_iou_mean``, ``silhouette_iou_p5``: the model's silhouette against the observed mask
  (``metrics.json``); low when the mask holds more (or less) than the robot the model can be.
- ``skeleton_residual_p95_widths``: the 95th percentile over frames of the skeleton residual
  (``quality.csv``) in body widths, the body width [px] being the observed mask's area over its skeleton's
  length on the first tenth of the frames (where the box put the labels on the robot): a mask whose
  centre line leaves the model's axes.
- ``mask_area_ratio``: the median mask area [px] of the last quarter of the frames over the first
  quarter's, each frame's taken at the first quarter's depth (the track's, the mean of its base's and
  head's): a mask that grew onto something beside the robot, or shrank off it.
- ``joint_at_limit_fraction``: the largest share, over the joint coordinates, of tracked frames in which
  the coordinate is held at a limit of the robot file (within :data:`LIMIT_MARGIN_RAD`, for at least
  :data:`PINNED_S` of consecutive tracked frames): a model bent hard to reach something the robot is not.
  A gait that reaches its joints' limits touches them for a moment each cycle and is not counted.
- ``depth_jump_fraction``: the share of consecutive tracked frames whose base depth (``base_z`` [m])
  changes by more than :data:`DEPTH_JUMP` of its median: the model's scale jumping between objects.
- ``gait_power_fraction``: the median share of a joint's power near its dominant frequency; checked only
  when the clip holds at least two cycles of the gait frequency (a shorter clip has no resolved spectrum).
- ``lost_fraction``: frames with no fit.
- ``labels_flagged_fraction`` (given the labels' report): labels the labeller's own guard flagged.

:func:`run_figures` computes them from a track folder; :func:`quality_flags` lists the figures beyond
their limits; :func:`warning_line` says it in one line; :func:`flag_run` does the three and warns.
"""
from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np

from snaketrack.errors import SnaketrackWarning
from snaketrack.io import read_csv_columns, read_json
from snaketrack.tracker.run.quality import track_arrays

#: how close to a joint limit [rad] counts as at it
LIMIT_MARGIN_RAD = 0.02
#: how long [s] a joint stays at its limit to count as held there
PINNED_S = 0.5
#: a frame-to-frame base depth change above this share of the median depth is a jump
DEPTH_JUMP = 0.15
#: figure -> ("min" or "max", limit): a run is flagged on each figure beyond its limit
LIMITS: dict[str, tuple[str, float]] = {
    "silhouette_iou_mean": ("min", 0.70),
    "silhouette_iou_p5": ("min", 0.50),
    "skeleton_residual_p95_widths": ("max", 0.75),
    "mask_area_ratio_high": ("max", 1.6),
    "mask_area_ratio_low": ("min", 0.6),
    "joint_at_limit_fraction": ("max", 0.10),
    "depth_jump_fraction": ("max", 0.02),
    "gait_power_fraction": ("min", 0.30),
    "lost_fraction": ("max", 0.05),
    "labels_flagged_fraction": ("max", 0.10),
}
#: what a figure beyond its limit says
SAYS = {
    "silhouette_iou_mean": "the model's silhouette covers the mask poorly",
    "silhouette_iou_p5": "the silhouette fits some frames badly",
    "skeleton_residual_p95_widths": "the mask's centre line leaves the model's axes",
    "mask_area_ratio_high": "the mask grew onto something beside the robot",
    "mask_area_ratio_low": "the mask shrank off the robot",
    "joint_at_limit_fraction": "a joint is held at its limit",
    "depth_jump_fraction": "the base depth jumps between frames",
    "gait_power_fraction": "the joints do not move in one gait",
    "lost_fraction": "frames lost",
    "labels_flagged_fraction": "the labeller flagged its labels",
}


def _finite(a) -> np.ndarray:
    a = np.asarray(a, float).reshape(-1)
    return a[np.isfinite(a)]


def body_width_px(mask_pixels, skeleton_pixels, share: float = 0.1, least: int = 5) -> float:
    """The body's width [px]: the median over the first ``share`` of the frames (at least ``least``) of a
    mask's area over its skeleton's length (both in pixels, (n,)); NaN without a measured frame."""
    area = np.asarray(mask_pixels, float).reshape(-1)
    length = np.asarray(skeleton_pixels, float).reshape(-1)
    n = max(int(least), int(math.ceil(share * len(area))))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _finite(np.where(length[:n] > 0, area[:n] / length[:n], np.nan))
    return float(np.median(w)) if w.size else float("nan")


def mask_area_ratio(mask_pixels, depth=None) -> float:
    """The median mask area of the last quarter of the frames over the first quarter's (n,) [px]; NaN with
    fewer than 4 frames or an empty first quarter.

    depth: the track's depth per frame (n,) [m] (NaN where it has none), or None. Given, each area is
    taken at the first quarter's median depth (times (depth / that depth)²), so a robot that crawls away
    from the camera or towards it keeps its ratio near 1: what is left is a mask that grew or shrank
    against the robot the track follows."""
    area = np.asarray(mask_pixels, float).reshape(-1)
    k = len(area) // 4
    if k < 1:
        return float("nan")
    if depth is not None:
        z = np.asarray(depth, float).reshape(-1)
        z0 = _finite(z[:k])
        if not z0.size or np.median(z0) <= 0:
            return float("nan")
        area = area * (z / float(np.median(z0))) ** 2
    first, last = _finite(area[:k]), _finite(area[-k:])
    if not first.size or not last.size or np.median(first) <= 0:
        return float("nan")
    return float(np.median(last) / np.median(first))


def joint_at_limit_fraction(q: np.ndarray, lower, upper, tracked, min_frames: int = 1,
                            margin: float = LIMIT_MARGIN_RAD) -> np.ndarray:
    """Per joint coordinate (J,), the share of tracked frames in which q (n, J) [rad] lies within ``margin``
    [rad] of its lower (J,) or upper (J,) limit in a run of at least ``min_frames`` consecutive tracked frames
    all at a limit (a frame not tracked ends a run); NaN without a tracked frame."""
    q = np.asarray(q, float).reshape(len(q), -1)
    ok = np.asarray(tracked, bool).reshape(-1)
    if not ok.any():
        return np.full(q.shape[1], np.nan)
    at = ((q <= np.asarray(lower, float) + margin) | (q >= np.asarray(upper, float) - margin)) & ok[:, None]
    held = np.zeros_like(at)
    for j in range(q.shape[1]):
        edges = np.diff(np.concatenate([[0], at[:, j].astype(int), [0]]))
        for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
            if b - a >= min_frames:
                held[a:b, j] = True
    return held[ok].mean(axis=0)


def depth_jump_fraction(z, tracked, jump: float = DEPTH_JUMP) -> float:
    """The share of consecutive tracked frames whose depth z (n,) [m] changes by more than ``jump`` × the
    median tracked depth; NaN with fewer than two tracked frames in a row."""
    z = np.asarray(z, float).reshape(-1)
    ok = np.asarray(tracked, bool).reshape(-1) & np.isfinite(z)
    pairs = ok[1:] & ok[:-1]
    if not pairs.any():
        return float("nan")
    dz = np.abs(np.diff(z))[pairs]
    return float(np.mean(dz > jump * float(np.median(z[ok]))))


def run_figures(track_dir: str | os.PathLike, robot, fps: float,
                labels_report: Optional[dict] = None) -> dict[str, Any]:
    """The figures of :data:`LIMITS` of a finished track folder (``track.csv``, ``quality.csv``,
    ``metrics.json``) of ``robot`` (a :class:`~snaketrack.models.robot.Robot`) at ``fps`` [1/s]; with the
    labels' report (``labels_report.json``: ``frames``, ``flagged_count``) also ``labels_flagged_fraction``."""
    track_dir = Path(track_dir)
    track = read_csv_columns(track_dir / "track.csv")
    per_frame = read_csv_columns(track_dir / "quality.csv")
    metrics = read_json(track_dir / "metrics.json")
    _, q, status = track_arrays(track, robot.dof)
    tracked = status == "tracked"
    out: dict[str, Any] = {k: metrics.get(k, float("nan")) for k in (
        "silhouette_iou_mean", "silhouette_iou_p5", "gait_power_fraction", "gait_frequency_hz", "lost_fraction")}
    width = float("nan")
    area = np.full(len(per_frame["skeleton_residual_px"]), np.nan)
    if "mask_pixels" in per_frame:
        area = np.asarray(per_frame["mask_pixels"], float)
        width = body_width_px(area, per_frame["skeleton_pixels"])
    out["body_width_px"] = width
    p95 = float(metrics.get("skeleton_residual_p95_px", float("nan")))  # metrics.json's, over the finite frames
    out["skeleton_residual_p95_widths"] = p95 / width if width > 0 else float("nan")
    depth = np.where(tracked, 0.5 * (np.asarray(track["base_z"], float) + np.asarray(track["head_z"], float)), np.nan)
    out["mask_area_ratio"] = mask_area_ratio(area, depth if len(depth) == len(area) else None)
    at_limit = joint_at_limit_fraction(q, robot.lower, robot.upper, tracked,
                                       min_frames=max(1, int(math.ceil(PINNED_S * float(fps)))))
    out["joint_at_limit_fraction"] = float(np.nanmax(at_limit)) if np.isfinite(at_limit).any() else float("nan")
    out["joint_at_limit_per_joint"] = [float(v) for v in at_limit]
    out["depth_jump_fraction"] = depth_jump_fraction(track["base_z"], tracked)
    out["gait_cycles"] = (float(out["gait_frequency_hz"]) * len(status) / float(fps)
                          if np.isfinite(out["gait_frequency_hz"]) else float("nan"))
    if labels_report is not None:
        n = int(labels_report.get("frames", 0))
        out["labels_flagged_fraction"] = (int(labels_report.get("flagged_count", 0)) / n) if n else float("nan")
    return out


def quality_flags(figures: dict[str, Any], limits: dict[str, tuple[str, float]] = LIMITS) -> list[dict[str, Any]]:
    """The figures beyond their limits: one ``{"figure", "value", "limit", "says"}`` per flag (``limit``
    written ``"< 0.7"`` or ``"> 0.1"``). A NaN figure raises no flag; the gait figure only with at least two
    cycles in the clip (``gait_cycles``); ``mask_area_ratio`` against both its limits."""
    flags = []
    for name, (side, limit) in limits.items():
        key = "mask_area_ratio" if name.startswith("mask_area_ratio") else name
        value = figures.get(key)
        if value is None or not np.isfinite(value):
            continue
        if name == "gait_power_fraction" and not figures.get("gait_cycles", 0.0) >= 2.0:
            continue
        if (side == "min" and value < limit) or (side == "max" and value > limit):
            flags.append({"figure": key, "value": float(value),
                          "limit": f"{'<' if side == 'min' else '>'} {limit:g}", "says": SAYS[name]})
    return flags


def warning_line(flags: list[dict[str, Any]]) -> Optional[str]:
    """One line naming every flag, or None without one."""
    if not flags:
        return None
    parts = "; ".join(f"{f['says']} ({f['figure']} {f['value']:.3g}, {f['limit']})" for f in flags)
    return (f"the track may have left the robot: {parts} (docs/your-robot.md, 'Judging a track without "
            f"truth'; look at the track's overlay.mp4 and the labels' labels_sheet.png)")


def flag_run(track_dir: str | os.PathLike, robot, fps: float, labels_report: Optional[dict] = None) -> dict[str, Any]:
    """:func:`run_figures` with ``flags`` (:func:`quality_flags`) added, and the one-line warning
    (:func:`warning_line`) issued as a :class:`~snaketrack.errors.SnaketrackWarning` when there is a flag."""
    figures = run_figures(track_dir, robot, fps, labels_report)
    figures["flags"] = quality_flags(figures)
    line = warning_line(figures["flags"])
    if line:
        warnings.warn(line, SnaketrackWarning, stacklevel=2)
    return figures
