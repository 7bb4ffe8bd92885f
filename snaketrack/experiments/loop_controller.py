"""The closed loop's controller process: streamed states in, gait commands out.

:func:`controller_main` is what runs in the controller's own OS process. It
is given a *state link* (the tracking service's WebSocket URL, or a queue of
:class:`~snaketrack.service.client.RobotState` for the truth-fed reference),
the robot's *command link* (a queue it puts
:class:`~snaketrack.experiments.steering.GaitCommand` on), the robot's description
and the camera's pose per frame (the drone's navigation or the tripod's
survey: positions (F, 3) [m] and rotations ``R_wc`` (F, 3, 3), OpenCV camera
axes in the world) to put each state into the world frame. It never sees
the simulator.

:class:`LoopController` is the controller without I/O: the head/tail check
(:class:`ChainReading`), then the steering law
(:class:`~snaketrack.experiments.steering.HeadSteering`).

**Head/tail check.** The gait's body wave travels from the head to the tail.
:class:`ChainReading` measures the wave's direction in the streamed joint
angles over a window (:func:`snaketrack.tracker.reading.wave_direction`:
the sign of the phase lag between neighbouring joints); a wave running the
other way means the state's chain is read backwards (the tracker took the
tail for the head). Such a state is turned round before use
(:func:`reverse_state`): the head is the centre of the streamed first link,
the joint order is reversed and each yaw angle changes sign
(``q' = −reverse(q)`` on a planar chain). Until the window is full, or
while the wave is too weak to tell, the controller holds its offset. When the streamed head jumps
by more than ``HEAD_JUMP_M`` to where the streamed tail was (the tracker turned its own track
round), the window and the verdict are turned with it.

:func:`open_states` is the one place that knows the transport.
"""
from __future__ import annotations

import queue
import time
from dataclasses import replace
from typing import Any, Iterator, Optional

import numpy as np

from snaketrack.experiments.steering import HeadSteering
from snaketrack.service.client import StateClient

#: A state link with nothing for this long [s] has ended (a tracker's first-frame search on a loaded CPU takes seconds).
STATE_TIMEOUT_S = 30.0
#: Jump of the streamed head between consecutive states [m] beyond which the differences restart
#: (a change of the tracker's reading, not motion: the head moves about 2 cm a frame).
HEAD_JUMP_M = 0.25


def open_states(link: Any, timeout: float = STATE_TIMEOUT_S) -> Iterator:
    """RobotStates, in order, from ``link``: a service URL (``ws://…``, through
    :class:`~snaketrack.service.client.StateClient`, connected before this returns) or a queue whose
    ``None`` ends the stream (its states' ``received_time`` is set on receipt). Ends after ``timeout``
    [s] without a state."""
    if isinstance(link, str):
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
            yield replace(s, received_time=time.time())  # the queue's own latency

    return from_queue()


def reverse_state(robot, q: np.ndarray, qdot: Optional[np.ndarray], base_position: np.ndarray,
                  base_quat: np.ndarray) -> tuple[np.ndarray, Optional[np.ndarray], np.ndarray]:
    """A state read backwards, turned round: (q' (J,) [rad], q̇' (J,) [rad/s] or None, head (3,) [m]).

    base_position (3,) [m] and base_quat (4,) (w, x, y, z) are the streamed link 1's frame (camera
    frame); the true head is then the centre of that link, ``base + R_base (L_1 / 2, 0, 0)``, in the
    same frame."""
    import torch  # deferred: the module imports without torch

    # deferred: the module imports without torch
    from snaketrack.models.rotations import quat_to_matrix
    from snaketrack.tracker.reading import reverse_joints

    R = quat_to_matrix(torch.as_tensor(np.asarray(base_quat, float))).numpy()
    head = np.asarray(base_position, float) + R[:, 0] * 0.5 * float(robot.links[0].length)
    qd = None if qdot is None else reverse_joints(robot, qdot)
    return reverse_joints(robot, q), qd, head


class ChainReading:
    """Which way round the streamed chain is, from its body wave (module doc).

    robot: the robot (its yaw joints are checked). window: states looked back over; default 20
    (1.3 s at 15 frames/s, most of a gait period). max_lag: largest lag of the wave statistic
    [states]; default 5. threshold: |S| at or above which the statistic decides; default 0.3.

    ``update(q)`` with each state's streamed joint angles (J,) [rad] returns the verdict: True (read
    backwards), False (read the right way round) or None (no verdict yet: window not full, or the
    wave has never been clear). Between clear readings the last verdict stands.
    """

    def __init__(self, robot, window: int = 20, max_lag: int = 5, threshold: float = 0.3):
        from snaketrack.tracker.reading import yaw_indices  # deferred: the module imports without torch

        self.idx = yaw_indices(robot)
        self.window, self.max_lag, self.threshold = int(window), int(max_lag), float(threshold)
        self.hist: list[np.ndarray] = []
        self.reversed: Optional[bool] = None
        self.last_s = 0.0

    def update(self, q: np.ndarray) -> Optional[bool]:
        from snaketrack.tracker.reading import wave_direction  # deferred: the module imports without torch

        q = np.asarray(q, float)
        if len(self.idx) < 2 or not np.all(np.isfinite(q)):
            return self.reversed
        self.hist.append(q[self.idx])
        self.hist = self.hist[-self.window:]
        if len(self.hist) < self.window:
            return self.reversed
        self.last_s = wave_direction(np.array(self.hist), self.max_lag)
        if self.last_s >= self.threshold:
            self.reversed = False
        elif self.last_s <= -self.threshold:
            self.reversed = True
        return self.reversed

    def turn(self) -> None:
        """The stream's own reading turned round (the tracker flipped its track): keep the window in
        one reading (each sample reversed and negated) and turn the verdict with it."""
        self.hist = [-h[::-1] for h in self.hist]
        if self.reversed is not None:
            self.reversed = not self.reversed


