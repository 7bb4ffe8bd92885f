"""Pinhole camera: intrinsics, lens distortion, resizing.

OpenCV's convention (docs/conventions.md): camera frame x right, y down, z forward;
``K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]`` in pixels; pixel ``(u, v)``
with integer coordinates at pixel centres. Distortion coefficients are
OpenCV's ``(k1, k2, p1, p2[, k3[, k4, k5, k6[, s1..s4[, tx, ty]]]])``.

Sources:

- a dataset's ``meta.json`` (``K``, ``width``, ``height``, optional
  ``dist_coeffs``): :meth:`Camera.from_meta`;
- an OpenCV calibration file, YAML as written by ``cv2.FileStorage``
  (``camera_matrix``, ``dist_coeffs`` or ``distortion_coefficients``,
  optional ``image_width``/``image_height``) or JSON with the same keys
  (a 3×3 nested list, a flat list of 9, or FileStorage's
  ``{"rows", "cols", "data"}``): :func:`load_calibration`;
- no calibration at all: a horizontal field of view (:class:`FieldOfView`,
  ``--fov-deg``), centred principal point, square pixels, no distortion.

Frames and masks are undistorted with OpenCV (:class:`Undistorter`); the
tracker then works with the undistorted camera (same ``K``, no distortion).

Resizing by ``(sx, sy)`` keeps pixel centres consistent: a point at
``u`` goes to ``sx·(u + ½) − ½``, so ``fx' = sx·fx`` and
``cx' = sx·(cx + ½) − ½`` (likewise for y).

>>> cam = Camera.from_K([[500, 0, 319.5], [0, 500, 179.5], [0, 0, 1]], 640, 360)
>>> half = cam.resized(320, 180)
>>> half.fx, half.cx, half.cy
(250.0, 159.5, 89.5)
>>> cam.project([[0.1, -0.05, 2.0]]).round(6).tolist()
[[344.5, 167.0]]
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import cv2
import numpy as np
import torch

from snaketrack.errors import FileFormatError, InputError, MissingFileError, SnaketrackWarning
from snaketrack.io import write_json

_DIST_LENGTHS = (4, 5, 8, 12, 14)


def _validate_K(K: Any, where: str) -> np.ndarray:
    try:
        K = np.asarray(K, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{where}: camera matrix is not numeric; expected a 3x3 matrix of pixels") from None
    if K.shape == (9,):
        K = K.reshape(3, 3)
    if K.shape != (3, 3):
        raise InputError(f"{where}: camera matrix has shape {K.shape}; expected 3x3 [[fx,0,cx],[0,fy,cy],[0,0,1]]")
    if not np.all(np.isfinite(K)):
        raise InputError(f"{where}: camera matrix holds non-finite values {K.tolist()}")
    fx, fy = K[0, 0], K[1, 1]
    if fx <= 0 or fy <= 0:
        raise InputError(f"{where}: focal length fx={fx:g}, fy={fy:g} px; expected both > 0")
    if not np.allclose(K[2], [0, 0, 1]):
        raise InputError(f"{where}: camera matrix last row is {K[2].tolist()}; expected [0, 0, 1]")
    if K[1, 0] != 0:
        raise InputError(f"{where}: camera matrix K[1][0] = {K[1, 0]:g}; expected 0")
    if abs(K[0, 1]) > 1e-9 * fx:
        raise InputError(f"{where}: camera matrix skew K[0][1] = {K[0, 1]:g}; expected 0 (skew is not supported)")
    return K


def _validate_dist(dist: Any, where: str) -> Optional[np.ndarray]:
    if dist is None:
        return None
    try:
        d = np.asarray(dist, dtype=float).ravel()
    except (TypeError, ValueError):
        raise InputError(f"{where}: distortion coefficients are not numeric") from None
    if d.size == 0:
        return None
    if d.size not in _DIST_LENGTHS:
        raise InputError(f"{where}: {d.size} distortion coefficients; expected one of {_DIST_LENGTHS} "
                         "(OpenCV order k1,k2,p1,p2,k3,...)")
    if not np.all(np.isfinite(d)):
        raise InputError(f"{where}: distortion coefficients hold non-finite values {d.tolist()}")
    if not np.any(d):
        return None
    return d


@dataclass(frozen=True)
class Camera:
    """Pinhole intrinsics of images ``width × height``.

    K: (3, 3) float64 [px]. dist: OpenCV distortion coefficients or None (no distortion).
    width, height: image size [px] that K refers to.
    """

    K: np.ndarray
    width: int
    height: int
    dist: Optional[np.ndarray] = field(default=None)

    def __post_init__(self):
        object.__setattr__(self, "K", _validate_K(self.K, "camera"))
        object.__setattr__(self, "dist", _validate_dist(self.dist, "camera"))
        w, h = self.width, self.height
        if not (isinstance(w, (int, np.integer)) and isinstance(h, (int, np.integer))) or w <= 0 or h <= 0:
            raise InputError(f"camera: image size {w}x{h}; expected positive integer width and height [px]")
        object.__setattr__(self, "width", int(w))
        object.__setattr__(self, "height", int(h))

    # -- constructors -----------------------------------------------------
    @classmethod
    def from_K(cls, K: Any, width: int, height: int, dist: Any = None, source: str = "camera") -> "Camera":
        """Camera from a matrix (3×3 or flat 9), an image size [px] and optional distortion."""
        return cls(K=_validate_K(K, source), width=int(width), height=int(height), dist=_validate_dist(dist, source))

    @classmethod
    def from_meta(cls, meta: dict | str | os.PathLike) -> "Camera":
        """Camera from a dataset's ``meta.json`` (a dict, the file, or the dataset folder)."""
        src = "meta.json"
        if not isinstance(meta, dict):
            p = Path(meta)
            if p.is_dir():
                p = p / "meta.json"
            if not p.is_file():
                raise MissingFileError(f"{p}: no such file; expected a dataset meta.json with K, width, height")
            src = str(p)
            try:
                meta = json.loads(p.read_text())
            except json.JSONDecodeError as e:
                raise FileFormatError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from None
        for key in ("K", "width", "height"):
            if key not in meta:
                raise FileFormatError(f"{src}: missing {key!r}; expected K (3x3, px), width and height")
        dist = meta.get("dist_coeffs", meta.get("dist"))
        return cls.from_K(meta["K"], _int(meta["width"], src, "width"), _int(meta["height"], src, "height"),
                          dist, source=f"{src}: K")

    # -- properties -------------------------------------------------------
    @property
    def fx(self) -> float:
        return float(self.K[0, 0])

    @property
    def fy(self) -> float:
        return float(self.K[1, 1])

    @property
    def cx(self) -> float:
        return float(self.K[0, 2])

    @property
    def cy(self) -> float:
        return float(self.K[1, 2])

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) [px]."""
        return self.width, self.height

    @property
    def has_distortion(self) -> bool:
        return self.dist is not None

    def K_tensor(self, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
        """K as a (3, 3) tensor."""
        return torch.as_tensor(self.K, dtype=dtype, device=device)

    # -- operations -------------------------------------------------------
    def resized(self, width: int, height: int) -> "Camera":
        """The camera of the same lens for images resized to ``width × height`` (see module doc)."""
        if width <= 0 or height <= 0:
            raise InputError(f"resize: size {width}x{height}; expected positive width and height [px]")
        sx, sy = width / self.width, height / self.height
        K = self.K.copy()
        K[0, 0] *= sx
        K[1, 1] *= sy
        K[0, 2] = sx * (K[0, 2] + 0.5) - 0.5
        K[1, 2] = sy * (K[1, 2] + 0.5) - 0.5
        return replace(self, K=K, width=int(width), height=int(height))

    def undistorted(self) -> "Camera":
        """This camera after :class:`Undistorter` (same K, no distortion)."""
        return replace(self, dist=None)

    def project(self, points: Any) -> np.ndarray:
        """Pixel coordinates (N, 2) of camera-frame points (N, 3) [m] (pinhole, no distortion)."""
        p = np.atleast_2d(np.asarray(points, dtype=float))
        if p.shape[-1] != 3:
            raise InputError(f"points: shape {p.shape}; expected (N, 3) camera-frame points [m]")
        z = p[:, 2:3]
        return np.hstack([self.fx * p[:, :1] / z + self.cx, self.fy * p[:, 1:2] / z + self.cy])

    def project_torch(self, points: torch.Tensor) -> torch.Tensor:
        """Differentiable pinhole projection of (..., 3) camera-frame points [m] to (..., 2) pixels."""
        z = points[..., 2]
        u = self.fx * points[..., 0] / z + self.cx
        v = self.fy * points[..., 1] / z + self.cy
        return torch.stack([u, v], dim=-1)

    def check_image(self, image: np.ndarray, what: str = "frame") -> None:
        """Raise :class:`InputError` when an image's size is not this camera's."""
        h, w = image.shape[:2]
        if (w, h) != (self.width, self.height):
            raise InputError(f"{what}: size {w}x{h}; the intrinsics are for {self.width}x{self.height} "
                             f"(resize the camera with Camera.resized or pass matching --intrinsics)")


def _int(v: Any, src: str, key: str) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise FileFormatError(f"{src}: {key} = {v!r}; expected a positive integer [px]") from None
    if f != int(f) or f <= 0:
        raise FileFormatError(f"{src}: {key} = {v!r}; expected a positive integer [px]")
    return int(f)


class Undistorter:
    """Undistorts frames (bilinear) and masks (nearest) of one camera with OpenCV.

    The output keeps the camera matrix (``newCameraMatrix = K``), so the
    tracker uses :meth:`Camera.undistorted`. Maps are computed once. With no
    distortion, images pass through unchanged.
    """

    def __init__(self, camera: Camera):
        self.camera = camera
        self.output_camera = camera.undistorted()
        self._maps = None
        if camera.dist is not None:
            self._maps = cv2.initUndistortRectifyMap(
                camera.K, camera.dist, None, camera.K, (camera.width, camera.height), cv2.CV_32FC1
            )

    def frame(self, image: np.ndarray) -> np.ndarray:
        """Undistorted frame, same dtype and shape (H, W[, C])."""
        self.camera.check_image(image, "frame")
        if self._maps is None:
            return image
        return cv2.remap(image, self._maps[0], self._maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)

    def mask(self, mask: np.ndarray) -> np.ndarray:
        """Undistorted mask, bool (H, W) (nearest-neighbour sampling keeps it binary)."""
        self.camera.check_image(mask, "mask")
        if self._maps is None:
            return np.asarray(mask, dtype=bool)
        m = np.asarray(mask).astype(np.uint8)
        return cv2.remap(m, self._maps[0], self._maps[1], cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT) > 0


# -- calibration files ------------------------------------------------------------
_K_KEYS = ("camera_matrix", "cameraMatrix", "K", "intrinsics")
_D_KEYS = ("dist_coeffs", "distortion_coefficients", "distCoeffs", "dist", "D")
_W_KEYS = ("image_width", "width")
_H_KEYS = ("image_height", "height")


def _json_matrix(v: Any) -> Any:
    if isinstance(v, dict) and "data" in v:
        data = np.asarray(v["data"], dtype=float)
        if "rows" in v and "cols" in v:
            return data.reshape(int(v["rows"]), int(v["cols"]))
        return data
    return v


def _first(d: dict, keys: Sequence[str]) -> Any:
    for k in keys:
        if k in d:
            return d[k]
    return None


def _read_fs_node(fs: "cv2.FileStorage", keys: Sequence[str]) -> Any:
    for k in keys:
        node = fs.getNode(k)
        if node.empty() or node.isNone():
            continue
        if node.isReal() or node.isInt():
            return node.real()
        if node.isSeq():
            return [node.at(i).real() for i in range(node.size())]
        mat = node.mat()
        if mat is not None:
            return mat
    return None


def principal_point_off_centre(camera: "Camera") -> bool:
    """Whether ``camera``'s principal point lies more than a quarter of its width or height from the image's
    centre, as no real lens puts it: a calibration made at another image size, or one the views did not fix."""
    w, h = camera.width, camera.height
    return abs(camera.cx - (w - 1) / 2) > w / 4 or abs(camera.cy - (h - 1) / 2) > h / 4


def load_calibration(path: str | os.PathLike, width: Optional[int] = None, height: Optional[int] = None) -> Camera:
    """Read an OpenCV calibration file (YAML/XML from ``cv2.FileStorage``, or JSON).

    The image size comes from ``image_width``/``image_height`` in the file,
    else from ``width``/``height`` given here (the video's size); when both
    exist and differ, K is scaled to the given size (:meth:`Camera.resized`).
    A file without a size whose principal point lies more than a quarter of
    the video's width or height from its centre is refused: it was made at
    another size, and K used as it is would misplace every ray.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such calibration file")
    src = str(path)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise FileFormatError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(data, dict):
            raise FileFormatError(f"{path}: expected a JSON object with camera_matrix and dist_coeffs")
        K = _json_matrix(_first(data, _K_KEYS))
        dist = _json_matrix(_first(data, _D_KEYS))
        fw, fh = _first(data, _W_KEYS), _first(data, _H_KEYS)
    else:
        try:
            fs = cv2.FileStorage(src, cv2.FILE_STORAGE_READ)
            ok = fs.isOpened()
        except (cv2.error, SystemError):
            ok = False
        if not ok:
            raise FileFormatError(f"{path}: not a readable OpenCV FileStorage file (YAML/XML); "
                                  "expected camera_matrix and dist_coeffs")
        try:
            K = _read_fs_node(fs, _K_KEYS)
            dist = _read_fs_node(fs, _D_KEYS)
            fw, fh = _read_fs_node(fs, _W_KEYS), _read_fs_node(fs, _H_KEYS)
        finally:
            fs.release()
    if K is None:
        raise FileFormatError(f"{path}: no camera_matrix; expected one of {list(_K_KEYS)}")
    fw = None if fw is None else _int(fw, src, "image_width")
    fh = None if fh is None else _int(fh, src, "image_height")
    if fw is None or fh is None:
        if width is None or height is None:
            raise FileFormatError(f"{path}: no image_width/image_height and no image size given; "
                                  "expected the size the calibration refers to")
        fw, fh = int(width), int(height)
        sized = False
    else:
        sized = True
    cam = Camera.from_K(K, fw, fh, dist, source=f"{path}: camera_matrix")
    if not sized and principal_point_off_centre(cam):
        raise FileFormatError(f"{path}: principal point ({cam.cx:g}, {cam.cy:g}) far from the centre of the "
                              f"{fw}x{fh} video; the calibration looks made at another image size: add "
                              "its image_width and image_height to the file")
    if width is not None and height is not None and (int(width), int(height)) != (fw, fh):
        cam = cam.resized(int(width), int(height))
    return cam


DEFAULT_FOV_DEG = 65.0
"""Horizontal field of view [deg] assumed for a video with no calibration: a phone's main camera in
landscape video (about 65-70 deg; 16:9 video crops the sensor's 4:3 width little)."""


@dataclass(frozen=True)
class FieldOfView:
    """An uncalibrated camera known only by its horizontal field of view [deg] (a phone's main camera
    films about 65–70° wide in landscape video).

    >>> cam = FieldOfView(90.0).camera(640, 360)
    >>> round(cam.fx, 6), cam.cx, cam.cy
    (320.0, 319.5, 179.5)
    """

    horizontal_deg: float

    def __post_init__(self):
        if not (0.0 < float(self.horizontal_deg) < 180.0):
            raise InputError(f"--fov-deg {self.horizontal_deg}; expected a horizontal field of view in (0, 180) deg")

    def camera(self, width: int, height: int) -> Camera:
        """The pinhole camera of ``width × height`` pixels: ``fx = fy = (W/2) / tan(fov/2)``, principal point
        at the image centre, no distortion."""
        f = (width / 2.0) / np.tan(np.radians(float(self.horizontal_deg)) / 2.0)
        return Camera.from_K([[f, 0, (width - 1) / 2.0], [0, f, (height - 1) / 2.0], [0, 0, 1]], width, height)


def source_camera(meta: dict, width: int, height: int,
                  intrinsics: Optional[str | os.PathLike | FieldOfView] = None,
                  source: str = "the source") -> Camera:
    """The camera of a dataset or video of ``width × height`` pixels: the calibration file ``intrinsics``
    when given (:func:`load_calibration`), or the camera of a :class:`FieldOfView`, else ``meta``'s ``K``
    (a dataset's meta.json), resized to that size, else (with a warning) a :class:`FieldOfView` of
    :data:`DEFAULT_FOV_DEG`."""
    if isinstance(intrinsics, FieldOfView):
        return intrinsics.camera(width, height)
    if intrinsics:
        return load_calibration(intrinsics, width, height)
    if "K" not in meta:
        warnings.warn(f"{source}: no calibration; assuming a {DEFAULT_FOV_DEG:g} deg horizontal field of view "
                      "(a phone's main camera; give --fov-deg DEG or --intrinsics FILE)", SnaketrackWarning,
                      stacklevel=2)
        return FieldOfView(DEFAULT_FOV_DEG).camera(width, height)
    camera = Camera.from_meta(meta)
    return camera if camera.size == (width, height) else camera.resized(width, height)


def save_calibration(path: str | os.PathLike, camera: Camera, extra: Optional[dict[str, Any]] = None) -> None:
    """Write ``camera`` as OpenCV YAML (``.yaml``/``.yml``/``.xml``) or JSON (``.json``), atomically (a
    temporary name in the same folder, then a rename).

    Keys: ``image_width``, ``image_height`` [px], ``camera_matrix`` (3×3) [px], ``dist_coeffs`` (1×5 or
    more, OpenCV order); ``extra``: further scalar keys (numbers or strings, e.g. ``rms_px``), which
    :func:`load_calibration` ignores.
    """
    path = Path(path)
    dist = np.zeros(5) if camera.dist is None else camera.dist
    extra = dict(extra or {})
    if path.suffix.lower() == ".json":
        write_json(path, {"camera_matrix": camera.K.tolist(), "dist_coeffs": dist.tolist(),
                          "image_width": camera.width, "image_height": camera.height, **extra})
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # FileStorage picks the format from the extension, so the temporary name keeps it.
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.part{path.suffix}")
    try:
        fs = cv2.FileStorage(str(tmp), cv2.FILE_STORAGE_WRITE)
        if not fs.isOpened():
            raise InputError(f"{path}: cannot write a calibration file there")
        fs.write("image_width", camera.width)
        fs.write("image_height", camera.height)
        fs.write("camera_matrix", camera.K)
        fs.write("dist_coeffs", dist.reshape(1, -1))
        for key, value in extra.items():
            fs.write(str(key), value if isinstance(value, (str, int)) else float(value))
        fs.release()
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
