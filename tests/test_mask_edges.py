"""The colour edge step (:func:`snaketrack.mask_edges.unmix_edges`) against robots drawn with known edges."""
import numpy as np
from drawn_robot import supersampled_snake

from snaketrack.datasets.boxes import dilate_mask
from snaketrack.mask_edges import unmix_edges
from snaketrack.masks import mask_iou


def test_edge_pixels_are_decided_by_their_colour_mix():
    """A cut whose edge is off by a pixel here and there (both ways) is moved back onto the drawn edge."""
    for seed in range(3):
        img, truth = supersampled_snake(seed)
        rng = np.random.default_rng(seed)
        grown, shrunk = dilate_mask(truth, 1), ~dilate_mask(~truth, 1)
        cut = truth.copy()
        side = rng.random(truth.shape)
        cut[(grown & ~truth) & (side < 0.3)] = True       # ground taken in
        cut[(truth & ~shrunk) & (side > 0.7)] = False     # robot left out
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
