"""Reading states.csv / track.csv and the Savitzky-Golay derivative."""
import numpy as np
import pytest

from snaketrack.errors import FileFormatError, InputError
from snaketrack.estimation.states import SmoothingConfig, is_json_lines, read_columns, read_states, savgol_derivative
from snaketrack.estimation.synthetic import _write_table as write_table
from snaketrack.estimation.synthetic import synthetic_trajectory, track_rows, write_states_csv, write_track_csv


def test_savgol_derivative_is_exact_for_polynomials_and_close_for_sines():
    t = np.linspace(0, 1, 41)
    y = np.column_stack([3 * t ** 2 - t + 2, np.sin(5 * t)])
    d = savgol_derivative(y, t, window=7, polyorder=2)
    np.testing.assert_allclose(d[:, 0], 6 * t - 1, atol=1e-10)
    # each interior value is the slope of a least-squares quadratic over the 7-sample window
    for i in range(3, t.size - 3):
        c = np.polyfit(t[i - 3:i + 4], y[i - 3:i + 4, 1], 2)
        assert d[i, 1] == pytest.approx(np.polyval(np.polyder(c), t[i]), abs=1e-8)
    np.testing.assert_allclose(d[:, 1], 5 * np.cos(5 * t), atol=0.3)  # and it is a derivative
    with pytest.raises(InputError, match="odd"):
        savgol_derivative(y, t, window=6)
    with pytest.raises(InputError, match="at least"):
        savgol_derivative(y[:5], t[:5], window=7)


def test_states_csv_velocities_used_as_written(tmp_path):
    s = synthetic_trajectory(duration=0.5, dt=1 / 240, n_joints=3, seed=0)
    write_states_csv(tmp_path / "states.csv", s)
    d = read_states(tmp_path / "states.csv")
    assert d.source == "states" and d.differentiated == ()
    np.testing.assert_allclose(d.phidot, s.phidot, rtol=1e-15)
    np.testing.assert_allclose(d.rdot, s.head_vxy, rtol=1e-15)


def test_states_csv_without_velocities_is_differentiated(tmp_path):
    s = synthetic_trajectory(duration=1.0, dt=1 / 240, n_joints=3, seed=0)
    write_states_csv(tmp_path / "states.csv", s, with_velocities=False)
    d = read_states(tmp_path / "states.csv")
    assert d.differentiated == ("phidot", "rdot")
    inner = slice(10, -10)  # phi and head_xy are rectangle-rule integrals: compare away from the ends
    np.testing.assert_allclose(d.phidot[inner], s.phidot[inner], atol=0.05 * np.abs(s.phidot).max())
    np.testing.assert_allclose(d.rdot[inner], s.head_vxy[inner], atol=0.05 * np.abs(s.head_vxy).max())


@pytest.mark.parametrize("plane", ["xy", "xz", "yz"])
def test_track_csv_plane_selection(tmp_path, short_synthetic, plane):
    s = short_synthetic
    write_track_csv(tmp_path / "track.csv", s, plane=plane)
    d = read_states(tmp_path / "track.csv", plane=plane, smoothing=SmoothingConfig(window=5, polyorder=2))
    assert d.source == "track" and d.frame == f"camera {plane}"
    expected = savgol_derivative(s.head_xy, s.t, 5, 2)
    np.testing.assert_allclose(d.rdot, expected, atol=1e-12)
    np.testing.assert_allclose(d.phidot, savgol_derivative(s.phi, s.t, 5, 2), atol=1e-12)


def test_track_csv_lost_frames_are_interpolated(tmp_path, short_synthetic):
    s = short_synthetic
    write_track_csv(tmp_path / "track.csv", s, lost=(20, 21, 22))
    d = read_states(tmp_path / "track.csv")
    assert d.filled == 3 * (4 + 2)
    for k in range(4):
        np.testing.assert_allclose(d.phi[20:23, k], np.interp(s.t[20:23], s.t[[19, 23]], s.phi[[19, 23], k]))


