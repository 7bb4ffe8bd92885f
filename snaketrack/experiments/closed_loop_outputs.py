"""A closed-loop run on disk: each run's ``summary.json``, ``path.csv`` and overlay video; the runs'
comparison (``summary.json`` and ``head_paths.png``) in the parent folder.

Per run (``OUT/none/``, ``OUT/truth/`` or ``OUT/tracked/``), ``summary.json``:

- ``reach_times_s``: when the simulator's head first came within ``tolerance`` (0.1 m) of each waypoint,
  in order [s of simulated time from the gait's start]; null: never;
- ``controller_reach_times_s``: the same as the controller saw it (its streamed states);
- ``path_error_m``: mean distance [m] of the simulator's head from the route (the polyline from
  the head's start through the waypoints) up to the last waypoint reached, or the run's end;
- ``head_error_m``: mean distance [m] between the head the controller used (world frame) and
  the simulator's head at the same frame (0 for the truth-fed run);
- ``latency_ms``: percentiles (``p50``, ``p95``, ``max``) of capture to receipt by the controller
  [ms, wall clock]; ``service_latency_ms``: the service's capture to publish;
- ``command_age_ms``: how old each command was when it first acted, in simulated time (its state's
  frame time to the physics step) [ms], percentiles (one frame, 66.7 ms at 15 frames/s, in lockstep);
- ``frames_dropped``, ``frames_tracked``, ``frames_shown``, ``states_received``;
- ``flipped_states``: states the controller's head/tail check turned round;
  ``lockstep_timeouts``: frames the simulator stopped waiting for the controller's answer.

The runs together (``OUT/summary.json``, when more than one is in ``OUT``): ``reach_times_s`` and
``path_error_m`` per run, each run's summary under its name, and, with both ``tracked`` and
``truth``, ``reach_time_ratio_x`` (tracked over truth, per waypoint; null where either did not
reach it) and ``within_1_3_x`` (every waypoint reached by both, each ratio at most 1.3), the tracked
run's ``latency_ms``, ``frames_dropped`` and ``flipped_states``.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import numpy as np
from scipy.spatial.transform import Rotation

from snaketrack.experiments.closed_loop import _reach
from snaketrack.io import atomic_write_bytes, atomic_write_text, read_csv_columns, write_json
from snaketrack.sim.mjcf import obstacle_positions
from snaketrack.tracker.run.outputs import OverlayVideo, draw_overlay, link_axes_cam, project_points


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
    """The headline figures of one :func:`~snaketrack.experiments.closed_loop.run_closed_loop` record (module doc)."""
    cfg = run["config"]
    targets = np.asarray(cfg.targets, float)
    tr = run["truth"]
    heads, times = tr["head"].reshape(-1, 2), tr["t"]
    reach = _reach(targets, heads, times, cfg.tolerance)
    last = max((i for i, r in enumerate(reach) if r is not None), default=None)
    end = len(times) if last is None or reach[-1] is None else int(np.searchsorted(times, reach[-1])) + 1
    route = np.vstack([heads[:1], targets]) if len(heads) else targets
    path_error = float(route_distance(heads[:end], route).mean()) if len(heads) else float("nan")
    rows = run["controller"].get("rows", [])
    by_frame = {int(f): i for i, f in enumerate(tr["frame"])}
    errs = [np.hypot(r["head_x"] - heads[by_frame[r["frame"]], 0], r["head_y"] - heads[by_frame[r["frame"]], 1])
            for r in rows if r["frame"] in by_frame and np.isfinite(r["head_x"])]
    fig = run["service"] or {}
    ctl = run["controller"]
    out = {
        "states": cfg.states,
        "seed": cfg.seed,
        "world": cfg.world,
        "pacing": cfg.pacing,
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
        "command_age_ms": _pct(run["command_age_s"], 1000.0),
        "frames_shown": int(len(times)),
        "frames_tracked": fig.get("frames_tracked") if fig else None,
        "frames_dropped": fig.get("frames_dropped", 0) if fig else 0,
        "states_received": len(rows),
        "statuses": {s: sum(1 for r in rows if r["status"] == s) for s in ("tracked", "coasting", "lost")},
        "flipped_states": ctl.get("flipped_states", 0),
        "lockstep_timeouts": int(run.get("lockstep_timeouts", 0)),
        "final_jacobian": ctl.get("jacobian"),
        "time_scale": cfg.time_scale if cfg.pacing == "wall" else None,
        "config": {k: v for k, v in asdict(cfg).items()},
    }
    return out


def write_run(run: dict, out: Path, video: bool = True) -> dict:
    """Write one run into ``out`` (created): ``summary.json``, ``path.csv`` (per frame: t, the
    simulator's head, δ; the controller's head where it got that frame) and, for a tracked run,
    ``overlay.mp4``. Returns the summary."""
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
            R = Rotation.from_quat(latest["base_quat"], scalar_first=True).as_matrix()
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


RUNS = ("none", "truth", "tracked")
_LABELS = {"none": "open loop", "truth": "truth-fed", "tracked": "tracked"}
_COLOURS = {"none": "0.45", "truth": "tab:blue", "tracked": "tab:red"}


def compare_runs(out: Path) -> Optional[dict]:
    """When more than one of ``out/{none,truth,tracked}/summary.json`` exists: write ``out/summary.json``
    (module doc) and ``out/head_paths.png``; returns that summary (None with fewer than two runs)."""
    out = Path(out)
    runs = {name: json.loads((out / name / "summary.json").read_text())
            for name in RUNS if (out / name / "summary.json").exists()}
    if len(runs) < 2:
        return None
    summary: dict = {"reach_times_s": {k: v["reach_times_s"] for k, v in runs.items()},
                     "path_error_m": {k: v["path_error_m"] for k, v in runs.items()}}
    if "tracked" in runs and "truth" in runs:
        tr, ref = runs["tracked"]["reach_times_s"], runs["truth"]["reach_times_s"]
        ratio = [None if (a is None or b is None or b <= 0) else a / b for a, b in zip(tr, ref)]
        summary["reach_time_ratio_x"] = ratio
        summary["within_1_3_x"] = len(tr) == len(ref) and all(r is not None and r <= 1.3 for r in ratio)
    if "tracked" in runs:
        t = runs["tracked"]
        summary.update(latency_ms=t["latency_ms"], frames_dropped=t["frames_dropped"],
                       flipped_states=t["flipped_states"])
    summary.update(runs)
    write_json(out / "summary.json", _jsonable(summary))
    plot_head_paths(out, out / "head_paths.png")
    return summary


def plot_head_paths(out: Path, path: Path) -> None:
    """PNG of the runs' head paths (``path.csv``), with the waypoints and tolerances, over the posts
    in the channel world."""
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    names = [n for n in RUNS if (Path(out) / n / "summary.json").exists()]
    summ = json.loads((Path(out) / names[0] / "summary.json").read_text())
    targets = np.asarray(summ["targets"], float)
    tol = summ["config"]["tolerance"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs, ys = list(targets[:, 0]), list(targets[:, 1])
    for name in names:
        cols = read_csv_columns(Path(out) / name / "path.csv")
        x, y = np.asarray(cols["head_x"], float), np.asarray(cols["head_y"], float)
        xs += [x.min(), x.max()]
        ys += [y.min(), y.max()]
        ax.plot(x, y, color=_COLOURS[name], lw=1.2, label=f"head, {_LABELS[name]}")
        if name == "tracked":
            sx, sy = np.asarray(cols["state_head_x"], float), np.asarray(cols["state_head_y"], float)
            ax.plot(sx, sy, ".", color=_COLOURS[name], ms=2, alpha=0.5, label="head as used (tracked)")
    lo, hi = min(xs) - 0.3, max(xs) + 0.3
    if summ.get("world", "channel") == "channel":
        for ox, oy in obstacle_positions():
            if lo <= ox <= hi:
                ax.add_patch(plt.Circle((ox, oy), 0.05, color="0.6"))
                ys += [oy]
    for i, (tx, ty) in enumerate(targets):
        ax.add_patch(plt.Circle((tx, ty), tol, fill=False, ls="--", color="k"))
        ax.annotate(str(i + 1), (tx, ty), ha="center", va="center", fontsize=8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys) - 0.2, max(ys) + 0.2)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend(loc="best", fontsize=7)
    ax.set_title(f"closed loop, {summ.get('world', 'channel')} world, seed {summ['seed']}: head paths")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
