"""Rolling-joint robot descriptions for the static model: the record and its YAML files.

A robot is ``n`` links joined by ``n − 1`` rolling joints (see
:mod:`snaketrack.models.statics`); its YAML file gives the geometry in SI
units and the link mass directly or through a volume and a density. The
shipped files live in ``snaketrack/models/statics_robots/``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

import numpy as np
import yaml

from snaketrack.errors import FileFormatError, InputError, MissingFileError

STATICS_ROBOTS_DIR = Path(__file__).parent.parent / "statics_robots"
_HALF_PI = 0.5 * math.pi


@dataclass(frozen=True)
class StaticsRobot:
    """Geometry and mass of a rolling-joint cable-driven snake-like robot.

    n_links: number of links n (≥ 2); joints n − 1.
    length: link length L [m].
    contact_radius: radius R of both cylindrical contact surfaces [m].
    cable_distance: distance r of each cable from the link axis [m] (r < R).
    alpha: orientation α [rad] in [−π/2, π/2]; odd links use α, even −α.
    link_mass: mass of each link [kg] (links 2..n carry weight); default 0 (no gravity).
    name: label for messages and plots; default ``"statics-robot"``.
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
            if not is_finite_number(v) or v <= 0:
                raise InputError(f"{where}: {key} = {v!r}; expected a positive length in metres")
        if self.cable_distance >= self.contact_radius:
            raise InputError(
                f"{where}: cable_distance = {self.cable_distance!r} m; expected less than "
                f"contact_radius = {self.contact_radius!r} m"
            )
        _check_alpha(self.alpha, where)
        if not is_finite_number(self.link_mass) or self.link_mass < 0:
            raise InputError(f"{where}: link_mass = {self.link_mass!r}; expected a mass ≥ 0 in kg")

    def with_mass(self, link_mass: float) -> "StaticsRobot":
        """The same robot with another link mass [kg]."""
        return replace(self, link_mass=float(link_mass))

    def with_alpha(self, alpha: float) -> "StaticsRobot":
        """The same robot with another orientation α [rad]."""
        return replace(self, alpha=float(alpha))


def is_finite_number(v) -> bool:
    """True for a finite int or float (numpy scalars included), False for bools and anything else."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def _check_alpha(alpha, where: str) -> None:
    if not is_finite_number(alpha) or abs(alpha) > _HALF_PI + 1e-12:
        raise InputError(
            f"{where}: alpha = {alpha!r} rad ({math.degrees(alpha) if is_finite_number(alpha) else alpha} deg); "
            "expected an orientation in [-90, 90] degrees"
        )


def statics_robot_names() -> list[str]:
    """Names of the shipped statics robots (files in ``models/statics_robots/``)."""
    return sorted(p.stem for p in STATICS_ROBOTS_DIR.glob("*.yaml"))


def _yaml_number(data: dict, key: str, path: Path, positive: bool = True) -> float:
    if key not in data:
        raise FileFormatError(f"{path}: missing field {key!r}")
    v = data[key]
    if not is_finite_number(v) or (positive and v <= 0):
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
        if not is_finite_number(a_deg):
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
        if not is_finite_number(density) or density < 0:
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
