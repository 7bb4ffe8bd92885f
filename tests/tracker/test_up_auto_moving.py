"""``--up auto`` on a moving camera (snaketrack/tracker/calib/selfcal.py, snaketrack/tracker/calib/ground.py): the first
frame's up direction fitted to the robot, then followed over the ground, against a MuJoCo clip's truth."""
from dataclasses import replace

import pytest

from snaketrack.datasets.video import open_frames
from snaketrack.tracker.calib.gravity import up_from_camera_quat
from snaketrack.tracker.calib.selfcal import angle_deg
from snaketrack.tracker.run.loop import track_source


@pytest.mark.slow
def test_up_auto_on_a_moving_camera_is_followed_over_the_ground(tmp_path):
    """A handheld MuJoCo clip (the robot on textured ground, another renderer than the tracker's): ``--up auto``
    with ``--track-ground`` fits the first frame's up direction and follows it through the frames, written
    to track.csv, near the camera's true attitude in every frame."""
    from snaketrack.bench.tracking import bench_options, dataset_dir, ensure_dataset
    from snaketrack.io import read_csv_columns

    n = 16
    ds = ensure_dataset(dataset_dir(tmp_path, "handheld", "planar-snake-11", 0), "handheld", "planar-snake-11", 0, n,
                        size=(480, 270), progress=False)
    config, options = bench_options("handheld", 0, n, up="auto")
    summary = track_source(ds, tmp_path / "out", config=config, options=replace(options, calibration_frames=12))
    cal = summary["calibration"]["up_auto"]
    assert cal["followed"] is True
    frames = open_frames(ds)
    cols = read_csv_columns(tmp_path / "out" / "track.csv")
    truth = [up_from_camera_quat(frames.truth[int(f)]["camera_quat_world"]) for f in cols["frame"]]
    errs = [angle_deg([cols["up_x"][i], cols["up_y"][i], cols["up_z"][i]], u) for i, u in enumerate(truth)]
    assert len(errs) == n and angle_deg(cal["up"], up_from_camera_quat(frames.truth[0]["camera_quat_world"])) < 3.0
    assert max(errs) < 3.0
