"""Synthetic video: dataset layout, geometry across MuJoCo's renderer and our kinematics, determinism.

The geometry oracle is independent of the renderer: link centres and the
head point come from the truth's joint angles and base pose through
snaketrack.models.kinematics (torch), projected with meta.json's K, and
must land inside MuJoCo's segmentation mask.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest
import torch

os.environ.setdefault("MUJOCO_GL", "egl")

from snaketrack.datasets.layout import Dataset  # noqa: E402
from snaketrack.errors import InputError  # noqa: E402
from snaketrack.models.kinematics import forward_kinematics_np  # noqa: E402
from snaketrack.models.robot import load_robot  # noqa: E402
from snaketrack.models.rotations import quat_to_matrix  # noqa: E402
from snaketrack.sim.scene import SceneConfig  # noqa: E402
from snaketrack.sim.video import VideoConfig, VideoRenderer  # noqa: E402
from snaketrack.sim.video_dataset import render_video  # noqa: E402

FAST_SCENE = SceneConfig(tile_px=64, tiles=4, shadow_size=512)
SMALL = dict(frames=10, width=320, height=180, target_width_px=6.0, scene_config=FAST_SCENE)
TRUTH_KEYS = {"frame", "t", "joint_angles", "base_position_cam", "base_quat_cam", "head_position_cam",
              "base_position_world", "head_position_world", "camera_position_world", "camera_quat_world"}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("video")
    out = {}
    for scene in ("static", "handheld", "drone"):
        # posts hide parts of the robot from the oblique static and handheld views:
        # those two are rendered on an empty floor so every link centre must be in the mask
        cfg = VideoConfig(scene=scene, seed=3, obstacles=(scene == "drone"), **SMALL)
        render_video(cfg, root / scene, progress=False, extras=(scene == "drone"))
        out[scene] = root / scene
    cfg = VideoConfig(scene="drone", robot="arcsnake-4", seed=1, **SMALL)
    render_video(cfg, root / "arcsnake", progress=False, extras=False)
    out["arcsnake"] = root / "arcsnake"
    return out


def _fk_cam(robot, tr):
    R = quat_to_matrix(torch.tensor(tr["base_quat_cam"], dtype=torch.float64)).numpy()
    return forward_kinematics_np(robot, np.array(tr["joint_angles"]), R, np.array(tr["base_position_cam"]))


def test_layout_and_names(datasets):
    root = datasets["drone"]
    names = sorted(p.name for p in (root / "frames").iterdir())
    assert names == [f"{i:06d}.jpg" for i in range(10)]
    assert sorted(p.name for p in (root / "masks").iterdir()) == [f"{i:06d}.png" for i in range(10)]
    meta = json.loads((root / "meta.json").read_text())
    for key in ("K", "width", "height", "fps", "robot", "scene", "seed"):
        assert key in meta
    assert (meta["width"], meta["height"], meta["scene"], meta["seed"], meta["robot"]) == (320, 180, "drone", 3,
                                                                                          "planar-snake-11")
    K = np.array(meta["K"])
    assert K.shape == (3, 3) and K[0, 2] == 320 / 2 - 0.5 and K[1, 2] == 180 / 2 - 0.5
    # fy from the field of view, as measured for MuJoCo's camera
    assert K[1, 1] == pytest.approx(90 / np.tan(np.deg2rad(meta["fovy_deg"]) / 2))
    lines = (root / "truth.jsonl").read_text().splitlines()
    assert len(lines) == 10
    for i, line in enumerate(lines):
        tr = json.loads(line)
        assert TRUTH_KEYS <= set(tr)
        assert tr["frame"] == i
        assert len(tr["joint_angles"]) == 10
    assert (root / "video.mp4").stat().st_size > 1000
    assert (root / "contact_sheet.png").stat().st_size > 1000
    ds = Dataset(root)
    assert ds.frame(0).shape == (180, 320, 3) and ds.mask(0).shape == (180, 320)


@pytest.mark.parametrize("name", ["static", "handheld", "drone", "arcsnake"])
def test_link_centres_land_in_mask(datasets, name):
    ds = Dataset(datasets[name])
    robot = load_robot(ds.meta["robot"])
    K = ds.K
    inside = []
    for i in range(len(ds)):
        fk = _fk_cam(robot, ds.truth[i])
        pc = fk["centres"]
        assert np.all(pc[:, 2] > 0)
        uv = (pc @ K.T)[:, :2] / pc[:, 2:3]
        mask = ds.mask(i)
        u = np.round(uv[:, 0]).astype(int)
        v = np.round(uv[:, 1]).astype(int)
        assert np.all((u >= 0) & (u < ds.width) & (v >= 0) & (v < ds.height))
        inside.append(mask[v, u])
    inside = np.array(inside)
    if not ds.meta["obstacles"]:
        assert inside.all(), f"{name}: link centres outside the mask: {np.argwhere(~inside).tolist()}"
    else:
        # a post (0.1 m tall) may hide a link now and then, even from above
        assert inside.mean() >= 0.9, f"{name}: only {inside.mean():.2f} of link centres inside the mask"


@pytest.mark.parametrize("name", ["static", "handheld", "drone", "arcsnake"])
def test_head_and_frames_consistent(datasets, name):
    ds = Dataset(datasets[name])
    robot = load_robot(ds.meta["robot"])
    for tr in ds.truth:
        fk = _fk_cam(robot, tr)
        np.testing.assert_allclose(fk["head"], tr["head_position_cam"], atol=1e-6)
        Rwc = quat_to_matrix(torch.tensor(tr["camera_quat_world"], dtype=torch.float64)).numpy()
        c = np.array(tr["camera_position_world"])
        np.testing.assert_allclose(Rwc @ np.array(tr["head_position_cam"]) + c, tr["head_position_world"], atol=1e-6)
        np.testing.assert_allclose(Rwc @ np.array(tr["base_position_cam"]) + c, tr["base_position_world"], atol=1e-6)
        Rcb = quat_to_matrix(torch.tensor(tr["base_quat_cam"], dtype=torch.float64)).numpy()
        Rwb = quat_to_matrix(torch.tensor(tr["base_quat_world"], dtype=torch.float64)).numpy()
        np.testing.assert_allclose(Rwc @ Rcb, Rwb, atol=1e-6)
        # on or above the floor, which the camera is above
        assert tr["base_position_world"][2] > 0 and c[2] > 0.5


@pytest.mark.parametrize("name", ["static", "handheld", "drone", "arcsnake"])
def test_robot_fully_visible_every_frame(datasets, name):
    ds = Dataset(datasets[name])
    for i in range(len(ds)):
        m = ds.mask(i)
        assert m.sum() > 50, f"{name} frame {i}: robot mask has {m.sum()} px"
        border = np.concatenate([m[0], m[-1], m[:, 0], m[:, -1]])
        assert not border.any(), f"{name} frame {i}: the robot touches the image border"


def test_same_seed_same_bytes_and_resume(tmp_path, monkeypatch):
    cfg = VideoConfig(scene="handheld", seed=5, frames=6, width=160, height=96, target_width_px=4.0,
                      scene_config=FAST_SCENE)
    render_video(cfg, tmp_path / "a", progress=False, extras=False)
    # an interrupted run, resumed, gives the same bytes as an uninterrupted one
    real = VideoRenderer.frame

    def stop_at_3(self, i):
        if i == 3:
            raise KeyboardInterrupt
        return real(self, i)

    monkeypatch.setattr(VideoRenderer, "frame", stop_at_3)
    with pytest.raises(KeyboardInterrupt):
        render_video(cfg, tmp_path / "b", progress=False, extras=False)
    monkeypatch.setattr(VideoRenderer, "frame", real)
    assert len(list((tmp_path / "b" / "frames").iterdir())) == 3
    with pytest.raises(InputError, match="already holds 3 frames"):
        render_video(cfg, tmp_path / "b", progress=False, extras=False)
    with pytest.raises(InputError, match="different configuration"):
        render_video(replace(cfg, seed=6), tmp_path / "b", resume=True, progress=False, extras=False)
    render_video(cfg, tmp_path / "b", resume=True, progress=False, extras=False)
    for sub in ("frames", "masks"):
        for p in sorted((tmp_path / "a" / sub).iterdir()):
            assert p.read_bytes() == (tmp_path / "b" / sub / p.name).read_bytes(), p.name
    for name in ("truth.jsonl", "meta.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # and a different seed gives different frames
    render_video(replace(cfg, seed=6), tmp_path / "c", progress=False, extras=False)
    assert (tmp_path / "a/frames/000000.jpg").read_bytes() != (tmp_path / "c/frames/000000.jpg").read_bytes()


def test_cli_refuses_to_overwrite(tmp_path, capsys):
    from snaketrack.cli import main

    (tmp_path / "frames").mkdir()
    (tmp_path / "frames" / "000000.jpg").write_bytes(b"x")
    status = main(["sim", "video", "--scene", "drone", "--frames", "2", "--out", str(tmp_path)])
    assert status == 2
    assert "already holds 1 frames" in capsys.readouterr().err
    assert main(["sim", "video", "--scene", "drone", "--frames", "0", "--out", str(tmp_path / "x")]) == 2


def test_degradations_change_pixels_not_truth():
    from snaketrack.sim.degrade import Degradation

    cfg = VideoConfig(scene="drone", seed=2, frames=4, width=160, height=96, target_width_px=4.0,
                      scene_config=FAST_SCENE)
    with VideoRenderer(cfg) as r:
        img, mask, truth = r.frame(2)
    with VideoRenderer(replace(cfg, degradation=Degradation(enabled=False))) as r:
        clean, clean_mask, clean_truth = r.frame(2)
    np.testing.assert_array_equal(mask, clean_mask)
    assert truth == clean_truth
    diff = np.abs(img.astype(float) - clean.astype(float))
    # noise, blur, vignetting and JPEG: visibly different, but the same picture
    assert 1.0 < diff.mean() < 40.0
    assert np.corrcoef(img.reshape(-1), clean.reshape(-1))[0, 1] > 0.8


def test_without_effects_the_same_masks_and_truth_another_picture():
    """``effects=False`` (no shadows or reflections) changes the pixels, not what the frame shows."""
    cfg = VideoConfig(scene="drone", seed=2, frames=4, width=160, height=96, target_width_px=4.0,
                      scene_config=FAST_SCENE)
    with VideoRenderer(cfg) as r:
        img, mask, truth = r.frame(2)
    with VideoRenderer(cfg, effects=False) as r:
        plain, plain_mask, plain_truth = r.frame(2)
    np.testing.assert_array_equal(mask, plain_mask)
    assert truth == plain_truth
    assert np.abs(img.astype(float) - plain.astype(float)).mean() > 0.5  # the shadows are gone


def test_body_width_sets_the_robot_size_in_the_image(monkeypatch, capsys):
    """``--body-width-px`` reaches the camera: twice the width, about twice the body's pixels across."""
    widths = []
    for w in (4.0, 8.0):
        cfg = VideoConfig(scene="drone", seed=2, frames=2, width=320, height=180, target_width_px=w,
                          scene_config=FAST_SCENE)
        with VideoRenderer(cfg) as r:
            _, _, truth = r.frame(0)
        widths.append(truth["body_width_px"])
    assert 1.6 < widths[1] / widths[0] < 2.4, widths

    import snaketrack.sim.video_dataset as video_dataset
    from snaketrack.cli import main

    seen = {}
    monkeypatch.setattr(video_dataset, "render_video", lambda config, out, **kw: seen.setdefault("c", config) and {})
    main(["sim", "video", "--scene", "drone", "--frames", "2", "--body-width-px", "17", "--out", "unused"])
    assert seen["c"].target_width_px == 17.0
    assert main(["sim", "video", "--scene", "drone", "--frames", "2", "--body-width-px", "0",
                 "--out", "unused"]) == 2
    assert "body width 0.0 px" in capsys.readouterr().err
