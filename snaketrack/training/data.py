"""Training data for the segmenter: a torch ``Dataset`` over dataset folders.

Samples are ``(image, mask)``: image float32 (3, h, w) normalised with the
model's mean/std, mask float32 (1, h, w) in {0, 1}, where ``(h, w)`` is
the padded input size (:func:`~snaketrack.training.model.padded_size`).
Frames the labeller flagged (``labels_report.json``) are left out.

Validation split: frames are cut into runs of ``block`` consecutive
frames and a seeded choice of whole runs is held out, so validation
frames are not the immediate neighbours of training frames (neighbouring
video frames are near copies and would flatter the score).

Augmentations for field video (training split only), each drawn from the
sample's own generator so a seed gives the same batches: horizontal and
vertical flips, scale (0.7–1.4) and a random crop back to the input size,
colour jitter (brightness, contrast, saturation, hue), Gaussian blur (as
from defocus or motion) and Gaussian pixel noise; optionally
(``ground_colour``) a recolouring of the ground alone, away from the robot,
for a robot filmed on other ground than it was labelled on; and (``shadow``)
a synthetic cast shadow beside the robot (:func:`cast_shadow`), the mask
unchanged, for views where the robot's shadow lies against it at other
offsets than in the labelled video.

>>> import tempfile, os
>>> from snaketrack.datasets.toy import write_toy_dataset
>>> root = write_toy_dataset(os.path.join(tempfile.mkdtemp(), "d"), 12, 64, 48)
>>> tr = SegmentationData([root], (48, 64), split="train", val_fraction=0.25, block=3, seed=0)
>>> va = SegmentationData([root], (48, 64), split="val", val_fraction=0.25, block=3, seed=0)
>>> len(tr) + len(va), tr[0][0].shape, tr[0][1].shape
(12, torch.Size([3, 48, 64]), torch.Size([1, 48, 64]))
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import cv2
import numpy as np
import torch

from snaketrack.datasets.label_report import flagged_frames
from snaketrack.datasets.layout import Dataset
from snaketrack.errors import FileFormatError, InputError
from snaketrack.training.grounds import body_width, paste_on_ground
from snaketrack.training.model import IMAGENET_MEAN, IMAGENET_STD, padded_size


def split_indices(n: int, val_fraction: float, block: int, seed: int) -> tuple[list[int], list[int]]:
    """Train and validation frame indices of a dataset of ``n`` frames (whole blocks held out)."""
    if not 0.0 <= val_fraction < 1.0:
        raise InputError(f"val_fraction {val_fraction}: expected in [0, 1)")
    blocks = [list(range(s, min(s + block, n))) for s in range(0, n, block)]
    n_val = int(round(val_fraction * len(blocks)))
    if val_fraction > 0 and n_val == 0 and len(blocks) > 1:
        n_val = 1
    rng = np.random.default_rng(seed)
    val_blocks = set(rng.choice(len(blocks), size=n_val, replace=False).tolist()) if n_val else set()
    train = [i for b, idx in enumerate(blocks) if b not in val_blocks for i in idx]
    val = [i for b, idx in enumerate(blocks) if b in val_blocks for i in idx]
    return train, val


def resize_to(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an image (H, W, 3) to (height, width) = ``size`` (area filter when shrinking)."""
    h, w = size
    return cv2.resize(rgb, (w, h), interpolation=_interpolation(rgb.shape[0], h))


def _interpolation(height: int, new_height: int) -> int:
    """:func:`resize_to`'s OpenCV filter: area when shrinking, linear otherwise."""
    return cv2.INTER_AREA if height > new_height else cv2.INTER_LINEAR


def resize_mask(mask: np.ndarray, size: tuple[int, int], interpolation: Optional[int] = None) -> np.ndarray:
    """Resize a bool mask (H, W) to (height, width) = ``size`` as its image is resized: the mask's
    coverage is filtered with the image's OpenCV ``interpolation`` (None: :func:`resize_to`'s) and cut
    at 0.5. Nearest-neighbour resizing (``cv2.INTER_NEAREST``) would shift the mask by half an output
    pixel against the image at every scale but 1, a tenth of a 10 px robot's width."""
    h, w = size
    m = np.ascontiguousarray(mask, dtype=np.float32)
    interp = _interpolation(m.shape[0], h) if interpolation is None else interpolation
    return cv2.resize(m, (w, h), interpolation=interp) > 0.5


