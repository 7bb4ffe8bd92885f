"""Train a DeepLabV3+ segmenter on labelled dataset folders: the training loop.

The defaults follow "Tracking Snake-like Robots in the Wild using only a
Single Camera" (§IV-A): Adam, learning rate 1e-4 decayed ×0.1 at epoch 10,
20 epochs, batch 8. Settings: :class:`~snaketrack.training.config.TrainConfig`;
losses: :mod:`~snaketrack.training.losses`; learning-rate schedules:
:mod:`~snaketrack.training.schedule`; the final choice of checkpoint, scale,
flips and threshold on the validation split:
:mod:`~snaketrack.training.selection`.

Each epoch is validated (:func:`validate`) at the trained scale over the
probability thresholds, and the best epoch is kept as the model file while
training runs. With ``time_limit_s`` set, training stops (mid-epoch; that
epoch is still validated and saved) once the time passed plus the time kept
back for the last validation and the final choice (estimated from the last
validation's time) reaches the limit, so the limit covers the final choice.

With ``average_from`` set, the weights are also averaged with equal weight
at every step from that fraction of the run on (stochastic weight
averaging, Izmailov et al. 2018, whose flatter minima generalise better out
of domain: SWAD, Cha et al. 2021); the batch-norm statistics of the average
are then recomputed over ``bn_batches`` training batches, and the averaged
weights are the final checkpoint. The 20-minute CPU recipe and its
measurements: docs/segmenter-training.md.

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
- ``<stem>.plot.png``: loss and IoU per epoch
  (:func:`~snaketrack.training.plots.plot_history`).
"""
from __future__ import annotations

import io
import itertools
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import cv2
import numpy as np
import torch
from tqdm import tqdm

from snaketrack.device import resolve_device
from snaketrack.errors import InputError
from snaketrack.io import CsvAppender, atomic_write_bytes
from snaketrack.training.config import TrainConfig, config_dict
from snaketrack.training.data import SegmentationData
from snaketrack.training.distributed import (
    Workers,
    check_workers,
    data_parallel,
    launch,
    plain_batchnorm,
    shard_batches,
    workers_device,
)
from snaketrack.training.losses import batch_iou, seg_loss
from snaketrack.training.model import (
    AUTO_PRECISION,
    SegmenterConfig,
    build_model,
    model_bytes,
    precision_context,
    resolve_precision,
)
from snaketrack.training.plots import plot_history
from snaketrack.training.quantize import QUANTIZE_RESERVE_S, attach_live_int8
from snaketrack.training.schedule import lr_at
from snaketrack.training.selection import THRESHOLDS, final_choice

LOG_COLUMNS = ["epoch", "lr", "train_loss", "val_loss", "val_iou", "threshold", "val_iou_at_threshold", "seconds"]
RESERVE_MARGIN = 1.25  # time kept back for the final choice, over its estimate from the last validation


