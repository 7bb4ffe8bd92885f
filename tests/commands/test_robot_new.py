"""``snaketrack robot new`` writes a file the loader takes with the geometry asked for; ``robot show --view``
draws the silhouette where a camera at that elevation, azimuth and distance sees the robot."""
import math

import cv2
import numpy as np
import pytest
import yaml

from snaketrack import cli
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import FieldOfView
from snaketrack.tracker.run.robot_view import base_angles, base_rotation, frame_view, view_pose

W, H = 480, 360
GREY = 90


def _main(args, capsys):
    code = cli.main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_the_written_file_loads_with_the_numbers_given(tmp_path, capsys):
    out = tmp_path / "white-snake.yaml"
    code, stdout, err = _main(["robot", "new", "--modules", 7, "--pitch", 0.08, "--width", 0.05, "--height", 0.04,
                               "--tail-length", 0.1, "--head-length", 0.07, "--caps", "flat", "--axes", "yaw,pitch",
                               "--limit", 1.2, "--colour", "#f0f0f0", "--head-colour", "30,30,30",
                               "--out", out], capsys)
    assert code == 0, err
    robot = load_robot(out)
    assert robot.name == "white-snake" and robot.n_links == 7 and robot.dof == 6
    assert [j.axes for j in robot.joints] == [("z",), ("y",)] * 3
    np.testing.assert_allclose(robot.upper, 1.2)
    np.testing.assert_allclose(robot.lower, -1.2)
    vis = robot.visual
    # seen from above (the default elevation, 90 deg) the body is as wide as --width
    np.testing.assert_allclose(vis.body_radius, 0.025)
    np.testing.assert_allclose([lk.radius for lk in robot.links], 0.025)  # the larger of width and height
    # the middle links are one pitch; the end links reach the tips with their (flat) caps
    np.testing.assert_allclose(robot.lengths[1:-1], 0.08)
    c = vis.cap_radius
    assert c == pytest.approx(0.1 * 0.025)
    assert robot.lengths[0] + 1.0 * c == pytest.approx(0.1)
    assert robot.lengths[-1] + 1.6 * c == pytest.approx(0.07)
    assert vis.rgba[:3] == pytest.approx((0.941, 0.941, 0.941), abs=1e-3)
    assert vis.head_rgba[:3] == pytest.approx((30 / 255,) * 3, abs=1e-3)
    # the file says what it was written from, and parses as plain YAML
    text = out.read_text()
    assert text.startswith("# Written by snaketrack robot new from:") and "modules 7" in text
    assert yaml.safe_load(text)["joints"]["count"] == 6


def test_a_box_body_seen_at_an_angle_is_drawn_as_wide_as_it_looks(tmp_path, capsys):
    out = tmp_path / "box.yaml"
    code, _, err = _main(["robot", "new", "--modules", 4, "--pitch", 0.1, "--width", 0.06, "--height", 0.03,
                          "--view-elevation", 30, "--out", out], capsys)
    assert code == 0, err
    robot = load_robot(out)
    seen = 0.06 * math.sin(math.radians(30)) + 0.03 * math.cos(math.radians(30))  # top and side faces
    np.testing.assert_allclose(robot.visual.body_radius, seen / 2, rtol=1e-4)
    # round caps: a body radius each, the head's ellipsoid reaching 1.6 of them
    assert robot.lengths[0] + robot.visual.cap_radius == pytest.approx(0.1, abs=1e-5)
    assert robot.lengths[-1] + 1.6 * robot.visual.cap_radius == pytest.approx(0.1, abs=1e-5)


@pytest.mark.parametrize("flags, words", [
    (["--modules", 1], "--modules 1"),
    (["--pitch", -0.1], "--pitch -0.1"),
    (["--axes", "yaw,twist"], "--axes 'yaw,twist'"),
    (["--colour", "#12345"], "--colour '#12345'"),
    (["--head-length", 0.01], "--head-length 0.01"),
    (["--height", 0.04, "--view-elevation", 0], "--view-elevation 0"),
])
def test_numbers_that_give_no_robot_are_one_line(tmp_path, capsys, flags, words):
    base = {"--modules": 5, "--pitch": 0.1, "--width": 0.05}
    args = ["robot", "new"]
    for k, v in base.items():
        if k not in flags:
            args += [k, v]
    code, _, err = _main(args + flags + ["--out", tmp_path / "r.yaml"], capsys)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.yaml").exists()


def test_an_existing_file_is_kept_without_force(tmp_path, capsys):
    out = tmp_path / "r.yaml"
    out.write_text("mine\n")
    code, _, err = _main(["robot", "new", "--modules", 5, "--pitch", 0.1, "--width", 0.05, "--out", out], capsys)
    assert code == 2 and "--force" in err and out.read_text() == "mine\n"


