"""The live segmenter's window, checked against segmenting whole frames with a per-pixel segmenter (whose
answer at a pixel cannot depend on the crop): equal masks, and a whole-frame pass wherever the window
cannot be trusted."""
import math

import numpy as np
import pytest
import torch

from snaketrack.training.data import resize_to
from snaketrack.training.model import SegmenterConfig, build_model
from snaketrack.training.segmenter import Segmenter
from snaketrack.training.window import Window

H, W = 120, 200


def _frame(cx, cy, r=8, seed=0):
    """A grey textured frame with a red disc of radius ``r`` centred at (cx, cy)."""
    rng = np.random.default_rng(seed)
    img = rng.integers(60, 140, (H, W, 3)).astype(np.uint8)
    yy, xx = np.mgrid[:H, :W]
    img[(xx - cx) ** 2 + (yy - cy) ** 2 <= r * r] = (220, 40, 30)
    return img


def _redness(images, size):
    """A per-pixel segmenter: the robot probability of each pixel from its colour alone."""
    out = []
    for img in images:
        x = resize_to(img, size).astype(np.float32) / 255.0
        out.append(1.0 / (1.0 + np.exp(-20.0 * (x[..., 0] - x[..., 1] - 0.4))))
    return np.stack(out).astype(np.float32)


def _whole(img):
    return _redness([img], (H, W))[0]


def test_following_equals_the_whole_frame_and_looks_at_less_of_it():
    w, looked = Window((H, W)), []

    def proba(images, size):
        looked.append(size)
        return _redness(images, size)

    for k in range(10):
        img = _frame(60 + 3 * k, 50 + 2 * k, seed=k)
        p = w.follow(img, proba, 0.5)
        np.testing.assert_array_equal(p > 0.5, _whole(img) > 0.5)
    assert (w.searches, w.windows) == (1, 9)
    assert looked[0] == (H, W) and all(h * w <= 0.4 * H * W for h, w in looked[1:])


def test_a_robot_that_left_the_window_is_searched_for_in_the_same_frame():
    w = Window((H, W))
    w.follow(_frame(40, 30), _redness, 0.5)
    jumped = _frame(170, 95)  # far outside the window around (40, 30)
    p = w.follow(jumped, _redness, 0.5)
    np.testing.assert_array_equal(p > 0.5, _whole(jumped) > 0.5)
    assert (w.searches, w.windows) == (2, 0)
    w.follow(_frame(171, 95), _redness, 0.5)  # and followed from there
    assert w.windows == 1


def test_a_robot_cut_by_the_window_is_searched_for_in_the_same_frame():
    w = Window((H, W))
    w.follow(_frame(80, 60, r=6), _redness, 0.5)
    grown = _frame(80, 60, r=50)  # now taller than the window around the small disc
    p = w.follow(grown, _redness, 0.5)
    np.testing.assert_array_equal(p > 0.5, _whole(grown) > 0.5)
    assert w.searches == 2


