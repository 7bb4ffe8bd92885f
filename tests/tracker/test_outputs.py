"""track.csv, overlay video, metrics.json figures and plots."""
import json

import cv2
import numpy as np
import pytest

from snaketrack.errors import FileFormatError, InputError
from snaketrack.io import read_csv_columns
from snaketrack.masks import mask_iou
from snaketrack.models.robot import load_robot
from snaketrack.tracker.run.evaluation import plot_tracking, tracking_metrics
from snaketrack.tracker.run.outputs import (
    OverlayVideo,
    TrackWriter,
    draw_overlay,
    link_axes_cam,
    project_points,
    track_columns,
)
from snaketrack.tracker.state import TrackState

# typed out from docs/conventions.md, independently of the code
DESIGN_COLUMNS_J2 = ["frame", "t", "q_1", "q_2", "base_x", "base_y", "base_z", "base_qw", "base_qx", "base_qy",
                     "base_qz", "head_x", "head_y", "head_z", "cov_trace", "iou", "status"]


def _state(i, q, base, status="tracked", iou=0.9):
    return TrackState(frame=i, t=i / 30, q=np.asarray(q, float), base_quat=np.array([1.0, 0, 0, 0]),
                      base_position=np.asarray(base, float), head=np.asarray(base, float) + [0.5, 0, 0],
                      cov_trace=0.1, iou=iou, status=status)


def test_track_csv_columns_and_rows_written_as_frames_finish(tmp_path):
    assert track_columns(2) == DESIGN_COLUMNS_J2
    p = tmp_path / "track.csv"
    with TrackWriter(p, 2, extra_columns=["iou_truth"]) as w:
        w.write(_state(0, [0.1, -0.2], [0.0, 0.1, 1.5]), iou_truth=0.8)
        # readable before the writer is closed (flushed per row)
        cols = read_csv_columns(p)
        assert list(cols) == DESIGN_COLUMNS_J2 + ["iou_truth"]
        assert cols["q_2"].tolist() == [-0.2] and cols["status"].tolist() == ["tracked"]
        w.write(_state(1, [0.1, -0.1], [0.0, 0.1, 1.5], status="coasting", iou=float("nan")))
        with pytest.raises(InputError, match="joint angles"):
            w.write(_state(2, [0.1, 0.2, 0.3], [0, 0, 1]))
    cols = read_csv_columns(p)
    assert cols["frame"].tolist() == [0, 1] and np.isnan(cols["iou"][1]) and np.isnan(cols["iou_truth"][1])


def _truth(n, J, rng):
    return [{"frame": i, "t": i / 30, "joint_angles": rng.uniform(-1, 1, J).tolist(),
             "base_position_cam": rng.uniform(-0.5, 0.5, 3).tolist(),
             "head_position_cam": rng.uniform(-0.5, 0.5, 3).tolist()} for i in range(n)]


def test_metrics_against_known_offsets(tmp_path):
    rng = np.random.default_rng(0)
    J, n = 3, 20
    truth = _truth(n, J, rng)
    truth[5]["joint_angles"][0] = np.pi - 0.01  # estimate on the other side of ±π
    dq = np.array([0.02, -0.04, 0.01])
    p = tmp_path / "track.csv"
    with TrackWriter(p, J, ["iou_truth"]) as w:
        for i, r in enumerate(truth):
            q = np.array(r["joint_angles"]) + dq
            if i == 5:
                q[0] = -np.pi + 0.01  # = truth + 0.02 after wrapping
            base = np.array(r["base_position_cam"]) + [0.03, 0.04, 0.0]
            st = _state(i, q, base, status="lost" if i in (3, 4) else "tracked", iou=0.5 + i / 100)
            st = type(st)(**{**st.__dict__, "head": np.array(r["head_position_cam"]) + [0, 0, 0.1]})
            w.write(st, iou_truth=0.9 if i % 2 else 0.7)
    m = tracking_metrics(read_csv_columns(p), truth, J, fps=12.5)
    expected_abs = np.abs(dq)
    expected_abs_5 = np.array([0.02, 0.04, 0.01])
    assert m["base_position_error_m"] == pytest.approx(0.05, abs=1e-12)
    assert m["head_position_error_m"] == pytest.approx(0.1, abs=1e-12)
    assert m["joint_error_rad"] == pytest.approx(np.mean(np.r_[np.tile(expected_abs, n - 1), expected_abs_5]), abs=1e-9)
    assert m["joint_error_l2_rad"] == pytest.approx(np.linalg.norm(expected_abs), abs=1e-9)
    assert m["iou"] == pytest.approx(np.mean(0.5 + np.arange(n) / 100))
    assert m["iou_truth"] == pytest.approx(0.8)
    assert (m["fps"], m["frames"], m["frames_lost"], m["frames_coasting"]) == (12.5, n, 2, 0)
    json.dumps(m)  # JSON-ready
    with pytest.raises(FileFormatError, match="frame 10"):
        tracking_metrics(read_csv_columns(p), truth[:10], J)
    with pytest.raises(FileFormatError, match="joint angles"):
        tracking_metrics(read_csv_columns(p), _truth(n, J + 1, rng), J)


