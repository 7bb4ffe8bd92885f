import cv2
import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.datasets.video import open_frames
from snaketrack.errors import FileFormatError, MissingFileError


def _write_video(path, n=8, w=64, h=48):
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (w, h))
    assert vw.isOpened()
    for i in range(n):
        vw.write(np.full((h, w, 3), 20 * i + 10, np.uint8))
    vw.release()


def test_video_file_frames_start_and_stride(tmp_path):
    p = tmp_path / "v.avi"
    _write_video(p)
    src = open_frames(p)
    assert (src.width, src.height, len(src)) == (64, 48, 8)
    assert src.fps == pytest.approx(10.0)
    got = [(i, float(f.mean())) for i, f in src.frames(start=1, stride=3)]
    assert [i for i, _ in got] == [1, 4, 7]
    for i, v in got:  # MJPG is lossy: grey level within a few counts
        assert abs(v - (20 * i + 10)) < 4


def test_frames_folder_and_dataset_folder(tmp_path):
    d = tmp_path / "imgs"
    d.mkdir()
    for i in (2, 0, 1):
        cv2.imwrite(str(d / f"{i:04d}.png"), np.full((6, 8, 3), i, np.uint8))
    src = open_frames(d)
    assert [int(f[0, 0, 0]) for _, f in src.frames()] == [0, 1, 2]
    ds = tmp_path / "ds"
    (ds / "frames").mkdir(parents=True)
    cv2.imwrite(str(ds / "frames" / "000000.png"), np.zeros((6, 8, 3), np.uint8))
    assert len(open_frames(ds)) == 1


def test_missing_and_corrupt_video(tmp_path, capsys):
    with pytest.raises(MissingFileError, match="nope.mp4"):
        open_frames(tmp_path / "nope.mp4")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(np.random.default_rng(0).integers(0, 255, 4000, dtype=np.uint8).tobytes())
    with pytest.raises(FileFormatError, match="bad.mp4: not a readable video"):
        open_frames(bad)
    assert main(["label", str(bad), "--box", "1,1,4,4", "--backend", "grabcut", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.mp4" in err[0]
