"""Dataset folders: writing frame by frame, resuming, reading back."""
import json

import numpy as np
import pytest

from snaketrack.datasets.layout import Dataset, DatasetWriter
from snaketrack.errors import FileFormatError, InputError, MissingFileError


def _frame(i, h=12, w=16):
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[..., 0] = 10 * i
    mask = np.zeros((h, w), bool)
    mask[2:5, i : i + 4] = True
    return rgb, mask


def test_write_resume_read(tmp_path):
    meta = {"width": 16, "height": 12, "fps": 30, "K": np.eye(3) * 20, "robot": "planar-snake-11"}
    with DatasetWriter(tmp_path, meta, truth=True) as w:
        for i in range(3):
            w.write_frame(*_frame(i), truth={"t": i / 30})
    # an interruption mid-frame: mask written, frame not, truth line torn
    (tmp_path / "masks" / "000003.png").write_bytes((tmp_path / "masks" / "000000.png").read_bytes())
    with open(tmp_path / "truth.jsonl", "a") as f:
        f.write('{"t": 0.1')
    with pytest.raises(InputError, match="already holds 3 frames"):
        DatasetWriter(tmp_path, meta, truth=True)
    with DatasetWriter(tmp_path, meta, truth=True, resume=True) as w:
        assert w.next_frame == 3
        w.write_frame(*_frame(3), truth={"t": 0.1})
    ds = Dataset(tmp_path)
    assert len(ds) == 4
    assert [r["frame"] for r in ds.truth] == [0, 1, 2, 3]
    np.testing.assert_array_equal(ds.mask(3), _frame(3)[1])
    assert ds.K[0, 0] == 20 and ds.fps == 30
    assert abs(int(ds.frame(2)[0, 0, 0]) - 20) <= 2  # JPEG


def test_wrong_size_frame_is_refused(tmp_path):
    with DatasetWriter(tmp_path, {"width": 16, "height": 12, "fps": 30}) as w:
        with pytest.raises(InputError, match="expected 16x12"):
            w.write_frame(np.zeros((10, 16, 3), np.uint8), np.zeros((10, 16), bool))


def test_reader_errors(tmp_path):
    with pytest.raises(MissingFileError):
        Dataset(tmp_path / "none")
    (tmp_path / "clip.mp4").write_bytes(b"")
    with pytest.raises(InputError, match="a file, not a dataset folder"):
        Dataset(tmp_path / "clip.mp4")
    with pytest.raises(FileFormatError, match="no frames/"):
        Dataset(tmp_path)
    with DatasetWriter(tmp_path / "d", {"width": 16, "height": 12, "fps": 30}, truth=True) as w:
        w.write_frame(*_frame(0), truth={"t": 0})
    (tmp_path / "d" / "truth.jsonl").write_text("{bad\n")
    with pytest.raises(FileFormatError, match="line 1"):
        _ = Dataset(tmp_path / "d").truth
    json.dump({"K": [[1, 0], [0, 1]]}, open(tmp_path / "d" / "meta.json", "w"))
    with pytest.raises(FileFormatError, match="3x3"):
        _ = Dataset(tmp_path / "d").K
