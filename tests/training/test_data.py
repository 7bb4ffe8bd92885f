import json

import numpy as np

from snaketrack.training.data import (
    SegmentationData,
    augment,
    cast_shadow,
    resize_mask,
    resize_to,
    robot_crop,
    rotate,
    split_indices,
)


def test_split_is_a_partition_into_whole_blocks():
    tr, va = split_indices(103, 0.2, 10, seed=1)
    assert sorted(tr + va) == list(range(103)) and not set(tr) & set(va)
    assert len({i // 10 for i in va}) == round(0.2 * 11)
    assert all({i // 10 for i in va}.isdisjoint({j // 10 for j in tr}) for _ in [0])


def test_augmentations_keep_mask_and_image_aligned():
    rng = np.random.default_rng(0)
    m = np.zeros((60, 80), bool)
    m[20:30, 10:70] = True
    rgb = np.where(m[..., None], 230, 30).astype(np.uint8).repeat(3, axis=2)
    for _ in range(20):
        a, b = augment(rgb, m, rng)
        assert a.shape == rgb.shape and b.shape == m.shape
        if b.any() and (~b).any():
            assert a[b].mean() - a[~b].mean() > 100


def test_wide_zoom_and_rotation_keep_mask_and_image_aligned():
    rng = np.random.default_rng(2)
    m = np.zeros((60, 80), bool)
    m[20:30, 10:70] = True
    rgb = np.where(m[..., None], 230, 30).astype(np.uint8).repeat(3, axis=2)
    angles = []
    for _ in range(20):
        a, b = augment(rgb, m, rng, zoom=(0.5, 2.0), rotate_deg=90.0)
        assert a.shape == rgb.shape and b.shape == m.shape
        if b.any() and (~b).any():
            assert a[b].mean() - a[~b].mean() > 100
        ys, xs = np.nonzero(b)
        if ys.size > 20:
            angles.append(np.corrcoef(xs, ys)[0, 1])
    assert max(np.abs(angles)) > 0.3  # some bars came out oblique: the rotation happened


def _centroid_offset(rgb: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mask centroid minus the image's bright-part centroid (x, y) [px], the image's robot-ness read
    linearly between its ground and robot levels (sub-pixel, noise averages out)."""
    g = rgb.astype(np.float64).mean(axis=2)
    lo, hi = np.median(g[~mask]), np.median(g[mask])
    r = (g - lo) / (hi - lo)
    ys, xs = np.mgrid[:g.shape[0], :g.shape[1]]
    image = np.array([(r * xs).sum(), (r * ys).sum()]) / r.sum()
    return np.array([xs[mask].mean(), ys[mask].mean()]) - image


def test_zoomed_mask_is_not_shifted_against_its_image():
    # nearest-neighbour resizing puts the mask half an output pixel right of and below its image
    m = np.zeros((60, 80), bool)
    m[22:34, 30:44] = True
    rgb = np.where(m[..., None], 230, 30).astype(np.uint8).repeat(3, axis=2)
    rng = np.random.default_rng(3)
    offsets = []
    for _ in range(40):
        a, b = augment(rgb, m, rng, zoom=(0.7, 2.0))
        if b.sum() > 50 and (~b).any():
            offsets.append(_centroid_offset(a, b))
    offsets = np.array(offsets)
    assert len(offsets) > 30
    assert np.abs(offsets.mean(axis=0)).max() < 0.1, offsets.mean(axis=0)


def test_resize_mask_follows_its_image():
    # the mask is where the resized image of a white-on-black robot is more than half robot
    m = np.zeros((90, 160), bool)
    m[31:52, 40:101] = True
    m[60:64, 13:150] = True
    rgb = np.where(m[..., None], 230, 30).astype(np.uint8).repeat(3, axis=2)
    for size in ((36, 64), (63, 112), (135, 240), (180, 320)):
        a, b = resize_to(rgb, size), resize_mask(m, size)
        assert b.shape == size and b.dtype == bool
        assert (b != (a[..., 0] > 130)).sum() <= 2, size


def test_cast_shadow_darkens_ground_beside_the_robot_only():
    m = np.zeros((60, 80), bool)
    m[25:35, 10:70] = True  # a bar 10 px wide: shadows fall 2-10 px away
    rgb = np.full((60, 80, 3), 120, np.uint8)
    rgb[m] = 200
    near = np.zeros_like(m)
    near[13:47, :] = True  # within 12 px of the bar's long sides
    for seed in range(10):
        out = cast_shadow(rgb, m, np.random.default_rng(seed))
        assert np.array_equal(out[m], rgb[m])                   # the robot and so the label are untouched
        dark = out.mean(axis=2) < 118
        assert dark.sum() > 30 and not (dark & m).any()
        assert dark[~near].sum() == 0 or dark[near].sum() > 5 * dark[~near].sum()
        assert (out <= rgb).all()                                # a shadow only darkens


def test_shadow_probability_zero_draws_the_same_samples():
    m = np.zeros((60, 80), bool)
    m[20:30, 10:70] = True
    rgb = np.random.default_rng(4).integers(0, 255, (60, 80, 3)).astype(np.uint8)
    a0, b0 = augment(rgb, m, np.random.default_rng(7), rotate_deg=30.0)
    a1, b1 = augment(rgb, m, np.random.default_rng(7), rotate_deg=30.0, shadow=0.0)
    assert np.array_equal(a0, a1) and np.array_equal(b0, b1)
    shaded = [augment(rgb, m, np.random.default_rng(7), rotate_deg=30.0, shadow=1.0) for _ in range(2)]
    assert np.array_equal(shaded[0][1], b0) and not np.array_equal(shaded[0][0], a0)
    assert np.array_equal(shaded[0][0], shaded[1][0])       # seeded: the same shadow again


def test_rotate_by_90_degrees_is_rot90():
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 255, (31, 31, 3)).astype(np.uint8)
    m = rng.random((31, 31)) > 0.5
    a, b = rotate(rgb, m, 90.0)
    assert np.array_equal(a, np.rot90(rgb)) and np.array_equal(b, np.rot90(m))
    a0, b0 = rotate(rgb, m, 0.0)
    assert np.array_equal(a0, rgb) and np.array_equal(b0, m)


def test_robot_crop_centres_on_the_robot():
    rng = np.random.default_rng(1)
    m = np.zeros((100, 200), bool)
    m[80:90, 150:160] = True
    rgb = np.zeros((100, 200, 3), np.uint8)
    for _ in range(10):
        c_rgb, c_m = robot_crop(rgb, m, (48, 64), rng, p_robot=1.0)
        assert c_rgb.shape == (48, 64, 3) and c_m.any()


def test_flagged_frames_are_skipped(tmp_path, toy_root):
    import shutil

    root = tmp_path / "ds"
    shutil.copytree(toy_root, root)
    (root / "labels_report.json").write_text(json.dumps({"flagged": [{"frame": 0}, {"frame": 5}]}))
    ds = SegmentationData([root], (96, 128), split="all")
    assert len(ds) == 22 and all(i not in (0, 5) for _, i in ds.items)
    x, y = ds[0]
    assert x.shape == (3, 96, 128) and set(np.unique(y.numpy())) <= {0.0, 1.0}
