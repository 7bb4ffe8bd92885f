"""The final choice of checkpoint, inference scale and threshold on validation, and what uses it."""
import csv
import json

import numpy as np
import pytest
import torch

from snaketrack.cli import main
from snaketrack.training.config import TrainConfig
from snaketrack.training.data import SegmentationData, recolour_ground
from snaketrack.training.evaluate import evaluate_segmenter
from snaketrack.training.losses import edge_band, seg_loss
from snaketrack.training.model import SegmenterConfig, build_model, load_model, save_model
from snaketrack.training.segmenter import load_segmenter
from snaketrack.training.selection import choose_row, select_inference
from snaketrack.training.train import side_paths, train


class _Thick(torch.nn.Module):
    """A stand-in network: robot where the red channel is high, grown by ``grow`` network pixels.

    Growing by a fixed number of network pixels is a fixed error in network
    pixels, so it shrinks in frame pixels as the frame is enlarged: a larger
    scale must score better, and by how much is known."""

    def __init__(self, grow=1):
        super().__init__()
        self.grow = grow

    def forward(self, x):
        r = (x[:, :1] > 0.5).float()
        k = 2 * self.grow + 1
        r = torch.nn.functional.max_pool2d(r, k, stride=1, padding=self.grow) if self.grow else r
        return 20.0 * (r - 0.5)


def _stripe_frames(n=3, h=48, w=64):
    frames = []
    for k in range(n):
        rgb = np.zeros((h, w, 3), np.uint8)
        m = np.zeros((h, w), bool)
        m[10 + k:16 + k, 5:60] = True           # a 6 px wide stripe, like a thin robot
        rgb[m] = (255, 60, 0)
        frames.append((rgb, m))
    return frames


def test_select_inference_scores_each_combination_and_picks_the_best():
    cfg = SegmenterConfig(input_size=(48, 64))
    frames = _stripe_frames()
    sel = select_inference([("exact", _Thick(0)), ("thick", _Thick(1))], frames, cfg, scales=(1.0, 2.0),
                           thresholds=(0.3, 0.5, 0.7))
    assert len(sel["table"]) == 2 * 2 * 3
    exact1 = [r for r in sel["table"] if r["candidate"] == 0 and r["scale"] == 1.0]
    assert all(r["iou"] == pytest.approx(1.0) for r in exact1)  # a perfect network at the trained scale
    thick = {r["scale"]: r["iou"] for r in sel["table"] if r["candidate"] == 1 and r["threshold"] == 0.5}
    assert thick[1.0] == pytest.approx(6 * 55 / (8 * 57), abs=0.02)  # grown by 1 px each side
    assert thick[2.0] > thick[1.0] + 0.05                             # grown by half a frame pixel
    # the perfect network ties with itself at both scales: the tie goes to the cheaper scale 1
    assert (sel["candidate"], sel["scale"], sel["threshold"]) == (0, 1.0, 0.5)
    only_thick = select_inference([("thick", _Thick(1))], frames, cfg, scales=(1.0, 2.0), thresholds=(0.5,))
    assert only_thick["scale"] == 2.0
    # within a tolerance wider than the difference, the cheaper scale wins
    assert select_inference([("thick", _Thick(1))], frames, cfg, scales=(1.0, 2.0), thresholds=(0.5,),
                            tie_tolerance=0.5)["scale"] == 1.0


class _Low(torch.nn.Module):
    """A stand-in network whose robot sits ``shift`` pixels too low: averaging it with its up-down
    mirror image (flipped back) puts the error on both sides, which a low threshold turns into a
    wider but better-overlapping stripe (IoU 6/10 instead of 4/8 for a 6 px stripe, 2 px shift)."""

    def __init__(self, shift=2):
        super().__init__()
        self.shift = shift

    def forward(self, x):
        r = (x[:, :1] > 0.5).float()
        r = torch.nn.functional.pad(r, (0, 0, self.shift, 0))[:, :, :r.shape[2]]
        return 20.0 * (r - 0.5)


class _RedAndBlue(torch.nn.Module):
    """A stand-in network: robot probability 1 where red is high, 0.4 where blue is high, else 0."""

    def forward(self, x):
        red, blue = (x[:, :1] > 0.5).float(), (x[:, 2:3] > 0.5).float()
        return 20.0 * red - 20.0 * (1 - red - blue) + float(np.log(0.4 / 0.6)) * blue


