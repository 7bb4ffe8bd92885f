"""The live tracking service: frames in, robot states out to every connected client.

:class:`TrackingService` joins a frame source (:mod:`snaketrack.service.capture`:
a camera, a stream, a recorded file, or frames pushed by the caller), one
:class:`~snaketrack.tracker.run.pipeline.TrackingSession` and a
:class:`~snaketrack.service.publisher.Publisher` (Foxglove WebSocket and
MCAP). The stages overlap, each in a thread of its own: capture; preparing
(undistorting, resizing and segmenting the newest captured frame,
:meth:`~snaketrack.tracker.run.pipeline.TrackingSession.prepare`); tracking (the
newest prepared frame); publishing (each tracked state, its overlay and
forecast, in order, :class:`~snaketrack.tracker.run.overlap.WriteBehind`); the
status (at least ``status_hz`` a second, also while the tracker is inside a
long frame); and the SDK's server. Between capture and preparing one slot holds the newest frame
(:class:`~snaketrack.service.capture.LatestFrame`); between preparing and tracking the frames of the
last second wait (:class:`~snaketrack.service.catch_up.RecentFrames`): the tracker takes the newest, or,
after a slow frame, every third frame on its way back to the newest. A frame replaced or passed over
before it was taken counts as dropped. ``snaketrack serve``
runs one.

Stopping (:meth:`TrackingService.stop`) takes at most ``stop_timeout_s``: the
threads are told to end after the frame they are on and waited for until
then; the recording is closed in any case. A frame the tracker is still on
then (a search on a loaded CPU) is abandoned: :attr:`TrackingService.clean`
says whether every thread ended.

>>> from snaketrack.service import PushSource, ServiceConfig
>>> ServiceConfig().host, ServiceConfig().port
('127.0.0.1', 8765)
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from snaketrack.errors import InputError
from snaketrack.service.catch_up import RecentFrames, default_gap
from snaketrack.service.publisher import LOOPBACK, Publisher
from snaketrack.tracker.config import TrackerConfig
from snaketrack.tracker.run.overlap import WriteBehind
from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession


@dataclass(frozen=True)
class ServiceConfig:
    """Where and how the service publishes.

    host, port: where clients connect (port 0: any free one). Default 127.0.0.1:8765.
    token: clients must present it (``Authorization: Bearer`` or ``?token=``); required off the loopback.
    record: an MCAP file to record every published message to (must not exist); None: no recording.
    client_queue: messages queued per client before its oldest are dropped. Default 256.
    overlay_hz: the most overlay images published per second [1/s]; 0: none. Default 5.
    status_hz: how often the status is published while nothing changes [1/s]; a change of the tracking
        state (tracking, coasting, lost) or of the source is published at once. Default 2.
    catch_up_gap, catch_up_s: after a slow frame (a pose search) the tracker catches up through the frames
        prepared meanwhile, taking every ``catch_up_gap``-th [frames], those at most ``catch_up_s`` behind the
        newest [s] (:mod:`snaketrack.service.catch_up`); gap 0: always the newest frame. Default None, the frames
        within 0.1 s of source time (:func:`~snaketrack.service.catch_up.default_gap`: 3 at 30 frames/s, 1 at
        15), and 1 s.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    token: Optional[str] = None
    record: Optional[str] = None
    client_queue: int = 256
    overlay_hz: float = 5.0
    status_hz: float = 2.0
    catch_up_gap: Optional[int] = None
    catch_up_s: float = 1.0

    def __post_init__(self):
        if self.host not in LOOPBACK and not self.token:
            raise InputError(f"--host {self.host}: serving beyond this machine needs a token (--token-file FILE)")
        if not 0 <= int(self.port) <= 65535:
            raise InputError(f"--port {self.port}; expected 0..65535")
        if self.client_queue < 1:
            raise InputError(f"--client-queue {self.client_queue}; expected a positive number of messages")
        if self.overlay_hz < 0 or self.status_hz <= 0:
            raise InputError("overlay_hz must be >= 0 and status_hz > 0 [1/s]")
        if (self.catch_up_gap is not None and int(self.catch_up_gap) < 0) or not self.catch_up_s >= 0:
            raise InputError(f"--catch-up-gap {self.catch_up_gap} and --catch-up-s {self.catch_up_s}; expected both "
                             ">= 0")


