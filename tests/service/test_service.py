"""The service end to end on the loopback: real WebSocket clients (Foxglove protocol), the MCAP read back
with the ``mcap`` reader against the batch track, the token refusal, a slow client, the robot leaving the view."""
import json
import threading
import time

import numpy as np
import pytest
import torch
from mcap.reader import make_reader

from snaketrack.datasets.video import open_frames
from snaketrack.models.robot import load_robot
from snaketrack.service import (
    Capture,
    PushSource,
    RecordedFeed,
    ServiceConfig,
    ServiceError,
    StateClient,
    TrackingService,
)
from snaketrack.service import messages as m
from snaketrack.tracker.calib.camera import Camera
from snaketrack.tracker.run.loop import RunOptions, track_source
from snaketrack.tracker.run.pipeline import PipelineConfig

from posed_dataset import write_posed_dataset

N = 16
PIPELINE = PipelineConfig(refine_steps=4, hold_frames=0)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("service") / "ds", N, seed=5)


def _service(dataset, config, pipeline=PIPELINE, realtime=False):
    frames = open_frames(dataset)
    robot = load_robot(frames.meta["robot"])
    camera = Camera.from_meta(frames.meta)
    return TrackingService(Capture(RecordedFeed(frames, masks=frames.mask, realtime=realtime)), robot, camera,
                           pipeline, config)


def _wait_subscribed(service, topics: int, timeout: float = 30.0) -> None:
    """Wait until the clients hold ``topics`` subscriptions in all, so that none misses the first frames."""
    deadline = time.monotonic() + timeout
    while service.publisher._subscriptions.count < topics and time.monotonic() < deadline:
        time.sleep(0.02)
    assert service.publisher._subscriptions.count >= topics


def _collect(url, out, token=None, **kw):
    with StateClient(url, token=token, **kw) as client:
        for s in client.states(timeout=10):
            out.append(s)


def test_a_client_gets_every_state_and_the_recording_matches_the_batch_track(dataset, tmp_path):
    record = tmp_path / "run.mcap"
    service = _service(dataset, ServiceConfig(port=0, record=str(record)))
    got = []
    service.start(capture=False)
    client = threading.Thread(target=_collect, args=(service.url, got))
    client.start()
    _wait_subscribed(service, 2)  # the state and status topics
    service.start_capture()
    assert service.wait(120)
    time.sleep(0.3)
    figures = service.stop()
    client.join()
    assert figures["frames_tracked"] == N and figures["frames_dropped"] == 0 and figures["errors"] == 0
    batch = track_source(dataset, tmp_path / "batch", config=PIPELINE,
                         options=RunOptions(video=False, plots=False, progress=False))
    from snaketrack.io import read_csv_columns

    track = read_csv_columns(tmp_path / "batch" / "track.csv")
    q_track = np.stack([np.asarray(track[f"q_{k + 1}"], float) for k in range(10)], axis=1)
    assert batch["frames"] == N
    # the live client: every frame, in order, the batch track's joint angles
    frames_seen = [s.frame for s in got]
    assert frames_seen[-N:] == list(range(N))
    np.testing.assert_allclose(np.stack([s.q for s in got[-N:]]), q_track, atol=1e-9)
    assert all(s.latency_ms >= 0 for s in got)
    # the recording: indexed, readable by the mcap reader, JointState fields as the track's
    with open(record, "rb") as f:
        reader = make_reader(f)
        assert reader.get_summary() is not None and reader.get_summary().chunk_indexes
        joint_states = [json.loads(msg.data) for _, ch, msg in reader.iter_messages(topics=[m.JOINT_STATES])]
        topics = {ch.topic for _, ch, _ in reader.iter_messages()}
    assert {m.STATE, m.JOINT_STATES, m.BASE_POSE, m.HEAD_POSE, m.TF, m.OVERLAY, m.STATUS} <= topics
    assert len(joint_states) == N
    js = joint_states[3]
    assert js["name"] == [f"joint_{k + 1}" for k in range(10)]
    assert set(js["header"]) == {"stamp", "frame_id"} and set(js["header"]["stamp"]) == {"sec", "nanosec"}
    np.testing.assert_allclose([j["position"] for j in joint_states], q_track, atol=1e-9)
    assert len(js["velocity"]) == 10


