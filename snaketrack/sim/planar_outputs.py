"""What a planar scenario run writes: the trajectory table, the summary, plots and the animation.

Of a :class:`~snaketrack.sim.planar.PlanarResult`:

- :func:`summarize`: the headline figures of ``summary.json``: ``reach_times_s``
  (per target, ``None`` if never), ``beyond_limit_fraction`` (fraction of
  samples with any |φ_i| > 40°, the joint limit), ``last_target_time_s``,
  per-joint figures, solver settings and timing.
- :func:`trajectory_table` / :func:`write_trajectory_csv`: ``trajectory.csv``,
  columns ``t, target_index, phi_1…phi_9, phidot_1…phidot_9,
  theta_1…theta_10, head_x, head_y, com_x, com_y, phi_offset,
  kinetic_energy`` one row a sample. Joint angles and the offset are in
  snaketrack's convention ``φ_i = θ_{i+1} − θ_i`` (the paper's angles
  negated; docs/conventions.md).
- :func:`plot_path`, :func:`plot_joint_angles` (±limit lines),
  :func:`plot_reach_times` (like the paper's Figs. 12–18) and
  :func:`write_animation` (GIF or MP4).
"""
from __future__ import annotations

import io as _io
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
from PIL import Image

from snaketrack.io import atomic_write_bytes, atomic_write_text
from snaketrack.models.planar_dynamics import PlanarSnakeModel, paper_to_design_joints
from snaketrack.sim.control import joint_limit_stats
from snaketrack.video_writer import Mp4Writer

if TYPE_CHECKING:
    from snaketrack.sim.planar import PlanarResult

__all__ = ["summarize", "trajectory_table", "write_trajectory_csv", "plot_path", "plot_joint_angles",
           "plot_reach_times", "write_animation"]


def _columns(n: int) -> list[str]:
    k = n - 1
    return (
        ["t", "target_index"]
        + [f"phi_{i}" for i in range(1, k + 1)]
        + [f"phidot_{i}" for i in range(1, k + 1)]
        + [f"theta_{i}" for i in range(1, n + 1)]
        + ["head_x", "head_y", "com_x", "com_y", "phi_offset", "kinetic_energy"]
    )


def trajectory_table(result: PlanarResult) -> tuple[list[str], np.ndarray]:
    """Columns and (K, C) values of trajectory.csv (joint angles in snaketrack's convention)."""
    model = PlanarSnakeModel(result.scenario.params, reference=result.scenario.track)
    n, k = model.n_links, model.n_joints
    xy = model.link_positions(result.q)
    cols = _columns(n)
    data = np.column_stack(
        [
            result.t,
            result.target_index,
            paper_to_design_joints(result.q[:, :k]),
            paper_to_design_joints(result.qd[:, :k]),
            model.link_angles(result.q),
            xy[:, -1, :],
            xy.mean(axis=1),
            paper_to_design_joints(result.phi_offset),
            model.kinetic_energy(result.q, result.qd),
        ]
    )
    return cols, data


def summarize(result: PlanarResult) -> dict:
    """The headline figures written to summary.json."""
    scn = result.scenario
    k = scn.params.n_links - 1
    stats = joint_limit_stats(result.q[:, :k], scn.controller.joint_limit_rad)
    rt = list(result.reach_times_s)
    last = rt[-1] if rt and rt[-1] is not None else None
    return {
        "scenario": scn.name,
        "track": scn.track,
        "sight_from": scn.sight_from,
        "broken_mode": scn.broken_mode,
        "control": scn.controller.coupling,
        "broken_joints": list(scn.controller.broken_joints),
        "reach_times_s": rt,
        "last_target_time_s": last,
        "targets_reached": sum(v is not None for v in rt),
        "beyond_limit_fraction": stats.beyond_limit_fraction,
        "beyond_limit_fraction_per_joint": list(stats.per_joint_fraction),
        "max_abs_joint_deg": [float(np.degrees(v)) for v in stats.max_abs_rad],
        "joint_limit_deg": float(np.degrees(scn.controller.joint_limit_rad)),
        "t_final_s": result.t_final_s,
        "wall_s": result.wall_s,
        "sim_per_wall_x": result.t_final_s / max(result.wall_s, 1e-9),
        "n_rhs": result.n_rhs,
        "solver": {"method": scn.method, "rtol": scn.rtol, "atol": scn.atol,
                   "max_step_s": scn.max_step_s if np.isfinite(scn.max_step_s) else None},
        "joint_convention": "phi_i = theta_{i+1} - theta_i (docs/conventions.md; the paper's angles negated)",
        "config": _jsonable(asdict(scn)),
    }


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def write_trajectory_csv(path: Path, result: PlanarResult) -> None:
    cols, data = trajectory_table(result)
    buf = _io.StringIO()
    buf.write(",".join(cols) + "\n")
    fmt = ["%.4f", "%d"] + ["%.9g"] * (len(cols) - 2)
    np.savetxt(buf, data, delimiter=",", fmt=fmt)
    atomic_write_text(path, buf.getvalue())


def _plt():
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    return plt


