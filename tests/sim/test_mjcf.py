"""The generated MJCF agrees with the robot description and with forward kinematics."""
import mujoco
import numpy as np
import pytest

from snaketrack.errors import FileFormatError
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot, robot_from_dict
from snaketrack.sim.mjcf import (
    COLLISION_GROUP,
    build_world,
    collision_shape,
    joint_qpos_addresses,
    load_model,
    obstacle_positions,
    robot_geom_ids,
)


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_model_matches_description(name):
    robot = load_robot(name)
    model = load_model(build_world(robot, obstacles=obstacle_positions()))
    assert model.nq == 7 + robot.dof and model.nu == robot.dof
    # link masses live on the collision capsules only
    for i, link in enumerate(robot.links):
        b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}")
        assert model.body_mass[b] == pytest.approx(link.mass)
        g = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"col_link_{i + 1}")
        assert model.geom_group[g] == COLLISION_GROUP
        if collision_shape(robot) == "box":
            assert model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX
            np.testing.assert_allclose(model.geom_size[g], [link.length / 2, link.radius, link.radius])
        else:
            assert model.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE
            assert model.geom_size[g][0] == pytest.approx(link.radius)
    jr = model.jnt_range[[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in robot.joint_names]]
    np.testing.assert_allclose(jr[:, 0], robot.lower)
    np.testing.assert_allclose(jr[:, 1], robot.upper)
    vis = robot_geom_ids(model, robot)
    assert len(vis) > robot.n_links and not np.any(model.geom_contype[vis])


def test_obstacles_of_the_paper():
    pts = obstacle_positions()
    assert len(pts) == 28
    k = np.arange(-3, 11)
    np.testing.assert_allclose(pts[0::2], np.c_[0.5 * k + 0.25, np.full(14, 0.1)])
    np.testing.assert_allclose(pts[1::2], np.c_[0.5 * k, np.full(14, -0.1)])


@pytest.mark.parametrize("name", ["planar-snake-11", "arcsnake-4"])
def test_mujoco_bodies_equal_forward_kinematics(name):
    robot = load_robot(name)
    model = load_model(build_world(robot))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q = rng.uniform(robot.lower * 0.8, robot.upper * 0.8)
        quat = rng.normal(size=4)
        data.qpos[:3] = rng.normal(size=3)
        data.qpos[3:7] = quat / np.linalg.norm(quat)
        data.qpos[joint_qpos_addresses(model, robot)] = q
        mujoco.mj_kinematics(model, data)
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)]
        fk = forward_kinematics_np(robot, q, data.xmat[ids[0]].reshape(3, 3), data.qpos[:3])
        np.testing.assert_allclose(fk["origins"], data.xpos[ids], atol=1e-12)
        np.testing.assert_allclose(fk["rotations"], data.xmat[ids].reshape(-1, 3, 3), atol=1e-12)
        head = data.site_xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head_site")]
        np.testing.assert_allclose(fk["head"], head, atol=1e-12)


def test_default_start_puts_head_at_origin():
    robot = load_robot("planar-snake-11")
    model = load_model(build_world(robot))
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    head = data.site_xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "head_site")]
    np.testing.assert_allclose(head[:2], [0, 0], atol=1e-12)


def _two_link(**extra):
    return robot_from_dict({"name": "t", "links": {"count": 2, "length": 0.1, "radius": 0.02, "mass": 0.1},
                            "joints": {"count": 1, "axes": ["z", "y"]}, **extra}, source="t.yaml")


def test_collision_shape_from_robot_file():
    assert collision_shape(_two_link()) == "capsule"
    assert collision_shape(_two_link(collision={"shape": "box"})) == "box"
    with pytest.raises(FileFormatError, match="collision.shape"):
        collision_shape(_two_link(collision={"shape": "sphere"}))
    with pytest.raises(FileFormatError, match="collision"):
        collision_shape(_two_link(collision="box"))


def test_box_links_rest_on_the_floor():
    """A box-section robot dropped at its default start settles with every link's axis at z = radius, level."""
    robot = _two_link(collision={"shape": "box"})
    model = load_model(build_world(robot, torque_limit=None))
    data = mujoco.MjData(model)
    for _ in range(480):
        mujoco.mj_step(model, data)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(2)]
    np.testing.assert_allclose(data.xpos[ids, 2], 0.02, atol=1e-3)
    np.testing.assert_allclose(data.xmat[ids].reshape(-1, 3, 3)[:, 2, 2], 1.0, atol=1e-4)
