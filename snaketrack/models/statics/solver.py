"""The nonlinear Gauss–Seidel loop of the static model (Algorithm 4), with relaxation and halving.

The first sweep runs without gravity from ``θ⁰ = 0``; afterwards each sweep
(:func:`~snaketrack.models.statics.equilibrium.sweep`) uses the gravity of
the relaxed angles of the previous pass (eq. 23). It stops when the tip
(computed from the latest sweep) moves less than ``tol`` metres. The paper
does not define "does not converge"; here, when ``stall_passes`` consecutive
passes bring no new smallest tip step, or a sweep finds no root with
``|θ| < π/2``, ω is halved and the loop continues from the last relaxed
angles. Below ``min_omega`` or after ``max_iterations`` sweeps a
:class:`~snaketrack.errors.ConvergenceError` is raised.

Units: metres, radians, newtons, kilograms, m/s².
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from snaketrack.errors import ConvergenceError, InputError
from snaketrack.models.statics.equilibrium import (
    Geometry,
    NoRoot,
    gravity_vectors,
    gravity_vectors_half,
    sweep,
    weight_in_link1,
)
from snaketrack.models.statics.kinematics import tip_from_half_angles, world_from_link1
from snaketrack.models.statics.robot import StaticsRobot, is_finite_number

STANDARD_GRAVITY = 9.8  # m/s², the value the paper's simulations use
MOUNTS = ("ground", "ceiling", "none")

_HALF_PI = 0.5 * math.pi


@dataclass(frozen=True)
class StaticsConfig:
    """Settings of the nonlinear Gauss–Seidel loop (Algorithm 4).

    omega: initial relaxation ω of eq. (23), in (0, 1]; default 1.
    tol: ε, stop when the tip moves less than this between sweeps [m]; default 1e-12.
    max_iterations: most sweeps, the first gravity-free one included; default 20000.
    stall_passes: passes without a new smallest tip step before ω is halved; default 25.
    min_omega: ω below which the solve raises ConvergenceError; default 1e-4.
    """

    omega: float = 1.0
    tol: float = 1e-12
    max_iterations: int = 20000
    stall_passes: int = 25
    min_omega: float = 1e-4

    def __post_init__(self) -> None:
        if not is_finite_number(self.omega) or not 0.0 < self.omega <= 1.0:
            raise InputError(f"statics config: omega = {self.omega!r}; expected a relaxation in (0, 1]")
        if not is_finite_number(self.tol) or self.tol <= 0:
            raise InputError(f"statics config: tol = {self.tol!r}; expected a positive distance in metres")
        if int(self.max_iterations) < 1:
            raise InputError(f"statics config: max_iterations = {self.max_iterations!r}; expected ≥ 1")
        if int(self.stall_passes) < 1:
            raise InputError(f"statics config: stall_passes = {self.stall_passes!r}; expected ≥ 1")
        if not is_finite_number(self.min_omega) or not 0.0 < self.min_omega <= self.omega:
            raise InputError(
                f"statics config: min_omega = {self.min_omega!r}; expected in (0, omega = {self.omega!r}]"
            )


@dataclass(frozen=True)
class StaticsResult:
    """Equilibrium shape of the robot.

    bending_angles: (n−1,) joint angles θ_1..θ_{n−1} [rad], base to tip.
    tip_position: (3,) tip in the world frame [m].
    iterations: Gauss–Seidel sweeps used (1 when there is no gravity).
    converged: True (a solve that does not converge raises instead).
    omega: the relaxation ω in use when the loop stopped.
    halvings: how many times ω was halved.
    tip_step: the last tip change [m] (below ``tol``).
    """

    bending_angles: tuple[float, ...]
    tip_position: tuple[float, float, float]
    iterations: int
    converged: bool
    omega: float
    halvings: int
    tip_step: float

    def to_json(self) -> dict:
        """The command's ``--json`` object (SI units)."""
        return {
            "bending_angles_rad": list(self.bending_angles),
            "tip_position_m": list(self.tip_position),
            "iterations": self.iterations,
            "converged": self.converged,
            "omega_final": self.omega,
            "omega_halvings": self.halvings,
        }


