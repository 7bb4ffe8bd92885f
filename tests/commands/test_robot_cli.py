"""``snaketrack robot show``: the picture's size, the silhouette where forward kinematics puts the body,
and one-line errors for bad robot files and bad flags."""
import math

import cv2
import numpy as np
import pytest

from snaketrack import cli
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import FieldOfView
from snaketrack.tracker.run.robot_view import Pose, base_rotation, frame_view

W, H = 480, 360
GREY = 90


def _main(args, capsys):
    code = cli.main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def frame(tmp_path):
    p = tmp_path / "frame.png"
    cv2.imwrite(str(p), np.full((H, W, 3), GREY, np.uint8))
    return p


def _independent_axes(robot, q, xyz, yaw, fov_deg):
    """Link-axis start and end points (N, 2) [px] each from forward kinematics and a pinhole K built here,
    and the body radius (N,) [px] at each link's midpoint."""
    f = (W / 2) / math.tan(math.radians(fov_deg) / 2)
    c, s = math.cos(yaw), math.sin(yaw)
    R0 = np.diag([1.0, -1, -1]) @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])  # flat, seen from above, yawed
    fk = forward_kinematics_np(robot, q, R0, np.asarray(xyz))

    def px(p):
        return np.column_stack([f * p[:, 0] / p[:, 2] + (W - 1) / 2, f * p[:, 1] / p[:, 2] + (H - 1) / 2])

    return px(fk["origins"]), px(fk["ends"]), f * np.asarray(robot.visual.body_radius) / fk["centres"][:, 2]


def test_alone_writes_a_picture_of_the_asked_size(tmp_path, capsys):
    out = tmp_path / "robot.png"
    code, stdout, err = _main(["robot", "show", "arcsnake-4", "--size", "960x540", "--out", out], capsys)
    assert code == 0, err
    img = cv2.imread(str(out))
    assert img.shape == (540, 960, 3) and "arcsnake-4 (4 links, 0.600 m)" in stdout
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # drawn, not blank


def test_over_a_frame_the_silhouette_covers_the_link_axes(frame, tmp_path, capsys):
    robot = load_robot("planar-snake-11")
    q = 0.3 * np.sin(np.arange(robot.dof))
    xyz, yaw, fov = (-0.45, 0.05, 1.2), 0.2, 60.0
    out = tmp_path / "overlay.png"
    code, stdout, err = _main(["robot", "show", "planar-snake-11", "--frame", frame, "--fov-deg", fov,
                               f"--pose={xyz[0]},{xyz[1]},{xyz[2]},{yaw}", "--q=" + ",".join(map(str, q)),
                               "--out", out], capsys)
    assert code == 0, err
    img = cv2.imread(str(out))[..., ::-1]
    assert img.shape == (H, W, 3)
    starts, ends, r_px = _independent_axes(robot, q, xyz, yaw, fov)
    mids = 0.5 * (starts + ends)
    assert np.all((mids > 0) & (mids < [W, H]))
    # the library's mask covers every midpoint ...
    cam = FieldOfView(fov).camera(W, H)
    _, mask = frame_view(np.full((H, W, 3), GREY, np.uint8), robot, cam, Pose(q, base_rotation(yaw), np.array(xyz)))
    assert all(mask[int(round(v)), int(round(u))] for u, v in mids)
    # ... and the picture is tinted beside each axis (0.6 radius off, clear of the drawn axis line) and
    # untouched three radii off on the other side (the link numbers are drawn on the first side)
    for i, (m, d, r) in enumerate(zip(mids, ends - starts, r_px)):
        n = np.array([-d[1], d[0]]) / np.linalg.norm(d)
        inside = np.round(m + 0.6 * r * n).astype(int)
        outside = np.round(m - 3.0 * r * n).astype(int)
        assert np.abs(img[inside[1], inside[0]].astype(int) - GREY).max() > 20, i
        assert np.abs(img[outside[1], outside[0]].astype(int) - GREY).max() < 5, i


def test_default_pose_centres_the_robot(frame, tmp_path, capsys):
    out = tmp_path / "o.png"
    code, stdout, err = _main(["robot", "show", "planar-snake-11", "--frame", frame, "--out", out], capsys)
    assert code == 0, err
    img = cv2.imread(str(out))
    assert img.shape == (H, W, 3) and np.abs(img[H // 2, W // 2].astype(int) - GREY).max() > 20


def test_bad_robot_file_is_one_line_naming_the_key(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nlinks: {count: 3, length: -0.1, radius: 0.02}\njoints: {count: 2}\n")
    code, _, err = _main(["robot", "show", bad, "--out", tmp_path / "x.png"], capsys)
    assert code == 2 and err.count("\n") == 1 and "links[0].length = -0.1" in err, err
    bad.write_text("name: bad\nlinks: {count: 3, length: 0.1, radius: 0.02}\n")
    code, _, err = _main(["robot", "show", bad, "--out", tmp_path / "x.png"], capsys)
    assert code == 2 and err.count("\n") == 1 and "'joints'" in err, err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("flags, words", [
    (["--pose", "0,0"], "--pose '0,0': 2 values; expected 4 to 6"),
    (["--pose", "0,0,one,0"], "--pose '0,0,one,0'; expected numbers"),
    (["--pose", "0,0,-1,0"], "z = -1 m; expected z > 0"),
    (["--q", "0,0"], "--q '0,0': 2 values; planar-snake-11 has 10 joint coordinates"),
    (["--q=nan,0,0,0,0,0,0,0,0,0"], "expected finite joint angles"),
    (["--fov-deg", "200"], "--fov-deg 200"),
])
def test_bad_flags_are_one_line(frame, tmp_path, capsys, flags, words):
    code, _, err = _main(["robot", "show", "planar-snake-11", "--frame", frame, *flags, "--out", tmp_path / "o.png"],
                         capsys)
    assert code == 2 and err.startswith("snaketrack: error: ") and err.count("\n") == 1 and words in err, err


def test_pose_without_a_frame_and_missing_inputs(tmp_path, capsys):
    out = tmp_path / "o.png"
    for args, words in ((["--pose", "0,0,1,0"], "--pose places the robot in a frame's camera"),
                        (["--frame", tmp_path / "none.png"], "--frame"),
                        (["--out", tmp_path / "o.gif"], "--out")):
        code, _, err = _main(["robot", "show", "planar-snake-11", "--out", out, *args], capsys)
        assert code == 2 and err.count("\n") == 1 and words in err, err
    code, _, err = _main(["robot", "show", "no-such-robot", "--out", out], capsys)
    assert code == 2 and "not a shipped robot" in err
