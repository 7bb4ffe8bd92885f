"""Train a DeepLabV3+ segmenter on labelled dataset folders.

Defaults follow the seed (§IV-A): Adam, learning rate 1e-4 decayed ×0.1 at
epoch 10, 20 epochs, batch 8. The loss, which the seed does not give, is
binary cross-entropy plus soft Dice on the robot channel (Dice keeps a
thin robot that covers a few percent of the image from being drowned by
background); soft IoU and the Lovász hinge are options (:func:`seg_loss`),
as are cosine and one-cycle schedules (:func:`lr_at`) and ignoring a
thin band at the labels' edge (``ignore_edge``).

Every choice the model file carries is made on the validation split,
against its labels (:func:`select_inference`): each epoch is scored at the
trained scale over probability thresholds, and the best epoch is kept;
when training ends, the kept epoch and the last one are scored at each
inference scale of ``scales`` and each threshold, on the validation frames
at their own size (as ``eval-seg`` scores), and the best (checkpoint,
scale, threshold) is written into the model file; then that checkpoint at
that scale is scored with each test-time flip count of ``flips`` (the
probabilities of flipped copies averaged), each threshold again. Scores
within ``tie_tolerance`` of the best count as ties, which go to the
cheaper option (the smaller scale, then fewer flips). A time-limited run keeps back the time this
final choice takes, so the limit covers it.

With ``average_from`` set, the weights are also averaged with equal
weight at every step from that fraction of the run on (stochastic weight
averaging, Izmailov et al. 2018, whose flatter minima generalise better
out of domain: SWAD, Cha et al. 2021); the batch-norm statistics of the
average are then recomputed over ``bn_batches`` training batches, and
the averaged weights are the final checkpoint: the final choice picks
only scale, flips and threshold for them. The 20-minute CPU recipe and
its measurements: docs/segmenter-training.md and docs/notebook/segmenter-training.md.

Outputs, beside ``out`` (the chosen model, a model file of
:mod:`~snaketrack.training.model`; while training runs, the best epoch
by validation IoU at the trained scale):

- ``<stem>.last.pt``: the last checkpoint (model, optimiser, scheduler,
  epoch, history); training resumes from it when run again on the same
  ``out`` with the same encoder and input size;
- ``<stem>.log.csv``: one row an epoch (``epoch, lr, train_loss,
  val_loss, val_iou, threshold, val_iou_at_threshold, seconds``),
  flushed as it goes;
- ``<stem>.select.csv``: the final choice's table (``candidate, epoch,
  scale, flips, threshold, val_iou``; the chosen row has ``chosen`` 1);
- ``<stem>.plot.png``: loss and IoU per epoch.
"""
from __future__ import annotations

import io
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

from snaketrack.errors import FileFormatError, InputError
from snaketrack.io import CsvAppender, atomic_write_bytes
from snaketrack.training.data import SegmentationData
from snaketrack.training.model import (
    FLIPS, SegmenterConfig, build_model, check_precision, load_model, model_bytes, precision_context,
)

