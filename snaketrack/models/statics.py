"""Static model with gravity compensation of a rolling-joint, cable-driven snake-like robot.

Implements Hu, Liu, Zeng, Chua, Katupitiya & Wu, "Static Modeling of a Class
of Stiffness-Adjustable Snake-Like Robots with Gravity Compensation",
*Robotics* 12(2), 2023 (the seed ``static-model-gravity-compensation``):
given the four cable tensions, the link geometry and mass and the direction of
gravity, compute every bending angle and the tip position. No I/O except
reading the robot's YAML description.

The robot
    ``n`` links numbered 1 (the fixed base) to ``n`` (the distal link), joined
    by ``n - 1`` rolling joints: two cylindrical contact surfaces of radius
    ``R`` roll on each other, so the joint bends by θ while each surface turns
    by θ/2. Link ``i``'s bottom surface (towards the tip) is turned by the
    orientation ``α_i`` about the link axis relative to its top surface
    (towards the base); ``α_i = α`` for odd ``i`` and ``−α`` for even ``i``.
    Four cables at distance ``r`` from the axis run from the base to the distal
    link, where they end; their tensions are constant along their length
    (frictionless).

Frames (Sec. 2.1.1)
    Link frame {i}: origin at the link's mass centre (the middle of its axis),
    z along the axis towards the base, y parallel to the axis of the top
    contact cylinder (the one nearer the base). The world frame {w} has its
    origin at the centre of the base of link 1 (its end away from the body,
    ``z1 = +L/2``), z along the robot's straight axis towards the body, and
    ``T_w1 = Tl(0, 0, L/2)·Rz(α − π)·Ry(π)`` (eq. 18). Link i in link i−1:
    ``T_{i−1,i} = Rz(α_i)·Ry(−θ_{i−1})·Tl(x0, 0, z0)`` (eq. 19). The tip is the
    centre of the distal link's free end, ``(0, 0, −L/2)`` in {n}.

Equations
    For each link the force and moment balance (eqs. 13–14) holds with cable
    forces (eqs. 1–4), contact forces and moments (eqs. 5–10) and the link's
    weight at its mass centre (eqs. 11–12). The contact cannot carry a moment
    about the rolling axis, so the y-component of the moment balance gives
    ``a·sin(θ/2) + b·cos(θ/2) + c = 0`` (eq. 16) for the link's top angle,
    solved in closed form; the root with ``|θ| < π/2`` nearest the previous
    value is taken. The links are solved from the distal link towards the
    base; the contact force and moment found on link i's top are handed to
    link i−1's bottom with eq. (17).

Choices where the paper is vague or its extracted text misleads (see
``shared/notes/statics-reading-notes.md``):

- The coefficients of eq. (16) are built from the vector balance rather than
  typed from the printed a, b, c; on the distal link the bottom cable and
  contact terms are absent (its cables end there), which the printed
  intermediate-link formula would get wrong.
- Sign hand-over: eqs. (1) and (6) written for link i−1's *bottom* use the
  negative of the angle θ_{i−1} found as link i's *top* angle (the garbled
  "θ_{i−1} = −θ_{i−1}" of Sec. 3.2.2, which follows from eq. 19). Reported
  angles are the top angles, the paper's θ_1..θ_{n−1}, positive when the
  joint bends towards the link's +x.
- World gravity is taken into link 1 with the exact inverse of eq. (18);
  the printed ``Rz(π − α)Ry(π)`` agrees with it only for gravity along z.
- Links 2..n carry weight ``m·g`` each; link 1 is the base.
- Gauss–Seidel loop (Algorithm 4, eq. 23): the first sweep runs without
  gravity from ``θ⁰ = 0``; afterwards each sweep uses the gravity of the
  relaxed angles of the previous pass. It stops when the tip (computed from
  the latest sweep) moves less than ``tol`` metres. "Does not converge" is
  made concrete: when ``stall_passes`` consecutive passes bring no new
  smallest tip step, or a sweep finds no root with ``|θ| < π/2``, ω is halved
  and the loop continues from the last relaxed angles. Below ``min_omega`` or
  after ``max_iterations`` sweeps a :class:`~snaketrack.errors.ConvergenceError`
  is raised.

Everything is written with plain Python floats and :mod:`math` (measured
faster than numpy for these 3-vectors; see ``scripts/bench_statics.py``).
Units: metres, radians, newtons, kilograms, m/s².

>>> robot = load_statics_robot("rolling-joint-6", density=1050.0)
>>> res = solve_statics(robot, (0.0, 2.4, 0.0, 5.1), mount_gravity("ground"))
>>> [round(math.degrees(t), 2) for t in res.bending_angles]
[31.91, 31.22, 30.28, 29.51, 29.1]
>>> [round(1000 * p, 2) for p in res.tip_position]
[46.23, 0.0, 10.19]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import yaml

from snaketrack.errors import ConvergenceError, FileFormatError, InputError, MissingFileError

STATICS_ROBOTS_DIR = Path(__file__).parent / "statics_robots"
STANDARD_GRAVITY = 9.8  # m/s², the value the paper's simulations use
MOUNTS = ("ground", "ceiling", "none")

_HALF_PI = 0.5 * math.pi
_QUARTER_PI = 0.25 * math.pi


# ----------------------------------------------------------------------------
# Records and configuration
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StaticsRobot:
    """Geometry and mass of a rolling-joint cable-driven snake-like robot.

    n_links: number of links n (≥ 2); joints n − 1.
    length: link length L [m].
    contact_radius: radius R of both cylindrical contact surfaces [m].
    cable_distance: distance r of each cable from the link axis [m] (r < R).
    alpha: orientation α [rad] in [−π/2, π/2]; odd links use α, even −α.
    link_mass: mass of each link [kg] (links 2..n carry weight; 0 = no gravity).
    name: label for messages and plots.
    """

    n_links: int
    length: float
    contact_radius: float
    cable_distance: float
    alpha: float
    link_mass: float = 0.0
    name: str = "statics-robot"

    def __post_init__(self) -> None:
        where = f"statics robot {self.name!r}"
        if not isinstance(self.n_links, (int, np.integer)) or isinstance(self.n_links, bool) or self.n_links < 2:
            raise InputError(f"{where}: n_links = {self.n_links!r}; expected an integer ≥ 2")
        for key in ("length", "contact_radius", "cable_distance"):
            v = getattr(self, key)
            if not _is_finite_number(v) or v <= 0:
                raise InputError(f"{where}: {key} = {v!r}; expected a positive length in metres")
        if self.cable_distance >= self.contact_radius:
            raise InputError(
                f"{where}: cable_distance = {self.cable_distance!r} m; expected less than "
                f"contact_radius = {self.contact_radius!r} m"
            )
        _check_alpha(self.alpha, where)
        if not _is_finite_number(self.link_mass) or self.link_mass < 0:
            raise InputError(f"{where}: link_mass = {self.link_mass!r}; expected a mass ≥ 0 in kg")

    def with_mass(self, link_mass: float) -> "StaticsRobot":
        """The same robot with another link mass [kg]."""
        return replace(self, link_mass=float(link_mass))

    def with_alpha(self, alpha: float) -> "StaticsRobot":
        """The same robot with another orientation α [rad]."""
        return replace(self, alpha=float(alpha))


@dataclass(frozen=True)
class StaticsConfig:
    """Settings of the nonlinear Gauss–Seidel loop (Algorithm 4).

    omega: initial relaxation ω in (0, 1] (eq. 23).
    tol: ε [m]; stop when the tip moves less than this between sweeps.
    max_iterations: most sweeps (including the first, gravity-free one).
    stall_passes: passes without a new smallest tip step after which the loop
        is deemed not converging at the current ω, and ω is halved.
    min_omega: below this ω the solve gives up with ConvergenceError.
    """

    omega: float = 1.0
    tol: float = 1e-12
    max_iterations: int = 20000
    stall_passes: int = 25
    min_omega: float = 1e-4

    def __post_init__(self) -> None:
        if not _is_finite_number(self.omega) or not 0.0 < self.omega <= 1.0:
            raise InputError(f"statics config: omega = {self.omega!r}; expected a relaxation in (0, 1]")
        if not _is_finite_number(self.tol) or self.tol <= 0:
            raise InputError(f"statics config: tol = {self.tol!r}; expected a positive distance in metres")
        if int(self.max_iterations) < 1:
            raise InputError(f"statics config: max_iterations = {self.max_iterations!r}; expected ≥ 1")
        if int(self.stall_passes) < 1:
            raise InputError(f"statics config: stall_passes = {self.stall_passes!r}; expected ≥ 1")
        if not _is_finite_number(self.min_omega) or not 0.0 < self.min_omega <= self.omega:
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


# ----------------------------------------------------------------------------
# Input helpers
# ----------------------------------------------------------------------------


def _is_finite_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def _check_alpha(alpha, where: str) -> None:
    if not _is_finite_number(alpha) or abs(alpha) > _HALF_PI + 1e-12:
        raise InputError(
            f"{where}: alpha = {alpha!r} rad ({math.degrees(alpha) if _is_finite_number(alpha) else alpha} deg); "
            "expected an orientation in [-90, 90] degrees"
        )


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


# ----------------------------------------------------------------------------
# Robot files
# ----------------------------------------------------------------------------


def statics_robot_names() -> list[str]:
    """Names of the shipped statics robots (files in ``models/statics_robots/``)."""
    return sorted(p.stem for p in STATICS_ROBOTS_DIR.glob("*.yaml"))


def _yaml_number(data: dict, key: str, path: Path, positive: bool = True) -> float:
    if key not in data:
        raise FileFormatError(f"{path}: missing field {key!r}")
    v = data[key]
    if not _is_finite_number(v) or (positive and v <= 0):
        raise FileFormatError(f"{path}: {key} = {v!r}; expected a positive number")
    return float(v)


def load_statics_robot(
    name_or_path: Union[str, Path],
    *,
    density: Optional[float] = None,
    link_mass: Optional[float] = None,
    material: Optional[str] = None,
    alpha: Optional[float] = None,
) -> StaticsRobot:
    """Load a statics robot by shipped name (``rolling-joint-6``) or YAML path.

    File fields (SI units): ``n_links``, ``length`` [m], ``contact_radius`` [m],
    ``cable_distance`` [m], ``alpha_deg`` [deg], and the mass as either
    ``link_mass`` [kg] or ``volume`` [m³] with ``density`` [kg/m³] (or a
    ``default_material`` naming an entry of ``materials``, a map of name to
    density [kg/m³]). ``density``, ``link_mass`` or ``material`` given here
    override the file; ``alpha`` [rad] overrides ``alpha_deg``. With no mass
    information at all the link mass is 0 (no gravity).

    >>> r = load_statics_robot("rolling-joint-6", material="steel")
    >>> r.n_links, round(r.link_mass * 1000, 3)
    (6, 6.689)
    """
    if density is not None and link_mass is not None:
        raise InputError("give either density or link_mass, not both")
    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml") and not p.exists():
        p = STATICS_ROBOTS_DIR / f"{name_or_path}.yaml"
        if not p.is_file():
            raise MissingFileError(
                f"statics robot {str(name_or_path)!r}: no such file or shipped robot; "
                f"expected a YAML path or one of {', '.join(statics_robot_names())}"
            )
    if not p.is_file():
        raise MissingFileError(f"{p}: no such file")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise FileFormatError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise FileFormatError(f"{p}: expected a mapping of robot fields")
    n = data.get("n_links")
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise FileFormatError(f"{p}: n_links = {n!r}; expected an integer ≥ 2")
    L = _yaml_number(data, "length", p)
    R = _yaml_number(data, "contact_radius", p)
    r = _yaml_number(data, "cable_distance", p)
    if alpha is None:
        a_deg = data.get("alpha_deg", 0.0)
        if not _is_finite_number(a_deg):
            raise FileFormatError(f"{p}: alpha_deg = {a_deg!r}; expected a number of degrees in [-90, 90]")
        if abs(a_deg) > 90:
            raise FileFormatError(f"{p}: alpha_deg = {a_deg!r}; expected a number of degrees in [-90, 90]")
        alpha = math.radians(a_deg)
    materials = data.get("materials", {}) or {}
    if not isinstance(materials, dict):
        raise FileFormatError(f"{p}: materials = {materials!r}; expected a map of name to density in kg/m^3")
    if material is not None:
        if material not in materials:
            raise InputError(
                f"{p}: material {material!r} not listed; expected one of {', '.join(materials) or '(none)'}"
            )
        density = float(materials[material])
    if link_mass is not None:
        mass = float(link_mass)
    elif density is not None:
        if "volume" not in data:
            raise FileFormatError(f"{p}: a density was given but the file has no 'volume' [m^3]")
        if not _is_finite_number(density) or density < 0:
            raise InputError(f"density = {density!r}; expected a density ≥ 0 in kg/m^3")
        mass = float(density) * _yaml_number(data, "volume", p)
    elif "link_mass" in data:
        mass = _yaml_number(data, "link_mass", p, positive=False)
    elif "density" in data and "volume" in data:
        mass = _yaml_number(data, "density", p) * _yaml_number(data, "volume", p)
    elif "default_material" in data and "volume" in data:
        dm = data["default_material"]
        if dm not in materials:
            raise FileFormatError(f"{p}: default_material = {dm!r}; expected one of {', '.join(materials)}")
        mass = float(materials[dm]) * _yaml_number(data, "volume", p)
    else:
        mass = 0.0
    if not math.isfinite(mass) or mass < 0:
        raise InputError(f"link mass = {mass!r} kg; expected a mass ≥ 0")
    return StaticsRobot(
        n_links=n,
        length=L,
        contact_radius=R,
        cable_distance=r,
        alpha=float(alpha),
        link_mass=mass,
        name=str(data.get("name", p.stem)),
    )


# ----------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------


class _Geometry:
    """Per-robot, per-tension constants of eqs. (1)–(4) summed over the cables.

    For link parity p (0: odd links, α_i = α; 1: even links, α_i = −α):
    S = ΣT, (Cx, Cy) = Σ T·r·(cos φ, sin φ), Ht = Σ T·l_t,z, Hb = Σ T·l_b,z.
    """

    __slots__ = ("n", "L", "R", "h", "alpha", "ca", "sa", "S", "Cx", "Cy", "Ht", "Hb", "tip_z")

    def __init__(self, robot: StaticsRobot, tensions: tuple[float, float, float, float]):
        T1, T2, T3, T4 = tensions
        L, R, r, a = robot.length, robot.contact_radius, robot.cable_distance, robot.alpha
        self.n = robot.n_links
        self.L, self.R, self.h = L, R, 0.5 * L - R
        self.alpha = (a, -a)
        self.ca = (math.cos(a), math.cos(-a))
        self.sa = (math.sin(a), math.sin(-a))
        # Sec. 3.2.2: odd links φ = {0, −α, π, π−α} carry {T4, T1, T2, T3};
        # even links φ = {0, π+α, π, α} carry {T1, T2, T3, T4}.
        cables = (
            ((0.0, T4), (-a, T1), (math.pi, T2), (math.pi - a, T3)),
            ((0.0, T1), (math.pi + a, T2), (math.pi, T3), (a, T4)),
        )
        self.S, self.Cx, self.Cy, self.Ht, self.Hb = [], [], [], [], []
        for p, cab in enumerate(cables):
            ai = self.alpha[p]
            self.S.append(sum(t for _, t in cab))
            self.Cx.append(sum(t * r * math.cos(ph) for ph, t in cab))
            self.Cy.append(sum(t * r * math.sin(ph) for ph, t in cab))
            # eq. (4): top exit height; eq. (2): bottom exit height.
            self.Ht.append(sum(t * (self.h + math.sqrt(R * R - (r * math.cos(ph)) ** 2)) for ph, t in cab))
            self.Hb.append(sum(t * (-self.h - math.sqrt(R * R - (r * math.cos(ph + ai)) ** 2)) for ph, t in cab))
        self.tip_z = -0.5 * L


class _NoRoot(Exception):
    def __init__(self, link: int):
        self.link = link


def _sweep(geo: _Geometry, grav: Optional[list], prev: list) -> tuple[list, list, list]:
    """One backward sweep (Algorithm 2): the bending angles θ_1..θ_{n−1} [rad].

    grav: per link i (index i−1) the weight vector G_i in {i} [N], or None.
    prev: previous angles, for choosing the root of eq. (16).
    Returns (theta, sin(theta/2), cos(theta/2)), three lists of n−1 floats.
    Raises _NoRoot when eq. (16) has no root with |θ| < π/2.
    """
    n = geo.n
    R, h = geo.R, geo.h
    S_, Cx_, Cy_, Ht_, Hb_, ca_, sa_ = geo.S, geo.Cx, geo.Cy, geo.Ht, geo.Hb, geo.ca, geo.sa
    sqrt, atan2 = math.sqrt, math.atan2
    theta = [0.0] * (n - 1)
    hsin = [0.0] * (n - 1)
    hcos = [1.0] * (n - 1)
    # Bottom loads of the current link (all zero on the distal link).
    Fx = Fy = Fz = 0.0
    Mx = My = Mz = 0.0
    shs = 0.0  # sin(s/2), s = bottom angle in the link's own convention (= −θ_i)
    chs = 1.0
    Gx = Gy = Gz = 0.0
    for i in range(n, 1, -1):
        p = (i - 1) & 1  # 0 for odd i, 1 for even i
        S, Cx, Cy, Ht = S_[p], Cx_[p], Cy_[p], Ht_[p]
        if grav is not None:
            Gx, Gy, Gz = grav[i - 1]
        if i == n:
            # Distal link: no bottom cables, contact force or moment.
            Kx, Ky, Kz = Gx, Gy, Gz
            Mbx = Mby = Mbz = 0.0
        else:
            ca, sa, Hb = ca_[p], sa_[p], Hb_[p]
            # eq. (1): bottom cable direction u_b
            ubx, uby, ubz = -shs * ca, shs * sa, -chs
            Kx = S * ubx + Fx + Gx
            Ky = S * uby + Fy + Gy
            Kz = S * ubz + Fz + Gz
            # eq. (6): bottom contact point
            lx, ly, lz = R * ubx, R * uby, -h - R * chs
            # cables (eq. 2): (Cx, Cy, Hb) × u_b; contact: l_cb × F_cb + M_cb
            Mbx = Cy * ubz - Hb * uby + ly * Fz - lz * Fy + Mx
            Mby = Hb * ubx - Cx * ubz + lz * Fx - lx * Fz + My
            Mbz = Cx * uby - Cy * ubx + lx * Fy - ly * Fx + Mz
        # eq. (16): y-moment balance, A sin(θ/2) + B cos(θ/2) + C = 0, solved in
        # closed form: with A = ρ cos ψ, B = ρ sin ψ it reads sin(x + ψ) = −C/ρ = sin q,
        # so x = q − ψ or π − q − ψ. Keep |x| < π/4 (cos x > |sin x|) nearest prev/2.
        A = Ht - h * S + R * Kz
        B = -Cx - R * Kx
        C = Mby - h * Kx
        rho = sqrt(A * A + B * B)
        if rho == 0.0 or abs(C) > rho:
            raise _NoRoot(i)
        sq = -C / rho
        cq = sqrt(1.0 - sq * sq)
        cp, sp = A / rho, B / rho
        s1, c1 = sq * cp - cq * sp, cq * cp + sq * sp  # x1 = q − ψ
        s2, c2 = sq * cp + cq * sp, sq * sp - cq * cp  # x2 = π − q − ψ
        ok1 = c1 > abs(s1)
        ok2 = c2 > abs(s2)
        if ok1 and ok2:
            ref = 0.5 * prev[i - 2]
            x1, x2 = atan2(s1, c1), atan2(s2, c2)
            if abs(x1 - ref) <= abs(x2 - ref):
                x, sx, cx = x1, s1, c1
            else:
                x, sx, cx = x2, s2, c2
        elif ok1:
            x, sx, cx = atan2(s1, c1), s1, c1
        elif ok2:
            x, sx, cx = atan2(s2, c2), s2, c2
        else:
            raise _NoRoot(i)
        theta[i - 2] = 2.0 * x
        hsin[i - 2] = sx
        hcos[i - 2] = cx
        if i == 2:
            break
        # Top contact force (eq. 13) and moment (eq. 14) on link i; M_ty = 0.
        Ftx = -(S * sx + Kx)
        Fty = -Ky
        Ftz = -(S * cx + Kz)
        Mtx = -(Cy * cx + Mbx - (h + R * cx) * Fty)
        Mtz = -(Mbz - Cy * sx + R * sx * Fty)
        # eq. (17): hand over to link i−1: F_cb = −Rz(α_i) Ry(−θ) F_ct, same for M.
        ct, st = cx * cx - sx * sx, 2.0 * sx * cx
        ca, sa = ca_[p], sa_[p]
        wx, wz = ct * Ftx - st * Ftz, st * Ftx + ct * Ftz
        Fx, Fy, Fz = sa * Fty - ca * wx, -(sa * wx + ca * Fty), -wz
        wx, wz = ct * Mtx - st * Mtz, st * Mtx + ct * Mtz
        Mx, My, Mz = -ca * wx, -sa * wx, -wz
        # link i−1's bottom angle is −θ_{i−1}: sin(−x), cos(−x)
        shs, chs = -sx, cx
    return theta, hsin, hcos


def _gravity_vectors_cs(geo: _Geometry, g1: tuple, cos_t: list, sin_t: list) -> list:
    """Algorithm 1 / eq. (15): each link's weight in its own frame [N].

    g1: the weight m·g expressed in link frame {1}; cos_t, sin_t: cos and sin
    of θ_1..θ_{n−1}. Returns a list indexed by link − 1 (entry 0, the base
    link, is unused).
    """
    gx, gy, gz = g1
    ca_, sa_ = geo.ca, geo.sa
    out = [g1] * geo.n
    for u in range(2, geo.n + 1):
        p = (u - 1) & 1
        ca, sa = ca_[p], sa_[p]
        # G(u) = Ry(θ_{u−1}) Rz(−α_u) G(u−1)
        wx, wy = ca * gx + sa * gy, -sa * gx + ca * gy
        ct, st = cos_t[u - 2], sin_t[u - 2]
        gx, gy, gz = ct * wx + st * gz, wy, -st * wx + ct * gz
        out[u - 1] = (gx, gy, gz)
    return out


def _gravity_vectors(geo: _Geometry, g1: tuple, theta: list) -> list:
    """:func:`_gravity_vectors_cs` for angles θ [rad]."""
    return _gravity_vectors_cs(geo, g1, [math.cos(t) for t in theta], [math.sin(t) for t in theta])


def _gravity_vectors_half(geo: _Geometry, g1: tuple, hsin: list, hcos: list) -> list:
    """:func:`_gravity_vectors_cs` from sin and cos of the half angles θ/2."""
    return _gravity_vectors_cs(geo, g1, [c * c - s * s for s, c in zip(hsin, hcos)],
                               [2.0 * s * c for s, c in zip(hsin, hcos)])


def _world_from_link1(alpha: float):
    """Rotation of eq. (18), Rz(α − π)·Ry(π), as a 3×3 nested tuple."""
    c, s = math.cos(alpha - math.pi), math.sin(alpha - math.pi)
    # Rz(ψ) @ diag(−1, 1, −1)
    return ((-c, -s, 0.0), (-s, c, 0.0), (0.0, 0.0, -1.0))


def _tip_cs(geo: _Geometry, hsin: list, hcos: list, rw1) -> tuple[float, float, float]:
    """Algorithm 3 / eqs. (18)–(20): tip position in the world frame [m].

    hsin, hcos: sin and cos of θ_1/2..θ_{n−1}/2.
    """
    R, hL = geo.R, 0.5 * geo.L
    ca_, sa_ = geo.ca, geo.sa
    vx, vy, vz = 0.0, 0.0, geo.tip_z
    for i in range(geo.n, 1, -1):
        p = (i - 1) & 1
        sh, ch = hsin[i - 2], hcos[i - 2]
        ct, st = ch * ch - sh * sh, 2.0 * sh * ch
        # eq. (19): l = L/2 − R(1 − cos(θ/2)) + m R sin(θ/2), m = tan(θ/2), i.e. L/2 − R + R / cos(θ/2);
        # T_l(x0, 0, z0) with x0 = −l sin θ, z0 = −l (1 + cos θ)
        l = hL - R + R / ch
        vx -= l * st
        vz -= l * (1.0 + ct)
        # Rz(α_i) Ry(−θ)
        wx, wz = ct * vx - st * vz, st * vx + ct * vz
        ca, sa = ca_[p], sa_[p]
        vx, vy, vz = ca * wx - sa * vy, sa * wx + ca * vy, wz
    # eq. (18): world = Tl(0, 0, L/2) Rz(α−π) Ry(π) v
    (a, b, c), (d, e, f), (g, hh, k) = rw1
    return (a * vx + b * vy + c * vz, d * vx + e * vy + f * vz, g * vx + hh * vy + k * vz + hL)


def _tip(geo: _Geometry, theta: list, rw1) -> tuple[float, float, float]:
    """:func:`_tip_cs` for angles θ [rad]."""
    return _tip_cs(geo, [math.sin(0.5 * t) for t in theta], [math.cos(0.5 * t) for t in theta], rw1)


def _weight_in_link1(robot: StaticsRobot, gravity: tuple, rw1) -> tuple[float, float, float]:
    """m·g_world expressed in link frame {1} with the exact inverse of eq. (18) [N]."""
    m = robot.link_mass
    gx, gy, gz = (m * gravity[0], m * gravity[1], m * gravity[2])
    # R^T v
    return (
        rw1[0][0] * gx + rw1[1][0] * gy + rw1[2][0] * gz,
        rw1[0][1] * gx + rw1[1][1] * gy + rw1[2][1] * gz,
        rw1[0][2] * gx + rw1[1][2] * gy + rw1[2][2] * gz,
    )


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
    geo = _Geometry(robot, t)
    rw1 = _world_from_link1(robot.alpha)
    # Initialisation (Algorithm 4, lines 1-5): the sweep without gravity.
    try:
        star, hsin, hcos = _sweep(geo, None, theta)
    except _NoRoot as e:
        raise ConvergenceError(
            f"tensions = {list(t)} N: no equilibrium of link {e.link} with |theta| < 90 deg even without gravity; "
            "expected smaller tension differences"
        ) from None
    tip = _tip_cs(geo, hsin, hcos, rw1)
    w1 = _weight_in_link1(robot, g, rw1)
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
            grav = _gravity_vectors_half(geo, w1, hsin, hcos)
        else:
            relaxed = [a + omega * (b - a) for a, b in zip(theta, star)]
            grav = _gravity_vectors(geo, w1, relaxed)
        try:
            new_star, new_hsin, new_hcos = _sweep(geo, grav, star)
        except _NoRoot:
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
        new_tip = _tip_cs(geo, new_hsin, new_hcos, rw1)
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

    >>> r = load_statics_robot("rolling-joint-6")
    >>> res = solve_no_gravity(r, (0.0, 2.4, 0.0, 5.1))
    >>> round(math.degrees(res.bending_angles[0]), 2), res.iterations
    (28.99, 1)
    """
    return solve_statics(robot.with_mass(0.0), tensions, (0.0, 0.0, 0.0))


