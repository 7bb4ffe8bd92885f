"""The compiled silhouette-and-Jacobian kernel against the torch reference and finite differences."""
import numpy as np
import pytest
import torch

from snaketrack.tracker.render import render_kernel
from snaketrack.tracker.render.silhouette import (
    SilhouetteSettings,
    render_with_jacobian,
    render_with_jacobian_compiled,
    soft_silhouette,
)

pytestmark = pytest.mark.skipif(not render_kernel.available(), reason="numba is not installed")

K64 = torch.tensor([[200.0, 0.3, 39.5], [0, 210.0, 29.5], [0, 0, 1]], dtype=torch.float64)


def _scene(seed, n=4):
    g = torch.Generator().manual_seed(seed)
    A = torch.rand(1, n, 3, generator=g, dtype=torch.float64) * torch.tensor([0.4, 0.3, 0.5]) - torch.tensor(
        [0.2, 0.15, -1.0])
    Bp = A + (torch.rand(1, n, 3, generator=g, dtype=torch.float64) - 0.5) * 0.3
    r = 0.01 + 0.03 * torch.rand(n, generator=g, dtype=torch.float64)
    G = torch.randn(n, 2, 3, 5, dtype=torch.float64, generator=g) * 0.1
    return A, Bp, r, G


def _dense(rj, n_pix):
    d = torch.zeros(n_pix, rj.jac.shape[1], dtype=rj.jac.dtype)
    d[rj.rows] = rj.jac
    return d


@pytest.mark.parametrize("seed,cylinders,offset", [(0, None, 0.0), (1, [True, False, True, False], 0.4),
                                                   (2, [True] * 4, -0.7), (3, [False, True, False, False], 1.5)])
@pytest.mark.parametrize("sigma", [2.0, 0.5])
def test_compiled_matches_the_torch_reference(seed, cylinders, offset, sigma):
    A, Bp, r, G = _scene(seed)
    cyl = None if cylinders is None else np.array(cylinders)
    s = SilhouetteSettings(sigma_px=sigma)
    roi = (3, 2, 74, 55)
    ref = render_with_jacobian(A, Bp, r, K64, roi, G, s, offset_px=offset, with_offset=True, tol=1e-3,
                               compute_dtype=torch.float64, cylinders=cyl)
    fast = render_with_jacobian_compiled(A, Bp, r, K64, roi, G, s, offset_px=offset, with_offset=True, tol=1e-3,
                                         cylinders=cyl)
    assert ref.sil.sum() > 50
    assert torch.allclose(fast.sil, ref.sil, atol=1e-10)
    assert torch.equal(fast.rows, ref.rows)
    assert torch.allclose(fast.jac, ref.jac, atol=1e-9 * float(ref.jac.abs().max()), rtol=1e-7)


def test_compiled_jacobian_matches_finite_differences():
    A, Bp, r, G = _scene(7)
    cyl = np.array([False, True, False, True])
    s = SilhouetteSettings(sigma_px=1.0)
    roi = (0, 0, 80, 60)
    D = G.shape[-1]
    rj = render_with_jacobian_compiled(A, Bp, r, K64, roi, G, s, offset_px=0.2, with_offset=True, tol=0.0,
                                       cylinders=cyl)

    def f(p):
        a = A + torch.einsum("mjd,d->mj", G[:, 0], p[:D])[None]
        b = Bp + torch.einsum("mjd,d->mj", G[:, 1], p[:D])[None]
        return soft_silhouette(a, b, r, K64, roi, s, p[D:] + 0.2, cylinders=cyl)[0].reshape(-1)

    p0 = torch.zeros(D + 1, dtype=torch.float64)
    h = 1e-6
    Jref = torch.stack([(f(p0 + h * e) - f(p0 - h * e)) / (2 * h) for e in torch.eye(D + 1, dtype=torch.float64)], 1)
    assert torch.allclose(rj.sil, f(p0), atol=1e-10)
    err = (_dense(rj, Jref.shape[0]) - Jref).abs()
    assert Jref.abs().max() > 0.1
    assert err.max() < 1e-3 * Jref.abs().max()
    assert err.mean() < 1e-7


