"""Camera trajectories for synthetic video: a tripod, a handheld camera and a drone.

Every path returns a :class:`CameraPath`: per frame the camera centre in the
world [m] and the rotation ``R_wc`` whose columns are the OpenCV camera axes
(x right, y down, z forward) expressed in the world frame, so a world point
``p`` has camera coordinates ``R_wc.T @ (p - c)``. Intrinsics follow from the
vertical field of view of MuJoCo's renderer, which samples pixel centres (a
box edge slid across the image in sub-pixel steps first covers the column
and row that ``cx = W/2 − 0.5``, ``cy = H/2 − 0.5`` predict; ``W/2`` does not)::

    fy = (H/2) / tan(fovy/2),  fx = fy,  cx = W/2 - 0.5,  cy = H/2 - 0.5

Scenes (all framed from the robot's own motion, which is known in advance):

- ``static``: a tripod beside the robot's path at 1.2-1.6 m height, aimed at
  the centre of everything the robot covers during the clip; the field of
  view is the narrowest that keeps the whole clip in view with a margin,
  but no narrower than makes the body 1.6x ``target_width_px`` wide.
- ``handheld``: a person walking beside the robot at about 1.5 m lateral
  distance, camera at 1.4-1.7 m, aiming at the (smoothed) robot with slow
  drift (0.05-0.4 Hz wander of aim, height and distance) and shake
  (2-9 Hz rotations of a few tenths of a degree, millimetre jitter).
- ``drone``: 2-4 m above the robot, looking down 5-20 deg off nadir, the
  image's long axis roughly along the robot's heading with a slowly
  changing yaw offset (up to about ±25 deg) and a changing height.
- ``low-handheld``: a phone held low by a crouching person (lens 0.22-0.42 m
  above the floor, 0.9-1.4 m from the robot, so the view is 10-25 deg above
  the floor: strong foreshortening, the body wave seen nearly edge-on),
  60-120 deg off the robot's heading. The person shifts position in quick
  moves every 2-4 s and in between pans and tilts the phone to follow the
  robot; shake of about 0.3 deg (2-9 Hz), a slow roll of about ±2 deg.

The moving cameras are then checked against the robot's projected capsules
(with a margin) and pulled back, smoothly, in the frames where the robot
would touch the border, so every frame shows the whole robot.

All randomness comes from ``seed``; the same seed gives the same path.

>>> K = intrinsics(640, 360, np.deg2rad(60.0))
>>> float(K[0, 2]), float(K[1, 2]), round(float(K[1, 1]), 3)
(319.5, 179.5, 311.769)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter1d, maximum_filter1d

from snaketrack.errors import InputError

SCENES = ("static", "handheld", "drone", "low-handheld")


@dataclass(frozen=True)
class CameraPath:
    """A camera trajectory.

    positions: (T, 3) camera centres in the world [m].
    rotations: (T, 3, 3) ``R_wc``: columns are the OpenCV camera axes in the world.
    fovy: vertical field of view [rad] (constant over the clip).
    """

    positions: np.ndarray
    rotations: np.ndarray
    fovy: float

    def __len__(self) -> int:
        return int(self.positions.shape[0])

    def K(self, width: int, height: int) -> np.ndarray:
        """(3, 3) OpenCV intrinsics [pixels] for a ``width`` x ``height`` image."""
        return intrinsics(width, height, self.fovy)

    def project(self, i: int, points: np.ndarray, width: int, height: int) -> np.ndarray:
        """Pixel coordinates (M, 2) and depths of world points (M, 3) in frame ``i``: returns (M, 3) u, v, z."""
        return project(self.K(width, height), self.positions[i], self.rotations[i], points)


def intrinsics(width: int, height: int, fovy: float) -> np.ndarray:
    """OpenCV ``K`` (3, 3) [pixels] of MuJoCo's camera with vertical field of view ``fovy`` [rad]."""
    if not (0 < fovy < np.pi):
        raise InputError(f"fovy = {fovy!r} rad; expected 0 < fovy < pi")
    f = (height / 2.0) / np.tan(fovy / 2.0)
    return np.array([[f, 0.0, width / 2.0 - 0.5], [0.0, f, height / 2.0 - 0.5], [0.0, 0.0, 1.0]])


