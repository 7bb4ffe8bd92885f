"""Pictures of a robot file's silhouette, to check the file before tracking (``snaketrack robot show``).

The silhouette is the tracker's own (:class:`~snaketrack.tracker.render.silhouette.SilhouetteRenderer`
with its default model, :meth:`~snaketrack.tracker.render.primitives.CapsuleModel.from_visual`), so
what is drawn is what the tracker fits to the masks.

Base orientation (:func:`base_rotation`): yaw, pitch and roll [rad] turn the
robot about its base link's own z, y and x axes, starting from the robot
lying flat under a camera that looks straight down (link 1's x along the
image's x, its z, up, towards the camera)::

    R0 = R_DOWN · Rz(yaw) · Ry(pitch) · Rx(roll),   R_DOWN = diag(1, −1, −1)

- :func:`frame_view`: the silhouette over a frame, at a given pose, through a given camera.
- :func:`robot_sheet`: the robot alone, straight and in a sample pose, seen from above at an
  angle, with link numbers, tail and head, a scale bar on the ground, and a panel listing the
  links, the joints and the total length.

Images are RGB uint8 (H, W, 3); lengths in metres, angles in radians, pixels as in docs/conventions.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from snaketrack.errors import InputError
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import Robot
from snaketrack.models.rotations import axis_rotation_np
from snaketrack.tracker.calib.camera import Camera, FieldOfView
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.run.outputs import draw_overlay, link_axes_cam, project_points
from snaketrack.tracker.state import StateLayout

#: The robot lying flat, seen from straight above: link x → camera x, link z (up) → camera −z.
R_DOWN = np.diag([1.0, -1.0, -1.0])
#: How far the sample-pose view looks down from the horizontal [deg], and its field of view [deg].
SHEET_ELEVATION_DEG = 55.0
SHEET_FOV_DEG = 45.0


def base_rotation(yaw: float = 0.0, pitch: float = 0.0, roll: float = 0.0) -> np.ndarray:
    """The base link's rotation (3, 3) in the camera frame for yaw, pitch, roll [rad] (module doc)."""
    return R_DOWN @ axis_rotation_np("z", yaw) @ axis_rotation_np("y", pitch) @ axis_rotation_np("x", roll)


@dataclass(frozen=True)
class Pose:
    """A robot pose in a camera frame: joint angles q (J,) [rad], base rotation R0 (3, 3), base position
    t0 (3,) [m] (link 1's origin, the tail end of its axis)."""

    q: np.ndarray
    R0: np.ndarray
    t0: np.ndarray


def centred_pose(robot: Robot, camera: Camera, q: Optional[np.ndarray] = None, fill: float = 0.6) -> Pose:
    """The robot lying flat under the camera (:data:`R_DOWN`), at the distance where its straight length
    spans ``fill`` of the image width, its axis through the image centre."""
    q = np.zeros(robot.dof) if q is None else np.asarray(q, float)
    L = robot.total_length
    z = camera.fx * L / (fill * camera.width)
    u0, v0 = (camera.width - 1) / 2.0, (camera.height - 1) / 2.0
    centre = np.array([(u0 - camera.cx) * z / camera.fx, (v0 - camera.cy) * z / camera.fy, z])
    return Pose(q, R_DOWN.copy(), centre - R_DOWN @ np.array([L / 2.0, 0.0, 0.0]))