LOG_COLUMNS = ["epoch", "lr", "train_loss", "val_loss", "val_iou", "threshold", "val_iou_at_threshold", "seconds"]
LOSS_TERMS = ("bce", "dice", "iou", "lovasz")
SCHEDULES = ("step", "cosine", "onecycle")
RESERVE_MARGIN = 1.25  # time kept back for the final choice, over its estimate from the last validation
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.2, 0.81, 0.05))
SCALES = (1.0, 1.25, 1.5)
SELECT_COLUMNS = ["candidate", "epoch", "scale", "flips", "threshold", "val_iou", "chosen"]


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
    max_val_frames: evenly spaced cap on validation frames; time_limit_s: the run's time [s],
    final choice included: training stops (mid-epoch; that epoch is still validated and saved) once
    the time passed plus the time kept back for the last validation and the final choice (estimated
    from the last validation's time) reaches it; encoder_weights: a
    local encoder weights file or None; threads: torch and OpenCV CPU threads (None:
    their defaults; 1 is fastest on a machine shared with other jobs);
    seed: shuffling, augmentation, init; loss: terms joined by ``+``
    from :data:`LOSS_TERMS` (see :func:`seg_loss`); pos_weight: BCE
    weight of robot pixels; schedule: ``step`` (the seed's: × lr_gamma
    from lr_step_epoch), ``cosine`` (3 % linear warm-up, then cosine to 0)
    or ``onecycle`` (30 % warm-up from lr/25, then cosine to 0); the
    cosine and onecycle progress is the larger of the step fraction and
    the time fraction of ``time_limit_s``, so a time-limited run still
    ends annealed; p_robot: share of training crops centred near the
    robot; architecture: ``DeepLabV3Plus`` or ``Unet``; pick_threshold:
    choose the probability threshold on the validation split (else 0.5);
    scales: inference scales (× input size) the final choice tries (``(1,)``:
    none but the trained one); flips: test-time flip counts the final choice
    tries at the chosen scale (1, 2, 4; ``(1,)``: none);
    select_last: let the last epoch compete with
    the best one in the final choice; tie_tolerance: validation IoUs this
    close to the best are ties, broken towards the smaller scale, then fewer flips;
    ignore_edge: pixels within this many pixels (chessboard distance) of the
    label's edge, on either side, are left out of the loss (0: none);
    ground_colour: probability of recolouring the ground, away from the
    robot, in a training sample; zoom: (low, high) of the training zoom
    (log-uniform); rotate_deg: training rotations are drawn from ± this
    [degrees] (0: none); shadow: probability of a synthetic cast shadow beside the robot
    (all three: :func:`~snaketrack.training.data.augment`);
    average_from: fraction of the run (the schedule's progress) from which
    the weights are averaged, the average being the final checkpoint (None:
    no averaging; module doc); bn_batches: training batches over which the
    average's batch-norm statistics are recomputed; precision: ``fp32`` or
    ``bf16`` (forward passes under bfloat16 autocast, loss in float32;
    :func:`~snaketrack.training.model.precision_context`), stored in the
    model file for inference.
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
    scales: tuple[float, ...] = SCALES
    flips: tuple[int, ...] = (1,)
    select_last: bool = True
    tie_tolerance: float = 0.002
    ignore_edge: int = 0
    ground_colour: float = 0.0
    zoom: tuple[float, float] = (0.7, 1.4)
    rotate_deg: float = 0.0
    shadow: float = 0.0
    average_from: Optional[float] = None
    bn_batches: int = 32
    precision: str = "fp32"

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
        scales = tuple(float(v) for v in (self.scales if isinstance(self.scales, (tuple, list)) else [self.scales]))
        if not scales or any(not 0.1 <= v <= 8.0 for v in scales):
            raise InputError(f"--scales {self.scales}: expected factors between 0.1 and 8")
        object.__setattr__(self, "scales", scales)
        flips = tuple(int(v) for v in (self.flips if isinstance(self.flips, (tuple, list)) else [self.flips]))
        if any(v not in FLIPS for v in flips):
            raise InputError(f"--flips {self.flips}: expected counts from {', '.join(map(str, FLIPS))}")
        object.__setattr__(self, "flips", tuple(sorted(set(flips) | {1})))
        if not self.tie_tolerance >= 0:
            raise InputError(f"--tie-tolerance {self.tie_tolerance}: expected a non-negative IoU difference")
        if int(self.ignore_edge) < 0 or int(self.ignore_edge) != self.ignore_edge:
            raise InputError(f"--ignore-edge {self.ignore_edge}: expected a non-negative number of pixels")
        if int(self.ignore_edge) > 0 and "lovasz" in terms:
            raise InputError("--ignore-edge with --loss lovasz: the Lovász hinge cannot leave pixels out")
        if not 0.0 <= float(self.ground_colour) <= 1.0:
            raise InputError(f"--ground-colour {self.ground_colour}: expected a probability in [0, 1]")
        zoom = tuple(float(v) for v in self.zoom)
        if len(zoom) != 2 or not 0.05 <= zoom[0] <= zoom[1] <= 20.0:
            raise InputError(f"--zoom {self.zoom}: expected LOW,HIGH with 0.05 <= LOW <= HIGH <= 20")
        object.__setattr__(self, "zoom", zoom)
        if not 0.0 <= float(self.rotate_deg) <= 180.0:
            raise InputError(f"--rotate {self.rotate_deg}: expected degrees in [0, 180]")
        if not 0.0 <= float(self.shadow) <= 1.0:
            raise InputError(f"--shadow {self.shadow}: expected a probability in [0, 1]")
        if self.average_from is not None and not 0.0 <= float(self.average_from) < 1.0:
            raise InputError(f"--average-from {self.average_from}: expected a fraction of the run in [0, 1)")
        if int(self.bn_batches) < 1:
            raise InputError(f"--bn-batches {self.bn_batches}: expected a positive number of batches")
        check_precision(self.precision)


@dataclass(frozen=True)
class TrainResult:
    """best_val_iou: the best epoch's validation IoU at the trained scale (at its threshold);
    epochs_done: epochs finished in total; history: one dict a finished epoch (the CSV's rows);
    paths: the files written; selection: the final choice (:func:`select_inference`'s dict plus
    ``epoch``), None when no epoch was trained."""

    best_val_iou: float
    epochs_done: int
    history: list[dict[str, float]]
    paths: dict[str, str] = field(default_factory=dict)
    stopped_by_time: bool = False
    selection: Optional[dict[str, Any]] = None


def side_paths(out: str | os.PathLike) -> dict[str, Path]:
    """The files a training run writes for model file ``out``."""
    out = Path(out)
    stem = out.name[:-3] if out.name.endswith(".pt") else out.name
    return {"model": out, "last": out.with_name(stem + ".last.pt"), "log": out.with_name(stem + ".log.csv"),
            "plot": out.with_name(stem + ".plot.png"), "select": out.with_name(stem + ".select.csv")}


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


def edge_band(target: torch.Tensor, px: int) -> torch.Tensor:
    """1 where a pixel of the (B, 1, H, W) {0, 1} ``target`` is within ``px`` pixels (chessboard
    distance) of a pixel of the other class, else 0: the label's edge, ``px`` pixels each side.

    >>> t = torch.zeros(1, 1, 1, 6); t[..., 2:4] = 1
    >>> edge_band(t, 1)[0, 0, 0].tolist()
    [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    """
    if px <= 0:
        return torch.zeros_like(target)
    k = 2 * int(px) + 1
    dil = torch.nn.functional.max_pool2d(target, k, stride=1, padding=int(px))
    ero = -torch.nn.functional.max_pool2d(-target, k, stride=1, padding=int(px))
    return dil - ero


def seg_loss(logits: torch.Tensor, target: torch.Tensor, loss: str = "bce+dice",
             pos_weight: float = 1.0, ignore_edge: int = 0) -> torch.Tensor:
    """Sum of the terms named in ``loss`` on (B, 1, H, W) logits and {0, 1} targets.

    ``bce``: binary cross-entropy with logits, robot pixels weighted by
    ``pos_weight``; ``dice``: 1 − soft Dice (+1 smoothing) per image;
    ``iou``: 1 − soft IoU, (I + 1) / (ΣP + ΣT − I + 1) per image;
    ``lovasz``: :func:`lovasz_hinge`. Per-image terms are averaged.
    ``ignore_edge`` > 0 leaves the pixels of :func:`edge_band` out of every
    term (BCE is then the mean over the pixels kept).
    """
    total = logits.new_zeros(())
    p = torch.sigmoid(logits) if ("dice" in loss or "iou" in loss) else None
    w = None if ignore_edge <= 0 else 1.0 - edge_band(target, ignore_edge)
    for term in loss.split("+"):
        if term == "bce":
            pw = None if pos_weight == 1.0 else logits.new_tensor(float(pos_weight))
            if w is None:
                total = total + torch.nn.functional.binary_cross_entropy_with_logits(logits, target, pos_weight=pw)
            else:
                b = torch.nn.functional.binary_cross_entropy_with_logits(logits, target, weight=w, pos_weight=pw,
                                                                         reduction="sum")
                total = total + b / w.sum().clamp(min=1.0)
        elif term in ("dice", "iou"):
            pp, tt = (p, target) if w is None else (p * w, target * w)
            inter = (pp * tt).sum(dim=(1, 2, 3))
            sp, st = pp.sum(dim=(1, 2, 3)), tt.sum(dim=(1, 2, 3))
            if term == "dice":
                total = total + (1 - (2 * inter + 1) / (sp + st + 1)).mean()
            else:
                total = total + (1 - (inter + 1) / (sp + st - inter + 1)).mean()
        elif term == "lovasz":
            if w is not None:
                raise InputError("the Lovász hinge cannot leave edge pixels out (ignore_edge)")
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
    """Train on the dataset folders ``roots``; write the chosen model to ``out`` (see module doc)."""
    from tqdm import tqdm

    paths = side_paths(out)
    roots = [str(r) for r in roots]
    seg_cfg = SegmenterConfig(encoder=config.encoder, input_size=tuple(config.input_size),
                              architecture=config.architecture, precision=config.precision)
    if config.threads is not None:
        import cv2

        torch.set_num_threads(int(config.threads))
        cv2.setNumThreads(int(config.threads))
    torch.manual_seed(config.seed)
    model = build_model(seg_cfg, config.encoder_weights)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    avg = torch.optim.swa_utils.AveragedModel(model) if config.average_from is not None else None
    step_s: list[float] = []  # seconds a training step, for the time kept back for the batch-norm pass
    start_epoch, best, history, elapsed0, global_step, val_s = 0, -1.0, [], 0.0, 0, None
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
        if avg is not None and "avg" in ck:
            avg.load_state_dict(ck["avg"])
        torch.set_rng_state(ck["torch_rng"])
        start_epoch, best, history = int(ck["epoch"]) + 1, float(ck["best_val_iou"]), list(ck["history"])
        elapsed0, global_step = float(ck.get("elapsed_s", 0.0)), int(ck.get("global_step", 0))
        val_s = ck.get("val_s")

    train_ds = SegmentationData(roots, seg_cfg.input_size, "train", config.val_fraction, config.block,
                                config.seed, seg_cfg.mean, seg_cfg.std, augment_train=config.augment,
                                crop_size=config.crop_size, p_robot=config.p_robot,
                                ground_colour=config.ground_colour, zoom=config.zoom,
                                rotate_deg=config.rotate_deg, shadow=config.shadow)
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
    thresholds = THRESHOLDS if config.pick_threshold else (0.5,)
    n_cand = 1 if avg is not None or not config.select_last else 2
    n_bn = min(int(config.bn_batches), steps_per_epoch) if avg is not None else 0
    t_run = time.perf_counter()

    def reserve_s() -> float:
        """Time kept back for the last validation and the final choice [s] (from the last validation's time)."""
        if val_s is None:
            return 0.0
        # estimated from the batched validation at the trained scale; the final choice's larger frames
        # run slower per pixel: 20-minute runs with flips ended 6-24 s late without the margin
        choice = float(val_s) * (1.0 + n_cand * sum(s_ * s_ for s_ in config.scales)
                                 + max(config.scales) ** 2 * sum(f for f in config.flips if f > 1))
        # the batch-norm pass is forward only: 27 s for 32 batches at ~2 s a training step
        bn = n_bn * float(np.median(step_s[-50:])) / 2 if step_s else 0.0
        return RESERVE_MARGIN * (choice + bn)

    def elapsed() -> float:
        return elapsed0 + time.perf_counter() - t_run

    def out_of_time() -> bool:
        return config.time_limit_s is not None and elapsed() > config.time_limit_s - reserve_s()

    def progress_now() -> float:
        f = global_step / total_steps
        if config.time_limit_s is not None:
            f = max(f, elapsed() / max(config.time_limit_s - reserve_s(), 1e-9))
        return f

    stopped = False
    ran_epochs = 0
    log = CsvAppender(paths["log"], LOG_COLUMNS, resume=start_epoch > 0)
    try:
        for epoch in range(start_epoch, config.epochs):
            if history and out_of_time():  # a resumed run already past its time
                stopped = True
                break
            t0 = time.perf_counter()
            train_ds.set_epoch(epoch)
            loader = _train_loader(train_ds, config, epoch)
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
                ts = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                with precision_context(config.precision):
                    logits = model(x)
                loss = seg_loss(logits.float(), y, config.loss, config.pos_weight, config.ignore_edge)
                loss.backward()
                opt.step()
                if avg is not None and progress_now() >= config.average_from:
                    avg.update_parameters(model)
                step_s.append(time.perf_counter() - ts)
                global_step += 1
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}", lr=f"{lr:.2g}")
                if out_of_time():
                    stopped = True
                    break
            bar.close()
            tv = time.perf_counter()
            val = validate(model, val_ds, config.batch_size, seg_cfg.input_size, config.loss, config.pos_weight,
                           thresholds, config.ignore_edge, config.precision)
            val_s = time.perf_counter() - tv
            row = {"epoch": epoch + 1, "lr": float(np.mean(lrs)) if lrs else lr_at(config, epoch, progress_now()),
                   "train_loss": float(np.mean(losses)) if losses else float("nan"),
                   "val_loss": val["loss"], "val_iou": val["iou"], "threshold": val["threshold"],
                   "val_iou_at_threshold": val["iou_at_threshold"], "seconds": time.perf_counter() - t0}
            history.append(row)
            ran_epochs += 1
            log.write(row)
            extra = {"epoch": epoch + 1, "val_iou": val["iou_at_threshold"], "val_iou_at_0.5": val["iou"],
                     "threshold": val["threshold"], "datasets": roots, "train": _cfg_dict(config)}
            if val["iou_at_threshold"] > best:
                best = val["iou_at_threshold"]
                atomic_write_bytes(paths["model"], model_bytes(model, replace(seg_cfg, threshold=val["threshold"]),
                                                               extra))
            buf = io.BytesIO()
            ck = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                  "best_val_iou": best, "history": history, "config": _cfg_dict(config),
                  "torch_rng": torch.get_rng_state(), "global_step": global_step,
                  "elapsed_s": elapsed(), "val_s": val_s}
            if avg is not None:
                ck["avg"] = avg.state_dict()
            torch.save(ck, buf)
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
    selection = None
    if history:
        average: Optional[Callable[[], dict[str, Any]]] = None
        if avg is not None and int(avg.n_averaged) > 0:
            def average_bn() -> dict[str, Any]:
                return _average_with_bn(avg, train_ds, config, n_bn, len(history))
            average = average_bn
        selection = _final_choice(paths, model, seg_cfg, val_ds, config, thresholds, history, roots,
                                  redo=ran_epochs > 0, progress=progress, average=average)
    return TrainResult(best, len(history), history, {k: str(v) for k, v in paths.items()}, stopped, selection)


