"""Synthetic grounds for training: the labelled robot pasted onto ground it was not filmed on.

A segmenter trained on one video learns what its ground is not as much as
what the robot is; on another ground (gravel, brick, other grass) it then
takes stones, shade and texture for robot. :func:`paste_on_ground` keeps the
labelled robot's pixels and replaces everything else with a procedural
ground drawn by :func:`synthetic_ground`: one of four textures (smooth
noise, stones, bricks or tiles, grass-like strokes) in random colours, with
clutter (rocks, blocks, sticks, stumps) that casts soft shadows, under a
random light gradient. Sizes are in body widths of the robot, so the clutter
is as large against the robot as a stone or a stick is in a field video.
Nothing here comes from the simulator that renders the test videos.

>>> rng = np.random.default_rng(0)
>>> synthetic_ground((48, 64), rng, 6.0).shape
(48, 64, 3)
"""
from __future__ import annotations

import cv2
import numpy as np

TEXTURES = ("noise", "stones", "bricks", "strokes")


def _colour(rng: np.random.Generator, sat: tuple[float, float] = (0.0, 0.6),
            val: tuple[float, float] = (0.15, 0.95)) -> np.ndarray:
    """A random RGB colour float32 (3,) in [0, 255] from hue, saturation and value ranges."""
    hsv = np.uint8([[[rng.uniform(0, 180), 255 * rng.uniform(*sat), 255 * rng.uniform(*val)]]])
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0].astype(np.float32)


def _smooth_field(shape: tuple[int, int], rng: np.random.Generator, cell_px: float) -> np.ndarray:
    """Multi-octave value noise float32 (h, w) in [0, 1], its coarsest features ``cell_px`` across."""
    h, w = shape
    out = np.zeros((h, w), np.float32)
    amp, total, size = 1.0, 0.0, max(float(cell_px), 2.0)
    while size >= 2.0:
        gh, gw = max(int(h / size) + 2, 2), max(int(w / size) + 2, 2)
        grid = rng.random((gh, gw)).astype(np.float32)
        out += amp * cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
        total += amp
        amp *= 0.55
        size /= 2.0
    out /= total
    lo, hi = float(out.min()), float(out.max())
    return (out - lo) / max(hi - lo, 1e-6)


def _noise(shape: tuple[int, int], rng: np.random.Generator, width: float) -> np.ndarray:
    """Soil or lawn: smooth noise mapped between two or three colours."""
    f = _smooth_field(shape, rng, width * rng.uniform(1.0, 12.0))[..., None]
    a, b, c = _colour(rng), _colour(rng), _colour(rng)
    if rng.random() < 0.5:
        return a * (1 - f) + b * f
    return np.where(f < 0.5, a * (1 - 2 * f) + b * 2 * f, b * (2 - 2 * f) + c * (2 * f - 1))


def _stones(shape: tuple[int, int], rng: np.random.Generator, width: float) -> np.ndarray:
    """Gravel or cobbles: Voronoi cells of random shades, darker towards their borders."""
    h, w = shape
    size = width * rng.uniform(0.3, 3.0)
    n = int(np.clip(h * w / size ** 2, 4, 6000))
    seeds = np.full((h, w), 255, np.uint8)
    seeds[rng.integers(0, h, n), rng.integers(0, w, n)] = 0
    dist, labels = cv2.distanceTransformWithLabels(seeds, cv2.DIST_L2, 3, labelType=cv2.DIST_LABEL_PIXEL)
    base, spread = _colour(rng), rng.uniform(10, 70)
    shades = np.clip(base + rng.normal(0, spread, (int(labels.max()) + 1, 1)) +
                     rng.normal(0, spread / 4, (int(labels.max()) + 1, 3)), 0, 255).astype(np.float32)
    img = shades[labels]
    rim = np.clip(dist / max(size * 0.5, 1.0), 0, 1)[..., None]
    return img * (1.0 - rng.uniform(0.0, 0.5) * rim)