def test_selection_scores_the_masks_inference_gives_at_each_threshold():
    """Each mask is cut to its own robot region: a red speck far from the stripe goes at every threshold,
    a far blue slab of probability 0.4 is a large piece at threshold 0.3 and so stays there. The
    selection's IoU at each threshold is that of inference's masks at it."""
    from snaketrack.masks import mask_iou
    from snaketrack.training.segmenter import Segmenter

    cfg = SegmenterConfig(input_size=(96, 160))
    frames = []
    for rgb, m in _stripe_frames(h=96, w=160):
        rgb[85:88, 150:153] = (255, 60, 0)   # a far red speck
        rgb[70:80, 90:140] = (0, 0, 255)     # a far blue slab
        frames.append((rgb, m))
    net = _RedAndBlue()
    sel = select_inference([("rb", net)], frames, cfg, scales=(1.0,), thresholds=(0.3, 0.5, 0.7))
    got = {r["threshold"]: r["iou"] for r in sel["table"]}
    for t in (0.3, 0.5, 0.7):
        seg = Segmenter(net, cfg, flips=1, threshold=t)
        assert got[t] == pytest.approx(np.mean([mask_iou(seg.predict(f), m) for f, m in frames]))
    assert got[0.5] == pytest.approx(1.0) and got[0.3] < 0.7 and sel["threshold"] != 0.3


def test_flips_are_tried_at_the_chosen_scale_and_kept_only_when_better():
    cfg = SegmenterConfig(input_size=(48, 64))
    frames = _stripe_frames()
    sel = select_inference([("low", _Low())], frames, cfg, scales=(1.0,), thresholds=(0.3, 0.5, 0.7), flips=(1, 2, 4))
    iou = {(r["flips"], r["threshold"]): r["iou"] for r in sel["table"]}
    assert iou[(1, 0.5)] == pytest.approx(4 * 55 / (8 * 55), abs=0.01)
    assert iou[(4, 0.3)] == pytest.approx(6 * 55 / (10 * 55), abs=0.01)
    assert (sel["flips"], sel["threshold"]) == (4, 0.3)
    # a network without the bias gains nothing from flips: the tie goes to no flips
    exact = select_inference([("exact", _Thick(0))], frames, cfg, scales=(1.0,), thresholds=(0.5,), flips=(1, 4))
    assert exact["flips"] == 1 and {r["flips"] for r in exact["table"]} == {1, 4}


def test_choose_row_ties_go_to_the_smaller_scale_then_the_higher_iou():
    t = [{"candidate": 0, "scale": 1.5, "threshold": 0.5, "iou": 0.8875},
         {"candidate": 1, "scale": 1.25, "threshold": 0.3, "iou": 0.8870},
         {"candidate": 0, "scale": 1.25, "threshold": 0.5, "iou": 0.8874},
         {"candidate": 0, "scale": 1.0, "threshold": 0.5, "iou": 0.8760}]
    assert choose_row(t) is t[0]
    assert choose_row(t, 0.001) is t[2]
    assert choose_row(t, 0.05) is t[3]


def test_training_stores_the_validation_choice_and_tools_use_it(tmp_path, toy_root, capsys):
    cfg = TrainConfig(encoder="resnet18", input_size=(96, 128), crop_size=(64, 64), batch_size=4, lr=1e-3,
                      max_steps_per_epoch=4, block=4, val_fraction=0.25, max_val_frames=6, threads=1, seed=0,
                      epochs=2, lr_step_epoch=10, scales=(1.0, 1.5), flips=(1, 2))
    out = tmp_path / "m.pt"
    train([toy_root], out, cfg, progress=False)
    with open(side_paths(out)["select"], newline="") as f:
        rows = [dict(r, scale=float(r["scale"]), threshold=float(r["threshold"]), iou=float(r["val_iou"]),
                     candidate=int(r["candidate"] == "last"), flips=int(r["flips"])) for r in csv.DictReader(f)]
    n_cand = len({r["candidate"] for r in rows})
    assert len(rows) == n_cand * 2 * 13 + 13  # every candidate and scale unflipped; the best one with 2 flips
    want = choose_row(rows, cfg.tie_tolerance)                        # the rule, applied to the written table
    assert [int(r["chosen"]) for r in rows].count(1) == 1 and want["chosen"] == "1"
    model, config, extra = load_model(out)
    assert (config.scale, config.flips, config.threshold) == (want["scale"], want["flips"], want["threshold"])
    assert extra["epoch"] == int(want["epoch"]) and extra["val_iou"] == pytest.approx(want["iou"])
    # the reloaded segmenter uses the stored scale and threshold, and its network's masks (validation scores
    # them whole, before the colour edge step) reproduce the validation score
    seg = load_segmenter(out, edges=False, window=False)
    assert (seg.scale, seg.flips, seg.threshold) == (want["scale"], want["flips"], want["threshold"])
    val = SegmentationData([toy_root], cfg.input_size, "val", cfg.val_fraction, cfg.block, cfg.seed,
                           max_frames=cfg.max_val_frames)
    got = evaluate_segmenter(seg, toy_root, frames=[i for _, i in val.items])
    assert got["iou"] == pytest.approx(want["iou"], abs=1e-9)
    # eval-seg's default is the stored choice; a flag overrides it
    assert main(["eval-seg", toy_root, "--model", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iou"] == pytest.approx(
        evaluate_segmenter(load_segmenter(out), toy_root)["iou"])
    other = 1.0 if want["scale"] != 1.0 else 1.5
    assert load_segmenter(out, scale=other).scale == other
    # opening the finished run again keeps its choice without scoring again
    again = train([toy_root], out, cfg, progress=False)
    assert again.selection["scale"] == want["scale"] and again.selection["epoch"] == extra["epoch"]


def test_a_stored_scale_is_the_default_for_segmenter_and_eval_seg(tmp_path, toy_root, capsys):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(48, 64), scale=1.5, threshold=0.4)
    torch.manual_seed(0)
    save_model(tmp_path / "s.pt", build_model(cfg), cfg)
    seg = load_segmenter(tmp_path / "s.pt")
    seen = []
    hook = seg.model.register_forward_pre_hook(lambda mod, inp: seen.append(tuple(inp[0].shape[-2:])))
    seg.predict(np.zeros((90, 160, 3), np.uint8))
    load_segmenter(tmp_path / "s.pt", scale=1.0).model.register_forward_pre_hook(
        lambda mod, inp: seen.append(tuple(inp[0].shape[-2:])))
    hook.remove()
    assert seen[0] == (80, 96)                      # 72x96 = 1.5 x 48x64, padded to a multiple of 16
    assert seg.threshold == 0.4
    a = main(["eval-seg", toy_root, "--model", str(tmp_path / "s.pt"), "--every", "4", "--json"])
    first = json.loads(capsys.readouterr().out)["iou"]
    b = main(["eval-seg", toy_root, "--model", str(tmp_path / "s.pt"), "--every", "4", "--scale", "1", "--json"])
    second = json.loads(capsys.readouterr().out)["iou"]
    assert a == b == 0
    ref = evaluate_segmenter(load_segmenter(tmp_path / "s.pt", scale=1.0), toy_root, frames=range(0, 24, 4))["iou"]
    assert second == pytest.approx(ref)
    assert first == pytest.approx(evaluate_segmenter(seg, toy_root, frames=range(0, 24, 4))["iou"])


