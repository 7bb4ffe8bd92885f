"""The tracker's settings: :class:`TrackerConfig` (the session) and :class:`RefineConfig` (the
refinement of each frame). One line per field; why each default is what it is: docs/design.md,
"The tracker's refinement"."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from snaketrack.errors import InputError
from snaketrack.tracker.filter import FilterConfig

METHODS = ("lm", "adam")
LOSSES = ("ssd", "dt")
CORES = ("auto", "compiled", "torch")
HELPERS = ("compiled", "numpy")


@dataclass(frozen=True)
class RefineConfig:
    """Refinement settings; the defaults are the measured choices (docs/design.md, "The tracker's refinement").

    method: optimiser, ``"lm"`` (Levenberg–Marquardt) or ``"adam"`` (the paper's); default ``"lm"``.
    loss: pixel residual weighting, ``"ssd"`` (uniform) or ``"dt"`` (by distance to the mask's boundary);
        default ``"ssd"``.
    steps: iterations per frame (LM: accepted or rejected trial steps); default 10.
    sigma_schedule: edge softness σ [px] of the first iterations, coarse to fine; default (2, 1).
    sigma_px: edge softness σ [px] of the later iterations; default 0.5.
    estimate_offset: fit the edge offset b [px] that grows or shrinks the silhouette (LM only); default True.
    offset_prior_px: std of the prior on b around 0 [px]; default 2.
    offset_floor: b is kept above −offset_floor × the body's smallest projected radius [px], so that the
        silhouette cannot shrink to nothing (which explains a mask eroded to fragments at no cost;
        inf: unbounded); default 0.85.
    prior_q: std of the prior towards the prediction on the joint angles [rad]; default 0.15.
    prior_rot: std of the prior towards the prediction on the base rotation [rad]; default 0.05.
    prior_trans: std of the prior towards the prediction on the base translation [m]; default 0.02.
    lambda0: initial LM damping, relative to the diagonal of JᵀJ; default 1e-2.
    min_step: stop when the parameter step's norm falls below this; default 1e-4.
    cost_tol_px: stop when an accepted step at the final edge softness lowers the cost by less than this
        [px²] (0: run every step); default 2.
    lr: Adam's learning rate; default 0.005.
    dt_gain: slope of the ``"dt"`` weighting, 1 + dt_gain × distance [1/px]; default 0.5.
    dt_clip_px: distance at which the ``"dt"`` weighting stops growing [px]; default 20.
    roi_pad_px: extra margin around the model's screen box that is evaluated [px]; default 4.
    compute_dtype: dtype of LM's per-pixel work, ``"float32"`` or ``"float64"`` (the normal equations are
        float64); default ``"float32"``.
    out_of_plane_prior_rad: std of an absolute prior towards 0 on the joint coordinates that bend the body
        out of its plane: every axis but yaw (z) [rad] (0: off); default 0.05.
    up_prior_rad: std of the prior that tilts the body's plane normal towards the ``up`` direction [rad];
        default 0.02.
    cover_weight: weight of the coverage term (:func:`~snaketrack.tracker.fit.refine_terms.coverage_terms`;
        0: off); default 1.
    cover_max_px: skeleton samples farther than this from the model's axis are ignored [px]; default 40.
    cover_step_px: spacing of the mask's skeleton samples [px]; default 2.
    cover_margin_px: samples within this of the model's body do not pull [px]; default 5.
    jac_tol: LM differentiates a (pixel, primitive) pair only where its weight c (1 − o) exceeds this / σ;
        default 1e-2.
    far_px: occlusion weighting: model pixels farther than this from every mask pixel [px] (0: off);
        default 4.
    far_weight: weight of those pixels (0: ignored), in [0, 1]; default 0.
    height_prior_m: std of the ground prior on the base's height along up [m] (0: off); default 0.02.
    up_on_body: the up prior holds the body's normal (mean of the links' z axes) rather than the base
        link's z axis; default True.
    core: how LM renders the silhouette and its Jacobian: ``"compiled"`` (one compiled loop over the
        pixels, :mod:`~snaketrack.tracker.render.render_kernel`, float64), ``"torch"`` (the vectorised torch
        reference, in ``compute_dtype``) or ``"auto"`` (compiled when numba is importable); default
        ``"auto"``.
    helpers: with the compiled core, the work around each render and each frame: ``"compiled"`` (the end
        points' Jacobian, the coverage term, the image box, the body's plane normal for the up prior and
        the tracker's body centre and head point compiled, :mod:`~snaketrack.models.chain_kernel`,
        :mod:`~snaketrack.tracker.fit.coverage_kernel`) or ``"numpy"`` (their numpy and torch references,
        the same values); default ``"compiled"``.
    coarse_sigma_px: LM's stages whose edge softness σ is at least this [px of their grid] are evaluated on
        blocks twice as wide at the same softness in the image (σ / 2 blocks): a soft edge is smooth over
        a block, and those stages' bands, the widest, cost a quarter of their pixels (0: on the grid of
        ``budget_width_px`` throughout); default 2.
    budget_width_px: LM's image terms are evaluated on blocks of k × k pixels, k the body's median image
        width over this, rounded up (0: always on the image's pixels): a body wider than this costs what a
        body this wide costs; default 12 [px].
    """

    method: str = "lm"
    loss: str = "ssd"
    steps: int = 10
    sigma_schedule: tuple[float, ...] = (2.0, 1.0)
    sigma_px: float = 0.5
    estimate_offset: bool = True
    offset_prior_px: float = 2.0
    offset_floor: float = 0.85
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
    core: str = "auto"
    helpers: str = "compiled"
    coarse_sigma_px: float = 2.0
    budget_width_px: float = 12.0

    def __post_init__(self):
        if self.method not in METHODS:
            raise InputError(f"refine method {self.method!r}; expected one of {', '.join(METHODS)}")
        if self.core not in CORES:
            raise InputError(f"refine core {self.core!r}; expected one of {', '.join(CORES)}")
        if self.helpers not in HELPERS:
            raise InputError(f"refine helpers {self.helpers!r}; expected one of {', '.join(HELPERS)}")
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
        """Edge softness σ [px] of iteration ``it`` (from 0)."""
        return float(self.sigma_schedule[it]) if it < len(self.sigma_schedule) else float(self.sigma_px)


@dataclass(frozen=True)
class TrackerConfig:
    """Tracker settings; the defaults are the measured choices (docs/design.md, "The tracker's refinement").

    refine: refinement settings (:class:`RefineConfig`); default ``RefineConfig()``.
    filter: constant-velocity filter settings (:class:`FilterConfig`); default ``FilterConfig()``.
    model: silhouette model, "visual" (robot.visual), "visual-capsule" (housings as capsules) or "capsules"; "visual".
    renderer: the silhouette renderer, "own" (analytic) or "pytorch3d" (PyTorch3D on meshes;
        :mod:`snaketrack.tracker.render.renderers`); "own".
    min_mask_px: a mask with fewer pixels than this means the robot is not visible [px]; default 30.
    lost_after: coasting frames before the status becomes ``lost``; default 5.
    reacquire_iou: below this IoU after refinement, the search runs too; default 0.35.
    reacquired_iou: on the first frame after a ``lost`` spell, the search also runs below this IoU; default 0.8.
    reinit_margin: while tracking, a search result replaces the refined one only if its IoU is higher by this; 0.15.
    ground_window: fixed camera's ground prior: median of the last this many tracked heights (−1 all, 0 off); 0.
    ground_min_frames: tracked frames before the ground prior starts; default 5.
    ground_height: the camera's height over the ground at the first frame [m], when known (``--up auto``'s
        plane): with ``ground_window`` the ground prior holds the base to it (times the camera's height
        ratio on a moving camera) from the first frame, instead of to the track's median; None (default).
    init_refine_steps: LM steps of each refined start of the search and of a wide-edge refinement; default 30.
    gap_frames: on a frame more than this many frame times after the last one tracked (a live source
        skipped frames), and at most ``gap_max_frames``, whose fit's IoU falls more than ``gap_margin``
        below the last frame's, the last fit is refined with the search's coarse-to-fine edge too, and
        the better fit kept (0: never); 1.5.
    gap_max_frames: see ``gap_frames``: over longer gaps the retry's fit can keep a fair IoU on a wrong
        pose where a failed fit calls the search; default 3.
    gap_margin: see ``gap_frames``; default 0.05.
    gap_refine_steps: LM steps of that wide-edge refinement; default 12.
    init_candidates: how many of the search's ranked starts are refined; default 5.
    init_sigma_schedule: edge softness schedule [px] of the search's LM; default (4, 4, 2, 2, 1, 1).
    init_plane_tilts: the search's tilted ground planes, (tilt [deg], azimuths) pairs; default ((35, 6), (60, 6)).
    init_up_tilts: the same around the ground's normal when the up direction is known; default ((10, 6),).
    init_out_of_plane_prior_rad: the searches' ``out_of_plane_prior_rad`` [rad] (None: the tracking one); 0.15.
    init_join_min_frac: the search's axis chains on components of ≥ this fraction of the largest's area; 0.15.
    init_join_max_gaps: the search's axes joined across gaps under these × the path's length; default (0.5, 1.5).
    keep_reading: a search while tracking tries only starts read (head vs tail) as the track is; default True.
    keep_reading_results: ... and drops refined starts that end up read the other way; default True.
    reading_ref_iou: the reading kept is that of the last frame fitted with at least this IoU; default 0.8.
    reading_ref_frames: ... at most this many frames back (else the prediction's); default 15.
    warmup_frames: after the first frame, the search runs again on each mask for at most this many frames; 10.
    warmup_iou: ... until a frame's fit reaches this IoU against its mask; default 0.85.
    warmup_margin: a warm-up search replaces the track when its IoU is higher by this (one that does not
        confirms the track and ends the warm-up); default 0.02.
    wave_check: turn the track round when its body wave runs from its tail to its head (reading.py); default True.
    wave_window: tracked frames the wave check looks back over; default 20.
    wave_max_lag: largest time lag of the wave statistic [frames]; default 5.
    wave_threshold: a wave statistic below −this turns the track round, above it settles it; default 0.35.
    depth_anchor: the point whose rate along its ray the depth damping scales, "centre" or "base"; "centre".
    cut_weighting: also ignore model pixels beyond a cut of the mask (occlusion.cut_weighted); default True.
    hold_backward: refine the frames a ReadingHold releases backwards from the track (:meth:`refine_back`); True.
    hold_backward_heights: their kept backward fits also replace their entries in the ground prior; True.
    wave_follow: on an occluded frame (``occluded_axis_fraction``), predict each yaw joint but the leading
        one from its leader's track while the body wave explains the recent frames
        (:mod:`~snaketrack.tracker.wave_follow`: a hidden tail follows the wave); default False.
    wave_follow_window: tracked frames the wave's lag is fitted over; default 40.
    wave_follow_max_lag: the largest lag fitted [frames]; default 15.
    wave_follow_max_residual: the largest relative residual of the fit at which it predicts; default 0.1.
    wave_follow_min_frames: frames tracked before it predicts; default 24.
    occluded_axis_fraction: a frame whose predicted body axis lies at least this fraction in the far zone
        (:func:`~snaketrack.tracker.fit.occlusion.hidden_fraction`) and whose mask has fewer pixels than
        ``occluded_area_ratio`` × the predicted silhouette's is refined as occluded; default 0.05.
    occluded_area_ratio: see ``occluded_axis_fraction``; default 0.9.
    occluded_prior_scale: the priors towards the prediction (``prior_q``, ``prior_rot``, ``prior_trans``) of an
        occluded frame, times this (1: as any frame's); default 1.
    occluded_visible_iou: an occluded frame's fit, and a re-acquisition search's result on it, are judged by
        the IoU of their unhidden part (:func:`~snaketrack.tracker.fit.occlusion.visible_iou`); default False.
    """

    refine: RefineConfig = field(default_factory=RefineConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    model: str = "visual"
    renderer: str = "own"
    min_mask_px: int = 30
    lost_after: int = 5
    reacquire_iou: float = 0.35
    reacquired_iou: float = 0.8
    reinit_margin: float = 0.15
    ground_window: int = 0
    ground_min_frames: int = 5
    ground_height: Optional[float] = None
    init_refine_steps: int = 30
    gap_frames: float = 1.5
    gap_max_frames: float = 3.0
    gap_margin: float = 0.05
    gap_refine_steps: int = 12
    init_candidates: int = 5
    init_sigma_schedule: tuple[float, ...] = (4.0, 4.0, 2.0, 2.0, 1.0, 1.0)
    init_plane_tilts: tuple[tuple[float, int], ...] = ((35.0, 6), (60.0, 6))
    init_up_tilts: tuple[tuple[float, int], ...] = ((10.0, 6),)
    init_out_of_plane_prior_rad: Optional[float] = 0.15
    init_join_min_frac: float = 0.15
    init_join_max_gaps: tuple[float, ...] = (0.5, 1.5)
    keep_reading: bool = True
    keep_reading_results: bool = True
    reading_ref_iou: float = 0.8
    reading_ref_frames: int = 15
    warmup_frames: int = 10
    warmup_iou: float = 0.85
    warmup_margin: float = 0.02
    wave_check: bool = True
    wave_window: int = 20
    wave_max_lag: int = 5
    wave_threshold: float = 0.35
    depth_anchor: str = "centre"
    cut_weighting: bool = True
    hold_backward: bool = True
    hold_backward_heights: bool = True
    wave_follow: bool = False
    wave_follow_window: int = 40
    wave_follow_max_lag: float = 15.0
    wave_follow_max_residual: float = 0.1
    wave_follow_min_frames: int = 24
    occluded_axis_fraction: float = 0.05
    occluded_area_ratio: float = 0.9
    occluded_prior_scale: float = 1.0
    occluded_visible_iou: bool = False

    def __post_init__(self):
        if self.model not in ("visual", "visual-capsule", "capsules"):
            raise InputError(f"tracker model {self.model!r}; expected 'visual', 'visual-capsule' or 'capsules'")
        if self.depth_anchor not in ("centre", "base"):
            raise InputError(f"depth_anchor {self.depth_anchor!r}; expected 'centre' or 'base'")
        if not (self.gap_frames >= 0 and self.gap_max_frames >= self.gap_frames) or self.gap_refine_steps < 1:
            raise InputError(f"gap_frames {self.gap_frames!r}, gap_max_frames {self.gap_max_frames!r}, "
                             f"gap_refine_steps {self.gap_refine_steps!r}; expected 0 ≤ gap_frames ≤ "
                             "gap_max_frames and at least one step")
