"""``snaketrack sim closed-loop``: a short loop through the real service and a spawned controller;
bad flags; the truth-fed and tracked runs on two seeds (slow)."""
import json

import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.io import read_csv_columns
from snaketrack.sim.closed_loop import ClosedLoopConfig, parse_targets
from snaketrack.sim.closed_loop_outputs import route_distance


def test_a_short_tracked_loop_reaches_a_near_waypoint(tmp_path, capsys):
    out = tmp_path / "loop"
    assert main(["sim", "closed-loop", "--states", "tracked", "--targets=-0.1,0", "--duration", "2.2",
                 "--time-scale", "2", "--seed", "0", "--out", str(out)]) == 0
    s = json.loads((out / "tracked" / "summary.json").read_text())
    assert s["all_reached"] and s["reach_times_s"][0] is not None
    assert s["states_received"] >= 1 and s["frames_tracked"] >= s["states_received"]
    assert s["frames_tracked"] + s["frames_dropped"] <= s["frames_shown"]
    path = read_csv_columns(out / "tracked" / "path.csv")
    # the simulator's head, as written, is where the reach time says it was
    k = int(np.searchsorted(path["t"], s["reach_times_s"][0]))
    assert np.hypot(path["head_x"][k] + 0.1, path["head_y"][k]) <= 0.1
    assert (out / "tracked" / "overlay.mp4").stat().st_size > 0
    assert not (out / "summary.json").exists()  # one run: nothing to compare


@pytest.mark.parametrize("flags", [["--targets", "1,2,3"], ["--targets", "a,b"], ["--time-scale", "0"],
                                   ["--states", "both", "--duration", "-1"], ["--seed", "-3"]])
def test_bad_flags_one_line_exit_2(tmp_path, capsys, flags):
    assert main(["sim", "closed-loop", *flags, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("snaketrack: error:")
    assert not (tmp_path / "o").exists()


def test_parse_targets_and_config():
    assert parse_targets("1,2;-0.5,0") == ((1.0, 2.0), (-0.5, 0.0))
    assert ClosedLoopConfig(duration=2.0, start_time=1.0, fps=10).frames == 11


def test_route_distance_by_hand():
    route = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    d = route_distance(np.array([[0.5, -0.3], [1.2, 0.5], [2.0, 2.0]]), route)
    np.testing.assert_allclose(d, [0.3, 0.2, np.hypot(1.0, 1.0)])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_tracked_reaches_every_waypoint_within_1_3_of_truth(tmp_path, seed):
    out = tmp_path / f"seed{seed}"
    assert main(["sim", "closed-loop", "--states", "both", "--seed", str(seed), "--no-video",
                 "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["truth"]["all_reached"] and s["tracked"]["all_reached"]
    assert s["within_1_3_x"]
