"""A small dataset drawn from known poses of the planar snake, without MuJoCo: masks from the
tracker's own silhouette renderer, exact truth. Shared by the tests of ``snaketrack track`` and of
the measuring scripts (importable from any test: conftest.py's folder is on ``sys.path``)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import numpy as np
import torch

from snaketrack.datasets.layout import DatasetWriter
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.tracker.state import StateLayout, TrackState

W, H, FPS = 320, 240, 30.0
K = np.array([[400.0, 0, 159.5], [0, 400.0, 119.5], [0, 0, 1]])  # body about 8 px wide at 2 m
R_DOWN = np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]])  # robot lying flat, camera looking down
QUAT_DOWN = [0.0, 1.0, 0.0, 0.0]  # R_DOWN: a half turn about x


def pose(robot, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Frame ``i``'s joint angles [rad] and base position [m, camera frame]: a travelling wave, crawling along x."""
    t = i / FPS
    q = 0.4 * np.sin(2 * np.pi * 0.5 * t + 0.6 * np.arange(robot.dof))
    return q, np.array([-0.52 + 0.1 * t, 0.02, 2.0])


def _rot_x(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[1.0, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])


def _quat(R: np.ndarray) -> list[float]:
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    q = np.array([w, x, y, z])
    return (q if q[0] >= 0 else -q).tolist()


def write_posed_dataset(root: Path, n: int, seed: int, housings: Optional[str] = None, tilt_deg: float = 0.0,
                        K_true: Optional[np.ndarray] = None) -> Path:
    """``n`` frames of planar-snake-11 at :func:`pose` into ``root`` (frames: the robot orange on grey).
    ``housings``: draw the masks with ``CapsuleModel.from_visual(robot, housings)`` (the tracker's model)
    instead of the renderer's default. ``tilt_deg``: the scene turned about the camera's x axis through
    the point 2 m ahead, an oblique view (0: straight down); truth rows then carry ``camera_quat_world``
    (the world: the robot's ground, z up). ``K_true``: the camera's (3, 3) intrinsics [px], default ``K``."""
    from snaketrack.tracker.render.primitives import CapsuleModel
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer

    robot = load_robot("planar-snake-11")
    layout = StateLayout.for_robot(robot)
    model = None if housings is None else CapsuleModel.from_visual(robot, housings)
    Kt = K if K_true is None else np.asarray(K_true, float)
    ren = SilhouetteRenderer(robot, Kt, W, H) if model is None else SilhouetteRenderer(robot, Kt, W, H, model)
    T = _rot_x(tilt_deg)
    centre = np.array([0.0, 0.0, 2.0])
    R_cw = T @ R_DOWN  # the world (the robot lying flat: R_DOWN's frame) in the camera frame
    meta = {"K": Kt.tolist(), "width": W, "height": H, "fps": FPS, "robot": "planar-snake-11",
            "scene": "static", "seed": seed}
    with DatasetWriter(root, meta, masks=True, truth=True) as w:
        for i in range(n):
            q, base = pose(robot, i)
            base = T @ (base - centre) + centre
            with torch.no_grad():
                mask = ren.full_image(torch.as_tensor(layout.pack(q, R_cw, base))[None])[0].numpy() > 0.5
            rgb = np.full((H, W, 3), 90, np.uint8)
            rgb[mask] = (200, 120, 40)
            head = forward_kinematics_np(robot, q, R_cw, base)["head"]
            row = {"t": i / FPS, "joint_angles": q.tolist(), "base_position_cam": base.tolist(),
                   "base_quat_cam": QUAT_DOWN if tilt_deg == 0 else _quat(R_cw), "head_position_cam": head.tolist()}
            if tilt_deg != 0:
                row["camera_quat_world"] = _quat(R_cw.T)
            w.write_frame(rgb, mask, row)
    return root


class TruePoses:
    """Stand-in for the Tracker: the posed dataset's true pose each frame (:func:`pose`; ``coasting`` when the
    mask is empty), so a run's figures are known; raises at frame ``fail_at``, as an interrupted run would stop.
    Subclasses change what a frame reports through :meth:`frame_pose`."""

    config = SimpleNamespace(min_mask_px=1)  # the session starts it on any mask pixel; no other tracker setting

    def __init__(self, robot, fail_at: Optional[int] = None):
        self.robot, self.i, self.fail_at = robot, -1, fail_at

    def frame_pose(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(q, base position) reported for frame ``i``."""
        return pose(self.robot, i)

    def _state(self, mask):
        from snaketrack.errors import SnaketrackError

        self.i += 1
        if self.i == self.fail_at:
            raise SnaketrackError(f"stopped at frame {self.i}")
        q, base = self.frame_pose(self.i)
        head = forward_kinematics_np(self.robot, q, R_DOWN, base)["head"]
        return TrackState(frame=self.i, t=self.i / FPS, q=q, base_quat=np.array(QUAT_DOWN), base_position=base,
                          head=head, iou=0.9, status="tracked" if mask.any() else "coasting")

    def start(self, mask, t=0.0, up=None):
        return self._state(mask)

    def step(self, mask, t=None, up=None):
        return self._state(mask)
