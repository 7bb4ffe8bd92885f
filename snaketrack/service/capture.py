"""Capture apart from tracking: the newest frame wins.

A camera delivers frames at its own rate whatever the tracker does. The
capture side (:class:`Capture`, a thread over a *feed*, or a
:class:`PushSource` that the caller fills) puts each frame into one
:class:`LatestFrame` slot; the tracker takes the newest frame when it is
ready, and every frame overwritten before it was taken counts as dropped.
Nothing queues up, so the tracker never works on stale frames and memory
stays flat however slow it is.

Feeds:

- :class:`RecordedFeed`: a video file, image folder or dataset, at the
  tracker's pace (no frame skipped) or at its own frame rate (``realtime``,
  as a camera would deliver it), optionally looped;
- :class:`StreamFeed`: a camera or stream URL; a failed read means the stream
  dropped, and :class:`Capture` reopens it with exponential backoff,
  reporting ``reconnecting`` until it is back.
"""
from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from snaketrack.errors import InputError, SnaketrackError, SnaketrackWarning
from snaketrack.service.catch_up import RecentFrames


@dataclass
class Frame:
    """One captured frame.

    index: its number in the source (counting on through loops). t: its source time [s].
    rgb: RGB uint8 (H, W, 3). capture_time: wall-clock time it was captured [s since the epoch].
    mask: the observed mask, bool (H, W), when the source gives one (else the segmenter's).
    up: the world's up direction in the camera frame (3,), when known.
    read: for a frame of a recording not yet read, ``() -> (rgb, mask)`` (``rgb`` is None until then):
        :meth:`loaded` reads it.
    """

    index: int
    t: float
    rgb: Optional[np.ndarray]
    capture_time: float
    mask: Optional[np.ndarray] = None
    up: Optional[np.ndarray] = None
    read: Optional[Callable[[], tuple]] = None

    def loaded(self) -> "Frame":
        """The frame with its pixels and mask read (itself when they are)."""
        if self.read is None:
            return self
        rgb, mask = self.read()
        return replace(self, rgb=rgb, mask=mask, read=None)


class SourceDropped(Exception):
    """A live source stopped delivering frames (the feed may be reopened)."""


class LatestFrame(RecentFrames):
    """A one-frame slot: ``put`` replaces what is there (counting it as dropped), ``take`` waits for a frame.

    ``captured``: frames put. ``dropped``: frames replaced before they were taken.
    ``closed``: no more frames will come (``take`` then returns None at once when empty).
    """

    def __init__(self):
        super().__init__(max_gap=0)

    def put(self, frame: Frame) -> None:
        super().put(frame, frame.index, frame.t)

    def take(self, timeout: Optional[float] = None) -> Optional[Frame]:
        """The newest frame (removed from the slot), or None after ``timeout`` [s] or once closed and empty."""
        return super().take(None, timeout)


class PushSource:
    """Frames pushed by the caller (a simulator, another capture library): ``push`` never blocks.

    width, height: the frames' size [px]. fps: their nominal rate [1/s] (the tracker's motion model).
    """

    def __init__(self, width: int, height: int, fps: float = 30.0):
        self.width, self.height, self.fps = int(width), int(height), float(fps)
        self.slot = LatestFrame()
        self.status = "live"
        self.reconnects = 0
        self._count = 0

    def push(self, rgb: np.ndarray, mask: Optional[np.ndarray] = None, t: Optional[float] = None,
             up: Optional[np.ndarray] = None, index: Optional[int] = None) -> None:
        """Offer one frame: RGB uint8 (H, W, 3), its observed mask bool (H, W) or None, its time [s]
        (default ``index / fps``), the up direction (3,) in the camera frame or None."""
        i = self._count if index is None else int(index)
        self._count = i + 1
        self.slot.put(Frame(i, i / self.fps if t is None else float(t), rgb, time.time(), mask,
                            None if up is None else np.asarray(up, float)))

    def start(self) -> None:
        """Nothing to start: frames arrive through :meth:`push`."""

    def stop(self) -> None:
        """No more frames: the service finishes the one it holds and stops."""
        self.status = "ended"
        self.slot.close()


