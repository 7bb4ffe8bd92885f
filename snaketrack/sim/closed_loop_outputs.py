"""A closed-loop run on disk: each run's ``summary.json``, ``path.csv`` and overlay video; both runs'
comparison (``summary.json`` and ``head_paths.png``) in the parent folder.

Per run (``OUT/tracked/`` or ``OUT/truth/``), ``summary.json``:

- ``reach_times_s``: when the simulator's head first came within the tolerance of each waypoint,
  in order [s of simulated time from the gait's start]; null: never;
- ``controller_reach_times_s``: the same as the controller saw it (its streamed states);
- ``path_error_m``: mean distance [m] of the simulator's head from the route (the polyline from
  the head's start through the waypoints) up to the last waypoint reached, or the run's end;
- ``head_error_m``: mean distance [m] between the head the controller used (world frame) and
  the simulator's head at the same frame (0 for the truth-fed run);
- ``latency_ms``: percentiles (``p50``, ``p95``, ``max``) of capture to receipt by the controller
  [ms, wall clock]; ``service_latency_ms``: the service's capture to publish;
- ``command_age_ms``: how old (wall clock, frame time to the physics step it first acts on) each
  command was when applied [ms], percentiles;
- ``frames_dropped``, ``frames_tracked``, ``frames_shown``, ``states_received``.

Both runs (``OUT/summary.json``): each run's summary under ``tracked`` and ``truth``, and
``reach_time_ratio_x`` (tracked over truth, per waypoint) and ``within_1_3_x``.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import numpy as np


def _pct(a, scale: float = 1.0) -> dict:
    a = np.asarray(a, float) * scale
    a = a[np.isfinite(a)]
    if not a.size:
        return {"p50": None, "p95": None, "max": None}
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def route_distance(points: np.ndarray, route: np.ndarray) -> np.ndarray:
    """Distance [m] of each point (T, 2) from the polyline ``route`` (K, 2), K >= 1.

    >>> route_distance(np.array([[0.5, 0.2], [2.0, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0]])).tolist()
    [0.2, 1.0]
    """
    p = np.asarray(points, float)
    r = np.asarray(route, float)
    if len(r) == 1:
        return np.linalg.norm(p - r[0], axis=1)
    a, b = r[:-1], r[1:]
    ab = b - a
    s = np.einsum("tkd,kd->tk", p[:, None] - a[None], ab) / np.maximum((ab * ab).sum(1), 1e-12)
    s = np.clip(s, 0.0, 1.0)
    closest = a[None] + s[..., None] * ab[None]
    return np.linalg.norm(p[:, None] - closest, axis=2).min(axis=1)


def run_summary(run: dict) -> dict:
    """The headline figures of one :func:`~snaketrack.sim.closed_loop.run_closed_loop` record (module doc)."""
    from snaketrack.sim.closed_loop import _reach

    cfg = run["config"]
    targets = np.asarray(cfg.targets, float)
    tr = run["truth"]
    heads, times = tr["head"].reshape(-1, 2), tr["t"]
    reach = _reach(targets, heads, times, cfg.steering.tolerance)
    last = max((i for i, r in enumerate(reach) if r is not None), default=None)
    end = len(times) if last is None or reach[-1] is None else int(np.searchsorted(times, reach[-1])) + 1
    route = np.vstack([heads[:1], targets]) if len(heads) else targets
    path_error = float(route_distance(heads[:end], route).mean()) if len(heads) else float("nan")
    rows = run["controller"].get("rows", [])
    by_frame = {int(f): i for i, f in enumerate(tr["frame"])}
    errs = [np.hypot(r["head_x"] - heads[by_frame[r["frame"]], 0], r["head_y"] - heads[by_frame[r["frame"]], 1])
            for r in rows if r["frame"] in by_frame and np.isfinite(r["head_x"])]
    fig = run["service"] or {}
    scale = cfg.time_scale
    out = {
        "states": cfg.states,
        "seed": cfg.seed,
        "scene": cfg.scene,
        "targets": targets.tolist(),
        "reach_times_s": reach,
        "controller_reach_times_s": run["controller"].get("reach_times"),
        "all_reached": all(r is not None for r in reach),
        "path_error_m": path_error,
        "head_error_m": float(np.mean(errs)) if errs else None,
        "latency_ms": _pct([r["latency_ms"] for r in rows]),
        "service_latency_ms": {"p50": fig.get("latency_ms_p50"), "p95": fig.get("latency_ms_p95"),
                               "max": fig.get("latency_ms_max")} if fig else None,
        "command_age_ms": _pct(run["command_age_s"], 1000.0 * scale),
        "frames_shown": int(len(times)),
        "frames_tracked": fig.get("frames_tracked") if fig else None,
        "frames_dropped": fig.get("frames_dropped", 0) if fig else 0,
        "states_received": len(rows),
        "statuses": {s: sum(1 for r in rows if r["status"] == s) for s in ("tracked", "coasting", "lost")},
        "final_jacobian": run["controller"].get("jacobian"),
        "time_scale": scale,
        "config": {k: v for k, v in asdict(cfg).items()},
    }
    return out


def write_run(run: dict, out: Path, video: bool = True) -> dict:
    """Write one run into ``out`` (created): ``summary.json``, ``path.csv`` (per frame: t, the
    simulator's head, δ; the controller's head where it got that frame) and, for a tracked run,
    ``overlay.mp4``. Returns the summary."""
    from snaketrack.io import atomic_write_text, write_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = run_summary(run)
    write_json(out / "summary.json", _jsonable(summary))
    tr = run["truth"]
    rows = {r["frame"]: r for r in run["controller"].get("rows", [])}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["frame", "t", "head_x", "head_y", "delta", "state_head_x", "state_head_y", "status"])
    for i, f in enumerate(tr["frame"]):
        r = rows.get(int(f))
        w.writerow([int(f), repr(float(tr["t"][i])), repr(float(tr["head"][i][0])), repr(float(tr["head"][i][1])),
                    repr(float(tr["delta"][i])), "" if r is None else repr(r["head_x"]),
                    "" if r is None else repr(r["head_y"]), "" if r is None else r["status"]])
    atomic_write_text(out / "path.csv", buf.getvalue())
    if video and run["frames"]:
        write_overlay(run, out / "overlay.mp4")
    return summary


def write_overlay(run: dict, path: Path) -> None:
    """The run's frames with the observed mask (cyan) and, from the state the controller received for
    that frame (or the newest before it, marked ``dropped``), the link axes and the head point."""
    import torch

    from snaketrack.models.rotations import quat_to_matrix
    from snaketrack.tracker.outputs import OverlayVideo, draw_overlay, link_axes_cam, project_points

    cfg, robot, K = run["config"], run["robot"], run["K"]
    rows = {r["frame"]: r for r in run["controller"].get("rows", [])}
    latest: Optional[dict] = None
    with OverlayVideo(path, cfg.fps, cfg.width, cfg.height) as video:
        for k, (rgb, mask) in enumerate(run["frames"]):
            own = rows.get(k)
            latest = own or latest
            if latest is None:
                video.write(draw_overlay(rgb, mask, text=f"frame {k}  waiting"))
                continue
            R = quat_to_matrix(torch.tensor(latest["base_quat"], dtype=torch.float64)).numpy()
            starts, ends, head = link_axes_cam(robot, np.asarray(latest["q"]), R, np.asarray(latest["base_position"]))
            axes = project_points(K, np.stack([starts, ends], axis=1))
            status = latest["status"]
            text = (f"frame {k}  {status}  {latest['latency_ms']:.0f} ms  delta {latest['delta']:+.3f}"
                    if own else f"frame {k}  dropped (state of {latest['frame']})")
            video.write(draw_overlay(rgb, mask, axes, project_points(K, head), None, text, status))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def compare_runs(out: Path) -> Optional[dict]:
    """When ``out/tracked/summary.json`` and ``out/truth/summary.json`` both exist: write
    ``out/summary.json`` (both, the per-waypoint ratio ``reach_time_ratio_x`` and ``within_1_3_x``)
    and ``out/head_paths.png``; returns that summary (None when a run is missing)."""
    from snaketrack.io import write_json

    out = Path(out)
    runs = {}
    for name in ("tracked", "truth"):
        p = out / name / "summary.json"
        if not p.exists():
            return None
        runs[name] = json.loads(p.read_text())
    tr, ref = runs["tracked"]["reach_times_s"], runs["truth"]["reach_times_s"]
    ratio = [None if (a is None or b is None or b <= 0) else a / b for a, b in zip(tr, ref)]
    within = all(r is not None and r <= 1.3 for r in ratio) and len(tr) == len(ref)
    summary = {"reach_time_ratio_x": ratio, "within_1_3_x": within,
               "reach_times_s": {"tracked": tr, "truth": ref},
               "path_error_m": {"tracked": runs["tracked"]["path_error_m"], "truth": runs["truth"]["path_error_m"]},
               "latency_ms": runs["tracked"]["latency_ms"], "frames_dropped": runs["tracked"]["frames_dropped"],
               "tracked": runs["tracked"], "truth": runs["truth"]}
    write_json(out / "summary.json", _jsonable(summary))
    plot_head_paths(out, out / "head_paths.png")
    return summary


def plot_head_paths(out: Path, path: Path) -> None:
    """PNG of both runs' head paths (``path.csv``) over the posts, with the waypoints and tolerances."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snaketrack.io import atomic_write_bytes, read_csv_columns
    from snaketrack.sim.mjcf import obstacle_positions

    summ = json.loads((Path(out) / "tracked" / "summary.json").read_text())
    targets = np.asarray(summ["targets"], float)
    tol = summ["config"]["steering"]["tolerance"]
    radius = 0.05
    fig, ax = plt.subplots(figsize=(9, 3.2))
    xs = []
    for name, colour in (("truth", "tab:blue"), ("tracked", "tab:red")):
        cols = read_csv_columns(Path(out) / name / "path.csv")
        x, y = np.asarray(cols["head_x"], float), np.asarray(cols["head_y"], float)
        xs += [x.min(), x.max()]
        ax.plot(x, y, color=colour, lw=1.2, label=f"head, {name}-fed")
        if name == "tracked":
            sx, sy = np.asarray(cols["state_head_x"], float), np.asarray(cols["state_head_y"], float)
            ax.plot(sx, sy, ".", color=colour, ms=2, alpha=0.5, label="head as streamed (tracked)")
    lo, hi = min(xs + list(targets[:, 0])) - 0.3, max(xs + list(targets[:, 0])) + 0.3
    for ox, oy in obstacle_positions():
        if lo <= ox <= hi:
            ax.add_patch(plt.Circle((ox, oy), radius, color="0.6"))
    for i, (tx, ty) in enumerate(targets):
        ax.add_patch(plt.Circle((tx, ty), tol, fill=False, ls="--", color="k"))
        ax.annotate(str(i + 1), (tx, ty), ha="center", va="center", fontsize=8)
    ax.set_xlim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title("closed loop: head paths among the posts")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
