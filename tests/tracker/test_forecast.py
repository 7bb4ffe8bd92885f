"""Latency compensation: a state carried forward is the Kalman filter's prediction step for the elapsed
time, and the service's message and Python client carry it."""
import numpy as np
import pytest
import torch

from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.robot import load_robot
from snaketrack.tracker.filter import KalmanFilter
from snaketrack.tracker.run.forecast import forecast
from snaketrack.tracker.state import StateLayout, TrackState


@pytest.fixture(scope="module")
def robot():
    return load_robot("planar-snake-11")


def _state(robot, layout, rng, t=1.5):
    s = np.concatenate([rng.uniform(-0.6, 0.6, robot.dof), rng.uniform(-1.0, 1.0, 3), [0.1, -0.05, 2.0]])
    v = rng.normal(0.0, 0.5, layout.dim)
    q, R0, t0 = layout.to_fk(torch.as_tensor(s)[None])
    head = forward_kinematics(robot, q, R0, t0).head[0].numpy()
    return TrackState.from_pose_vector(layout, s, head, frame=45, t=t, iou=0.9, velocity=v), s, v


@pytest.mark.parametrize("dt", [0.0, 0.004, 0.033, 0.12])
def test_the_forecast_is_the_filter_s_predict_step_for_the_elapsed_time(robot, dt):
    layout = StateLayout.for_robot(robot)
    state, s, v = _state(robot, layout, np.random.default_rng(7))
    kf = KalmanFilter(layout, 1 / 30)
    kf.initialise(s, v)
    if dt > 0:
        kf.set_interval(dt)
        kf.predict()
    f = forecast(state, robot, dt)
    assert np.allclose(f.pose_vector(layout, reference=kf.pose), kf.pose, atol=1e-9)
    q, R0, t0 = layout.to_fk(torch.as_tensor(kf.pose)[None])
    assert np.allclose(f.head, forward_kinematics(robot, q, R0, t0).head[0].numpy(), atol=1e-9)
    assert f.t == pytest.approx(state.t + dt) and f.frame == state.frame and f.status == state.status
    if dt > 0:  # it moved: by dt times the rate
        assert np.allclose(f.q - state.q, dt * v[layout.q], atol=1e-9)
        assert np.allclose(f.base_position - state.base_position, dt * v[layout.trans], atol=1e-9)


def test_no_forecast_without_a_pose_or_a_rate(robot):
    assert forecast(TrackState.before_start(robot.dof, 0, 0.0), robot, 0.05) is None
    layout = StateLayout.for_robot(robot)
    state, _, _ = _state(robot, layout, np.random.default_rng(1))
    from dataclasses import replace

    assert forecast(replace(state, velocity=None), robot, 0.05) is None


def test_the_state_message_and_the_client_carry_the_forecast(robot):
    from snaketrack.service import RobotState
    from snaketrack.service.messages import STATE_SCHEMA, state_message

    layout = StateLayout.for_robot(robot)
    state, _, _ = _state(robot, layout, np.random.default_rng(3))
    capture, publish = 100.0, 100.045
    f = forecast(state, robot, publish - capture)
    msg = state_message(state.as_row(), state, capture, publish, True, f)
    assert msg["predicted_time"] == publish and msg["predicted_dt"] == pytest.approx(0.045)
    import re

    patterns = [re.compile(p) for p in STATE_SCHEMA["patternProperties"]]
    predicted = [k for k in msg if k.startswith("predicted_") and k not in ("predicted_time", "predicted_dt")]
    assert len(predicted) == robot.dof + 3 + 4 + 3
    assert all(any(p.match(k) for p in patterns) for k in predicted)  # every field documented in the schema
    s = RobotState.from_message(msg, received_time=100.05)
    assert s.predicted_time == publish and s.predicted_dt == pytest.approx(0.045)
    assert np.allclose(s.predicted_q, f.q) and np.allclose(s.predicted_base_position, f.base_position)
    assert np.allclose(s.predicted_base_quat, f.base_quat) and np.allclose(s.predicted_head, f.head)
    assert np.allclose(s.q, state.q)  # the tracked state itself unchanged
    plain = RobotState.from_message(state_message(state.as_row(), state, capture, publish), 100.05)
    assert plain.predicted_time is None and plain.predicted_q is None and plain.predicted_dt is None