def _train_loader(train_ds: SegmentationData, config: TrainConfig, draw: int) -> torch.utils.data.DataLoader:
    """Shuffled training batches, their order a function of (seed, ``draw``): the epoch, or another
    number for a pass outside the epochs."""
    gen = torch.Generator().manual_seed(config.seed * 100003 + int(draw))
    return torch.utils.data.DataLoader(train_ds, batch_size=config.batch_size, shuffle=True, generator=gen,
                                       num_workers=0, drop_last=len(train_ds) > config.batch_size)


def _average_with_bn(avg: torch.optim.swa_utils.AveragedModel, train_ds: SegmentationData, config: TrainConfig,
                     n_batches: int, epoch: int) -> dict[str, Any]:
    """The averaged model with its batch-norm statistics recomputed over ``n_batches`` training batches
    (augmented as in training, drawn for epoch ``epoch``); a dict with ``model``, ``n_averaged``, ``bn_s``."""
    import itertools

    t0 = time.perf_counter()
    train_ds.set_epoch(epoch)
    loader = _train_loader(train_ds, config, 99991)
    torch.optim.swa_utils.update_bn(itertools.islice(loader, n_batches), avg.module)
    return {"model": avg.module.eval(), "n_averaged": int(avg.n_averaged), "bn_s": time.perf_counter() - t0}


