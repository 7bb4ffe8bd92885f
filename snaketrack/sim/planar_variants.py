"""The two variants of the planar snake scenarios: the authors' model and the project's corrections.

The planar head-tracking paper's numbers were produced by its authors' MATLAB
code, which departs from the printed equations in a few places. Every
difference that changes a simulation is a field of :class:`PlanarVariant`;
:data:`VARIANTS` names the two settings ``snaketrack sim planar --variant``
offers:

- ``"authors"`` (default): what the authors' code runs.

  - ``start="gait"``: the joints start at the gait reference at t = 0,
    ``φ_i(0) = α sin((i−1) δ)``, at rest, with ``θ_N = 0`` and the tracked
    point at the origin. A broken joint gets zero commanded acceleration, so
    it keeps this angle for the whole run (joints 3 and 5: α sin 60° =
    α sin 120° ≈ 17.3°, joint 6: 10°, joint 8: −10°).
  - ``head_mass="robot"``: the head model's translational rows carry the
    whole robot's mass ``N m`` instead of the head link's ``m``.
  - ``wrap_heading=False``: the heading error ``θ̄ − θ̄_ref`` is not wrapped.
  - ``solver=("BDF", 1e-3, 1e-6)``: integrated as the authors did, with a
    variable-order stiff solver (MATLAB's ``ode15s``; SciPy's ``BDF`` is the
    same family, numerical differentiation formulas) at ``ode15s``'s default
    tolerances. The 5 cm reach test on an undulating path makes the later
    reach times depend on the integrator at such tolerances (tens of
    seconds; docs/planar-dynamics.md), and the paper's times are these.

- ``"corrected"``: the project's corrections.

  - ``start="straight"``: all joint angles zero at t = 0 (the paper does not
    print an initial shape); broken joints are then locked straight.
  - ``head_mass="link"``: ``m p̈₀`` as eq. 19 prints it and as Newton's law for
    the head link gives it; only then are the head and centre-of-mass models
    the same robot (tests/models/test_planar_dynamics.py).
  - ``wrap_heading=True``: the robot always turns the short way. With the
    paper's targets the error never exceeds π, so this changes nothing there.
  - ``solver=("RK45", 1e-6, 1e-8)``: tolerances at which the reach times
    have converged (they agree within 0.1 s with DOP853 at 1e-9 and LSODA).

Both variants share everything else (and both agree with the authors' code
on it): the state ``[φ_1…φ_{N−1}, θ_N, p_x, p_y]`` and its rates, the
heading sign (``θ̄_ref = atan2(d_y, d_x)``, not the printed
``−tan⁻¹(d_y/d_x)``), SJC with no feed-forward, the CC rule applied before
broken joints are zeroed, the ±40° clamp on the offset and the 5 cm reach
test.

>>> VARIANTS["authors"].start, VARIANTS["corrected"].head_mass
('gait', 'link')
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snaketrack.errors import InputError
from snaketrack.sim.control import GaitParams, joint_reference

__all__ = ["PlanarVariant", "VARIANTS", "variant", "initial_joint_angles"]


@dataclass(frozen=True)
class PlanarVariant:
    """Model and start settings that tell the authors' code from the project's corrections.

    name: ``"authors"`` or ``"corrected"``.
    start: ``"gait"`` (joint angles on the gait reference at t = 0) or
        ``"straight"`` (all zero); either way at rest, ``θ_N = 0``, tracked point at the origin.
    head_mass: ``"robot"`` (``N m`` on the head model's translational rows) or
        ``"link"`` (``m``); see :class:`~snaketrack.models.planar_dynamics.PlanarSnakeModel`.
    wrap_heading: wrap ``θ̄ − θ̄_ref`` to [−π, π] before the gain and clamp.
    solver: ``(method, rtol, atol)`` of :func:`scipy.integrate.solve_ivp` a scenario of this variant runs with
        unless it names its own.
    """

    name: str
    start: str
    head_mass: str
    wrap_heading: bool
    solver: tuple[str, float, float] = ("RK45", 1e-6, 1e-8)

    def __post_init__(self) -> None:
        if self.start not in ("gait", "straight"):
            raise InputError(f"PlanarVariant.start = {self.start!r}; expected 'gait' or 'straight'")
        if self.head_mass not in ("robot", "link"):
            raise InputError(f"PlanarVariant.head_mass = {self.head_mass!r}; expected 'robot' or 'link'")


VARIANTS = {
    "authors": PlanarVariant("authors", start="gait", head_mass="robot", wrap_heading=False,
                             solver=("BDF", 1e-3, 1e-6)),
    "corrected": PlanarVariant("corrected", start="straight", head_mass="link", wrap_heading=True,
                               solver=("RK45", 1e-6, 1e-8)),
}


def variant(name: str) -> PlanarVariant:
    """The variant called ``name`` (``"authors"`` or ``"corrected"``)."""
    try:
        return VARIANTS[name]
    except KeyError:
        raise InputError(f"--variant {name!r}; expected one of {', '.join(VARIANTS)}") from None


def initial_joint_angles(v: PlanarVariant, n_joints: int, gait: GaitParams) -> np.ndarray:
    """Joint angles φ(0), shape (n_joints,) [rad, paper convention ``θ_i − θ_{i+1}``].

    >>> initial_joint_angles(VARIANTS["authors"], 3, GaitParams(1.0, 1.0, np.pi / 2)).round(6).tolist()
    [0.0, 1.0, 0.0]
    >>> initial_joint_angles(VARIANTS["corrected"], 2, GaitParams()).tolist()
    [0.0, 0.0]
    """
    if v.start == "straight":
        return np.zeros(n_joints)
    return joint_reference(0.0, n_joints, gait)
