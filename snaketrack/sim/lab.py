"""Things found beside a robot in an ordinary lab, for synthetic video: people's legs, a chair, a tether, a door.

:func:`add_lab_bodies` adds them to an MJCF tree as mocap bodies (poses set
every frame, no joints, no contacts), so the recorded ``qpos`` of the robot
replays unchanged; :class:`LabProps` plans their motion over the clip from
the robot's recorded motion and the camera path, and poses them frame by
frame (:meth:`LabProps.apply`, before ``mj_forward``).

- ``legs``: two people walk across the robot's path, each crossing it once
  (at about 30 % and 72 % of the clip) at 0.45-0.65 m/s with 0.5-0.65 m
  steps: shoes (box, sole), trousers (shin and thigh capsules, knee from
  two-link inverse kinematics). A footprint is moved along the walk until
  the shoe stays 0.10 m clear of the robot's axis for as long as the foot
  is planted, so feet land near the robot, and a swing foot (lifted up to
  0.13 m) steps over it.
- ``chair``: an office chair on five castors beside the robot's path (the
  castors 0.08 m clear of every point the robot's axis visits; the star
  base's arms may pass over it, kept above the robot), placed beyond the
  robot as the camera sees it.
- ``tether``: a cable (4-7 mm radius, 1.6 m) from the robot's tail end (link
  1's origin): it follows the path the tail end took (a dragged cable), smoothed,
  continues straight behind the robot's first pose, and drops from the
  tail end's height to the floor within 0.12 m.
- ``door``: a door frame (two 2 m jambs and a lintel) standing beyond the
  robot so that one jamb is near the left or right image edge in a middle
  frame of the clip, 0.12 m clear of the robot's path.

Colours are drawn per clip from palettes that include the robot's own
colour (an orange cable or shoe beside the orange snake, an aluminium chair
base beside the grey one). None of these is a robot geom: the robot mask is
the robot's visible pixels only (a leg in front of it cuts the mask).
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.spatial.transform import Rotation

from snaketrack.errors import InputError
from snaketrack.sim.scene import _smooth_field, _write_png

DISTRACTORS = ("legs", "chair", "tether", "door")

TETHER_SEGMENTS = 48
TETHER_LENGTH = 1.6        # m
SHIN, THIGH = 0.44, 0.44   # m, ankle to knee, knee to hip
ANKLE = 0.08               # m, ankle above the floor
HIP = 0.88                 # m
FOOT_CLEAR = 0.10          # m, planted shoe to the robot's axis
LIFT = 0.13                # m, peak lift of a swinging foot


def parse_distractors(text: Optional[str]) -> tuple[str, ...]:
    """``"legs,chair"`` -> ``("legs", "chair")`` in :data:`DISTRACTORS` order; ``"none"`` or ``""`` -> ``()``."""
    if text is None:
        return ()
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    if names in (["none"], []):
        return ()
    bad = [n for n in names if n not in DISTRACTORS]
    if bad:
        raise InputError(f"distractors {', '.join(bad)}; expected a comma-separated list of "
                         f"{', '.join(DISTRACTORS)}, or none")
    return tuple(n for n in DISTRACTORS if n in names)


def _f(*xs: float) -> str:
    return " ".join(f"{float(x):.6g}" for x in xs)


def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


@dataclass(frozen=True)
class LabLook:
    """Colours (RGB in [0, 1]) and sizes drawn for one clip."""

    trousers: tuple
    shoes: tuple
    soles: tuple
    chair_base: tuple
    chair_seat: tuple
    tether: tuple
    tether_radius: float
    door: tuple


def lab_look(seed: int, robot_rgba) -> LabLook:
    """The clip's colours, from ``seed``; ``robot_rgba`` (4,) is among the cable's and shoes' palettes."""
    rng = np.random.default_rng([seed, 7070])
    robot = tuple(float(c) for c in robot_rgba[:3])
    trousers = [(0.17, 0.24, 0.40), (0.07, 0.07, 0.08), (0.62, 0.55, 0.40), (0.38, 0.39, 0.42),
                (0.25, 0.30, 0.22)]
    shoes = [(0.90, 0.90, 0.88), (0.08, 0.08, 0.09), (0.50, 0.50, 0.52), (0.55, 0.40, 0.26), robot]
    soles = [(0.92, 0.92, 0.90), (0.12, 0.12, 0.12)]
    idx = rng.choice(len(trousers), 2, replace=False)
    return LabLook(
        trousers=tuple(trousers[int(i)] for i in idx),
        shoes=(_pick(rng, shoes), _pick(rng, shoes)),
        soles=(_pick(rng, soles), _pick(rng, soles)),
        chair_base=_pick(rng, [(0.06, 0.06, 0.07), (0.70, 0.72, 0.75)]),
        chair_seat=_pick(rng, [(0.15, 0.16, 0.18), (0.12, 0.18, 0.35), (0.35, 0.12, 0.10)]),
        tether=robot if rng.uniform() < 0.4 else _pick(rng, [(0.06, 0.06, 0.07), (0.50, 0.52, 0.55),
                                                             (0.15, 0.30, 0.70), (0.88, 0.88, 0.86)]),
        tether_radius=float(rng.uniform(0.004, 0.007)),
        door=_pick(rng, [(0.86, 0.86, 0.83), (0.55, 0.38, 0.22), (0.55, 0.57, 0.60)]),
    )


