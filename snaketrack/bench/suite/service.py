"""Benchmark of the live service: latency, states per second, skipped frames, a slow client, memory.

Plays a synthetic clip (rendered into ``--data`` when absent) in a loop at its
own 30 frames/s into ``snaketrack serve``'s service on the loopback, with a
fast client and one that reads ten times too slowly, for ``--seconds`` of
wall clock; the same clip tracked without the service, in the same process,
gives ``reference_fps`` (:mod:`snaketrack.bench.service_rate`). An hour's soak
is ``--seconds 3600``.

Usage::

    snaketrack bench service [--data DIR] [--scene static]
        [--robot planar-snake-11] [--seconds 60] [--track-size 640x360] [--out bench_out/service]
    snaketrack bench service --dataset VIDEO --robot NAME|FILE --masks segmenter:MODEL.pt [--track-size WxH]

The second plays a video of a real robot, each frame segmented by the model's live setting in the service
(and in the reference), as ``snaketrack serve VIDEO --masks segmenter:MODEL.pt --realtime`` runs it.

The result has ``latency_ms_p50``,
``latency_ms_p95``, ``fps``, ``frames_dropped``, ``slow_client_drops``, ``rss_mb_start`` and ``rss_mb_end``;
``first_state_s`` (from the capture's start to the fast client's first state [s]); ``cpu_ms_per_state``, the
CPU time [ms] each thread of the service (by name) and each client process spent per tracked state over the
run, beside ``reference_cpu_ms_per_frame`` (reading, preparing and tracking a frame without the service);
``reference_fps_at_stride``, ``reference_cpu_ms_per_frame_at_stride`` and ``reference_search_s_at_stride``:
the same reference tracking every ``reference_stride``-th frame, the service's own share of the frames
(captured / tracked), in the same process after the run: the tracker's work at the skip the service had.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from snaketrack.bench.cache import add_data_argument, data_dir
from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_data_argument(ap)
    ap.add_argument("--dataset", default=None,
                    help="a dataset folder or a video file to play instead of a rendered clip")
    ap.add_argument("--masks", default=None, metavar="segmenter:MODEL.pt",
                    help="segment each frame with this model's live setting (a video needs it; default: the "
                         "dataset's truth masks, corrupted like a segmenter's)")
    ap.add_argument("--segmenter-flips", type=int, default=None, choices=[1, 2, 4],
                    help="the segmenter's test-time flips (default: the live setting's, the model's, at most 2)")
    ap.add_argument("--segmenter-scale", type=float, default=None, metavar="S",
                    help="the segmenter's input size over its trained size (default: the model's)")
    ap.add_argument("--scene", default="static", help="the rendered clip's scene (default static)")
    ap.add_argument("--robot", default=None,
                    help="the robot's name or file: the rendered clip's (default planar-snake-11), or that of a "
                         "source whose meta.json names none")
    ap.add_argument("--frames", type=int, default=150, help="frames of the rendered clip (default 150)")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the run [s] (default 60)")
    ap.add_argument("--track-size", default="640x360", metavar="WxH", help="tracking size (default 640x360)")
    ap.add_argument("--threads", type=int, default=None,
                    help="the tracker's and the segmenter's threads (default: serve's policy, one each)")
    ap.add_argument("--catch-up-gap", type=int, default=None, metavar="FRAMES",
                    help="after a slow frame the tracker takes every FRAMES-th frame back to the newest (default: "
                         "serve's, the frames within 0.1 s; 0: always the newest)")
    ap.add_argument("--catch-up-s", type=float, default=1.0, metavar="S",
                    help="frames at most S seconds behind the newest are kept for the catch-up (default 1)")
    ap.add_argument("--out", default="bench_out/service", help="folder for soak.png and soak.json")


def run(args: argparse.Namespace) -> dict:
    from snaketrack.bench.service_rate import ServiceBenchConfig, run_service_benchmark
    from snaketrack.bench.tracking import ensure_dataset_apart
    from snaketrack.errors import InputError
    from snaketrack.io import parse_size
    from snaketrack.threads import ThreadPolicy

    if args.masks is not None and not args.masks.startswith("segmenter:"):
        raise InputError(f"--masks {args.masks}: expected segmenter:MODEL.pt")
    config = ServiceBenchConfig(seconds=args.seconds, track_size=parse_size(args.track_size, "--track-size"),
                                catch_up_gap=args.catch_up_gap, catch_up_s=args.catch_up_s, masks=args.masks,
                                segmenter_flips=args.segmenter_flips, segmenter_scale=args.segmenter_scale,
                                robot=args.robot if args.dataset else None)
    if args.dataset:
        dataset = Path(args.dataset)
    else:
        robot = args.robot or "planar-snake-11"
        dataset = ensure_dataset_apart(data_dir(args) / f"{args.scene}-{robot}-s0", args.scene, robot, 0,
                                       args.frames)
    ThreadPolicy.of(args.threads).apply()
    return run_service_benchmark(dataset, config, out=args.out)


BENCHMARK = Benchmark("service", "the live service: latency, states per second, skipped frames, a slow client, memory",
                      add_arguments, run, quick={"seconds": 3.0, "frames": 10})
