"""The pose search's pieces: a chain laid on a polyline recovers the pose that drew it."""
import numpy as np
import pytest

from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.models.rotations import axis_angle_to_matrix_np
from snaketrack.tracker.fit.search import _trim_start, chain_from_polyline
from snaketrack.tracker.state import StateLayout


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chain_from_its_own_joints_is_the_pose(seed):
    """A planar robot's joints (and a point past its head) as the polyline, its plane's normal as up: the
    same pose."""
    robot = load_robot("planar-snake-11")
    lay = StateLayout.for_robot(robot)
    rng = np.random.default_rng(seed)
    q = rng.uniform(-0.4, 0.4, robot.dof)
    R0 = axis_angle_to_matrix_np(rng.normal(size=3))
    t0 = np.array([0.1, -0.2, 2.5])
    fk = forward_kinematics_np(robot, q, R0, t0)
    head = fk["ends"][-1] + 0.05 * fk["rotations"][-1][:, 0]  # past the head link's end, as a cap
    X = np.vstack([fk["origins"], head])
    x = chain_from_polyline(robot, lay, X, R0[:, 2])
    q2, R2, t2 = lay.unpack(x)
    np.testing.assert_allclose(q2, q, atol=1e-9)
    np.testing.assert_allclose(R2, R0, atol=1e-9)
    np.testing.assert_allclose(t2, t0, atol=1e-12)
    assert chain_from_polyline(robot, lay, X, R0[:, 0]) is None  # first link along up: no plane


def test_trim_start_cuts_arc_length():
    X = np.array([[0.0, 0, 0], [1.0, 0, 0], [1.0, 2.0, 0]])
    np.testing.assert_allclose(_trim_start(X, 1.5), [[1.0, 0.5, 0], [1.0, 2.0, 0]])
    assert _trim_start(X, 0.0) is X and _trim_start(X, 5.0) is X
