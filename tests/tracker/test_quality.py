"""Track quality without truth: each figure against a synthetic case whose answer is known."""
import json

import cv2
import numpy as np
import pytest

from snaketrack.io import read_csv_columns
from snaketrack.models.robot import load_robot
from snaketrack.tracker.run.loop import RunOptions, track_source
from snaketrack.tracker.run.pipeline import PipelineConfig
from snaketrack.tracker.run.quality import (
    dominant_frequency,
    frequency_agreement,
    gait_spectra,
    iou_figures,
    joint_second_differences,
    joint_smoothness,
    quality_metrics,
    skeleton_residual,
    status_counts,
)
from snaketrack.tracker.state import TrackState

from posed_dataset import QUAT_DOWN, H, K, TruePoses, W, pose, write_posed_dataset

FPS = 30.0
T = np.arange(300) / FPS  # 10 s at 30 fps


# -- the gait's frequency ---------------------------------------------------------------------
@pytest.mark.parametrize("f", [0.8, 0.83, 1.37])
def test_a_noisy_sinusoid_s_frequency_and_power_fraction(f):
    rng = np.random.default_rng(0)
    amp, noise = 0.5, 0.05
    x = amp * np.sin(2 * np.pi * f * T + 0.3) + noise * rng.standard_normal(len(T))
    f0, frac, freqs, power = dominant_frequency(x, FPS)
    assert f0 == pytest.approx(f, abs=0.01)
    # the sinusoid's power amp²/2 against white noise's noise², spread over 0..15 Hz (a sliver in the band)
    assert frac == pytest.approx(amp ** 2 / 2 / (amp ** 2 / 2 + noise ** 2), abs=0.01)
    assert freqs[np.argmax(power)] == pytest.approx(f, abs=0.02)


def test_two_frequencies_split_the_power_as_their_amplitudes_squared():
    x = 1.0 * np.sin(2 * np.pi * 0.8 * T) + 0.5 * np.sin(2 * np.pi * 2.0 * T + 1.0)
    f0, frac, _, _ = dominant_frequency(x, FPS)
    assert f0 == pytest.approx(0.8, abs=0.01)
    assert frac == pytest.approx(1.0 / (1.0 + 0.25), abs=0.01)  # 0.8 of the power at 0.8 Hz


def test_a_constant_a_line_or_a_short_clip_has_no_frequency():
    for x in (np.full(300, 0.3), 0.3 + 0.01 * np.arange(300), np.sin(2 * np.pi * 0.8 * T[:10]),
              np.where(np.arange(300) == 7, np.nan, np.sin(2 * np.pi * 0.8 * T))):
        f0, frac, _, _ = dominant_frequency(x, FPS)
        assert np.isnan(f0) and np.isnan(frac)


def test_joints_at_one_gait_frequency_agree_across_lost_frames():
    n_joints = 6
    q = 0.4 * np.sin(2 * np.pi * 0.8 * T[:, None] + 0.6 * np.arange(n_joints))
    tracked = np.ones(len(T), bool)
    tracked[100:110] = False
    q[100:110] = 3.0  # what a lost frame reports is not the body: interpolated over
    gait = gait_spectra(q, np.arange(len(T)), tracked, FPS)
    np.testing.assert_allclose(gait["f0"], 0.8, atol=0.01)
    assert (gait["fraction"] > 0.95).all()
    f, spread = frequency_agreement(gait["f0"])
    assert f == pytest.approx(0.8, abs=0.01) and spread < 0.02
    assert frequency_agreement([1.0, 1.1, 0.9, np.nan]) == pytest.approx((1.0, 0.1))
    assert np.isnan(gait_spectra(q[:10], np.arange(10), tracked[:10], FPS)["f0"]).all()


# -- smoothness ---------------------------------------------------------------------------------
def test_a_quadratic_has_its_constant_second_difference():
    n = np.arange(40.0)
    a = np.array([0.001, -0.003])
    q = a * n[:, None] ** 2 + np.array([0.02, 0.1]) * n[:, None] + 0.5  # Δ²q = 2a
    tracked = np.ones(40, bool)
    tracked[20] = False  # the triples through frame 20 are left out
    d2 = joint_second_differences(q, n, tracked)
    assert d2.shape == (38 - 3, 2)
    np.testing.assert_allclose(d2, np.broadcast_to(2 * a, d2.shape), atol=1e-12)
    np.testing.assert_allclose(joint_smoothness(q, n, tracked), 2 * np.abs(a), atol=1e-12)