def add_lab_bodies(root: ET.Element, kinds: tuple[str, ...], look: LabLook, texture_dir: str | os.PathLike
                   ) -> None:
    """Add the mocap bodies of ``kinds`` (see :data:`DISTRACTORS`) to the MJCF tree ``root`` (in place).

    texture_dir: an existing folder for the fabric texture (must exist until the model is compiled).
    Bodies start out of sight below the floor; :meth:`LabProps.apply` poses them.
    """
    if not kinds:
        return
    asset = root.find("asset")
    rng = np.random.default_rng(77)
    weave = np.clip(0.85 + 0.08 * _smooth_field(rng, 128, 0.7) + 0.05 * _smooth_field(rng, 128, 4.0), 0, 1)
    path = os.path.join(os.fspath(texture_dir), "fabric.png")
    _write_png(path, (np.repeat(weave[..., None], 3, axis=2) * 255).astype(np.uint8))
    ET.SubElement(asset, "texture", name="lab_fabric_tex", type="2d", file=path)
    world = root.find("worldbody")
    common = dict(contype="0", conaffinity="0", group="0", mass="0")

    def body(name: str) -> ET.Element:
        return ET.SubElement(world, "body", name=name, mocap="true", pos="0 0 -5")

    if "legs" in kinds:
        for p in range(2):
            ET.SubElement(asset, "material", name=f"lab_trousers_{p}", texture="lab_fabric_tex", texrepeat="3 3",
                          rgba=_f(*look.trousers[p], 1), specular="0.05", shininess="0.05")
            for side in ("l", "r"):
                b = body(f"lab_p{p}_{side}_shoe")
                ET.SubElement(b, "geom", name=f"lab_p{p}_{side}_shoe", type="box", size="0.135 0.048 0.035",
                              pos="0 0 0.045", rgba=_f(*look.shoes[p], 1), **common)
                ET.SubElement(b, "geom", name=f"lab_p{p}_{side}_sole", type="box", size="0.14 0.05 0.006",
                              pos="0 0 0.006", rgba=_f(*look.soles[p], 1), **common)
                b = body(f"lab_p{p}_{side}_shin")
                ET.SubElement(b, "geom", name=f"lab_p{p}_{side}_shin", type="capsule", size="0.055",
                              fromto=_f(0, 0, 0, 0, 0, SHIN), material=f"lab_trousers_{p}", **common)
                b = body(f"lab_p{p}_{side}_thigh")
                ET.SubElement(b, "geom", name=f"lab_p{p}_{side}_thigh", type="capsule", size="0.07",
                              fromto=_f(0, 0, 0, 0, 0, THIGH), material=f"lab_trousers_{p}", **common)
    if "chair" in kinds:
        b = body("lab_chair")
        base = _f(*look.chair_base, 1)
        ET.SubElement(b, "geom", name="lab_chair_hub", type="cylinder", size="0.05 0.025", pos="0 0 0.13",
                      rgba=base, **common)
        for k in range(5):
            a = 2 * np.pi * k / 5
            ca, sa = np.cos(a), np.sin(a)
            ET.SubElement(b, "geom", name=f"lab_chair_arm_{k}", type="capsule", size="0.018",
                          fromto=_f(0.04 * ca, 0.04 * sa, 0.13, 0.29 * ca, 0.29 * sa, 0.115), rgba=base, **common)
            ET.SubElement(b, "geom", name=f"lab_chair_stem_{k}", type="cylinder", size="0.012 0.02",
                          pos=_f(0.30 * ca, 0.30 * sa, 0.085), rgba="0.05 0.05 0.05 1", **common)
            ET.SubElement(b, "geom", name=f"lab_chair_castor_{k}", type="cylinder", size="0.03 0.016",
                          pos=_f(0.32 * ca, 0.32 * sa, 0.03), euler=_f(np.pi / 2, 0, a + np.pi / 2),
                          rgba="0.05 0.05 0.05 1", **common)
        ET.SubElement(b, "geom", name="lab_chair_column", type="cylinder", size="0.025 0.16", pos="0 0 0.3",
                      rgba="0.6 0.62 0.65 1", **common)
        ET.SubElement(asset, "material", name="lab_seat", texture="lab_fabric_tex", texrepeat="4 4",
                      rgba=_f(*look.chair_seat, 1), specular="0.05", shininess="0.05")
        ET.SubElement(b, "geom", name="lab_chair_seat", type="box", size="0.24 0.24 0.04", pos="0 0 0.49",
                      material="lab_seat", **common)
        ET.SubElement(b, "geom", name="lab_chair_back", type="box", size="0.03 0.22 0.24", pos="-0.24 0 0.82",
                      material="lab_seat", **common)
    if "tether" in kinds:
        half = 0.5 * TETHER_LENGTH / TETHER_SEGMENTS
        for k in range(TETHER_SEGMENTS):
            b = body(f"lab_tether_{k}")
            ET.SubElement(b, "geom", name=f"lab_tether_{k}", type="capsule", size=_f(look.tether_radius),
                          fromto=_f(-half, 0, 0, half, 0, 0), rgba=_f(*look.tether, 1), **common)
    if "door" in kinds:
        b = body("lab_door")
        c = _f(*look.door, 1)
        for k, x in enumerate((0.0, 0.9)):
            ET.SubElement(b, "geom", name=f"lab_door_jamb_{k}", type="box", size="0.0225 0.06 1.03",
                          pos=_f(x, 0, 1.03), rgba=c, **common)
        ET.SubElement(b, "geom", name="lab_door_lintel", type="box", size="0.4725 0.06 0.04", pos="0.45 0 2.1",
                      rgba=c, **common)


