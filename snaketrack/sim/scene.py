"""Scene dressing for synthetic video: natural ground, sunlight that changes, shadows, distractors.

:func:`dress_scene` edits an MJCF tree from :func:`snaketrack.sim.mjcf.build_world`
in place, adding only static things (textures, materials, lights, geoms
without contacts), so ``qpos`` keeps the layout of the physics world and a
recorded run replays unchanged:

- ground: a seamless colour texture made from scikit-image's bundled
  natural images (``grass``, ``gravel``, ``brick``; greyscale, tinted here),
  optionally two of them blended through a smooth random patch mask, written
  as PNG into a temporary folder and tiled on the floor (``tile_m`` metres a
  tile);
- sun: a shadow-casting directional light whose position (the centre of
  its shadow map, ±3 m) :class:`LightSchedule` keeps above the robot every
  frame, so shadows near the robot stay sharp; a weak fill light from the other side and MuJoCo's headlight
  as sky (ambient) light. Intensity, elevation and azimuth drift during the
  clip (passing clouds, a moving sun);
- distractors: rocks (ellipsoids), sticks (thin capsules lying on the
  ground; one in seven is a piece of coloured hose, a robot-like hard
  negative) and boxes, their numbers drawn in proportion to the area
  (about 1.5-3 rocks, 0.6-1.5 sticks and 0.04-0.12 boxes per m²), scattered around the robot's path but kept clear of
  the ground it covers, so they never overlap the robot. They are not robot
  geoms, so the robot mask never includes them.

The robot's own obstacles (the OAL posts) get a wood-like material.

>>> textures = ground_texture("grass", size=64, seed=0)
>>> textures.shape, textures.dtype.name
((64, 64, 3), 'uint8')
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from snaketrack.errors import InputError

# outdoor grounds, the ones drawn from the seed when no ground is given
OUTDOOR = ("grass", "gravel", "brick", "grass+gravel")
GROUNDS = OUTDOOR + ("carpet",)

# natural size [m] of one tile of each texture (grass blades, 1-3 cm stones, 0.2 m bricks, 0.5 m carpet tiles)
TILE_M = {"grass": 0.6, "gravel": 0.4, "brick": 1.0, "carpet": 0.5}

# office carpet tiles: (dark, light) colour pairs, one drawn per clip
_CARPETS = (
    ((0.16, 0.18, 0.22), (0.42, 0.45, 0.52)),   # blue-grey
    ((0.12, 0.12, 0.13), (0.36, 0.36, 0.37)),   # charcoal
    ((0.25, 0.20, 0.15), (0.55, 0.47, 0.38)),   # brown-beige
    ((0.17, 0.20, 0.17), (0.42, 0.46, 0.40)),   # green-grey
)

# tint palettes: dark and light colour (RGB in [0,1]) per texture
_TINTS = {
    "grass": ((0.10, 0.20, 0.05), (0.55, 0.66, 0.30)),
    "gravel": ((0.21, 0.20, 0.18), (0.72, 0.70, 0.65)),
    "brick": ((0.28, 0.12, 0.08), (0.78, 0.55, 0.45)),
}


def _skimage_texture(name: str) -> np.ndarray:
    import skimage.data  # deferred: `snaketrack sim video --help` reads this module's grounds

    img = getattr(skimage.data, name)()
    if img.ndim == 3:
        img = img.mean(axis=2)
    return img.astype(np.float64) / 255.0


def _seamless(img: np.ndarray) -> np.ndarray:
    """Make a texture tile without seams: cross-fade with its half-shifted copy, restore contrast."""
    h, w = img.shape[:2]
    shifted = np.roll(np.roll(img, h // 2, axis=0), w // 2, axis=1)
    wy = 1 - np.abs(np.linspace(-1, 1, h))
    wx = 1 - np.abs(np.linspace(-1, 1, w))
    wgt = np.clip(np.outer(wy, wx) * 2.5, 0, 1)
    if img.ndim == 3:
        wgt = wgt[..., None]
    mix = wgt * img + (1 - wgt) * shifted
    # blending two uncorrelated textures loses contrast: restore the local spread
    s = np.sqrt(wgt ** 2 + (1 - wgt) ** 2)
    mean = img.mean()
    return np.clip(mean + (mix - mean) / s, 0, 1)


def _tint(gray: np.ndarray, name: str, rng: np.random.Generator) -> np.ndarray:
    dark, light = (np.array(c) for c in _TINTS[name])
    jitter = rng.uniform(0.95, 1.05, 3)
    g = np.clip((gray - gray.mean()) * 1.2 + 0.5, 0, 1)[..., None]
    return np.clip((dark + g * (light - dark)) * jitter, 0, 1)


def _tile(name: str, size: int, rng: np.random.Generator) -> np.ndarray:
    g = _skimage_texture(name)
    if g.shape[0] != size:
        g = cv2.resize(g, (size, size), interpolation=cv2.INTER_AREA)
    return _tint(_seamless(g), name, rng).astype(np.float32)


def _smooth_field(rng: np.random.Generator, size: int, sigma: float) -> np.ndarray:
    """Periodic smooth random field (size, size), zero mean, unit std: white noise
    through a Gaussian of ``sigma`` pixels, applied in the Fourier domain (exactly periodic)."""
    from scipy import fft  # deferred: `snaketrack sim video --help` reads this module's grounds

    noise = rng.normal(size=(size, size)).astype(np.float32)
    k = fft.fftfreq(size).astype(np.float32)
    kr = fft.rfftfreq(size).astype(np.float32)
    g = np.exp(-2 * (np.pi * sigma) ** 2 * (k[:, None] ** 2 + kr[None, :] ** 2))
    f = fft.irfft2(fft.rfft2(noise) * g, s=(size, size))
    return ((f - f.mean()) / (f.std() + 1e-9)).astype(np.float32)


def ground_texture(kind: str, size: int = 512, seed: int = 0, tiles: int = 1) -> np.ndarray:
    """A seamless RGB ground texture (tiles*size, tiles*size, 3) uint8 from scikit-image's natural images.

    kind: one of :data:`GROUNDS`; ``"a+b"`` blends two textures through smooth random patches.
    size: pixels of one tile of the source image; tiles: tiles per side of the canvas.
    With several tiles a second copy of the texture (turned by 90 degrees and
    shifted) is blended in through smooth random patches, and brightness and
    colour vary slowly over the canvas, so the tiling does not show as a grid.
    """
    if kind not in GROUNDS:
        raise InputError(f"ground {kind!r}; expected one of {', '.join(GROUNDS)}")
    rng = np.random.default_rng([seed, 4242])
    if kind == "carpet":
        return carpet_texture(size, tiles, rng)
    n = size * tiles
    layers = []
    for name in kind.split("+"):
        t = _tile(name, size, rng)
        canvas = np.tile(t, (tiles, tiles, 1))
        if tiles > 1:
            # bricks keep their rows: turn by 180 degrees only
            turned = np.rot90(t, k=2 if name == "brick" else int(rng.integers(1, 4)))
            other = np.roll(np.tile(turned, (tiles, tiles, 1)), tuple(rng.integers(0, size, 2)), axis=(0, 1))
            a = np.clip(0.5 + 0.9 * _smooth_field(rng, n, n / 14), 0, 1)[..., None]
            canvas = a * canvas + (1 - a) * other
        layers.append(canvas)
    rgb = layers[0]
    if len(layers) == 2:
        a = np.clip(0.5 + 0.8 * _smooth_field(rng, n, n / (6 * tiles ** 0.5)), 0, 1)[..., None]
        rgb = a * layers[0] + (1 - a) * layers[1]
    # slow brightness and hue variation (moist patches, wear), periodic over the canvas
    shade = 1 + 0.10 * _smooth_field(rng, n, n / 8)
    rgb *= shade[..., None]
    for c in range(3):
        rgb[..., c] *= 1 + 0.03 * _smooth_field(rng, n, n / 6)
    return (np.clip(rgb, 0, 1) * 255 + 0.5).astype(np.uint8)


def carpet_texture(size: int, tiles: int, rng: np.random.Generator) -> np.ndarray:
    """Office carpet tiles (tiles*size, tiles*size, 3) uint8: a fine loop pile (two-colour fibre
    speckle over periodic noise), each tile laid a quarter-turn from its neighbours (the pile
    direction shows as a brightness step of a few percent)."""
    dark, light = (np.array(c) for c in _CARPETS[int(rng.integers(len(_CARPETS)))])
    pile = 0.6 * _smooth_field(rng, size, 0.8) + 0.4 * _smooth_field(rng, size, 2.5)
    grain = np.clip(0.5 + 0.22 * pile, 0, 1)
    fleck = _smooth_field(rng, size, 0.6) > 1.8    # scattered fibres of the other colour
    tile = dark + grain[..., None] * (light - dark)
    tile[fleck] = 0.5 * (tile[fleck] + light * rng.uniform(0.9, 1.15, 3))
    n = size * tiles
    canvas = np.empty((n, n, 3), np.float64)
    for r in range(tiles):
        for c in range(tiles):
            t = tile if (r + c) % 2 == 0 else np.rot90(tile).copy()
            canvas[r * size:(r + 1) * size, c * size:(c + 1) * size] = t * (1.04 if (r + c) % 2 else 0.97)
    canvas *= (1 + 0.05 * _smooth_field(rng, n, n / 6))[..., None]   # wear and soiling
    return (np.clip(canvas, 0, 1) * 255 + 0.5).astype(np.uint8)


def _write_png(path: str, rgb: np.ndarray) -> None:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:
        raise InputError(f"could not encode texture {path}")
    with open(path, "wb") as f:
        f.write(buf.tobytes())


def _f(*xs: float) -> str:
    return " ".join(f"{float(x):.6g}" for x in xs)


@dataclass(frozen=True)
class SceneConfig:
    """How a scene is dressed.

    ground: one of :data:`GROUNDS`, or None to draw one from the random seed.
    tile_m: size of one ground texture tile [m] (None: the texture's natural scale, :data:`TILE_M`).
    tile_px, tiles: one tile is resampled to ``tile_px`` pixels; the ground
        texture is a canvas of ``tiles`` x ``tiles`` tiles with patchy variation.
    rocks, sticks, boxes: how many distractors of each kind (None: drawn from the random seed).
    clearance: distractors stay this far [m] from any point the robot's axis visits.
    spread: distractors are scattered up to this far [m] beyond the robot's path.
    shadow_size: shadow map size [texels].
    """

    ground: Optional[str] = None
    tile_m: Optional[float] = None
    rocks: Optional[int] = None
    sticks: Optional[int] = None
    boxes: Optional[int] = None
    clearance: float = 0.12
    spread: float = 1.5
    shadow_size: int = 1024
    tile_px: int = 256
    tiles: int = 8


@dataclass(frozen=True)
class Dressing:
    """What :func:`dress_scene` chose: ground kind and distractor counts (for meta.json)."""

    ground: str
    rocks: int
    sticks: int
    boxes: int
    sun_azimuth: float
    sun_elevation: float


def _min_dist(xy: np.ndarray, path_xy: np.ndarray) -> float:
    return float(np.min(np.linalg.norm(path_xy - xy, axis=1)))


def dress_scene(root: ET.Element, texture_dir: str | os.PathLike, path_xy: np.ndarray,
                config: SceneConfig = SceneConfig(), seed: int = 0, variant: int = 0) -> Dressing:
    """Add ground texture, lights and distractors to the MJCF tree ``root`` (in place).

    texture_dir: an existing folder the PNG textures are written to (must
        exist until the model is compiled).
    path_xy: (M, 2) world points [m] the robot's axis visits during the clip
        (distractors keep ``config.clearance`` from them).
    variant: mixed into the seed (e.g. the scene's index), so scenes of one seed differ.
    Returns the choices made (:class:`Dressing`).
    """
    rng = np.random.default_rng([seed, 1234, variant])
    path_xy = np.asarray(path_xy, float).reshape(-1, 2)
    ground = config.ground or str(rng.choice(OUTDOOR))
    lo = path_xy.min(axis=0) - config.spread
    hi = path_xy.max(axis=0) + config.spread
    area = float(np.prod(hi - lo))
    n_rocks = config.rocks if config.rocks is not None else int(rng.poisson(area * rng.uniform(1.5, 3.0)))
    n_sticks = config.sticks if config.sticks is not None else int(rng.poisson(area * rng.uniform(0.6, 1.5)))
    n_boxes = config.boxes if config.boxes is not None else int(rng.poisson(area * rng.uniform(0.04, 0.12)))

    # --- assets
    asset = root.find("asset")
    if asset is None:
        asset = ET.Element("asset")
        root.insert(3, asset)
    tile = config.tile_m or TILE_M[ground.split("+")[0]]
    tex_path = os.path.join(os.fspath(texture_dir), "ground.png")
    _write_png(tex_path, ground_texture(ground, size=config.tile_px, seed=seed, tiles=config.tiles))
    tile = tile * config.tiles
    ET.SubElement(asset, "texture", name="ground_tex", type="2d", file=tex_path)
    ET.SubElement(asset, "material", name="ground_mat", texture="ground_tex", texuniform="true",
                  texrepeat=_f(1 / tile, 1 / tile), reflectance="0", specular="0.05",
                  shininess="0.05")
    rock_path = os.path.join(os.fspath(texture_dir), "rock.png")
    _write_png(rock_path, ground_texture("gravel", size=256, seed=seed + 1))
    ET.SubElement(asset, "texture", name="rock_tex", type="2d", file=rock_path)
    ET.SubElement(asset, "material", name="rock_mat", texture="rock_tex", texuniform="false",
                  texrepeat="2 2", specular="0.1", shininess="0.1")
    wood = (ground_texture("gravel", size=128, seed=seed + 2).astype(float) * np.array([1.0, 0.8, 0.55])).clip(0, 255)
    wood_path = os.path.join(os.fspath(texture_dir), "wood.png")
    _write_png(wood_path, cv2.resize(wood.astype(np.uint8), (32, 256)))
    ET.SubElement(asset, "texture", name="wood_tex", type="2d", file=wood_path)
    ET.SubElement(asset, "material", name="wood_mat", texture="wood_tex", texrepeat="1 1",
                  specular="0.05", shininess="0.05")

    # --- visual quality: shadows, fog-free, no specular headlight
    visual = root.find("visual")
    if visual is None:
        visual = ET.SubElement(root, "visual")
    ET.SubElement(visual, "quality", shadowsize=str(config.shadow_size), offsamples="4")
    ET.SubElement(visual, "headlight", ambient="0.35 0.36 0.40", diffuse="0.12 0.12 0.12", specular="0 0 0")
    # a directional light's shadow map spans ±shadowclip·extent around the light's
    # position, which LightSchedule keeps above the robot: ±3 m at 1024 texels
    ET.SubElement(visual, "map", znear="0.01", zfar="30", shadowclip="1.5")
    stat = root.find("statistic")
    if stat is None:
        stat = ET.SubElement(root, "statistic")
    stat.set("extent", "2")

    world = root.find("worldbody")
    for geom in world.findall("geom"):
        name = geom.get("name", "")
        if name == "floor":
            geom.set("material", "ground_mat")
            geom.attrib.pop("rgba", None)
        elif name.startswith("obstacle_"):
            geom.set("material", "wood_mat")
            geom.attrib.pop("rgba", None)
    for light in world.findall("light"):
        world.remove(light)
    az = rng.uniform(0, 2 * np.pi)
    el = rng.uniform(np.deg2rad(40), np.deg2rad(70))
    d = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
    ET.SubElement(world, "light", name="sun", mode="fixed", pos=_f(*(8 * d)), dir=_f(*(-d)),
                  directional="true", castshadow="true",
                  diffuse="0.85 0.82 0.75", specular="0.1 0.1 0.1", ambient="0 0 0")
    ET.SubElement(world, "light", name="fill", mode="fixed", pos=_f(-4 * d[0], -4 * d[1], 5),
                  dir=_f(4 * d[0], 4 * d[1], -5), directional="true", castshadow="false",
                  diffuse="0.12 0.13 0.16", specular="0 0 0")

    # --- distractors, scattered around the path, clear of it
    placed: list[np.ndarray] = []
    obstacles = np.array([[float(v) for v in g.get("pos").split()[:2]] for g in world.findall("geom")
                          if g.get("name", "").startswith("obstacle_")]).reshape(-1, 2)

    def spot(size: float) -> Optional[np.ndarray]:
        for _ in range(60):
            xy = rng.uniform(lo, hi)
            if _min_dist(xy, path_xy) < config.clearance + size:
                continue
            if len(obstacles) and _min_dist(xy, obstacles) < 0.06 + size:
                continue
            if placed and _min_dist(xy, np.array(placed)) < 0.05 + size:
                continue
            placed.append(xy)
            return xy
        return None

    common = dict(contype="0", conaffinity="0", group="0", mass="0")
    for k in range(n_rocks):
        s = rng.uniform(0.02, 0.09) * np.array([1.0, rng.uniform(0.6, 1.0), rng.uniform(0.35, 0.7)])
        xy = spot(s[0])
        if xy is None:
            continue
        grey = rng.uniform(0.45, 0.9)
        ET.SubElement(world, "geom", name=f"rock_{k}", type="ellipsoid", size=_f(*s),
                      pos=_f(xy[0], xy[1], 0.6 * s[2]), euler=_f(0, 0, rng.uniform(0, np.pi)),
                      material="rock_mat",
                      rgba=_f(grey, grey * rng.uniform(0.9, 1.0), grey * rng.uniform(0.8, 0.95), 1),
                      **common)
    for k in range(n_sticks):
        L = rng.uniform(0.12, 0.45)
        r = rng.uniform(0.005, 0.014)
        xy = spot(0.5 * L)
        if xy is None:
            continue
        ang = rng.uniform(0, np.pi)
        dx, dy = 0.5 * L * np.cos(ang), 0.5 * L * np.sin(ang)
        ends = _f(xy[0] - dx, xy[1] - dy, r, xy[0] + dx, xy[1] + dy, r * rng.uniform(1.0, 2.5))
        if rng.uniform() < 0.15:
            # a piece of coloured hose or pipe: a hard negative that looks robot-like
            palette = [(0.9, 0.45, 0.1), (0.95, 0.8, 0.15), (0.12, 0.12, 0.13), (0.2, 0.5, 0.2)]
            c = palette[int(rng.integers(len(palette)))]
            ET.SubElement(world, "geom", name=f"stick_{k}", type="capsule", size=_f(max(r, 0.01)), fromto=ends,
                          rgba=_f(*c, 1), **common)
            continue
        c = np.array([0.35, 0.24, 0.13]) * rng.uniform(0.7, 1.3)
        ET.SubElement(world, "geom", name=f"stick_{k}", type="capsule", size=_f(r), fromto=ends,
                      material="wood_mat", rgba=_f(*np.clip(c * 2.2, 0, 1), 1), **common)
    for k in range(n_boxes):
        s = np.array([rng.uniform(0.04, 0.12), rng.uniform(0.03, 0.10), rng.uniform(0.02, 0.08)])
        xy = spot(float(np.linalg.norm(s[:2])))
        if xy is None:
            continue
        palette = [(0.62, 0.48, 0.30), (0.2, 0.3, 0.55), (0.75, 0.75, 0.72), (0.3, 0.45, 0.25)]
        c = palette[int(rng.integers(len(palette)))]
        ET.SubElement(world, "geom", name=f"box_{k}", type="box", size=_f(*s), pos=_f(xy[0], xy[1], s[2]),
                      euler=_f(0, 0, rng.uniform(0, np.pi)), rgba=_f(*c, 1), **common)
    return Dressing(ground=ground, rocks=n_rocks, sticks=n_sticks, boxes=n_boxes,
                    sun_azimuth=float(az), sun_elevation=float(el))


class LightSchedule:
    """Per-frame sunlight: follows the robot (sharp shadows), clouds dim it, the sun drifts.

    Call :meth:`apply` with the MuJoCo model, the frame time [s] and the point
    to light (the robot's centre, world [m]) before ``mj_forward``.
    """

    def __init__(self, model, dressing: Dressing, seed: int = 0, duration: float = 10.0):
        import mujoco  # deferred: the module imports without MuJoCo

        self.sun = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_LIGHT, "sun")
        self.fill = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_LIGHT, "fill")
        rng = np.random.default_rng([seed, 99])
        self.az0, self.el0 = dressing.sun_azimuth, dressing.sun_elevation
        self.daz = rng.uniform(-0.15, 0.15) / max(duration, 1.0)   # rad/s
        self.del_ = rng.uniform(-0.05, 0.05) / max(duration, 1.0)
        self.cloud_f = rng.uniform(0.05, 0.25, 3)
        self.cloud_p = rng.uniform(0, 2 * np.pi, 3)
        self.cloud_depth = rng.uniform(0.15, 0.45)
        self.warm = rng.uniform(-0.05, 0.05)
        self.base_diffuse = model.light_diffuse[self.sun].copy()
        self.base_ambient = model.vis.headlight.ambient.copy()

    def cloud(self, t: float) -> float:
        """Sun intensity factor in (0, 1] at time t [s] (1 = clear)."""
        s = np.mean(np.sin(2 * np.pi * self.cloud_f * t + self.cloud_p))
        return float(1 - self.cloud_depth * 0.5 * (1 + s))

    def apply(self, model, t: float, target: np.ndarray) -> None:
        az = self.az0 + self.daz * t
        el = self.el0 + self.del_ * t
        d = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        model.light_pos[self.sun] = np.asarray(target) + 8.0 * d
        model.light_dir[self.sun] = -d
        c = self.cloud(t)
        tint = np.array([1 + self.warm, 1.0, 1 - self.warm])
        model.light_diffuse[self.sun] = self.base_diffuse * c * tint
        # overcast sky is relatively brighter: ambient drops less than the sun
        model.vis.headlight.ambient[:] = self.base_ambient * (0.75 + 0.25 * c)
