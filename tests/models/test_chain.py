"""The numpy chain: its frames against the torch forward kinematics, the body normal's derivative."""
import numpy as np
import pytest

from snaketrack.models.chain import body_normal, chain_frames
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.models.rotations import axis_angle_to_matrix_np


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_chain_frames_match_forward_kinematics(name):
    robot = load_robot(name)
    rng = np.random.default_rng(2)
    q = rng.uniform(-0.5, 0.5, robot.dof)
    R0 = axis_angle_to_matrix_np(rng.normal(size=3))
    t0 = rng.normal(size=3)
    rots, origins, axes, pivots, joint_of = chain_frames(robot, q, R0, t0)
    ref = forward_kinematics_np(robot, q, R0, t0)
    np.testing.assert_allclose(np.stack(rots), ref["rotations"], atol=1e-12)
    np.testing.assert_allclose(np.stack(origins), ref["origins"], atol=1e-12)
    assert len(axes) == len(pivots) == len(joint_of) == robot.dof
    for a, p, i in zip(axes, pivots, joint_of):  # each joint's pivot is the next link's origin
        np.testing.assert_allclose(p, ref["origins"][i + 1], atol=1e-12)
        assert abs(np.linalg.norm(a) - 1.0) < 1e-12


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_body_normal_derivative_matches_finite_differences(name):
    robot = load_robot(name)
    rng = np.random.default_rng(3)
    J = robot.dof
    q = rng.uniform(-0.5, 0.5, J)
    R0 = axis_angle_to_matrix_np(rng.normal(size=3))
    n, dn = body_normal(robot, q, R0)
    assert abs(np.linalg.norm(n) - 1.0) < 1e-12
    num = np.zeros_like(dn)
    e = 1e-6
    for k in range(J + 3):
        d = np.zeros(J + 3)
        d[k] = e
        plus = body_normal(robot, q + d[:J], axis_angle_to_matrix_np(d[J:]) @ R0)[0]
        minus = body_normal(robot, q - d[:J], axis_angle_to_matrix_np(-d[J:]) @ R0)[0]
        num[:, k] = (plus - minus) / (2 * e)
    assert np.abs(num - dn).max() < 1e-8
    if name == "planar-snake-11":  # yaw joints keep every link's z axis: the body's normal is the base's
        assert np.allclose(n, R0[:, 2], atol=1e-12) and np.abs(dn[:, :J]).max() < 1e-12


def test_chain_frames_of_alternating_states_and_robots():
    """One state, another, another robot's twice in a row, then the first again, each base rotation's
    array changed in place after the call: each answer is its own state's forward kinematics."""
    planar, arc = load_robot("planar-snake-11"), load_robot("arcsnake-4")
    rng = np.random.default_rng(5)
    states = [(robot, rng.uniform(-0.5, 0.5, robot.dof), axis_angle_to_matrix_np(rng.normal(size=3)),
               rng.normal(size=3)) for robot in (planar, planar, arc)]
    for robot, q, R0, t0 in states + states[-1:] + states[:1]:
        R_in = R0.copy()
        rots, origins, *_ = chain_frames(robot, q, R_in, t0)
        R_in[:] = 0.0
        ref = forward_kinematics_np(robot, q, R0, t0)
        np.testing.assert_allclose(np.stack(rots), ref["rotations"], atol=1e-12)
        np.testing.assert_allclose(np.stack(origins), ref["origins"], atol=1e-12)