def _final_choice(paths: dict[str, Path], last_model: torch.nn.Module, seg_cfg: SegmenterConfig,
                  val_ds: SegmentationData, config: TrainConfig, thresholds: Sequence[float],
                  history: list[dict[str, float]], roots: list[str], redo: bool, progress: bool,
                  average: Optional[Callable[[], dict[str, Any]]] = None) -> dict[str, Any]:
    """Choose checkpoint, scale and threshold on the validation frames; write the model file (module doc).
    ``average``: makes the averaged model (:func:`_average_with_bn`), run only when a choice is made."""
    best_model, _, best_extra = load_model(paths["model"])
    if "selection" in best_extra and not redo:  # a finished run opened again: its choice stands
        return best_extra["selection"]
    t0 = time.perf_counter()
    averaged = average() if average is not None else None
    best_epoch, last_epoch = int(best_extra["epoch"]), int(history[-1]["epoch"])
    if averaged is not None:  # the average is the final checkpoint: only scale, flips, threshold are chosen
        cands = [("avg", last_epoch, averaged["model"])]
    else:
        cands = [("best", best_epoch, best_model)]
        if config.select_last and last_epoch != best_epoch:
            cands.append(("last", last_epoch, last_model.eval()))
    frames = []
    for ds, i in val_ds.items:
        m = ds.mask(i)
        if m is None:
            raise FileFormatError(f"{ds.root}: frame {i} has no mask")
        frames.append((ds.frame(i), m > 0))
    sel = select_inference([(n, m) for n, _, m in cands], frames, seg_cfg, config.scales, thresholds,
                           config.tie_tolerance, config.batch_size, config.flips)
    name, epoch, chosen = cands[sel["candidate"]]
    sel.update(epoch=epoch, candidates=[{"name": n, "epoch": e} for n, e, _ in cands],
               seconds=time.perf_counter() - t0)
    if averaged is not None:
        sel.update(n_averaged=averaged["n_averaged"], bn_s=averaged["bn_s"])
    for r in sel["table"]:
        r["epoch"] = cands[r["candidate"]][1]
    extra = {"epoch": epoch, "val_iou": sel["iou"], "threshold": sel["threshold"], "scale": sel["scale"],
             "flips": sel["flips"], "checkpoint": name, "best_epoch_val_iou": float(best_extra["val_iou"]), "selection": sel,
             "datasets": roots, "train": _cfg_dict(config)}
    chosen_row = sel.pop("row")
    atomic_write_bytes(paths["model"], model_bytes(
        chosen, replace(seg_cfg, threshold=sel["threshold"], scale=sel["scale"], flips=sel["flips"]), extra))
    with CsvAppender(paths["select"], SELECT_COLUMNS, resume=False) as w:
        for r in sel["table"]:
            w.write({"candidate": cands[r["candidate"]][0], "epoch": r["epoch"], "scale": r["scale"],
                     "flips": r["flips"], "threshold": r["threshold"], "val_iou": r["iou"], "chosen": int(r is chosen_row)})
    if progress:
        print(f"chosen on validation: {name} epoch {epoch}, scale {sel['scale']:g}, flips {sel['flips']}, threshold "
              f"{sel['threshold']:.2f}: IoU {sel['iou']:.4f} ({sel['seconds']:.0f} s)", flush=True)
    return sel


