"""Image degradations of a rendered frame: motion blur, defocus, vignetting, white balance, noise, JPEG.

Per-clip settings (:func:`clip_settings`) come from the random seed; per-frame
randomness (noise, JPEG quality) from the generator the caller passes to
:func:`degrade`, so the same seed gives the same bytes. Masks and truth are
never degraded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np


@dataclass(frozen=True)
class Degradation:
    """Image degradations; each range is (low, high), drawn uniformly per clip unless noted.

    enabled: apply the degradations (False: clean renders); default True.
    exposure: exposure time as a fraction of the frame interval; default (0.3, 0.7).
    defocus_px: Gaussian defocus sigma [px]; default (0.25, 0.6).
    noise_gain: signal-dependent noise variance per unit intensity; default (0.0004, 0.0015).
    noise_floor: read-noise standard deviation, intensity in [0, 1]; default (0.003, 0.008).
    vignette: corner darkening fraction; default (0.1, 0.3).
    jpeg_quality: quality of the first JPEG compression, drawn per frame; default (55, 90).
    """

    enabled: bool = True
    exposure: tuple[float, float] = (0.3, 0.7)
    defocus_px: tuple[float, float] = (0.25, 0.6)
    noise_gain: tuple[float, float] = (0.0004, 0.0015)
    noise_floor: tuple[float, float] = (0.003, 0.008)
    vignette: tuple[float, float] = (0.1, 0.3)
    jpeg_quality: tuple[int, int] = (55, 90)


def motion_blur_kernel(length: float, angle: float) -> Optional[np.ndarray]:
    """A normalised line kernel of ``length`` [px] at ``angle`` [rad], or None below half a pixel."""
    if length < 0.5:
        return None
    n = int(math.ceil(length)) | 1
    n = max(n, 3)
    k = np.zeros((n * 4 + 1, n * 4 + 1), np.float32)
    c = n * 2
    for s in np.linspace(-length / 2, length / 2, 8 * n):
        x, y = c + 4 * s * math.cos(angle), c + 4 * s * math.sin(angle)
        k[int(round(y)), int(round(x))] += 1
    k = cv2.resize(k, (n, n), interpolation=cv2.INTER_AREA)
    return k / k.sum()


def _kernel_for(flow: np.ndarray, exposure: float) -> Optional[np.ndarray]:
    return motion_blur_kernel(float(np.linalg.norm(flow)) * exposure, float(math.atan2(flow[1], flow[0])))


def degrade(rgb: np.ndarray, rng: np.random.Generator, clip: dict, flow: np.ndarray,
            cfg: Degradation, link_map: Optional[np.ndarray] = None,
            link_flows: Optional[np.ndarray] = None) -> np.ndarray:
    """Apply blur, vignetting, white balance, sensor noise and JPEG to an RGB uint8 image.

    clip: per-clip settings from :func:`clip_settings`; flow: (2,) image motion
        [px] over one frame interval at the image centre (the camera's motion);
        rng: this frame's generator.
    link_map: (H, W) int, the robot link seen at each pixel (−1: not the robot);
        link_flows: (N, 2) each link's image motion [px per frame interval].
        Each link is blurred along its own motion and composited over the
        camera-blurred image (the robot moves against the ground).
    """
    if not cfg.enabled:
        return rgb
    img0 = rgb.astype(np.float32) / 255.0
    img = img0
    k = _kernel_for(flow, clip["exposure"])
    if k is not None:
        img = cv2.filter2D(img0, -1, k, borderType=cv2.BORDER_REFLECT)
    if link_map is not None and link_flows is not None:
        img = img.copy() if img is img0 else img
        H, W = link_map.shape
        ys_all, xs_all = np.nonzero(link_map >= 0)
        links_all = link_map[ys_all, xs_all]
        for link, fl in enumerate(link_flows):
            kl = _kernel_for(np.asarray(fl), clip["exposure"])
            if kl is None:
                continue
            sel = links_all == link
            if not sel.any():
                continue
            ys, xs = ys_all[sel], xs_all[sel]
            pad = kl.shape[0] + 2
            y0, y1 = max(ys.min() - pad, 0), min(ys.max() + pad + 1, H)
            x0, x1 = max(xs.min() - pad, 0), min(xs.max() + pad + 1, W)
            region = (link_map[y0:y1, x0:x1] == link).astype(np.float32)
            w = np.clip(2 * cv2.filter2D(region, -1, kl, borderType=cv2.BORDER_CONSTANT), 0, 1)[..., None]
            blurred = cv2.filter2D(img0[y0:y1, x0:x1], -1, kl, borderType=cv2.BORDER_REFLECT)
            img[y0:y1, x0:x1] = w * blurred + (1 - w) * img[y0:y1, x0:x1]
    img = cv2.GaussianBlur(img, (0, 0), clip["defocus_px"])
    img = img * clip["vignette_map"][..., None] * clip["wb"][None, None]
    var = clip["noise_gain"] * np.clip(img, 0, 1) + clip["noise_floor"] ** 2
    img = img + rng.standard_normal(img.shape, dtype=np.float32) * np.sqrt(var)
    out = np.clip(img * 255 + 0.5, 0, 255).astype(np.uint8)
    q = int(rng.integers(cfg.jpeg_quality[0], cfg.jpeg_quality[1] + 1))
    ok, buf = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, q])
    return cv2.imdecode(buf, cv2.IMREAD_UNCHANGED) if ok else out


def clip_settings(cfg: Degradation, width: int, height: int, seed: int) -> dict:
    """Per-clip degradation settings (exposure, defocus, noise, vignette map, white balance)."""
    rng = np.random.default_rng([seed, 77])
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r2 = ((xx - width / 2) ** 2 + (yy - height / 2) ** 2) / ((width / 2) ** 2 + (height / 2) ** 2)
    return {
        "exposure": float(rng.uniform(*cfg.exposure)),
        "defocus_px": float(rng.uniform(*cfg.defocus_px)),
        "noise_gain": float(rng.uniform(*cfg.noise_gain)),
        "noise_floor": float(rng.uniform(*cfg.noise_floor)),
        "vignette_map": (1 - rng.uniform(*cfg.vignette) * r2).astype(np.float32),
        "wb": rng.uniform(0.94, 1.06, 3).astype(np.float32),
    }
