"""The one MP4 writer: H.264 that OpenCV's FFmpeg decodes back to the frames, written atomically."""
import cv2
import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.video_writer import Mp4Writer


def _frames(n: int, w: int, h: int) -> list[np.ndarray]:
    """A disc moving over a smooth gradient: RGB uint8 (h, w, 3)."""
    v, u = np.mgrid[0:h, 0:w]
    base = np.stack([u * 255 // w, v * 255 // h, np.full_like(u, 90)], axis=-1).astype(np.uint8)
    out = []
    for k in range(n):
        f = base.copy()
        cv2.circle(f, (10 + 6 * k, h // 2), 12, (250, 30, 200), -1)
        out.append(f)
    return out


def _read(path) -> tuple[str, list[np.ndarray]]:
    cap = cv2.VideoCapture(str(path))
    codec = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode()
    frames = []
    while True:
        ok, bgr = cap.read()
        if not ok:
            return codec, frames
        frames.append(bgr[..., ::-1])


@pytest.mark.parametrize("size", [(96, 64), (97, 63)])
def test_the_frames_come_back_from_an_h264_file(tmp_path, size):
    w, h = size
    frames = _frames(10, w, h)
    path = tmp_path / "v.mp4"
    with Mp4Writer(path, 10, w, h) as video:
        for f in frames:
            video.write(f)
        assert not path.exists()  # renamed into place on close
    codec, back = _read(path)
    assert codec.lower() in ("h264", "avc1") and len(back) == len(frames)
    for f, b in zip(frames, back):
        assert b.shape == (h + h % 2, w + w % 2, 3)  # an odd size padded to even
        err = np.abs(b[:h, :w].astype(int) - f).mean()
        assert err < 4.0
        moved = np.abs(b[:h, :w].astype(int) - frames[0]).mean() if f is not frames[0] else None
        assert moved is None or moved > err  # each frame decodes closer to itself than to the first


def test_no_frames_no_file_and_a_wrong_frame_is_refused(tmp_path):
    path = tmp_path / "v.mp4"
    with Mp4Writer(path, 10, 32, 32):
        pass
    assert not path.exists() and not list(tmp_path.iterdir())
    video = Mp4Writer(path, 10, 32, 32)
    with pytest.raises(InputError, match="expected"):
        video.write(np.zeros((32, 33, 3), np.uint8))
    with pytest.raises(InputError, match="expected"):
        video.write(np.zeros((32, 32, 3), np.float32))
    with pytest.raises(InputError, match="positive"):
        Mp4Writer(path, 0, 32, 32)
