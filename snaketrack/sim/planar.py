"""Planar snake scenarios: point-to-point head or centre-of-mass tracking with SJC or CC.

One scenario of the planar head-tracking paper (Sibilska-Mroziewicz et al.,
§4): the robot starts straight along +x with its tracked point (head-link
centre or centre of mass) at the origin, and is steered by point-of-sight
guidance through the targets (1, 1), (3, 1), (4, 0), (6, −1), (8, −1) m. A
target counts as reached within 0.05 m. The dynamics are integrated with
:func:`scipy.integrate.solve_ivp`; reaching a target is a terminal event,
after which integration restarts towards the next target.

Model choice: ``track="head"`` integrates the head-position model
(eqs. 24–29), ``track="com"`` Liljebäck's centre-of-mass model; they are the
same robot (tests check that they give the same link positions), so the
tracked point is simply the model's own ``p``.

Solver default: RK45, rtol 1e-6, atol 1e-8 (chosen after measuring the
spread of the reach times over solvers and tolerances; see
docs/planar-dynamics.md). Reach times are located by solve_ivp's event
root-finding on the dense output.

Outputs of :func:`run_scenario` (``out_dir``):

- ``summary.json``: ``reach_times_s`` (per target, ``null`` if never),
  ``beyond_limit_fraction`` (fraction of samples with any |φ_i| > 40°),
  ``last_target_time_s``, per-joint figures, solver settings and timing.
- ``trajectory.csv``: ``t, target_index, phi_1…phi_9, phidot_1…phidot_9,
  theta_1…theta_10, head_x, head_y, com_x, com_y, phi_offset,
  kinetic_energy`` sampled every ``sample_dt_s``. Joint angles and the
  offset are in snaketrack's convention ``φ_i = θ_{i+1} − θ_i`` (the paper's
  angles negated; docs/conventions.md).
- ``path.png``, ``joint_angles.png`` (±40° lines), ``reach_times.png``
  (like the paper's Figs. 12–18) and ``animation.gif`` (or ``.mp4``).
"""
from __future__ import annotations

import io as _io
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
from scipy.integrate import solve_ivp

from snaketrack.errors import ConvergenceError, InputError
from snaketrack.io import atomic_write_bytes, atomic_write_text, write_json
from snaketrack.models.planar_dynamics import PlanarSnakeModel, SnakeParams, paper_to_design_joints
from snaketrack.sim.control import (
    PAPER_TARGETS,
    ControllerConfig,
    JointController,
    PointOfSight,
    heading_offset,
    joint_limit_stats,
)

__all__ = ["PlanarScenario", "PlanarResult", "simulate", "run_scenario", "parse_broken", "SOLVERS"]

SOLVERS = ("RK45", "RK23", "DOP853", "LSODA", "Radau", "BDF")


@dataclass(frozen=True)
class PlanarScenario:
    """One simulation: robot, controller, targets and solver settings.

    track: ``"head"`` or ``"com"`` — the point steered to the targets.
    controller: gains, coupling (``"sjc"``/``"cc"``) and broken joints.
    t_end_s: simulated time limit [s]; the run stops earlier once every target is reached.
    targets: ((x, y), ...) [m]; reach_tolerance_m: 0.05 m.
    method, rtol, atol, max_step_s: passed to solve_ivp.
    sample_dt_s: output sampling step [s] (trajectory.csv and the limit bookkeeping).
    sight_from: the point the line of sight to the target is drawn from in
        eq. 36. ``"tracked"`` (the paper's: the point being steered) is the
        default; ``"com"`` with ``track="head"`` steers by the direction from
        the centre of mass while still requiring the head to reach each
        target (a diagnostic: the head's lateral sway then no longer enters
        the heading reference; see docs/planar-dynamics.md).
    broken_mode: ``"locked"`` (as in the authors' MATLAB code: a broken joint
        gets zero commanded acceleration and keeps its initial angle) or ``"passive"`` (it gets
        zero torque and swings freely; a diagnostic).
    """

    track: str = "head"
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    params: SnakeParams = field(default_factory=SnakeParams)
    t_end_s: float = 2000.0
    targets: tuple[tuple[float, float], ...] = PAPER_TARGETS
    reach_tolerance_m: float = 0.05
    method: str = "RK45"
    rtol: float = 1e-6
    atol: float = 1e-8
    max_step_s: float = np.inf
    sample_dt_s: float = 0.1
    sight_from: str = "tracked"
    broken_mode: str = "locked"

    def __post_init__(self) -> None:
        if self.broken_mode not in ("locked", "passive"):
            raise InputError(f"--broken-mode {self.broken_mode!r}; expected 'locked' or 'passive'")
        if self.track not in ("head", "com"):
            raise InputError(f"--track {self.track!r}; expected 'head' or 'com'")
        if self.sight_from not in ("tracked", "head", "com"):
            raise InputError(f"--sight-from {self.sight_from!r}; expected 'tracked', 'head' or 'com'")
        if self.method not in SOLVERS:
            raise InputError(f"--method {self.method!r}; expected one of {', '.join(SOLVERS)}")
        if not (self.t_end_s > 0):
            raise InputError(f"--t-end {self.t_end_s!r}; expected a positive time in seconds")
        if not (self.sample_dt_s > 0):
            raise InputError(f"sample_dt_s = {self.sample_dt_s!r}; expected a positive time in seconds")
        if not (self.rtol > 0 and self.atol > 0):
            raise InputError(f"rtol/atol = {self.rtol!r}/{self.atol!r}; expected positive tolerances")

    @property
    def name(self) -> str:
        """Short label, e.g. ``head-cc-b3_5_6``."""
        b = self.controller.broken_joints
        tail = "none" if not b else "b" + "_".join(str(j) for j in b)
        sight = "" if self.sight_from in ("tracked", self.track) else f"-sight{self.sight_from}"
        mode = "-passive" if (b and self.broken_mode == "passive") else ""
        return f"{self.track}-{self.controller.coupling}-{tail}{mode}{sight}"


