"""Soft capsule silhouettes: gradcheck, a brute-force hard ray–capsule renderer, MuJoCo's segmentation."""
import math

import cv2
import numpy as np
import pytest
import torch

from snaketrack.errors import InputError
from snaketrack.models.robot import load_robot
from snaketrack.tracker.render.primitives import CapsuleModel
from snaketrack.tracker.render.silhouette import (
    SilhouetteRenderer,
    SilhouetteSettings,
    render_with_jacobian,
    soft_silhouette,
)
from snaketrack.tracker.state import StateLayout

K64 = torch.tensor([[200.0, 0, 39.5], [0, 210.0, 29.5], [0, 0, 1]], dtype=torch.float64)


def _capsules(seed=0, n=3):
    g = torch.Generator().manual_seed(seed)
    A = torch.rand(1, n, 3, generator=g, dtype=torch.float64) * torch.tensor([0.4, 0.3, 0.5]) - torch.tensor(
        [0.2, 0.15, -1.0])
    Bp = A + (torch.rand(1, n, 3, generator=g, dtype=torch.float64) - 0.5) * 0.3
    r = 0.01 + 0.03 * torch.rand(n, generator=g, dtype=torch.float64)
    return A, Bp, r


def _point_jac(M, D, seed):
    """A random end-point Jacobian (M, 2, 3, D) standing in for forward kinematics."""
    return torch.randn(M, 2, 3, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * 0.1


def _dense(rj, n_pix):
    """The sparse rows of a RenderJacobian as a dense (n_pix, D) matrix."""
    d = torch.zeros(n_pix, rj.jac.shape[1], dtype=rj.jac.dtype)
    d[rj.rows] = rj.jac
    return d


def _pixel_rays(K, width, height):
    """Unit rays (H·W, 3) through every pixel centre, row-major."""
    vv, uu = np.mgrid[0:height, 0:width]
    d = np.stack([uu.ravel(), vv.ravel(), np.ones(uu.size)], 1) @ np.linalg.inv(K).T
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _side_hits(d, c, w, rad, lo, hi):
    """Rays ``d`` (N, 3) from the origin that meet the cylinder surface of radius ``rad`` about the line
    through ``c`` along unit ``w`` at an axial coordinate (from ``c``) within [lo, hi]: the quadratic."""
    dp = d - np.outer(d @ w, w)
    ap = -c + (c @ w) * w  # (0 − c) minus its axial part
    qa, qb, qc = (dp * dp).sum(1), 2 * (dp @ ap), ap @ ap - rad ** 2
    disc = qb ** 2 - 4 * qa * qc
    hit = np.zeros(len(d), bool)
    for sgn in (-1, 1):
        t = (-qb + sgn * np.sqrt(np.maximum(disc, 0))) / (2 * np.maximum(qa, 1e-18))
        s = (t[:, None] * d - c) @ w
        hit |= (disc >= 0) & (t > 0) & (s >= lo) & (s <= hi)
    return hit


def hard_capsule_mask(A, B, r, K, width, height):
    """Brute force: per pixel ray, does it hit the capsule? Ray–cylinder quadratic + the two end spheres."""
    d = _pixel_rays(K, width, height)
    hit = np.zeros(len(d), bool)
    for a, b, rad in zip(A, B, r):
        for c in (a, b):  # spheres: |t d − c|² = r² has a real root t > 0
            bb = d @ c
            disc = bb ** 2 - (c @ c - rad ** 2)
            hit |= (disc >= 0) & (bb + np.sqrt(np.maximum(disc, 0)) > 0)
        L = np.linalg.norm(b - a)
        if L >= 1e-12:
            hit |= _side_hits(d, a, (b - a) / L, rad, 0.0, L)
    return hit.reshape(height, width)


def test_gradcheck_float64():
    A, Bp, r = _capsules(1, 2)
    A.requires_grad_(True)
    Bp.requires_grad_(True)
    off = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    s = SilhouetteSettings(sigma_px=1.5)
    roi = (20, 12, 24, 18)
    f = lambda a, b, o: soft_silhouette(a, b, r, K64, roi, s, o)  # noqa: E731
    assert f(A, Bp, off).sum() > 1  # something is drawn in the ROI
    assert torch.autograd.gradcheck(f, (A, Bp, off), eps=1e-6, atol=1e-5, fast_mode=True)


def test_matches_brute_force_ray_capsule():
    A, Bp, r = _capsules(2, 4)
    W, H = 80, 60
    soft = soft_silhouette(A, Bp, r, K64, (0, 0, W, H), SilhouetteSettings(sigma_px=0.01))[0].numpy() > 0.5
    hard = hard_capsule_mask(A[0].numpy(), Bp[0].numpy(), r.numpy(), K64.numpy(), W, H)
    assert hard.sum() > 200
    assert (soft != hard).sum() <= 2  # only pixels within numerical tie of the edge may differ


def test_roi_equals_full_image_and_batch_and_dtype():
    A, Bp, r = _capsules(3, 3)
    s = SilhouetteSettings(sigma_px=0.5)
    full = soft_silhouette(A, Bp, r, K64, (0, 0, 80, 60), s)
    crop = soft_silhouette(A, Bp, r, K64, (20, 10, 30, 40), s)
    assert torch.allclose(full[:, 10:50, 20:50], crop, atol=1e-12)
    A2, B2, _ = _capsules(4, 3)
    both = soft_silhouette(torch.cat([A, A2]), torch.cat([Bp, B2]), r, K64, (0, 0, 80, 60), s)
    # boxes are the union over the batch, so only the truncated tails (< sigmoid(−8)) may differ
    assert torch.allclose(both[0], full[0], atol=5e-4)
    f32 = soft_silhouette(A.float(), Bp.float(), r.float(), K64.float(), (0, 0, 80, 60), s)
    assert f32.dtype == torch.float32
    assert (f32.double() - full).abs().mean() < 1e-4  # float32 rounding near the edges only
    assert (f32.double() - full).abs().max() < 5e-2


def test_jacobian_one_pass_matches_autograd():
    A, Bp, r = _capsules(5, 3)
    M, D = 3, 4
    G = _point_jac(M, D, 0)
    s = SilhouetteSettings(sigma_px=1.0)
    roi = (0, 0, 80, 60)
    rj = render_with_jacobian(A, Bp, r, K64, roi, G, s, offset_px=0.2, with_offset=True, tol=0.0)

    def f(p):
        a = A + torch.einsum("mjd,d->mj", G[:, 0], p[:D])[None]
        b = Bp + torch.einsum("mjd,d->mj", G[:, 1], p[:D])[None]
        return soft_silhouette(a, b, r, K64, roi, s, p[D:] + 0.2)[0].reshape(-1)

    p0 = torch.zeros(D + 1, dtype=torch.float64)
    h = 1e-6  # central differences, one column per parameter
    Jref = torch.stack([(f(p0 + h * e) - f(p0 - h * e)) / (2 * h) for e in torch.eye(D + 1, dtype=torch.float64)], 1)
    assert torch.allclose(rj.sil, f(p0), atol=1e-12)
    dense = _dense(rj, Jref.shape[0])
    assert Jref.abs().max() > 0.1
    err = (dense - Jref).abs()
    assert err.max() < 1e-3 * Jref.abs().max()  # box-truncated tails (< sigmoid(−8)) may differ slightly
    assert err.mean() < 1e-7


def test_bad_inputs():
    A, Bp, r = _capsules(0, 2)
    with pytest.raises(InputError):
        soft_silhouette(A, Bp, r[:1], K64, (0, 0, 10, 10))
    with pytest.raises(InputError):
        soft_silhouette(A, Bp, r, K64, (0, 0, 0, 10))


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_against_mujoco_segmentation(name):
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot(name)
    W, H, f = 320, 240, 420.0
    mj = MujocoMasks(robot, W, H, f)
    lay = StateLayout.for_robot(robot)
    try:
        ious = {}
        for model_name, model in [("visual", CapsuleModel.from_visual(robot)),
                                  ("capsules", CapsuleModel.capsules(robot))]:
            ren = SilhouetteRenderer(robot, mj.K, W, H, model, SilhouetteSettings(sigma_px=0.3))
            vals = []
            for k in (0, 20):
                q, R0, t0 = serpentine(robot, k)
                truth = mj.mask(q, R0, t0)
                x = torch.as_tensor(lay.pack(q, R0, t0))[None]
                ours = ren.full_image(x)[0].numpy() > 0.5
                vals.append((ours & truth).sum() / (ours | truth).sum())
            ious[model_name] = min(vals)
    finally:
        mj.close()
    assert ious["visual"] >= 0.9
    assert ious["visual"] > ious["capsules"] - 0.01  # the housings model the look better (or as well)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
@pytest.mark.parametrize("housings", ["cylinder", "capsule"])
def test_visual_model_does_not_reach_past_the_robot(name, housings):
    """The model's pixels outside MuJoCo's mask stay under 0.8 % of it (without the insets the
    arcsnake's capsule ends reach past its flat-ended cylinders: 1.2 %), and so do the mask's pixels
    the model misses, except for the planar snake's housings drawn as capsules (2.5 %; as cylinders
    0.09 %, and 0.34 % outside)."""
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot(name)
    W, H, f = 320, 240, 420.0
    mj = MujocoMasks(robot, W, H, f)
    lay = StateLayout.for_robot(robot)
    model = CapsuleModel.from_visual(robot, housings)
    ren = SilhouetteRenderer(robot, mj.K, W, H, model, SilhouetteSettings(sigma_px=0.05))
    outside = missing = inside = 0
    try:
        for k in range(0, 60, 6):
            q, R0, t0 = serpentine(robot, k)
            truth = mj.mask(q, R0, t0)
            ours = ren.full_image(torch.as_tensor(lay.pack(q, R0, t0))[None])[0].numpy() > 0.5
            outside += int((ours & ~truth).sum())
            missing += int((truth & ~ours).sum())
            inside += int(truth.sum())
    finally:
        mj.close()
    assert outside < 0.008 * inside
    if housings == "cylinder" or name == "arcsnake-4":
        assert missing < 0.008 * inside
    else:
        assert missing > 0.02 * inside  # what the cylinders mend


def test_band_and_box_give_the_same_silhouette_and_jacobian():
    """Band pixels against whole screen boxes: differences only in the truncated tails (< sigmoid(−8))."""
    A, Bp, r = _capsules(7, 4)
    G = _point_jac(4, 5, 1)
    s = SilhouetteSettings(sigma_px=0.5)
    roi = (0, 0, 80, 60)
    out = [render_with_jacobian(A, Bp, r, K64, roi, G, s, offset_px=0.3, with_offset=True, tol=1e-8, band=band)
           for band in (True, False)]
    assert (out[0].sil - out[1].sil).abs().max() < 1e-3
    dense = [_dense(rj, 80 * 60) for rj in out]
    assert dense[1].abs().max() > 0.1
    assert (dense[0] - dense[1]).abs().max() < 1e-3 * dense[1].abs().max()


def hard_cylinder_mask(c, w, R, h, K, width, height):
    """Brute force: per pixel ray, does it hit the flat-ended cylinder (centre c, unit axis w, radius R,
    half-length h)? The side (ray–cylinder quadratic, axial coordinate within ±h) or an end disc."""
    d = _pixel_rays(K, width, height)
    hit = np.zeros(len(d), bool)
    for sgn in (-1, 1):  # end discs: the ray meets the end plane within R of the end's centre
        e = c + sgn * h * w
        t = (e @ w) / (d @ w)
        hit |= (t > 0) & (np.linalg.norm(t[:, None] * d - e, axis=1) <= R)
    hit |= _side_hits(d, c, w, R, -h, h)
    return hit.reshape(height, width)


@pytest.mark.parametrize("cos_view", [0.1, 0.3, 0.6, 0.9, 0.99])
def test_cylinder_edge_matches_the_ray_traced_cylinder(cos_view):
    """The renderer's cylinder edge (``cylinders=``) against the brute-force ray–cylinder mask: the
    same silhouette to within a tenth of a pixel along its outline, at any angle to the line of sight."""
    R, h = 0.024, 0.018
    W, H, f = 200, 200, 5000.0
    K = np.array([[f, 0, 99.5], [0, f, 99.5], [0, 0, 1.0]])
    c = np.array([0.04, -0.02, 2.5])
    th = math.acos(cos_view)
    w = np.array([0.0, math.sin(th), -math.cos(th)])
    truth = hard_cylinder_mask(c, w, R, h, K, W, H)
    A = torch.as_tensor(c - h * w)[None, None]
    B = torch.as_tensor(c + h * w)[None, None]
    sil = soft_silhouette(A, B, torch.tensor([R], dtype=torch.float64), torch.as_tensor(K), (0, 0, W, H),
                          SilhouetteSettings(sigma_px=0.01), cylinders=np.array([True]))[0].numpy() > 0.5
    capsule = soft_silhouette(A, B, torch.tensor([R], dtype=torch.float64), torch.as_tensor(K), (0, 0, W, H),
                              SilhouetteSettings(sigma_px=0.01))[0].numpy() > 0.5
    perimeter = 2 * math.pi * R * f / 2.5
    assert truth.sum() > 5000
    assert (sil ^ truth).sum() < 0.25 * perimeter  # 0.11–0.24 px on average (perspective; worst at 0.99)
    if cos_view <= 0.9:  # the capsule's round ends reach past the flat ones
        assert (capsule ^ truth).sum() > (sil ^ truth).sum()
    # seen almost along its axis (0.99) the capsule is closer (37 px against 66): its near end sphere
    # is drawn at its own depth, and the cylinder edge takes both ends at the centre's depth


def test_cylinder_edge_jacobian_and_gradcheck():
    A, Bp, r = _capsules(5, 3)
    cyl = np.array([True, False, True])
    M, D = 3, 4
    G = _point_jac(M, D, 0)
    s = SilhouetteSettings(sigma_px=1.0)
    roi = (0, 0, 80, 60)
    rj = render_with_jacobian(A, Bp, r, K64, roi, G, s, offset_px=0.2, with_offset=True, tol=0.0, cylinders=cyl)

    def f(p):
        a = A + torch.einsum("mjd,d->mj", G[:, 0], p[:D])[None]
        b = Bp + torch.einsum("mjd,d->mj", G[:, 1], p[:D])[None]
        return soft_silhouette(a, b, r, K64, roi, s, p[D:] + 0.2, cylinders=cyl)[0].reshape(-1)

    p0 = torch.zeros(D + 1, dtype=torch.float64)
    h = 1e-6
    Jref = torch.stack([(f(p0 + h * e) - f(p0 - h * e)) / (2 * h) for e in torch.eye(D + 1, dtype=torch.float64)], 1)
    assert torch.allclose(rj.sil, f(p0), atol=1e-12)
    plain = soft_silhouette(A, Bp, r, K64, roi, s, torch.tensor([0.2], dtype=torch.float64))[0].reshape(-1)
    assert (f(p0) - plain).abs().sum() > 10  # the cylinders are drawn differently from capsules
    err = (_dense(rj, Jref.shape[0]) - Jref).abs()
    assert Jref.abs().max() > 0.1
    assert err.max() < 1e-3 * Jref.abs().max()
    assert err.mean() < 1e-7
    A2, B2 = A.clone().requires_grad_(True), Bp.clone().requires_grad_(True)
    g = lambda a, b: soft_silhouette(a, b, r, K64, (20, 12, 24, 18), SilhouetteSettings(sigma_px=1.5),  # noqa: E731
                                     cylinders=cyl)
    assert torch.autograd.gradcheck(g, (A2, B2), eps=1e-6, atol=1e-5, fast_mode=True)


def test_silhouette_and_jacobian_do_not_depend_on_the_primitives_order():
    """Capsules and cylinders in any order give the same silhouette and Jacobian (the renderer sorts them
    by kind internally, edges.kind_order)."""
    A, Bp, r = _capsules(7, 5)
    cyl = np.array([True, False, True, False, False])
    G = _point_jac(5, 4, 1)
    s = SilhouetteSettings(sigma_px=0.7)
    roi = (0, 0, 80, 60)
    ref = render_with_jacobian(A, Bp, r, K64, roi, G, s, offset_px=0.3, with_offset=True, tol=0.0, cylinders=cyl)
    soft = soft_silhouette(A, Bp, r, K64, roi, s, torch.tensor([0.3], dtype=torch.float64), cylinders=cyl)
    for perm in ([4, 3, 2, 1, 0], [1, 3, 4, 0, 2], [0, 2, 1, 3, 4]):
        p = torch.tensor(perm)
        rj = render_with_jacobian(A[:, p], Bp[:, p], r[p], K64, roi, G[p], s, offset_px=0.3, with_offset=True,
                                  tol=0.0, cylinders=cyl[perm])
        assert torch.equal(rj.rows, ref.rows)
        assert torch.allclose(rj.sil, ref.sil, atol=1e-12) and torch.allclose(rj.jac, ref.jac, atol=1e-12)
        soft_p = soft_silhouette(A[:, p], Bp[:, p], r[p], K64, roi, s, torch.tensor([0.3], dtype=torch.float64),
                                 cylinders=cyl[perm])
        assert torch.allclose(soft_p, soft, atol=1e-12)
    assert (ref.sil - soft.reshape(-1)).abs().max() < 1e-12
    # independent of the split by kind: the soft union 1 − Π(1 − s_k) of each primitive rendered alone
    alone = [soft_silhouette(A[:, k:k + 1], Bp[:, k:k + 1], r[k:k + 1], K64, roi, s,
                             torch.tensor([0.3], dtype=torch.float64), cylinders=cyl[k:k + 1]) for k in range(5)]
    union = 1.0 - torch.prod(torch.stack([1.0 - a for a in alone]), 0)
    assert torch.allclose(soft, union, atol=1e-9)
    assert sum(bool(cyl[k]) != bool(cyl[k + 1]) for k in range(4)) >= 2  # the kinds alternate in the input


@pytest.mark.parametrize("offset", [-2.0, 1.5])
def test_mask_with_an_edge_offset_is_the_silhouette_grown_or_shrunk_by_it(offset):
    """``mask(x, b)`` holds (b < 0) or is held by (b > 0) the plain mask, and differs from it in area by b times
    the plain mask's perimeter (OpenCV's contour length)."""
    from mj_scene import serpentine

    robot = load_robot("planar-snake-11")
    W, H = 320, 240
    K = np.array([[420.0, 0, W / 2 - 0.5], [0, 420.0, H / 2 - 0.5], [0, 0, 1]])
    ren = SilhouetteRenderer(robot, K, W, H)
    x = StateLayout.for_robot(robot).pack(*serpentine(robot, 10))
    plain, moved = ren.mask(x), ren.mask(x, offset)
    inner, outer = (moved, plain) if offset < 0 else (plain, moved)
    assert not np.any(inner & ~outer)
    contours, _ = cv2.findContours(plain.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    perimeter = sum(cv2.arcLength(c, True) for c in contours)
    assert (np.count_nonzero(moved) - np.count_nonzero(plain)) / perimeter == pytest.approx(offset, rel=0.1)
