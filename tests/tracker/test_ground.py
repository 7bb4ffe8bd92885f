"""The camera's height over the ground from the ground plane's homography (snaketrack.tracker.calib.ground)."""
import math

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from snaketrack.errors import InputError
from snaketrack.tracker.calib.ground import GroundTracker, height_ratio, rotation_from_homography

K = np.array([[420.0, 0.0, 159.5], [0.0, 420.0, 119.5], [0.0, 0.0, 1.0]])
W, H = 320, 240


def test_height_ratio_is_the_ratio_of_camera_heights_for_any_scale_of_h():
    rng = np.random.default_rng(3)
    for _ in range(20):
        R_r = Rotation.from_rotvec(rng.normal(size=3) * 0.4).as_matrix()  # camera r's axes in the world
        R_k = Rotation.from_rotvec(rng.normal(size=3) * 0.4).as_matrix()
        C_r = np.array([0.0, 0.0, rng.uniform(1.0, 3.0)])  # camera centres above the ground z = 0
        C_k = C_r + rng.normal(size=3) * [0.5, 0.5, 0.3]
        # X_k = R (X_r) + t for a world point seen from both, R = R_kᵀ R_r, t = R_kᵀ (C_r − C_k)
        R = R_k.T @ R_r
        t = R_k.T @ (C_r - C_k)
        n_r, n_k = R_r.T @ [0, 0, 1.0], R_k.T @ [0, 0, 1.0]
        Hn = R - np.outer(t, n_r) / C_r[2]
        # check the plane induced homography on a ground point before trusting it
        X = np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), 0.0])
        x_r, x_k = R_r.T @ (X - C_r), R_k.T @ (X - C_k)
        assert np.allclose(np.cross(Hn @ x_r, x_k), 0, atol=1e-9)
        Hpx = K @ Hn @ np.linalg.inv(K) * rng.choice([-1.0, 1.0]) * rng.uniform(0.1, 10)
        assert height_ratio(Hpx, K, n_r, n_k) == pytest.approx(C_k[2] / C_r[2], rel=1e-9)


def test_rotation_from_homography_is_the_camera_rotation_for_any_scale_of_h():
    rng = np.random.default_rng(4)
    for _ in range(20):
        R_r = Rotation.from_rotvec(rng.normal(size=3) * 0.4).as_matrix()
        R_k = R_r @ Rotation.from_rotvec(rng.normal(size=3) * 0.2).as_matrix()  # turned by < 90°
        C_r = np.array([0.0, 0.0, rng.uniform(1.0, 3.0)])
        C_k = C_r + rng.normal(size=3) * [0.5, 0.5, 0.3]
        R, t = R_k.T @ R_r, R_k.T @ (C_r - C_k)
        n_r = R_r.T @ [0, 0, 1.0]
        Hpx = K @ (R - np.outer(t, n_r) / C_r[2]) @ np.linalg.inv(K) * rng.choice([-1.0, 1.0]) * rng.uniform(0.1, 10)
        assert np.allclose(rotation_from_homography(Hpx, K, n_r), R, atol=1e-9)


def _texture(rng, size=1024):
    img = cv2.GaussianBlur(rng.uniform(0, 255, (size, size)).astype(np.float32), (0, 0), 2.0)
    img = cv2.normalize(img, None, 0, 255, cv2.NORM_MINMAX)
    return img.astype(np.float32)


def _render_ground(tex, px_per_m, R_wc, C):
    """A view of the textured ground z = 0 by ray casting (not a homography): (H, W) uint8."""
    u, v = np.meshgrid(np.arange(W, dtype=float), np.arange(H, dtype=float))
    rays = np.linalg.solve(K, np.stack([u.ravel(), v.ravel(), np.ones(u.size)]))
    rw = R_wc @ rays
    s = -C[2] / rw[2]
    X = C[:, None] + s * rw
    mx = (X[0] * px_per_m + tex.shape[1] / 2).reshape(H, W).astype(np.float32)
    my = (X[1] * px_per_m + tex.shape[0] / 2).reshape(H, W).astype(np.float32)
    return np.clip(cv2.remap(tex, mx, my, cv2.INTER_LINEAR), 0, 255).astype(np.uint8)


