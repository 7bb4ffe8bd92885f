"""``snaketrack sim planar``: one point-to-point scenario of the planar snake (seed §4).

Example::

    snaketrack sim planar --track head --control cc --broken 3,5,6 --out runs/head-cc-356
    snaketrack sim planar --variant corrected --track head --out runs/head-sjc-corrected
"""
from __future__ import annotations

import argparse
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--track", choices=("head", "com"), default="head",
                   help="point steered to the targets (default head)")
    p.add_argument("--variant", default=None,
                   help="authors: the authors' MATLAB model (default; joints start on the gait, a broken joint "
                        "holds that angle, head rows carry N m); corrected: the project's corrections (straight "
                        "start, head rows carry the head link's m, heading error wrapped)")
    p.add_argument("--control", choices=("sjc", "cc"), default="sjc",
                   help="single-joint or coupled control (default sjc)")
    p.add_argument("--broken", default=None, help="comma-separated broken joints, 1..9 from the tail, e.g. 3,5,6")
    p.add_argument("--t-end", type=float, default=None, help="simulated time limit in seconds (default 2000)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--method", default=None,
                   help="solve_ivp method (default: the variant's; authors BDF, as their ode15s; corrected RK45)")
    p.add_argument("--rtol", type=float, default=None,
                   help="relative tolerance (default: authors 1e-3, corrected 1e-6)")
    p.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance (default: authors 1e-6, corrected 1e-8)")
    p.add_argument("--sight-from", choices=("tracked", "head", "com"), default=None,
                   help="point the line of sight to the target starts from "
                        "(default: the tracked point, as in the paper)")
    p.add_argument("--broken-mode", choices=("locked", "passive"), default=None,
                   help="locked: a broken joint keeps its angle (default, as in the authors' code); "
                        "passive: it gets zero torque")
    p.add_argument("--animation", choices=("gif", "mp4", "none"), default="gif", help="animation format (default gif)")


def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from snaketrack.io import to_json
    from snaketrack.sim.control import ControllerConfig
    from snaketrack.sim.planar import PlanarScenario, parse_broken, run_scenario

    broken = parse_broken(args.broken)
    kw = {}
    for flag, key in (("variant", "variant"), ("t_end", "t_end_s"), ("method", "method"), ("rtol", "rtol"),
                      ("atol", "atol"), ("sight_from", "sight_from"), ("broken_mode", "broken_mode")):
        v = getattr(args, flag)
        if v is not None:
            kw[key] = v
    scn = PlanarScenario(track=args.track, controller=ControllerConfig(coupling=args.control, broken_joints=broken),
                         **kw)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    bar = tqdm(total=round(scn.t_end_s), unit="sim s", desc=scn.name, leave=False)

    def progress(t: float) -> None:
        bar.update(max(0, round(t) - bar.n))

    try:
        summary = run_scenario(scn, out, animation=None if args.animation == "none" else args.animation,
                               progress=progress)
    finally:
        bar.close()
    keys = ("scenario", "reach_times_s", "last_target_time_s", "beyond_limit_fraction", "wall_s", "sim_per_wall_x")
    print(to_json({k: summary[k] for k in keys}, indent=None))
    return 0


COMMANDS = [
    Command(
        name="sim planar",
        help="planar snake: head/CoM point-to-point tracking with SJC or CC control and broken joints",
        add_arguments=_add_arguments,
        run=_run,
    )
]