def add_room(root: ET.Element, path_xy: np.ndarray, seed: int, margin: float = 4.0, height: float = 2.4) -> None:
    """Walls (painted, with a skirting board) around the robot's path, ``margin`` [m] beyond it, so a
    low camera sees a room rather than the void above the floor; low enough that their shadows end
    before the robot's path for a light 40 deg or more above the floor."""
    rng = np.random.default_rng([seed, 6060])
    paint = _pick(rng, [(0.86, 0.85, 0.80), (0.78, 0.80, 0.82), (0.83, 0.80, 0.72), (0.70, 0.74, 0.70)])
    lo = np.asarray(path_xy, float).min(axis=0) - margin
    hi = np.asarray(path_xy, float).max(axis=0) + margin
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    world = root.find("worldbody")
    common = dict(contype="0", conaffinity="0", group="0", mass="0")
    walls = [((mid[0], lo[1]), (half[0], 0.05)), ((mid[0], hi[1]), (half[0], 0.05)),
             ((lo[0], mid[1]), (0.05, half[1])), ((hi[0], mid[1]), (0.05, half[1]))]
    for k, ((x, y), (sx, sy)) in enumerate(walls):
        ET.SubElement(world, "geom", name=f"room_wall_{k}", type="box", size=_f(sx, sy, height / 2),
                      pos=_f(x, y, height / 2), rgba=_f(*paint, 1), **common)
        ET.SubElement(world, "geom", name=f"room_skirting_{k}", type="box", size=_f(sx + 0.01, sy + 0.01, 0.05),
                      pos=_f(x, y, 0.05), rgba="0.25 0.24 0.23 1", **common)


# ---------------------------------------------------------------- geometry helpers