@dataclass(frozen=True)
class PlanarResult:
    """A finished simulation, sampled every ``sample_dt_s``.

    t: (K,) [s]; q, qd: (K, N+2) states in the model's coordinates (paper
    convention, ``p`` = tracked point); target_index: (K,) index of the target
    being steered to (K = len(targets) once all are reached);
    phi_offset: (K,) heading offset φ_o [rad, paper convention];
    reach_times_s: per target [s] or None; n_rhs: right-hand-side evaluations;
    wall_s: wall-clock time of the integration [s].
    """

    scenario: PlanarScenario
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    target_index: np.ndarray
    phi_offset: np.ndarray
    reach_times_s: tuple[Optional[float], ...]
    n_rhs: int
    wall_s: float
    t_final_s: float


def parse_broken(text: str | None, n_joints: int = 9) -> tuple[int, ...]:
    """``"3,5,6"`` → ``(3, 5, 6)``; empty or ``None`` → ``()``.

    >>> parse_broken("3, 5,8")
    (3, 5, 8)
    """
    if text is None or text.strip() in ("", "none"):
        return ()
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            j = int(part)
        except ValueError:
            raise InputError(f"--broken {text!r}: {part!r} is not a joint number; expected e.g. 3,5,6") from None
        if not 1 <= j <= n_joints:
            raise InputError(f"--broken {text!r}: joint {j} out of range; expected 1..{n_joints}")
        out.append(j)
    return tuple(sorted(set(out)))


