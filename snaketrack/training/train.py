"""Train a DeepLabV3+ segmenter on labelled dataset folders.

Defaults follow the seed (§IV-A): Adam, learning rate 1e-4 decayed ×0.1 at
epoch 10, 20 epochs, batch 8. The loss, which the seed does not give, is
binary cross-entropy plus soft Dice on the robot channel (Dice keeps a
thin robot that covers a few percent of the image from being drowned by
background).

Outputs, beside ``out`` (the best model by validation IoU, a model file
of :mod:`~snaketrack.training.model`):

- ``<stem>.last.pt``: the last checkpoint (model, optimiser, scheduler,
  epoch, history); training resumes from it when run again on the same
  ``out`` with the same encoder and input size;
- ``<stem>.log.csv``: one row an epoch (``epoch, lr, train_loss,
  val_loss, val_iou, seconds``), flushed as it goes;
- ``<stem>.plot.png``: loss and IoU per epoch.
"""
from __future__ import annotations

import io
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from snaketrack.errors import FileFormatError, InputError
from snaketrack.io import CsvAppender, atomic_write_bytes, write_json
from snaketrack.training.data import SegmentationData
from snaketrack.training.model import SegmenterConfig, build_model, model_bytes

LOG_COLUMNS = ["epoch", "lr", "train_loss", "val_loss", "val_iou", "seconds"]


@dataclass(frozen=True)
class TrainConfig:
    """Training settings (seed defaults).

    encoder, input_size (height, width) [pixels]: the network; epochs,
    batch_size, lr, lr_step_epoch, lr_gamma: the schedule (lr × gamma from
    epoch ``lr_step_epoch``, counted from 0); val_fraction, block: the
    split (see :mod:`~snaketrack.training.data`); max_steps_per_epoch: cap
    on batches an epoch (None: all); crop_size: (height, width) training
    crops at the input resolution (None: whole frames; crops make CPU
    training affordable, see :func:`~snaketrack.training.data.robot_crop`);
    max_val_frames: evenly spaced cap on validation frames; time_limit_s: stop after the epoch in
    which this many seconds of this run passed [s]; encoder_weights: a
    local encoder weights file or None; threads: torch CPU threads (None:
    torch's default; 1 is fastest on a machine shared with other jobs);
    seed: shuffling, augmentation, init.
    """

    encoder: str = "resnet18"
    input_size: tuple[int, int] = (360, 640)
    epochs: int = 20
    batch_size: int = 8
    lr: float = 1e-4
    lr_step_epoch: int = 10
    lr_gamma: float = 0.1
    val_fraction: float = 0.15
    block: int = 20
    max_steps_per_epoch: Optional[int] = None
    crop_size: Optional[tuple[int, int]] = None
    max_val_frames: Optional[int] = None
    time_limit_s: Optional[float] = None
    encoder_weights: Optional[str] = None
    augment: bool = True
    threads: Optional[int] = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"--{name.replace('_', '-')} {getattr(self, name)}: expected a positive integer")
        if not self.lr > 0:
            raise InputError(f"--lr {self.lr}: expected a positive learning rate")


@dataclass(frozen=True)
class TrainResult:
    """best_val_iou: the saved model's validation IoU; epochs_done: epochs finished in total;
    history: one dict a finished epoch (the CSV's rows); paths: the files written."""

    best_val_iou: float
    epochs_done: int
    history: list[dict[str, float]]
    paths: dict[str, str] = field(default_factory=dict)
    stopped_by_time: bool = False


def side_paths(out: str | os.PathLike) -> dict[str, Path]:
    """The files a training run writes for model file ``out``."""
    out = Path(out)
    stem = out.name[:-3] if out.name.endswith(".pt") else out.name
    return {"model": out, "last": out.with_name(stem + ".last.pt"), "log": out.with_name(stem + ".log.csv"),
            "plot": out.with_name(stem + ".plot.png")}


def seg_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """BCE-with-logits + soft Dice, both on (B, 1, H, W)."""
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
    p = torch.sigmoid(logits)
    inter = (p * target).sum(dim=(1, 2, 3))
    dice = 1 - (2 * inter + 1) / (p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3)) + 1)
    return bce + dice.mean()


def batch_iou(logits: torch.Tensor, target: torch.Tensor, size: tuple[int, int]) -> list[float]:
    """Per-image IoU of ``logits > 0`` vs ``target > 0.5`` inside the unpadded (height, width)."""
    h, w = size
    p = (logits[:, 0, :h, :w] > 0)
    t = (target[:, 0, :h, :w] > 0.5)
    inter = (p & t).sum(dim=(1, 2)).double()
    union = (p | t).sum(dim=(1, 2)).double()
    return torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union)).tolist()


def _lr_at(cfg: TrainConfig, epoch: int) -> float:
    return cfg.lr * (cfg.lr_gamma if epoch >= cfg.lr_step_epoch else 1.0)