def _camera(k):
    """A handheld-like camera: looks down at 45°, drifts sideways and rises (1.35 → 1.51 m, with a wobble).

    The tracker's height is a line fit through the last 20 measurements (``GroundConfig.smooth_frames``),
    so a height that swings within a fraction of a second would lag; this one changes steadily."""
    pitch = math.radians(135 + 3 * math.sin(0.2 * k))  # about world x: the optical axis 45° below the horizon
    R_wc = Rotation.from_euler("xz", [pitch, 0.05 * math.sin(0.1 * k)]).as_matrix()
    C = np.array([0.01 * k, -1.2 + 0.005 * k, 1.35 + 0.004 * k + 0.01 * math.sin(0.08 * k)])
    return R_wc, C


def test_ground_tracker_follows_the_height_of_a_ray_cast_camera():
    tex = _texture(np.random.default_rng(0))
    tracker = GroundTracker(K)
    heights, truth = [], []
    for k in range(40):
        R_wc, C = _camera(k)
        img = _render_ground(tex, 200.0, R_wc, C)
        robot = np.zeros((H, W), bool)
        robot[100 + k:130 + k, 60 + 3 * k:200 + 3 * k] = True  # a moving object: its pixels are left out
        img[robot] = 255 - img[robot]
        heights.append(tracker.step(img, R_wc.T @ [0, 0, 1.0], robot))
        truth.append(C[2])
    ratio = np.array(truth) / truth[0]
    assert heights[0] == 1.0
    assert ratio.max() / ratio.min() > 1.1  # the camera did rise and fall
    err = np.abs(np.array(heights) / ratio - 1)  # per-frame jitter of the homography's scale, ~0.2 % typical
    assert err.mean() < 0.006 and err.max() < 0.025


def test_ground_tracker_input_and_gaps():
    tracker = GroundTracker(K)
    assert tracker.step(np.zeros((H, W), np.uint8), None) is None  # no up direction yet: no height
    with pytest.raises(InputError, match="uint8"):
        tracker.step(np.zeros((H, W), np.float32), [0, 0, -1.0])
    with pytest.raises(InputError, match="K"):
        GroundTracker(np.eye(2))
    # a blank image has no corners: the height stays where it was (1 at the start)
    assert tracker.step(np.zeros((H, W), np.uint8), [0, 0, -1.0]) == 1.0
    assert tracker.step(np.zeros((H, W), np.uint8), [0, 0, -1.0]) == 1.0


def test_ground_tracker_follows_the_up_direction_from_the_first_frame():
    """Given the first frame's up direction only, the followed one stays with the ray-cast camera's as it
    pitches, rolls and moves, and its rotation from the first frame is the camera's."""
    tex = _texture(np.random.default_rng(1))
    tracker = GroundTracker(K, follow=True)
    errs = []
    for k in range(40):
        R_wc, C = _camera(k)
        img = _render_ground(tex, 200.0, R_wc, C)
        up = R_wc.T @ [0, 0, 1.0]
        tracker.step(img, up if k == 0 else None)
        errs.append(math.degrees(math.acos(np.clip(tracker.up @ up, -1, 1))))
    R0, _ = _camera(0)
    turned = math.degrees(math.acos(np.clip((R_wc.T @ [0, 0, 1.0]) @ (R0.T @ [0, 0, 1.0]), -1, 1)))
    assert turned > 2.5  # the camera did turn
    assert np.mean(errs) < 0.4 and max(errs) < 2.5  # ~0.1–0.3° a frame, a jump to ~2° as the tracks age
    assert np.allclose(tracker.rotation, R_wc.T @ R0, atol=0.03)
