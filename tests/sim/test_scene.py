"""Scene dressing: seamless ground textures, distractors clear of the robot's path, qpos layout kept."""
from __future__ import annotations

import numpy as np
import pytest

from snaketrack.models.robot import load_robot
from snaketrack.sim.mjcf import build_world, load_model, obstacle_positions, robot_geom_ids, to_xml
from snaketrack.sim.scene import GROUNDS, OUTDOOR, SceneConfig, dress_scene, ground_texture


def _seam_ratio(t: np.ndarray) -> float:
    """The step across the wrap-around edge over the 99th percentile of the interior steps (x and y, the worse)."""
    cols = np.abs(np.diff(t, axis=1)).mean(axis=(0, 2))
    rows = np.abs(np.diff(t, axis=0)).mean(axis=(1, 2))
    return max(np.abs(t[:, 0] - t[:, -1]).mean() / np.percentile(cols, 99),
               np.abs(t[0] - t[-1]).mean() / np.percentile(rows, 99))


@pytest.mark.parametrize("kind", OUTDOOR + ("carpet",))
@pytest.mark.parametrize("size,tiles", [(128, 1), (64, 2)])
def test_ground_texture_tiles_without_seams(kind, size, tiles):
    tex = ground_texture(kind, size=size, seed=1, tiles=tiles).astype(float)
    assert tex.shape == (size * tiles, size * tiles, 3)
    if kind == "carpet" and tiles > 1:
        # carpet tiles laid a quarter-turn apart step in brightness at every tile edge, the wrap-around edge
        # included: that step is no larger than the ones inside the canvas
        cols = np.abs(np.diff(tex, axis=1)).mean(axis=(0, 2))
        assert np.abs(tex[:, 0] - tex[:, -1]).mean() <= 1.2 * cols.max()
    else:
        assert _seam_ratio(tex) <= 1.0
    assert tex.std() > 5  # a texture, not a flat colour


def test_seam_measure_sees_raw_seams():
    # the bundled images themselves do not tile: the measure must see that
    import cv2
    import skimage.data

    for name in ("grass", "gravel", "brick"):
        raw = cv2.resize(getattr(skimage.data, name)(), (128, 128), interpolation=cv2.INTER_AREA).astype(float)
        assert _seam_ratio(raw[..., None]) > 1.0, name


def test_dressing_keeps_qpos_layout_and_clearance(tmp_path):
    robot = load_robot("planar-snake-11")
    path = np.column_stack([np.linspace(-1.0, 1.0, 50), 0.1 * np.sin(np.linspace(0, 6, 50))])
    plain = load_model(build_world(robot, obstacles=obstacle_positions()))
    root = build_world(robot, obstacles=obstacle_positions())
    cfg = SceneConfig(tile_px=32, tiles=2, clearance=0.12)
    d = dress_scene(root, tmp_path, path, cfg, seed=2)
    dressed = load_model(root)
    assert dressed.nq == plain.nq and dressed.nv == plain.nv and dressed.nbody == plain.nbody
    assert d.ground in GROUNDS and d.rocks + d.sticks > 0
    names = [g.get("name", "") for g in root.find("worldbody").findall("geom")]
    kinds = {n.split("_")[0] for n in names}
    assert {"rock", "stick"} <= kinds
    for g in root.find("worldbody").findall("geom"):
        name = g.get("name", "")
        if not name.startswith(("rock_", "stick_", "box_")):
            continue
        assert g.get("contype") == "0" and g.get("conaffinity") == "0"
        if g.get("fromto"):
            v = np.array(g.get("fromto").split(), float)
            pts = np.linspace(v[:2], v[3:5], 20)
        else:
            pts = np.array(g.get("pos").split(), float)[None, :2]
        dist = np.min(np.linalg.norm(pts[:, None] - path[None], axis=2))
        assert dist >= cfg.clearance, f"{name} is {dist:.3f} m from the path"
    # distractors are never robot geoms, so never in the mask
    ids = set(robot_geom_ids(dressed, robot).tolist())
    import mujoco

    for name in names:
        if name.startswith(("rock_", "stick_", "box_")):
            assert mujoco.mj_name2id(dressed, mujoco.mjtObj.mjOBJ_GEOM, name) not in ids
    assert "ground_mat" in to_xml(root)
