"""Self-calibration from the robot itself: the ground's up direction (``--up auto``) and the focal length
(``--refine-focal``), from the first frames of a recorded source.

Both start from a *calibration pass*: the first ``n`` frames tracked as usual (with the up direction
given, or none), their observed masks and fitted poses kept
(:func:`snaketrack.tracker.run.loop.calibration_pass`, :class:`CalibrationFrame`).

**The ground plane** (:func:`fit_plane`, :func:`fit_plane_lengths`). The robot lies on the ground, and a
crawling robot sweeps an area of it: its link centres over the frames of a fixed camera lie on one
plane, ``radius`` above the ground and parallel to it. A robust least-squares plane (trimmed SVD:
points farther than ``3 × 1.4826 × MAD`` of the residuals are dropped and the plane refitted) gives a
first normal; its sign is the one pointing from the ground towards the camera (OpenCV camera frame: x
right, y down, z forward; the camera, at the origin, lies on the ``up`` side: ``up · X < 0`` for
ground points ``X``). That is the up direction the tracker's ground priors take
(:mod:`snaketrack.tracker.calib.gravity`). The points must span an area: a body lying straight and still
spans a line, whose plane is undetermined about it (``spread``, the ratio of the second to the first
singular value of the centred points, says how well; below ``min_spread`` no plane is returned).

The link centres' depths come from the silhouettes' widths, and a bias there of a fraction of a pixel,
growing with depth, tilts their plane by a degree or more on an oblique view (a pass given the true up
direction refits it 1° off on the benchmark's static clip). :func:`fit_plane_lengths` therefore refines
the plane from what the silhouettes fix well, the image positions of the link axes: the rays through
each axis's two image ends meet the ground (raised by the radius) at the link's length apart only on
the true ground plane; foreshortening across the image tells its tilt, and the lengths its distance.
On that clip it brings the same pass's plane to 0.13°.

On a moving camera the passes are given the first frame's up direction only and follow it over the
ground (:class:`~snaketrack.tracker.calib.ground.GroundTracker` ``follow``); each frame's links then enter the
fits turned by its followed rotation and (the lengths fit) with its followed height ratio, so the
frames still share one plane, the first frame's.

**The focal length** (:func:`refine_focal`). A perspective camera's focal length ``f`` and the
robot's depth trade off only partly: scaling ``f`` and the depth by ``s`` keeps the pixel of only the
points at one depth. With the link lengths and radii known, the
depth variation along the robot (an oblique view; links pointing away from the camera look shorter)
makes ``f`` observable; a robot seen fronto-parallel, far away, does not. For each candidate ``f``
(a log-spaced grid around the start, then parabolic interpolation of the best three), every kept
frame's pose is carried over (:func:`rescale_pose`: the body's centre keeps its pixel at ``f / f₀`` × its
depth) and refined on its mask at that ``f``; the objective
is the mean IoU of those fits (the tracker's own fit measure). The spread of the per-frame best ``f``
gives a standard error, which says whether ``f`` is determined at all (``flat``: over ``max_se_rel``,
or the best ``f`` at the grid's edge; the caller warns and keeps the start). The cue is weak: the near
end of the robot looks larger than the far end by ``1 + ΔZ/Z``, and only that ratio changes with
``f`` once the pose absorbs the overall scale; a robot 0.8 m long seen
obliquely from 2.4 m changes it by about 2 % (half a pixel of a 22 px body) for 10 % of ``f``: the mean
IoU moves by only 1–2 × 10⁻⁴ over ±10 %, yet consistently over the frames (docs/tracking.md, "Up
direction and focal length from the robot").

>>> pts = np.array([[x, y, 2.0] for x in (-1.0, 0.0, 1.0) for y in (-1.0, 0.0, 1.0)])
>>> fit = fit_plane(pts)
>>> (fit.up.round(6) + 0.0).tolist(), round(fit.height, 6)   # the ground 2 m ahead: up points back at the camera
([0.0, 0.0, -1.0], 2.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.optimize import least_squares

from snaketrack.errors import InputError
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.rotations import axis_angle_to_matrix_np, perpendicular_np
from snaketrack.tracker.config import TrackerConfig
from snaketrack.tracker.fit.observation import observe
from snaketrack.tracker.fit.refine import Refiner
from snaketrack.tracker.render.primitives import CapsuleModel
from snaketrack.tracker.render.silhouette import SilhouetteRenderer, SilhouetteSettings
from snaketrack.tracker.state import StateLayout

#: Frames of the calibration pass by default (``--calibration-frames``).
CALIBRATION_FRAMES = 60


@dataclass(frozen=True)
class PlaneFit:
    """A plane fitted to points: ``up · X = −height`` for the points ``X`` on it.

    up: (3,) unit normal, pointing from the plane towards the origin (the camera).
    height: the origin's distance from the plane [m] (the points' units).
    rms: root-mean-square distance of the inliers from the plane [m].
    spread: σ₂/σ₁ of the centred inliers (1: an isotropic patch, 0: a line).
    inliers: how many points the final fit kept; points: how many were given.
    tilt_sd_rad: rough standard deviation of the normal's direction [rad]: rms / (σ₂ √n).
    """

    up: np.ndarray
    height: float
    rms: float
    spread: float
    inliers: int
    points: int
    tilt_sd_rad: float

    def as_dict(self) -> dict:
        return {"up": [float(v) for v in self.up], "height_m": self.height, "rms_m": self.rms,
                "spread": self.spread, "inliers": self.inliers, "points": self.points,
                "tilt_sd_deg": math.degrees(self.tilt_sd_rad)}


def _svd_plane(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = p.mean(axis=0)
    _, s, vt = np.linalg.svd(p - c, full_matrices=False)
    return c, s, vt[2]


def fit_plane(points, iterations: int = 5, min_spread: float = 0.05) -> Optional[PlaneFit]:
    """The robust plane of ``points`` (N, 3) [m, camera frame] (module doc), or None when fewer than
    4 finite points are given or they span no area (``spread < min_spread``)."""
    p = np.asarray(points, float).reshape(-1, 3)
    p = p[np.all(np.isfinite(p), axis=1)]
    n_all = len(p)
    if n_all < 4:
        return None
    keep = np.ones(n_all, bool)
    for _ in range(max(1, iterations)):
        c, s, n = _svd_plane(p[keep])
        r = (p - c) @ n
        mad = 1.4826 * np.median(np.abs(r[keep] - np.median(r[keep])))
        new = np.abs(r) <= max(3.0 * mad, 1e-9)
        if new.sum() < 4 or np.array_equal(new, keep):
            break
        keep = new
    c, s, n = _svd_plane(p[keep])
    spread = float(s[1] / s[0]) if s[0] > 0 else 0.0
    if spread < min_spread:
        return None
    if n @ c > 0:  # up points from the plane towards the origin
        n = -n
    m = int(keep.sum())
    rms = float(s[2] / math.sqrt(m))
    sigma2 = float(s[1] / math.sqrt(m))
    return PlaneFit(up=n / np.linalg.norm(n), height=float(-(n @ c)), rms=rms, spread=spread, inliers=m,
                    points=n_all, tilt_sd_rad=float(rms / (sigma2 * math.sqrt(m))) if sigma2 > 0 else math.inf)


def link_points(robot, layout, x) -> np.ndarray:
    """The link centres (N, 3) [m, camera frame] of pose vector ``x`` (D,)."""
    q, R, t = layout.unpack(np.asarray(x, float))
    return forward_kinematics_np(robot, q, R, t)["centres"]


@dataclass
class CalibrationFrame:
    """One frame of the calibration pass: its index, observed mask as tracked (bool (H, W)), fitted pose
    vector (D,), up direction used ((3,) or None), the fit's IoU, and on a moving camera its rotation
    (3, 3) from the pass's first frame and its height over the ground relative to the first frame's, both
    followed over the ground (None: a fixed camera; the height None or NaN: not measured)."""

    index: int
    mask: np.ndarray
    x: np.ndarray
    up: Optional[np.ndarray]
    iou: float
    rotation: Optional[np.ndarray] = None
    height_ratio: Optional[float] = None


def _moving(calib: list[CalibrationFrame]) -> bool:
    return any(c.rotation is not None for c in calib)


def _first_oriented(c: CalibrationFrame, points: np.ndarray) -> np.ndarray:
    """``points`` (N, 3) of frame ``c`` turned into the pass's first camera orientation (``Rᵀ X``)."""
    return points if c.rotation is None else points @ np.asarray(c.rotation, float)


