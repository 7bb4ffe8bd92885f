"""The gate serves clients that ask for the Foxglove protocol by either name: raw ``websockets`` clients on the
loopback, one per name, each reads the advertised channels and the published messages."""
import json
import struct
import threading
import time

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from snaketrack.datasets.video import open_frames
from snaketrack.models.robot import load_robot
from snaketrack.service import Capture, RecordedFeed, ServiceConfig, TrackingService
from snaketrack.service import messages as m
from snaketrack.service.gate import SUBPROTOCOLS, TokenGate
from snaketrack.tracker.calib.camera import Camera
from snaketrack.tracker.run.pipeline import PipelineConfig

from posed_dataset import write_posed_dataset

OLD, NEW = "foxglove.websocket.v1", "foxglove.sdk.v1"
N = 8


class _RawClient:
    """The Foxglove WebSocket protocol written out: the advertisement, a subscription to ``topics``, and
    the binary message frames (op 0x01, subscription id, log time, payload)."""

    def __init__(self, url: str, subprotocol: str, topics, token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self.ws = connect(url, subprotocols=[subprotocol], additional_headers=headers, open_timeout=10,
                          max_size=None, compression=None, ping_interval=None)
        self.topics, self.advertised, self.received = set(topics), set(), []
        self._subs: dict[int, str] = {}

    def read(self, timeout: float = 10.0, until=None) -> None:
        """Read until the server closes, ``timeout`` [s] passes without a message, or ``until()`` holds."""
        while until is None or not until():
            try:
                data = self.ws.recv(timeout=timeout)
            except (TimeoutError, ConnectionClosed):
                return
            if isinstance(data, str):
                msg = json.loads(data)
                if msg["op"] == "advertise":
                    subs = []
                    for ch in msg["channels"]:
                        self.advertised.add(ch["topic"])
                        if ch["topic"] in self.topics:
                            self._subs[len(self._subs) + 1] = ch["topic"]
                            subs.append({"id": len(self._subs), "channelId": ch["id"]})
                    if subs:
                        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
            elif data[0] == 0x01:
                sid, _ = struct.unpack_from("<IQ", data, 1)
                self.received.append((self._subs[sid], bytes(data[13:])))

    def close(self) -> None:
        self.ws.close()


def _sdk_server():
    """The SDK's server with one JSON channel, and a thread logging to it until the returned event is set (the
    thread holds the context: the channel closes with it)."""
    import foxglove

    ctx = foxglove.Context()
    channel = foxglove.Channel("/count", message_encoding="json", context=ctx)
    server = foxglove.start_server(name="test", host="127.0.0.1", port=0, context=ctx)
    stop = threading.Event()

    def log(ctx=ctx):
        k = 0
        while not stop.is_set():
            channel.log({"k": k})
            k += 1
            time.sleep(0.01)

    threading.Thread(target=log, daemon=True).start()
    return server, stop


def test_the_sdk_refuses_the_older_name_and_the_gate_serves_both():
    server, stop = _sdk_server()
    gate = TokenGate(None, "127.0.0.1", 0, upstream_port=server.port)
    gate.start()
    try:
        with pytest.raises(InvalidStatus, match="400"):  # what the gate is there for
            _RawClient(f"ws://127.0.0.1:{server.port}", OLD, ["/count"])
        for name in SUBPROTOCOLS:
            client = _RawClient(f"ws://127.0.0.1:{gate.port}", name, ["/count"])
            try:
                assert client.ws.subprotocol == name
                client.read(until=lambda c=client: len(c.received) >= 5)
            finally:
                client.close()
            assert client.advertised == {"/count"}
            counts = [json.loads(payload)["k"] for _, payload in client.received]
            assert len(counts) >= 5 and counts == sorted(counts)
        with pytest.raises(InvalidStatus, match="400"):  # a name of another protocol is still refused
            _RawClient(f"ws://127.0.0.1:{gate.port}", "ros2.rosbridge", ["/count"])
    finally:
        gate.stop()
        stop.set()
        server.stop()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("gate") / "ds", N, seed=7)


@pytest.mark.parametrize("token", [None, "s3cret-token"])
def test_a_service_serves_its_channels_and_states_to_a_client_speaking_each_name(dataset, token):
    frames = open_frames(dataset)
    source = Capture(RecordedFeed(frames, masks=frames.mask, realtime=False))
    service = TrackingService(source, load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta),
                              PipelineConfig(refine_steps=2, hold_frames=0),
                              ServiceConfig(port=0, token=token, overlay_hz=0))
    service.start(capture=False)
    try:
        url = f"ws://127.0.0.1:{service.port}"
        clients = {name: _RawClient(url, name, [m.STATE, m.STATUS], token=token) for name in (OLD, NEW)}
        threads = [threading.Thread(target=c.read) for c in clients.values()]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while service.publisher._subscriptions.count < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert service.publisher._subscriptions.count == 4  # both clients, two topics each
        service.start_capture()
        assert service.wait(120)
    finally:
        figures = service.stop()
    for t in threads:
        t.join(timeout=30)
    assert figures["frames_tracked"] == N
    for name, client in clients.items():
        assert client.ws.subprotocol == name
        assert {m.STATE, m.STATUS, m.JOINT_STATES, m.BASE_POSE, m.HEAD_POSE, m.TF, m.OVERLAY} <= client.advertised
        states = [json.loads(p) for topic, p in client.received if topic == m.STATE]
        assert [s["frame"] for s in states] == list(range(N)), name
        assert all(np.isfinite(s["q_1"]) for s in states)
        assert any(topic == m.STATUS for topic, _ in client.received)
