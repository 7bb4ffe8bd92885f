"""Image moments against cv2.moments and float64 gradcheck."""
import cv2
import numpy as np
import pytest
import torch

from snaketrack.errors import InputError
from snaketrack.tracker.fit.moments import image_moments, mask_moment_vector, moment_vector


def _random_binary(rng, h=40, w=60):
    m = np.zeros((h, w), np.uint8)
    for _ in range(3):
        c = (int(rng.integers(5, w - 5)), int(rng.integers(5, h - 5)))
        ax = (int(rng.integers(2, 15)), int(rng.integers(1, 6)))
        cv2.ellipse(m, c, ax, float(rng.uniform(0, 180)), 0, 360, 1, -1)
    return m


def test_against_cv2_moments_on_binary_masks():
    rng = np.random.default_rng(0)
    masks = [_random_binary(rng) for _ in range(6)]
    mo = image_moments(torch.as_tensor(np.stack(masks), dtype=torch.float64))
    for b, m in enumerate(masks):
        ref = cv2.moments(m, binaryImage=True)
        assert mo.area[b].item() == pytest.approx(ref["m00"], rel=1e-12)
        assert mo.centroid[b, 0].item() == pytest.approx(ref["m10"] / ref["m00"], rel=1e-10)
        assert mo.centroid[b, 1].item() == pytest.approx(ref["m01"] / ref["m00"], rel=1e-10)
        for k, key in enumerate(("mu20", "mu11", "mu02")):
            assert mo.second[b, k].item() == pytest.approx(ref[key] / ref["m00"], rel=1e-8, abs=1e-9)
            assert mo.nu()[b, k].item() == pytest.approx(ref["nu" + key[2:]], rel=1e-8, abs=1e-12)


def test_soft_mask_against_cv2_grey_moments():
    rng = np.random.default_rng(1)
    m = rng.uniform(0, 1, (30, 50))
    ref = cv2.moments(m.astype(np.float64))
    mo = image_moments(torch.as_tensor(m))
    assert mo.area.item() == pytest.approx(ref["m00"], rel=1e-10)
    assert mo.centroid[0, 0].item() == pytest.approx(ref["m10"] / ref["m00"], rel=1e-10)
    assert mo.second[0, 1].item() == pytest.approx(ref["mu11"] / ref["m00"], rel=1e-6, abs=1e-9)


def test_roi_offset_equals_full_image():
    rng = np.random.default_rng(2)
    full = np.zeros((100, 140))
    crop = rng.uniform(0, 1, (20, 30))
    full[37:57, 81:111] = crop
    a = image_moments(torch.as_tensor(full))
    b = image_moments(torch.as_tensor(crop)[None], roi_offset=torch.tensor([81.0, 37.0], dtype=torch.float64))
    torch.testing.assert_close(a.area, b.area)
    torch.testing.assert_close(a.centroid, b.centroid)
    torch.testing.assert_close(a.second, b.second)


def test_batched_equals_one_by_one_with_per_mask_offsets():
    rng = np.random.default_rng(3)
    masks = torch.as_tensor(rng.uniform(0, 1, (4, 12, 9)))
    offs = torch.as_tensor(rng.uniform(0, 100, (4, 2)))
    batch = mask_moment_vector(masks, offs)
    single = torch.cat([mask_moment_vector(masks[i], offs[i]) for i in range(4)])
    torch.testing.assert_close(batch, single)
    assert moment_vector(image_moments(masks), order=1).shape == (4, 2)


def test_gradcheck_float64():
    rng = np.random.default_rng(4)
    m = torch.as_tensor(rng.uniform(0.1, 1, (2, 6, 7)), dtype=torch.float64).requires_grad_()
    off = torch.tensor([[3.0, 4.0], [10.0, -2.0]], dtype=torch.float64, requires_grad=True)

    def f(mask, offset):
        mo = image_moments(mask, offset)
        return torch.cat([mo.area[:, None], mo.centroid, mo.second], dim=-1)

    assert torch.autograd.gradcheck(f, (m, off))
    assert torch.autograd.gradgradcheck(f, (m, off))


def test_orientation_of_tilted_ellipse():
    m = np.zeros((101, 101), np.uint8)
    cv2.ellipse(m, (50, 50), (40, 8), 30.0, 0, 360, 1, -1)  # 30° from +u towards +v
    mo = image_moments(torch.as_tensor(m, dtype=torch.float64))
    assert np.degrees(mo.orientation().item()) == pytest.approx(30.0, abs=0.5)


def test_empty_mask_and_bad_input():
    mo = image_moments(torch.zeros(1, 5, 5))
    assert mo.area.item() == 0 and torch.isfinite(mo.centroid).all()
    with pytest.raises(InputError):
        image_moments(torch.zeros(2, 2, 3, 3))
    with pytest.raises(InputError):
        image_moments(torch.zeros(2, 3, 3), roi_offset=torch.zeros(3, 2))
    with pytest.raises(InputError):
        moment_vector(mo, order=3)