def _quat_z_to(v: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) turning the z axis onto the direction of ``v`` (3,) by the shortest arc."""
    v = np.asarray(v, float) / max(np.linalg.norm(v), 1e-12)
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(z, v)
    angle = float(np.arctan2(np.linalg.norm(axis), z @ v))
    if np.linalg.norm(axis) < 1e-12:  # along z: none, or half a turn about x
        axis = np.array([1.0, 0.0, 0.0])
    return Rotation.from_rotvec(angle * axis / np.linalg.norm(axis)).as_quat(scalar_first=True)


def _quat_yaw_pitch(yaw: float, pitch: float) -> np.ndarray:
    """Quaternion (w, x, y, z) of a yaw about z [rad] followed by a pitch about the turned y axis [rad]."""
    return Rotation.from_euler("ZY", [yaw, pitch]).as_quat(scalar_first=True)


def _seg_dist(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Distances (M,) from points p (M, 2) to the segment a-b (2,)."""
    ab = b - a
    t = np.clip(((p - a) @ ab) / max(float(ab @ ab), 1e-12), 0, 1)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=1)


def _resample(poly: np.ndarray, step: float, n: int) -> np.ndarray:
    """``n`` points spaced ``step`` along the polyline ``poly`` (M, 3) from its start; the last
    segment is extended straight when the polyline is too short."""
    seg = np.linalg.norm(np.diff(poly, axis=0), axis=1)
    keep = np.concatenate([[True], seg > 1e-9])
    poly = poly[keep]
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(poly, axis=0), axis=1))])
    want = step * np.arange(n)
    out = np.column_stack([np.interp(want, s, poly[:, k]) for k in range(3)])
    if len(poly) >= 2 and want[-1] > s[-1]:
        d = poly[-1] - poly[-2]
        d = d / max(np.linalg.norm(d), 1e-12)
        far = want > s[-1]
        out[far] = poly[-1] + (want[far] - s[-1])[:, None] * d
    return out


# ---------------------------------------------------------------- plans

@dataclass(frozen=True)
class Walker:
    """One person's walk: crossing time tc [s], direction u (2,), a point of the walk line at the
    crossing (2,), speed v [m/s], step length [m], footprints (K, 2) in the world and their
    nominal along-walk positions s_nom (K,) [m] (footprint k is the left foot for even k)."""

    tc: float
    u: np.ndarray
    origin: np.ndarray
    v: float
    step: float
    footprints: np.ndarray
    s_nom: np.ndarray


def plan_walker(rng: np.random.Generator, times: np.ndarray, axis_points: np.ndarray, fraction: float,
                robot_radius: float, cam_pos: Optional[np.ndarray] = None) -> Walker:
    """A person who crosses the robot's path at about ``fraction`` of the clip (see the module doc):
    across the camera's view (within ±35 deg of square to the line from the camera to the robot)
    when ``cam_pos`` (T, 3) is given, else across the robot's body."""
    T = len(times)
    D = float(times[-1]) if T > 1 else 1.0
    tc = D * (fraction + rng.uniform(-0.05, 0.05))
    j = int(np.clip(np.searchsorted(times, tc), 0, T - 1))
    pts = axis_points[j]
    centre = pts[:, :2].mean(axis=0)
    body = pts[-1, :2] - pts[0, :2]
    heading = np.arctan2(body[1], body[0])
    if cam_pos is not None:
        view = centre - cam_pos[j, :2]
        heading = np.arctan2(view[1], view[0])
    ang = heading + np.pi / 2 + rng.uniform(-0.6, 0.6) + (np.pi if rng.uniform() < 0.5 else 0.0)
    u = np.array([np.cos(ang), np.sin(ang)])
    n = np.array([-u[1], u[0]])
    along = (pts[:, :2] - centre) @ (body / max(np.linalg.norm(body), 1e-9))
    origin = centre + rng.uniform(-0.5, 0.5) * np.ptp(along) * 0.5 * body / max(np.linalg.norm(body), 1e-9)
    v = float(rng.uniform(0.45, 0.65))
    step = float(rng.uniform(0.5, 0.65))
    s_lo = v * (float(times[0]) - tc) - 3 * step
    s_hi = v * (D - tc) + 3 * step
    s_nom = s_lo + rng.uniform(0, step) + step * np.arange(int(np.ceil((s_hi - s_lo) / step)) + 1)
    feet = []
    clear = FOOT_CLEAR + robot_radius
    for k, s in enumerate(s_nom):
        lateral = 0.09 if k % 2 == 0 else -0.09
        a_t, b_t = tc + (s - 0.5 * step) / v, tc + (s + 0.7 * step) / v
        sel = (times >= a_t) & (times <= b_t)
        near = axis_points[sel][:, :, :2].reshape(-1, 2)
        best = None
        for d in (0.0, 0.05, -0.05, 0.1, -0.1, 0.15, -0.15, 0.2, -0.2, 0.25, -0.25):
            p = origin + (s + d) * u + lateral * n
            if not len(near) or _seg_dist(p - 0.09 * u, p + 0.19 * u, near).min() >= clear:
                best = p
                break
        feet.append(best if best is not None else origin + s * u + lateral * n)
    return Walker(tc=tc, u=u, origin=origin, v=v, step=step, footprints=np.array(feet), s_nom=np.asarray(s_nom))


