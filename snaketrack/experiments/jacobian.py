"""The Jacobian paper's three experiments on the MuJoCo obstacle world.

1. baseline: the undulating 11-link snake among the obstacles, 10 s at 1/240 s;
2. halt: undulation frozen at 5 s and resumed at 7 s;
3. noise: experiment 1 with N(0, Σ), Σ = 0.1·I (m/s)², added to the measured ṙ.

Each runs every estimator of the registry
(:data:`~snaketrack.estimation.registry.ESTIMATORS`: ``"ukf"``, filterpy's UKF;
``"co"``, the closed-form CO update; ``"kf"``, the exact Kalman filter, equal
to the UKF) on the same (φ̇, measured ṙ), and scores the paper's metric: predict
ṙ_{n+1} = Ĵ_n φ̇_{n+1} and take the MSE per component against the *true*
(noise-free) ṙ_{n+1}. Extras: experiment 2 adds ``"co_reset"`` (CO with the
paper's suggested reset after a halt), experiment 3 adds ``"kf_matched_r"``
(the KF with R set to the true noise variance).

Choices the paper leaves open, as explicit options with these defaults:

- ``noise_std = 0.001`` m/s: white noise on the measured ṙ in experiments 1
  and 2, a sensor floor. With perfectly clean ṙ CO diverges far less during
  the halt; with this floor it diverges as in the paper. Set 0 for clean data.
- ``resume = "reference"``: after the halt the joint references jump back to
  φ_d(t) (the gait's clock kept running), which gives the paper's ~0.3 s
  transient; ``"phase"`` resumes from the frozen phase with no jump.
- ``exp3_noise_var = 0.1`` (m/s)²: experiment 3's noise variance per
  component (replaces ``noise_std``).
- Recovery (experiment 2): seconds after resuming until the 0.1 s trailing
  mean of ‖ṙ̂ − ṙ‖² falls under 1.5× its mean over [1 s, 5 s) and stays
  there ≥ 0.3 s (:func:`~snaketrack.estimation.metrics.recovery_time`).

The world comes from ``world(duration, dt, halt, resume, seed, obstacles,
robot)``, by default :func:`snaketrack.sim.oal.simulate_oal`; anything with
arrays ``t`` (T,), ``phidot`` (T, J) and ``head_vxy`` (T, 2) will do (the tests
use :mod:`snaketrack.estimation.synthetic`). What a run writes is in
:mod:`~snaketrack.experiments.jacobian_outputs`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
from tqdm import tqdm

from snaketrack.errors import InputError
from snaketrack.estimation.co import COConfig
from snaketrack.estimation.kf import KFConfig
from snaketrack.estimation.metrics import mse, recovery_time, run_estimator
from snaketrack.estimation.registry import ESTIMATORS, make_estimator
from snaketrack.estimation.ukf import SigmaConfig
from snaketrack.sim.oal import OALConfig, simulate_oal


@dataclass(frozen=True)
class ExperimentsConfig:
    """Settings of ``snaketrack sim experiments`` (see the module docstring for the choices).

    duration: the world's run [s]; default 10 (the paper's).
    dt: time step [s]; default 1/240 (the paper's).
    halt: (t_stop, t_resume) of experiment 2 [s]; default (5, 7).
    resume: how the gait resumes after the halt, "reference" (default) or "phase".
    noise_std: std of the noise on ṙ in experiments 1–2 [m/s]; default 0.001.
    exp3_noise_var: variance of experiment 3's noise on ṙ [(m/s)²]; default 0.1.
    seed: world and noise seed; default 0.
    robot: the world's robot; default "planar-snake-11".
    obstacles: whether the obstacles are present; default True.
    kf: Q, R, P₀ of the UKF and KF; default KFConfig().
    sigma: UKF sigma points; default SigmaConfig().
    co: CO options; default COConfig() (the paper's: all off).
    recovery_window_s: trailing-mean window of the recovery rule [s]; default 0.1.
    recovery_factor: multiple of the pre-halt error that counts as recovered; default 1.5.
    recovery_hold_s: how long the error must stay under it [s]; default 0.3.
    experiments: which of 1, 2, 3 to run; default all.
    """

    duration: float = 10.0
    dt: float = 1 / 240
    halt: tuple[float, float] = (5.0, 7.0)
    resume: str = "reference"
    noise_std: float = 0.001
    exp3_noise_var: float = 0.1
    seed: int = 0
    robot: str = "planar-snake-11"
    obstacles: bool = True
    kf: KFConfig = field(default_factory=KFConfig)
    sigma: SigmaConfig = field(default_factory=SigmaConfig)
    co: COConfig = field(default_factory=COConfig)
    recovery_window_s: float = 0.1
    recovery_factor: float = 1.5
    recovery_hold_s: float = 0.3
    experiments: tuple[int, ...] = (1, 2, 3)

    def __post_init__(self) -> None:
        if not (0 < self.duration < float("inf") and 0 < self.dt < float("inf")):
            raise InputError(f"duration = {self.duration}, dt = {self.dt}; expected positive seconds")
        if not all(0 <= v < float("inf") for v in (self.noise_std, self.exp3_noise_var)):  # NaN fails too
            raise InputError(f"noise_std = {self.noise_std}, exp3_noise_var = {self.exp3_noise_var}; expected finite "
                             "values >= 0")
        if self.resume not in ("reference", "phase"):
            raise InputError(f"resume = {self.resume!r}; expected 'reference' or 'phase'")
        t0, t1 = self.halt
        if 2 in self.experiments and not (0 < t0 < t1 < self.duration):
            raise InputError(f"halt = {self.halt}; expected 0 < t_stop < t_resume < duration = {self.duration} s")
        bad = [e for e in self.experiments if e not in (1, 2, 3)]
        if bad or not self.experiments:
            raise InputError(f"experiments = {self.experiments}; expected a non-empty subset of 1, 2, 3")


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment's data and scores.

    number: 1, 2 or 3. t (T,) [s]; phidot (T, J) [rad/s]; rdot_true, rdot_measured (T, 2) [m/s].
    runs: estimator name → :class:`EstimatorRun`. metrics: name → {"mse_x", "mse_y"} [(m/s)²].
    noise_var: variance of the noise added to ṙ [(m/s)²]. halt: (t_stop, t_resume) or None.
    after_1s: name → MSE over t ≥ 1 s (without the start, where the gait ramps up and ‖φ̇‖ is small).
    recovery_s: name → seconds or None (experiment 2 only). phases (experiment 2): name →
    {"pre_halt", "halt", "post_resume"} → MSE, and "jacobian_norm" → Frobenius norm ‖Ĵ‖ [m/rad]
    at the halt, its maximum during the halt and at the resume (CO's divergence shows here:
    during the halt φ̇ ≈ 0, so predictions, and their error, are ≈ 0 whatever Ĵ is).
    """

    number: int
    t: np.ndarray
    phidot: np.ndarray
    rdot_true: np.ndarray
    rdot_measured: np.ndarray
    runs: dict
    metrics: dict
    noise_var: float
    halt: Optional[tuple[float, float]] = None
    recovery_s: Optional[dict] = None
    phases: Optional[dict] = None
    after_1s: Optional[dict] = None


def run_experiment(number: int, t: np.ndarray, phidot: np.ndarray, rdot_true: np.ndarray, noise_var: float,
                   seed: int = 0, kf: KFConfig = KFConfig(), sigma: SigmaConfig = SigmaConfig(),
                   co: COConfig = COConfig(), halt: Optional[tuple[float, float]] = None,
                   recovery: tuple[float, float, float] = (0.1, 1.5, 0.3)) -> ExperimentResult:
    """Run the estimators on one world run and score them.

    t (T,) [s], phidot (T, J) [rad/s], rdot_true (T, 2) [m/s]. noise_var: variance
    [(m/s)²] of the white noise added to ṙ before the estimators see it
    (seeded by (seed, number)). halt: given for experiment 2, adds recovery
    times, per-phase MSEs and the ``co_reset`` estimator. recovery: (window_s,
    factor, hold_s) of :func:`recovery_time`. Experiment 3 adds ``kf_matched_r``.
    """
    t = np.asarray(t, dtype=float)
    phidot = np.asarray(phidot, dtype=float)
    rdot_true = np.asarray(rdot_true, dtype=float)
    if phidot.ndim != 2 or t.shape != (phidot.shape[0],) or rdot_true.shape != (phidot.shape[0], 2):
        raise InputError(f"t {t.shape}, phidot {phidot.shape}, rdot {rdot_true.shape}; expected (T,), (T, J), (T, 2)")
    rng = np.random.default_rng([int(seed), int(number)])
    noise = rng.normal(0.0, np.sqrt(noise_var), rdot_true.shape) if noise_var > 0 else np.zeros_like(rdot_true)
    rdot_meas = rdot_true + noise
    J = phidot.shape[1]
    ests = {name: make_estimator(name, J, kf=kf, sigma=sigma, co=co) for name in ESTIMATORS}
    if halt is not None:
        ests["co_reset"] = make_estimator("co", J, co=dataclasses.replace(co, reset_after_halt=True))
        ests["co_reset"].name = "co_reset"
    if number == 3 and noise_var > 0:
        ests["kf_matched_r"] = make_estimator("kf", J, kf=dataclasses.replace(kf, r=noise_var))
        ests["kf_matched_r"].name = "kf_matched_r"
    runs = {name: run_estimator(e, phidot, rdot_meas) for name, e in ests.items()}
    metrics = {name: mse(r.prediction, rdot_true) for name, r in runs.items()}
    after_1s = {name: mse(r.prediction, rdot_true, t >= 1.0) for name, r in runs.items()} if t[-1] > 1.0 else None
    rec = phases = None
    if halt is not None:
        t0, t1 = halt
        rec, phases = {}, {}
        for name, r in runs.items():
            sq = np.sum((r.prediction - rdot_true) ** 2, axis=1)
            rec[name] = recovery_time(t, sq, halt, *recovery)
            norm = np.linalg.norm(r.jacobian, axis=(1, 2))
            during = (t >= t0) & (t < t1)
            phases[name] = {"pre_halt": mse(r.prediction, rdot_true, t < t0),
                            "halt": mse(r.prediction, rdot_true, during),
                            "post_resume": mse(r.prediction, rdot_true, t >= t1),
                            "jacobian_norm": {"at_halt": float(norm[t < t0][-1]),
                                              "max_during_halt": float(norm[during].max()),
                                              "at_resume": float(norm[t < t1][-1])}}
    return ExperimentResult(number=number, t=t, phidot=phidot, rdot_true=rdot_true, rdot_measured=rdot_meas,
                            runs=runs, metrics=metrics, noise_var=float(noise_var), halt=halt,
                            recovery_s=rec, phases=phases, after_1s=after_1s)


def oal_world(duration: float, dt: float, halt, resume: str, seed: int, obstacles: bool, robot: str):
    """The MuJoCo obstacle world (:func:`snaketrack.sim.oal.simulate_oal`) with these settings."""
    cfg = OALConfig(duration=duration, dt=dt, halt=halt, resume=resume, obstacles=obstacles, seed=seed, robot=robot)
    return simulate_oal(cfg, progress=False)


def run_experiments(config: ExperimentsConfig = ExperimentsConfig(), world: Optional[Callable] = None,
                    progress: bool = False) -> tuple[dict, dict]:
    """Run the selected experiments; returns ({number: ExperimentResult}, {number: world result}).

    Experiments 1 and 3 share one world run (no halt); experiment 2 runs with the halt.
    """
    world = world or oal_world
    c = config
    todo = sorted(set(c.experiments))
    bar = None
    if progress:
        bar = tqdm(total=len(todo) + (1 if (1 in todo or 3 in todo) else 0) + (1 if 2 in todo else 0),
                   desc="experiments", unit="run")
    worlds: dict = {}

    def sim(halt):
        key = "halt" if halt else "free"
        if key not in worlds:
            worlds[key] = world(duration=c.duration, dt=c.dt, halt=halt, resume=c.resume, seed=c.seed,
                                obstacles=c.obstacles, robot=c.robot)
            if bar:
                bar.update()
        return worlds[key]

    results, by_number = {}, {}
    rec = (c.recovery_window_s, c.recovery_factor, c.recovery_hold_s)
    for k in todo:
        w = sim(tuple(c.halt) if k == 2 else None)
        var = c.exp3_noise_var if k == 3 else c.noise_std ** 2
        results[k] = run_experiment(k, w.t, w.phidot, w.head_vxy, var, seed=c.seed, kf=c.kf, sigma=c.sigma,
                                    co=c.co, halt=tuple(c.halt) if k == 2 else None, recovery=rec)
        by_number[k] = w
        if bar:
            bar.update()
    if bar:
        bar.close()
    return results, by_number