def test_tf_places_the_links_where_forward_kinematics_does(dataset):
    from scipy.spatial.transform import Rotation

    from snaketrack.models.kinematics import forward_kinematics_np
    from snaketrack.tracker.state import TrackState

    robot = load_robot("planar-snake-11")
    q = np.linspace(-0.4, 0.5, robot.dof)
    R0 = Rotation.from_rotvec([0.3, -0.2, 0.1]).as_matrix()
    p0 = np.array([0.1, -0.2, 2.0])
    quat = Rotation.from_matrix(R0).as_quat()[[3, 0, 1, 2]]
    state = TrackState(0, 0.0, q, quat, p0, np.zeros(3))
    chain = m.link_transforms(robot, state)
    fk = forward_kinematics_np(robot, q, R0, p0)
    R, p = np.eye(3), np.zeros(3)  # compose camera → base → link_2 → … and compare each link's origin
    for k, (_, _, t, Rk) in enumerate(chain):
        p, R = p + R @ t, R @ Rk
        np.testing.assert_allclose(p, fk["origins"][k], atol=1e-9)
    assert [c for _, c, _, _ in chain[:3]] == ["base", "link_2", "link_3"]


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_the_head_pose_is_the_head_point_in_the_head_link_s_orientation(name):
    """``/snake/head_pose`` (and, levelled, ``/snake/ground/head_pose``) carries the head link's orientation:
    the last link's rotation of the torch forward kinematics, not the base's."""
    from scipy.spatial.transform import Rotation

    from snaketrack.models.kinematics import forward_kinematics_np
    from snaketrack.service.publisher import _head_rotation
    from snaketrack.tracker.state import TrackState

    robot = load_robot(name)
    q = np.linspace(-0.5, 0.4, robot.dof)
    R0 = Rotation.from_rotvec([0.2, 0.4, -0.3]).as_matrix()
    p0 = np.array([-0.1, 0.05, 1.5])
    state = TrackState(0, 0.0, q, Rotation.from_matrix(R0).as_quat()[[3, 0, 1, 2]], p0, np.zeros(3))
    fk = forward_kinematics_np(robot, q, R0, p0)
    head_R = _head_rotation(robot, state, R0)
    np.testing.assert_allclose(head_R, fk["rotations"][-1], atol=1e-9)
    assert not np.allclose(head_R, R0, atol=1e-3)  # not the base's


