"""The library tracking session: each configuration follows the simulator's truth, and a session driven
frame by frame gives the rows ``snaketrack track`` writes.

The bounds on each configuration's error sit well above what it measures (in brackets) and far below
what a broken stage gives: a track's last digits follow the CPU's floating-point sums, and ten frames of
refinement on corrupted masks amplify them, so no bound is set to the digit.
"""
import numpy as np
import pytest

from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.io import read_csv_columns
from snaketrack.masks import mask_iou
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import Camera
from snaketrack.tracker.run.loop import RunOptions, track_source
from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession

from posed_dataset import write_posed_dataset

N = 12
#: constant up direction of the posed dataset's camera (looking down at the ground), slightly tilted
UP = np.array([0.0, 0.02, -1.0])
#: configuration, whether it reads the up direction, and its bounds: joint-angle RMS error [deg] and
#: mean IoU of the silhouette with the truth mask (measured: corrupt 3.2 deg / 0.937, static-resized
#: 4.9 deg / 0.879, ground 0.44 deg / 0.991)
VARIANTS = {
    "corrupt": (dict(corrupt_masks=True, corrupt_seed=3), False, 6.0, 0.90),
    "static-resized": (dict(corrupt_masks=True, corrupt_seed=3, static_camera=True, track_size=(240, 180)),
                       True, 8.0, 0.84),
    "ground": (dict(track_ground=True, hold_frames=0), True, 1.0, 0.98),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    ds = write_posed_dataset(root / "ds", N, seed=3)
    (root / "imu.csv").write_text("frame,up_x,up_y,up_z\n" + "".join(f"{i},{UP[0]},{UP[1]},{UP[2]}\n"
                                                                     for i in range(N)))
    return ds


def _assert_tracks_equal(a: dict, b: dict, atol: float) -> None:
    assert list(a) == list(b)
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.dtype.kind in "fi" and y.dtype.kind in "fi":
            np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=0, atol=atol, equal_nan=True, err_msg=k)
        else:
            assert x.astype(str).tolist() == y.astype(str).tolist(), k


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_configuration_follows_the_truth(dataset, tmp_path, variant):
    kw, reads_up, max_rms_deg, min_iou = VARIANTS[variant]
    up = str(dataset.parent / "imu.csv") if reads_up else None
    track_source(dataset, tmp_path, "planar-snake-11", config=PipelineConfig(**kw),
                 options=RunOptions(up=up, video=False, plots=False, progress=False))
    track = read_csv_columns(tmp_path / "track.csv")
    truth = np.array([r["joint_angles"] for r in open_frames(dataset).truth])
    q = np.stack([track[f"q_{j + 1}"] for j in range(truth.shape[1])], axis=1)
    assert list(track["frame"]) == list(range(N)) and set(track["status"]) == {"tracked"}
    assert np.degrees(np.sqrt(np.mean((q - truth) ** 2))) < max_rms_deg
    assert np.mean(track["iou_truth"]) > min_iou


def test_a_session_driven_by_hand_gives_the_command_s_rows(dataset, tmp_path):
    """Frame by frame through the library, as a controller would: every step finishes its own frame when
    nothing is held, and the rows equal those the command writes."""
    config = PipelineConfig(corrupt_masks=True, corrupt_seed=3, hold_frames=0)
    track_source(dataset, tmp_path, config=config, options=RunOptions(video=False, plots=False, progress=False))
    frames = open_frames(dataset)
    session = TrackingSession(load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta), frames.fps, config)
    rows = []
    for i, rgb in frames.frames():
        done = session.step(rgb, mask=frames.mask(i), index=i)
        assert [r.index for r in done] == [i]
        r = done[0]
        assert r.silhouette.shape == r.mask.shape == (frames.height, frames.width)
        assert r.frame.shape == (frames.height, frames.width, 3) and r.status == r.state.status
        rows.append(r.row)
    assert session.close() == []
    assert session.frames == N and session.track_time_s > 0
    written = read_csv_columns(tmp_path / "track.csv")
    by_hand = {k: [row[k] for row in rows] for k in rows[0]}
    del written["iou_truth"]  # the command also scores against the dataset's truth masks
    _assert_tracks_equal(by_hand, written, atol=1e-12)


def test_the_ground_is_followed_as_frames_are_prepared(dataset, tmp_path):
    """With a moving camera the ground tracker follows each frame as it is prepared (the command does so in
    its reading thread, ahead of the tracker): the rows equal a session stepped by hand, and a frame
    prepared elsewhere, without the ground followed, is a one-line error."""
    config = PipelineConfig(track_ground=True, hold_frames=0)
    track_source(dataset, tmp_path, config=config,
                 options=RunOptions(up=str(dataset.parent / "imu.csv"), video=False, plots=False, progress=False))
    frames = open_frames(dataset)
    robot, camera = load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta)
    session = TrackingSession(robot, camera, frames.fps, config)
    prepared = [session.prepare(rgb, frames.mask(i), i, up=UP) for i, rgb in frames.frames()]
    assert all(p.ground for p in prepared) and prepared[0].height == 1.0
    assert all(np.isfinite(p.height) for p in prepared[1:])
    rows = [r.row for p in prepared for r in session.track(p, up=UP)]
    by_hand = {k: [row[k] for row in rows] for k in rows[0]}
    written = read_csv_columns(tmp_path / "track.csv")
    del written["iou_truth"]
    np.testing.assert_array_equal(by_hand["camera_height_ratio"], written["camera_height_ratio"])
    _assert_tracks_equal(by_hand, written, atol=1e-12)

    plain = TrackingSession(robot, camera, frames.fps, PipelineConfig(hold_frames=0))
    rgb = next(iter(frames.frames()))[1]
    with pytest.raises(InputError, match="without following the ground"):
        TrackingSession(robot, camera, frames.fps, config).track(plain.prepare(rgb, frames.mask(0), 0), up=UP)


