"""A tiny stand-in video for tests and examples: a coloured snake-like band
undulating over a textured background, with exact masks.

Not a simulator (that is ``snaketrack sim video``); it exists so the
labeller and the segmenter can be tested in a second, with truth masks.

>>> frames, masks = toy_video(3, width=64, height=48, seed=0)
>>> frames.shape, frames.dtype, masks.shape, masks.dtype
((3, 48, 64, 3), dtype('uint8'), (3, 48, 64), dtype('bool'))
>>> bool(masks.any(axis=(1, 2)).all())
True
"""
from __future__ import annotations

import os

import cv2
import numpy as np

from snaketrack.datasets.layout import DatasetWriter


def toy_background(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """Textured greenish-brown ground (H, W, 3) uint8: smooth blobs plus grain."""
    coarse = rng.uniform(0, 1, (max(height // 16, 2), max(width // 16, 2), 3)).astype(np.float32)
    smooth = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    base = np.array([95, 110, 70], np.float32)
    img = base + 60 * (smooth - 0.5) + rng.normal(0, 10, (height, width, 3)).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def toy_snake_points(t: float, width: int, height: int, phase0: float = 0.0) -> np.ndarray:
    """Centre line (n, 2) [pixels] of the toy snake at time ``t`` [s]."""
    s = np.linspace(0.0, 1.0, 24)
    length = 0.55 * width
    cx = 0.22 * width + 0.10 * width * np.sin(0.3 * t) + 0.02 * width * t
    cy = 0.5 * height + 0.12 * height * np.sin(0.4 * t + phase0)
    x = cx + length * s
    y = cy + 0.12 * height * np.sin(2 * np.pi * (1.2 * s - 0.5 * t) + phase0)
    return np.stack([x, y], axis=1)


def toy_video(n_frames: int, width: int = 160, height: int = 120, seed: int = 0,
              fps: float = 10.0, thickness_frac: float = 0.06) -> tuple[np.ndarray, np.ndarray]:
    """Frames (N, H, W, 3) uint8 RGB and truth masks (N, H, W) bool of the toy snake.

    The background drifts a little each frame (a moving camera) and the
    snake's colour is an orange-red with per-frame lighting noise.
    """
    rng = np.random.default_rng(seed)
    big = toy_background(width + 40, height + 40, rng)
    colour = np.array([200, 80, 40], np.float32) + rng.uniform(-20, 20, 3)
    phase0 = rng.uniform(0, 2 * np.pi)
    th = max(int(round(thickness_frac * height)), 2)
    frames = np.empty((n_frames, height, width, 3), np.uint8)
    masks = np.empty((n_frames, height, width), bool)
    for i in range(n_frames):
        t = i / fps
        dx = int(round(20 + 12 * np.sin(0.5 * t)))
        dy = int(round(20 + 12 * np.cos(0.4 * t)))
        img = big[dy:dy + height, dx:dx + width].astype(np.float32)
        pts = np.round(toy_snake_points(t, width, height, phase0) * 16).astype(np.int32)
        m = np.zeros((height, width), np.uint8)
        cv2.polylines(m, [pts], False, 255, th, cv2.LINE_8, shift=4)
        light = 1.0 + rng.normal(0, 0.05)
        shade = colour * light + rng.normal(0, 6, (height, width, 3))
        img = np.where(m[..., None] > 0, shade, img)
        frames[i] = np.clip(img, 0, 255).astype(np.uint8)
        masks[i] = m > 0
    return frames, masks


def write_toy_dataset(root: str | os.PathLike, n_frames: int, width: int = 160, height: int = 120,
                      seed: int = 0, fps: float = 10.0, thickness_frac: float = 0.06) -> str:
    """Write a toy dataset (frames/, masks/ = truth, meta.json) and return its path."""
    frames, masks = toy_video(n_frames, width, height, seed, fps, thickness_frac)
    meta = {"width": width, "height": height, "fps": fps, "scene": "toy", "seed": seed, "robot": "toy"}
    with DatasetWriter(root, meta) as w:
        for f, m in zip(frames, masks):
            w.write_frame(f, m)
    return str(root)
