"""Follow-the-leader prediction of the yaw joints: a hidden tail keeps repeating the visible body's wave.

A snake crawling by lateral undulation sends its body wave from the head to the tail: joint k does what
joint k+1 (counted from the tail) did ``τ`` frames earlier, ``q_k(t) = q_{k+1}(t − τ)`` (the simulator's
gait has joint k's phase ``ωt + δk``, so ``τ = δ / ω``; :mod:`snaketrack.tracker.reading` uses the same
wave to tell the head from the tail). A constant-velocity prediction of a joint that a leg or a shoe hides
for tens of frames runs off within a quarter period; the same joint predicted from its leader's track
follows the wave for as long as the leader is seen.

:func:`wave_lag` fits ``τ`` (fractional, linear interpolation between frames) to a window of tracked yaw
angles and says how much of their variance the wave leaves unexplained; :class:`WaveFollow` keeps that
window and, while the fit explains the window (relative residual at most ``max_residual``, the best lag
inside the range fitted), replaces the
prediction of every yaw joint but the leading one by its leader's angle ``τ`` frames back. A robot that
stands still, turns on the spot or backs up does not fit the wave and keeps the constant-velocity
prediction.

>>> t = np.arange(40.0)[:, None]; k = np.arange(5.0)[None]
>>> lag, rel = wave_lag(np.sin(0.2 * t + 1.0 * k), max_lag=10)   # τ = δ / ω = 1.0 / 0.2 = 5 frames
>>> round(lag, 2), rel < 1e-3
(5.0, True)
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from snaketrack.errors import InputError
from snaketrack.tracker.reading import yaw_indices


def _lagged(q: np.ndarray, lag: float) -> tuple[np.ndarray, np.ndarray]:
    """(leaders, followers): ``q[t, k + 1]`` at frame ``t − lag`` (linear interpolation) against ``q[t, k]``,
    for the frames ``t ≥ lag`` of ``q`` (T, J)."""
    T = len(q)
    t = np.arange(int(np.ceil(lag)), T, dtype=float)
    s = t - lag
    i0 = np.floor(s).astype(int)
    f = (s - i0)[:, None]
    i1 = np.minimum(i0 + 1, T - 1)
    lead = (1 - f) * q[i0, 1:] + f * q[i1, 1:]
    return lead, q[t.astype(int), :-1]


def wave_lag(q: np.ndarray, max_lag: float = 15.0, resolution: float = 0.25,
             min_overlap: int = 8) -> tuple[float, float]:
    """The wave's lag ``τ`` [frames] and its relative residual for yaw angles ``q`` (T, J) [rad], joints from
    the tail to the head, consecutive frames.

    ``τ`` minimises the mean square of ``q_k(t) − q_{k+1}(t − τ)`` over ``τ`` in [1, ``max_lag``] on a grid of
    ``resolution`` frames (each lag over the frames where the leader's value ``τ`` back is known, at least
    ``min_overlap`` of them); the relative residual is that minimum over the followers' variance about their
    means in the window (0: a perfect wave, about 2 or more: none). (nan, inf) when ``q`` is too short or
    has fewer than two joints.
    """
    q = np.asarray(q, float)
    if q.ndim != 2:
        raise InputError(f"wave_lag: joint angles of shape {q.shape}; expected (T, J)")
    if q.shape[1] < 2 or len(q) < 1 + min_overlap:
        return float("nan"), float("inf")
    best, best_lag = np.inf, float("nan")
    for lag in np.arange(1.0, float(max_lag) + 1e-9, resolution):
        if len(q) - np.ceil(lag) < min_overlap:
            break
        lead, follow = _lagged(q, lag)
        r = float(np.mean((follow - lead) ** 2))
        if r < best:
            best, best_lag = r, float(lag)
    if not np.isfinite(best):
        return float("nan"), float("inf")
    follow = q[:, :-1]
    var = float(np.mean((follow - follow.mean(axis=0)) ** 2))
    return best_lag, best / var if var > 0 else float("inf")


def follow_prediction(q: np.ndarray, lag: float) -> np.ndarray:
    """Joints 0 … J−2's angles (J−1,) at the frame after ``q`` (T, J)'s last: each its leader's ``lag`` frames
    before (``q_k(T) = q_{k+1}(T − lag)``, linear interpolation; ``lag`` in [1, T])."""
    q = np.asarray(q, float)
    T = len(q)
    if not 1.0 <= lag <= T:
        raise InputError(f"follow_prediction: lag {lag!r} outside [1, {T}] frames")
    s = T - lag
    i0 = int(np.floor(s))
    f = s - i0
    i1 = min(i0 + 1, T - 1)
    return (1 - f) * q[i0, 1:] + f * q[i1, 1:]


class WaveFollow:
    """The window of tracked yaw angles and the follow-the-leader prediction from it (module doc).

    indices: the yaw joints' indices in the joint vector, tail to head; window: frames kept; max_lag: the
    largest lag fitted [frames]; max_residual: the largest relative residual (:func:`wave_lag`) at which
    the prediction is used; min_frames: frames needed before it is.

    ``add(q)`` each frame (the frame's joint vector (J,)), ``reset()`` when the track is restarted or
    turned round, ``predict(q_pred)``: the joint vector (J,) with the followers' predictions put in, or
    ``q_pred`` itself while the wave does not hold. ``lag``, ``residual``: the last fit's.
    """

    def __init__(self, indices: Sequence[int], window: int = 40, max_lag: float = 15.0,
                 max_residual: float = 0.1, min_frames: int = 24):
        if window < 2 or max_lag < 1 or min_frames < 2:
            raise InputError(f"wave follow: window {window!r}, max_lag {max_lag!r}, min_frames {min_frames!r}; "
                             "expected at least 2, 1 and 2")
        self.indices = np.asarray(list(indices), int)
        self.window, self.max_lag = int(window), float(max_lag)
        self.max_residual, self.min_frames = float(max_residual), int(min_frames)
        self.reset()

    def reset(self) -> None:
        self.hist: list[np.ndarray] = []
        self.lag, self.residual = float("nan"), float("inf")

    def add(self, q: np.ndarray) -> None:
        self.hist = (self.hist + [np.asarray(q, float)[self.indices]])[-self.window:]

    def predict(self, q_pred: np.ndarray) -> np.ndarray:
        q_pred = np.asarray(q_pred, float)
        self.lag, self.residual = float("nan"), float("inf")
        if len(self.indices) < 2 or len(self.hist) < self.min_frames:
            return q_pred
        h = np.array(self.hist)
        max_lag = min(self.max_lag, len(h) - 8.0)
        self.lag, self.residual = wave_lag(h, max_lag)
        # a best lag on the bound of the range fitted is no wave's: a standing wave, one running
        # from the tail to the head (backing up, or the chain read backwards), or one slower than the window
        if not (self.residual <= self.max_residual and 1.0 < self.lag < max_lag):
            return q_pred
        out = q_pred.copy()
        out[self.indices[:-1]] = follow_prediction(h, self.lag)
        return out


def wave_follow_for(robot, config) -> Optional[WaveFollow]:
    """The :class:`WaveFollow` of ``robot``'s yaw joints with ``config``'s (a ``TrackerConfig``) settings, or
    None when ``config.wave_follow`` is off or the robot has fewer than two yaw joints."""
    idx = yaw_indices(robot)
    if not config.wave_follow or len(idx) < 2:
        return None
    return WaveFollow(idx, config.wave_follow_window, config.wave_follow_max_lag,
                      config.wave_follow_max_residual, config.wave_follow_min_frames)
