"""Small file helpers: atomic writes and append-as-you-go tables.

Outputs are written to a temporary name in the same folder and renamed, so
an interrupted run never leaves a half-written file under the final name.
"""
from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from snaketrack.errors import FileFormatError, InputError, MissingFileError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def to_json(obj: Any, indent: int | None = 2) -> str:
    """JSON text of ``obj``; numpy arrays and scalars become lists and numbers."""
    return json.dumps(obj, indent=indent, default=_json_default)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    atomic_write_text(path, to_json(obj) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file, with one-line errors naming the file."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such file")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise FileFormatError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None


class CsvAppender:
    """A CSV table written row by row, flushed after every row.

    Re-opening an existing file with the same header continues it, so a
    resumed run appends. Rows are flushed and fsync'ed, so every finished row
    survives an interruption.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> with CsvAppender(p, ["a", "b"]) as w:
    ...     w.write({"a": 1, "b": 2.5})
    >>> open(p).read().splitlines()
    ['a,b', '1,2.5']
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str], resume: bool = False):
        self.path = Path(path)
        self.columns = list(columns)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        exists = resume and self.path.is_file() and self.path.stat().st_size > 0
        if exists:
            with open(self.path, newline="") as f:
                header = next(csv.reader(f), None)
            if header != self.columns:
                raise FileFormatError(f"{self.path}: header {header} does not match {self.columns}")
        self._f = open(self.path, "a" if exists else "w", newline="")
        self._w = csv.writer(self._f)
        if not exists:
            self._w.writerow(self.columns)
            self._f.flush()

    def write(self, row: dict[str, Any] | Iterable[Any]) -> None:
        """Append one row (a dict keyed by column, or values in column order)."""
        if isinstance(row, dict):
            values = [row.get(c, "") for c in self.columns]
        else:
            values = list(row)
        self._w.writerow([_fmt(v) for v in values])
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "CsvAppender":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _fmt(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def read_csv_columns(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a numeric CSV with a header into ``{column: float array}``.

    Non-numeric columns (e.g. ``status``) are returned as string arrays.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such file")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise FileFormatError(f"{path}: empty file, expected a header row")
    header, body = rows[0], rows[1:]
    out: dict[str, np.ndarray] = {}
    for j, name in enumerate(header):
        col = [r[j] if j < len(r) else "" for r in body]
        try:
            out[name] = np.array([float(x) if x != "" else np.nan for x in col], dtype=float)
        except ValueError:
            out[name] = np.array(col, dtype=object)
    return out


def parse_size(text: str, flag: str = "size") -> tuple[int, int]:
    """An image size ``"WIDTHxHEIGHT"`` in pixels, e.g. ``"640x360"`` → ``(640, 360)``; a one-line
    :class:`InputError` naming ``flag`` for anything else (each side 16..8192 px).

    >>> parse_size("640x360")
    (640, 360)
    """
    try:
        w, h = (int(v) for v in str(text).lower().replace("×", "x").split("x"))
    except ValueError:
        raise InputError(f"{flag} {text!r}; expected WIDTHxHEIGHT in pixels, e.g. 640x360") from None
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise InputError(f"{flag} {text!r}; expected 16..8192 px on each side")
    return w, h