def simulate(
    scenario: PlanarScenario,
    progress: Optional[Callable[[float], None]] = None,
    initial_theta: Optional[np.ndarray] = None,
) -> PlanarResult:
    """Integrate one scenario; ``progress(t)`` is called now and then with the simulated time [s].

    initial_theta: (N,) link angles [rad] at t = 0 (default straight along +x).
    """
    model = PlanarSnakeModel(scenario.params, reference=scenario.track)
    n, k = model.n_links, model.n_joints
    ctrl = JointController(scenario.controller, k)
    guide = PointOfSight(scenario.targets, scenario.reach_tolerance_m)
    cfg = scenario.controller
    H = model.H
    theta0 = np.zeros(n) if initial_theta is None else np.asarray(initial_theta, dtype=float)
    q0, qd0 = model.state_from(theta0, np.zeros(2))
    y = np.concatenate([q0, qd0])
    nq = model.n_q
    counter = [0, 0.0]
    passive = ctrl.broken_mask if scenario.broken_mode == "passive" and ctrl.broken_mask.any() else None

    # line-of-sight point = p − l (w·cos θ, w·sin θ); w picks a link-centre combination
    if scenario.sight_from in ("tracked", scenario.track):
        w = None
    else:
        w = model.R.mean(axis=0) if scenario.sight_from == "com" else model.R[-1]
    lw = None if w is None else model.l * w

    def offset(q: np.ndarray, target: np.ndarray) -> float:
        th = H @ q[:n]
        point = q[-2:] if lw is None else (q[-2] - lw @ np.cos(th), q[-1] - lw @ np.sin(th))
        return heading_offset(th, point, target, cfg.k_theta, cfg.offset_limit_rad)

    def rhs(t: float, yy: np.ndarray, target: np.ndarray) -> np.ndarray:
        q, qd = yy[:nq], yy[nq:]
        u = ctrl.command(t, q[:k], qd[:k], offset(q, target))
        qdd = model.accelerations(q, qd, joint_acc=u, passive=passive)
        counter[0] += 1
        if progress is not None and t - counter[1] >= 5.0:
            counter[1] = t
            progress(t)
        return np.concatenate([qd, qdd])

    def make_event(target: np.ndarray, tol: float):
        def ev(t: float, yy: np.ndarray, target_=None) -> float:
            return float(np.hypot(yy[nq - 2] - target[0], yy[nq - 1] - target[1])) - tol

        ev.terminal = True
        ev.direction = -1
        return ev

    dt = scenario.sample_dt_s
    t_grid = np.arange(0.0, scenario.t_end_s + 0.5 * dt, dt)
    ts, ys, idx = [], [], []
    t0 = 0.0
    wall0 = time.perf_counter()
    while True:
        done = guide.done
        target = guide.targets[min(guide.index, len(guide.targets) - 1)]
        if done:
            break
        grid = t_grid[(t_grid >= t0) & (t_grid <= scenario.t_end_s)]
        if ts and len(grid) and grid[0] <= ts[-1][-1]:
            grid = grid[grid > ts[-1][-1]]
        sol = solve_ivp(
            rhs,
            (t0, scenario.t_end_s),
            y,
            method=scenario.method,
            t_eval=grid if len(grid) else None,
            events=make_event(target, scenario.reach_tolerance_m),
            rtol=scenario.rtol,
            atol=scenario.atol,
            max_step=scenario.max_step_s,
            args=(target,),
        )
        if sol.status == -1:
            raise ConvergenceError(f"solve_ivp ({scenario.method}) failed at t = {sol.t[-1]:.3f} s: {sol.message}")
        if len(grid):
            ts.append(sol.t)
            ys.append(sol.y.T)
            idx.append(np.full(len(sol.t), guide.index))
        if sol.status == 1 and len(sol.t_events[0]):
            t0 = float(sol.t_events[0][0])
            y = sol.y_events[0][0].copy()
            guide.reached(t0)
            if t0 >= scenario.t_end_s:
                break
        else:
            t0 = scenario.t_end_s
            break
    wall = time.perf_counter() - wall0
    # keep the samples up to the last target (or t_end) and add the final state
    t_all = np.concatenate(ts) if ts else np.zeros(0)
    y_all = np.concatenate(ys) if ys else np.zeros((0, 2 * nq))
    i_all = np.concatenate(idx) if idx else np.zeros(0, dtype=int)
    if len(t_all) == 0 or t_all[-1] < t0:
        t_all = np.append(t_all, t0)
        y_all = np.vstack([y_all, y[None]])
        i_all = np.append(i_all, guide.index)
    q_all, qd_all = y_all[:, :nq], y_all[:, nq:]
    offs = np.array(
        [offset(qq, guide.targets[min(int(ii), len(guide.targets) - 1)]) for qq, ii in zip(q_all, i_all)]
    )
    if progress is not None:
        progress(t0)
    return PlanarResult(
        scenario=scenario,
        t=t_all,
        q=q_all,
        qd=qd_all,
        target_index=i_all.astype(int),
        phi_offset=offs,
        reach_times_s=tuple(guide.reach_times),
        n_rhs=counter[0],
        wall_s=wall,
        t_final_s=t0,
    )


# --------------------------------------------------------------------- outputs
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    """Animation of the robot passing the targets (GIF, or MP4 if ``path`` ends in .mp4)."""
    import imageio.v2 as imageio

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
        over[1:] = np.abs(result.q[j, :k]) > lim  # link after an over-limit joint drawn red (seed Fig. 7)
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
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    try:
        if path.suffix == ".mp4":
            imageio.mimsave(tmp, frames, fps=fps, macro_block_size=1)
        else:
            imageio.mimsave(tmp, frames, duration=1.0 / fps, loop=0)
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def run_scenario(
    scenario: PlanarScenario,
    out_dir: str | Path,
    animation: Optional[str] = "gif",
    progress: Optional[Callable[[float], None]] = None,
    n_frames: int = 120,
) -> dict:
    """Simulate and write summary.json, trajectory.csv, plots and the animation; returns the summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = simulate(scenario, progress=progress)
    summary = summarize(result)
    write_trajectory_csv(out / "trajectory.csv", result)
    plot_path(result, out / "path.png")
    plot_joint_angles(result, out / "joint_angles.png")
    plot_reach_times([summary], out / "reach_times.png")
    if animation:
        write_animation(result, out / f"animation.{animation}", n_frames=n_frames)
        summary["animation"] = f"animation.{animation}"
    write_json(out / "summary.json", summary)
    return summary