def check_tensions(tensions: Sequence[float]) -> tuple[float, float, float, float]:
    """The four cable tensions [N] as floats, or InputError.

    >>> check_tensions([0, 2.4, 0, 5.1])
    (0.0, 2.4, 0.0, 5.1)
    """
    try:
        t = tuple(float(x) for x in tensions)
    except (TypeError, ValueError):
        raise InputError(f"tensions = {tensions!r}; expected four numbers in newtons") from None
    if len(t) != 4:
        raise InputError(f"tensions = {list(t)}; expected exactly four cable tensions T1..T4 in newtons")
    for j, x in enumerate(t, start=1):
        if not math.isfinite(x) or x < 0:
            raise InputError(f"tensions: T{j} = {x!r} N; expected a tension ≥ 0 (cables cannot push)")
    if sum(t) <= 0:
        raise InputError(f"tensions = {list(t)}; expected at least one positive tension")
    return t


def mount_gravity(mount: str, g: float = STANDARD_GRAVITY) -> tuple[float, float, float]:
    """Gravitational acceleration [m/s²] in the world frame for a named mounting.

    ``ground``: the robot stands on the ground, its body above the base
    (world z points up, gravity ``(0, 0, −g)``). ``ceiling``: it hangs from
    the ceiling (world z points down, gravity ``(0, 0, +g)``). ``none``: no
    gravity.

    >>> mount_gravity("ceiling")
    (0.0, 0.0, 9.8)
    """
    if mount == "ground":
        return (0.0, 0.0, -float(g))
    if mount == "ceiling":
        return (0.0, 0.0, float(g))
    if mount == "none":
        return (0.0, 0.0, 0.0)
    raise InputError(f"mount = {mount!r}; expected one of {', '.join(MOUNTS)}")


def _check_gravity(gravity) -> tuple[float, float, float]:
    try:
        g = tuple(float(x) for x in gravity)
    except (TypeError, ValueError):
        raise InputError(f"gravity = {gravity!r}; expected a 3-vector in m/s²") from None
    if len(g) != 3 or not all(math.isfinite(x) for x in g):
        raise InputError(f"gravity = {gravity!r}; expected a finite 3-vector in m/s²")
    return g  # type: ignore[return-value]


