"""A small dataset drawn from known poses of the planar snake, without MuJoCo: masks from the
tracker's own silhouette renderer, exact truth. Shared by the tests of ``snaketrack track`` and of
the measuring scripts (importable from any test: conftest.py's folder is on ``sys.path``)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch

from snaketrack.datasets.layout import DatasetWriter
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.tracker.state import StateLayout

W, H, FPS = 320, 240, 30.0
K = np.array([[400.0, 0, 159.5], [0, 400.0, 119.5], [0, 0, 1]])  # body about 8 px wide at 2 m
R_DOWN = np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]])  # robot lying flat, camera looking down
QUAT_DOWN = [0.0, 1.0, 0.0, 0.0]  # R_DOWN: a half turn about x


def pose(robot, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Frame ``i``'s joint angles [rad] and base position [m, camera frame]: a travelling wave, crawling along x."""
    t = i / FPS
    q = 0.4 * np.sin(2 * np.pi * 0.5 * t + 0.6 * np.arange(robot.dof))
    return q, np.array([-0.52 + 0.1 * t, 0.02, 2.0])


def write_posed_dataset(root: Path, n: int, seed: int, housings: Optional[str] = None) -> Path:
    """``n`` frames of planar-snake-11 at :func:`pose` into ``root`` (frames: the robot orange on grey).
    ``housings``: draw the masks with ``CapsuleModel.from_visual(robot, housings)`` (the tracker's model)
    instead of the renderer's default."""
    from snaketrack.tracker.primitives import CapsuleModel
    from snaketrack.tracker.render import SilhouetteRenderer

    robot = load_robot("planar-snake-11")
    layout = StateLayout.for_robot(robot)
    model = None if housings is None else CapsuleModel.from_visual(robot, housings)
    ren = SilhouetteRenderer(robot, K, W, H) if model is None else SilhouetteRenderer(robot, K, W, H, model)
    meta = {"K": K.tolist(), "width": W, "height": H, "fps": FPS, "robot": "planar-snake-11",
            "scene": "static", "seed": seed}
    with DatasetWriter(root, meta, masks=True, truth=True) as w:
        for i in range(n):
            q, base = pose(robot, i)
            with torch.no_grad():
                mask = ren.full_image(torch.as_tensor(layout.pack(q, R_DOWN, base))[None])[0].numpy() > 0.5
            rgb = np.full((H, W, 3), 90, np.uint8)
            rgb[mask] = (200, 120, 40)
            head = forward_kinematics_np(robot, q, R_DOWN, base)["head"]
            w.write_frame(rgb, mask, {"t": i / FPS, "joint_angles": q.tolist(), "base_position_cam": base.tolist(),
                                      "base_quat_cam": QUAT_DOWN, "head_position_cam": head.tolist()})
    return root
