"""``snaketrack train / segment / eval-seg``: the DeepLabV3+ segmenter.

``train`` learns from labelled dataset folders and writes one model file
(plus ``.last.pt``, ``.log.csv``, ``.plot.png`` beside it; run again to
resume); ``segment`` masks a video or dataset with it (``--setting live`` by default); ``eval-seg``
prints the mean IoU against a dataset's masks (``--setting accurate`` by default: it scores the model as
training chose to run it; ``--setting live`` scores what ``track`` and ``serve`` see).
"""
from __future__ import annotations

import argparse
import json
import warnings

from snaketrack.commands import Command, add_all_pieces_argument, add_device_argument, add_setting_argument
from snaketrack.errors import InputError, SnaketrackWarning


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="labelled dataset folders (frames/ + masks/)")
    p.add_argument("--recipe", default="cpu", choices=["cpu", "paper"],
                   help="starting settings the flags below change: cpu, measured on a 2-core CPU from random "
                        "weights (crops near the robot, lr 2e-3 cosine over --minutes, zoom, rotations, synthetic "
                        "grounds, test-time choices on validation); paper, the tracking paper's (whole frames, "
                        "lr 1e-4, 20 epochs) (default cpu)")
    p.add_argument("--minutes", "--max-minutes", dest="max_minutes", type=float, default=None, metavar="M",
                   help="time budget; training stops after the epoch in which it passed, the lr schedule annealed "
                        "to it (default: 20 with --recipe cpu, none with paper)")
    p.add_argument("--encoder", default="resnet18",
                   help="smp encoder: resnet18 (default), mobilenet_v2 (1.3-1.7 times as fast to segment live, "
                        "about as accurate on scenes not trained on), resnet34, efficientnet-b0, ...")
    p.add_argument("--encoder-weights", metavar="FILE", help="local encoder weights file (default: random init)")
    p.add_argument("--epochs", type=int, default=None, help="epochs, an upper bound under --minutes (default: 200 "
                   "with --recipe cpu, 20 with paper)")
    p.add_argument("--batch-size", type=int, default=8, help="batch size (default 8)")
    p.add_argument("--lr", type=float, default=None, help="Adam learning rate (default: 2e-3 cpu, 1e-4 paper)")
    p.add_argument("--lr-step-epoch", type=int, default=None, help="epoch at which lr drops x0.1 (default 10)")
    p.add_argument("--input-size", default="640x360", metavar="WxH",
                   help="network input, width x height (default 640x360)")
    p.add_argument("--crop-size", default=None, metavar="WxH",
                   help="train on crops of this size at the input resolution (default: 160x160 cpu, "
                        "whole frames paper)")
    p.add_argument("--max-val-frames", type=int, default=None,
                   help="cap on validation frames, evenly spaced (default: 16 cpu, all paper)")
    p.add_argument("--val-fraction", type=float, default=None, help="fraction held out for validation (default 0.15)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    add_device_argument(p, "training (with --workers N on CUDA: a GPU per worker, cuda:0 to cuda:N-1; the "
                           "final choice of checkpoint and settings and the int8 network are made on the CPU)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--loss", default=None, help="loss terms joined by '+': bce, dice, iou, lovasz (default bce+dice)")
    p.add_argument("--pos-weight", type=float, default=None, help="BCE weight of robot pixels (default 1)")
    p.add_argument("--schedule", default=None, choices=["step", "cosine", "onecycle"],
                   help="lr schedule: step (x0.1 at --lr-step-epoch), cosine or onecycle over the run "
                        "(default: cosine cpu, step paper)")
    p.add_argument("--p-robot", type=float, default=None,
                   help="share of --crop-size crops centred near the robot (default: 0.9 cpu, 0.7 paper)")
    p.add_argument("--architecture", default=None, choices=["DeepLabV3Plus", "Unet"],
                   help="network (default DeepLabV3Plus)")
    p.add_argument("--fixed-threshold", action="store_true",
                   help="keep the probability threshold at 0.5 instead of choosing it on the validation split")
    p.add_argument("--scales", default=None, metavar="S,S,...",
                   help="inference scales the final choice on validation tries (default 1,1.25,1.5; 1: none)")
    p.add_argument("--flips", default=None, metavar="F,F,...",
                   help="test-time flip counts the final choice tries at the chosen scale: 1 none, 2 left-right, "
                        "4 and up-down (default: 1,4 cpu, 1 paper)")
    p.add_argument("--no-select-last", action="store_true",
                   help="keep the best epoch by validation; the last epoch does not compete in the final choice")
    p.add_argument("--tie-tolerance", type=float, default=None,
                   help="validation IoUs this close to the best are ties, going to the smaller scale (default 0.002)")
    p.add_argument("--ignore-edge", type=int, default=None, metavar="PX",
                   help="leave pixels within PX of the label's edge out of the loss (default 0)")
    p.add_argument("--ground-colour", type=float, default=None, metavar="P",
                   help="probability of recolouring the ground of a training sample (default 0)")
    p.add_argument("--zoom", default=None, metavar="LOW,HIGH",
                   help="training zoom range, log-uniform (default: 0.4,2 cpu, 0.7,1.4 paper): "
                        "cover the robot's size in the videos to segment")
    p.add_argument("--rotate", type=float, default=None, metavar="DEG",
                   help="training rotations drawn from +-DEG degrees (camera roll, other headings; "
                        "default: 30 cpu, 0 paper)")
    p.add_argument("--shadow", type=float, default=None, metavar="P",
                   help="probability of a synthetic cast shadow beside the robot in a training sample (default 0)")
    p.add_argument("--synthetic-ground", type=float, default=None, metavar="P",
                   help="probability that a training sample's robot is pasted onto a procedural ground (textures, "
                        "clutter, shadows) instead of its own: for videos of other grounds (default: 0.5 cpu, 0 paper)")
    p.add_argument("--precision", default=None, choices=["fp32", "bf16", "auto"],
                   help="arithmetic of the forward passes: fp32, bf16 autocast (1.4-1.8x faster steps on a CPU with "
                        "AVX512-BF16 or AMX) or auto, bf16 on such a CPU and fp32 elsewhere (default: auto cpu, "
                        "fp32 paper); stored in the model file for segment, eval-seg and track")
    p.add_argument("--average-from", type=float, default=None, metavar="F",
                   help="average the weights at every step from this fraction of the run on and keep the average "
                        "(stochastic weight averaging; default: off)")
    p.add_argument("--no-live-int8", action="store_true",
                   help="do not make the live setting's int8 network at the end (made by the cpu recipe, and kept in "
                        "the model file when it loses at most 0.02 validation IoU to float32)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="train data-parallel in N worker processes on this machine, the global batch "
                        "--batch-size split evenly among all workers (default 1: one process)")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="rendezvous of a run over several machines: HOST is the machine with --node-rank 0, "
                        "PORT a free port there; every machine runs the same command")
    p.add_argument("--nnodes", type=int, default=1, metavar="M", help="machines in the run (default 1)")
    p.add_argument("--node-rank", type=int, default=0, metavar="R",
                   help="this machine's rank, 0 to M-1; rank 0 writes the model file (default 0)")
    p.add_argument("--out", required=True, metavar="MODEL.pt",
                   help="model file to write (resumes when its .last.pt exists)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")


