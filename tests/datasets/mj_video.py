"""A MuJoCo-rendered robot video with truth masks, where box-only GrabCut errs: the robot orange with dark joint
bands (which box-only GrabCut may take for shadow) on textured ground, and a robot-coloured post touching the
body's side (which box-only GrabCut takes in). Truth masks come from MuJoCo's segmentation render (an independent
renderer)."""
import sys
from pathlib import Path

import cv2
import numpy as np

from snaketrack.datasets.layout import DatasetWriter
from snaketrack.models.robot import load_robot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracker"))

W, H, F, N = 320, 240, 420.0, 8


def _post_centre(truth: np.ndarray) -> tuple[int, int]:
    """A point 9 px below the middle of the robot's body (x, y) [px]: a post glued to its side."""
    ys, xs = np.nonzero(truth)
    k = len(ys) // 2
    return int(xs[k]), int(ys[k]) + 9


def write_robot_video(root: Path):
    """(dataset root, truth masks, post masks): N frames of a serpentine robot with a post beside it."""
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot("planar-snake-11")
    mj = MujocoMasks(robot, W, H, F)
    truths = [mj.mask(*serpentine(robot, k)) for k in range(N)]
    mj.close()
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


