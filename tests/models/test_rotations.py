"""Rotation helpers against scipy's Rotation, and their gradients."""
import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from snaketrack.errors import InputError
from snaketrack.models.rotations import (axis_angle_to_matrix, axis_rotation, matrix_to_axis_angle,
                                         matrix_to_quat, quat_to_matrix)


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
    np.testing.assert_allclose(matrix_to_axis_angle(R).numpy(), Rotation.from_matrix(ref.as_matrix()).as_rotvec(), atol=1e-8)


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
