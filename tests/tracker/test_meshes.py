"""The robot's meshes: trimesh's tessellations placed on the primitives' axes, and mesh files named in the robot
file (checked against analytic volumes and the primitives' end points)."""
import math

import numpy as np
import pytest

from snaketrack.errors import FileFormatError, MissingFileError
from snaketrack.models.robot import load_robot
from snaketrack.tracker.render.meshes import (
    box_mesh,
    capsule_growth,
    capsule_mesh,
    cylinder_growth,
    cylinder_mesh,
    load_mesh,
    robot_meshes,
)
from snaketrack.tracker.render.primitives import CapsuleModel


def test_capsule_and_cylinder_lie_on_their_axis_with_their_volume():
    a, b, r = np.array([0.1, -0.2, 0.3]), np.array([0.25, -0.1, 0.35]), 0.02
    L = float(np.linalg.norm(b - a))
    cap = capsule_mesh(a, b, r, 64)
    cyl = cylinder_mesh(a, b, r, 64)
    assert cap.is_watertight and cyl.is_watertight
    assert cap.volume == pytest.approx(math.pi * r * r * L + 4 / 3 * math.pi * r ** 3, rel=0.01)
    assert cyl.volume == pytest.approx(math.pi * r * r * L, rel=0.01)
    u = (b - a) / L
    k = (math.pi / 64) / math.sin(math.pi / 64)  # the polygon's radius, widened to the circle's mean width
    for m, reach in ((cap, k * r), (cyl, 0.0)):
        s = (m.vertices - a) @ u  # position along the axis
        radial = np.linalg.norm((m.vertices - a) - s[:, None] * u, axis=1)
        assert s.min() == pytest.approx(-reach, abs=1e-6) and s.max() == pytest.approx(L + reach, abs=1e-6)
        assert radial.max() == pytest.approx(k * r, rel=1e-6)


def test_growth_directions_grow_the_primitive():
    """Vertices moved by δ along their growth directions (and a cylinder's by δ along its axial ones) are those
    of the primitive grown by δ: a capsule whose radius is r + δ, a cylinder whose radius is r + δ and whose ends
    lie δ farther out (volumes against the analytic ones)."""
    a, b, r, d = np.array([0.1, -0.2, 0.3]), np.array([0.25, -0.1, 0.35]), 0.02, -0.006
    L = float(np.linalg.norm(b - a))
    cap = capsule_mesh(a, b, r, 64)
    cyl = cylinder_mesh(a, b, r, 64)
    k = (math.pi / 64) / math.sin(math.pi / 64)
    cap.vertices = cap.vertices + d * capsule_growth(cap.vertices, a, b)
    g, g_axial = cylinder_growth(cyl.vertices, a, b)
    cyl.vertices = cyl.vertices + d * (g + g_axial)
    rc = k * r + d
    assert cap.volume == pytest.approx(math.pi * rc * rc * L + 4 / 3 * math.pi * rc ** 3, rel=0.01)
    assert cyl.volume == pytest.approx(math.pi * rc * rc * (L + 2 * d), rel=0.01)
    u = (b - a) / L
    s = (cyl.vertices - a) @ u
    assert s.min() == pytest.approx(-d, abs=1e-9) and s.max() == pytest.approx(L + d, abs=1e-9)


def test_a_point_capsule_is_a_sphere_and_a_box_has_its_extents():
    s = capsule_mesh([0, 0, 1.0], [0, 0, 1.0], 0.05, 32)
    assert np.allclose(s.vertices.mean(0), [0, 0, 1.0], atol=1e-3)
    assert s.volume == pytest.approx(4 / 3 * math.pi * 0.05 ** 3, rel=0.02)
    bx = box_mesh([0.1, 0.2, 0.3], [1.0, 0, 0])
    assert bx.volume == pytest.approx(0.006) and np.allclose(bx.bounds, [[0.95, -0.1, -0.15], [1.05, 0.1, 0.15]])


def test_robot_meshes_one_part_per_primitive_on_its_link():
    robot = load_robot("arcsnake-4")
    model = CapsuleModel.from_visual(robot)
    lm = robot_meshes(robot, model, 16)
    assert len(lm.parts) == model.n
    for i, (v0, v1, f0, f1) in enumerate(lm.parts):
        assert np.all(lm.link[v0:v1] == model.link[i])
        assert lm.faces[f0:f1].min() >= v0 and lm.faces[f0:f1].max() < v1
        centre = 0.5 * (model.a_local[i] + model.b_local[i])
        assert np.allclose(lm.verts[v0:v1].mean(0), centre, atol=1e-3)


def _robot_file(tmp_path, mesh):
    (tmp_path / "snake.yaml").write_text(
        "name: meshsnake\nlinks: {count: 3, length: 0.1, radius: 0.02}\njoints: {count: 2}\n"
        f"visual: {{mesh: {mesh}}}\n")
    return tmp_path / "snake.yaml"


def test_mesh_files_in_the_robot_file(tmp_path):
    box_mesh([0.1, 0.04, 0.04], [0.05, 0, 0]).export(tmp_path / "link.stl")
    robot = load_robot(_robot_file(tmp_path, "[link.stl, null, link.stl]"))
    assert robot.visual.mesh[1] is None and robot.visual.mesh[0] == str(tmp_path / "link.stl")
    lm = robot_meshes(robot, CapsuleModel.capsules(robot))
    assert sorted(set(lm.link.tolist())) == [0, 1, 2]
    on0 = lm.verts[lm.link == 0]
    assert np.allclose(on0.min(0), [0, -0.02, -0.02]) and np.allclose(on0.max(0), [0.1, 0.02, 0.02])  # the STL's box
    assert load_robot("arcsnake-4").visual.mesh == ()


def test_mesh_file_errors(tmp_path):
    with pytest.raises(MissingFileError, match="nowhere.stl"):
        load_robot(_robot_file(tmp_path, "nowhere.stl"))
    with pytest.raises(FileFormatError, match="visual.mesh"):
        load_robot(_robot_file(tmp_path, "[a.stl]"))
    (tmp_path / "bad.stl").write_text("not a mesh")
    with pytest.raises(FileFormatError, match="bad.stl"):
        load_mesh(str(tmp_path / "bad.stl"))
