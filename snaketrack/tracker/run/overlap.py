"""Stages of a run overlapped in threads: read ahead of the tracker, write behind it.

A run has three stages per frame: reading it (decoding, undistorting, segmenting), tracking it, and
writing what was found (CSV rows, the overlay drawn and encoded, a state published). Only the middle
one needs the last frame's result; the others run beside it:

- :class:`ReadAhead` runs an iterator in a thread of its own, ``depth`` items ahead of the consumer
  (frame t+1 read and segmented while frame t is tracked);
- :class:`WriteBehind` calls a function on each item given to it, in a thread of its own, in the
  order given (frame t written while frame t+1 is tracked).

Both keep the order, lose nothing, and raise in the caller's thread what their own thread raised
(at the next item, or at :meth:`close`). Both are context managers; closing a :class:`ReadAhead`
early stops its thread after the item it is on.

>>> with ReadAhead(iter(range(4))) as items:
...     [x * x for x in items]
[0, 1, 4, 9]
>>> got = []
>>> with WriteBehind(got.append) as sink:
...     for x in "abc":
...         sink.put(x)
>>> got
['a', 'b', 'c']
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable, Iterator, Optional

_END = object()


class _Failure:
    """An exception raised in a stage's thread, carried to the caller's."""

    def __init__(self, error: BaseException):
        self.error = error


class ReadAhead:
    """Iterate ``items`` in a thread ``depth`` items ahead (module doc). ``name``: the thread's name."""

    def __init__(self, items: Iterable, depth: int = 1, name: str = "snaketrack-read"):
        if depth < 1:
            raise ValueError(f"depth {depth}; expected at least 1")
        self._items = iter(items)
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _offer(self, item) -> bool:
        """Queue ``item`` unless stopped first; whether it was queued."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._offer(item):
                    return
            self._offer(_END)
        except BaseException as e:  # carried to the consumer, raised there
            self._offer(_Failure(e))

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, _Failure):
            self._done = True
            raise item.error
        return item

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop reading ahead (the thread finishes the item it is on) and wait ``timeout`` [s] (None: until it
        has); whether the thread has ended."""
        self._stop.set()
        self._done = True
        while True:  # a thread blocked on a full queue goes on
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> "ReadAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class WriteBehind:
    """Call ``write(item)`` in a thread for each :meth:`put` item, in order (module doc).

    depth: items queued before :meth:`put` waits (the writer's backlog, bounded). An exception raised by
    ``write`` is raised by the next :meth:`put` or by :meth:`close`; the items after it are not written.
    """

    def __init__(self, write: Callable[[Any], None], depth: int = 4, name: str = "snaketrack-write"):
        if depth < 1:
            raise ValueError(f"depth {depth}; expected at least 1")
        self.write = write
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None  # a write's error not yet raised in the caller
        self._broken = False  # a write raised: nothing more is written
        self._failed = False  # ... and the caller was told
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if self._broken:  # after a failure: drain, write nothing more
                continue
            try:
                self.write(item)
            except BaseException as e:  # raised in the caller's thread
                self._error, self._broken = e, True

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self._failed = True
            raise error

    def put(self, item) -> None:
        """Write ``item`` behind (waits while ``depth`` items are queued); raises an earlier write's error."""
        if self._closed:
            raise ValueError("put on a closed WriteBehind")
        self._raise()
        if self._failed:
            return
        self._queue.put(item)

    def close(self, timeout: Optional[float] = None) -> bool:
        """Write what is queued and end the thread, waiting ``timeout`` [s] (None: until done); raises a
        write's error not yet raised. Whether the thread has ended."""
        if not self._closed:
            self._closed = True
            try:
                self._queue.put(_END, timeout=timeout)
            except queue.Full:  # the writer is stuck on an earlier item: it is left to end alone
                return False
        self._thread.join(timeout)
        self._raise()
        return not self._thread.is_alive()

    def __enter__(self) -> "WriteBehind":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:  # the caller's error wins; what is queued is still written
            try:
                self.close()
            except BaseException:
                pass
