"""``snaketrack sim closed-loop``: steer a snake robot through waypoints by vision.

Runs :func:`snaketrack.experiments.closed_loop.run_closed_loop` once per state source (``--states all``:
the open loop, the truth-fed reference, then the tracked run) and writes each into ``OUT/none/``,
``OUT/truth/`` or ``OUT/tracked/`` (:mod:`snaketrack.experiments.closed_loop_outputs`); when more than one
run is in ``--out``, their comparison ``OUT/summary.json`` and ``OUT/head_paths.png``. Only the
flags the user gives are passed on; every default lives in
:class:`snaketrack.experiments.closed_loop.ClosedLoopConfig`. Flag values are checked there, so a bad one
is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError

#: ``--states`` values: one run, or all three
STATES_CHOICES = ("all", "none", "truth", "tracked")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", default=None, metavar="floor|channel",
                   help="an open floor, robot on passive wheels, or the obstacle channel (default floor)")
    p.add_argument("--scene", default=None, metavar="drone|static",
                   help="camera: a drone over the planned route, or a tripod (default drone)")
    p.add_argument("--targets", default=None, metavar="X,Y;X,Y;...",
                   help="waypoints in the world [m], in order (default floor 0.7,0.4;1.4,-0.2;2.0,0.5; "
                        "channel 0.6,0;1.2,0;1.8,0)")
    p.add_argument("--states", default="all", metavar="all|none|truth|tracked",
                   help="the controller's states: none (open loop), the simulator's (the reference), the "
                        "tracking service's, or all three runs one after the other (default all)")
    p.add_argument("--pacing", default=None, metavar="lockstep|wall",
                   help="lockstep: the simulator waits for the controller's answer to each frame; wall: "
                        "frames at --time-scale times real time, the tracker takes the newest (default lockstep)")
    p.add_argument("--seed", type=int, default=None, help="seeds world, scene, camera, noise and masks (default 0)")
    p.add_argument("--time-scale", type=float, default=None, metavar="X",
                   help="with --pacing wall: wall seconds per simulated second (default 3)")
    p.add_argument("--duration", type=float, default=None,
                   help="longest run [s, simulated] (default floor 20, channel 12)")
    p.add_argument("--fps", type=float, default=None, help="camera frame rate [1/s, simulated] (default 15)")
    p.add_argument("--no-video", action="store_true", help="skip the tracked run's overlay.mp4")
    p.add_argument("--out", type=Path, required=True, help="output folder")


def config_from_args(args: argparse.Namespace, states: str):
    """A :class:`ClosedLoopConfig` from the flags the user set."""
    from snaketrack.experiments.closed_loop import ClosedLoopConfig, parse_targets

    kw: dict = {"states": states}
    for flag in ("world", "scene", "pacing", "seed", "time_scale", "duration", "fps"):
        v = getattr(args, flag)
        if v is not None:
            kw[flag] = v
    if args.targets is not None:
        kw["targets"] = parse_targets(args.targets)
    return ClosedLoopConfig(**kw)


def run(args: argparse.Namespace) -> int:
    from snaketrack.experiments.closed_loop import STATE_SOURCES, run_closed_loop
    from snaketrack.experiments.closed_loop_outputs import compare_runs, write_run

    if args.states not in STATES_CHOICES:
        raise InputError(f"--states {args.states!r}; expected one of {', '.join(STATES_CHOICES)}")
    order = STATE_SOURCES if args.states == "all" else (args.states,)
    configs = [config_from_args(args, s) for s in order]  # every flag checked before anything runs
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    for cfg in configs:
        print(f"{cfg.states} run: world {cfg.world}, seed {cfg.seed}, pacing {cfg.pacing}", flush=True)
        summary = write_run(run_closed_loop(cfg, progress=True), out / cfg.states, video=not args.no_video)
        print(json.dumps({k: summary[k] for k in ("states", "reach_times_s", "path_error_m", "latency_ms",
                                                   "frames_dropped", "flipped_states")}), flush=True)
    both = compare_runs(out)
    if both is not None:
        print(json.dumps({k: both[k] for k in ("reach_times_s", "reach_time_ratio_x", "within_1_3_x")}))
    print(f"wrote {out}")
    return 0


COMMANDS = [
    Command(
        name="sim closed-loop",
        help="steer a snake robot through waypoints from a live tracking service's states",
        add_arguments=add_arguments,
        run=run,
    )
]
