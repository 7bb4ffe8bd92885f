import numpy as np
import pytest

from snaketrack.training.data import SegmentationData
from snaketrack.training.grounds import TEXTURES, body_width, paste_on_ground, synthetic_ground


def _bar(h=64, w=96):
    m = np.zeros((h, w), bool)
    m[28:38, 10:86] = True  # a robot 10 px wide
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return rgb, m


@pytest.mark.parametrize("kind", TEXTURES)
def test_each_texture_is_a_textured_image_of_the_asked_size(kind):
    g = synthetic_ground((60, 80), np.random.default_rng(1), 8.0, kind=kind)
    assert g.shape == (60, 80, 3) and g.dtype == np.uint8
    assert float(g.astype(np.float32).std(axis=(0, 1)).max()) > 2.0  # not a flat colour


def test_grounds_are_seeded_and_vary_between_draws():
    a = synthetic_ground((40, 50), np.random.default_rng(5), 6.0)
    b = synthetic_ground((40, 50), np.random.default_rng(5), 6.0)
    c = synthetic_ground((40, 50), np.random.default_rng(6), 6.0)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="ground texture"):
        synthetic_ground((40, 50), np.random.default_rng(5), 6.0, kind="lava")


def test_body_width_of_a_bar_is_its_thickness():
    _, m = _bar()
    assert abs(body_width(m, default=1.0) - 10.0) <= 1.0
    assert body_width(np.zeros((8, 8), bool), default=4.0) == 4.0


def test_paste_keeps_the_robot_and_replaces_the_ground():
    rgb, m = _bar()
    changed = []
    for seed in range(6):
        out = paste_on_ground(rgb, m, np.random.default_rng(seed))
        assert out.shape == rgb.shape and out.dtype == np.uint8
        assert np.array_equal(out[m], rgb[m])              # every robot pixel kept
        far = np.ones_like(m)
        far[24:42, 6:90] = False                            # > 4 px from the robot
        changed.append(np.mean(np.any(out[far] != rgb[far], axis=1)))
    assert min(changed) > 0.95                              # the ground is a new one


def test_dataset_pastes_after_the_crop_and_leaves_the_label(tmp_path):
    from snaketrack.datasets.toy import write_toy_dataset

    root = write_toy_dataset(str(tmp_path / "d"), 6, 64, 48)
    kw = dict(split="train", val_fraction=0.0, block=3, seed=0, crop_size=(32, 32), p_robot=1.0)
    own = SegmentationData([root], (48, 64), **kw)
    pasted = SegmentationData([root], (48, 64), synthetic_ground=1.0, **kw)
    for k in range(len(own)):
        (x0, y0), (x1, y1) = own[k], pasted[k]
        assert np.array_equal(y0.numpy(), y1.numpy())
        robot = y0.numpy()[0] > 0
        assert np.allclose(x0.numpy()[:, robot], x1.numpy()[:, robot])   # the robot is untouched
        assert not np.allclose(x0.numpy()[:, ~robot], x1.numpy()[:, ~robot])


def test_a_probability_outside_zero_to_one_is_refused():
    from snaketrack.errors import InputError
    from snaketrack.training.config import TrainConfig

    with pytest.raises(InputError, match="--synthetic-ground"):
        TrainConfig(synthetic_ground=1.5)
