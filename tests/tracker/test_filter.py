"""Kalman filter against filterpy (linear toy problem) and a finite-difference EKF Jacobian."""
import numpy as np
import pytest
import torch
from filterpy.common import Q_discrete_white_noise
from filterpy.kalman import KalmanFilter as FPKalmanFilter

from snaketrack.errors import InputError, StateError
from snaketrack.models.robot import load_robot
from snaketrack.tracker.filter import (
    FilterConfig,
    KalmanFilter,
    cv_transition,
    ekf_update,
    observation_jacobian,
    predict,
    update,
    velocity_update,
    white_accel_noise,
)
from snaketrack.tracker.fit.moments import mask_moment_vector
from snaketrack.tracker.state import StateLayout


def _toy(n=3, m=2, seed=0):
    rng = np.random.default_rng(seed)
    dt = 0.05
    F = cv_transition(n, dt)
    Q = white_accel_noise(rng.uniform(0.5, 2.0, n), dt)
    H = np.hstack([rng.normal(size=(m, n)), np.zeros((m, n))])
    R = np.diag(rng.uniform(0.01, 0.1, m))
    x0 = rng.normal(size=2 * n)
    P0 = np.diag(rng.uniform(0.1, 1.0, 2 * n))
    return rng, dt, F, Q, H, R, x0, P0


def test_plain_functions_match_filterpy_on_linear_problem():
    n, m = 3, 2
    rng, dt, F, Q, H, R, x0, P0 = _toy(n, m)
    fp = FPKalmanFilter(dim_x=2 * n, dim_z=m)
    fp.x, fp.P, fp.F, fp.Q, fp.H, fp.R = x0.copy(), P0.copy(), F, Q, H, R
    x, P = x0.copy(), P0.copy()
    truth = x0.copy()
    for _ in range(60):
        truth = F @ truth + rng.multivariate_normal(np.zeros(2 * n), Q)
        z = H @ truth + rng.multivariate_normal(np.zeros(m), R)
        fp.predict()
        fp.update(z)
        x, P = predict(x, P, F, Q)
        x, P, K, y, S = update(x, P, z, H, R)
        np.testing.assert_allclose(x, fp.x, rtol=0, atol=1e-10)
        np.testing.assert_allclose(P, fp.P, rtol=0, atol=1e-10)
        np.testing.assert_allclose(K, fp.K, rtol=0, atol=1e-10)
        np.testing.assert_allclose(y, fp.y, rtol=0, atol=1e-10)
        np.testing.assert_allclose(S, fp.S, rtol=0, atol=1e-10)


def test_class_with_autograd_H_of_linear_h_matches_filterpy():
    layout = StateLayout(n_joints=2)  # D = 8
    n, m = layout.dim, 3
    cfg = FilterConfig()
    kf = KalmanFilter(layout, dt=1 / 30, config=cfg)
    rng = np.random.default_rng(1)
    A = rng.normal(size=(m, n))
    R = np.diag([0.3, 0.2, 0.5])
    s0 = rng.normal(size=n)
    kf.initialise(s0)
    fp = FPKalmanFilter(dim_x=2 * n, dim_z=m)
    fp.x, fp.P, fp.F, fp.Q = kf.x.copy(), kf.P.copy(), kf.F, kf.Q
    fp.H, fp.R = np.hstack([A, np.zeros((m, n))]), R
    At = torch.as_tensor(A)
    for _ in range(30):
        z = rng.normal(size=m)
        kf.predict()
        kf.update(z, lambda s: At @ s, R=R)
        fp.predict()
        fp.update(z)
        np.testing.assert_allclose(kf.x, fp.x, rtol=0, atol=1e-10)
        np.testing.assert_allclose(kf.P, fp.P, rtol=0, atol=1e-10)
    np.testing.assert_allclose(kf.H, fp.H, atol=1e-12)


