"""Chessboard calibration of one camera with OpenCV: the intrinsics ``--intrinsics`` reads.

A board of ``cols × rows`` *inner* corners (a 10 × 7-square board has 9 × 6)
with squares of ``square_m`` [m] is found in each image
(``cv2.findChessboardCorners``, on a copy at most :data:`DETECT_MAX_PX`
pixels wide, then ``cv2.cornerSubPix`` at full size), and
``cv2.calibrateCamera`` fits ``K`` (fx, fy, cx, cy [px], no skew) and the
distortion ``(k1, k2, p1, p2, k3)`` to the corners of every image where the
board was found; ``k3`` is held at 0 unless asked for (it is poorly
determined unless the boards reach the image corners, and most lenses but
wide-angle ones need only k1, k2). Pixel coordinates follow docs/conventions.md (integer
coordinates at pixel centres).

Images come from files, folders of images and video files
(:func:`calibration_images`); :func:`calibrate` runs the whole fit and
:func:`~snaketrack.tracker.calib.camera.save_calibration` writes the result.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

import cv2
import numpy as np

from snaketrack.datasets.video import IMAGE_EXTS, VideoSource
from snaketrack.errors import FileFormatError, InputError, MissingFileError, SnaketrackWarning
from snaketrack.tracker.calib.camera import Camera, principal_point_off_centre

#: Boards are searched for on a copy of the image at most this wide [px] (speed); corners are refined at full size.
DETECT_MAX_PX = 1280
#: Frames a video gives by default: every k-th frame with k = frame count / this.
VIDEO_FRAMES = 30
#: Fewest images with a board found that a calibration accepts.
MIN_VIEWS = 3


def parse_board(text: str, flag: str = "--board") -> tuple[int, int]:
    """``"COLSxROWS"`` inner corners (e.g. ``"9x6"``) → ``(cols, rows)``; a one-line :class:`InputError` naming
    ``flag`` for anything else (each at least 2).

    >>> parse_board("9x6")
    (9, 6)
    """
    try:
        cols, rows = (int(v) for v in str(text).lower().replace("×", "x").split("x"))
    except ValueError:
        raise InputError(f"{flag} {text!r}; expected COLSxROWS inner corners, e.g. 9x6 for a board of "
                         "10 x 7 squares") from None
    if cols < 2 or rows < 2:
        raise InputError(f"{flag} {text!r}; expected at least 2 inner corners each way, e.g. 9x6")
    return cols, rows


def board_points(board: tuple[int, int], square_m: float) -> np.ndarray:
    """The board's inner corners (cols·rows, 3) float32 [m] in its own plane (z = 0), row by row, in the
    order ``cv2.findChessboardCorners`` reports them."""
    cols, rows = board
    obj = np.zeros((rows * cols, 3), np.float32)
    obj[:, :2] = np.mgrid[0:cols, 0:rows].T.reshape(-1, 2) * float(square_m)
    return obj


def find_board(gray: np.ndarray, board: tuple[int, int]) -> Optional[np.ndarray]:
    """The board's inner corners (cols·rows, 1, 2) float32 [px] in a grey image (H, W) uint8, or None
    when the whole board is not found."""
    h, w = gray.shape[:2]
    scale = min(1.0, DETECT_MAX_PX / max(h, w))
    small = gray if scale == 1.0 else cv2.resize(gray, (round(w * scale), round(h * scale)),
                                                 interpolation=cv2.INTER_AREA)
    flags = cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE | cv2.CALIB_CB_FAST_CHECK
    ok, corners = cv2.findChessboardCorners(small, board, flags=flags)
    if not ok or corners is None:
        return None
    corners = corners.astype(np.float32)
    if scale != 1.0:  # back to full-size pixel centres
        corners = ((corners + 0.5) / np.float32(scale) - 0.5).astype(np.float32)
    cols, rows = board
    grid = corners.reshape(rows, cols, 2)
    spacing = min(np.linalg.norm(np.diff(grid, axis=1), axis=-1).min(),
                  np.linalg.norm(np.diff(grid, axis=0), axis=-1).min())
    half = int(np.clip(spacing * 0.4, 2, 11))  # the search window stays inside the corner's own squares
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 50, 1e-3)
    cv2.cornerSubPix(gray, corners, (half, half), (-1, -1), criteria)
    return corners


def implausible(camera: Camera, max_aspect: float = 0.05) -> list[str]:
    """What no real camera would show in a fitted ``camera``: ``fx`` and ``fy`` more than ``max_aspect``
    apart (pixels are square), a principal point more than a quarter of the image from its centre.

    >>> implausible(Camera.from_K([[600, 0, 319.5], [0, 600, 179.5], [0, 0, 1]], 640, 360))
    []
    >>> implausible(Camera.from_K([[900, 0, 60], [0, 600, 179.5], [0, 0, 1]], 640, 360))
    ['fx 900.0 and fy 600.0 px differ by 50 %', 'principal point (60.0, 179.5) px far from the centre of 640x360']
    """
    out = []
    aspect = abs(camera.fx / camera.fy - 1.0)
    if aspect > max_aspect:
        out.append(f"fx {camera.fx:.1f} and fy {camera.fy:.1f} px differ by {aspect * 100:.0f} %")
    w, h = camera.width, camera.height
    if principal_point_off_centre(camera):
        out.append(f"principal point ({camera.cx:.1f}, {camera.cy:.1f}) px far from the centre of {w}x{h}")
    return out


@dataclass(frozen=True)
class CalibrationResult:
    """A fitted camera and how well it fits.

    camera: the :class:`Camera` (K [px], distortion, image size [px]).
    rms_px: RMS reprojection error over every corner used [px].
    found, tried: images where the board was found, images searched.
    used: names of the images where it was found.
    distances_m: distance of the board's first corner from the camera in each used image [m]
        (scaled by the square size given).
    """

    camera: Camera
    rms_px: float
    found: int
    tried: int
    used: tuple[str, ...]
    distances_m: tuple[float, ...]


def _image_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTS)
    if not files:
        raise FileFormatError(f"{folder}: holds no images ({', '.join(IMAGE_EXTS)})")
    return files


def _read_gray(p: Path) -> np.ndarray:
    gray = cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)
    if gray is None:
        raise FileFormatError(f"{p}: not a readable image")
    return gray


def calibration_images(paths: Sequence[str | os.PathLike], every: Optional[int] = None
                       ) -> tuple[int, Iterator[tuple[str, np.ndarray]]]:
    """The images to search: ``(count, iterator of (name, grey (H, W) uint8))``.

    paths: image files, folders of images (file-name order) and video files; a video gives every
    ``every``-th frame (default: about :data:`VIDEO_FRAMES` frames spread over it). Missing paths raise
    :class:`MissingFileError` before anything is read.
    """
    if every is not None and int(every) < 1:
        raise InputError(f"--every {every}; expected a positive integer (take every K-th video frame)")
    parts: list[tuple[int, Callable[[], Iterable[tuple[str, np.ndarray]]]]] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise MissingFileError(f"IMAGES: {p}: no such image, folder or video file")
        if p.is_dir():
            files = _image_files(p)
            parts.append((len(files), lambda files=files: ((str(f), _read_gray(f)) for f in files)))
        elif p.suffix.lower() in IMAGE_EXTS:
            parts.append((1, lambda p=p: [(str(p), _read_gray(p))]))
        else:
            src = VideoSource(p)
            k = int(every) if every else max(1, round(len(src) / VIDEO_FRAMES))

            def frames(src=src, k=k):
                for i, rgb in src.frames(stride=k):
                    yield f"{src.path}#{i}", cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)

            parts.append((math.ceil(len(src) / k) if len(src) else 0, frames))

    def chain():
        for _, make in parts:
            yield from make()

    return sum(n for n, _ in parts), chain()


def calibrate(images: Iterable[tuple[str, np.ndarray]], board: tuple[int, int], square_m: float,
              progress: Optional[Callable[[Iterable], Iterable]] = None, fit_k3: bool = False
              ) -> CalibrationResult:
    """Find the board in each ``(name, grey (H, W) uint8)`` image and fit the camera (see module doc).

    board: (cols, rows) inner corners; square_m: the squares' side [m]; progress: wraps the image iterator
    (a progress bar); fit_k3: fit the third radial coefficient too (wide-angle lenses). Raises
    :class:`InputError` when images differ in size or fewer than :data:`MIN_VIEWS` show the board.
    """
    if not (square_m > 0 and np.isfinite(square_m)):
        raise InputError(f"--square-mm {square_m * 1000:g}; expected a positive square size in millimetres")
    obj = board_points(board, square_m)
    corners, used, size, tried = [], [], None, 0
    for name, gray in (progress(images) if progress else images):
        tried += 1
        h, w = gray.shape[:2]
        if size is None:
            size = (w, h)
        elif (w, h) != size:
            raise InputError(f"{name}: size {w}x{h}; expected {size[0]}x{size[1]} like the first image "
                             "(calibrate one camera at one resolution)")
        c = find_board(gray, board)
        if c is not None:
            corners.append(c)
            used.append(name)
    cols, rows = board
    if len(corners) < MIN_VIEWS:
        raise InputError(f"the {cols}x{rows} board was found in {len(corners)} of {tried} images; expected at "
                         f"least {MIN_VIEWS} (check --board: inner corners, a board of {cols + 1}x{rows + 1} "
                         "squares)")
    flags = 0 if fit_k3 else cv2.CALIB_FIX_K3
    rms, K, dist, _, tvecs = cv2.calibrateCamera([obj] * len(corners), corners, size, None, None, flags=flags)
    K[0, 1] = 0.0
    camera = Camera.from_K(K, size[0], size[1], np.asarray(dist).ravel(), source="calibration")
    for reason in implausible(camera):
        warnings.warn(f"calibration: {reason}; the board views do not pin the camera down (tilt the board more, "
                      "fill more of the frame, use more views)", SnaketrackWarning, stacklevel=2)
    dists = tuple(float(np.linalg.norm(t)) for t in tvecs)
    return CalibrationResult(camera=camera, rms_px=float(rms), found=len(corners), tried=tried,
                             used=tuple(used), distances_m=dists)
