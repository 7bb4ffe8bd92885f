"""MJCF generated from a robot description, and the obstacle scene of the Jacobian paper.

No hand-written XML per robot: :func:`build_world` turns a
:class:`~snaketrack.models.robot.Robot` into a MuJoCo model. Bodies are named
``link_1 … link_N``; each body frame *is* the link frame of
:mod:`snaketrack.models.kinematics` (origin at the tail-side end of the link
axis, x towards the head), so MuJoCo's ``xpos``/``xmat`` of ``link_i`` equal
the forward kinematics of the same ``qpos``.

Two kinds of geometry per link:

- a collision geom (group 3, hidden in renders) of the description's length
  and radius, carrying the link's mass: this is what touches the floor and
  the obstacles. By default a capsule (axis from the link origin to
  ``length`` along x). A robot file may ask for a square-section prism
  instead with a top-level ``collision: {shape: box}`` (see
  :func:`collision_shape`): a box of half-sizes (length/2, radius, radius)
  centred on the link axis, whose flat bottom and sides match the capsule's
  lowest and outermost points when upright;
- visual geometry (group 1, no contacts, no mass) from ``robot.visual``: body
  cylinders, joint housings, a tail cap and a head cap. Renders and
  segmentation masks see only these, so synthetic video differs from the
  tracker's capsule model.

``qpos`` layout: the free joint of link 1 (x, y, z, qw, qx, qy, qz), then the
joint angles in the robot file's order.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from snaketrack.errors import FileFormatError
from snaketrack.models.robot import Robot

COLLISION_GROUP = 3
VISUAL_GROUP = 1
COLLISION_SHAPES = ("capsule", "box")


def collision_shape(robot: Robot) -> str:
    """The links' collision shape: ``"capsule"`` (default) or ``"box"`` (robot file ``collision: {shape: box}``).

    Why ``box`` exists (measured, docs/oal.md "arcsnake-4 upright"): a chain of
    round capsules has no resistance to rolling about its own axis. A
    yaw-only chain lying bent on the floor cannot roll without lifting links
    (its joints hold the bend in one plane), but a yaw–pitch (universal-joint)
    chain can, and ``arcsnake-4`` with its quadrature pitch wave rolled over
    and over among the posts (its base roll spanned 7.6 rad in 10 s, the tail
    rode up a post to 0.17 m). A square section gives each segment a resting
    face (rolling needs lifting its centre, a righting torque up to m·g·r) and
    flat sides that press horizontally on the posts instead of riding up them.

    >>> from snaketrack.models.robot import load_robot
    >>> collision_shape(load_robot("planar-snake-11")), collision_shape(load_robot("arcsnake-4"))
    ('capsule', 'box')
    """
    spec = robot.extra.get("collision")
    if spec is None:
        return "capsule"
    if not isinstance(spec, dict):
        raise FileFormatError(f"{robot.source}: collision = {spec!r}; expected a mapping like {{shape: box}}")
    shape = spec.get("shape", "capsule")
    if shape not in COLLISION_SHAPES:
        raise FileFormatError(f"{robot.source}: collision.shape = {shape!r}; "
                              f"expected one of {', '.join(COLLISION_SHAPES)}")
    return shape


@dataclass(frozen=True)
class ContactParams:
    """Contact and friction settings (docs/oal.md, "Tuned contact parameters").

    MuJoCo combines two geoms' friction by taking the larger, so the snake and
    the obstacles get a low value and the floor the high ground value:
    snake–floor contacts use ``floor_friction``, snake–obstacle contacts
    ``max(snake_friction, obstacle_friction)``. ``cone="elliptic"`` gives
    isotropic Coulomb friction on the ground. Ground friction 0.5 was
    tuned in docs/oal.md (1.0 let the snake drift 18 % as far without obstacles).
    """

    snake_friction: float = 0.1
    floor_friction: float = 0.5
    obstacle_friction: float = 0.1
    cone: str = "elliptic"
    solref: tuple[float, float] = (0.01, 1.0)
    solimp: tuple[float, float, float] = (0.9, 0.95, 0.001)


@dataclass(frozen=True)
class WheelParams:
    """Passive wheels, one per link: a thin disc under the link's centre on a free hinge across the link.

    The wheel rolls along the link (resisted only by the hinge's ``damping``) and slides sideways
    against the floor's Coulomb friction ``friction``: MuJoCo's own rolling contact gives the body the
    anisotropic friction (low along each link, high across it) that lateral undulation pushes against.
    The wheels are collision geometry (group 3, hidden in renders, never in masks); with wheels only
    they touch the floor (the links' collision geoms still touch obstacles and each other).

    radius: wheel radius [m]; None: the link's radius + 5 mm (the links clear the floor).
    width: disc width [m]; default 0.01. mass: [kg] per wheel; default 0.005.
    friction: sliding μ of wheel on floor (sideways); default 1.0.
    damping: hinge damping [N·m·s/rad], the rolling resistance; default 1e-4.
    """

    radius: Optional[float] = None
    width: float = 0.01
    mass: float = 0.005
    friction: float = 1.0
    damping: float = 1e-4


#: contact bits with wheels: the floor touches only the wheels (bit 2); links, obstacles bit 1
_WHEEL_BITS = "2"


def _f(*xs: float) -> str:
    return " ".join(f"{float(x):.9g}" for x in xs)


def obstacle_positions(k_min: int = -3, k_max: int = 10) -> np.ndarray:
    """Obstacle centres (M, 2) [m] of the Jacobian paper: (0.5k + 0.25, 0.1) and (0.5k, −0.1).

    >>> obstacle_positions(0, 0).tolist()
    [[0.25, 0.1], [0.0, -0.1]]
    """
    pts = []
    for k in range(k_min, k_max + 1):
        pts.append((0.5 * k + 0.25, 0.1))
        pts.append((0.5 * k, -0.1))
    return np.array(pts, dtype=float)


def add_robot(
    parent: ET.Element,
    robot: Robot,
    base_pos: Sequence[float] = (0.0, 0.0, 0.0),
    base_quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    free: bool = True,
    contact: ContactParams = ContactParams(),
    wheels: Optional[WheelParams] = None,
) -> ET.Element:
    """Append the robot's body tree under ``parent``; returns the ``link_1`` body.

    wheels: a passive wheel under each link's centre (:class:`WheelParams`), or None."""
    vis = robot.visual
    shape = collision_shape(robot)
    body = ET.SubElement(parent, "body", name="link_1", pos=_f(*base_pos), quat=_f(*base_quat))
    if free:
        ET.SubElement(body, "freejoint", name="root")
    first = body
    n = robot.n_links
    for i, link in enumerate(robot.links):
        if i > 0:
            joint = robot.joints[i - 1]
            body = ET.SubElement(body, "body", name=f"link_{i + 1}", pos=_f(robot.links[i - 1].length, 0, 0))
            for axis, lo, hi, name in zip(joint.axes, joint.lower, joint.upper, joint.names):
                vec = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}[axis]
                ET.SubElement(body, "joint", name=name, type="hinge", axis=_f(*vec),
                              range=_f(lo, hi), limited="true", armature="0.001", damping="0")
            # joint housing, attached to the child so it turns with it
            if vis.housing_shape == "sphere":
                ET.SubElement(body, "geom", name=f"vis_housing_{i}", type="sphere", size=_f(vis.housing_radius),
                              rgba=_f(*vis.housing_rgba), group=str(VISUAL_GROUP),
                              contype="0", conaffinity="0", mass="0")
            else:
                a = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}[joint.axes[0]]
                h = vis.housing_half_length
                ET.SubElement(body, "geom", name=f"vis_housing_{i}", type="cylinder",
                              fromto=_f(*(-h * np.array(a)), *(h * np.array(a))), size=_f(vis.housing_radius),
                              rgba=_f(*vis.housing_rgba), group=str(VISUAL_GROUP),
                              contype="0", conaffinity="0", mass="0")
        L = link.length
        if shape == "box":
            where = dict(type="box", pos=_f(0.5 * L, 0, 0), size=_f(0.5 * L, link.radius, link.radius))
        else:
            where = dict(type="capsule", fromto=_f(0, 0, 0, L, 0, 0), size=_f(link.radius))
        ET.SubElement(body, "geom", name=f"col_link_{i + 1}", **where,
                      mass=_f(link.mass), friction=_f(contact.snake_friction, 0.005, 0.0001),
                      group=str(COLLISION_GROUP), rgba="0.5 0.5 0.5 0.3")
        if wheels is not None:
            r_w = link.radius + 0.005 if wheels.radius is None else wheels.radius
            wb = ET.SubElement(body, "body", name=f"wheel_{i + 1}", pos=_f(0.5 * L, 0, 0))
            ET.SubElement(wb, "joint", name=f"wheel_{i + 1}", type="hinge", axis="0 1 0",
                          damping=_f(wheels.damping), armature="1e-6")
            ET.SubElement(wb, "geom", name=f"col_wheel_{i + 1}", type="cylinder",
                          fromto=_f(0, -0.5 * wheels.width, 0, 0, 0.5 * wheels.width, 0), size=_f(r_w),
                          mass=_f(wheels.mass), friction=_f(wheels.friction, 0.005, 0.0001),
                          contype=_WHEEL_BITS, conaffinity=_WHEEL_BITS, condim="3",
                          group=str(COLLISION_GROUP), rgba="0.2 0.2 0.2 0.3")
        rgba = vis.head_rgba if i == n - 1 else vis.rgba
        ET.SubElement(body, "geom", name=f"vis_link_{i + 1}", type="cylinder", fromto=_f(0, 0, 0, L, 0, 0),
                      size=_f(vis.body_radius[i]), rgba=_f(*rgba), group=str(VISUAL_GROUP),
                      contype="0", conaffinity="0", mass="0")
        if i == 0:
            ET.SubElement(body, "geom", name="vis_cap_tail", type="sphere", size=_f(vis.cap_radius),
                          rgba=_f(*vis.rgba), group=str(VISUAL_GROUP), contype="0", conaffinity="0", mass="0")
        if i == n - 1:
            c = vis.cap_radius
            ET.SubElement(body, "geom", name="vis_cap_head", type="ellipsoid", pos=_f(L, 0, 0),
                          size=_f(1.6 * c, c, 0.9 * c), rgba=_f(*vis.head_rgba), group=str(VISUAL_GROUP),
                          contype="0", conaffinity="0", mass="0")
    ET.SubElement(first, "site", name="base_site", pos="0 0 0", size="0.005")
    ET.SubElement(body, "site", name="head_site", pos=_f(0.5 * robot.links[-1].length, 0, 0), size="0.005")
    return first


