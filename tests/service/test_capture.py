"""Capture apart from tracking: the newest frame wins, a paced file drops nothing, a dropped stream
is reopened with backoff (a real MJPEG stream over HTTP on the loopback that fails and returns)."""
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np
import pytest

from snaketrack.datasets.video import StreamSource, open_frames
from snaketrack.errors import InputError
from snaketrack.service.capture import Backoff, Capture, Frame, LatestFrame, RecordedFeed, SourceDropped, StreamFeed


def _frame(i):
    return Frame(i, i / 30, np.zeros((2, 2, 3), np.uint8), time.time())


def test_latest_frame_keeps_the_newest_and_counts_the_overwritten():
    slot = LatestFrame()
    for i in range(5):
        slot.put(_frame(i))
    assert slot.take(0).index == 4
    assert (slot.captured, slot.dropped) == (5, 4)
    assert slot.take(0.01) is None
    slot.put(_frame(5))
    slot.close()
    assert slot.take(0).index == 5  # closing keeps the last frame for the tracker
    assert slot.take(10) is None  # closed and empty: at once


def test_a_recorded_source_at_the_trackers_pace_drops_nothing_and_loops(tmp_path):
    for i in range(4):
        cv2.imwrite(str(tmp_path / f"{i:03d}.png"), np.full((4, 6, 3), i, np.uint8))
    frames = open_frames(tmp_path)
    cap = Capture(RecordedFeed(frames, loop=True, max_frames=10))
    assert cap.paced
    cap.start()
    got = []
    while True:
        f = cap.slot.take(5)
        if f is None:
            break
        time.sleep(0.005)  # a slow tracker
        got.append((f.index, int(f.rgb[0, 0, 0])))
    cap.stop()
    assert got == [(i, i % 4) for i in range(10)]  # indices count on through the loop
    assert cap.slot.dropped == 0 and cap.status == "ended"


class _FlakyFeed:
    """A live feed that drops after 3 frames and answers again on the second reopening."""

    live = True
    width, height, fps = 6, 4, 30.0

    def __init__(self):
        self.n, self.opens = 0, 0

    def read(self):
        if self.n == 3 and self.opens < 2:
            raise SourceDropped("flaky: stopped")
        if self.n >= 6:
            return None
        self.n += 1
        return _frame(self.n - 1)

    def reopen(self):
        self.opens += 1
        return self.opens >= 2

    def release(self):
        pass


def test_a_dropped_live_feed_reconnects_with_backoff_and_reports_it():
    seen = []
    cap = Capture(_FlakyFeed(), Backoff(first=0.01, longest=0.02), on_status=seen.append)
    cap.start()
    indices = []
    while (f := cap.slot.take(5)) is not None:
        indices.append(f.index)
    cap.stop()
    assert seen == ["reconnecting", "live", "ended"]
    assert cap.reconnects == 1 and cap.feed.opens == 2
    assert indices[-1] == 5


class _MJPEG(BaseHTTPRequestHandler):
    """An MJPEG camera over HTTP: each connection streams ``frames`` frames, then the stream drops; while
    ``down`` is set, connections are refused with 503."""

    frames = 15
    down = threading.Event()

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.down.is_set():
            self.send_error(503)
            return
        self.send_response(200)
        self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
        self.end_headers()
        for i in range(self.frames):
            ok, jpg = cv2.imencode(".jpg", np.full((48, 64, 3), 8 * i, np.uint8))
            try:
                self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(jpg)
                                 + jpg.tobytes() + b"\r\n")
            except OSError:
                return
            time.sleep(0.01)


@pytest.fixture
def mjpeg_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MJPEG)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/stream.mjpg"
    server.shutdown()
    server.server_close()


