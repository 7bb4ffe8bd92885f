"""Planar snake scenarios: point-to-point head or centre-of-mass tracking with SJC or CC.

One scenario of the planar head-tracking paper (Sibilska-Mroziewicz et al.,
§4): the robot starts at rest with its tracked point (head-link centre or
centre of mass) at the origin and its head link along +x, its joints on the
gait reference at t = 0 (``variant="authors"``, as the authors' code) or
straight (``"corrected"``; see :mod:`~snaketrack.sim.planar_variants` for
everything the two variants change), and is steered by point-of-sight
guidance through the targets (1, 1), (3, 1), (4, 0), (6, −1), (8, −1) m. A
target counts as reached within 0.05 m. The dynamics are integrated with
:func:`scipy.integrate.solve_ivp`; reaching a target is a terminal event,
after which integration restarts towards the next target.

Model choice: ``track="head"`` integrates the head-position model
(eqs. 24–29), ``track="com"`` Liljebäck's centre-of-mass model; they are the
same robot (tests check that they give the same link positions), so the
tracked point is simply the model's own ``p``.

Solver default: the variant's (:class:`~snaketrack.sim.planar_variants.PlanarVariant`
``solver``): the authors' variant integrates as the authors did (BDF at
``ode15s``'s default tolerances, rtol 1e-3, atol 1e-6), the corrected one at
converged tolerances (RK45, rtol 1e-6, atol 1e-8). At loose tolerances the 5 cm
hit test on the undulating path moves the later reach times by tens of seconds
(docs/planar-dynamics.md). Reach times are located by solve_ivp's event
root-finding on the dense output.

Outputs of :func:`run_scenario` (``out_dir``): ``summary.json``,
``trajectory.csv`` (sampled every ``sample_dt_s``), ``path.png``,
``joint_angles.png``, ``reach_times.png`` and ``animation.gif`` (or
``.mp4``), each described in :mod:`~snaketrack.sim.planar_outputs`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
from scipy.integrate import solve_ivp

from snaketrack.errors import ConvergenceError, InputError
from snaketrack.io import write_json
from snaketrack.models.planar_dynamics import PlanarSnakeModel, SnakeParams
from snaketrack.sim.control import (
    PAPER_TARGETS,
    ControllerConfig,
    JointController,
    PointOfSight,
    heading_offset,
)
from snaketrack.sim.planar_outputs import (
    plot_joint_angles,
    plot_path,
    plot_reach_times,
    summarize,
    write_animation,
    write_trajectory_csv,
)
from snaketrack.sim.planar_variants import initial_joint_angles
from snaketrack.sim.planar_variants import variant as planar_variant

__all__ = ["PlanarScenario", "PlanarResult", "simulate", "run_scenario", "parse_broken", "SOLVERS"]

SOLVERS = ("RK45", "RK23", "DOP853", "LSODA", "Radau", "BDF")


@dataclass(frozen=True)
class PlanarScenario:
    """One simulation: robot, controller, targets and solver settings.

    track: ``"head"`` or ``"com"`` — the point steered to the targets.
    variant: ``"authors"`` (the authors' MATLAB code) or ``"corrected"`` (the
        project's corrections); :mod:`~snaketrack.sim.planar_variants`.
    controller: gains, coupling (``"sjc"``/``"cc"``) and broken joints.
    t_end_s: simulated time limit [s]; the run stops earlier once every target is reached.
    targets: ((x, y), ...) [m]; reach_tolerance_m: 0.05 m.
    method, rtol, atol, max_step_s: passed to solve_ivp; method, rtol, atol default to the variant's ``solver``.
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
    variant: str = "authors"
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    params: SnakeParams = field(default_factory=SnakeParams)
    t_end_s: float = 2000.0
    targets: tuple[tuple[float, float], ...] = PAPER_TARGETS
    reach_tolerance_m: float = 0.05
    method: Optional[str] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    max_step_s: float = np.inf
    sample_dt_s: float = 0.1
    sight_from: str = "tracked"
    broken_mode: str = "locked"

    def __post_init__(self) -> None:
        if self.broken_mode not in ("locked", "passive"):
            raise InputError(f"--broken-mode {self.broken_mode!r}; expected 'locked' or 'passive'")
        if self.track not in ("head", "com"):
            raise InputError(f"--track {self.track!r}; expected 'head' or 'com'")
        default = planar_variant(self.variant).solver
        for name, value in zip(("method", "rtol", "atol"), default):
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.sight_from not in ("tracked", "head", "com"):
            raise InputError(f"--sight-from {self.sight_from!r}; expected 'tracked', 'head' or 'com'")
        if self.method not in SOLVERS:
            raise InputError(f"--method {self.method!r}; expected one of {', '.join(SOLVERS)}")
        if not (0 < self.t_end_s < float("inf")):
            raise InputError(f"--t-end {self.t_end_s!r}; expected a positive, finite time in seconds")
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

    initial_theta: (N,) link angles [rad] at t = 0 (default: the variant's start,
        joint angles on the gait reference at t = 0 or straight, head link along +x).
    """
    var = planar_variant(scenario.variant)
    model = PlanarSnakeModel(scenario.params, reference=scenario.track, head_mass=var.head_mass)
    n, k = model.n_links, model.n_joints
    ctrl = JointController(scenario.controller, k)
    guide = PointOfSight(scenario.targets, scenario.reach_tolerance_m)
    cfg = scenario.controller
    H = model.H
    if initial_theta is None:
        theta0 = H @ np.append(initial_joint_angles(var, k, cfg.gait), 0.0)  # θ = H [φ; θ_N = 0]
    else:
        theta0 = np.asarray(initial_theta, dtype=float)
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
        return heading_offset(th, point, target, cfg.k_theta, cfg.offset_limit_rad, wrap=var.wrap_heading)

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