@pytest.mark.parametrize("keep", [0.75, 0.0])
def test_a_window_that_loses_part_of_the_robot_is_not_taken(keep):
    """A network whose answer in a window drops part of the robot (as a crop's narrower context can make
    it): with ``keep`` the frame is segmented whole again; without, the window's answer is taken."""
    def half_blind(images, size):
        p = _redness(images, size)
        if size != (H, W):
            p[:, :, size[1] // 2:] = 0.0  # the right half of every window is lost
        return p

    w = Window((H, W), keep=keep)
    w.follow(_frame(80, 60, r=12), half_blind, 0.5)
    img = _frame(81, 60, r=12)
    p = w.follow(img, half_blind, 0.5)
    whole = _whole(img) > 0.5
    if keep:
        np.testing.assert_array_equal(p > 0.5, whole)
        assert (w.searches, w.windows) == (2, 0)
    else:
        assert (p > 0.5).sum() < 0.75 * whole.sum() and w.windows == 1


def test_empty_frames_a_new_size_and_reset_each_search_the_whole_frame():
    w = Window((H, W))
    empty = np.full((H, W, 3), 100, np.uint8)
    for _ in range(2):
        assert not (w.follow(empty, _redness, 0.5) > 0.5).any()
    assert (w.searches, w.windows) == (2, 0)
    w.follow(_frame(80, 60), _redness, 0.5)
    w.follow(_frame(81, 60), _redness, 0.5)
    assert w.windows == 1
    w.reset()
    w.follow(_frame(82, 60), _redness, 0.5)
    assert w.searches == 4
    small = np.ascontiguousarray(_frame(80, 60)[:100, :160])
    w.follow(small, _redness, 0.5)  # another frame size: the window's box belongs to the old one
    assert w.searches == 5


def test_a_robot_filling_the_frame_is_segmented_whole():
    w = Window((H, W))
    red = np.zeros((H, W, 3), np.uint8)
    red[..., 0] = 220
    for _ in range(3):
        assert (w.follow(red, _redness, 0.5) > 0.5).all()
    assert (w.searches, w.windows) == (3, 0)


@pytest.mark.parametrize("given, steps", [(4, 4), (None, 8)])  # None: the default, eighths
def test_window_sizes_are_a_few_fixed_fractions(given, steps):
    w = Window((360, 640), steps=given) if given else Window((360, 640))
    sizes = set()
    rng = np.random.default_rng(0)
    for _ in range(200):
        y0, x0 = rng.integers(0, 300), rng.integers(0, 600)
        w.box = (y0, min(360, y0 + rng.integers(1, 60)), x0, min(640, x0 + rng.integers(1, 200)))
        c = w.crop(360, 640)
        if c is not None:
            y0, y1, x0, x1, h, wd = c
            assert 0 <= y0 < y1 <= 360 and 0 <= x0 < x1 <= 640
            assert y0 <= w.box[0] and w.box[1] <= y1 and x0 <= w.box[2] and w.box[3] <= x1
            sizes.add((h, wd))
    assert sizes <= {(360 * i // steps, 640 * j // steps) for i in range(1, steps + 1) for j in range(1, steps + 1)}


@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_segmenter_window_matches_the_whole_frame(scale):
    """A Segmenter whose network is per-pixel: with its window it gives the whole frame's masks."""
    cfg = SegmenterConfig(encoder="resnet18", input_size=(H, W), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))

    def network(x):  # logits from the normalised, padded input's colour, pixel by pixel
        return 20.0 * (x[:, 0:1] - x[:, 1:2] - 0.4)

    torch.manual_seed(0)
    model = build_model(cfg)
    whole = Segmenter(model, cfg, scale=scale, flips=1, network=network)
    followed = Segmenter(model, cfg, scale=scale, flips=1, network=network, window=True)
    frames = [_frame(60 + 4 * k, 40 + 3 * k, seed=k) for k in range(8)]
    a, b = whole.predict_batch(frames), followed.predict_batch(frames)
    agree = (a == b).mean(axis=(1, 2))
    assert agree.min() >= (1.0 if scale == 1.0 else 0.999)
    assert followed.window.windows == 7
    followed.reset()
    followed.predict(frames[0])
    assert followed.window.searches == 2


def test_a_speck_of_false_robot_does_not_stretch_the_window_and_a_refresh_finds_what_it_missed():
    w, looked = Window((H, W), refresh=5), []

    def proba(images, size):
        looked.append(size)
        return _redness(images, size)

    frames = []
    for k in range(10):
        img = _frame(60 + 2 * k, 50, seed=k)
        img[110:113, 190:193] = (220, 40, 30)  # a 3 x 3 px speck in the far corner
        frames.append(img)
    for img in frames:
        p = w.follow(img, proba, 0.5)
    assert all(h * wd <= 0.4 * H * W for h, wd in looked[1:5])  # the speck is left out of the box
    assert not (p[105:, 185:] > 0.5).any() and (_whole(frames[-1])[105:, 185:] > 0.5).any()
    assert (w.searches, w.windows) == (2, 8)  # frames 0 and 5 whole: every refresh


def test_the_robot_pieces_drop_far_specks_and_keep_a_robot_cut_in_two():
    """A Segmenter keeps only the mask's robot pieces: a far speck goes, both halves of a
    robot cut in two by a post stay, and nothing else changes (against the per-pixel answer)."""
    cfg = SegmenterConfig(encoder="resnet18", input_size=(H, W), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))

    def network(x):
        return 20.0 * (x[:, 0:1] - x[:, 1:2] - 0.4)

    torch.manual_seed(0)
    model = build_model(cfg)
    img = _frame(60, 50)
    img[46:55, 58:62] = (90, 90, 90)          # a post across the disc: two large pieces
    img[110:113, 190:193] = (220, 40, 30)      # a 3 x 3 px speck in the far corner
    truth = _whole(img) > 0.5
    kept = Segmenter(model, cfg, flips=1, network=network, edges=False).predict(img)
    every = Segmenter(model, cfg, flips=1, network=network, region=False, edges=False).predict(img)
    np.testing.assert_array_equal(every, truth)
    speck = np.zeros_like(truth)
    speck[105:, 185:] = True
    np.testing.assert_array_equal(kept, truth & ~speck)
    assert truth[:, :60].any() and truth[:, 62:100].any() and (truth & speck).any()


def test_following_cuts_each_mask_to_its_own_robot_pieces():
    """With a window, each mask keeps the robot pieces of the mask itself (:func:`robot_pieces`), on window and
    whole-frame passes alike."""
    from snaketrack.training.window import robot_pieces

    cfg = SegmenterConfig(encoder="resnet18", input_size=(H, W), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))

    def network(x):
        return 20.0 * (x[:, 0:1] - x[:, 1:2] - 0.4)

    torch.manual_seed(0)
    model = build_model(cfg)
    frames = []
    for k in range(6):
        img = _frame(60 + 4 * k, 40 + 3 * k, seed=k)
        img[110:113, 190:193] = (220, 40, 30)  # a far speck: in the whole-frame passes' masks
        frames.append(img)
    raw = Segmenter(model, cfg, flips=1, network=network, window=True, region=False, edges=False).predict_batch(frames)
    cut = Segmenter(model, cfg, flips=1, network=network, window=True, edges=False).predict_batch(frames)
    assert raw[0, 110:113, 190:193].all() and not cut[0, 110:113, 190:193].any()
    held = None
    for r, c in zip(raw, cut):
        np.testing.assert_array_equal(c, robot_pieces(r, held=held))
        held = c