def test_compiled_off_screen_and_behind_the_camera():
    A, Bp, r, G = _scene(4)
    s = SilhouetteSettings(sigma_px=1.0)
    behind = render_with_jacobian_compiled(-A, -Bp, r, K64, (0, 0, 80, 60), G, s, with_offset=True)
    assert behind.rows.numel() == 0 and float(behind.sil.abs().max()) == 0.0
    shift = torch.tensor([5.0, 0, 0], dtype=torch.float64)
    gone = render_with_jacobian_compiled(A + shift, Bp + shift, r, K64, (0, 0, 80, 60), G, s)
    assert gone.rows.numel() == 0 and float(gone.sil.abs().max()) == 0.0
    # one end far off to the side: the link crosses the image edge
    part = render_with_jacobian_compiled(A + shift, Bp, r, K64, (0, 0, 80, 60), G, s)
    ref = render_with_jacobian(A + shift, Bp, r, K64, (0, 0, 80, 60), G, s, compute_dtype=torch.float64)
    assert ref.sil.sum() > 10
    assert torch.allclose(part.sil, ref.sil, atol=1e-10)
    assert torch.allclose(part.jac, ref.jac, atol=1e-9 * float(ref.jac.abs().max()), rtol=1e-7)


@pytest.mark.parametrize("seed", range(6))
def test_band_pairs_are_the_reference_pairs(seed):
    """The compiled pair list equals bands.primitive_pixels' (same pairs, same order), also with links
    leaving the ROI and an end behind the camera."""
    from snaketrack.tracker.render.bands import primitive_pixels

    A, Bp, r, _ = _scene(seed, n=6)
    if seed % 2:
        Bp[0, 1, 2] = -0.2  # an end behind the camera: its whole box rows
        A[0, 2] += torch.tensor([0.6, 0.0, 0.0], dtype=torch.float64)  # off to the side
    for roi, pad in (((0, 0, 80, 60), 4.0), ((10, 7, 41, 33), 16.5), ((0, 0, 80, 60), 0.0)):
        ref_pix, ref_prim = primitive_pixels(A, Bp, r, K64, roi, pad)
        pix, prim = render_kernel.band_pairs(A[0].numpy().copy(), Bp[0].numpy().copy(), r.numpy().copy(),
                                             K64.numpy().copy(), np.array(roi, np.int64), pad)
        assert len(ref_pix) > 0
        np.testing.assert_array_equal(pix, ref_pix)
        np.testing.assert_array_equal(prim, ref_prim)


@pytest.mark.parametrize("seed,cylinders,offset", [(0, None, 0.0), (1, [True, False, True, False], 0.4)])
def test_deferred_jacobian_is_the_eager_one_computed_when_read(seed, cylinders, offset, monkeypatch):
    """``deferred=True`` gives the same silhouette at once and the same rows and Jacobian, computed only
    when first read (a rejected trial step never pays for them)."""
    A, Bp, r, G = _scene(seed)
    cyl = None if cylinders is None else np.array(cylinders)
    s = SilhouetteSettings(sigma_px=1.0)
    roi = (3, 2, 74, 55)
    eager = render_with_jacobian_compiled(A, Bp, r, K64, roi, G, s, offset_px=offset, with_offset=True, tol=1e-3,
                                          cylinders=cyl)
    calls = []
    rows_of = render_kernel.jacobian_rows
    monkeypatch.setattr(render_kernel, "jacobian_rows", lambda *a: calls.append(1) or rows_of(*a))
    lazy = render_with_jacobian_compiled(A, Bp, r, K64, roi, G, s, offset_px=offset, with_offset=True, tol=1e-3,
                                         cylinders=cyl, deferred=True)
    assert torch.equal(lazy.sil, eager.sil) and not calls
    assert torch.equal(lazy.jac, eager.jac) and torch.equal(lazy.rows, eager.rows)
    assert len(calls) == 1


