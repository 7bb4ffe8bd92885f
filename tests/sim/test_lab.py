"""Lab distractors and the low handheld camera: the truth mask stays the robot's, legs step near and over it,
the tether hangs from its tail end, the camera is low and pans."""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from snaketrack.errors import InputError  # noqa: E402
from snaketrack.sim.camera_path import camera_path  # noqa: E402
from snaketrack.sim.degrade import Degradation  # noqa: E402
from snaketrack.sim.lab import (  # noqa: E402
    ANKLE,
    FOOT_CLEAR,
    TETHER_LENGTH,
    TETHER_SEGMENTS,
    parse_distractors,
    plan_walker,
    tether_points,
    walker_pose,
)
from snaketrack.sim.scene import SceneConfig  # noqa: E402
from snaketrack.sim.video import VideoConfig, VideoRenderer  # noqa: E402

FAST_SCENE = SceneConfig(tile_px=64, tiles=4, shadow_size=512)


def _crawler(T: int = 150, fps: float = 30.0, n: int = 10, link: float = 0.07):
    """(times, axis points (T, 2n+1, 3)): a body of n links undulating along +x at 0.25 m/s, tail first."""
    times = np.arange(T) / fps
    pts = np.zeros((T, 2 * n + 1, 3))
    for i, t in enumerate(times):
        x = 0.25 * t + link * np.arange(n + 1)
        y = 0.06 * np.sin(2 * np.pi * (x / 0.5 - 0.8 * t))
        ends = np.column_stack([x, y, np.full(n + 1, 0.02)])
        pts[i] = np.concatenate([ends[:-1], 0.5 * (ends[:-1] + ends[1:]), ends[-1:]])
    return times, pts


def _render(distractors, seed=2, frames=5):
    import mujoco

    cfg = VideoConfig(scene="lab", seed=seed, frames=frames, width=240, height=136, target_width_px=6.0,
                      scene_config=FAST_SCENE, degradation=Degradation(enabled=False), distractors=distractors)
    out = []
    with VideoRenderer(cfg) as r:
        lab = r.props.geom_ids if r.props is not None else np.array([], int)
        for i in range(frames):
            rgb, mask, _ = r.frame(i)
            r.renderer.enable_segmentation_rendering()
            seg = r.renderer.render()
            r.renderer.disable_segmentation_rendering()
            is_geom = seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
            out.append((rgb, mask, is_geom & np.isin(seg[..., 0], lab)))
    return out


def test_truth_mask_is_the_robot_with_or_without_distractors():
    on = _render(None)            # the lab scene's own: every distractor
    off = _render(())             # the same scene, seed and camera without them
    seen = hidden = 0
    for (rgb1, m1, lab1), (rgb0, m0, lab0) in zip(on, off):
        assert not lab0.any()
        # the robot's pixels that no distractor hides are the same; the hidden ones leave the mask
        np.testing.assert_array_equal(m1, m0 & ~lab1)
        assert not (m1 & lab1).any()
        seen += int(lab1.sum())
        hidden += int((m0 & lab1).sum())
        if lab1.sum() > 50:
            # distractors show in the RGB only
            assert np.abs(rgb1[lab1].astype(int) - rgb0[lab1].astype(int)).mean() > 10
    # in this clip a person's leg passes in front of the robot: the mask is cut there
    assert seen > 0 and hidden > 0