def project(K: np.ndarray, position: np.ndarray, R_wc: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Project world points (M, 3) [m] with a camera (centre, ``R_wc``) and ``K``: (M, 3) of u, v [px], depth [m]."""
    pc = (np.asarray(points, float) - position) @ R_wc  # (M,3): R_wc.T @ (p - c)
    z = pc[:, 2]
    uv = (pc @ K.T)[:, :2] / z[:, None]
    return np.column_stack([uv, z])


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``R_wc`` (..., 3, 3) of cameras at ``eye`` looking at ``target``, image-up towards ``up``.

    >>> R = look_at(np.array([0., -2, 0]), np.zeros(3), np.array([0., 0, 1]))
    >>> R[:, 0].tolist(), R[:, 1].tolist(), R[:, 2].tolist()  # x right=+x, y down=-z, z forward=+y
    ([1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0])
    """
    f = np.asarray(target, float) - np.asarray(eye, float)
    f = f / np.linalg.norm(f, axis=-1, keepdims=True)
    x = np.cross(f, np.broadcast_to(up, f.shape))
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    y = np.cross(f, x)
    return np.stack([x, y, f], axis=-1)


def _rot_small(angles: np.ndarray) -> np.ndarray:
    """Rotation matrices (T, 3, 3) from rotation vectors (T, 3) [rad] (Rodrigues)."""
    th = np.linalg.norm(angles, axis=-1)[:, None, None]
    k = angles / np.maximum(np.linalg.norm(angles, axis=-1, keepdims=True), 1e-12)
    Kx = np.zeros((len(angles), 3, 3))
    Kx[:, 0, 1], Kx[:, 0, 2], Kx[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
    Kx = Kx - np.transpose(Kx, (0, 2, 1))
    return np.eye(3) + np.sin(th) * Kx + (1 - np.cos(th)) * (Kx @ Kx)


def smooth_noise(rng: np.random.Generator, t: np.ndarray, f_lo: float, f_hi: float, n: int = 4) -> np.ndarray:
    """A smooth random signal of ``t`` (T,) with unit-ish RMS: a sum of ``n`` sines with frequencies in
    [f_lo, f_hi] Hz."""
    freqs = rng.uniform(f_lo, f_hi, n)
    phases = rng.uniform(0, 2 * np.pi, n)
    amps = rng.uniform(0.5, 1.0, n)
    s = (amps[None] * np.sin(2 * np.pi * freqs[None] * t[:, None] + phases[None])).sum(axis=1)
    return s / np.sqrt(0.5 * (amps ** 2).sum())


def _robot_extent_points(points: np.ndarray) -> np.ndarray:
    """Robot centre per frame (T, 3) from link points (T, M, 3)."""
    return 0.5 * (points.min(axis=1) + points.max(axis=1))


def _margins(path_pos: np.ndarray, path_rot: np.ndarray, K: np.ndarray, points: np.ndarray,
             radius: float, width: int, height: int) -> np.ndarray:
    """Smallest distance [px] from the projected robot (points + radius) to the image border, per frame."""
    out = np.empty(len(path_pos))
    for i in range(len(path_pos)):
        uvz = project(K, path_pos[i], path_rot[i], points[i])
        r = K[1, 1] * radius / np.maximum(uvz[:, 2], 1e-6)
        m = np.minimum.reduce([uvz[:, 0] - r + 0.5, width - 0.5 - uvz[:, 0] - r,
                               uvz[:, 1] - r + 0.5, height - 0.5 - uvz[:, 1] - r])
        out[i] = m.min() if np.all(uvz[:, 2] > 0.05) else -1e9
    return out


def _pull_back(eye_fn, target: np.ndarray, up: np.ndarray, K: np.ndarray, points: np.ndarray, radius: float,
               width: int, height: int, margin_px: float, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Scale the camera's distance from its target up, smoothly, where the robot would leave the frame."""
    T = len(target)
    scale = np.ones(T)
    for _ in range(12):
        eye = eye_fn(scale)
        R = look_at(eye, target, up)
        m = _margins(eye, R, K, points, radius, width, height)
        bad = m < margin_px
        if not bad.any():
            break
        need = np.where(bad, 1.12, 1.0)
        w = max(1, int(round(0.6 * fps)))
        need = maximum_filter1d(need, size=2 * w + 1, mode="nearest")
        need = gaussian_filter1d(need, sigma=w / 2, mode="nearest")
        scale = scale * np.maximum(need, 1.0)
    eye = eye_fn(scale)
    return eye, look_at(eye, target, up)


def camera_path(scene: str, times: np.ndarray, robot_points: np.ndarray, *, body_diameter: float,
                width: int = 640, height: int = 360, seed: int = 0, margin_px: float = 12.0,
                target_width_px: float = 11.0) -> CameraPath:
    """The camera trajectory of ``scene`` for a robot whose points move as ``robot_points``.

    times: (T,) frame times [s].
    robot_points: (T, M, 3) points on the robot's axis in the world [m] (link
        end points and centres), used for aiming and to keep it in view.
    body_diameter: typical visual body diameter [m]; sets the focal length so
        the body is about ``target_width_px`` wide at the scene's nominal distance.
    margin_px: the robot (points dilated by the body radius) stays this far from the border.
    """
    if scene not in SCENES:
        raise InputError(f"scene {scene!r}; expected one of {', '.join(SCENES)}")
    times = np.asarray(times, float)
    pts = np.asarray(robot_points, float)
    if pts.ndim != 3 or pts.shape[0] != times.shape[0] or pts.shape[2] != 3:
        raise InputError(f"robot_points: shape {pts.shape}; expected ({times.shape[0]}, M, 3)")
    T = len(times)
    rng = np.random.default_rng([seed, 7331])
    fps = 1.0 / np.median(np.diff(times)) if T > 1 else 30.0
    radius = 0.5 * body_diameter * 1.4  # housings and caps are wider than the body
    centre = _robot_extent_points(pts)
    sig = max(1.0, 0.5 * fps)
    target = gaussian_filter1d(centre, sigma=sig, axis=0, mode="nearest")
    target[:, 2] = 0.0 + 0.5 * np.clip(centre[:, 2].mean(), 0, None)
    up_z = np.array([0.0, 0.0, 1.0])

    if scene == "static":
        lo, hi = pts.reshape(-1, 3).min(axis=0), pts.reshape(-1, 3).max(axis=0)
        mid = 0.5 * (lo + hi)
        mid[2] = 0.0
        side = rng.choice([-1.0, 1.0])
        dist = rng.uniform(1.9, 2.3)
        eye = mid + np.array([rng.uniform(-0.3, 0.3), side * dist, rng.uniform(1.2, 1.6)])
        R = look_at(eye, mid, up_z)
        # narrowest fovy that shows every robot point of the clip with the margin
        flat = pts.reshape(-1, 3)
        pc = (flat - eye) @ R
        if np.any(pc[:, 2] < 0.1):
            raise InputError("static scene: the robot passes behind the tripod; use fewer frames")
        r_px_per_f = radius / pc[:, 2]
        # |u - cx| = f |x/z| + f r/z <= W/2 - margin  →  f <= (W/2 - margin) / (|x/z| + r/z)
        fx_max = (width / 2 - margin_px) / np.max(np.abs(pc[:, 0] / pc[:, 2]) + r_px_per_f)
        fy_max = (height / 2 - margin_px) / np.max(np.abs(pc[:, 1] / pc[:, 2]) + r_px_per_f)
        f = min(fx_max, fy_max)
        # a robot that stays in one place is not zoomed in on beyond 1.6x the target width
        f = min(f, 1.6 * target_width_px * float(np.median(pc[:, 2])) / body_diameter)
        fovy = 2 * np.arctan((height / 2) / f)
        return CameraPath(np.repeat(eye[None], T, 0), np.repeat(R[None], T, 0), float(fovy))

    if scene == "handheld":
        d_nom = 2.0
        f = target_width_px * d_nom / body_diameter
        fovy = float(2 * np.arctan((height / 2) / f))
        K = intrinsics(width, height, fovy)
        side = rng.choice([-1.0, 1.0])
        lat = 1.45 + 0.15 * smooth_noise(rng, times, 0.03, 0.15)
        hgt = 1.55 + 0.08 * smooth_noise(rng, times, 0.05, 0.25)
        along = 0.25 * smooth_noise(rng, times, 0.03, 0.12)
        # the person walks after the robot with a lag (smoothed target)
        walk = gaussian_filter1d(centre, sigma=max(1.0, 1.0 * fps), axis=0, mode="nearest")
        aim_drift = 0.04 * np.stack([smooth_noise(rng, times, 0.05, 0.4) for _ in range(3)], 1)
        aim = target + aim_drift * np.array([1, 1, 0.5])

        def eye_fn(scale: np.ndarray) -> np.ndarray:
            base = np.column_stack([walk[:, 0] + along, walk[:, 1] + side * lat, hgt])
            return aim + scale[:, None] * (base - aim)

        eye, R = _pull_back(eye_fn, aim, up_z, K, pts, radius, width, height, margin_px + 4, fps)
        # shake: small rotations in the camera frame (2-9 Hz) plus a slow roll, millimetre jitter
        shake = np.stack([0.0035 * smooth_noise(rng, times, 2.0, 9.0, n=6) for _ in range(3)], 1)
        shake[:, 2] += 0.02 * smooth_noise(rng, times, 0.05, 0.3)
        R = R @ _rot_small(shake)
        eye = eye + 0.002 * np.stack([smooth_noise(rng, times, 1.5, 6.0) for _ in range(3)], 1)
        return CameraPath(eye, R, fovy)

    if scene == "low-handheld":
        return _low_handheld(rng, times, pts, centre, radius, width, height, margin_px, fps, target_width_px,
                             body_diameter)

    # drone
    d_nom = 3.0
    f = target_width_px * d_nom / body_diameter
    fovy = float(2 * np.arctan((height / 2) / f))
    K = intrinsics(width, height, fovy)
    # heading of the robot: from the smoothed tail-to-head direction
    axis = gaussian_filter1d(pts[:, -1, :2] - pts[:, 0, :2], sigma=sig, axis=0, mode="nearest")
    heading = np.unwrap(np.arctan2(axis[:, 1], axis[:, 0]))
    heading = gaussian_filter1d(heading, sigma=2 * sig, mode="nearest")
    yaw_off = np.deg2rad(22.0) * smooth_noise(rng, times, 0.04, 0.12, n=3) / 1.5
    img_up = heading + np.pi / 2 * rng.choice([-1.0, 1.0]) + yaw_off
    up = np.column_stack([np.cos(img_up), np.sin(img_up), np.zeros(T)])
    hgt = 3.0 + 0.6 * smooth_noise(rng, times, 0.05, 0.15, n=3) / 1.5
    tilt = np.deg2rad(12.0 + 6.0 * smooth_noise(rng, times, 0.05, 0.2, n=3) / 1.5)
    tilt_dir = img_up + rng.uniform(-0.6, 0.6)
    off = np.column_stack([-np.tan(tilt) * np.cos(tilt_dir), -np.tan(tilt) * np.sin(tilt_dir), np.ones(T)])

    def eye_fn(scale: np.ndarray) -> np.ndarray:
        return target + (scale * hgt)[:, None] * off

    eye, R = _pull_back(eye_fn, target, up, K, pts, radius, width, height, margin_px, fps)
    # a drone gimbal is stabilised but not perfect: tiny high-frequency jitter
    jitter = np.stack([0.0008 * smooth_noise(rng, times, 3.0, 12.0, n=5) for _ in range(3)], 1)
    R = R @ _rot_small(jitter)
    return CameraPath(eye, R, fovy)


def _low_handheld(rng: np.random.Generator, times: np.ndarray, pts: np.ndarray, centre: np.ndarray,
                  radius: float, width: int, height: int, margin_px: float, fps: float,
                  target_width_px: float, body_diameter: float) -> CameraPath:
    """The ``low-handheld`` path: a crouching person who shifts position now and then and pans to follow."""
    T = len(times)
    d_nom = 1.2
    f = target_width_px * d_nom / body_diameter
    fovy = float(2 * np.arctan((height / 2) / f))
    K = intrinsics(width, height, fovy)
    # overall direction of travel (the robot's heading averaged over seconds)
    axis = gaussian_filter1d(pts[:, -1, :2] - pts[:, 0, :2], sigma=max(1.0, 2.0 * fps), axis=0, mode="nearest")
    heading = np.unwrap(np.arctan2(axis[:, 1], axis[:, 0]))
    side = rng.choice([-1.0, 1.0])
    # the person holds a position for 2-4 s, then moves: anchors at those times, quick smooth moves between
    anchors = [0.0]
    while anchors[-1] < times[-1]:
        anchors.append(anchors[-1] + rng.uniform(2.0, 4.0))
    k = np.searchsorted(np.array(anchors), times, side="right") - 1
    ka = np.clip(np.round(np.array(anchors) * fps).astype(int), 0, T - 1)
    n_a = len(anchors)
    phi = side * np.deg2rad(rng.uniform(60.0, 120.0, n_a))     # off the heading, per anchor
    dist = rng.uniform(0.9, 1.4, n_a)
    ang = heading[ka] + phi
    held = centre[ka, :2] + dist[:, None] * np.column_stack([np.cos(ang), np.sin(ang)])
    xy = gaussian_filter1d(held[k], sigma=max(1.0, 0.35 * fps), axis=0, mode="nearest")
    hgt = 0.32 + 0.07 * smooth_noise(rng, times, 0.05, 0.3) / 1.4
    # the phone follows the robot closely (a short lag) with a small wandering aim
    aim = gaussian_filter1d(centre, sigma=max(1.0, 0.2 * fps), axis=0, mode="nearest")
    aim[:, 2] = 0.5 * np.clip(centre[:, 2].mean(), 0, None)
    aim = aim + 0.03 * np.stack([smooth_noise(rng, times, 0.1, 0.6) for _ in range(3)], 1) * np.array([1, 1, 0.3])
    up_z = np.array([0.0, 0.0, 1.0])

    def eye_fn(scale: np.ndarray) -> np.ndarray:
        base = np.column_stack([xy, hgt])
        return aim + scale[:, None] * (base - aim)

    eye, R = _pull_back(eye_fn, aim, up_z, K, pts, radius, width, height, margin_px + 4, fps)
    shake = np.stack([0.005 * smooth_noise(rng, times, 2.0, 9.0, n=6) for _ in range(3)], 1)
    shake[:, 2] += 0.035 * smooth_noise(rng, times, 0.05, 0.3)
    R = R @ _rot_small(shake)
    eye = eye + 0.003 * np.stack([smooth_noise(rng, times, 1.5, 6.0) for _ in range(3)], 1)
    return CameraPath(eye, R, fovy)
