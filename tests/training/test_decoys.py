import cv2
import numpy as np
import pytest

from snaketrack.training.data import SegmentationData
from snaketrack.training.decoys import add_decoys, robot_palette

ORANGE, YELLOW, GROUND = (230, 120, 20), (250, 220, 30), 90


def _robot(h=96, w=128):
    """A 10 px wide bar robot, orange with a yellow head, on flat grey ground."""
    rgb = np.full((h, w, 3), GROUND, np.uint8)
    m = np.zeros((h, w), bool)
    m[43:53, 20:100] = True
    rgb[m] = ORANGE
    rgb[43:53, 80:100] = YELLOW
    return rgb, m


def test_the_palette_holds_each_colour_of_the_robot_once():
    rgb, m = _robot()
    pal = robot_palette(rgb, m, k=2)
    got = sorted(map(tuple, np.round(pal).astype(int)))
    assert got == sorted([ORANGE, YELLOW])          # the head's colour too, though it covers a quarter
    assert robot_palette(rgb, np.zeros_like(m)).shape == (0, 3)
    assert robot_palette(np.full_like(rgb, 7), m, k=4).shape == (1, 3)   # one colour, one centre


def test_decoys_are_drawn_in_robot_colours_away_from_the_robot():
    rgb, m = _robot()
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (19, 19))
    near = cv2.dilate(m.astype(np.uint8), disc) > 0    # within 9 px: less than the robot's width
    drawn = 0
    for seed in range(8):
        out = add_decoys(rgb, m, np.random.default_rng(seed))
        assert np.array_equal(out[near], rgb[near])       # the robot and a body width around it untouched
        changed = np.any(out != rgb, axis=-1)
        assert changed.any()
        lit = changed & (out.astype(int).sum(-1) > 3 * GROUND + 30)   # brighter than the ground: a rod, no shade
        drawn += int(lit.sum())
        hue = cv2.cvtColor(out, cv2.COLOR_RGB2HSV)[..., 0][lit].astype(int)
        robot_hues = cv2.cvtColor(np.uint8([[ORANGE, YELLOW]]), cv2.COLOR_RGB2HSV)[0, :, 0].astype(int)
        assert (np.abs(hue[:, None] - robot_hues[None]).min(axis=1) <= 4).mean() > 0.95
    assert drawn > 0


def test_without_a_robot_or_a_place_for_them_nothing_is_drawn():
    rgb, m = _robot()
    empty = np.zeros_like(m)
    assert np.array_equal(add_decoys(rgb, empty, np.random.default_rng(0)), rgb)
    full = np.ones_like(m)
    full[0, 0] = False                                     # no room a body width away from it
    assert np.array_equal(add_decoys(rgb, full, np.random.default_rng(0), palette=np.float32([ORANGE])), rgb)


def test_the_dataset_adds_decoys_and_leaves_the_label(tmp_path):
    from snaketrack.datasets.toy import write_toy_dataset

    root = write_toy_dataset(str(tmp_path / "d"), 6, 64, 48)
    kw = dict(split="train", val_fraction=0.0, block=3, seed=0, crop_size=(48, 48), p_robot=1.0)
    own = SegmentationData([root], (48, 64), **kw)
    decoyed = SegmentationData([root], (48, 64), decoys=1.0, **kw)
    differs = 0
    for k in range(len(own)):
        (x0, y0), (x1, y1) = own[k], decoyed[k]
        assert np.array_equal(y0.numpy(), y1.numpy())
        robot = y0.numpy()[0] > 0
        assert np.allclose(x0.numpy()[:, robot], x1.numpy()[:, robot])
        differs += int(not np.allclose(x0.numpy(), x1.numpy()))
    assert differs > 0


def test_the_flag_reaches_the_training_config_and_bad_values_are_refused(monkeypatch):
    import snaketrack.training.train as train_module
    from snaketrack.cli import main
    from snaketrack.errors import InputError
    from snaketrack.training.config import TrainConfig

    seen = []

    def fake_train(datasets, out, config):
        seen.append(config)
        raise InputError("stop here")

    monkeypatch.setattr(train_module, "train", fake_train)
    assert main(["train", "data", "--out", "m.pt", "--decoys", "0.4"]) == 2
    assert main(["train", "data", "--out", "m.pt"]) == 2
    assert [c.decoys for c in seen] == [0.4, TrainConfig().decoys]
    with pytest.raises(InputError, match="--decoys"):
        TrainConfig(decoys=1.5)