def plane_from_frames(robot, layout, calib: list[CalibrationFrame], min_iou: float = 0.5) -> Optional[PlaneFit]:
    """The ground plane (:func:`fit_plane`) of the link centres of the frames fitted with IoU ≥ ``min_iou``.

    On a moving camera (frames with a ``rotation``) each frame's centres are turned into the first frame's
    orientation and taken about their own centroid, placed at the first frame's (the camera's height
    changes from frame to frame): the plane's normal is the one they share, in the first frame's
    camera, and its height the first frame's."""
    use = [c for c in calib if c.iou >= min_iou]
    if not use:
        return None
    if not _moving(use):
        return fit_plane(np.concatenate([link_points(robot, layout, c.x) for c in use]))
    pts = [_first_oriented(c, link_points(robot, layout, c.x)) for c in use]
    c0 = pts[0].mean(axis=0)
    return fit_plane(np.concatenate([p - p.mean(axis=0) + c0 for p in pts]))


def _link_rays(robot, layout, calib: list[CalibrationFrame]):
    """The rays (M, 3), scaled to unit depth, through the image ends of every link axis of the frames of
    ``calib`` (origin rays, end rays), with each link's length (M,), radius (M,) [m] and frame's position
    in ``calib`` (M,). A point's ray at unit depth, ``X / Z``, is its pixel back-projected: only the image
    positions of the fitted axes enter, not their depths."""
    ra, rb, lengths, radii, frame = [], [], [], [], []
    for k, c in enumerate(calib):
        q, R, t = layout.unpack(np.asarray(c.x, float))
        fk = forward_kinematics_np(robot, q, R, t)
        o, e = fk["origins"], fk["ends"]
        ra.append(o / o[:, 2:3])
        rb.append(e / e[:, 2:3])
        lengths.append(np.linalg.norm(e - o, axis=1))
        radii.append(np.asarray(fk["radii"], float).reshape(-1)[:len(o)])
        frame.append(np.full(len(o), k))
    return tuple(np.concatenate(v) for v in (ra, rb, lengths, radii, frame))


