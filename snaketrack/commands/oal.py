"""``snaketrack sim oal``: run the obstacle-aided-locomotion world and write its states.

Writes into ``--out``: ``states.csv`` (docs/conventions.md), ``summary.json``
(``head_displacement_m``, ``mean_speed_m_s`` and more, plus the settings) and
``head_path.png`` (the head's path among the obstacles, with the body drawn
at a few instants). Only the flags the user gives are passed on; every
default lives in :class:`snaketrack.sim.oal.OALConfig`.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import math
from pathlib import Path

import numpy as np

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


def plot_head_path(result, path: Path) -> None:
    """PNG of the head path (x, y) among the obstacles, with the body at a few instants."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import mujoco

    from snaketrack.io import atomic_write_bytes
    from snaketrack.sim.mjcf import obstacle_positions
    from snaketrack.sim.oal import oal_model

    cfg = result.config
    model, robot = oal_model(cfg)
    data = mujoco.MjData(model)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"link_{i + 1}") for i in range(robot.n_links)]
    T = len(result.t)
    fig, ax = plt.subplots(figsize=(10, 3.6), dpi=120)
    if cfg.obstacles:
        for x, y in obstacle_positions():
            ax.add_patch(plt.Circle((x, y), cfg.obstacle_radius, color="0.35"))
    snaps = np.linspace(0, T - 1, 6).astype(int)
    cmap = plt.get_cmap("viridis")
    for j, n in enumerate(snaps):
        data.qpos[:] = result.qpos[n]
        mujoco.mj_kinematics(model, data)
        starts = data.xpos[ids]
        ends = starts + data.xmat[ids][:, [0, 3, 6]] * robot.lengths[:, None]
        pts = np.vstack([starts[:, :2], ends[-1:, :2]])
        ax.plot(pts[:, 0], pts[:, 1], "-", color=cmap(j / max(1, len(snaps) - 1)), lw=3, alpha=0.55,
                label=f"body t={result.t[n]:.1f} s")
    ax.plot(result.head_xy[:, 0], result.head_xy[:, 1], "-", color="tab:red", lw=1.0, label="head path")
    ax.plot(*result.head_xy[0], "o", color="tab:red", ms=4)
    s = result.summary()
    title = (f"{robot.name}: head displacement {s['head_displacement_m']:.2f} m in {s['duration_s']:.1f} s, "
             f"{'obstacles' if cfg.obstacles else 'no obstacles'}")
    if cfg.halt is not None:
        title += f", halt {cfg.halt[0]:g}-{cfg.halt[1]:g} s ({cfg.resume})"
    ax.set_title(title, fontsize=9)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    xs = np.concatenate([result.head_xy[:, 0], result.qpos[:, 0]])
    ax.set_xlim(xs.min() - 0.3, xs.max() + 0.3)
    ax.set_ylim(-0.4, 0.4)
    ax.legend(fontsize=6, loc="upper left", ncol=4)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def run(args: argparse.Namespace) -> int:
    from snaketrack.io import write_json
    from snaketrack.sim.oal import simulate_oal

    cfg = config_from_args(args)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    result = simulate_oal(cfg, progress=True)
    result.write_states_csv(out / "states.csv")
    summary = result.summary()
    summary["config"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(cfg).items()}
    write_json(out / "summary.json", summary)
    if not args.no_plot:
        plot_head_path(result, out / "head_path.png")
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
