"""The segmenter API the tracker uses, and the train / segment / eval-seg commands."""
import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from snaketrack.cli import main
from snaketrack.datasets.layout import Dataset
from snaketrack.training.evaluate import evaluate_segmenter, mean_iou
from snaketrack.training.model import SegmenterConfig, build_model, read_model_file, save_model
from snaketrack.training.segment import segment_source
from snaketrack.training.segmenter import load_segmenter


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(48, 64))
    torch.manual_seed(0)
    p = tmp_path_factory.mktemp("m") / "m.pt"
    save_model(p, build_model(cfg), cfg)
    return p


def test_predict_contract_and_batch_agree(model_file):
    seg = load_segmenter(model_file)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (3, 90, 160, 3), dtype=np.uint8)
    one = [seg.predict(f) for f in frames]
    assert all(m.shape == (90, 160) and m.dtype == bool for m in one)
    batch = seg.predict_batch(frames)
    assert batch.shape == (3, 90, 160)
    p1 = np.stack([seg.predict_proba(f) for f in frames])
    assert np.allclose(seg.predict_proba_batch(frames), p1, atol=1e-5)
    assert np.array_equal(one[0], p1[0] > 0.5)


def test_flips_average_the_flipped_frames(model_file):
    """Test-time flips against flipping by hand: the frame (here 45×80, not a multiple of 16, so
    padding sits at the bottom and right) and its mirror images through the plain segmenter,
    flipped back, averaged."""
    plain = load_segmenter(model_file, flips=1, region=False)  # the robot region is not linear in p
    rng = np.random.default_rng(4)
    frame = rng.integers(0, 255, (45, 80, 3), dtype=np.uint8)
    by_hand = [plain.predict_proba(np.ascontiguousarray(frame[::sy, ::sx]))[::sy, ::sx]
               for sy, sx in ((1, 1), (1, -1), (-1, 1), (-1, -1))]
    for n in (2, 4):
        got = load_segmenter(model_file, flips=n, region=False).predict_proba(frame)
        assert np.allclose(got, np.mean(by_hand[:n], axis=0), atol=1e-5)
    assert not np.allclose(by_hand[0], by_hand[1], atol=1e-3)  # the flips are not a no-op for this net
    with pytest.raises(Exception, match="flips 3"):
        load_segmenter(model_file, flips=3)


class _Truth:
    """A stand-in segmenter returning a dataset's own masks: IoU must be exactly 1."""

    def __init__(self, ds):
        self.ds = ds

    def predict_batch(self, frames):
        return np.stack([self.ds.mask(next(i for i in range(len(self.ds))
                                           if np.array_equal(self.ds.frame(i), f))) for f in frames])


def test_evaluate_against_an_oracle(toy_root):
    ds = Dataset(toy_root)
    assert evaluate_segmenter(_Truth(ds), toy_root, frames=range(5))["iou"] == 1.0
    masks = [ds.mask(i) for i in range(4)]
    assert mean_iou(masks, masks[::-1]) < 1.0


def test_a_followed_segmenter_sees_every_frame_in_order_and_is_scored_on_those_asked(toy_root, tmp_path):
    """A window follows consecutive frames: every 3rd frame scored, every frame from the first to the
    last of them segmented in order after forgetting any earlier video; a segmenter without a window
    segments only the scored ones."""
    ds = Dataset(toy_root)

    class Seen(_Truth):
        def __init__(self, ds, window):
            super().__init__(ds)
            self.window, self.seen = window, []

        def reset(self):
            self.seen.append("reset")

        def predict_batch(self, frames):
            masks = super().predict_batch(frames)
            self.seen += [next(i for i in range(len(self.ds)) if np.array_equal(self.ds.frame(i), f))
                          for f in frames]
            return masks

    followed, plain = Seen(ds, window=object()), Seen(ds, window=None)
    a = evaluate_segmenter(followed, toy_root, frames=range(2, 12, 3))
    b = evaluate_segmenter(plain, toy_root, frames=range(2, 12, 3))
    assert followed.seen == ["reset", *range(2, 12)] and plain.seen == [2, 5, 8, 11]
    assert a["frames"] == b["frames"] == 4 and a["iou"] == b["iou"] == 1.0
    evaluate_segmenter(followed, toy_root, frames=range(3))
    assert followed.seen[11:] == ["reset", 0, 1, 2]
    followed.seen.clear()
    segment_source(toy_root, tmp_path / "out", followed, batch_size=4, progress=False)
    assert followed.seen == ["reset", *range(len(ds))]