def fit_plane_lengths(robot, layout, calib: list[CalibrationFrame], start: PlaneFit,
                      min_iou: float = 0.5) -> PlaneFit:
    """The ground plane that lays the tracked link axes, as the image shows them, at the robot's link lengths.

    Each link's axis runs ``radius`` above the ground. Given a plane (up, height), the rays through the
    image ends of a link axis (projected from the frame's fitted pose) meet the raised plane at two points
    whose distance is the link's length only when the plane is the ground's: foreshortening across the
    image tells the plane's tilt, and the lengths its distance. The cue is the axes' image positions,
    which the silhouettes fix to a pixel, not their depths, which a silhouette gives only through its
    width (a bias of a fraction of a pixel there tilts a plane fitted to the link centres by a degree or
    more on an oblique view). Least squares over every link of every frame fitted with IoU ≥ ``min_iou``
    (a soft-L1 loss, scale 2 % of the mean link length), from ``start`` (a :class:`PlaneFit` of the link
    centres, :func:`plane_from_frames`; its ``spread`` says whether the frames span an area). On a moving
    camera (frames with a ``rotation``) the up direction is the first frame's, turned by each frame's
    rotation, and the height the first frame's times each frame's ``height_ratio`` (each frame its own
    height when a ratio is missing); the height returned is the first frame's. Returns
    ``start`` unchanged when no frame qualifies. ``rms``: of the length residuals [m]; ``tilt_sd_rad``
    from the fit's covariance."""
    use = [c for c in calib if c.iou >= min_iou]
    if not use:
        return start
    ra, rb, L, r, frame = _link_rays(robot, layout, use)
    moving = _moving(use)
    rots = np.stack([np.eye(3) if c.rotation is None else np.asarray(c.rotation, float) for c in use])
    n0 = np.asarray(start.up, float)
    e1, e2 = perpendicular_np(n0)

    def normal(p) -> np.ndarray:
        n = n0 + p[0] * e1 + p[1] * e2
        return n / np.linalg.norm(n)

    ratios = np.array([np.nan if c.height_ratio is None else float(c.height_ratio) for c in use])
    free = moving and not np.all(np.isfinite(ratios) & (ratios > 0))  # a height per frame

    def residuals(p):
        n = normal(p)
        nk = (rots @ n)[frame] if moving else n[None, :]  # each row's up direction, its frame's camera
        h = p[2:][frame] if free else (p[2] * ratios[frame] if moving else p[2])
        da = np.minimum(np.sum(ra * nk, axis=1), -1e-6)  # < 0: the ray comes down to the ground ahead
        db = np.minimum(np.sum(rb * nk, axis=1), -1e-6)
        sa, sb = (r - h) / da, (r - h) / db  # depths where each ray meets the plane raised by the radius
        return np.linalg.norm(sb[:, None] * rb - sa[:, None] * ra, axis=1) - L

    if free:  # each frame's height from its own centres on the start plane
        h0 = [float(-(rots[k] @ n0) @ link_points(robot, layout, c.x).mean(axis=0)) + float(np.mean(robot.radii))
              for k, c in enumerate(use)]
    else:
        h0 = [start.height]
    scale = 0.02 * float(np.mean(L))
    sol = least_squares(residuals, [0.0, 0.0, *h0], loss="soft_l1", f_scale=scale, x_scale=0.01)
    up = normal(sol.x)
    res = sol.fun
    rms = float(np.sqrt(np.mean(res ** 2)))
    try:
        cov = np.linalg.inv(sol.jac.T @ sol.jac) * rms ** 2
        tilt_sd = float(math.sqrt(max(cov[0, 0] + cov[1, 1], 0.0) / 2.0))
    except np.linalg.LinAlgError:
        tilt_sd = math.inf
    return PlaneFit(up=up, height=float(sol.x[2]), rms=rms, spread=start.spread,
                    inliers=int(np.sum(np.abs(res) < 3 * scale)), points=len(res), tilt_sd_rad=tilt_sd)


