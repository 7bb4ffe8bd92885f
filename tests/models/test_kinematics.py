"""Forward kinematics against an independent numpy chain of homogeneous transforms, and its gradients."""
import math

import numpy as np
import pytest
import torch

from snaketrack.errors import InputError
from snaketrack.models.kinematics import forward_kinematics, forward_kinematics_np, planar_link_angles
from snaketrack.models.robot import load_robot

ROBOTS = ["planar-snake-11", "arcsnake-4"]


def _rot(axis, a):
    c, s = math.cos(a), math.sin(a)
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def _homogeneous(R, p):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def numpy_chain(robot, q, R0, t0):
    """Link frames (N, 4, 4) by T_{i+1} = T_i · Trans(L_i, 0, 0) · Rot(a_1, q_1) · ...; head point (3,)."""
    T = _homogeneous(R0, t0)
    frames = [T]
    k = 0
    for i, joint in enumerate(robot.joints):
        T = T @ _homogeneous(np.eye(3), [robot.links[i].length, 0, 0])
        for axis in joint.axes:
            T = T @ _homogeneous(_rot(axis, q[k]), np.zeros(3))
            k += 1
        frames.append(T)
    frames = np.array(frames)
    head = frames[-1] @ np.array([0.5 * robot.links[-1].length, 0, 0, 1])
    return frames, head[:3]


def _random_pose(rng):
    A = rng.normal(size=(3, 3))
    Q, Rr = np.linalg.qr(A)
    Q = Q * np.sign(np.diag(Rr))
    if np.linalg.det(Q) < 0:
        Q[:, 0] *= -1
    return Q, rng.normal(size=3)


@pytest.mark.parametrize("name", ROBOTS)
def test_matches_independent_numpy_chain(name):
    robot = load_robot(name)
    rng = np.random.default_rng(11)
    B = 6
    q = rng.uniform(robot.lower, robot.upper, size=(B, robot.dof))
    poses = [_random_pose(rng) for _ in range(B)]
    R0 = np.stack([p[0] for p in poses])
    t0 = np.stack([p[1] for p in poses])
    pose = forward_kinematics(robot, torch.tensor(q), torch.tensor(R0), torch.tensor(t0))
    for b in range(B):
        frames, head = numpy_chain(robot, q[b], R0[b], t0[b])
        np.testing.assert_allclose(pose.rotations[b].numpy(), frames[:, :3, :3], atol=1e-12)
        np.testing.assert_allclose(pose.origins[b].numpy(), frames[:, :3, 3], atol=1e-12)
        ends = frames[:, :3, 3] + frames[:, :3, 0] * robot.lengths[:, None]
        np.testing.assert_allclose(pose.ends[b].numpy(), ends, atol=1e-12)
        np.testing.assert_allclose(pose.head[b].numpy(), head, atol=1e-12)
        np.testing.assert_allclose(pose.centres[b].numpy(), 0.5 * (frames[:, :3, 3] + ends), atol=1e-12)
    np.testing.assert_allclose(pose.radii.numpy(), robot.radii)
    # rotations stay orthonormal
    R = pose.rotations.numpy()
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)


def test_planar_link_angles_are_link_yaws():
    robot = load_robot("planar-snake-11")
    rng = np.random.default_rng(2)
    q = rng.uniform(-1, 1, size=(4, robot.dof))
    base = rng.uniform(-3, 3, size=4)
    R0 = np.stack([_rot("z", b) for b in base])
    pose = forward_kinematics_np(robot, q, R0, np.zeros((4, 3)))
    theta = planar_link_angles(robot, q, base)
    yaw = np.arctan2(pose["rotations"][..., 1, 0], pose["rotations"][..., 0, 0])
    np.testing.assert_allclose(np.angle(np.exp(1j * (theta - yaw))), 0, atol=1e-12)
    with pytest.raises(InputError):
        planar_link_angles(load_robot("arcsnake-4"), np.zeros(6))


