"""Frame sources: a video file (OpenCV), a folder of images, a dataset folder, or a live stream.

:func:`open_frames` returns a :class:`FrameSource`; iterate it for
``(index, rgb)`` pairs, RGB uint8 (H, W, 3), starting at any frame and
taking every ``stride``-th one. Missing or unreadable input raises a
one-line :class:`~snaketrack.errors.SnaketrackError` naming the path.

>>> import tempfile, numpy as np, cv2, os
>>> d = tempfile.mkdtemp()
>>> for i in range(3):
...     _ = cv2.imwrite(os.path.join(d, f"{i:03d}.png"), np.full((4, 6, 3), i, np.uint8))
>>> src = open_frames(d)
>>> len(src), src.width, src.height
(3, 6, 4)
>>> [(i, int(f[0, 0, 0])) for i, f in src.frames(start=1)]
[(1, 1), (2, 2)]
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Optional

import cv2
import numpy as np

from snaketrack.datasets.layout import Dataset
from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.io import read_json

# FFmpeg's own log lines (a refused connection, a damaged packet) would break the one-line errors; set
# before OpenCV's FFmpeg backend first runs, and left to the user when already set.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


class FrameSource:
    """Frames of one source. ``len()`` is the frame count (a video's container count).

    A dataset folder also gives its masks (:meth:`mask`, ``has_masks``) and
    ``truth`` (``truth.jsonl`` records, or None).
    """

    path: Path
    width: int
    height: int
    fps: float
    meta: dict[str, Any]
    truth: Optional[list[dict]] = None
    has_masks: bool = False

    def __len__(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def name(self, i: int) -> str:
        """Frame ``i``'s name, the stem a mask file of it carries (``000042``)."""
        return f"{i:06d}"

    def mask(self, i: int) -> Optional[np.ndarray]:
        """Frame ``i``'s mask, bool (H, W), from a dataset's ``masks/``; None when there is none."""
        return None

    def frames(self, start: int = 0, stride: int = 1) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(source_index, rgb)`` for indices ``start, start+stride, …``."""
        raise NotImplementedError  # pragma: no cover - interface


class FolderSource(FrameSource):
    """Images in a folder, in file-name order (or a dataset folder's ``frames/``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        folder = self.path
        self.meta = {}
        if (folder / "frames").is_dir():
            if (folder / "meta.json").is_file():
                self.meta = dict(read_json(folder / "meta.json"))
            folder = folder / "frames"
        self.folder = folder
        self.dataset = None
        if folder != self.path:
            self.dataset = Dataset(self.path)
            self.has_masks = self.dataset.has_masks
        self.files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTS)
        if not self.files:
            raise FileFormatError(f"{folder}: holds no images ({', '.join(IMAGE_EXTS)})")
        first = self.frame(0)
        self.height, self.width = first.shape[:2]
        self.fps = float(self.meta.get("fps", 30.0))

    def __len__(self) -> int:
        return len(self.files)

    @property
    def truth(self) -> Optional[list[dict]]:
        return None if self.dataset is None else self.dataset.truth

    def name(self, i: int) -> str:
        return self.files[i].stem

    def mask(self, i: int) -> Optional[np.ndarray]:
        return None if self.dataset is None else self.dataset.mask_named(self.name(i))

    def frame(self, i: int) -> np.ndarray:
        """Frame ``i``, RGB uint8 (H, W, 3)."""
        p = self.files[i]
        bgr = cv2.imread(str(p), cv2.IMREAD_COLOR)
        if bgr is None:
            raise FileFormatError(f"{p}: not a readable image")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def frames(self, start: int = 0, stride: int = 1) -> Iterator[tuple[int, np.ndarray]]:
        _check_stride(stride)
        for i in range(max(start, 0), len(self.files), stride):
            rgb = self.frame(i)
            if rgb.shape[:2] != (self.height, self.width):
                raise FileFormatError(
                    f"{self.files[i]}: size {rgb.shape[1]}x{rgb.shape[0]}; "
                    f"expected {self.width}x{self.height} like the first image")
            yield i, rgb


class VideoSource(FrameSource):
    """A video file read with OpenCV."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.meta = {}
        cap = cv2.VideoCapture(str(self.path))
        try:
            if not cap.isOpened():
                raise FileFormatError(f"{self.path}: not a readable video (OpenCV could not open it)")
            ok, bgr = cap.read()
            if not ok or bgr is None:
                raise FileFormatError(f"{self.path}: not a readable video (no decodable frame)")
            self.height, self.width = bgr.shape[:2]
            fps = cap.get(cv2.CAP_PROP_FPS)
            self.fps = float(fps) if fps and np.isfinite(fps) and fps > 0 else 30.0
            self._count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        finally:
            cap.release()

    def __len__(self) -> int:
        return self._count

    def frames(self, start: int = 0, stride: int = 1) -> Iterator[tuple[int, np.ndarray]]:
        _check_stride(stride)
        cap = cv2.VideoCapture(str(self.path))
        try:
            i = 0
            while i < start:  # grab() decodes nothing: the cheap, exact way to skip
                if not cap.grab():
                    return
                i += 1
            while True:
                ok, bgr = cap.read()
                if not ok or bgr is None:
                    return
                if (i - start) % stride == 0:
                    yield i, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
                i += 1
        finally:
            cap.release()


def _check_stride(stride: int) -> None:
    if int(stride) < 1:
        raise InputError(f"--stride {stride}: expected a positive integer")


def open_frames(path: str | os.PathLike) -> FrameSource:
    """Open a video file, an image folder or a dataset folder (one with ``frames/``)."""
    p = Path(path)
    if not p.exists():
        raise MissingFileError(f"{p}: no such video file or frames folder")
    if p.is_dir():
        return FolderSource(p)
    if p.suffix.lower() in IMAGE_EXTS:
        raise InputError(f"{p}: a single image; expected a video file or a folder of frames")
    return VideoSource(p)


def is_stream(spec: str) -> bool:
    """Whether ``spec`` names a live stream: a camera index (``0``), a device (``/dev/video0``) or a URL."""
    s = str(spec)
    return s.isdigit() or s.startswith("/dev/video") or "://" in s


class StreamSource:
    """A live stream read with OpenCV: a camera index, a device path or a stream URL (RTSP, HTTP, …).

    ``read()`` gives the next frame, RGB uint8 (H, W, 3), or None when the stream dropped (a failed
    read); ``reopen()`` tries to open it again and says whether it did. Opening checks that a first
    frame comes (``timeout_s`` for URLs), so a wrong camera or URL fails before anything starts.
    """

    def __init__(self, spec: str, timeout_s: float = 10.0):
        self.spec, self.path, self.timeout_s = str(spec), Path(str(spec)), float(timeout_s)
        self.meta: dict[str, Any] = {}
        self._cap = None
        first = self._open()
        if first is None:
            what = "camera" if self.spec.isdigit() or self.spec.startswith("/dev/") else "stream"
            raise InputError(f"{self.spec}: no {what} answered (OpenCV could not open it or read a frame)")
        self._first: Optional[np.ndarray] = first
        self.height, self.width = first.shape[:2]
        fps = self._cap.get(cv2.CAP_PROP_FPS)
        self.fps = float(fps) if fps and np.isfinite(fps) and 0 < fps < 1000 else 30.0

    def _open(self) -> Optional[np.ndarray]:
        self.release()
        target: Any = int(self.spec) if self.spec.isdigit() else self.spec
        ms = int(self.timeout_s * 1000)
        params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, ms]
        level = cv2.utils.logging.getLogLevel()
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)  # "can't open camera by index"
        try:
            cap = cv2.VideoCapture(target, cv2.CAP_ANY, params)
        finally:
            cv2.utils.logging.setLogLevel(level)
        if not cap.isOpened():
            cap.release()
            return None
        self._cap = cap
        return self.read()

    def read(self) -> Optional[np.ndarray]:
        if self._cap is None:
            return None
        first, self._first = getattr(self, "_first", None), None
        if first is not None:
            return first
        ok, bgr = self._cap.read()
        if not ok or bgr is None:
            return None
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def reopen(self) -> bool:
        first = self._open()
        self._first = first
        return first is not None

    def release(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


def source_meta(src: FrameSource, stride: int = 1) -> dict[str, Any]:
    """meta.json fields for a dataset made from ``src`` (its own meta kept when it is a dataset)."""
    meta = dict(src.meta)
    meta.update(width=src.width, height=src.height, fps=src.fps / stride, source=str(src.path))
    return meta


def first_frame(src: FrameSource) -> Optional[np.ndarray]:
    """The first frame of a source, RGB uint8 (H, W, 3), or None when it has none."""
    for _, rgb in src.frames():
        return rgb
    return None