def test_plots_are_written(tmp_path):
    rng = np.random.default_rng(1)
    J, n = 4, 15
    truth = _truth(n, J, rng)
    p = tmp_path / "track.csv"
    with TrackWriter(p, J) as w:
        for i, r in enumerate(truth):
            w.write(_state(i, np.array(r["joint_angles"]) + 0.05, r["base_position_cam"]))
    paths = plot_tracking(read_csv_columns(p), truth, J, tmp_path / "plots")
    assert {x.name for x in paths} == {"joint_angles.png", "base_position.png"}
    for x in paths:
        img = cv2.imread(str(x))
        assert img is not None and img.shape[0] > 200
    assert len(plot_tracking(read_csv_columns(p), None, J, tmp_path / "p2")) == 2
    track = dict(read_csv_columns(p), camera_height_ratio=np.linspace(1.0, 1.1, len(truth)))
    truth_cam = [dict(r, camera_position_world=[0.0, 0.0, 1.5 + 0.01 * i]) for i, r in enumerate(truth)]
    paths = plot_tracking(track, truth_cam, J, tmp_path / "p3")
    assert [x.name for x in paths][-1] == "camera_height.png" and cv2.imread(str(paths[-1])) is not None


def test_link_axes_and_projection():
    robot = load_robot("planar-snake-11")
    starts, ends, head = link_axes_cam(robot, np.zeros(robot.dof), np.eye(3), [0.1, 0.0, 2.0])
    np.testing.assert_allclose(ends[-1], [0.1 + robot.total_length, 0, 2.0], atol=1e-12)
    np.testing.assert_allclose(starts[1:], ends[:-1], atol=1e-12)
    K = np.array([[400.0, 0, 320], [0, 410, 180], [0, 0, 1]])
    pts = np.vstack([starts, ends])
    ref, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), K, None)
    np.testing.assert_allclose(project_points(K, pts), ref[:, 0], atol=1e-9)
    assert np.isnan(project_points(K, np.array([[0.0, 0, -1.0]]))).all()


def test_overlay_draws_contour_and_axes_and_video_is_readable(tmp_path):
    h, w = 120, 160
    rgb = np.full((h, w, 3), 40, np.uint8)
    mask = np.zeros((h, w), bool)
    mask[40:80, 30:130] = True
    axes = np.array([[[30.0, 60.0], [80.0, 60.0]], [[80.0, 60.0], [130.0, 60.0]]])
    out = draw_overlay(rgb, mask, axes, head_uv=np.array([105.0, 60.0]), text="frame 0", status="tracked")
    assert out.shape == rgb.shape and not np.shares_memory(out, rgb)
    # the mask's outline is cyan, its interior away from the axis is untouched
    c = out[40, 80].astype(int)
    assert c[0] < 60 and c[1] > 180 and c[2] > 180 and tuple(out[50, 80]) == (40, 40, 40)
    # the axis line is red along v = 60
    assert out[60, 55, 0] > 200 and out[60, 55, 1] < 100
    with OverlayVideo(tmp_path / "overlay.mp4", 10, w, h) as v:
        for _ in range(7):
            v.write(out)
        assert not (tmp_path / "overlay.mp4").exists()  # renamed into place on close
    cap = cv2.VideoCapture(str(tmp_path / "overlay.mp4"))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == 7
    with pytest.raises(InputError):
        draw_overlay(rgb, mask[:10], axes)


def test_mask_iou():
    a = np.zeros((5, 5), bool)
    assert mask_iou(a, a) == 1.0  # two empty masks agree
    b = a.copy()
    b[0, 0] = True
    assert mask_iou(a, b) == 0.0 and mask_iou(b, b) == 1.0
