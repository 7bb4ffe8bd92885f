"""A long video tracked in overlapping chunks, as parallel Ray tasks, and stitched back into one track.

The spans ``[s_k, e_k)`` cut the video in K pieces; chunk k tracks frames ``[s_k − overlap, e_k)`` (the
first from 0). Each chunk is tracked from scratch (its own first-frame search and reading hold), so its
first frames are a warm-up; where two chunks overlap the earlier one is already settled. The first span
is longer by the overlap, so that every chunk tracks as many frames as the others and the parallel
tasks end together.

The stitching rule, at each seam: among the overlap's frames in its second half (the later chunk past
half its warm-up) where both chunks say ``tracked``, switch to the later chunk at the frame where the
two poses agree best (the smallest joint-angle RMS [rad] plus base distance [m]). When even that frame
disagrees by more than ``agree`` (the later chunk started mid-occlusion, or read the body from the other
end), the seam is reported ``disagree`` and the switch is made at the overlap's last frame, which keeps
the settled earlier chunk as long as it can. Every frame appears once, in order.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from snaketrack.batch.runner import connect
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.io import read_csv_columns, write_json
from snaketrack.tracker.run.evaluation import tracking_metrics
from snaketrack.tracker.run.loop import open_session, open_up_source, step_frames
from snaketrack.tracker.run.outputs import TrackWriter
from snaketrack.tracker.run.pipeline import PipelineConfig


@dataclass(frozen=True)
class Seam:
    """Where two chunks were joined: the first frame taken from the later chunk, the pose difference
    there, and whether the chunks agreed (difference within the threshold)."""

    frame: int
    difference: float
    agreed: bool


def chunk_ranges(n_frames: int, chunks: int, overlap: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each chunk (module doc): equal lengths ``(n_frames + (chunks − 1) overlap) / chunks``.

    >>> chunk_ranges(100, 2, 10)
    [(0, 55), (45, 100)]
    >>> chunk_ranges(100, 3, 10)
    [(0, 40), (30, 70), (60, 100)]
    """
    if chunks < 1:
        raise InputError(f"--chunks {chunks}; expected a positive number")
    if overlap < 2:
        raise InputError(f"--chunk-overlap {overlap}; expected at least 2 frames")
    if n_frames < chunks * 2 * overlap:
        raise InputError(f"{n_frames} frames in {chunks} chunks overlapping by {overlap}: too short; "
                         "use fewer chunks or a shorter overlap")
    length = (n_frames + (chunks - 1) * overlap) / chunks
    ends = [int(round(length + k * (length - overlap))) for k in range(chunks - 1)] + [n_frames]
    return [(ends[k - 1] - overlap if k else 0, e) for k, e in enumerate(ends)]


def _difference(a: dict, b: dict, n_joints: int) -> float:
    qa = np.array([a[f"q_{j + 1}"] for j in range(n_joints)], float)
    qb = np.array([b[f"q_{j + 1}"] for j in range(n_joints)], float)
    pa = np.array([a["base_x"], a["base_y"], a["base_z"]], float)
    pb = np.array([b["base_x"], b["base_y"], b["base_z"]], float)
    return float(np.sqrt(np.mean((qa - qb) ** 2)) + np.linalg.norm(pa - pb))


