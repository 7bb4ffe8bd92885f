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
from snaketrack.labelling.band_cut import (
    BandConfig,
    axis_strip,
    band_cut,
    band_px,
    body_beyond,
    covered_by,
    own_colours,
    robot_colours,
    wide_part,
    wider_than_model,
)
from snaketrack.masks import body_width_px, mask_iou

H, W, WIDTH = 160, 320, 20
WIDE = BandConfig(wide_frac=1.6)  # the gate's cut of a label wider than the body, which is off by default


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


def _leg_over(rgb, truth, sil):
    """A leg wider than the body standing over it, from the image's top edge down to the body's far edge,
    beige (the body's colours do not hold it, its tone is near theirs): (frame, leg, the cut that took the leg
    in within the prompt box, 15 px around the silhouette)."""
    ys, xs = np.nonzero(sil)
    leg = np.zeros_like(truth)
    x0 = 165  # where the body runs level (a trough of its sine)
    leg[: int(ys[(xs >= x0) & (xs < x0 + 50)].max()) + 1, x0:x0 + 50] = True  # 50 px wide, over the body
    seen = rgb.copy()
    seen[leg] = (200, 170, 120)
    seen = cv2.GaussianBlur(seen, (0, 0), 1.0)
    cut = (truth & ~leg) | (leg & dilate_mask(sil, 15))
    return seen, leg, cut


def test_a_leg_over_the_body_is_wider_than_it_and_the_label_keeps_the_body_not_the_leg():
    rgb, truth, sil, label = _scene(2)
    seen, leg, cut = _leg_over(rgb, truth, sil)
    visible = truth & ~leg
    taken_in = label | cut  # a label that took the leg in with the body, up to the prompt box's edge
    width = body_width_px(sil)
    wide = wider_than_model(taken_in, sil, width, WIDE)
    assert np.count_nonzero(wide & leg) > 0.8 * np.count_nonzero(leg & taken_in)
    kept = taken_in & ~(wide & ~axis_strip(sil, width))  # what the gate keeps: the model's width about its axis
    assert np.count_nonzero(kept & leg & ~dilate_mask(sil, 3)) < 0.05 * np.count_nonzero(leg & taken_in)
    assert mask_iou(kept, visible) > mask_iou(taken_in, visible) + 0.03


def test_given_the_leg_beyond_the_body_the_band_cut_keeps_the_body_not_the_leg():
    rgb, truth, sil, label = _scene(2)
    seen, leg, cut = _leg_over(rgb, truth, sil)
    visible = truth & ~leg
    occ = cut & leg & ~dilate_mask(sil, 2)  # the leg's part beyond the body: its colours, certain ground
    on_body = leg & sil
    assert covered_by(occ, sil)[on_body].all()  # the silhouette it may hide: all the leg stands over
    taken_in = label | (leg & dilate_mask(sil, 2))  # a label that took the leg in where it covers the body
    plain, _ = band_cut(seen, taken_in, sil)
    out, taken = band_cut(seen, taken_in, sil, occluder=occ)
    assert taken
    assert np.count_nonzero(plain & on_body) > 0.5 * np.count_nonzero(on_body)  # without it the leg stays
    assert np.count_nonzero(out & on_body) < 0.05 * np.count_nonzero(on_body)
    assert mask_iou(out, visible) > 0.9, mask_iou(out, visible)
    assert mask_iou(out, visible) > mask_iou(plain, visible) + 0.1
    same, _ = band_cut(rgb, label, sil, occluder=np.zeros_like(sil))  # an empty occluder changes nothing
    assert np.array_equal(same, band_cut(rgb, label, sil)[0])


def test_a_shoe_of_the_body_colour_on_it_is_wider_than_the_body_and_the_label_keeps_the_body_width():
    xs = np.arange(30, 291)
    pts = np.stack([xs, 80 + 25 * np.sin(xs / 40.0)], 1).round().astype(np.int32)
    body, sil = np.zeros((H, W), np.uint8), np.zeros((H, W), np.uint8)
    cv2.polylines(body, [pts], False, 1, WIDTH)
    cv2.polylines(sil, [pts], False, 1, WIDTH - 2)  # the model: one pixel narrow on each side
    body, sil = body > 0, sil > 0
    shoe = np.zeros_like(body)
    shoe[40:112, 165:215] = True  # a block taller than the body, where it runs level (a trough of its sine)
    shoe &= ~body | (np.arange(H)[:, None] < 105)  # over it but for a strip along its lower edge
    label = body | shoe  # a cut that took the shoe in with the body: a grey shoe on a grey body
    width = body_width_px(sil)
    wide = wider_than_model(label, sil, width, WIDE)
    assert np.count_nonzero(wide & shoe) > 0.8 * np.count_nonzero(shoe)
    assert not wider_than_model(body, sil, width, WIDE).any()
    fat = dilate_mask(sil, 12)  # where the model is as wide as the label, the label is not wider than it
    assert wide_part(fat, width, WIDE).any() and not wider_than_model(fat, fat, width, WIDE).any()
    kept = label & ~(wide & ~axis_strip(sil, width))
    visible = body & ~shoe
    assert mask_iou(kept, visible) > mask_iou(label, visible) + 0.15
    beyond = kept & shoe & ~dilate_mask(sil, 3)  # what trimming to the model (off_px) would still leave
    assert np.count_nonzero(beyond) < 0.05 * np.count_nonzero(shoe), np.count_nonzero(beyond)


def test_the_body_past_the_models_end_joins_the_label_a_thing_of_its_colour_beside_it_does_not():
    rgb, truth, sil, label = _scene(5)
    own = own_colours(rgb, truth)  # orange (the housings' dark grey is the floor's shade)
    tail = np.zeros_like(truth)
    tail[:, 250:] = True
    short_sil, short_label = sil & ~tail, label & ~tail  # the model and the label lost the tail's 40 px
    seen = rgb.copy()
    seen[10:40, 40:90] = (225, 120, 25)  # an orange box, within two body widths of the model, wider than the body
    more = body_beyond(seen, short_label, short_sil, own)
    missing = truth & tail & ~dilate_mask(short_label, 1)
    assert np.count_nonzero(more & missing) > 0.6 * np.count_nonzero(missing)
    assert not more[:42, 40:90].any()
    assert np.count_nonzero(more & ~dilate_mask(truth, 2)) < 0.05 * np.count_nonzero(more)
    assert not body_beyond(seen, short_label, short_sil, None).any()


def test_a_grey_robot_has_no_own_colours_an_orange_one_has():
    rgb, truth, _, _ = _scene(6)
    assert own_colours(rgb, truth).any()
    grey = rgb.copy()
    grey[truth] = (110, 115, 125)  # a grey body: its colours are the floor's tones, unsaturated
    xs = np.flatnonzero(truth.any(0))
    nose = truth & (np.arange(W)[None, :] < xs.min() + 20)
    grey[nose] = (220, 30, 30)  # a red nose, a small share of the body
    assert not own_colours(grey, truth).any()
    assert own_colours(grey, truth, BandConfig(own_share=0.0)).any()  # the nose's red, when a share is not asked


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
    with pytest.raises(InputError):
        BandConfig(wide_frac=-1.0)
    with pytest.raises(InputError):
        BandConfig(own_share=1.5)