def view_pose(robot: Robot, camera: Camera, elevation_deg: float, azimuth_deg: float, distance: float,
              q: Optional[np.ndarray] = None, at: Optional[Sequence[float]] = None) -> Pose:
    """The robot lying on the ground, its straight axis's middle at the image point ``at`` (u, v) [px] (default
    the image centre), seen by a camera at ``elevation_deg`` over the ground (90: straight down; the camera
    tilted about its own x axis, so the ground's far side is the image's top), the body heading
    ``azimuth_deg`` on the ground (0: along the image's x, tail left; 90: head away from the camera), the
    ground ``distance`` [m] from the camera along its optical axis."""
    q = np.zeros(robot.dof) if q is None else np.asarray(q, float)
    tilt = math.radians(elevation_deg - 90.0)
    c, s = math.cos(tilt), math.sin(tilt)
    R0 = np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]]) @ base_rotation(math.radians(azimuth_deg))
    up = R0[:, 2]  # the ground's normal towards the camera
    on_axis = np.array([0.0, 0.0, float(distance)])  # the ground's point on the optical axis
    u, v = ((camera.width - 1) / 2.0, (camera.height - 1) / 2.0) if at is None else map(float, at)
    ray = np.array([(u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy, 1.0])
    if up @ ray >= -1e-9:
        raise InputError(f"--at {u:g},{v:g}: that image point sees no ground (above the horizon)")
    middle = ray * (up @ on_axis) / (up @ ray)
    return Pose(q, R0, middle - R0 @ np.array([robot.total_length / 2.0, 0.0, 0.0]))


def base_angles(R0: np.ndarray) -> tuple[float, float, float]:
    """(yaw, pitch, roll) [rad] of a base rotation (3, 3): the inverse of :func:`base_rotation`."""
    yaw, pitch, roll = Rotation.from_matrix(R_DOWN.T @ np.asarray(R0, float)).as_euler("ZYX")
    return float(yaw), float(pitch), float(roll)


def sample_q(robot: Robot) -> np.ndarray:
    """A sample curved pose (J,) [rad]: one wave along the body on each joint's first axis (about ±1 rad of
    heading), at most half of each joint's limit."""
    q = np.zeros(robot.dof)
    k, n = 0, len(robot.joints)
    for i, joint in enumerate(robot.joints):
        amp = min(0.5 * min(-joint.lower[0], joint.upper[0]), 4.0 / n)
        q[k] = amp * math.sin(2 * math.pi * (i + 0.5) / n)
        k += len(joint.axes)
    return q


def silhouette(robot: Robot, camera: Camera, pose: Pose) -> np.ndarray:
    """The tracker's silhouette of ``robot`` at ``pose``: bool (H, W) of the camera's image."""
    ren = SilhouetteRenderer(robot, camera.K, camera.width, camera.height)
    return ren.mask(StateLayout.for_robot(robot).pack(pose.q, pose.R0, pose.t0))


def _text(img: np.ndarray, text: str, org, scale: float, colour=(20, 20, 20), outline=None, thick: int = 1) -> None:
    org = (int(round(org[0])), int(round(org[1])))
    if outline is not None:
        cv2.putText(img, text, org, cv2.FONT_HERSHEY_SIMPLEX, scale, outline, thick + 2, cv2.LINE_AA)
    cv2.putText(img, text, org, cv2.FONT_HERSHEY_SIMPLEX, scale, colour, thick, cv2.LINE_AA)


def draw_robot(rgb: np.ndarray, robot: Robot, camera: Camera, pose: Pose, labels: bool = True,
               light: bool = False, mask: Optional[np.ndarray] = None) -> np.ndarray:
    """``rgb`` (H, W, 3) uint8 with the robot's silhouette filled half-transparent in its colour and
    outlined, its link axes, the head point and (``labels``) link numbers and ``tail``/``head``; ``light``:
    the background is light (dark labels, else white ones outlined in black). ``mask``: the silhouette
    (bool (H, W)) when already rendered (:func:`silhouette`)."""
    camera.check_image(rgb, "frame")
    if mask is None:
        mask = silhouette(robot, camera, pose)
    img = rgb.copy()
    colour = np.array(robot.visual.rgba[:3]) * 255
    img[mask] = (0.5 * img[mask] + 0.5 * colour).astype(np.uint8)
    starts, ends, head = link_axes_cam(robot, pose.q, pose.R0, pose.t0)
    axes = project_points(camera.K, np.stack([starts, ends], axis=1))
    img = draw_overlay(img, axes_uv=axes, head_uv=project_points(camera.K, head), rendered_mask=mask)
    if labels:
        h, w = img.shape[:2]
        scale = max(0.45, min(h, w) / 800)
        ink = ((40, 40, 40), None) if light else ((255, 255, 255), (0, 0, 0))
        word_ink = ((150, 20, 20), None) if light else ((255, 255, 0), (0, 0, 0))
        mids = project_points(camera.K, 0.5 * (starts + ends))
        # a label sits beside its link, off the body: along the image normal of the link's axis
        for i, (m, (a, b)) in enumerate(zip(mids, axes)):
            if not np.all(np.isfinite(m)):
                continue
            d = b - a
            nrm = np.array([-d[1], d[0]]) / max(np.linalg.norm(d), 1e-9)
            off = nrm * (camera.fx * robot.visual.body_radius[i] / max(starts[i, 2], 1e-6) + 10 * scale / 0.5)
            _text(img, str(i + 1), m + off - np.array([6, -5]) * scale / 0.5, scale, *ink)
        for word, uv, back in (("tail", axes[0, 0], axes[0, 0] - axes[0, 1]),
                               ("head", axes[-1, 1], axes[-1, 1] - axes[-1, 0])):
            if np.all(np.isfinite(uv)):
                step = back / max(np.linalg.norm(back), 1e-9) * 28 * scale / 0.5
                _text(img, word, uv + step - np.array([14, -5]) * scale / 0.5, scale, *word_ink)
    return img


def frame_view(rgb: np.ndarray, robot: Robot, camera: Camera, pose: Pose) -> tuple[np.ndarray, np.ndarray]:
    """The robot at ``pose`` drawn over a frame ``rgb`` (H, W, 3) uint8 seen by ``camera`` (no distortion:
    undistort the frame first): ``(image (H, W, 3) uint8, silhouette bool (H, W))``."""
    mask = silhouette(robot, camera, pose)
    return draw_robot(rgb, robot, camera, pose, mask=mask), mask


def _nice_length(x: float) -> float:
    """The largest of 1, 2, 5 × 10^k not above ``x`` [m]."""
    e = 10.0 ** math.floor(math.log10(x))
    return max(m * e for m in (1, 2, 5) if m * e <= x)


def _angled_view(robot: Robot, q: np.ndarray, width: int, height: int, title: str) -> np.ndarray:
    """One panel (height, width, 3): the robot at ``q`` seen from above at :data:`SHEET_ELEVATION_DEG`
    over a ground grid, with a scale bar on the ground below it."""
    camera = FieldOfView(SHEET_FOV_DEG).camera(width, height)
    tilt = math.radians(90.0 - SHEET_ELEVATION_DEG)
    R_view = axis_rotation_np("x", -tilt)  # the ground tipped away: its far side at the top of the image
    # the "flat" frame: the robot lying flat seen from straight above (x right, y down the image, z away
    # from the camera, the ground at z = the largest radius); the view turns it by R_view
    fk = forward_kinematics_np(robot, q, R_DOWN, np.zeros(3))
    pts = np.concatenate([fk["origins"], fk["ends"]])
    r_max = float(max(max(robot.visual.body_radius), robot.visual.housing_radius, max(robot.radii)))
    bar = _nice_length(0.4 * robot.total_length)
    lo, hi = pts.min(axis=0) - r_max, pts.max(axis=0) + r_max
    y_bar = hi[1] + 0.08 * robot.total_length
    lo[0], hi[0] = min(lo[0], 0.5 * (lo[0] + hi[0]) - bar / 2), max(hi[0], 0.5 * (lo[0] + hi[0]) + bar / 2)
    hi[1] = y_bar + 0.05 * robot.total_length  # room for the bar's label
    centre = 0.5 * (lo + hi)
    centre[2] = 0.0
    ext_x, ext_y = hi[0] - lo[0], (hi[1] - lo[1]) * math.cos(tilt)
    dist = camera.fx * max(ext_x / (0.85 * width), ext_y / (0.75 * height)) + 2 * r_max
    t0 = np.array([0.0, 0.0, dist]) - R_view @ centre
    img = np.full((height, width, 3), 236, np.uint8)
    g = _nice_length(robot.total_length / 4)
    span = 1.5 * max(ext_x, hi[1] - lo[1])
    for k in np.arange(math.floor((centre[0] - span) / g), math.ceil((centre[0] + span) / g) + 1):
        for line in ([[k * g, centre[1] - span, r_max], [k * g, centre[1] + span, r_max]],
                     [[centre[0] - span, k * g + centre[1] - centre[0], r_max],
                      [centre[0] + span, k * g + centre[1] - centre[0], r_max]]):
            uv = project_points(camera.K, np.asarray(line) @ R_view.T + t0)
            if np.all(np.isfinite(uv)) and np.abs(uv).max() < 1e5:
                cv2.line(img, tuple(int(round(v)) for v in uv[0]), tuple(int(round(v)) for v in uv[1]),
                         (220, 220, 220), 1, cv2.LINE_AA)
    img = draw_robot(img, robot, camera, Pose(np.asarray(q, float), R_view @ R_DOWN, t0), light=True)
    ends = np.array([[centre[0] - bar / 2, y_bar, r_max], [centre[0] + bar / 2, y_bar, r_max]])
    uv = project_points(camera.K, ends @ R_view.T + t0)
    if np.all(np.isfinite(uv)):
        a, b = (tuple(int(round(v)) for v in p) for p in uv)
        cv2.line(img, a, b, (20, 20, 20), 2, cv2.LINE_AA)
        for p in (a, b):
            cv2.line(img, (p[0], p[1] - 5), (p[0], p[1] + 5), (20, 20, 20), 2, cv2.LINE_AA)
        label = f"{bar * 100:g} cm" if bar < 1 else f"{bar:g} m"
        _text(img, label, ((a[0] + b[0]) / 2 - 22, max(a[1], b[1]) + 20), 0.5)
    _text(img, title, (10, 22), 0.55)
    _text(img, f"grid {g * 100:g} cm" if g < 1 else f"grid {g:g} m", (10, 44), 0.45, (90, 90, 90))
    return img


def _groups(values: list) -> list[tuple[int, int, object]]:
    """Runs of equal consecutive values: (first, last, value), 1-based."""
    out: list[tuple[int, int, object]] = []
    for i, v in enumerate(values, start=1):
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], i, v)
        else:
            out.append((i, i, v))
    return out


