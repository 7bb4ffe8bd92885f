"""``snaketrack track`` end to end: outputs, metrics against known offsets, inputs and errors.

The pipeline tests use a small dataset drawn from known poses (tests/posed_dataset.py:
masks from the silhouette renderer, no MuJoCo) and an *oracle* tracker stand-in
that reports the truth plus a known offset, so the metrics the command
writes can be checked exactly. A last test runs the real tracker.
"""
import json
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch

from snaketrack import cli
from snaketrack.io import read_csv_columns
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.tracker.run import loop as run
from snaketrack.tracker.run import pipeline
from snaketrack.tracker.run.loop import RunOptions, track_source
from snaketrack.tracker.run.pipeline import PipelineConfig
from snaketrack.tracker.state import TrackState

from posed_dataset import FPS, R_DOWN, H, K, W, write_posed_dataset
from posed_dataset import pose as _pose

N = 10


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("ds") / "toy", N, seed=7)


class OracleTracker:
    """Stand-in for the Tracker session: reports truth + a known offset; records the masks it sees."""

    config = SimpleNamespace(min_mask_px=1)  # the session starts it on any mask pixel; no other tracker setting

    def __init__(self, robot, dq=0.0, dbase=(0.0, 0.0, 0.0)):
        self.robot, self.dq, self.dbase = robot, dq, np.asarray(dbase)
        self.i, self.masks = 0, []

    def _state(self, mask):
        self.masks.append(mask.copy())
        q, base = _pose(self.robot, self.i)
        head = forward_kinematics_np(self.robot, q + self.dq, R_DOWN, base + self.dbase)["head"]
        return TrackState(frame=self.i, t=self.i / FPS, q=q + self.dq, base_quat=np.array([0.0, 1, 0, 0]),
                          base_position=base + self.dbase, head=head, cov_trace=0.01, iou=0.9,
                          status="tracked" if mask.any() else "coasting")

    def start(self, mask, t=0.0, up=None):
        self.i = 0
        self.ups = [up]
        return self._state(mask)

    def step(self, mask, t=None, up=None):
        self.i += 1
        self.ups.append(up)
        return self._state(mask)


@pytest.fixture
def oracle(monkeypatch):
    made = []

    def make(robot, camera, fps, refine_steps=None, **kw):
        np.testing.assert_allclose(camera.K, K)
        t = OracleTracker(robot, **made_kw)
        made.append(t)
        return t

    made_kw = {}
    monkeypatch.setattr(pipeline, "make_tracker", make)
    return made, made_kw


def _main(args, capsys):
    code = cli.main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_dataset_outputs_and_metrics_match_known_offsets(dataset, oracle, tmp_path, capsys):
    made, kw = oracle
    kw.update(dq=0.02, dbase=(0.03, 0.0, 0.04))
    out = tmp_path / "out"
    code, stdout, err = _main(["track", dataset, "--robot", "planar-snake-11", "--out", out], capsys)
    assert code == 0, err
    for name in ("track.csv", "overlay.mp4", "metrics.json", "summary.json", "joint_angles.png",
                 "base_position.png"):
        assert (out / name).is_file(), name
    m = json.loads((out / "metrics.json").read_text())
    assert m["base_position_error_m"] == pytest.approx(0.05, abs=1e-9)
    assert m["joint_error_rad"] == pytest.approx(0.02, abs=1e-9)
    assert m["joint_error_l2_rad"] == pytest.approx(0.02 * np.sqrt(10), abs=1e-9)
    assert m["frames"] == N and m["frames_lost"] == 0 and m["fps"] > 0
    summary = json.loads((out / "summary.json").read_text())
    # the tracker's own time lies within the tracking pass's wall time
    assert 0 < summary["fps_wall"] <= summary["fps"]
    assert 0 <= m["iou_truth"] < 0.9  # the offset pose does not cover the truth mask
    # beside the truth's figures, those that need none
    assert m["frames_tracked"] == N and m["skeleton_residual_frames"] == N and 0 < m["silhouette_iou_mean"] < 0.9
    assert (out / "quality.csv").is_file() and (out / "quality.png").is_file()
    cols = read_csv_columns(out / "track.csv")
    assert cols["frame"].tolist() == list(range(N))
    cap = cv2.VideoCapture(str(out / "overlay.mp4"))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == N
    # the tracker was given the dataset's truth masks, unchanged
    assert all(np.array_equal(mm, cv2.imread(str(dataset / "masks" / f"{i:06d}.png"), 0) > 127)
               for i, mm in enumerate(made[0].masks))


