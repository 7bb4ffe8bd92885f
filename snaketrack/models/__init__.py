"""Robot models, without I/O beyond reading their YAML files.

- :func:`load_robot` / :class:`Robot`: a robot description (links, joints, capsules, visual bodies).
- :func:`forward_kinematics` (torch, batched) and :func:`forward_kinematics_np` (one pose).
- :class:`PlanarSnakeModel`: the planar dynamic model with anisotropic friction.
- :mod:`snaketrack.models.statics`: the static model of cable-driven rolling-joint robots.
"""
from snaketrack._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Robot": "robot", "load_robot": "robot", "available_robots": "robot", "robot_from_dict": "robot",
    "forward_kinematics": "kinematics", "forward_kinematics_np": "kinematics", "ChainPose": "kinematics",
    "PlanarSnakeModel": "planar_dynamics", "SnakeParams": "planar_dynamics",
    "axis_angle_to_matrix": "rotations", "quat_to_matrix": "rotations", "matrix_to_quat": "rotations",
})