def upright(up, towards) -> np.ndarray:
    """Of ``up`` (3,) and its mirror image about the line of sight ``towards`` (3,) [camera frame], the one
    pointing more to the top of the image (smaller y; OpenCV's y runs down).

    A plane seen from afar shows the same outline tilted either way about the line of sight (the
    weak-perspective ambiguity: the normal's part across the line of sight is read with either sign); a
    track made without an up direction may settle on either. A camera held the right way up (not rolled
    beyond 90°) sees the world's up towards the top of its image."""
    n = np.asarray(up, float)
    v = np.asarray(towards, float)
    v = v / np.linalg.norm(v)
    m = 2.0 * (n @ v) * v - n
    return m if m[1] < n[1] else n


def angle_deg(a, b) -> float:
    """The angle between directions ``a`` and ``b`` (3,) [deg]."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return math.degrees(math.acos(float(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0))))


def pitch_up(pitch_deg: float) -> np.ndarray:
    """The up direction (3,) in the frame of a camera pitched ``pitch_deg`` below the horizon, not rolled
    (0: looking level, up is the image's top, −y; 90: looking straight down, up is −z)."""
    p = math.radians(pitch_deg)
    return np.array([0.0, -math.cos(p), -math.sin(p)])


def estimate_up(run_pass, robot, max_passes: int = 4, tol_deg: float = 0.25, up0=None,
                pitches_deg=(15.0, 30.0, 45.0, 60.0, 75.0, 90.0), lengths: bool = True,
                log=None) -> tuple[Optional[PlaneFit], list]:
    """The up direction of a fixed camera by passes over the first frames (module doc).

    run_pass: ``(up, short) → (calibration frames, layout)`` tracks the calibration frames (the first half
    of them when ``short``) with that constant up direction ((3,), or None: none) and, given one, the
    ground prior.

    Start (unless ``up0`` is given): the candidates are the plane of a track made without an up
    direction, read the right way up (:func:`upright`), and a camera not rolled, pitched by each of
    ``pitches_deg`` (:func:`pitch_up`); each is tracked (short passes) and the one whose fits explain the
    masks best (mean IoU) is kept. Then each pass tracks with the last up direction and fits the plane
    again: the link centres of those tracks follow the masks more than the prior, and the plane moves
    towards the ground's (a planar snake on the static benchmark clip: a 20° error comes back within
    3–10°, a 10° one within 1–4°), until it moves less than ``tol_deg`` or after ``max_passes``
    passes. Returns the last :class:`PlaneFit` (None: the tracks span no area) and the last pass's frames."""
    def fit(calib, layout, read_upright: bool) -> Optional[PlaneFit]:
        plane = plane_from_frames(robot, layout, calib)
        if plane is None:
            return None
        if read_upright:  # the line of sight to the robot, in the (first) frame's camera
            centre = _first_oriented(calib[0], link_points(robot, layout, calib[0].x)).mean(axis=0) \
                if _moving(calib) else \
                np.mean([link_points(robot, layout, c.x).mean(axis=0) for c in calib], axis=0)
            new = upright(plane.up, centre)
            plane = PlaneFit(new, float(-(new @ centre)), plane.rms, plane.spread, plane.inliers, plane.points,
                             plane.tilt_sd_rad)
        return fit_plane_lengths(robot, layout, calib, plane) if lengths else plane

    def say(line: str) -> None:
        if log is not None:
            log(line)

    up = up0
    if up is None:
        calib, layout = run_pass(None, True)
        first = fit(calib, layout, True)
        cands = ([first.up] if first is not None else []) + [pitch_up(p) for p in pitches_deg]
        scores = []
        for u in cands:
            calib, _ = run_pass(u, True)
            scores.append(float(np.mean([c.iou for c in calib])) if calib else -1.0)
            say(f"up candidate {np.round(u, 3).tolist()}: mean IoU {scores[-1]:.4f}")
        up = cands[int(np.argmax(scores))]
    plane, calib = None, []
    for k in range(max_passes):
        calib, layout = run_pass(up, False)
        plane = fit(calib, layout, False)
        if plane is None:
            return None, calib
        moved = angle_deg(plane.up, up)
        say(f"up pass {k + 1}: {np.round(plane.up, 4).tolist()}, moved {moved:.2f}° (tracks' mean IoU "
            f"{np.mean([c.iou for c in calib]):.4f}; fit rms {1000 * plane.rms:.1f} mm, {plane.inliers} of "
            f"{plane.points} inliers, tilt sd {math.degrees(plane.tilt_sd_rad):.2f}°)")
        up = plane.up
        if moved < tol_deg:
            break
    return plane, calib


@dataclass
class FocalFit:
    """The focal length found by :func:`refine_focal`.

    focal_px: the best f [px] (fx = fy scaled alike); start_px: the starting f [px].
    se_rel: standard error of f relative to f (per-frame best f's spread / √frames).
    iou_drop_10pct: how much the mean IoU falls at ±10 % from the best f (the smaller of both sides).
    flat: the objective does not fix f (the standard error over ``max_se_rel``, or the best f at the
        grid's edge); the caller keeps the start.
    grid: (f [px], mean IoU) of every candidate tried.
    frames: frames used.
    """

    focal_px: float
    start_px: float
    se_rel: float
    iou_drop_10pct: float
    flat: bool
    grid: list = field(default_factory=list)
    frames: int = 0

    def as_dict(self) -> dict:
        return {"focal_px": self.focal_px, "start_px": self.start_px, "se_rel": self.se_rel,
                "iou_drop_10pct": self.iou_drop_10pct, "flat": self.flat, "frames": self.frames,
                "grid": [[float(f), float(v)] for f, v in self.grid]}


def _parabola_peak(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Vertex abscissa and curvature (second derivative) of the parabola through three points."""
    a, b, _ = np.polyfit(x, y, 2)
    if a >= 0:
        return float(x[int(np.argmax(y))]), 0.0
    return float(np.clip(-b / (2 * a), x.min(), x.max())), float(2 * a)


def _rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation (3, 3) turning direction ``a`` (3,) onto ``b`` (3,)."""
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    v = np.cross(a, b)
    s = float(np.linalg.norm(v))
    if s < 1e-12:
        return np.eye(3)
    return axis_angle_to_matrix_np(v / s * math.atan2(s, float(a @ b)))


def rescale_pose(robot, layout, x, scale: float) -> np.ndarray:
    """Pose vector ``x`` (D,) as a camera of focal length × ``scale`` sees it alike: the body's centre keeps
    its pixel at ``scale`` × its depth (x, y kept, z scaled) and the body turns with its line of sight."""
    q, R, t = layout.unpack(np.asarray(x, float))
    c = link_points(robot, layout, x).mean(axis=0)
    c2 = np.array([c[0], c[1], scale * c[2]])
    Rr = _rotation_between(c, c2)
    return layout.pack(q, Rr @ R, c2 + Rr @ (t - c))


def refine_focal(robot, camera, calib: list[CalibrationFrame], config=None, max_frames: int = 12,
                 span: float = 1.4, points: int = 9, steps: int = 15, max_se_rel: float = 0.06,
                 log=None) -> FocalFit:
    """The focal length that best explains the masks of ``calib`` (module doc).

    robot: the :class:`~snaketrack.models.robot.Robot`; camera: the tracked
    :class:`~snaketrack.tracker.calib.camera.Camera` (undistorted, at the tracking size) whose K the poses of
    ``calib`` were fitted with; config: the :class:`~snaketrack.tracker.config.TrackerConfig` (default
    the tracker's). max_frames: frames used, spread evenly over ``calib``. span: the grid covers
    ``[f₀/span, f₀·span]``, ``points`` log-spaced values. steps: refinement iterations per frame and f.
    max_se_rel: the largest standard error of f (relative) taken as a fix (``FocalFit.flat``).
    log: called with a line per candidate.
    """
    if not calib:
        raise InputError("--refine-focal: no frame of the calibration pass was tracked")
    cfg = config or TrackerConfig()
    idx = np.unique(np.linspace(0, len(calib) - 1, min(max_frames, len(calib))).round().astype(int))
    use = [calib[i] for i in idx]
    K0 = np.asarray(camera.K, float)
    f0 = float(K0[0, 0])

    layout = StateLayout.for_robot(robot)
    model = CapsuleModel.named(robot, cfg.model)
    obs = [observe(c.mask, cfg.refine) for c in use]
    cache: dict[float, np.ndarray] = {}

    def per_frame(scale: float) -> np.ndarray:
        key = round(float(scale), 9)
        if key in cache:
            return cache[key]
        K = K0.copy()
        K[0, 0] *= scale
        K[1, 1] *= scale
        ren = SilhouetteRenderer(robot, K, camera.width, camera.height, model,
                                 SilhouetteSettings(sigma_px=cfg.refine.sigma_px))
        ref = Refiner(ren, cfg.refine)
        ious = []
        for c, o in zip(use, obs):
            res = ref.refine(rescale_pose(robot, layout, c.x, scale), o, steps=steps, up=c.up)
            ious.append(res.iou)
        cache[key] = np.array(ious)
        if log is not None:
            log(f"focal {f0 * scale:.1f} px: mean IoU {np.mean(ious):.4f}")
        return cache[key]

    ls = np.linspace(-math.log(span), math.log(span), points)
    vals = np.array([per_frame(math.exp(v)).mean() for v in ls])
    k = int(np.argmax(vals))
    edge = k in (0, len(ls) - 1)
    j = min(max(k, 1), len(ls) - 2)
    best, _ = _parabola_peak(ls[j - 1:j + 2], vals[j - 1:j + 2])
    # a finer look around the best: half steps either side
    h = (ls[1] - ls[0]) / 2
    fine = np.array([best - h, best, best + h])
    fvals = np.array([per_frame(math.exp(v)).mean() for v in fine])
    best, _ = _parabola_peak(fine, fvals)
    # the drop over ±10 % and the per-frame best f's spread
    d = math.log(1.1)
    around = np.array([best - d, best, best + d])
    table = np.stack([per_frame(math.exp(v)) for v in around])  # (3, frames)
    # the smaller side: a fit that breaks down on one side only (a start too far) leaves the other open
    drop = float(table[1].mean() - max(table[0].mean(), table[2].mean()))
    all_ls = sorted(cache)  # the scales tried, each with its frames' IoUs
    scales = np.log(np.array(all_ls))
    frame_ious = np.stack([cache[s] for s in all_ls])  # (candidates, frames)
    per = []
    for i in range(frame_ious.shape[1]):
        col = frame_ious[:, i]
        m = int(np.argmax(col))
        m = min(max(m, 1), len(scales) - 2)
        per.append(_parabola_peak(scales[m - 1:m + 2], col[m - 1:m + 2])[0])
    per = np.array(per)
    se = float(np.std(per, ddof=1) / math.sqrt(len(per))) if len(per) > 1 else math.inf
    grid = [(f0 * float(s), float(cache[s].mean())) for s in all_ls]
    return FocalFit(focal_px=f0 * math.exp(best), start_px=f0, se_rel=se, iou_drop_10pct=drop,
                    flat=bool(edge or not se < max_se_rel), grid=grid, frames=len(use))
