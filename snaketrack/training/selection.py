"""The final choice of checkpoint, inference scale, test-time flips and threshold on the validation split.

Every choice the model file carries is made on the validation split,
against its labels: each epoch is scored at the trained scale over
probability thresholds, and the best epoch is kept; when training ends, the
kept epoch and the last one are scored at each inference scale of
``scales`` and each threshold, on the validation frames at their own size
(as ``eval-seg`` scores), and the best (checkpoint, scale, threshold) is
written into the model file; then that checkpoint at that scale is scored
with each test-time flip count of ``flips`` (the probabilities of flipped
copies averaged), each threshold again. Scores within ``tie_tolerance`` of
the best count as ties, which go to the cheaper option (the smaller scale,
then fewer flips). With weight averaging the average is the final
checkpoint, and only scale, flips and threshold are chosen for it.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

from snaketrack.errors import FileFormatError, InputError
from snaketrack.io import CsvAppender, atomic_write_bytes
from snaketrack.masks import mask_iou
from snaketrack.training.config import TrainConfig, config_dict
from snaketrack.training.data import SegmentationData
from snaketrack.training.model import SegmenterConfig, load_model, model_bytes
from snaketrack.training.segmenter import Segmenter
from snaketrack.training.window import robot_pieces

THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.2, 0.81, 0.05))
SELECT_COLUMNS = ["candidate", "epoch", "scale", "flips", "threshold", "val_iou", "chosen"]


def final_choice(paths: dict[str, Path], last_model: torch.nn.Module, seg_cfg: SegmenterConfig,
                 val_ds: SegmentationData, config: TrainConfig, thresholds: Sequence[float],
                 history: list[dict[str, float]], roots: list[str], redo: bool, progress: bool,
                 average: Optional[Callable[[], dict[str, Any]]] = None) -> dict[str, Any]:
    """Choose checkpoint, scale, flips and threshold on the validation frames; write the model file and
    ``<stem>.select.csv`` (module doc). Returns :func:`select_inference`'s dict plus ``epoch``.

    paths: the run's files (:func:`~snaketrack.training.train.side_paths`); the model file holds the best
    epoch. last_model: the last epoch's weights; history: the log's rows; roots: the dataset folders.
    redo: choose again even when the model file already holds a choice (else that choice stands).
    average: makes the averaged model, called only when a choice is made; its result is the only candidate.
    """
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
             "flips": sel["flips"], "checkpoint": name, "best_epoch_val_iou": float(best_extra["val_iou"]),
             "selection": sel,
             "datasets": roots, "train": config_dict(config)}
    chosen_row = sel.pop("row")
    atomic_write_bytes(paths["model"], model_bytes(
        chosen, replace(seg_cfg, threshold=sel["threshold"], scale=sel["scale"], flips=sel["flips"]), extra))
    with CsvAppender(paths["select"], SELECT_COLUMNS, resume=False) as w:
        for r in sel["table"]:
            w.write({"candidate": cands[r["candidate"]][0], "epoch": r["epoch"], "scale": r["scale"],
                     "flips": r["flips"], "threshold": r["threshold"], "val_iou": r["iou"],
                     "chosen": int(r is chosen_row)})
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
    """Table rows (one a threshold) of one model at one scale and flip count: mean IoU over ``frames`` of
    the masks inference gives at that threshold (each mask cut to its robot pieces)."""
    ts = np.asarray([float(t) for t in thresholds], np.float32)
    seg = Segmenter(model, config, scale=scale, flips=flips, region=False)
    ious = np.zeros((len(frames), len(ts)))
    for k in range(0, len(frames), batch_size):
        chunk = frames[k:k + batch_size]
        if len({f.shape for f, _ in chunk}) == 1:
            probs = seg.predict_proba_batch([f for f, _ in chunk])
        else:
            probs = [seg.predict_proba(f) for f, _ in chunk]
        for j, (p, (_, m)) in enumerate(zip(probs, chunk)):
            for ti, t in enumerate(ts):
                mask = p > t
                ious[k + j, ti] = mask_iou(robot_pieces(mask), m)
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
