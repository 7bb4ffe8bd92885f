"""The steering law against hand-worked values and numpy's pseudo-inverse; the live stepper against
the batch simulation; the controller process's inputs."""
import inspect
import queue
import subprocess
import sys

import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.estimation.base import JacobianEstimator
from snaketrack.experiments.loop_controller import controller_main
from snaketrack.experiments.steering import HeadSteering, SteeringConfig, cross_track, desired_velocity, turning_rate
from snaketrack.models.robot import load_robot
from snaketrack.service.client import RobotState
from snaketrack.sim.oal import OALConfig, simulate_oal
from snaketrack.sim.oal_live import OALStepper


def test_turning_rate_hand_worked():
    J = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    # g = J 1 = (1, 2); g.e = 0.5; |g|^2 = 5
    assert turning_rate(J, np.array([0.5, 0.0]), np.ones(3), 1.0, 0.0) == pytest.approx(0.1)
    assert turning_rate(J, np.array([0.5, 0.0]), np.ones(3), 2.0, 1.0) == pytest.approx(2 * 0.5 / 6)
    # the head joint alone: g = (0.2, 0.4), e = (0, 0.1): 0.04 / 0.2
    Jh = np.array([[0.0, 0.0, 0.2], [0.0, 0.0, 0.4]])
    assert turning_rate(Jh, np.array([0.0, 0.1]), np.eye(3)[-1], 1.0, 0.0) == pytest.approx(0.2)
    assert turning_rate(np.zeros((2, 3)), np.ones(2), np.ones(3), 1.0, 0.0) == 0.0


def test_turning_rate_is_the_pseudo_inverse_without_damping():
    rng = np.random.default_rng(0)
    for _ in range(20):
        J, e, b = rng.normal(size=(2, 10)), rng.normal(size=2), rng.normal(size=10)
        ref = float((np.linalg.pinv((J @ b)[:, None]) @ e)[0])
        assert turning_rate(J, e, b, 1.0, 0.0) == pytest.approx(ref, rel=1e-12)


def test_cross_track_and_desired_velocity():
    np.testing.assert_allclose(cross_track(np.array([1.0, 1.0]), np.array([0.0, 3.0])), [1.0, 0.0])
    np.testing.assert_allclose(cross_track(np.array([1.0, 2.0]), np.zeros(2)), [1.0, 2.0])
    np.testing.assert_allclose(desired_velocity(np.array([1.0, 1.0]), np.array([1.0, 3.0]), 0.2), [0.0, 0.2])


class Fixed(JacobianEstimator):
    name = "fixed"

    def __init__(self, J):
        self.J, self.n_joints, self.seen = np.asarray(J, float), J.shape[1], []

    def reset(self):
        pass

    def update(self, phidot, rdot):
        self.seen.append((np.array(phidot), np.array(rdot)))

    @property
    def jacobian(self):
        return self.J.copy()


def test_head_steering_one_step_by_hand():
    J = np.array([[0.0, 0.0, 0.1], [0.0, 0.0, 0.2]])
    est = Fixed(J)
    cfg = SteeringConfig(speed=0.2, gain=1.0, damping=0.0, offset_limit=1.0, smoothing=1.0, leak=0.0, tolerance=0.05,
                         joints="head", lateral=False)
    s = HeadSteering([(1.0, 1.0)], 3, cfg, estimator=est)
    s.step(0.0, 0, np.zeros(3), None, np.array([0.0, 0.0]))
    cmd = s.step(0.5, 1, np.array([0.0, 0.0, 0.1]), None, np.array([0.1, 0.0]))
    # first velocity: rdot = (0.2, 0); qdot from the difference (0, 0, 0.2); rdot_bar = rdot
    np.testing.assert_allclose(est.seen[0][0], [0.0, 0.0, 0.2])
    np.testing.assert_allclose(est.seen[0][1], [0.2, 0.0])
    vd = 0.2 * np.array([0.9, 1.0]) / np.hypot(0.9, 1.0)
    e = np.array([0.0, vd[1]])  # across rdot_bar = (0.2, 0)
    g = np.array([0.1, 0.2])
    delta = (g @ e) / (g @ g) * 0.5
    assert s.delta == pytest.approx(delta)
    np.testing.assert_allclose(cmd.offset, [0.0, 0.0, delta])
    assert cmd.waypoint == 0
    # a lost state holds the offset and measures nothing
    s.step(1.0, 2, np.zeros(3), None, np.array([5.0, 5.0]), status="lost")
    assert s.delta == pytest.approx(delta) and len(est.seen) == 1
    # reaching the only waypoint is recorded; the controller keeps aiming at it
    assert s.step(1.5, 3, np.zeros(3), None, np.array([1.0, 1.02])).waypoint == 0 and s.reach_times == [1.5]


