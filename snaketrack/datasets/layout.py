"""The on-disk dataset layout (docs/conventions.md): read it, and write it frame by frame.

A dataset is a folder::

    frames/000000.jpg …     images (read back as RGB uint8, (H, W, 3))
    masks/000000.png …      uint8 0/255, same size (read back as bool (H, W))
    meta.json               K (3×3, pixels), width, height, fps, robot, scene, seed, …
    truth.jsonl             synthetic data only: one JSON object a frame

Every file is written atomically (temporary name, then rename) and
``truth.jsonl`` is appended and flushed per frame, so an interrupted run
leaves every finished frame readable and :class:`DatasetWriter` can resume.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Optional

import cv2
import numpy as np

from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.io import atomic_write_bytes, read_json, to_json, write_json

FRAME_EXT = ".jpg"
MASK_EXT = ".png"


def frame_name(i: int, ext: str = FRAME_EXT) -> str:
    """File name of frame ``i``: ``000042.jpg``."""
    return f"{i:06d}{ext}"


def encode_image(rgb: np.ndarray, ext: str = FRAME_EXT, jpeg_quality: int = 92) -> bytes:
    """Encode an RGB uint8 image (H, W, 3) as JPEG/PNG bytes."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise InputError(f"image: dtype {rgb.dtype}, shape {rgb.shape}; expected uint8 (H, W, 3)")
    params = [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)] if ext == ".jpg" else []
    ok, buf = cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise InputError(f"could not encode image as {ext}")
    return buf.tobytes()