@dataclass(frozen=True)
class TrainResult:
    """best_val_iou: the best epoch's validation IoU at the trained scale (at its threshold);
    epochs_done: epochs finished in total; history: one dict a finished epoch (the CSV's rows);
    paths: the files written; selection: the final choice
    (:func:`~snaketrack.training.selection.select_inference`'s dict plus
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


def train(roots: Sequence[str | os.PathLike], out: str | os.PathLike, config: TrainConfig = TrainConfig(),
          progress: bool = True, workers: Optional[Workers] = None, device: str = "cpu") -> Optional[TrainResult]:
    """Train on the dataset folders ``roots``; write the chosen model to ``out`` (see module doc).

    workers: this process's place in a data-parallel run (started by :func:`train_parallel`; None:
    a single process). Each worker trains on its share of every batch of ``config.batch_size``
    (:func:`~snaketrack.training.distributed.shard_batches`) through ``DistributedDataParallel``
    with batch norms synchronised over the global batch; rank 0 alone validates, writes the files
    and makes the final choice, and returns the result; the other ranks return None.
    device: where a single process trains (``cpu``, ``cuda``, ``cuda:N`` or ``auto``:
    :func:`snaketrack.device.resolve_device`; a data-parallel worker trains on ``workers.device``). The
    final choice and the int8 network are made on the CPU.
    """
    ctx = workers or Workers(device=resolve_device(device))
    config = replace(config, precision=decide_precision(config.precision, ctx))
    main = ctx.is_main
    progress = progress and main
    paths = side_paths(out)
    roots = [str(r) for r in roots]
    seg_cfg = SegmenterConfig(encoder=config.encoder, input_size=tuple(config.input_size),
                              architecture=config.architecture, precision=config.precision)
    if config.threads is not None:
        torch.set_num_threads(int(config.threads))
        cv2.setNumThreads(int(config.threads))
    torch.manual_seed(config.seed)
    model = build_model(seg_cfg, config.encoder_weights).to(ctx.device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    avg = torch.optim.swa_utils.AveragedModel(model) if config.average_from is not None and main else None
    step_s: list[float] = []  # seconds a training step, for the time kept back for the batch-norm pass
    start_epoch, best, history, elapsed0, global_step, val_s = 0, -1.0, [], 0.0, 0, None
    ck = resume_checkpoint(paths, config) if main else None
    if ctx.distributed:  # every worker resumes from rank 0's checkpoint
        ck = ctx.from_main(ck)
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        if avg is not None and "avg" in ck:
            avg.load_state_dict(ck["avg"])
        torch.set_rng_state(ck["torch_rng"])
        start_epoch, best, history = int(ck["epoch"]) + 1, float(ck["best_val_iou"]), list(ck["history"])
        elapsed0, global_step = float(ck.get("elapsed_s", 0.0)), int(ck.get("global_step", 0))
        val_s = ck.get("val_s")
    if ctx.rank > 0:  # the other workers draw their own dropout masks
        torch.manual_seed(config.seed * 1000003 + ctx.rank * 1009 + start_epoch)

    train_ds = SegmentationData(roots, seg_cfg.input_size, "train", config.val_fraction, config.block,
                                config.seed, seg_cfg.mean, seg_cfg.std, augment_train=config.augment,
                                crop_size=config.crop_size, p_robot=config.p_robot,
                                ground_colour=config.ground_colour, zoom=config.zoom,
                                rotate_deg=config.rotate_deg, shadow=config.shadow,
                                synthetic_ground=config.synthetic_ground)
    val_ds = SegmentationData(roots, seg_cfg.input_size, "val", config.val_fraction, config.block,
                              config.seed, seg_cfg.mean, seg_cfg.std, max_frames=config.max_val_frames)
    if len(train_ds) == 0:
        raise InputError(f"{', '.join(roots)}: no unflagged frames to train on")
    if ctx.distributed and len(train_ds) < config.batch_size:
        raise InputError(f"{', '.join(roots)}: {len(train_ds)} training frames, fewer than --batch-size "
                         f"{config.batch_size}; data-parallel training needs at least one whole batch")
    if len(val_ds) == 0:  # too few frames to hold any out: score on the training frames, unaugmented
        val_ds = SegmentationData(roots, seg_cfg.input_size, "all", seed=config.seed, mean=seg_cfg.mean,
                                  std=seg_cfg.std, max_frames=config.max_val_frames)
    n_batches = len(train_ds) // config.batch_size if len(train_ds) > config.batch_size else 1
    steps_per_epoch = n_batches if config.max_steps_per_epoch is None else min(n_batches, config.max_steps_per_epoch)
    total_steps = max(config.epochs * steps_per_epoch, 1)
    thresholds = THRESHOLDS if config.pick_threshold else (0.5,)
    n_cand = 1 if avg is not None or not config.select_last else 2
    n_bn = min(int(config.bn_batches), steps_per_epoch) if avg is not None else 0
    model, net = data_parallel(model, ctx)  # net: what the training steps run
    timed = ctx.distributed and config.time_limit_s is not None  # then rank 0's clock decides for all
    t_run = time.perf_counter()

    def reserve_s() -> float:
        """Time kept back for the last validation and the final choice [s] (from the last validation's time)."""
        if val_s is None:
            return 0.0
        # estimated from the batched validation at the trained scale; the final choice's larger frames
        # run slower per pixel (without RESERVE_MARGIN, 20-minute runs with flips end 6-24 s late)
        choice = float(val_s) * (1.0 + n_cand * sum(s_ * s_ for s_ in config.scales)
                                 + max(config.scales) ** 2 * sum(f for f in config.flips if f > 1))
        # the batch-norm pass is forward only: 27 s for 32 batches at ~2 s a training step
        bn = n_bn * float(np.median(step_s[-50:])) / 2 if step_s else 0.0
        # the int8 network: export and quantization, then two passes over the frames at the largest scale
        int8 = QUANTIZE_RESERVE_S + 2.0 * float(val_s) * max(config.scales) ** 2 if config.live_int8 else 0.0
        return RESERVE_MARGIN * (choice + bn + int8)

    def elapsed() -> float:
        return elapsed0 + time.perf_counter() - t_run

    def out_of_time() -> bool:
        return config.time_limit_s is not None and elapsed() > config.time_limit_s - reserve_s()

    def progress_now() -> float:
        f = global_step / total_steps
        if config.time_limit_s is not None:
            f = max(f, elapsed() / max(config.time_limit_s - reserve_s(), 1e-9))
        return f

    def agreed(value: float) -> float:
        """Rank 0's ``value`` on every worker when rank 0's clock decides, else ``value``."""
        return ctx.floats_from_main([value])[0] if timed else value

    stopped = False
    ran_epochs = 0
    log = CsvAppender(paths["log"], LOG_COLUMNS, resume=start_epoch > 0) if main else None
    try:
        for epoch in range(start_epoch, config.epochs):
            if history and agreed(out_of_time()):  # a resumed run already past its time
                stopped = True
                break
            t0 = time.perf_counter()
            train_ds.set_epoch(epoch)
            loader = _train_loader(train_ds, config, epoch, ctx)
            model.train()
            losses, lrs = [], []
            bar = tqdm(total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config.epochs}", unit="batch",
                       disable=not progress, leave=False)
            for step, (x, y) in enumerate(loader):
                if step >= steps_per_epoch:
                    break
                done = agreed(progress_now())
                lr = lr_at(config, epoch, done)
                for g in opt.param_groups:
                    g["lr"] = lr
                lrs.append(lr)
                ts = time.perf_counter()
                x, y = x.to(ctx.device), y.to(ctx.device)
                opt.zero_grad(set_to_none=True)
                with precision_context(config.precision, ctx.device):
                    logits = net(x)
                loss = seg_loss(logits.float(), y, config.loss, config.pos_weight, config.ignore_edge)
                loss.backward()  # data-parallel: gradients averaged over the workers here
                opt.step()
                if avg is not None and progress_now() >= config.average_from:
                    avg.update_parameters(model)
                step_s.append(time.perf_counter() - ts)
                global_step += 1
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}", lr=f"{lr:.2g}")
                if agreed(out_of_time()):
                    stopped = True
                    break
            bar.close()
            if ctx.distributed:  # the global batches' mean loss (every worker ran the same number of steps)
                losses = ctx.mean([np.mean(losses) if losses else float("nan")])
            ran_epochs += 1
            if not main:
                ctx.barrier()  # wait while rank 0 validates and writes
                if stopped:
                    break
                continue
            tv = time.perf_counter()
            val = validate(model, val_ds, config.batch_size, seg_cfg.input_size, config.loss, config.pos_weight,
                           thresholds, config.ignore_edge, config.precision)
            val_s = time.perf_counter() - tv
            row = {"epoch": epoch + 1, "lr": float(np.mean(lrs)) if lrs else lr_at(config, epoch, progress_now()),
                   "train_loss": float(np.mean(losses)) if losses else float("nan"),
                   "val_loss": val["loss"], "val_iou": val["iou"], "threshold": val["threshold"],
                   "val_iou_at_threshold": val["iou_at_threshold"], "seconds": time.perf_counter() - t0}
            history.append(row)
            log.write(row)
            extra = {"epoch": epoch + 1, "val_iou": val["iou_at_threshold"], "val_iou_at_0.5": val["iou"],
                     "threshold": val["threshold"], "datasets": roots, "train": config_dict(config)}
            if val["iou_at_threshold"] > best:
                best = val["iou_at_threshold"]
                atomic_write_bytes(paths["model"], model_bytes(model, replace(seg_cfg, threshold=val["threshold"]),
                                                               extra))
            buf = io.BytesIO()
            ck = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                  "best_val_iou": best, "history": history, "config": config_dict(config),
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
            ctx.barrier()
            if stopped:
                break
    finally:
        if log is not None:
            log.close()
    if not main:
        return None
    if ctx.distributed:  # the final choice and the saved model: the model as a single process has it
        model = plain_batchnorm(model)
    model.cpu()
    if avg is not None:
        avg.cpu()
    selection = None
    if history:
        average: Optional[Callable[[], dict[str, Any]]] = None
        if avg is not None and int(avg.n_averaged) > 0:
            def average_bn() -> dict[str, Any]:
                return _average_with_bn(avg, train_ds, config, n_bn, len(history))
            average = average_bn
        selection = final_choice(paths, model, seg_cfg, val_ds, config, thresholds, history, roots,
                                 redo=ran_epochs > 0, progress=progress, average=average)
        if config.live_int8:
            selection["live_int8"] = attach_live_int8(paths["model"], train_ds.items, val_ds.items,
                                                      config.threads, progress)
    return TrainResult(best, len(history), history, {k: str(v) for k, v in paths.items()}, stopped, selection)