def run_train(args: argparse.Namespace) -> int:
    from snaketrack.training.config import recipe_config
    from snaketrack.training.distributed import check_workers
    from snaketrack.training.model import parse_input_size
    from snaketrack.training.train import train, train_parallel

    check_workers(args.workers, args.batch_size, args.nnodes, args.node_rank, args.address)
    single = args.workers == 1 and args.nnodes == 1 and args.address is None
    if single:
        from snaketrack.device import resolve_device

        resolve_device(args.device)  # its one line before the datasets are read
    else:
        from snaketrack.training.distributed import workers_device

        workers_device(args.device, args.workers)
    kw = dict(encoder=args.encoder, input_size=parse_input_size(args.input_size), batch_size=args.batch_size,
              encoder_weights=args.encoder_weights, threads=args.threads, seed=args.seed)
    if args.lr_step_epoch is not None:
        kw["lr_step_epoch"] = args.lr_step_epoch
    if args.crop_size is not None:
        kw["crop_size"] = parse_input_size(args.crop_size, "--crop-size")
    if args.max_val_frames is not None:
        kw["max_val_frames"] = args.max_val_frames
    if args.val_fraction is not None:
        kw["val_fraction"] = args.val_fraction
    if args.max_minutes is not None:
        kw["time_limit_s"] = 60.0 * args.max_minutes
    for name in ("epochs", "lr", "loss", "pos_weight", "schedule", "p_robot", "architecture", "tie_tolerance",
                 "ignore_edge", "ground_colour", "shadow", "synthetic_ground", "average_from", "precision"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    if args.rotate is not None:
        kw["rotate_deg"] = args.rotate
    if args.fixed_threshold:
        kw["pick_threshold"] = False
    if args.no_select_last:
        kw["select_last"] = False
    if args.no_live_int8:
        kw["live_int8"] = False
    for name, cast, example in (("zoom", float, "0.7,2"), ("scales", float, "1,1.25,1.5"), ("flips", int, "1,2,4")):
        text = getattr(args, name)
        if text is not None:
            try:
                kw[name] = tuple(cast(v) for v in text.split(","))
            except ValueError:
                raise InputError(f"--{name} {text!r}: expected numbers separated by commas, e.g. {example}") from None
    config = recipe_config(args.recipe, **kw)
    if single:
        res = train(args.datasets, args.out, config, device=args.device)
    else:
        res = train_parallel(args.datasets, args.out, config, args.workers, args.address, args.nnodes,
                             args.node_rank, device=args.device)
        if res is None:  # a machine other than rank 0's: that one writes the model
            print(f"node {args.node_rank}: training workers finished; the model is written on node 0")
            return 0
    sel = res.selection or {}
    summary = {"model": args.out, "best_val_iou": res.best_val_iou, "epochs": res.epochs_done,
               "stopped_by_time": res.stopped_by_time, "chosen_epoch": sel.get("epoch"),
               "chosen_scale": sel.get("scale"), "chosen_flips": sel.get("flips"),
               "chosen_threshold": sel.get("threshold"),
               "chosen_val_iou": sel.get("iou"), "selection_s": sel.get("seconds"), "live_int8": sel.get("live_int8"),
               **{k: v for k, v in res.paths.items() if k != "model"}}
    print(json.dumps(summary) if args.json else
          f"{args.out}: epoch {sel.get('epoch')} at scale {sel.get('scale')}, threshold {sel.get('threshold')}: "
          f"validation IoU {sel.get('iou', float('nan')):.4f} ({res.epochs_done} epochs)")
    note = short_budget_note(res.epochs_done, res.stopped_by_time, config.time_limit_s)
    if note:
        warnings.warn(note, SnaketrackWarning, stacklevel=2)
    return 0


FEW_EPOCHS = 5  # fewer epochs than this on a time budget: the model is likely undertrained


def short_budget_note(epochs: int, stopped_by_time: bool, time_limit_s) -> str:
    """One line when a time budget stopped training after fewer than :data:`FEW_EPOCHS` epochs (the end of
    the budget is kept for the final choice and the int8 network, so a short one leaves few), else "".

    >>> short_budget_note(1, True, 360.0)[:60]
    'training stopped after 1 epoch of its 6-minute budget (its e'
    >>> short_budget_note(29, True, 1200.0), short_budget_note(1, False, None)
    ('', '')
    """
    if not stopped_by_time or epochs >= FEW_EPOCHS or time_limit_s is None:
        return ""
    return (f"training stopped after {epochs} epoch{'s' if epochs != 1 else ''} of its {time_limit_s / 60:g}-minute "
            "budget (its end is kept for the final choice and the int8 network); the model is likely "
            "undertrained: give more --minutes (the CPU recipe was measured with 20)")


def add_segment_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="VIDEO|DATASET", help="a video file, image folder or dataset folder")
    p.add_argument("--model", required=True, metavar="MODEL.pt", help="a model file from `snaketrack train`")
    p.add_argument("--out", required=True, metavar="DIR", help="output dataset folder: frames/ and masks/ (resumed)")
    p.add_argument("--batch-size", type=int, default=4, help="frames per forward pass (default 4)")
    p.add_argument("--threshold", type=float, default=None,
                   help="robot probability threshold (default: the model's, chosen on validation by training)")
    p.add_argument("--scale", type=float, default=None,
                   help="run the network on frames resized this much over its input size "
                        "(default: the model's, chosen on validation by training)")
    p.add_argument("--flips", type=int, default=None, choices=[1, 2, 4],
                   help="test-time flips averaged: 1 none, 2 left-right, 4 and up-down "
                        "(default: the model's, chosen on validation by training; live: at most 2)")
    p.add_argument("--precision", default=None, choices=["fp32", "bf16"],
                   help="arithmetic of the torch network: fp32 or bf16 autocast (default: the model's, as trained; "
                        "fp32 for a bf16 model on a CPU without bfloat16 arithmetic)")
    add_setting_argument(p, "live")
    add_all_pieces_argument(p)
    add_device_argument(p, "the network (on a GPU the live setting runs the torch network: OpenVINO and ONNX "
                           "Runtime run on the CPU)")


