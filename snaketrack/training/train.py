"""Train a DeepLabV3+ segmenter on labelled dataset folders.

Defaults follow the seed (§IV-A): Adam, learning rate 1e-4 decayed ×0.1 at
epoch 10, 20 epochs, batch 8. The loss, which the seed does not give, is
binary cross-entropy plus soft Dice on the robot channel (Dice keeps a
thin robot that covers a few percent of the image from being drowned by
background); soft IoU and the Lovász hinge are options (:func:`seg_loss`),
as are cosine and one-cycle schedules (:func:`lr_at`). The probability
threshold is chosen on the validation split and stored in the model file.
The 20-minute CPU recipe and its measurements: docs/segmenter-training.md.

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

LOG_COLUMNS = ["epoch", "lr", "train_loss", "val_loss", "val_iou", "threshold", "val_iou_at_threshold", "seconds"]
LOSS_TERMS = ("bce", "dice", "iou", "lovasz")
SCHEDULES = ("step", "cosine", "onecycle")
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.2, 0.81, 0.05))


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
    max_val_frames: evenly spaced cap on validation frames; time_limit_s: stop once this many
    seconds of this run passed [s] (mid-epoch; that epoch is still validated and saved); encoder_weights: a
    local encoder weights file or None; threads: torch CPU threads (None:
    torch's default; 1 is fastest on a machine shared with other jobs);
    seed: shuffling, augmentation, init; loss: terms joined by ``+``
    from :data:`LOSS_TERMS` (see :func:`seg_loss`); pos_weight: BCE
    weight of robot pixels; schedule: ``step`` (the seed's: × lr_gamma
    from lr_step_epoch), ``cosine`` (3 % linear warm-up, then cosine to 0)
    or ``onecycle`` (30 % warm-up from lr/25, then cosine to 0); the
    cosine and onecycle progress is the larger of the step fraction and
    the time fraction of ``time_limit_s``, so a time-limited run still
    ends annealed; p_robot: share of training crops centred near the
    robot; architecture: ``DeepLabV3Plus`` or ``Unet``; pick_threshold:
    choose the probability threshold on the validation split (else 0.5).
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
    loss: str = "bce+dice"
    pos_weight: float = 1.0
    schedule: str = "step"
    p_robot: float = 0.7
    architecture: str = "DeepLabV3Plus"
    pick_threshold: bool = True

    def __post_init__(self) -> None:
        terms = str(self.loss).split("+")
        if not terms or any(t not in LOSS_TERMS for t in terms):
            raise InputError(f"--loss {self.loss!r}: expected terms from {', '.join(LOSS_TERMS)} joined by '+'")
        if self.schedule not in SCHEDULES:
            raise InputError(f"--schedule {self.schedule!r}: expected one of {', '.join(SCHEDULES)}")
        if not 0.0 <= float(self.p_robot) <= 1.0:
            raise InputError(f"--p-robot {self.p_robot}: expected a fraction in [0, 1]")
        if not self.pos_weight > 0:
            raise InputError(f"--pos-weight {self.pos_weight}: expected a positive weight")
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


def lovasz_hinge(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Lovász hinge (Berman et al. 2018) per image, averaged: a convex surrogate of 1 − IoU.

    logits, target: (B, 1, H, W), target in {0, 1}. For each image the hinge
    errors ``1 − logit·sign`` are sorted and weighted by the steps of the
    Jaccard loss along that order (the Lovász extension of 1 − IoU).
    """
    losses = []
    for lg, t in zip(logits.flatten(1), target.flatten(1)):
        errors = 1.0 - lg * (2.0 * t - 1.0)
        errors_sorted, perm = torch.sort(errors, descending=True)
        gt = t[perm]
        gts = gt.sum()
        inter = gts - gt.cumsum(0)
        union = gts + (1.0 - gt).cumsum(0)
        jac = 1.0 - inter / union
        grad = torch.cat([jac[:1], jac[1:] - jac[:-1]])
        losses.append(torch.dot(torch.relu(errors_sorted), grad))
    return torch.stack(losses).mean()


def seg_loss(logits: torch.Tensor, target: torch.Tensor, loss: str = "bce+dice",
             pos_weight: float = 1.0) -> torch.Tensor:
    """Sum of the terms named in ``loss`` on (B, 1, H, W) logits and {0, 1} targets.

    ``bce``: binary cross-entropy with logits, robot pixels weighted by
    ``pos_weight``; ``dice``: 1 − soft Dice (+1 smoothing) per image;
    ``iou``: 1 − soft IoU, (I + 1) / (ΣP + ΣT − I + 1) per image;
    ``lovasz``: :func:`lovasz_hinge`. Per-image terms are averaged.
    """
    total = logits.new_zeros(())
    p = torch.sigmoid(logits) if ("dice" in loss or "iou" in loss) else None
    for term in loss.split("+"):
        if term == "bce":
            pw = None if pos_weight == 1.0 else logits.new_tensor(float(pos_weight))
            total = total + torch.nn.functional.binary_cross_entropy_with_logits(logits, target, pos_weight=pw)
        elif term in ("dice", "iou"):
            inter = (p * target).sum(dim=(1, 2, 3))
            sp, st = p.sum(dim=(1, 2, 3)), target.sum(dim=(1, 2, 3))
            if term == "dice":
                total = total + (1 - (2 * inter + 1) / (sp + st + 1)).mean()
            else:
                total = total + (1 - (inter + 1) / (sp + st - inter + 1)).mean()
        elif term == "lovasz":
            total = total + lovasz_hinge(logits, target)
        else:
            raise InputError(f"loss term {term!r}: expected one of {', '.join(LOSS_TERMS)}")
    return total


