"""Speed of the planar snake simulation: simulated seconds per wall-clock second.

Measures, in one process:

- the vectorised model (:class:`snaketrack.models.planar_dynamics.PlanarSnakeModel`)
  inside the full closed loop of :func:`snaketrack.sim.planar.simulate`
  (guidance, controller, solve_ivp RK45 rtol 1e-6, events), on the head-SJC
  scenario without faults;
- a literal reference: the paper's eqs. 13–29 (Sibilska-Mroziewicz et al.,
  docs/planar-dynamics.md) written with dense diag()
  matrices and matrix inverses at every call, as a MATLAB transcription
  would, driven by the same controller and solver over a shorter span;
- the cost of one right-hand-side evaluation of each, and how far apart
  their accelerations are (they are the same model).

Usage::

    snaketrack bench dynamics [--sim-s 300] [--ref-sim-s 60]
"""
from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

import numpy as np

from snaketrack.bench.registry import Benchmark

if TYPE_CHECKING:
    from snaketrack.models.planar_dynamics import SnakeParams
    from snaketrack.sim.planar import PlanarScenario


def literal_head_model(params: SnakeParams):
    """Accelerations (PFL) of the head model, transcribed literally from eqs. 13–29."""
    N, m, l, J = params.n_links, params.mass_kg, params.half_length_m, params.inertia
    ct, cn = params.c_t, params.c_n
    A = np.eye(N - 1, N) + np.eye(N - 1, N, 1)
    D = np.eye(N - 1, N) - np.eye(N - 1, N, 1)
    a = np.zeros(N)
    a[-1] = 1
    e = np.ones(N)
    H = np.triu(np.ones((N, N)))
    T = np.vstack([D, a])
    Tinv = np.linalg.inv(T)
    C = Tinv[:, : N - 1]

    def acc(q, qd, u):
        phib = q[:N]
        phibd, pd = qd[:N], qd[N:]
        theta = H @ phib
        thetad = H @ phibd
        S = np.diag(np.sin(theta))
        Cth = np.diag(np.cos(theta))
        V = A.T @ np.linalg.inv(D @ D.T) @ A
        K = A.T @ np.linalg.inv(D @ D.T) @ D
        xd = l * C @ A @ S @ thetad + e * pd[0]
        yd = -l * C @ A @ Cth @ thetad + e * pd[1]
        F = -np.block([[ct * Cth @ Cth + cn * S @ S, (ct - cn) * S @ Cth],
                       [(ct - cn) * S @ Cth, ct * S @ S + cn * Cth @ Cth]])
        fR = F @ np.concatenate([xd, yd])
        Mth = J * np.eye(N) + m * l**2 * S @ V @ S + m * l**2 * Cth @ V @ Cth
        W = m * l**2 * S @ V @ Cth - m * l**2 * Cth @ V @ S
        VP = a @ D.T @ np.linalg.inv(D @ D.T) @ A
        MP = m * l * np.vstack([VP @ S, -VP @ Cth])
        WP = m * l * np.vstack([VP @ Cth, VP @ S])
        GP = a - a @ D.T @ np.linalg.inv(D @ D.T) @ D
        Mbar = np.block([[H.T @ Mth @ H, np.zeros((N, 2))], [-MP @ H, m * np.eye(2)]])
        Wbar = np.concatenate([H.T @ W @ np.diag(H @ phibd) @ H @ phibd, -WP @ np.diag(H @ phibd) @ H @ phibd])
        Gbar = np.block([[-l * H.T @ S @ K, l * H.T @ Cth @ K],
                         [-GP[None], np.zeros((1, N))],
                         [np.zeros((1, N)), -GP[None]]])
        nbar = Wbar + Gbar @ fR
        k = N - 1
        qu = np.linalg.inv(Mbar[k:, k:]) @ (-nbar[k:] - Mbar[k:, :k] @ u)
        return np.concatenate([u, qu])

    return acc


