"""The robot's soft silhouette drawn from triangle meshes rasterised by PyTorch3D (the tracking paper's renderer).

The robot's visual geometry is a set of meshes fixed to its link frames (:mod:`snaketrack.tracker.render.meshes`:
its capsules, spheres and cylinders tessellated, or a mesh file per link), one closed mesh per part. PyTorch3D's
mesh rasteriser (``rasterize_meshes``, its compiled ``_C``) lists for every pixel the ``faces_per_pixel``
nearest faces (by depth) within a blur radius. Two blends turn those lists into a soft silhouette:

- ``blend="outline"`` (the default) draws the own renderer's edge
  (:mod:`snaketrack.tracker.render.silhouette`) on each part's outline: per pixel and part the signed distance
  ``e`` [px] from the pixel centre to the part's outline (+ inside), ``c = sigmoid(e / σ_px)``, and the soft
  union ``o = 1 − Π_parts (1 − c)``. The outline is the part's contour edges (:func:`contour_edges`: between a
  face turned towards the camera and one turned away); two rasterisations give ``e``
  (:meth:`PyTorch3DRenderer.outline_pairs`): every face without blur, for which parts cover each pixel centre,
  and the faces with a contour edge listed up to ``margin_sigmas`` σ_px past their edges, whose nearest
  contour edge (inside) or nearest edge (outside) is the outline's nearest point. On a part that is convex
  (the tessellated primitives) this is the own renderer's silhouette of the tessellated shape.
- ``blend="shader"``: PyTorch3D's ``SoftSilhouetteShader``,

      p_k = sigmoid(−d_k / σ),   o = 1 − Π_k (1 − p_k),

  with ``d_k`` the squared 2-D distance from the pixel centre to face k's nearest edge in normalised device
  coordinates (NDC, the shorter image side spanning 2), negative inside the face. The paper names this shader
  and gives no figures; its setting is PyTorch3D's documented silhouette setting: σ = 1e-4, γ = 1e-4 (γ weighs
  depth in RGB blending only; the silhouette does not use it), 100 faces per pixel and a blur radius of
  ``ln(1/ε − 1) σ`` with ε = 1e-4 (the distance past which ``p_k`` < ε). Here σ is set in pixels like the own
  renderer's (:class:`~snaketrack.tracker.render.silhouette.SilhouetteSettings` ``sigma_px``):
  ``p_k = sigmoid(∓ δ_k² / σ_px²)`` with ``δ_k`` the distance [px], the same as PyTorch3D's σ =
  ``(2 σ_px / S)²`` on an image whose shorter side is S px (:func:`pytorch3d_sigma`); the paper's σ = 1e-4 on
  a 640×360 image is ``σ_px`` = 1.8 (:func:`paper_sigma_px`). Where a closed mesh's outline runs, the faces on
  both sides of it (front and back, and the thin faces seen edge-on next to it) are all listed for the pixels
  beside it, so the blend's 0.5 level lies outside the outline, about :data:`OUTLINE_SIGMAS` σ_px on the
  robots' tessellated primitives; with this blend the meshes are drawn shrunk by ``c σ_px`` (``c`` =
  ``outline_sigmas``, default :data:`OUTLINE_SIGMAS`; 0: the shader as it comes).

The silhouette over a region of interest (ROI) is rasterised on the ROI alone, with the same per-pixel values as
the whole image's. The meshes are drawn grown by ``b − c σ_px`` [px] (``c`` = 0 with the outline blend): every
vertex moved along its growth direction (:mod:`snaketrack.tracker.render.meshes`) by ``(b − c σ_px) z / f`` [m]
(z its depth, f the focal length [px]; a cylinder's end discs also along its axis, by a weight set by the view:
:func:`axial_weight`), which moves the outline by about that many pixels. ``b`` is the refinement's edge offset
[px] (+ grows, − shrinks), as the own renderer's. It grows the geometry rather than shifting each face's
distance, which would open gaps along every edge between faces when it shrinks.

Gradients with respect to the pose:

- with the shader on CUDA, through PyTorch3D's own rasteriser backward (``backward="pytorch3d"``, the default
  there);
- otherwise the faces are rasterised in ``_C`` without gradients and the distances and the blend are
  recomputed in torch from the same faces (``backward="torch"``; with the shader, the same values and gradients
  as PyTorch3D's backward, tested against it; on the CPU PyTorch3D's backward runs one element at a time on one
  thread, about 30 s for a 2k-face mesh at 640×360);
- :meth:`PyTorch3DRenderer.pose_jacobian`: the silhouette's Jacobian with respect to the pose in closed
  form per (pixel, edge) pair, for the tracker's Levenberg–Marquardt refinement (:mod:`snaketrack.tracker.fit.refine`).

Needs PyTorch3D (``make pytorch3d``: docs/renderer.md). Units: metres in the camera frame (OpenCV: x right,
y down, z forward), pixels in the image.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from snaketrack.errors import InputError
from snaketrack.models.chain import point_jacobian
from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.robot import Robot
from snaketrack.tracker.render.bands import check_roi
from snaketrack.tracker.render.meshes import SECTIONS, LinkMeshes, robot_meshes
from snaketrack.tracker.render.primitives import CapsuleModel
from snaketrack.tracker.render.silhouette import RenderJacobian, SilhouetteRenderer, SilhouetteSettings

PAPER_SIGMA = 1e-4
PAPER_GAMMA = 1e-4
PAPER_FACES_PER_PIXEL = 100
BLUR_EPS = 1e-4
# where the blend's 0.5 level lies outside a tessellated primitive's outline [σ_px]: the mean outline offset
# against the own renderer at the true poses of the benchmark clips (docs/renderer.md, "Measured")
OUTLINE_SIGMAS = 1.2
# the side [px] of the squares the CPU rasterisation is cut into (list_pairs)
TILE_PX = 16
# the blends: "outline", the own renderer's edge on each part's outline; "shader", PyTorch3D's SoftSilhouetteShader
BLENDS = ("outline", "shader")
# faces listed per pixel centre for the parts that cover it (a closed part covers it by two faces, or a few
# where faces meet at it)
COVER_FACES = 16
# log(1 − c) of a part over a pixel deep inside it (no outline within reach): coverage 1
DEEP_LOG = -1e4
# the edge of a face: the three (start, end) corners of its edges
_EDGES = ((0, 1), (1, 2), (2, 0))


def pytorch3d_sigma(sigma_px: float, width: int, height: int) -> float:
    """PyTorch3D's σ (squared NDC) of an edge softness ``sigma_px`` [px] on a ``width`` × ``height`` image."""
    return (2.0 * sigma_px / min(width, height)) ** 2


