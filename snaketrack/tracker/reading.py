"""Which end is the head: the direction of the body wave, and the chain read the other way.

A silhouette barely tells a snake's head from its tail (the head cap and a
slight taper are the only cues), so a search can return the chain read
backwards: base at the head, ``q' ≈ −reverse(q)``, an error of a body
length. Motion tells them apart. A snake crawling forward by lateral
undulation sends its body wave from the head to the tail (the simulator's
gait, ``snaketrack.sim.gait``: joint k's phase is ``ωt + δk`` with δ > 0,
joints counted from the tail; so does any serpentine gait that pushes
forward). Read backwards, the same motion shows a wave running from the
tracked tail to the tracked head.

:func:`wave_direction` measures it from a window of tracked joint angles:
``S = Σ_lag [C(lag) − C(−lag)] / norm`` with
``C(lag) = Σ_t Σ_k q_k(t) q_{k+1}(t − lag)`` over the yaw joints: joint
k repeats what joint k+1 did ``lag`` frames earlier when the wave runs
towards the tail, so ``S > 0`` is the forward reading and ``S < 0`` the
backward one (reading the chain backwards maps ``C(lag)`` to ``C(−lag)``).
The assumption — the robot crawls forward with a travelling wave — is the
tracker's to use or not (``TrackerConfig.wave_check``); a robot backing up
or standing still gives a small or wrong-signed S.

:func:`flip_pose` turns a pose vector (and :func:`reverse_joints` the joint
angles alone) into the same body read from the other end (exact for single-axis joints and equal links; for multi-axis
joints the reversed axis order is approximated, and the tracker refines
the result).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np
import torch

from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.robot import Robot


def yaw_indices(robot: Robot) -> list[int]:
    """Joint-coordinate indices of each joint's first ``z`` axis (the yaw joints that undulate)."""
    out, k = [], 0
    for joint in robot.joints:
        for j, ax in enumerate(joint.axes):
            if ax == "z" and not any(a == "z" for a in joint.axes[:j]):
                out.append(k)
            k += 1
    return out


def wave_direction(q: np.ndarray, max_lag: int = 8) -> float:
    """Travelling-wave statistic S in [−1, 1] of joint angles ``q`` (T, J) [rad], joints tail to head.

    Positive: the wave runs from the head to the tail (a forward crawl read
    the right way round); negative: the other way. Each joint's mean over the
    window is removed first.

    >>> t = np.arange(60)[:, None] / 30.0; k = np.arange(6)[None]
    >>> wave_direction(np.sin(4 * t + np.pi / 3 * k)) > 0.5
    True
    >>> wave_direction(-np.sin(4 * t + np.pi / 3 * k)[:, ::-1]) < -0.5
    True
    """
    q = np.asarray(q, float)
    if q.ndim != 2 or q.shape[1] < 2 or q.shape[0] < 2 * max_lag + 2:
        return 0.0
    q = q - q.mean(axis=0, keepdims=True)
    a, b = q[:, :-1], q[:, 1:]  # joint k and joint k+1
    diff, norm = 0.0, 0.0
    for lag in range(1, max_lag + 1):
        fwd = float((a[lag:] * b[:-lag]).sum())  # q_k(t) q_{k+1}(t − lag)
        bwd = float((b[lag:] * a[:-lag]).sum())  # q_{k+1}(t) q_k(t − lag)
        diff += fwd - bwd
        norm += abs(fwd) + abs(bwd)
    return diff / norm if norm > 0 else 0.0


def reverse_joints(robot: Robot, q: np.ndarray) -> np.ndarray:
    """Joint coordinates (J,) of the same body read from the other end: joints in reverse order, each
    joint's ``z`` (yaw) angle negated, its other axes kept (exact for single-axis joints).

    >>> from snaketrack.models.robot import load_robot
    >>> reverse_joints(load_robot("planar-snake-11"), np.arange(10.0)).tolist()[:3]
    [-9.0, -8.0, -7.0]
    """
    q = np.asarray(q, float)
    blocks, k = [], 0
    for joint in robot.joints:
        vals = q[k:k + len(joint.axes)]
        blocks.append([(-v if ax == "z" else v) for ax, v in zip(joint.axes, vals)])
        k += len(joint.axes)
    return np.array([v for blk in reversed(blocks) for v in blk])


