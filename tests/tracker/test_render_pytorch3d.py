"""The PyTorch3D renderer cross-checked: its torch-side backward against PyTorch3D's own, its LM Jacobian against
autograd, and its silhouettes and pose gradients against the own analytic renderer on both shipped robots.

Runs where PyTorch3D imports (``make test-pytorch3d``); skipped elsewhere.
"""
import math

import numpy as np
import pytest
import torch

pytest.importorskip("pytorch3d._C", reason="PyTorch3D is not installed here (make pytorch3d)")

from snaketrack.models.kinematics import forward_kinematics  # noqa: E402
from snaketrack.models.robot import load_robot  # noqa: E402
from snaketrack.models.rotations import axis_angle_to_matrix, axis_angle_to_matrix_np  # noqa: E402
from snaketrack.tracker.render.meshes import capsule_mesh, join_meshes  # noqa: E402
from snaketrack.tracker.render.primitives import CapsuleModel  # noqa: E402
from snaketrack.tracker.render.render_pytorch3d import (  # noqa: E402
    PyTorch3DRenderer,
    contour_edges,
    edge_neighbours,
    list_pairs,
    paper_sigma_px,
    pytorch3d_sigma,
    rasterize,
    reach_px,
)
from snaketrack.tracker.render.silhouette import SilhouetteRenderer, SilhouetteSettings  # noqa: E402
from snaketrack.tracker.state import StateLayout  # noqa: E402

W, H = 640, 360
K = np.array([[520.0, 0, W / 2 - 0.5], [0, 520.0, H / 2 - 0.5], [0, 0, 1]])


def random_pose(robot, rng, depth=1.3):
    """A pose vector (D,) of ``robot``: joints within 70 % of their limits, the body lying on a ground plane
    seen 30–60° from above, turned at random, its centre near the image centre at ``depth`` [m]."""
    q = rng.uniform(0.7 * robot.lower, 0.7 * robot.upper)
    tilt, yaw = rng.uniform(0.5, 1.0), rng.uniform(-math.pi, math.pi)
    # camera looking down at the ground: the ground's normal (the base's z) tilted towards the camera
    R_tilt = axis_angle_to_matrix_np(np.array([-(math.pi / 2 + tilt), 0.0, 0.0]))
    R0 = R_tilt @ axis_angle_to_matrix_np(np.array([0.0, 0.0, yaw]))
    lay = StateLayout.for_robot(robot)
    x = lay.pack(q, R0, np.zeros(3))
    qf, Rf, tf = lay.to_fk(torch.as_tensor(x)[None])
    pose = forward_kinematics(robot, qf, Rf, tf)
    centre = pose.origins[0].mean(0).numpy()
    t0 = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.03, 0.03), depth]) - centre
    return lay.pack(q, R0, t0)


def iou(a, b):
    return float((a & b).sum() / max((a | b).sum(), 1))