def run_segment(args: argparse.Namespace) -> int:
    from snaketrack.device import resolve_device
    from snaketrack.training.segment import segment_source
    from snaketrack.training.segmenter import load_segmenter

    seg = load_segmenter(args.model, device=resolve_device(args.device), threshold=args.threshold, scale=args.scale,
                         flips=args.flips, precision=args.precision, setting=args.setting, region=not args.all_pieces,
                         edges=not args.network_edges, window=not args.whole_frame)
    n = segment_source(args.source, args.out, seg, model_path=str(args.model), batch_size=args.batch_size)
    print(f"{args.out}: {n} frames segmented")
    return 0


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET", help="dataset folder with masks/ to compare against")
    p.add_argument("--model", required=True, metavar="MODEL.pt", help="a model file from `snaketrack train`")
    p.add_argument("--batch-size", type=int, default=4, help="frames per forward pass (default 4)")
    p.add_argument("--threshold", type=float, default=None,
                   help="robot probability threshold (default: the model's)")
    p.add_argument("--scale", type=float, default=None,
                   help="run the network on frames resized this much over its input size "
                        "(default: the model's, chosen on validation by training)")
    p.add_argument("--flips", type=int, default=None, choices=[1, 2, 4],
                   help="test-time flips averaged: 1 none, 2 left-right, 4 and up-down "
                        "(default: the model's, chosen on validation by training; live: at most 2)")
    p.add_argument("--precision", default=None, choices=["fp32", "bf16"],
                   help="arithmetic of the torch network: fp32 or bf16 autocast (default: the model's, as trained; "
                        "fp32 for a bf16 model on a CPU without bfloat16 arithmetic)")
    add_setting_argument(p, "accurate")
    add_all_pieces_argument(p)
    add_device_argument(p, "the network (on a GPU the live setting runs the torch network: OpenVINO and ONNX "
                           "Runtime run on the CPU)")
    p.add_argument("--every", type=int, default=1, metavar="K", help="evaluate every K-th frame (default 1)")
    p.add_argument("--json", action="store_true", help='print {"iou": ..., "frames": ...}')