@pytest.mark.parametrize("name", ROBOTS)
def test_gradcheck_float64(name):
    robot = load_robot(name)
    g = torch.Generator().manual_seed(0)
    q = (0.5 * torch.randn(2, robot.dof, generator=g, dtype=torch.float64)).requires_grad_()
    R0 = torch.linalg.qr(torch.randn(2, 3, 3, generator=g, dtype=torch.float64))[0]
    t0 = torch.randn(2, 3, generator=g, dtype=torch.float64, requires_grad=True)

    def f(q, t0):
        pose = forward_kinematics(robot, q, R0, t0)
        return pose.ends, pose.head, pose.rotations

    assert torch.autograd.gradcheck(f, (q, t0), eps=1e-6, atol=1e-6)

    def g_rot(R):
        return forward_kinematics(robot, q.detach(), R, t0.detach()).ends

    assert torch.autograd.gradcheck(g_rot, (R0.clone().requires_grad_(),), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ROBOTS)
def test_float32_agrees_with_float64(name):
    robot = load_robot(name)
    rng = np.random.default_rng(5)
    q = rng.uniform(robot.lower, robot.upper, size=(8, robot.dof))
    t0 = rng.normal(size=(8, 3))
    p64 = forward_kinematics(robot, torch.tensor(q), base_translation=torch.tensor(t0))
    p32 = forward_kinematics(robot, torch.tensor(q, dtype=torch.float32),
                             base_translation=torch.tensor(t0, dtype=torch.float32))
    assert p32.ends.dtype == torch.float32 and p64.ends.dtype == torch.float64
    np.testing.assert_allclose(p32.ends.numpy(), p64.ends.numpy(), atol=2e-6)
    np.testing.assert_allclose(p32.rotations.numpy(), p64.rotations.numpy(), atol=2e-6)
    np.testing.assert_allclose(p32.head.numpy(), p64.head.numpy(), atol=2e-6)


@pytest.mark.parametrize("name", ROBOTS)
def test_batch_rows_equal_single_calls(name):
    robot = load_robot(name)
    rng = np.random.default_rng(9)
    q = torch.tensor(rng.uniform(robot.lower, robot.upper, size=(5, robot.dof)))
    t0 = torch.tensor(rng.normal(size=(5, 3)))
    batch = forward_kinematics(robot, q, base_translation=t0)
    for b in range(5):
        one = forward_kinematics(robot, q[b:b + 1], base_translation=t0[b:b + 1])
        torch.testing.assert_close(batch.ends[b:b + 1], one.ends, rtol=0, atol=1e-14)
        torch.testing.assert_close(batch.rotations[b:b + 1], one.rotations, rtol=0, atol=1e-14)
    single = forward_kinematics_np(robot, q[2].numpy(), None, t0[2].numpy())
    np.testing.assert_allclose(single["head"], batch.head[2].numpy(), atol=1e-14)
    assert single["origins"].shape == (robot.n_links, 3)


def test_bad_shapes_raise_input_error():
    robot = load_robot("planar-snake-11")
    J = robot.dof
    bad = [
        (torch.zeros(J), None, None),  # missing batch dimension
        (torch.zeros(2, J + 1), None, None),  # wrong number of joints
        (torch.zeros(2, J, 1), None, None),
        (torch.zeros(2, J), torch.eye(3).expand(3, 3, 3), None),  # batch mismatch
        (torch.zeros(2, J), torch.zeros(2, 4, 4), None),
        (torch.zeros(2, J), None, torch.zeros(2, 2)),
        (torch.zeros(2, J), None, torch.zeros(3, 3)),
    ]
    for q, R0, t0 in bad:
        with pytest.raises(InputError):
            forward_kinematics(robot, q, R0, t0)
    with pytest.raises(InputError):
        forward_kinematics_np(robot, np.zeros(J - 1))
