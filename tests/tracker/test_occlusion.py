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


def test_visible_iou_leaves_out_the_zero_weight_pixels():
    """IoU of a silhouette against a mask over the pixels of non-zero weight, against a direct count."""
    from snaketrack.tracker.fit.occlusion import visible_iou

    m = np.zeros((20, 40), bool)
    m[8:12, 5:25] = True  # the visible part; the body runs on to column 35 behind an occluder
    sil = np.zeros_like(m)
    sil[8:12, 5:35] = True
    obs = Observation.from_mask(m, far_px=3.0, far_weight=0.0)
    w0 = obs.weight.numpy() == 0
    assert w0[:, 29:].any() and not w0[m].any()
    keep = sil & ~w0
    expect = (keep & m).sum() / (keep.sum() + m.sum() - (keep & m).sum())
    assert visible_iou(obs, sil) == expect
    assert expect > 0.8 > (sil & m).sum() / (sil | m).sum()  # the plain IoU counts the hidden part against it


def test_hidden_fraction_of_a_cut_body():
    """The predicted axis off the mask: none on the body's own mask, all on a far blob, in between where a
    strip of columns cuts the body, growing with the strip."""
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.fit.occlusion import hidden_fraction
    from snaketrack.tracker.state import StateLayout
    from snaketrack.tracker.tracker import Tracker

    robot = load_robot("planar-snake-11")
    K = np.array([[300.0, 0, 119.5], [0, 300.0, 89.5], [0, 0, 1]])
    trk = Tracker(robot, K, 240, 180)
    lay = StateLayout.for_robot(robot)
    R0 = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])  # lying across the view, seen from above-ish
    x = lay.pack(0.3 * np.sin(np.arange(robot.dof)), R0, np.array([-0.45, 0.0, 1.6]))
    full = trk.renderer.mask(x)
    far = dict(far_px=4.0, far_weight=0.0)
    assert hidden_fraction(Observation.from_mask(full, **far), trk.renderer, x) == 0.0
    blob = np.zeros_like(full)
    blob[:6, :6] = True
    assert hidden_fraction(Observation.from_mask(blob, **far), trk.renderer, x) == 1.0
    cols = np.nonzero(full.any(0))[0]
    fr = []
    for w in (0.2, 0.4):
        m = full.copy()
        m[:, cols.min():cols.min() + int(w * (cols.max() - cols.min()))] = False
        fr.append(hidden_fraction(Observation.from_mask(m, **far), trk.renderer, x))
    assert 0.05 < fr[0] < fr[1] < 0.5
