"""snaketrack.bench.pose_floor: the refinement started at the truth, on a dataset drawn from known poses;
``snaketrack bench pose-floor`` refuses what is not a dataset."""
import csv
from pathlib import Path

import numpy as np
import pytest

from snaketrack.bench.pose_floor import measure_pose_floor
from snaketrack.datasets.layout import DatasetWriter
from snaketrack.errors import InputError, MissingFileError, SnaketrackError
from snaketrack.models.robot import load_robot

from posed_dataset import FPS, QUAT_DOWN, H, K, W, write_posed_dataset
from posed_dataset import pose as _pose

N = 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Masks drawn by the tracker's own silhouette model at known poses: its objective's optimum is the truth."""
    root = write_posed_dataset(tmp_path_factory.mktemp("floor") / "toy", N, seed=3, housings="cylinder")
    return root, load_robot("planar-snake-11")


def _write_track(path: Path, robot, dq: float, dz: float):
    """A track.csv that reports the truth with every joint off by ``dq``, the sign alternating along the
    chain (the bends do not add up), and the base ``dz`` deeper."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f"q_{j + 1}" for j in range(robot.dof)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["frame", *names, "base_x", "base_y", "base_z", "base_qw", "base_qx", "base_qy", "base_qz",
                    "iou", "status"])
        for i in range(N):
            q, base = _pose(robot, i)
            w.writerow([i, *(q + dq * (-1.0) ** np.arange(robot.dof)), base[0], base[1], base[2] + dz, *QUAT_DOWN, 0.5,
                        "tracked" if i != 1 else "coasting"])


def test_floor_on_the_models_own_masks_is_the_truth(dataset):
    root, _ = dataset
    res = measure_pose_floor(root, clean=True, up="none")
    assert res["frames"] == N and res["masks"] == "truth"
    # 0.005 rad measured; a wrong pairing of joints, frames or columns would be off by tenths
    assert res["floor_joint_error_rad"] < 0.01
    assert res["floor_base_error_m"] < 6e-3  # 2.7 mm: pixel quantisation of an 8 px body at 2 m
    assert res["floor_iou"] > 0.95


def test_corrupted_masks_raise_the_floor_and_a_track_is_compared_on_its_frames(dataset, tmp_path):
    root, robot = dataset
    clean = measure_pose_floor(root, clean=True, up="none")
    track = tmp_path / "tracks" / "toy" / "track.csv"
    _write_track(track, robot, dq=0.03, dz=0.01)
    res = measure_pose_floor(root, up="none", track=track)
    assert res["masks"] == "corrupted"
    assert res["floor_joint_error_rad"] > clean["floor_joint_error_rad"]
    assert res["floor_iou"] < clean["floor_iou"]
    # the coasting frame is left out; the rest are read back exactly
    assert res["track_frames"] == N - 1
    assert res["track_joint_error_rad"] == pytest.approx(0.03, abs=1e-9)
    assert res["track_base_error_m"] == pytest.approx(0.01, abs=1e-9)
    assert res["track_iou"] == pytest.approx(0.5)
    # refined from 0.03 rad off every joint, the fit comes back to about the truth's fit
    assert abs(res["refit_iou"] - res["floor_iou"]) < 0.05


def test_a_looser_prior_lets_the_corrupted_masks_move_the_pose_further(dataset):
    root, _ = dataset
    held = measure_pose_floor(root, up="none")
    loose = measure_pose_floor(root, up="none", prior_scale=10.0)
    assert loose["prior_scale"] == 10.0
    assert loose["floor_joint_error_rad"] > held["floor_joint_error_rad"]


def test_bad_input(dataset, tmp_path, run_bench):
    root, _ = dataset
    with pytest.raises(InputError, match="prior scale"):
        measure_pose_floor(root, prior_scale=0.0)
    with pytest.raises(SnaketrackError, match="sim-imu"):
        measure_pose_floor(root)  # the toy truth has no camera attitude for the simulated IMU
    with pytest.raises(MissingFileError, match="not a dataset"):
        measure_pose_floor(tmp_path)
    assert run_bench("pose-floor", [tmp_path]) == 2  # not a dataset folder
    bare = tmp_path / "bare"
    meta = {"K": K.tolist(), "width": W, "height": H, "fps": FPS, "robot": "planar-snake-11", "seed": 3}
    with DatasetWriter(bare, meta, masks=False, truth=False) as w:
        w.write_frame(np.full((H, W, 3), 90, np.uint8), None, None)
    with pytest.raises(InputError, match="no truth"):
        measure_pose_floor(bare, up="none")
    assert run_bench("pose-floor", [bare, "--up", "none"]) == 2
    unmasked = tmp_path / "unmasked"
    with DatasetWriter(unmasked, meta, masks=False, truth=True) as w:
        w.write_frame(np.full((H, W, 3), 90, np.uint8), None,
                      {"t": 0.0, "joint_angles": [0.0] * 10, "base_position_cam": [0.0, 0.0, 2.0],
                       "base_quat_cam": QUAT_DOWN, "head_position_cam": [0.0, 0.0, 2.0]})
    with pytest.raises(InputError, match="no masks"):
        measure_pose_floor(unmasked, up="none")