def test_one_spike_gives_three_second_differences_and_no_median():
    q = np.full((30, 1), 0.2)
    q[10] += 0.1
    d2 = joint_second_differences(q, np.arange(30), np.ones(30, bool))
    np.testing.assert_allclose(d2[8:11, 0], [0.1, -0.2, 0.1], atol=1e-12)
    assert np.count_nonzero(np.abs(d2) > 1e-12) == 3
    assert joint_smoothness(q, np.arange(30), np.ones(30, bool))[0] == pytest.approx(0.0, abs=1e-12)
    frames = np.arange(30)
    frames[15:] += 5  # a gap in the frames: no triple spans it
    assert len(joint_second_differences(q, frames, np.ones(30, bool))) == 28 - 2
    assert np.isnan(joint_smoothness(q[:2], np.arange(2), np.ones(2, bool))).all()


# -- skeleton residual --------------------------------------------------------------------------
ZIGZAG = np.array([[40.0, 120], [100, 105], [160, 120], [220, 105], [280, 120]])  # slopes ±0.25


def _draw(points, thickness=9, shift=(0, 0)):
    mask = np.zeros((H, W), np.uint8)
    for a, b in zip(points[:-1], points[1:]):
        cv2.line(mask, tuple(int(v) for v in a + shift), tuple(int(v) for v in b + shift), 1, thickness)
    return mask > 0


def test_a_mask_drawn_along_the_segments_has_a_residual_under_a_pixel():
    segments = np.stack([ZIGZAG[:-1], ZIGZAG[1:]], axis=1)
    residual, n = skeleton_residual(_draw(ZIGZAG), segments)
    assert residual < 1.0 and n > 200
    assert skeleton_residual(np.zeros((H, W), bool), segments) == (pytest.approx(np.nan, nan_ok=True), 0)
    assert np.isnan(skeleton_residual(_draw(ZIGZAG), np.full((4, 2, 2), np.nan))[0])


def test_a_mask_shifted_by_five_pixels_has_a_five_pixel_residual():
    straight = np.array([[40.0, 120], [280, 120]])
    segments = np.stack([straight[:-1], straight[1:]], axis=1)
    assert skeleton_residual(_draw(straight, shift=(0, 5)), segments)[0] == pytest.approx(5.0, abs=0.5)
    # the zigzag moved 5 px down: each segment is 5·cos(atan 0.25) px from its copy
    segments = np.stack([ZIGZAG[:-1], ZIGZAG[1:]], axis=1)
    expected = 5 * np.cos(np.arctan(0.25))
    assert skeleton_residual(_draw(ZIGZAG, shift=(0, 5)), segments)[0] == pytest.approx(expected, abs=0.5)


def _robot_state(q, base):
    return TrackState(frame=0, t=0.0, q=q, base_quat=np.array(QUAT_DOWN), base_position=base, head=np.zeros(3))


def _axes_uv(robot, state):
    from snaketrack.tracker.run.outputs import link_axes_uv

    return link_axes_uv(robot, state.q, state.base_rotation, state.base_position, K)[0]


def _draw_axes(axes, thickness=7):
    mask = np.zeros((H, W), np.uint8)
    for a, b in axes:
        cv2.line(mask, tuple(int(round(v)) for v in a), tuple(int(round(v)) for v in b), 1, thickness)
    return mask > 0


def test_the_robot_s_projected_axes_meet_a_mask_drawn_along_them():
    robot = load_robot("planar-snake-11")
    q, base = pose(robot, 7)
    axes = _axes_uv(robot, _robot_state(q, base))
    assert axes.shape == (robot.dof + 1, 2, 2)  # a link per joint and one more
    assert skeleton_residual(_draw_axes(axes), axes)[0] < 1.0
    # straight along the image's u axis, then the base 5 px further down the image (the robot lies flat
    # at depth z, so 5 px is 5 z / fy metres)
    straight = np.zeros(robot.dof)
    mask = _draw_axes(_axes_uv(robot, _robot_state(straight, base)))
    moved = _axes_uv(robot, _robot_state(straight, base + [0, 5 * base[2] / K[1, 1], 0]))
    assert skeleton_residual(mask, moved)[0] == pytest.approx(5.0, abs=0.5)


# -- counts and IoUs ----------------------------------------------------------------------------
def test_status_counts_and_iou_figures_of_a_synthetic_track():
    status = ["tracked"] * 14 + ["coasting"] * 4 + ["lost"] * 2
    c = status_counts(status)
    assert (c["frames"], c["frames_tracked"], c["frames_coasting"], c["frames_lost"]) == (20, 14, 4, 2)
    assert (c["tracked_fraction"], c["coasting_fraction"], c["lost_fraction"]) == pytest.approx((0.7, 0.2, 0.1))
    iou = np.concatenate([np.linspace(0, 1, 21), [np.nan] * 3])  # 0, 0.05 … 1 and three lost frames
    assert iou_figures(iou) == pytest.approx((0.5, 0.05, 3))
    assert np.isnan(iou_figures([np.nan, np.nan])[0]) and iou_figures([np.nan, np.nan])[2] == 2