def test_legs_step_near_and_over_the_robot():
    times, pts = _crawler()
    rng = np.random.default_rng(0)
    over = near = 0
    for f in (0.3, 0.72):
        w = plan_walker(rng, times, pts, f, robot_radius=0.02)
        for i, t in enumerate(times):
            for ankle, knee, hip, _ in walker_pose(w, float(t)):
                d = np.linalg.norm(pts[i, :, :2] - ankle[:2], axis=1).min()
                planted = ankle[2] <= ANKLE + 1e-9
                if planted:
                    # a planted shoe (heel 0.09 m behind the ankle, toe 0.19 m ahead) never lands on the robot
                    heel, toe = ankle[:2] - 0.09 * w.u, ankle[:2] + 0.19 * w.u
                    ab = toe - heel
                    s = np.clip(((pts[i, :, :2] - heel) @ ab) / (ab @ ab), 0, 1)
                    gap = np.linalg.norm(pts[i, :, :2] - (heel + s[:, None] * ab), axis=1).min()
                    assert gap >= FOOT_CLEAR + 0.02 - 1e-9
                    near += gap < 0.3
                elif d < 0.05:
                    assert ankle[2] - ANKLE > 0.06  # above the robot (0.04 m tall here) as it passes over
                    over += 1
                # legs keep their length: knee within reach of ankle and hip
                assert np.linalg.norm(knee - ankle) <= 0.44 + 1e-6 or np.allclose(knee, 0.5 * (ankle + hip))
    assert over > 0 and near > 0


def test_tether_starts_at_the_tail_end_and_lies_on_the_floor():
    times, pts = _crawler()
    back = pts[0, 0] - pts[0, 1]
    back[2] = 0
    back /= np.linalg.norm(back)
    for i in (0, 40, 149):
        c = tether_points(pts[:i + 1, 0], back, 0.005)
        assert c.shape == (TETHER_SEGMENTS + 1, 3)
        np.testing.assert_allclose(c[0], pts[i, 0])
        steps = np.linalg.norm(np.diff(c, axis=0), axis=1)
        np.testing.assert_allclose(steps.sum(), TETHER_LENGTH, rtol=0.02)
        s = np.concatenate([[0], np.cumsum(steps)])
        np.testing.assert_allclose(c[s > 0.13, 2], 0.005)
        # it trails behind: every point lies behind the tail end along the crawl (+x)
        assert np.all(c[1:, 0] < pts[i, 0, 0] + 0.01)
        if i > 0:
            # it follows the tail end's path: points within the path's span lie near it
            past = pts[:i + 1, 0, :2]
            on = c[:, 0] > past[0, 0] + 0.05
            d = np.linalg.norm(c[on, None, :2] - past[None], axis=2).min(axis=1)
            assert d.max() < 0.05


def test_low_handheld_camera_is_low_and_pans():
    times, pts = _crawler(T=300)
    path = camera_path("low-handheld", times, pts, body_diameter=0.04, width=320, height=180, seed=4)
    centre = 0.5 * (pts.min(axis=1) + pts.max(axis=1))
    ray = centre - path.positions
    elev = np.degrees(np.arctan2(-ray[:, 2], np.linalg.norm(ray[:, :2], axis=1)))
    assert np.all(elev > 5) and np.all(elev < 30)
    assert np.all(path.positions[:, 2] < 0.6)
    view = path.rotations[:, :2, 2]
    yaw = np.degrees(np.unwrap(np.arctan2(view[:, 1], view[:, 0])))
    assert np.ptp(yaw) > 20
    # and the robot stays in the frame
    for i in range(0, 300, 10):
        uvz = path.project(i, pts[i], 320, 180)
        assert np.all((uvz[:, 0] > 0) & (uvz[:, 0] < 320) & (uvz[:, 1] > 0) & (uvz[:, 1] < 180))


def test_distractor_names():
    assert parse_distractors("door,legs") == ("legs", "door")
    assert parse_distractors("none") == ()
    with pytest.raises(InputError):
        parse_distractors("legs,cat")
    with pytest.raises(InputError):
        VideoConfig(scene="lab", distractors=("cat",))
    assert VideoConfig(scene="lab").lab_distractors == ("legs", "chair", "tether", "door")
    assert VideoConfig(scene="handheld").lab_distractors == ()


def test_cli_refuses_unknown_distractors(tmp_path, capsys):
    from snaketrack.cli import main

    status = main(["sim", "video", "--scene", "lab", "--frames", "2", "--distractors", "legs,cat",
                   "--out", str(tmp_path / "x")])
    assert status == 2
    assert "cat" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
