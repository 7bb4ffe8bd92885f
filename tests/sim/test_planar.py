"""Planar snake scenarios: short runs checked against bounds, their own trajectories and the file formats."""
from __future__ import annotations

import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.errors import InputError
from snaketrack.io import read_csv_columns, read_json
from snaketrack.models.planar_dynamics import PlanarSnakeModel
from snaketrack.sim.control import ControllerConfig
from snaketrack.sim.planar import PlanarScenario, parse_broken, run_scenario, simulate

FIRST = np.array([1.0, 1.0])


def _first_reach(track, coupling, broken=(), t_end=100.0, **kw):
    scn = PlanarScenario(
        track=track,
        controller=ControllerConfig(coupling=coupling, broken_joints=broken),
        t_end_s=t_end,
        targets=((1.0, 1.0),),
        **kw,
    )
    return simulate(scn)


@pytest.mark.parametrize("track", ["com", "head"])
def test_short_scenario_reaches_first_target_within_bounds(track):
    r = _first_reach(track, "sjc")
    t_reach = r.reach_times_s[0]
    assert t_reach is not None
    # cannot beat the body wave: wavelength 360°/δ = 12 links of 2l, one period 2π/ω
    wave_speed = 12 * 0.14 / (2 * np.pi / np.radians(50))
    assert (np.hypot(1, 1) - 0.05) / wave_speed < t_reach < 100.0
    # the tracked point (the model's own p) is farther than 5 cm before the event and at 5 cm at it
    d = np.hypot(*(r.q[:, -2:] - FIRST).T)
    before = r.t < t_reach - 1e-9
    assert d[before].min() > 0.05 - 1e-6
    assert d[-1] == pytest.approx(0.05, abs=1e-6)
    assert r.t[-1] == pytest.approx(t_reach)
    # the tracked point is the one the model says: head-link centre or mean of link centres
    model = PlanarSnakeModel(r.scenario.params, track)
    xy = model.link_positions(r.q[-1])
    point = xy[-1] if track == "head" else xy.mean(axis=0)
    np.testing.assert_allclose(point, r.q[-1, -2:], atol=1e-12)


# The angle a broken joint holds. Authors' code: φ(0) = 20° sin((i−1) 30°) and u_i = 0 (so φ̈_i = 0 from
# rest): joints 3, 5, 6 hold 20° sin 60° = 17.3205°, 20° sin 120° = 17.3205°, 20° sin 150° = 10°.
# Corrected variant: straight start, so 0.
@pytest.mark.parametrize("variant, held_deg", [("authors", (17.320508, 17.320508, 10.0)), ("corrected", (0, 0, 0))])
def test_broken_joints_hold_their_starting_angle(variant, held_deg):
    r = _first_reach("com", "cc", broken=(3, 5, 6), t_end=30.0, variant=variant)
    k = r.scenario.params.n_links - 1
    for j, want in zip((3, 5, 6), held_deg):
        np.testing.assert_allclose(r.q[:, j - 1], np.radians(want), atol=1e-8)
        assert np.abs(r.qd[:, j - 1]).max() == 0.0
    working = [j for j in range(k) if j + 1 not in (3, 5, 6)]
    assert np.abs(r.q[:, working] - r.q[0, working]).max(axis=0).min() > np.radians(3)


@pytest.mark.parametrize("track", ["com", "head"])
def test_authors_start_is_the_gait_at_t0_at_rest(track):
    """Authors' code: φ = α sin((i−1)δ), θ_N = 0, p = 0, all rates 0 (start.mlx, boundary conditions)."""
    r = _first_reach(track, "sjc", t_end=1.0)
    want_deg = [0.0, 10.0, 17.320508, 20.0, 17.320508, 10.0, 0.0, -10.0, -17.320508]
    np.testing.assert_allclose(r.q[0, :9], np.radians(want_deg), atol=1e-8)
    assert r.q[0, 9] == 0.0 and r.q[0, 10:].tolist() == [0.0, 0.0]
    assert not r.qd[0].any()
    model = PlanarSnakeModel(r.scenario.params, track)
    xy = model.link_positions(r.q[0])
    point = xy[-1] if track == "head" else xy.mean(axis=0)
    np.testing.assert_allclose(point, [0.0, 0.0], atol=1e-15)


def test_coupled_control_is_faster_than_single_joint_with_broken_joints():
    sjc = _first_reach("com", "sjc", broken=(3, 5, 8), t_end=150.0)
    cc = _first_reach("com", "cc", broken=(3, 5, 8), t_end=150.0)
    assert cc.reach_times_s[0] is not None and sjc.reach_times_s[0] is not None
    assert cc.reach_times_s[0] < sjc.reach_times_s[0]


