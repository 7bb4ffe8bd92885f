"""A robot file from the few numbers a user can read off a robot: :class:`RobotSpec` → YAML.

The numbers (docs/your-robot.md, "Writing a robot file"):

- ``modules``: the rigid pieces between joints, counted tail to head, the two end pieces included (N links,
  N − 1 joints);
- ``pitch`` [m]: the distance from one joint to the next (the length of every link between two joints);
- ``tail_length``, ``head_length`` [m]: from the end joint to the tip of the robot, an end cap included;
- ``width`` [m]: a round body's diameter, or with ``height`` [m] a box body's cross-section;
  ``view_elevation_deg``: the camera's elevation over the ground (90: straight down), which sets how wide a
  box body looks: a w × h box seen at elevation e shows w sin e + h cos e across, and the tracker's round
  bodies are drawn that wide;
- ``caps``: ``round`` (a rounded tip: a sphere at the tail, an ellipsoid nose at the head, of the body's
  radius) or ``flat`` (a square-cut tip, a rigid flat end cap or an open fork bracket: caps of a tenth of the
  body's radius);
- ``axes``: the joints' axes, cycled tail to head (``yaw,pitch``: alternating, as sidewinding needs);
  ``limit`` [rad] each joint's symmetric range;
- colours of the body, the joint housings and the head.

The robot file's link lengths are the links' axes; the caps reach beyond them (the tail cap a cap radius
behind link 1's origin, the head cap 1.6 cap radii beyond link N's end, docs/robot-file.md), so the end
links are the measured end lengths less their cap's reach.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import yaml

from snaketrack.errors import InputError
from snaketrack.models.robot import robot_from_dict

#: axis words for ``axes``
AXIS_WORDS = {"yaw": "z", "pitch": "y", "roll": "x", "z": "z", "y": "y", "x": "x"}
#: reach of the caps beyond the end links' axes, in cap radii (docs/robot-file.md: a sphere at the tail,
#: an ellipsoid of semi-axes (1.6, 1, 0.9) × the cap radius at the head)
TAIL_CAP_REACH, HEAD_CAP_REACH = 1.0, 1.6
#: a flat cap's radius, as a share of the body radius
FLAT_CAP = 0.1


@dataclass(frozen=True)
class RobotSpec:
    """What ``snaketrack robot new`` asks for (module doc); lengths [m], angles [rad] unless named _deg."""

    name: str
    modules: int
    pitch: float
    width: float
    height: float | None = None
    tail_length: float | None = None
    head_length: float | None = None
    caps: str = "round"
    axes: tuple[str, ...] = ("yaw",)
    limit: float = 1.57
    view_elevation_deg: float = 90.0
    housing_width: float | None = None
    housing_length: float | None = None
    mass: float = 0.2
    colour: tuple[float, float, float] = (0.85, 0.45, 0.1)
    housing_colour: tuple[float, float, float] = (0.2, 0.2, 0.22)
    head_colour: tuple[float, float, float] | None = None
    collision: str = "capsule"
    description: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def seen_width(self) -> float:
        """How wide the body looks [m] from the camera's elevation: a round body (no height) its width, a box
        w sin e + h cos e."""
        if self.height is None:
            return self.width
        e = math.radians(self.view_elevation_deg)
        return self.width * math.sin(e) + self.height * math.cos(e)


def _axis_words(axes: tuple[str, ...]) -> str:
    """("z", "zy") → "yaw,yaw+pitch"."""
    word = {"z": "yaw", "y": "pitch", "x": "roll"}
    return ",".join("+".join(word[a] for a in joint) for joint in axes)


def parse_axes(text: str) -> tuple[str, ...]:
    """``yaw,pitch`` → ("z", "y"): each word one joint's axis, or ``+``-joined for a joint of several
    (``yaw+pitch``); a one-line :class:`InputError` for an unknown word."""
    out = []
    for joint in str(text).split(","):
        words = [w.strip().lower() for w in joint.split("+")]
        if not all(w in AXIS_WORDS for w in words) or not joint.strip():
            raise InputError(f"--axes {text!r}: expected joint axes from yaw, pitch, roll (or z, y, x), comma-"
                             f"separated and cycled tail to head, e.g. yaw,pitch")
        out.append("".join(AXIS_WORDS[w] for w in words))
    return tuple(out)


def parse_colour(text: str, flag: str) -> tuple[float, float, float]:
    """``#rrggbb`` or ``R,G,B`` (0–255) → (r, g, b) in [0, 1]; a one-line :class:`InputError` otherwise."""
    t = str(text).strip()
    try:
        if t.startswith("#") and len(t) == 7:
            rgb = [int(t[i:i + 2], 16) for i in (1, 3, 5)]
        else:
            rgb = [float(x) for x in t.split(",")]
        ok = len(rgb) == 3 and all(0 <= c <= 255 for c in rgb)
    except ValueError:
        ok = False
    if not ok:
        raise InputError(f"{flag} {text!r}: expected #rrggbb or R,G,B from 0 to 255")
    return tuple(round(c / 255.0, 3) for c in rgb)  # type: ignore[return-value]


