"""The paper's prediction metric and the recovery time after a halt.

Metric (Løwer, Varagnolo and Stavdahl, Sec. 6): after fusing step n, predict the next head velocity
from the next joint speeds, ṙ̂_{n+1} = Ĵ_n φ̇_{n+1}, and compare it with the
true ṙ_{n+1}; report the mean squared error per component over the run.

>>> import numpy as np
>>> from snaketrack.estimation.co import COEstimator
>>> phidot = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]); Jt = np.array([[1.0, 2.0], [0.5, -1.0]])
>>> run = run_estimator(COEstimator(2), phidot, phidot @ Jt.T)
>>> run.prediction.shape, bool(np.isnan(run.prediction[0]).all())
((3, 2), True)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator


@dataclass(frozen=True)
class EstimatorRun:
    """One estimator run over a sequence of T steps with J joints.

    prediction: (T, 2) ṙ̂_n = Ĵ_{n−1} φ̇_n [m/s]; row 0 is NaN (no estimate yet).
    jacobian: (T, 2, J) Ĵ_n after fusing step n [m/rad].
    step_s: (T,) wall time of each step [s] (for the timing figure; not a test figure).
    name: the estimator's name.
    """

    prediction: np.ndarray
    jacobian: np.ndarray
    step_s: np.ndarray
    name: str


def run_estimator(estimator: JacobianEstimator, phidot: np.ndarray, rdot: np.ndarray) -> EstimatorRun:
    """Run ``estimator`` (predict, then step) over φ̇ (T, J) [rad/s] and measured ṙ (T, 2) [m/s]."""
    phidot = np.asarray(phidot, dtype=float)
    rdot = np.asarray(rdot, dtype=float)
    if phidot.ndim != 2 or rdot.shape != (phidot.shape[0], 2):
        raise InputError(f"phidot {phidot.shape} and rdot {rdot.shape}; expected (T, J) and (T, 2)")
    T, J = phidot.shape
    pred = np.full((T, 2), np.nan)
    jac = np.empty((T, 2, J))
    step = np.empty(T)
    clock = time.perf_counter
    for n in range(T):
        if n > 0:
            pred[n] = estimator.predict(phidot[n])   # ṙ̂_n = Ĵ_{n-1} φ̇_n
        t0 = clock()
        J_n = estimator.step(phidot[n], rdot[n])
        step[n] = clock() - t0
        jac[n] = J_n
    return EstimatorRun(prediction=pred, jacobian=jac, step_s=step, name=estimator.name)


def mse(prediction: np.ndarray, truth: np.ndarray, mask: Optional[np.ndarray] = None) -> dict[str, float]:
    """Mean squared error per component, ``{"mse_x": …, "mse_y": …}`` [(m/s)²].

    prediction, truth: (T, 2); rows where the prediction is NaN (row 0) are
    skipped, and so are rows where ``mask`` (T,) bool is False.
    """
    prediction = np.asarray(prediction, dtype=float)
    truth = np.asarray(truth, dtype=float)
    if prediction.shape != truth.shape or prediction.ndim != 2 or prediction.shape[1] != 2:
        raise InputError(f"prediction {prediction.shape} and truth {truth.shape}; expected two (T, 2) arrays")
    keep = np.all(np.isfinite(prediction), axis=1)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    if not keep.any():
        raise InputError("mse: no step with a finite prediction to score")
    e2 = (prediction[keep] - truth[keep]) ** 2
    return {"mse_x": float(e2[:, 0].mean()), "mse_y": float(e2[:, 1].mean())}


def moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` samples (T,) → (T,); the first samples average what exists."""
    x = np.asarray(x, dtype=float)
    window = max(1, int(window))
    c = np.concatenate([[0.0], np.cumsum(x)])
    n = np.arange(1, x.size + 1)
    lo = np.maximum(0, n - window)
    return (c[n] - c[lo]) / (n - lo)


def recovery_time(t: np.ndarray, sq_error: np.ndarray, halt: tuple[float, float], window_s: float = 0.1,
                  factor: float = 1.5, hold_s: float = 0.3, pre_start_s: float = 1.0) -> Optional[float]:
    """Seconds after resuming until the error is back to its pre-halt level; None if never.

    t: (T,) [s]; sq_error: (T,) squared prediction error ‖ṙ̂ − ṙ‖² [(m/s)²]
    (NaN rows ignored); halt: (t_stop, t_resume) [s].
    Pre-halt level: mean of ``sq_error`` over [pre_start_s, t_stop).
    Recovered at the first t ≥ t_resume from which the ``window_s`` trailing
    moving average stays under ``factor`` × that level for at least ``hold_s``
    (obstacle hits alone cross a 1.5× line briefly 15–19 % of the time in the
    obstacle world, so a single crossing would be noise).
    """
    t = np.asarray(t, dtype=float)
    e = np.nan_to_num(np.asarray(sq_error, dtype=float), nan=0.0)
    t_stop, t_resume = float(halt[0]), float(halt[1])
    dt = float(np.median(np.diff(t)))
    pre = (t >= pre_start_s) & (t < t_stop) & np.isfinite(np.asarray(sq_error, dtype=float))
    if not pre.any():
        raise InputError(f"recovery_time: no samples in the pre-halt window [{pre_start_s}, {t_stop}) s")
    level = factor * float(np.mean(e[pre]))
    ma = moving_average(e, int(round(window_s / dt)))
    below = ma < level
    hold = max(1, int(round(hold_s / dt)))
    idx = np.flatnonzero(t >= t_resume)
    # run length of consecutive "below" samples starting at each index (computed backwards)
    run = np.zeros(t.size + 1, dtype=int)
    for i in range(t.size - 1, -1, -1):
        run[i] = run[i + 1] + 1 if below[i] else 0
    for i in idx:
        if run[i] >= hold:
            return float(t[i] - t_resume)
    return None