def test_a_track_starts_on_the_first_frame_that_shows_the_robot(dataset, tmp_path):
    """The robot hidden in the first frames: they are written as lost with no pose (and no overlap with the
    truth), and the track from the first frame that shows it is the track of the clip cut to start there."""
    hidden = 4
    config = PipelineConfig(hold_frames=0, hidden=((0, hidden),))
    track_source(dataset, tmp_path / "run", config=config, options=RunOptions(progress=False))  # overlay, plots too
    written = read_csv_columns(tmp_path / "run" / "track.csv")
    assert list(written["frame"]) == list(range(N))
    assert list(written["status"][:hidden]) == ["lost"] * hidden
    assert np.all(np.isnan(written["q_1"][:hidden])) and np.all(np.isnan(written["base_x"][:hidden]))
    assert list(written["iou_truth"][:hidden]) == [0.0] * hidden
    assert (tmp_path / "run" / "overlay.mp4").stat().st_size > 0

    frames = open_frames(dataset)
    session = TrackingSession(load_robot(frames.meta["robot"]), Camera.from_meta(frames.meta), frames.fps,
                              PipelineConfig(hold_frames=0))
    rows = [r.row for i, rgb in frames.frames(start=hidden)
            for r in session.step(rgb, mask=frames.mask(i), index=i, truth_mask=None)]
    cut = {k: [row[k] for row in rows] for k in rows[0]}
    _assert_tracks_equal(cut, {k: v[hidden:] for k, v in written.items() if k != "iou_truth"}, atol=1e-9)


def test_held_frames_are_released_in_order_and_on_close(dataset):
    frames = open_frames(dataset)
    session = TrackingSession(load_robot("planar-snake-11"), Camera.from_meta(frames.meta), frames.fps,
                              PipelineConfig(hold_frames=5)).start()
    released = []
    for i, rgb in frames.frames():
        if i == 8:
            break
        released += [r.index for r in session.step(rgb, mask=frames.mask(i))]
    released += [r.index for r in session.close()]
    assert released == list(range(8))


def test_the_session_says_whether_the_reading_is_settled_while_frames_are_held(dataset):
    """``reading_settled`` is True before a track; while it is False and the hold is not full, no frame is
    released; the step at which it turns True (or the hold fills) releases every frame held, in order, and
    later frames pass at once."""
    frames = open_frames(dataset)
    hold = 5
    session = TrackingSession(load_robot("planar-snake-11"), Camera.from_meta(frames.meta), frames.fps,
                              PipelineConfig(hold_frames=hold))
    assert session.reading_settled
    session.start()
    pending, released_all, opened = [], [], False
    for i, rgb in frames.frames():
        if i == 8:
            break
        released = [r.index for r in session.step(rgb, mask=frames.mask(i))]
        pending.append(i)
        if opened:
            assert released == [i]
        elif session.reading_settled or len(pending) >= hold:
            assert released == pending
            opened = True
        else:
            assert released == []
        released_all += released
        if released:
            pending = []
    assert released_all + [r.index for r in session.close()] == list(range(8))


def test_a_frame_without_mask_needs_a_segmenter(dataset):
    frames = open_frames(dataset)
    session = TrackingSession(load_robot("planar-snake-11"), Camera.from_meta(frames.meta), frames.fps)
    rgb = next(frames.frames())[1]
    with pytest.raises(InputError, match="no mask"):
        session.step(rgb)

    class Orange:
        """A stand-in segmenter: the posed dataset draws the robot orange on grey."""

        def predict(self, image):
            return (image[..., 0] > 150) & (image[..., 2] < 100)

    session = TrackingSession(load_robot("planar-snake-11"), Camera.from_meta(frames.meta), frames.fps,
                              PipelineConfig(hold_frames=0), segmenter=Orange())
    (r,) = session.step(rgb)
    assert mask_iou(r.mask, frames.mask(0)) > 0.9  # the segmenter saw the frame (JPEG edges aside)


def test_bad_configs_are_one_line_errors():
    for kw in (dict(refine_steps=-1), dict(hold_frames=-1), dict(static_camera=True, track_ground=True),
               dict(silhouette="spheres"), dict(follow_up=True), dict(follow_up=True, static_camera=True)):
        with pytest.raises(InputError):
            PipelineConfig(**kw)


def test_head_first_keeps_the_first_reading_and_a_bad_head_is_one_line():
    from snaketrack.errors import InputError
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import FieldOfView
    from snaketrack.tracker.run.pipeline import PipelineConfig, make_tracker

    robot, camera = load_robot("cobra-12"), FieldOfView(65.0).camera(320, 180)
    assert make_tracker(robot, camera, 30.0).config.wave_check
    assert not make_tracker(robot, camera, 30.0, head=PipelineConfig(head="first").head).config.wave_check
    with pytest.raises(InputError, match="--head"):
        PipelineConfig(head="tail")