def decide_precision(precision: str, ctx: Workers) -> str:
    """``precision`` decided for a run (:func:`~snaketrack.training.model.resolve_precision`); ``auto`` by rank 0's
    device for every worker of ``ctx``, so that a data-parallel run over machines with different CPUs computes
    alike on all of them and the model file says how."""
    decided = resolve_precision(precision, ctx.device)
    return ctx.from_main(decided) if precision == AUTO_PRECISION else decided


def resume_checkpoint(paths: dict[str, Path], config: TrainConfig) -> Optional[dict[str, Any]]:
    """The run's last checkpoint (``<stem>.last.pt``) to resume from, None when there is none;
    :class:`InputError` when it was written with another encoder, input size or architecture."""
    if not paths["last"].is_file():
        return None
    ck = torch.load(paths["last"], map_location="cpu", weights_only=False)
    old = ck.get("config", {})
    if (old.get("encoder") != config.encoder or tuple(old.get("input_size", ())) != tuple(config.input_size)
            or old.get("architecture", "DeepLabV3Plus") != config.architecture):
        raise InputError(f"{paths['last']}: a run with --encoder {old.get('encoder')} --input-size "
                         f"{'x'.join(map(str, old.get('input_size', ())[::-1]))} is in progress there; "
                         "use the same settings to resume or choose a new --out")
    return ck


