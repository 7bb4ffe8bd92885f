"""Benchmark: data-parallel segmenter training against one process, on this machine.

:func:`measure_training` trains the DeepLabV3+ segmenter on a synthetic
labelled dataset (:func:`~snaketrack.datasets.toy.write_toy_dataset`)
once in one process with ``--threads`` threads and once with two workers
(``train --workers 2``, ``--threads`` split between them), for each seed:
same seeds, same global batch, same number of epochs. It reports the
median seconds an epoch (training plus rank 0's validation, from the
training log; the first epoch, which fills the frame cache, left out),
the wall time of each run (process start-up included), and the
validation IoU at probability 0.5 after the last epoch; the spread of
the single-process IoU over seeds is the noise the two-worker IoU is
compared with.

    snaketrack bench train-ddp [--seeds 0,1,2] [--epochs 4] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from snaketrack.bench.registry import Benchmark


def _epoch_s(history: list[dict[str, float]]) -> float:
    """Median seconds an epoch, the first left out when there are more."""
    rows = history[1:] if len(history) > 1 else history
    return statistics.median(float(h["seconds"]) for h in rows)


def measure_training(root: Optional[str] = None, seeds: Sequence[int] = (0, 1, 2), epochs: int = 4,
                     threads: int = 2, frames: int = 64, batch_size: int = 8, workers: int = 2,
                     one_thread: bool = False) -> dict[str, Any]:
    """Single-process against ``workers``-worker training, per seed (module doc).

    root: a labelled dataset folder (None: a synthetic one of ``frames`` 320x180 frames is written);
    the network runs at 320x180 on 128x128 crops, batch ``batch_size`` (the global batch in both),
    Adam at 1e-3, ``epochs`` epochs, validation on up to 16 frames.
    Returns seconds [s], IoUs and their per-seed lists; ``ddp_time_ratio_x`` is the two-worker epoch
    time over the single-process one (below 1: faster). one_thread: also time one process with one
    thread on the first seed (``single_1thread_epoch_s``: what one worker's share of the machine does alone).
    """
    from snaketrack.datasets.toy import write_toy_dataset
    from snaketrack.training.config import TrainConfig
    from snaketrack.training.train import train, train_parallel

    tmp = Path(tempfile.mkdtemp(prefix="bench_train_"))
    if root is None:
        root = str(write_toy_dataset(tmp / "data", frames, 320, 180, seed=11, thickness_frac=0.08))
    runs: dict[str, list[dict[str, float]]] = {"single": [], "ddp": []}
    for seed in seeds:
        cfg = TrainConfig(encoder="resnet18", input_size=(180, 320), crop_size=(128, 128), batch_size=batch_size,
                          lr=1e-3, epochs=epochs, lr_step_epoch=epochs, block=8, val_fraction=0.25,
                          max_val_frames=16, scales=(1.0,), pick_threshold=False, threads=threads, seed=seed)
        order = ("single", "ddp") if seed % 2 == 0 else ("ddp", "single")  # alternate, against drift in load
        for mode in order:
            out = tmp / f"{mode}-{seed}" / "m.pt"
            t0 = time.perf_counter()
            if mode == "single":
                res = train([root], out, cfg, progress=False)
            else:
                res = train_parallel([root], out, cfg, workers=workers, progress=False)
            wall = time.perf_counter() - t0
            runs[mode].append({"seed": seed, "epoch_s": _epoch_s(res.history), "run_s": wall,
                               "val_iou": float(res.history[-1]["val_iou"])})
            print(json.dumps({"mode": mode, **runs[mode][-1]}), file=sys.stderr, flush=True)

    extra: dict[str, Any] = {}
    if one_thread:
        cfg1 = TrainConfig(**{**cfg.__dict__, "threads": 1, "seed": seeds[0]})
        res = train([root], tmp / "single1" / "m.pt", cfg1, progress=False)
        extra["single_1thread_epoch_s"] = _epoch_s(res.history)
        extra["single_1thread_val_iou"] = float(res.history[-1]["val_iou"])
        print(json.dumps({"mode": "single_1thread", **extra}), file=sys.stderr, flush=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    single_iou = [r["val_iou"] for r in runs["single"]]
    ddp_iou = [r["val_iou"] for r in runs["ddp"]]
    return {
        "single_epoch_s": med("single", "epoch_s"), "ddp_2workers_epoch_s": med("ddp", "epoch_s"),
        "ddp_time_ratio_x": med("ddp", "epoch_s") / med("single", "epoch_s"),
        "single_run_s": med("single", "run_s"), "ddp_2workers_run_s": med("ddp", "run_s"),
        "single_val_iou": statistics.mean(single_iou), "ddp_val_iou": statistics.mean(ddp_iou),
        "single_val_iou_per_seed": single_iou, "ddp_val_iou_per_seed": ddp_iou,
        "seed_iou_std": statistics.stdev(single_iou) if len(single_iou) > 1 else 0.0,
        "max_abs_iou_diff_same_seed": max(abs(a - b) for a, b in zip(single_iou, ddp_iou)),
        **extra, "seeds": list(seeds), "epochs": epochs, "threads": threads, "batch_size": batch_size,
        "workers": workers,
    }


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=None, help="a labelled dataset folder (default: a synthetic one)")
    ap.add_argument("--seeds", default="0,1,2", help="seeds, comma-separated (default 0,1,2)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs a run (default 4)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads in all, split among the workers (default 2)")
    ap.add_argument("--one-thread", action="store_true",
                    help="also time one process with one thread (first seed)")


def run(args: argparse.Namespace) -> dict:
    return measure_training(args.data, [int(s) for s in args.seeds.split(",")], args.epochs, args.threads,
                            one_thread=args.one_thread)


BENCHMARK = Benchmark("train-ddp", "data-parallel segmenter training against one process, on this machine",
                      add_arguments, run, quick={"seeds": "0", "epochs": 1})
