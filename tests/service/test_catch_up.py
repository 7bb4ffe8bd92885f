"""Catching up after a slow frame: the frames prepared meanwhile are tracked at a gap the tracker holds,
back to the newest, rather than the newest taken at once."""
import threading
import time

import pytest

from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.models.robot import load_robot
from snaketrack.service import PushSource, ServiceConfig, TrackingService
from snaketrack.service.catch_up import RecentFrames
from snaketrack.tracker.calib.camera import Camera
from snaketrack.tracker.run.pipeline import PipelineConfig

from posed_dataset import write_posed_dataset

N = 16


def _filled(start, stop, max_gap=3, horizon_s=1.0, fps=30.0):
    """A buffer that was put frames ``start`` to ``stop - 1`` (each item its index) at ``fps``."""
    slot = RecentFrames(max_gap, horizon_s)
    for i in range(start, stop):
        slot.put(i, i, i / fps)
    return slot


def test_a_tracker_behind_gets_every_gap_th_frame_back_to_the_newest():
    assert _filled(1, 12).take(None) == 11  # no frame tracked yet: the newest
    slot = _filled(1, 12)  # frame 0 tracked, and frames 1-11 came meanwhile
    got, last = [], 0
    while (item := slot.take(last, timeout=0)) is not None:
        got.append(item)
        last = item
    assert got == [3, 6, 9, 11]  # the gap's last frame each time, then the newest once it is within the gap
    assert slot.dropped == 11 - len(got)  # every frame taken or counted dropped


def test_a_tracker_not_behind_gets_the_newest_and_gap_zero_is_a_one_frame_slot():
    slot = _filled(1, 4)
    assert slot.take(0) == 3 and slot.dropped == 2  # frames 1-3 after 0: within the gap
    slot = _filled(0, 12, max_gap=0)
    assert len(slot) == 1 and slot.take(0) == 11 and slot.dropped == 11


def test_frames_older_than_the_horizon_are_dropped_and_the_newest_is_taken_past_a_lost_reach():
    slot = _filled(0, 60, horizon_s=0.5)  # 30 frames a second: 16 frames kept (t >= 59/30 - 0.5)
    assert len(slot) == 16 and slot.dropped == 44
    assert slot.take(10) == 59  # frames 11-13 are gone: nothing within the gap, the newest


def test_a_source_whose_clock_restarts_keeps_only_the_new_frames():
    slot = _filled(0, 10)
    slot.put("again", 0, 0.0)  # times and indices from the start again: what was kept cannot be caught up to
    assert len(slot) == 1 and slot.dropped == 10 and slot.take(9) == "again"


def test_a_closed_buffer_hands_out_what_it_holds_then_none_at_once():
    slot = _filled(0, 2)
    slot.close()
    assert slot.take(None) == 1
    t0 = time.monotonic()
    assert slot.take(None, timeout=10) is None and time.monotonic() - t0 < 5


@pytest.mark.parametrize("gap,horizon", [(-1, 1.0), (3, -0.5), (3, float("nan"))])
def test_a_bad_catch_up_setting_is_one_clear_error(gap, horizon):
    with pytest.raises(InputError, match="catch-up"):
        RecentFrames(gap, horizon)
    with pytest.raises(InputError, match="--catch-up"):
        ServiceConfig(catch_up_gap=gap, catch_up_s=horizon)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("catch_up") / "ds", N, seed=5)


@pytest.mark.parametrize("gap", [3, 0])
def test_the_service_tracks_its_way_back_through_the_frames_that_came_during_a_slow_frame(dataset, gap):
    """Frame 0's tracking is held until frames 1-15 are prepared: with the catch-up the tracker then takes
    frames 3, 6, 9, 12 and 15, each tracked, each state published in order; without it (gap 0), frame 15."""
    frames = open_frames(dataset)
    source = PushSource(frames.width, frames.height, 30.0)
    service = TrackingService(source, load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta),
                              PipelineConfig(refine_steps=4), ServiceConfig(port=0, overlay_hz=0, catch_up_gap=gap))
    release, tracked, results = threading.Event(), [], []
    track = service.session.track

    def held_track(prepared, **kw):
        if prepared.index == 0:
            assert release.wait(60)
        tracked.append(prepared.index)
        results.extend(track(prepared, **kw))
        return results[-1:]

    service.session.track = held_track
    service.start()
    try:
        images = list(frames.frames())
        for k in range(N):
            source.push(images[k][1], frames.mask(k), t=k / 30)
            deadline = time.monotonic() + 30
            while service.prepared.captured < k + 1 and time.monotonic() < deadline:
                time.sleep(0.002)  # each frame prepared before the next is pushed: none dropped by capture
        release.set()
        deadline = time.monotonic() + 60
        while (not tracked or tracked[-1] != N - 1) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        release.set()
        source.stop()
        figures = service.stop()
    assert tracked == ([0, 3, 6, 9, 12, 15] if gap else [0, 15])
    assert service.errors == 0 and service.state == "ended" and service.clean
    assert figures["frames_tracked"] + figures["frames_dropped"] == N
    assert [r.status for r in results] == ["tracked"] * len(tracked)
    assert min(r.state.iou for r in results) > 0.6


@pytest.mark.parametrize("fps, gap", [(30.0, 3), (29.97, 3), (25.0, 2), (15.0, 1), (10.0, 1), (120.0, 3)])
def test_the_default_gap_spans_a_tenth_of_a_second_of_the_source(fps, gap):
    from snaketrack.service.catch_up import default_gap
    from snaketrack.tracker.config import TrackerConfig

    assert default_gap(fps, TrackerConfig.gap_max_frames) == gap


def test_the_service_takes_the_default_gap_from_its_source_unless_given():
    from posed_dataset import H, K, W

    robot = load_robot("planar-snake-11")
    for fps, given, want in ((15.0, None, 1), (30.0, None, 3), (15.0, 2, 2)):
        source = PushSource(W, H, fps)
        camera = Camera.from_K(K, W, H)
        service = TrackingService(source, robot, camera, PipelineConfig(refine_steps=4),
                                  ServiceConfig(port=0, overlay_hz=0, catch_up_gap=given))
        assert service.prepared.max_gap == want and service.figures()["catch_up_gap"] == want