def outline_offset(ref, other):
    """Mean signed distance [px] from the outline of the bool mask ``ref`` to that of ``other`` (+: ``other``
    wider): their area difference over ``ref``'s outline length."""
    import cv2

    contours, _ = cv2.findContours(ref.astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
    return float(int(other.sum()) - int(ref.sum())) / sum(cv2.arcLength(c, True) for c in contours)


def test_sigma_conversion_is_the_papers():
    assert pytorch3d_sigma(paper_sigma_px(W, H), W, H) == pytest.approx(1e-4)
    assert paper_sigma_px(W, H) == pytest.approx(1.8)


@pytest.mark.parametrize("tile, sigma, fpp", [(16, 1.0, 100), (7, 3.0, 100), (16, 1.0, 6)])
def test_tiled_pairs_are_one_rasterisation_of_the_whole_mesh(tile, sigma, fpp):
    """The pairs rasterised square by square are those of one PyTorch3D rasterisation of the whole mesh over
    the ROI, with the same distances: each pixel's K nearest faces by depth, the same but for faces at (nearly)
    the K-th depth (two faces meeting at an edge, the many about a capsule's pole), which either float32
    rasterisation may keep."""
    robot = load_robot("arcsnake-4")
    rng = np.random.default_rng(5)
    ren = PyTorch3DRenderer(robot, K, W, H, sections=8, faces_per_pixel=fpp)
    x = torch.as_tensor(np.stack([random_pose(robot, rng, 2.0), random_pose(robot, rng, 2.0)]))
    roi = ren.screen_roi(x, 6.0)
    uvz = ren._uvz(ren.vertices(x), roi)
    reach = reach_px(sigma)
    _, _, w, h = roi
    got = list_pairs(uvz, ren._faces, w, h, reach, fpp, tile=tile)
    p2f, _, dists = rasterize(uvz, ren._faces, w, h, reach, fpp)
    F = len(ren._faces)
    b, v, u, k = torch.nonzero(p2f >= 0, as_tuple=True)
    ref = {(int(bi), int(vi) * w + int(ui), int(fi) - int(bi) * F): float(di) for bi, vi, ui, fi, di in
           zip(b, v, u, p2f[b, v, u, k], dists[b, v, u, k] * (min(w, h) / 2.0) ** 2)}
    mine = {(int(bi), int(pi), int(fi)): float(di) * (-1.0 if ins else 1.0)
            for bi, pi, fi, di, ins in zip(got.b, got.pix, got.face, got.d2, got.inside)}
    assert len(ref) > 10000 and set(b.tolist()) == {0, 1}
    # each pixel lists as many faces; which of those at (nearly) the K-th depth are kept may differ
    pix_mine, n_mine = np.unique([k[:2] for k in mine], axis=0, return_counts=True)
    pix_ref, n_ref = np.unique([k[:2] for k in ref], axis=0, return_counts=True)
    assert np.array_equal(pix_mine, pix_ref) and np.array_equal(n_mine, n_ref)
    same = mine.keys() & ref.keys()
    assert len(ref) - len(same) < 1e-3 * len(ref)
    d_ref = np.array([ref[key] for key in same])
    d_mine = np.array([mine[key] for key in same])
    assert np.abs(d_mine - d_ref).max() < 1e-3 * max(1.0, reach ** 2)


def _one_capsule(sections=8, blend="outline"):
    robot = load_robot("arcsnake-4")
    m = capsule_mesh((-0.03, 0.005, 0.6), (0.03, -0.004, 0.62), 0.012, sections)
    Kc = np.array([[300.0, 0, 23.5], [0, 300.0, 15.5], [0, 0, 1]])
    ren = PyTorch3DRenderer(robot, Kc, 48, 32, meshes=join_meshes([0], [m]), faces_per_pixel=20, blend=blend)
    return ren, torch.as_tensor(np.asarray(m.vertices))[None]


@pytest.mark.parametrize("sigma", [1.0, 0.5])
def test_torch_backward_matches_pytorch3d_backward(sigma):
    """PyTorch3D's shader rasterised without gradients and recomputed in torch: PyTorch3D's own silhouette and
    gradient (its float32 rasteriser against float64 recomputation)."""
    ren, v = _one_capsule(blend="shader")
    s = SilhouetteSettings(sigma_px=sigma)
    target = torch.rand(1, 32, 48, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = {}
    for mode in ("torch", "pytorch3d"):
        vv = v.clone().requires_grad_(True)
        sil = ren.silhouette(vv, (0, 0, 48, 32), s, backward=mode)
        ((sil - target) ** 2).sum().backward()
        out[mode] = (sil.detach(), vv.grad)
    assert out["torch"][0].sum() > 100  # the capsule is in view
    assert torch.allclose(out["torch"][0], out["pytorch3d"][0], atol=2e-4)
    g1, g2 = out["torch"][1], out["pytorch3d"][1]
    assert float((g1 - g2).norm() / g2.norm()) < 1e-4


def _theta_silhouette(ren, q, R_ref, t, roi, s, offset):
    """The silhouette (P,) as a function of θ = [q, δ, t] with the base rotation exp(δ) R_ref (autograd)."""
    J = q.shape[0]

    def f(theta):
        R0 = axis_angle_to_matrix(theta[J:J + 3]) @ R_ref
        pose = forward_kinematics(ren.robot, theta[None, :J], R0[None], theta[None, J + 3:])
        verts = ren.link_vertices(pose, ren.grow_px(s, offset or 0.0))
        return ren.silhouette(verts, roi, s, backward="torch", offset_px=offset).reshape(-1)

    return f


@pytest.mark.parametrize("name, offset, blend", [("arcsnake-4", None, "outline"), ("arcsnake-4", 1.2, "outline"),
                                                 ("arcsnake-4", -0.8, "outline"), ("planar-snake-11", -0.8, "outline"),
                                                 ("arcsnake-4", 1.2, "shader"), ("planar-snake-11", -0.8, "shader")])
def test_pose_jacobian_matches_autograd(name, offset, blend):
    """The closed-form Jacobian against autograd through the torch-side silhouette, with each blend: the
    arcsnake's capsules, the planar snake's visual model (its flat-ended cylinders grown along their axes too)."""
    robot = load_robot(name)
    rng = np.random.default_rng(3)
    x = random_pose(robot, rng)
    model = CapsuleModel.capsules(robot) if name == "arcsnake-4" else CapsuleModel.from_visual(robot)
    ren = PyTorch3DRenderer(robot, K * np.array([[0.25], [0.25], [1.0]]), W // 4, H // 4, model, sections=12,
                            faces_per_pixel=30, blend=blend)
    lay = ren.layout
    q, R0, t0 = (torch.as_tensor(a) for a in lay.unpack(x))
    J = q.shape[0]
    s = SilhouetteSettings(sigma_px=1.5)
    roi = ren.screen_roi(torch.as_tensor(x)[None], 8.0)
    rj = ren.pose_jacobian(q, R0, t0, roi, s, offset_px=offset or 0.0, with_offset=offset is not None, tol=0.0)
    f = _theta_silhouette(ren, q, R0, t0, roi, s, offset)
    theta = torch.cat([q, torch.zeros(3, dtype=torch.float64), t0])
    assert torch.allclose(rj.sil, f(theta).detach(), atol=1e-9)
    dense = torch.zeros(rj.sil.shape[0], rj.jac.shape[1], dtype=torch.float64)
    dense[rj.rows] = rj.jac
    g = torch.Generator().manual_seed(0)
    for _ in range(3):  # Jᵀu for random pixel weights u, against autograd's gradient of u·o(θ)
        u = torch.randn(rj.sil.shape[0], generator=g, dtype=torch.float64)
        th = theta.clone().requires_grad_(True)
        (u @ f(th)).backward()
        ours = u @ dense[:, :J + 6]
        assert float((ours - th.grad).norm() / th.grad.norm()) < 1e-6
    if offset is not None:  # the edge offset's column against autograd through the torch-side silhouette
        u = torch.randn(rj.sil.shape[0], generator=g, dtype=torch.float64)
        bt = torch.tensor([offset], dtype=torch.float64, requires_grad=True)
        (u @ ren(torch.as_tensor(x)[None], roi, s, bt)[0].reshape(-1)).backward()
        assert float(u @ dense[:, -1]) == pytest.approx(float(bt.grad), rel=1e-9)


def test_pose_jacobian_on_a_coarser_grid_is_the_renderers_at_its_intrinsics():
    """The refiner's grid of 2 × 2 pixel blocks (its intrinsics given to ``pose_jacobian``): the silhouette and
    Jacobian of a renderer built with those intrinsics, with either blend."""
    from snaketrack.tracker.fit.observation import Observation
    from snaketrack.tracker.fit.refine import GridLevel

    robot = load_robot("arcsnake-4")
    model = CapsuleModel.capsules(robot)
    Ks = K * np.array([[0.25], [0.25], [1.0]])
    x = random_pose(robot, np.random.default_rng(3))
    q, R0, t0 = (torch.as_tensor(a) for a in StateLayout.for_robot(robot).unpack(x))
    mask = torch.zeros(H // 4, W // 4, dtype=torch.float64)
    grid = GridLevel.of(2, torch.as_tensor(Ks), (W // 4, H // 4), Observation(mask, 0.0, torch.ones_like(mask), None))
    s = SilhouetteSettings(sigma_px=1.0)
    for blend in ("outline", "shader"):
        ren = PyTorch3DRenderer(robot, Ks, W // 4, H // 4, model, sections=12, faces_per_pixel=30, blend=blend)
        coarse = PyTorch3DRenderer(robot, grid.K.numpy(), *grid.size, model, sections=12, faces_per_pixel=30,
                                   meshes=ren.meshes, blend=blend)
        roi = coarse.screen_roi(torch.as_tensor(x)[None], 6.0)
        a = ren.pose_jacobian(q, R0, t0, roi, s, offset_px=0.4, with_offset=True, tol=0.0, K=grid.K)
        b = coarse.pose_jacobian(q, R0, t0, roi, s, offset_px=0.4, with_offset=True, tol=0.0)
        assert a.sil.sum() > 20
        assert torch.allclose(a.sil, b.sil) and torch.equal(a.rows, b.rows) and torch.allclose(a.jac, b.jac)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_silhouettes_agree_with_the_own_renderer(name):
    """Same pose, capsule model, sharp edges, 640×360: hard silhouettes of IoU ≥ 0.99 on random poses."""
    robot = load_robot(name)
    model = CapsuleModel.capsules(robot)
    s = SilhouetteSettings(sigma_px=0.05)
    own = SilhouetteRenderer(robot, K, W, H, model, s)
    p3d = PyTorch3DRenderer(robot, K, W, H, model, s)
    rng = np.random.default_rng(11)
    for _ in range(2):
        x = torch.as_tensor(random_pose(robot, rng))[None]
        roi = own.screen_roi(x, 4.0)
        a = own(x, roi)[0][0].numpy() > 0.5
        b = p3d(x, roi)[0][0].numpy() > 0.5
        assert a.sum() > 2000  # the robot fills a fair part of the frame
        assert iou(a, b) >= 0.99


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_soft_silhouettes_are_the_own_renderers(name):
    """The outline blend at the tracker's edge softnesses σ (2, 1 and 0.5 px) is the own renderer's soft
    silhouette up to the tessellation: every pixel within 0.05 of it, the 0.5 levels' mean offset below 0.05 σ.
    PyTorch3D's shader, its meshes shrunk by ``outline_sigmas`` σ, puts its 0.5 level within 0.2 σ of the own
    renderer's at σ = 1 and 0.5 px (1.2–1.3 σ outside it with ``outline_sigmas=0``)."""
    robot = load_robot(name)
    model = CapsuleModel.capsules(robot)
    own = SilhouetteRenderer(robot, K, W, H, model)
    p3d = PyTorch3DRenderer(robot, K, W, H, model)
    shader = PyTorch3DRenderer(robot, K, W, H, model, meshes=p3d.meshes, blend="shader")
    x = torch.as_tensor(random_pose(robot, np.random.default_rng(4)))[None]
    roi = own.screen_roi(x, 8.0)
    for sigma in (2.0, 1.0, 0.5):
        s = SilhouetteSettings(sigma_px=sigma)
        a = own(x, roi, s)[0][0].numpy()
        b = p3d(x, roi, s)[0][0].numpy()
        assert (a > 0.5).sum() > 2000
        assert np.abs(a - b).max() < 0.05
        assert abs(outline_offset(a > 0.5, b > 0.5)) < 0.05 * sigma
        if sigma < 2.0:
            c = shader(x, roi, s)[0][0].numpy() > 0.5
            assert abs(outline_offset(a > 0.5, c)) < 0.2 * sigma


def test_a_negative_edge_offset_shrinks_the_meshes_as_the_own_capsules():
    """An edge offset of −1.5 px (a mask eroded beyond the body's outline) draws the body thinner by about as
    much as the own renderer's, with no gaps along the faces' edges (mean outline offset below 0.2 px)."""
    robot = load_robot("planar-snake-11")
    model = CapsuleModel.capsules(robot)
    s = SilhouetteSettings(sigma_px=0.05)
    own = SilhouetteRenderer(robot, K, W, H, model, s)
    p3d = PyTorch3DRenderer(robot, K, W, H, model, s)
    x = torch.as_tensor(random_pose(robot, np.random.default_rng(8)))[None]
    roi = own.screen_roi(x, 4.0)
    b = torch.tensor([-1.5], dtype=torch.float64)
    a0 = own(x, roi)[0][0].numpy() > 0.5
    a = own(x, roi, offset_px=b)[0][0].numpy() > 0.5
    m = p3d(x, roi, offset_px=b)[0][0].numpy() > 0.5
    assert outline_offset(a0, a) < -1.2  # the own capsules do shrink
    assert abs(outline_offset(a, m)) < 0.2 and iou(a, m) > 0.97


@pytest.mark.parametrize("name, blend", [("planar-snake-11", "outline"), ("arcsnake-4", "outline"),
                                         ("planar-snake-11", "shader"), ("arcsnake-4", "shader")])
def test_pose_gradients_point_the_same_way(name, blend):
    """The gradient of Σ(o − m)² with respect to the pose vector, m the own renderer's mask at a nearby pose,
    each backend through its autograd at the tracker's final edge softness (0.5 px), on three random poses:
    with the outline blend, cosine ≥ 0.99 on each (above 0.9999 here); with PyTorch3D's shader, whose profile
    differs, ≥ 0.9 on each and ≥ 0.97 on average (0.94–1.0 here)."""
    robot = load_robot(name)
    model = CapsuleModel.capsules(robot)
    s = SilhouetteSettings(sigma_px=0.5)
    own = SilhouetteRenderer(robot, K, W, H, model, s)
    p3d = PyTorch3DRenderer(robot, K, W, H, model, s, blend=blend)
    rng = np.random.default_rng(5)
    cosines = []
    for _ in range(3):
        x0 = random_pose(robot, rng)
        step = np.zeros_like(x0)
        step[:-6] = rng.normal(0, 0.05, len(x0) - 6)
        step[-3:] = [0.01, -0.006, 0.02]
        xt = torch.as_tensor(x0)[None]
        roi = own.screen_roi(torch.cat([xt, xt + torch.as_tensor(step)]), 12.0)
        m = (own(xt + torch.as_tensor(step), roi)[0] > 0.5).double()
        grads = []
        for ren in (own, p3d):
            x = xt.clone().requires_grad_(True)
            ((ren(x, roi)[0] - m) ** 2).sum().backward()
            grads.append(x.grad[0])
        cosines.append(float(grads[0] @ grads[1] / (grads[0].norm() * grads[1].norm())))
    if blend == "outline":
        assert min(cosines) >= 0.99
    else:
        assert min(cosines) >= 0.9 and np.mean(cosines) >= 0.97


def test_contour_edges_are_a_spheres_outline():
    """A tessellated sphere on the optical axis: every edge of the closed mesh has a face across it (each face
    across the other), and the end points of its contour edges lie on the sphere's image, the circle of radius
    f r / √(z² − r²), within the tessellation's tolerance (its latitude rings 11° apart: 0.5 %)."""
    z, r, f = 0.5, 0.05, 500.0
    m = capsule_mesh((0.0, 0.0, z), (0.0, 0.0, z), r, 32)
    meshes = join_meshes([0], [m])
    nb = edge_neighbours(meshes.verts, meshes.faces, meshes.parts)
    assert (nb >= 0).all()
    assert all(fi in nb[nb[fi, i]] for fi in range(len(nb)) for i in range(3))
    faces = torch.as_tensor(meshes.faces)
    X = torch.as_tensor(meshes.verts)
    uv = f * X[:, :2] / X[:, 2:3]
    flag = contour_edges(uv[None], faces, torch.as_tensor(nb))[0]
    ends = torch.unique(torch.cat([faces[flag], faces[:, [1, 2, 0]][flag]]))
    rm = float(np.linalg.norm(np.asarray(m.vertices) - [0.0, 0.0, z], axis=1).max())  # the tessellated radius
    rho = uv[ends].norm(dim=1) / (f * rm / math.sqrt(z ** 2 - rm ** 2))
    assert len(ends) >= 32
    assert float((rho - 1.0).abs().max()) < 0.01


def test_a_mesh_file_link_renders_as_its_capsule(tmp_path):
    """A robot whose links are drawn from an STL of a tessellated capsule: the mesh renderer's silhouette is the
    own renderer's of the capsule (IoU ≥ 0.99)."""
    L, r = 0.15, 0.026
    capsule_mesh((0.0, 0.0, 0.0), (L, 0.0, 0.0), r, 32).export(tmp_path / "link.stl")
    (tmp_path / "snake.yaml").write_text(
        f"name: meshsnake\nlinks: {{count: 4, length: {L}, radius: {r}}}\n"
        "joints: {count: 3, axes: [z, y], limits: [[-0.8, 0.8], [-0.6, 0.6]]}\nvisual: {mesh: link.stl}\n")
    robot = load_robot(tmp_path / "snake.yaml")
    s = SilhouetteSettings(sigma_px=0.05)
    own = SilhouetteRenderer(robot, K, W, H, CapsuleModel.capsules(robot), s)
    p3d = PyTorch3DRenderer(robot, K, W, H, CapsuleModel.capsules(robot), s)
    assert len(p3d.meshes.parts) == 4  # one per link, from the file
    x = torch.as_tensor(random_pose(robot, np.random.default_rng(2)))[None]
    roi = own.screen_roi(x, 4.0)
    a = own(x, roi)[0][0].numpy() > 0.5
    b = p3d(x, roi)[0][0].numpy() > 0.5
    assert a.sum() > 2000
    assert iou(a, b) >= 0.99


def test_refiner_fits_the_mask_with_the_pytorch3d_renderer():
    """The tracker's LM refinement through the renderer's Jacobian, from a perturbed pose, against the own
    renderer's mask (a second renderer as the truth): the fitted pose's true silhouette overlaps the mask far
    better than the start's."""
    from snaketrack.tracker.config import RefineConfig
    from snaketrack.tracker.fit.observation import observe
    from snaketrack.tracker.fit.refine import Refiner

    robot = load_robot("arcsnake-4")
    model = CapsuleModel.capsules(robot)
    W2, H2 = 320, 180
    K2 = K * np.array([[0.5], [0.5], [1.0]])
    own = SilhouetteRenderer(robot, K2, W2, H2, model)
    p3d = PyTorch3DRenderer(robot, K2, W2, H2, model, faces_per_pixel=30, sections=16)
    rng = np.random.default_rng(7)
    x_true = random_pose(robot, rng)
    mask = own.mask(x_true)
    x0 = x_true.copy()
    x0[-3:] += [0.008, -0.006, 0.02]
    x0[:-6] += rng.normal(0, 0.04, len(x0) - 6)
    cfg = RefineConfig(steps=8)
    res = Refiner(p3d, cfg).refine(x0, observe(mask, cfg))
    before, after = iou(own.mask(x0), mask), iou(own.mask(res.x), mask)
    assert before < 0.8
    assert after > 0.85


def test_tracker_searches_with_the_own_renderer_and_fits_with_pytorch3d():
    """With the PyTorch3D renderer the first frame's search ranks and refines its starts with the own renderer
    and closes with PyTorch3D's: on a MuJoCo-rendered mask the pose comes out as the own tracker's does."""
    from snaketrack.tracker.config import TrackerConfig
    from snaketrack.tracker.tracker import Tracker

    from mj_scene import MujocoMasks, serpentine

    robot = load_robot("planar-snake-11")
    w, h = 320, 240
    mj = MujocoMasks(robot, w, h, 420.0)
    q, R0, t0 = serpentine(robot, 0)
    mask = mj.mask(q, R0, t0)
    mj.close()
    trk = Tracker(robot, mj.K, w, h, config=TrackerConfig(renderer="pytorch3d", init_candidates=2))
    assert type(trk.search.renderer) is SilhouetteRenderer
    assert isinstance(trk.search.final_refiner.renderer, PyTorch3DRenderer)
    st = trk.start(mask)
    # a silhouette cannot always tell head from tail: either reading of the chain
    qe = min(np.abs(st.q - q).mean(), np.abs(-st.q[::-1] - q).mean())
    assert st.status == "tracked" and st.iou > 0.75 and qe < 0.06