def test_the_ground_frame_is_level_and_looks_along_the_optical_axis():
    up = np.array([0.0, -0.6, -0.8])  # a camera pitched down
    L = m.level_rotation(up)
    np.testing.assert_allclose(L @ L.T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(L @ up, [0, 0, 1], atol=1e-12)
    forward = L @ np.array([0.0, 0.0, 1.0])
    assert forward[1] == pytest.approx(0.0, abs=1e-12) and forward[0] > 0


def test_a_token_service_refuses_a_client_without_it_and_serves_one_with_it(dataset):
    service = _service(dataset, ServiceConfig(host="0.0.0.0", port=0, token="s3cret-token"))
    service.start()
    try:
        url = f"ws://127.0.0.1:{service.port}"
        with pytest.raises(ServiceError, match="refused: a valid token is required"):
            StateClient(url).connect()
        with pytest.raises(ServiceError, match="refused"):
            StateClient(url, token="wrong-token!").connect()
        got = []
        _collect(url, got, token="s3cret-token")
        assert [s.frame for s in got] and got[-1].frame == N - 1
        from websockets.sync.client import connect  # the query form a browser can send

        with connect(f"{url}/?token=s3cret-token", subprotocols=["foxglove.sdk.v1"]) as ws:
            assert json.loads(ws.recv(timeout=5))["op"] == "serverInfo"
        assert service.publisher.gate.refused == 2
    finally:
        service.stop()


def test_serving_beyond_the_loopback_without_a_token_is_refused():
    from snaketrack.errors import InputError

    with pytest.raises(InputError, match="needs a token"):
        ServiceConfig(host="0.0.0.0")


def _slow_client_run(dataset, n_max: int, until_gap: bool, seconds: float = 600.0):
    """Push frames at the tracker's pace to a fast client and to one that reads 2 messages a second (ten
    times too slowly, or more), ``n_max`` frames or, with ``until_gap``, until the slow one shows a gap.
    Returns (frames pushed, the service's figures, the fast client's states, the slow one's frames)."""
    robot = load_robot("planar-snake-11")
    frames = open_frames(dataset)
    camera = Camera.from_meta(frames.meta)
    source = PushSource(frames.width, frames.height, 30.0)
    service = TrackingService(source, robot, camera, PIPELINE,
                              ServiceConfig(port=0, client_queue=4, overlay_hz=1000))  # an image a frame
    service.start()
    fast, slow = [], []
    enough = threading.Event()

    def read_slowly():  # takes the images too
        with StateClient(service.url, topics=(m.STATE, m.OVERLAY), receive_buffer=4096) as client:
            # the first state may be seconds away on a loaded machine (the tracker's first-frame search)
            for topic, msg, _ in client.messages(timeout=30):
                if topic == m.STATE:
                    slow.append(msg["frame"])
                if enough.is_set():
                    return
                time.sleep(0.5)

    threads = [threading.Thread(target=_collect, args=(service.url, fast)), threading.Thread(target=read_slowly)]
    for t in threads:
        t.start()
    _wait_subscribed(service, 4)  # both clients, 2 topics each, before the first frame
    images = list(frames.frames())
    # noise makes each overlay JPEG large (about 50 kB), so the messages outgrow the sockets' buffers sooner
    noise = np.random.default_rng(0).integers(0, 256, images[0][1].shape, dtype=np.uint8)
    n, t_end = 0, time.monotonic() + seconds
    while n < n_max and time.monotonic() < t_end:
        if until_gap and slow and set(range(max(slow))) - set(slow):
            break
        i, rgb = images[n % N]
        source.push(np.where(frames.mask(i)[..., None], rgb, noise), frames.mask(i), t=n / 30)
        while source.slot.captured > service.frames_tracked + service.errors and service.frames_tracked < n + 1:
            time.sleep(0.002)
        n += 1
    deadline = time.monotonic() + 30
    while len(fast) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    enough.set()  # the slow client stops at its next message
    threads[1].join(timeout=30)
    source.stop()
    service.wait(30)
    figures = service.stop()
    threads[0].join()
    return n, figures, fast, slow


def test_a_slow_client_slows_neither_the_tracker_nor_the_fast_client(dataset):
    n, figures, fast, slow = _slow_client_run(dataset, 60, until_gap=False)
    assert figures["frames_tracked"] == n == 60
    assert [s.frame for s in fast] == list(range(n))  # the fast client missed nothing
    assert slow == sorted(slow) and 0 < len(slow) < n  # the slow one got old states, in order


@pytest.mark.slow
def test_a_slow_client_loses_old_messages(dataset):
    """Once the sockets' buffers (megabytes on loopback) are full, the service's queue of 4 messages per
    client drops the slow client's oldest ones: it sees a gap in the frames."""
    n, figures, fast, slow = _slow_client_run(dataset, 3000, until_gap=True)
    assert [s.frame for s in fast] == list(range(n))
    assert slow == sorted(slow)
    assert set(range(max(slow))) - set(slow), f"no state was dropped in {n} frames"


def _push_through_service(dataset, hide) -> tuple:
    """Push 40 frames of ``dataset`` (its last frame repeated) through a service on a :class:`PushSource`, each
    with its mask, emptied where ``hide(k)`` (the robot out of view), waiting for each to be tracked; returns
    the service, the states and the status messages a client received."""
    frames = open_frames(dataset)
    source = PushSource(frames.width, frames.height, 30.0)
    service = TrackingService(source, load_robot("planar-snake-11"), Camera.from_meta(frames.meta), PIPELINE,
                              ServiceConfig(port=0, overlay_hz=0))
    service.start()
    got, statuses = [], []

    def listen():
        with StateClient(service.url) as client:
            for topic, msg, _ in client.messages(timeout=10):
                (got if topic == m.STATE else statuses).append(msg)

    t = threading.Thread(target=listen)
    t.start()
    _wait_subscribed(service, 2)
    images = list(frames.frames())
    for k in range(40):
        _, rgb = images[min(k, N - 1)]
        mask = frames.mask(min(k, N - 1))
        source.push(rgb, np.zeros_like(mask) if hide(k) else mask, t=k / 30)
        while service.frames_tracked + service.errors < k + 1:
            time.sleep(0.002)
    source.stop()
    service.wait(30)
    service.stop()
    t.join()
    return service, got, statuses


def test_the_robot_leaving_the_view_gives_coasting_then_lost_then_reacquisition(dataset):
    _, got, statuses = _push_through_service(dataset, lambda k: 6 <= k < 30)
    status = [s["status"] for s in got]
    assert status[:6] == ["tracked"] * 6
    first_lost = status.index("lost")
    assert "coasting" in status[6:first_lost] and first_lost < 30
    assert status[-1] == "tracked"  # re-acquired once the robot is back
    assert any(s.get("state") == "lost" for s in statuses)


class _DroppingFeed:
    """A live feed of the dataset's frames that drops after 4 frames and answers again on the second reopening."""

    live = True

    def __init__(self, frames):
        self.frames, self.n, self.opens = frames, 0, 0
        self.images = list(frames.frames())
        self.width, self.height, self.fps = frames.width, frames.height, frames.fps

    def read(self):
        from snaketrack.service.capture import Frame, SourceDropped

        if self.n == 4 and self.opens < 2:
            raise SourceDropped("camera: stopped delivering frames")
        if self.n >= 8:
            return None
        i, rgb = self.images[self.n]
        self.n += 1
        time.sleep(0.05)
        return Frame(i, i / 30, rgb, time.time(), self.frames.mask(i))

    def reopen(self):
        self.opens += 1
        return self.opens >= 2

    def release(self):
        pass


def test_a_dropped_source_is_reported_reconnecting_then_tracking_resumes(dataset):
    from snaketrack.service.capture import Backoff

    frames = open_frames(dataset)
    robot = load_robot("planar-snake-11")
    source = Capture(_DroppingFeed(frames), Backoff(first=0.3, longest=0.3))
    service = TrackingService(source, robot, Camera.from_meta(frames.meta), PIPELINE,
                              ServiceConfig(port=0, overlay_hz=0, status_hz=20))
    service.start(capture=False)
    statuses, states = [], []

    def listen():
        with StateClient(service.url) as client:
            for topic, msg, _ in client.messages(timeout=10):
                (states if topic == m.STATE else statuses).append(msg)

    t = threading.Thread(target=listen)
    t.start()
    _wait_subscribed(service, 2)
    service.start_capture()
    assert service.wait(60)
    figures = service.stop()
    t.join()
    assert figures["reconnects"] == 1
    seen = [s["frame"] for s in states]
    assert seen[0] == 0 and seen[-1] == 7  # tracking resumed after the drop (busy: some frames skipped)
    sources = [s["source"] for s in statuses]
    assert "reconnecting" in sources and sources.index("reconnecting") < len(sources) - 1
    assert any(s.get("error", "").startswith("camera: stopped") for s in statuses if s["source"] == "reconnecting")


def test_a_subscribed_client_is_counted_so_that_closing_lets_its_last_messages_out(dataset):
    from snaketrack.service.publisher import Publisher

    frames = open_frames(dataset)
    publisher = Publisher(load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta).K, port=0).start()
    try:
        assert publisher._subscriptions.count == 0
        with StateClient(publisher.url) as client:
            client.connect()
            deadline = time.monotonic() + 10
            while publisher._subscriptions.count == 0 and time.monotonic() < deadline:
                list(client.messages(timeout=0.1))  # reads the channels' advertisement and subscribes
            assert publisher._subscriptions.count >= 1
    finally:
        publisher.close()


