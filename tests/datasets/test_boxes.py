import numpy as np
import pytest
from scipy import ndimage

from snaketrack.datasets.boxes import Box, dilate_mask, mask_to_box, parse_box, propagate_box
from snaketrack.errors import InputError
from snaketrack.masks import mask_iou


def _random_mask(rng, h=40, w=50):
    m = np.zeros((h, w), bool)
    for _ in range(3):
        y, x = rng.integers(0, h - 5), rng.integers(0, w - 5)
        m[y:y + rng.integers(1, 6), x:x + rng.integers(1, 6)] = True
    return m


def test_mask_to_box_matches_nonzero_extent():
    rng = np.random.default_rng(0)
    for _ in range(20):
        m = _random_mask(rng)
        ys, xs = np.nonzero(m)
        b = mask_to_box(m)
        assert (b.x, b.y, b.x + b.w - 1, b.y + b.h - 1) == (xs.min(), ys.min(), xs.max(), ys.max())
        assert b.to_mask(50, 40)[m].all()
    assert mask_to_box(np.zeros((5, 5), bool)) is None


def test_dilation_matches_scipy():
    rng = np.random.default_rng(1)
    for px in (0, 1, 3, 7):
        m = _random_mask(rng)
        ref = ndimage.binary_dilation(m, structure=np.ones((3, 3)), iterations=px) if px else m
        assert np.array_equal(dilate_mask(m, px), ref)


def test_propagated_box_is_dilated_extent_clipped():
    m = np.zeros((30, 40), bool)
    m[2:10, 30:38] = True
    b = propagate_box(m, 5)
    assert b == Box(25, 0, 15, 15)  # x 25..39 (clipped at 39), y 0..14 (clipped at 0)


def test_parse_box_and_errors():
    assert parse_box(" 1, 2,3 ,4") == Box(1, 2, 3, 4)
    for bad in ("1,2,3", "a,b,c,d", "1,2,0,4", "1,2,-3,4"):
        with pytest.raises(InputError, match="--box"):
            parse_box(bad)
    with pytest.raises(InputError, match="outside"):
        parse_box("100,100,5,5", width=50, height=40)


def test_mask_iou_against_set_arithmetic():
    rng = np.random.default_rng(2)
    a, b = _random_mask(rng), _random_mask(rng)
    sa, sb = set(zip(*np.nonzero(a))), set(zip(*np.nonzero(b)))
    assert mask_iou(a, b) == pytest.approx(len(sa & sb) / len(sa | sb))
    assert mask_iou(np.zeros((3, 3)), np.zeros((3, 3))) == 1.0