def add_motors(root: ET.Element, robot: Robot, torque_limit: float = 5.0) -> None:
    """One torque motor per joint coordinate, ``ctrl`` in N·m limited to ±torque_limit."""
    act = root.find("actuator")
    if act is None:
        act = ET.SubElement(root, "actuator")
    for name in robot.joint_names:
        ET.SubElement(act, "motor", name=f"motor_{name}", joint=name, gear="1",
                      ctrllimited="true", ctrlrange=_f(-torque_limit, torque_limit))


def build_world(
    robot: Robot,
    *,
    obstacles: Optional[np.ndarray] = None,
    obstacle_radius: float = 0.05,
    obstacle_height: float = 0.10,
    base_pos: Optional[Sequence[float]] = None,
    base_quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    timestep: float = 1 / 240,
    contact: ContactParams = ContactParams(),
    torque_limit: Optional[float] = 5.0,
    floor_size: float = 50.0,
    wheels: Optional[WheelParams] = None,
) -> ET.Element:
    """A complete MJCF ``<mujoco>`` element: floor, optional obstacles, the robot, motors.

    obstacles: (M, 2) centres [m] of vertical cylinders, or None for none.
    base_pos: link 1 origin [m]; default puts the robot straight along +x with
        its head point at the origin (as in the paper's start) and resting on the floor.
    torque_limit: adds one motor per joint coordinate when not None.
    wheels: passive wheels under the links (:class:`WheelParams`); then only they touch the floor.
    """
    root = ET.Element("mujoco", model=f"snaketrack-{robot.name}")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    ET.SubElement(root, "option", timestep=_f(timestep), cone=contact.cone, integrator="implicitfast")
    default = ET.SubElement(root, "default")
    ET.SubElement(default, "geom", solref=_f(*contact.solref), solimp=_f(*contact.solimp))
    visual = ET.SubElement(root, "visual")
    ET.SubElement(visual, "global", offwidth="1920", offheight="1080")
    world = ET.SubElement(root, "worldbody")
    ET.SubElement(world, "light", name="sun", pos="0 0 5", dir="0 0 -1", directional="true")
    bits = {} if wheels is None else {"contype": _WHEEL_BITS, "conaffinity": _WHEEL_BITS}
    ET.SubElement(world, "geom", name="floor", type="plane", size=_f(floor_size, floor_size, 0.1),
                  friction=_f(contact.floor_friction, 0.005, 0.0001), rgba="0.55 0.55 0.5 1", **bits)
    if obstacles is not None:
        for k, (x, y) in enumerate(np.asarray(obstacles, dtype=float).reshape(-1, 2)):
            ET.SubElement(world, "geom", name=f"obstacle_{k}", type="cylinder", pos=_f(x, y, obstacle_height / 2),
                          size=_f(obstacle_radius, obstacle_height / 2),
                          friction=_f(contact.obstacle_friction, 0.005, 0.0001), rgba="0.35 0.3 0.25 1")
    if base_pos is None:
        z = max(l.radius for l in robot.links)
        if wheels is not None:
            z = wheels.radius if wheels.radius is not None else z + 0.005
        base_pos = (-(robot.total_length - 0.5 * robot.links[-1].length), 0.0, z)
    add_robot(world, robot, base_pos=base_pos, base_quat=base_quat, contact=contact, wheels=wheels)
    if torque_limit is not None:
        add_motors(root, robot, torque_limit)
    return root