def test_reach_time_is_insensitive_to_the_solver_on_a_short_run():
    a = _first_reach("com", "sjc", t_end=100.0)
    b = _first_reach("com", "sjc", t_end=100.0, method="DOP853", rtol=1e-9, atol=1e-11)
    assert abs(a.reach_times_s[0] - b.reach_times_s[0]) < 0.5


def test_run_scenario_writes_outputs_in_design_convention(tmp_path):
    scn = PlanarScenario(track="head", variant="corrected",
                         controller=ControllerConfig(coupling="sjc", broken_joints=(3,)), t_end_s=20.0)
    summary = run_scenario(scn, tmp_path, animation="gif", n_frames=4)
    for name in ("summary.json", "trajectory.csv", "path.png", "joint_angles.png", "reach_times.png", "animation.gif"):
        assert (tmp_path / name).is_file(), name
    s = read_json(tmp_path / "summary.json")
    assert s["reach_times_s"] == summary["reach_times_s"]
    assert len(s["reach_times_s"]) == 5 and s["reach_times_s"][-1] is None
    assert 0.0 <= s["beyond_limit_fraction"] <= 1.0
    d = read_csv_columns(tmp_path / "trajectory.csv")
    th = np.column_stack([d[f"theta_{i}"] for i in range(1, 11)])
    phi = np.column_stack([d[f"phi_{i}"] for i in range(1, 10)])
    np.testing.assert_allclose(phi, th[:, 1:] - th[:, :-1], atol=1e-7)  # φ_i = θ_{i+1} − θ_i
    assert np.all(d["phi_3"] == 0.0)
    assert np.all(np.diff(d["t"]) > 0) and d["t"][-1] == pytest.approx(20.0)
    # head point starts at the origin, the centre of mass 4.5 links behind it
    assert (d["head_x"][0], d["head_y"][0]) == (0.0, 0.0)
    assert d["com_x"][0] == pytest.approx(-4.5 * 0.14)


def test_cli_sim_planar(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["sim", "planar", "--track", "com", "--control", "cc", "--broken", "3,5,6", "--t-end", "5",
               "--animation", "none", "--out", str(out)])
    assert rc == 0
    s = read_json(out / "summary.json")
    assert s["broken_joints"] == [3, 5, 6] and s["control"] == "cc" and s["track"] == "com"
    assert main(["sim", "planar", "--broken", "0", "--out", str(out)]) == 2
    assert main(["sim", "planar", "--method", "Euler", "--out", str(out)]) == 2
    assert main(["sim", "planar", "--variant", "paper", "--out", str(out)]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize("t_end", [0.0, -5.0, float("nan"), float("inf")])
def test_a_time_limit_that_is_not_a_positive_finite_time_is_refused(t_end):
    with pytest.raises(InputError, match="--t-end"):
        PlanarScenario(t_end_s=t_end)


def test_parse_broken():
    assert parse_broken("6,3,5") == (3, 5, 6)
    assert parse_broken("") == ()
    with pytest.raises(InputError):
        parse_broken("3;5")


def test_sight_point_is_the_centre_of_mass_when_asked():
    """With sight_from='com' the head model steers exactly like the CoM model's guidance would."""
    from snaketrack.sim import planar

    seen = []
    orig = planar.heading_offset

    def spy(theta, point, target, k, lim, **kw):
        seen.append((np.array(theta), np.array(point, dtype=float)))
        return orig(theta, point, target, k, lim, **kw)

    planar.heading_offset = spy
    try:
        r = simulate(PlanarScenario(track="head", sight_from="com", t_end_s=2.0, targets=((1.0, 1.0),)))
    finally:
        planar.heading_offset = orig
    assert r.scenario.name == "head-sjc-none-sightcom"
    model = PlanarSnakeModel(r.scenario.params, "head")
    # every sight point handed to the heading law is the CoM of the state it came from
    th, pt = seen[-1]
    q = np.concatenate([np.linalg.solve(model.H, th), r.q[-1, -2:]])
    np.testing.assert_allclose(th, model.link_angles(r.q[-1]), atol=1e-12)
    np.testing.assert_allclose(pt, model.com_position(q), atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["authors", "corrected"])
@pytest.mark.parametrize("track", ["com", "head"])
def test_full_runs_reach_every_target_and_cc_beats_sjc_with_neighbouring_faults(variant, track):
    """The paper's qualitative finding on its hardest case (joints 3, 5, 6 broken), full 2000 s runs."""
    last = {}
    for coupling in ("sjc", "cc"):
        r = simulate(PlanarScenario(track=track, variant=variant, t_end_s=2000.0,
                                    controller=ControllerConfig(coupling=coupling, broken_joints=(3, 5, 6))))
        assert all(t is not None for t in r.reach_times_s)
        last[coupling] = r.reach_times_s[-1]
    assert last["cc"] < last["sjc"]