def train(roots: Sequence[str | os.PathLike], out: str | os.PathLike, config: TrainConfig = TrainConfig(),
          progress: bool = True) -> TrainResult:
    """Train on the dataset folders ``roots``; write the best model to ``out`` (see module doc)."""
    from tqdm import tqdm

    paths = side_paths(out)
    roots = [str(r) for r in roots]
    seg_cfg = SegmenterConfig(encoder=config.encoder, input_size=tuple(config.input_size))
    if config.threads is not None:
        torch.set_num_threads(int(config.threads))
    torch.manual_seed(config.seed)
    model = build_model(seg_cfg, config.encoder_weights)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    start_epoch, best, history = 0, -1.0, []
    if paths["last"].is_file():
        ck = torch.load(paths["last"], map_location="cpu", weights_only=False)
        old = ck.get("config", {})
        if old.get("encoder") != config.encoder or tuple(old.get("input_size", ())) != tuple(config.input_size):
            raise InputError(f"{paths['last']}: a run with --encoder {old.get('encoder')} --input-size "
                             f"{'x'.join(map(str, old.get('input_size', ())))} is in progress there; "
                             "use the same settings to resume or choose a new --out")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        torch.set_rng_state(ck["torch_rng"])
        start_epoch, best, history = int(ck["epoch"]) + 1, float(ck["best_val_iou"]), list(ck["history"])

    train_ds = SegmentationData(roots, seg_cfg.input_size, "train", config.val_fraction, config.block,
                                config.seed, seg_cfg.mean, seg_cfg.std, augment_train=config.augment,
                                crop_size=config.crop_size)
    val_ds = SegmentationData(roots, seg_cfg.input_size, "val", config.val_fraction, config.block,
                              config.seed, seg_cfg.mean, seg_cfg.std, max_frames=config.max_val_frames)
    if len(train_ds) == 0:
        raise InputError(f"{', '.join(roots)}: no unflagged frames to train on")
    if len(val_ds) == 0:  # too few frames to hold any out: score on the training frames, unaugmented
        val_ds = SegmentationData(roots, seg_cfg.input_size, "all", seed=config.seed, mean=seg_cfg.mean,
                                  std=seg_cfg.std, max_frames=config.max_val_frames)
    t_run = time.perf_counter()
    stopped = False
    log = CsvAppender(paths["log"], LOG_COLUMNS, resume=start_epoch > 0)
    try:
        for epoch in range(start_epoch, config.epochs):
            t0 = time.perf_counter()
            for g in opt.param_groups:
                g["lr"] = _lr_at(config, epoch)
            train_ds.set_epoch(epoch)
            gen = torch.Generator().manual_seed(config.seed * 100003 + epoch)  # batch order: f(seed, epoch)
            loader = torch.utils.data.DataLoader(train_ds, batch_size=config.batch_size, shuffle=True,
                                                 generator=gen, num_workers=0, drop_last=len(train_ds) > config.batch_size)
            n_steps = len(loader) if config.max_steps_per_epoch is None else min(len(loader), config.max_steps_per_epoch)
            model.train()
            losses = []
            bar = tqdm(total=n_steps, desc=f"epoch {epoch + 1}/{config.epochs}", unit="batch", disable=not progress,
                       leave=False)
            for step, (x, y) in enumerate(loader):
                if step >= n_steps:
                    break
                opt.zero_grad(set_to_none=True)
                loss = seg_loss(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
                if config.time_limit_s is not None and time.perf_counter() - t_run > config.time_limit_s:
                    stopped = True
                    break
            bar.close()
            val_loss, val_iou = evaluate_loss_iou(model, val_ds, config.batch_size, seg_cfg.input_size)
            row = {"epoch": epoch + 1, "lr": _lr_at(config, epoch), "train_loss": float(np.mean(losses)),
                   "val_loss": val_loss, "val_iou": val_iou, "seconds": time.perf_counter() - t0}
            history.append(row)
            log.write(row)
            extra = {"epoch": epoch + 1, "val_iou": val_iou, "datasets": roots, "train": _cfg_dict(config)}
            if val_iou > best:
                best = val_iou
                atomic_write_bytes(paths["model"], model_bytes(model, seg_cfg, extra))
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                        "best_val_iou": best, "history": history, "config": _cfg_dict(config),
                        "torch_rng": torch.get_rng_state()}, buf)
            atomic_write_bytes(paths["last"], buf.getvalue())
            plot_history(history, paths["plot"])
            if progress:
                tqdm.write(f"epoch {epoch + 1}: train loss {row['train_loss']:.4f}  val loss {val_loss:.4f}  "
                           f"val IoU {val_iou:.4f}  ({row['seconds']:.0f} s)")
            if stopped:
                break
    finally:
        log.close()
    return TrainResult(best, len(history), history, {k: str(v) for k, v in paths.items()}, stopped)


def _cfg_dict(config: TrainConfig) -> dict[str, Any]:
    d = asdict(config)
    d["input_size"] = list(config.input_size)
    d["crop_size"] = None if config.crop_size is None else list(config.crop_size)
    return d


@torch.no_grad()
def evaluate_loss_iou(model: torch.nn.Module, ds: SegmentationData, batch_size: int,
                      size: tuple[int, int]) -> tuple[float, float]:
    """Mean loss and mean per-image IoU of ``model`` on ``ds`` (at the network's input size)."""
    model.eval()
    losses, ious = [], []
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=0)
    for x, y in loader:
        logits = model(x)
        losses.append(float(seg_loss(logits, y)) * len(x))
        ious.extend(batch_iou(logits, y, size))
    n = max(len(ious), 1)
    return sum(losses) / n, float(np.mean(ious)) if ious else 0.0


def plot_history(history: list[dict[str, float]], path: str | os.PathLike) -> None:
    """Loss (train, val) and validation IoU per epoch, as a PNG written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [h["epoch"] for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    a1.plot(ep, [h["train_loss"] for h in history], "o-", label="train")
    a1.plot(ep, [h["val_loss"] for h in history], "s-", label="validation")
    a1.set_xlabel("epoch"); a1.set_ylabel("loss (BCE + Dice)"); a1.legend()
    a2.plot(ep, [h["val_iou"] for h in history], "o-", color="C2")
    a2.set_xlabel("epoch"); a2.set_ylabel("validation IoU"); a2.set_ylim(0, 1)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
