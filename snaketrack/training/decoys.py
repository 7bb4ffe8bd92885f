"""Decoys for training: sticks in the robot's own colours drawn beside it, labelled ground.

A robot's colours are not its own in the field: a hose, a cable, a stick or a
tool can share the colour of one of its links. A segmenter that has only seen
the robot in its colours then marks every such object as robot, far from the
body, wherever the training video had none. :func:`add_decoys` draws one to
three straight rods in colours of the robot's palette (:func:`robot_palette`:
one k-means cluster each, so a colour only one link carries, such as a head's,
is drawn as often as the body's), shaded as lit cylinders, each over its own
soft shadow, away from the robot. The mask is unchanged: the network has to
tell the robot from its decoys by shape, by the chain of links and joints.

>>> rng = np.random.default_rng(0)
>>> rgb = np.full((48, 64, 3), 90, np.uint8); mask = np.zeros((48, 64), bool)
>>> mask[20:26, 8:40] = True; rgb[mask] = (230, 120, 20)
>>> out = add_decoys(rgb, mask, rng)
>>> bool((out[mask] == rgb[mask]).all()), out.shape
(True, (48, 64, 3))
"""
from __future__ import annotations

import cv2
import numpy as np

from snaketrack.training.grounds import body_width


def robot_palette(rgb: np.ndarray, mask: np.ndarray, k: int = 4, max_pixels: int = 4000,
                  rng: np.random.Generator | None = None) -> np.ndarray:
    """The robot's main colours: RGB float32 (n, 3), n ≤ ``k``, k-means centres of the pixels of the
    bool ``mask`` (h, w) in ``rgb`` (h, w, 3) (a random ``max_pixels`` of them); (0, 3) when the mask is empty."""
    px = rgb[mask].reshape(-1, 3).astype(np.float32)
    if len(px) == 0:
        return np.zeros((0, 3), np.float32)
    if len(px) > max_pixels:
        rng = rng or np.random.default_rng(0)
        px = px[rng.choice(len(px), max_pixels, replace=False)]
    k = int(min(k, len(np.unique(px, axis=0))))
    if k <= 1:
        return px.mean(axis=0, keepdims=True)
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 10, 1.0)
    cv2.setRNGSeed(0)
    _, _, centres = cv2.kmeans(px, k, None, criteria, 1, cv2.KMEANS_PP_CENTERS)
    return centres.astype(np.float32)


def _rod(shape: tuple[int, int], centre: tuple[float, float], angle: float, length: float,
         thickness: float) -> np.ndarray:
    """Cross-section coordinate float32 (h, w) of a straight rod: -1..1 across it inside, NaN outside."""
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    dx, dy = xx - centre[0], yy - centre[1]
    along = dx * np.cos(angle) + dy * np.sin(angle)
    across = -dx * np.sin(angle) + dy * np.cos(angle)
    half = max(thickness / 2.0, 0.5)
    inside = (np.abs(along) <= length / 2.0) & (np.abs(across) <= half)
    return np.where(inside, across / half, np.nan).astype(np.float32)


def add_decoys(rgb: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
               palette: np.ndarray | None = None, width_px: float | None = None,
               count: tuple[int, int] = (1, 3), tries: int = 12) -> np.ndarray:
    """RGB uint8 (h, w, 3) with ``count`` (inclusive range) rods in the robot's colours drawn off the robot.

    ``palette``: RGB (n, 3) colours to draw from (default :func:`robot_palette` of ``mask``); ``width_px``: the
    robot's width [px] (default :func:`~snaketrack.training.grounds.body_width` of ``mask``). Each rod is
    0.4–1.0 body widths thick and 1.5–5 long, at a random angle, shaded across its width as a lit cylinder,
    over a soft shadow on one side; it keeps at least one body width from the robot (a rod that cannot be
    placed in ``tries`` draws is left out). The robot's pixels are never changed. Without a palette (no
    robot in ``mask`` and none given) the image is returned unchanged.
    """
    if palette is None:
        palette = robot_palette(rgb, mask, rng=rng)
    if len(palette) == 0:
        return rgb
    h, w = mask.shape
    width = float(width_px) if width_px is not None else body_width(mask, default=min(h, w) / 16)
    width = max(width, 2.0)
    keep_out = cv2.dilate(mask.astype(np.uint8), cv2.getStructuringElement(
        cv2.MORPH_ELLIPSE, (2 * int(width) + 1, 2 * int(width) + 1))) > 0
    out = rgb.astype(np.float32)
    light = rng.uniform(-0.8, 0.8)  # where across the rods the light falls, one light per image
    sdir = rng.uniform(0, 2 * np.pi)
    for _ in range(int(rng.integers(count[0], count[1] + 1))):
        for _ in range(tries):
            thick = width * rng.uniform(0.4, 1.0)
            length = width * rng.uniform(1.5, 5.0)
            centre = (rng.uniform(0, w), rng.uniform(0, h))
            across = _rod((h, w), centre, rng.uniform(0, np.pi), length, thick)
            body = ~np.isnan(across)
            if body.any() and not (body & keep_out).any():
                break
        else:
            continue
        off = thick * rng.uniform(0.3, 1.0)
        M = np.float32([[1, 0, off * np.cos(sdir)], [0, 1, off * np.sin(sdir)]])
        shade = cv2.GaussianBlur(cv2.warpAffine(body.astype(np.float32), M, (w, h)), (0, 0), max(thick / 3, 0.5))
        out *= 1.0 - rng.uniform(0.2, 0.5) * (shade * ~keep_out)[..., None]
        colour = palette[int(rng.integers(0, len(palette)))] * rng.uniform(0.85, 1.15)
        lit = 1.15 - 0.5 * (np.nan_to_num(across) - light) ** 2  # brightest where the light falls
        rod = np.clip(colour[None, None, :] * np.clip(lit, 0.5, 1.2)[..., None], 0, 255)
        alpha = cv2.GaussianBlur(body.astype(np.float32), (0, 0), 0.6)
        alpha = np.maximum(alpha, body.astype(np.float32)) * ~keep_out
        out = alpha[..., None] * rod + (1.0 - alpha[..., None]) * out
    out[mask] = rgb[mask]
    return np.clip(out, 0, 255).astype(np.uint8)