def select_inference(candidates: Sequence[tuple[str, torch.nn.Module]], frames: Sequence[tuple[np.ndarray, np.ndarray]],
                     config: SegmenterConfig, scales: Sequence[float] = (1.0,),
                     thresholds: Sequence[float] = THRESHOLDS, tie_tolerance: float = 0.0,
                     batch_size: int = 4, flips: Sequence[int] = (1,)) -> dict[str, Any]:
    """The (candidate, scale, flips, threshold) with the best mean IoU on validation ``frames``.

    candidates: (name, model) pairs; frames: (RGB uint8 (H, W, 3), bool label
    mask (H, W)) at the video's own size, scored as ``eval-seg`` scores (the
    :class:`~snaketrack.training.segmenter.Segmenter` path: resize to scale ×
    input size, probability back at (H, W), mean per-frame IoU). Every
    candidate is scored at every scale without flips; then the chosen
    candidate and scale with each flip count of ``flips`` above 1 (the
    flips multiply the cost, so they are tried where they would be used).
    Rows within ``tie_tolerance`` of the best IoU are ties; among them the
    smallest scale wins (the cheapest: cost grows with its square), then
    the fewest flips, the higher IoU, the threshold nearer 0.5, the earlier
    candidate.

    Returns ``candidate`` (index), ``scale``, ``flips``, ``threshold``,
    ``iou``, ``table`` (one dict a combination: candidate, scale, flips,
    threshold, iou) and ``row`` (the chosen table row).
    """
    if not candidates or not frames:
        raise InputError("select_inference: no candidates or no validation frames")
    table = []
    for ci, (_, model) in enumerate(candidates):
        for s in scales:
            table += _score(model, ci, float(s), 1, frames, config, thresholds, batch_size)
    row = choose_row(table, tie_tolerance)
    for f in sorted({int(f) for f in flips} - {1}):
        table += _score(candidates[row["candidate"]][1], row["candidate"], row["scale"], f, frames, config,
                        thresholds, batch_size)
    row = choose_row(table, tie_tolerance)
    return {"candidate": row["candidate"], "scale": row["scale"], "flips": row["flips"],
            "threshold": row["threshold"], "iou": row["iou"], "best_iou": max(r["iou"] for r in table),
            "table": table, "row": row}