def link_transforms(robot: StaticsRobot, angles: Sequence[float]) -> np.ndarray:
    """World pose of every link frame for given bending angles (eqs. 18–20).

    angles: (n−1,) θ_1..θ_{n−1} [rad]. Returns (n, 4, 4) homogeneous
    transforms ``T_wi`` [m]; link frame origins are the mass centres.
    """
    n = robot.n_links
    th = np.asarray(angles, dtype=float).reshape(-1)
    if th.shape != (n - 1,):
        raise InputError(f"angles has shape {th.shape}; expected ({n - 1},) for {robot.name}")
    L, R, a = robot.length, robot.contact_radius, robot.alpha

    def rz(p):
        c, s = math.cos(p), math.sin(p)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def ry(p):
        c, s = math.cos(p), math.sin(p)
        return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])

    def hom(rot=None, d=None):
        T = np.eye(4)
        if rot is not None:
            T[:3, :3] = rot
        if d is not None:
            T[:3, 3] = d
        return T

    out = np.empty((n, 4, 4))
    T = hom(d=(0.0, 0.0, 0.5 * L)) @ hom(rz(a - math.pi)) @ hom(ry(math.pi))
    out[0] = T
    for i in range(2, n + 1):
        t = th[i - 2]
        m = math.tan(0.5 * t)
        l = 0.5 * L - R * (1.0 - math.cos(0.5 * t)) + m * R * math.sin(0.5 * t)
        x0, z0 = -2.0 * m * l / (m * m + 1.0), -2.0 * l / (m * m + 1.0)
        alpha_i = a if i % 2 == 1 else -a
        T = T @ hom(rz(alpha_i)) @ hom(ry(-t)) @ hom(d=(x0, 0.0, z0))
        out[i - 1] = T
    return out


def backbone_points(robot: StaticsRobot, angles: Sequence[float]) -> np.ndarray:
    """Points along the robot's axis in the world frame [m], for drawing.

    Returns (2n, 3): for each link its top end and bottom end (base to tip);
    the first point is the world origin and the last the tip.
    """
    Ts = link_transforms(robot, angles)
    hL = 0.5 * robot.length
    pts = []
    for T in Ts:
        pts.append(T[:3, :3] @ (0.0, 0.0, hL) + T[:3, 3])
        pts.append(T[:3, :3] @ (0.0, 0.0, -hL) + T[:3, 3])
    return np.array(pts)


def tip_position(robot: StaticsRobot, angles: Sequence[float]) -> np.ndarray:
    """Tip ``(0, 0, −L/2)`` of the distal link in the world frame [m], shape (3,)."""
    T = link_transforms(robot, angles)[-1]
    return T[:3, :3] @ np.array([0.0, 0.0, -0.5 * robot.length]) + T[:3, 3]