class LoopController:
    """The controller's logic with no I/O: the head/tail check, then the steering law (module doc).

    targets: (K, 2) waypoints in the world [m]. robot: the robot's description. steering:
    :class:`~snaketrack.experiments.steering.SteeringConfig`. check: whether to run the head/tail check (on
    by default; without it every state is taken as streamed).

    ``step(t, frame, q, qdot, head, base_position, base_quat, status, to_world)`` → (command, row):
    ``head``, ``base_position`` (3,) [m] and ``base_quat`` (4,) as streamed (camera frame), ``to_world``
    maps a camera-frame point (3,) to the world. ``flipped_states`` counts the states turned round.
    """

    def __init__(self, targets: np.ndarray, robot, steering, check: bool = True):
        self.robot = robot
        self.steer = HeadSteering(targets, robot.dof, steering)
        self.reading = ChainReading(robot) if check else None
        self.flipped_states = 0
        self._last_reversed: Optional[bool] = None
        self._last_head: Optional[np.ndarray] = None
        self._last_ends: Optional[tuple[np.ndarray, np.ndarray]] = None  # streamed head, streamed tail (world)
        self.stream_turns = 0

    def step(self, t: float, frame: int, q, qdot, head, base_position, base_quat, status: str, to_world):
        q = np.asarray(q, float)
        qdot = None if qdot is None else np.asarray(qdot, float)
        if self.reading is not None:
            ends = (np.asarray(to_world(np.asarray(head, float)), float)[:2],
                    np.asarray(to_world(reverse_state(self.robot, q, None, base_position, base_quat)[2]), float)[:2])
            if self._last_ends is not None:
                same = float(np.hypot(*(ends[0] - self._last_ends[0])))
                cross = float(np.hypot(*(ends[0] - self._last_ends[1])))
                if same > HEAD_JUMP_M and cross < same:
                    self.reading.turn()
                    self.stream_turns += 1
            self._last_ends = ends
        verdict = False if self.reading is None else self.reading.update(q)
        use_status = status
        if verdict is None:
            use_status = "lost"  # which end is the head is not known yet: hold the offset
        if verdict:
            q, qdot, head = reverse_state(self.robot, q, qdot, base_position, base_quat)
            self.flipped_states += 1
        head_w = np.asarray(to_world(np.asarray(head, float)), float)
        jumped = self._last_head is not None and float(np.hypot(*(head_w[:2] - self._last_head))) > HEAD_JUMP_M
        if verdict != self._last_reversed or jumped:
            self.steer.restart_differences()
        self._last_reversed, self._last_head = verdict, head_w[:2].copy()
        cmd = self.steer.step(t, frame, q, qdot, head_w[:2], use_status)
        row = {"frame": int(frame), "t": float(t), "head_x": float(head_w[0]), "head_y": float(head_w[1]),
               "delta": self.steer.delta, "waypoint": cmd.waypoint, "status": status,
               "reversed": None if verdict is None else bool(verdict),
               "wave": None if self.reading is None else float(self.reading.last_s)}
        return cmd, row


def controller_main(link: Any, commands: Any, results: Any, camera_positions: np.ndarray,
                    camera_rotations: np.ndarray, targets: np.ndarray, robot: Any, steering: Any) -> None:
    """Steer from the states of ``link`` until it ends (module doc).

    Puts ``("ready", None)`` on ``results`` once the link is open, a command on ``commands`` for every
    state, and at the end ``("log", dict)``: ``rows`` (one per state: frame, t, head_x, head_y (world
    [m], after the head/tail check), delta [rad], waypoint, status, reversed (the check's verdict),
    wave (its statistic), latency_ms, q, base_position, base_quat (camera frame, as streamed)),
    ``reach_times`` (as the controller saw them [s]), ``flipped_states`` and ``jacobian`` (the last
    Ĵ (2, J) [m/rad]).
    """
    ctl = LoopController(targets, robot, steering)
    states = open_states(link)
    results.put(("ready", None))
    rows = []
    last = len(camera_positions) - 1
    for s in states:
        k = min(max(int(s.frame), 0), last)
        c, R = camera_positions[k], camera_rotations[k]
        cmd, row = ctl.step(s.t, s.frame, s.q, s.qdot, s.head, s.base_position, s.base_quat, s.status,
                            lambda p, c=c, R=R: c + R @ p)
        commands.put(cmd)
        row.update({"latency_ms": float(s.latency_ms), "q": np.asarray(s.q, float).tolist(),
                    "base_position": np.asarray(s.base_position, float).tolist(),
                    "base_quat": np.asarray(s.base_quat, float).tolist()})
        rows.append(row)
    results.put(("log", {"rows": rows, "reach_times": ctl.steer.reach_times, "flipped_states": ctl.flipped_states,
                         "stream_turns": ctl.stream_turns,
                         "jacobian": ctl.steer.estimator.jacobian.tolist()}))
