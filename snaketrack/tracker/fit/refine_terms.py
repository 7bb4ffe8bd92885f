"""The Gauss–Newton terms that refinement adds to the silhouette's pixel residuals.

- **Coverage** (:func:`coverage_terms`): model-to-data ICP on the mask's skeleton. The pixel loss has
  no reach beyond the model's edge, so a stretch of mask cut off by an occluder (the head beyond a
  post) would not attract the model; skeleton samples outside the model's body pull the nearest point
  of its axis towards them.
- **Up and ground priors** (:func:`ground_terms`): the body's plane normal pulled to the world's up
  direction, and the base's height along up to the ground's.

Each returns ``(H (nP, nP), g (nP,), cost)`` in the LM parameters ``[q, δ, t(, b)]`` of
:mod:`snaketrack.tracker.fit.refine`, to be added to the normal equations.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np
import torch

from snaketrack.models.chain import body_normal
from snaketrack.models.robot import Robot
from snaketrack.models.rotations import axis_angle_to_matrix_np

if TYPE_CHECKING:
    from snaketrack.tracker.config import RefineConfig


def coverage_terms(config: "RefineConfig", K: np.ndarray, radii: np.ndarray, pts: torch.Tensor, G: torch.Tensor,
                   skel: np.ndarray, nP: int):
    """Gauss–Newton terms (H (nP, nP), g (nP,), cost) of the coverage term (``cover_weight``).

    pts (M, 2, 3) primitive end points [m], G (M, 2, 3, D) their Jacobian; skel (n, 2) mask skeleton
    samples [px]; K (3, 3) intrinsics [px]; radii (M,) the primitives' radii [m]. Each sample's nearest
    point on the projected primitive axes (end points interpolated in 3-D at the image parameter) is
    pulled to it by the distance beyond the body's image radius plus ``cover_margin_px``; samples
    farther than ``cover_max_px`` are ignored.
    """
    cfg = config
    P = pts.detach().numpy().astype(float)
    A, B = P[:, 0], P[:, 1]
    ok = (A[:, 2] > 1e-6) & (B[:, 2] > 1e-6)
    Hc = torch.zeros(nP, nP, dtype=torch.float64)
    gc = torch.zeros(nP, dtype=torch.float64)
    if not ok.any():
        return Hc, gc, 0.0
    ua = (A @ K.T)[:, :2] / A[:, 2:3]
    ub = (B @ K.T)[:, :2] / B[:, 2:3]
    d = ub - ua  # (M, 2)
    rel = skel[:, None, :] - ua[None]  # (n, M, 2)
    dd = np.maximum((d * d).sum(-1), 1e-12)
    lam = np.clip((rel * d[None]).sum(-1) / dd[None], 0.0, 1.0)  # (n, M)
    near = ua[None] + lam[..., None] * d[None]
    dist = np.linalg.norm(skel[:, None, :] - near, axis=-1)
    dist[:, ~ok] = np.inf
    m = np.argmin(dist, axis=1)
    idx = np.arange(len(skel))
    dmin = dist[idx, m]
    lm = lam[idx, m]
    X = (1 - lm)[:, None] * A[m] + lm[:, None] * B[m]  # (n, 3) the nearest axis point in 3-D
    r_px = K[0, 0] * radii[m] / X[:, 2] + cfg.cover_margin_px
    active = (dmin > r_px) & (dmin < cfg.cover_max_px)
    if not active.any():
        return Hc, gc, 0.0
    ia = np.nonzero(active)[0]
    Xa, ma, la = X[ia], m[ia], lm[ia]
    uv = (Xa @ K.T)[:, :2] / Xa[:, 2:3]
    e_full = uv - skel[ia]  # (k, 2): model point minus sample
    nrm = np.maximum(np.linalg.norm(e_full, axis=1, keepdims=True), 1e-9)
    ra = r_px[ia, None]
    e = e_full * (1.0 - ra / nrm)  # beyond the body's edge
    fx, fy = K[0, 0], K[1, 1]
    Z = Xa[:, 2]
    dproj = np.zeros((len(ia), 2, 3))
    dproj[:, 0, 0] = fx / Z
    dproj[:, 0, 2] = -fx * Xa[:, 0] / Z ** 2
    dproj[:, 1, 1] = fy / Z
    dproj[:, 1, 2] = -fy * Xa[:, 1] / Z ** 2
    Gn = G.detach().numpy().astype(float)
    dX = (1 - la)[:, None, None] * Gn[ma, 0] + la[:, None, None] * Gn[ma, 1]  # (k, 3, D)
    Jf = np.einsum("kij,kjd->kid", dproj, dX)  # (k, 2, D): of the full offset
    # e = e_f (1 − r/|e_f|): de = (1 − r/|e_f|) de_f + r e_f e_fᵀ de_f / |e_f|³ (r held fixed)
    u = e_full / nrm
    Je = ((1.0 - ra / nrm)[..., None] * Jf
          + (ra / nrm)[..., None] * u[:, :, None] * np.einsum("ki,kid->kd", u, Jf)[:, None, :])
    Je = Je.reshape(-1, Gn.shape[-1])  # (2k, D)
    ev = e.reshape(-1)
    w = cfg.cover_weight
    D = Gn.shape[-1]
    Hc[:D, :D] = torch.as_tensor(w * Je.T @ Je)
    gc[:D] = torch.as_tensor(w * Je.T @ ev)
    return Hc, gc, float(w * ev @ ev)


def ground_terms(robot: Robot, config: "RefineConfig", theta: torch.Tensor, R_ref: torch.Tensor,
                 up_t: Optional[torch.Tensor], height: Optional[float], nP: int, normal=None):
    """Gauss–Newton terms (H (nP, nP), g (nP,), cost) of the up prior ‖z − up‖²/σ² (z: the base's
    z axis, or the body's normal with ``up_on_body``) and the ground prior (up·t − height)²/σ_h²
    on the base's translation t; ``up_t`` None: no terms.

    theta (D,): the local parameters ``[q, δ, t]`` around the base rotation ``R_ref`` (3, 3); ``up_t`` (3,):
    the unit up direction; ``height`` [m] or None (no ground prior); ``nP``: parameters (D, or D + 1 with
    the edge offset); ``normal``: ``(q, R0) -> (n, ∂n/∂[q, δ])`` in place of
    :func:`~snaketrack.models.chain.body_normal` (its compiled twin, ``CompiledBody.normal``).
    """
    cfg = config
    J = robot.dof
    D = J + 6
    Hu = np.zeros((nP, nP))
    gu = np.zeros(nP)
    if up_t is None:
        return torch.from_numpy(Hu), torch.from_numpy(gu), 0.0
    up = up_t.numpy()  # numpy: a few 3-vectors, where torch's per-call overhead would dominate
    th = theta.numpy()
    w_up = 1.0 / cfg.up_prior_rad ** 2
    w_h = 0.0 if height is None or cfg.height_prior_m <= 0 else 1.0 / cfg.height_prior_m ** 2
    ch = 0.0
    if w_h > 0:
        e = float(up @ th[J + 3:D]) - height
        Hu[J + 3:D, J + 3:D] = w_h * np.outer(up, up)
        gu[J + 3:D] = w_h * e * up
        ch = w_h * e * e
    R0 = axis_angle_to_matrix_np(th[J:J + 3]) @ R_ref.numpy()
    if cfg.up_on_body:
        z, Jz = body_normal(robot, th[:J], R0) if normal is None else normal(th[:J], R0)
        sl = slice(0, J + 3)
    else:
        z = R0[:, 2]
        Jz = -np.array([[0.0, -z[2], z[1]], [z[2], 0.0, -z[0]], [-z[1], z[0], 0.0]])  # ∂z_b/∂δ = −[z_b]× δ
        sl = slice(J, J + 3)
    c = z - up
    Hu[sl, sl] = w_up * (Jz.T @ Jz)
    gu[sl] = w_up * (Jz.T @ c)
    return torch.from_numpy(Hu), torch.from_numpy(gu), w_up * float(c @ c) + ch
