"""A Python client of the service: subscribe, and get typed robot states.

Speaks the Foxglove WebSocket protocol (what the Foxglove app speaks) over
``websockets``: it reads the server's channel advertisements, subscribes to
``/snake/state`` (and any other JSON topic asked for) and decodes each
message. For a controller::

    from snaketrack.service import StateClient

    with StateClient("ws://127.0.0.1:8765") as client:
        for s in client.states():
            command = controller.step(s.q, s.head, s.status)

``snaketrack listen URL`` prints the same states as JSON lines.
"""
from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Iterator, Optional
from urllib.parse import urlsplit

import numpy as np

from snaketrack.errors import InputError, SnaketrackError
from snaketrack.service import messages as m

SUBPROTOCOL = "foxglove.sdk.v1"
_MESSAGE_DATA = 0x01


class ServiceError(SnaketrackError, ConnectionError):
    """The service refused the connection or could not be reached."""


@dataclass
class RobotState:
    """One tracked frame as a controller gets it (camera frame, OpenCV axes, metres, radians).

    frame: the source's frame number. t: its source time [s]. q: (J,) joint angles [rad], tail to head.
    qdot: (J,) joint rates [rad/s], or None. base_position: (3,) link 1 origin. base_quat: (4,) (w, x, y, z).
    head: (3,) head point. status: ``tracked``, ``coasting`` or ``lost``. iou: the fit's IoU.
    capture_time, publish_time: wall clock [s since the epoch]. received_time: when the client got it.
    reading_settled: False while the tracker has not yet settled which end is the head (the track may
    still turn round: head and tail swapped); a controller should wait for it.
    predicted_time: the time [s since the epoch] the ``predicted_*`` entries hold for (the publish time:
    the state carried forward by the tracker's constant-velocity prediction over the latency,
    :mod:`snaketrack.tracker.run.forecast`), None when the message carries no prediction; predicted_q (J,),
    predicted_base_position (3,), predicted_base_quat (4,) (w, x, y, z), predicted_head (3,): the pose then.
    """

    frame: int
    t: float
    q: np.ndarray
    qdot: Optional[np.ndarray]
    base_position: np.ndarray
    base_quat: np.ndarray
    head: np.ndarray
    status: str
    iou: float
    capture_time: float
    publish_time: float
    received_time: float
    row: dict
    reading_settled: bool = True
    predicted_time: Optional[float] = None
    predicted_q: Optional[np.ndarray] = None
    predicted_base_position: Optional[np.ndarray] = None
    predicted_base_quat: Optional[np.ndarray] = None
    predicted_head: Optional[np.ndarray] = None

    @property
    def predicted_dt(self) -> Optional[float]:
        """How far [s] the predicted pose is ahead of the captured frame (None: no prediction)."""
        return None if self.predicted_time is None else self.predicted_time - self.capture_time

    @property
    def latency_ms(self) -> float:
        """Capture to receipt [ms]."""
        return 1000.0 * (self.received_time - self.capture_time)

    @classmethod
    def from_message(cls, msg: dict, received_time: float) -> "RobotState":
        """From a ``/snake/state`` message (see :func:`snaketrack.service.messages.state_message`)."""
        def f(key: str) -> float:
            v = msg.get(key)
            return float("nan") if v is None else float(v)

        n = sum(1 for k in msg if k.startswith("q_"))
        qdot = None
        if "qdot_1" in msg:
            qdot = np.array([f(f"qdot_{k + 1}") for k in range(n)])
        def pose(prefix: str) -> dict:
            return dict(q=np.array([f(f"{prefix}q_{k + 1}") for k in range(n)]),
                        base_position=np.array([f(f"{prefix}base_{a}") for a in "xyz"]),
                        base_quat=np.array([f(f"{prefix}base_q{a}") for a in "wxyz"]),
                        head=np.array([f(f"{prefix}head_{a}") for a in "xyz"]))

        predicted = {}
        if msg.get("predicted_time") is not None:
            predicted = {f"predicted_{k}": v for k, v in pose("predicted_").items()}
            predicted["predicted_time"] = f("predicted_time")
        return cls(frame=int(msg["frame"]), t=f("t"), qdot=qdot, status=str(msg.get("status")),
                   iou=f("iou"), capture_time=f("capture_time"), publish_time=f("publish_time"),
                   received_time=received_time, row=msg, reading_settled=bool(msg.get("reading_settled", True)),
                   **pose(""), **predicted)