def test_closing_with_a_client_connected_ends_its_connection_with_a_handshake(dataset, capfd, caplog):
    """The server stops before the gate in front of it, so a connected client's WebSocket closes with its
    handshake through the gate: the SDK's server reports no connection reset at shutdown."""
    from snaketrack.service.publisher import Publisher

    frames = open_frames(dataset)
    publisher = Publisher(load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta).K, port=0).start()
    client = StateClient(publisher.url).connect()
    try:
        deadline = time.monotonic() + 10
        while publisher._subscriptions.count == 0 and time.monotonic() < deadline:
            list(client.messages(timeout=0.1))
        assert publisher._subscriptions.count >= 1
        publisher.close()
        assert list(client.messages(timeout=5)) == []  # the service closed the connection
    finally:
        client.close()
        publisher.close()
    time.sleep(0.5)  # the server's log of a reset, had there been one (Python's logging or stderr)
    assert "without closing handshake" not in capfd.readouterr().err + caplog.text


def test_a_robot_not_yet_in_view_is_reported_lost_until_it_enters_and_no_frame_is_an_error(dataset):
    enters = 5
    service, got, statuses = _push_through_service(dataset, lambda k: k < enters)
    assert service.errors == 0 and service.frames_tracked == 40
    assert [s["frame"] for s in got] == list(range(enters, 40))  # no pose is published before the robot is seen
    assert all(s["q_1"] is not None and s["base_x"] is not None for s in got) and got[0]["status"] == "tracked"
    assert any(s.get("state") == "lost" and s.get("frame", 40) < enters for s in statuses)


