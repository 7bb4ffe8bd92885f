"""The band cut against a drawn body with known outline: a curved orange body with dark housings that bulge
past it, on a textured grey floor, blurred (a halo of mixed pixels at every edge). The model's silhouette is
the body without its housings, one pixel narrow (capsules, not the body's outline); the label given is what a
cut that takes most of the housings for the floor's shade keeps. Drawn with OpenCV's polylines and circles, not the
tracker's capsule renderer."""
import cv2
import numpy as np
import pytest

from snaketrack.datasets.boxes import dilate_mask
from snaketrack.errors import InputError
from snaketrack.labelling.band_cut import BandConfig, band_cut, band_px, body_width_px, robot_colours
from snaketrack.masks import mask_iou

H, W, WIDTH = 160, 320, 20


def _scene(seed: int = 0):
    """(rgb, truth, silhouette, label): the frame and three bool (H, W) masks."""
    rng = np.random.default_rng(seed)
    xs = np.arange(30, 291)
    pts = np.stack([xs, 80 + 25 * np.sin(xs / 40.0)], 1).round().astype(np.int32)
    body = np.zeros((H, W), np.uint8)
    cv2.polylines(body, [pts], False, 1, WIDTH)
    housings = np.zeros((H, W), np.uint8)
    for x, y in pts[25::60]:
        cv2.circle(housings, (int(x), int(y)), WIDTH // 2 + 4, 1, -1)
    truth = (body | housings) > 0
    floor = 95 + rng.normal(0, 8, (H, W)).astype(np.float32)
    floor = cv2.GaussianBlur(floor, (0, 0), 1.2)
    img = np.repeat(floor[..., None], 3, 2)
    img[body > 0] = (225, 120, 25)
    img[housings > 0] = (45, 45, 45)  # grey like the floor, darker: the floor's shade to a colour rule
    img = cv2.GaussianBlur(img, (0, 0), 1.0)
    rgb = np.clip(img, 0, 255).astype(np.uint8)
    sil = np.zeros((H, W), np.uint8)
    cv2.polylines(sil, [pts], False, 1, WIDTH - 2)
    sil = sil > 0
    core = cv2.erode(sil.view(np.uint8), np.ones((9, 9), np.uint8)) > 0
    label = (body > 0) & ~(housings > 0) | ((housings > 0) & core)  # each housing's middle strip only
    return rgb, truth, sil, label


def _boundary_dist(truth: np.ndarray) -> np.ndarray:
    """Each pixel's distance [pixels] to the truth's edge (either side)."""
    t = truth.astype(np.uint8)
    return np.minimum(cv2.distanceTransform(1 - t, cv2.DIST_L2, 3), cv2.distanceTransform(t, cv2.DIST_L2, 3))


def test_the_band_cut_recovers_the_housings_the_label_and_the_model_leave_out():
    rgb, truth, sil, label = _scene()
    assert mask_iou(label, truth) < 0.85 and mask_iou(sil, truth) < 0.85  # both leave the housings out
    out, taken = band_cut(rgb, label, sil)
    assert taken
    assert mask_iou(out, truth) > 0.95, mask_iou(out, truth)
    wrong = out ^ truth
    assert _boundary_dist(truth)[wrong].max() <= 2.0  # every wrong pixel within 2 px of the true edge
    assert not (out & ~dilate_mask(sil | label, band_px(sil))).any()  # nothing beyond the band


def test_a_dark_thing_beyond_the_band_stays_out():
    rgb, truth, sil, label = _scene(1)
    rgb = rgb.copy()
    rgb[5:25, 100:140] = 45  # a dark thing of the housings' colour, far from the body
    out, taken = band_cut(rgb, label, sil)
    assert taken and not out[5:25, 100:140].any()


def test_with_the_robot_colours_a_thing_in_front_of_the_body_is_cut_out():
    rgb, truth, sil, label = _scene()
    colours = robot_colours(rgb, truth)  # a clear frame's: orange, dark grey, their blurred mixes
    shoe = np.zeros_like(truth)
    shoe[50:110, 150:200] = True  # a light grey shoe across the body: inside the model's silhouette
    seen = rgb.copy()
    seen[shoe] = (185, 185, 190)
    visible = truth & ~shoe
    taken_in = label | (shoe & dilate_mask(sil, 2))  # the label took it in where it covers the body
    with_colours, taken = band_cut(seen, taken_in, sil, colours=colours)
    without, _ = band_cut(seen, taken_in, sil)
    assert taken
    on_body = shoe & sil
    assert np.count_nonzero(with_colours & on_body) < 0.05 * np.count_nonzero(on_body)
    assert np.count_nonzero(without & on_body) > 0.5 * np.count_nonzero(on_body)  # what the colours decide
    assert mask_iou(with_colours, visible) > 0.9, mask_iou(with_colours, visible)


def test_a_poor_fit_leaves_the_label_as_it_is():
    rgb, truth, sil, label = _scene()
    away = np.roll(sil, 40, axis=0)  # the model fitted elsewhere: IoU with the label far below min_iou
    assert mask_iou(away, label) < BandConfig().min_iou
    out, taken = band_cut(rgb, label, away)
    assert not taken and np.array_equal(out, label)
    out, taken = band_cut(rgb, label, np.zeros_like(sil))
    assert not taken and np.array_equal(out, label)


def test_the_band_follows_the_body_width():
    _, truth, sil, _ = _scene()
    assert abs(body_width_px(sil) - (WIDTH - 2)) < 2.5
    assert band_px(sil) == round(BandConfig().band_frac * body_width_px(sil))
    assert band_px(sil, BandConfig(max_band_px=3)) == 3
    assert band_px(np.zeros_like(sil)) == BandConfig().min_band_px


def test_band_config_is_checked():
    with pytest.raises(InputError):
        BandConfig(min_band_px=5, max_band_px=2)
    with pytest.raises(InputError):
        BandConfig(min_iou=2.0)
    with pytest.raises(InputError):
        BandConfig(iterations=0)