def walker_pose(w: Walker, t: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, float]]:
    """Per leg (left, right): ankle (3,), knee (3,), hip (3,) [m] and the shoe's pitch [rad] at time t [s]."""
    s = w.v * (t - w.tc)
    n = np.array([-w.u[1], w.u[0]])
    out = []
    for side in (0, 1):
        ks = np.arange(side, len(w.s_nom), 2)
        a = w.s_nom[ks] - 0.5 * w.step          # stance begins (hip position along the walk)
        b = w.s_nom[ks] + 0.7 * w.step          # stance ends
        i = int(np.clip(np.searchsorted(a, s, side="right") - 1, 0, len(ks) - 1))
        lift, pitch = 0.0, 0.0
        if s <= b[i] or i + 1 >= len(ks):
            foot = w.footprints[ks[i]]
        else:
            ph = float(np.clip((s - b[i]) / max(a[i + 1] - b[i], 1e-9), 0, 1))
            e = ph * ph * (3 - 2 * ph)
            foot = (1 - e) * w.footprints[ks[i]] + e * w.footprints[ks[i + 1]]
            lift = LIFT * np.sqrt(max(np.sin(np.pi * ph), 0.0))
            pitch = -0.35 * np.sin(2 * np.pi * ph)
        ankle = np.array([foot[0], foot[1], ANKLE + lift])
        hip_xy = w.origin + s * w.u + (0.09 if side == 0 else -0.09) * n
        hip = np.array([hip_xy[0], hip_xy[1], HIP + 0.015 * np.cos(4 * np.pi * s / (2 * w.step))])
        d = hip - ankle
        dist = float(np.linalg.norm(d))
        mid = 0.5 * (hip + ankle)
        if dist >= SHIN + THIGH:
            knee = mid
        else:
            fwd = np.array([w.u[0], w.u[1], 0.0])
            perp = fwd - d * (fwd @ d) / max(dist ** 2, 1e-12)
            perp /= max(np.linalg.norm(perp), 1e-12)
            knee = mid + np.sqrt(max(SHIN ** 2 - (dist / 2) ** 2, 0.0)) * perp
        out.append((ankle, knee, hip, pitch))
    return out


def tether_points(tail_history: np.ndarray, first_back: np.ndarray, radius: float) -> np.ndarray:
    """(TETHER_SEGMENTS + 1, 3) points of the cable [m]: from the tail end (tail_history[-1]) back along the
    tail end's path (tail_history (k, 3), oldest first), then straight on along ``first_back`` (3,) (behind the
    robot's first pose), smoothed; it drops from the tail end's height to the floor within 0.12 m."""
    from scipy.ndimage import gaussian_filter1d

    step = TETHER_LENGTH / TETHER_SEGMENTS
    back = tail_history[::-1].astype(float).copy()
    back[:, 2] = 0.0
    tail0 = back[-1]
    straight = tail0 + np.outer(np.linspace(0.02, TETHER_LENGTH + 0.1, 30), first_back * np.array([1, 1, 0]))
    poly = np.concatenate([back, straight])
    fine = _resample(poly, 0.01, int(TETHER_LENGTH / 0.01) + 40)
    sm = gaussian_filter1d(fine, sigma=8, axis=0, mode="nearest")
    w = np.clip(np.arange(len(fine)) / 12.0, 0, 1)[:, None]   # pinned at the tail end
    fine = (1 - w) * fine + w * sm
    pts = _resample(fine, step, TETHER_SEGMENTS + 1)
    s = step * np.arange(TETHER_SEGMENTS + 1)
    z_tail = float(tail_history[-1, 2])
    pts[:, 2] = radius + max(z_tail - radius, 0.0) * np.clip(1 - s / 0.12, 0, 1) ** 2
    pts[0] = tail_history[-1]
    return pts