class RecordedFeed:
    """A recorded source's frames (:func:`snaketrack.datasets.video.open_frames`), with their masks and up.

    masks: ``i -> mask or None`` for source frame ``i`` (None: the segmenter's). up: ``i -> (3,)`` or None.
    realtime: deliver frames at the source's frame rate, as a camera would (the tracker takes the newest);
    without it, at the tracker's pace (each frame waits until the last was taken: none dropped).
    loop: start again at the end (indices and times count on). bounce: with ``loop``, play a folder source
    forward, then backward, and so on: a loop with no jump, for soaks (needs random access, ``frame(i)``).
    max_frames: stop after this many frames (None: the source's end).

    In real time, a folder source's frames are read (image and mask decoded) only when the service's
    preparing stage takes them (:meth:`Frame.loaded`): the frames it skips while busy cost nothing. A frame
    that cannot be read then costs that frame (the service counts it in ``errors``).
    """

    live = False

    def __init__(self, frames, masks: Optional[Callable] = None, up: Optional[Callable] = None,
                 realtime: bool = False, loop: bool = False, max_frames: Optional[int] = None, bounce: bool = False):
        if bounce and not hasattr(frames, "frame"):
            raise InputError(f"{frames.path}: playing back and forth needs a folder of frames, not a video")
        self.bounce = bool(bounce)
        self.source, self.masks, self.up = frames, masks, up
        self.realtime, self.loop, self.max_frames = bool(realtime), bool(loop), max_frames
        self.fps, self.width, self.height = frames.fps, frames.width, frames.height
        self._iter = None
        self._n = 0
        self._offset = 0
        self._t0: Optional[float] = None

    def read(self) -> Optional[Frame]:
        """The next frame, or None at the end."""
        if self.max_frames is not None and self._n >= self.max_frames:
            return None
        if self._iter is None:
            self._iter = self._bounced() if self.bounce and self.loop else \
                self._indices() if self._lazy else self.source.frames()
        item = next(self._iter, None)
        if item is None:
            if not self.loop or self._n == 0:
                return None
            self._offset = self._n
            self._iter = self._indices() if self._lazy else self.source.frames()
            item = next(self._iter, None)
            if item is None:
                return None
        i, rgb, *source_index = item
        index = self._offset + i
        i = source_index[0] if source_index else i
        t = index / self.fps
        if self.realtime:
            now = time.monotonic()
            if self._t0 is None:
                self._t0 = now - t
            wait = self._t0 + t - now
            if wait > 0:
                time.sleep(wait)
        self._n += 1
        up = self.up(i) if self.up is not None else None
        if rgb is None:  # read when taken
            return Frame(index, t, None, time.time(), None, up, read=lambda i=i: self._read(i))
        mask = self.masks(i) if self.masks is not None else None
        return Frame(index, t, rgb, time.time(), mask, up)

    @property
    def _lazy(self) -> bool:
        return self.realtime and hasattr(self.source, "frame")

    def _read(self, i: int) -> tuple:
        """Source frame ``i``'s RGB (checked against the source's size) and mask."""
        rgb = self.source.frame(i)
        if rgb.shape[:2] != (self.height, self.width):
            raise InputError(f"frame {i}: size {rgb.shape[1]}x{rgb.shape[0]}; expected {self.width}x{self.height}")
        return rgb, self.masks(i) if self.masks is not None else None

    def _indices(self):
        for i in range(len(self.source)):
            yield i, None

    def _bounced(self):
        n = len(self.source)
        period = max(2 * n - 2, 1)
        k = 0
        while True:
            i = k % period
            i = i if i < n else period - i
            yield k, None if self._lazy else self.source.frame(i), i
            k += 1

    def restart_clock(self) -> None:
        """With ``realtime``, the next frame is delivered at once and the later ones at the frame rate from it."""
        self._t0 = None

    def reopen(self) -> bool:
        return False

    def release(self) -> None:
        self._iter = None


class StreamFeed:
    """A live stream's frames (:class:`snaketrack.datasets.video.StreamSource`); a failed read raises
    :class:`SourceDropped`. Frame times are wall-clock seconds since the stream was opened."""

    live = True

    def __init__(self, stream):
        self.stream = stream
        self.fps, self.width, self.height = stream.fps, stream.width, stream.height
        self._n = 0
        self._t0 = time.time()

    def read(self) -> Optional[Frame]:
        rgb = self.stream.read()
        if rgb is None:
            raise SourceDropped(f"{self.stream.spec}: the stream stopped delivering frames")
        now = time.time()
        frame = Frame(self._n, now - self._t0, rgb, now)
        self._n += 1
        return frame

    def reopen(self) -> bool:
        return self.stream.reopen()

    def release(self) -> None:
        self.stream.release()


