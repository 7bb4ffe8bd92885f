#!/usr/bin/env python
"""Reproduce the sixteen planar-snake scenarios (Figs. 12–18) of Sibilska-Mroziewicz et al. and tabulate them.

Faults {none, joint 3, joints 3,5,8, joints 3,5,6} × tracked point {centre, head}
× control {SJC, CC}. Each scenario runs with :mod:`snaketrack.sim.planar` and
writes its own folder (summary.json, trajectory.csv, plots) under ``--out``;
a finished folder is reused on the next run (cache per scenario, keyed by the
solver settings), so an interrupted run keeps its finished rows.

``--spread`` also re-runs every scenario with other solvers/tolerances and
reports the range of the last-target time (the reach times depend visibly on
the integrator).

Prints a table beside the paper's last-target times, then one JSON object as
the last line.

Usage::

    python scripts/reproduce_dynamics.py --out out/reproduce_dynamics [--spread] [--animation gif]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from snaketrack.io import read_json, write_json  # noqa: E402
from snaketrack.sim.control import ControllerConfig  # noqa: E402
from snaketrack.sim.planar import PlanarScenario, run_scenario  # noqa: E402
from snaketrack.sim.planar_outputs import plot_reach_times  # noqa: E402

FAULTS = {"none": (), "3": (3,), "3,5,8": (3, 5, 8), "3,5,6": (3, 5, 6)}

# Last-target times from the paper's text (§4.3). "stated": a number printed in
# the text; "derived": computed from a printed difference ("the difference
# between CC and SJC is 38 s for center tracking and 75 s for head tracking"),
# "about": the text's "almost the same, 320 s". None: not given (shown only as
# bars in Fig. 14, with no number in the text).
PAPER = {
    ("none", "com", "sjc"): (257, "stated"),
    ("none", "head", "sjc"): (297, "stated"),
    ("none", "com", "cc"): (None, "not given ('a little more' than com-SJC)"),
    ("none", "head", "cc"): (None, "not given"),
    ("3", "com", "cc"): (320, "about ('almost the same, 320 s')"),
    ("3", "head", "cc"): (320, "about ('almost the same, 320 s')"),
    ("3", "com", "sjc"): (358, "derived: CC + 38 s"),
    ("3", "head", "sjc"): (395, "derived: CC + 75 s"),
    ("3,5,8", "head", "cc"): (414, "stated"),
    ("3,5,8", "com", "cc"): (476, "stated"),
    ("3,5,8", "com", "sjc"): (760, "derived: CC + 284 s"),
    ("3,5,8", "head", "sjc"): (767, "derived: CC + 353 s"),
    ("3,5,6", "com", "sjc"): (1545, "stated"),
    ("3,5,6", "head", "sjc"): (1069, "stated"),
    ("3,5,6", "com", "cc"): (853, "stated"),
    ("3,5,6", "head", "cc"): (772, "stated"),
}

DEFAULT_SOLVER = ("RK45", 1e-6, 1e-8)
SPREAD_SOLVERS = [
    ("RK45", 1e-3, 1e-6),  # solve_ivp's own defaults
    ("RK45", 1e-4, 1e-6),
    ("RK45", 1e-8, 1e-10),
    ("DOP853", 1e-9, 1e-11),
    ("LSODA", 1e-6, 1e-8),
]


def scenario(fault: str, track: str, control: str, solver, t_end: float, sight_from: str = "tracked",
             broken_mode: str = "locked") -> PlanarScenario:
    method, rtol, atol = solver
    return PlanarScenario(
        track=track,
        sight_from=sight_from,
        broken_mode=broken_mode,
        controller=ControllerConfig(coupling=control, broken_joints=FAULTS[fault]),
        t_end_s=t_end,
        method=method,
        rtol=rtol,
        atol=atol,
    )


def solver_tag(solver) -> str:
    return f"{solver[0]}-r{solver[1]:.0e}-a{solver[2]:.0e}"


def run_cached(scn: PlanarScenario, out: Path, animation, plots: bool) -> dict:
    """Run one scenario or reuse its finished summary.json."""
    sfile = out / "summary.json"
    if sfile.is_file():
        s = read_json(sfile)
        sol = s.get("solver", {})
        if (
            sol.get("method") == scn.method
            and sol.get("rtol") == scn.rtol
            and sol.get("atol") == scn.atol
            and s.get("config", {}).get("t_end_s") == scn.t_end_s
        ):
            s["cached"] = True
            return s
    if plots:
        s = run_scenario(scn, out, animation=animation)
    else:
        from snaketrack.sim.planar import simulate
        from snaketrack.sim.planar_outputs import summarize

        s = summarize(simulate(scn))
        write_json(out / "summary.json", s)
    s["cached"] = False
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "out" / "reproduce_dynamics"))
    ap.add_argument("--t-end", type=float, default=2000.0, help="simulated time limit per scenario [s]")
    ap.add_argument("--spread", action="store_true", help="also run the other solvers/tolerances")
    ap.add_argument("--animation", choices=("gif", "mp4", "none"), default="none")
    ap.add_argument("--passive-diagnostic", action="store_true",
                    help="also run the centre-tracking fault cases with broken joints as free hinges (zero torque)")
    ap.add_argument("--no-sight-diagnostic", action="store_true",
                    help="skip the head-tracking runs steered by the centre-of-mass line of sight")
    args = ap.parse_args(argv)
    out = Path(args.out)
    anim = None if args.animation == "none" else args.animation
    keys = [(f, tr, c) for f in FAULTS for tr in ("com", "head") for c in ("sjc", "cc")]

    t0 = time.perf_counter()
    rows = []
    for f, tr, c in keys:
        scn = scenario(f, tr, c, DEFAULT_SOLVER, args.t_end)
        s = run_cached(scn, out / "default" / scn.name, anim, plots=True)
        how = "cached" if s["cached"] else f"{s['wall_s']:.1f} s wall"
        print(f"[{len(rows) + 1:2d}/16] {scn.name:18s} last={s['last_target_time_s']} ({how})", flush=True)
        rows.append({"fault": f, "track": tr, "control": c, "summary": s})

    # diagnostic: head tracking with the line of sight drawn from the centre of mass
    sight = {}
    if not args.no_sight_diagnostic:
        for f, tr, c in keys:
            if tr != "head":
                continue
            scn = scenario(f, tr, c, DEFAULT_SOLVER, args.t_end, sight_from="com")
            s = run_cached(scn, out / "sight_com" / scn.name, None, plots=False)
            sight[(f, tr, c)] = s["last_target_time_s"]
            print(f"  sight-from-com {scn.name:26s} last={s['last_target_time_s']}", flush=True)

    # diagnostic: broken joints as free hinges (zero torque) instead of locked
    passive = {}
    if args.passive_diagnostic:
        for f, tr, c in keys:
            if f == "none" or tr != "com":  # centre tracking only, to bound the cost
                continue
            scn = scenario(f, tr, c, DEFAULT_SOLVER, args.t_end, broken_mode="passive")
            s = run_cached(scn, out / "passive" / scn.name, None, plots=False)
            passive[(f, tr, c)] = s["last_target_time_s"]
            print(f"  passive-broken {scn.name:26s} last={s['last_target_time_s']}", flush=True)

    spread = {}
    if args.spread:
        for solver in SPREAD_SOLVERS:
            tag = solver_tag(solver)
            for f, tr, c in keys:
                scn = scenario(f, tr, c, solver, args.t_end)
                s = run_cached(scn, out / tag / scn.name, None, plots=False)
                spread.setdefault((f, tr, c), {})[tag] = s["last_target_time_s"]
                print(f"  spread {tag:26s} {scn.name:18s} last={s['last_target_time_s']}", flush=True)

    # Fig. 14-like bar chart of all sixteen
    plot_reach_times([r["summary"] for r in rows], out / "reach_times_all.png")
    _plot_paths(rows, out / "paths_all.png", out / "default")
    for f in FAULTS:
        _plot_joint_grid(rows, f, out / f"joint_angles_{f.replace(',', '_')}.png", out / "default")

    # table
    lines = []
    hdr = (f"{'faults':7s} {'track':5s} {'ctrl':4s} {'ours [s]':>9s} {'paper [s]':>9s} {'diff':>7s} {'beyond40':>8s} "
           f"{'spread [s]':>15s} {'CoM-sight':>9s} {'passive':>8s}  paper figure")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    records = []
    for r in rows:
        key = (r["fault"], r["track"], r["control"])
        s = r["summary"]
        ours = s["last_target_time_s"]
        paper, note = PAPER[key]
        diff = None if (ours is None or paper is None) else (ours - paper) / paper
        alt = [v for v in spread.get(key, {}).values()] + ([ours] if ours is not None else [])
        alt_ok = [v for v in alt if v is not None]
        spr = (min(alt_ok), max(alt_ok)) if spread and alt_ok else None
        lines.append(
            f"{r['fault']:7s} {r['track']:5s} {r['control']:4s} "
            f"{'never' if ours is None else f'{ours:9.1f}':>9s} "
            f"{'-' if paper is None else f'{paper:9d}':>9s} "
            f"{'-' if diff is None else f'{100 * diff:+6.1f}%':>7s} "
            f"{s['beyond_limit_fraction']:8.3f} "
            f"{'-' if spr is None else f'{spr[0]:.0f}-{spr[1]:.0f}':>15s} "
            f"{'-' if sight.get(key) is None else f'{sight[key]:9.1f}':>9s} "
            f"{'-' if passive.get(key) is None else f'{passive[key]:8.1f}':>8s}  {note}"
        )
        records.append(
            {
                "fault": r["fault"],
                "track": r["track"],
                "control": r["control"],
                "reach_times_s": s["reach_times_s"],
                "last_target_time_s": ours,
                "paper_last_target_time_s": paper,
                "paper_note": note,
                "rel_diff_x": diff,
                "beyond_limit_fraction": s["beyond_limit_fraction"],
                "max_abs_joint_deg": max(s["max_abs_joint_deg"]),
                "spread_s": spread.get(key),
                "spread_range_s": list(spr) if spr else None,
                "head_sight_from_com_last_s": sight.get(key),
                "passive_broken_last_s": passive.get(key),
            }
        )
    print("\n".join(lines))

    def last(f, tr, c):
        return next(x["last_target_time_s"] for x in records if (x["fault"], x["track"], x["control"]) == (f, tr, c))

    cc_faster = {
        f"{f}/{tr}": (last(f, tr, "cc") is not None
                      and (last(f, tr, "sjc") is None or last(f, tr, "cc") < last(f, tr, "sjc")))
        for f in FAULTS if f != "none" for tr in ("com", "head")
    }
    within = [abs(x["rel_diff_x"]) <= 0.10 for x in records if x["rel_diff_x"] is not None]
    result = {
        "solver": solver_tag(DEFAULT_SOLVER),
        "scenarios": records,
        "all_targets_reached": all(x["last_target_time_s"] is not None for x in records),
        "cc_faster_than_sjc_with_faults": cc_faster,
        "cc_faster_all_fault_cases": all(cc_faster.values()),
        "within_10pct_count": int(sum(within)),
        "compared_count": len(within),
        "wall_s": time.perf_counter() - t0,
    }
    write_json(out / "reproduce_dynamics.json", result)
    print(json.dumps(result))
    return 0


def _plot_paths(rows, path: Path, base: Path) -> None:
    """Tracked-point paths of every scenario, centre (left) and head (right) (Figs. 12–13)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snaketrack.io import read_csv_columns
    from snaketrack.sim.control import PAPER_TARGETS

    fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for ax, tr in zip(axes, ("com", "head")):
        for r in rows:
            if r["track"] != tr:
                continue
            f = base / r["summary"]["scenario"] / "trajectory.csv"
            if not f.is_file():
                continue
            d = read_csv_columns(f)
            ax.plot(d[f"{tr}_x"], d[f"{tr}_y"], lw=0.6, label=f"{r['control'].upper()} faults {r['fault']}")
        tg = np.asarray(PAPER_TARGETS)
        ax.plot(tg[:, 0], tg[:, 1], "rx", ms=9, mew=2)
        ax.set_title("centre of mass tracking" if tr == "com" else "head tracking")
        ax.set_aspect("equal")
        ax.set_ylabel("y [m]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    axes[-1].set_xlabel("x [m]")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _plot_joint_grid(rows, fault: str, path: Path, base: Path) -> None:
    """Joint angles of one fault case: centre (top) / head (bottom) × SJC (left) / CC (right) (Figs. 15–18)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snaketrack.io import read_csv_columns

    fig, axes = plt.subplots(2, 2, figsize=(11, 6), sharey=True)
    for r in rows:
        if r["fault"] != fault:
            continue
        ax = axes[0 if r["track"] == "com" else 1, 0 if r["control"] == "sjc" else 1]
        f = base / r["summary"]["scenario"] / "trajectory.csv"
        if not f.is_file():
            continue
        d = read_csv_columns(f)
        for i in range(1, 10):
            ax.plot(d["t"], np.degrees(d[f"phi_{i}"]), lw=0.3)
        ax.axhline(40, color="r")
        ax.axhline(-40, color="r")
        ax.set_title(f"{'centre' if r['track'] == 'com' else 'head'} {r['control'].upper()}, faults {fault}",
                     fontsize=9)
        ax.set_xlabel("t [s]")
    axes[0, 0].set_ylabel("joint angle [deg]")
    axes[1, 0].set_ylabel("joint angle [deg]")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