def test_a_real_stream_that_drops_is_reopened_when_it_returns(mjpeg_server):
    stream = StreamSource(mjpeg_server, timeout_s=3)
    assert (stream.width, stream.height) == (64, 48)
    seen = []
    _MJPEG.down.clear()
    cap = Capture(StreamFeed(stream), Backoff(first=0.05, longest=0.2), on_status=seen.append)

    def fail_then_return(status):
        seen.append(status)
        if status == "reconnecting" and seen.count("reconnecting") == 1:
            _MJPEG.down.set()  # the camera is away for a while, then back
            threading.Timer(0.5, _MJPEG.down.clear).start()

    cap.on_status = fail_then_return
    cap.start()
    frames = 0
    deadline = time.monotonic() + 20
    while cap.reconnects < 1 and time.monotonic() < deadline:
        if cap.slot.take(0.2) is not None:
            frames += 1
    after = 0
    while after < 3 and time.monotonic() < deadline:
        if cap.slot.take(0.2) is not None:
            after += 1
    cap.stop()
    assert seen[:2] == ["reconnecting", "live"]
    assert cap.reconnects >= 1 and frames > 0 and after == 3


def test_a_stream_nobody_answers_is_a_one_line_error():
    with pytest.raises(InputError, match="no stream answered"):
        StreamSource("http://127.0.0.1:9/none", timeout_s=1)


def test_a_recording_in_real_time_holds_its_clock_until_the_first_frame_is_tracked(tmp_path):
    """The second frame comes only once the first is tracked (its search done), then the clock runs
    from there: the first frame's search does not skip the start of a short recording."""
    for i in range(4):
        cv2.imwrite(str(tmp_path / f"{i:03d}.png"), np.full((4, 6, 3), i, np.uint8))
    frames = open_frames(tmp_path)
    tracked = threading.Event()
    cap = Capture(RecordedFeed(frames, realtime=True))
    cap.hold_clock = tracked
    cap.start()
    first = cap.slot.take(30)
    assert first.index == 0
    assert cap.slot.take(0.3) is None  # held: no second frame while the first is being tracked
    told = time.time()
    tracked.set()
    second = cap.slot.take(30)
    assert second.index == 1 and second.capture_time >= told
    rest = []
    while (f := cap.slot.take(5)) is not None:
        rest.append(f.index)
    cap.stop()
    assert rest[-1] == 3 and cap.slot.captured == 4


def test_a_recording_in_real_time_without_a_hold_does_not_wait(tmp_path):
    for i in range(3):
        cv2.imwrite(str(tmp_path / f"{i:03d}.png"), np.full((4, 6, 3), i, np.uint8))
    cap = Capture(RecordedFeed(open_frames(tmp_path), realtime=True))
    cap.start()
    cap._thread.join(30)  # nobody takes the frames: it plays on regardless
    assert cap.status == "ended" and cap.slot.captured == 3 and cap.slot.take(0).index == 2


@pytest.mark.parametrize("realtime", [True, False])
def test_a_recording_in_real_time_reads_only_the_frames_taken_and_at_its_pace_reads_each(tmp_path, realtime):
    for i in range(5):
        cv2.imwrite(str(tmp_path / f"{i:03d}.png"), np.full((4, 6, 3), 10 * i, np.uint8))
    frames = open_frames(tmp_path)
    reads, read_frame = [], frames.frame
    frames.frame = lambda i: reads.append(i) or read_frame(i)
    masks = []
    cap = Capture(RecordedFeed(frames, masks=lambda i: masks.append(i) or np.full((4, 6), i % 2 == 0),
                               realtime=realtime))
    cap.start()
    taken = []
    if realtime:
        cap._thread.join(30)  # nobody takes the frames while it plays: four are skipped unread
        assert cap.slot.captured == 5 and cap.slot.dropped == 4 and reads == [] and masks == []
        taken.append(cap.slot.take(0))
    else:  # each frame waits for the last to be taken, read as it is delivered
        while (f := cap.slot.take(5)) is not None:
            assert f.read is None and f.rgb is not None
            taken.append(f)
    cap.stop()
    got = [f.loaded() for f in taken]
    assert [f.index for f in got] == ([4] if realtime else list(range(5)))
    assert reads == masks == [f.index for f in got]
    for f in got:  # the pixels and the mask as the files hold them
        np.testing.assert_array_equal(f.rgb, cv2.imread(str(tmp_path / f"{f.index:03d}.png"))[..., ::-1])
        np.testing.assert_array_equal(f.mask, np.full((4, 6), f.index % 2 == 0))