def test_a_time_limited_run_still_chooses_and_stores(tmp_path, toy_root):
    cfg = TrainConfig(encoder="resnet18", input_size=(96, 128), crop_size=(64, 64), batch_size=4, lr=1e-3,
                      block=4, val_fraction=0.25, max_val_frames=4, threads=1, epochs=50, time_limit_s=1e-3,
                      scales=(1.0, 1.25))
    res = train([toy_root], tmp_path / "t.pt", cfg, progress=False)
    assert res.stopped_by_time and res.epochs_done == 1
    _, config, extra = load_model(tmp_path / "t.pt")
    assert config.scale in (1.0, 1.25) and extra["selection"]["scale"] == config.scale


def test_edge_band_is_the_labels_edge_and_is_left_out_of_the_loss():
    t = torch.zeros(1, 1, 12, 16)
    t[..., 4:8, 3:13] = 1
    band = edge_band(t, 1)
    ys, xs = np.nonzero(band[0, 0].numpy())
    ref = np.zeros((12, 16), bool)  # brute force: a pixel whose 3x3 neighbourhood holds both classes
    tt = t[0, 0].numpy()
    for y in range(12):
        for x in range(16):
            nb = tt[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2]
            ref[y, x] = nb.min() != nb.max()
    assert np.array_equal(band[0, 0].numpy() > 0, ref)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 1, 12, 16, generator=g)
    moved = logits.clone()
    moved[band > 0] += 5.0
    for loss in ("bce", "dice", "bce+dice", "iou"):
        a, b = seg_loss(logits, t, loss, ignore_edge=1), seg_loss(moved, t, loss, ignore_edge=1)
        assert float(a) == pytest.approx(float(b), abs=1e-6), loss           # band pixels do not count
        assert float(seg_loss(moved, t, loss)) != pytest.approx(float(seg_loss(logits, t, loss)))
    keep = band[0, 0] == 0
    x, y = logits[0, 0][keep].double(), t[0, 0][keep].double()
    ref_bce = torch.nn.functional.binary_cross_entropy_with_logits(x, y)
    assert float(seg_loss(logits, t, "bce", ignore_edge=1)) == pytest.approx(float(ref_bce), rel=1e-5)
    from snaketrack.errors import InputError
    with pytest.raises(InputError, match="ignore-edge"):
        TrainConfig(loss="bce+lovasz", ignore_edge=1)


def test_recolour_ground_keeps_the_robot_and_its_margin():
    rgb, m = _stripe_frames(1)[0]
    rgb = rgb.copy()
    rgb[~m] = (120, 110, 90)
    out = recolour_ground(rgb, m, np.random.default_rng(3), margin_px=3)
    yy, xx = np.mgrid[:48, :64]
    my, mx = np.nonzero(m)                           # brute-force distance to the nearest robot pixel
    dist = np.sqrt(((yy[..., None] - my) ** 2 + (xx[..., None] - mx) ** 2).min(-1))
    assert np.array_equal(out[m], rgb[m])
    assert np.array_equal(out[dist <= 3], rgb[dist <= 3])
    far = dist >= 5                                   # beyond the 2 px blend
    assert np.abs(out[far].astype(int) - rgb[far]).mean() > 5
    assert np.array_equal(out, recolour_ground(rgb, m, np.random.default_rng(3), margin_px=3))