def _check(spec: RobotSpec) -> None:
    if spec.modules < 2:
        raise InputError(f"--modules {spec.modules}: expected at least 2 (the pieces between joints, ends included)")
    for flag, v in (("--pitch", spec.pitch), ("--width", spec.width), ("--height", spec.height),
                    ("--tail-length", spec.tail_length), ("--head-length", spec.head_length),
                    ("--limit", spec.limit), ("--housing-width", spec.housing_width),
                    ("--housing-length", spec.housing_length)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise InputError(f"{flag} {v:g}: expected a positive number")
    if not (math.isfinite(spec.mass) and spec.mass >= 0):
        raise InputError(f"--mass {spec.mass:g}: expected a non-negative number [kg]")
    if not 0 < spec.view_elevation_deg <= 90:
        raise InputError(f"--view-elevation {spec.view_elevation_deg:g}: expected degrees in (0, 90] (90: straight "
                         f"down)")
    if spec.caps not in ("round", "flat"):
        raise InputError(f"--caps {spec.caps!r}: expected round or flat")
    if spec.collision not in ("capsule", "box"):
        raise InputError(f"--collision {spec.collision!r}: expected capsule or box")


def robot_dict(spec: RobotSpec) -> dict:
    """The robot file's mapping (docs/robot-file.md) for ``spec``; a one-line :class:`InputError` for numbers
    that give no robot (an end piece shorter than its cap's reach, say)."""
    _check(spec)
    r_seen = 0.5 * spec.seen_width()
    r_link = 0.5 * max(spec.width, spec.height or spec.width)
    cap = r_seen if spec.caps == "round" else FLAT_CAP * r_seen
    lengths = [spec.pitch] * spec.modules
    for k, (flag, given, reach) in enumerate((("--tail-length", spec.tail_length, TAIL_CAP_REACH),
                                               ("--head-length", spec.head_length, HEAD_CAP_REACH))):
        end = spec.pitch if given is None else given
        axis = end - reach * cap
        if axis <= 0.1 * end:
            raise InputError(f"{flag} {end:g} m: the {spec.caps} cap reaches {reach * cap:.3g} m of it; expected "
                             f"an end piece longer than its cap (or --caps flat)")
        lengths[0 if k == 0 else -1] = axis
    housing_r = 0.5 * spec.housing_width if spec.housing_width else 0.9 * r_seen
    housing_h = 0.5 * spec.housing_length if spec.housing_length else r_seen
    rgba = [*spec.colour, 1.0]
    visual = {"body_radius": round(r_seen, 5), "housing_shape": "cylinder", "housing_radius": round(housing_r, 5),
              "housing_half_length": round(housing_h, 5), "cap_radius": round(cap, 5), "rgba": rgba,
              "housing_rgba": [*spec.housing_colour, 1.0]}
    if spec.head_colour is not None:
        visual["head_rgba"] = [*spec.head_colour, 1.0]
    cycle = [{"axes": list(a)} for a in spec.axes]
    return {
        "name": spec.name,
        "description": spec.description or f"{spec.modules}-module snake, joint axes {_axis_words(spec.axes)} cycled",
        "links": [{"length": round(L, 5), "radius": round(r_link, 5), "mass": spec.mass} for L in lengths],
        "joints": {"count": spec.modules - 1, "limit": spec.limit, "cycle": cycle},
        "collision": {"shape": spec.collision},
        "visual": visual,
    }


def robot_yaml(spec: RobotSpec) -> str:
    """The robot file's text: a comment with the numbers it was written from, then the mapping, checked by
    the loader (:func:`snaketrack.models.robot.robot_from_dict`)."""
    data = robot_dict(spec)
    robot_from_dict(data, source=spec.name)
    given = [f"modules {spec.modules}", f"pitch {spec.pitch:g} m",
             (f"a round body {spec.width:g} m across" if spec.height is None else
              f"a box body {spec.width:g} m wide, {spec.height:g} m high, seen at {spec.view_elevation_deg:g} deg "
              f"elevation: {spec.seen_width():.4g} m across"),
             f"tail end {spec.tail_length or spec.pitch:g} m, head end {spec.head_length or spec.pitch:g} m from "
             f"the end joint to the tip, {spec.caps} caps",
             f"joint axes {_axis_words(spec.axes)} cycled tail to head, limit {spec.limit:g} rad"]
    head = ["# Written by snaketrack robot new from:"] + [f"#   {g}" for g in given] + \
           [f"# {n}" for n in spec.notes] + \
           ["# The end links are the end lengths less their caps' reach (docs/robot-file.md, visual)."]
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110)
    return "\n".join(head) + "\n" + body
