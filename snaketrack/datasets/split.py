"""Split a label dataset in time: the start of the clip to train on, its end held out.

A segmenter scored on frames next to those it trained on scores the frames it nearly saw; the frames of
the clip's end, after every training frame, say how it does on frames to come.
"""
from __future__ import annotations

import os
from pathlib import Path

from snaketrack.datasets.label_report import flagged_frames
from snaketrack.datasets.layout import MASK_EXT, frame_name
from snaketrack.errors import InputError
from snaketrack.io import read_json, write_json

#: fewest good labelled frames a split takes
MIN_FRAMES = 10


def split_in_time(labels: str | os.PathLike, train: str | os.PathLike, heldout: str | os.PathLike,
                  holdout: float) -> dict:
    """Hard-link the frames of the dataset ``labels`` into ``train`` (the first ``1 - holdout`` of the clip)
    and ``heldout`` (the rest), each renumbered from 0 with the labels' ``meta.json`` and ``source_frames``
    (the first and last label frame it holds); flagged frames (``labels_report.json``) are left out.

    Returns ``{"train_frames", "heldout_frames", "heldout_from_frame"}``. Run again on the same folders, it
    links what is missing and leaves the rest.
    """
    labels, train, heldout = Path(labels), Path(train), Path(heldout)
    if not 0.0 < holdout < 1.0:
        raise InputError(f"--holdout {holdout}; expected a fraction in (0, 1)")
    masks = sorted((labels / "masks").glob(f"*{MASK_EXT}"))
    flagged = flagged_frames(labels)
    frames = [int(p.stem) for p in masks if int(p.stem) not in flagged]
    if len(frames) < MIN_FRAMES:
        raise InputError(f"{labels}: {len(frames)} good labelled frames; expected at least {MIN_FRAMES}")
    cut = int(round(len(frames) * (1.0 - holdout)))
    if not 0 < cut < len(frames):
        raise InputError(f"--holdout {holdout} of {len(frames)} frames leaves one part empty")
    meta = read_json(labels / "meta.json")
    for out, part in ((train, frames[:cut]), (heldout, frames[cut:])):
        for sub in ("frames", "masks"):
            (out / sub).mkdir(parents=True, exist_ok=True)
        for k, i in enumerate(part):
            for sub, ext in (("frames", None), ("masks", MASK_EXT)):
                src = labels / sub / (frame_name(i) if ext is None else frame_name(i, ext))
                dst = out / sub / (frame_name(k) if ext is None else frame_name(k, ext))
                if not dst.exists():
                    os.link(src, dst)
        write_json(out / "meta.json", {**meta, "source_frames": [part[0], part[-1]]})
    return {"train_frames": cut, "heldout_frames": len(frames) - cut, "heldout_from_frame": frames[cut]}