def place_chair(rng: np.random.Generator, axis_points: np.ndarray, cam_pos: np.ndarray, cam_rot: np.ndarray,
                robot_radius: float) -> Optional[np.ndarray]:
    """(x, y, yaw) of a chair beside the path, beyond the robot from the camera, castors clear; None if no spot."""
    T = len(axis_points)
    path = axis_points.reshape(-1, 3)
    for attempt in range(400):
        j = int(rng.integers(T))
        c = axis_points[j, :, :2].mean(axis=0)
        a = rng.uniform(0, 2 * np.pi)
        xy = c + rng.uniform(0.3, 0.6) * np.array([np.cos(a), np.sin(a)])
        yaw = rng.uniform(0, 2 * np.pi)
        ks = yaw + 2 * np.pi * np.arange(5) / 5
        castors = xy + 0.32 * np.column_stack([np.cos(ks), np.sin(ks)])
        d = np.linalg.norm(path[None, :, :2] - castors[:, None], axis=2)
        if d.min() < 0.08 + robot_radius:
            continue
        # under the arms the robot must pass below them (underside ~0.095 m)
        under = np.zeros(len(path), bool)
        for p in castors:
            under |= _seg_dist(xy, p, path[:, :2]) < 0.02 + robot_radius
        if np.any(path[under, 2] + robot_radius > 0.09):
            continue
        if attempt < 300:
            rc = (axis_points[j].mean(axis=0) - cam_pos[j]) @ cam_rot[j][:, 2]
            cc = (np.array([xy[0], xy[1], 0.3]) - cam_pos[j]) @ cam_rot[j][:, 2]
            if cc < rc + 0.1:
                continue
        return np.array([xy[0], xy[1], yaw])
    return None


