"""Test helper: masks of posed robots from MuJoCo's segmentation render (an independent renderer).

The world frame is the OpenCV camera frame (x right, y down, z forward); the
MuJoCo camera sits at the origin turned by π about x (MuJoCo cameras look
along their −z with y up). The floor is removed so only the robot is seen.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import numpy as np
import torch

# torch.optim / torch.func import triton lazily; importing it after MuJoCo has
# loaded EGL crashed the process (segfault in triton's C module), so load it first.
try:  # pragma: no cover - depends on the installation
    import triton  # noqa: F401
except Exception:
    pass

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def intrinsics(width: int, height: int, f: float) -> np.ndarray:
    """K of a MuJoCo camera with focal length f [px] (principal point at W/2 − 0.5: MuJoCo samples pixel centres)."""
    return np.array([[f, 0, width / 2 - 0.5], [0, f, height / 2 - 0.5], [0, 0, 1.0]])


class MujocoMasks:
    """Segmentation masks of ``robot`` at camera-frame poses, (H, W) bool."""

    def __init__(self, robot, width: int, height: int, f: float):
        import mujoco

        from snaketrack.sim.mjcf import build_world, load_model, robot_geom_ids

        root = build_world(robot, torque_limit=None)
        world = root.find("worldbody")
        for g in list(world):
            if g.tag == "geom" and g.get("name") == "floor":
                world.remove(g)
        fovy = math.degrees(2 * math.atan((height / 2) / f))
        ET.SubElement(world, "camera", name="cam", pos="0 0 0", quat="0 1 0 0", fovy=f"{fovy:.9g}")
        self.model = load_model(root)
        self.data = mujoco.MjData(self.model)
        self.robot = robot
        self.K = intrinsics(width, height, f)
        self.width, self.height = width, height
        self.geoms = robot_geom_ids(self.model, robot)
        from snaketrack.sim.mjcf import joint_qpos_addresses

        self.qadr = joint_qpos_addresses(self.model, robot)
        self.renderer = mujoco.Renderer(self.model, height, width)
        self.renderer.enable_segmentation_rendering()

    def mask(self, q, R0, t0) -> np.ndarray:
        import mujoco

        from snaketrack.models.rotations import matrix_to_quat

        self.data.qpos[:3] = t0
        self.data.qpos[3:7] = matrix_to_quat(torch.as_tensor(np.asarray(R0, float))).numpy()
        self.data.qpos[self.qadr] = q
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera="cam")
        seg = self.renderer.render()
        return np.isin(seg[..., 0], self.geoms) & (seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM))

    def close(self):
        self.renderer.close()


def ground_rotation(tilt: float, yaw: float) -> np.ndarray:
    """Base rotation (3, 3) of a robot lying on a ground plane seen by a camera tilted ``tilt`` [rad]
    from looking straight down; ``yaw`` [rad] turns the robot on the ground. Link z points up (to the camera)."""
    c, s = math.cos(tilt), math.sin(tilt)
    down = np.array([0.0, s, c])  # ground normal pointing away from the camera
    up = -down
    x = np.array([math.cos(yaw), math.sin(yaw) * c, -math.sin(yaw) * s])
    x -= (x @ up) * up
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(up, x), up], axis=1)


def serpentine(robot, k: int, fps: float = 30.0, amp: float = 0.6, tilt: float = 0.5):
    """A sliding serpentine pose at frame k: (q (J,), R0, t0) in the camera frame."""
    t = k / fps
    J = robot.dof
    q = np.zeros(J)
    lower, upper = robot.lower, robot.upper
    idx = 0
    for i, joint in enumerate(robot.joints):
        for a in joint.axes:
            q[idx] = (amp if a == "z" else 0.2) * math.sin(2.0 * t - 0.9 * i)
            idx += 1
    q = np.clip(q, 0.9 * lower, 0.9 * upper)
    R0 = ground_rotation(tilt, 0.3 + 0.1 * t)
    up = R0[:, 2]
    centre = np.array([0.0, 0.0, 2.2]) + 0.05 * t * R0[:, 0]
    t0 = centre - 0.5 * robot.total_length * R0[:, 0] + robot.links[0].radius * up * 0
    return q, R0, t0