def stitch(parts: list[list[dict]], n_joints: int, agree: float = 0.1) -> tuple[list[dict], list[Seam]]:
    """One track from chunk tracks (lists of rows with ``frame``, in order) and the seams (module doc).
    ``agree``: the largest pose difference [rad + m] at which two chunks are said to agree."""
    rows = list(parts[0])
    seams = []
    for later in parts[1:]:
        first = later[0]["frame"]
        earlier = {r["frame"]: r for r in rows if r["frame"] >= first}
        overlap = sorted(earlier)
        candidates = [r for r in later if r["frame"] in earlier and r["frame"] >= overlap[len(overlap) // 2]]
        scored = [(_difference(earlier[r["frame"]], r, n_joints), r["frame"]) for r in candidates
                  if r["status"] == "tracked" and earlier[r["frame"]]["status"] == "tracked"]
        diff, switch = min(scored, default=(float("inf"), overlap[-1]))
        agreed = diff <= agree
        if not agreed:
            switch = overlap[-1]
        rows = [r for r in rows if r["frame"] < switch] + [r for r in later if r["frame"] >= switch]
        seams.append(Seam(int(switch), float(diff), bool(agreed)))
    return rows, seams


def track_range(source: str, robot: Optional[str], intrinsics, masks: Optional[str],
                config: PipelineConfig, up: Optional[str], start: int, stop: int, threads: int = 1,
                segmenter_setting: str = "live", segmenter_flips: Optional[int] = None,
                segmenter_scale: Optional[float] = None) -> dict:
    """Track frames ``[start, stop)`` of ``source`` from scratch; ``{"rows": [...], "track_s": float}``."""
    torch.set_num_threads(max(1, threads))
    frames, session, mask_source = open_session(source, robot, intrinsics, masks, config, segmenter_setting,
                                                segmenter_flips, segmenter_scale)
    up_source = open_up_source(frames, up, config)
    rows = []
    session.start()
    for results in step_frames(frames, session, mask_source, up_source, start, stop):
        rows += [r.row for r in results]
    rows += [r.row for r in session.close()]
    return {"rows": rows, "track_s": session.track_time_s, "columns": session.extra_columns,
            "dof": session.robot.dof}


def track_chunked(source: str | os.PathLike, out: str | os.PathLike, chunks: int, overlap: int = 30,
                  robot: Optional[str] = None, intrinsics=None, masks: Optional[str] = None,
                  config: PipelineConfig = PipelineConfig(), up: Optional[str] = None,
                  address: Optional[str] = None, workers: Optional[int] = None,
                  segmenter_setting: str = "live", segmenter_flips: Optional[int] = None,
                  segmenter_scale: Optional[float] = None) -> dict:
    """Track ``source`` in ``chunks`` overlapping chunks on Ray and stitch them (module doc) into
    ``out/track.csv`` and ``out/summary.json`` (with ``metrics.json`` when the source has truth);
    ``segmenter_setting``: ``live`` or ``accurate`` for ``masks="segmenter:MODEL.pt"``, ``segmenter_flips``
    its test-time flips (None: the setting's), ``segmenter_scale`` its input scale (None: the model file's)."""
    import ray  # deferred: optional, the batch extra

    frames = open_frames(source)
    ranges = chunk_ranges(len(frames), chunks, overlap)
    open_up_source(frames, up, config)  # a missing up direction is one line here, not a failed task
    connect(address, workers)
    task = ray.remote(num_cpus=1, max_retries=2)(track_range)
    t0 = time.time()
    refs = [task.remote(str(source), robot, intrinsics, masks, config, up, a, b,
                        segmenter_setting=segmenter_setting, segmenter_flips=segmenter_flips,
                        segmenter_scale=segmenter_scale)
            for a, b in ranges]
    parts = ray.get(refs)
    wall = time.time() - t0
    dof = parts[0]["dof"]
    rows, seams = stitch([p["rows"] for p in parts], dof)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with TrackWriter(out / "track.csv", dof, parts[0]["columns"]) as w:
        for r in rows:
            w.write(r)
    summary = {"source": str(source), "frames": len(rows), "chunks": chunks, "overlap": overlap,
               "ranges": ranges, "wall_s": wall, "track_s_per_chunk": [p["track_s"] for p in parts],
               "seams": [s.__dict__ for s in seams], "seams_disagree": sum(not s.agreed for s in seams)}
    if frames.truth is not None:
        metrics = tracking_metrics(read_csv_columns(out / "track.csv"), frames.truth, dof)
        write_json(out / "metrics.json", metrics)
        summary.update(metrics)
    write_json(out / "summary.json", summary)
    return summary