class TurningOracle(OracleTracker):
    """Reports the truth read backwards (base shifted by ``dbase``) until frame ``turn``, where it turns
    round (``flips`` 1, reading settled); ``reread`` gives a past frame's truth."""

    def __init__(self, robot, turn=5, fail_at=None):
        super().__init__(robot, dbase=(0.5, 0.0, 0.0))
        self.turn, self.fail_at = turn, fail_at
        self.flips, self.reading_settled, self.reread_calls = 0, False, []

    def step(self, mask, t=None, up=None):
        if self.i + 1 == self.fail_at:
            raise KeyboardInterrupt
        if self.i + 1 == self.turn:
            self.flips, self.reading_settled, self.dbase = 1, True, np.zeros(3)
        return super().step(mask, up)

    def reread(self, state, mask, up=None, ground=None):
        self.reread_calls.append(state.frame)
        q, base = _pose(self.robot, state.frame)
        return TrackState(frame=state.frame, t=state.t, q=q, base_quat=state.base_quat, base_position=base,
                          head=state.head, iou=0.95, status=state.status)


@pytest.mark.parametrize("hold", [60, 0])
def test_frames_before_the_turn_are_reread_unless_not_held(dataset, tmp_path, monkeypatch, capsys, hold):
    made = []
    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **k: made.append(TurningOracle(robot)) or made[-1])
    out = tmp_path / "out"
    code, _, err = _main(["track", dataset, "--hold-frames", hold, "--out", out], capsys)
    assert code == 0, err
    cols = read_csv_columns(out / "track.csv")
    assert cols["frame"].tolist() == list(range(N))
    truth_x = [_pose(made[0].robot, i)[1][0] for i in range(N)]
    err_x = np.abs(np.asarray(cols["base_x"], float) - truth_x)
    summary = json.loads((out / "summary.json").read_text())
    if hold:
        assert made[0].reread_calls == [0, 1, 2, 3, 4] and summary["reread_frames"] == 5
        assert err_x.max() < 1e-9
    else:
        assert made[0].reread_calls == [] and summary["reread_frames"] == 0
        assert np.allclose(err_x[:5], 0.5) and err_x[5:].max() < 1e-9
    assert summary["flips"] == 1


def test_an_interrupted_run_writes_the_frames_it_held(dataset, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **k: TurningOracle(robot, turn=99, fail_at=7))
    with pytest.raises(KeyboardInterrupt):
        track_source(dataset, tmp_path / "out", options=RunOptions(progress=False))
    assert read_csv_columns(tmp_path / "out" / "track.csv")["frame"].tolist() == list(range(7))


def test_truth_pose_renders_onto_truth_mask(dataset, oracle, tmp_path, capsys):
    code, _, err = _main(["track", dataset, "--out", tmp_path / "o", "--no-video", "--max-frames", "4"], capsys)
    assert code == 0, err
    m = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert m["iou_truth"] == pytest.approx(1.0, abs=1e-9)  # same renderer, same pose, same K
    assert m["base_position_error_m"] == pytest.approx(0.0, abs=1e-12) and m["frames"] == 4


