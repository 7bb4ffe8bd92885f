import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.datasets.boxes import Box, dilate_mask, mask_to_box
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.layout import Dataset
from snaketrack.datasets.toy import write_toy_dataset
from snaketrack.errors import InputError, StateError
from snaketrack.training.evaluate import evaluate_dataset_masks


def test_grabcut_labels_a_toy_video_through_the_cli(tmp_path, capsys):
    truth = write_toy_dataset(tmp_path / "truth", 12, 160, 120, seed=2)
    b = mask_to_box(Dataset(truth).mask(0)).expand(5)
    out = tmp_path / "labels"
    assert main(["label", truth, "--box", str(b), "--backend", "grabcut", "--out", str(out), "--json"]) == 0
    assert '"frames": 12' in capsys.readouterr().out
    assert evaluate_dataset_masks(out, truth)["iou"] > 0.8


def test_predict_before_set_image():
    with pytest.raises(StateError, match="set_image"):
        GrabCutBackend().predict(Box(0, 0, 5, 5))


def test_flat_image_gives_an_empty_mask_not_a_crash():
    gc = GrabCutBackend()
    gc.set_image(np.full((40, 50, 3), 128, np.uint8))
    assert gc.predict(Box(10, 10, 20, 15)).shape == (40, 50)


def _stripe_scene(seed=0, h=120, w=200):
    """A 10 px orange stripe with a dark underside and dark joint discs on grey gravel,
    its cast shadow (same chroma as the ground, 0.55 as bright) right beside it.
    Returns RGB uint8, the robot mask, the visible shadow mask."""
    import cv2

    rng = np.random.default_rng(seed)
    tex = cv2.GaussianBlur(rng.normal(0, 18, (h, w)).astype(np.float32), (0, 0), 1.0)
    img = np.array([150, 140, 145], np.float32)[None, None, :] * (1 + tex[..., None] / 150.0)
    yy, xx = np.mgrid[0:h, 0:w]
    centre = 60 + 15 * np.sin(xx / 30.0)
    robot = (np.abs(yy - centre) < 5) & (xx > 20) & (xx < 180)
    shadow = (np.abs(yy - centre - 7) < 5) & (xx > 24) & (xx < 184) & ~robot
    img[shadow] *= 0.55
    img[robot] = (235, 120, 25)
    img[robot & (yy - centre > 1.5)] = (70, 40, 15)
    for x in range(35, 180, 25):
        j = (xx - x) ** 2 + (yy - centre) ** 2 < 36
        img[j] = (40, 45, 48)
        robot |= j
    img = cv2.GaussianBlur(np.clip(img, 0, 255), (0, 0), 0.5)
    return np.clip(img, 0, 255).astype(np.uint8), robot, shadow & ~robot


def test_thin_stripe_keeps_dark_parts_and_drops_its_cast_shadow():
    from snaketrack.datasets.boxes import mask_iou
    from snaketrack.datasets.grabcut_backend import GrabCutConfig

    img, robot, shadow = _stripe_scene()
    box = mask_to_box(robot).expand(5)
    gc = GrabCutBackend()
    gc.set_image(img)
    m = gc.predict(box)
    assert mask_iou(m, robot) > 0.9
    assert (m & shadow).sum() < 0.05 * shadow.sum()          # the cast shadow stays out
    # within a pixel of the truth everywhere: no shadow band, no missing joint
    assert not (m & ~dilate_mask(robot, 1)).any()
    assert not (robot & ~dilate_mask(m, 1)).any()
    # the settings before (linear colour, soft shade, no dark growth/peeling) lose the dark parts
    old = GrabCutBackend(GrabCutConfig(tone="linear", shadow_soft=True, shadow_floor=0.0, thin_object=True,
                                       close_factor=0.0, grow_dark_steps=0, peel_steps=0))
    old.set_image(img)
    assert mask_iou(old.predict(box), robot) < mask_iou(m, robot) - 0.1


def test_log_tone_equalises_dark_and_bright_contrast():
    from snaketrack.datasets.grabcut_backend import tone_map

    # robot underside 40, cast shadow 70, lit ground 125 (grey): the same ratio, ~ the same step after the tone
    px = np.array([[[40, 40, 40], [70, 70, 70], [125, 125, 125]]], np.uint8)
    L = tone_map(px, "loglab")[0, :, 0].astype(float)
    lin = px[0, :, 0].astype(float)
    assert lin[2] - lin[1] > 1.5 * (lin[1] - lin[0])           # linear: the outer edge is far stronger
    assert abs((L[2] - L[1]) - (L[1] - L[0])) < 0.3 * (L[1] - L[0])
    with pytest.raises(InputError, match="tone"):
        tone_map(px, "gamma")
