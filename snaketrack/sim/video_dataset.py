"""A rendered video written as a dataset folder, with ``video.mp4`` and a contact sheet.

:func:`render_video` renders a :class:`~snaketrack.sim.video.VideoConfig`
frame by frame into a :class:`~snaketrack.datasets.layout.DatasetWriter`
folder (``frames/``, ``masks/``, ``meta.json``, ``truth.jsonl``; atomic,
resumable), then writes ``video.mp4`` and ``contact_sheet.png`` (mask
outline in cyan, the truth's link centres projected with ``K`` in red).
"""
from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial.transform import Rotation
from tqdm import tqdm

from snaketrack.datasets.layout import Dataset, DatasetWriter
from snaketrack.errors import InputError
from snaketrack.io import atomic_write_bytes, read_json, write_json
from snaketrack.models.kinematics import forward_kinematics_np
from snaketrack.models.robot import load_robot
from snaketrack.sim.video import VideoConfig, VideoRenderer, config_key
from snaketrack.video_writer import Mp4Writer


def contact_sheet(root: str | os.PathLike, n: int = 12, cols: int = 4, tile_width: int = 320) -> np.ndarray:
    """A grid of ``n`` evenly spaced frames of a dataset with the mask outline (cyan) and truth link centres (red).

    Link centres come from the truth's joint angles and base pose through
    :func:`snaketrack.models.kinematics.forward_kinematics_np`, projected with meta.json's K,
    so the sheet also shows that the two renderers agree. Returns RGB uint8.
    """
    ds = Dataset(root)
    robot = load_robot(ds.meta.get("robot_file") or ds.meta["robot"])
    truth = ds.truth or []
    K = ds.K
    idx = np.unique(np.linspace(0, len(ds) - 1, min(n, len(ds))).round().astype(int))
    tiles = []
    for i in idx:
        img = ds.frame(int(i)).copy()
        mask = ds.mask(int(i))
        if mask is not None:
            cnts, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
            cv2.drawContours(img, cnts, -1, (0, 255, 255), 1)
        if i < len(truth) and K is not None:
            tr = truth[i]
            R = Rotation.from_quat(tr["base_quat_cam"], scalar_first=True).as_matrix()
            fk = forward_kinematics_np(robot, np.array(tr["joint_angles"]), R, np.array(tr["base_position_cam"]))
            pc = fk["centres"]
            uv = (pc @ K.T)[:, :2] / pc[:, 2:3]
            for u, v in uv:
                cv2.circle(img, (int(round(u)), int(round(v))), 2, (255, 0, 0), -1)
        s = tile_width / img.shape[1]
        tile = cv2.resize(img, (tile_width, int(round(img.shape[0] * s))), interpolation=cv2.INTER_AREA)
        cv2.putText(tile, f"{int(i)}", (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1, cv2.LINE_AA)
        tiles.append(tile)
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [np.concatenate(tiles[r:r + cols], axis=1) for r in range(0, len(tiles), cols)]
    return np.concatenate(rows, axis=0)


def write_mp4(root: str | os.PathLike, fps: float) -> Path:
    """Encode ``frames/*.jpg`` of a dataset into ``video.mp4`` (H.264, :class:`~snaketrack.video_writer.Mp4Writer`),
    atomically."""
    ds = Dataset(root)
    out = Path(root) / "video.mp4"
    first = ds.frame(0)
    with Mp4Writer(out, fps, first.shape[1], first.shape[0]) as writer:
        for i in range(len(ds)):
            writer.write(ds.frame(i))
    return out


def render_video(config: VideoConfig, out: str | os.PathLike, resume: bool = False, progress: bool = True,
                 extras: bool = True) -> dict:
    """Render ``config`` into the dataset folder ``out``; returns a summary dict.

    resume: continue an interrupted run (the folder's meta.json must hold the same config);
        without it, a folder that already holds frames is refused.
    extras: also write ``video.mp4`` and ``contact_sheet.png``.
    """
    out = Path(out)
    existing = list((out / "frames").glob("*.jpg")) if (out / "frames").is_dir() else []
    if existing and not resume:
        raise InputError(f"{out}: already holds {len(existing)} frames; choose a new --out or pass --resume")
    if resume and (out / "meta.json").is_file():
        old = read_json(out / "meta.json").get("config")
        if old is not None and old != config_key(config):
            raise InputError(f"{out / 'meta.json'}: holds a different configuration; resume needs the same flags")
    with VideoRenderer(config) as r:
        meta = r.meta()
        with DatasetWriter(out, meta, resume=resume, masks=True, truth=True) as writer:
            start = writer.next_frame
            it = range(start, config.frames)
            if progress:
                it = tqdm(it, desc=f"sim video {config.scene}", unit="frame", initial=start, total=config.frames,
                          mininterval=0.5)
            for i in it:
                img, mask, truth = r.frame(i)
                writer.write_frame(img, mask, truth)

    ds = Dataset(out)
    tr = ds.truth or []
    widths = np.array([x["body_width_px"] for x in tr], float)
    pixels = np.array([x["mask_pixels"] for x in tr], float)
    meta["stats"] = {
        "body_width_px_median": float(np.median(widths)) if len(widths) else None,
        "body_width_px_min": float(widths.min()) if len(widths) else None,
        "body_width_px_max": float(widths.max()) if len(widths) else None,
        "mask_pixels_min": int(pixels.min()) if len(pixels) else None,
        "frames_without_robot": int((pixels == 0).sum()),
    }
    write_json(out / "meta.json", meta)
    if extras:
        write_mp4(out, config.fps)
        sheet = contact_sheet(out)
        ok, buf = cv2.imencode(".png", cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
        atomic_write_bytes(out / "contact_sheet.png", buf.tobytes())
    return {"out": str(out), "frames": len(ds), **meta["stats"], "fovy_deg": meta["fovy_deg"]}