class StateClient:
    """A subscription to a running service at ``url`` (``ws://HOST:PORT``).

    token: the service's token (sent as ``Authorization: Bearer``), when it has one.
    topics: the JSON topics to subscribe to; default ``/snake/state`` and ``/snake/status``.
    receive_buffer: the socket's receive buffer [bytes] (None: the system's); a small one makes a slow
        reader's backlog stay at the server, where old messages are dropped.
    """

    def __init__(self, url: str, token: Optional[str] = None, topics: tuple[str, ...] = (m.STATE, m.STATUS),
                 open_timeout: float = 10.0, receive_buffer: Optional[int] = None):
        if not url.startswith(("ws://", "wss://")):
            raise InputError(f"{url}: expected a WebSocket URL, ws://HOST:PORT")
        try:
            port = urlsplit(url).port
        except ValueError as e:
            raise InputError(f"{url}: {e}; expected ws://HOST:PORT") from None
        if port == 0:
            raise InputError(f"{url}: port 0; expected the service's port, ws://HOST:PORT")
        self.url, self.token, self.topics = url, token, tuple(topics)
        self.open_timeout, self.receive_buffer = float(open_timeout), receive_buffer
        self.ws = None
        self._subscriptions: dict[int, tuple[str, str]] = {}  # id → (topic, encoding)
        self._next_id = 1
        self.last_status: Optional[dict] = None

    def __enter__(self) -> "StateClient":
        return self.connect()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def connect(self) -> "StateClient":
        # deferred: optional, the service extra
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        sock = None
        if self.receive_buffer:
            parts = urlsplit(self.url)
            family, kind, proto, _, address = socket.getaddrinfo(parts.hostname, parts.port or 80,
                                                                 type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
            # before connecting: the window the handshake announces is sized from it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(self.receive_buffer))
            sock.settimeout(self.open_timeout)
            try:
                sock.connect(address)
            except OSError:
                sock.close()
                raise
        try:
            # no keepalive pings: a client that reads slowly would miss the pong behind its unread messages
            # and be cut off; a service that went away shows as the states' timeout instead
            self.ws = connect(self.url, sock=sock, subprotocols=[SUBPROTOCOL], additional_headers=headers,
                              open_timeout=self.open_timeout, max_size=None, compression=None, ping_interval=None)
        except InvalidStatus as e:
            code = e.response.status_code
            why = "refused: a valid token is required" if code == 401 else f"refused with HTTP {code}"
            raise ServiceError(f"{self.url}: {why}") from None
        except (OSError, TimeoutError) as e:
            raise ServiceError(f"{self.url}: no service answered ({e.__class__.__name__}: {e})") from None
        return self

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def _handle_text(self, text: str) -> None:
        msg = json.loads(text)
        if msg.get("op") != "advertise":
            return
        subs = []
        for ch in msg.get("channels", []):
            if ch.get("topic") in self.topics and ch["topic"] not in {t for t, _ in self._subscriptions.values()}:
                sid = self._next_id
                self._next_id += 1
                self._subscriptions[sid] = (ch["topic"], ch.get("encoding", ""))
                subs.append({"id": sid, "channelId": ch["id"]})
        if subs:
            self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def messages(self, timeout: Optional[float] = 5.0) -> Iterator[tuple[str, Any, float]]:
        """``(topic, message, received_time)`` of the subscribed topics (a JSON topic's message decoded, any
        other's as bytes), until ``timeout`` [s] passes without one (None: forever) or the service closes."""
        from websockets.exceptions import ConnectionClosed  # deferred: optional, the service extra

        if self.ws is None:
            self.connect()
        while True:
            try:
                data = self.ws.recv(timeout=timeout)
            except (TimeoutError, ConnectionClosed):
                return
            if isinstance(data, str):
                self._handle_text(data)
                continue
            if len(data) < 13 or data[0] != _MESSAGE_DATA:
                continue
            sid, _log_time = struct.unpack_from("<IQ", data, 1)
            sub = self._subscriptions.get(sid)
            if sub is None:
                continue
            topic, encoding = sub
            payload = bytes(data[13:])
            yield topic, json.loads(payload) if encoding == "json" else payload, time.time()

    def states(self, timeout: Optional[float] = 5.0) -> Iterator[RobotState]:
        """The robot's states as they arrive (class doc of :class:`RobotState`); ``last_status`` keeps the
        newest ``/snake/status``."""
        for topic, msg, received in self.messages(timeout):
            if topic == m.STATUS:
                self.last_status = msg
            elif topic == m.STATE:
                yield RobotState.from_message(msg, received)