def solve_statics(
    robot: StaticsRobot,
    tensions: Sequence[float],
    gravity: Sequence[float] = (0.0, 0.0, -STANDARD_GRAVITY),
    config: StaticsConfig = StaticsConfig(),
    initial_angles: Optional[Sequence[float]] = None,
) -> StaticsResult:
    """Equilibrium bending angles and tip position with gravity compensation (Algorithm 4).

    robot: geometry and link mass (``link_mass = 0`` gives the model without
        gravity, solved in one sweep).
    tensions: (4,) cable tensions T1..T4 [N], each ≥ 0, in the paper's order
        (counter-clockwise at the base in the world frame).
    gravity: (3,) gravitational acceleration in the world frame [m/s²]; see
        :func:`mount_gravity` for the ground / ceiling presets.
    config: relaxation ω, tolerance and the non-convergence rule.
    initial_angles: (n−1,) start θ⁰ [rad] for the relaxation of eq. (23);
        default zeros, as in the paper. A start far from the answer is a
        "hard start".

    Raises InputError for bad input and ConvergenceError when the loop does
    not converge (ω below ``min_omega`` or more than ``max_iterations``
    sweeps) or no equilibrium with every ``|θ| < 90°`` exists.
    """
    t = check_tensions(tensions)
    g = _check_gravity(gravity)
    n = robot.n_links
    if initial_angles is None:
        theta = [0.0] * (n - 1)
    else:
        theta = [float(x) for x in initial_angles]
        if len(theta) != n - 1 or not all(math.isfinite(x) and abs(x) < _HALF_PI for x in theta):
            raise InputError(
                f"initial_angles = {list(initial_angles)!r}; expected {n - 1} finite angles in (-pi/2, pi/2) rad"
            )
    geo = Geometry(robot, t)
    rw1 = world_from_link1(robot.alpha)
    # Initialisation (Algorithm 4, lines 1-5): the sweep without gravity.
    try:
        star, hsin, hcos = sweep(geo, None, theta)
    except NoRoot as e:
        raise ConvergenceError(
            f"tensions = {list(t)} N: no equilibrium of link {e.link} with |theta| < 90 deg even without gravity; "
            "expected smaller tension differences"
        ) from None
    tip = tip_from_half_angles(geo, hsin, hcos, rw1)
    w1 = weight_in_link1(robot, g, rw1)
    if w1 == (0.0, 0.0, 0.0):
        return StaticsResult(tuple(star), tip, 1, True, config.omega, 0, 0.0)

    omega = float(config.omega)
    tol = config.tol
    halvings = 0
    best = math.inf
    since_best = 0
    step = math.inf
    for k in range(2, int(config.max_iterations) + 1):
        # eq. (23): relax, then Algorithm 1: gravity of the relaxed angles.
        if omega == 1.0:
            # relaxed = star: reuse the sweep's half-angle sines and cosines
            relaxed = star
            grav = gravity_vectors_half(geo, w1, hsin, hcos)
        else:
            relaxed = [a + omega * (b - a) for a, b in zip(theta, star)]
            grav = gravity_vectors(geo, w1, relaxed)
        try:
            new_star, new_hsin, new_hcos = sweep(geo, grav, star)
        except NoRoot:
            new_star = None
        if new_star is None:
            # No root in range: this step does not converge; halve ω and retry
            # from the last angles (Sec. 3.4).
            omega *= 0.5
            halvings += 1
            best, since_best = math.inf, 0
            if omega < config.min_omega:
                raise ConvergenceError(
                    f"statics did not converge: the Gauss-Seidel sweep found no root of eq. (16) with "
                    f"|theta| < 90 deg (omega halved below min_omega = {config.min_omega}); "
                    "expected lighter links or larger tensions"
                )
            continue
        theta = relaxed
        new_tip = tip_from_half_angles(geo, new_hsin, new_hcos, rw1)
        step = math.sqrt(
            (new_tip[0] - tip[0]) ** 2 + (new_tip[1] - tip[1]) ** 2 + (new_tip[2] - tip[2]) ** 2
        )
        star, hsin, hcos, tip = new_star, new_hsin, new_hcos, new_tip
        if step < tol:
            return StaticsResult(tuple(star), tip, k, True, omega, halvings, step)
        if step < best:
            best, since_best = step, 0
        else:
            since_best += 1
            if since_best >= config.stall_passes:
                omega *= 0.5
                halvings += 1
                best, since_best = math.inf, 0
                if omega < config.min_omega:
                    raise ConvergenceError(
                        f"statics did not converge: tip step {step:.3g} m after {k} sweeps with omega "
                        f"halved below min_omega = {config.min_omega}; expected steps below tol = {tol} m"
                    )
    raise ConvergenceError(
        f"statics did not converge within max_iterations = {config.max_iterations} sweeps "
        f"(last tip step {step:.3g} m, omega = {omega:.3g}); expected steps below tol = {tol} m"
    )


def solve_no_gravity(robot: StaticsRobot, tensions: Sequence[float]) -> StaticsResult:
    """The model without gravity (the paper's Est.*): the zero-mass special case.

    >>> from snaketrack.models.statics.robot import load_statics_robot
    >>> r = load_statics_robot("rolling-joint-6")
    >>> res = solve_no_gravity(r, (0.0, 2.4, 0.0, 5.1))
    >>> round(math.degrees(res.bending_angles[0]), 2), res.iterations
    (28.99, 1)
    """
    return solve_statics(robot.with_mass(0.0), tensions, (0.0, 0.0, 0.0))