def test_corrupt_masks_are_seeded_and_differ_from_truth(dataset, oracle, tmp_path, capsys):
    made, _ = oracle
    for k in range(2):
        code, _, err = _main(["track", dataset, "--corrupt-masks", "--no-video", "--max-frames", "3",
                              "--out", tmp_path / f"c{k}"], capsys)
        assert code == 0, err
    a, b = made[0].masks, made[1].masks
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    truth0 = cv2.imread(str(dataset / "masks" / "000000.png"), 0) > 127
    assert not np.array_equal(a[0], truth0)
    code, _, _ = _main(["track", dataset, "--corrupt-masks", "--corrupt-seed", "99", "--no-video",
                        "--max-frames", "3", "--out", tmp_path / "c3"], capsys)
    assert code == 0 and not all(np.array_equal(x, y) for x, y in zip(a, made[2].masks))


def _write_video(dataset, path):
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (W, H))
    for i in range(N):
        w.write(cv2.imread(str(dataset / "frames" / f"{i:06d}.jpg")))
    w.release()


def test_video_with_mask_folder_and_intrinsics(dataset, oracle, tmp_path, capsys):
    from snaketrack.tracker.calib.camera import Camera, save_calibration

    video = tmp_path / "clip.mp4"
    _write_video(dataset, video)
    calib = tmp_path / "calib.yaml"
    save_calibration(calib, Camera.from_K(K, W, H))
    out = tmp_path / "v"
    code, _, err = _main(["track", video, "--robot", "planar-snake-11", "--intrinsics", calib,
                          "--masks", dataset / "masks", "--out", out], capsys)
    assert code == 0, err
    cols = read_csv_columns(out / "track.csv")
    assert len(cols["frame"]) == N and "iou_truth" not in cols
    assert (out / "summary.json").is_file() and (out / "quality.png").is_file()
    # no truth: metrics.json has the figures that need none; the stand-in reports the true poses
    m = json.loads((out / "metrics.json").read_text())
    assert "joint_error_rad" not in m and m["frames"] == N and m["frames_lost"] == 0
    assert m["silhouette_iou_mean"] > 0.95 and m["skeleton_residual_px"] < 1.0


def test_a_video_without_calibration_tracks_with_a_field_of_view(dataset, oracle, tmp_path, capsys):
    video = tmp_path / "clip.mp4"
    _write_video(dataset, video)
    fov = np.degrees(2 * np.arctan(W / 2 / K[0, 0]))  # the dataset's K, which the stand-in tracker checks
    code, _, err = _main(["track", video, "--robot", "planar-snake-11", "--fov-deg", repr(float(fov)), "--no-video",
                          "--masks", dataset / "masks", "--out", tmp_path / "f"], capsys)
    assert code == 0, err
    assert len(read_csv_columns(tmp_path / "f" / "track.csv")["frame"]) == N


@pytest.mark.parametrize("case", ["no-masks", "corrupt-video", "missing", "bad-robot",
                                  "wrong-robot", "bad-masks", "bad-calib", "bad-fov"])
