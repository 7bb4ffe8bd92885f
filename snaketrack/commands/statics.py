"""``snaketrack statics``: shape of a rolling-joint cable-driven snake-like robot under gravity.

Solves the static model with gravity compensation
(:mod:`snaketrack.models.statics`) for four cable tensions and prints the
bending angles and the tip position: a readable table in degrees and
millimetres, or with ``--json`` one JSON object in SI units. ``--plot FILE``
draws the 3-D shape (with the no-gravity shape for comparison;
:func:`snaketrack.models.statics.plot.shape_image`).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError


def _floats(text: str, count: int, flag: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"{flag} {text!r}; expected {count} comma-separated numbers") from None
    if len(vals) != count:
        raise InputError(f"{flag} {text!r} has {len(vals)} values; expected {count} comma-separated numbers")
    return vals


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", default="rolling-joint-6",
                   help="shipped statics robot name (rolling-joint-6, rolling-joint-12) or a YAML file "
                        "(default rolling-joint-6)")
    mass = p.add_mutually_exclusive_group()
    mass.add_argument("--density", type=float, metavar="KG_PER_M3",
                      help="link material density [kg/m^3] (times the file's link volume)")
    mass.add_argument("--link-mass", type=float, metavar="KG", help="mass of each link [kg]")
    mass.add_argument("--material", metavar="NAME",
                      help="a material listed in the robot file (rolling-joint-6: abs, aluminium, titanium, steel)")
    p.add_argument("--alpha-deg", type=float, metavar="A",
                   help="orientation alpha [deg] in [-90, 90] (default: the robot file's)")
    p.add_argument("--tensions", required=True, metavar="T1,T2,T3,T4",
                   help="the four cable tensions [N], each >= 0")
    p.add_argument("--mount", choices=("ground", "ceiling", "none"), default="ground",
                   help="gravity preset: ground (gravity -z), ceiling (+z) or none (default ground)")
    p.add_argument("--gravity", metavar="GX,GY,GZ",
                   help="any gravity vector in the world frame [m/s^2]; overrides --mount")
    p.add_argument("--omega", type=float, default=None, help="initial relaxation omega in (0, 1] (default 1)")
    p.add_argument("--tol", type=float, default=None, help="stop when the tip moves less than this [m] (default 1e-12)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of a table")
    p.add_argument("--plot", metavar="FILE", help="draw the 3-D shape to FILE (.png, .pdf, .svg)")


def _table(robot, mount_label: str, tensions, res, ref) -> str:
    lines = [
        f"robot {robot.name}: {robot.n_links} links, L = {robot.length * 1e3:g} mm, "
        f"R = {robot.contact_radius * 1e3:g} mm, r = {robot.cable_distance * 1e3:g} mm, "
        f"alpha = {math.degrees(robot.alpha):g} deg, link mass = {robot.link_mass * 1e3:.4g} g",
        f"tensions [N] = {', '.join(f'{t:g}' for t in tensions)}; gravity: {mount_label}",
        f"converged in {res.iterations} sweeps (omega = {res.omega:g}, halvings = {res.halvings})",
        "",
        f"{'':10s}{'with gravity':>14s}{'no gravity':>14s}",
    ]
    for i, (a, b) in enumerate(zip(res.bending_angles, ref.bending_angles), start=1):
        lines.append(f"{f'theta_{i} (deg)':18s}{math.degrees(a):>6.2f}{math.degrees(b):>14.2f}")
    for name, a, b in zip(("x", "y", "z"), res.tip_position, ref.tip_position):
        lines.append(f"{f'tip {name} (mm)':18s}{a * 1e3:>6.2f}{b * 1e3:>14.2f}")
    return "\n".join(lines)


def _plot(path: str, robot, res, ref, title: str) -> None:
    from snaketrack.io import atomic_write_bytes
    from snaketrack.models.statics.plot import IMAGE_FORMATS, shape_image

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    if fmt not in IMAGE_FORMATS:
        raise InputError(f"--plot {path}: unknown image type {fmt!r}; expected .png, .pdf, .svg or .jpg")
    atomic_write_bytes(path, shape_image(robot, res, ref, title, fmt))


def run(args: argparse.Namespace) -> int:
    from snaketrack.io import to_json
    from snaketrack.models.statics import (
        StaticsConfig,
        load_statics_robot,
        mount_gravity,
        solve_no_gravity,
        solve_statics,
    )

    tensions = _floats(args.tensions, 4, "--tensions")
    alpha = None
    if args.alpha_deg is not None:
        if not math.isfinite(args.alpha_deg) or abs(args.alpha_deg) > 90:
            raise InputError(f"--alpha-deg {args.alpha_deg!r}; expected an orientation in [-90, 90] degrees")
        alpha = math.radians(args.alpha_deg)
    robot = load_statics_robot(
        args.robot, density=args.density, link_mass=args.link_mass, material=args.material, alpha=alpha
    )
    if args.gravity is not None:
        gravity = _floats(args.gravity, 3, "--gravity")
        mount_label = f"g = ({', '.join(f'{g:g}' for g in gravity)}) m/s^2"
    else:
        gravity = mount_gravity(args.mount)
        mount_label = f"{args.mount} mounted" if args.mount != "none" else "none"
    cfg_kw = {}
    if args.omega is not None:
        cfg_kw["omega"] = args.omega
        cfg_kw["min_omega"] = min(StaticsConfig().min_omega, args.omega) if args.omega > 0 else 1e-4
    if args.tol is not None:
        cfg_kw["tol"] = args.tol
    config = StaticsConfig(**cfg_kw)
    res = solve_statics(robot, tensions, gravity, config)
    ref = solve_no_gravity(robot, tensions)
    if args.plot:
        title = f"{robot.name}, T = [{', '.join(f'{t:g}' for t in tensions)}] N, {mount_label}"
        _plot(args.plot, robot, res, ref, title)
    if args.json:
        out = res.to_json()
        out.update(
            robot=robot.name,
            link_mass_kg=robot.link_mass,
            alpha_rad=robot.alpha,
            tensions_n=list(tensions),
            gravity_m_s2=list(gravity),
            no_gravity_bending_angles_rad=list(ref.bending_angles),
            no_gravity_tip_position_m=list(ref.tip_position),
        )
        if args.plot:
            out["plot"] = str(args.plot)
        print(to_json(out))
    else:
        print(_table(robot, mount_label, tensions, res, ref))
        if args.plot:
            print(f"plot written to {args.plot}")
    sys.stdout.flush()
    return 0


COMMANDS = [
    Command(
        name="statics",
        help="bending angles and tip position of a rolling-joint cable-driven robot under gravity",
        add_arguments=add_arguments,
        run=run,
    )
]
