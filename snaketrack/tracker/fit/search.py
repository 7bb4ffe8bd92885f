"""The pose search: a robot's pose from its mask alone (the first frame, and re-acquisition).

:class:`PoseSearch` turns the mask's axis into starts and refines the best of them:

1. **Axis.** The mask's largest component is skeletonised and its longest path taken as the robot's
   axis (:func:`snaketrack.tracker.fit.axis.mask_axes`; other components of at least
   ``init_join_min_frac`` of its area are chained on, and with ``init_join_max_gaps`` the axis is also
   joined across wider gaps, each distinct axis once).
2. **Starts** (:meth:`PoseSearch.initial_poses`). For a set of ground-plane hypotheses (plane normals
   tilted 0°, 35° and 60° from the optical axis in six directions, or, given the up direction, the
   ground's normal and six normals 10° off it) and both head/tail directions, the path is lifted onto
   the plane at the depth that makes its length the robot's plus its end caps, cut into links
   (:func:`chain_from_polyline`), and turned into a pose vector.
3. **Ranking.** Each start gets the edge offset that explains the mask's area
   (:meth:`PoseSearch.offset_guess`); the starts are ranked by IoU and the best
   ``init_candidates`` refined by LM with a coarse-to-fine edge (``init_sigma_schedule``), then a few
   steps at the tracking edge. The best refined IoU wins.

The search draws with the own analytic renderer whatever the tracker's renderer: it ranks hypotheses (tens of
renders and over a hundred linearisations per search). With another renderer its winner takes the same closing
steps again with that renderer (``final_refiner``), which gives the result's pose and IoU.

Head and tail look alike: given a reference pose (``orient``), only starts read the same way are
tried, and a refined start that ends up read the other way is dropped unless none keeps the reading.
Settings: :class:`snaketrack.tracker.tracker.TrackerConfig` (``init_*``, ``keep_reading_results``).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Optional

import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.models.kinematics import forward_kinematics
from snaketrack.models.robot import Robot
from snaketrack.models.rotations import axis_rotation_np, perpendicular_np
from snaketrack.tracker.fit.axis import mask_axes
from snaketrack.tracker.fit.observation import Observation, observe
from snaketrack.tracker.fit.occlusion import far_weighting_on
from snaketrack.tracker.fit.refine import Refiner, RefineResult
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.state import StateLayout

if TYPE_CHECKING:
    from snaketrack.tracker.config import TrackerConfig


class PoseSearch:
    """Multi-start search for the pose of a mask (see module doc).

    renderer: the own analytic :class:`SilhouetteRenderer` the starts are ranked and refined with; config: the
    session's :class:`TrackerConfig`; refiner: a :class:`Refiner` of ``renderer`` with the tracking settings (it
    ranks the starts); search_refiner: one with the searches' priors (``init_out_of_plane_prior_rad``).
    ``wide_refiner``: ``search_refiner`` with the coarse-to-fine edge schedule and loose priors, also what a
    re-acquisition refines with. final_refiner: the searches' priors on the tracker's renderer, which refines
    the winner when it is not ``search_refiner`` (the default).
    """

    def __init__(self, renderer: SilhouetteRenderer, config: "TrackerConfig", refiner: Refiner,
                 search_refiner: Refiner, final_refiner: Optional[Refiner] = None):
        self.renderer, self.config = renderer, config
        self.robot: Robot = renderer.robot
        self.layout: StateLayout = renderer.layout
        self.refiner, self.search_refiner = refiner, search_refiner
        self.final_refiner = final_refiner if final_refiner is not None else search_refiner
        self.wide_refiner = Refiner(renderer, replace(search_refiner.config, sigma_schedule=config.init_sigma_schedule,
                                                      prior_q=2.0, prior_rot=2.0, prior_trans=2.0))
        self._axes_cache: Optional[tuple[np.ndarray, list[np.ndarray]]] = None

    def run(self, mask: np.ndarray, obs: Optional[Observation] = None, extra=(), orient=None,
            up: Optional[np.ndarray] = None) -> Optional[RefineResult]:
        """The best :class:`RefineResult` of the search on ``mask`` (H, W) bool.

        ``obs``: the mask's observation without the occlusion weighting (made here when None or when the
        occlusion weighting is on); ``extra``: further starts, pose vectors (D,); ``orient``: a pose vector
        (D,) whose reading of the chain the starts keep (see module doc); ``up``: the up direction (3,)
        or None.
        """
        cfg = self.config
        r = cfg.refine
        if obs is None or far_weighting_on(r.far_px, r.far_weight):
            obs = observe(mask, r, far=False)
        starts = self.initial_poses(mask, up)
        if orient is not None:
            tail_o, head_o = self.ends(orient)

            def same_reading(x) -> bool:
                tail = self.ends(x)[0]
                return bool(np.linalg.norm(tail - tail_o) <= np.linalg.norm(tail - head_o))

            starts = [x for x in starts if same_reading(x)]
        starts = starts + [np.asarray(e, float) for e in extra]
        if not starts:
            raise InputError("initialisation: the mask has no usable skeleton; expected a visible robot")
        b0 = [self.offset_guess(x, mask) for x in starts]
        scored = sorted(((self.refiner.evaluate(x, obs, b0[i], sigma=2.0)[1], i) for i, x in enumerate(starts)),
                        reverse=True)
        wide = self.wide_refiner
        best = fallback = None
        for _, i in scored[: cfg.init_candidates]:
            res = wide.refine(starts[i], obs, steps=cfg.init_refine_steps, offset0=b0[i], up=up)
            res = self.search_refiner.refine(res.x, obs, offset0=res.offset_px, steps=4, up=up)
            if orient is not None and cfg.keep_reading_results and not same_reading(res.x):
                if fallback is None or res.iou > fallback.iou:
                    fallback = res
                continue
            if best is None or res.iou > best.iou:
                best = res
        best = best if best is not None else fallback
        if best is not None and self.final_refiner is not self.search_refiner:
            best = self.final_refiner.refine(best.x, obs, offset0=best.offset_px, steps=4, up=up)
        return best

    def ends(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tail (the base's origin) and head points (3,) [m], camera frame, of pose ``x`` (D,)."""
        xt = torch.as_tensor(np.asarray(x, float))[None]
        q, R0, t0 = self.layout.to_fk(xt)
        return t0[0].numpy(), forward_kinematics(self.robot, q, R0, t0).head[0].numpy()

    def initial_poses(self, mask: np.ndarray, up: Optional[np.ndarray] = None) -> list[np.ndarray]:
        """Candidate pose vectors (D,) from the axes of ``mask`` (H, W) (see module doc); ``up``: the up
        direction (3,) or None."""
        out = []
        for path in self._axes(mask):
            if len(path) >= 3:
                out.extend(self._poses_from_path(path, up))
        return out

    def offset_guess(self, x: np.ndarray, mask: np.ndarray) -> float:
        """Edge offset [px] that explains the mask's area with the model at pose ``x`` (D,).

        ``(mask area − model area) / perimeter``, the perimeter taken as twice the
        length of the mask's axis, clipped to ±4 px: a mask eroded by 3 px starts
        the search eroded rather than leaving the depth to absorb it.
        """
        axes = self._axes(mask)
        axis_len = float(np.linalg.norm(np.diff(axes[0], axis=0), axis=1).sum()) if axes else 0.0
        if axis_len <= 0:
            return 0.0
        area_model = float(np.count_nonzero(self.renderer.mask(x)))
        area_mask = float(np.count_nonzero(mask))
        return float(np.clip((area_mask - area_model) / (2.0 * axis_len), -4.0, 4.0))

    def _axes(self, mask: np.ndarray) -> list[np.ndarray]:
        """The search's mask axes (:func:`mask_axes` with ``init_join_max_gaps``; the first is the usual
        one), computed once per mask: the starts and the offset guess both use them."""
        cached = self._axes_cache
        if cached is None or cached[0] is not mask:
            cfg = self.config
            cached = (mask, mask_axes(mask, cfg.init_join_max_gaps, extend=True, join_min_frac=cfg.init_join_min_frac))
            self._axes_cache = cached
        return cached[1]

    def _poses_from_path(self, path: np.ndarray, up: Optional[np.ndarray]) -> list[np.ndarray]:
        """Candidate pose vectors (D,) from one mask axis ``path`` (n, 2) [px] (see :meth:`initial_poses`)."""
        tail_ext, head_ext = self._end_extents()
        K = self.renderer.K.numpy()
        rays = np.linalg.solve(K, np.vstack([path[:, 0], path[:, 1], np.ones(len(path))])).T
        # ground-plane hypotheses: normals (pointing away from the camera) tilted from the optical axis,
        # or, when the up direction is known, from the ground's own normal (the prior pulls them back)
        axis = np.array([0.0, 0.0, 1.0]) if up is None else -up / np.linalg.norm(up)
        if up is None:
            e1, e2 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
        else:
            e1, e2 = perpendicular_np(axis)
        normals = [axis]
        tilts = self.config.init_plane_tilts if up is None else self.config.init_up_tilts
        for tilt_deg, n_az in tilts:
            tilt = math.radians(tilt_deg)
            for az in np.arange(n_az) * 2 * math.pi / n_az:
                normals.append(math.cos(tilt) * axis + math.sin(tilt) * (math.cos(az) * e1 + math.sin(az) * e2))
        out = []
        for n in normals:
            nd = rays @ n
            if (nd <= 1e-3).any():
                continue
            X = rays / nd[:, None]
            seg = np.linalg.norm(np.diff(X, axis=0), axis=1).sum()
            if seg <= 0:
                continue
            # the path runs from one end of the silhouette to the other: the chain plus its end caps
            X *= (self.robot.total_length + tail_ext + head_ext) / seg
            for Xd in (X, X[::-1]):
                x = chain_from_polyline(self.robot, self.layout, _trim_start(Xd, tail_ext), -n)
                if x is not None:
                    out.append(x)
        return out

    def _end_extents(self) -> tuple[float, float]:
        """How far [m] the silhouette model reaches behind the tail's origin and past the head link's end."""
        mdl = self.renderer.model
        L = float(self.robot.lengths[-1])
        last = self.robot.n_links - 1
        tail = max([float(r - min(a[0], b[0])) for k, a, b, r in zip(mdl.link, mdl.a_local, mdl.b_local, mdl.radius)
                    if k == 0] or [0.0])
        head = max([float(max(a[0], b[0]) + r - L) for k, a, b, r in
                    zip(mdl.link, mdl.a_local, mdl.b_local, mdl.radius) if k == last] or [0.0])
        return max(tail, 0.0), max(head, 0.0)