def run_literal(scn: PlanarScenario, t_end: float) -> tuple[float, int]:
    """Closed loop with the literal model (same guidance, controller, solver); returns (wall_s, n_rhs)."""
    from scipy.integrate import solve_ivp  # deferred, as every import of run's work: bench --list imports none

    from snaketrack.models.planar_dynamics import PlanarSnakeModel
    from snaketrack.sim.control import JointController, heading_offset

    model = PlanarSnakeModel(scn.params, "head")
    acc = literal_head_model(scn.params)
    ctrl = JointController(scn.controller, model.n_joints)
    target = np.asarray(scn.targets[0])
    nq, k, n = model.n_q, model.n_joints, model.n_links
    count = [0]

    def rhs(t, y):
        q, qd = y[:nq], y[nq:]
        off = heading_offset(model.H @ q[:n], q[-2:], target, scn.controller.k_theta, scn.controller.offset_limit_rad)
        count[0] += 1
        return np.concatenate([qd, acc(q, qd, ctrl.command(t, q[:k], qd[:k], off))])

    y0 = np.zeros(2 * nq)
    w0 = time.perf_counter()
    solve_ivp(rhs, (0, t_end), y0, method=scn.method, rtol=scn.rtol, atol=scn.atol)
    return time.perf_counter() - w0, count[0]


def per_call_us(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--sim-s", type=float, default=300.0, help="simulated span of the fast run [s]")
    ap.add_argument("--ref-sim-s", type=float, default=60.0, help="simulated span of the literal reference [s]")


def run(args: argparse.Namespace) -> dict:
    from snaketrack.models.planar_dynamics import PlanarSnakeModel  # deferred: bench --list imports none
    from snaketrack.sim.control import ControllerConfig
    from snaketrack.sim.planar import PlanarScenario, simulate

    # the corrected variant: the literal reference transcribes the printed equations (head mass m, straight start)
    scn = PlanarScenario(track="head", variant="corrected", controller=ControllerConfig(coupling="sjc"),
                         t_end_s=args.sim_s)
    res = simulate(scn)
    fast_x = res.t_final_s / res.wall_s

    ref_scn = PlanarScenario(track="head", variant="corrected", controller=ControllerConfig(coupling="sjc"),
                             t_end_s=args.ref_sim_s)
    # the fast model over the same span as the reference, first target only (no event switch in either)
    fast_short = simulate(PlanarScenario(track="head", variant="corrected", t_end_s=args.ref_sim_s,
                                         targets=(scn.targets[0],), reach_tolerance_m=1e-9))
    ref_wall, ref_n = run_literal(ref_scn, args.ref_sim_s)
    ref_x = args.ref_sim_s / ref_wall
    fast_short_x = fast_short.t_final_s / fast_short.wall_s

    rng = np.random.default_rng(0)
    model = PlanarSnakeModel(scn.params, "head")
    acc = literal_head_model(scn.params)
    q, qd, u = rng.normal(size=12) * 0.5, rng.normal(size=12) * 0.5, rng.normal(size=9)
    diff = float(np.abs(model.accelerations(q, qd, joint_acc=u) - acc(q, qd, u)).max())
    fast_us = per_call_us(lambda: model.accelerations(q, qd, joint_acc=u), 3000)
    ref_us = per_call_us(lambda: acc(q, qd, u), 300)
    Q = rng.normal(size=(256, 12))
    U = rng.normal(size=(256, 9))
    batch_us = per_call_us(lambda: model.accelerations(Q, Q, joint_acc=U), 50) / 256

    out = {
        "scenario": scn.name,
        "solver": f"{scn.method} rtol={scn.rtol} atol={scn.atol}",
        "sim_span_s": res.t_final_s,
        "wall_s": res.wall_s,
        "sim_per_wall_x": fast_x,
        "sim_per_wall_same_span_x": fast_short_x,
        "ref_literal_sim_per_wall_x": ref_x,
        "speedup_vs_literal_x": fast_short_x / ref_x,
        "rhs_evals": res.n_rhs,
        "accel_us": fast_us,
        "ref_literal_accel_us": ref_us,
        "accel_batched_per_state_us": batch_us,
        "max_accel_diff_vs_literal": diff,
        "reach_times_s": res.reach_times_s,
    }
    return out


BENCHMARK = Benchmark("dynamics", "speed of the planar snake simulation: simulated seconds per wall-clock second",
                      add_arguments, run, quick={"sim_s": 5.0, "ref_sim_s": 1.0})
