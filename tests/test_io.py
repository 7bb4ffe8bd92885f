"""Atomic writes and append-as-you-go CSV."""
import os

import numpy as np
import pytest

from snaketrack.errors import FileFormatError, MissingFileError
from snaketrack.io import CsvAppender, atomic_write_text, read_csv_columns, read_json, write_json


def test_atomic_write_leaves_no_temporary(tmp_path):
    p = tmp_path / "sub" / "a.txt"
    atomic_write_text(p, "hello")
    assert p.read_text() == "hello"
    assert [f.name for f in p.parent.iterdir()] == ["a.txt"]


def test_failed_write_keeps_previous_file(tmp_path):
    p = tmp_path / "a.json"
    write_json(p, {"x": 1})
    with pytest.raises(TypeError):
        write_json(p, {"x": object()})
    assert read_json(p) == {"x": 1}
    assert sorted(os.listdir(tmp_path)) == ["a.json"]


def test_json_numpy_round_trip(tmp_path):
    write_json(tmp_path / "m.json", {"K": np.eye(3), "n": np.int64(3), "f": np.float32(0.5)})
    d = read_json(tmp_path / "m.json")
    assert d["K"][1][1] == 1.0 and d["n"] == 3 and d["f"] == 0.5


def test_read_json_errors(tmp_path):
    with pytest.raises(MissingFileError, match="no such file"):
        read_json(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(FileFormatError, match="bad.json"):
        read_json(tmp_path / "bad.json")


def test_csv_resume_and_read(tmp_path):
    p = tmp_path / "t.csv"
    with CsvAppender(p, ["t", "x", "status"]) as w:
        w.write({"t": 0.0, "x": 1.5, "status": "tracked"})
    with CsvAppender(p, ["t", "x", "status"], resume=True) as w:
        w.write([0.1, np.float64(2.5), "lost"])
    cols = read_csv_columns(p)
    np.testing.assert_allclose(cols["x"], [1.5, 2.5])
    assert list(cols["status"]) == ["tracked", "lost"]
    with pytest.raises(FileFormatError, match="header"):
        CsvAppender(p, ["t", "y"], resume=True)
