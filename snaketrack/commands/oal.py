"""``snaketrack sim oal``: run the obstacle-aided-locomotion world and write its states.

Writes into ``--out``: ``states.csv`` (docs/conventions.md), ``summary.json``
(``head_displacement_m``, ``mean_speed_m_s`` and more, plus the settings) and
``head_path.png`` (the head's path among the obstacles, with the body drawn
at a few instants), through :func:`snaketrack.sim.oal_outputs.write_oal_outputs`.
Only the flags the user gives are passed on; every default lives in
:class:`snaketrack.sim.oal.OALConfig`.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError


def parse_halt(text: str) -> tuple[float, float]:
    """``"5:7"`` → (5.0, 7.0) seconds.

    >>> parse_halt("5:7")
    (5.0, 7.0)
    """
    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        t0, t1 = float(parts[0]), float(parts[1])
    except ValueError:
        raise InputError(f"--halt {text!r}; expected START:END in seconds, e.g. 5:7") from None
    if not (math.isfinite(t0) and math.isfinite(t1) and 0 <= t0 < t1):
        raise InputError(f"--halt {text!r}; expected 0 <= START < END")
    return t0, t1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, default=None, help="simulated time [s] (default 10)")
    p.add_argument("--dt", type=float, default=None, help="time step [s] (default 1/240)")
    p.add_argument("--halt", type=str, default=None, metavar="START:END",
                   help="freeze the undulation between two times [s], e.g. 5:7")
    p.add_argument("--resume", choices=["reference", "phase"], default=None,
                   help="after a halt: references jump back to phi_d(t) (reference, default) "
                        "or the wave continues from the frozen phase (phase)")
    p.add_argument("--no-obstacles", action="store_true", help="empty floor (isotropic ground friction)")
    p.add_argument("--seed", type=int, default=None, help="seed of the initial perturbation (default 0)")
    p.add_argument("--robot", type=str, default=None, help="robot name or YAML file (default planar-snake-11)")
    p.add_argument("--floor-friction", type=float, default=None, help="ground friction coefficient (default 0.5)")
    p.add_argument("--no-plot", action="store_true", help="skip head_path.png")
    p.add_argument("--out", type=Path, required=True, help="output folder")


def config_from_args(args: argparse.Namespace):
    """An :class:`OALConfig` from the flags the user set."""
    from snaketrack.sim.oal import OALConfig

    kw: dict = {}
    for name in ("duration", "dt", "resume", "seed", "robot"):
        v = getattr(args, name, None)
        if v is not None:
            kw[name] = v
    if getattr(args, "floor_friction", None) is not None:
        kw["floor_friction"] = args.floor_friction
    if args.halt is not None:
        kw["halt"] = parse_halt(args.halt)
    if args.no_obstacles:
        kw["obstacles"] = False
    if "resume" in kw and "halt" not in kw:
        raise InputError("--resume given without --halt; it only applies after a halt")
    return OALConfig(**kw)


def run(args: argparse.Namespace) -> int:
    from snaketrack.sim.oal import simulate_oal
    from snaketrack.sim.oal_outputs import write_oal_outputs

    cfg = config_from_args(args)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    result = simulate_oal(cfg, progress=True)
    summary = write_oal_outputs(result, out, plot=not args.no_plot)
    print(f"head displacement {summary['head_displacement_m']:.3f} m "
          f"(x {summary['head_displacement_x_m']:+.3f} m), mean speed {summary['mean_speed_m_s']:.3f} m/s; "
          f"wrote {out / 'states.csv'}, {out / 'summary.json'}"
          + ("" if args.no_plot else f", {out / 'head_path.png'}"))
    return 0


COMMANDS = [
    Command(
        name="sim oal",
        help="simulate obstacle-aided locomotion in MuJoCo; write states.csv, summary.json, head_path.png",
        add_arguments=add_arguments,
        run=run,
    )
]
