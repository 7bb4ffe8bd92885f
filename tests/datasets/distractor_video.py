"""A MuJoCo-rendered robot video with a distractor that comes to touch it: a shoe of nearly the robot's colour
that steps in a quarter of the way through and then rests against the body, and a thin tether trailing from
the tail, on a fixed textured floor seen by a still camera. Box-prompted GrabCut takes the shoe in once it
touches, and the labeller's box, grown from each label, takes in more. Truth masks come from MuJoCo's
segmentation render (an independent renderer); ``clean=True`` draws the same clip without shoe or tether."""
import sys
from pathlib import Path

import cv2
import numpy as np

from snaketrack.datasets.layout import DatasetWriter
from snaketrack.models.robot import load_robot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracker"))

W, H, F = 320, 240, 420.0
ROBOT = "planar-snake-11"
ROBOT_RGB = (230, 120, 30)
SHOE_RGB = (215, 115, 40)


def _shoe(truth: np.ndarray, k: int, n: int) -> np.ndarray:
    """The shoe's pixels (bool (H, W)): none before frame n/4, then an ellipse resting against the body's
    middle from below, sliding along it a pixel a frame."""
    shoe = np.zeros((H, W), np.uint8)
    if k < n // 4:
        return shoe > 0
    ys, xs = np.nonzero(truth)
    order = np.argsort(xs)
    x0 = int(xs[order[len(order) // 2]])
    y_body = int(ys[xs == x0].max())
    cv2.ellipse(shoe, (x0 + 6 + (k - n // 4), y_body + 11), (26, 14), 10, 0, 360, 1, -1)
    return shoe > 0


def write_distractor_video(root: Path, n: int = 24, clean: bool = False, tether: bool = True):
    """(dataset root, truth masks, shoe masks): ``n`` frames of a serpentine robot; the shoe masks hold the
    shoe's pixels off the body (what a label must leave out), all empty when ``clean``; ``tether`` False: the
    shoe alone."""
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot(ROBOT)
    mj = MujocoMasks(robot, W, H, F)
    truths = [mj.mask(*serpentine(robot, k)) for k in range(n)]
    mj.close()
    meta = {"K": mj.K.tolist(), "width": W, "height": H, "fps": 30.0, "robot": ROBOT}
    rng = np.random.default_rng(3)
    floor = (np.array([120, 125, 130]) + rng.normal(0, 10, (H, W, 3))).clip(0, 255)
    shoes = []
    with DatasetWriter(root, meta) as w:
        for k, t in enumerate(truths):
            rgb = (floor + rng.normal(0, 2, (H, W, 3))).clip(0, 255).astype(np.uint8)
            shoe = np.zeros((H, W), bool)
            if not clean:
                shoe = _shoe(t, k, n)
                rgb[shoe] = SHOE_RGB
            if not clean and tether:
                ys, xs = np.nonzero(t)
                tail = np.argmin(xs)
                cv2.line(rgb, (int(xs[tail]), int(ys[tail])), (0, int(ys[tail]) + 25), (60, 60, 60), 2)
            rgb[t] = ROBOT_RGB
            bands = t & (np.add.outer(np.arange(H), np.arange(W)) // 9 % 3 == 0)
            rgb[bands] = (40, 40, 40)
            shoes.append(shoe & ~t)
            w.write_frame(rgb, t)
    return root, truths, shoes