def chain_from_polyline(robot: Robot, layout: StateLayout, X: np.ndarray, up: np.ndarray) -> Optional[np.ndarray]:
    """A pose vector (D,) whose links' joints lie on the polyline ``X`` (n, 3) [m], camera frame, from its
    first point, with the body's plane normal ``up`` (3,): each joint where the polyline crosses the sphere
    of the link's length around the last joint (past the polyline's end, straight on); the yaw joints
    take the angles between successive links, the other joint axes 0, clipped to the joint limits.
    None when the first link is parallel to ``up``."""
    lengths = robot.lengths
    pts = [X[0]]
    k = 0
    for L in lengths:
        p = pts[-1]
        while k < len(X) - 1 and np.linalg.norm(X[k + 1] - p) < L:
            k += 1
        if k < len(X) - 1:
            a, b = X[k], X[k + 1]  # the crossing lies on segment a→b: solve |a + s(b−a) − p| = L
            d = b - a
            f = a - p
            A, B, C = d @ d, 2 * f @ d, f @ f - L * L
            disc = max(B * B - 4 * A * C, 0.0)
            s = (-B + math.sqrt(disc)) / (2 * A) if A > 0 else 0.0
            pts.append(a + np.clip(s, 0, 1) * d)
        else:
            dirv = (pts[-1] - pts[-2]) if len(pts) > 1 else (X[-1] - X[0])
            pts.append(p + L * dirv / max(np.linalg.norm(dirv), 1e-9))
    P = np.array(pts)
    u = np.diff(P, axis=0)
    u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-9)
    z = up / np.linalg.norm(up)
    x0 = u[0] - (u[0] @ z) * z
    if np.linalg.norm(x0) < 1e-6:
        return None
    x0 /= np.linalg.norm(x0)
    R0 = np.stack([x0, np.cross(z, x0), z], axis=1)
    q = []
    R = R0
    for i, joint in enumerate(robot.joints):
        ul = R.T @ u[i + 1]  # next link's direction in link i's frame
        yaw = math.atan2(ul[1], ul[0])
        for ax in joint.axes:
            if ax == "z":
                q.append(yaw)
            else:
                q.append(0.0)
        R = R @ axis_rotation_np("z", yaw)
    q = np.clip(np.array(q), robot.lower, robot.upper)
    return layout.pack(q, R0, P[0])


def _trim_start(X: np.ndarray, length: float) -> np.ndarray:
    """The polyline X (n, 3) without its first ``length`` [m] of arc length."""
    if length <= 0:
        return X
    seg = np.linalg.norm(np.diff(X, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] <= length:
        return X
    k = int(np.searchsorted(s, length, side="right")) - 1
    f = (length - s[k]) / max(seg[k], 1e-12)
    start = X[k] + f * (X[k + 1] - X[k])
    return np.concatenate([start[None], X[k + 1:]])
