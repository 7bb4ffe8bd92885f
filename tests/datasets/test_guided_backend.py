"""GrabCut guided by the robot model against MuJoCo truth, where box-only GrabCut errs.

Truth masks come from MuJoCo's segmentation render (an independent
renderer). The frames: the robot orange with dark joint bands (which
box-only GrabCut may take for shadow) on textured ground, and a
robot-coloured post touching the body's side (which box-only GrabCut
takes in). Labelled through the labeller's own
path (:func:`label_video`), the guided labels must be nearer the truth and
hold the post out.
"""
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from snaketrack.datasets.boxes import Box, mask_to_box
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.guided_backend import GuideConfig, GuidedBackend
from snaketrack.datasets.label import LabelConfig, label_video
from snaketrack.datasets.layout import Dataset, DatasetWriter
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError, SnaketrackError
from snaketrack.masks import mask_iou
from snaketrack.models.robot import load_robot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracker"))

W, H, F, N = 320, 240, 420.0, 8


def _post_centre(truth: np.ndarray) -> tuple[int, int]:
    """A point 9 px below the middle of the robot's body (x, y) [px]: a post glued to its side."""
    ys, xs = np.nonzero(truth)
    k = len(ys) // 2
    return int(xs[k]), int(ys[k]) + 9


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """(dataset root, truth masks, post masks): N frames of a serpentine robot with a post beside it."""
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot("planar-snake-11")
    mj = MujocoMasks(robot, W, H, F)
    truths = [mj.mask(*serpentine(robot, k)) for k in range(N)]
    mj.close()
    root = tmp_path_factory.mktemp("guided") / "video"
    meta = {"K": mj.K.tolist(), "width": W, "height": H, "fps": 30.0, "robot": "planar-snake-11"}
    rng = np.random.default_rng(0)
    posts = []
    with DatasetWriter(root, meta) as w:
        for t in truths:
            x0, y0 = _post_centre(t)
            rgb = (np.array([95, 120, 70]) + rng.normal(0, 12, (H, W, 3))).clip(0, 255).astype(np.uint8)
            rgb[t] = (230, 120, 30)
            bands = t & (np.add.outer(np.arange(H), np.arange(W)) // 9 % 3 == 0)
            rgb[bands] = (35, 35, 35)  # dark joint housings across the body
            post = np.zeros((H, W), np.uint8)
            cv2.circle(post, (x0, y0), 7, 1, -1)
            # the post's pixels more than 3 px from the body: what a label must leave out
            post = post.astype(bool) & (cv2.distanceTransform((~t).astype(np.uint8), cv2.DIST_L2, 5) > 3)
            rgb[post | (cv2.circle(np.zeros((H, W), np.uint8), (x0, y0), 7, 1, -1) > 0) & ~t] = (225, 125, 35)
            posts.append(post)
            w.write_frame(rgb, t)
    return root, truths, posts


def _label(root, backend, out) -> list[np.ndarray]:
    truth0 = Dataset(root).mask(0)
    box = mask_to_box(truth0).expand(3)
    label_video(open_frames(str(root)), out, backend, box, LabelConfig(), progress=False)
    ds = Dataset(out)
    return [ds.mask(i) for i in range(len(ds))]


def test_guided_labels_are_nearer_the_truth_and_leave_the_post_out(video, tmp_path):
    root, truths, posts = video
    robot = load_robot("planar-snake-11")
    K = np.asarray(Dataset(root).meta["K"])
    plain = _label(root, GrabCutBackend(), tmp_path / "plain")
    guided_backend = GuidedBackend(robot, K, W, H, 30.0)
    guided = _label(root, guided_backend, tmp_path / "guided")
    iou_plain = np.mean([mask_iou(m, t) for m, t in zip(plain, truths)])
    iou_guided = np.mean([mask_iou(m, t) for m, t in zip(guided, truths)])
    assert guided_backend.fits >= N - 1
    assert iou_guided > 0.85 and iou_guided > iou_plain + 0.03, (iou_plain, iou_guided)
    # box-only GrabCut takes the robot-coloured post in; once the model guides, it stays out
    assert sum(np.count_nonzero(m & p) for m, p in zip(plain, posts)) > 20
    assert all(np.count_nonzero(m & p) == 0 for m, p in zip(guided[1:], posts[1:]))


def test_guide_makes_far_pixels_background_and_the_guide_robot():
    """A robot-coloured blob far from the guide is cut off; a dark part inside the guide is kept."""
    rgb = np.full((80, 120, 3), (90, 120, 70), np.uint8)
    rgb += np.random.default_rng(1).integers(0, 10, rgb.shape, dtype=np.uint8)
    body = np.zeros((80, 120), bool)
    body[36:44, 20:100] = True
    rgb[body] = (230, 120, 30)
    rgb[36:44, 56:64] = (30, 30, 30)  # a dark housing across the body
    rgb[18:26, 80:88] = (230, 120, 30)  # a robot-coloured stone inside the box
    gc = GrabCutBackend()
    gc.set_image(rgb)
    box = Box(16, 14, 90, 34)
    plain = gc.predict(box)
    guided = gc.predict(box, guide=body, guide_near_px=2, guide_far_px=6)
    assert plain[18:26, 80:88].mean() > 0.5 and not guided[18:26, 80:88].any()
    assert guided[36:44, 56:64].mean() > 0.9
    assert mask_iou(guided, body) > 0.9


def test_guide_config_is_checked():
    with pytest.raises(InputError, match="near"):
        GuideConfig(near_px=5, far_px=2)


def test_label_backends_by_name(video, tmp_path):
    """Without --backend: box-only GrabCut (SAM with a checkpoint); guided on request, with the robot
    from the source's meta.json or --robot."""
    from snaketrack.commands.label import build_backend
    from snaketrack.datasets.toy import write_toy_dataset

    root, _, _ = video
    assert build_backend("default", open_frames(str(root))).name == "grabcut"
    assert build_backend("guided", open_frames(str(root))).name == "guided"
    toy = write_toy_dataset(tmp_path / "toy", 2, 64, 48, seed=0)
    assert build_backend("guided", open_frames(str(toy)), robot="planar-snake-11").name == "guided"
    with pytest.raises(SnaketrackError, match="robot"):
        build_backend("guided", open_frames(str(toy)))  # the toy's meta names no shipped robot
    with pytest.raises(InputError, match="checkpoint"):
        build_backend("sam", open_frames(str(toy)))