def train_parallel(roots: Sequence[str | os.PathLike], out: str | os.PathLike, config: TrainConfig = TrainConfig(),
                   workers: int = 2, address: Optional[str] = None, nnodes: int = 1, node_rank: int = 0,
                   progress: bool = True, device: str = "auto") -> Optional[TrainResult]:
    """:func:`train` data-parallel over ``workers`` processes on this machine (and as many on each
    of ``nnodes`` machines meeting at ``address``, ``HOST:PORT``; this one is ``node_rank``), on
    ``device`` (:func:`~snaketrack.training.distributed.workers_device`: a GPU per worker, or the CPU).

    The global batch stays ``config.batch_size`` (it must divide evenly among the workers); each
    worker gets ``config.threads`` (default: this machine's CPU count) / ``workers`` threads.
    Returns the result on the machine of rank 0 (:func:`train`'s), None on the others. A worker
    that fails ends the run: :class:`~snaketrack.training.distributed.WorkerError`.
    """
    check_workers(workers, config.batch_size, nnodes, node_rank, address)
    workers_device(device, workers)  # its one line before any worker starts
    if node_rank == 0:  # refuse a mismatched resume here, in one line, before any worker starts
        resume_checkpoint(side_paths(out), config)
    total = int(config.threads) if config.threads is not None else (os.cpu_count() or 1)
    config = replace(config, threads=max(1, total // int(workers)))
    roots = [str(r) for r in roots]
    results = launch(_train_worker, (roots, str(out), config, progress), workers, address, nnodes, node_rank,
                     device)
    return results[0]


def _train_worker(ctx: Workers, roots: list[str], out: str, config: TrainConfig,
                  progress: bool) -> Optional[TrainResult]:
    return train(roots, out, config, progress, workers=ctx)


def _train_loader(train_ds: SegmentationData, config: TrainConfig, draw: int,
                  workers: Optional[Workers] = None) -> torch.utils.data.DataLoader:
    """Shuffled training batches, their order a function of (seed, ``draw``): the epoch, or another
    number for a pass outside the epochs. With ``workers`` of a data-parallel run: this worker's
    share of each of those batches."""
    if workers is not None and workers.distributed:
        shards = shard_batches(len(train_ds), config.batch_size, config.seed * 100003 + int(draw), workers)
        return torch.utils.data.DataLoader(train_ds, batch_sampler=shards, num_workers=0)
    gen = torch.Generator().manual_seed(config.seed * 100003 + int(draw))
    return torch.utils.data.DataLoader(train_ds, batch_size=config.batch_size, shuffle=True, generator=gen,
                                       num_workers=0, drop_last=len(train_ds) > config.batch_size)


def _average_with_bn(avg: torch.optim.swa_utils.AveragedModel, train_ds: SegmentationData, config: TrainConfig,
                     n_batches: int, epoch: int) -> dict[str, Any]:
    """The averaged model with its batch-norm statistics recomputed over ``n_batches`` training batches
    (augmented as in training, drawn for epoch ``epoch``); a dict with ``model``, ``n_averaged``, ``bn_s``."""
    t0 = time.perf_counter()
    train_ds.set_epoch(epoch)
    loader = _train_loader(train_ds, config, 99991)
    torch.optim.swa_utils.update_bn(itertools.islice(loader, n_batches), avg.module)
    return {"model": avg.module.eval(), "n_averaged": int(avg.n_averaged), "bn_s": time.perf_counter() - t0}


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
    device = next(model.parameters()).device
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with precision_context(precision, device.type):
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