def encode_mask(mask: np.ndarray) -> bytes:
    """Encode a mask (H, W) (bool or 0/255) as a PNG of 0/255 uint8."""
    if mask.ndim != 2:
        raise InputError(f"mask: shape {mask.shape}; expected (H, W)")
    m = np.where(np.asarray(mask) > 0, 255, 0).astype(np.uint8)
    ok, buf = cv2.imencode(MASK_EXT, m)
    if not ok:
        raise InputError("could not encode mask as PNG")
    return buf.tobytes()


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Read an image file as RGB uint8 (H, W, 3); one-line error if missing or corrupt."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such image")
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise FileFormatError(f"{path}: not a readable image")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def read_mask(path: str | os.PathLike) -> np.ndarray:
    """Read a mask PNG as bool (H, W) (pixels > 127 are the robot)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such mask")
    m = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    if m is None:
        raise FileFormatError(f"{path}: not a readable mask image")
    return m > 127


class DatasetWriter:
    """Writes a dataset folder frame by frame; resumable.

    ``meta`` must hold at least ``width``, ``height`` and ``fps``; ``K`` and
    the rest are added as given. With ``resume=True`` an existing folder is
    continued after its last complete frame (:attr:`next_frame`); otherwise
    an existing non-empty ``frames/`` is an error, so nothing is overwritten
    by accident.
    """

    def __init__(self, root: str | os.PathLike, meta: dict[str, Any], resume: bool = False,
                 masks: bool = True, truth: bool = False):
        self.root = Path(root)
        for key in ("width", "height", "fps"):
            if key not in meta:
                raise InputError(f"dataset meta: missing {key!r}")
        self.meta = dict(meta)
        self.masks, self.truth = masks, truth
        self.frames_dir = self.root / "frames"
        self.masks_dir = self.root / "masks"
        existing = sorted(self.frames_dir.glob(f"*{FRAME_EXT}")) if self.frames_dir.is_dir() else []
        if existing and not resume:
            raise InputError(f"{self.root}: already holds {len(existing)} frames; choose a new --out or resume")
        self.frames_dir.mkdir(parents=True, exist_ok=True)
        if masks:
            self.masks_dir.mkdir(parents=True, exist_ok=True)
        self.next_frame = self._complete_frames() if resume else 0
        if truth:
            self._trim_truth(self.next_frame)
        write_json(self.root / "meta.json", self.meta)
        self._truth_f = open(self.root / "truth.jsonl", "a") if truth else None

    def _complete_frames(self) -> int:
        n = 0
        truth_lines = self._truth_lines() if self.truth else None
        while (self.frames_dir / frame_name(n)).is_file() and (
            not self.masks or (self.masks_dir / frame_name(n, MASK_EXT)).is_file()
        ) and (truth_lines is None or n < len(truth_lines)):
            n += 1
        return n

    def _truth_lines(self) -> list[str]:
        p = self.root / "truth.jsonl"
        if not p.is_file():
            return []
        lines = p.read_text().splitlines()
        good = []
        for line in lines:
            try:
                json.loads(line)
            except json.JSONDecodeError:
                break  # a torn last line from an interruption
            good.append(line)
        return good

    def _trim_truth(self, n: int) -> None:
        lines = self._truth_lines()[:n]
        atomic_write_bytes(self.root / "truth.jsonl", "".join(l + "\n" for l in lines).encode())

    def write_frame(self, rgb: np.ndarray, mask: Optional[np.ndarray] = None,
                    truth: Optional[dict[str, Any]] = None) -> int:
        """Write the next frame (RGB uint8 (H, W, 3)), its mask and truth; returns its index."""
        i = self.next_frame
        h, w = int(self.meta["height"]), int(self.meta["width"])
        if rgb.shape[:2] != (h, w):
            raise InputError(f"frame {i}: size {rgb.shape[1]}x{rgb.shape[0]}; expected {w}x{h} (meta.json)")
        if self.masks:
            if mask is None or mask.shape != (h, w):
                raise InputError(f"frame {i}: mask shape {None if mask is None else mask.shape}; expected ({h}, {w})")
            atomic_write_bytes(self.masks_dir / frame_name(i, MASK_EXT), encode_mask(mask))
        atomic_write_bytes(self.frames_dir / frame_name(i), encode_image(rgb))
        if self._truth_f is not None:
            if truth is None:
                raise InputError(f"frame {i}: truth record missing")
            self._truth_f.write(to_json(dict(truth, frame=i), indent=None) + "\n")
            self._truth_f.flush()
            os.fsync(self._truth_f.fileno())
        self.next_frame += 1
        return i

    def close(self) -> None:
        if self._truth_f is not None:
            self._truth_f.close()
            self._truth_f = None

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Dataset:
    """Read access to a dataset folder (see module doc).

    ``len(ds)`` frames; ``ds.frame(i)`` RGB uint8 (H, W, 3); ``ds.mask(i)``
    bool (H, W) or None when the dataset has no masks; ``ds.truth`` a list of
    per-frame dicts or None; ``ds.K`` (3, 3) float array [pixels].
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.is_file():
            raise InputError(f"{self.root}: a file, not a dataset folder (frames/, masks/, meta.json); a video "
                             "becomes one with `snaketrack label`")
        if not self.root.is_dir():
            raise MissingFileError(f"{self.root}: no such dataset folder")
        meta_path = self.root / "meta.json"
        self.meta: dict[str, Any] = read_json(meta_path) if meta_path.is_file() else {}
        self.frames_dir = self.root / "frames"
        if not self.frames_dir.is_dir():
            raise FileFormatError(f"{self.root}: no frames/ folder; expected a dataset folder "
                                  "(frames/, masks/, meta.json; docs/conventions.md)")
        self._frames = sorted(self.frames_dir.glob(f"*{FRAME_EXT}")) or sorted(self.frames_dir.glob("*.png"))
        if not self._frames:
            raise FileFormatError(f"{self.frames_dir}: holds no frames")
        self.masks_dir = self.root / "masks"
        self._truth: Optional[list[dict]] = None
        self._truth_loaded = False

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def width(self) -> int:
        return int(self.meta.get("width") or self.frame(0).shape[1])

    @property
    def height(self) -> int:
        return int(self.meta.get("height") or self.frame(0).shape[0])

    @property
    def fps(self) -> float:
        return float(self.meta.get("fps", 30.0))

    @property
    def K(self) -> Optional[np.ndarray]:
        if "K" not in self.meta:
            return None
        K = np.asarray(self.meta["K"], dtype=float)
        if K.shape != (3, 3):
            raise FileFormatError(f"{self.root / 'meta.json'}: K has shape {K.shape}; expected 3x3")
        return K

    @property
    def has_masks(self) -> bool:
        return self.masks_dir.is_dir() and any(self.masks_dir.glob(f"*{MASK_EXT}"))

    def frame_path(self, i: int) -> Path:
        return self._frames[i]

    def frame(self, i: int) -> np.ndarray:
        return read_image(self._frames[i])

    def mask(self, i: int) -> Optional[np.ndarray]:
        return self.mask_named(self._frames[i].stem)

    def mask_named(self, stem: str) -> Optional[np.ndarray]:
        """The mask of the frame named ``stem`` (``000042``), bool (H, W), or None when it has none."""
        p = self.masks_dir / (stem + MASK_EXT)
        return read_mask(p) if p.is_file() else None

    @property
    def truth(self) -> Optional[list[dict]]:
        if not self._truth_loaded:
            p = self.root / "truth.jsonl"
            if p.is_file():
                rows = []
                for n, line in enumerate(p.read_text().splitlines()):
                    if not line.strip():
                        continue
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise FileFormatError(f"{p}: line {n + 1} is not valid JSON") from None
                self._truth = rows
            self._truth_loaded = True
        return self._truth

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self)))


def open_dataset(path: str | os.PathLike) -> Dataset:
    """The dataset folder ``path``, which must hold a ``meta.json``; a one-line error otherwise."""
    path = Path(path)
    if not (path / "meta.json").is_file():
        raise MissingFileError(f"{path}: not a dataset folder (no meta.json)")
    return Dataset(path)
