"""Refinement of a predicted state against an observed mask.

Two optimisers over the same silhouette (:mod:`snaketrack.tracker.render.silhouette`):

- ``method="lm"`` (default; docs/design.md, "The tracker's refinement"):
  Levenberg–Marquardt on per-pixel residuals ``r_p = w_p (o_p − m_p)``
  (``o`` the soft silhouette, ``m`` the observed mask), with the Jacobian
  from one backward pass (:func:`render_with_jacobian`), a weak Gaussian
  prior towards the prediction, and the parameters
  ``[q, δ, t, b]``: joint angles, a rotation increment ``δ`` applied on the
  left of the current base rotation (``R0 = exp(δ) R_ref``, re-centred
  after each accepted step), the base translation and, with
  ``estimate_offset``, an edge offset ``b`` [px] that lets the model
  silhouette grow or shrink by a constant width. ``b`` absorbs mask bias
  (erosion/dilation by segmentation) that would otherwise be explained by
  depth: the body is only ~10 px wide, so 1–3 px of bias is 10–60 % of its
  width. ``b`` stays above ``−offset_floor`` × the smallest projected radius:
  an empty silhouette costs nothing, so against a mask eroded to fragments
  an unbounded ``b`` shrinks the body away and the fit says nothing. The
  edge softness follows ``sigma_schedule`` (coarse to fine: a wide edge
  attracts from farther away, the final sharp edge removes the soft-union
  depth bias). The image terms are evaluated on the grid of
  ``budget_width_px`` (blocks of k × k pixels for a wide body), and the
  stages at σ ≥ ``coarse_sigma_px`` on blocks twice as wide, at the same
  softness in the image (:class:`GridLevel`).
- ``method="adam"``: the paper's refinement, Adam (lr 0.005) on the summed
  squared difference ``Σ (o − m)²`` over the pose vector, ``steps`` steps.

Losses: ``loss="ssd"`` (``w_p = 1``) or ``loss="dt"``: the residual of a
wrong pixel is weighted by its distance to the observed mask's boundary
(``w_p = 1 + dt_gain · min(D_p, dt_clip_px)``; ``D`` from the distance
transform of the mask and of its complement), so far-off pixels pull harder.

The observed mask comes prepared as an :class:`~snaketrack.tracker.fit.observation.Observation`
(with the occlusion weighting of :mod:`snaketrack.tracker.fit.occlusion`); the coverage term and the
up and ground priors are in :mod:`snaketrack.tracker.fit.refine_terms`. The velocity update after
refinement lives with the filter (:func:`snaketrack.tracker.filter.velocity_update`).

Units: radians, metres, pixels (``b``, ``σ``); the cost is in pixels
(sum of squared weighted residuals).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Optional

import cv2
import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.models.chain import point_jacobian
from snaketrack.models.chain_kernel import CompiledBody, CompiledChain
from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.rotations import axis_angle_to_matrix, axis_angle_to_matrix_np, matrix_to_axis_angle_np
from snaketrack.tracker.config import RefineConfig
from snaketrack.tracker.fit.coverage_kernel import coverage_terms_compiled
from snaketrack.tracker.fit.observation import Observation
from snaketrack.tracker.fit.refine_terms import coverage_terms, ground_terms
from snaketrack.tracker.render.bands import primitive_boxes
from snaketrack.tracker.render.silhouette import (
    SilhouetteRenderer,
    render_with_jacobian,
    render_with_jacobian_compiled,
    soft_silhouette,
    soft_silhouette_compiled,
)
from snaketrack.tracker.state import unwrap_rotvec


@dataclass(frozen=True)
class RefineResult:
    """Refinement outcome for one state.

    x: (D,) refined pose vector; offset_px: fitted edge offset [px];
    cost: final cost (see module doc), per observed-mask pixel;
    iou: hard IoU (silhouette > 0.5) against the observed mask;
    covariance: (D, D) Gauss–Newton covariance of the pose vector (LM;
        residual variance × (JᵀJ + prior)⁻¹), or None;
    iterations: iterations run.
    """

    x: np.ndarray
    offset_px: float
    cost: float
    iou: float
    covariance: Optional[np.ndarray] = None
    iterations: int = 0
    info: dict = field(default_factory=dict)


class Refiner:
    """Refines pose vectors against observed masks with a :class:`SilhouetteRenderer`.

    The per-pixel work (silhouettes, their Jacobian rows, the residuals and ``JᵀJ``) runs on the
    renderer's ``device``, the observation moved there once per call; the pose, the kinematics and the
    normal equations (a few dozen parameters) stay on the CPU in float64.
    """

    def __init__(self, renderer: SilhouetteRenderer, config: RefineConfig = RefineConfig()):
        self.renderer = renderer
        self.config = config
        self.robot = renderer.robot
        self.layout = renderer.layout
        self.J = self.layout.n_joints
        self.K = renderer.K.double()
        self.lower = torch.as_tensor(self.robot.lower, dtype=torch.float64)
        self.upper = torch.as_tensor(self.robot.upper, dtype=torch.float64)
        self._radii = torch.as_tensor(renderer.model.radius, dtype=torch.float64)
        # a renderer of its own geometry (meshes) gives its silhouette and Jacobian itself, on the image's pixels
        self._pose_jacobian = getattr(renderer, "pose_jacobian", None)
        # where the silhouettes and Jacobian rows come back: such a renderer returns them on the CPU
        self.device = torch.device(getattr(renderer, "device", "cpu")) if self._pose_jacobian is None \
            else torch.device("cpu")
        self.core = refine_core(config.core, own_renderer=self._pose_jacobian is None, device=self.device)
        if self.core == "compiled":
            from snaketrack.tracker.render import render_kernel  # deferred: imports numba
            self._kernels = render_kernel
        self._obs: tuple = (None, None)  # the last observation given and its copy on the device
        self._grids: tuple = (None, {})  # the last observation and its GridLevels by block size
        self._render_jac = render_with_jacobian_compiled if self.core == "compiled" else render_with_jacobian
        # the compiled core takes the work around each render compiled too (RefineConfig.helpers)
        self._helpers = self.core == "compiled" and config.helpers == "compiled"
        self._chain = CompiledChain(self.robot, renderer.model) if self._helpers else None
        self._coverage = coverage_terms_compiled if self._helpers else coverage_terms
        self._normal = CompiledBody(self.robot).normal if self._helpers else None

    # -- geometry -------------------------------------------------------
    def _points(self, theta: torch.Tensor, R_ref: torch.Tensor) -> torch.Tensor:
        """Primitive end points (M, 2, 3) for local parameters θ = [q, δ, t] (D,), differentiable (autograd;
        the reference :func:`point_jacobian` is tested against)."""
        J = self.J
        R0 = axis_angle_to_matrix(theta[J:J + 3]) @ R_ref
        pose = forward_kinematics(self.robot, theta[None, :J], R0[None], theta[None, J + 3:])
        a, b = self.renderer.model.place(pose.rotations, pose.origins)
        return torch.stack([a[0], b[0]], dim=1)

    def _points_and_jac(self, theta: torch.Tensor, R_ref: torch.Tensor):
        """End points (M, 2, 3) and their Jacobian (M, 2, 3, D) in θ = [q, δ, t] at δ = 0 (analytic)."""
        J = self.J
        R0 = _exp(theta[J:J + 3]) @ R_ref
        if self._chain is not None:
            return self._chain(theta[:J], R0, theta[J + 3:])
        return point_jacobian(self.robot, self.renderer.model, theta[:J], R0, theta[J + 3:])

    def _offset_floor(self, pts: torch.Tensor) -> float:
        """The lowest edge offset [px] for end points ``pts`` (M, 2, 3) [m, camera frame]: −``offset_floor``
        × the smallest primitive radius projected at its farther end (module doc)."""
        depth = pts[:, :, 2].max(dim=1).values.clamp_min(1e-6)
        return -self.config.offset_floor * float(self.K[0, 0]) * float((self._radii / depth).min())

    def _roi(self, pts: torch.Tensor, sigma: float, offset: float, margin_extra: float = 0.0, level=None):
        K, (W, Hh) = (self.K, (self.renderer.width, self.renderer.height)) if level is None else \
            (level.K, level.size)
        full = (0, 0, W, Hh)
        pad = self.renderer.settings.margin_sigmas * sigma + abs(offset) + self.config.roi_pad_px + margin_extra
        if self._helpers:
            box = self._kernels.roi_box(*(np.ascontiguousarray(a.detach().numpy(), dtype=np.float64) for a in
                                          (pts[:, 0], pts[:, 1], self._radii, K)), W, Hh, float(pad))
            return None if box[2] == 0 else tuple(int(v) for v in box)
        boxes = primitive_boxes(pts[None, :, 0], pts[None, :, 1], self._radii, K, full, pad)
        good = boxes[:, 2] >= boxes[:, 0]
        if not good.any():
            return None
        bx = boxes[good]
        ul, vl, uh, vh = int(bx[:, 0].min()), int(bx[:, 1].min()), int(bx[:, 2].max()), int(bx[:, 3].max())
        return (ul, vl, uh - ul + 1, vh - vl + 1)

    def _level(self, pts: torch.Tensor, obs: Observation) -> "GridLevel":
        """The grid LM's image terms are evaluated on (``RefineConfig.budget_width_px``) for end points
        ``pts`` (M, 2, 3) [m]: every k-th pixel's block, k the body's median image width over the budget,
        rounded up; k = 1 (the image itself) for a body as narrow as the budget. A renderer with its own
        ``pose_jacobian`` draws on the same grid (its ``K`` argument)."""
        cfg = self.config
        k = 1
        if cfg.budget_width_px > 0:
            depth = pts[:, :, 2].min(dim=1).values
            front = depth > 1e-3
            if bool(front.any()):
                width = 2.0 * float(self.K[0, 0]) * (self._radii[front] / depth[front])
                k = max(1, int(math.ceil(float(width.median()) / cfg.budget_width_px - 1e-9)))
        return self._grid_level(k, obs)

    def _grid_level(self, k: int, obs: Observation) -> "GridLevel":
        """``obs`` on the grid of k × k blocks, kept for the next call on the same observation (a search
        refines many starts on one, and a refinement's coarse stage and its later ones share it)."""
        if k == 1:
            return GridLevel(1, self.K, (self.renderer.width, self.renderer.height), obs)
        if self._grids[0] is not obs:
            self._grids = (obs, {})
        grids = self._grids[1]
        if k not in grids:
            grids[k] = GridLevel.of(k, self.K, (self.renderer.width, self.renderer.height), obs)
        return grids[k]

    def to_pose_vector(self, theta: torch.Tensor, R_ref: torch.Tensor, reference: np.ndarray) -> np.ndarray:
        J = self.J
        R0 = _exp(theta[J:J + 3]) @ R_ref
        w = matrix_to_axis_angle_np(R0.numpy())
        w = unwrap_rotvec(w, reference[J:J + 3])
        return np.concatenate([theta[:J].numpy(), w, theta[J + 3:].numpy()])

    def _on_device(self, obs: Observation) -> Observation:
        """``obs`` on the device; a search refines many starts against one observation: it is moved once."""
        if self._obs[0] is not obs:
            self._obs = (obs, obs.to(self.device))
        return self._obs[1]

    # -- evaluation -----------------------------------------------------
    def evaluate(self, x: np.ndarray, obs: Observation, offset_px: float = 0.0,
                 sigma: Optional[float] = None) -> tuple[float, float]:
        """(cost per mask pixel, hard IoU) of pose vector ``x`` (D,) against ``obs``."""
        xt = torch.as_tensor(np.asarray(x, float))[None]
        s = replace(self.renderer.settings, sigma_px=sigma or self.config.sigma_px)
        a, b, r = self.renderer.primitives(xt)
        roi = self._roi(torch.stack([a[0], b[0]], 1), s.sigma_px, offset_px)
        if roi is None:
            return float("inf"), 0.0
        dev = self.device
        with torch.no_grad():
            off = torch.tensor([float(offset_px)], dtype=torch.float64)
            if self._pose_jacobian is not None:
                sil = self.renderer(xt, roi, s, off)[0][0]
            elif self.core == "compiled":
                sil = soft_silhouette_compiled(a, b, r, self.K, roi, s, float(offset_px),
                                               self.renderer.model.cylinders)[0]
            else:
                sil = soft_silhouette(a.to(dev), b.to(dev), r, self.K, roi, s, off, self.renderer.model.cylinders)[0]
        return self._cost_iou(sil.reshape(-1), self._on_device(obs), roi)

    def _cost_iou(self, sil: torch.Tensor, obs: Observation, roi) -> tuple[float, float]:
        m = obs.crop(roi, obs.mask)
        w = obs.crop(roi, obs.weight)
        cost = float((w * w * ((sil - m) ** 2 - m * m)).sum()) + float((obs.weight ** 2 * obs.mask).sum())
        hard = (sil > 0.5).double()
        inter = float((hard * m).sum())
        union = float(hard.sum()) + obs.area - inter
        iou = inter / union if union > 0 else 0.0
        return cost / max(obs.area, 1.0), iou

    # -- LM ---------------------------------------------------------------
    def refine(self, x0: np.ndarray, obs: Observation, prior: Optional[np.ndarray] = None,
               offset0: float = 0.0, steps: Optional[int] = None,
               up: Optional[np.ndarray] = None, height: Optional[float] = None) -> RefineResult:
        """Refine pose vector ``x0`` (D,) against ``obs``; ``prior`` (D,) is the prediction (default x0).

        ``up``: (3,) unit vector, the world's up direction in the camera frame
        (from an IMU); the base's z axis is pulled towards it with std
        ``up_prior_rad`` (LM only).
        """
        x0 = np.asarray(x0, float)
        self.layout.check(x0)
        if up is not None:
            up = np.asarray(up, float).reshape(3)
            n = float(np.linalg.norm(up))
            if not np.isfinite(n) or n < 1e-9:
                raise InputError(f"up direction {up.tolist()}: expected a finite non-zero 3-vector")
            up = up / n
        obs = self._on_device(obs)
        if self.config.method == "adam":
            return self._adam(x0, obs, steps)
        if height is not None and (up is None or not np.isfinite(height)):
            raise InputError(f"ground height {height!r}: needs an up direction and a finite value [m]")
        return self._lm(x0, obs, x0 if prior is None else np.asarray(prior, float), offset0, steps, up, height)

    def _lm(self, x0: np.ndarray, obs: Observation, prior: np.ndarray, offset0: float,
            steps: Optional[int], up: Optional[np.ndarray] = None,
            height: Optional[float] = None) -> RefineResult:
        cfg = self.config
        J = self.J
        D = self.layout.dim
        n_iter = cfg.steps if steps is None else steps
        R_ref = torch.from_numpy(axis_angle_to_matrix_np(x0[J:J + 3]))
        # start inside the joint limits: a constant-velocity prediction can overshoot a limit, and
        # every clamped trial step from there is rejected (the track then slides off on its velocity)
        q0 = np.clip(x0[:J], self.robot.lower, self.robot.upper)
        theta = torch.as_tensor(np.concatenate([q0, np.zeros(3), x0[J + 3:]]))
        b = float(offset0) if cfg.estimate_offset else 0.0
        # prior on [q, δ, t] around the prediction, expressed at the current R_ref
        std = np.concatenate([np.full(J, cfg.prior_q), np.full(3, cfg.prior_rot), np.full(3, cfg.prior_trans)])
        R_prior_T = axis_angle_to_matrix_np(prior[J:J + 3]).T
        nP = D + (1 if cfg.estimate_offset else 0)
        # prior information over [q, δ, t, b] (diagonal)
        Pi = np.concatenate([1.0 / std ** 2, [1.0 / cfg.offset_prior_px ** 2]])[:nP]
        lam = cfg.lambda0
        cover = cfg.cover_weight > 0 and obs.skeleton is not None and len(obs.skeleton) > 0

        # the compiled core renders a trial step's silhouette first and its Jacobian rows only when the
        # step's linearisation is used (_Linearisation)
        deferred = {"deferred": True} if self.core == "compiled" else {}
        on_cpu = self.device.type == "cpu"

        def stage_level(sigma):
            # edges at least coarse_sigma_px soft: on blocks twice as wide, at the same softness in the image
            if cfg.coarse_sigma_px > 0 and sigma >= cfg.coarse_sigma_px and self._pose_jacobian is None:
                return self._grid_level(2 * level.k, obs)
            return level

        def linearise(theta, R_ref, b, sigma, points=None):
            pts, G = points if points is not None else self._points_and_jac(theta, R_ref)
            lv = stage_level(sigma)
            c = lv.k // level.k  # LM's σ and b are in the pixels of `level`: in those of `lv`, over c
            roi = self._roi(pts, sigma / c, b / c, level=lv)
            if roi is None:
                return None
            s = replace(self.renderer.settings, sigma_px=sigma / c)
            if self._pose_jacobian is not None:  # on the same grid (_level)
                rj = self._pose_jacobian(theta[:J], _exp(theta[J:J + 3]) @ R_ref, theta[J + 3:], roi, s,
                                         offset_px=b, with_offset=cfg.estimate_offset, tol=cfg.jac_tol / sigma,
                                         K=level.K)
            else:
                ends = pts.to(self.device)  # (M, 2, 3): the per-pixel work runs on the device
                rj = self._render_jac(ends[None, :, 0], ends[None, :, 1], self._radii, lv.K, roi, G, s,
                                      offset_px=b / c, with_offset=cfg.estimate_offset, tol=cfg.jac_tol * c / sigma,
                                      compute_dtype=getattr(torch, cfg.compute_dtype),
                                      image_size=lv.size,
                                      cylinders=self.renderer.model.cylinders, **deferred)
            obs_v = lv.obs
            m = obs_v.crop(roi, obs_v.mask)
            w = obs_v.crop(roi, obs_v.weight)
            r = w * (rj.sil - m)
            a2 = lv.k ** 2  # a coarse pixel stands for k² pixels
            cost_img = a2 * float((r * r).sum() - (w * w * m * m).sum())
            cover_terms = self._coverage(cfg, self.K.numpy(), self._radii.numpy(), pts, G, obs.skeleton, nP) \
                if cover else None
            if cover_terms is not None:
                cost_img += cover_terms[2]

            def normal_equations():
                if on_cpu:  # numpy's products on the CPU take about two thirds of torch's time at these sizes
                    rows = rj.rows.numpy()
                    Jw, rw = rj.jac.numpy() * w.numpy()[rows, None], r.numpy()[rows]
                else:
                    Jw, rw = rj.jac * w[rj.rows, None], r[rj.rows]
                if c > 1 and cfg.estimate_offset:
                    Jw[:, -1] /= c  # ∂/∂b of the offset b / c drawn
                H, g = a2 * (Jw.T @ Jw), a2 * (Jw.T @ rw)
                H, g = (torch.from_numpy(H), torch.from_numpy(g)) if on_cpu else (H.cpu(), g.cpu())
                if cover_terms is not None:
                    H, g = H + cover_terms[0], g + cover_terms[1]
                return H, g, rj.rows.numel()

            return _Linearisation(roi, rj.sil, cost_img, normal_equations, lv)

        # LM's own bookkeeping (priors, damping, the step) in numpy: a few dozen operations on vectors of
        # D + 1 per trial step, where torch's per-call overhead would cost more than the arithmetic
        def prior_terms(theta, R_ref, b):
            # residual of the prior in the local parameters (δ measured from the prior rotation)
            th = theta.numpy()
            d = np.zeros(nP)
            d[:J] = th[:J] - prior[:J]
            Rcur = axis_angle_to_matrix_np(th[J:J + 3]) @ R_ref.numpy()
            d[J:J + 3] = matrix_to_axis_angle_np(Rcur @ R_prior_T)
            d[J + 3:D] = th[J + 3:] - prior[J + 3:]
            if cfg.estimate_offset:
                d[D] = b
            return d

        # absolute prior towards 0 on the joint coordinates that bend the body out of its plane
        # (every axis but yaw: the pitch of a yaw–pitch joint, a pitch joint between yaw joints):
        # a robot on the ground bends little out of its plane, and a silhouette cannot tell a
        # rolled base with swapped yaw/pitch apart
        Wb = np.zeros(nP)
        k = 0
        for joint in self.robot.joints:
            for axis in joint.axes:
                if axis != "z" and cfg.out_of_plane_prior_rad > 0:
                    Wb[k] = 1.0 / cfg.out_of_plane_prior_rad ** 2
                k += 1

        def absolute(theta):
            v = np.zeros(nP)
            v[:J] = theta.numpy()[:J]
            return v

        up_t = None if up is None else torch.as_tensor(up)

        def up_terms(theta, R_ref):
            Hu, gu, cu = ground_terms(self.robot, cfg, theta, R_ref, up_t, height, nP, self._normal)
            return Hu.numpy(), gu.numpy(), cu

        it_done = 0
        # the floor at the start's depth: a refinement moves the body too little to change it
        start = self._points_and_jac(theta, R_ref)
        level = self._level(start[0], obs)
        if level.k > 1:  # the image terms on the coarser grid: b and its prior in that grid's pixels
            b /= level.k
            if cfg.estimate_offset:
                Pi[D] *= level.k ** 2
        b_floor = self._offset_floor(start[0]) / level.k if cfg.estimate_offset else 0.0
        b = max(b, b_floor)
        lin = linearise(theta, R_ref, b, cfg.sigma(0), start)
        if lin is None:
            return RefineResult(x0, b, float("inf"), 0.0, None, 0, {"reason": "off-screen"})
        # the prior and ground terms of the current state, kept until a trial step is accepted
        d, (Hu, gu, cu) = prior_terms(theta, R_ref, b), up_terms(theta, R_ref)
        for it in range(n_iter):
            it_done = it + 1
            sigma = cfg.sigma(it)
            if it > 0 and sigma != cfg.sigma(it - 1):
                relin = linearise(theta, R_ref, b, sigma)
                if relin is None:  # off-screen at the new edge: keep the last linearisation
                    break
                lin = relin
            ab = absolute(theta)
            H = lin.H.numpy() + np.diag(Pi + Wb) + Hu
            g = lin.g.numpy() + Pi * d + Wb * ab + gu
            cost = lin.cost_img + float(Pi @ (d * d)) + float(Wb @ (ab * ab)) + cu
            A = H + lam * np.diag(np.maximum(np.diag(H), 1e-9))
            try:
                step = -np.linalg.solve(A, g)
            except np.linalg.LinAlgError:
                break
            th = theta.numpy()
            new = th.copy()
            new[:J] = np.maximum(np.minimum(th[:J] + step[:J], self.robot.upper), self.robot.lower)
            new[J + 3:] = th[J + 3:] + step[J + 3:D]
            new[J:J + 3] = 0.0
            new_theta = torch.from_numpy(new)
            new_R = torch.from_numpy(axis_angle_to_matrix_np(step[J:J + 3]) @ R_ref.numpy())
            new_b = max(b + float(step[D]), b_floor) if cfg.estimate_offset else 0.0
            new_lin = linearise(new_theta, new_R, new_b, sigma)
            if new_lin is None:
                lam *= 10
                continue
            d2, up2 = prior_terms(new_theta, new_R, new_b), up_terms(new_theta, new_R)
            ab2 = absolute(new_theta)
            new_cost = new_lin.cost_img + float(Pi @ (d2 * d2)) + float(Wb @ (ab2 * ab2)) + up2[2]
            if new_cost < cost:
                theta, R_ref, b, lin = new_theta, new_R, new_b, new_lin
                d, (Hu, gu, cu) = d2, up2
                lam = max(lam / 3, 1e-6)
                if float(np.linalg.norm(step)) < cfg.min_step:
                    break
                if it >= len(cfg.sigma_schedule) and cost - new_cost < cfg.cost_tol_px:
                    break  # converged at the final edge softness
            else:
                lam *= 8
                if lam > 1e6:
                    break
        x = self.to_pose_vector(theta, R_ref, x0)
        sigma_f = cfg.sigma(it_done - 1) if it_done else cfg.sigma(0)
        cost, iou = self._cost_iou(lin.sil, lin.level.obs, lin.roi)
        # covariance: residual variance × inverse information (pose part)
        H = lin.H.numpy() + np.diag(Pi + Wb) + Hu
        dof = max(lin.n * lin.level.k ** 2 - nP, 1)
        s2 = max(lin.cost_img + float((obs.weight ** 2 * obs.mask).sum()), 1.0) / max(obs.area + dof, 1.0)
        try:
            cov = (s2 * np.linalg.inv(H))[:D, :D]
        except np.linalg.LinAlgError:
            cov = None
        return RefineResult(x, b * level.k, cost, iou, cov, it_done,
                            {"sigma": sigma_f, "lambda": lam, "level": lin.level.k})

    # -- Adam (the paper) -------------------------------------------------
    def _adam(self, x0: np.ndarray, obs: Observation, steps: Optional[int]) -> RefineResult:
        cfg = self.config
        n_iter = cfg.steps if steps is None else steps
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([x], lr=cfg.lr)
        s = replace(self.renderer.settings, sigma_px=cfg.sigma_px)
        # a fixed ROI: the prediction's box with room for the motion the steps allow
        a, b, r = self.renderer.primitives(x.detach()[None])
        roi = self._roi(torch.stack([a[0], b[0]], 1), s.sigma_px, 0.0, margin_extra=20.0)
        if roi is None:
            return RefineResult(x0, 0.0, float("inf"), 0.0, None, 0, {"reason": "off-screen"})
        m = obs.crop(roi, obs.mask)
        w = obs.crop(roi, obs.weight)
        for _ in range(n_iter):
            opt.zero_grad()
            if self._pose_jacobian is not None:
                sil = self.renderer(x[None], roi, s)[0][0].reshape(-1)
            else:
                a, b, r = self.renderer.primitives(x[None])
                sil = soft_silhouette(a.to(self.device), b.to(self.device), r, self.K, roi, s,
                                      cylinders=self.renderer.model.cylinders)[0].reshape(-1)
            loss = ((w * (sil - m)) ** 2).sum()
            loss.backward()
            opt.step()
            with torch.no_grad():
                x[:self.J] = torch.maximum(torch.minimum(x[:self.J], self.upper), self.lower)
        xf = x.detach().numpy().copy()
        cost, iou = self.evaluate(xf, obs, 0.0)
        return RefineResult(xf, 0.0, cost, iou, None, n_iter, {})


class _Linearisation:
    """LM's image terms at one state: roi (u0, v0, w, h) and sil (P,) of the render, cost_img [px²] (the
    silhouette's and coverage term's cost), and the normal equations' H (nP, nP), g (nP,) and n (the pixel
    rows with a derivative) from ``normal_equations()``, called when first read; level: the grid it was
    drawn on."""

    def __init__(self, roi, sil: torch.Tensor, cost_img: float, normal_equations, level: "GridLevel"):
        self.roi, self.sil, self.cost_img, self.level = roi, sil, cost_img, level
        self._normal_equations = normal_equations

    @cached_property
    def _Hgn(self) -> tuple:
        return self._normal_equations()

    @property
    def H(self) -> torch.Tensor:
        return self._Hgn[0]

    @property
    def g(self) -> torch.Tensor:
        return self._Hgn[1]

    @property
    def n(self) -> int:
        return self._Hgn[2]


@dataclass(frozen=True)
class GridLevel:
    """The pixel grid of LM's image terms: blocks of k × k image pixels.

    k: block size [px]; K: (3, 3) intrinsics of the block grid (a block's centre is the centre of its
    pixels); size: (width, height) of the grid [blocks]; obs: the observation on the grid (the mask
    averaged over each block, the weight the root mean square of its pixels' weights; the skeleton as
    it was, in image pixels). Each block's residual stands for its k² pixels' (weighted k²).
    """

    k: int
    K: torch.Tensor
    size: tuple[int, int]
    obs: Observation

    @classmethod
    def of(cls, k: int, K: torch.Tensor, size: tuple[int, int], obs: Observation) -> "GridLevel":
        """The grid of k × k blocks over an image of ``size`` (W, H) [px] with intrinsics ``K``."""
        W, H = size
        Wk, Hk = -(-W // k), -(-H // k)
        # block (U, V) holds pixels [kU, kU + k): its centre is pixel kU + (k − 1)/2
        S = torch.tensor([[1.0 / k, 0.0, -(k - 1) / (2.0 * k)], [0.0, 1.0 / k, -(k - 1) / (2.0 * k)],
                          [0.0, 0.0, 1.0]], dtype=torch.float64)
        Kk = S @ K.double()

        m = block_mean(obs.mask, k)
        w = torch.sqrt(block_mean(obs.weight ** 2, k))
        return cls(k, Kk, (Wk, Hk), Observation(m, float(m.sum()), w, obs.skeleton))


def block_mean(a: torch.Tensor, k: int) -> torch.Tensor:
    """Mean of each k × k block of ``a`` (H, W), the image padded with zeros to whole blocks: (⌈H/k⌉, ⌈W/k⌉).

    On the CPU OpenCV's area resize (a fifth of torch's ``avg_pool2d`` time on a 640 × 360 frame); elsewhere,
    and for other dtypes, ``avg_pool2d`` (the reference, tests/tracker/test_refine.py)."""
    H, W = a.shape
    Hk, Wk = -(-H // k), -(-W // k)
    pad = torch.zeros(Hk * k, Wk * k, dtype=a.dtype, device=a.device)
    pad[:H, :W] = a
    if a.device.type == "cpu" and a.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(cv2.resize(pad.numpy(), (Wk, Hk), interpolation=cv2.INTER_AREA))
    return torch.nn.functional.avg_pool2d(pad[None, None], k)[0, 0]


def refine_core(core: str, own_renderer: bool = True, device="cpu") -> str:
    """The core LM renders with, ``"compiled"`` or ``"torch"``, for ``RefineConfig.core``, the tracker's
    renderer and its ``device``: the compiled kernel draws the own renderer's capsules and cylinders on the
    CPU, so with another renderer (``own_renderer`` False: ``pytorch3d``, which gives its silhouette and
    Jacobian itself) or on a GPU ``"auto"`` is ``"torch"`` and ``"compiled"`` an :class:`InputError`."""
    from snaketrack.tracker.render import (
        render_kernel,  # deferred: the module imports without numba (the compiled kernels)
    )

    on_cpu = torch.device(device).type == "cpu"
    if core == "compiled" and not own_renderer:
        raise InputError("refine core 'compiled' draws the own renderer only; use 'auto' or 'torch' with "
                         "--renderer pytorch3d")
    if core == "compiled" and not on_cpu:
        raise InputError(f"refine core 'compiled' runs on the CPU; use 'auto' or 'torch' on {device}")
    if core == "compiled" and not render_kernel.available():
        raise InputError("refine core 'compiled' needs numba (pip install numba)")
    return "compiled" if core == "compiled" or (core == "auto" and own_renderer and on_cpu
                                                and render_kernel.available()) else "torch"


def _exp(v: torch.Tensor) -> torch.Tensor:
    """Rotation matrix (3, 3) of one rotation vector (3,), outside autograd: numpy Rodrigues, which costs a
    twentieth of torch's per-call overhead on a single 3-vector."""
    return torch.from_numpy(axis_angle_to_matrix_np(v.detach().numpy()))

