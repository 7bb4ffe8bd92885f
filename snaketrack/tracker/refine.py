"""Refinement of a predicted state against an observed mask, and the velocity update.

Two optimisers over the same silhouette (:mod:`snaketrack.tracker.render`):

- ``method="lm"`` (**default, chosen by measurement**, docs/tracker.md):
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
  width. The edge softness follows ``sigma_schedule`` (coarse to fine: a
  wide edge attracts from farther away, the final sharp edge removes the
  soft-union depth bias).
- ``method="adam"``: the paper's refinement, Adam (lr 0.005) on the summed
  squared difference ``Σ (o − m)²`` over the pose vector, ``steps`` steps.

Losses: ``loss="ssd"`` (``w_p = 1``) or ``loss="dt"``: the residual of a
wrong pixel is weighted by its distance to the observed mask's boundary
(``w_p = 1 + dt_gain · min(D_p, dt_clip_px)``; ``D`` from the distance
transform of the mask and of its complement), so far-off pixels pull harder.

The velocity update after refinement lives with the filter
(:func:`snaketrack.tracker.filter.velocity_update`).

Units: radians, metres, pixels (``b``, ``σ``); the cost is in pixels
(sum of squared weighted residuals).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

import cv2
import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.rotations import axis_angle_to_matrix
from snaketrack.tracker.render import (
    SilhouetteRenderer,
    render_with_jacobian,
    soft_silhouette,
)
from snaketrack.tracker.state import unwrap_rotvec

METHODS = ("lm", "adam")
LOSSES = ("ssd", "dt")


@dataclass(frozen=True)
class RefineConfig:
    """Refinement settings (defaults: the measured best, docs/tracker.md).

    method: ``"lm"`` or ``"adam"``; loss: ``"ssd"`` or ``"dt"``.
    steps: iterations per frame (LM: accepted or rejected trial steps).
    sigma_schedule: edge softness σ [px] of the first iterations; later
        iterations use ``sigma_px``.
    sigma_px: final edge softness [px].
    estimate_offset: fit the edge offset b [px] (LM only).
    offset_prior_px: std of the prior on b around 0 [px].
    prior_q, prior_rot, prior_trans: std of the prior towards the prediction
        [rad], [rad], [m] per frame. It keeps the poorly observed directions
        put — above all depth, which trades against the edge offset on a
        body ~10 px wide. Measured on the corrupted drone sequence: stds of
        0.5/0.5/0.5 lost the robot (base error 0.64 m), 0.15/0.05/0.02 gave
        0.021 m (docs/notebook/tracker.md, "Measured (how)").
    lambda0: initial LM damping (relative to the diagonal of JᵀJ).
    min_step: stop when the parameter step's norm falls below this.
    cost_tol_px: stop when an accepted step at the final edge softness
        lowered the cost by less than this [px²: squared residuals summed over
        pixels, i.e. about this many pixels' worth]; 0 runs every step.
        Measured (corrupted drone/static planar, 60 frames from the true
        first pose, one thread): 0 → 2 px kept the errors (0.0205 / 0.0194 m,
        0.031 / 0.022 rad → 0.0208 / 0.0186 m, 0.031 / 0.021 rad) and cut
        CPU time per frame by 1.7×; ``steps`` stays the upper bound.
    lr: Adam learning rate (the paper's 0.005).
    dt_gain, dt_clip_px: the distance-transform weighting (``loss="dt"``).
    roi_pad_px: extra pixels around the model's screen box evaluated.
    out_of_plane_prior_rad: std [rad] of an absolute prior towards 0 on the
        second and later axes of multi-axis joints (pitch of arcsnake-4's
        yaw–pitch joints; the simulated gait's pitch wave is 0.15 rad); 0
        turns it off. Measured on drone-arcsnake-s0 (corrupted masks, 100
        frames from the true pose, with the up prior): off 0.094 m / 0.210 rad,
        0.15 rad 0.041 m / 0.066 rad, 0.3 rad lost (0.55 m). (An earlier
        measurement, 0.2 rad worse than off, was on clips in which the
        robot rolled over and over; the simulator now keeps it upright.)
        Tracking now uses 0.05 rad and the searches 0.15 rad
        (``TrackerConfig.init_out_of_plane_prior_rad``): seen from above the
        pitch hardly shows, and the true mean |pitch| (0.06–0.08 rad) was
        below the tracker's pitch error. Arcsnake clips, 300 frames, mask-only
        start, frames 30–299 (docs/notebook/tracker.md): joints 0.059 / 0.102 / 0.090
        → 0.050 / 0.058 / 0.072 rad (drone / static / handheld), base 0.028 /
        0.051 / 0.124 → 0.035 / 0.045 / 0.097 m.
    compute_dtype: dtype of the per-pixel work of LM (``"float32"`` or
        ``"float64"``); the normal equations are always float64.
    cover_weight, cover_max_px, cover_step_px, cover_margin_px: the coverage
        term (model-to-data ICP on the mask's skeleton): samples of the
        observed mask's skeleton every ``cover_step_px`` that lie more than
        ``cover_margin_px`` outside the model's body pull the nearest point
        of the model's axis towards them, residual = their distance beyond
        that [px], weight ``cover_weight`` (0: off); farther than
        ``cover_max_px`` from the axis they are ignored (false blobs). The
        margin keeps a dilated or ragged mask's skeleton spurs out. The pixel loss has no reach
        beyond the edge: a stretch of mask cut off by an occluder (the head
        beyond a post) does not attract the model, which folds away from the gap.
    up_prior_rad: std [rad] of the prior that tilts the normal of the body's
        plane (``up_on_body``; else the base link's z axis) towards the "up" direction passed to
        :meth:`Refiner.refine` (gravity from the camera's IMU or gimbal): a
        robot lies on the ground, and the silhouette of a thin body seen from
        above hardly fixes its plane's tilt, which then trades against depth.
    jac_tol: LM takes the derivative of a (pixel, primitive) pair only where
        its weight ``c (1 − o)`` (coverage times the uncovered rest) exceeds
        this: far outside the edge the derivative is negligible once the fit
        is close. Measured (corrupted masks): from the true pose (static and
        drone planar, 100 frames, one thread) 2e-6 → 1e-2 left errors and
        IoU unchanged to 1e-4 and cut time per frame by about 15 %. Full
        benchmark from the mask alone (6 clips, 2 threads, docs/notebook/tracking.md):
        1e-3 against 1e-2 gave the same planar errors, mean 6.4 against
        7.7 frames/s, and arcsnake base errors 0.261 / 0.219 / 0.030 m
        against 0.273 / 0.172 / 0.062 m (static / handheld / drone): the
        arcsnake's first-frame search ends differently under any small
        change (drone: 0.35 m against 0.04 m over frames 0–29), better on
        one clip and worse on another, so the faster setting is kept.
    far_px, far_weight: occlusion weighting. Observed-mask pixels are all
        trusted, but a model pixel more than ``far_px`` [px] from every mask
        pixel gets weight ``far_weight`` (0: ignored): beyond the mask's
        1–3 px bias and ragged edge, empty image under the model is more
        often an occluder (a post in front of a link) than a pose error,
        and the pixel loss would bend the hidden links out of the gap. The
        prior towards the prediction then holds them; the coverage term and
        the mask's own pixels still pull. The tracker's searches go without
        it (from a wrong start the push out of empty image is what rejects a
        wrong reading). Measured (corrupted masks, 300 frames, mask-only
        start, up direction; docs/notebook/tracker.md, "Occluders and a fixed camera's ground"):
        handheld planar 0.036 m / 0.107 rad → 0.016 m / 0.050 rad, static
        arcsnake 0.28 → 0.18 m, the clips without occluders unchanged.
    height_prior_m: std [m] of the ground prior: with ``refine(..., up=,
        height=)`` the base's height along up (up·t) is pulled to ``height``
        (the tracker's ``ground_window`` gives it for a fixed camera).
    up_on_body: the up prior pulls the body's normal (the normalised mean of
        the links' z axes, :func:`body_normal`) to up in place of the base
        link's z axis. A gait with a pitch wave tilts single links: on the
        simulated arcsnake (static-arcsnake-s44, truth) the base link's z axis
        is 0.110 rad off up on average, the body's normal 0.045 rad, so the
        base-link prior (0.02 rad) bends the pitch joints to hold the first
        link level. On a planar robot every link's z axis is the base's, and
        the two priors are the same. On (rule B, docs/notebook/tracker.md): twelve
        fresh arcsnake clips 0.0312 / 0.0639 → 0.0297 / 0.0556 (base m /
        joints rad), three planar clips unchanged.
    """

    method: str = "lm"
    loss: str = "ssd"
    steps: int = 10
    sigma_schedule: tuple[float, ...] = (2.0, 1.0)
    sigma_px: float = 0.5
    estimate_offset: bool = True
    offset_prior_px: float = 2.0
    prior_q: float = 0.15
    prior_rot: float = 0.05
    prior_trans: float = 0.02
    lambda0: float = 1e-2
    min_step: float = 1e-4
    cost_tol_px: float = 2.0
    lr: float = 0.005
    dt_gain: float = 0.5
    dt_clip_px: float = 20.0
    roi_pad_px: float = 4.0
    compute_dtype: str = "float32"
    out_of_plane_prior_rad: float = 0.05
    up_prior_rad: float = 0.02
    cover_weight: float = 1.0
    cover_max_px: float = 40.0
    cover_step_px: float = 2.0
    cover_margin_px: float = 5.0
    jac_tol: float = 1e-2
    far_px: float = 4.0
    far_weight: float = 0.0
    height_prior_m: float = 0.02
    up_on_body: bool = True

    def __post_init__(self):
        if self.method not in METHODS:
            raise InputError(f"refine method {self.method!r}; expected one of {', '.join(METHODS)}")
        if self.loss not in LOSSES:
            raise InputError(f"refine loss {self.loss!r}; expected one of {', '.join(LOSSES)}")
        if not (isinstance(self.steps, int) and self.steps >= 0):
            raise InputError(f"refine steps = {self.steps!r}; expected a non-negative integer")
        if not self.sigma_px > 0 or any(not s > 0 for s in self.sigma_schedule):
            raise InputError(f"edge softness {self.sigma_px!r}/{self.sigma_schedule!r}; expected positive pixels")
        if not (self.far_px >= 0 and 0.0 <= self.far_weight <= 1.0 and self.height_prior_m >= 0):
            raise InputError(f"far_px {self.far_px!r}, far_weight {self.far_weight!r}, height_prior_m "
                             f"{self.height_prior_m!r}: expected pixels >= 0, a weight in [0, 1], metres >= 0")

    def sigma(self, it: int) -> float:
        return float(self.sigma_schedule[it]) if it < len(self.sigma_schedule) else float(self.sigma_px)


@dataclass(frozen=True)
class Observation:
    """An observed mask prepared for refinement.

    mask: (H, W) float64 tensor of 0/1; area: its pixel count;
    weight: (H, W) residual weights (all ones for ``ssd``; ``far_weight`` on pixels
        more than ``far_px`` [px] from every mask pixel, the occlusion weighting);
    skeleton: (n, 2) pixel coordinates (u, v) of the mask's skeleton, every
        ``step`` px, for the coverage term (None unless asked for).
    """

    mask: torch.Tensor
    area: float
    weight: torch.Tensor
    skeleton: Optional[np.ndarray] = None

    @classmethod
    def from_mask(cls, mask: np.ndarray, loss: str = "ssd", dt_gain: float = 0.5,
                  dt_clip_px: float = 20.0, skeleton_step_px: float = 0.0, far_px: float = 0.0,
                  far_weight: float = 1.0) -> "Observation":
        m = np.asarray(mask) > 0
        if m.ndim != 2:
            raise InputError(f"mask: shape {m.shape}; expected (H, W)")
        skel = _skeleton_samples(m, skeleton_step_px) if skeleton_step_px > 0 else None
        if loss == "dt" and m.any():
            m8 = m.astype(np.uint8)
            d_in = cv2.distanceTransform(m8, cv2.DIST_L2, 3)
            d_out = cv2.distanceTransform(1 - m8, cv2.DIST_L2, 3)
            w = 1.0 + dt_gain * np.minimum(np.maximum(d_in, d_out), dt_clip_px)
        else:
            w = np.ones(m.shape)
        if far_px > 0 and far_weight != 1.0 and m.any():
            w[far_from(m, far_px)] = far_weight
        return cls(torch.as_tensor(m, dtype=torch.float64), float(m.sum()),
                   torch.as_tensor(w, dtype=torch.float64), skel)

    def crop(self, roi, what: torch.Tensor) -> torch.Tensor:
        u0, v0, w, h = roi
        return what[v0:v0 + h, u0:u0 + w].reshape(-1)


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
    """Refines pose vectors against observed masks with a :class:`SilhouetteRenderer`."""

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
        return point_jacobian(self.robot, self.renderer.model, theta[:J], R0, theta[J + 3:])

    def _roi(self, pts: torch.Tensor, sigma: float, offset: float, margin_extra: float = 0.0):
        from snaketrack.tracker.bands import primitive_boxes

        full = (0, 0, self.renderer.width, self.renderer.height)
        pad = self.renderer.settings.margin_sigmas * sigma + abs(offset) + self.config.roi_pad_px + margin_extra
        boxes = primitive_boxes(pts[None, :, 0], pts[None, :, 1], self._radii, self.K, full, pad)
        good = boxes[:, 2] >= boxes[:, 0]
        if not good.any():
            return None
        bx = boxes[good]
        ul, vl, uh, vh = int(bx[:, 0].min()), int(bx[:, 1].min()), int(bx[:, 2].max()), int(bx[:, 3].max())
        return (ul, vl, uh - ul + 1, vh - vl + 1)

    def to_pose_vector(self, theta: torch.Tensor, R_ref: torch.Tensor, reference: np.ndarray) -> np.ndarray:
        J = self.J
        R0 = _exp(theta[J:J + 3]) @ R_ref
        w = rotvec_from_matrix_np(R0.numpy())
        w = unwrap_rotvec(w, reference[J:J + 3])
        return np.concatenate([theta[:J].numpy(), w, theta[J + 3:].numpy()])

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
        with torch.no_grad():
            sil = soft_silhouette(a, b, r, self.K, roi, s, torch.tensor([float(offset_px)], dtype=torch.float64),
                                  self.renderer.model.cylinders)[0]
        return self._cost_iou(sil.reshape(-1), obs, roi)

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
        R_ref = torch.from_numpy(rotvec_to_matrix_np(x0[J:J + 3]))
        # start inside the joint limits: a constant-velocity prediction can overshoot a limit, and
        # every clamped trial step from there is rejected (the track then slides off on its velocity)
        q0 = np.clip(x0[:J], self.robot.lower, self.robot.upper)
        theta = torch.as_tensor(np.concatenate([q0, np.zeros(3), x0[J + 3:]]))
        b = float(offset0) if cfg.estimate_offset else 0.0
        # prior on [q, δ, t] around the prediction, expressed at the current R_ref
        std = np.concatenate([np.full(J, cfg.prior_q), np.full(3, cfg.prior_rot), np.full(3, cfg.prior_trans)])
        R_prior_T = rotvec_to_matrix_np(prior[J:J + 3]).T
        nP = D + (1 if cfg.estimate_offset else 0)
        # prior information over [q, δ, t, b] (diagonal)
        Pi = torch.as_tensor(np.concatenate([1.0 / std ** 2, [1.0 / cfg.offset_prior_px ** 2]])[:nP])
        lam = cfg.lambda0
        cover = cfg.cover_weight > 0 and obs.skeleton is not None and len(obs.skeleton) > 0

        def linearise(theta, R_ref, b, sigma):
            pts, G = self._points_and_jac(theta, R_ref)
            roi = self._roi(pts, sigma, b)
            if roi is None:
                return None
            s = replace(self.renderer.settings, sigma_px=sigma)
            rj = render_with_jacobian(pts[None, :, 0], pts[None, :, 1], self._radii, self.K, roi, G, s,
                                      offset_px=b, with_offset=cfg.estimate_offset, tol=cfg.jac_tol / sigma,
                                      compute_dtype=getattr(torch, cfg.compute_dtype),
                                      image_size=(self.renderer.width, self.renderer.height),
                                      cylinders=self.renderer.model.cylinders)
            m = obs.crop(roi, obs.mask)
            w = obs.crop(roi, obs.weight)
            r = w * (rj.sil - m)
            cost_img = float((r * r).sum() - (w * w * m * m).sum())
            Jw = rj.jac * w[rj.rows, None]
            H = Jw.T @ Jw
            g = Jw.T @ r[rj.rows]
            if cover:
                Hc, gc, cc = self._coverage(pts, G, obs.skeleton, nP)
                H, g, cost_img = H + Hc, g + gc, cost_img + cc
            return dict(roi=roi, sil=rj.sil, H=H, g=g, cost_img=cost_img, n=rj.rows.numel())

        def prior_terms(theta, R_ref, b):
            # residual of the prior in the local parameters (δ measured from the prior rotation)
            d = torch.zeros(nP, dtype=torch.float64)
            d[:J] = theta[:J] - torch.as_tensor(prior[:J])
            Rcur = rotvec_to_matrix_np(theta[J:J + 3].numpy()) @ R_ref.numpy()
            d[J:J + 3] = torch.from_numpy(rotvec_from_matrix_np(Rcur @ R_prior_T))
            d[J + 3:D] = theta[J + 3:] - torch.as_tensor(prior[J + 3:])
            if cfg.estimate_offset:
                d[D] = b
            return d

        # absolute prior towards 0 on the joint coordinates after a joint's first axis
        # (pitch of a yaw–pitch joint): a robot on the ground bends little out of its
        # plane, and a silhouette cannot tell a rolled base with swapped yaw/pitch apart
        Wb = torch.zeros(nP, dtype=torch.float64)
        k = 0
        for joint in self.robot.joints:
            for j, _ in enumerate(joint.axes):
                if j > 0 and cfg.out_of_plane_prior_rad > 0:
                    Wb[k] = 1.0 / cfg.out_of_plane_prior_rad ** 2
                k += 1

        def absolute(th):
            v = torch.zeros(nP, dtype=torch.float64)
            v[:J] = th[:J]
            return v

        up_t = None if up is None else torch.as_tensor(up)

        def up_terms(theta, R_ref):
            return self._ground_terms(theta, R_ref, up_t, height, nP)

        it_done = 0
        lin = linearise(theta, R_ref, b, cfg.sigma(0))
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
            H = lin["H"] + torch.diag(Pi + Wb) + Hu
            g = lin["g"] + Pi * d + Wb * absolute(theta) + gu
            cost = lin["cost_img"] + float((Pi * d * d).sum()) + float((Wb * absolute(theta) ** 2).sum()) + cu
            A = H + lam * torch.diag(torch.diag(H).clamp_min(1e-9))
            try:
                step = -torch.linalg.solve(A, g)
            except RuntimeError:
                break
            new_theta = theta.clone()
            new_theta[:J] = theta[:J] + step[:J]
            new_theta[:J] = torch.maximum(torch.minimum(new_theta[:J], self.upper), self.lower)
            new_theta[J + 3:] = theta[J + 3:] + step[J + 3:D]
            new_R = _exp(step[J:J + 3]) @ R_ref
            new_theta[J:J + 3] = 0.0
            new_b = b + float(step[D]) if cfg.estimate_offset else 0.0
            new_lin = linearise(new_theta, new_R, new_b, sigma)
            if new_lin is None:
                lam *= 10
                continue
            d2, up2 = prior_terms(new_theta, new_R, new_b), up_terms(new_theta, new_R)
            new_cost = new_lin["cost_img"] + float((Pi * d2 * d2).sum()) + \
                float((Wb * absolute(new_theta) ** 2).sum()) + up2[2]
            if new_cost < cost:
                theta, R_ref, b, lin = new_theta, new_R, new_b, new_lin
                d, (Hu, gu, cu) = d2, up2
                lam = max(lam / 3, 1e-6)
                if float(step.norm()) < cfg.min_step:
                    break
                if it >= len(cfg.sigma_schedule) and cost - new_cost < cfg.cost_tol_px:
                    break  # converged at the final edge softness
            else:
                lam *= 8
                if lam > 1e6:
                    break
        x = self.to_pose_vector(theta, R_ref, x0)
        sigma_f = cfg.sigma(it_done - 1) if it_done else cfg.sigma(0)
        cost, iou = self._cost_iou(lin["sil"], obs, lin["roi"])
        # covariance: residual variance × inverse information (pose part)
        H = lin["H"] + torch.diag(Pi + Wb) + Hu
        dof = max(lin["n"] - nP, 1)
        s2 = max(lin["cost_img"] + float((obs.weight ** 2 * obs.mask).sum()), 1.0) / max(obs.area + dof, 1.0)
        try:
            cov = (s2 * torch.linalg.inv(H))[:D, :D].numpy()
        except RuntimeError:
            cov = None
        return RefineResult(x, b, cost, iou, cov, it_done, {"sigma": sigma_f, "lambda": lam})

    def _ground_terms(self, theta: torch.Tensor, R_ref: torch.Tensor, up_t: Optional[torch.Tensor],
                      height: Optional[float], nP: int):
        """Gauss–Newton terms (H (nP, nP), g (nP,), cost) of the up prior ‖z − up‖²/σ² (z: the base's
        z axis, or the body's normal with ``up_on_body``) and the ground prior (up·t − height)²/σ_h²
        on the base's translation t; ``up_t`` None: no terms."""
        cfg = self.config
        J, D = self.J, self.layout.dim
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
        R0 = rotvec_to_matrix_np(th[J:J + 3]) @ R_ref.numpy()
        if cfg.up_on_body:
            z, Jz = body_normal(self.robot, th[:J], R0)
            sl = slice(0, J + 3)
        else:
            z = R0[:, 2]
            Jz = -np.array([[0.0, -z[2], z[1]], [z[2], 0.0, -z[0]], [-z[1], z[0], 0.0]])  # ∂z_b/∂δ = −[z_b]× δ
            sl = slice(J, J + 3)
        c = z - up
        Hu[sl, sl] = w_up * (Jz.T @ Jz)
        gu[sl] = w_up * (Jz.T @ c)
        return torch.from_numpy(Hu), torch.from_numpy(gu), w_up * float(c @ c) + ch

    def _coverage(self, pts: torch.Tensor, G: torch.Tensor, skel: np.ndarray, nP: int):
        """Gauss–Newton terms (H (nP, nP), g (nP,), cost) of the coverage term (``cover_weight``).

        pts (M, 2, 3) primitive end points [m], G (M, 2, 3, D) their Jacobian;
        skel (n, 2) mask skeleton samples [px]. Each sample's nearest point on
        the projected primitive axes (end points interpolated in 3-D at the
        image parameter) is pulled to it by the distance beyond the body's
        image radius.
        """
        cfg = self.config
        K = self.K.numpy()
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
        r_px = K[0, 0] * self._radii.numpy()[m] / X[:, 2] + cfg.cover_margin_px
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
            a, b, r = self.renderer.primitives(x[None])
            sil = soft_silhouette(a, b, r, self.K, roi, s, cylinders=self.renderer.model.cylinders)[0].reshape(-1)
            loss = ((w * (sil - m)) ** 2).sum()
            loss.backward()
            opt.step()
            with torch.no_grad():
                x[:self.J] = torch.maximum(torch.minimum(x[:self.J], self.upper), self.lower)
        xf = x.detach().numpy().copy()
        cost, iou = self.evaluate(xf, obs, 0.0)
        return RefineResult(xf, 0.0, cost, iou, None, n_iter, {})


_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


def _axis_rotation_np(axis: str, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    if axis == "x":
        return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1.0, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def rotvec_to_matrix_np(w: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation matrix (3, 3) of a rotation vector (3,) [rad] (numpy, one state)."""
    w = np.asarray(w, float)
    th = math.sqrt(float(w @ w))
    Kx = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    if th < 1e-8:
        return np.eye(3) + Kx + 0.5 * Kx @ Kx
    return np.eye(3) + (math.sin(th) / th) * Kx + ((1 - math.cos(th)) / th ** 2) * (Kx @ Kx)


def rotvec_from_matrix_np(R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) [rad], angle in [0, π], of a rotation matrix (3, 3) (numpy, one state).

    Through the quaternion of the best-conditioned of Shepperd's four forms, as
    :func:`snaketrack.models.rotations.matrix_to_axis_angle` (checked against scipy's ``Rotation``).
    """
    m = np.asarray(R, float)
    t = m[0, 0] + m[1, 1] + m[2, 2]
    cands = np.array([
        [1 + t, m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]],
        [m[2, 1] - m[1, 2], 1 + 2 * m[0, 0] - t, m[0, 1] + m[1, 0], m[0, 2] + m[2, 0]],
        [m[0, 2] - m[2, 0], m[0, 1] + m[1, 0], 1 + 2 * m[1, 1] - t, m[1, 2] + m[2, 1]],
        [m[1, 0] - m[0, 1], m[0, 2] + m[2, 0], m[1, 2] + m[2, 1], 1 + 2 * m[2, 2] - t],
    ])  # each row proportional to the quaternion (w, x, y, z)
    norms = np.sqrt((cands * cands).sum(1))
    q = cands[int(np.argmax(norms))]
    q = q / math.sqrt(float(q @ q))
    if q[0] < 0:
        q = -q
    w = min(float(q[0]), 1.0)
    s = math.sqrt(float(q[1:] @ q[1:]))
    scale = 2.0 * math.atan2(s, w) / s if s > 1e-12 else 2.0 / max(w, 1e-12)
    return q[1:] * scale


def _exp(v: torch.Tensor) -> torch.Tensor:
    """Rotation matrix (3, 3) of one rotation vector (3,), outside autograd: numpy Rodrigues, which costs a
    twentieth of torch's per-call overhead on a single 3-vector."""
    return torch.from_numpy(rotvec_to_matrix_np(v.detach().numpy()))


def _chain(robot, q: np.ndarray, R: np.ndarray, p: np.ndarray):
    """The kinematic chain in numpy (as :func:`snaketrack.models.kinematics.forward_kinematics`).

    ``q`` (J,), base rotation ``R`` (3, 3) and origin ``p`` (3,). Returns the link rotations and
    origins (lists of L), and per joint coordinate its axis in the camera frame, its pivot and
    the index of the joint it belongs to (lists of J).
    """
    lengths = np.asarray(robot.lengths, float)
    rots, origins = [R], [p]
    axes, pivots, joint_of = [], [], []
    k = 0
    for i, joint in enumerate(robot.joints):
        end = p + R[:, 0] * lengths[i]
        for ax in joint.axes:
            axes.append(R[:, _AXIS_INDEX[ax]])
            pivots.append(end)
            joint_of.append(i)
            R = R @ _axis_rotation_np(ax, q[k])
            k += 1
        p = end
        rots.append(R)
        origins.append(p)
    return rots, origins, axes, pivots, joint_of


def body_normal(robot, q: np.ndarray, R0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The body's plane normal and its derivatives: ``n`` (3,), the normalised mean of the links'
    z axes, and ``∂n/∂[q, δ]`` (3, J + 3) with the base rotation ``exp(δ) R0`` (δ = 0 here).

    ``∂z_l/∂q_k = a_k × z_l`` for links beyond joint coordinate k (axis ``a_k`` in the camera
    frame), ``∂z_l/∂δ_j = e_j × z_l``.
    """
    q = np.asarray(q, float)
    rots, _, axes, _, joint_of = _chain(robot, q, np.asarray(R0, float), np.zeros(3))
    Z = np.stack([r[:, 2] for r in rots])  # (L, 3)
    J = len(axes)
    S = np.cumsum(Z[::-1], axis=0)[::-1]  # S[i] = Σ_{l ≥ i} z_l; a × Σ z_l = Σ a × z_l
    dm = np.empty((3, J + 3))
    dm[:, :J] = np.cross(np.stack(axes), S[np.asarray(joint_of) + 1]).T
    dm[:, J:] = np.cross(np.eye(3), S[0]).T  # column j: Σ_l e_j × z_l
    dm /= len(Z)
    m = Z.mean(0)
    nm = float(np.linalg.norm(m))
    n = m / nm
    return n, (np.eye(3) - np.outer(n, n)) @ dm / nm


def point_jacobian(robot, model, q: torch.Tensor, R0: torch.Tensor, t0: torch.Tensor):
    """Primitive end points (M, 2, 3) and their derivatives (M, 2, 3, D) [m/rad, m/m].

    With respect to ``[q (J), δ (3), t (3)]`` where the base rotation is
    ``exp(δ) R0`` (δ = 0 here) and ``t`` the base translation, for one state
    (``q`` (J,), ``R0`` (3, 3), ``t0`` (3,)). Closed form for revolute
    joints: ``∂P/∂q_k = a_k × (P − p_k)`` for points beyond joint k (axis
    ``a_k`` and pivot ``p_k`` in the camera frame), ``∂P/∂δ_j = e_j × (P − t)``,
    ``∂P/∂t = I``. The chain (the same as
    :func:`snaketrack.models.kinematics.forward_kinematics`) is evaluated in
    numpy: a few dozen 3×3 products, where torch's per-call overhead would
    dominate. Tested against autograd (tests/tracker/test_refine.py).
    """
    dt = q.dtype
    qn = q.detach().cpu().numpy().astype(float)
    R = R0.detach().cpu().numpy().astype(float)
    p = t0.detach().cpu().numpy().astype(float)
    rots, origins, axes, pivots, joint_of = _chain(robot, qn, R, p)
    rots_a, orig_a = np.stack(rots), np.stack(origins)
    link = np.asarray(model.link)
    Rk, ok = rots_a[link], orig_a[link]
    a = ok + np.einsum("mij,mj->mi", Rk, np.asarray(model.a_local, float))
    b = ok + np.einsum("mij,mj->mi", Rk, np.asarray(model.b_local, float))
    P = np.stack([a, b], axis=1)  # (M, 2, 3)
    M, Jn = P.shape[0], len(axes)
    G = np.zeros((M, 2, 3, Jn + 6))
    if Jn:
        ax_a, piv = np.stack(axes), np.stack(pivots)  # (Jn, 3)
        beyond = link[:, None] >= (np.asarray(joint_of)[None, :] + 1)  # (M, Jn)
        cr = np.cross(ax_a[None, None], P[:, :, None, :] - piv[None, None])  # (M, 2, Jn, 3)
        G[..., :Jn] = np.moveaxis(cr * beyond[:, None, :, None], 2, 3)
    rel = P - t0.detach().cpu().numpy().astype(float)
    G[..., Jn:Jn + 3] = np.moveaxis(np.cross(np.eye(3)[None, None], rel[:, :, None, :]), 2, 3)
    G[..., 0, Jn + 3] = G[..., 1, Jn + 4] = G[..., 2, Jn + 5] = 1.0
    return torch.as_tensor(P, dtype=dt), torch.as_tensor(G, dtype=dt)


def far_from(mask: np.ndarray, dist_px: float) -> np.ndarray:
    """Bool (H, W): the pixels more than ``dist_px`` [px] (Euclidean, pixel centres) from every pixel of the
    non-empty bool ``mask`` (H, W).

    The distance transform runs on the mask's bounding box grown by ``dist_px``: every mask pixel lies in
    it, so the distances there are exact, and every pixel outside it is farther than ``dist_px``.
    """
    m8 = np.asarray(mask, bool).astype(np.uint8)
    x, y, bw, bh = cv2.boundingRect(m8)
    pad = int(math.ceil(dist_px)) + 1
    v0, v1 = max(y - pad, 0), min(y + bh + pad, m8.shape[0])
    u0, u1 = max(x - pad, 0), min(x + bw + pad, m8.shape[1])
    far = np.ones(m8.shape, bool)
    d = cv2.distanceTransform(1 - m8[v0:v1, u0:u1], cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    far[v0:v1, u0:u1] = d > dist_px
    return far


def _skeleton_samples(mask: np.ndarray, step_px: float) -> np.ndarray:
    """Skeleton pixels (n, 2) (u, v) of a bool mask (H, W), thinned to about one every ``step_px``."""
    from skimage.morphology import skeletonize

    if not mask.any():
        return np.zeros((0, 2))
    vv, uu = np.nonzero(mask)
    v0, v1, u0, u1 = vv.min(), vv.max() + 1, uu.min(), uu.max() + 1
    sk = skeletonize(mask[v0:v1, u0:u1])
    sv, su = np.nonzero(sk)
    pts = np.stack([su + u0, sv + v0], 1).astype(float)
    if step_px > 1 and len(pts):
        cell = np.floor(pts / step_px).astype(np.int64)
        _, keep = np.unique(cell[:, 0] * 1_000_003 + cell[:, 1], return_index=True)
        pts = pts[np.sort(keep)]
    return pts