def test_bad_inputs_give_one_line_errors(dataset, oracle, tmp_path, capsys, case):
    video = tmp_path / "clip.mp4"
    _write_video(dataset, video)
    out = ["--out", tmp_path / "o"]
    bad_calib = tmp_path / "bad.json"
    bad_calib.write_text(json.dumps({"camera_matrix": [[-5, 0, 1], [0, 5, 1], [0, 0, 1]]}))
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x01 not a video" * 50)
    args = {
        "no-masks": [video, "--robot", "planar-snake-11", "--intrinsics", bad_calib.parent / "none.yaml"],
        "corrupt-video": [broken, "--robot", "planar-snake-11", "--masks", dataset / "masks"],
        "missing": [tmp_path / "nothing.mp4", "--robot", "planar-snake-11"],
        "bad-robot": [dataset, "--robot", "no-such-robot"],
        "wrong-robot": [dataset, "--robot", "arcsnake-4"],
        "bad-masks": [dataset, "--masks", tmp_path / "nope"],
        "bad-calib": [dataset, "--intrinsics", bad_calib],
        "bad-fov": [video, "--robot", "planar-snake-11", "--fov-deg", "190", "--masks", dataset / "masks"],
    }[case]
    code, _, err = _main(["track", *args, *out], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("snaketrack: error:"), err


def test_segmenter_masks(dataset, oracle, tmp_path, capsys):
    from snaketrack.training.model import SegmenterConfig, build_model, save_model

    made, _ = oracle
    torch.manual_seed(0)
    model = tmp_path / "seg.pt"
    save_model(model, build_model(SegmenterConfig(encoder="resnet18", input_size=(64, 96))),
               SegmenterConfig(encoder="resnet18", input_size=(64, 96)))
    code, _, err = _main(["track", dataset, "--masks", f"segmenter:{model}", "--max-frames", "2", "--no-video",
                          "--out", tmp_path / "s"], capsys)
    assert code == 0, err
    status = read_csv_columns(tmp_path / "s" / "track.csv")["status"].tolist()
    # an untrained network may see no robot: such a frame is lost before the track starts, unseen by the tracker
    assert len(status) == 2 and len(made[0].masks) == 2 - status.count("lost")
    assert (tmp_path / "seg.live.onnx").is_file()  # the live setting is the default: the network was exported
    code, _, err = _main(["track", dataset, "--masks", f"segmenter:{tmp_path / 'none.pt'}", "--out",
                          tmp_path / "s2"], capsys)
    assert code == 2 and "none.pt" in err


def test_segmenter_setting_reaches_the_segmenter(dataset, oracle, tmp_path, capsys, monkeypatch):
    settings = []

    class Stub:
        def predict(self, rgb):
            m = np.zeros(rgb.shape[:2], bool)
            m[10:20, 10:40] = True
            return m

    def load(path, setting="accurate", flips=None, scale=None, **kw):
        settings.append((setting, flips) if scale is None else (setting, flips, scale))
        return Stub()

    monkeypatch.setattr(run, "load_segmenter", load)
    (tmp_path / "m.pt").write_bytes(b"stub")
    for extra, want in (([], ("live", None)), (["--segmenter-setting", "accurate"], ("accurate", None)),
                        (["--segmenter-flips", "1"], ("live", 1)),
                        (["--segmenter-flips", "1", "--segmenter-scale", "0.75"], ("live", 1, 0.75))):
        code, _, err = _main(["track", dataset, "--masks", f"segmenter:{tmp_path / 'm.pt'}", *extra,
                              "--max-frames", "1", "--no-video", "--out", tmp_path / "-".join(map(str, want))],
                             capsys)
        assert code == 0, err
        assert settings[-1] == want
    made, _ = oracle
    assert [mask.sum() for mask in made[0].masks] == [300] and made[0].masks[0].shape == (H, W)
    assert made[0].masks[0].dtype == bool


@pytest.mark.slow
def test_real_tracker_end_to_end_with_hidden_frames(dataset, tmp_path):
    """The real Tracker through track_source: found without a given pose, coasts while hidden, re-acquires."""

    out = tmp_path / "real"
    opts = RunOptions(video=True, plots=False, progress=False)
    m = track_source(dataset, out, "planar-snake-11", config=PipelineConfig(hidden=((4, 6),)), options=opts)
    cols = read_csv_columns(out / "track.csv")
    status = cols["status"].tolist()
    assert status[4:6] == ["coasting", "coasting"] and status[6:] == ["tracked"] * (N - 6)
    ok = [i for i in range(N) if i not in (4, 5)]
    assert np.all(cols["iou_truth"][ok] >= 0.8), cols["iou_truth"]
    assert m["base_position_error_m"] < 0.05 and m["joint_error_rad"] < 0.1, m
    # the figures without truth: the hidden frames have no mask to measure against
    assert m["frames_coasting"] == 2 and m["silhouette_iou_nan_frames"] == 2 and m["silhouette_iou_mean"] > 0.8
    assert m["skeleton_residual_frames"] == N - 2 and m["skeleton_residual_px"] < 2.0, m


def test_up_log_reaches_the_tracker(dataset, oracle, tmp_path, capsys):
    made, _ = oracle
    log = tmp_path / "imu.csv"
    log.write_text("frame,up_x,up_y,up_z\n" + "".join(f"{i},0,0,{-2.0 - i}\n" for i in range(0, N, 2)))
    code, _, err = _main(["track", dataset, "--up", log, "--no-video", "--max-frames", "4", "--out",
                          tmp_path / "u"], capsys)
    assert code == 0, err
    ups = made[0].ups
    assert np.allclose(ups[0], [0, 0, -1]) and ups[1] is None and np.allclose(ups[2], [0, 0, -1]) and ups[3] is None
    assert json.loads((tmp_path / "u" / "summary.json").read_text())["up"] == str(log)
    # the toy dataset has no camera attitude to simulate an IMU from; a broken log is refused
    bad = tmp_path / "bad.csv"
    bad.write_text("frame,up_x,up_y,up_z\n0,0,0,0\n")
    for spec, word in (("sim-imu", "sim-imu"), (bad, "bad.csv"), (tmp_path / "none.csv", "none.csv")):
        code, _, err = _main(["track", dataset, "--up", spec, "--out", tmp_path / "u2"], capsys)
        assert code == 2 and word in err and len(err.strip().splitlines()) == 1, err


def test_static_camera_needs_up_and_sets_the_ground_prior(dataset, tmp_path, capsys):
    code, _, err = _main(["track", dataset, "--static-camera", "--no-video", "--out", tmp_path / "s"], capsys)
    assert code == 2 and "--up" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s" / "track.csv").exists()
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import Camera

    cam = Camera(K, 320, 240)
    robot = load_robot("planar-snake-11")
    assert pipeline.make_tracker(robot, cam, 30.0, static_camera=True).config.ground_window == -1
    assert pipeline.make_tracker(robot, cam, 30.0).config.ground_window == 0
    moving = pipeline.make_tracker(robot, cam, 30.0, track_ground=True).config
    assert moving.ground_window == -1 and moving.ground_min_frames == pipeline.MOVING_GROUND_MIN_FRAMES


def test_silhouette_model_reaches_the_tracker(dataset, tmp_path, capsys):
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.calib.camera import Camera

    robot = load_robot("planar-snake-11")
    cam = Camera(K, 320, 240)
    default = pipeline.make_tracker(robot, cam, 30.0).renderer.model
    assert int(default.cylinders.sum()) == robot.n_links - 1  # one cylindrical housing per joint
    assert pipeline.make_tracker(robot, cam, 30.0, silhouette="visual-capsule").renderer.model.cylinders is None
    with pytest.raises(SystemExit) as exc:  # argparse's own one-line error for an unknown choice
        cli.main(["track", str(dataset), "--silhouette", "meshes", "--no-video", "--out", str(tmp_path / "m")])
    assert exc.value.code == 2 and "--silhouette" in capsys.readouterr().err
    assert not (tmp_path / "m" / "track.csv").exists()


def test_track_ground_needs_up_and_a_moving_camera(dataset, tmp_path, capsys):
    code, _, err = _main(["track", dataset, "--track-ground", "--no-video", "--out", tmp_path / "g"], capsys)
    assert code == 2 and "--up" in err and len(err.strip().splitlines()) == 1, err
    log = tmp_path / "up.csv"
    log.write_text("frame,up_x,up_y,up_z\n" + "".join(f"{i},0,0,-1\n" for i in range(N)))
    code, _, err = _main(["track", dataset, "--up", log, "--track-ground", "--static-camera", "--no-video",
                          "--out", tmp_path / "g2"], capsys)
    assert code == 2 and "choose one" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "g" / "track.csv").exists() and not (tmp_path / "g2" / "track.csv").exists()
    code, _, err = _main(["track", dataset, "--up", log, "--track-ground", "--no-video", "--max-frames", "6",
                          "--out", tmp_path / "g3"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "g3" / "summary.json").read_text())["track_ground"] is True
    from snaketrack.io import read_csv_columns

    ratio = np.asarray(read_csv_columns(tmp_path / "g3" / "track.csv")["camera_height_ratio"], float)
    assert len(ratio) == 6 and ratio[0] == 1.0 and np.all(np.isfinite(ratio))  # relative to the first frame


