"""States to Jacobians: the estimators, their registry and their inputs.

- :class:`JacobianEstimator`: ``reset()``, ``step(phidot, rdot) -> jacobian`` (see docs/estimation.md).
- :data:`ESTIMATORS` / :func:`make_estimator`: the UKF, CO and KF estimators by name.
- :func:`read_states`: joint and head velocities from ``states.csv``, ``track.csv`` or JSON lines.
- :func:`run_estimate`: one estimator along a recorded states file, written to an output folder.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "JacobianEstimator": "base", "ESTIMATORS": "registry", "make_estimator": "registry",
    "COEstimator": "co", "UKFEstimator": "ukf", "KalmanJacobianEstimator": "kf",
    "read_states": "states", "run_estimator": "metrics", "run_estimate": "estimate",
})
