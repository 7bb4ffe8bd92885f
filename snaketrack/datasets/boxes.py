"""Boxes for box-prompted labelling: parse, mask → box, dilation.

A box is ``(x, y, w, h)`` in pixels: ``x, y`` the top-left pixel (column,
row), ``w, h`` its width and height, so it covers columns ``x … x+w-1`` and
rows ``y … y+h-1``. This is what ``--box X,Y,W,H`` takes on the command
line. Segment Anything wants corners ``(x0, y0, x1, y1)``
(:meth:`Box.xyxy`).

The single-camera tracking paper's propagation (its eqs. 3–4): the prompt for frame t is the
bounding box of frame t−1's mask after dilation, so a robot that moved a
little between frames stays inside the prompt.

>>> import numpy as np
>>> m = np.zeros((10, 12), bool); m[2:5, 3:9] = True
>>> mask_to_box(m)
Box(x=3, y=2, w=6, h=3)
>>> mask_to_box(dilate_mask(m, 1))
Box(x=2, y=1, w=8, h=5)
>>> parse_box("3,2,6,3")
Box(x=3, y=2, w=6, h=3)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from snaketrack.errors import InputError


@dataclass(frozen=True)
class Box:
    """Axis-aligned pixel box: top-left ``(x, y)``, size ``(w, h)`` [pixels]."""

    x: int
    y: int
    w: int
    h: int

    @property
    def area(self) -> int:
        """Area [pixels²]."""
        return self.w * self.h

    def xyxy(self) -> np.ndarray:
        """Corners ``[x0, y0, x1, y1]`` (float, (4,)), x1/y1 exclusive, as SAM takes them."""
        return np.array([self.x, self.y, self.x + self.w, self.y + self.h], dtype=float)

    def clip(self, width: int, height: int) -> "Box":
        """This box clipped to an image of ``width × height`` pixels (may become empty)."""
        x0, y0 = max(self.x, 0), max(self.y, 0)
        x1, y1 = min(self.x + self.w, width), min(self.y + self.h, height)
        return Box(x0, y0, max(x1 - x0, 0), max(y1 - y0, 0))

    def expand(self, px: int) -> "Box":
        """This box grown by ``px`` pixels on every side."""
        return Box(self.x - px, self.y - px, self.w + 2 * px, self.h + 2 * px)

    def union(self, other: Optional["Box"]) -> "Box":
        """The smallest box holding this one and ``other`` (None: this one).

        >>> str(Box(0, 0, 4, 4).union(Box(2, 3, 5, 5)))
        '0,0,7,8'
        """
        if other is None:
            return self
        x0, y0 = min(self.x, other.x), min(self.y, other.y)
        x1, y1 = max(self.x + self.w, other.x + other.w), max(self.y + self.h, other.y + other.h)
        return Box(x0, y0, x1 - x0, y1 - y0)

    def to_mask(self, width: int, height: int) -> np.ndarray:
        """The box as a bool mask (height, width)."""
        m = np.zeros((height, width), bool)
        b = self.clip(width, height)
        m[b.y:b.y + b.h, b.x:b.x + b.w] = True
        return m

    def __str__(self) -> str:
        return f"{self.x},{self.y},{self.w},{self.h}"


def parse_box(text: str, width: Optional[int] = None, height: Optional[int] = None) -> Box:
    """Parse ``"X,Y,W,H"`` (pixels) into a :class:`Box`.

    With ``width``/``height`` the box must overlap the image. Raises
    :class:`InputError` naming the text and what was expected.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 4:
        raise InputError(f"--box {text!r}: expected four integers X,Y,W,H in pixels")
    try:
        x, y, w, h = (int(round(float(p))) for p in parts)
    except ValueError:
        raise InputError(f"--box {text!r}: expected four integers X,Y,W,H in pixels") from None
    if w <= 0 or h <= 0:
        raise InputError(f"--box {text!r}: width and height must be positive")
    box = Box(x, y, w, h)
    if width is not None and height is not None and box.clip(width, height).area == 0:
        raise InputError(f"--box {text!r}: lies outside the {width}x{height} image")
    return box


def mask_to_box(mask: np.ndarray) -> Optional[Box]:
    """Tight bounding box of the True pixels of a mask (H, W); None when empty."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise InputError(f"mask: shape {mask.shape}; expected (H, W)")
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return Box(int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1))


def dilate_mask(mask: np.ndarray, px: int) -> np.ndarray:
    """Mask (H, W) dilated by ``px`` pixels (square structuring element); bool."""
    m = np.asarray(mask).astype(np.uint8)
    if px <= 0:
        return m > 0
    k = np.ones((2 * px + 1, 2 * px + 1), np.uint8)
    return cv2.dilate(m, k) > 0


def propagate_box(mask: np.ndarray, dilate_px: int) -> Optional[Box]:
    """The next frame's prompt: box of ``mask`` dilated by ``dilate_px``, clipped to the image."""
    h, w = mask.shape
    b = mask_to_box(dilate_mask(mask, dilate_px))
    return None if b is None else b.clip(w, h)