def paper_sigma_px(width: int, height: int) -> float:
    """The edge softness [px] of PyTorch3D's σ = 1e-4 on a ``width`` × ``height`` image (1.8 px at 640×360)."""
    return math.sqrt(PAPER_SIGMA) * min(width, height) / 2.0


def reach_px(sigma_px: float) -> float:
    """How far past a face's edge it is listed for a pixel [px]: where its coverage falls below ε = 1e-4."""
    return math.sqrt(math.log(1.0 / BLUR_EPS - 1.0)) * sigma_px


def axial_weight(axial: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """The weight w = tan(α/2) (...) of the axial directions ``axial`` (..., 3) seen along the lines of sight
    ``X`` (..., 3) (the vertices in the camera frame), α the angle between them; 0 where there is no axial
    direction (:mod:`snaketrack.tracker.render.meshes`). Without gradient: its change with the pose moves the
    vertices by δ × that change, left out of the derivatives."""
    with torch.no_grad():
        na, nx = axial.norm(dim=-1), X.norm(dim=-1)
        c = ((axial * X).sum(-1).abs() / (na * nx).clamp_min(1e-30)).clamp(0.0, 1.0)
        return torch.sqrt((1.0 - c) / (1.0 + c)) * (na > 0)


def _to_ndc(uvz: torch.Tensor, w: int, h: int) -> torch.Tensor:
    """ROI pixel coordinates and depth (..., 3) → PyTorch3D's NDC (+x left, +y up; pixel centres at
    ``(S − 1 − 2j) / S``-style positions on a ``w`` × ``h`` image, S the shorter side) and depth."""
    S = float(min(w, h))
    return torch.stack([-(2.0 * uvz[..., 0] - (w - 1)) / S, -(2.0 * uvz[..., 1] - (h - 1)) / S, uvz[..., 2]], -1)


def rasterize(uvz: torch.Tensor, faces: torch.Tensor, w: int, h: int, reach: float, faces_per_pixel: int):
    """PyTorch3D's rasteriser on B meshes: ``uvz`` (B, V, 3) vertex pixel coordinates in a ``w`` × ``h`` image
    and depths [px, px, m], ``faces`` (F, 3); faces listed up to ``reach`` [px] past their edges.

    Returns ``pix_to_face`` (B, h, w, K) (packed face index, −1: none), ``zbuf`` (B, h, w, K) [m] and ``dists``
    (B, h, w, K) (signed squared NDC distance, negative inside), with gradients when ``uvz`` has them
    (PyTorch3D's backward).
    """
    # deferred: optional, the pytorch3d extra
    from pytorch3d.renderer.mesh.rasterize_meshes import rasterize_meshes
    from pytorch3d.structures import Meshes

    Bn = uvz.shape[0]
    ndc = _to_ndc(uvz.float(), w, h)
    meshes = Meshes(verts=list(ndc), faces=[faces.to(uvz.device)] * Bn)
    blur = (2.0 * reach / min(w, h)) ** 2
    p2f, zbuf, _, dists = rasterize_meshes(meshes, image_size=(h, w), blur_radius=blur,
                                           faces_per_pixel=int(faces_per_pixel),
                                           bin_size=0 if not uvz.is_cuda else None, perspective_correct=False)
    return p2f, zbuf, dists


@dataclass
class Pairs:
    """The (pixel, face) pairs the rasteriser lists over a ROI, each pixel's nearest ``faces_per_pixel`` faces
    by depth: batch index b, ROI pixel (row-major) pix, face index, ``inside`` (the pixel centre inside the
    face) and PyTorch3D's squared distance d2 [px²] (its backward's gradients when asked for). Shapes (Q,)."""

    b: torch.Tensor
    pix: torch.Tensor
    face: torch.Tensor
    inside: torch.Tensor
    d2: torch.Tensor


def list_pairs(uvz: torch.Tensor, faces: torch.Tensor, w: int, h: int, reach: float, faces_per_pixel: int,
               tile: int = TILE_PX) -> Pairs:
    """The rasteriser's (pixel, face) pairs of B meshes over a ``w`` × ``h`` ROI (``uvz`` (B, V, 3) ROI pixel
    coordinates and depths, ``faces`` (F, 3)): each pixel's ``faces_per_pixel`` nearest faces by depth among
    those within ``reach`` [px] of it.

    PyTorch3D's CPU rasteriser tests every face at every pixel (its binning runs on CUDA only), so the ROI is
    cut into ``tile`` × ``tile`` squares and each square rasterised with the faces whose screen box, widened by
    ``reach``, meets it: all squares of all B meshes as one batch of PyTorch3D meshes, one call. Every face that
    can be listed for a pixel is in its square's list, so the pairs are those of one rasterisation of the whole
    mesh over the ROI (:func:`rasterize`).
    """
    from pytorch3d.renderer.mesh.rasterize_meshes import rasterize_meshes
    from pytorch3d.structures import Meshes

    dev, T = uvz.device, int(tile)
    nx, ny = -(-w // T), -(-h // T)
    tri = uvz[:, faces]  # (B, F, 3, 3): ROI pixel coordinates and depth of each face's corners
    with torch.no_grad():
        td = tri.detach()
        lo = td[..., :2].min(2).values - (reach + 1.0)
        hi = td[..., :2].max(2).values + (reach + 1.0)
        seen = (td[..., 2] > 1e-9).any(2) & (hi[..., 0] >= 0) & (lo[..., 0] <= w - 1) & \
            (hi[..., 1] >= 0) & (lo[..., 1] <= h - 1)
        b, f = torch.nonzero(seen, as_tuple=True)
        if b.numel() == 0:
            e = torch.zeros(0, dtype=torch.long, device=dev)
            return Pairs(e, e, e, torch.zeros(0, dtype=torch.bool, device=dev), torch.zeros(0, dtype=uvz.dtype,
                                                                                              device=dev))
        t0 = (lo[b, f] / T).floor().long()
        t1 = (hi[b, f] / T).floor().long()
        tx0, ty0 = t0[:, 0].clamp(0, nx - 1), t0[:, 1].clamp(0, ny - 1)
        cx = t1[:, 0].clamp(0, nx - 1) - tx0 + 1
        cy = t1[:, 1].clamp(0, ny - 1) - ty0 + 1
        n = cx * cy  # squares each face meets
        src = torch.repeat_interleave(torch.arange(len(b), device=dev), n)
        k = torch.arange(len(src), device=dev) - torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
        sq = (b[src] * ny + ty0[src] + k // cx[src]) * nx + tx0[src] + k % cx[src]
        order = torch.argsort(sq, stable=True)
        sq, src = sq[order], src[order]
        mesh_sq, counts = torch.unique_consecutive(sq, return_counts=True)
        N, Fmax = len(mesh_sq), int(counts.max())
        mesh = torch.repeat_interleave(torch.arange(N, device=dev), counts)
        slot = torch.arange(len(sq), device=dev) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        ox = ((mesh_sq % nx) * T).to(uvz.dtype)
        oy = (((mesh_sq // nx) % ny) * T).to(uvz.dtype)
        fb, ff = b[src], f[src]  # each listed face's batch index and face, in the batch's packed face order
        corner = 3 * slot[:, None] + torch.arange(3, device=dev)
        fpad = torch.full((N, Fmax, 3), -1, dtype=torch.int64, device=dev)
        fpad[mesh, slot] = corner
    shift = torch.stack([ox, oy, torch.zeros_like(ox)], 1)[mesh]  # (S, 3)
    verts = torch.zeros(N, 3 * Fmax, 3, dtype=uvz.dtype, device=dev).index_put(
        (mesh[:, None].expand(-1, 3), corner), tri[fb, ff] - shift[:, None])  # each face's own three corners
    blur = (2.0 * reach / T) ** 2
    p2f, _, _, dists = rasterize_meshes(Meshes(verts=_to_ndc(verts.float(), T, T), faces=fpad), image_size=(T, T),
                                        blur_radius=blur, faces_per_pixel=int(faces_per_pixel),
                                        bin_size=0 if not uvz.is_cuda else None, perspective_correct=False)
    flat = p2f.reshape(-1)
    sel = torch.nonzero(flat >= 0).squeeze(1)
    cell = sel // p2f.shape[-1]
    m, yx = cell // (T * T), cell % (T * T)
    with torch.no_grad():
        u = (mesh_sq[m] % nx) * T + yx % T
        v = ((mesh_sq[m] // nx) % ny) * T + yx // T
        inroi = (u < w) & (v < h)
    sel, u, v = sel[inroi], u[inroi], v[inroi]
    packed = flat.index_select(0, sel)
    dn = dists.reshape(-1).index_select(0, sel)
    return Pairs(fb.index_select(0, packed), v * w + u, ff.index_select(0, packed), dn < 0,
                 (dn.abs() * (T / 2.0) ** 2).to(uvz.dtype))


def _nearest_edge(p: torch.Tensor, tri: torch.Tensor):
    """The nearest edge of each triangle ``tri`` (Q, 3, 2) to the point ``p`` (Q, 2) [px]: its index (Q,)
    in :data:`_EDGES`."""
    with torch.no_grad():
        d2 = []
        for i, j in _EDGES:
            a, b = tri[:, i], tri[:, j]
            ab = b - a
            t = (((p - a) * ab).sum(1) / (ab * ab).sum(1).clamp_min(1e-20)).clamp(0.0, 1.0)
            q = a + t[:, None] * ab
            d2.append(((p - q) ** 2).sum(1))
        return torch.stack(d2, 1).argmin(1)


def _edge_distance(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
    """Squared distance (Q,) [px²] from ``p`` (Q, 2) to the segments a→b (Q, 2), the segment parameter t (Q,)
    and ``p − q`` (Q, 2), q the nearest point (differentiable in a and b)."""
    ab = b - a
    t = (((p - a) * ab).sum(1) / (ab * ab).sum(1).clamp_min(1e-20)).clamp(0.0, 1.0)
    diff = p - (a + t[:, None] * ab)
    return (diff * diff).sum(1), t, diff


def _coverage_logit(d2: torch.Tensor, inside: torch.Tensor, sigma_px: float):
    """``z`` with coverage ``sigmoid(z)``: ±d²/σ² (+ inside)."""
    return torch.where(inside, d2, -d2) / sigma_px ** 2


def edge_neighbours(verts: np.ndarray, faces: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """The face across each edge of each face (F, 3) (edge i of face f runs from corner i to corner i + 1,
    :data:`_EDGES`), −1 where no other face of its part has that edge (an open boundary). Vertices at the same
    position within a part count as one (meshes whose faces do not share their corners)."""
    F = len(faces)
    nb = np.full((F, 3), -1, np.int64)
    for v0, v1, f0, f1 in parts:
        _, inv = np.unique(np.round(verts[v0:v1] / 1e-9).astype(np.int64), axis=0, return_inverse=True)
        fm = inv.reshape(-1)[faces[f0:f1] - v0]  # (n, 3) merged vertex ids
        a = np.concatenate([fm[:, i] for i, _ in _EDGES])
        b = np.concatenate([fm[:, j] for _, j in _EDGES])
        fid = np.tile(np.arange(f0, f1), 3)
        eid = np.repeat(np.arange(3), f1 - f0)
        key = np.minimum(a, b) * (len(verts) + 1) + np.maximum(a, b)
        order = np.argsort(key, kind="stable")
        ks = key[order]
        same = np.nonzero(ks[1:] == ks[:-1])[0]  # consecutive pairs sharing an edge
        fa, fb = fid[order][same], fid[order][same + 1]
        ea, eb = eid[order][same], eid[order][same + 1]
        nb[fa, ea] = fb
        nb[fb, eb] = fa
    return nb


def contour_edges(uv: torch.Tensor, faces: torch.Tensor, neighbours: torch.Tensor) -> torch.Tensor:
    """Which edges (B, F, 3) of the faces of meshes whose vertices lie at image points ``uv`` (B, V, 2) are on
    their contour: the edges between a face turned towards the camera and one turned away (the signs of their
    image areas differ) and the open boundaries. A convex part's contour edges are its outline."""
    tri = uv[:, faces]  # (B, F, 3, 2)
    e1, e2 = tri[:, :, 1] - tri[:, :, 0], tri[:, :, 2] - tri[:, :, 0]
    front = e1[..., 0] * e2[..., 1] - e1[..., 1] * e2[..., 0] > 0  # (B, F)
    across = front[:, neighbours.clamp_min(0)]  # (B, F, 3)
    return (across != front[..., None]) | (neighbours < 0)


@dataclass
class OutlinePairs:
    """Per (state, ROI pixel, part) with a part's outline within reach or the pixel inside the part: the nearest
    outline edge, from vertex ``va`` to ``vb`` (or, deep inside, none: ``va`` = −1), and ``inside``. Shapes
    (G,): batch index b, ROI pixel (row-major) pix, part, va, vb, inside."""

    b: torch.Tensor
    pix: torch.Tensor
    part: torch.Tensor
    va: torch.Tensor
    vb: torch.Tensor
    inside: torch.Tensor


class _GrownEnds:
    """A mesh's vertices as the segments ``v → v + g`` (g the growth direction, or with ``axial`` the axial
    direction), in the fields :func:`~snaketrack.models.chain.point_jacobian` reads: their ends' difference is
    ``g`` in the camera frame."""

    def __init__(self, meshes: LinkMeshes, axial: bool = False):
        self.link = meshes.link
        self.a_local = meshes.verts
        self.b_local = meshes.verts + (meshes.grow_axial if axial else meshes.grow)


class PyTorch3DRenderer(SilhouetteRenderer):
    """The robot's soft silhouette from meshes, rasterised by PyTorch3D (module doc); a
    :class:`~snaketrack.tracker.render.silhouette.SilhouetteRenderer` in every call the tracker makes.

    ``robot``, ``K`` (3, 3) [px], ``width``, ``height`` [px], ``model`` (the :class:`CapsuleModel` the search,
    the ROI and the occlusion test keep using; default :meth:`CapsuleModel.from_visual`) and ``settings`` as
    there; the meshes are ``model``'s primitives tessellated with ``sections`` sides (and the robot's mesh
    files). ``blend``: ``"outline"`` (the own renderer's edge on each part's outline, the default) or
    ``"shader"`` (PyTorch3D's SoftSilhouetteShader; module doc). ``outline_sigmas``: the meshes are drawn shrunk
    by that many σ_px (default 0 with the outline blend, :data:`OUTLINE_SIGMAS` with the shader).
    ``faces_per_pixel``: PyTorch3D's K (default 100, the paper's setting). ``backward``: ``"torch"`` (rasterise
    without gradients, recompute in torch), ``"pytorch3d"`` (PyTorch3D's backward; the shader only) or
    ``"auto"`` (PyTorch3D's with the shader on CUDA, torch's otherwise).
    ``device``: where the rasteriser runs (default: the CPU).
    """

    def __init__(self, robot: Robot, K, width: int, height: int, model: Optional[CapsuleModel] = None,
                 settings: SilhouetteSettings = SilhouetteSettings(), faces_per_pixel: int = PAPER_FACES_PER_PIXEL,
                 backward: str = "auto", device: Optional[str] = None, sections: int = SECTIONS,
                 meshes: Optional[LinkMeshes] = None, outline_sigmas: Optional[float] = None,
                 blend: str = "outline"):
        super().__init__(robot, K, width, height, model, settings)
        if backward not in ("auto", "torch", "pytorch3d"):
            raise InputError(f"backward {backward!r}; expected auto, torch or pytorch3d")
        if blend not in BLENDS:
            raise InputError(f"blend {blend!r}; expected one of {', '.join(BLENDS)}")
        if blend == "outline" and backward == "pytorch3d":
            raise InputError("backward 'pytorch3d' needs blend 'shader' (the outline blend is computed in torch)")
        self.blend = blend
        if int(faces_per_pixel) < 1:
            raise InputError(f"faces_per_pixel = {faces_per_pixel!r}; expected >= 1")
        self.faces_per_pixel = int(faces_per_pixel)
        self.device = torch.device(device or "cpu")
        self.backward = backward
        self.sections = int(sections)
        if outline_sigmas is None:
            outline_sigmas = OUTLINE_SIGMAS if blend == "shader" else 0.0
        self.outline_sigmas = float(outline_sigmas)
        self._f = 0.5 * float(self.K[0, 0] + self.K[1, 1])
        self.meshes = meshes if meshes is not None else robot_meshes(robot, self.model, self.sections)
        self._faces = torch.as_tensor(self.meshes.faces, dtype=torch.int64)
        self._axial = bool(np.any(self.meshes.grow_axial))
        self._link = torch.as_tensor(self.meshes.link, dtype=torch.int64)
        self._edge_a = torch.tensor([i for i, _ in _EDGES])
        self._edge_b = torch.tensor([j for _, j in _EDGES])
        self._neighbours = torch.as_tensor(edge_neighbours(self.meshes.verts, self.meshes.faces, self.meshes.parts))
        self._face_part = torch.repeat_interleave(
            torch.arange(len(self.meshes.parts)), torch.as_tensor(self.meshes.parts[:, 3] - self.meshes.parts[:, 2]))

    # -- geometry -------------------------------------------------------
    def reach_px(self, settings: SilhouetteSettings) -> float:
        """How far past an outline [px] a pixel's coverage is computed: ``settings.margin_sigmas`` σ_px with the
        outline blend (as the own renderer), where PyTorch3D's sigmoid falls below ε with the shader's."""
        if self.blend == "outline":
            return float(settings.margin_sigmas) * float(settings.sigma_px)
        return reach_px(float(settings.sigma_px))

    def grow_px(self, settings: SilhouetteSettings, offset_px=0.0):
        """How far the meshes are grown [px] at edge softness ``settings.sigma_px`` and edge offset ``offset_px``
        [px] (a float or a (B,) tensor): ``b − c σ_px`` with the shader; ``− c σ_px`` with the outline blend,
        which shifts each part's signed distance by ``b`` instead (module doc)."""
        shrink = self.outline_sigmas * float(settings.sigma_px)
        if self.blend == "outline":
            return -shrink + 0.0 * offset_px
        return offset_px - shrink

    def vertices(self, x: torch.Tensor, grow_px=None) -> torch.Tensor:
        """Mesh vertices (B, V, 3) in the camera frame [m] of pose vectors ``x`` (B, D), the meshes grown by
        ``grow_px`` [px] (a float or a (B,) tensor; default 0); differentiable in both."""
        q, R0, t0 = self.layout.to_fk(x)
        return self.link_vertices(forward_kinematics(self.robot, q, R0, t0), grow_px)

    def link_vertices(self, pose, grow_px=None) -> torch.Tensor:
        """Mesh vertices (B, V, 3) [m] of the link frames ``pose`` (``origins`` (B, L, 3), ``rotations``
        (B, L, 3, 3), :func:`~snaketrack.models.kinematics.forward_kinematics`'s), the meshes grown by
        ``grow_px`` [px]: each vertex moved along its growth direction by ``grow_px · z / f`` [m]."""
        dev, dt = pose.origins.device, pose.origins.dtype
        idx = self._link.to(dev)
        v = torch.as_tensor(self.meshes.verts, dtype=dt, device=dev)
        X = pose.origins[:, idx] + (pose.rotations[:, idx] @ v[..., None])[..., 0]
        if grow_px is None:
            return X
        grow = torch.as_tensor(grow_px, dtype=dt, device=dev).reshape(-1, 1, 1)
        g = torch.as_tensor(self.meshes.grow, dtype=dt, device=dev)
        N = (pose.rotations[:, idx] @ g[..., None])[..., 0]
        if self._axial:
            ga = torch.as_tensor(self.meshes.grow_axial, dtype=dt, device=dev)
            A = (pose.rotations[:, idx] @ ga[..., None])[..., 0]
            N = N + axial_weight(A, X)[..., None] * A
        return X + grow / self._f * X[..., 2:3] * N

    def _uvz(self, X: torch.Tensor, roi, K: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Camera-frame points (..., 3) → ROI pixel coordinates and depth (..., 3) (intrinsics ``K``, default
        the renderer's)."""
        K = (self.K if K is None else K).to(X.dtype).to(X.device)
        z = X[..., 2]
        zc = z.clamp_min(1e-9)
        u = K[0, 0] * X[..., 0] / zc + K[0, 2] - roi[0]
        v = K[1, 1] * X[..., 1] / zc + K[1, 2] - roi[1]
        return torch.stack([u, v, z], -1)

    def screen_roi(self, x: torch.Tensor, pad_px: float = 4.0) -> tuple[int, int, int, int]:
        """The image box (u0, v0, w, h) holding the meshes of all states ``x`` (B, D), padded by ``pad_px``."""
        with torch.no_grad():
            uvz = self._uvz(self.vertices(x.detach().double()), (0, 0))
        front = uvz[..., 2] > 1e-6
        if not front.any():
            return (0, 0, 1, 1)
        uv = uvz[front][:, :2]
        ul = max(int(math.floor(float(uv[:, 0].min()) - pad_px)), 0)
        vl = max(int(math.floor(float(uv[:, 1].min()) - pad_px)), 0)
        uh = min(int(math.ceil(float(uv[:, 0].max()) + pad_px)), self.width - 1)
        vh = min(int(math.ceil(float(uv[:, 1].max()) + pad_px)), self.height - 1)
        if uh < ul or vh < vl:
            return (0, 0, 1, 1)
        return (ul, vl, uh - ul + 1, vh - vl + 1)

    # -- the silhouette -------------------------------------------------
    def outline_pairs(self, uvz: torch.Tensor, w: int, h: int, reach: float) -> OutlinePairs:
        """For B meshes at ROI pixel coordinates and depths ``uvz`` (B, V, 3) over a ``w`` × ``h`` ROI, each
        (state, pixel, part) whose part's outline lies within ``reach`` [px] of the pixel or that the part
        covers, with the part's outline edge nearest to the pixel (:class:`OutlinePairs`).

        Two PyTorch3D rasterisations: all faces without blur (which parts cover each pixel centre) and the
        faces with a contour edge (:func:`contour_edges`) listed up to ``reach`` past their edges. Outside a
        part, the nearest of those faces' edges is its outline's nearest point (the part's image is the union
        of its faces, bounded by contour edges); inside, the nearest contour edge. Without gradients."""
        dev = uvz.device
        faces, nb, fpart = self._faces.to(dev), self._neighbours.to(dev), self._face_part.to(dev)
        M, P = len(self.meshes.parts), w * h
        with torch.no_grad():
            uvz = uvz.detach()
            flag = contour_edges(uvz[..., :2], faces, nb)  # (B, F, 3)
            on = flag.any(-1)
            cov = list_pairs(uvz, faces, w, h, 0.0, COVER_FACES)
            ckey = torch.unique(((cov.b * P + cov.pix) * M + fpart[cov.face])[cov.inside])
            fidx = torch.nonzero(on.any(0)).squeeze(1)
            pr = list_pairs(uvz, faces.index_select(0, fidx), w, h, reach, self.faces_per_pixel)
            face = fidx[pr.face]
            ok = on[pr.b, face]
            b, pix, face = pr.b[ok], pr.pix[ok], face[ok]
            key = (b * P + pix) * M + fpart[face]
            inside = torch.isin(key, ckey)
            tri = uvz[..., :2][b[:, None], faces[face]]  # (Q, 3, 2)
            p = torch.stack([pix % w, pix // w], 1).to(uvz.dtype)
            d2 = torch.stack([_edge_distance(p, tri[:, i], tri[:, j])[0] for i, j in _EDGES], 1)
            # inside a part only its contour edges bound it; outside, the nearest face's nearest edge
            d2 = torch.where(inside[:, None] & ~flag[b, face], torch.inf, d2)
            dmin, e = d2.min(1)
            order = torch.argsort(dmin, stable=True)
            order = order[torch.argsort(key[order], stable=True)]
            ks = key[order]
            first = torch.ones_like(ks, dtype=torch.bool)
            first[1:] = ks[1:] != ks[:-1]
            sel = order[first & torch.isfinite(dmin[order])]
            fs, es = face[sel], e[sel]
            va = faces[fs, self._edge_a.to(dev)[es]]
            vb = faces[fs, self._edge_b.to(dev)[es]]
            deep = ckey[~torch.isin(ckey, key[sel])]  # covered, no outline within reach
            n = torch.full_like(deep, -1)
            allkey = torch.cat([key[sel], deep])
            return OutlinePairs(allkey // (M * P), (allkey // M) % P, allkey % M, torch.cat([va, n]),
                                torch.cat([vb, n]), torch.cat([inside[sel], torch.ones_like(deep, dtype=torch.bool)]))

    def _outline_blend(self, uvz: torch.Tensor, w: int, h: int, sig: float, reach: float, offset: torch.Tensor):
        """The outline blend's per-pixel ``log Π(1 − c_k)`` (B·h·w,) of meshes at ``uvz`` (B, V, 3) with edge
        offsets ``offset`` (B,) [px], its pairs (:class:`OutlinePairs`; ``reach`` [px] should cover
        ``margin_sigmas`` σ plus |offset|), and per pair with an edge: the signed distance e [px] (+ inside) plus
        the offset, the nearest point's segment parameter t and ``p − q`` (differentiable in ``uvz`` and
        ``offset``)."""
        Bn, P = uvz.shape[0], w * h
        op = self.outline_pairs(uvz, w, h, reach)
        edge = op.va >= 0
        ie = torch.nonzero(edge).squeeze(1)
        b, pix = op.b.index_select(0, ie), op.pix.index_select(0, ie)
        p = torch.stack([pix % w, pix // w], 1).to(uvz.dtype)
        d2, t, diff = _edge_distance(p, uvz[b, op.va.index_select(0, ie), :2], uvz[b, op.vb.index_select(0, ie), :2])
        e = torch.where(op.inside.index_select(0, ie), 1.0, -1.0).to(uvz.dtype) * torch.sqrt(d2.clamp_min(1e-24)) \
            + offset.index_select(0, b)
        L = torch.zeros(Bn * P, dtype=uvz.dtype, device=uvz.device).index_add(0, b * P + pix, F.logsigmoid(-e / sig))
        deep = torch.nonzero(~edge).squeeze(1)
        L = L.index_add(0, (op.b * P + op.pix).index_select(0, deep),
                        torch.full((deep.numel(),), DEEP_LOG, dtype=uvz.dtype, device=uvz.device))
        return L, op, ie, e, t, diff

    def __call__(self, x: torch.Tensor, roi: Optional[Sequence[int]] = None,
                 settings: Optional[SilhouetteSettings] = None, offset_px: Optional[torch.Tensor] = None):
        """Soft silhouettes (B, h, w) of pose vectors ``x`` (B, D) over ``roi`` (default: the meshes' screen
        box) and the ROI; differentiable in ``x`` (and ``offset_px`` (B,) [px])."""
        s = settings or self.settings
        if x.ndim != 2:
            raise InputError(f"pose vectors: shape {tuple(x.shape)}; expected (B, {self.layout.dim})")
        off = 0.0 if offset_px is None or not offset_px.numel() else float(offset_px.detach().max())
        if roi is None:
            roi = self.screen_roi(x, self.reach_px(s) + max(off, 0.0) + 2.0)
        roi = check_roi(roi)
        b = None if offset_px is None else offset_px.to(x.dtype)
        grow = self.grow_px(s, 0.0 if b is None else b)
        return self.silhouette(self.vertices(x, grow), roi, s, offset_px=b), tuple(roi)

    def silhouette(self, verts: torch.Tensor, roi: Sequence[int], settings: SilhouetteSettings,
                   backward: Optional[str] = None, offset_px=None) -> torch.Tensor:
        """Soft silhouettes (B, h, w) of mesh vertices ``verts`` (B, V, 3) [m, camera frame] over ``roi``, as they
        are (not grown: :meth:`vertices`). ``offset_px``: the outline blend's edge offset [px] (a float or a (B,)
        tensor; the shader's is in the vertices, :meth:`grow_px`)."""
        _, _, w, h = roi
        Bn, dt = verts.shape[0], verts.dtype
        sig = float(settings.sigma_px)
        mode = backward or self.backward
        if mode == "auto":
            mode = "pytorch3d" if self.device.type == "cuda" and self.blend == "shader" else "torch"
        uvz = self._uvz(verts.to(self.device), roi)
        faces = self._faces.to(self.device)
        reach = self.reach_px(settings)
        if self.blend == "outline":
            if mode == "pytorch3d":
                raise InputError("backward 'pytorch3d' needs blend 'shader'")
            off = torch.zeros(Bn, dtype=dt, device=uvz.device) if offset_px is None else \
                torch.as_tensor(offset_px, dtype=dt, device=uvz.device).reshape(-1).expand(Bn)
            reach = reach + float(off.detach().abs().max()) if Bn else reach
            L = self._outline_blend(uvz, w, h, sig, reach, off)[0]
            return (-torch.expm1(L)).view(Bn, h, w).to(verts.device)
        if mode == "pytorch3d":
            pr = list_pairs(uvz, faces, w, h, reach, self.faces_per_pixel)
            d2 = pr.d2
        else:
            with torch.no_grad():
                pr = list_pairs(uvz.detach(), faces, w, h, reach, self.faces_per_pixel)
            tri = uvz[..., :2][pr.b[:, None], faces.index_select(0, pr.face)]  # (Q, 3, 2)
            p = torch.stack([pr.pix % w, pr.pix // w], 1).to(dt)
            e = _nearest_edge(p, tri.detach())
            q = torch.arange(len(e), device=tri.device)
            d2, _, _ = _edge_distance(p, tri[q, self._edge_a.to(e.device)[e]], tri[q, self._edge_b.to(e.device)[e]])
        b, pix, inside = pr.b, pr.pix, pr.inside
        z = _coverage_logit(d2, inside, sig)
        L = torch.zeros(Bn * w * h, dtype=dt, device=self.device).index_add(0, b * (w * h) + pix, F.logsigmoid(-z))
        return (-torch.expm1(L)).view(Bn, h, w).to(verts.device)

    # -- the Jacobian for Levenberg–Marquardt ---------------------------
    def pose_jacobian(self, q: torch.Tensor, R0: torch.Tensor, t0: torch.Tensor, roi: Sequence[int],
                      settings: SilhouetteSettings, offset_px: float = 0.0, with_offset: bool = False,
                      tol: float = 1e-6, K: Optional[torch.Tensor] = None) -> RenderJacobian:
        """Silhouette of one state and its Jacobian with respect to ``[q (J), δ (3), t (3)]`` (base rotation
        ``exp(δ) R0`` at δ = 0; :func:`~snaketrack.models.chain.point_jacobian`), plus the edge offset's column
        when ``with_offset``: the same pairs as :meth:`silhouette`, their derivatives in closed form (outline:
        ``∂o/∂e_k = Π_{j≠k}(1 − c_j) · c_k(1 − c_k)/σ``; shader: ``∂o/∂s_k = Π_{j≠k}(1 − p_j) · p_k(1 − p_k) ·
        2|s_k|/σ²``; the nearest edge's end points moving the distance; the grown vertices ``X + k z N``
        (:meth:`link_vertices`, k = grow / f) moving with the pose and, in the offset's column, with k), kept
        where above ``tol``. ``roi``: (u0, v0, w, h) on the pixel grid of intrinsics ``K`` (3, 3) (default: the
        renderer's image; the refiner's coarser grids of k × k pixel blocks give theirs, with σ, the offset and the
        ROI in that grid's pixels). Float64 on the CPU."""
        roi = check_roi(roi)
        _, _, w, h = roi
        sig = float(settings.sigma_px)
        P, G = point_jacobian(self.robot, _GrownEnds(self.meshes), q.double(), R0.double(), t0.double())
        X0, G0 = P[:, 0], G[:, 0]  # (V, 3), (V, 3, D)
        N, GN = P[:, 1] - X0, G[:, 1] - G0  # growth directions in the camera frame and their derivatives
        if self._axial:  # plus w × the axial directions, w held (axial_weight)
            Pa, Ga = point_jacobian(self.robot, _GrownEnds(self.meshes, axial=True), q.double(), R0.double(),
                                    t0.double())
            A, GA = Pa[:, 1] - Pa[:, 0], Ga[:, 1] - Ga[:, 0]
            wa = axial_weight(A, X0)
            N, GN = N + wa[:, None] * A, GN + wa[:, None, None] * GA
        Kd = (self.K if K is None else K).double()
        f = 0.5 * float(Kd[0, 0] + Kd[1, 1])
        k = self.grow_px(settings, float(offset_px)) / f
        z = X0[:, 2]
        X = X0 + k * z[:, None] * N
        G = G0 + k * (N[:, :, None] * G0[:, 2:3, :] + z[:, None, None] * GN)
        if with_offset:  # ∂X/∂b = z N / f with the shader; the outline blend's offset shifts its distances
            col = z[:, None] * N / f if self.blend == "shader" else torch.zeros_like(N)
            G = torch.cat([G, col[..., None]], -1)
        D = G.shape[-1]
        uvz = self._uvz(X, roi, Kd)
        if self.blend == "outline":
            off = torch.tensor([float(offset_px)], dtype=torch.float64)
            L, op, ie, e, t, diff = self._outline_blend(uvz[None], w, h, sig,
                                                        self.reach_px(settings) + abs(float(offset_px)), off)
            sil = -torch.expm1(L)
            if ie.numel() == 0:
                return RenderJacobian(sil, torch.zeros(0, dtype=torch.long), torch.zeros(0, D, dtype=torch.float64))
            pix = op.pix.index_select(0, ie)
            va, vb = op.va.index_select(0, ie), op.vb.index_select(0, ie)
            # ∂o/∂e_k = Π_{j≠k}(1 − c_j) · c_k(1 − c_k) / σ; e = ±|p − q|, q = (1 − t) a + t b
            logout = F.logsigmoid(-e / sig)
            rest = torch.exp(L.index_select(0, pix) - logout)
            c = torch.sigmoid(e / sig)
            wgt = rest * c * (1.0 - c) / sig
            keep = torch.nonzero(wgt.abs() > tol).squeeze(1)
            # e − b = ±d: its sign and size from p − q
            d = diff.norm(dim=1).clamp_min(1e-12)
            sgn = torch.where(op.inside.index_select(0, ie), 1.0, -1.0).double()
            gk = (wgt * sgn / d).index_select(0, keep)[:, None] * (-diff).index_select(0, keep)
            tk = t.index_select(0, keep)[:, None]
            return self._assemble(X, G, Kd, w, h, sil, pix.index_select(0, keep), va.index_select(0, keep),
                                  vb.index_select(0, keep), gk * (1.0 - tk), gk * tk,
                                  wgt.index_select(0, keep) if with_offset else None)
        faces = self._faces
        pr = list_pairs(uvz[None].to(self.device), faces.to(self.device), w, h, self.reach_px(settings),
                        self.faces_per_pixel)
        pix, face, inside = pr.pix.cpu(), pr.face.cpu(), pr.inside.cpu()
        if pix.numel() == 0:
            z0 = torch.zeros(0, dtype=torch.long)
            return RenderJacobian(torch.zeros(w * h, dtype=torch.float64), z0, torch.zeros(0, D, dtype=torch.float64))
        fv = faces.index_select(0, face)  # (Q, 3)
        tri = uvz[:, :2][fv]
        p = torch.stack([pix % w, pix // w], 1).double()
        e = _nearest_edge(p, tri)
        q_i = torch.arange(len(e))
        va, vb = fv[q_i, self._edge_a[e]], fv[q_i, self._edge_b[e]]
        d2, t, diff = _edge_distance(p, uvz[va, :2], uvz[vb, :2])
        zl = _coverage_logit(d2, inside, sig)
        L = torch.zeros(w * h, dtype=torch.float64).index_add(0, pix, F.logsigmoid(-zl))
        sil = -torch.expm1(L)
        # ∂o/∂z per pair: Π_{j≠k}(1 − p_j) = exp(L − log(1 − p_k)) times p(1 − p); z = ±d²/σ²
        rest = torch.exp(L.index_select(0, pix) - F.logsigmoid(-zl))
        dpdz = torch.sigmoid(zl) * torch.sigmoid(-zl)
        sign = torch.where(inside, 1.0, -1.0).double()
        wgt = rest * dpdz * (2.0 / sig ** 2)  # ∂o/∂z · ∂z/∂(±d²/2)
        keep = torch.nonzero(wgt.abs() > tol).squeeze(1)
        # ∂(d²/2)/∂(nearest point) = −(p − q), shared by the edge's end points as (1 − t, t)
        gk = (wgt * sign).index_select(0, keep)[:, None] * (-diff).index_select(0, keep)  # (Qk, 2)
        tk = t.index_select(0, keep)[:, None]
        return self._assemble(X, G, Kd, w, h, sil, pix.index_select(0, keep), va.index_select(0, keep),
                              vb.index_select(0, keep), gk * (1.0 - tk), gk * tk)

    def _assemble(self, X, G, Kd, w: int, h: int, sil, pix_k, vak, vbk, ga, gb, d_offset=None) -> RenderJacobian:
        """The Jacobian's rows from per-pair derivatives ``ga``, ``gb`` (Qk, 2) of the silhouette at ROI pixels
        ``pix_k`` with respect to the image points of vertices ``vak`` and ``vbk``, plus ``d_offset`` (Qk,) in
        the last column when given (the outline blend's edge offset); the vertices ``X`` (V, 3) [m], their pose
        Jacobian ``G`` (V, 3, D) and the grid's intrinsics ``Kd`` (3, 3)."""
        D = G.shape[-1]
        Xz = X[:, 2].clamp_min(1e-9)
        Jp = torch.zeros(X.shape[0], 2, 3, dtype=torch.float64)  # ∂(u, v)/∂X per vertex
        Jp[:, 0, 0] = Kd[0, 0] / Xz
        Jp[:, 0, 2] = -Kd[0, 0] * X[:, 0] / Xz ** 2
        Jp[:, 1, 1] = Kd[1, 1] / Xz
        Jp[:, 1, 2] = -Kd[1, 1] * X[:, 1] / Xz ** 2
        JG = Jp @ G  # (V, 2, D): ∂(u, v)/∂θ per vertex
        jp = torch.einsum("qc,qcd->qd", ga, JG.index_select(0, vak)) + \
            torch.einsum("qc,qcd->qd", gb, JG.index_select(0, vbk))
        if d_offset is not None:
            jp[:, -1] += d_offset
        seen = torch.zeros(w * h, dtype=torch.bool)
        seen[pix_k] = True
        rows = torch.nonzero(seen).squeeze(1)
        lut = torch.zeros(w * h, dtype=torch.long)
        lut[rows] = torch.arange(rows.numel())
        inv = lut.index_select(0, pix_k)
        jac = torch.zeros(rows.numel(), D, dtype=torch.float64).index_add_(0, inv, jp)
        return RenderJacobian(sil, rows, jac)

    def with_settings(self, **kw) -> "PyTorch3DRenderer":
        return PyTorch3DRenderer(self.robot, self.K.numpy(), self.width, self.height, self.model,
                                 replace(self.settings, **kw), self.faces_per_pixel, self.backward,
                                 str(self.device), self.sections, self.meshes, self.outline_sigmas, self.blend)