def flip_pose(robot: Robot, layout, x: np.ndarray) -> np.ndarray:
    """The pose vector (D,) of the same body read from the other end (module doc).

    New base: the head end of the last link's axis, x axis reversed (turned
    by π about its z); joints as :func:`reverse_joints` gives them.
    """
    x = np.asarray(x, float)
    q, R0, t0 = layout.to_fk(torch.as_tensor(x)[None])
    pose = forward_kinematics(robot, q, R0, t0)
    Rn = pose.rotations[0, -1].numpy()
    end = pose.ends[0, -1].numpy()
    Rz_pi = np.diag([-1.0, -1.0, 1.0])
    q_new = np.clip(reverse_joints(robot, x[layout.q]), robot.lower, robot.upper)
    return layout.pack(q_new, Rn @ Rz_pi, end, reference=x)


@dataclass(frozen=True)
class HeldFrame:
    """A frame the reading hold keeps: its state, the mask (H, W) and up direction (3,) or None it was tracked
    with, the caller's ``payload`` and the camera's height ratio over the ground (or None)."""

    state: Any
    mask: Any
    up: Any = None
    payload: Any = None
    ground: Optional[float] = None


class ReadingHold:
    """Holds a track's first frames until its reading of head and tail is settled.

    For a consumer that can wait a second (offline tracking: ``snaketrack
    track``). A track started read backwards is turned round by the tracker
    once a full ``wave_window`` of frames shows the body wave; the frames
    before that would stay a body length off. Pushed frames are held while
    ``tracker.reading_settled`` is False; when the tracker turns the track
    round (``tracker.flips`` grows) the held states are read from the other
    end (:meth:`Tracker.reread <snaketrack.tracker.tracker.Tracker.reread>`)
    before they are released. After ``max_hold`` held frames, or when the
    reading settles, everything held is released and later frames pass at once;
    with ``TrackerConfig.hold_backward`` the held frames are first refined again
    from the last back to the first (:meth:`Tracker.refine_back
    <snaketrack.tracker.tracker.Tracker.refine_back>`).

    ``push(state, mask, up=None, payload=None, ground=None)`` returns the released
    ``(state, payload)`` pairs in frame order; ``flush()`` releases the rest
    (call it at the end of the input, and before writing what an interruption
    would otherwise lose).
    """

    def __init__(self, tracker, max_hold: int = 60):
        if max_hold < 0:
            raise ValueError(f"max_hold = {max_hold}; expected >= 0 frames")
        self.tracker, self.max_hold = tracker, int(max_hold)
        self.held: list[HeldFrame] = []
        # once open, frames pass through; a tracker that keeps no reading (a stand-in) has nothing to wait for
        self.open = max_hold == 0 or not hasattr(tracker, "reading_settled")
        self.flips = getattr(tracker, "flips", 0)
        self.reread_frames = 0

    def push(self, state, mask, up=None, payload=None, ground=None) -> list[tuple]:
        if self.open:
            return [(state, payload)]
        if self.tracker.flips != self.flips:
            self.flips = self.tracker.flips
            # turned round: the held frames were read backwards too
            self.held = [replace(h, state=self.tracker.reread(h.state, h.mask, h.up, ground=h.ground))
                         for h in self.held]
            self.reread_frames += len(self.held)
        self.held.append(HeldFrame(state, mask, up, payload, ground))
        if self.tracker.reading_settled or len(self.held) >= self.max_hold:
            if getattr(getattr(self.tracker, "config", None), "hold_backward", False):
                self._backward()
            return self.flush()
        return []

    def _backward(self) -> None:
        """Refine the held frames again from the last one back to the first (``TrackerConfig.hold_backward``)."""
        layout = self.tracker.layout
        for k in range(len(self.held) - 2, -1, -1):
            h, nxt = self.held[k], self.held[k + 1].state
            if nxt.status != "tracked":
                continue
            self.held[k] = replace(h, state=self.tracker.refine_back(h.state, nxt.pose_vector(layout), h.mask, h.up,
                                                                      ground=h.ground))

    def flush(self) -> list[tuple]:
        """Release everything held; later frames pass at once."""
        out = [(h.state, h.payload) for h in self.held]
        self.held = []
        self.open = True
        return out
