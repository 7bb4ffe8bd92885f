"""Benchmark of ``track`` and ``serve`` on a shared CPU: quiet, then beside one CPU-bound competitor process.

Each run is the command line itself, in a process of its own (its thread policy as a user gets it):
``snaketrack track CLIP --no-video --max-frames N`` (``fps`` and ``fps_excluding_search`` from its
``summary.json``) and ``snaketrack serve CLIP --port 0 --max-frames N`` (a recording at the tracker's
pace; ``track_fps`` and the wall-clock rate from the figures it prints). The competitor,
``python -c "while True: pass"`` (:class:`snaketrack.cpu_load.Competitor`), is started before the loaded
run and stopped after it; every run is bounded by ``--timeout``. ``--threads`` runs each command with
that ``--threads`` too, side by side with the default policy. ``--stop-after S`` also signals a
``serve --realtime --loop --record`` S seconds after it serves, beside a competitor, and times its exit.

Usage::

    snaketrack bench shared-cpu --clip DATA/drone-planar-s0
        [--frames 60] [--threads 2] [--commands track,serve] [--timeout 240] [--stop-after 3]

The result gives, per command and policy, the quiet and loaded figures and
``kept`` (loaded / quiet frame rate; the target is at least 0.4).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark
from snaketrack.cpu_load import Competitor
from snaketrack.errors import InputError

#: the folder that holds the package, put on the commands' PYTHONPATH
ROOT = Path(__file__).resolve().parents[3]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def run_track(clip: str, frames: int, threads, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "snaketrack", "track", clip, "--no-video", "--max-frames", str(frames),
               "--out", out] + ([] if threads is None else ["--threads", str(threads)])
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, timeout=timeout, env=_env(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        s = json.loads((Path(out) / "summary.json").read_text())
    return {"fps": s["fps"], "fps_excluding_search": s["fps_excluding_search"], "search_s": s["search_s"],
            "wall_s": wall}


def run_serve(clip: str, frames: int, threads, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "snaketrack", "serve", clip, "--port", "0", "--max-frames", str(frames),
           "--overlay-hz", "0"] + ([] if threads is None else ["--threads", str(threads)])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, check=True, timeout=timeout, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    f = json.loads(p.stdout.strip().splitlines()[-1])
    return {"fps": f["track_fps"], "frames_tracked": f["frames_tracked"], "wall_fps": f["frames_tracked"] / wall,
            "wall_s": wall}


#: the MCAP file's magic, at its start and its end
MCAP_MAGIC = b"\x89MCAP0\r\n"


def mcap_has_summary(path: Path) -> bool:
    """Whether the MCAP file at ``path`` was closed with its summary (index): it ends in the footer record
    (opcode 0x02, 20 bytes: summary_start, summary_offset_start, summary_crc) and the magic, and the footer's
    summary_start is not 0 (the MCAP specification: 0 means no summary section)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            if f.tell() < 37 + len(MCAP_MAGIC):
                return False
            f.seek(-37, 2)
            tail = f.read()
    except OSError:
        return False
    if tail[-8:] != MCAP_MAGIC or tail[0] != 0x02 or int.from_bytes(tail[1:9], "little") != 20:
        return False
    return int.from_bytes(tail[9:17], "little") != 0


def run_stop(clip: str, after_s: float, timeout: float) -> dict:
    """``serve CLIP --realtime --loop --record`` beside a competitor, SIGTERM ``after_s`` [s] after it serves:
    the time to exit, its status, whether a native library aborted, whether the MCAP has its summary."""
    import signal

    with tempfile.TemporaryDirectory() as tmp, Competitor(limit_s=timeout + 30):
        record = Path(tmp) / "run.mcap"
        p = subprocess.Popen([sys.executable, "-m", "snaketrack", "serve", clip, "--port", "0", "--realtime", "--loop",
                              "--record", str(record)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_env())
        p.stderr.readline()  # serving ws://...
        time.sleep(after_s)
        t0 = time.perf_counter()
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        exit_s = time.perf_counter() - t0
        indexed = mcap_has_summary(record)
    figures = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    return {"exit_s": exit_s, "returncode": p.returncode, "terminate_message": "terminate called" in err,
            "mcap_indexed": indexed, "frames_tracked": figures.get("frames_tracked")}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--clip", required=True, help="a dataset folder (frames/, masks/, meta.json)")
    ap.add_argument("--frames", type=int, default=60, help="frames per run (default 60)")
    ap.add_argument("--threads", type=int, default=None, help="also run each command with --threads N")
    ap.add_argument("--commands", default="track,serve",
                    help="comma-separated: track, serve (default track,serve); none: only --stop-after")
    ap.add_argument("--timeout", type=float, default=240.0, help="each run's limit [s] (default 240)")
    ap.add_argument("--stop-after", type=float, default=None, metavar="S",
                    help="also signal serve (SIGTERM) S seconds after it serves, beside a competitor, and time its "
                         "exit (stop_exit_s; the target is within 5 s)")


def run(args: argparse.Namespace) -> dict:
    runners = {"track": run_track, "serve": run_serve}
    result: dict = {"clip": args.clip, "frames": args.frames, "cpus": os.cpu_count()}
    policies = [None] + ([args.threads] if args.threads is not None else [])
    names = [c for c in args.commands.split(",") if c and c != "none"]
    unknown = [c for c in names if c not in runners]
    if unknown:
        raise InputError(f"--commands {args.commands!r}: {', '.join(unknown)} unknown; expected track and/or serve, "
                         "comma-separated, or none")
    for name in names:
        runner = runners[name]
        for threads in policies:
            key = f"{name}" + ("" if threads is None else f"_threads{threads}")
            print(f"{key}: quiet", file=sys.stderr, flush=True)
            quiet = runner(args.clip, args.frames, threads, args.timeout)
            print(f"{key}: beside a competitor", file=sys.stderr, flush=True)
            with Competitor(limit_s=args.timeout + 30):
                loaded = runner(args.clip, args.frames, threads, args.timeout)
            result[key] = {"quiet": quiet, "loaded": loaded, "kept": loaded["fps"] / quiet["fps"]}
            if "fps_excluding_search" in quiet:
                result[key]["kept_excluding_search"] = \
                    loaded["fps_excluding_search"] / quiet["fps_excluding_search"]
    if args.stop_after is not None:
        print("serve: SIGTERM beside a competitor", file=sys.stderr, flush=True)
        result["stop"] = run_stop(args.clip, args.stop_after, args.timeout)
    return result


BENCHMARK = Benchmark("shared-cpu", "track and serve on a shared CPU: quiet, then beside one CPU-bound competitor "
                      "process", add_arguments, run, quick={"frames": 5})
