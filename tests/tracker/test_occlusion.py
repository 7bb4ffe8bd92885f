"""The occlusion weighting's far zone: against brute-force distances and the whole frame's transform."""
import cv2
import numpy as np

from snaketrack.tracker.fit.observation import Observation
from snaketrack.tracker.fit.occlusion import far_from


def test_far_weights_match_brute_force_distances():
    """Pixels farther than far_px from every mask pixel (Euclidean, brute force) get far_weight."""
    rng = np.random.default_rng(3)
    m = np.zeros((24, 30), bool)
    m[5:9, 4:20] = True
    m[rng.integers(0, 24, 6), rng.integers(0, 30, 6)] = True
    obs = Observation.from_mask(m, far_px=3.0, far_weight=0.25)
    ys, xs = np.nonzero(m)
    gy, gx = np.mgrid[:24, :30]
    d = np.sqrt((gy[..., None] - ys) ** 2 + (gx[..., None] - xs) ** 2).min(-1)
    expect = np.where(d > 3.0, 0.25, 1.0)
    assert np.array_equal(obs.weight.numpy(), expect)
    assert np.all(Observation.from_mask(m).weight.numpy() == 1.0)  # off by default


def test_far_zone_on_the_mask_box_equals_the_full_frame_transform():
    """far_from (distance transform on the mask's grown box) against the whole frame's transform."""
    rng = np.random.default_rng(5)
    for k in range(12):
        m = np.zeros((90, 140), np.uint8)
        for _ in range(1 + k % 3):  # blobs, some on the border
            c = (int(rng.integers(-5, 145)), int(rng.integers(-5, 95)))
            cv2.ellipse(m, c, (int(rng.integers(2, 20)), int(rng.integers(1, 8))), float(rng.uniform(0, 180)),
                        0, 360, 1, -1)
        if not m.any():
            continue
        for dist in (0.5, 4.0, 7.3):
            full = cv2.distanceTransform(1 - m, cv2.DIST_L2, cv2.DIST_MASK_PRECISE) > dist
            np.testing.assert_array_equal(far_from(m > 0, dist), full)