def test_track_size_resizes_frames_masks_and_K(dataset, tmp_path, monkeypatch, capsys):
    """``--track-size``: the tracker gets K scaled and masks resized, and the truth pose still lands on them."""
    from snaketrack.tracker.calib.camera import Camera

    seen = {}

    def make(robot, camera, fps, refine_steps=None, **kw):
        seen["camera"] = camera
        seen["tracker"] = OracleTracker(robot)
        return seen["tracker"]

    monkeypatch.setattr(pipeline, "make_tracker", make)
    out = tmp_path / "half"
    code, _, err = _main(["track", dataset, "--track-size", "160x120", "--max-frames", "4", "--out", out], capsys)
    assert code == 0, err
    np.testing.assert_allclose(seen["camera"].K, Camera.from_K(K, W, H).resized(160, 120).K)
    assert seen["camera"].K[0, 0] == 200.0 and seen["camera"].K[0, 2] == 79.5
    assert all(m.shape == (120, 160) and m.dtype == bool for m in seen["tracker"].masks)
    # the area-resized truth mask against the truth pose rendered with the scaled K (an independent pair)
    m = json.loads((out / "metrics.json").read_text())
    assert m["iou_truth"] > 0.92 and m["base_position_error_m"] == pytest.approx(0.0, abs=1e-12)
    assert json.loads((out / "summary.json").read_text())["track_size"] == [160, 120]
    cap = cv2.VideoCapture(str(out / "overlay.mp4"))
    ok, frame = cap.read()
    cap.release()
    assert ok and frame.shape[:2] == (120, 160)
    for bad in ("160", "0x120", "axb"):
        code, _, err = _main(["track", dataset, "--track-size", bad, "--out", tmp_path / "bad"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "size" in err


def test_states_stream_json_lines_equal_to_track_csv(dataset, oracle, tmp_path, capsys):
    """``--states -``: one JSON line per finished frame on standard output, the same values as track.csv."""
    made, kw = oracle
    kw.update(dq=0.01)
    out = tmp_path / "s"
    code, stdout, err = _main(["track", dataset, "--states", "-", "--hold-frames", "0", "--no-video",
                               "--max-frames", "5", "--out", out], capsys)
    assert code == 0, err
    lines = [json.loads(line) for line in stdout.strip().splitlines()]
    cols = read_csv_columns(out / "track.csv")
    assert len(lines) == 5 and [r["frame"] for r in lines] == cols["frame"].astype(int).tolist()
    for j in range(1, made[0].robot.dof + 1):
        np.testing.assert_allclose([r[f"q_{j}"] for r in lines], cols[f"q_{j}"], rtol=0, atol=1e-12)
    # and the oracle's poses: the truth with every joint 0.01 rad off, the base where it was drawn
    for r in lines:
        q, base = _pose(made[0].robot, r["frame"])
        np.testing.assert_allclose([r[f"q_{j + 1}"] for j in range(len(q))], q + 0.01, rtol=0, atol=1e-12)
        np.testing.assert_allclose([r["base_x"], r["base_y"], r["base_z"]], base, rtol=0, atol=1e-12)
    assert all(r["status"] == "tracked" and "iou_truth" in r for r in lines)
    assert "frames=5" in err  # the run's report moves to standard error
    # to a file: the same lines; an empty mask's NaN IoU becomes null
    f = tmp_path / "states.jsonl"
    code, stdout, err = _main(["track", dataset, "--states", f, "--no-video", "--max-frames", "3",
                               "--out", tmp_path / "s2"], capsys)
    assert code == 0 and "frames=3" in stdout
    assert [json.loads(x)["frame"] for x in f.read_text().splitlines()] == [0, 1, 2]
    from snaketrack.tracker.run.outputs import StateStream

    s = StateStream(str(tmp_path / "n.jsonl"))
    s.write({"frame": np.int64(0), "iou": float("nan"), "q_1": np.float64(0.5), "q_2": np.float32("nan")})
    s.close()
    assert json.loads((tmp_path / "n.jsonl").read_text()) == {"frame": 0, "iou": None, "q_1": 0.5, "q_2": None}
    code, _, err = _main(["track", dataset, "--states", tmp_path / "no" / "dir" / "x.jsonl", "--no-video",
                          "--max-frames", "2", "--out", tmp_path / "s3"], capsys)
    assert code == 2 and "--states" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s3").exists()  # nothing written before the error


def test_segmenter_sees_the_frame_as_tracked_and_its_mask_is_not_undistorted_again(dataset, oracle, tmp_path,
                                                                                   monkeypatch, capsys):
    """A segmenter's mask comes from the undistorted, resized frame: it is the tracker's geometry already,
    so it must not be undistorted a second time."""
    from snaketrack.tracker.calib.camera import Camera, Undistorter, save_calibration

    made, _ = oracle
    seen = []

    class ColourSegmenter:  # the toy frames paint the robot orange on grey
        def predict(self, rgb):
            seen.append(rgb.shape)
            return (rgb[..., 0].astype(int) - rgb[..., 2].astype(int)) > 60

    monkeypatch.setattr(run, "load_segmenter", lambda path, **kw: ColourSegmenter())
    (tmp_path / "m.pt").write_bytes(b"stub")
    cam = Camera.from_K(K, W, H, dist=np.array([-0.25, 0.08, 0.0, 0.0, 0.0]))
    calib = tmp_path / "calib.yaml"
    save_calibration(calib, cam)
    code, _, err = _main(["track", dataset, "--intrinsics", calib, "--masks", f"segmenter:{tmp_path / 'm.pt'}",
                          "--max-frames", "2", "--no-video", "--out", tmp_path / "o"], capsys)
    assert code == 0, err
    rgb0 = cv2.cvtColor(cv2.imread(str(dataset / "frames" / "000000.jpg")), cv2.COLOR_BGR2RGB)
    expected = ColourSegmenter().predict(Undistorter(cam).frame(rgb0))
    assert np.array_equal(made[0].masks[0], expected)
    assert not np.array_equal(expected, Undistorter(cam).mask(expected))  # the distortion matters here
    half = []

    def make_half(robot, camera, fps, refine_steps=None, **kw):
        half.append(OracleTracker(robot))
        return half[-1]

    monkeypatch.setattr(pipeline, "make_tracker", make_half)
    code, _, err = _main(["track", dataset, "--intrinsics", calib, "--masks", f"segmenter:{tmp_path / 'm.pt'}",
                          "--track-size", "160x120", "--max-frames", "1", "--no-video", "--out", tmp_path / "h"],
                         capsys)
    assert code == 0, err
    assert seen[-1] == (120, 160, 3) and half[0].masks[0].shape == (120, 160)


def test_threads_reach_torch_and_a_bad_count_is_one_line(dataset, oracle, tmp_path, capsys, monkeypatch):
    seen = []
    track = run.track_source
    monkeypatch.setattr(run, "track_source", lambda *a, **kw: seen.append(torch.get_num_threads()) or track(*a, **kw))
    before = torch.get_num_threads()
    try:
        code, _, err = _main(["track", dataset, "--threads", "1", "--max-frames", "1", "--no-video",
                              "--out", tmp_path / "t"], capsys)
        assert code == 0, err
        assert seen == [1]
    finally:
        torch.set_num_threads(before)
    code, _, err = _main(["track", dataset, "--threads", "0", "--out", tmp_path / "z"], capsys)
    assert code == 2 and err.strip().splitlines() == ["snaketrack: error: --threads 0: expected at least 1"]
    assert not (tmp_path / "z").exists()
