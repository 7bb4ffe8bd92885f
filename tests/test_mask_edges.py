"""The colour edge steps (:func:`snaketrack.mask_edges.unmix_edges`, :func:`~snaketrack.mask_edges.snap_edges`)
against robots drawn with known edges."""
import numpy as np
from drawn_robot import supersampled_snake

from snaketrack.datasets.boxes import dilate_mask
from snaketrack.mask_edges import guided_filter, snap_edges, unmix_edges
from snaketrack.masks import mask_iou


def _ragged_cut(seed: int):
    """A drawn robot, its truth, and a cut of it whose edge is off by a pixel here and there, both ways."""
    img, truth = supersampled_snake(seed)
    rng = np.random.default_rng(seed)
    grown, shrunk = dilate_mask(truth, 1), ~dilate_mask(~truth, 1)
    cut = truth.copy()
    side = rng.random(truth.shape)
    cut[(grown & ~truth) & (side < 0.3)] = True       # ground taken in
    cut[(truth & ~shrunk) & (side > 0.7)] = False     # robot left out
    return img, truth, cut


def test_edge_pixels_are_decided_by_their_colour_mix():
    """A cut whose edge is off by a pixel here and there (both ways) is moved back onto the drawn edge."""
    for seed in range(3):
        img, truth, cut = _ragged_cut(seed)
        fixed = unmix_edges(img, cut)
        assert mask_iou(fixed, truth) > mask_iou(cut, truth) + 0.05
        assert mask_iou(fixed, truth) > 0.93
        assert (fixed ^ truth).sum() < 0.4 * (cut ^ truth).sum()
        assert np.array_equal(unmix_edges(img[..., ::-1], cut), fixed)   # RGB or BGR alike


def test_edge_pixels_between_two_alike_colours_stay_as_cut():
    """A grey robot on grey ground: too little contrast to tell a mix, so the cut's edge is kept."""
    img = np.full((40, 80, 3), 120, np.uint8)
    img[15:25, 10:70] = 128                               # 8 grey levels brighter than the ground
    cut = np.zeros((40, 80), bool)
    cut[14:27, 10:70] = True                              # three rows too many
    assert np.array_equal(unmix_edges(img, cut), cut)


def test_an_empty_or_tiny_mask_is_returned_as_it_is():
    img = np.zeros((20, 20, 3), np.uint8)
    empty, tiny = np.zeros((20, 20), bool), np.zeros((20, 20), bool)
    tiny[5:8, 5:8] = True
    assert not unmix_edges(img, empty).any() and np.array_equal(unmix_edges(img, tiny), tiny)


def test_guided_filter_is_the_windowed_ridge_regression_it_stands_for():
    """Each interior pixel's output against the per-window least squares solved one window at a time."""
    rng = np.random.default_rng(1)
    guide = rng.random((14, 16, 3)).astype(np.float32)
    src = (rng.random((14, 16)) > 0.5).astype(np.float32)
    r, eps = 2, 0.01
    out = guided_filter(guide, src, r, eps)
    n = (2 * r + 1) ** 2
    a, b = np.zeros((14, 16, 3)), np.zeros((14, 16))
    for y in range(r, 14 - r):
        for x in range(r, 16 - r):
            win = (slice(y - r, y + r + 1), slice(x - r, x + r + 1))
            design = np.c_[guide[win].reshape(-1, 3), np.ones(n)]
            ridge = np.diag([n * eps] * 3 + [0.0])           # Σ (aᵀI + b − p)² + |w| ε |a|²
            coef = np.linalg.solve(design.T @ design + ridge, design.T @ src[win].ravel())
            a[y, x], b[y, x] = coef[:3], coef[3]
    for y in range(2 * r, 14 - 2 * r):                       # pixels whose every window is interior
        for x in range(2 * r, 16 - 2 * r):
            win = (slice(y - r, y + r + 1), slice(x - r, x + r + 1))
            expect = a[win].mean(axis=(0, 1)) @ guide[y, x] + b[win].mean()
            assert abs(out[y, x] - expect) < 1e-4


def test_snapping_moves_an_edge_onto_the_drawn_one_by_a_pixel_at_most():
    """A cut whose edge is off by a pixel here and there (both ways) is moved back onto the drawn edge, and no
    pixel farther than a pixel from the cut's edge changes."""
    for seed in range(3):
        img, truth, cut = _ragged_cut(seed)
        snapped = snap_edges(img, cut)
        assert mask_iou(snapped, truth) > mask_iou(cut, truth) + 0.05
        assert (snapped ^ truth).sum() < 0.5 * (cut ^ truth).sum()
        moved = snapped ^ cut
        assert not (moved & ~dilate_mask(cut, 1)).any() and not (moved & ~dilate_mask(~cut, 1)).any()
        assert np.array_equal(snap_edges(img[..., ::-1], cut), snapped)   # RGB or BGR alike


def test_on_a_flat_image_snapping_leaves_any_mask_as_it_is():
    """No colour edge, nothing to follow: even a mask 2 px wide, which a plain smoothing would erase, stays."""
    flat = np.full((40, 60, 3), 128, np.uint8)
    rng = np.random.default_rng(0)
    for mask in (np.zeros((40, 60), bool), rng.random((40, 60)) > 0.7):
        assert np.array_equal(snap_edges(flat, mask), mask)
    bar = np.zeros((40, 60), bool)
    bar[20:22, 5:55] = True
    assert np.array_equal(snap_edges(flat, bar), bar)