def test_a_short_recording_in_real_time_has_its_first_frame_and_more_tracked_and_every_frame_counted(dataset):
    """Played at its own rate, a recording no longer than a few pose searches: the first frame is tracked
    (the clock waits for its search), later frames are tracked or counted as dropped, none lost between;
    the stages run in threads of their own and stop cleanly."""
    frames = open_frames(dataset)
    service = _service(dataset, ServiceConfig(port=0), realtime=True)
    assert service.source.hold_clock is service.first_tracked
    got = []
    service.start()
    try:
        t = threading.Thread(target=_collect, args=(service.url, got))
        t.start()
        assert service.wait(300)
    finally:
        figures = service.stop()
        t.join(30)
    assert service.clean
    assert figures["frames_captured"] == len(frames)
    assert figures["frames_tracked"] + figures["frames_dropped"] + figures["errors"] == len(frames)
    assert figures["frames_tracked"] >= 2 and figures["errors"] == 0
    assert got and got[0].frame == 0  # the first frame, not skipped while its search ran
    assert [s.frame for s in got] == sorted(s.frame for s in got)  # published in frame order
    assert got[-1].frame == len(frames) - 1  # the last one kept for the tracker
    assert all(s.predicted_time is not None and s.predicted_dt >= 0 for s in got if s.qdot is not None)


def _run_with_client(dataset, topics, config):
    """Serve the dataset at the tracker's pace to one client subscribed to ``topics``; the service and what the
    client got, ``(topic, message)`` in order."""
    service = _service(dataset, config)
    got = []

    def collect():
        with StateClient(service.url, topics=topics) as client:
            got.extend((topic, msg) for topic, msg, _ in client.messages(timeout=60))  # past a slow search

    service.start(capture=False)
    client = threading.Thread(target=collect)
    client.start()
    _wait_subscribed(service, len(topics))
    service.start_capture()
    assert service.wait(120)
    figures = service.stop()
    client.join(30)
    return service, figures, got


@pytest.mark.parametrize("watched", [False, True])
def test_the_overlay_is_drawn_only_while_a_client_subscribes_to_it_and_every_frame_gets_its_state(dataset,
                                                                                                   watched):
    import cv2

    topics = (m.STATE, m.STATUS) + ((m.OVERLAY,) if watched else ())
    service, figures, got = _run_with_client(dataset, topics, ServiceConfig(port=0, overlay_hz=1000.0))
    states = [msg for topic, msg in got if topic == m.STATE]
    assert figures["frames_tracked"] == N and [s["frame"] for s in states] == list(range(N))
    images = [msg for topic, msg in got if topic == m.OVERLAY]
    if not watched:
        assert service.publisher.overlays == 0 and not images
        return
    assert service.publisher.overlays == N and len(images) == N  # at 1000/s: one per tracked frame
    jpeg = images[0][images[0].index(b"\xff\xd8\xff"):]  # the CompressedImage's data field: a JPEG
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None and image.shape[:2] == service.session.size[::-1]


def test_the_first_state_time_runs_from_the_capture_start_to_the_first_publish(dataset):
    service = _service(dataset, ServiceConfig(port=0))
    t0 = time.monotonic()
    service.start()
    assert service.wait(120)
    elapsed = time.monotonic() - t0
    figures = service.stop()
    assert figures["frames_tracked"] == N
    assert 0 < figures["first_state_s"] <= elapsed


def test_the_status_goes_on_while_the_tracker_is_inside_a_frame(dataset):
    """A frame the tracker takes long on (the first frame's pose search on a loaded CPU) does not silence the
    service: the status keeps coming, so a client waiting with a timeout does not give up."""
    frames = open_frames(dataset)
    source = PushSource(frames.width, frames.height, 30.0)
    service = TrackingService(source, load_robot("planar-snake-11"), Camera.from_meta(frames.meta), PIPELINE,
                              ServiceConfig(port=0, overlay_hz=0, status_hz=20.0))
    released, track, threads = threading.Event(), service.session.track, []

    def held_track(*args, **kw):  # the tracker stays inside the frame until the client has heard from it
        threads.append(torch.get_num_threads())
        released.wait(60)
        return track(*args, **kw)

    service.session.track = held_track
    service.start()
    heard, states = [], []

    def listen():
        with StateClient(service.url) as client:
            for topic, msg, _ in client.messages(timeout=60):
                if topic == m.STATE:
                    states.append(msg)
                    return
                if msg["frames_captured"] == 1 and msg["frames_tracked"] == 0:  # while the frame is tracked
                    heard.append(msg)
                    if len(heard) == 3:
                        released.set()

    t = threading.Thread(target=listen)
    t.start()
    try:
        _wait_subscribed(service, 2)
        source.push(frames.frame(0), frames.mask(0))
        t.join(120)
    finally:
        released.set()
        service.stop()
    assert len(heard) >= 3 and [s["frame"] for s in states] == [0]
    assert threads == [torch.get_num_threads()]  # the tracker's thread keeps the process's thread policy
