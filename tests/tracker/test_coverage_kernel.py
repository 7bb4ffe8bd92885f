"""The compiled coverage term against the numpy reference (:func:`coverage_terms`)."""
import numpy as np
import pytest
import torch

from snaketrack.models.chain import point_jacobian
from snaketrack.models.robot import load_robot
from snaketrack.models.rotations import axis_angle_to_matrix_np
from snaketrack.tracker.config import RefineConfig
from snaketrack.tracker.fit import coverage_kernel
from snaketrack.tracker.fit.refine_terms import coverage_terms
from snaketrack.tracker.render.silhouette import CapsuleModel

pytestmark = pytest.mark.skipif(not coverage_kernel.available(), reason="numba not installed")

K = np.array([[500.0, 0.3, 320.0], [0.0, 480.0, 180.0], [0.0, 0.0, 1.0]])


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_the_compiled_coverage_term_equals_the_reference(name):
    robot = load_robot(name)
    model = CapsuleModel.from_visual(robot)
    radii = np.asarray(model.radius, float)
    rng = np.random.default_rng(11)
    cfg = RefineConfig()
    active = 0
    for trial in range(6):
        q = torch.as_tensor(rng.uniform(robot.lower, robot.upper) * 0.5)
        R = torch.as_tensor(axis_angle_to_matrix_np(np.array([np.pi, 0.0, 0.0]) + 0.2 * rng.normal(size=3)))
        t = torch.as_tensor(np.array([-0.3, 0.0, 2.5]) + 0.1 * rng.normal(size=3))
        P, G = point_jacobian(robot, model, q, R, t)
        # samples near the projected body: on it, beside it, beyond the reach; one trial with a primitive behind
        # the camera
        if trial == 5:
            P = P.clone()
            P[0, 0, 2] = -0.1
        uv = (P.numpy().reshape(-1, 3) @ K.T)
        uv = uv[:, :2] / np.abs(uv[:, 2:3])
        skel = uv[rng.integers(0, len(uv), 80)] + rng.normal(scale=15.0, size=(80, 2))
        nP = G.shape[-1] + 1
        H_ref, g_ref, c_ref = coverage_terms(cfg, K, radii, P, G, skel, nP)
        H, g, c = coverage_kernel.coverage_terms_compiled(cfg, K, radii, P, G, skel, nP)
        assert H.shape == H_ref.shape == (nP, nP) and g.shape == g_ref.shape == (nP,)
        scale = max(float(H_ref.abs().max()), 1.0)
        np.testing.assert_allclose(H.numpy(), H_ref.numpy(), rtol=1e-10, atol=1e-10 * scale)
        np.testing.assert_allclose(g.numpy(), g_ref.numpy(), rtol=1e-10, atol=1e-10 * max(float(g_ref.abs().max()), 1))
        assert c == pytest.approx(c_ref, rel=1e-10, abs=1e-12)
        active += c_ref > 0
    assert active >= 4  # most trials have samples that pull


def test_no_sample_in_reach_gives_no_terms():
    robot = load_robot("arcsnake-4")
    model = CapsuleModel.from_visual(robot)
    P, G = point_jacobian(robot, model, torch.zeros(robot.dof), torch.eye(3, dtype=torch.float64),
                          torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64))
    skel = np.array([[5000.0, 5000.0]])
    H, g, c = coverage_kernel.coverage_terms_compiled(RefineConfig(), K, np.asarray(model.radius, float), P, G, skel,
                                                      G.shape[-1])
    assert c == 0.0 and not H.any() and not g.any()