def test_train_segment_eval_commands(tmp_path, toy_root, capsys):
    model = tmp_path / "seg.pt"
    assert main(["train", toy_root, "--epochs", "1", "--batch-size", "4", "--input-size", "64x48",
                 "--max-val-frames", "4", "--threads", "1", "--no-live-int8", "--out", str(model), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["epochs"] == 1 and model.is_file()
    assert summary["live_int8"] is None and "live_int8" not in read_model_file(model)["extra"]
    assert load_segmenter(model).config.input_size == (48, 64)  # --input-size is WIDTHxHEIGHT
    out = tmp_path / "masks"
    assert main(["segment", toy_root, "--model", str(model), "--out", str(out)]) == 0
    capsys.readouterr()
    seg_ds = Dataset(out)
    assert len(seg_ds) == 24 and seg_ds.mask(0).shape == (96, 128)
    assert main(["eval-seg", toy_root, "--model", str(model), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    seg = load_segmenter(model)
    truth = Dataset(toy_root)
    ref = mean_iou([seg.predict(truth.frame(i)) for i in range(len(truth))],
                   [truth.mask(i) for i in range(len(truth))])
    assert got["iou"] == pytest.approx(ref) and got["frames"] == 24
    # the segment output's masks are the segmenter's
    assert np.array_equal(seg_ds.mask(3), seg.predict(truth.frame(3)))
    assert main(["eval-seg", toy_root, "--model", str(model), "--all-pieces", "--every", "4", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    every = load_segmenter(model, region=False)
    ref = mean_iou([every.predict(truth.frame(i)) for i in range(0, 24, 4)], [truth.mask(i) for i in range(0, 24, 4)])
    assert got["iou"] == pytest.approx(ref) and got["frames"] == 6


def test_the_model_files_threshold_is_used(tmp_path):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(48, 64), threshold=0.45)
    torch.manual_seed(0)
    save_model(tmp_path / "t.pt", build_model(cfg), cfg)
    seg = load_segmenter(tmp_path / "t.pt")
    rgb = np.random.default_rng(1).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    p = seg.predict_proba(rgb)
    assert seg.threshold == 0.45 and np.array_equal(seg.predict(rgb), p > 0.45)
    assert np.array_equal(load_segmenter(tmp_path / "t.pt", threshold=0.6).predict(rgb), p > 0.6)
    from snaketrack.errors import InputError

    for bad in (0.0, 1.0, 2.0):
        with pytest.raises(InputError, match="--threshold"):
            load_segmenter(tmp_path / "t.pt", threshold=bad)


def test_a_batch_of_no_frames_is_refused(toy_root, tmp_path):
    from snaketrack.errors import InputError

    ds = Dataset(toy_root)
    for bad in (0, -2):
        with pytest.raises(InputError, match="--batch-size"):
            segment_source(toy_root, tmp_path / "out", _Truth(ds), batch_size=bad, progress=False)
        with pytest.raises(InputError, match="--batch-size"):
            evaluate_segmenter(_Truth(ds), toy_root, batch_size=bad)
    assert not (tmp_path / "out").exists()


def test_scale_enlarges_the_network_input_not_the_mask(model_file, toy_root, capsys):
    from snaketrack.errors import InputError

    seen = []
    seg = load_segmenter(model_file, scale=1.5)
    hook = seg.model.register_forward_pre_hook(lambda mod, inp: seen.append(tuple(inp[0].shape[-2:])))
    m = seg.predict(np.zeros((90, 160, 3), np.uint8))
    hook.remove()
    assert m.shape == (90, 160)
    assert seen == [(80, 96)]                                          # 72x96 (1.5 x 48x64), padded to x16
    with pytest.raises(InputError, match="scale"):
        load_segmenter(model_file, scale=0.0)
    n = len(Dataset(toy_root))
    assert main(["eval-seg", toy_root, "--model", str(model_file), "--scale", "1.5", "--every", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["frames"] == (n + 1) // 2


def test_bf16_inference_follows_fp32(model_file, tmp_path, monkeypatch):
    """bfloat16 autocast against the float32 network as the reference: the same probabilities to
    bfloat16's precision, not bit for bit (so autocast is really on); the model file's choice is the default
    on a CPU with bfloat16 arithmetic, float32 on one without (where bfloat16 is emulated, slower)."""
    import snaketrack.training.segmenter as segmenter

    rgb = np.random.default_rng(2).integers(0, 255, (2, 90, 160, 3), dtype=np.uint8)
    p32 = load_segmenter(model_file, region=False).predict_proba_batch(rgb)  # the network's own probabilities
    seg16 = load_segmenter(model_file, precision="bf16", region=False)
    p16 = seg16.predict_proba_batch(rgb)
    assert seg16.precision == "bf16" and p16.dtype == np.float32
    diff = np.abs(p16 - p32)
    assert diff.max() > 0 and diff.mean() < 0.02, (diff.max(), diff.mean())
    cfg = SegmenterConfig(encoder="resnet18", input_size=(48, 64), precision="bf16")
    torch.manual_seed(0)
    save_model(tmp_path / "b.pt", build_model(cfg), cfg)
    for native, default in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(segmenter, "cpu_computes_bf16", lambda native=native: native)
        assert load_segmenter(tmp_path / "b.pt").precision == default
        assert load_segmenter(tmp_path / "b.pt", precision="bf16").precision == "bf16"  # asked for: as asked
        assert load_segmenter(tmp_path / "b.pt", precision="fp32").precision == "fp32"
        assert load_segmenter(model_file).precision == "fp32"
    with pytest.raises(Exception, match="--precision"):
        load_segmenter(model_file, precision="fp16")


def test_eval_seg_precision_flag(model_file, toy_root, capsys):
    assert main(["eval-seg", toy_root, "--model", str(model_file), "--precision", "bf16", "--every", "6",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    ref = evaluate_segmenter(load_segmenter(model_file, precision="bf16"), toy_root, frames=range(0, 24, 6))
    assert got["iou"] == pytest.approx(ref["iou"]) and got["frames"] == 4


def _captured_config(monkeypatch, tmp_path, toy_root, *flags):
    import snaketrack.training.train as train_module

    seen = {}

    def fake_train(datasets, out, config, device="auto"):
        seen["config"] = config
        return SimpleNamespace(selection={}, best_val_iou=0.0, epochs_done=0, stopped_by_time=False,
                               paths={"model": out})

    monkeypatch.setattr(train_module, "train", fake_train)
    assert main(["train", toy_root, "--out", str(tmp_path / "m.pt"), "--json", *flags]) == 0
    return seen["config"]


def test_train_runs_the_cpu_recipe_by_default(monkeypatch, tmp_path, toy_root, capsys):
    from snaketrack.training.config import RECIPES, TrainConfig, recipe_config

    config = _captured_config(monkeypatch, tmp_path, toy_root)
    assert config == recipe_config("cpu")
    assert config.time_limit_s == 20 * 60 and config.crop_size == (160, 160) and config.schedule == "cosine"
    assert config != TrainConfig()  # not the paper's settings
    # --minutes sets the budget; a flag changes only its own setting
    config = _captured_config(monkeypatch, tmp_path, toy_root, "--minutes", "5", "--lr", "1e-3")
    assert config == recipe_config("cpu", time_limit_s=300.0, lr=1e-3)
    assert recipe_config("cpu").live_int8 and not TrainConfig().live_int8  # the live int8 network: the recipe's
    config = _captured_config(monkeypatch, tmp_path, toy_root, "--no-live-int8")
    assert config == recipe_config("cpu", live_int8=False)
    # --recipe paper: the paper's settings, no budget
    config = _captured_config(monkeypatch, tmp_path, toy_root, "--recipe", "paper")
    assert config == TrainConfig() and RECIPES["paper"] == {}
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "By default the CPU recipe" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["segment", "eval-seg"])
def test_all_pieces_network_edges_and_whole_frame_turn_their_step_off(command, model_file, toy_root,
                                                                       tmp_path, monkeypatch, capsys):
    """The flags reach the segmenter: without them the region, the edge step and the window are on, each
    flag turns its own off."""
    import snaketrack.training.segmenter as segmenter

    seen = []
    real = segmenter.load_segmenter

    def spy(*args, **kwargs):
        seen.append((kwargs["region"], kwargs["edges"], kwargs["window"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(segmenter, "load_segmenter", spy)
    for k, flag in enumerate(([], ["--all-pieces"], ["--network-edges"], ["--whole-frame"])):
        extra = ["--out", str(tmp_path / f"o{k}")] if command == "segment" else ["--every", "12", "--json"]
        assert main([command, toy_root, "--model", str(model_file), *flag, *extra]) == 0
    assert seen == [(True, True, True), (False, True, True), (True, False, True), (True, True, False)]


def test_the_segmenter_decides_its_masks_edges_by_colour():
    """A network whose mask lies one pixel low on a drawn robot (ground taken in below it, its top rim left
    out): the masks' edge steps move it back (the colour mix, then the snap to the frame's edge);
    ``edges=False`` returns the network's mask as it is."""
    from drawn_robot import supersampled_snake

    from snaketrack.mask_edges import snap_edges, unmix_edges
    from snaketrack.masks import mask_iou
    from snaketrack.training.segmenter import Segmenter

    img, truth = supersampled_snake(3)
    h, w = truth.shape
    low = np.roll(truth, 1, axis=0)
    cfg = SegmenterConfig(encoder="resnet18", input_size=(h, w), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))

    def network(x):
        logits = np.full((x.shape[0], 1, x.shape[2], x.shape[3]), -10.0, np.float32)
        logits[:, 0, :h, :w][:, low] = 10.0
        return logits

    torch.manual_seed(0)
    model = build_model(cfg)
    raw = Segmenter(model, cfg, scale=1.0, flips=1, network=network, edges=False).predict(img)
    np.testing.assert_array_equal(raw, low)
    seg = Segmenter(model, cfg, scale=1.0, flips=1, network=network)
    fixed = seg.predict(img)
    assert mask_iou(fixed, truth) > mask_iou(raw, truth) + 0.1 and mask_iou(fixed, truth) > 0.93
    np.testing.assert_array_equal(fixed, snap_edges(img, unmix_edges(img, raw)))
    np.testing.assert_array_equal(seg.predict_batch([img, img])[1], fixed)


def test_a_budget_that_leaves_few_epochs_is_told(monkeypatch, tmp_path, toy_root):
    import snaketrack.training.train as train_module
    from snaketrack.errors import SnaketrackWarning

    def fake_train(datasets, out, config, epochs=1, device="auto"):
        return SimpleNamespace(selection={}, best_val_iou=0.0, epochs_done=epochs, stopped_by_time=True,
                               paths={"model": out})

    monkeypatch.setattr(train_module, "train", fake_train)
    with pytest.warns(SnaketrackWarning, match="stopped after 1 epoch of its 6-minute budget"):
        assert main(["train", toy_root, "--out", str(tmp_path / "m.pt"), "--minutes", "6"]) == 0
    monkeypatch.setattr(train_module, "train", lambda d, o, c, device="auto": fake_train(d, o, c, epochs=29))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SnaketrackWarning)
        assert main(["train", toy_root, "--out", str(tmp_path / "m.pt")]) == 0