def _score(model: torch.nn.Module, ci: int, scale: float, flips: int, frames: Sequence[tuple[np.ndarray, np.ndarray]],
           config: SegmenterConfig, thresholds: Sequence[float], batch_size: int) -> list[dict[str, Any]]:
    """Table rows (one a threshold) of one model at one scale and flip count: mean IoU over ``frames``."""
    from snaketrack.datasets.boxes import mask_iou
    from snaketrack.training.segmenter import Segmenter

    ts = np.asarray([float(t) for t in thresholds], np.float32)
    seg = Segmenter(model, config, scale=scale, flips=flips)
    ious = np.zeros((len(frames), len(ts)))
    for k in range(0, len(frames), batch_size):
        chunk = frames[k:k + batch_size]
        if len({f.shape for f, _ in chunk}) == 1:
            probs = seg.predict_proba_batch([f for f, _ in chunk])
        else:
            probs = [seg.predict_proba(f) for f, _ in chunk]
        for j, (p, (_, m)) in enumerate(zip(probs, chunk)):
            for ti, t in enumerate(ts):
                ious[k + j, ti] = mask_iou(p > t, m)
    return [{"candidate": ci, "scale": scale, "flips": flips, "threshold": float(thresholds[ti]),
             "iou": float(ious[:, ti].mean())} for ti in range(len(ts))]