@dataclass(frozen=True)
class Backoff:
    """Reconnection delays [s]: ``first``, doubling up to ``longest``."""

    first: float = 0.25
    longest: float = 5.0

    def delays(self):
        d = self.first
        while True:
            yield d
            d = min(2 * d, self.longest)


class Capture:
    """A thread that reads a feed into a :class:`LatestFrame` slot, reconnecting a dropped live feed.

    ``status``: ``live``, ``reconnecting`` or ``ended``; ``reconnects``: successful reopenings;
    ``failed``: frames the feed could not give (an unreadable image or mask of a recording), each skipped
    with a warning, ``error`` the last such reason; after ``max_failed_in_a_row`` of them in a row the
    capture ends.
    ``paced``: a recorded feed not played in real time waits for the tracker (nothing dropped).
    ``on_status(status)`` is called on each change (the service publishes it).
    ``hold_clock``: an event; a recorded feed played in real time delivers its first frame, waits for the
    event (the service sets it once that frame is tracked, its pose search done), then restarts its clock
    (``RecordedFeed.restart_clock``), so that the first frame's search does not skip the recording's
    start. None (default): no wait.
    """

    max_failed_in_a_row = 25

    def __init__(self, feed, backoff: Backoff = Backoff(), on_status: Optional[Callable[[str], None]] = None):
        self.feed, self.backoff, self.on_status = feed, backoff, on_status
        self.width, self.height, self.fps = feed.width, feed.height, feed.fps
        self.slot = LatestFrame()
        self.status = "live"
        self.reconnects = 0
        self.failed = 0
        self.error: Optional[str] = None
        self.paced = not feed.live and not getattr(feed, "realtime", False)
        self.hold_clock: Optional[threading.Event] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snaketrack-capture", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.slot.close()  # a paced capture waiting for the tracker goes on
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _set(self, status: str) -> None:
        if status != self.status:
            self.status = status
            if self.on_status is not None:
                self.on_status(status)

    def _hold(self) -> bool:
        """After the first frame of a recording played in real time: wait for ``hold_clock``, then restart
        the feed's clock (class doc). Whether it waited."""
        if self.hold_clock is None or not getattr(self.feed, "realtime", False):
            return False
        while not self.hold_clock.wait(0.1):
            if self._stop.is_set():
                return False
        self.feed.restart_clock()
        return True

    def _run(self) -> None:
        in_a_row = 0
        held = None  # whether the clock was held after the first frame; None: not yet asked
        try:
            while not self._stop.is_set():
                if self.paced:
                    self.slot.wait_empty()
                try:
                    frame = self.feed.read()
                except SourceDropped as e:
                    self.error = str(e)
                    if not self._reconnect():
                        break
                    continue
                except SnaketrackError as e:  # a bad frame of a recording costs that frame, not the service
                    self.failed += 1
                    in_a_row += 1
                    self.error = str(e)
                    warnings.warn(f"frame skipped: {e}", SnaketrackWarning, stacklevel=2)
                    if in_a_row >= self.max_failed_in_a_row:
                        self.error = f"{in_a_row} frames in a row unreadable, capture ended; the last: {e}"
                        warnings.warn(self.error, SnaketrackWarning, stacklevel=2)
                        break
                    continue
                in_a_row = 0
                if frame is None:
                    break
                self.slot.put(frame)
                if held is None and hasattr(self.feed, "restart_clock"):
                    held = self._hold()
        finally:
            self.feed.release()
            self._set("ended")
            self.slot.close()

    def _reconnect(self) -> bool:
        """Reopen the feed with backoff until it answers or the capture is stopped."""
        self._set("reconnecting")
        for delay in self.backoff.delays():
            if self._stop.wait(delay):
                return False
            if self.feed.reopen():
                self.reconnects += 1
                self.error = None
                self._set("live")
                return True
        return False  # pragma: no cover - the delays never end