def test_non_uniform_times_are_resampled(tmp_path):
    s = synthetic_trajectory(duration=1.0, dt=0.01, n_joints=2, seed=1)
    keep = np.ones(s.t.size, bool)
    keep[[30, 31, 60]] = False                      # dropped frames
    t = s.t[keep]
    cols = ["t", "phi_1", "phi_2", "head_x", "head_y"]
    write_table(tmp_path / "states.csv", cols, np.column_stack([t, s.phi[keep], s.head_xy[keep]]))
    d = read_states(tmp_path / "states.csv")
    assert d.resampled
    np.testing.assert_allclose(np.diff(d.t), 0.01, rtol=1e-9)


def test_bad_files(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("t,a\n0,1\n1,2\n")
    with pytest.raises(FileFormatError, match="phi_1 or q_1"):
        read_states(p)
    p.write_text("t,phi_1,head_x\n0,1,0\n1,2,0\n")
    with pytest.raises(FileFormatError, match="head_y"):
        read_states(p)
    p.write_text("t,phi_1,phidot_1,head_vx,head_vy\n1,1,0,0,0\n0,2,0,0,0\n")
    with pytest.raises(FileFormatError, match="increasing"):
        read_states(p)
    with pytest.raises(InputError, match="plane"):
        read_states(p, plane="zz")
    for window, order in ((4, 2), (0, 2), (5, 7)):
        with pytest.raises(InputError, match=f"--sg-window {window} --sg-order {order}"):
            SmoothingConfig(window, order)


def write_track_pair(directory, s, lost=(), jsonl_name="track.jsonl"):
    """The same rows through the tracker's writers: track.csv (TrackWriter) and JSON lines (StateStream)."""
    from snaketrack.tracker.run.outputs import StateStream, TrackWriter

    rows = track_rows(s, lost=lost)
    with TrackWriter(directory / "track.csv", s.phi.shape[1]) as w:
        for r in rows:
            w.write(r)
    stream = StateStream(str(directory / jsonl_name))
    for r in rows:
        stream.write(r)
    stream.close()
    return directory / "track.csv", directory / jsonl_name


@pytest.mark.parametrize("name", ["track.jsonl", "track.ndjson", "stream.txt"])
def test_json_lines_read_as_the_csv(tmp_path, short_synthetic, name):
    csv_path, jl_path = write_track_pair(tmp_path, short_synthetic, lost=(7, 8), jsonl_name=name)
    assert is_json_lines(jl_path) and not is_json_lines(csv_path)
    a, b = read_columns(csv_path), read_columns(jl_path)
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype
        np.testing.assert_array_equal(a[k], b[k])
    assert np.isnan(b["q_1"][7]) and b["status"][7] == "lost"
    da, db = read_states(csv_path), read_states(jl_path)
    for f in ("t", "phi", "phidot", "rdot"):
        np.testing.assert_array_equal(getattr(da, f), getattr(db, f))
    assert (da.source, da.frame, da.filled) == (db.source, db.frame, db.filled) == ("track", "camera xy", 2 * 6)


def test_json_lines_detected_after_leading_blank_lines(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("\n  \n" + '{"t": 0, "phi_1": 1, "head_x": 0, "head_y": null}\n\n'
                 '{"t": 1, "phi_1": 2, "head_x": 0, "head_y": 3}\n')
    assert is_json_lines(p)
    cols = read_columns(p)
    np.testing.assert_array_equal(cols["phi_1"], [1.0, 2.0])
    assert np.isnan(cols["head_y"][0])


@pytest.mark.parametrize("body, message", [
    ('{"t": 0, "q_1": 1}\n{"t": 1, "q_1": \n', "line 2: not valid JSON"),
    ('{"t": 0, "q_1": 1}\n\n[1, 2]\n', "line 3: a JSON list"),
    ('{"t": 0, "q_1": 1}\n{"t": 1}\n', "line 2: keys differ from line 1's; missing q_1"),
    ('{"t": 0, "q_1": 1}\n{"t": 1, "q_1": "a"}\n', 'line 2: q_1 = "a"; expected a number'),
    ('{"t": 0, "q_1": true}\n', "line 1: q_1 = true; expected a number"),
    ("\n\n", "no JSON object"),
])
def test_malformed_json_lines_name_the_line(tmp_path, body, message):
    p = tmp_path / "track.jsonl"
    p.write_text(body)
    with pytest.raises(FileFormatError) as e:
        read_columns(p)
    assert str(e.value).startswith(f"{p}: ") and message in str(e.value) and "\n" not in str(e.value)