def _pieces_brute_force(mask, gap_widths, held=None, hold_widths=6.0, thin=0.5):
    """robot_pieces by its definition: pixel-to-pixel distances, the width from the largest piece's outline;
    a piece that overlaps ``held`` joins within ``hold_widths`` widths; a piece whose pixels all lie within
    ``thin`` × the largest piece's thickness of a pixel outside the mask (or the frame) is never taken."""
    import cv2
    from scipy.spatial.distance import cdist

    n, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    pieces = [np.argwhere(labels == k) for k in range(1, n)]
    largest = max(range(len(pieces)), key=lambda k: len(pieces[k]))
    contours, _ = cv2.findContours((labels == largest + 1).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    width = 2.0 * len(pieces[largest]) / sum(cv2.arcLength(c, True) for c in contours)
    outside = np.argwhere(~np.pad(mask, 1)) - 1  # pixels outside the mask, a ring beyond the frame included
    thickness = [cdist(p, outside).min(axis=1).max() for p in pieces]
    thick = [k == largest or thickness[k] >= thin * thickness[largest] for k in range(len(pieces))]

    def reach(k):
        overlaps = held is not None and held[tuple(pieces[k].T)].any()
        return (hold_widths if overlaps else gap_widths) * width

    taken, grew = {largest}, True
    while grew:
        pts = np.concatenate([pieces[k] for k in taken])
        new = {k for k in range(len(pieces))
               if k not in taken and thick[k] and cdist(pieces[k], pts).min() <= reach(k)}
        taken |= new
        grew = bool(new)
    out = np.zeros(mask.shape, bool)
    for k in taken:
        out[tuple(pieces[k].T)] = True
    return out


@pytest.mark.parametrize("seed", range(6))
def test_robot_pieces_match_their_definition_on_random_masks(seed):
    from snaketrack.training.window import robot_pieces

    rng = np.random.default_rng(seed)
    mask = np.zeros((80, 120), bool)
    for _ in range(12):  # rectangles of every size, some touching, some apart
        y, x, h, w = rng.integers(0, 75), rng.integers(0, 115), rng.integers(1, 12), rng.integers(1, 30)
        mask[y:y + h, x:x + w] = True
    held = np.zeros_like(mask)
    for _ in range(4):  # the previous frame's robot: a few rectangles over some of the pieces
        y, x, h, w = rng.integers(0, 75), rng.integers(0, 115), rng.integers(1, 12), rng.integers(1, 30)
        held[y:y + h, x:x + w] = True
    for gap_widths in (1.0, 3.0):
        np.testing.assert_array_equal(robot_pieces(mask, gap_widths), _pieces_brute_force(mask, gap_widths))
        np.testing.assert_array_equal(robot_pieces(mask, gap_widths, held=held),
                                      _pieces_brute_force(mask, gap_widths, held=held))


def test_robot_pieces_keep_a_body_behind_posts_and_drop_a_stone_as_large_further_off():
    """A 10 px body hidden by two 20 px posts is three pieces, each within three widths of the next; a stone
    as large as one of them 40 px off is dropped (a box around the large pieces would keep it), one 20 px
    off is taken (the rule's reach)."""
    from snaketrack.training.window import robot_pieces

    body = np.zeros((100, 300), bool)
    body[40:50, 10:90] = body[40:50, 110:170] = body[40:50, 190:260] = True
    far = body.copy()
    far[90:100, 200:260] = True          # 40 px below the body
    near = body.copy()
    near[70:80, 200:260] = True          # 20 px below it
    np.testing.assert_array_equal(robot_pieces(body), body)
    np.testing.assert_array_equal(robot_pieces(far), body)
    np.testing.assert_array_equal(robot_pieces(near), near)


def test_robot_pieces_drop_a_thin_stick_beside_the_body_and_keep_a_short_stub_of_it():
    """A 10 px body (thickness 10) with a 10 × 10 px stub of it beyond a 15 px post, and a 4 px stick
    (thickness 4, under half of 10) 15 px from the body with a stone 15 px beyond the stick: the stub
    is kept, the stick is dropped and the stone, reachable only through the stick, with it."""
    from snaketrack.training.window import robot_pieces

    body = np.zeros((100, 300), bool)
    body[40:50, 10:150] = body[40:50, 165:175] = True
    mask = body.copy()
    mask[65:69, 20:140] = True              # the stick, 15 px below the body
    mask[84:94, 20:60] = True               # a stone 15 px below the stick, 34 px below the body
    np.testing.assert_array_equal(robot_pieces(mask), body)
    np.testing.assert_array_equal(robot_pieces(mask, thin=0.0), mask)  # without the rule: all of it


def test_a_piece_of_the_previous_robot_stays_while_its_gap_widens_a_little():
    """A 10 px body whose far piece is 35 px beyond a post (3.5 widths) loses that piece on its own, keeps it
    when the piece overlaps the previous frame's robot, and never keeps a stone 70 px off (7 widths) or a
    piece the previous robot did not have."""
    from snaketrack.training.window import robot_pieces

    mask = np.zeros((100, 300), bool)
    mask[40:50, 10:120] = mask[40:50, 155:220] = True   # the body, and its far piece 35 px on
    mask[40:50, 290:300] = True                         # a stone 70 px beyond the far piece
    body = mask.copy()
    body[:, 280:] = False
    held = np.zeros_like(mask)
    held[40:50, 10:120] = held[41:51, 157:222] = True   # last frame's robot: the far piece 2 px off
    held[40:50, 288:300] = True                         # … and the stone, had it been kept
    np.testing.assert_array_equal(robot_pieces(mask), np.pad(np.ones((10, 110), bool), ((40, 50), (10, 180))))
    np.testing.assert_array_equal(robot_pieces(mask, held=held), body)
    near_only = held.copy()
    near_only[:, 150:] = False
    np.testing.assert_array_equal(robot_pieces(mask, held=near_only), robot_pieces(mask))


def test_following_keeps_a_piece_whose_gap_widens_past_the_rule_for_a_frame():
    """Two red bars 10 px thick drift apart by 2 px a frame. The first, 10 × 40 px, is 2 × 400 / 96 = 8.3 px
    wide by the rule (its outline is 96 px long); the gap between edge-pixel centres is ``gap + 1``. A
    whole-frame mask loses the second bar once that passes three widths (25 px); a followed one keeps it
    until it passes six (50 px), then drops it."""
    from snaketrack.training.window import robot_pieces

    def bars(gap):
        img = np.full((H, W, 3), 100, np.uint8)
        img[50:60, 20:60] = img[50:60, 60 + gap:95 + gap] = (220, 40, 30)
        return img

    w, gaps = Window((H, W)), range(16, 70, 2)
    whole, followed = [], []
    for gap in gaps:
        img = bars(gap)
        w.follow(img, _redness, 0.5)
        whole.append(bool(robot_pieces(_whole(img) > 0.5)[:, 60 + gap:].any()))
        followed.append(bool(w.robot[:, 60 + gap:].any()))
    assert whole == [gap + 1 <= 25 for gap in gaps]
    assert followed == [gap + 1 <= 50 for gap in gaps]
    assert w.windows > w.searches


def test_a_size_not_compiled_yet_is_replaced_by_the_smallest_larger_one_that_is():
    """With a ``ready`` predicate, the window is the smallest one whose input size is ready among those at
    least as large as the wanted one on both axes (enumerated here from the sizes themselves), it still
    holds the robot's box, the wanted size is asked about first, and nothing ready gives the whole frame."""
    steps, net = 8, (360, 640)
    sizes = [(math.ceil(a * net[0] / steps), math.ceil(b * net[1] / steps))
             for a in range(1, steps + 1) for b in range(1, steps + 1)]
    rng = np.random.default_rng(1)
    for trial in range(150):
        w = Window(net)
        y0, x0 = int(rng.integers(0, 300)), int(rng.integers(0, 600))
        w.box = (y0, min(360, y0 + int(rng.integers(1, 60))), x0, min(640, x0 + int(rng.integers(1, 200))))
        wanted = w.crop(360, 640)
        if wanted is None:
            continue
        compiled = {s for s in sizes if rng.random() < 0.3} if trial % 5 else set()
        asked = []

        def ready(size, asked=asked, compiled=compiled):
            asked.append(size)
            return size in compiled

        got = w.crop(360, 640, ready)
        assert asked[0] == wanted[4:]
        larger = [s for s in compiled if s[0] >= wanted[4] and s[1] >= wanted[5]]
        if wanted[4:] in compiled:
            assert got == wanted
        elif not larger:
            assert got is None
        else:
            assert got is not None and got[4:] in compiled
            assert got[4] * got[5] == min(h * wd for h, wd in larger)
            gy0, gy1, gx0, gx1 = got[:4]
            assert gy0 <= w.box[0] and w.box[1] <= gy1 and gx0 <= w.box[2] and w.box[3] <= gx1


def test_following_with_sizes_compiled_late_still_equals_the_whole_frame():
    """Sizes that become ready only after they were first asked about (an engine compiling them in the
    background): every frame is segmented, in a larger window or whole meanwhile, with the same masks."""
    w, compiled, pending, looked = Window((H, W)), {(H, W)}, [], []

    def ready(size):  # one size compiled at a time, ready from the next frame on
        if size in compiled:
            return True
        if not pending:
            pending.append(size)
        return False

    def proba(images, size):
        looked.append(size)
        return _redness(images, size)

    for k in range(10):
        img = _frame(60 + 3 * k, 50 + 2 * k, seed=k)
        np.testing.assert_array_equal(w.follow(img, proba, 0.5, ready) > 0.5, _whole(img) > 0.5)
        compiled.update(pending)
        pending.clear()
    assert looked[1] == (H, W) and w.searches + w.windows == 10 and w.windows >= 8


@pytest.mark.parametrize("wait", [True, False])
def test_a_segmenter_that_does_not_wait_runs_only_compiled_sizes(wait):
    """An engine compiling each size on its first use (one at a time, ready at the next frame): a
    segmenter that waits never asks and runs each wanted size; one that does not runs only compiled sizes.
    Both give the whole frame's masks (a per-pixel network)."""
    cfg = SegmenterConfig(encoder="resnet18", input_size=(H, W), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))

    class Engine:
        def __init__(self):
            self.compiled, self.pending, self.asked, self.ran = set(), [], 0, []

        def ready(self, shape):
            self.asked += 1
            if tuple(shape) in self.compiled:
                return True
            if not self.pending:
                self.pending.append(tuple(shape))
            return False

        def __call__(self, x):
            self.ran.append((x.shape, x.shape in self.compiled))
            self.compiled.add(x.shape)  # compiled on first use when it was not ready
            return 20.0 * (x[:, 0:1] - x[:, 1:2] - 0.4)

    torch.manual_seed(0)
    engine = Engine()
    seg = Segmenter(build_model(cfg), cfg, flips=1, network=engine, window=True, wait=wait)
    for k in range(10):
        img = _frame(60 + 3 * k, 50 + 2 * k, seed=k)
        np.testing.assert_array_equal(seg.predict(img), _whole(img) > 0.5)
        engine.compiled.update(engine.pending)
        engine.pending.clear()
    first_uses = sum(not was_compiled for _, was_compiled in engine.ran)
    if wait:
        assert engine.asked == 0 and first_uses >= 2  # the whole frame's and at least one window's
    else:
        assert engine.asked > 0 and first_uses == 1   # the whole frame's only
    assert seg.window.windows >= 8
