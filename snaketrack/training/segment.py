"""Mask a recorded video or frame folder with a trained segmenter into a dataset folder.

The output is the dataset layout of docs/conventions.md (``frames/``, ``masks/``, ``meta.json`` with
the source's fields and ``segmenter``), written frame by frame: an interrupted run resumes at the
first frame it had not written.
"""
from __future__ import annotations

import os

from tqdm import tqdm

from snaketrack.datasets.layout import DatasetWriter
from snaketrack.datasets.video import open_frames, source_meta
from snaketrack.errors import InputError


def segment_source(source: str | os.PathLike, out: str | os.PathLike, segmenter, model_path: str = "",
                   batch_size: int = 4, progress: bool = True) -> int:
    """Segment every frame of ``source`` into the dataset folder ``out``; returns the frames written.

    segmenter: a :class:`~snaketrack.training.segmenter.Segmenter` (``predict_batch(frames) -> masks``,
    RGB uint8 (H, W, 3) in, bool (H, W) out); model_path: recorded in ``meta.json``;
    batch_size: frames per forward pass. A segmenter that follows the robot in a window starts afresh on
    ``source`` (on a resumed run, at its first frame not yet written).
    """
    if int(batch_size) < 1:
        raise InputError(f"--batch-size {batch_size}: expected a positive number of frames")

    src = open_frames(source)
    if getattr(segmenter, "window", None) is not None:
        segmenter.reset()
    meta = source_meta(src)
    meta["segmenter"] = str(model_path)
    with DatasetWriter(out, meta, resume=True) as w:
        bar = tqdm(total=len(src) or None, initial=w.next_frame, desc="segment", unit="frame",
                   disable=not progress)
        batch = []

        def flush() -> None:
            for f, m in zip(batch, segmenter.predict_batch(batch)):
                w.write_frame(f, m)
                bar.update(1)
            batch.clear()

        for _, rgb in src.frames(start=w.next_frame):
            batch.append(rgb)
            if len(batch) >= batch_size:
                flush()
        if batch:
            flush()
        bar.close()
        return w.next_frame