def place_door(rng: np.random.Generator, axis_points: np.ndarray, cam_pos: np.ndarray, cam_rot: np.ndarray,
               K: np.ndarray, width: int) -> Optional[np.ndarray]:
    """(x, y, yaw) of the door frame's first jamb and its direction to the second, or None if no spot."""
    T = len(axis_points)
    path = axis_points.reshape(-1, 3)[:, :2]
    for _ in range(200):
        j = int(rng.integers(T // 4, max(T // 4 + 1, 3 * T // 4)))
        sgn = 1.0 if rng.uniform() < 0.5 else -1.0
        u = 0.5 * width + sgn * rng.uniform(0.40, 0.47) * width
        ray = cam_rot[j] @ np.linalg.solve(K, np.array([u, K[1, 2], 1.0]))
        h = ray[:2] / max(np.linalg.norm(ray[:2]), 1e-9)
        robot_d = float(np.linalg.norm(axis_points[j, :, :2].mean(axis=0) - cam_pos[j, :2]))
        xy = cam_pos[j, :2] + h * (robot_d + rng.uniform(0.3, 1.0))
        out = cam_rot[j][:2, 0] * sgn
        out = out / max(np.linalg.norm(out), 1e-9)
        second = xy + 0.9 * out
        if min(_seg_dist(xy, xy, path).min(), _seg_dist(second, second, path).min()) < 0.12:
            continue
        return np.array([xy[0], xy[1], np.arctan2(out[1], out[0])])
    return None


class LabProps:
    """The lab distractors' motion over one clip and their per-frame poses.

    kinds: of :data:`DISTRACTORS`; times: (T,) frame times [s]; axis_points: (T, M, 3) the robot's
    axis points per frame (link origins first, point 0 the tail end); cam_pos (T, 3), cam_rot (T, 3, 3)
    ``R_wc``; K (3, 3); robot_radius: the body's visual radius [m].
    """

    def __init__(self, model, kinds: tuple[str, ...], seed: int, times: np.ndarray, axis_points: np.ndarray,
                 cam_pos: np.ndarray, cam_rot: np.ndarray, K: np.ndarray, width: int, robot_radius: float,
                 tether_radius: float = 0.005):
        import mujoco

        self.kinds = kinds
        self.times = np.asarray(times, float)
        self.axis_points = np.asarray(axis_points, float)
        self.tether_radius = tether_radius
        rng = np.random.default_rng([seed, 8080])
        self.walkers = ([plan_walker(rng, self.times, self.axis_points, f, robot_radius, cam_pos)
                         for f in (0.3, 0.72)]
                        if "legs" in kinds else [])
        self.chair = (place_chair(rng, self.axis_points, cam_pos, cam_rot, robot_radius)
                      if "chair" in kinds else None)
        self.door = place_door(rng, self.axis_points, cam_pos, cam_rot, K, width) if "door" in kinds else None
        first = self.axis_points[0]
        back = first[0] - first[1]
        back[2] = 0.0
        self.first_back = back / max(np.linalg.norm(back), 1e-9)

        def mocap(name: str) -> int:
            b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
            if b < 0:
                raise InputError(f"the model has no body {name!r}")
            return int(model.body_mocapid[b])

        self.ids = {}
        for p in range(len(self.walkers)):
            for side in ("l", "r"):
                for part in ("shoe", "shin", "thigh"):
                    self.ids[f"lab_p{p}_{side}_{part}"] = mocap(f"lab_p{p}_{side}_{part}")
        if "chair" in kinds:
            self.ids["lab_chair"] = mocap("lab_chair")
        if "tether" in kinds:
            for k in range(TETHER_SEGMENTS):
                self.ids[f"lab_tether_{k}"] = mocap(f"lab_tether_{k}")
        if "door" in kinds:
            self.ids["lab_door"] = mocap("lab_door")
        self.geom_ids = np.array([g for g in range(model.ngeom)
                                  if (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "").startswith("lab_")],
                                 dtype=int)

    def tether(self, i: int) -> np.ndarray:
        """(TETHER_SEGMENTS + 1, 3) cable points in frame i [m], point 0 at the tail end."""
        return tether_points(self.axis_points[:i + 1, 0], self.first_back, self.tether_radius)

    def legs(self, i: int) -> list:
        """Per person, :func:`walker_pose` in frame i."""
        return [walker_pose(w, float(self.times[i])) for w in self.walkers]

    def apply(self, data, i: int) -> None:
        """Pose every distractor for frame ``i`` (call before ``mj_forward``)."""
        hidden = np.array([0.0, 0.0, -5.0])
        for p, legs in enumerate(self.legs(i)):
            w = self.walkers[p]
            yaw = float(np.arctan2(w.u[1], w.u[0]))
            for side, (ankle, knee, hip, pitch) in zip(("l", "r"), legs):
                shoe = ankle - np.array([0, 0, ANKLE]) + 0.05 * np.array([w.u[0], w.u[1], 0])
                self._set(data, f"lab_p{p}_{side}_shoe", shoe, _quat_yaw_pitch(yaw, pitch))
                self._set(data, f"lab_p{p}_{side}_shin", ankle, _quat_z_to(knee - ankle))
                self._set(data, f"lab_p{p}_{side}_thigh", knee, _quat_z_to(hip - knee))
        if "chair" in self.kinds:
            c = self.chair
            pos = hidden if c is None else np.array([c[0], c[1], 0.0])
            self._set(data, "lab_chair", pos, _quat_yaw_pitch(0.0 if c is None else float(c[2]), 0.0))
        if "tether" in self.kinds:
            pts = self.tether(i)
            for k in range(TETHER_SEGMENTS):
                a, b = pts[k], pts[k + 1]
                d = b - a
                yaw = float(np.arctan2(d[1], d[0]))
                pitch = float(-np.arctan2(d[2], np.linalg.norm(d[:2])))
                self._set(data, f"lab_tether_{k}", 0.5 * (a + b), _quat_yaw_pitch(yaw, pitch))
        if "door" in self.kinds:
            dr = self.door
            pos = hidden if dr is None else np.array([dr[0], dr[1], 0.0])
            self._set(data, "lab_door", pos, _quat_yaw_pitch(0.0 if dr is None else float(dr[2]), 0.0))

    def _set(self, data, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        m = self.ids[name]
        data.mocap_pos[m] = pos
        data.mocap_quat[m] = quat

    def summary(self) -> dict:
        """What was placed, for meta.json."""
        out: dict = {"kinds": list(self.kinds)}
        if self.walkers:
            out["people"] = [{"crossing_time": w.tc, "speed": w.v, "step": w.step} for w in self.walkers]
        if "chair" in self.kinds:
            out["chair"] = None if self.chair is None else [float(x) for x in self.chair]
        if "door" in self.kinds:
            out["door"] = None if self.door is None else [float(x) for x in self.door]
        if "tether" in self.kinds:
            out["tether_length_m"] = TETHER_LENGTH
        return out