def _bricks(shape: tuple[int, int], rng: np.random.Generator, width: float) -> np.ndarray:
    """Bricks or tiles: staggered rows with mortar lines, rotated and sheared as seen at an angle."""
    h, w = shape
    side = int(np.ceil(np.hypot(h, w))) + 4
    bh = max(width * rng.uniform(0.8, 4.0), 3.0)
    bw = bh * rng.uniform(1.0, 3.5)
    mortar = max(1, int(round(bh * rng.uniform(0.05, 0.2))))
    base, joint = _colour(rng), _colour(rng)
    img = np.empty((side, side, 3), np.float32)
    img[:] = joint
    for r, y in enumerate(np.arange(0.0, side, bh)):
        shift = (bw / 2) * (r % 2) if rng.random() < 0.8 else 0.0
        for x in np.arange(-shift, side, bw):
            c = np.clip(base + rng.normal(0, 12, 3), 0, 255)
            cv2.rectangle(img, (int(x) + mortar, int(y) + mortar), (int(x + bw) - 1, int(y + bh) - 1),
                          c.tolist(), -1)
    M = cv2.getRotationMatrix2D((side / 2, side / 2), rng.uniform(0, 180), 1.0)
    M[0, 1] += rng.uniform(-0.3, 0.3)
    M[:, 2] += [(w - side) / 2, (h - side) / 2]
    return cv2.warpAffine(img, M, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101)


def _strokes(shape: tuple[int, int], rng: np.random.Generator, width: float) -> np.ndarray:
    """Grass or litter: many short strokes in a few shades over a base colour."""
    h, w = shape
    img = np.empty((h, w, 3), np.float32)
    base = _colour(rng)
    img[:] = base
    length = width * rng.uniform(0.3, 2.0)
    n = int(np.clip(h * w / max(length, 2.0) * rng.uniform(0.2, 0.6), 10, 20000))
    angle0, spread = rng.uniform(0, np.pi), rng.uniform(0.2, np.pi)
    for _ in range(4):
        m = n // 4
        p = np.stack([rng.uniform(0, w, m), rng.uniform(0, h, m)], 1)
        a = angle0 + rng.uniform(-spread, spread, m)
        d = np.stack([np.cos(a), np.sin(a)], 1) * (length * rng.uniform(0.5, 1.5, m))[:, None]
        lines = np.stack([p, p + d], 1).round().astype(np.int32)
        c = np.clip(base * rng.uniform(0.6, 1.4) + rng.normal(0, 10, 3), 0, 255)
        cv2.polylines(img, list(lines), False, c.tolist(), 1, cv2.LINE_AA)
    return img


def _clutter(img: np.ndarray, rng: np.random.Generator, width: float,
             robot_colours: np.ndarray | None = None) -> np.ndarray:
    """``img`` with 0–6 objects (rocks, blocks, sticks, stumps), each over its own soft shadow; a third of
    them take the colour of a random row of ``robot_colours`` (n, 3) when given (a stick or a stone of
    the robot's colour, which only the robot's shape tells apart)."""
    h, w = img.shape[:2]
    n = int(rng.integers(0, 7))
    if n == 0:
        return img
    shadow = np.zeros((h, w), np.float32)
    layer, cover = np.zeros_like(img), np.zeros((h, w), np.float32)
    sdir = rng.uniform(0, 2 * np.pi)
    for _ in range(n):
        kind = rng.integers(0, 4)
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        size = width * rng.uniform(0.5, 3.5)
        one = np.zeros((h, w), np.uint8)
        if kind == 0:   # rock
            axes = (max(int(size / 2), 1), max(int(size / 2 * rng.uniform(0.5, 1.0)), 1))
            cv2.ellipse(one, (int(cx), int(cy)), axes, rng.uniform(0, 180), 0, 360, 1, -1)
        elif kind == 1:  # block
            box = cv2.boxPoints(((cx, cy), (size, size * rng.uniform(0.4, 1.0)), rng.uniform(0, 180)))
            cv2.fillConvexPoly(one, box.round().astype(np.int32), 1)
        elif kind == 2:  # stick
            a, ln = rng.uniform(0, np.pi), size * rng.uniform(1.0, 3.0)
            p0 = (int(cx - ln / 2 * np.cos(a)), int(cy - ln / 2 * np.sin(a)))
            p1 = (int(cx + ln / 2 * np.cos(a)), int(cy + ln / 2 * np.sin(a)))
            cv2.line(one, p0, p1, 1, max(int(width * rng.uniform(0.15, 0.6)), 1))
        else:            # stump seen from above or at an angle
            cv2.circle(one, (int(cx), int(cy)), max(int(size / 2), 1), 1, -1)
        off = size * rng.uniform(0.1, 0.6)
        M = np.float32([[1, 0, off * np.cos(sdir)], [0, 1, off * np.sin(sdir)]])
        shadow = np.maximum(shadow, cv2.warpAffine(one.astype(np.float32), M, (w, h)))
        shade = cv2.GaussianBlur(one.astype(np.float32), (0, 0), max(size / 4, 1.0))
        colour = _colour(rng, sat=(0.0, 0.8), val=(0.1, 0.9))
        if robot_colours is not None and len(robot_colours) and rng.random() < 1 / 3:
            colour = robot_colours[int(rng.integers(0, len(robot_colours)))].astype(np.float32)
        obj = colour * (0.7 + 0.5 * shade[..., None] / max(float(shade.max()), 1e-6))
        layer = np.where(one[..., None] > 0, obj, layer)
        cover = np.maximum(cover, one.astype(np.float32))
    shadow = cv2.GaussianBlur(shadow, (0, 0), max(width * 0.3, 0.5))
    img = img * (1.0 - rng.uniform(0.2, 0.6) * shadow[..., None])
    return np.where(cover[..., None] > 0, layer, img)


