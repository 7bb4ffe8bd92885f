"""Robot descriptions: a chain of links joined by 1- or 2-DOF joints, loaded from YAML.

Conventions (docs/conventions.md; every key of the file: docs/robot-file.md):

- Links are listed from tail (link 1, the *base*) to head (link N).
- Each link has a frame with its origin on the tail-side end of the link's
  axis and x pointing along the link towards the head; for a robot lying
  flat, z points up. The link's tracking/collision model is a capsule whose
  axis runs from the origin to ``length`` along x, with ``radius``; an
  optional ``collision: {shape: box}`` makes the simulator collide with a
  square-section box of half-sizes (length/2, radius, radius) instead, so a
  robot with 2-DOF joints cannot roll over (docs/oal.md); the tracker keeps
  the capsules.
- Joint i joins link i to link i+1 at the head-side end of link i. Its axes
  are coordinate axes of link i's frame, applied in the listed order:
  ``R_{i+1} = R_i · Rot(a_1, q_1) · Rot(a_2, q_2)``. For a yaw joint (z)
  this is the Jacobian paper's φ_i = θ_{i+1} − θ_i.
- The *head point* is the centre of the head link's axis.
- ``visual`` describes how the robot looks (body cylinders, joint housings,
  end caps): MuJoCo renders it, and the tracker's default silhouette
  (``--silhouette visual``) approximates it with capsules, spheres and
  cylinders; the link capsules stay the kinematic and collision model.

Units: metres, kilograms, radians.

>>> r = load_robot("planar-snake-11")
>>> r.n_links, r.dof, r.joint_names[:2]
(11, 10, ('phi_1', 'phi_2'))
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import yaml

from snaketrack.errors import FileFormatError, InputError, MissingFileError

ROBOTS_DIR = Path(__file__).parent / "robots"


@dataclass(frozen=True)
class Link:
    """One rigid link. length [m] along x, radius [m] of its capsule, mass [kg]."""

    length: float
    radius: float
    mass: float


@dataclass(frozen=True)
class Joint:
    """A joint between link i and i+1: axes (``'x'|'y'|'z'`` each), limits [rad] per axis."""

    axes: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class Visual:
    """How the robot looks when rendered (MuJoCo), all lengths in metres.

    body_radius: radius of each link's body cylinder, one per link.
    housing_radius, housing_half_length: joint housing cylinders, their axis
        along the joint's first axis (``housing_shape: sphere`` uses the radius only).
    cap_radius: radius of the rounded tail and head caps.
    rgba, housing_rgba, head_rgba: colours in [0, 1].
    mesh: one entry per link, the path of a mesh file (STL, OBJ, PLY; metres, in the link's frame) that
        draws the link in the mesh renderer (:mod:`snaketrack.tracker.render.meshes`), or None; empty: no link has one.
    """

    body_radius: tuple[float, ...]
    housing_radius: float
    housing_half_length: float
    housing_shape: str
    cap_radius: float
    rgba: tuple[float, float, float, float]
    housing_rgba: tuple[float, float, float, float]
    head_rgba: tuple[float, float, float, float]
    mesh: tuple[Optional[str], ...] = ()


@dataclass(frozen=True)
class Robot:
    """A snake robot: links tail to head, joints between them, and its looks."""

    name: str
    links: tuple[Link, ...]
    joints: tuple[Joint, ...]
    visual: Visual
    description: str = ""
    source: Optional[str] = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def n_links(self) -> int:
        return len(self.links)

    @property
    def dof(self) -> int:
        """Number of joint coordinates (sum of axes over joints)."""
        return sum(len(j.axes) for j in self.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(n for j in self.joints for n in j.names)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([l.length for l in self.links])

    @property
    def radii(self) -> np.ndarray:
        return np.array([l.radius for l in self.links])

    @property
    def masses(self) -> np.ndarray:
        return np.array([l.mass for l in self.links])

    @property
    def total_length(self) -> float:
        return float(self.lengths.sum())

    @property
    def lower(self) -> np.ndarray:
        return np.array([v for j in self.joints for v in j.lower])

    @property
    def upper(self) -> np.ndarray:
        return np.array([v for j in self.joints for v in j.upper])

    @property
    def is_planar(self) -> bool:
        """True when every joint turns about z only."""
        return all(j.axes == ("z",) for j in self.joints)


def available_robots() -> list[str]:
    """Names of the robots shipped in ``snaketrack/models/robots``."""
    return sorted(p.stem for p in ROBOTS_DIR.glob("*.yaml"))


def source_robot(spec: Optional[str], meta: dict) -> Robot:
    """The robot named by ``spec`` (a shipped name or YAML path), else by ``meta``'s ``robot_file`` or ``robot``
    (a dataset's meta.json)."""
    spec = spec or meta.get("robot_file") or meta.get("robot")
    if not spec:
        raise InputError("--robot: no robot given and the source's meta.json names none")
    return load_robot(spec)


def load_robot(name_or_path: str | os.PathLike) -> Robot:
    """Load a shipped robot by name (``"planar-snake-11"``) or a YAML file by path."""
    p = Path(name_or_path)
    if not p.suffix:
        cand = ROBOTS_DIR / f"{name_or_path}.yaml"
        if not cand.is_file():
            raise MissingFileError(
                f"robot {str(name_or_path)!r}: not a shipped robot (have {', '.join(available_robots())}) nor a file"
            )
        p = cand
    if not p.is_file():
        raise MissingFileError(f"{p}: robot file not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise FileFormatError(f"{p}: not valid YAML ({reason}{where})") from None
    return robot_from_dict(data, source=str(p))


def _expand(spec: Any, what: str, src: str) -> list[dict]:
    """A list of dicts, or ``{count: n, ...defaults}`` expanded to n copies; with ``cycle: [{...}, ...]``
    entry i also takes the keys of ``cycle[i % len(cycle)]`` (alternating joint axes, say)."""
    if isinstance(spec, list):
        for i, s in enumerate(spec):
            if not isinstance(s, dict):
                raise FileFormatError(f"{src}: {what}[{i}] = {s!r}; expected a mapping of its keys")
        return [dict(s) for s in spec]
    if isinstance(spec, dict) and "count" in spec:
        n = spec["count"]
        if not isinstance(n, int) or n < 1:
            raise FileFormatError(f"{src}: {what}.count = {n!r}; expected a positive integer")
        cycle = spec.get("cycle", [{}])
        if not (isinstance(cycle, list) and cycle and all(isinstance(c, dict) for c in cycle)):
            raise FileFormatError(f"{src}: {what}.cycle = {cycle!r}; expected a list of mappings")
        base = {k: v for k, v in spec.items() if k not in ("count", "cycle")}
        return [{**base, **cycle[i % len(cycle)]} for i in range(n)]
    raise FileFormatError(f"{src}: {what} must be a list or a mapping with 'count'")


def _positive(v: Any, where: str, allow_zero: bool = False) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise FileFormatError(f"{where} = {v!r}; expected a number") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise FileFormatError(f"{where} = {v!r}; expected a {'non-negative' if allow_zero else 'positive'} number")
    return x


def _rgba(v: Any, where: str) -> tuple[float, float, float, float]:
    try:
        ok = isinstance(v, (list, tuple)) and len(v) == 4 and all(0 <= float(c) <= 1 for c in v)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FileFormatError(f"{where} = {v!r}; expected [r, g, b, a] in [0, 1]")
    return tuple(float(c) for c in v)  # type: ignore[return-value]


def _meshes(spec: Any, n: int, source: str) -> tuple[Optional[str], ...]:
    """``visual.mesh``: one path for every link or a list of one path (or null) per link, relative to the
    robot file's folder; each file must exist."""
    if spec is None:
        return ()
    paths = [spec] * n if isinstance(spec, str) else spec
    if not isinstance(paths, list) or len(paths) != n or not all(p is None or isinstance(p, str) for p in paths):
        raise FileFormatError(f"{source}: visual.mesh = {spec!r}; expected a file name or a list of {n} "
                              "(a file name or null per link)")
    folder = Path(source).parent if source and not source.startswith("<") else Path.cwd()
    out: list[Optional[str]] = []
    for p in paths:
        if p is None:
            out.append(None)
            continue
        f = Path(p) if Path(p).is_absolute() else folder / p
        if not f.is_file():
            raise MissingFileError(f"{source}: visual.mesh {p!r}: file not found")
        out.append(str(f))
    return tuple(out)


def robot_from_dict(data: dict, source: str = "<dict>") -> Robot:
    """Build and validate a :class:`Robot` from the YAML mapping (see shipped files)."""
    if not isinstance(data, dict):
        raise FileFormatError(f"{source}: expected a mapping at top level")
    for key in ("name", "links", "joints"):
        if key not in data:
            raise FileFormatError(f"{source}: missing field {key!r}")
    links = []
    for i, l in enumerate(_expand(data["links"], "links", source)):
        w = f"{source}: links[{i}]"
        links.append(
            Link(
                length=_positive(l.get("length"), f"{w}.length"),
                radius=_positive(l.get("radius"), f"{w}.radius"),
                mass=_positive(l.get("mass", 0.0), f"{w}.mass", allow_zero=True),
            )
        )
    if len(links) < 2:
        raise FileFormatError(f"{source}: a snake needs at least 2 links, got {len(links)}")
    jspecs = _expand(data["joints"], "joints", source)
    if len(jspecs) != len(links) - 1:
        raise FileFormatError(f"{source}: {len(jspecs)} joints for {len(links)} links; expected {len(links) - 1}")
    joints = []
    all_axes = []
    for i, j in enumerate(jspecs):
        spec = j.get("axes", ["z"])
        axes = (str(spec),) if isinstance(spec, str) else tuple(str(a) for a in spec) if isinstance(spec, list) else ()
        if not axes or any(a not in ("x", "y", "z") for a in axes) or len(axes) > 3:
            raise FileFormatError(f"{source}: joints[{i}].axes = {list(axes)}; expected 1-3 of 'x', 'y', 'z'")
        all_axes.append(axes)
    single = all(a == ("z",) for a in all_axes)  # planar: phi_i, else yaw_i/pitch_i/roll_i
    axis_word = {"z": "yaw", "y": "pitch", "x": "roll"}
    for i, (j, axes) in enumerate(zip(jspecs, all_axes)):
        w = f"{source}: joints[{i}]"
        if "limits" in j:
            lims = j["limits"]
            try:
                lims = [[float(a), float(b)] for a, b in lims]
            except (TypeError, ValueError):
                raise FileFormatError(f"{w}.limits = {lims!r}; expected one [lower, upper] pair [rad] per axis"
                                      ) from None
            if len(lims) != len(axes):
                raise FileFormatError(f"{w}.limits has {len(lims)} pairs for {len(axes)} axes")
        else:
            lim = _positive(j.get("limit", np.pi), f"{w}.limit")
            lims = [[-lim, lim]] * len(axes)
        lower = tuple(float(a) for a, _ in lims)
        upper = tuple(float(b) for _, b in lims)
        if any(a >= b for a, b in zip(lower, upper)):
            raise FileFormatError(f"{w}.limits = {lims}; expected lower < upper")
        names = (f"phi_{i + 1}",) if single else tuple(f"{axis_word[a]}_{i + 1}" for a in axes)
        joints.append(Joint(axes=axes, lower=lower, upper=upper, names=names))
    v = data.get("visual", {}) or {}
    n = len(links)
    br = v.get("body_radius", [l.radius for l in links])
    if not isinstance(br, list):
        br = [br] * n
    if len(br) != n:
        raise FileFormatError(f"{source}: visual.body_radius has {len(br)} values for {n} links")
    shape = v.get("housing_shape", "cylinder")
    if shape not in ("cylinder", "sphere"):
        raise FileFormatError(f"{source}: visual.housing_shape = {shape!r}; expected 'cylinder' or 'sphere'")
    visual = Visual(
        body_radius=tuple(_positive(x, f"{source}: visual.body_radius") for x in br),
        housing_radius=_positive(v.get("housing_radius", 1.2 * links[0].radius), f"{source}: visual.housing_radius"),
        housing_half_length=_positive(v.get("housing_half_length", links[0].radius),
                                      f"{source}: visual.housing_half_length"),
        housing_shape=shape,
        cap_radius=_positive(v.get("cap_radius", links[-1].radius), f"{source}: visual.cap_radius"),
        rgba=_rgba(v.get("rgba", [0.85, 0.45, 0.1, 1]), f"{source}: visual.rgba"),
        housing_rgba=_rgba(v.get("housing_rgba", [0.2, 0.2, 0.22, 1]), f"{source}: visual.housing_rgba"),
        head_rgba=_rgba(v.get("head_rgba", v.get("rgba", [0.85, 0.45, 0.1, 1])), f"{source}: visual.head_rgba"),
        mesh=_meshes(v.get("mesh"), n, source),
    )
    known = {"name", "links", "joints", "visual", "description"}
    return Robot(
        name=str(data["name"]),
        links=tuple(links),
        joints=tuple(joints),
        visual=visual,
        description=str(data.get("description", "")),
        source=source,
        extra={k: val for k, val in data.items() if k not in known},
    )
