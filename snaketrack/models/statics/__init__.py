"""Static model with gravity compensation of a rolling-joint, cable-driven snake-like robot.

Implements Hu, Liu, Zeng, Chua, Katupitiya & Wu, "Static Modeling of a Class
of Stiffness-Adjustable Snake-Like Robots with Gravity Compensation",
*Robotics* 12(2), 2023: given the four cable tensions, the link geometry and
mass and the direction of gravity, compute every bending angle and the tip
position. No I/O except reading the robot's YAML description.

The robot
    ``n`` links numbered 1 (the fixed base) to ``n`` (the distal link), joined
    by ``n - 1`` rolling joints: two cylindrical contact surfaces of radius
    ``R`` roll on each other, so the joint bends by θ while each surface turns
    by θ/2. Link ``i``'s bottom surface (towards the tip) is turned by the
    orientation ``α_i`` about the link axis relative to its top surface
    (towards the base); ``α_i = α`` for odd ``i`` and ``−α`` for even ``i``.
    Four cables at distance ``r`` from the axis run from the base to the distal
    link, where they end; their tensions are constant along their length
    (frictionless).

Modules: :mod:`~snaketrack.models.statics.robot` (the robot record and its
YAML files), :mod:`~snaketrack.models.statics.kinematics` (frames, link poses,
tip), :mod:`~snaketrack.models.statics.equilibrium` (one backward sweep of the
link balances), :mod:`~snaketrack.models.statics.solver` (the Gauss–Seidel
loop with relaxation and halving), :mod:`~snaketrack.models.statics.plot` (the
3-D shape as image bytes). Units: metres, radians, newtons,
kilograms, m/s².

>>> import math
>>> robot = load_statics_robot("rolling-joint-6", density=1050.0)
>>> res = solve_statics(robot, (0.0, 2.4, 0.0, 5.1), mount_gravity("ground"))
>>> [round(math.degrees(t), 2) for t in res.bending_angles]
[31.91, 31.22, 30.28, 29.51, 29.1]
>>> [round(1000 * p, 2) for p in res.tip_position]
[46.23, 0.0, 10.19]
"""
from snaketrack.models.statics.kinematics import backbone_points, link_transforms, tip_position
from snaketrack.models.statics.plot import shape_image
from snaketrack.models.statics.robot import (
    STATICS_ROBOTS_DIR,
    StaticsRobot,
    load_statics_robot,
    statics_robot_names,
)
from snaketrack.models.statics.solver import (
    MOUNTS,
    STANDARD_GRAVITY,
    StaticsConfig,
    StaticsResult,
    check_tensions,
    mount_gravity,
    solve_no_gravity,
    solve_statics,
)

__all__ = [
    "MOUNTS", "STANDARD_GRAVITY", "STATICS_ROBOTS_DIR", "StaticsConfig", "StaticsResult", "StaticsRobot",
    "backbone_points", "check_tensions", "link_transforms", "load_statics_robot", "mount_gravity",
    "shape_image", "solve_no_gravity", "solve_statics", "statics_robot_names", "tip_position",
]
