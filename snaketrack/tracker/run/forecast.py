"""A tracked state carried forward in time: latency compensation.

A state describes the robot when its frame was captured; a controller uses it later (the frame's
tracking, publishing and delivery take time). :func:`forecast` carries a state forward by ``dt``
seconds with the tracker's own motion model, the mean of the Kalman filter's constant-velocity prediction
step (``F = cv_transition(D, dt)`` of :mod:`snaketrack.tracker.filter`)::

    s(t + dt) = s(t) + dt·ṡ(t)

on the pose vector ``s`` (joint angles, base rotation vector, base translation) and its rate ``ṡ``,
the head point following by forward kinematics. The service publishes each state with its forecast
to the moment it is published (``predicted_*`` fields of ``/snake/state``, docs/service.md).
``snaketrack bench forecast`` measures the forecast's error against a synthetic clip's truth.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from snaketrack.models.kinematics import forward_kinematics
from snaketrack.tracker.state import StateLayout, TrackState


def predicted_pose(s: np.ndarray, velocity: np.ndarray, dt: float) -> np.ndarray:
    """The pose vector (D,) predicted ``dt`` [s] ahead of pose ``s`` (D,) moving at ``velocity`` (D,): the
    filter's constant-velocity step (module doc); ``dt`` ≥ 0."""
    return np.asarray(s, float).reshape(-1) + float(dt) * np.asarray(velocity, float).reshape(-1)


def forecast(state: TrackState, robot, dt: float, layout: Optional[StateLayout] = None) -> Optional[TrackState]:
    """``state`` carried ``dt`` [s] forward (module doc): a :class:`TrackState` at time ``state.t + dt`` with
    the predicted joints, base and head, the same status, IoU and rate. None when the state has no pose or
    no rate (before the track starts). ``layout``: the pose vector's (default the robot's)."""
    if not state.has_pose or state.velocity is None:
        return None

    layout = layout or StateLayout.for_robot(robot)
    s = predicted_pose(state.pose_vector(layout), state.velocity, dt)
    q, R0, t0 = layout.to_fk(torch.as_tensor(s)[None])
    head = forward_kinematics(robot, q, R0, t0).head[0].numpy()
    return TrackState.from_pose_vector(layout, s, head, state.frame, state.t + float(dt), cov_trace=state.cov_trace,
                                       iou=state.iou, status=state.status, velocity=state.velocity,
                                       loss=state.loss)