def describe(robot: Robot) -> list[str]:
    """The side panel's lines: the robot, its links and joints grouped where equal, its total length."""
    lines = [robot.name]
    if robot.description:
        words = robot.description.split()
        while len(" ".join(words)) > 44:
            words = words[:-1]
        lines.append(" ".join(words) + (" ..." if len(words) < len(robot.description.split()) else ""))
    lines += [f"{robot.n_links} links, {robot.dof} joint coordinates", f"total length {robot.total_length:.3f} m",
              "", "links (tail to head): length, radius, mass"]
    for a, b, (L, r, m) in _groups([(ln.length, ln.radius, ln.mass) for ln in robot.links]):
        which = f"{a}" if a == b else f"{a}-{b}"
        lines.append(f"  {which}: {L:.3f} m, r {r:.3f} m, {m:g} kg")
    lines += ["", "joints: axes, limits [rad]"]
    for a, b, (axes, lo, hi) in _groups([(j.axes, j.lower, j.upper) for j in robot.joints]):
        which = f"{a}" if a == b else f"{a}-{b}"
        lims = ", ".join(f"+-{u:.2f}" if abs(lo_ + u) < 1e-12 else f"[{lo_:.2f}, {u:.2f}]" for lo_, u in zip(lo, hi))
        lines.append(f"  {which}: {'+'.join(axes)}  {lims}")
    lines += ["", f"coordinates: {', '.join(robot.joint_names[:3])}" + (" ..." if robot.dof > 3 else "")]
    if robot.source:
        lines.append(f"file: {Path(robot.source).name}")
    return lines


