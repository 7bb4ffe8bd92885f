"""Short training runs on a toy video: IoU rises, resume equals an uninterrupted run."""
import csv

import numpy as np
import pytest
import torch

from snaketrack.training.data import SegmentationData
from snaketrack.training.model import SegmenterConfig, build_model, load_model
import snaketrack.training.train as train_module
from snaketrack.training.train import TrainConfig, evaluate_loss_iou, side_paths, train

CFG = dict(encoder="resnet18", input_size=(96, 128), crop_size=(64, 64), batch_size=4, lr=1e-3,
           max_steps_per_epoch=6, block=4, val_fraction=0.25, max_val_frames=6, threads=1, seed=0)


def test_validation_iou_rises(tmp_path, toy_root):
    cfg = TrainConfig(epochs=3, lr_step_epoch=10, **CFG)
    torch.manual_seed(cfg.seed)  # the same initial weights train() starts from
    model0 = build_model(SegmenterConfig(encoder=cfg.encoder, input_size=cfg.input_size))
    val = SegmentationData([toy_root], cfg.input_size, "val", cfg.val_fraction, cfg.block, cfg.seed,
                           max_frames=cfg.max_val_frames)
    _, iou0 = evaluate_loss_iou(model0, val, 4, cfg.input_size)
    res = train([toy_root], tmp_path / "m.pt", cfg, progress=False)
    assert res.epochs_done == 3
    assert res.best_val_iou > iou0 + 0.2, (iou0, [h["val_iou"] for h in res.history])
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    model, config, extra = load_model(tmp_path / "m.pt")  # the saved model is the one chosen on validation
    assert extra["best_epoch_val_iou"] == pytest.approx(res.best_val_iou)
    assert extra["epoch"] == res.selection["epoch"] and config.scale == res.selection["scale"]
    assert extra["val_iou"] >= res.best_val_iou - 0.05   # the final choice re-scores at the frames' own size
    paths = side_paths(tmp_path / "m.pt")
    assert paths["plot"].stat().st_size > 1000
    with open(paths["log"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]


@pytest.mark.parametrize("schedule", ["step", "cosine"])
def test_resume_continues_to_the_same_weights(tmp_path, toy_root, schedule, monkeypatch):
    full = TrainConfig(epochs=2, lr_step_epoch=1, schedule=schedule, **dict(CFG, max_steps_per_epoch=2))
    ref = train([toy_root], tmp_path / "ref.pt", full, progress=False)

    def interrupt(*a, **k):  # called right after epoch 1's checkpoint is written
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "plot_history", interrupt)
    with pytest.raises(KeyboardInterrupt):
        train([toy_root], tmp_path / "run.pt", full, progress=False)
    monkeypatch.undo()
    res = train([toy_root], tmp_path / "run.pt", full, progress=False)
    assert res.epochs_done == 2
    assert [h["val_iou"] for h in res.history] == pytest.approx([h["val_iou"] for h in ref.history])
    a = torch.load(side_paths(tmp_path / "run.pt")["last"], weights_only=False)["model"]
    b = torch.load(side_paths(tmp_path / "ref.pt")["last"], weights_only=False)["model"]
    for k in a:
        assert torch.allclose(a[k].float(), b[k].float(), atol=1e-6), k
    with open(side_paths(tmp_path / "run.pt")["log"], newline="") as f:
        assert [int(r["epoch"]) for r in csv.DictReader(f)] == [1, 2]
