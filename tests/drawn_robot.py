"""A thin robot drawn without the simulator or the tracker's model: a curve of yellow links and black
housings on speckled green ground, drawn at 4× and averaged down so that its edge pixels are true mixes of
robot and ground. Shared by the tests of the colour edge step (importable from any test: conftest.py's
folder is on ``sys.path``)."""
from __future__ import annotations

import cv2
import numpy as np


def supersampled_snake(seed: int, factor: int = 4, size: tuple[int, int] = (90, 240)):
    """RGB uint8 (H, W, 3) of a 10 px wide robot and its truth, bool (H, W): coverage of at least a half."""
    rng = np.random.default_rng(seed)
    h, w = size
    t = np.linspace(0, 1, 400)
    pts = np.stack([20 + (w - 40) * t, h / 2 + 18 * np.sin(2 * np.pi * t + seed)], 1) * factor
    big_mask = np.zeros((h * factor, w * factor), np.uint8)
    big = np.zeros((h * factor, w * factor, 3), np.uint8)
    for k in range(len(pts) - 1):                       # links, each 1/8 of the length, every 4th a housing
        colour = (20, 20, 20) if (k * 8 // len(pts)) % 4 == 3 else (230, 200, 30)
        p, q = tuple(int(v) for v in pts[k]), tuple(int(v) for v in pts[k + 1])
        cv2.line(big, p, q, colour, 10 * factor)
        cv2.line(big_mask, p, q, 1, 10 * factor)
    cover = cv2.resize(big_mask.astype(np.float32), (w, h), interpolation=cv2.INTER_AREA)
    robot = cv2.resize(big.astype(np.float32), (w, h), interpolation=cv2.INTER_AREA)
    ground = np.array([70, 130, 50], np.float32) + rng.normal(0, 12, (h, w, 3))
    img = robot + (1 - cover[..., None]) * ground        # the robot is premultiplied by its coverage
    return np.clip(img, 0, 255).astype(np.uint8), cover >= 0.5