class TrackingService:
    """Track a live source and publish each frame's state (module doc).

    source: a :class:`~snaketrack.service.capture.PushSource` or
        :class:`~snaketrack.service.capture.Capture` (anything with ``slot``, ``start``, ``stop``,
        ``status``, ``reconnects``, ``width``, ``height``, ``fps``).
    robot, camera: the tracked :class:`~snaketrack.models.robot.Robot` and the source's
        :class:`~snaketrack.tracker.calib.camera.Camera`.
    pipeline: the session's :class:`PipelineConfig`; its ``hold_frames`` is set to 0 (a live
        service publishes each frame as it is tracked).
    config: a :class:`ServiceConfig`. segmenter: predicts masks for frames that come without one.

    ``start()``, then ``wait()`` until the source ends (or ``stop()`` from another thread or a
    signal handler); ``stop()`` returns the run's figures (:meth:`figures`).
    """

    def __init__(self, source, robot, camera, pipeline: PipelineConfig = PipelineConfig(),
                 config: ServiceConfig = ServiceConfig(), segmenter: Any = None, stop_timeout_s: float = 3.0):
        self.source, self.robot, self.config = source, robot, config
        if (camera.width, camera.height) != (source.width, source.height):
            raise InputError(f"camera of {camera.width}x{camera.height} px; the source's frames are "
                             f"{source.width}x{source.height}")
        self.session = TrackingSession(robot, camera, source.fps, replace(pipeline, hold_frames=0),
                                       segmenter=segmenter)
        self.publisher = Publisher(robot, self.session.camera.K, config.host, config.port, config.token,
                                   config.record, config.client_queue, config.overlay_hz)
        self.stop_timeout_s = float(stop_timeout_s)
        self.latencies_ms: deque[float] = deque(maxlen=100_000)
        self.frames_tracked = 0
        self.errors = 0
        self.last_error: Optional[str] = None
        self.state = "waiting"
        self.clean = True  # every thread ended when stopped
        self.first_tracked = threading.Event()  # the first frame is tracked (its search done)
        self.first_state_s: Optional[float] = None  # from the capture's start to the first state published [s]
        self._capture_started: Optional[float] = None
        gap = (default_gap(source.fps, TrackerConfig.gap_max_frames) if config.catch_up_gap is None
               else config.catch_up_gap)
        self.prepared = RecentFrames(gap, config.catch_up_s)  # prepared, waiting for the tracker
        self._last_index: Optional[int] = None  # the frame tracked last
        self._paced = bool(getattr(source, "paced", False))  # a recording at the tracker's pace: nothing dropped
        self._last: dict[str, Any] = {}
        self._stop = threading.Event()
        self._done = threading.Event()
        self._prepare_thread = threading.Thread(target=self._prepare_loop, name="snaketrack-prepare", daemon=True)
        self._thread = threading.Thread(target=self._run, name="snaketrack-track", daemon=True)
        self._status_thread = threading.Thread(target=self._status_loop, name="snaketrack-status", daemon=True)
        self._last_status = time.monotonic()
        self._behind = None
        self._started = self._stopped = False
        self._figures: Optional[dict] = None
        if hasattr(source, "on_status") and source.on_status is None:  # a dropped camera is told at once,
            source.on_status = self._source_status                      # even while the tracker is busy
        if hasattr(source, "hold_clock") and source.hold_clock is None:  # a recording played in real time
            source.hold_clock = self.first_tracked                       # starts its clock after the first frame

    # -- lifetime ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Where clients connect, ``ws://HOST:PORT``."""
        return self.publisher.url

    @property
    def port(self) -> int:
        return self.publisher.port

    def start(self, capture: bool = True) -> "TrackingService":
        """Start the server and the preparing, tracking and publishing threads, and the capture unless
        ``capture`` is False (then :meth:`start_capture` starts it, e.g. once the clients are connected).
        The capture and the preparing stage start before the tracker is built, so that the first frame is
        read and prepared (segmented) meanwhile."""
        self.publisher.start()
        self._started = True
        self._publish_status()
        self._behind = WriteBehind(self._publish, depth=8, name="snaketrack-publish")
        self._prepare_thread.start()
        if capture:
            self.start_capture()
        try:
            self.session.start()
        except BaseException:  # nothing left running
            self._stop.set()
            self.prepared.close()
            self.source.stop()
            self._behind.close(self.stop_timeout_s)
            self.publisher.close()
            self._stopped = True
            raise
        self._thread.start()
        self._status_thread.start()
        return self

    def start_capture(self) -> None:
        self._capture_started = time.monotonic()
        self.source.start()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the source has ended and its last frame is published (True), or ``timeout`` [s]."""
        return self._done.wait(timeout)

    def stop(self) -> dict:
        """Stop capture and tracking, close the server and finish the MCAP, within ``stop_timeout_s``
        (module doc); the run's figures."""
        if self._stopped:
            return self._figures
        self._stopped = True
        deadline = time.monotonic() + self.stop_timeout_s
        self._stop.set()
        self.prepared.close()
        stop_source = threading.Thread(target=self.source.stop, name="snaketrack-stop-capture", daemon=True)
        stop_source.start()  # a capture blocked in a read must not hold the rest up
        if self._started:
            for thread in (self._prepare_thread, self._thread, self._status_thread):
                thread.join(max(0.0, deadline - time.monotonic()))
            # the publisher is closed only behind an ended tracker: one still inside a frame would put to it
            self.clean = not self._thread.is_alive() and not self._prepare_thread.is_alive() and \
                self._behind.close(max(0.0, deadline - time.monotonic()))
            self.state = "ended"
            self._publish_status()
        stop_source.join(max(0.0, deadline - time.monotonic()))
        self.clean = self.clean and not stop_source.is_alive()
        if not self._prepare_thread.is_alive():  # frames left in the slots were never tracked: dropped
            self.source.slot.discard()
            self.prepared.discard()
        self.publisher.close()
        self._figures = self.figures()
        return self._figures

    # -- the stages ---------------------------------------------------------------------------
    def _prepare_loop(self) -> None:
        """Take the newest captured frame, prepare it (undistort, resize, segment) and offer it to the tracker."""
        slot = self.source.slot
        try:
            while not self._stop.is_set():
                frame = slot.take(timeout=0.5)
                if frame is None:
                    if slot.closed:
                        break
                    continue
                try:
                    frame = frame.loaded()
                    prepared = self.session.prepare(frame.rgb, frame.mask, frame.index, up=frame.up)
                except Exception as e:  # a bad frame costs that frame, not the service
                    self._fail(frame, e)
                    continue
                if self._paced:
                    self.prepared.wait_empty()
                self.prepared.put((frame, prepared), frame.index, frame.t)
        finally:
            self.prepared.close()

    def _run(self) -> None:
        period = 1.0 / self.config.status_hz
        try:
            while not self._stop.is_set():
                item = self.prepared.take(self._last_index, timeout=period)
                if item is None:
                    if self.prepared.closed:
                        break
                    if self.source.status != "live":
                        self.state = self.source.status
                    continue
                before = self.state
                self._last_index = item[0].index
                self._track(*item)
                if self.state != before:  # a change is told at once
                    self._publish_status()
        finally:
            self.first_tracked.set()  # a recording's clock is not held by a tracker that has ended
            if self._behind is not None:
                self._behind.put(None)  # the done marker, after the last state
            else:
                self._done.set()

    def _fail(self, frame, e: Exception) -> None:
        self.first_tracked.set()  # a frame that failed does not hold a recording's clock
        self.errors += 1
        self.last_error = f"frame {frame.index}: {e}"
        self._publish_status()

    def _track(self, frame, prepared) -> None:
        try:
            results = self.session.track(prepared, up=frame.up, t=frame.t)
        except Exception as e:  # a bad frame costs that frame, not the service
            self._fail(frame, e)
            return
        self.first_tracked.set()
        settled = self.session.reading_settled
        for r in results:
            self.frames_tracked += 1
            self.state = {"tracked": "tracking"}.get(r.status, r.status)
            if not r.state.has_pose:  # the robot not yet seen: no pose to publish, the status says lost
                self._last = {"frame": r.index}
                continue
            self._behind.put((r, frame.capture_time, frame.up, settled))

    def _publish(self, item) -> None:
        """Publish one tracked frame (the publishing thread); None: the last one was."""
        if item is None:
            self._done.set()
            return
        r, capture_time, up, settled = item
        try:
            latency = self.publisher.publish(r, capture_time, up, settled)
        except Exception as e:  # a failed publish costs that state, not the service
            self.errors += 1
            self.last_error = f"frame {r.index}: publishing: {e}"
            return
        self.latencies_ms.append(latency)
        if self.first_state_s is None and self._capture_started is not None:
            self.first_state_s = time.monotonic() - self._capture_started
        self._last = {"frame": r.index, "iou": float(r.state.iou), "latency_ms": latency}

    def _source_status(self, status: str) -> None:
        if self._started and not self._stopped:
            self._publish_status()

    def _status_loop(self) -> None:
        """Publish the status whenever ``1 / status_hz`` has passed without one, the tracker busy or not (a
        pose search of seconds does not silence the service), until the source's last frame is published."""
        period = 1.0 / self.config.status_hz
        while not self._stop.wait(max(0.01, self._last_status + period - time.monotonic())):
            if self._done.is_set():
                return
            if time.monotonic() - self._last_status >= period:
                self._publish_status()

    def _publish_status(self) -> None:
        self._last_status = time.monotonic()
        fields = dict(state=self.state, source=self.source.status, frames_captured=self.source.slot.captured,
                      frames_tracked=self.frames_tracked, frames_dropped=self.frames_dropped,
                      reconnects=self.source.reconnects, **self._last)
        error = self.last_error or getattr(self.source, "error", None)
        if error:
            fields["error"] = error
        self.publisher.status(**fields)

    @property
    def frames_dropped(self) -> int:
        """Frames replaced before they were taken, by the preparing stage or by the tracker, and frames left
        in their slots when the service stopped."""
        return self.source.slot.dropped + self.prepared.dropped

    def figures(self) -> dict:
        """``frames_captured``, ``frames_tracked``, ``frames_dropped``, ``reconnects``, ``errors`` (frames the
        tracker failed on and frames the source could not give),
        ``track_fps`` (the tracker's own rate, searches included [1/s]), ``first_state_s`` (from the
        capture's start to the first state published [s]: the first frame read and prepared, its pose searched
        and published; None before), the capture-to-publish latency percentiles ``latency_ms_p50/p95/max``
        and ``catch_up_gap`` (the catch-up's gap in use [frames])."""
        lat = np.asarray(self.latencies_ms, float)
        pct = (lambda p: float(np.percentile(lat, p))) if lat.size else (lambda p: float("nan"))
        return {"frames_captured": self.source.slot.captured, "frames_tracked": self.frames_tracked,
                "frames_dropped": self.frames_dropped, "reconnects": self.source.reconnects,
                "errors": self.errors + getattr(self.source, "failed", 0),
                "track_fps": self.frames_tracked / self.session.track_time_s if self.session.track_time_s else 0.0,
                "first_state_s": self.first_state_s,
                "latency_ms_p50": pct(50), "latency_ms_p95": pct(95),
                "latency_ms_max": float(lat.max()) if lat.size else float("nan"),
                "catch_up_gap": self.prepared.max_gap}