@pytest.mark.parametrize("seed,cylinders,offset,sigma", [(0, None, 0.0, 1.0), (1, [True, False, True, False], 0.4, 2.0),
                                                         (2, [True] * 4, -0.7, 0.5)])
def test_compiled_silhouette_matches_soft_silhouette(seed, cylinders, offset, sigma):
    from snaketrack.tracker.render.silhouette import soft_silhouette_compiled

    A, Bp, r, _ = _scene(seed)
    cyl = None if cylinders is None else np.array(cylinders)
    s = SilhouetteSettings(sigma_px=sigma)
    roi = (3, 2, 74, 55)
    ref = soft_silhouette(A, Bp, r, K64, roi, s, torch.tensor([offset], dtype=torch.float64), cylinders=cyl)
    fast = soft_silhouette_compiled(A, Bp, r, K64, roi, s, offset, cylinders=cyl)
    assert float(ref.sum()) > 50
    assert fast.shape == ref.shape
    assert torch.allclose(fast, ref, atol=1e-10)


@pytest.mark.parametrize("offset", [0.0, 1.5, -1.0])
def test_renderer_mask_is_the_torch_silhouette_over_the_image(offset):
    """SilhouetteRenderer.mask (the compiled kernel over the robot's screen box) is the torch silhouette of
    the whole image above 0.5."""
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer

    robot = load_robot("planar-snake-11")
    K = np.array([[300.0, 0, 80], [0, 300.0, 60], [0, 0, 1]])
    ren = SilhouetteRenderer(robot, K, 160, 120)
    x = np.zeros(ren.layout.dim)
    x[:robot.dof] = 0.3 * np.sin(np.arange(robot.dof))
    x[ren.layout.trans] = [-0.5, 0.05, 2.0]  # the tail leaves the image on the left
    ref, _ = ren(torch.as_tensor(x)[None], (0, 0, 160, 120),
                 offset_px=torch.tensor([offset], dtype=torch.float64))
    m = ren.mask(x, offset)
    assert m.shape == (120, 160) and 200 < m.sum() < m.size
    np.testing.assert_array_equal(m, ref[0].numpy() > 0.5)


@pytest.mark.parametrize("seed", range(6))
def test_roi_box_is_the_union_of_the_reference_boxes(seed):
    """The compiled image box equals the union of bands.primitive_boxes' boxes over the primitives in view,
    also with links off the image, an end behind the camera, and none in view (w = 0)."""
    from snaketrack.tracker.render.bands import primitive_boxes

    A, Bp, r, _ = _scene(seed, n=6)
    if seed % 2:
        Bp[0, 1, 2] = -0.2
        A[0, 2] += torch.tensor([0.6, 0.0, 0.0], dtype=torch.float64)
    if seed == 4:
        A[0, :, 0] += 5.0  # every primitive far off to the side
        Bp[0, :, 0] += 5.0
    for W, H, pad in ((80, 60, 4.0), (41, 33, 16.5), (80, 60, 0.0)):
        boxes = primitive_boxes(A, Bp, r, K64, (0, 0, W, H), pad)
        good = boxes[:, 2] >= boxes[:, 0]
        box = render_kernel.roi_box(A[0].numpy().copy(), Bp[0].numpy().copy(), r.numpy().copy(), K64.numpy().copy(),
                                    W, H, pad)
        if not good.any():
            assert seed == 4 and box[2] == 0
            continue
        b = boxes[good]
        ul, vl = b[:, 0].min(), b[:, 1].min()
        assert box.tolist() == [ul, vl, b[:, 2].max() - ul + 1, b[:, 3].max() - vl + 1]
