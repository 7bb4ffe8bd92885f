"""Joint speeds and head velocities for the estimators, from ``states.csv`` or ``track.csv``.

Two tables (docs/conventions.md), told apart by their columns:

- the obstacle world's ``states.csv``: ``t, phi_*, phidot_*, theta_*,
  head_x, head_y, head_vx, head_vy`` (world frame). φ̇ and ṙ are used as
  they are; a file without ``phidot_*`` / ``head_vx, head_vy`` gets them by
  differentiating ``phi_*`` / ``head_x, head_y``.
- the tracker's ``track.csv``: ``frame, t, q_1…q_J, …, head_x, head_y,
  head_z`` (camera frame), ``status``. Joint angles are ``q_*``; the head
  position is projected on a plane of the *camera* frame chosen by ``plane``:
  ``"xy"`` (default: image right and image down, the ground plane when the
  camera looks straight down, as from a drone), ``"xz"`` (right and forward:
  the ground plane for a camera held level, looking along the floor) or
  ``"yz"``. Both φ̇ and ṙ are differentiated.

Either table may come as CSV or as JSON lines, the stream ``snaketrack track
--states FILE`` writes: one JSON object a row, keyed by the column names, NaN
written as ``null``. A file is read as JSON lines when its name ends in
``.jsonl`` or ``.ndjson`` or its first non-blank character is ``{``
(:func:`read_columns`); the two forms of one table give the same arrays.

Differentiation: a Savitzky–Golay filter (``scipy.signal.savgol_filter``,
``deriv=1``): a least-squares polynomial of order ``polyorder`` fitted over
``window`` samples around each sample, its slope taken at the centre;
``mode="interp"`` fits the end windows. It needs uniform sampling: if the
time steps vary by more than 5 % of their median the series is first
resampled onto a uniform grid of the median step by linear interpolation.
Frames whose ``status`` is ``lost`` and NaN values are filled by linear
interpolation in time before smoothing (``filled`` counts them).

>>> import numpy as np
>>> t = np.arange(50) * 0.01
>>> d = savgol_derivative(np.sin(t)[:, None], t, window=7, polyorder=3)
>>> bool(np.allclose(d[:, 0], np.cos(t), atol=1e-5))
True
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.signal import savgol_filter

from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.io import read_csv_columns

PLANES = {"xy": ("head_x", "head_y"), "xz": ("head_x", "head_z"), "yz": ("head_y", "head_z")}
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True)
class SmoothingConfig:
    """Savitzky–Golay differentiation: ``window`` samples (odd, > polyorder), polynomial ``polyorder``.

    Default 9 samples, order 2: 37.5 ms at 240 Hz, 0.3 s at 30 fps.
    """

    window: int = 9
    polyorder: int = 2

    def __post_init__(self) -> None:  # checked where given, also for a table whose velocities are read as written
        if int(self.window) % 2 != 1 or self.window <= self.polyorder or self.polyorder < 1:
            raise InputError(f"--sg-window {self.window} --sg-order {self.polyorder}: expected an odd window "
                             "larger than the order >= 1")


@dataclass(frozen=True)
class EstimationInput:
    """What the estimators consume, T samples and J joints.

    t (T,) [s]; phi (T, J) [rad]; phidot (T, J) [rad/s]; rdot (T, 2) head
    velocity [m/s] in ``frame``; source: "states" or "track";
    differentiated: names of the quantities obtained by differentiation;
    filled: number of values filled by interpolation; resampled: whether
    the time grid was made uniform.
    """

    t: np.ndarray
    phi: np.ndarray
    phidot: np.ndarray
    rdot: np.ndarray
    source: str
    frame: str
    differentiated: tuple[str, ...] = ()
    filled: int = 0
    resampled: bool = False


def savgol_derivative(y: np.ndarray, t: np.ndarray, window: int = 9, polyorder: int = 2) -> np.ndarray:
    """Time derivative of uniformly sampled y (T, …) at times t (T,) [s] by Savitzky–Golay smoothing."""
    y = np.asarray(y, dtype=float)
    t = np.asarray(t, dtype=float)
    if window % 2 != 1 or window <= polyorder or polyorder < 1:
        raise InputError(f"Savitzky-Golay window = {window}, polyorder = {polyorder}; "
                         "expected an odd window larger than polyorder >= 1")
    if y.shape[0] < window:
        raise InputError(f"{y.shape[0]} samples; expected at least the smoothing window ({window}) to differentiate")
    dt = np.diff(t)
    if np.any(dt <= 0):
        raise InputError("t: times not strictly increasing; expected one row per time step")
    h = float(np.median(dt))
    if np.max(np.abs(dt - h)) > 0.05 * h:
        raise InputError("t: non-uniform time steps; resample first (read_states does)")
    return savgol_filter(y, window, polyorder, deriv=1, delta=h, axis=0, mode="interp")


def is_json_lines(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds JSON lines: a ``.jsonl`` / ``.ndjson`` name, or ``{`` as its first non-blank character."""
    path = Path(path)
    if path.suffix.lower() in JSON_LINES_SUFFIXES:
        return True
    with open(path, "rb") as f:
        while chunk := f.read(4096):
            head = chunk.lstrip()
            if head:
                return head[:1] == b"{"
    return False


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_str(v) -> bool:
    return isinstance(v, str)