def robot_sheet(robot: Robot, width: int = 1280, height: int = 720, q: Optional[np.ndarray] = None) -> np.ndarray:
    """The robot alone (RGB uint8 (height, width, 3)): straight (q = 0) above, ``q`` (default
    :func:`sample_q`) below, both seen from above at an angle; the side panel of :func:`describe` on the right."""
    if width < 480 or height < 320:
        raise InputError(f"--size {width}x{height}; expected at least 480x320 px for the robot alone")
    panel_w = min(420, width // 3)
    view_w, half = width - panel_w, height // 2
    title = "sample pose: one wave along the body" if q is None else "the pose of --q"
    q_show = sample_q(robot) if q is None else np.asarray(q, float)
    top = _angled_view(robot, np.zeros(robot.dof), view_w, half, "straight (q = 0)")
    bottom = _angled_view(robot, q_show, view_w, height - half, title)
    img = np.full((height, width, 3), 250, np.uint8)
    img[:half, :view_w] = top
    img[half:, :view_w] = bottom
    cv2.line(img, (0, half), (view_w, half), (160, 160, 160), 1)
    cv2.line(img, (view_w, 0), (view_w, height), (160, 160, 160), 1)
    lines = describe(robot)
    step = max(14, min(22, (height - 20) // max(len(lines), 1)))
    scale = step / 40.0
    for i, line in enumerate(lines):
        _text(img, line, (view_w + 12, 24 + i * step), scale, thick=2 if i == 0 else 1)
    return img
