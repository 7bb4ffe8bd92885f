"""Controllers and guidance of the planar snake against the head-tracking paper's equations written out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from snaketrack.errors import InputError, StateError
from snaketrack.sim.control import (
    ControllerConfig,
    GaitParams,
    JointController,
    PointOfSight,
    apply_broken,
    couple,
    heading_offset,
    joint_limit_stats,
    joint_reference,
    single_joint_control,
    wrap_angle,
)

DEG = np.pi / 180


def test_joint_reference_is_eq_33():
    g = GaitParams()
    t, off = 3.7, 0.1
    ref = joint_reference(t, 9, g, off)
    for i in range(1, 10):  # eq. 33 with 1-based i
        assert ref[i - 1] == pytest.approx(20 * DEG * np.sin(50 * DEG * t + (i - 1) * 30 * DEG) + off)


def test_coupling_rule_eq_37():
    rng = np.random.default_rng(0)
    u = rng.normal(size=9)
    got = couple(u, 0.5)
    assert got[0] == u[0]
    for i in range(1, 9):
        assert got[i] == pytest.approx(u[i] + 0.5 * u[i - 1])
    np.testing.assert_array_equal(couple(u, 0.0), u)


def test_sjc_output_and_controller_chain():
    rng = np.random.default_rng(1)
    phi, phid = rng.normal(size=9), rng.normal(size=9)
    ctrl = JointController(ControllerConfig(kp=1.0, kd=2.0), 9)
    got = ctrl.command(2.0, phi, phid, phi_offset=0.2)
    ref = joint_reference(2.0, 9, GaitParams(), 0.2)
    np.testing.assert_allclose(got, 1.0 * (ref - phi) - 2.0 * phid)  # eq. 32
    np.testing.assert_allclose(single_joint_control(phi, phid, ref, 1.0, 2.0), got)


def test_broken_joints_get_no_command_and_cc_uses_the_computed_neighbour_signal():
    rng = np.random.default_rng(2)
    phi, phid = rng.normal(size=9), rng.normal(size=9)
    cfg = ControllerConfig(coupling="cc", broken_joints=(3, 5, 6))
    got = JointController(cfg, 9).command(1.0, phi, phid, 0.0)
    u = 1.0 * (joint_reference(1.0, 9, GaitParams(), 0.0) - phi) - 2.0 * phid
    want = u.copy()
    want[1:] += 0.5 * u[:-1]  # the controller does not know about the faults
    want[[2, 4, 5]] = 0.0  # joints 3, 5, 6 (1-based) do not act
    np.testing.assert_allclose(got, want)
    assert got[5] == 0.0 and got[6] != pytest.approx(u[6])  # joint 7 still hears broken joint 6
    np.testing.assert_array_equal(apply_broken(np.ones(4), (1, 4)), [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(InputError):
        JointController(ControllerConfig(broken_joints=(10,)), 9)


def test_heading_offset_law_and_clamp():
    th = np.full(10, 0.1)
    # target straight ahead along the heading: no offset
    assert heading_offset(th, np.zeros(2), [np.cos(0.1), np.sin(0.1)], 1.0, 40 * DEG) == pytest.approx(0.0, abs=1e-12)
    # small error: k_θ (θ̄ − θ̄_ref), θ̄_ref = atan2(d_y, d_x) (eq. 34–36)
    tgt = np.array([2.0, 0.3])
    want = 0.7 * (0.1 - np.arctan2(0.3, 2.0))
    assert heading_offset(th, np.zeros(2), tgt, 0.7, 40 * DEG) == pytest.approx(want)
    # large error: clamped to ±40°
    assert heading_offset(th, np.zeros(2), [0.0, 5.0], 1.0, 40 * DEG) == pytest.approx(-40 * DEG)
    assert heading_offset(th, np.zeros(2), [0.0, -5.0], 1.0, 40 * DEG) == pytest.approx(40 * DEG)
    # wraps: heading +179°, target at −179° is a 2° turn, not 358°
    th2 = np.full(10, np.radians(179))
    got = heading_offset(th2, np.zeros(2), [np.cos(np.radians(-179)), np.sin(np.radians(-179))], 1.0, 40 * DEG)
    assert got == pytest.approx(np.radians(-2))


def test_heading_offset_sign_and_wrap_follow_the_authors_code():
    """Authors' code: φ_o = θ̄ + (−atan2(d_y, d_x)), clamped to ±40°, not wrapped."""
    # θ̄ = 0, target at (1, 0.2): φ_o = −atan2(0.2, 1) = −0.197396 rad (turn left, towards +y)
    assert heading_offset(np.zeros(10), np.zeros(2), [1.0, 0.2], 1.0, 40 * DEG, wrap=False) == pytest.approx(
        -0.19739556)
    # θ̄ = 179°, target at −179°: unwrapped 358° clamps to +40° (the long way); wrapped it is −2°
    th = np.full(10, np.radians(179))
    tgt = [np.cos(np.radians(-179)), np.sin(np.radians(-179))]
    assert heading_offset(th, np.zeros(2), tgt, 1.0, 40 * DEG, wrap=False) == pytest.approx(40 * DEG)
    assert heading_offset(th, np.zeros(2), tgt, 1.0, 40 * DEG, wrap=True) == pytest.approx(np.radians(-2))


def test_wrap_angle():
    np.testing.assert_allclose(wrap_angle(np.array([0.0, 3 * np.pi, -3 * np.pi, 7.0])),
                               [0.0, np.pi, np.pi, 7.0 - 2 * np.pi])


def test_point_of_sight_switches_in_order():
    g = PointOfSight([(1.0, 0.0), (2.0, 0.0), (2.0, 1.0)], tolerance_m=0.05)
    path = [(0.0, [0.0, 0.0]), (1.0, [0.96, 0.0]), (2.0, [1.5, 0.0]), (3.0, [2.0, 0.04]), (4.0, [2.0, 0.06]),
            (5.0, [2.0, 0.96])]
    switched = [g.check(t, np.array(p)) for t, p in path]
    assert switched == [False, True, False, True, False, True]
    assert g.reach_times == [1.0, 3.0, 5.0]
    # the authors' test keeps steering while r > 0.05 m: exactly 5 cm counts as reached
    edge = PointOfSight([(1.0, 0.0)], tolerance_m=0.05)
    assert edge.check(0.0, np.array([1.0, 0.05]))
    assert g.done
    with pytest.raises(StateError):
        _ = g.target
    with pytest.raises(InputError):
        PointOfSight([1.0, 2.0])


def test_joint_limit_stats_against_counting():
    rng = np.random.default_rng(3)
    phi = rng.normal(scale=0.5, size=(200, 9))
    s = joint_limit_stats(phi, 40 * DEG)
    rows_over = sum(any(abs(v) > 40 * DEG for v in row) for row in phi)
    assert s.beyond_limit_fraction == pytest.approx(rows_over / 200)
    for j in range(9):
        assert s.per_joint_fraction[j] == pytest.approx(np.mean(np.abs(phi[:, j]) > 40 * DEG))
        assert s.max_abs_rad[j] == pytest.approx(np.abs(phi[:, j]).max())
    assert 0.0 < s.beyond_limit_fraction < 1.0


def test_config_validation():
    with pytest.raises(InputError):
        ControllerConfig(coupling="lqr")
