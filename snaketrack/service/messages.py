"""What the service publishes for each tracked frame, topic by topic.

========================  ===========================================  ==============================
topic                     message                                      frame
========================  ===========================================  ==============================
``/snake/state``          JSON: ``track.csv``'s row, joint rates,      camera
                          ``capture_time``, ``publish_time`` (the
                          stream :class:`~snaketrack.service.client.StateClient` reads)
``/snake/joint_states``   JSON with the fields of ROS 2                —
                          ``sensor_msgs/JointState``
``/snake/base_pose``      ``foxglove.PoseInFrame``                     ``camera``
``/snake/head_pose``      ``foxglove.PoseInFrame``                     ``camera``
``/snake/ground/*_pose``  ``foxglove.PoseInFrame`` (up known)          ``ground``
``/tf``                   ``foxglove.FrameTransforms``: camera → base  —
                          → link_2 … link_L (and ground → camera)
``/camera/overlay``       ``foxglove.CompressedImage`` (JPEG)          ``camera``
``/snake/status``         JSON: tracking/coasting/lost, IoU, drops,    —
                          latency
========================  ===========================================  ==============================

Frames: ``camera`` is the optical frame (OpenCV: x right, y down, z forward,
metres). ``ground`` is gravity-aligned at the camera's centre: z up, x the
optical axis projected on the horizontal plane. Stamps are the frame's
capture time (wall clock).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

STATE = "/snake/state"
JOINT_STATES = "/snake/joint_states"
BASE_POSE = "/snake/base_pose"
HEAD_POSE = "/snake/head_pose"
GROUND_BASE_POSE = "/snake/ground/base_pose"
GROUND_HEAD_POSE = "/snake/ground/head_pose"
TF = "/tf"
OVERLAY = "/camera/overlay"
STATUS = "/snake/status"

CAMERA_FRAME = "camera"
GROUND_FRAME = "ground"
BASE_FRAME = "base"

#: The JSON schema of ``/snake/joint_states``: ROS 2 ``sensor_msgs/JointState``'s fields.
JOINT_STATE_SCHEMA = {
    "title": "sensor_msgs/JointState",
    "type": "object",
    "properties": {
        "header": {"type": "object", "properties": {
            "stamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nanosec": {"type": "integer"}}},
            "frame_id": {"type": "string"}}},
        "name": {"type": "array", "items": {"type": "string"}},
        "position": {"type": "array", "items": {"type": "number"}},
        "velocity": {"type": "array", "items": {"type": "number"}},
        "effort": {"type": "array", "items": {"type": "number"}},
    },
}

#: The JSON schema of ``/snake/status``.
STATUS_SCHEMA = {
    "title": "snaketrack.Status",
    "type": "object",
    "properties": {
        "state": {"type": "string", "description": "tracking, coasting, lost, waiting, reconnecting or ended"},
        "source": {"type": "string", "description": "live, reconnecting or ended"},
        "frame": {"type": "integer"},
        "iou": {"type": "number"},
        "frames_captured": {"type": "integer"},
        "frames_tracked": {"type": "integer"},
        "frames_dropped": {"type": "integer"},
        "reconnects": {"type": "integer"},
        "latency_ms": {"type": "number", "description": "capture to publish of the last frame [ms]"},
        "error": {"type": "string"},
    },
}

#: The JSON schema of ``/snake/state`` (the columns of ``track.csv`` and a few more).
STATE_SCHEMA = {
    "title": "snaketrack.State",
    "type": "object",
    "properties": {
        "frame": {"type": "integer"}, "t": {"type": "number"}, "status": {"type": "string"},
        "capture_time": {"type": "number"}, "publish_time": {"type": "number"},
        "reading_settled": {"type": "boolean", "description": "which end is the head is settled"},
        "predicted_time": {"type": "number",
                           "description": "the time the predicted_* fields hold for: the publish time [s since "
                                          "the epoch]"},
        "predicted_dt": {"type": "number",
                         "description": "predicted_time - capture_time [s]: how far the state was carried forward"},
    },
    "patternProperties": {
        "^predicted_q_[0-9]+$": {"type": "number", "description": "joint angle at predicted_time [rad]"},
        "^predicted_base_[xyz]$": {"type": "number", "description": "base position at predicted_time [m]"},
        "^predicted_base_q[wxyz]$": {"type": "number", "description": "base orientation at predicted_time"},
        "^predicted_head_[xyz]$": {"type": "number", "description": "head point at predicted_time [m]"},
    },
    "additionalProperties": True,
}


def joint_names(n_joints: int) -> list[str]:
    """``joint_1 … joint_J``, tail to head (the order of ``q_1 … q_J``)."""
    return [f"joint_{k + 1}" for k in range(n_joints)]


def stamp(t: float) -> dict[str, int]:
    """A ROS stamp ``{sec, nanosec}`` of a wall-clock time [s]."""
    ns = int(round(t * 1e9))
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _finite(v: float) -> Optional[float]:
    v = float(v)
    return v if math.isfinite(v) else None


def joint_state_message(state, capture_time: float) -> dict[str, Any]:
    """``/snake/joint_states`` of a :class:`~snaketrack.tracker.state.TrackState`: positions [rad],
    velocities [rad/s] (empty when the state has no rate), stamped with the capture time [s]."""
    q = np.asarray(state.q, float)
    velocity = [] if state.velocity is None else [float(v) for v in np.asarray(state.velocity)[:q.size]]
    return {"header": {"stamp": stamp(capture_time), "frame_id": CAMERA_FRAME},
            "name": joint_names(q.size), "position": [float(v) for v in q], "velocity": velocity, "effort": []}


def state_message(row: dict, state, capture_time: float, publish_time: float,
                  reading_settled: bool = True, predicted=None) -> dict[str, Any]:
    """``/snake/state``: the ``track.csv`` row (NaN as null), ``qdot_1 … qdot_J`` [rad/s] when known,
    the capture and publish times [s since the epoch], and ``reading_settled``: False while the body
    wave has not yet shown which end is the head (the track may still turn round; a controller waits).
    ``predicted``: the state carried forward to the publish time
    (:func:`~snaketrack.tracker.run.forecast.forecast`), as ``predicted_time``, ``predicted_dt`` [s] and
    ``predicted_`` + the pose columns (``q_*``, ``base_*``, ``base_q*``, ``head_*``); None: none."""
    msg: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, (float, np.floating)):
            msg[k] = _finite(v)
        elif isinstance(v, np.integer):
            msg[k] = int(v)
        else:
            msg[k] = v
    if state.velocity is not None:
        for k, v in enumerate(np.asarray(state.velocity)[:len(state.q)]):
            msg[f"qdot_{k + 1}"] = _finite(v)
    msg["capture_time"] = float(capture_time)
    msg["publish_time"] = float(publish_time)
    msg["reading_settled"] = bool(reading_settled)
    if predicted is not None:
        msg["predicted_time"] = float(publish_time)
        msg["predicted_dt"] = float(publish_time) - float(capture_time)
        for k, v in predicted.as_row().items():
            if k.startswith(PREDICTED_COLUMNS):
                msg[f"predicted_{k}"] = _finite(v)
    return msg


#: The pose columns that ``/snake/state`` also gives as predicted to the publish time (``predicted_`` prefix).
PREDICTED_COLUMNS = ("q_", "base_", "head_")


def status_message(**fields: Any) -> dict[str, Any]:
    """``/snake/status`` with NaNs as null."""
    return {k: (_finite(v) if isinstance(v, float) else v) for k, v in fields.items()}


def level_rotation(up: np.ndarray) -> np.ndarray:
    """Rotation (3, 3) from the camera frame to the ``ground`` frame (z up, x the optical axis levelled).

    ``up``: the world's up direction in the camera frame (3,). The rows are the ground axes in camera
    coordinates, so ``R @ v_camera = v_ground``.
    """
    z = np.asarray(up, float)
    z = z / np.linalg.norm(z)
    forward = np.array([0.0, 0.0, 1.0])
    x = forward - z * (forward @ z)
    if np.linalg.norm(x) < 1e-6:  # looking straight down or up: level the image's down axis instead
        down = np.array([0.0, 1.0, 0.0])
        x = down - z * (down @ z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z])


def link_transforms(robot, state) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """``(parent, child, translation (3,), rotation (3, 3))`` of the robot's frames: camera → base
    (link 1), then each link in its predecessor's frame (``link_2`` … ``link_L``), metres."""
    from snaketrack.models.chain import chain_frames  # deferred: the module imports without torch

    rots, origins, *_ = chain_frames(robot, np.asarray(state.q, float), np.asarray(state.base_rotation, float),
                                     np.asarray(state.base_position, float))
    out = [(CAMERA_FRAME, BASE_FRAME, origins[0], rots[0])]
    names = [BASE_FRAME] + [f"link_{k + 1}" for k in range(1, len(rots))]
    for k in range(1, len(rots)):
        Rp = rots[k - 1]
        out.append((names[k - 1], names[k], Rp.T @ (origins[k] - origins[k - 1]), Rp.T @ rots[k]))
    return out
