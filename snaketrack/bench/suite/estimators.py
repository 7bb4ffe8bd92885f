"""Per-step time of the Jacobian estimators beside their references, in one process.

- CO: the closed form (COEstimator.update) vs cvxpy solving problem (5)
  (CvxpyCO, parametrised: built once, re-solved each step; and rebuilt each
  step, as a plain implementation would).
- Kalman: the exact KF (KalmanJacobianEstimator.update, one estimator) vs
  filterpy's UnscentedKalmanFilter (predict + update, set up directly).
- kf_batch1000_ms: one update of 1000 estimators at once (batch=1000).

Data: the synthetic gait of snaketrack.estimation.synthetic, 10 joints (the
paper's 11-link robot). Each figure is the best of ``--repeats`` blocks of
the mean per-step time (best-of-N, as timeit recommends: the machine is shared).
The paper measured 16.32 ms (cvxpy CO) and 1.25 ms (filterpy UKF) per step.
Prints a summary on stderr.

    snaketrack bench estimators [--steps 2000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from snaketrack.bench.registry import Benchmark


def per_step(fn, n: int, repeats: int) -> float:
    """Best over ``repeats`` of the mean time [s] of fn(i) for i in range(n)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--steps", type=int, default=2000, help="steps per block for the fast estimators")
    ap.add_argument("--slow-steps", type=int, default=200, help="steps per block for cvxpy and filterpy")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--joints", type=int, default=10)


def run(args: argparse.Namespace) -> dict:
    from filterpy.kalman import MerweScaledSigmaPoints, UnscentedKalmanFilter

    from snaketrack.estimation.co import COEstimator, CvxpyCO
    from snaketrack.estimation.kf import KalmanJacobianEstimator, KFConfig
    from snaketrack.estimation.synthetic import synthetic_trajectory


    J = args.joints
    s = synthetic_trajectory(duration=max(args.steps, args.slow_steps) / 240 + 0.1, dt=1 / 240, n_joints=J, seed=0)
    P, R = s.phidot, s.head_vxy
    cfg = KFConfig()

    co = COEstimator(J)
    co_s = per_step(lambda i: co.update(P[i], R[i]), args.steps, args.repeats)

    cvx = CvxpyCO(J)
    Jc = np.zeros((2, J))

    def cvx_step(i):
        nonlocal Jc
        Jc = cvx.solve(Jc, P[i], R[i])

    cvx_step(0)  # first solve compiles the problem
    cvx_s = per_step(cvx_step, args.slow_steps, args.repeats)
    cvx_rebuilt = CvxpyCO(J, parametrised=False)
    Jr = np.zeros((2, J))

    def cvx_rebuilt_step(i):
        nonlocal Jr
        Jr = cvx_rebuilt.solve(Jr, P[i], R[i])

    cvx_rebuilt_s = per_step(cvx_rebuilt_step, max(20, args.slow_steps // 4), max(1, args.repeats // 2))

    kf = KalmanJacobianEstimator(J, cfg)
    kf_s = per_step(lambda i: kf.update(P[i], R[i]), args.steps, args.repeats)

    pts = MerweScaledSigmaPoints(2 * J, alpha=1.0, beta=2.0, kappa=0.0)
    ukf = UnscentedKalmanFilter(2 * J, 2, 1.0, hx=lambda x, phidot: x.reshape(2, J) @ phidot,
                                fx=lambda x, dt: x, points=pts)
    ukf.Q, ukf.R, ukf.P = kf.Q.copy(), kf.R.copy(), np.eye(2 * J)

    def ukf_step(i):
        ukf.predict()
        ukf.update(R[i], phidot=P[i])

    ukf_s = per_step(ukf_step, args.slow_steps, args.repeats)

    B = 1000
    kfb = KalmanJacobianEstimator(J, cfg, batch=B)
    rng = np.random.default_rng(0)
    PB = P[:50, None, :] * rng.uniform(0.5, 1.5, (1, B, 1))
    RB = R[:50, None, :] * rng.uniform(0.5, 1.5, (1, B, 1))
    batch_s = per_step(lambda i: kfb.update(PB[i % 50], RB[i % 50]), 50, args.repeats)

    out = {
        "co_closed_form_us": co_s * 1e6,
        "co_cvxpy_us": cvx_s * 1e6,
        "co_speedup_x": cvx_s / co_s,
        "kf_us": kf_s * 1e6,
        "ukf_filterpy_us": ukf_s * 1e6,
        "kf_speedup_x": ukf_s / kf_s,
        "kf_batch1000_ms": batch_s * 1e3,
        "kf_batch1000_per_estimator_us": batch_s / B * 1e6,
        "co_cvxpy_rebuilt_us": cvx_rebuilt_s * 1e6,
        "co_rebuilt_speedup_x": cvx_rebuilt_s / co_s,
        "paper_co_cvxpy_ms": 16.32,
        "paper_ukf_ms": 1.25,
        "joints": J,
    }
    print(f"CO closed form {out['co_closed_form_us']:.2f} us/step vs cvxpy {out['co_cvxpy_us']:.0f} us "
          f"(rebuilt {out['co_cvxpy_rebuilt_us']:.0f} us): {out['co_speedup_x']:.0f}x (target >= 100x)",
          file=sys.stderr)
    print(f"exact KF {out['kf_us']:.1f} us/step vs filterpy UKF {out['ukf_filterpy_us']:.0f} us: "
          f"{out['kf_speedup_x']:.1f}x (target >= 10x); 1000 at once {out['kf_batch1000_ms']:.2f} ms",
          file=sys.stderr)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


BENCHMARK = Benchmark("estimators", "per-step time of the Jacobian estimators beside their references, in one process",
                      add_arguments, run, quick={"steps": 50, "slow_steps": 10, "repeats": 1})