def test_the_lateral_law_inverts_only_the_part_of_j_b_across_the_travel():
    J = np.array([[0.3, 0.3, 0.3], [0.0, 0.0, 0.1]])  # g = J 1 = (0.9, 0.1)
    est = Fixed(J)
    cfg = SteeringConfig(speed=0.2, gain=1.0, damping=0.0, offset_limit=1.0, smoothing=1.0, leak=0.0, tolerance=0.05)
    s = HeadSteering([(1.0, 1.0)], 3, cfg, estimator=est)
    np.testing.assert_allclose(s.direction, np.ones(3))  # the default: a curvature bias on all joints
    s.step(0.0, 0, np.zeros(3), None, np.array([0.0, 0.0]))
    cmd = s.step(0.5, 1, np.zeros(3), None, np.array([0.1, 0.0]))
    vd = 0.2 * np.array([0.9, 1.0]) / np.hypot(0.9, 1.0)
    # travel along x: g across it is (0, 0.1), e = (0, vd_y); delta = vd_y / 0.1 * 0.5
    assert s.delta == pytest.approx(vd[1] / 0.1 * 0.5)
    np.testing.assert_allclose(cmd.offset, np.full(3, s.delta))


def test_bad_settings_are_input_errors():
    with pytest.raises(InputError):
        SteeringConfig(gain=-1.0)
    with pytest.raises(InputError):
        HeadSteering([(1.0, 2.0, 3.0)], 3)


def test_stepper_without_offset_is_the_batch_simulation():
    cfg = OALConfig(duration=1.5, seed=4)
    ref = simulate_oal(cfg)
    s = OALStepper(cfg)
    for t in (0.2, 0.5, 0.5, 1.0):
        s.advance(t)
        np.testing.assert_array_equal(s.qpos, ref.qpos[s.n])


def test_an_offset_bends_the_joints_towards_it():
    a, b = OALStepper(OALConfig(seed=0)), OALStepper(OALConfig(seed=0))
    b.set_offset(np.r_[np.zeros(9), 0.3])
    a.advance(1.0)
    b.advance(1.0)
    assert b.phi[-1] - a.phi[-1] > 0.15  # the PD law holds the head joint near its shifted reference
    np.testing.assert_allclose(b.phi[:3], a.phi[:3], atol=0.05)


def _wave(t, n=10):
    """The gait's joint angles (n,) [rad] at t [s]: the wave runs from the head (last joint) to the tail."""
    return 0.5 * np.sin(4.0 * t + np.pi / 3 * np.arange(n))


def _state(k, head_cam):
    return RobotState(frame=k, t=0.1 * k, q=_wave(0.1 * k), qdot=None, base_position=np.zeros(3),
                      base_quat=np.array([1.0, 0, 0, 0]), head=np.asarray(head_cam, float), status="tracked",
                      iou=1.0, capture_time=0.0, publish_time=0.0, received_time=0.0, row={})


def test_the_controller_gets_only_its_links_and_the_camera_pose():
    assert list(inspect.signature(controller_main).parameters) == [
        "link", "commands", "results", "camera_positions", "camera_rotations", "targets", "robot", "steering"]
    # a camera 2 m up looking down: camera x = world x, camera y = -world y, camera z = -world z
    R = np.diag([1.0, -1.0, -1.0])
    n = 25
    positions, rotations = np.tile([0.0, 0.0, 2.0], (n, 1)), np.tile(R, (n, 1, 1))
    link, commands, results = queue.Queue(), queue.Queue(), queue.Queue()
    for k in range(n):
        link.put(_state(k, [0.015 * k, -0.02, 2.0]))  # world head (0.015k, 0.02, 0)
    link.put(None)
    controller_main(link, commands, results, positions, rotations, np.array([[0.3, 0.0]]),
                    load_robot("planar-snake-11"), SteeringConfig())
    assert results.get_nowait() == ("ready", None)
    kind, log = results.get_nowait()
    # the first 19 states are held (the head/tail check's window is not full); the 20th, at 0.285 m, is
    # within 0.1 m of (0.3, 0) and read the right way round
    assert kind == "log" and log["reach_times"] == [pytest.approx(1.9)] and log["flipped_states"] == 0
    assert [r["reversed"] for r in log["rows"]] == [None] * 19 + [False] * 6
    np.testing.assert_allclose([(r["head_x"], r["head_y"]) for r in log["rows"]],
                               [(0.015 * k, 0.02) for k in range(n)])
    cmds = [commands.get_nowait() for _ in range(n)]
    assert [c.frame for c in cmds] == list(range(n))  # one command per state


def test_the_controller_module_loads_no_simulator():
    code = ("import sys, snaketrack.experiments.loop_controller, snaketrack.experiments.steering, "
            "snaketrack.estimation.registry;"
            "print(sorted(m for m in ('mujoco', 'snaketrack.sim.oal', 'snaketrack.sim.oal_live', "
            "'snaketrack.experiments.closed_loop') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