def run_eval(args: argparse.Namespace) -> int:
    from snaketrack.datasets.layout import Dataset
    from snaketrack.device import resolve_device
    from snaketrack.training.evaluate import evaluate_segmenter
    from snaketrack.training.segmenter import load_segmenter

    if args.every < 1:
        raise InputError(f"--every {args.every}: expected a positive integer")
    seg = load_segmenter(args.model, device=resolve_device(args.device), threshold=args.threshold, scale=args.scale,
                         flips=args.flips, precision=args.precision, setting=args.setting, region=not args.all_pieces,
                         edges=not args.network_edges, window=not args.whole_frame)
    res = evaluate_segmenter(seg, args.dataset, batch_size=args.batch_size, progress=not args.json,
                             frames=range(0, len(Dataset(args.dataset)), args.every))
    if args.json:
        print(json.dumps({"iou": res["iou"], "frames": res["frames"]}))
    else:
        print(f"{args.dataset}: mean IoU {res['iou']:.4f} over {res['frames']} frames")
    return 0


COMMANDS = [
    Command(name="train", help="train a DeepLabV3+ segmenter on labelled datasets",
            add_arguments=add_train_arguments, run=run_train,
            description="Train a DeepLabV3+ segmenter on labelled datasets. By default the CPU recipe: 20 minutes "
                        "from random weights on crops near the robot, half on synthetic grounds; checkpoint and "
                        "test-time settings chosen on a held-out split, then an int8 network for the live setting "
                        "(--recipe paper: the paper's settings)."),
    Command(name="segment", help="mask a video or dataset with a trained segmenter",
            add_arguments=add_segment_arguments, run=run_segment),
    Command(name="eval-seg", help="mean IoU of a trained segmenter against a dataset's masks",
            add_arguments=add_eval_arguments, run=run_eval),
]
