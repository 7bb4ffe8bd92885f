"""The up direction: camera attitude → up, the simulated IMU's error statistics, IMU logs, and the
refinement's up prior against MuJoCo's rendering of a robot lying on a tilted ground."""
import math

import numpy as np
import pytest

from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.tracker.calib.gravity import load_up_csv, open_up, simulated_imu, up_from_camera_quat


def _quat_about(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return [math.cos(angle / 2), *(math.sin(angle / 2) * a)]


def _angle(u, v):
    return math.degrees(math.acos(np.clip(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v), -1, 1)))


def test_up_from_camera_attitude():
    # an OpenCV camera looking straight down (R_wc = rotation by pi about x): up is the camera's -z
    assert np.allclose(up_from_camera_quat(_quat_about([1, 0, 0], math.pi)), [0, 0, -1], atol=1e-12)
    # tilted 30 deg forward from looking down: up leans towards the image's top (-y) by 30 deg
    R_quat = _quat_about([1, 0, 0], math.pi + math.radians(30))
    up = up_from_camera_quat(R_quat)
    assert _angle(up, [0, 0, -1]) == pytest.approx(30, abs=1e-9)
    assert up[1] != 0 and np.linalg.norm(up) == pytest.approx(1.0)


def test_simulated_imu_error_is_the_bias_and_noise_it_claims():
    rng = np.random.default_rng(3)
    truth = [{"camera_quat_world": _quat_about(rng.normal(size=3), rng.uniform(0, 3))} for _ in range(400)]
    src = simulated_imu(truth, seed=5, bias_deg=2.0, noise_deg=0.0)
    err = [_angle(src(i), up_from_camera_quat(r["camera_quat_world"])) for i, r in enumerate(truth)]
    # a rotation fixed in the camera frame (a mounting error): it tilts up by at most the bias
    assert max(err) <= 2.0 + 1e-9 and np.mean(err) > 0.5
    noisy = simulated_imu(truth, seed=5, bias_deg=0.0, noise_deg=0.5)
    err = np.array([_angle(noisy(i), up_from_camera_quat(r["camera_quat_world"])) for i, r in enumerate(truth)])
    # rotation by a 3-D normal vector of std 0.5 deg: the tilt of up is Rayleigh with sigma 0.5 deg
    assert np.sqrt(np.mean(err ** 2) / 2) == pytest.approx(0.5, rel=0.1)
    again = simulated_imu(truth, seed=5, bias_deg=0.0, noise_deg=0.5)
    assert all(np.array_equal(noisy(i), again(i)) for i in range(len(truth)))
    assert noisy(len(truth)) is None and noisy(-1) is None
    with pytest.raises(FileFormatError):
        simulated_imu([{"t": 0.0}], seed=0)


def test_up_log(tmp_path):
    p = tmp_path / "imu.csv"
    p.write_text("frame,up_x,up_y,up_z\n0,0,0,-3\n2,0,1,-1\n")
    src = load_up_csv(p)
    assert np.allclose(src(0), [0, 0, -1]) and src(1) is None
    assert np.allclose(src(2), np.array([0, 1, -1]) / math.sqrt(2))
    assert open_up("none", None) is None and open_up(None, None) is None
    assert np.allclose(open_up(str(p), None)(0), [0, 0, -1])
    with pytest.raises(MissingFileError):
        load_up_csv(tmp_path / "no.csv")
    (tmp_path / "cols.csv").write_text("frame,gx,gy,gz\n0,0,0,1\n")
    with pytest.raises(FileFormatError, match="up_x"):
        load_up_csv(tmp_path / "cols.csv")
    (tmp_path / "nan.csv").write_text("frame,up_x,up_y,up_z\n0,nan,0,1\n")
    with pytest.raises(FileFormatError):
        load_up_csv(tmp_path / "nan.csv")
    with pytest.raises(InputError):
        open_up("sim-imu", None)
    with pytest.raises(InputError, match="auto"):  # a per-frame source cannot be 'auto' (serve): one line
        open_up("auto", None)


def test_up_prior_fixes_the_tilt_a_thin_robot_hides():
    """The arcsnake seen from above: its plane tilted 25 deg while it slides closer looks nearly the same.
    LM from that start stays tilted without the ground's up direction and returns to it with it."""
    import torch

    from snaketrack.models.chain import body_normal
    from snaketrack.models.robot import load_robot
    from snaketrack.models.rotations import axis_angle_to_matrix
    from snaketrack.tracker.config import RefineConfig
    from snaketrack.tracker.fit.observation import Observation
    from snaketrack.tracker.fit.refine import Refiner
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer
    from snaketrack.tracker.state import StateLayout

    from mj_scene import MujocoMasks, ground_rotation

    robot = load_robot("arcsnake-4")
    W, H, f = 320, 240, 330.0  # body about 6 px wide at 2.7 m: a drone's view of it
    mj = MujocoMasks(robot, W, H, f)
    R0 = ground_rotation(0.15, 0.4)
    q = np.array([0.5, 0.0, -0.6, 0.05, 0.5, -0.05])
    t0 = np.array([-0.3, 0.0, 2.7])
    mask = mj.mask(q, R0, t0)
    mj.close()
    lay = StateLayout.for_robot(robot)
    xt = lay.pack(q, R0, t0)
    # along the valley: tilt about the body's lateral axis and come closer
    lateral = R0[:, 1]
    R_tilt = axis_angle_to_matrix(torch.as_tensor(math.radians(25) * lateral)).numpy() @ R0
    x0 = lay.pack(q, R_tilt, t0 + np.array([0.0, 0.0, -0.25]), reference=xt)
    # the prior towards the start (the prediction, prior_rot = 0.05 rad) pulls the other way: a
    # tighter up prior than the default 0.05 rad makes the pull of the ground clear
    ren = SilhouetteRenderer(robot, mj.K, W, H)
    obs = Observation.from_mask(mask)
    up = R0[:, 2]

    def tilt_deg(x, on_body):
        q_, R_, _ = lay.unpack(x)
        return _angle(body_normal(robot, q_, R_)[0] if on_body else R_[:, 2], up)

    free = Refiner(ren, RefineConfig(steps=15)).refine(x0, obs)  # no up: no up prior of either kind
    for on_body in (False, True):  # the prior holds the base link's z axis, or the body's normal
        ref = Refiner(ren, RefineConfig(steps=15, up_prior_rad=0.02, up_on_body=on_body))
        held = ref.refine(x0, obs, up=up)
        assert held.iou > 0.8
        assert tilt_deg(held.x, on_body) < 5.0  # measured 4.3 (base link) and 2.7 deg (body)
        assert tilt_deg(free.x, on_body) > 15.0  # 25.8 deg at IoU 0.94: the silhouette does not see the tilt
        assert abs(held.x[lay.trans][2] - t0[2]) < abs(x0[lay.trans][2] - t0[2])
    with pytest.raises(InputError):
        ref.refine(x0, obs, up=np.zeros(3))