def _look_at_camera(elev_deg, dist):
    """The camera's rotation (rows: its x, y, z in the world) and position, built from a look-at: the world's z
    up, the camera over the world's -y side looking along +y and down at ``elev_deg`` at the origin from
    ``dist`` metres."""
    e = math.radians(elev_deg)
    P = np.array([0.0, -dist * math.cos(e), dist * math.sin(e)])
    z = -P / np.linalg.norm(P)
    x = np.array([1.0, 0, 0])
    y = np.cross(z, x)
    return np.stack([x, y, z]), P


@pytest.mark.parametrize("elev, azim", [(35.0, 0.0), (50.0, 60.0), (90.0, -30.0)])
def test_view_puts_the_straight_robot_where_a_look_at_camera_sees_it(elev, azim):
    robot = load_robot("planar-snake-11")
    cam = FieldOfView(60.0).camera(W, H)
    dist = 1.6
    pose = view_pose(robot, cam, elev, azim, dist)
    # independently: the robot straight on the world's ground, its middle at the origin, heading azim
    Rc, P = _look_at_camera(elev, dist)
    a = math.radians(azim)
    heading = np.array([math.cos(a), math.sin(a), 0.0])
    s = np.cumsum([0.0, *robot.lengths]) - robot.total_length / 2
    joints_world = s[:, None] * heading
    joints_cam = (Rc @ (joints_world - P).T).T
    fk = forward_kinematics_np(robot, np.zeros(robot.dof), pose.R0, pose.t0)
    mine = np.vstack([fk["origins"], fk["ends"][-1:]])
    np.testing.assert_allclose(mine, joints_cam, atol=1e-9)
    # and the pose reads back as --pose angles that give the same rotation
    np.testing.assert_allclose(base_rotation(*base_angles(pose.R0)), pose.R0, atol=1e-12)


def test_show_view_draws_the_silhouette_over_the_frame_where_it_projects(tmp_path, capsys):
    frame = tmp_path / "frame.png"
    cv2.imwrite(str(frame), np.full((H, W, 3), GREY, np.uint8))
    out = tmp_path / "overlay.png"
    u, v = 300.0, 220.0
    code, stdout, err = _main(["robot", "show", "planar-snake-11", "--frame", frame, "--fov-deg", 60,
                               "--view", "40,20,1.5", "--at", f"{u},{v}", "--out", out], capsys)
    assert code == 0, err
    img = cv2.imread(str(out))[..., ::-1]
    robot = load_robot("planar-snake-11")
    cam = FieldOfView(60.0).camera(W, H)
    pose = view_pose(robot, cam, 40.0, 20.0, 1.5, at=(u, v))
    _, mask = frame_view(np.full((H, W, 3), GREY, np.uint8), robot, cam, pose)
    # the robot's middle projects onto --at, inside the silhouette, and the picture is tinted there
    fk = forward_kinematics_np(robot, np.zeros(robot.dof), pose.R0, pose.t0)
    pts = np.vstack([fk["origins"], fk["ends"][-1:]])
    middle = pts[0] + (pts[-1] - pts[0]) / 2
    uv = cam.K @ middle
    assert uv[:2] / uv[2] == pytest.approx([u, v], abs=1e-6)
    tinted = np.abs(img.astype(int) - GREY).max(axis=2) > 20
    assert mask[int(round(v)), int(round(u))] and tinted[int(round(v)), int(round(u))]
    # the drawn picture differs from the frame inside the silhouette and matches it well away from it (but for
    # the tail and head labels)
    far = cv2.dilate(mask.astype(np.uint8), np.ones((41, 41), np.uint8)) == 0
    assert tinted[mask].mean() > 0.9 and tinted[far].mean() < 0.01
    # the printed pose, given back as --pose, draws the same picture
    pose_flag = next(w for w in stdout.split() if w.startswith("--pose="))
    again = tmp_path / "again.png"
    code, _, err = _main(["robot", "show", "planar-snake-11", "--frame", frame, "--fov-deg", 60,
                          pose_flag.rstrip(";"), "--out", again], capsys)
    assert code == 0, err
    diff = np.abs(cv2.imread(str(again)).astype(int) - cv2.imread(str(out)).astype(int)).max(axis=2) > 40
    assert diff.mean() < 0.01


@pytest.mark.parametrize("flags, words", [
    (["--view", "40,20"], "--view '40,20'"),
    (["--view", "95,0,1"], "elevation in (0, 90]"),
    (["--view", "40,0,1", "--pose", "0,0,1,0"], "give one"),
    (["--at", "10,10"], "--view ELEV,AZIM,DIST too"),
    (["--view", "20,0,1", "--at", "240,0"], "sees no ground"),
])
def test_bad_view_flags_are_one_line(tmp_path, capsys, flags, words):
    frame = tmp_path / "frame.png"
    cv2.imwrite(str(frame), np.full((H, W, 3), GREY, np.uint8))
    code, _, err = _main(["robot", "show", "planar-snake-11", "--frame", frame, *flags, "--out",
                          tmp_path / "o.png"], capsys)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
