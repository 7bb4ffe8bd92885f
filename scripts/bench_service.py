"""Benchmark of the live service: latency, states per second, skipped frames, a slow client, memory.

Plays a synthetic clip (rendered into ``--data`` when absent) in a loop at its
own 30 frames/s into ``snaketrack serve``'s service on the loopback, with a
fast client and one that reads ten times too slowly, for ``--seconds`` of
wall clock; the same clip tracked without the service, in the same process,
gives ``reference_fps`` (:mod:`snaketrack.service.benchmark`). An hour's soak
is ``--seconds 3600``.

Usage::

    MUJOCO_GL=egl .venv/bin/python scripts/bench_service.py [--data bench_data] [--scene static]
        [--robot planar-snake-11] [--seconds 60] [--track-size 640x360] [--out bench_out/service]

Progress goes to stderr; the last line printed is one JSON object with ``latency_ms_p50``,
``latency_ms_p95``, ``fps``, ``frames_dropped``, ``slow_client_drops``, ``rss_mb_start`` and ``rss_mb_end``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snaketrack.errors import SnaketrackError  # noqa: E402
from snaketrack.threads import ThreadPolicy, quiet_openmp  # noqa: E402

quiet_openmp()  # as the command line does, before torch is loaded


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="bench_data", help="folder of the clips, rendered when absent")
    ap.add_argument("--dataset", default=None, help="a dataset folder to play instead of a rendered clip")
    ap.add_argument("--scene", default="static", help="the rendered clip's scene (default static)")
    ap.add_argument("--robot", default="planar-snake-11", help="the rendered clip's robot")
    ap.add_argument("--frames", type=int, default=150, help="frames of the rendered clip (default 150)")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the run [s] (default 60)")
    ap.add_argument("--track-size", default="640x360", metavar="WxH", help="tracking size (default 640x360)")
    ap.add_argument("--threads", type=int, default=None,
                    help="the tracker's and the segmenter's threads (default: serve's policy, one each)")
    ap.add_argument("--out", default="bench_out/service", help="folder for soak.png and soak.json")
    args = ap.parse_args(argv)
    from snaketrack.io import parse_size
    from snaketrack.service.benchmark import ServiceBenchConfig, run_service_benchmark
    from snaketrack.tracker.benchmark import ensure_dataset

    try:
        config = ServiceBenchConfig(seconds=args.seconds, track_size=parse_size(args.track_size, "--track-size"))
        dataset = Path(args.dataset) if args.dataset else Path(args.data) / f"{args.scene}-{args.robot}-s0"
        if not args.dataset:  # rendered in a process of its own: the renderer's threads would share the CPU
            import multiprocessing as mp

            render = mp.get_context("spawn").Process(target=ensure_dataset,
                                                     args=(dataset, args.scene, args.robot, 0, args.frames))
            render.start()
            render.join()
            if render.exitcode != 0:
                print(f"error: rendering {dataset} failed", file=sys.stderr)
                return 2
        ThreadPolicy.of(args.threads).apply()
        result = run_service_benchmark(dataset, config, out=args.out)
    except SnaketrackError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
