"""Catching up after a slow frame: the prepared frames of the last second, taken at a gap the tracker holds.

A tracker that spends longer than a few frame times on one frame (a pose search: half a second to a
second on two cores) and then takes the newest frame starts that frame's fit from a pose many frames
old. The fit falls below the re-acquisition IoU, the search runs again, the next frame is as far away,
and the tracker does not get back to the source's rate (docs/benchmarks.md, "Live service").
:class:`RecentFrames` keeps the frames prepared meanwhile, up to ``horizon_s`` of source time behind
the newest, and hands the tracker, while it is behind, the frame ``max_gap`` frames after the one it
tracked last: a gap its prediction and its retry after a gap hold (``TrackerConfig.gap_max_frames``).
It tracks its way back to the newest frame, at a fraction of a frame time for each frame it passes
over, rather than searching again. A tracker that is not behind (the newest frame at most ``max_gap``
after its last) gets the newest, as from a one-frame slot. Frames passed over, and frames older than
the horizon, count as dropped.

>>> slot = RecentFrames(max_gap=3, horizon_s=1.0)
>>> for i in range(1, 10):  # frames 1-9 prepared while frame 0 was tracked
...     slot.put(f"frame {i}", i, i / 30)
>>> slot.take(last=0), slot.take(last=3), slot.take(last=6), slot.take(last=9, timeout=0)
('frame 3', 'frame 6', 'frame 9', None)
>>> slot.dropped
6
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any, Optional

from snaketrack.errors import InputError

#: the source time [s] a catch-up step spans by default: the tracker's fit and its retry after a gap hold
#: about this much of the robot's motion (docs/benchmarks.md, "Live service" and "Closed loop")
GAP_S = 0.1


def default_gap(fps: float, most: float) -> int:
    """The catch-up gap [frames] for a source of ``fps`` [1/s]: the whole frames within :data:`GAP_S` of source
    time (a source a tenth of a frame short of it, 29.97 frames/s, counts as 30), at least 1 and at most
    ``most`` (the tracker's ``TrackerConfig.gap_max_frames``, beyond which its retry after a gap does not run).

    >>> [default_gap(fps, most=3) for fps in (30.0, 29.97, 25.0, 15.0, 60.0)]
    [3, 3, 2, 1, 3]
    """
    if not fps > 0:
        raise InputError(f"frame rate {fps!r}; expected a positive number of frames per second")
    return int(min(max(1, int(GAP_S * fps + 0.1)), int(most)))


class RecentFrames:
    """Frames in source order, the newest ``horizon_s`` of source time kept (module doc).

    max_gap: while the tracker is more than this many frames behind the newest, it gets the frame at most this
        many after its last (the latest such one) [frames]; 0: always the newest (a one-frame slot).
    horizon_s: frames more than this older than the newest (source time) are dropped [s].
    ``captured``: frames put. ``dropped``: frames passed over or dropped for age. ``closed``: no more will come.
    """

    def __init__(self, max_gap: int = 3, horizon_s: float = 1.0):
        if int(max_gap) < 0 or not horizon_s >= 0:
            raise InputError(f"catch-up gap {max_gap!r} frames and horizon {horizon_s!r} s; expected both >= 0")
        self.max_gap, self.horizon_s = int(max_gap), float(horizon_s)
        self._cond = threading.Condition()
        self._items: deque[tuple[int, float, Any]] = deque()  # (index, t, item), oldest first
        self.captured = 0
        self.dropped = 0
        self.closed = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def put(self, item: Any, index: int, t: float) -> None:
        """Add frame ``index`` (source order) of source time ``t`` [s]; frames older than the horizon go, and so
        do all those kept when ``t`` or ``index`` runs backwards (a source whose clock restarted)."""
        with self._cond:
            if self._items and (t < self._items[-1][1] or int(index) <= self._items[-1][0]):
                self.dropped += len(self._items)
                self._items.clear()
            self._items.append((int(index), float(t), item))
            self.captured += 1
            while len(self._items) > 1 and (self.max_gap == 0 or self._items[0][1] < t - self.horizon_s):
                self._items.popleft()
                self.dropped += 1
            self._cond.notify_all()

    def take(self, last: Optional[int] = None, timeout: Optional[float] = None) -> Any:
        """The frame for a tracker whose last frame was ``last`` (None: none yet), removed with every frame
        before it; None after ``timeout`` [s] with nothing kept, or once closed and empty."""
        with self._cond:
            if not self._items and not self.closed:
                self._cond.wait(timeout)
            if not self._items:
                return None
            newest = self._items[-1][0]
            k = len(self._items) - 1
            if last is not None and self.max_gap and newest - int(last) > self.max_gap:
                reach = [j for j, (i, _, _) in enumerate(self._items) if i <= int(last) + self.max_gap]
                if reach:  # else the frames within reach are gone: the newest, as without the buffer
                    k = reach[-1]
            for _ in range(k):
                self._items.popleft()
                self.dropped += 1
            item = self._items.popleft()[2]
            self._cond.notify_all()
            return item

    def wait_empty(self) -> None:
        """Wait until every frame kept was taken (or the buffer closed)."""
        with self._cond:
            while self._items and not self.closed:
                self._cond.wait(0.5)

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def discard(self) -> None:
        """Remove every frame kept, counting them as dropped (they will not be taken)."""
        with self._cond:
            self.dropped += len(self._items)
            self._items.clear()
            self._cond.notify_all()
