"""Tests of the static model with gravity compensation (snaketrack.models.statics).

References, independent of the code under test:
- Table 1 of Hu et al. (Robotics 2023), typed in below from the
  paper: the no-gravity column (Est.*) and all eight gravity-compensated
  columns (Est.), planar orientation, tensions [0, 2.4, 0, 5.1] N.
- A whole-chain equilibrium check written here with numpy in the world frame:
  for every joint, the moment about the contact line of everything beyond it
  (cable pulls at the cut + weights of the links beyond) must vanish. The
  solver instead works link by link in link frames, with eqs. (16)–(17).
- Geometric invariants of the rolling joint (contact points and cable exits of
  neighbouring links coincide / mirror), and the paper's qualitative claims.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from snaketrack.errors import ConvergenceError, FileFormatError, InputError, MissingFileError
from snaketrack.models.statics import (
    StaticsConfig,
    StaticsRobot,
    link_transforms,
    load_statics_robot,
    mount_gravity,
    solve_no_gravity,
    solve_statics,
    tip_position,
)

G = 9.8
VOLUME = 0.851e-6  # m^3, Sec. 4.1
DENSITY = {"abs": 1050.0, "aluminium": 2680.0, "titanium": 4410.0, "steel": 7860.0}  # kg/m^3
PLANAR_T = (0.0, 2.4, 0.0, 5.1)  # N, Sec. 4.1.1

# Table 1 of the paper, "Est." columns: (theta_1..theta_5 in degrees, tip x, y, z in mm).
TABLE1_EST = {
    ("ground", "abs"): ([31.91, 31.22, 30.28, 29.51, 29.10], [46.23, 0.00, 10.19]),
    ("ground", "aluminium"): ([36.57, 34.61, 32.08, 30.14, 29.21], [44.16, 0.00, 3.45]),
    ("ground", "titanium"): ([41.46, 37.93, 33.59, 30.54, 29.24], [41.26, 0.00, -2.67]),
    ("ground", "steel"): ([50.44, 43.26, 35.35, 30.62, 29.11], [34.98, 0.00, -11.45]),
    ("ceiling", "abs"): ([26.22, 26.80, 27.65, 28.41, 28.86], [47.39, 0.00, 19.55]),
    ("ceiling", "aluminium"): ([22.31, 23.62, 25.58, 27.43, 28.62], [47.05, 0.00, 26.54]),
    ("ceiling", "titanium"): ([18.79, 20.65, 23.52, 26.39, 28.34], [45.78, 0.00, 33.12]),
    ("ceiling", "steel"): ([13.56, 16.04, 20.10, 24.50, 27.80], [41.94, 0.00, 43.11]),
}
# Table 1, "Est.*" column (no gravity compensation).
TABLE1_NO_GRAVITY = ([28.99] * 5, [47.04, 0.00, 14.85])

ANGLE_TOL_DEG = 0.05
TIP_TOL_MM = 0.05

# Sec. 3.2.2, typed here for the independent check: (phase phi [rad], index of T_0,j).
# Odd links: phi = {0, -a, pi, pi - a} carry T4, T1, T2, T3; even: {0, pi + a, pi, a} carry T1..T4.


def _cables(link: int, alpha: float, tensions):
    T1, T2, T3, T4 = tensions
    if link % 2 == 1:
        return [(0.0, T4), (-alpha, T1), (math.pi, T2), (math.pi - alpha, T3)]
    return [(0.0, T1), (math.pi + alpha, T2), (math.pi, T3), (alpha, T4)]


def _planar_robot(material=None, mass=None):
    m = DENSITY[material] * VOLUME if material else (mass or 0.0)
    return StaticsRobot(n_links=6, length=0.012, contact_radius=0.006, cable_distance=0.0035,
                        alpha=0.0, link_mass=m, name="paper-6")


def joint_residuals(robot: StaticsRobot, tensions, angles, gravity) -> np.ndarray:
    """Moment [N·m] about each joint's rolling axis of all loads on the links beyond it.

    World frame, numpy; zero at an equilibrium (the contact carries no moment
    about its rolling line). Shape (n−1,).
    """
    Ts = link_transforms(robot, angles)
    R, r, h = robot.contact_radius, robot.cable_distance, 0.5 * robot.length - robot.contact_radius
    gw = robot.link_mass * np.asarray(gravity, float)
    out = []
    for j in range(1, robot.n_links):  # joint j between link j and link j+1
        th = angles[j - 1]
        Rw, pw = Ts[j][:3, :3], Ts[j][:3, 3]  # frame of link j+1
        pc = Rw @ [R * math.sin(th / 2), 0.0, h + R * math.cos(th / 2)] + pw
        axis = Rw[:, 1]
        u = Rw @ [math.sin(th / 2), 0.0, math.cos(th / 2)]
        m = np.zeros(3)
        for phi, T in _cables(j + 1, robot.alpha, tensions):
            x = r * math.cos(phi)
            exit_ = Rw @ [x, r * math.sin(phi), h + math.sqrt(R * R - x * x)] + pw
            m += np.cross(exit_ - pc, T * u)
        for k in range(j + 1, robot.n_links + 1):
            m += np.cross(Ts[k - 1][:3, 3] - pc, gw)
        out.append(float(axis @ m))
    return np.array(out)


# ---------------------------------------------------------------------------
# Table 1
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mount,material", sorted(TABLE1_EST))
def test_table1_gravity_compensated_columns(mount, material):
    angles_deg, tip_mm = TABLE1_EST[(mount, material)]
    res = solve_statics(_planar_robot(material), PLANAR_T, (0.0, 0.0, -G if mount == "ground" else G))
    assert res.converged
    np.testing.assert_allclose(np.degrees(res.bending_angles), angles_deg, atol=ANGLE_TOL_DEG)
    np.testing.assert_allclose(np.asarray(res.tip_position) * 1e3, tip_mm, atol=TIP_TOL_MM)


def test_table1_no_gravity_column():
    angles_deg, tip_mm = TABLE1_NO_GRAVITY
    res = solve_no_gravity(_planar_robot("steel"), PLANAR_T)
    np.testing.assert_allclose(np.degrees(res.bending_angles), angles_deg, atol=ANGLE_TOL_DEG)
    np.testing.assert_allclose(np.asarray(res.tip_position) * 1e3, tip_mm, atol=TIP_TOL_MM)


def test_shipped_robot_file_reproduces_table1_steel_ground():
    robot = load_statics_robot("rolling-joint-6", material="steel")
    res = solve_statics(robot, PLANAR_T, mount_gravity("ground"))
    angles_deg, tip_mm = TABLE1_EST[("ground", "steel")]
    np.testing.assert_allclose(np.degrees(res.bending_angles), angles_deg, atol=ANGLE_TOL_DEG)
    np.testing.assert_allclose(np.asarray(res.tip_position) * 1e3, tip_mm, atol=TIP_TOL_MM)


# ---------------------------------------------------------------------------
# Physical invariants
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alpha_deg,tensions,mount,material",
    [
        (0.0, PLANAR_T, "ground", "steel"),
        (0.0, PLANAR_T, "ceiling", "titanium"),
        (90.0, (3.7, 2.4, 1.8, 5.1), "ground", "steel"),
        (90.0, (3.7, 2.4, 1.8, 5.1), "ceiling", "steel"),
        (35.0, (1.0, 4.0, 2.5, 3.0), "ground", "aluminium"),
    ],
)
def test_solution_is_an_equilibrium_of_the_whole_chain(alpha_deg, tensions, mount, material):
    robot = _planar_robot(material).with_alpha(math.radians(alpha_deg))
    g = mount_gravity(mount)
    res = solve_statics(robot, tensions, g)
    resid = joint_residuals(robot, tensions, res.bending_angles, g)
    # scale: cable moment ~ T * r ~ 0.02 N m
    np.testing.assert_allclose(resid, 0.0, atol=1e-11)
    # and a perturbed shape is not an equilibrium (the check can fail)
    bent = np.array(res.bending_angles) + np.radians(0.5)
    assert np.abs(joint_residuals(robot, tensions, bent, g)).max() > 1e-5


@pytest.mark.parametrize("alpha_deg,mount", [(90.0, "ground"), (30.0, "ceiling"), (0.0, "ground")])
def test_solution_satisfies_the_printed_eq16_on_intermediate_links(alpha_deg, mount):
    """The paper's printed a, b, c of eq. (16) hold on links 2..n−1, with the bottom
    loads F_cb, M_cb found here from the whole chain beyond the link (world frame)."""
    robot = _planar_robot("steel").with_alpha(math.radians(alpha_deg))
    T = (3.7, 2.4, 1.8, 5.1)
    g = mount_gravity(mount)
    th = solve_statics(robot, T, g).bending_angles
    Ts = link_transforms(robot, th)
    L, R, r = robot.length, robot.contact_radius, robot.cable_distance
    h = L / 2 - R
    gw = robot.link_mass * np.asarray(g)
    for i in range(2, robot.n_links):  # intermediate links
        # loads on the chain beyond joint i (links i+1..n): cable pulls at the cut + weights
        Rc, pcw = Ts[i][:3, :3], Ts[i][:3, 3]
        ti = th[i - 1]
        pc = Rc @ [R * math.sin(ti / 2), 0, h + R * math.cos(ti / 2)] + pcw
        u = Rc @ [math.sin(ti / 2), 0, math.cos(ti / 2)]
        F, M = np.zeros(3), np.zeros(3)
        for phi, Tj in _cables(i + 1, robot.alpha, T):
            x = r * math.cos(phi)
            e = Rc @ [x, r * math.sin(phi), h + math.sqrt(R * R - x * x)] + pcw
            F += Tj * u
            M += np.cross(e - pc, Tj * u)
        for k in range(i + 1, robot.n_links + 1):
            F += gw
            M += np.cross(Ts[k - 1][:3, 3] - pc, gw)
        Ri = Ts[i - 1][:3, :3]
        Fb, Mb, Gi = Ri.T @ F, Ri.T @ M, Ri.T @ gw  # in frame {i}
        a_i = robot.alpha if i % 2 == 1 else -robot.alpha
        cab = _cables(i, robot.alpha, T)
        sT = sum(t for _, t in cab)
        sTcos = sum(t * math.cos(p) for p, t in cab)
        s = -th[i - 1]  # the paper's theta_i on link i's bottom (Sec. 3.2.2)
        a = R * (math.cos(s / 2) * sT - Fb[2] - Gi[2]) - sum(
            t * math.sqrt(R**2 - (r * math.cos(p)) ** 2) for p, t in cab)
        b = r * sTcos + R * (-math.sin(s / 2) * math.cos(a_i) * sT + Fb[0] + Gi[0])
        c = (math.cos(s / 2) * (R * Fb[0] - r * sTcos)
             - math.sin(s / 2) * math.cos(a_i) * (
                 2 * h * sT + sum(t * math.sqrt(R**2 - (r * math.cos(p + a_i)) ** 2) for p, t in cab) + R * Fb[2])
             + 2 * h * Fb[0] + h * Gi[0] - Mb[1])
        x = th[i - 2] / 2  # theta_{i-1}
        scale = abs(a) + abs(b) + abs(c)
        assert abs(a * math.sin(x) + b * math.cos(x) + c) < 1e-10 * scale
        # a wrong angle does not satisfy it
        assert abs(a * math.sin(x + 0.01) + b * math.cos(x + 0.01) + c) > 1e-4 * scale


def test_any_gravity_direction_is_an_equilibrium():
    robot = _planar_robot("steel").with_alpha(math.radians(60.0))
    g = (5.0, -3.0, -7.4)  # sideways gravity, m/s^2
    T = (3.7, 2.4, 1.8, 5.1)
    res = solve_statics(robot, T, g)
    np.testing.assert_allclose(joint_residuals(robot, T, res.bending_angles, g), 0.0, atol=1e-11)


def test_rolling_joint_geometry_is_consistent():
    """Contact points and cable exits of neighbours coincide/mirror under eq. (19)."""
    robot = _planar_robot().with_alpha(math.radians(70.0))
    angles = np.radians([20.0, -35.0, 10.0, 45.0, -5.0])
    Ts = link_transforms(robot, angles)
    R, r, h = robot.contact_radius, robot.cable_distance, 0.5 * robot.length - robot.contact_radius
    for j in range(1, robot.n_links):
        th = angles[j - 1]
        a_par = robot.alpha if j % 2 == 1 else -robot.alpha  # alpha of the parent link j
        Rp, pp = Ts[j - 1][:3, :3], Ts[j - 1][:3, 3]
        Rc, pc = Ts[j][:3, :3], Ts[j][:3, 3]
        # eq. (9) on the child's top vs eq. (6) on the parent's bottom with angle -theta
        top = Rc @ [R * math.sin(th / 2), 0, h + R * math.cos(th / 2)] + pc
        s = -th
        bottom = Rp @ [-R * math.sin(s / 2) * math.cos(a_par), R * math.sin(s / 2) * math.sin(a_par),
                       -h - R * math.cos(s / 2)] + pp
        np.testing.assert_allclose(top, bottom, atol=1e-15)
        # each cable's two exits (eqs. 2 and 4) are joined along the direction of eq. (3)
        u = Rc @ [math.sin(th / 2), 0, math.cos(th / 2)]
        for phi_c, Tc in _cables(j + 1, robot.alpha, (1, 2, 3, 4)):
            (phi_p,) = [p for p, T in _cables(j, robot.alpha, (1, 2, 3, 4)) if T == Tc]
            xc = r * math.cos(phi_c)
            e_child = Rc @ [xc, r * math.sin(phi_c), h + math.sqrt(R * R - xc * xc)] + pc
            xp = r * math.cos(phi_p + a_par)
            e_par = Rp @ [r * math.cos(phi_p), r * math.sin(phi_p), -h - math.sqrt(R * R - xp * xp)] + pp
            d = e_par - e_child
            np.testing.assert_allclose(np.cross(d, u), 0.0, atol=1e-15)
            assert d @ u >= 0


def test_zero_mass_gives_the_no_gravity_answer():
    robot = _planar_robot("steel")
    ref = solve_no_gravity(robot, PLANAR_T)
    for mount in ("ground", "ceiling"):
        res = solve_statics(robot.with_mass(0.0), PLANAR_T, mount_gravity(mount))
        assert res.bending_angles == ref.bending_angles and res.tip_position == ref.tip_position
    res = solve_statics(robot, PLANAR_T, mount_gravity("none"))
    assert res.bending_angles == ref.bending_angles
    # the no-gravity shape has constant curvature (the paper's earlier result), and
    # a tiny mass converges to it continuously
    np.testing.assert_allclose(ref.bending_angles, ref.bending_angles[0], rtol=1e-12)
    tiny = solve_statics(robot.with_mass(1e-9), PLANAR_T, mount_gravity("ground"))
    np.testing.assert_allclose(tiny.bending_angles, ref.bending_angles, atol=1e-6)
    # zero mass with a spatial orientation: every joint's moment balances
    r90 = robot.with_mass(0.0).with_alpha(math.pi / 2)
    T = (3.7, 2.4, 1.8, 5.1)
    res = solve_no_gravity(r90, T)
    np.testing.assert_allclose(joint_residuals(r90, T, res.bending_angles, (0, 0, 0)), 0.0, atol=1e-12)


def test_ground_to_ceiling_flip_moves_the_tip_as_the_paper_describes():
    """Sec. 4.1.1: ground-mounted, tip z falls with density; ceiling-mounted it rises.
    Sec. 4.2.2: ground-mounted the tip moves outward, ceiling-mounted inward."""
    ref = solve_no_gravity(_planar_robot(), PLANAR_T)
    z = {}
    for mount in ("ground", "ceiling"):
        z[mount] = []
        for material in ("abs", "aluminium", "titanium", "steel"):
            res = solve_statics(_planar_robot(material), PLANAR_T, mount_gravity(mount))
            z[mount].append(res.tip_position[2])
            # gravity pulls the bent robot down (ground) or away from the base (ceiling)
            if mount == "ground":
                assert res.tip_position[2] < ref.tip_position[2]
                assert res.bending_angles[0] > ref.bending_angles[0]
            else:
                assert res.tip_position[2] > ref.tip_position[2]
                assert res.bending_angles[0] < ref.bending_angles[0]
    assert np.all(np.diff(z["ground"]) < 0)
    assert np.all(np.diff(z["ceiling"]) > 0)

    robot12 = load_statics_robot("rolling-joint-12")
    table4_payloads = [
        (1.96, 1.96, 1.96, 6.86), (6.86, 1.96, 1.96, 8.82), (8.82, 1.96, 1.96, 6.86),
        (6.86, 1.96, 1.96, 3.92), (6.86, 1.96, 1.96, 1.96), (6.86, 3.92, 1.96, 1.96),
        (8.82, 6.86, 1.96, 1.96), (6.86, 8.82, 1.96, 1.96), (1.96, 6.86, 1.96, 1.96),
    ]
    for T in table4_payloads:
        free = np.hypot(*solve_no_gravity(robot12, T).tip_position[:2])
        ground = np.hypot(*solve_statics(robot12, T, mount_gravity("ground")).tip_position[:2])
        ceiling = np.hypot(*solve_statics(robot12, T, mount_gravity("ceiling")).tip_position[:2])
        assert ground > free > ceiling


def test_mirrored_tensions_mirror_the_shape():
    robot = _planar_robot("titanium")
    a = solve_statics(robot, (0.0, 2.4, 0.0, 5.1), mount_gravity("ground"))
    b = solve_statics(robot, (0.0, 5.1, 0.0, 2.4), mount_gravity("ground"))
    np.testing.assert_allclose(b.bending_angles, -np.array(a.bending_angles), atol=1e-12)
    np.testing.assert_allclose(np.array(b.tip_position) * [-1, 1, 1], a.tip_position, atol=1e-12)


def test_tip_helpers_agree():
    robot = _planar_robot("aluminium").with_alpha(math.radians(45))
    res = solve_statics(robot, (3.7, 2.4, 1.8, 5.1), mount_gravity("ceiling"))
    np.testing.assert_allclose(tip_position(robot, res.bending_angles), res.tip_position, atol=1e-15)


# ---------------------------------------------------------------------------
# Convergence
# ---------------------------------------------------------------------------


def test_halving_converges_from_a_hard_start():
    """A heavy ceiling-mounted robot oscillates at omega = 1; halving omega converges."""
    robot = _planar_robot(mass=20000.0 * VOLUME)
    g = mount_gravity("ceiling")
    # without halving allowed, the same case does not converge
    with pytest.raises(ConvergenceError, match="did not converge"):
        solve_statics(robot, PLANAR_T, g, StaticsConfig(omega=1.0, min_omega=1.0))
    res = solve_statics(robot, PLANAR_T, g, StaticsConfig(omega=1.0),
                        initial_angles=np.radians([-80.0] * 5))
    assert res.converged and res.halvings >= 1 and res.omega < 1.0
    np.testing.assert_allclose(joint_residuals(robot, PLANAR_T, res.bending_angles, g), 0.0, atol=1e-11)
    slow = solve_statics(robot, PLANAR_T, g, StaticsConfig(omega=0.1))
    np.testing.assert_allclose(res.bending_angles, slow.bending_angles, atol=1e-9)
    # a zig-zag start far from the answer, relaxed from there at omega = 0.5
    zig = solve_statics(robot, PLANAR_T, g, StaticsConfig(omega=0.5),
                        initial_angles=np.radians([80.0, -80.0, 80.0, -80.0, 80.0]))
    assert zig.halvings >= 1
    np.testing.assert_allclose(zig.bending_angles, slow.bending_angles, atol=1e-9)


@pytest.mark.parametrize("omega", [1.0, 0.5, 0.1])
def test_relaxation_does_not_change_the_answer(omega):
    robot = _planar_robot("steel").with_alpha(math.pi / 2)
    T = (3.7, 2.4, 1.8, 5.1)
    ref = solve_statics(robot, T, mount_gravity("ground"), StaticsConfig(omega=1.0))
    res = solve_statics(robot, T, mount_gravity("ground"), StaticsConfig(omega=omega))
    np.testing.assert_allclose(res.bending_angles, ref.bending_angles, atol=1e-9)
    assert res.tip_step < 1e-12


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_negative_tension_is_an_input_error():
    with pytest.raises(InputError, match="T2 = -1.0 N"):
        solve_statics(_planar_robot("abs"), (0.0, -1.0, 0.0, 5.1))
    with pytest.raises(InputError, match="four"):
        solve_statics(_planar_robot("abs"), (1.0, 2.0, 3.0))
    with pytest.raises(InputError, match="at least one positive"):
        solve_statics(_planar_robot("abs"), (0.0, 0.0, 0.0, 0.0))


def test_alpha_outside_range_is_an_input_error():
    with pytest.raises(InputError, match=r"alpha .*expected an orientation in \[-90, 90\] degrees"):
        _planar_robot().with_alpha(math.radians(91.0))
    with pytest.raises(InputError, match="alpha"):
        load_statics_robot("rolling-joint-6", alpha=-2.0)
    _planar_robot().with_alpha(-math.pi / 2)  # the ends of the range are allowed


def test_non_converging_case_raises_convergence_error():
    with pytest.raises(ConvergenceError, match="max_iterations = 5"):
        solve_statics(_planar_robot("steel"), PLANAR_T, mount_gravity("ceiling"), StaticsConfig(max_iterations=5))
    # far too heavy links: the sweep finds no root of eq. (16) with |theta| < 90 deg
    with pytest.raises(ConvergenceError, match="no root"):
        solve_statics(_planar_robot(mass=0.2), PLANAR_T, mount_gravity("ground"))


def test_bad_config_and_files(tmp_path):
    with pytest.raises(InputError, match="omega"):
        StaticsConfig(omega=1.5)
    with pytest.raises(InputError, match="initial_angles"):
        solve_statics(_planar_robot("abs"), PLANAR_T, initial_angles=[0.0, 0.0])
    with pytest.raises(MissingFileError, match="rolling-joint-6"):
        load_statics_robot("no-such-robot")
    bad = tmp_path / "bad.yaml"
    bad.write_text("n_links: 6\nlength: 0.012\ncontact_radius: -1\ncable_distance: 0.003\n")
    with pytest.raises(FileFormatError, match="contact_radius = -1"):
        load_statics_robot(bad)
    with pytest.raises(InputError, match="material 'gold'"):
        load_statics_robot("rolling-joint-6", material="gold")


def test_shipped_robot_files_match_the_paper():
    r6 = load_statics_robot("rolling-joint-6", density=7860.0)
    assert (r6.n_links, r6.length, r6.contact_radius, r6.cable_distance, r6.alpha) == (6, 0.012, 0.006, 0.0035, 0.0)
    assert r6.link_mass == pytest.approx(7860.0 * 0.851e-6)
    r12 = load_statics_robot("rolling-joint-12")
    assert (r12.n_links, r12.length, r12.contact_radius, r12.cable_distance) == (12, 0.012, 0.020, 0.0075)
    assert r12.alpha == pytest.approx(math.pi / 2) and r12.link_mass == pytest.approx(0.0038)
    assert load_statics_robot("rolling-joint-12", link_mass=0.01).link_mass == 0.01
