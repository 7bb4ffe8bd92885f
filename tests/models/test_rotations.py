"""Rotation helpers against scipy's Rotation, and their gradients."""
import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from snaketrack.errors import InputError
from snaketrack.models.rotations import (
    axis_angle_to_matrix,
    axis_rotation,
    matrix_to_axis_angle,
    matrix_to_quat,
    quat_to_matrix,
)


def test_against_scipy():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(50, 3)) * rng.uniform(0, 3, size=(50, 1))
    ref = Rotation.from_rotvec(v)
    R = axis_angle_to_matrix(torch.tensor(v))
    np.testing.assert_allclose(R.numpy(), ref.as_matrix(), atol=1e-12)
    q = matrix_to_quat(R).numpy()
    q_ref = ref.as_quat(scalar_first=True)
    q_ref *= np.sign(q_ref[:, :1])
    np.testing.assert_allclose(q, q_ref, atol=1e-10)
    np.testing.assert_allclose(quat_to_matrix(torch.tensor(q)).numpy(), ref.as_matrix(), atol=1e-12)
    np.testing.assert_allclose(matrix_to_axis_angle(R).numpy(), Rotation.from_matrix(ref.as_matrix()).as_rotvec(),
                               atol=1e-8)


@pytest.mark.parametrize("axis", ["x", "y", "z"])
def test_axis_rotation(axis):
    a = np.array([0.3, -1.2, 2.5])
    vec = {"x": [1, 0, 0], "y": [0, 1, 0], "z": [0, 0, 1]}[axis]
    R = axis_rotation(axis, torch.tensor(a)).numpy()
    np.testing.assert_allclose(R, Rotation.from_rotvec(a[:, None] * np.array(vec)).as_matrix(), atol=1e-12)


def test_bad_axis():
    with pytest.raises(InputError, match="joint axis"):
        axis_rotation("w", torch.tensor(0.0))


def test_gradcheck_including_zero():
    for v0 in ([0.0, 0.0, 0.0], [1e-6, -2e-6, 0.0], [0.4, -1.0, 2.0]):
        v = torch.tensor(v0, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(axis_angle_to_matrix, (v,))
    q = torch.tensor([0.9, 0.1, -0.3, 0.2], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(quat_to_matrix, (q,))


def test_numpy_rotations_match_scipy_and_torch():
    """The numpy one-state rotation maps against scipy's Rotation and the torch ones, near 0 and π too."""
    from snaketrack.models.rotations import axis_angle_to_matrix_np, matrix_to_axis_angle_np

    rng = np.random.default_rng(3)
    axes = rng.normal(size=(40, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = np.concatenate([[0.0, 1e-10, 1e-6, 1e-3, np.pi - 1e-6, np.pi], rng.uniform(0, np.pi, 34)])
    for a, th in zip(axes, angles):
        v = a * th
        R = axis_angle_to_matrix_np(v)
        np.testing.assert_allclose(R, Rotation.from_rotvec(v).as_matrix(), atol=1e-14)
        np.testing.assert_allclose(R, axis_angle_to_matrix(torch.as_tensor(v)).numpy(), atol=1e-14)
        w = matrix_to_axis_angle_np(R)
        ref = Rotation.from_matrix(R).as_rotvec()
        if th < np.pi - 1e-3:  # at π, v and −v are the same rotation
            np.testing.assert_allclose(w, ref, atol=1e-9)
            np.testing.assert_allclose(w, matrix_to_axis_angle(torch.as_tensor(R)).numpy(), atol=1e-12)
        np.testing.assert_allclose(axis_angle_to_matrix_np(w), R, atol=1e-12)


@pytest.mark.parametrize("axis", ["x", "y", "z"])
def test_numpy_axis_rotation_matches_torch(axis):
    from snaketrack.models.rotations import axis_rotation_np

    for a in (0.0, 0.3, -1.2, 2.5, np.pi):
        R = axis_rotation(axis, torch.tensor(a, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(axis_rotation_np(axis, a), R, atol=1e-15)
