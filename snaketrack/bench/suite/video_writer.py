"""Benchmark of the MP4 writer: H.264 (:class:`snaketrack.video_writer.Mp4Writer`) against OpenCV's ``mp4v``.

Writes the same frames both ways, in the same process, and reads each file back with OpenCV: the seconds to
write (the encoder's process finishing included), the file's size, and the mean absolute difference
between the decoded frames and the written ones [grey levels].

Usage::

    snaketrack bench video-writer [--frames DATASET_FOLDER] [--n 90]

Without ``--frames``, 640x480 synthetic frames (a disc moving over blurred noise). The result has
one entry per writer: ``seconds``, ``bytes``, ``codec``, ``mean_abs_error``.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from snaketrack.bench.registry import Benchmark


def synthetic(n: int, w: int = 640, h: int = 480) -> list[np.ndarray]:
    import cv2  # deferred: snaketrack bench --list imports none of a benchmark's work

    rng = np.random.default_rng(0)
    ground = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (0, 0), 3)
    frames = []
    for k in range(n):
        f = ground.copy()
        cv2.circle(f, (100 + 4 * k, h // 2), 40, (255, 0, 255), -1)
        frames.append(f)
    return frames


def read_back(path: Path, frames: list[np.ndarray]) -> dict:
    import cv2  # deferred: snaketrack bench --list imports none of a benchmark's work

    cap = cv2.VideoCapture(str(path))
    codec = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode(errors="replace")
    errors = []
    for f in frames:
        ok, bgr = cap.read()
        if not ok:
            break
        errors.append(np.abs(bgr[: f.shape[0], : f.shape[1], ::-1].astype(int) - f).mean())
    return {"codec": codec, "frames_read": len(errors), "mean_abs_error": round(float(np.mean(errors)), 3)}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--frames", type=Path, default=None, help="a dataset folder (its frames/*.jpg)")
    ap.add_argument("--n", type=int, default=90, help="frames to write (default 90)")
    ap.add_argument("--crf", type=int, default=None, help="the H.264 writer's CRF (default: Mp4Writer's)")


def run(args: argparse.Namespace) -> dict:
    import cv2  # deferred: snaketrack bench --list imports none of a benchmark's work

    from snaketrack.video_writer import Mp4Writer

    if args.frames is not None:
        paths = sorted((args.frames / "frames").glob("*.jpg"))[: args.n]
        frames = [cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB) for p in paths]
    else:
        frames = synthetic(args.n)
    h, w = frames[0].shape[:2]
    out = {"frames": len(frames), "size": f"{w}x{h}"}
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "mp4v.mp4"
        t0 = time.perf_counter()
        writer = cv2.VideoWriter(str(ref), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (w, h))
        for f in frames:
            writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
        writer.release()
        out["opencv_mp4v"] = {"seconds": round(time.perf_counter() - t0, 3), "bytes": ref.stat().st_size,
                              **read_back(ref, frames)}
        path = Path(tmp) / "h264.mp4"
        t0 = time.perf_counter()
        with Mp4Writer(path, 30.0, w, h, **({} if args.crf is None else {"crf": args.crf})) as video:
            for f in frames:
                video.write(f)
        out["mp4writer_h264"] = {"seconds": round(time.perf_counter() - t0, 3), "bytes": path.stat().st_size,
                                 **read_back(path, frames)}
    return out


BENCHMARK = Benchmark("video-writer", "the MP4 writer (H.264, snaketrack.video_writer) against OpenCV's mp4v",
                      add_arguments, run, quick={"n": 10})
