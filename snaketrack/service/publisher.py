"""Tracked frames out through the Foxglove SDK: its WebSocket server and its MCAP writer.

Both sinks take the same logging calls (one :class:`foxglove.Context` per
publisher), so a recording holds exactly what the clients saw. The topics and
their frames are in :mod:`snaketrack.service.messages`.

Work for no one: a topic that no client subscribes to and no recording
takes is neither built nor logged (the SDK's ``Channel.has_sinks``), so the
overlay is drawn and JPEG-encoded only while someone watches it.

Backpressure: the SDK gives each client its own queue of ``client_queue``
messages and drops the oldest when a client does not keep up, so a slow
client loses old messages without slowing the tracker or the other clients.

Tokens: the SDK's server has no hook to refuse a client at the handshake. With
a token the SDK binds a private loopback port and
:class:`~snaketrack.service.gate.TokenGate` listens where clients connect,
checks the token before the WebSocket upgrade and relays the accepted
connections (each through its own upstream connection, so the per-client
queues still apply).

Closing: the SDK's server drops what it has not yet sent when it stops, so
:meth:`Publisher.close` first lingers ``linger_s`` while any client is
subscribed, for the last states to reach a client that is behind.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from snaketrack.errors import InputError
from snaketrack.models.chain import chain_frames
from snaketrack.service import messages as m
from snaketrack.service.gate import TokenGate
from snaketrack.tracker.run.forecast import forecast
from snaketrack.tracker.run.outputs import overlay_frame

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class _Subscriptions:
    """How many channel subscriptions the clients hold (the SDK's server listener)."""

    def __init__(self):
        self.count = 0

    def on_subscribe(self, client, channel) -> None:
        self.count += 1

    def on_unsubscribe(self, client, channel) -> None:
        self.count = max(0, self.count - 1)


class Publisher:
    """Publish finished frames to WebSocket clients and, with ``record``, to an MCAP file.

    robot: the tracked :class:`~snaketrack.models.robot.Robot` (link frames for ``/tf``).
    K: the tracking camera's intrinsics (3, 3) (the overlay's axes).
    host, port: where clients connect (port 0: any free port; :attr:`port` tells which).
    token: the token clients must present (None: no check; only allowed on a loopback host).
    record: an MCAP path to record to (None: no recording). It must not exist yet.
    client_queue: messages queued per client before the oldest are dropped.
    overlay_hz: the most overlay images per second [1/s] (0: none).
    linger_s: on close, how long [s] the server keeps sending queued messages while a client is subscribed.
    """

    def __init__(self, robot, K: np.ndarray, host: str = "127.0.0.1", port: int = 8765, token: Optional[str] = None,
                 record: Optional[str] = None, client_queue: int = 256, overlay_hz: float = 5.0,
                 linger_s: float = 0.5):
        self.robot, self.K = robot, np.asarray(K, float)
        self.host, self.requested_port, self.token = host, int(port), token
        self.record = None if record is None else Path(record)
        self.client_queue, self.overlay_hz = int(client_queue), float(overlay_hz)
        self.server = self.gate = self.writer = None
        self._last_overlay = -np.inf
        self.overlays = 0  # overlay images drawn
        self._last_flush = time.monotonic()
        self.linger_s = float(linger_s)
        self._subscriptions = _Subscriptions()

    # -- lifetime ---------------------------------------------------------------------------
    def start(self) -> "Publisher":
        # deferred: optional, the service extra
        import foxglove
        from foxglove import Channel
        from foxglove.channels import CompressedImageChannel, FrameTransformsChannel, PoseInFrameChannel
        from foxglove.mcap import MCAPWriteOptions

        ctx = self.context = foxglove.Context()
        self.channels = {
            m.STATE: Channel(m.STATE, schema=m.STATE_SCHEMA, context=ctx),
            m.JOINT_STATES: Channel(m.JOINT_STATES, schema=m.JOINT_STATE_SCHEMA, context=ctx),
            m.STATUS: Channel(m.STATUS, schema=m.STATUS_SCHEMA, context=ctx),
            m.BASE_POSE: PoseInFrameChannel(m.BASE_POSE, context=ctx),
            m.HEAD_POSE: PoseInFrameChannel(m.HEAD_POSE, context=ctx),
            m.GROUND_BASE_POSE: PoseInFrameChannel(m.GROUND_BASE_POSE, context=ctx),
            m.GROUND_HEAD_POSE: PoseInFrameChannel(m.GROUND_HEAD_POSE, context=ctx),
            m.TF: FrameTransformsChannel(m.TF, context=ctx),
            m.OVERLAY: CompressedImageChannel(m.OVERLAY, context=ctx),
        }
        try:
            # the SDK's server accepts one subprotocol name and no token check: clients reach it through the gate
            self.server = foxglove.start_server(name="snaketrack", host="127.0.0.1", port=0, context=ctx,
                                                message_backlog_size=self.client_queue,
                                                server_listener=self._subscriptions)
            self.gate = TokenGate(self.token, self.host, self.requested_port, upstream_port=self.server.port)
            self.gate.start()
        except (RuntimeError, OSError) as e:  # the port taken, the host unknown: before any file is written
            self.close()
            raise InputError(f"--host {self.host} --port {self.requested_port}: cannot serve there "
                             f"({str(e).removeprefix('FoxgloveError: ')})") from None
        except Exception:
            self.close()
            raise
        if self.record is not None:
            # small chunks: a killed service loses at most the last ~64 KiB of messages
            options = MCAPWriteOptions(chunk_size=64 * 1024, compression_threads=0)
            self.writer = foxglove.open_mcap(self.record, context=ctx, writer_options=options)
        return self

    @property
    def port(self) -> int:
        """The port clients connect to."""
        return self.gate.port if self.gate is not None else self.server.port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "localhost") else self.host
        host = "[::1]" if host in ("::", "::1") else host
        return f"ws://{host}:{self.port}"

    def close(self) -> None:
        """Stop the server (and the gate) and finish the MCAP (its summary and index written)."""
        if self.server is not None and self._subscriptions.count > 0 and self.linger_s > 0:
            time.sleep(self.linger_s)
        if self.server is not None:  # first, so that its clients' close handshakes still pass the gate
            self.server.stop()
            self.server = None
        if self.gate is not None:
            self.gate.stop()
            self.gate = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def flush(self, every_s: float = 1.0) -> None:
        """Finish the MCAP's current chunk when ``every_s`` [s] have passed since the last flush."""
        now = time.monotonic()
        if self.writer is not None and now - self._last_flush >= every_s:
            self.writer.flush()
            self._last_flush = now

    # -- messages ---------------------------------------------------------------------------
    def publish(self, result, capture_time: float, up: Optional[np.ndarray] = None,
                reading_settled: bool = True) -> float:
        """Publish one :class:`~snaketrack.tracker.run.pipeline.FrameResult` captured at ``capture_time``
        [s since the epoch]; ``reading_settled``: whether the tracker has settled which end is the head.
        Only the topics a client subscribes to (or the recording takes) are built and logged: with no one on
        ``/camera/overlay`` no overlay is drawn. Returns the capture-to-publish latency [ms]."""
        # deferred: optional, the service extra
        from foxglove.messages import CompressedImage, FrameTransform, FrameTransforms, PoseInFrame, Timestamp

        state = result.state
        ns = int(round(capture_time * 1e9))
        stamp = Timestamp(sec=ns // 1_000_000_000, nsec=ns % 1_000_000_000)
        ch = self.channels
        wanted = {topic for topic, channel in ch.items() if channel.has_sinks()}  # subscribed or recorded

        def log(topic: str, build) -> None:  # a message is built only for a topic someone takes
            if topic in wanted:
                ch[topic].log(build(), log_time=ns)

        def pose(frame_id: str, position, rotation):
            return PoseInFrame(timestamp=stamp, frame_id=frame_id, pose=_pose(position, rotation))

        log(m.JOINT_STATES, lambda: m.joint_state_message(state, capture_time))
        head_R = _head_rotation(self.robot, state, np.asarray(state.base_rotation, float)) \
            if wanted & {m.HEAD_POSE, m.GROUND_HEAD_POSE} else None
        log(m.BASE_POSE, lambda: pose(m.CAMERA_FRAME, state.base_position, state.base_rotation))
        log(m.HEAD_POSE, lambda: pose(m.CAMERA_FRAME, state.head, head_R))
        L = m.level_rotation(up) if up is not None and np.all(np.isfinite(up)) else None

        def transforms():
            out = [FrameTransform(timestamp=stamp, parent_frame_id=p, child_frame_id=c, translation=_vector(t),
                                  rotation=_quaternion(R)) for p, c, t, R in m.link_transforms(self.robot, state)]
            if L is not None:
                out.append(FrameTransform(timestamp=stamp, parent_frame_id=m.GROUND_FRAME,
                                          child_frame_id=m.CAMERA_FRAME, translation=_vector(np.zeros(3)),
                                          rotation=_quaternion(L)))
            return FrameTransforms(transforms=out)

        log(m.TF, transforms)
        if L is not None:
            log(m.GROUND_BASE_POSE, lambda: pose(m.GROUND_FRAME, L @ state.base_position, L @ state.base_rotation))
            log(m.GROUND_HEAD_POSE, lambda: pose(m.GROUND_FRAME, L @ state.head, L @ head_R))
        now = time.monotonic()
        if self.overlay_hz > 0 and m.OVERLAY in wanted and now - self._last_overlay >= 1.0 / self.overlay_hz:
            self._last_overlay = now
            self.overlays += 1
            image = overlay_frame(result, self.robot, self.K)
            ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 80])
            if ok:
                ch[m.OVERLAY].log(CompressedImage(timestamp=stamp, frame_id=m.CAMERA_FRAME, data=jpeg.tobytes(),
                                                  format="jpeg"), log_time=ns)

        published = time.time()  # the forecast's time: the state as it stands when a client gets it
        log(m.STATE, lambda: m.state_message(result.row, state, capture_time, published, reading_settled,
                                             forecast(state, self.robot, max(0.0, published - capture_time))))
        self.flush()
        return 1000.0 * (published - capture_time)

    def status(self, **fields) -> None:
        """Publish ``/snake/status`` (fields of :data:`~snaketrack.service.messages.STATUS_SCHEMA`)."""
        self.channels[m.STATUS].log(m.status_message(**fields), log_time=time.time_ns())


def _vector(v):
    from foxglove.messages import Vector3  # deferred: optional, the service extra

    x, y, z = (float(a) for a in np.asarray(v, float))
    return Vector3(x=x, y=y, z=z)


def _quaternion(R):
    from foxglove.messages import Quaternion  # deferred: optional, the service extra

    x, y, z, w = Rotation.from_matrix(np.asarray(R, float)).as_quat()
    return Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))


def _pose(position, R):
    from foxglove.messages import Pose  # deferred: optional, the service extra

    return Pose(position=_vector(position), orientation=_quaternion(R))


def _head_rotation(robot, state, base_R: np.ndarray) -> np.ndarray:
    """The head link's orientation (3, 3) in the camera frame."""
    rots, *_ = chain_frames(robot, np.asarray(state.q, float), base_R, np.asarray(state.base_position, float))
    return rots[-1]
