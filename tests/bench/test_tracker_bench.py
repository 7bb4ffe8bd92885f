"""The tracker's benchmark (snaketrack.bench.tracking): its options and re-acquisition count, and
``snaketrack bench tracker`` run as a command on one tiny clip (the JSON it prints, the renderer's reference)."""
import csv
import json
import math

import pytest

from snaketrack.bench.tracking import BenchmarkConfig, bench_options, dataset_dir, obstacles_for, reacquire_frames
from snaketrack.errors import InputError


def test_options_declare_the_camera_only_with_an_up_direction():
    for scene, up, fixed, moving in (("static", "sim-imu", True, False), ("drone", "sim-imu", False, True),
                                     ("handheld", "none", False, False), ("static", "none", False, False)):
        config, options = bench_options(scene, seed=5, frames=40, up=up)
        assert (config.static_camera, config.track_ground) == (fixed, moving), (scene, up)
        assert config.corrupt_masks and config.corrupt_seed == 5 and config.refine_steps == 10
        assert options.max_frames == 40 and options.up == up and not (options.video or options.plots)
    config, _ = bench_options("static", 0, 10, static_camera=False)
    assert not config.static_camera
    config, _ = bench_options("drone", 0, 10, track_ground=False)
    assert not config.track_ground


def test_clip_names_and_posts(tmp_path):
    assert dataset_dir(tmp_path, "handheld", "planar-snake-11", 2) == tmp_path / "handheld-planar-s2"
    assert dataset_dir(tmp_path, "drone", "robots/my-snake.yaml", 0) == tmp_path / "drone-my-snake-s0"
    assert not obstacles_for("static", "planar-snake-11") and obstacles_for("static", "arcsnake-4")
    with pytest.raises(InputError):
        BenchmarkConfig(frames=0)
    with pytest.raises(InputError):
        BenchmarkConfig(scenes=("garden",))


def test_reacquire_counts_from_the_first_visible_frame(tmp_path):
    path = tmp_path / "track.csv"
    rows = [(10, 0.9), (20, float("nan")), (21, 0.5), (23, 0.85), (24, 0.95)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["frame", "iou_truth"])
        w.writerows(rows)
    assert reacquire_frames(path, hide_end=20) == 3  # frame 10 is before the robot was hidden
    assert reacquire_frames(path, hide_end=20, threshold=0.9) == 4
    assert reacquire_frames(path, hide_end=20, threshold=0.99) is None


def test_bench_prints_the_tracker_figures(tmp_path, capsys, run_bench):
    code = run_bench("tracker", ["--data", tmp_path / "data", "--out", tmp_path / "out", "--frames", "6",
                                        "--scenes", "drone", "--robots", "arcsnake-4", "--no-reacquire",
                                        "--up", "sim-imu", "--threads", "1", "--timing-reps", "2"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    scene = out["per_scene"]["drone/arcsnake-4"]
    assert scene["frames"] == 6 and scene["track_ground"] is True and scene["static_camera"] is False
    for key in ("base_position_error_m", "joint_error_rad", "joint_error_l2_rad", "iou", "iou_truth", "fps"):
        assert math.isfinite(scene[key]), key
    assert 0 < scene["iou_model_ceiling"] <= 1 and 0 < scene["iou_ceiling"] <= 1
    assert (tmp_path / "data" / "drone-arcsnake-s0" / "meta.json").is_file()
    assert (tmp_path / "out" / "drone-arcsnake" / "track.csv").is_file()
    # the banded renderer draws what the dense reference (every pixel, every primitive) draws, up to
    # its coverage cut at 8 sigma; the timings are reported, never asserted
    assert out["render_dense_max_abs_diff"] < 2e-4
    for key in ("render_fwd_bwd_ms", "render_dense_speedup_x", "render_16x_frame_cost_x", "jacobian_band_ms"):
        assert math.isfinite(out[key]) and out[key] > 0, key
    assert out["refine_steps"] == 10 and out["up"] == "sim-imu"
