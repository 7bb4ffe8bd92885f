"""Differentiable soft silhouettes of capsules and cylinders under a pinhole camera (plain PyTorch).

The robot's silhouette model is a set of primitives fixed to its link frames
(:class:`~snaketrack.tracker.render.primitives.CapsuleModel`). For every pixel
ray and every primitive the renderer takes the signed distance ``e`` [px]
from the ray to the primitive's silhouette edge
(:mod:`snaketrack.tracker.render.edges`; positive inside), shifts it by an
optional edge offset ``b`` [px] that dilates (+) or erodes (−) the model,
and turns it into a coverage ``c = sigmoid((e + b) / σ)`` with the edge
softness ``σ`` [px]. A pixel is covered by the soft union
``o = 1 − Π_k (1 − c_k)``, computed as ``1 − exp(Σ log sigmoid(−(e_k + b)/σ))``
(stable). At ``σ → 0`` this is a hard
rendering (tested against brute-force ray–capsule and ray–cylinder
intersections in tests/tracker/test_render.py).

Each primitive is evaluated only on the pixels of its own screen band
(:mod:`snaketrack.tracker.render.bands`), as a flat list of (pixel, primitive)
pairs inside the region of interest (ROI) asked for; the soft union is a
scatter-add over those pairs.

:func:`render_with_jacobian` gives the silhouette and its Jacobian with
respect to the primitives' end points (and the edge offset) in one pass
without autograd: each pair's coverage depends only on its own primitive,
so the per-pair derivatives ``∂e/∂(A, B)`` are taken in closed form, only
for the pairs near a visible edge, and the soft union's product rule is
applied by hand, ``∂o/∂e_k = (1 − o) c_k / σ``.

Shapes: B states, M primitives, pixels of an ROI ``(u0, v0, w, h)`` (top-left
pixel and size) flattened row-major, ``P = w·h``. Units: metres in the
camera frame (OpenCV: x right, y down, z forward), pixels in the image.

>>> import torch
>>> K = torch.tensor([[300.0, 0, 31.5], [0, 300.0, 23.5], [0, 0, 1]], dtype=torch.float64)
>>> A = torch.tensor([[[-0.05, 0.0, 1.0]]], dtype=torch.float64)
>>> B = torch.tensor([[[0.05, 0.0, 1.0]]], dtype=torch.float64)
>>> sil = soft_silhouette(A, B, torch.tensor([0.01], dtype=torch.float64), K, (0, 0, 64, 48),
...                       SilhouetteSettings(sigma_px=0.05))
>>> import math   # a 30 px × 6 px band and two half discs of radius 3 px
>>> abs(float(sil[0].sum()) - (30 * 6 + math.pi * 3 ** 2)) < 5
True
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from snaketrack.errors import InputError
from snaketrack.models import chain_kernel
from snaketrack.models.chain_kernel import CompiledChain
from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.robot import Robot
from snaketrack.tracker.render.bands import (
    check_roi,
    pair_tensors,
    pixel_rays,
    primitive_boxes,
    primitive_pixels,
    ray_table,
)
from snaketrack.tracker.render.edges import edge_px, edge_px_grads, kind_order
from snaketrack.tracker.render.primitives import CapsuleModel
from snaketrack.tracker.state import StateLayout


@dataclass(frozen=True)
class SilhouetteSettings:
    """Renderer settings.

    sigma_px: edge softness σ [px], default 0.5; softer edges fatten overlaps and bias depth.
    margin_sigmas: how far past the hard edge primitives are evaluated [σ], default 8 (coverage < 2e-4).
    min_depth: rays meeting a primitive closer than this count as not covered [m], default 0.05.
    """

    sigma_px: float = 0.5
    margin_sigmas: float = 8.0
    min_depth: float = 0.05


def _check_inputs(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor):
    if starts.ndim != 3 or starts.shape[-1] != 3 or ends.shape != starts.shape:
        raise InputError(f"capsule end points: shapes {tuple(starts.shape)}, {tuple(ends.shape)}; "
                         "expected (B, M, 3) each")
    if radii.shape != (starts.shape[1],):
        raise InputError(f"capsule radii: shape {tuple(radii.shape)}; expected ({starts.shape[1]},)")
    if K.shape != (3, 3):
        raise InputError(f"K: shape {tuple(K.shape)}; expected (3, 3)")


def soft_silhouette(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                    roi: Sequence[int], settings: SilhouetteSettings = SilhouetteSettings(),
                    offset_px: Optional[torch.Tensor] = None,
                    cylinders: Optional[np.ndarray] = None) -> torch.Tensor:
    """Soft silhouette (B, h, w) in [0, 1] of capsules inside ``roi = (u0, v0, w, h)``.

    starts, ends: (B, M, 3) axis end points in the camera frame [m]; radii (M,) [m];
    K: (3, 3) intrinsics [px]; offset_px: optional (B,) edge offset [px];
    cylinders: optional (M,) bool, primitives drawn as flat-ended cylinders
    (:func:`~snaketrack.tracker.render.edges.cylinder_edge_px`).
    Differentiable in ``starts``, ``ends``, ``radii`` and ``offset_px``;
    computed in the dtype of ``starts`` (float32 or float64), on its device (``radii`` and ``offset_px``
    are moved there).
    """
    _check_inputs(starts, ends, radii, K)
    radii = radii.to(starts.device)
    roi = check_roi(roi)
    u0, v0, w, h = roi
    Bn = starts.shape[0]
    sig = float(settings.sigma_px)
    pad = settings.margin_sigmas * sig
    if offset_px is not None:
        pad += float(offset_px.detach().abs().max()) if offset_px.numel() else 0.0
    order, n_cap_prims = kind_order(cylinders)
    if order is not None:
        order = order.to(starts.device)
        starts, ends, radii = starts[:, order], ends[:, order], radii[order]
    pairs = primitive_pixels(starts, ends, radii, K, roi, pad)
    pix, prim = pair_tensors(pairs, w, starts.device)
    out = torch.zeros(Bn, w * h, dtype=starts.dtype, device=starts.device)
    if pix.numel() == 0:
        return out.view(Bn, h, w)
    d = pixel_rays(pix, roi, K, starts.dtype).T[:, None]  # (3, 1, Q)
    f = 0.5 * float(K[0, 0] + K[1, 1])
    A = starts[:, prim].permute(2, 0, 1)  # (3, B, Q)
    Bp = ends[:, prim].permute(2, 0, 1)
    n_cap = None if n_cap_prims is None else int(np.searchsorted(pairs[1], n_cap_prims))
    e = edge_px(A, Bp, radii.to(starts.dtype)[prim], d, f, settings.min_depth, n_cap)
    if offset_px is not None:
        e = e + offset_px.to(device=starts.device, dtype=starts.dtype)[:, None]
    logout = F.logsigmoid(-e / sig)  # log(1 − c)
    L = out.index_add(1, pix, logout)
    return (-torch.expm1(L)).view(Bn, h, w)


@dataclass(frozen=True)
class RenderJacobian:
    """A silhouette and its derivatives (one state), from :func:`render_with_jacobian`.

    sil: (P,) soft silhouette over the ROI pixels (row-major).
    rows: (R,) ROI pixel indices that have a non-negligible derivative (the
        other rows of the Jacobian are zero and never formed).
    jac: (R, D) derivatives of ``sil[rows]`` with respect to the parameters
        whose end-point Jacobian was given (plus a last column for the edge
        offset when ``with_offset``).
    """

    sil: torch.Tensor
    rows: torch.Tensor
    jac: torch.Tensor


def render_with_jacobian(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                         roi: Sequence[int], point_jac: torch.Tensor,
                         settings: SilhouetteSettings = SilhouetteSettings(),
                         offset_px: float = 0.0, with_offset: bool = False,
                         tol: float = 1e-6, compute_dtype: Optional[torch.dtype] = None,
                         image_size: Optional[tuple[int, int]] = None, band: bool = True,
                         cylinders: Optional[np.ndarray] = None) -> RenderJacobian:
    """Silhouette of one state and its Jacobian, in one pass.

    starts, ends: (1, M, 3) [m]; point_jac: (M, 2, 3, D) derivatives of each
    primitive's start and end point with respect to D parameters (e.g. from
    ``torch.func.jacfwd`` through forward kinematics). Returns the ROI's soft
    silhouette (P,) and the non-zero rows of ``∂sil/∂params`` (R, D[+1]).
    ``compute_dtype``: dtype of the per-pixel work (float32 is about twice as
    fast and accurate to ~0.01 px at a few metres); outputs are in the
    dtype of ``starts``. ``image_size``: (W, H) of the image the ROI lies
    in; given, the pixel rays come from a cached table (:func:`ray_table`).
    The work runs on the device of ``starts`` (``radii`` and ``point_jac`` are moved there), and so
    do the results.
    The derivatives are in closed form (:func:`~snaketrack.tracker.render.edges.edge_px_grads`),
    evaluated only for the pairs whose derivative exceeds ``tol``. ``band``:
    see :func:`~snaketrack.tracker.render.bands.primitive_pixels`.
    """
    roi = _check_single(starts, ends, radii, K, roi)
    _, _, w, h = roi
    dt = starts.dtype
    sig = float(settings.sigma_px)
    dev = starts.device
    radii, point_jac = radii.to(dev), point_jac.to(dev)
    order, n_cap_prims = kind_order(cylinders)
    if order is not None:  # capsules first: each kind's pairs are then one slice
        order = order.to(dev)
        starts, ends = starts.index_select(1, order), ends.index_select(1, order)
        radii, point_jac = radii.index_select(0, order), point_jac.index_select(0, order)
    pixels = primitive_pixels(starts, ends, radii, K, roi, settings.margin_sigmas * sig + abs(offset_px), band)
    glob = None
    if image_size is not None:
        pix, prim, glob = pair_tensors(pixels, w, starts.device, roi, image_size[0])
    else:
        pix, prim = pair_tensors(pixels, w, starts.device)
    D = point_jac.shape[-1] + (1 if with_offset else 0)
    if pix.numel() == 0:
        z = torch.zeros(0, dtype=torch.long, device=dev)
        return RenderJacobian(torch.zeros(w * h, dtype=dt, device=dev), z, torch.zeros(0, D, dtype=dt, device=dev))
    cdt = compute_dtype or dt
    if glob is not None:
        d = ray_table(K, image_size[0], image_size[1], cdt, dev).index_select(1, glob)  # (3, Q)
    else:
        d = pixel_rays(pix, roi, K, cdt).T.contiguous()  # (3, Q)
    f = 0.5 * float(K[0, 0] + K[1, 1])
    S0 = starts[0].detach().to(cdt).T.contiguous()  # (3, M)
    E0 = ends[0].detach().to(cdt).T.contiguous()
    rad = radii.detach().to(cdt)
    # forward over all pairs; derivatives only for the pairs that have one (near a visible edge)
    n_cap = None if n_cap_prims is None else int(np.searchsorted(pixels[1], n_cap_prims))  # pairs by primitive
    e = edge_px(S0.index_select(1, prim), E0.index_select(1, prim), rad.index_select(0, prim), d, f,
                settings.min_depth, n_cap)
    e = e + offset_px
    logout = F.logsigmoid(-e / sig)
    L = torch.zeros(w * h, dtype=cdt, device=dev).index_add(0, pix, logout)
    sil = -torch.expm1(L)
    c = torch.sigmoid(e / sig)
    # o = 1 − Π(1 − c_k):  ∂o/∂e_k = Π_{j≠k}(1 − c_j) · dc_k/de_k = (1 − o)/(1 − c_k) · c_k(1 − c_k)/σ
    wgt = (1.0 - sil.index_select(0, pix)) * c / sig
    keep = torch.nonzero(wgt > tol).squeeze(1)
    pix_k, prim_k, wk = pix.index_select(0, keep), prim.index_select(0, keep), wgt.index_select(0, keep)
    n_cap_k = None if n_cap is None else int(torch.searchsorted(keep, n_cap))  # the kept capsule pairs
    gA, gB = edge_px_grads(S0.index_select(1, prim_k), E0.index_select(1, prim_k), rad.index_select(0, prim_k),
                           d.index_select(1, keep), f, settings.min_depth, n_cap_k)
    M = starts.shape[1]
    gAB = torch.cat([gA, gB], 0) * wk  # (6, Q): ∂o/∂(A, B) per pair
    # rows: ROI pixels with a derivative; inv: each kept pair's row (a lookup table, no sort)
    seen = torch.zeros(w * h, dtype=torch.bool, device=dev)
    seen[pix_k] = True
    rows = torch.nonzero(seen).squeeze(1)
    lut = torch.zeros(w * h, dtype=torch.long, device=dev)
    lut[rows] = torch.arange(rows.numel(), device=dev)
    inv = lut.index_select(0, pix_k)
    # per pair: ∂o/∂θ = Σ_c ∂o/∂(A, B)_c · G[prim, c]; then summed per row (most rows hold one pair)
    G6 = point_jac.to(cdt).reshape(M, 6, -1)  # (M, 2, 3, D) → (A_x, A_y, A_z, B_x, B_y, B_z) per primitive
    Dp = G6.shape[-1]
    # the pairs come grouped by primitive (``primitive_pixels`` lists them so): one small product per primitive
    counts = torch.bincount(prim_k, minlength=M).tolist()
    gT = gAB.T  # (Qk, 6)
    jp = torch.empty(gT.shape[0], Dp, dtype=cdt, device=dev)
    lo = 0
    for m, n_m in enumerate(counts):
        if n_m:
            torch.mm(gT[lo:lo + n_m], G6[m], out=jp[lo:lo + n_m])
            lo += n_m
    jac = torch.zeros(rows.numel(), Dp, dtype=cdt, device=dev).index_add_(0, inv, jp)
    if with_offset:
        jac = torch.cat([jac, torch.zeros(rows.numel(), 1, dtype=cdt, device=dev).index_add(0, inv, wk[:, None])], 1)
    sil, jac = sil.to(dt), jac.to(dt)
    return RenderJacobian(sil, rows, jac)


def _compiled_edges(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                    roi: Sequence[int], settings: SilhouetteSettings, offset_px: float,
                    cylinders: Optional[np.ndarray]):
    """The compiled kernel's first pass for one state (:func:`~snaketrack.tracker.render.render_kernel.
    silhouette_edges`): ``(roi, args, sil, e_all, rays)``, ``args`` the band's pairs and the geometry as the
    Jacobian pass takes them, ``sil`` (P,) float64; ``None`` in place of ``args`` and the rest when no pixel of
    the ROI lies in a primitive's band."""
    from snaketrack.tracker.render import (
        render_kernel,  # deferred: the module imports without numba (the compiled kernels)
    )

    roi = _check_single(starts, ends, radii, K, roi)
    sig = float(settings.sigma_px)
    Kd = _np64(K)
    S0, E0, rad = _np64(starts[0]), _np64(ends[0]), _np64(radii)
    roi_a = np.array(roi, np.int64)
    pix, prim = render_kernel.band_pairs(S0, E0, rad, Kd, roi_a, settings.margin_sigmas * sig + abs(offset_px))
    if pix.size == 0:
        return roi, None, None, None, None
    cam = np.array([Kd[0, 0], Kd[1, 1], Kd[0, 2], Kd[1, 2], Kd[0, 1]])
    cyl = np.zeros(S0.shape[0], bool) if cylinders is None else np.asarray(cylinders, bool)
    f = 0.5 * float(Kd[0, 0] + Kd[1, 1])
    sil, e_all, rays = render_kernel.silhouette_edges(pix, prim, roi_a, cam, S0, E0, rad, cyl, f,
                                                      float(settings.min_depth), sig, float(offset_px))
    args = (pix, prim, roi_a, S0, E0, rad, cyl, f, float(settings.min_depth), sig)
    return roi, args, sil, e_all, rays


def render_with_jacobian_compiled(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                                  roi: Sequence[int], point_jac: torch.Tensor,
                                  settings: SilhouetteSettings = SilhouetteSettings(),
                                  offset_px: float = 0.0, with_offset: bool = False, tol: float = 1e-6,
                                  cylinders: Optional[np.ndarray] = None, deferred: bool = False,
                                  **_ignored):
    """:func:`render_with_jacobian` by the compiled kernel of :mod:`~snaketrack.tracker.render.render_kernel`:
    the same arguments and result (``compute_dtype``, ``image_size`` and ``band`` are ignored: it works
    in float64 on the band's pairs, its rays computed from ``K``). ``deferred``: a
    :class:`DeferredRenderJacobian` instead, whose Jacobian rows are computed when first read (the same
    values): a trial step whose cost rejects it, or after which refinement stops, never needs them."""
    from snaketrack.tracker.render import (
        render_kernel,  # deferred: the module imports without numba (the compiled kernels)
    )

    dt = starts.dtype
    M = starts.shape[1]
    roi, args, sil, e_all, rays = _compiled_edges(starts, ends, radii, K, roi, settings, offset_px, cylinders)
    if args is None:
        _, _, w, h = roi
        D = point_jac.shape[-1] + (1 if with_offset else 0)
        z = torch.zeros(0, dtype=torch.long)
        return RenderJacobian(torch.zeros(w * h, dtype=dt), z, torch.zeros(0, D, dtype=dt))

    def jacobian() -> tuple[torch.Tensor, torch.Tensor]:
        G6 = _np64(point_jac).reshape(M, 6, -1)
        rows, jac = render_kernel.jacobian_rows(*args, float(tol), G6, bool(with_offset), sil, e_all, rays)
        return torch.from_numpy(rows), torch.from_numpy(jac).to(dt)

    sil_t = torch.from_numpy(sil).to(dt)
    if deferred:
        return DeferredRenderJacobian(sil_t, jacobian)
    return RenderJacobian(sil_t, *jacobian())


def soft_silhouette_compiled(starts: torch.Tensor, ends: torch.Tensor, radii: torch.Tensor, K: torch.Tensor,
                             roi: Sequence[int], settings: SilhouetteSettings = SilhouetteSettings(),
                             offset_px: float = 0.0, cylinders: Optional[np.ndarray] = None) -> torch.Tensor:
    """:func:`soft_silhouette` of one state (``starts``, ``ends`` (1, M, 3) [m]) by the compiled kernel
    (:func:`~snaketrack.tracker.render.render_kernel.silhouette_edges`, float64, no gradient): (1, h, w)."""
    roi, args, sil, _, _ = _compiled_edges(starts, ends, radii, K, roi, settings, offset_px, cylinders)
    _, _, w, h = roi
    if args is None:
        return torch.zeros(1, h, w, dtype=torch.float64)
    return torch.from_numpy(sil).view(1, h, w)


class DeferredRenderJacobian:
    """A :class:`RenderJacobian` whose ``rows`` and ``jac`` are computed by ``jacobian()`` (returning
    both) when either is first read; ``sil`` (P,) is given."""

    def __init__(self, sil: torch.Tensor, jacobian):
        self.sil = sil
        self._jacobian = jacobian

    @cached_property
    def _rows_jac(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._jacobian()

    @property
    def rows(self) -> torch.Tensor:
        return self._rows_jac[0]

    @property
    def jac(self) -> torch.Tensor:
        return self._rows_jac[1]


def _np64(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().double().cpu().numpy())


def _check_single(starts, ends, radii, K, roi) -> tuple:
    """The checked ROI of one state's render with its Jacobian (the inputs' checks included)."""
    _check_inputs(starts, ends, radii, K)
    if starts.shape[0] != 1:
        raise InputError(f"render_with_jacobian: batch of {starts.shape[0]} states; expected 1")
    return check_roi(roi)


class SilhouetteRenderer:
    """Renders a robot's silhouette from pose vectors (see :mod:`snaketrack.tracker.state`).

    ``robot``: the robot; ``K`` (3, 3) [px]; ``width``, ``height`` [px];
    ``model``: its :class:`CapsuleModel` (default: :meth:`CapsuleModel.from_visual`);
    ``settings``: :class:`SilhouetteSettings`, overridable per call;
    ``device``: where the silhouettes are drawn (a torch device; default the CPU).

    ``renderer(x)`` with pose vectors ``x`` (B, J + 6) gives ``(sil, roi)``:
    the soft silhouette (B, h, w) over the ROI (default: the robot's padded
    screen box, clipped to the image), on ``device``, and the ROI ``(u0, v0, w, h)``.
    The kinematics (pose to primitives) run where ``x`` is; ``K`` stays on the CPU.
    """

    def __init__(self, robot: Robot, K, width: int, height: int, model: Optional[CapsuleModel] = None,
                 settings: SilhouetteSettings = SilhouetteSettings(), device=None):
        self.robot = robot
        self.device = torch.device(device or "cpu")
        self.K = torch.as_tensor(np.asarray(K, dtype=float))
        if self.K.shape != (3, 3):
            raise InputError(f"K: shape {tuple(self.K.shape)}; expected (3, 3)")
        self.width, self.height = int(width), int(height)
        self.model = model if model is not None else CapsuleModel.from_visual(robot)
        self.settings = settings
        self.layout = StateLayout.for_robot(robot)
        self._chain = CompiledChain(robot, self.model) if chain_kernel.available() else None

    def primitives(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Primitive end points (B, M, 3), (B, M, 3) and radii (M,) of pose vectors (B, D).

        Without autograd on the CPU (``x`` not requiring a gradient) by the compiled chain
        (:meth:`~snaketrack.models.chain_kernel.CompiledChain.end_points`) where numba is importable: the
        same values as the torch forward kinematics, which the tracker's per-frame calls would spend a
        millisecond each on."""
        r = torch.as_tensor(self.model.radius, dtype=x.dtype)
        if not x.requires_grad and x.device.type == "cpu" and x.dtype == torch.float64 and x.ndim == 2 \
                and self._chain is not None:
            P = torch.from_numpy(self._chain.end_points(x.numpy()))
            return P[:, :, 0], P[:, :, 1], r
        q, R0, t0 = self.layout.to_fk(x)
        pose = forward_kinematics(self.robot, q, R0, t0)
        a, b = self.model.place(pose.rotations, pose.origins)
        return a, b, r

    def screen_roi(self, x: torch.Tensor, pad_px: float = 4.0) -> tuple[int, int, int, int]:
        """The image box (u0, v0, w, h) holding the silhouettes of all states ``x`` (B, D)."""
        a, b, r = self.primitives(x.detach())
        full = (0, 0, self.width, self.height)
        boxes = primitive_boxes(a, b, r, self.K, full, pad_px)
        good = boxes[:, 2] >= boxes[:, 0]
        if not good.any():
            return (0, 0, 1, 1)
        bx = boxes[good]
        ul, vl = int(bx[:, 0].min()), int(bx[:, 1].min())
        uh, vh = int(bx[:, 2].max()), int(bx[:, 3].max())
        return (ul, vl, max(uh - ul + 1, 1), max(vh - vl + 1, 1))

    def __call__(self, x: torch.Tensor, roi: Optional[Sequence[int]] = None,
                 settings: Optional[SilhouetteSettings] = None, offset_px: Optional[torch.Tensor] = None):
        s = settings or self.settings
        if x.ndim != 2:
            raise InputError(f"pose vectors: shape {tuple(x.shape)}; expected (B, {self.layout.dim})")
        if roi is None:
            roi = self.screen_roi(x, s.margin_sigmas * s.sigma_px + 2.0)
        a, b, r = self.primitives(x)
        dev = self.device
        return soft_silhouette(a.to(dev), b.to(dev), r.to(dev), self.K.to(x.dtype), roi, s, offset_px,
                               self.model.cylinders), tuple(roi)

    def full_image(self, x: torch.Tensor, settings: Optional[SilhouetteSettings] = None) -> torch.Tensor:
        """Silhouette (B, H, W) over the whole image."""
        return self(x, (0, 0, self.width, self.height), settings)[0]

    def mask(self, x, offset_px: float = 0.0) -> np.ndarray:
        """The silhouette of one pose vector ``x`` (D,) as a bool (H, W) mask: the pixels whose soft
        value exceeds 0.5 (float64, no gradient); ``offset_px``: an edge offset [px] that grows (+) or
        shrinks (−) it."""
        from snaketrack.tracker.render import render_kernel

        with torch.no_grad():
            xt = torch.as_tensor(x, dtype=torch.float64)[None]
            if self.device.type == "cpu" and render_kernel.available():
                # the compiled kernel over the robot's screen box, the same silhouette (tests/tracker)
                s = self.settings
                roi = self.screen_roi(xt, s.margin_sigmas * s.sigma_px + abs(float(offset_px)) + 2.0)
                a, b, r = self.primitives(xt)
                sil = soft_silhouette_compiled(a, b, r, self.K, roi, s, float(offset_px), self.model.cylinders)
                out = np.zeros((self.height, self.width), bool)
                u0, v0, w, h = roi
                out[v0:v0 + h, u0:u0 + w] = sil[0].numpy() > 0.5
                return out
            b = None if offset_px == 0.0 else torch.tensor([float(offset_px)], dtype=torch.float64)
            sil, _ = self(xt, (0, 0, self.width, self.height), offset_px=b)
            return sil[0].cpu().numpy() > 0.5

    def with_settings(self, **kw) -> "SilhouetteRenderer":
        return SilhouetteRenderer(self.robot, self.K.numpy(), self.width, self.height, self.model,
                                  replace(self.settings, **kw), self.device)
