"""The compiled chain against the numpy reference (:func:`snaketrack.models.chain.point_jacobian`), the
reference's Jacobian against finite differences of the compiled end points, and the compiled body figures
and renderer end points against their numpy and torch references."""
import numpy as np
import pytest
import torch

from snaketrack.models import chain_kernel
from snaketrack.models.chain import point_jacobian
from snaketrack.models.robot import load_robot
from snaketrack.models.rotations import axis_angle_to_matrix_np
from snaketrack.tracker.render.silhouette import CapsuleModel

pytestmark = pytest.mark.skipif(not chain_kernel.available(), reason="numba not installed")


def _state(robot, rng):
    q = rng.uniform(robot.lower, robot.upper)
    R = axis_angle_to_matrix_np(rng.normal(size=3))
    t = rng.normal(size=3) + np.array([0.0, 0.0, 2.0])
    return torch.as_tensor(q), torch.as_tensor(R), torch.as_tensor(t)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4", "cobra-12", "cmu-snake-16"])
def test_the_compiled_chain_equals_the_reference(name):
    robot = load_robot(name)
    model = CapsuleModel.from_visual(robot)
    compiled = chain_kernel.CompiledChain(robot, model)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q, R, t = _state(robot, rng)
        P_ref, G_ref = point_jacobian(robot, model, q, R, t)
        P, G = compiled(q, R, t)
        assert P.dtype == G.dtype == torch.float64 and P.shape == P_ref.shape and G.shape == G_ref.shape
        np.testing.assert_allclose(P.numpy(), P_ref.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(G.numpy(), G_ref.numpy(), rtol=0, atol=1e-12)


def test_the_compiled_jacobian_is_the_derivative_of_its_points():
    robot = load_robot("arcsnake-4")
    model = CapsuleModel.from_visual(robot)
    compiled = chain_kernel.CompiledChain(robot, model)
    q, R, t = _state(robot, np.random.default_rng(3))
    P, G = compiled(q, R, t)
    J, h = robot.dof, 1e-6
    for k in range(J + 6):
        dq, dt, dR = q.clone(), t.clone(), R.clone()
        if k < J:
            dq[k] += h
        elif k < J + 3:
            w = np.zeros(3)
            w[k - J] = h
            dR = torch.as_tensor(axis_angle_to_matrix_np(w)) @ R
        else:
            dt[k - J - 3] += h
        P2, _ = compiled(dq, dR, dt)
        np.testing.assert_allclose(((P2 - P) / h).numpy(), G[..., k].numpy(), atol=2e-5)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4", "cobra-12", "cmu-snake-16"])
def test_the_compiled_body_figures_are_the_references(name):
    """The body's centre and head point against the torch forward kinematics, its plane normal and that
    normal's derivatives against body_normal (numpy)."""
    from snaketrack.models.chain import body_normal
    from snaketrack.models.kinematics import forward_kinematics_np

    robot = load_robot(name)
    body = chain_kernel.CompiledBody(robot)
    rng = np.random.default_rng(11)
    for _ in range(5):
        q, R, t = (a.numpy() for a in _state(robot, rng))
        fk = forward_kinematics_np(robot, q, R, t)
        np.testing.assert_allclose(body.centre(q, R, t), fk["centres"].mean(axis=0), rtol=0, atol=1e-12)
        np.testing.assert_allclose(body.head(q, R, t), fk["head"], rtol=0, atol=1e-12)
        n_ref, dn_ref = body_normal(robot, q, R)
        n, dn = body.normal(q, R)
        assert dn.shape == dn_ref.shape == (3, robot.dof + 3)
        np.testing.assert_allclose(n, n_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(dn, dn_ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4", "cobra-12"])
def test_the_renderers_compiled_end_points_are_its_forward_kinematics(name):
    """SilhouetteRenderer.primitives without autograd (the compiled chain) gives what its torch forward
    kinematics gives, for a batch of poses, a base rotation near zero (the rotation's series) among them."""
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer

    robot = load_robot(name)
    ren = SilhouetteRenderer(robot, np.diag([300.0, 300.0, 1.0]), 64, 48)
    rng = np.random.default_rng(17)
    X = np.concatenate([rng.uniform(robot.lower, robot.upper, (6, robot.dof)), rng.normal(size=(6, 3)),
                        rng.normal(size=(6, 3))], axis=1)
    X[0, robot.dof:robot.dof + 3] = [1e-6, -2e-6, 0.0]
    x = torch.as_tensor(X)
    a, b, r = ren.primitives(x)
    a_ref, b_ref, r_ref = ren.primitives(x.clone().requires_grad_(True))  # autograd: the torch kinematics
    np.testing.assert_allclose(a.numpy(), a_ref.detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.numpy(), b_ref.detach().numpy(), rtol=0, atol=1e-12)
    assert torch.equal(r, r_ref)