def test_process_noise_matches_filterpy_per_entry():
    dt, std = 0.04, np.array([0.5, 2.0, 3.0])
    Q = white_accel_noise(std, dt)
    n = std.size
    for i, s in enumerate(std):
        ref = Q_discrete_white_noise(dim=2, dt=dt, var=s**2)
        sub = Q[np.ix_([i, i + n], [i, i + n])]
        np.testing.assert_allclose(sub, ref, rtol=1e-12)


def _soft_ellipse_moments(s: torch.Tensor) -> torch.Tensor:
    """A nonlinear h: moments of a soft ellipse rendered from (cu, cv, a, b, angle)."""
    v, u = torch.meshgrid(torch.arange(48, dtype=s.dtype), torch.arange(64, dtype=s.dtype), indexing="ij")
    cu, cv, a, b, th = s[0], s[1], s[2], s[3], s[4]
    du, dv = u - cu, v - cv
    x = du * torch.cos(th) + dv * torch.sin(th)
    y = -du * torch.sin(th) + dv * torch.cos(th)
    mask = torch.sigmoid((1 - (x / a) ** 2 - (y / b) ** 2) * 4.0)
    return mask_moment_vector(mask[None], order=2)[0]


def test_autograd_H_equals_finite_differences_and_ekf_step_agrees():
    s = np.array([30.0, 22.0, 14.0, 5.0, 0.4])
    hx, H = observation_jacobian(_soft_ellipse_moments, s)
    H_fd = np.zeros_like(H)
    eps = 1e-6
    for j in range(s.size):
        d = np.zeros_like(s)
        d[j] = eps
        hp = _soft_ellipse_moments(torch.as_tensor(s + d)).numpy()
        hm = _soft_ellipse_moments(torch.as_tensor(s - d)).numpy()
        H_fd[:, j] = (hp - hm) / (2 * eps)
    np.testing.assert_allclose(H, H_fd, rtol=1e-6, atol=1e-6 * np.abs(H).max())
    _, H_jr = observation_jacobian(_soft_ellipse_moments, s, method="jacrev")
    np.testing.assert_allclose(H_jr, H, rtol=1e-12, atol=1e-12)
    # one EKF step: with the autograd H vs with the finite-difference H
    x = np.concatenate([s, np.zeros(5)])
    P = np.diag(np.r_[np.full(5, 0.5), np.full(5, 0.1)])
    z = _soft_ellipse_moments(torch.as_tensor(np.array([31.0, 21.5, 14.5, 5.0, 0.45]))).numpy()
    R = FilterConfig().observation_noise(z)
    xa, Pa, *_ = ekf_update(x, P, z, _soft_ellipse_moments, R)
    xf, Pf, *_ = update(x, P, z, np.hstack([H_fd, np.zeros_like(H_fd)]), R, hx=hx)
    np.testing.assert_allclose(xa, xf, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(Pa, Pf, rtol=1e-6, atol=1e-9)
    # the update moves the estimate towards the observed pose
    assert np.linalg.norm(xa[:2] - [31.0, 21.5]) < np.linalg.norm(s[:2] - [31.0, 21.5])


def test_joseph_form_keeps_P_symmetric_positive_definite():
    rng, dt, F, Q, H, R, x, P = _toy(4, 3, seed=3)
    for _ in range(200):
        x, P = predict(x, P, F, Q)
        x, P, *_ = update(x, P, rng.normal(size=3), H, R)
    np.testing.assert_allclose(P, P.T, atol=1e-12)
    assert np.linalg.eigvalsh(P).min() > 0


def test_velocity_update_recovers_constant_velocity_and_paper_definition():
    layout = StateLayout(n_joints=3)
    n = layout.dim
    v_true = np.linspace(-1, 1, n)
    kf = KalmanFilter(layout, dt=0.1, config=FilterConfig(velocity_gain=1.0, depth_velocity_gain=1.0))
    s = np.zeros(n)
    kf.initialise(s)
    for k in range(1, 6):
        kf.predict()
        s_ref = s + v_true * 0.1 * k  # truth at step k
        kf.set_refined(s_ref)
    np.testing.assert_allclose(kf.velocity, v_true, atol=1e-12)
    np.testing.assert_allclose(kf.pose, v_true * 0.5, atol=1e-12)
    # blending: g = 0.5 averages the finite difference with the filter's velocity
    x = np.r_[np.zeros(n), np.full(n, 2.0)]
    out = velocity_update(x, np.full(n, 0.1), np.zeros(n), dt=0.1, gain=0.5)
    np.testing.assert_allclose(out[n:], 0.5 * 1.0 + 0.5 * 2.0)
    np.testing.assert_allclose(out[:n], 0.1)


def test_depth_damping_scales_only_the_rate_along_the_viewing_ray():
    layout = StateLayout(n_joints=2)
    n, tr = layout.dim, layout.trans
    kf = KalmanFilter(layout, dt=0.1, config=FilterConfig(velocity_gain=1.0, depth_velocity_gain=0.25))
    s0 = np.zeros(n)
    s0[tr] = [0.0, 0.6, 0.8]  # base 1 m away; the ray through it is (0, 0.6, 0.8)
    kf.initialise(s0)
    kf.predict()
    step = np.zeros(n)
    step[layout.q] = [0.01, -0.02]
    along = np.array([0.0, 0.6, 0.8]) * 0.05   # moves 0.05 m deeper along the ray ...
    across = np.array([0.03, 0.0, 0.0])        # ... and 0.03 m across it
    step[tr] = along + across
    kf.set_refined(s0 + step)
    v = kf.velocity
    np.testing.assert_allclose(v[layout.q], [0.1, -0.2], atol=1e-12)  # joints: plain finite difference
    r = (s0[tr] + step[tr]) / np.linalg.norm(s0[tr] + step[tr])       # the ray through the refined base
    fd = step[tr] / 0.1
    np.testing.assert_allclose(v[tr] @ r, 0.25 * (fd @ r), atol=1e-12)
    np.testing.assert_allclose(v[tr] - (v[tr] @ r) * r, fd - (fd @ r) * r, atol=1e-12)
    np.testing.assert_allclose(kf.pose, s0 + step, atol=1e-12)  # the pose itself is untouched
    # gain 1 is the paper's update; a value above 1 is refused
    x = np.r_[s0, np.zeros(n)]
    np.testing.assert_allclose(velocity_update(x, s0 + step, s0, 0.1, 1.0, 1.0, tr)[n:], step / 0.1)
    with pytest.raises(InputError, match="depth_velocity_gain"):
        FilterConfig(depth_velocity_gain=1.5)


def test_depth_damping_at_the_body_centre_scales_the_centre_rate_along_its_ray():
    """With an anchor the damping acts on the anchor's predicted motion along its own ray.

    Checked against forward kinematics done here: the link centres' mean,
    moved by the undamped and by the damped rate over one frame.
    """
    from snaketrack.models.kinematics import forward_kinematics_np
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    robot = load_robot("arcsnake-4")
    layout = StateLayout.for_robot(robot)
    n, tr, dt, g = layout.dim, layout.trans, 0.1, 0.5

    def centre(x):
        q, R, t = layout.unpack(x)
        return forward_kinematics_np(robot, q, R, t)["centres"].mean(axis=0)

    rng = np.random.default_rng(3)
    s_prev = layout.pack(rng.uniform(-0.4, 0.4, layout.n_joints), np.eye(3), [0.1, -0.2, 2.0])
    step = np.r_[rng.uniform(-0.1, 0.1, layout.n_joints), [0.05, -0.03, 0.08], [0.01, 0.02, -0.04]]
    s_ref = s_prev + step
    x = np.r_[s_prev, np.zeros(n)]
    v_fd = velocity_update(x, s_ref, s_prev, dt)[n:]
    v = velocity_update(x, s_ref, s_prev, dt, 1.0, g, tr, anchor=centre)[n:]
    c0 = centre(s_ref)
    r = c0 / np.linalg.norm(c0)
    moved_fd, moved = centre(s_ref + v_fd * dt) - c0, centre(s_ref + v * dt) - c0
    assert abs(moved_fd @ r) > 1e-3                                     # the case is not trivial
    np.testing.assert_allclose(moved @ r, g * (moved_fd @ r), atol=1e-12)
    np.testing.assert_allclose(moved - (moved @ r) * r, moved_fd - (moved_fd @ r) * r, atol=1e-12)
    np.testing.assert_allclose(v[: tr.start], v_fd[: tr.start], atol=1e-12)  # joint and rotation rates kept
    # the base's own rate along its ray is not what is scaled: the gait's swing is kept
    rb = s_ref[tr] / np.linalg.norm(s_ref[tr])
    assert abs(v[tr] @ rb - g * (v_fd[tr] @ rb)) > 1e-3
    # the tracker anchors at the body's centre unless told otherwise
    K = np.array([[500.0, 0, 320], [0, 500.0, 180], [0, 0, 1]])
    trk = Tracker(robot, K, 640, 360)
    np.testing.assert_allclose(trk.filter.anchor(s_ref), c0, atol=1e-12)
    assert Tracker(robot, K, 640, 360, config=TrackerConfig(depth_anchor="base")).filter.anchor is None
    with pytest.raises(InputError, match="depth_anchor"):
        TrackerConfig(depth_anchor="head")


def test_layout_of_robot_and_noise_config():
    layout = StateLayout.for_robot(load_robot("planar-snake-11"))
    cfg = FilterConfig(joint_accel_std=3.0, rotation_accel_std=1.0, translation_accel_std=0.2)
    a = cfg.accel_std(layout)
    assert a[layout.q].tolist() == [3.0] * 10 and a[layout.rot].tolist() == [1.0] * 3
    P0 = cfg.initial_covariance(layout)
    assert P0.shape == (32, 32) and np.all(np.diag(P0) > 0)
    R = cfg.observation_noise(np.array([100, 50, 400.0, 10.0, 100.0]))
    assert R[0, 0] == pytest.approx(4.0) and R[2, 2] == pytest.approx((0.05 * 500) ** 2)


def test_errors():
    with pytest.raises(InputError, match="dt"):
        cv_transition(3, 0.0)
    with pytest.raises(InputError, match="centroid_std_px"):
        FilterConfig(centroid_std_px=0.0)
    with pytest.raises(InputError, match="joint_accel_std"):
        FilterConfig(joint_accel_std=-1.0)
    kf = KalmanFilter(StateLayout(n_joints=1), dt=0.1)
    with pytest.raises(StateError, match="initialise"):
        kf.predict()
    kf.initialise(np.zeros(7))
    with pytest.raises(InputError, match="H: shape"):
        kf.update_linear(np.zeros(2), np.zeros((2, 3)), np.eye(2))
    with pytest.raises(InputError, match="non-finite"):
        kf.update_linear(np.array([np.nan, 0.0]), np.zeros((2, 14)), np.eye(2))
    with pytest.raises(InputError, match="moments"):
        FilterConfig().observation_noise(np.zeros(3))


def test_a_longer_interval_predicts_further_as_filterpy_does():
    """Frames skipped by a live source: the prediction spans the real interval, with filterpy's F and Q."""
    layout = StateLayout.for_robot(load_robot("planar-snake-11"))
    kf = KalmanFilter(layout, 1 / 30)
    n = layout.dim
    v = np.linspace(-0.3, 0.3, n)
    kf.initialise(np.zeros(n), velocity=v)
    kf.set_interval(0.1)  # two frames skipped at 30 frames/s
    np.testing.assert_allclose(kf.predict(), 0.1 * v, atol=1e-12)
    std = kf.config.accel_std(layout)
    for i in (0, n - 1):
        ref = Q_discrete_white_noise(dim=2, dt=0.1, var=std[i] ** 2)
        np.testing.assert_allclose(kf.Q[np.ix_([i, i + n], [i, i + n])], ref, rtol=1e-12)
    with pytest.raises(InputError):
        kf.set_interval(0.0)