def batch_iou(logits: torch.Tensor, target: torch.Tensor, size: tuple[int, int]) -> list[float]:
    """Per-image IoU of ``logits > 0`` vs ``target > 0.5`` inside the unpadded (height, width)."""
    h, w = size
    p = (logits[:, 0, :h, :w] > 0)
    t = (target[:, 0, :h, :w] > 0.5)
    inter = (p & t).sum(dim=(1, 2)).double()
    union = (p | t).sum(dim=(1, 2)).double()
    return torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union)).tolist()


def lr_at(cfg: TrainConfig, epoch: int, progress: float = 0.0) -> float:
    """Learning rate in ``epoch`` (step schedule) or at ``progress`` ∈ [0, 1] of the run (cosine, onecycle)."""
    if cfg.schedule == "step":
        return cfg.lr * (cfg.lr_gamma if epoch >= cfg.lr_step_epoch else 1.0)
    f = min(max(float(progress), 0.0), 1.0)
    warm = 0.03 if cfg.schedule == "cosine" else 0.3
    lo = 0.0 if cfg.schedule == "cosine" else 1.0 / 25.0
    if f < warm:
        return cfg.lr * (lo + (1 - lo) * (f / warm))
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * (f - warm) / (1 - warm)))


def train(roots: Sequence[str | os.PathLike], out: str | os.PathLike, config: TrainConfig = TrainConfig(),
          progress: bool = True) -> TrainResult:
    """Train on the dataset folders ``roots``; write the best model to ``out`` (see module doc)."""
    from tqdm import tqdm

    paths = side_paths(out)
    roots = [str(r) for r in roots]
    seg_cfg = SegmenterConfig(encoder=config.encoder, input_size=tuple(config.input_size),
                              architecture=config.architecture)
    if config.threads is not None:
        torch.set_num_threads(int(config.threads))
    torch.manual_seed(config.seed)
    model = build_model(seg_cfg, config.encoder_weights)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    start_epoch, best, history, elapsed0, global_step = 0, -1.0, [], 0.0, 0
    if paths["last"].is_file():
        ck = torch.load(paths["last"], map_location="cpu", weights_only=False)
        old = ck.get("config", {})
        if (old.get("encoder") != config.encoder or tuple(old.get("input_size", ())) != tuple(config.input_size)
                or old.get("architecture", "DeepLabV3Plus") != config.architecture):
            raise InputError(f"{paths['last']}: a run with --encoder {old.get('encoder')} --input-size "
                             f"{'x'.join(map(str, old.get('input_size', ())))} is in progress there; "
                             "use the same settings to resume or choose a new --out")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        torch.set_rng_state(ck["torch_rng"])
        start_epoch, best, history = int(ck["epoch"]) + 1, float(ck["best_val_iou"]), list(ck["history"])
        elapsed0, global_step = float(ck.get("elapsed_s", 0.0)), int(ck.get("global_step", 0))

    train_ds = SegmentationData(roots, seg_cfg.input_size, "train", config.val_fraction, config.block,
                                config.seed, seg_cfg.mean, seg_cfg.std, augment_train=config.augment,
                                crop_size=config.crop_size, p_robot=config.p_robot)
    val_ds = SegmentationData(roots, seg_cfg.input_size, "val", config.val_fraction, config.block,
                              config.seed, seg_cfg.mean, seg_cfg.std, max_frames=config.max_val_frames)
    if len(train_ds) == 0:
        raise InputError(f"{', '.join(roots)}: no unflagged frames to train on")
    if len(val_ds) == 0:  # too few frames to hold any out: score on the training frames, unaugmented
        val_ds = SegmentationData(roots, seg_cfg.input_size, "all", seed=config.seed, mean=seg_cfg.mean,
                                  std=seg_cfg.std, max_frames=config.max_val_frames)
    n_batches = len(train_ds) // config.batch_size if len(train_ds) > config.batch_size else 1
    steps_per_epoch = n_batches if config.max_steps_per_epoch is None else min(n_batches, config.max_steps_per_epoch)
    total_steps = max(config.epochs * steps_per_epoch, 1)
    t_run = time.perf_counter()

    def progress_now() -> float:
        f = global_step / total_steps
        if config.time_limit_s is not None:
            f = max(f, (elapsed0 + time.perf_counter() - t_run) / config.time_limit_s)
        return f

    stopped = False
    log = CsvAppender(paths["log"], LOG_COLUMNS, resume=start_epoch > 0)
    try:
        for epoch in range(start_epoch, config.epochs):
            t0 = time.perf_counter()
            train_ds.set_epoch(epoch)
            gen = torch.Generator().manual_seed(config.seed * 100003 + epoch)  # batch order: f(seed, epoch)
            loader = torch.utils.data.DataLoader(train_ds, batch_size=config.batch_size, shuffle=True,
                                                 generator=gen, num_workers=0, drop_last=len(train_ds) > config.batch_size)
            model.train()
            losses, lrs = [], []
            bar = tqdm(total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config.epochs}", unit="batch",
                       disable=not progress, leave=False)
            for step, (x, y) in enumerate(loader):
                if step >= steps_per_epoch:
                    break
                lr = lr_at(config, epoch, progress_now())
                for g in opt.param_groups:
                    g["lr"] = lr
                lrs.append(lr)
                opt.zero_grad(set_to_none=True)
                loss = seg_loss(model(x), y, config.loss, config.pos_weight)
                loss.backward()
                opt.step()
                global_step += 1
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}", lr=f"{lr:.2g}")
                if config.time_limit_s is not None and time.perf_counter() - t_run > config.time_limit_s:
                    stopped = True
                    break
            bar.close()
            val = validate(model, val_ds, config.batch_size, seg_cfg.input_size, config.loss, config.pos_weight,
                           THRESHOLDS if config.pick_threshold else (0.5,))
            row = {"epoch": epoch + 1, "lr": float(np.mean(lrs)) if lrs else lr_at(config, epoch, progress_now()),
                   "train_loss": float(np.mean(losses)) if losses else float("nan"),
                   "val_loss": val["loss"], "val_iou": val["iou"], "threshold": val["threshold"],
                   "val_iou_at_threshold": val["iou_at_threshold"], "seconds": time.perf_counter() - t0}
            history.append(row)
            log.write(row)
            extra = {"epoch": epoch + 1, "val_iou": val["iou_at_threshold"], "val_iou_at_0.5": val["iou"],
                     "threshold": val["threshold"], "datasets": roots, "train": _cfg_dict(config)}
            if val["iou_at_threshold"] > best:
                best = val["iou_at_threshold"]
                atomic_write_bytes(paths["model"], model_bytes(model, replace(seg_cfg, threshold=val["threshold"]),
                                                               extra))
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                        "best_val_iou": best, "history": history, "config": _cfg_dict(config),
                        "torch_rng": torch.get_rng_state(), "global_step": global_step,
                        "elapsed_s": elapsed0 + time.perf_counter() - t_run}, buf)
            atomic_write_bytes(paths["last"], buf.getvalue())
            plot_history(history, paths["plot"])
            if progress:
                tqdm.write(f"epoch {epoch + 1}: train loss {row['train_loss']:.4f}  val loss {val['loss']:.4f}  "
                           f"val IoU {val['iou']:.4f} (at {val['threshold']:.2f}: {val['iou_at_threshold']:.4f})  "
                           f"({row['seconds']:.0f} s)")
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
def validate(model: torch.nn.Module, ds: SegmentationData, batch_size: int, size: tuple[int, int],
             loss: str = "bce+dice", pos_weight: float = 1.0,
             thresholds: Sequence[float] = (0.5,)) -> dict[str, float]:
    """Mean loss, mean per-image IoU at probability 0.5 (``iou``), and the threshold among ``thresholds``
    with the highest mean IoU (``threshold``, ``iou_at_threshold``; ties go to the one nearest 0.5)."""
    model.eval()
    losses, n = 0.0, 0
    ious = {float(t): [] for t in thresholds}
    ious.setdefault(0.5, [])
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=0)
    for x, y in loader:
        logits = model(x)
        losses += float(seg_loss(logits, y, loss, pos_weight)) * len(x)
        n += len(x)
        for t in ious:
            ious[t].extend(batch_iou(logits - math.log(t / (1 - t)), y, size))
    mean = {t: float(np.mean(v)) if v else 0.0 for t, v in ious.items()}
    best_t = max(sorted(mean, key=lambda t: abs(t - 0.5)), key=lambda t: mean[t]) if thresholds else 0.5
    return {"loss": losses / max(n, 1), "iou": mean[0.5], "threshold": best_t, "iou_at_threshold": mean[best_t]}


def evaluate_loss_iou(model: torch.nn.Module, ds: SegmentationData, batch_size: int,
                      size: tuple[int, int]) -> tuple[float, float]:
    """Mean loss (BCE + Dice) and mean per-image IoU at probability 0.5 of ``model`` on ``ds``."""
    v = validate(model, ds, batch_size, size)
    return v["loss"], v["iou"]


def plot_history(history: list[dict[str, float]], path: str | os.PathLike) -> None:
    """Loss (train, val) and validation IoU per epoch, as a PNG written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [h["epoch"] for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    a1.plot(ep, [h["train_loss"] for h in history], "o-", label="train")
    a1.plot(ep, [h["val_loss"] for h in history], "s-", label="validation")
    a1.set_xlabel("epoch"); a1.set_ylabel("loss"); a1.legend()
    a2.plot(ep, [h["val_iou"] for h in history], "o-", color="C2")
    a2.set_xlabel("epoch"); a2.set_ylabel("validation IoU"); a2.set_ylim(0, 1)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
