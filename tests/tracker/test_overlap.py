"""ReadAhead and WriteBehind: items in order, none lost, errors raised in the caller's thread, a clean close;
and ``track``'s stages on those threads."""
import itertools
import threading

import numpy as np
import pytest

from snaketrack.tracker.run.overlap import ReadAhead, WriteBehind


def test_read_ahead_keeps_the_order_and_reads_in_a_thread_of_its_own():
    threads = []

    def items():
        for i in range(50):
            threads.append(threading.current_thread().name)
            yield i

    with ReadAhead(items(), depth=3) as reader:
        assert list(reader) == list(range(50))
    assert set(threads) == {"snaketrack-read"}


def test_read_ahead_runs_ahead_of_the_consumer():
    """While the consumer holds item 0, the reader has read item 1 (and no further than its depth)."""
    read = []
    ahead = threading.Event()

    def items():
        for i in range(5):
            read.append(i)
            if i == 1:
                ahead.set()
            yield i

    with ReadAhead(items(), depth=1) as reader:
        assert next(reader) == 0
        assert ahead.wait(30)  # item 1 read while item 0 is with the consumer
        assert list(reader) == [1, 2, 3, 4]
    assert read == [0, 1, 2, 3, 4]


def test_an_error_in_the_reader_is_raised_after_the_items_before_it():
    def items():
        yield 0
        yield 1
        raise KeyError("frame 2 unreadable")

    got = []
    with pytest.raises(KeyError, match="frame 2"):
        with ReadAhead(items()) as reader:
            for x in reader:
                got.append(x)
    assert got == [0, 1]


def test_closing_a_read_ahead_early_ends_its_thread():
    counter = itertools.count()
    reader = ReadAhead(counter, depth=2)
    assert [next(reader) for _ in range(3)] == [0, 1, 2]
    assert reader.close(timeout=30)
    assert list(reader) == []  # closed: nothing more
    assert next(counter) <= 3 + 2 + 1  # it stopped within its depth of the consumer


def test_write_behind_writes_every_item_in_order_in_its_own_thread():
    got, names = [], set()

    def write(x):
        names.add(threading.current_thread().name)
        got.append(x)

    with WriteBehind(write, depth=2) as sink:
        for i in range(100):
            sink.put(i)
    assert got == list(range(100)) and names == {"snaketrack-write"}


def test_a_write_error_is_raised_in_the_caller_and_nothing_after_it_is_written():
    got = []
    failed = threading.Event()

    def write(x):
        if x == 3:
            failed.set()
            raise OSError("disk full")
        got.append(x)

    sink = WriteBehind(write, depth=1)
    with pytest.raises(OSError, match="disk full"):
        for i in range(10):
            if failed.is_set():
                failed.wait()
            sink.put(i)
        sink.close()
    sink.put(99)  # after the error was raised: ignored, not written
    assert sink.close(timeout=30)
    assert got == [0, 1, 2]


def test_an_error_in_a_write_is_raised_by_close():
    def write(x):
        raise ValueError(f"bad row {x}")

    sink = WriteBehind(write)
    sink.put(7)
    with pytest.raises(ValueError, match="bad row 7"):
        sink.close()


def test_track_reads_and_segments_ahead_and_writes_behind_the_tracker(tmp_path, monkeypatch):
    """In ``track``: the segmenter runs in the reading thread, the rows are written in the writing thread,
    the tracker in the caller's; the rows in frame order, one per frame."""
    from snaketrack.io import read_csv_columns
    from snaketrack.tracker.run import outputs
    from snaketrack.tracker.run.loop import RunOptions, track_source
    from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession

    from posed_dataset import write_posed_dataset

    ds = write_posed_dataset(tmp_path / "ds", 3, seed=1)
    where: dict[str, set] = {"segment": set(), "track": set(), "write": set()}

    class Segmenter:  # the dataset's own masks, as a segmenter would give them
        def __init__(self):
            from snaketrack.datasets.video import open_frames

            self.frames = open_frames(ds)
            self.k = 0

        def predict(self, rgb):
            where["segment"].add(threading.current_thread().name)
            m = self.frames.mask(self.k)
            self.k += 1
            return m

    track = TrackingSession.track
    monkeypatch.setattr(TrackingSession, "track",
                        lambda self, *a, **kw: where["track"].add(threading.current_thread().name) or
                        track(self, *a, **kw))
    write = outputs.TrackWriter.write
    monkeypatch.setattr(outputs.TrackWriter, "write",
                        lambda self, row: where["write"].add(threading.current_thread().name) or write(self, row))
    import snaketrack.tracker.run.loop as run

    monkeypatch.setattr(run, "open_segmenter", lambda spec, *a, **kw: Segmenter())
    model = tmp_path / "m.pt"
    model.write_bytes(b"")
    track_source(ds, tmp_path / "out", masks=f"segmenter:{model}", config=PipelineConfig(hold_frames=0,
                 refine_steps=1), options=RunOptions(video=False, plots=False, progress=False))
    rows = read_csv_columns(tmp_path / "out" / "track.csv")
    assert list(rows["frame"]) == list(range(3)) and np.all(np.isfinite(rows["base_x"]))
    assert where["segment"] == {"snaketrack-read"}
    assert where["track"] == {threading.current_thread().name}
    assert where["write"] == {"snaketrack-write"}
