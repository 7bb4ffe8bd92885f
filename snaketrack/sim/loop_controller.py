"""The closed loop's controller process: streamed states in, gait commands out.

:func:`controller_main` is what runs in the controller's own OS process. It
is given a *state link* (the tracking service's WebSocket URL, or a queue of
:class:`~snaketrack.service.client.RobotState` for the truth-fed reference),
the robot's *command link* (a queue it puts
:class:`~snaketrack.sim.steering.GaitCommand` on), and the camera's pose per
frame (the drone's navigation or the tripod's survey: positions (F, 3) [m]
and rotations ``R_wc`` (F, 3, 3), OpenCV camera axes in the world) to put
each state's head into the world frame. It never sees the simulator.

:func:`open_states` is the one place that knows the transport.
"""
from __future__ import annotations

import queue
from typing import Any, Iterator

import numpy as np

#: A state link with nothing for this long [s] has ended (a tracker's first-frame search on a loaded CPU takes seconds).
STATE_TIMEOUT_S = 30.0


def open_states(link: Any, timeout: float = STATE_TIMEOUT_S) -> Iterator:
    """RobotStates, in order, from ``link``: a service URL (``ws://…``, through
    :class:`~snaketrack.service.client.StateClient`, connected before this returns) or a queue whose
    ``None`` ends the stream. Ends after ``timeout`` [s] without a state."""
    if isinstance(link, str):
        from snaketrack.service.client import StateClient

        client = StateClient(link).connect()

        def from_service():
            try:
                yield from client.states(timeout=timeout)
            finally:
                client.close()

        return from_service()

    def from_queue():
        while True:
            try:
                s = link.get(timeout=timeout)
            except queue.Empty:
                return
            if s is None:
                return
            yield s

    return from_queue()


def controller_main(link: Any, commands: Any, results: Any, camera_positions: np.ndarray,
                    camera_rotations: np.ndarray, targets: np.ndarray, n_joints: int, steering: Any) -> None:
    """Steer from the states of ``link`` until it ends or every waypoint is reached (module doc).

    Puts ``("ready", None)`` on ``results`` once the link is open, a command on ``commands`` for every
    state, and at the end ``("log", dict)``: ``rows`` (one per state: frame, t, head_x, head_y (world
    [m]), delta [rad], waypoint, status, latency_ms, q, base_position, base_quat (camera frame)),
    ``reach_times`` (as the controller saw them [s]) and ``jacobian`` (the last Ĵ (2, J) [m/rad]).
    """
    from snaketrack.sim.steering import HeadSteering

    steer = HeadSteering(targets, n_joints, steering)
    states = open_states(link)
    results.put(("ready", None))
    rows = []
    last = len(camera_positions) - 1
    for s in states:
        k = min(max(int(s.frame), 0), last)
        head = camera_positions[k] + camera_rotations[k] @ np.asarray(s.head, float)
        # until the tracker has settled which end is the head, its "head" may be the tail: hold
        status = s.status if getattr(s, "reading_settled", True) else "lost"
        cmd = steer.step(s.t, s.frame, s.q, s.qdot, head[:2], status)
        commands.put(cmd)
        rows.append({"frame": int(s.frame), "t": float(s.t), "head_x": float(head[0]), "head_y": float(head[1]),
                     "delta": steer.delta, "waypoint": cmd.waypoint, "status": s.status,
                     "latency_ms": float(s.latency_ms), "q": np.asarray(s.q, float).tolist(),
                     "base_position": np.asarray(s.base_position, float).tolist(),
                     "base_quat": np.asarray(s.base_quat, float).tolist()})
        if cmd.halt:
            break
    results.put(("log", {"rows": rows, "reach_times": steer.reach_times,
                         "jacobian": steer.estimator.jacobian.tolist()}))