def read_json_lines_columns(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read JSON lines (one object a row, the same keys on every line) into ``{column: array}``.

    Numbers and ``null`` (NaN) give float arrays; strings (e.g. ``status``)
    give object arrays, as :func:`snaketrack.io.read_csv_columns` does for a
    CSV. Blank lines are skipped. FileFormatError naming the file and line
    for a line that is not a JSON object, a line whose keys differ from the
    first line's, or a value of another kind (number, string) than the
    column's first non-null one.
    """
    path = Path(path)
    rows: list[dict] = []
    lines: list[int] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            where = f"{path}: line {number}"
            try:
                obj = json.loads(raw.decode("utf-8").rstrip())
            except UnicodeDecodeError:
                raise FileFormatError(f"{where}: not UTF-8 text; expected one JSON object a line") from None
            except json.JSONDecodeError as e:
                raise FileFormatError(f"{where}: not valid JSON ({e.msg}, column {e.colno}); "
                                      "expected one JSON object a line") from None
            if not isinstance(obj, dict):
                raise FileFormatError(f"{where}: a JSON {type(obj).__name__}; expected one JSON object a line")
            if rows and obj.keys() != rows[0].keys():
                missing = [k for k in rows[0] if k not in obj]
                extra = [k for k in obj if k not in rows[0]]
                raise FileFormatError(f"{where}: keys differ from line {lines[0]}'s"
                                      + (f"; missing {', '.join(missing)}" if missing else "")
                                      + (f"; extra {', '.join(extra)}" if extra else ""))
            rows.append(obj)
            lines.append(number)
    if not rows:
        raise FileFormatError(f"{path}: no JSON object; expected one a line")
    out: dict[str, np.ndarray] = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        first = next((v for v in values if v is not None), 0.0)
        kind = _is_str if isinstance(first, str) else _is_number
        bad = next((i for i, v in enumerate(values) if not (v is None or kind(v))), None)
        if bad is not None:
            raise FileFormatError(f"{path}: line {lines[bad]}: {key} = {json.dumps(values[bad])}; expected "
                                  f"{'a string' if kind is _is_str else 'a number'} or null, "
                                  "like the column's other values")
        if kind is _is_str:
            out[key] = np.array(["" if v is None else v for v in values], dtype=object)
        else:
            out[key] = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return out


def read_columns(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A table as ``{column: array}`` from CSV or JSON lines (told apart by :func:`is_json_lines`)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such file")
    try:
        return read_json_lines_columns(path) if is_json_lines(path) else read_csv_columns(path)
    except UnicodeDecodeError:
        raise FileFormatError(f"{path}: not a text table; expected CSV or JSON lines") from None


def _fill(a: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, int]:
    """Linearly interpolate NaNs in each column of a (T, K) over t; returns (filled, count)."""
    a = a.copy()
    bad = ~np.isfinite(a)
    n = int(bad.sum())
    for k in range(a.shape[1]):
        b = bad[:, k]
        if b.all():
            raise InputError(f"column {k + 1}: no finite value to interpolate from")
        if b.any():
            a[b, k] = np.interp(t[b], t[~b], a[~b, k])
    return a, n


def _take(cols: dict, names: list[str], path: Path) -> np.ndarray:
    missing = [n for n in names if n not in cols]
    if missing:
        raise FileFormatError(f"{path}: missing column(s) {', '.join(missing)}")
    try:
        return np.stack([np.asarray(cols[n], dtype=float) for n in names], axis=1)
    except ValueError:
        bad = next((n for n in names if np.asarray(cols[n]).dtype.kind not in "fiub"), names[0])
        raise FileFormatError(f"{path}: column {bad} holds a value that is not a number") from None


def _numbered(cols: dict, prefix: str) -> list[str]:
    names, i = [], 1
    while f"{prefix}{i}" in cols:
        names.append(f"{prefix}{i}")
        i += 1
    return names


def read_states(path: str | os.PathLike, plane: str = "xy",
                smoothing: SmoothingConfig = SmoothingConfig()) -> EstimationInput:
    """Read ``states.csv`` or ``track.csv`` (detected by columns; CSV or JSON lines) into an :class:`EstimationInput`.

    plane: the camera-frame plane of ``track.csv``'s head position used for ṙ
    ("xy", "xz" or "yz"; ignored for states.csv, which is in the world's xy plane).
    """
    path = Path(path)
    if plane not in PLANES:
        raise InputError(f"plane = {plane!r}; expected one of {', '.join(PLANES)}")
    cols = read_columns(path)
    if "t" not in cols:
        raise FileFormatError(f"{path}: no 't' column; expected a states.csv or track.csv (docs/conventions.md)")
    t = np.asarray(cols["t"], dtype=float)
    if t.size < 2 or not np.all(np.isfinite(t)):
        raise FileFormatError(f"{path}: column 't' needs at least two finite times")
    phi_names = _numbered(cols, "phi_")
    q_names = _numbered(cols, "q_")
    if phi_names:
        source, frame = "states", "world xy"
        phi = _take(cols, phi_names, path)
        phidot_names = _numbered(cols, "phidot_")
        phidot = _take(cols, phidot_names, path) if len(phidot_names) == len(phi_names) else None
        rdot = _take(cols, ["head_vx", "head_vy"], path) if {"head_vx", "head_vy"} <= cols.keys() else None
        head = _take(cols, ["head_x", "head_y"], path) if rdot is None else None
    elif q_names:
        source, frame = "track", f"camera {plane}"
        phi = _take(cols, q_names, path)
        phidot, rdot = None, None
        head = _take(cols, list(PLANES[plane]), path)
        if "status" in cols:
            lost = np.asarray(cols["status"]).astype(str) == "lost"
            phi[lost] = np.nan
            head[lost] = np.nan
    else:
        raise FileFormatError(f"{path}: no phi_1 or q_1 column; "
                              "expected a states.csv or track.csv (docs/conventions.md)")

    order = np.argsort(t, kind="stable")
    if not np.array_equal(order, np.arange(t.size)) or np.any(np.diff(t) <= 0):
        raise FileFormatError(f"{path}: column 't' is not strictly increasing")
    filled = 0
    phi, n = _fill(phi, t)
    filled += n
    if head is not None:
        head, n = _fill(head, t)
        filled += n
    if phidot is not None:
        phidot, n = _fill(phidot, t)
        filled += n
    if rdot is not None:
        rdot, n = _fill(rdot, t)
        filled += n

    dt = np.diff(t)
    h = float(np.median(dt))
    resampled = bool(np.max(np.abs(dt - h)) > 0.05 * h)
    if resampled:
        tu = t[0] + np.arange(int(np.floor((t[-1] - t[0]) / h + 1e-9)) + 1) * h

        def rs(a):
            return None if a is None else np.stack([np.interp(tu, t, a[:, k]) for k in range(a.shape[1])], axis=1)

        phi, phidot, rdot, head = rs(phi), rs(phidot), rs(rdot), rs(head)
        t = tu
    diffed = []
    if phidot is None:
        phidot = savgol_derivative(phi, t, smoothing.window, smoothing.polyorder)
        diffed.append("phidot")
    if rdot is None:
        rdot = savgol_derivative(head, t, smoothing.window, smoothing.polyorder)
        diffed.append("rdot")
    return EstimationInput(t=t, phi=phi, phidot=phidot, rdot=rdot, source=source, frame=frame,
                           differentiated=tuple(diffed), filled=filled, resampled=resampled)
