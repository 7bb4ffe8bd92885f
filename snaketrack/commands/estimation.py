"""``snaketrack sim experiments`` and ``snaketrack estimate``: the Jacobian estimators at work.

Flags left unset fall back to the library defaults (ExperimentsConfig,
KFConfig, COConfig, SigmaConfig, SmoothingConfig), which live in one place.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from snaketrack.commands import Command
from snaketrack.errors import InputError, MissingFileError


def _filter_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("UKF / KF tuning (KFConfig)")
    g.add_argument("--q", type=float, default=None,
                   help="process noise variance per step on each entry of J [(m/rad)^2] (default 1e-3)")
    g.add_argument("--r", type=float, default=None,
                   help="measurement noise variance on each component of rdot [(m/s)^2] (default 1e-2)")
    g.add_argument("--p0", type=float, default=None, help="initial variance of each entry of J [(m/rad)^2] (default 1)")
    g.add_argument("--alpha", type=float, default=None, help="UKF sigma-point spread alpha (default 1)")
    g = p.add_argument_group("CO options (COConfig; off by default, as in the paper)")
    g.add_argument("--co-min-phidot", type=float, default=None,
                   help="skip CO updates while |phidot| < this [rad/s] (default 0)")
    g.add_argument("--co-reset", action="store_true", help="reset CO's J to zero when motion resumes after a halt")


def _configs(args: argparse.Namespace):
    from snaketrack.estimation.co import COConfig
    from snaketrack.estimation.kf import KFConfig
    from snaketrack.estimation.ukf import SigmaConfig

    kf = {k: getattr(args, k) for k in ("q", "r", "p0") if getattr(args, k) is not None}
    for k, v in kf.items():
        if not v > 0:
            raise InputError(f"--{k} = {v}; expected a positive variance")
    co = {}
    if args.co_min_phidot is not None:
        co["min_phidot"] = args.co_min_phidot
    if args.co_reset:
        co["reset_after_halt"] = True
    sigma = {"alpha": args.alpha} if args.alpha is not None else {}
    return KFConfig(**kf), COConfig(**co), SigmaConfig(**sigma)


# ---------------------------------------------------------------- sim experiments

def _add_experiments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="experiments_out", help="output folder (default experiments_out)")
    p.add_argument("--experiments", type=int, nargs="+", choices=(1, 2, 3), default=None,
                   help="which experiments to run (default 1 2 3)")
    p.add_argument("--duration", type=float, default=None, help="simulated time [s] (default 10)")
    p.add_argument("--noise-std", type=float, default=None,
                   help="std of white noise on measured rdot in experiments 1-2 [m/s] (default 0.001; 0 = clean)")
    p.add_argument("--exp3-noise-var", type=float, default=None,
                   help="variance of experiment 3's noise on rdot [(m/s)^2] (default 0.1)")
    p.add_argument("--resume", choices=("reference", "phase"), default=None,
                   help="how the gait resumes after experiment 2's halt "
                        "(default reference: references jump to phi_d(t))")
    p.add_argument("--seed", type=int, default=None, help="world and noise seed (default 0)")
    p.add_argument("--no-obstacles", action="store_true", help="remove the obstacles (control run)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    _filter_flags(p)


def _run_experiments(args: argparse.Namespace) -> int:
    from snaketrack.estimation.registry import ESTIMATORS
    from snaketrack.experiments.jacobian import ExperimentsConfig, run_experiments
    from snaketrack.experiments.jacobian_outputs import write_outputs

    kf, co, sigma = _configs(args)
    over = {"kf": kf, "co": co, "sigma": sigma}
    for flag, key in (("duration", "duration"), ("noise_std", "noise_std"), ("exp3_noise_var", "exp3_noise_var"),
                      ("resume", "resume"), ("seed", "seed")):
        v = getattr(args, flag)
        if v is not None:
            over[key] = v
    if args.experiments:
        over["experiments"] = tuple(args.experiments)
    if args.no_obstacles:
        over["obstacles"] = False
    cfg = ExperimentsConfig(**over)
    results, worlds = run_experiments(cfg, progress=True)
    summary = write_outputs(results, worlds, args.out, cfg, figures=not args.no_figures)
    for k in sorted(results):
        e = summary[f"experiment_{k}"]
        line = "  ".join(f"{n}: x {e[n]['mse_x']:.4g} y {e[n]['mse_y']:.4g}" for n in ESTIMATORS)
        print(f"experiment {k} MSE [(m/s)^2]  {line}")
        if "recovery_s" in e:
            print(f"experiment {k} recovery [s]  " + "  ".join(f"{n}: {v}" for n, v in e["recovery_s"].items()))
    print(f"wrote {Path(args.out) / 'summary.json'}")
    return 0


# ---------------------------------------------------------------- estimate

def _add_estimate(p: argparse.ArgumentParser) -> None:
    from snaketrack.estimation.registry import ESTIMATORS

    p.add_argument("states", help="states.csv (obstacle world) or track.csv (tracker), as CSV or as the JSON lines "
                                  "of 'snaketrack track --states FILE' (.jsonl, .ndjson, or a first character '{')")
    p.add_argument("--estimator", choices=list(ESTIMATORS), default="ukf", help="estimator (default ukf)")
    p.add_argument("--out", default="estimate_out", help="output folder (default estimate_out)")
    p.add_argument("--plane", choices=("xy", "xz", "yz"), default=None,
                   help="track.csv: camera-frame plane of the head position used for rdot "
                        "(default xy: camera looking down)")
    p.add_argument("--sg-window", type=int, default=None, help="Savitzky-Golay window [samples, odd] (default 9)")
    p.add_argument("--sg-order", type=int, default=None, help="Savitzky-Golay polynomial order (default 2)")
    p.add_argument("--no-figures", action="store_true", help="skip estimate.png")
    _filter_flags(p)


def _run_estimate(args: argparse.Namespace) -> int:
    from snaketrack.estimation.estimate import run_estimate
    from snaketrack.estimation.states import SmoothingConfig

    if not Path(args.states).is_file():
        raise MissingFileError(f"{args.states}: no such file")
    kf, co, sigma = _configs(args)
    sm = {}
    if args.sg_window is not None:
        sm["window"] = args.sg_window
    if args.sg_order is not None:
        sm["polyorder"] = args.sg_order
    s = run_estimate(args.states, args.estimator, args.out, plane=args.plane or "xy",
                     smoothing=SmoothingConfig(**sm), kf=kf, co=co, sigma=sigma, figures=not args.no_figures)
    print(f"{args.estimator}: mse_x {s['mse_x']:.4g} mse_y {s['mse_y']:.4g} (m/s)^2 over {s['steps']} steps; "
          f"wrote {Path(args.out) / 'estimate.csv'}")
    return 0


COMMANDS = [
    Command(name="sim experiments",
            help="the Jacobian paper's three experiments (baseline, halt, noise) on the MuJoCo obstacle world",
            add_arguments=_add_experiments, run=_run_experiments),
    Command(name="estimate",
            help="estimate the head Jacobian (ukf, co or kf) from a states.csv or track.csv (CSV or JSON lines)",
            add_arguments=_add_estimate, run=_run_estimate),
]
