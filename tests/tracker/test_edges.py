"""Closed-form edge-distance derivatives of capsules and cylinders against autograd."""
import torch

from snaketrack.tracker.render.edges import (
    capsule_edge_px,
    capsule_edge_px_grad,
    cylinder_edge_px,
    cylinder_edge_px_grad,
)


def _random_pairs(Q: int, length: float):
    """Q random (primitive, ray) pairs about 1 m in front of the camera: A, B (3, Q) [m] with B − A up to
    ``length`` per axis, unit rays d (3, Q) and radii r (Q,) [m]."""
    g = torch.Generator().manual_seed(3)
    A = (torch.rand(3, Q, generator=g, dtype=torch.float64) - 0.5) * torch.tensor([[0.6], [0.6], [0.4]])
    A[2] += 1.0
    Bp = A + (torch.rand(3, Q, generator=g, dtype=torch.float64) - 0.5) * length
    d = torch.rand(3, Q, generator=g, dtype=torch.float64) - 0.5
    d[2] = 1.0
    d = d / d.norm(dim=0, keepdim=True)
    r = 0.01 + 0.03 * torch.rand(Q, generator=g, dtype=torch.float64)
    return A, Bp, d, r


def test_closed_form_edge_gradient_equals_autograd():
    Q = 4000
    A, Bp, d, r = _random_pairs(Q, 0.4)
    Bp[:, :200] = A[:, :200]  # spheres
    A[2, 200:260] = -0.5  # partly behind the camera
    a, b = A.clone().requires_grad_(True), Bp.clone().requires_grad_(True)
    e_ref = capsule_edge_px(a, b, r, d, 300.0, 0.05)
    e_ref.sum().backward()
    e, gA, gB = capsule_edge_px_grad(A, Bp, r, d, 300.0, 0.05)
    assert torch.allclose(e, e_ref.detach(), atol=1e-12)
    s_free = (gA.abs().sum(0) > 0)  # both clamped and free closest points occur
    assert 100 < int(s_free.sum()) < Q
    scale = float(a.grad.abs().max())
    assert torch.allclose(gA, a.grad, rtol=1e-6, atol=1e-8 * scale)
    assert torch.allclose(gB, b.grad, rtol=1e-6, atol=1e-8 * scale)


def test_closed_form_cylinder_edge_gradient_equals_autograd():
    Q = 4000
    A, Bp, d, r = _random_pairs(Q, 0.1)
    Bp[:, :100] = A[:, :100] + torch.tensor([[0.0], [0.0], [0.02]], dtype=torch.float64)  # seen along the axis
    A[2, 200:260], Bp[2, 200:260] = -0.5, -0.45  # behind the camera
    a, b = A.clone().requires_grad_(True), Bp.clone().requires_grad_(True)
    e_ref = cylinder_edge_px(a, b, r, d, 300.0, 0.05)
    e_ref.sum().backward()
    e, gA, gB = cylinder_edge_px_grad(A, Bp, r, d, 300.0, 0.05)
    assert torch.allclose(e, e_ref.detach(), atol=1e-9)
    assert int((gA.abs().sum(0) == 0).sum()) >= 30  # the pairs behind the camera have none
    scale = float(a.grad.abs().max())
    assert torch.allclose(gA, a.grad, rtol=1e-6, atol=1e-9 * scale)
    assert torch.allclose(gB, b.grad, rtol=1e-6, atol=1e-9 * scale)
