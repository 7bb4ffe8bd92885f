"""The most two chunks can gain on this machine: two processes' throughput and the tracker's second thread.

Chunked tracking (``snaketrack track --chunks 2``) runs two single-threaded trackers side by side; the
sequential track it is compared with runs one tracker on torch's threads. So its speed-up cannot exceed
what two processes gain over one on this CPU, divided by what the sequential tracker gains from its
second thread. Measured here, each in fresh spawned processes:

- ``cpu_two_process_throughput_x``: a pure-Python loop in one process, then the same loop in two at
  once; two processes' work over the time they took (2.0 on two free cores).
- ``tracker_two_thread_gain_x``: the tracker on the first ``--frames`` frames of a clip with one torch
  thread over the same with two.
- ``ideal_chunked_s``: the two chunks of those frames (``chunk_ranges``, overlap ``--overlap``) tracked
  by two processes, each on one thread, started together once both have imported everything and
  opened the clip: chunked tracking without any start-up or scheduling cost. ``ideal_speedup_x`` is
  the two-thread sequential time over it: what no scheduler, Ray or other, can beat here.

Usage::

    snaketrack bench chunk-bound [--clip DATASET] [--frames 240] [--overlap 30] [--repeats 3]

The clip defaults to the 600-frame drone clip ``snaketrack bench batch`` renders (rendered when absent).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

from snaketrack.bench.cache import add_data_argument, data_dir
from snaketrack.bench.registry import Benchmark
from snaketrack.bench.tracking import ensure_dataset_apart
from snaketrack.errors import SnaketrackError


def _spin(n: int) -> None:
    x = 0
    for i in range(n):
        x += i


def cpu_throughput(n: int = 40_000_000, repeats: int = 3) -> dict:
    """Two processes' throughput over one's, for a pure-Python loop of ``n`` steps (module doc)."""
    ctx = mp.get_context("spawn")

    def run(k: int) -> float:
        procs = [ctx.Process(target=_spin, args=(n,)) for _ in range(k)]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return time.perf_counter() - t0

    ratios = []
    for _ in range(repeats):
        one, two = run(1), run(2)
        ratios.append(2 * one / two)
    return {"cpu_two_process_throughput_x": round(statistics.median(ratios), 3),
            "cpu_two_process_throughput_runs": [round(r, 3) for r in ratios]}


def _track(clip: str, start: int, stop: int, threads: int, barrier, results) -> None:
    """Open ``clip``, wait at ``barrier`` (None: no wait), track ``[start, stop)`` on ``threads`` threads."""
    import torch

    from snaketrack.tracker.run.loop import open_session, step_frames
    from snaketrack.tracker.run.pipeline import PipelineConfig

    torch.set_num_threads(threads)
    frames, session, mask_source = open_session(clip, config=PipelineConfig())
    if barrier is not None:
        barrier.wait()
    t0 = time.perf_counter()
    session.start()
    for _ in step_frames(frames, session, mask_source, None, start, stop):
        pass
    session.close()
    results.put((start, time.perf_counter() - t0))


def track_times(clip: str, ranges: list[tuple[int, int]], threads: int) -> tuple[float, list[float]]:
    """Track each range in a process of its own, all started together; (wall seconds, each one's)."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(len(ranges) + 1), ctx.Queue()
    procs = [ctx.Process(target=_track, args=(clip, a, b, threads, barrier, results)) for a, b in ranges]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    each = [results.get() for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SnaketrackError(f"a tracking process failed (exit status {p.exitcode})")
    return wall, [t for _, t in sorted(each)]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--clip", default=None, help="dataset folder (default: the batch benchmark's long clip)")
    add_data_argument(ap)
    ap.add_argument("--frames", type=int, default=240, help="frames tracked (default 240)")
    ap.add_argument("--overlap", type=int, default=30, help="the chunks' overlap in frames (default 30)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the CPU measurement (default 3)")


def run(args: argparse.Namespace) -> dict:
    from snaketrack.batch.chunks import chunk_ranges

    if args.clip is None:
        clip = ensure_dataset_apart(data_dir(args) / "drone-planar-snake-11-s100-600f", "drone", "planar-snake-11",
                                    100, 600)
    else:
        clip = Path(args.clip)
    ranges = chunk_ranges(args.frames, 2, args.overlap)
    result = {"clip": str(clip), "frames": args.frames, "ranges": ranges, "cpus": os.cpu_count()}
    print("CPU: one process, then two", file=sys.stderr)
    result.update(cpu_throughput(repeats=args.repeats))
    print("tracker: one thread, two threads, two chunks on one thread each", file=sys.stderr)
    one, _ = track_times(str(clip), [(0, args.frames)], 1)
    two, _ = track_times(str(clip), [(0, args.frames)], 2)
    ideal, each = track_times(str(clip), ranges, 1)
    result.update({
        "sequential_1thread_s": round(one, 2), "sequential_2threads_s": round(two, 2),
        "tracker_two_thread_gain_x": round(one / two, 3),
        "ideal_chunked_s": round(ideal, 2), "ideal_chunk_s": [round(t, 2) for t in each],
        "ideal_speedup_x": round(two / ideal, 3),
        "throughput_over_gain_x": round(result["cpu_two_process_throughput_x"] / (one / two), 3),
    })
    return result


BENCHMARK = Benchmark("chunk-bound", "the most two chunks can gain here: two processes' throughput over the tracker's "
                      "second thread",
                      add_arguments, run, quick={"frames": 40, "overlap": 10, "repeats": 1})
