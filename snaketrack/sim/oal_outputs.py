"""An obstacle-aided-locomotion run on disk: ``states.csv``, ``summary.json`` and the head-path figure."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np

from snaketrack.io import atomic_write_bytes, write_json
from snaketrack.sim.mjcf import obstacle_positions
from snaketrack.sim.oal import oal_model


def write_oal_outputs(result, out: Path, plot: bool = True) -> dict:
    """Write one run of :func:`~snaketrack.sim.oal.simulate_oal` into the existing folder ``out``.

    result: the :class:`~snaketrack.sim.oal.OALResult`.
    Writes ``states.csv`` (docs/conventions.md), ``summary.json``
    (:meth:`~snaketrack.sim.oal.OALResult.summary`: ``head_displacement_m``,
    ``mean_speed_m_s`` and more in SI units, plus ``config``, the
    :class:`~snaketrack.sim.oal.OALConfig` fields) and, if ``plot``,
    ``head_path.png`` (:func:`plot_head_path`; without ``plot`` an earlier run's is removed, as it would not
    show these states). Returns the summary written.
    """
    out = Path(out)
    result.write_states_csv(out / "states.csv")
    summary = result.summary()
    cfg = result.config
    summary["config"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(cfg).items()}
    write_json(out / "summary.json", summary)
    if plot:
        plot_head_path(result, out / "head_path.png")
    else:
        (out / "head_path.png").unlink(missing_ok=True)
    return summary


def plot_head_path(result, path: Path) -> None:
    """PNG of the head path (x, y) [m] among the obstacles, with the body at six instants.

    result: the :class:`~snaketrack.sim.oal.OALResult` (its ``config`` rebuilds the
    world to place the links from ``qpos``); path: the PNG written (atomically).
    """
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib
    import mujoco  # deferred: the module imports without MuJoCo

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
