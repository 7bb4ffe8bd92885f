"""``snaketrack sim closed-loop``: steer the obstacle world's snake through waypoints by vision.

Runs :func:`snaketrack.sim.closed_loop.run_closed_loop` once per state source (``--states
both``: the truth-fed reference, then the tracked run) and writes each into ``OUT/truth/`` or
``OUT/tracked/`` (:mod:`snaketrack.sim.closed_loop_outputs`); when both are in ``--out``, their
comparison ``OUT/summary.json`` and ``OUT/head_paths.png``. Only the flags the user gives are
passed on; every default lives in :class:`snaketrack.sim.closed_loop.ClosedLoopConfig`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scene", choices=("drone", "static"), default=None,
                   help="camera: a drone following the planned route, or a tripod (default drone)")
    p.add_argument("--targets", default=None, metavar="X,Y;X,Y;...",
                   help="waypoints in the world [m], in order (default 0.6,0;1.2,0;1.8,0)")
    p.add_argument("--states", choices=("truth", "tracked", "both"), default="both",
                   help="the controller's states: from the tracking service, the simulator's (the reference), "
                        "or both runs one after the other (default both)")
    p.add_argument("--seed", type=int, default=None, help="seeds world, scene, camera, noise and masks (default 0)")
    p.add_argument("--time-scale", type=float, default=None, metavar="X",
                   help="wall seconds per simulated second, so the tracker keeps up (default 3)")
    p.add_argument("--duration", type=float, default=None, help="longest run [s, simulated] (default 12)")
    p.add_argument("--fps", type=float, default=None, help="camera frame rate [1/s, simulated] (default 15)")
    p.add_argument("--no-video", action="store_true", help="skip the tracked run's overlay.mp4")
    p.add_argument("--out", type=Path, required=True, help="output folder")


def config_from_args(args: argparse.Namespace, states: str):
    """A :class:`ClosedLoopConfig` from the flags the user set."""
    from snaketrack.sim.closed_loop import ClosedLoopConfig, parse_targets

    kw: dict = {"states": states}
    for flag, name in (("scene", "scene"), ("seed", "seed"), ("time_scale", "time_scale"),
                       ("duration", "duration"), ("fps", "fps")):
        v = getattr(args, flag)
        if v is not None:
            kw[name] = v
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed {args.seed}; expected a non-negative integer")
    if args.targets is not None:
        kw["targets"] = parse_targets(args.targets)
    return ClosedLoopConfig(**kw)


def run(args: argparse.Namespace) -> int:
    from snaketrack.sim.closed_loop import run_closed_loop
    from snaketrack.sim.closed_loop_outputs import compare_runs, write_run

    order = ("truth", "tracked") if args.states == "both" else (args.states,)
    configs = [config_from_args(args, s) for s in order]  # every flag checked before anything runs
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    for cfg in configs:
        print(f"{cfg.states}-fed run, seed {cfg.seed}, time scale {cfg.time_scale}x", flush=True)
        summary = write_run(run_closed_loop(cfg, progress=True), out / cfg.states, video=not args.no_video)
        print(json.dumps({k: summary[k] for k in ("states", "reach_times_s", "path_error_m", "latency_ms",
                                                   "frames_dropped")}), flush=True)
    both = compare_runs(out)
    if both is not None:
        print(json.dumps({k: both[k] for k in ("reach_time_ratio_x", "within_1_3_x")}))
    print(f"wrote {out}")
    return 0


COMMANDS = [
    Command(
        name="sim closed-loop",
        help="steer the obstacle world's snake through waypoints from a live tracking service's states",
        add_arguments=add_arguments,
        run=run,
    )
]