def synthetic_ground(shape: tuple[int, int], rng: np.random.Generator, width_px: float,
                     kind: str | None = None, robot_colours: np.ndarray | None = None) -> np.ndarray:
    """A procedural ground RGB uint8 (h, w, 3) for a robot ``width_px`` pixels wide.

    ``kind``, one of :data:`TEXTURES` (None: drawn at random), clutter with
    shadows (some in ``robot_colours``, RGB (n, 3), when given), a linear light gradient (±30 %) and pixel
    noise (σ 0–6 grey levels).
    """
    h, w = int(shape[0]), int(shape[1])
    width = max(float(width_px), 2.0)
    if kind is None:
        kind = TEXTURES[int(rng.integers(0, len(TEXTURES)))]
    elif kind not in TEXTURES:
        raise ValueError(f"ground texture {kind!r}: expected one of {', '.join(TEXTURES)}")
    img = {"noise": _noise, "stones": _stones, "bricks": _bricks, "strokes": _strokes}[kind]((h, w), rng, width)
    img = _clutter(img.astype(np.float32), rng, width, robot_colours)
    a = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    ramp = (xx * np.cos(a) + yy * np.sin(a)) / max(h, w)
    img = img * (1.0 + rng.uniform(-0.3, 0.3) * (ramp - ramp.mean()))[..., None]
    img = img + rng.normal(0, rng.uniform(0, 6), img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def body_width(mask: np.ndarray, default: float) -> float:
    """The robot's width [px]: twice the largest distance inside the bool mask (h, w); ``default`` when empty."""
    m8 = np.ascontiguousarray(mask).astype(np.uint8)
    if not m8.any():
        return float(default)
    return max(2.0 * float(cv2.distanceTransform(m8, cv2.DIST_L2, 3).max()), 2.0)


def paste_on_ground(rgb: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RGB uint8 (h, w, 3) with everything outside the bool robot mask (h, w) replaced by a synthetic ground.

    The robot's pixels are kept; its edge is blended over ~1 px so no
    cut-out seam is left for the network to learn. Some of the clutter takes
    the robot's colours. The label is unchanged.
    """
    h, w = mask.shape
    ground = synthetic_ground((h, w), rng, body_width(mask, default=min(h, w) / 16), robot_colours=rgb[mask])
    alpha = cv2.GaussianBlur(np.ascontiguousarray(mask).astype(np.float32), (0, 0), 0.6)
    alpha = np.maximum(alpha, mask.astype(np.float32))[..., None]
    out = alpha * rgb.astype(np.float32) + (1.0 - alpha) * ground.astype(np.float32)
    return np.clip(out, 0, 255).astype(np.uint8)
