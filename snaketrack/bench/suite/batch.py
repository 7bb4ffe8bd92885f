"""Benchmark of batch processing on Ray: a campaign, a long clip in chunks, data-parallel training.

- **Campaign**: ``--videos`` synthetic clips (rendered into ``--data`` when absent) through track and
  estimate, first as a user would run them one after another (the single-video commands in this
  process, torch's default threads: ``serial_s``; and on one thread: ``serial_1thread_s``), then
  as ``snaketrack batch`` on a local Ray with ``--workers`` CPUs (``ray_2workers_s``, Ray's start
  included). ``campaign_frames_equal``: both runs wrote the same frames for every video.
- **Long clip**: one ``--long-frames`` clip tracked in one pass (``sequential_s``, torch's default
  threads; again on one thread, ``sequential_1thread_s``, faster on some CPUs) and in 2 chunks on the
  same Ray (``chunked_s``; ``chunked_speedup_x`` against the first, ``chunked_speedup_over_1thread_x``
  against the second), with both tracks' errors against the simulator's truth. Just
  before, what two processes get done on this CPU against one (``cpu_two_process_throughput_x``, a
  pure-Python loop: ``snaketrack bench chunk-bound``): two chunks cannot gain more than that, and
  on a shared virtual machine it moves from run to run.
- **Training**: the segmenter for 3 epochs in one process and with 2 DDP workers, same seed and
  global batch (``single_epoch_s``, ``ddp_2workers_epoch_s``; ``--no-training`` skips it; the
  comparison over seeds is ``snaketrack bench train-ddp``).

Usage::

    snaketrack bench batch [--data DIR] [--videos 4] [--frames 90]
        [--long-frames 600] [--workers 2] [--track-size WxH] [--out bench_out/batch] [--no-training]

The result has ``serial_s``,
``ray_2workers_s``, ``speedup_x``, ``chunked_speedup_x``, ``ddp_2workers_epoch_s`` and ``single_epoch_s``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from snaketrack.bench.cache import add_data_argument, data_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.bench.tracking import ensure_dataset_apart
from snaketrack.errors import InputError, SnaketrackError

TRACK = {"no_video": True}


def measure_campaign(clips: list[Path], out: Path, workers: int, parser_of, track_size: str | None = None) -> dict:
    """The campaign serially and on Ray (module doc); ``parser_of``: a command's parser by name (the command
    line's :func:`~snaketrack.commands.parser_of`, which ``snaketrack bench`` passes down: the suite sits
    below the command line); ``track_size`` WxH or None (the frames' own)."""
    import ray
    import torch
    import yaml

    from snaketrack.batch.campaign import load_campaign
    from snaketrack.batch.runner import run_campaign, stage_argv
    from snaketrack.batch.stages import run_command
    from snaketrack.io import read_csv_columns

    out.mkdir(parents=True, exist_ok=True)
    spec = {"robot": "planar-snake-11", "masks": "truth", "track": {**TRACK, "track_size": track_size},
            "videos": [{"path": str(c.resolve())} for c in clips]}  # a campaign resolves paths from its own folder
    (out / "campaign.yaml").write_text(yaml.safe_dump(spec))
    campaign = load_campaign(out / "campaign.yaml", parser_of)
    serial_out, ray_out = out / "serial", out / "ray"
    for d in (serial_out, ray_out):
        shutil.rmtree(d, ignore_errors=True)
    serial = {}
    for threads in (torch.get_num_threads(), 1):
        shutil.rmtree(serial_out, ignore_errors=True)
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        for v in campaign.videos:
            for stage in ("track", "estimate"):
                error = run_command(stage_argv(campaign, v, stage, serial_out), parser_of)
                if error:
                    raise SnaketrackError(f"{v.name} {stage}: {error}")
        serial[threads] = time.perf_counter() - t0
    default_threads = max(serial)
    torch.set_num_threads(default_threads)
    serial_s = serial[default_threads]
    t0 = time.perf_counter()
    summary = run_campaign(campaign, ray_out, parser_of, workers=workers, progress=False)
    ray_s = time.perf_counter() - t0
    ray.shutdown()
    if summary["failed"]:
        raise SnaketrackError(f"the campaign failed: {summary['per_video']}")
    equal = all(list(read_csv_columns(serial_out / v.name / "track" / "track.csv")["frame"])
                == list(read_csv_columns(ray_out / v.name / "track" / "track.csv")["frame"])
                for v in campaign.videos)
    return {"videos": len(clips), "serial_threads": default_threads, "serial_s": round(serial_s, 2),
            "serial_1thread_s": round(serial[1], 2), "ray_2workers_s": round(ray_s, 2),
            "speedup_x": round(serial_s / ray_s, 3), "speedup_over_1thread_x": round(serial[1] / ray_s, 3),
            "campaign_frames_equal": equal}


def measure_chunks(clip: Path, out: Path, workers: int, track_size: str | None = None) -> dict:
    """One long clip in one pass and in 2 chunks (module doc); ``track_size`` WxH or None (the frames' own)."""
    import ray
    import torch

    from snaketrack.batch.chunks import track_chunked
    from snaketrack.io import parse_size
    from snaketrack.tracker.run.loop import RunOptions, track_source
    from snaketrack.tracker.run.pipeline import PipelineConfig

    config = PipelineConfig(track_size=parse_size(track_size, "--track-size") if track_size else None)
    options = RunOptions(video=False, plots=False, progress=False)
    t0 = time.perf_counter()
    whole = track_source(clip, out / "sequential", config=config, options=options)
    sequential_s = time.perf_counter() - t0
    threads = torch.get_num_threads()  # the one pass on one thread, which on some CPUs tracks faster
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    track_source(clip, out / "sequential_1thread", config=config, options=options)
    sequential_1thread_s = time.perf_counter() - t0
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    chunked = track_chunked(clip, out / "chunked", chunks=2, overlap=30, config=config, workers=workers)
    chunked_s = time.perf_counter() - t0
    ray.shutdown()
    keys = ("joint_error_rad", "base_position_error_m", "head_position_error_m")
    return {"long_frames": whole["frames"], "sequential_threads": threads, "sequential_s": round(sequential_s, 2),
            "sequential_1thread_s": round(sequential_1thread_s, 2), "chunked_s": round(chunked_s, 2),
            "chunked_speedup_x": round(sequential_s / chunked_s, 3),
            "chunked_speedup_over_1thread_x": round(sequential_1thread_s / chunked_s, 3),
            "seams": chunked["seams"],
            **{f"sequential_{k}": whole.get(k) for k in keys},
            **{f"chunked_{k}": chunked.get(k) for k in keys},
            **{f"chunked_over_sequential_{k}": round(chunked[k] / whole[k], 3)
               for k in keys if whole.get(k) and chunked.get(k) is not None}}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_data_argument(ap)
    ap.add_argument("--videos", type=int, default=4, help="clips in the campaign (default 4)")
    ap.add_argument("--frames", type=int, default=90, help="frames per campaign clip (default 90)")
    ap.add_argument("--long-frames", type=int, default=600, help="frames of the long clip (default 600)")
    ap.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray (default 2)")
    ap.add_argument("--out", default="bench_out/batch", help="output folder")
    ap.add_argument("--track-size", default=None, metavar="WxH",
                    help="tracking size (default: the frames' own, 640x360, as `snaketrack track`)")
    ap.add_argument("--no-training", action="store_true", help="skip the training measurement")


def run(args: argparse.Namespace) -> dict:
    parser_of = getattr(args, "parser_of", None)
    if parser_of is None:
        raise InputError("the batch benchmark runs snaketrack's commands: run it as `snaketrack bench batch`")
    data, out = data_dir(args), Path(args.out)
    clips = [ensure_dataset_apart(data / f"drone-planar-snake-11-s{k}-{args.frames}f", "drone", "planar-snake-11",
                                  k, args.frames) for k in range(args.videos)]
    long_clip = ensure_dataset_apart(data / f"drone-planar-snake-11-s100-{args.long_frames}f", "drone",
                                     "planar-snake-11", 100, args.long_frames)
    print("campaign: serial, then on Ray", file=sys.stderr)
    result = {"workers": args.workers, "cpus": os.cpu_count(),
              "track_size": args.track_size or "frames' own",
              **measure_campaign(clips, out / "campaign", args.workers, parser_of, args.track_size)}
    from snaketrack.bench.suite.chunk_bound import cpu_throughput

    print("CPU: one process, then two", file=sys.stderr)
    result.update(cpu_throughput(repeats=2))
    print("long clip: one pass, then 2 chunks", file=sys.stderr)
    result.update(measure_chunks(long_clip, out / "chunks", args.workers, args.track_size))
    if not args.no_training:
        from snaketrack.bench.suite.train_ddp import measure_training

        print("training: one process, then 2 DDP workers", file=sys.stderr)
        result.update(measure_training(seeds=(0,), epochs=3, threads=2, one_thread=True))
    return result


BENCHMARK = Benchmark("batch", "batch processing on Ray: a campaign, a long clip in chunks, data-parallel training",
                      add_arguments, run, quick={"videos": 2, "frames": 10, "long_frames": 120, "no_training": True})
