"""``snaketrack estimate`` and ``snaketrack sim experiments`` (snaketrack/commands/estimation.py), in-process."""
from __future__ import annotations

import json

import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.estimation.kf import KalmanJacobianEstimator
from snaketrack.estimation.metrics import run_estimator
from snaketrack.estimation.states import savgol_derivative
from snaketrack.estimation.synthetic import synthetic_trajectory, track_rows, write_states_csv, write_track_csv
from snaketrack.io import read_csv_columns


@pytest.fixture
def clip():
    return synthetic_trajectory(duration=3.0, dt=1 / 30, n_joints=4, seed=3, drift_rad_s=0.2)


@pytest.mark.parametrize("estimator", ["ukf", "co", "kf"])
def test_estimate_on_a_short_track_csv(tmp_path, clip, estimator, capsys):
    write_track_csv(tmp_path / "track.csv", clip, plane="xy", lost=(40,))
    out = tmp_path / "est"
    assert main(["estimate", str(tmp_path / "track.csv"), "--estimator", estimator, "--out", str(out),
                 "--sg-window", "5", "--no-figures"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"] == "track" and summary["frame"] == "camera xy" and summary["filled_values"] == 6
    table = read_csv_columns(out / "estimate.csv")
    assert len(table["t"]) == clip.t.size and "J_2_4" in table and np.isnan(table["rdot_hat_x"][0])
    pred = np.column_stack([table["rdot_hat_x"], table["rdot_hat_y"]])
    meas = np.column_stack([table["rdot_x"], table["rdot_y"]])
    # MSE recomputed from the written columns
    assert summary["mse_x"] == pytest.approx(np.nanmean((pred[:, 0] - meas[:, 0]) ** 2), rel=1e-9)
    # the measured velocity is the Savitzky-Golay derivative of the head track (away from the filled frame)
    ref = savgol_derivative(clip.head_xy, clip.t, 5, 2)
    np.testing.assert_allclose(meas[:35], ref[:35], atol=1e-9)
    # once converged the prediction follows the velocity
    assert np.mean(np.sum((pred[60:] - meas[60:]) ** 2, axis=1)) < 0.1 * np.mean(np.sum(meas[60:] ** 2, axis=1))


def test_estimate_on_states_csv_matches_library(tmp_path, clip, capsys):
    write_states_csv(tmp_path / "states.csv", clip)
    assert main(["estimate", str(tmp_path / "states.csv"), "--estimator", "kf", "--q", "1e-4",
                 "--out", str(tmp_path / "o")]) == 0
    from snaketrack.estimation.kf import KFConfig

    run = run_estimator(KalmanJacobianEstimator(4, KFConfig(q=1e-4)), clip.phidot, clip.head_vxy)
    table = read_csv_columns(tmp_path / "o" / "estimate.csv")
    np.testing.assert_allclose(table["J_1_3"], run.jacobian[:, 0, 2], rtol=1e-12)
    assert (tmp_path / "o" / "estimate.png").stat().st_size > 0


def test_estimate_errors_are_one_line(tmp_path, capsys):
    assert main(["estimate", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("t,x\n0,1\n")
    assert main(["estimate", str(tmp_path / "bad.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.csv" in err
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00t,q_1\n")
    (tmp_path / "words.csv").write_text("t,q_1,q_2,head_x,head_y\n0,0,0,0,0\n0.1,abc,0,0,0\n")
    for name, why in (("binary.csv", "not a text table"), ("words.csv", "column q_1 holds a value that is not")):
        assert main(["estimate", str(tmp_path / name), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err
    assert not (tmp_path / "o").exists()


def test_estimate_does_not_overwrite_another_commands_summary(tmp_path, clip, capsys):
    write_states_csv(tmp_path / "states.csv", clip)
    (tmp_path / "summary.json").write_text('{"from": "sim oal"}\n')
    assert main(["estimate", str(tmp_path / "states.csv"), "--out", str(tmp_path), "--no-figures"]) == 2
    assert "another command's summary.json" in capsys.readouterr().err
    assert (tmp_path / "summary.json").read_text() == '{"from": "sim oal"}\n'
    out = tmp_path / "est"
    for _ in range(2):  # its own folder is written again
        assert main(["estimate", str(tmp_path / "states.csv"), "--out", str(out), "--no-figures"]) == 0


@pytest.mark.parametrize("estimator", ["ukf", "co", "kf"])
def test_estimate_reads_the_track_state_stream_as_the_csv(tmp_path, clip, estimator, capsys):
    """The tracker's track.csv and its --states JSON lines of the same rows give the same estimate."""
    from snaketrack.tracker.run.outputs import StateStream, TrackWriter

    rows = track_rows(clip, plane="xz", lost=(12, 13))
    with TrackWriter(tmp_path / "track.csv", 4) as w:
        for r in rows:
            w.write(r)
    stream = StateStream(str(tmp_path / "states.jsonl"))
    for r in rows:
        stream.write(r)
    stream.close()
    outs = {}
    for name in ("track.csv", "states.jsonl"):
        out = tmp_path / name.replace(".", "_")
        assert main(["estimate", str(tmp_path / name), "--estimator", estimator, "--plane", "xz",
                     "--sg-window", "5", "--out", str(out), "--no-figures"]) == 0
        summary = json.loads((out / "summary.json").read_text())
        summary.pop("step_time_ms")
        outs[name] = ((out / "estimate.csv").read_bytes(), summary)
    assert outs["track.csv"] == outs["states.jsonl"]
    assert outs["track.csv"][1]["filled_values"] == 2 * (4 + 2)


def test_estimate_malformed_state_stream_line_is_one_line_error(tmp_path, clip, capsys):
    lines = [json.dumps(r) for r in track_rows(clip)[:20]]
    lines[6] = lines[6][:40]
    bad = tmp_path / "stream.out"                  # told apart by content, not name
    bad.write_text("\n".join(lines) + "\n")
    assert main(["estimate", str(bad), "--no-figures", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: line 7: not valid JSON" in err


def test_sim_experiments_short_run(tmp_path, capsys):
    pytest.importorskip("mujoco")
    out = tmp_path / "x"
    assert main(["sim", "experiments", "--out", str(out), "--duration", "1.0", "--experiments", "1", "3",
                 "--no-figures", "--exp3-noise-var", "0.05"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert set(s) >= {"experiment_1", "experiment_3", "settings"} and "experiment_2" not in s
    assert s["settings"]["exp3_noise_var"] == 0.05 and s["settings"]["noise_std_m_s"] == 0.001
    assert (out / "states_1.csv").is_file()