def to_xml(root: ET.Element) -> str:
    """Pretty-printed XML text of an MJCF element."""
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def load_model(root: ET.Element):
    """Compile an MJCF element into a ``mujoco.MjModel``."""
    import mujoco  # deferred: the module imports without MuJoCo

    return mujoco.MjModel.from_xml_string(to_xml(root))


def robot_geom_ids(model, robot: Robot, visual_only: bool = True) -> np.ndarray:
    """Ids of the robot's geoms (visual ones by default), e.g. to build masks from segmentation."""
    import mujoco  # deferred: the module imports without MuJoCo

    link_bodies = {mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)}
    ids = [g for g in range(model.ngeom) if model.geom_bodyid[g] in link_bodies]
    if visual_only:
        ids = [g for g in ids if model.geom_group[g] == VISUAL_GROUP]
    return np.array(ids, dtype=int)


def joint_qpos_addresses(model, robot: Robot) -> np.ndarray:
    """qpos indices of the robot's joint coordinates, in the robot file's order."""
    import mujoco  # deferred: the module imports without MuJoCo

    return np.array([model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]
                     for n in robot.joint_names])


def joint_dof_addresses(model, robot: Robot) -> np.ndarray:
    """qvel indices of the robot's joint coordinates, in the robot file's order."""
    import mujoco  # deferred: the module imports without MuJoCo

    return np.array([model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]
                     for n in robot.joint_names])