def test_quality_metrics_of_a_track_table():
    n, n_joints = 300, 3
    q = 0.3 * np.sin(2 * np.pi * 1.2 * T[:, None] + np.arange(n_joints))
    status = np.array(["tracked"] * n, dtype=object)
    status[50:55], status[200:203] = "coasting", "lost"
    track = {"frame": np.arange(n, dtype=float), "status": status, "iou": np.full(n, 0.9),
             "iou_no_offset": np.where(status == "lost", np.nan, 0.8)}
    track.update({f"q_{j + 1}": q[:, j] for j in range(n_joints)})
    quality = {"frame": np.arange(n, dtype=float), "skeleton_residual_px": np.where(np.arange(n) < 285, 1.0, 3.0)}
    m = quality_metrics(track, n_joints, FPS, quality)
    assert (m["frames"], m["frames_coasting"], m["frames_lost"]) == (n, 5, 3)
    assert m["silhouette_iou_mean"] == pytest.approx(0.8) and m["silhouette_iou_nan_frames"] == 3
    assert m["fit_iou_mean"] == pytest.approx(0.9) and m["fit_iou_nan_frames"] == 0
    # 285 frames at 1 px, 15 at 3 px: the 95th percentile lies 0.05 of the way from the 285th to the 286th
    assert m["skeleton_residual_px"] == 1.0 and m["skeleton_residual_p95_px"] == pytest.approx(1.0 + 0.05 * 2.0)
    w = 2 * np.pi * 1.2 / FPS  # Δ² of a sinusoid is −(2 − 2 cos w) times it
    expected = [np.median(np.abs((2 - 2 * np.cos(w)) * q[1:-1, j][(status[:-2] == "tracked")
                                                                    & (status[1:-1] == "tracked")
                                                                    & (status[2:] == "tracked")]))
                for j in range(n_joints)]
    np.testing.assert_allclose(m["joint_second_difference_per_joint_rad"], expected, rtol=1e-3)
    assert m["gait_frequency_hz"] == pytest.approx(1.2, abs=0.01) and m["gait_frequency_spread"] < 0.02
    assert len(m["gait_frequency_per_joint_hz"]) == n_joints and m["gait_power_fraction"] > 0.95


# -- a run without truth ------------------------------------------------------------------------
def test_a_run_without_truth_writes_the_quality_figures(tmp_path, monkeypatch):
    from snaketrack.tracker.run import pipeline

    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **kw: TruePoses(robot))
    n = 64  # a cycle of the posed dataset's 0.5 Hz wave
    ds = write_posed_dataset(tmp_path / "ds", n, seed=5)
    (ds / "truth.jsonl").unlink()
    out = tmp_path / "out"
    summary = track_source(ds, out, "planar-snake-11", config=PipelineConfig(hidden=((40, 43),)),
                           options=RunOptions(video=False, plots=False, progress=False))
    m = json.loads((out / "metrics.json").read_text())
    assert "joint_error_rad" not in m and m["frames"] == n
    assert (m["frames_tracked"], m["frames_coasting"], m["frames_lost"]) == (n - 3, 3, 0)
    assert m["coasting_fraction"] == pytest.approx(3 / n)
    # the masks were drawn by the renderer at these poses: the silhouette is the mask; hidden frames have none
    assert m["silhouette_iou_mean"] == pytest.approx(1.0, abs=1e-9) and m["silhouette_iou_nan_frames"] == 3
    assert m["skeleton_residual_px"] < 1.0 and m["skeleton_residual_frames"] == n - 3
    assert m["gait_frequency_hz"] == pytest.approx(0.5, abs=0.02) and m["gait_frequency_spread"] < 0.05
    assert len(m["joint_second_difference_per_joint_rad"]) == 10
    # q = 0.4 sin(2π 0.5 t + φ): |Δ²q| ≤ 0.4 (2π 0.5 / 30)² per frame
    assert 0 < m["joint_second_difference_rad"] < 0.4 * (np.pi / FPS) ** 2
    per_frame = read_csv_columns(out / "quality.csv")
    assert per_frame["frame"].tolist() == list(range(n))
    assert np.isnan(per_frame["skeleton_residual_px"][40:43]).all() and per_frame["skeleton_pixels"][40] == 0
    assert not (out / "quality.png").exists()  # no plots asked for (tests/commands/test_track_cli.py draws it)
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["silhouette_iou_mean"] == pytest.approx(m["silhouette_iou_mean"])
    assert summary["skeleton_residual_px"] == pytest.approx(m["skeleton_residual_px"])