def normalise(rgb: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """RGB uint8 (..., H, W, 3) → float32 (..., 3, H, W), ``(x/255 - mean) / std``."""
    x = rgb.astype(np.float32) / 255.0
    x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.moveaxis(x, -1, -3)


def pad_to(x: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Zero-pad the last two axes of ``x`` at the bottom/right to ``size`` (height, width)."""
    ph, pw = size[0] - x.shape[-2], size[1] - x.shape[-1]
    if ph == 0 and pw == 0:
        return x
    pad = [(0, 0)] * (x.ndim - 2) + [(0, ph), (0, pw)]
    return np.pad(x, pad)


def recolour_ground(rgb: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                    margin_px: int = 3) -> np.ndarray:
    """The image with its ground (farther than ``margin_px`` from the mask) recoloured.

    A random hue shift (±60°), saturation gain (0.5–2.5) and per-channel
    gains (0.8–1.25) are applied to the ground, blended in over the 2 px
    beyond ``margin_px`` from the mask; the robot and its near surroundings
    (label error, the cast shadow's fringe) keep their colours.
    """
    if not np.any(mask):
        dist = np.full(mask.shape, np.inf, np.float32)
    else:
        dist = cv2.distanceTransform((~np.asarray(mask, bool)).astype(np.uint8), cv2.DIST_L2, 5)
    wgt = np.clip((dist - float(margin_px)) / 2.0, 0.0, 1.0)[..., None]
    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV).astype(np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-30, 30)) % 180
    hsv[..., 1] *= rng.uniform(0.5, 2.5)
    alt = cv2.cvtColor(np.clip(hsv, 0, [179, 255, 255]).astype(np.uint8), cv2.COLOR_HSV2RGB).astype(np.float32)
    alt *= rng.uniform(0.8, 1.25, 3).astype(np.float32)
    out = wgt * alt + (1.0 - wgt) * rgb.astype(np.float32)
    return np.clip(out, 0, 255).astype(np.uint8)


def cast_shadow(rgb: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RGB uint8 (h, w, 3) with a soft shadow of the robot (bool mask (h, w)) cast on the ground beside it.

    The shadow is the mask shifted by 0.2–1.0 body widths (twice the largest
    inside distance) in a random direction, its edge blurred (σ 0.5–2 px),
    darkening the ground by a factor 0.3–0.75; pixels of the robot itself are
    untouched, so the label stays right.
    """
    m8 = np.ascontiguousarray(mask).astype(np.uint8)
    if not m8.any():
        return rgb
    d, theta = rng.uniform(0.2, 1.0) * body_width(m8, default=1.0), rng.uniform(0, 2 * np.pi)
    M = np.float32([[1, 0, d * np.cos(theta)], [0, 1, d * np.sin(theta)]])
    h, w = m8.shape
    alpha = cv2.warpAffine(m8.astype(np.float32), M, (w, h), flags=cv2.INTER_LINEAR, borderValue=0.0)
    alpha = cv2.GaussianBlur(alpha, (0, 0), rng.uniform(0.5, 2.0)) * (1.0 - m8)
    gain = 1.0 - rng.uniform(0.25, 0.7) * alpha[..., None]
    return np.clip(rgb.astype(np.float32) * gain, 0, 255).astype(np.uint8)


def augment(rgb: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
            ground_colour: float = 0.0, zoom: tuple[float, float] = (0.7, 1.4),
            rotate_deg: float = 0.0, shadow: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Field-video augmentations of an RGB uint8 (h, w, 3) image and its bool mask, same size out;
    ``ground_colour``: probability of :func:`recolour_ground`; ``zoom``: (low, high) of the
    log-uniform zoom (a robot closer to or farther from the camera than in the labelled video);
    ``rotate_deg``: a rotation about the image centre drawn from ±``rotate_deg`` [degrees] (camera
    roll, other headings of the robot), applied last but for ``shadow``: the probability of
    :func:`cast_shadow`. The draws of ``ground_colour``, ``rotate_deg`` and ``shadow`` come after
    all others, so with them at 0 the other augmentations draw exactly as they would without them."""
    h, w = mask.shape
    lo, hi = float(zoom[0]), float(zoom[1])
    if rng.random() < 0.5:
        rgb, mask = rgb[:, ::-1], mask[:, ::-1]
    if rng.random() < 0.5:
        rgb, mask = rgb[::-1], mask[::-1]
    # scale and crop back to (h, w), padding with reflection where the image shrank
    s = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
    sh, sw = max(int(round(h * s)), 8), max(int(round(w * s)), 8)
    rgb = cv2.resize(np.ascontiguousarray(rgb), (sw, sh), interpolation=cv2.INTER_LINEAR)
    m = resize_mask(mask, (sh, sw), cv2.INTER_LINEAR).astype(np.uint8)
    if sh < h or sw < w:
        py, px = max(h - sh, 0), max(w - sw, 0)
        top, left = int(rng.integers(0, py + 1)), int(rng.integers(0, px + 1))
        rgb = cv2.copyMakeBorder(rgb, top, py - top, left, px - left, cv2.BORDER_REFLECT_101)
        m = cv2.copyMakeBorder(m, top, py - top, left, px - left, cv2.BORDER_REFLECT_101)
    y0 = int(rng.integers(0, rgb.shape[0] - h + 1))
    x0 = int(rng.integers(0, rgb.shape[1] - w + 1))
    rgb, mask = rgb[y0:y0 + h, x0:x0 + w], m[y0:y0 + h, x0:x0 + w] > 0
    # colour jitter in HSV: hue shift, saturation and brightness gains, then contrast
    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV).astype(np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-8, 8)) % 180
    hsv[..., 1] *= rng.uniform(0.7, 1.3)
    hsv[..., 2] *= rng.uniform(0.7, 1.3)
    x = cv2.cvtColor(np.clip(hsv, 0, [179, 255, 255]).astype(np.uint8), cv2.COLOR_HSV2RGB).astype(np.float32)
    c = rng.uniform(0.75, 1.25)
    x = (x - x.mean()) * c + x.mean()
    if rng.random() < 0.3:
        sigma = rng.uniform(0.3, 1.5)
        x = cv2.GaussianBlur(x, (0, 0), sigma)
    if rng.random() < 0.5:
        x = x + rng.normal(0, rng.uniform(2, 10), x.shape).astype(np.float32)
    x = np.clip(x, 0, 255).astype(np.uint8)
    if ground_colour > 0 and rng.random() < ground_colour:
        x = recolour_ground(x, mask, rng)
    if rotate_deg > 0:
        x, mask = rotate(x, mask, float(rng.uniform(-rotate_deg, rotate_deg)))
    if shadow > 0 and rng.random() < shadow:
        x = cast_shadow(x, mask, rng)
    return x, mask


def rotate(rgb: np.ndarray, mask: np.ndarray, degrees: float) -> tuple[np.ndarray, np.ndarray]:
    """Image (h, w, 3) and bool mask (h, w) rotated by ``degrees`` (counter-clockwise on screen) about
    the image centre, same size, borders reflected; the mask is interpolated and cut at 0.5 so its
    edge keeps sub-pixel place."""
    h, w = mask.shape
    M = cv2.getRotationMatrix2D(((w - 1) / 2.0, (h - 1) / 2.0), degrees, 1.0)
    out = cv2.warpAffine(np.ascontiguousarray(rgb), M, (w, h), flags=cv2.INTER_LINEAR,
                         borderMode=cv2.BORDER_REFLECT_101)
    m = cv2.warpAffine(np.ascontiguousarray(mask).astype(np.float32), M, (w, h), flags=cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_REFLECT_101)
    return out, m > 0.5


def robot_crop(rgb: np.ndarray, mask: np.ndarray, size: tuple[int, int], rng: np.random.Generator,
               p_robot: float = 0.7) -> tuple[np.ndarray, np.ndarray]:
    """A (height, width) = ``size`` crop, centred near a random robot pixel with probability ``p_robot``.

    Training on crops at full resolution keeps a thin robot as many pixels
    wide as it is at inference, at a fraction of the cost of whole frames.
    """
    h, w = mask.shape
    ch, cw = size
    ys, xs = np.nonzero(mask)
    if ys.size and rng.random() < p_robot:
        j = int(rng.integers(ys.size))
        cy = int(ys[j]) + int(rng.integers(-ch // 4, ch // 4 + 1))
        cx = int(xs[j]) + int(rng.integers(-cw // 4, cw // 4 + 1))
        y0, x0 = cy - ch // 2, cx - cw // 2
    else:
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    y0, x0 = min(max(y0, 0), h - ch), min(max(x0, 0), w - cw)
    return rgb[y0:y0 + ch, x0:x0 + cw], mask[y0:y0 + ch, x0:x0 + cw]


class SegmentationData(torch.utils.data.Dataset):
    """(image, mask) samples from one or more dataset folders (see module doc).

    roots: dataset folders with ``frames/`` and ``masks/``; input_size:
    (height, width) [pixels] the frames are resized to; split: ``"train"``
    (augmented), ``"val"`` or ``"all"`` (neither split nor augmented).
    crop_size: (height, width) training crops at the input resolution
    (None: whole frames, as the single-camera tracking paper trains); p_robot: share of crops centred near
    the robot; max_frames: evenly spaced subset
    (e.g. to keep validation cheap); ground_colour: probability of
    recolouring the ground of a training sample (:func:`recolour_ground`); zoom, rotate_deg,
    shadow: the zoom range, rotation bound and shadow probability of :func:`augment`; synthetic_ground:
    probability of :func:`~snaketrack.training.grounds.paste_on_ground`, after the crop. Resized frames are cached in
    memory after first use.
    """

    def __init__(self, roots: Sequence[str | os.PathLike], input_size: tuple[int, int], split: str = "train",
                 val_fraction: float = 0.15, block: int = 20, seed: int = 0,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 augment_train: bool = True, skip_flagged: bool = True,
                 crop_size: Optional[tuple[int, int]] = None, max_frames: Optional[int] = None,
                 p_robot: float = 0.7, ground_colour: float = 0.0,
                 zoom: tuple[float, float] = (0.7, 1.4), rotate_deg: float = 0.0, shadow: float = 0.0,
                 synthetic_ground: float = 0.0):
        if split not in ("train", "val", "all"):
            raise InputError(f"split {split!r}: expected train, val or all")
        if not roots:
            raise InputError("no dataset folders given")
        self.input_size = (int(input_size[0]), int(input_size[1]))
        self.crop_size = None
        if crop_size is not None and split == "train":
            ch, cw = min(int(crop_size[0]), self.input_size[0]), min(int(crop_size[1]), self.input_size[1])
            self.crop_size = (ch, cw)
        self.net_size = padded_size(self.crop_size or self.input_size)
        self.mean, self.std = tuple(mean), tuple(std)
        self.split, self.seed = split, int(seed)
        self.augment = augment_train and split == "train"
        self.items: list[tuple[Dataset, int]] = []
        for r, root in enumerate(roots):
            ds = Dataset(root)
            if not ds.has_masks:
                raise FileFormatError(f"{root}: no masks/ to train on; label it first with `snaketrack label`")
            flagged = flagged_frames(root) if skip_flagged else set()
            idx = [i for i in range(len(ds)) if i not in flagged]
            if split != "all":
                tr, va = split_indices(len(idx), val_fraction, block, seed + r)
                idx = [idx[k] for k in (tr if split == "train" else va)]
            self.items.extend((ds, i) for i in idx)
        if max_frames is not None and len(self.items) > max_frames:  # evenly spaced subset
            keep = np.linspace(0, len(self.items) - 1, int(max_frames)).round().astype(int)
            self.items = [self.items[k] for k in keep]
        self._cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._epoch = 0
        self.p_robot = float(p_robot)
        self.ground_colour = float(ground_colour)
        self.zoom = (float(zoom[0]), float(zoom[1]))
        self.rotate_deg = float(rotate_deg)
        self.shadow = float(shadow)
        self.synthetic_ground = float(synthetic_ground)

    def set_epoch(self, epoch: int) -> None:
        """Vary the augmentation draws by epoch (same seed and epoch, same samples)."""
        self._epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.items)

    def raw(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Sample ``k`` resized to the input size: RGB uint8 (h, w, 3), bool mask (h, w)."""
        ds, i = self.items[k]
        key = (id(ds), i)
        if key not in self._cache:
            rgb = resize_to(ds.frame(i), self.input_size)
            m = ds.mask(i)
            if m is None:
                raise FileFormatError(f"{ds.root}: frame {i} has no mask")
            m = resize_mask(m, self.input_size)
            self._cache[key] = (rgb, m)
        return self._cache[key]

    def __getitem__(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        rgb, m = self.raw(k)
        if self.augment:
            rng = np.random.default_rng([self.seed, self._epoch, k])
            rgb, m = augment(rgb, m, rng, self.ground_colour, self.zoom, self.rotate_deg, self.shadow)
        if self.crop_size is not None:
            rng = np.random.default_rng([self.seed, self._epoch, k, 1])
            rgb, m = robot_crop(rgb, m, self.crop_size, rng, self.p_robot)
        if self.augment and self.synthetic_ground > 0:
            rng = np.random.default_rng([self.seed, self._epoch, k, 2])
            if rng.random() < self.synthetic_ground:
                rgb = paste_on_ground(rgb, m, rng)
                if rng.random() < 0.5:  # the robot's own shadow went with its ground
                    rgb = cast_shadow(rgb, m, rng)
        x = pad_to(normalise(rgb, self.mean, self.std), self.net_size)
        y = pad_to(m[None].astype(np.float32), self.net_size)
        return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))