def _save_fig(fig, path: Path) -> None:
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def plot_path(result: PlanarResult, path: Path) -> None:
    """Paths of the head and centre of mass with the targets (like Figs. 12–13)."""
    plt = _plt()
    cols, data = trajectory_table(result)
    c = {name: i for i, name in enumerate(cols)}
    model = PlanarSnakeModel(result.scenario.params, reference=result.scenario.track)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(data[:, c["com_x"]], data[:, c["com_y"]], lw=0.8, label="centre of mass")
    ax.plot(data[:, c["head_x"]], data[:, c["head_y"]], lw=0.5, alpha=0.7, label="head")
    tg = np.asarray(result.scenario.targets)
    ax.plot(tg[:, 0], tg[:, 1], "rx", ms=9, mew=2, label="targets")
    for t_mark in np.linspace(0, result.t[-1], 6):
        j = int(np.searchsorted(result.t, t_mark).clip(0, len(result.t) - 1))
        xy = model.link_positions(result.q[j])
        ax.plot(xy[:, 0], xy[:, 1], "-", color="0.3", lw=2, alpha=0.6)
        ax.plot(xy[-1, 0], xy[-1, 1], "o", color="0.1", ms=3)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_title(f"{result.scenario.name}: tracked point = {result.scenario.track}")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    _save_fig(fig, path)
    plt.close(fig)


def plot_joint_angles(result: PlanarResult, path: Path) -> None:
    """Joint angles [deg, snaketrack's convention] with the ±40° limit lines (like Figs. 15–18)."""
    plt = _plt()
    k = result.scenario.params.n_links - 1
    lim = np.degrees(result.scenario.controller.joint_limit_rad)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(result.t, np.degrees(paper_to_design_joints(result.q[:, :k])), lw=0.3)
    ax.axhline(lim, color="r")
    ax.axhline(-lim, color="r")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("joint angle [deg]")
    ax.set_title(f"{result.scenario.name}: joint angles (red: ±{lim:.0f}°)")
    _save_fig(fig, path)
    plt.close(fig)


def plot_reach_times(summaries: Sequence[dict], path: Path) -> None:
    """Bar chart of the time each target was reached, one group per scenario (like Fig. 14)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(summaries) + 2), 3.5))
    n_t = max(len(s["reach_times_s"]) for s in summaries)
    width = 0.8 / n_t
    for j in range(n_t):
        vals = [
            (s["reach_times_s"][j] if j < len(s["reach_times_s"]) and s["reach_times_s"][j] is not None else np.nan)
            for s in summaries
        ]
        ax.bar(np.arange(len(summaries)) + j * width, vals, width, label=f"point {j + 1}")
    ax.set_xticks(np.arange(len(summaries)) + 0.4 - width / 2)
    ax.set_xticklabels([s["scenario"] for s in summaries], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("time reached [s]")
    ax.legend(fontsize=7)
    _save_fig(fig, path)
    plt.close(fig)


def write_animation(result: PlanarResult, path: Path, n_frames: int = 120, fps: int = 15) -> Path:
    """Animation of the robot passing the targets (GIF, or H.264 MP4 if ``path`` ends in .mp4)."""

    plt = _plt()
    model = PlanarSnakeModel(result.scenario.params, reference=result.scenario.track)
    xy = model.link_positions(result.q)
    lim = result.scenario.controller.joint_limit_rad
    k = model.n_joints
    tg = np.asarray(result.scenario.targets)
    track_pt = result.q[:, -2:]
    x_lo = min(xy[..., 0].min(), tg[:, 0].min()) - 0.3
    x_hi = max(xy[..., 0].max(), tg[:, 0].max()) + 0.3
    y_lo = min(xy[..., 1].min(), tg[:, 1].min()) - 0.3
    y_hi = max(xy[..., 1].max(), tg[:, 1].max()) + 0.3
    fig, ax = plt.subplots(figsize=(8, 8 * (y_hi - y_lo) / (x_hi - x_lo) + 0.6), dpi=80)
    frames = []
    idx = np.unique(np.linspace(0, len(result.t) - 1, n_frames).astype(int))
    l = model.l
    for j in idx:
        ax.clear()
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        ax.set_aspect("equal")
        ax.plot(tg[:, 0], tg[:, 1], "rx", ms=9, mew=2)
        ti = int(result.target_index[j])
        if ti < len(tg):
            ax.plot([track_pt[j, 0], tg[ti, 0]], [track_pt[j, 1], tg[ti, 1]], ":", color="0.5", lw=0.8)
        ax.plot(track_pt[: j + 1, 0], track_pt[: j + 1, 1], color="tab:blue", lw=0.6)
        th = model.link_angles(result.q[j])
        over = np.zeros(model.n_links, dtype=bool)
        over[1:] = np.abs(result.q[j, :k]) > lim  # link after an over-limit joint drawn red (as in the paper's Fig. 7)
        for i in range(model.n_links):
            cx, cy = xy[j, i]
            dx, dy = l * np.cos(th[i]), l * np.sin(th[i])
            ax.plot([cx - dx, cx + dx], [cy - dy, cy + dy], "-", lw=4, color="red" if over[i] else "tab:green")
        ax.plot(xy[j, -1, 0], xy[j, -1, 1], "ko", ms=4)
        ax.set_title(f"{result.scenario.name}   t = {result.t[j]:7.1f} s")
        fig.canvas.draw()
        img = np.asarray(fig.canvas.buffer_rgba())[..., :3]
        h2, w2 = img.shape[0] // 2 * 2, img.shape[1] // 2 * 2  # even size for yuv420p video
        frames.append(img[:h2, :w2].copy())
    plt.close(fig)
    path = Path(path)
    if path.suffix == ".mp4":
        with Mp4Writer(path, fps, frames[0].shape[1], frames[0].shape[0]) as video:
            for frame in frames:
                video.write(frame)
        return path

    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    try:
        images = [Image.fromarray(f) for f in frames]
        images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps),
                       loop=0)
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