def choose_row(table: Sequence[dict[str, Any]], tie_tolerance: float = 0.0) -> dict[str, Any]:
    """The row :func:`select_inference` chooses: among rows within ``tie_tolerance`` of the best
    ``iou``, the smallest ``scale``, then the fewest ``flips`` (1 where absent), the highest ``iou``,
    the ``threshold`` nearest 0.5, the lowest ``candidate``.

    >>> t = [{"candidate": 0, "scale": 1.5, "threshold": 0.5, "iou": 0.888},
    ...      {"candidate": 0, "scale": 1.25, "threshold": 0.4, "iou": 0.887},
    ...      {"candidate": 1, "scale": 1.0, "threshold": 0.5, "iou": 0.876}]
    >>> choose_row(t, 0.002)["scale"], choose_row(t, 0.0)["scale"], choose_row(t, 0.02)["scale"]
    (1.25, 1.5, 1.0)
    >>> t += [{"candidate": 0, "scale": 1.25, "flips": 4, "threshold": 0.4, "iou": 0.889}]
    >>> choose_row(t, 0.0025).get("flips", 1), choose_row(t, 0.0)["flips"]
    (1, 4)
    """
    top = max(r["iou"] for r in table)
    tied = [r for r in table if r["iou"] >= top - tie_tolerance]
    return min(tied, key=lambda r: (r["scale"], r.get("flips", 1), -r["iou"], abs(r["threshold"] - 0.5),
                                    r["candidate"]))


def _cfg_dict(config: TrainConfig) -> dict[str, Any]:
    d = asdict(config)
    d["input_size"] = list(config.input_size)
    d["crop_size"] = None if config.crop_size is None else list(config.crop_size)
    return d


@torch.no_grad()
def validate(model: torch.nn.Module, ds: SegmentationData, batch_size: int, size: tuple[int, int],
             loss: str = "bce+dice", pos_weight: float = 1.0,
             thresholds: Sequence[float] = (0.5,), ignore_edge: int = 0, precision: str = "fp32") -> dict[str, float]:
    """Mean loss, mean per-image IoU at probability 0.5 (``iou``), and the threshold among ``thresholds``
    with the highest mean IoU (``threshold``, ``iou_at_threshold``; ties go to the one nearest 0.5);
    ``precision``: the forward pass's (:func:`~snaketrack.training.model.precision_context`)."""
    model.eval()
    losses, n = 0.0, 0
    ious = {float(t): [] for t in thresholds}
    ious.setdefault(0.5, [])
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=0)
    for x, y in loader:
        with precision_context(precision):
            logits = model(x).float()
        losses += float(seg_loss(logits, y, loss, pos_weight, ignore_edge)) * len(x)
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
