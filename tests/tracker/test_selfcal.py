"""Self-calibration from the robot (snaketrack/tracker/calib/selfcal.py): the ground plane, the up direction of
``--up auto`` and the focal length of ``--refine-focal``, each against a known answer."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import FieldOfView
from snaketrack.tracker.calib.gravity import up_from_camera_quat
from snaketrack.tracker.calib.selfcal import (
    CalibrationFrame,
    PlaneFit,
    angle_deg,
    estimate_up,
    fit_plane,
    fit_plane_lengths,
    pitch_up,
    refine_focal,
    upright,
)
from snaketrack.tracker.run.loop import RunOptions, calibration_pass, constant_up, open_session, track_source
from snaketrack.tracker.run.pipeline import PipelineConfig, TrackingSession
from snaketrack.tracker.state import StateLayout

from posed_dataset import K, W, write_posed_dataset

TILT = -50.0  # the scene turned 50° about the camera's x axis: an oblique view, the camera upright


def test_fit_plane_noisy_points_normal_and_sign():
    rng = np.random.default_rng(0)
    up = np.array([0.1, -0.8, -0.55])
    up /= np.linalg.norm(up)
    e1 = np.cross(up, [1.0, 0, 0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(up, e1)
    ground = -1.5 * up  # the camera 1.5 m above the plane
    a, b = rng.uniform(-0.6, 0.6, (2, 400))
    pts = ground + 0.0 * up + np.outer(a, e1) + np.outer(b, e2) + rng.normal(0, 0.005, (400, 3))
    pts[:20] += 0.3 * up  # outliers off the plane
    fit = fit_plane(pts)
    assert fit is not None
    assert angle_deg(fit.up, up) < 1.0  # sign included: up points from the plane to the camera
    assert fit.height == pytest.approx(1.5, abs=0.01)
    assert fit.inliers <= 380


def test_fit_plane_line_is_undetermined():
    t = np.linspace(0, 1, 50)
    assert fit_plane(np.stack([t, 0 * t, 2 + 0 * t], 1)) is None


def _rotate_about(v, axis, deg):
    a = np.radians(deg)
    axis = axis / np.linalg.norm(axis)
    return v * np.cos(a) + np.cross(axis, v) * np.sin(a) + axis * (axis @ v) * (1 - np.cos(a))


def test_fit_plane_lengths_recovers_the_ground_from_link_axes_on_it():
    """Bodies lying on a known ground, seen obliquely: from a start 5° and 10 cm off, the plane that lays the
    axes' rays at the link lengths is the ground (up and height), and badly fitted frames are left out."""
    robot = load_robot("planar-snake-11")
    layout = StateLayout.for_robot(robot)
    up, height = pitch_up(40.0), 1.5
    e1 = np.cross(up, [1.0, 0, 0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(up, e1)
    R0 = np.stack([e1, e2, up], 1)  # the body's z axis along up: lying flat
    rng = np.random.default_rng(3)
    calib = []
    for i in range(12):
        q = 0.5 * np.sin(0.7 * np.arange(robot.dof) + i)
        yaw = rng.uniform(-np.pi, np.pi)
        Rz = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
        a, b = rng.uniform(-0.5, 0.5, 2)
        t = -height * up + robot.radii[0] * up + a * e1 + b * e2
        calib.append(CalibrationFrame(i, np.zeros((2, 2), bool), layout.pack(q, R0 @ Rz, t), None, 0.9))
    bad = calib[0].x.copy()
    bad[-3:] *= 0.7  # a frame fitted far from the ground, with a low IoU
    calib.append(CalibrationFrame(12, np.zeros((2, 2), bool), bad, None, 0.2))
    start = PlaneFit(_rotate_about(up, np.array([1.0, 0.3, 0.0]), 5.0), 1.4, 0.01, 0.5, 100, 100, 0.01)
    fit = fit_plane_lengths(robot, layout, calib, start)
    assert angle_deg(fit.up, up) < 0.01
    assert fit.height == pytest.approx(height, abs=1e-4)
    assert fit.rms < 1e-5 and fit.points == 12 * len(robot.links)


def test_fit_plane_lengths_on_a_moving_camera_from_its_rotations_and_heights():
    """A camera that turns and rises while bodies lie on the ground: with each frame's rotation from the first
    and height ratio (as the ground's homography gives them), the first frame's up direction and height."""
    from scipy.spatial.transform import Rotation

    robot = load_robot("planar-snake-11")
    layout = StateLayout.for_robot(robot)
    rng = np.random.default_rng(5)
    calib, R0_wc, up0, d0 = [], None, None, None
    for i in range(12):
        R_wc = Rotation.from_euler("xz", [np.radians(-130 - 2 * i), 0.03 * i]).as_matrix()  # camera axes in the world
        C = np.array([0.02 * i, -1.17, 1.4 + 0.02 * i])  # its centre above the ground z = 0, the robot ahead
        yaw = rng.uniform(-np.pi, np.pi)
        R_body = Rotation.from_euler("z", yaw).as_matrix()  # lying flat, turned
        t_world = np.array([*rng.uniform(-0.3, 0.3, 2), robot.radii[0]])
        q = 0.5 * np.sin(0.7 * np.arange(robot.dof) + i)
        R_cw = R_wc.T
        x = layout.pack(q, R_cw @ R_body, R_cw @ (t_world - C))
        if i == 0:
            R0_wc, up0, d0 = R_wc, R_cw @ [0, 0, 1.0], C[2]
        calib.append(CalibrationFrame(i, np.zeros((2, 2), bool), x, None, 0.9, R_cw @ R0_wc, C[2] / d0))
    start = PlaneFit(_rotate_about(up0, np.array([1.0, 0.3, 0.0]), 5.0), 1.3, 0.01, 0.5, 100, 100, 0.01)
    fit = fit_plane_lengths(robot, layout, calib, start)
    assert angle_deg(fit.up, up0) < 0.01
    assert fit.height == pytest.approx(d0, abs=1e-4)
    # without the height ratios each frame gets its own height; the up direction is still found
    free = [replace(c, height_ratio=None) for c in calib]
    assert angle_deg(fit_plane_lengths(robot, layout, free, start).up, up0) < 0.05


def test_upright_picks_the_mirror_seen_the_right_way_up():
    truth = np.array([0.0, -0.8, -0.6])
    towards = np.array([0.0, 0.0, 1.0])
    mirrored = 2 * (truth @ towards) * towards - truth  # the same outline, tilted the other way
    assert angle_deg(upright(mirrored, towards), truth) < 1e-9
    assert angle_deg(upright(truth, towards), truth) < 1e-9


def _unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def _scripted_passes(monkeypatch, planes):
    """estimate_up's passes with the fitted planes given (one per pass) instead of fitted to tracks."""
    import snaketrack.tracker.calib.selfcal as selfcal

    fits = iter(planes)
    monkeypatch.setattr(selfcal, "plane_from_frames", lambda robot, layout, calib: next(fits))
    return lambda up, short: ([SimpleNamespace(iou=0.9)], None)


def test_passes_that_settle_keep_the_last(monkeypatch):
    ups = [_unit([0, -0.88, -0.47]), _unit([0, -0.881, -0.469])]  # the second moves 0.07°: settled
    planes = [PlaneFit(u, 1.0, 0.007, 0.1, 540, 720, sd) for u, sd in zip(ups, (0.010, 0.012))]
    plane, _ = estimate_up(_scripted_passes(monkeypatch, planes), robot=None, up0=_unit([0, -0.87, -0.49]),
                           max_passes=4, lengths=False)
    assert plane is planes[1]


@pytest.fixture(scope="module")
def oblique(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("oblique"), 16, seed=1, tilt_deg=TILT)


def test_up_auto_matches_the_camera_attitude(oblique):
    """The passes of ``--up auto`` (as track_source runs them, fewer candidates) find the true up direction."""
    cfg = PipelineConfig(hold_frames=0, render=False)
    frames, session, masks = open_session(oblique, config=cfg)
    truth = up_from_camera_quat(frames.truth[0]["camera_quat_world"])
    assert truth[1] < 0  # the camera is upright

    def run_pass(up, short):
        s = TrackingSession(session.robot, session.camera, session.fps,
                            replace(cfg, static_camera=up is not None))
        calib = calibration_pass(frames, s, masks, None if up is None else constant_up(up), 6 if short else 12)
        return calib, s.tracker.layout

    plane, calib = estimate_up(run_pass, session.robot, pitches_deg=(20.0, 70.0), max_passes=2)
    assert plane is not None and len(calib) == 12
    assert angle_deg(plane.up, truth) < 3.0


def test_up_auto_is_wired_into_track_source(oblique, tmp_path, monkeypatch):
    """``track_source`` with ``up="auto"`` fits the plane in its calibration passes, reports it, and holds the
    robot to it on a fixed camera; the true up direction comes from the dataset's camera attitude. The
    search is narrowed to the candidates of the test above (the wiring is what is tested here)."""
    import snaketrack.tracker.run.loop as run

    full = run.estimate_up
    monkeypatch.setattr(run, "estimate_up", lambda *a, **kw: full(*a, **{"pitches_deg": (20.0, 70.0),
                                                                         "max_passes": 2, **kw}))
    frames = open_frames(oblique)
    truth = up_from_camera_quat(frames.truth[0]["camera_quat_world"])
    summary = track_source(oblique, tmp_path / "auto", config=PipelineConfig(hold_frames=0, static_camera=True),
                           options=RunOptions(up="auto", calibration_frames=8, max_frames=8, video=False,
                                              plots=False, progress=False))
    assert summary["up"] == "auto" and summary["frames"] == 8
    assert angle_deg(summary["calibration"]["up_auto"]["up"], truth) < 3.0
    assert summary["calibration"]["seconds"] > 0
    with pytest.raises(InputError, match="spans no area|at least 2"):
        track_source(oblique, tmp_path, options=RunOptions(up="auto", calibration_frames=1, video=False,
                                                           plots=False, progress=False))


def test_refine_focal_from_a_wrong_field_of_view(oblique):
    f_true = float(K[0, 0])
    f_start = 1.15 * f_true
    fov = 2 * np.degrees(np.arctan((W / 2) / f_start))
    cfg = PipelineConfig(hold_frames=0, render=False)
    frames, session, masks = open_session(oblique, intrinsics=FieldOfView(fov), config=cfg)
    truth_up = up_from_camera_quat(frames.truth[0]["camera_quat_world"])
    calib = calibration_pass(frames, session, masks, constant_up(truth_up), 8)
    fit = refine_focal(session.robot, session.camera, calib, session.tracker.config, max_frames=4)
    assert fit.start_px == pytest.approx(f_start)
    assert abs(fit.focal_px - f_true) < abs(f_start - f_true)
    assert abs(fit.focal_px / f_true - 1) < 0.06


def test_the_calibration_passes_segment_each_frame_once():
    """``MaskMemo``: the same frame's bytes give the kept mask without a second call; at most ``limit`` kept."""
    from snaketrack.tracker.run.loop import MaskMemo

    class Counting:
        calls = 0

        def predict(self, rgb):
            Counting.calls += 1
            return rgb[..., 0] > 100

    memo = MaskMemo(Counting(), limit=2)
    rng = np.random.default_rng(0)
    a, b, c = (rng.integers(0, 255, (6, 8, 3), dtype=np.uint8) for _ in range(3))
    ma = memo.predict(a)
    assert np.array_equal(memo.predict(a.copy()), ma) and Counting.calls == 1 and memo.hits == 1
    memo.predict(b)
    memo.predict(c)  # the third frame drops the oldest
    assert Counting.calls == 3 and len(memo.masks) == 2
    memo.predict(a)
    assert Counting.calls == 4
    assert np.array_equal(memo.predict(a[:, :4].copy()), a[:, :4, 0] > 100)  # another shape, another key
