"""The auto-labeller: box-prompted masks propagated through a video.

Follows *Tracking Snake-like Robots in the Wild using only a Single Camera*
(§III-B): frame 0 is prompted with the user's box; every later frame with
the bounding box of the previous good mask after dilation (:func:`~snaketrack.datasets.boxes.propagate_box`).
Any backend that answers a box prompt can label — Segment Anything
(:mod:`~snaketrack.datasets.sam_backend`) or GrabCut
(:mod:`~snaketrack.datasets.grabcut_backend`) — through :class:`BoxPredictor`.

:class:`Labeller` is the session (``start / step / reset``, as SamPredictor
is: the expensive ``set_image`` happens once a frame). :func:`label_video`
runs it over a source and writes the dataset frame by frame.

Quality guard (choices the paper leaves open): a mask is
flagged when it is empty (``empty``), when its area differs from the last
good mask's by more than ``max_area_ratio`` either way (``area_jump``), or
when less than ``min_overlap`` of it lies inside the last good mask dilated
by the propagation margin (``low_overlap``; the margin is the same one the
prompt box assumes the robot can move, so a mask that left it has jumped).
A flagged mask is still written (the dataset stays aligned with the
video) but listed in ``labels_report.json`` and shown in
``labels_flagged.png``; propagation continues from the last good mask,
with the dilation growing by ``dilate_px`` for each frame since it, so a
robot that kept moving during a bad stretch is found again. Training
skips flagged frames.

Re-anchoring: the last good mask can itself be wrong when the label drifted
slowly (an end of the robot lost a few pixels a frame passes the guard
frame to frame); the robot's true area then reads as an ``area_jump`` from
it, frame after frame, until the growing prompt box takes in the whole
frame and nothing is found again. So when ``reanchor_frames`` consecutive
masks are flagged ``area_jump`` alone and each passes the guard against the
one before it (area within ``max_area_ratio``, ``min_overlap`` inside it
dilated by ``dilate_px``), the last of them is taken as good, and the
labeller goes on from it.

Outputs in the dataset folder besides the layout of docs/conventions.md: ``labels.csv``
(one row a frame: prompt box, area, overlap, flags), ``labels_report.json``,
when any frame is flagged ``labels_flagged.png``, and ``labels_resume.npz``
(the unpolished masks of the last two good frames and of the trailing `area_jump` ones, bit-packed, so a resumed
run propagates exactly as an uninterrupted one; without it a resume
propagates from the written label).
"""
from __future__ import annotations

import csv
import io
import os
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence

import numpy as np
from tqdm import tqdm

from snaketrack.datasets.boxes import Box, dilate_mask, propagate_box
from snaketrack.datasets.label_report import (
    CSV_COLUMNS,
    FIT_COLUMNS,
    FIT_CSV,
    LABELS_CSV,
    read_label_rows,
    write_report,
)
from snaketrack.datasets.layout import MASK_EXT, DatasetWriter, frame_name, read_mask
from snaketrack.datasets.video import FrameSource, source_meta
from snaketrack.errors import InputError, StateError
from snaketrack.io import CsvAppender, atomic_write_bytes, atomic_write_text, read_json
from snaketrack.masks import mask_iou

RESUME_NPZ = "labels_resume.npz"


class BoxPredictor(Protocol):
    """A segmenter answering box prompts, one image at a time.

    ``set_image(rgb)`` does the per-image work (RGB uint8 (H, W, 3));
    ``predict(box, prior)`` returns a bool mask (H, W) for a :class:`Box`;
    ``prior`` is the last good mask (bool (H, W)) or None, a hint a backend
    may use or ignore. A backend may also have ``polish(mask)``: the label
    to write for a mask ``predict`` returned (e.g. a smoothed outline); the
    quality guard and the propagation then use the unpolished mask; and
    ``seek(index)``: :func:`label_video` names the source frame before each
    ``set_image`` (a backend that reads the video around it); ``prompt_box(width, height)``: the next frame's
    prompt :class:`Box` (a backend that knows where the robot will be), or None for the labeller's own;
    ``gate_flags``: after ``polish``, flags of its own for the frame's label (a backend that judges it against
    a model: :mod:`~snaketrack.labelling.label_gate`); and ``robot_fit``:
    a dict of settings recorded in the dataset's meta.json as ``labelling.robot_fit``
    (a backend whose labels are fitted to the robot model), with ``last_fit``: the last label's row of
    ``fit.csv`` but its frame; and ``close()``: called when
    :func:`label_video` ends (a backend with a thread of its own).
    """

    name: str

    def set_image(self, rgb: np.ndarray) -> None: ...

    def predict(self, box: Box, prior: Optional[np.ndarray] = None) -> np.ndarray: ...

    def reset_image(self) -> None: ...


@dataclass(frozen=True)
class LabelConfig:
    """Labeller settings.

    dilate_px: dilation of the previous mask before mask → box [pixels].
    min_area_px: a mask with fewer pixels counts as empty [pixels].
    max_area_ratio: largest plausible area change from the last good mask (either way).
    min_overlap: least fraction of the new mask inside the dilated last good mask.
    reanchor_frames: consecutive ``area_jump`` masks that agree with each other after which the last is
    taken as good (module doc; 0: never).
    """

    dilate_px: int = 15
    min_area_px: int = 20
    max_area_ratio: float = 2.0
    min_overlap: float = 0.5
    reanchor_frames: int = 3

    def __post_init__(self) -> None:
        if self.dilate_px < 0:
            raise InputError(f"--dilate {self.dilate_px}: expected pixels >= 0")
        if self.max_area_ratio <= 1.0:
            raise InputError(f"max_area_ratio {self.max_area_ratio}: expected > 1")
        if not 0.0 <= self.min_overlap <= 1.0:
            raise InputError(f"min_overlap {self.min_overlap}: expected in [0, 1]")
        if self.reanchor_frames < 0:
            raise InputError(f"--reanchor {self.reanchor_frames}: expected a count >= 0 (0: never)")


@dataclass(frozen=True)
class FrameLabel:
    """One labelled frame.

    mask: bool (H, W), the label (the backend's ``polish`` of ``raw_mask``
    when it has one); raw_mask: bool (H, W), what ``predict`` returned, which
    the guard judged and propagation uses; box: the prompt used; area_px: raw mask pixels;
    area_ratio: area / last good area (None on the first frame);
    overlap: fraction of the mask inside the dilated last good mask (None on the first);
    iou_prev: IoU with the last good mask (None on the first);
    flags: quality-guard reasons, empty when the label is good.
    """

    mask: np.ndarray = field(repr=False)
    box: Box
    area_px: int
    area_ratio: Optional[float]
    overlap: Optional[float]
    iou_prev: Optional[float]
    flags: tuple[str, ...]
    raw_mask: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def good(self) -> bool:
        return not self.flags


class Labeller:
    """Box-propagating labelling session over consecutive frames.

    >>> from snaketrack.datasets.toy import toy_video
    >>> frames, truth = toy_video(4, 80, 60, seed=1)
    >>> class Oracle:                       # answers with the truth inside the box
    ...     name = "oracle"
    ...     def set_image(self, rgb): self.i = next(i for i in range(4) if (frames[i] == rgb).all())
    ...     def predict(self, box, prior=None): return truth[self.i] & box.to_mask(80, 60)
    ...     def reset_image(self): pass
    >>> lab = Labeller(Oracle(), LabelConfig(dilate_px=8))
    >>> first = lab.start(frames[0], Box(0, 0, 80, 60))
    >>> [lab.step(f).good for f in frames[1:]]
    [True, True, True]
    """

    def __init__(self, predictor: BoxPredictor, config: LabelConfig = LabelConfig()):
        self.predictor = predictor
        self.config = config
        self.reset()

    def reset(self) -> None:
        """Forget all state; the next call must be :meth:`start`."""
        self._last_good: Optional[np.ndarray] = None
        self._last_good_area = 0
        self._since_good = 0
        self._streak: list[np.ndarray] = []  # the trailing area_jump masks that agree (module doc)
        self._box: Optional[Box] = None
        self.predictor.reset_image()

    @property
    def started(self) -> bool:
        return self._box is not None

    def restore(self, user_box: Box, last_good: Optional[np.ndarray], frames_since_good: int,
                area_jumps: Sequence[np.ndarray] = ()) -> None:
        """Resume a session: the last good mask (bool (H, W)), how many frames ago it was, and the masks of
        the trailing frames flagged ``area_jump`` alone since, oldest first."""
        self.reset()
        self._box = user_box
        if last_good is not None and np.count_nonzero(last_good) >= self.config.min_area_px:
            self._last_good = np.asarray(last_good, bool)
            self._last_good_area = int(np.count_nonzero(last_good))
            self._since_good = max(int(frames_since_good), 1)
        for m in area_jumps:
            self._extend_streak(np.asarray(m, bool))

    def _guard(self, mask: np.ndarray, reference: np.ndarray, since: int = 1) -> tuple[float, float, list[str]]:
        """``(area ratio, overlap, flags)`` of a non-empty ``mask`` against ``reference``, seen ``since`` frames
        before: ``area_jump`` and ``low_overlap`` (module doc)."""
        cfg = self.config
        area = int(np.count_nonzero(mask))
        ratio = area / max(int(np.count_nonzero(reference)), 1)
        overlap = float(np.count_nonzero(mask & dilate_mask(reference, cfg.dilate_px * since))) / max(area, 1)
        flags = []
        if ratio > cfg.max_area_ratio or ratio < 1.0 / cfg.max_area_ratio:
            flags.append("area_jump")
        if overlap < cfg.min_overlap:
            flags.append("low_overlap")
        return ratio, overlap, flags

    def _extend_streak(self, mask: np.ndarray) -> None:
        """Add an ``area_jump`` mask to the streak, which restarts from it when it disagrees with the last."""
        if self._streak and self._guard(mask, self._streak[-1])[2]:
            self._streak = []
        self._streak.append(mask)

    def start(self, rgb: np.ndarray, box: Box) -> FrameLabel:
        """Label the first frame with the user's box (pixels, X,Y,W,H)."""
        self.reset()
        _check_rgb(rgb)
        h, w = rgb.shape[:2]
        box = box.clip(w, h)
        if box.area == 0:
            raise InputError(f"--box {box}: lies outside the {w}x{h} image")
        self._box = box
        return self._label(rgb, box)

    def next_box(self, width: int, height: int) -> Box:
        """The prompt for the next frame: the backend's ``prompt_box`` when it gives one, else the last good
        mask's box, dilated by ``dilate_px`` per frame since."""
        if self._box is None:
            raise StateError("Labeller.step called before start(); call start(rgb, box) first")
        hook = getattr(self.predictor, "prompt_box", None)
        b = hook(width, height) if hook is not None else None
        if b is not None:
            return b
        if self._last_good is None:
            return self._box.clip(width, height)
        b = propagate_box(self._last_good, self.config.dilate_px * self._since_good)
        return b if b is not None else self._box.clip(width, height)

    def step(self, rgb: np.ndarray) -> FrameLabel:
        """Label the next frame, prompted from the last good mask."""
        _check_rgb(rgb)
        h, w = rgb.shape[:2]
        if self._last_good is not None and self._last_good.shape != (h, w):
            raise InputError(f"frame size {w}x{h} differs from the previous frames' "
                             f"{self._last_good.shape[1]}x{self._last_good.shape[0]}")
        return self._label(rgb, self.next_box(w, h))

    def _label(self, rgb: np.ndarray, box: Box) -> FrameLabel:
        cfg = self.config
        self.predictor.set_image(rgb)
        mask = np.asarray(self.predictor.predict(box, self._last_good), bool)
        if mask.shape != rgb.shape[:2]:
            raise StateError(f"backend {self.predictor.name}: mask shape {mask.shape}; expected {rgb.shape[:2]}")
        area = int(np.count_nonzero(mask))
        flags: list[str] = []
        ratio = overlap = iou = None
        if area < cfg.min_area_px:
            flags.append("empty")
        if self._last_good is not None:
            ratio, overlap, jumped = self._guard(mask, self._last_good, self._since_good)
            iou = mask_iou(mask, self._last_good)
            if area >= cfg.min_area_px:
                flags += jumped
        polish = getattr(self.predictor, "polish", None)
        label = np.asarray(polish(mask), bool) if polish is not None else mask
        flags += [f for f in getattr(self.predictor, "gate_flags", ()) if f not in flags]
        if flags == ["area_jump"] and cfg.reanchor_frames > 0:
            self._extend_streak(mask)
            if len(self._streak) >= cfg.reanchor_frames:
                flags = []  # the masks since agree with each other: the last good one was wrong
        if flags:
            self._since_good += 1
            if flags != ["area_jump"]:
                self._streak = []
        else:
            self._streak = []
            self._last_good, self._last_good_area, self._since_good = mask, area, 1
        return FrameLabel(label, box, area, ratio, overlap, iou, tuple(flags), raw_mask=mask)


def _check_rgb(rgb: np.ndarray) -> None:
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise InputError(f"frame: {getattr(rgb, 'dtype', type(rgb))} {getattr(rgb, 'shape', '')}; "
                         "expected RGB uint8 (H, W, 3)")


# ----------------------------------------------------------------------------- runs on disk

def _rewrite_rows(path: Path, rows: list[dict[str, str]], columns: list[str] = CSV_COLUMNS) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


@dataclass(frozen=True)
class LabelResult:
    """What a :func:`label_video` run did: frames in the dataset, written now, flagged in total."""

    out: str
    frames: int
    written: int
    flagged: int
    report: dict[str, Any]


def label_video(source: FrameSource, out: str | os.PathLike, predictor: BoxPredictor, box: Box,
                config: LabelConfig = LabelConfig(), stride: int = 1, max_frames: Optional[int] = None,
                progress: bool = True) -> LabelResult:
    """Label ``source`` into the dataset folder ``out``; resumes when ``out`` holds a run.

    Dataset frame ``i`` is source frame ``i * stride``. ``max_frames`` caps
    the dataset length (None: the whole source). Every frame is written
    (image, mask, ``fit.csv`` row from a backend fitted to the robot, ``labels.csv`` row) before the next
    is read, so an
    interruption loses nothing finished; running again continues after the
    last complete frame with the labeller state restored from disk.
    """
    out = Path(out)
    if int(stride) < 1:
        raise InputError(f"--stride {stride}: expected a positive integer")
    if max_frames is not None and int(max_frames) < 1:
        raise InputError(f"--max-frames {max_frames}: expected a positive number of frames")
    w, h = source.width, source.height
    if box.clip(w, h).area == 0:
        raise InputError(f"--box {box}: lies outside the {w}x{h} video")
    csv_path = out / LABELS_CSV
    src_id = str(Path(source.path).resolve())
    labelling = {"backend": predictor.name, "box": str(box), "stride": int(stride), **asdict(config)}
    fitted = bool(getattr(predictor, "robot_fit", None))
    if fitted:
        labelling["robot_fit"] = predictor.robot_fit
    if (out / "frames").is_dir() and any((out / "frames").iterdir()):
        if not csv_path.is_file():
            raise InputError(f"{out}: holds frames but no {LABELS_CSV}; not a labelling run to resume, "
                             "choose a new --out")
        old = read_json(out / "meta.json").get("labelling", {}) if (out / "meta.json").is_file() else {}
        if old.get("stride", stride) != stride or old.get("source", src_id) != src_id:
            raise InputError(f"{out}: was labelled from {old.get('source')} with --stride {old.get('stride')}; "
                             f"now {source.path} with --stride {stride}: choose a new --out")
    meta = source_meta(source, stride)
    meta["labelling"] = dict(labelling, source=src_id)
    writer = DatasetWriter(out, meta, resume=True)
    rows = read_label_rows(csv_path)
    n_done = min(writer.next_frame, len(rows))
    if len(rows) != n_done:
        rows = rows[:n_done]
    _rewrite_rows(csv_path, rows)
    if fitted:  # a frame's fit row is written before its labels.csv row: drop any beyond the last complete frame
        fit_rows = [r for r in read_label_rows(out / FIT_CSV, FIT_COLUMNS) if int(r["frame"]) < n_done]
        _rewrite_rows(out / FIT_CSV, fit_rows, FIT_COLUMNS)
    writer.next_frame = n_done
    total = len(source) // stride + (1 if len(source) % stride else 0) if len(source) else None
    if max_frames is not None:
        total = min(total, max_frames) if total is not None else max_frames

    labeller = Labeller(predictor, config)
    good_state: dict[int, np.ndarray] = {}  # unpolished masks of the last two good frames
    jump_state: dict[int, np.ndarray] = {}  # and of the trailing area_jump frames (re-anchoring)

    def unpolished(frame: int) -> np.ndarray:
        m = _read_resume_mask(out / RESUME_NPZ, frame, (h, w))
        return m if m is not None else read_mask(out / "masks" / frame_name(frame, MASK_EXT))

    if n_done > 0:
        good = [int(r["frame"]) for r in rows if not r["flags"]]
        last = good[-1] if good else None
        last_mask = None
        jumps: list[int] = []
        if last is not None:
            last_mask = good_state[last] = unpolished(last)
            for r in reversed(rows):
                if int(r["frame"]) <= last or r["flags"] != "area_jump":
                    break
                jumps.insert(0, int(r["frame"]))
            jumps = jumps[len(jumps) - max(config.reanchor_frames - 1, 0):]
            jump_state = {f: unpolished(f) for f in jumps}
        labeller.restore(box, last_mask, (n_done - last) if last is not None else 0, list(jump_state.values()))

    written = 0
    try:
        if total is None or n_done < total:
            with CsvAppender(csv_path, CSV_COLUMNS, resume=True) as log, \
                    (CsvAppender(out / FIT_CSV, FIT_COLUMNS, resume=True) if fitted else nullcontext()) as fit_log:
                bar = tqdm(total=total, initial=n_done, desc=f"label ({predictor.name})", unit="frame",
                           disable=not progress)
                for src_i, rgb in source.frames(start=n_done * stride, stride=stride):
                    i = writer.next_frame
                    if total is not None and i >= total:
                        break
                    if hasattr(predictor, "seek"):  # a backend that reads the video around the frame
                        predictor.seek(src_i)
                    lab = labeller.start(rgb, box) if not labeller.started else labeller.step(rgb)
                    writer.write_frame(rgb, lab.mask)
                    if fit_log is not None:
                        fit_log.write({"frame": i, **predictor.last_fit})
                    jumped = lab.flags == ("area_jump",)
                    if not jumped:
                        jump_state = {}
                    raw = lab.raw_mask
                    if (lab.good or jumped) and raw is not None and not np.array_equal(raw, lab.mask):
                        if lab.good:  # the last two good frames
                            good_state = {k: good_state[k] for k in sorted(good_state)[-1:]} | {i: raw}
                        else:  # a streak holds at most reanchor_frames - 1 masks
                            keep = sorted(jump_state)[len(jump_state) - max(config.reanchor_frames - 2, 0):]
                            jump_state = {k: jump_state[k] for k in keep} | {i: raw}
                        _write_resume(out / RESUME_NPZ, {**good_state, **jump_state})
                    log.write({"frame": i, "source_frame": src_i, "box_x": lab.box.x, "box_y": lab.box.y,
                               "box_w": lab.box.w, "box_h": lab.box.h, "area_px": lab.area_px,
                               "area_ratio": "" if lab.area_ratio is None else round(lab.area_ratio, 4),
                               "overlap": "" if lab.overlap is None else round(lab.overlap, 4),
                               "iou_prev": "" if lab.iou_prev is None else round(lab.iou_prev, 4),
                               "flags": "+".join(lab.flags)})
                    written += 1
                    bar.update(1)
                    if lab.flags:
                        bar.set_postfix_str(f"frame {i}: {'+'.join(lab.flags)}")
                bar.close()
    finally:
        if hasattr(predictor, "close"):
            predictor.close()
        writer.close()
        report = write_report(out)
    return LabelResult(str(out), report["frames"], written, report["flagged_count"], report)


def _write_resume(path: Path, masks: dict[int, np.ndarray]) -> None:
    """Write the unpolished good masks {dataset frame: bool (H, W)} bit-packed, atomically."""
    buf = io.BytesIO()
    np.savez_compressed(buf, frames=np.array(sorted(masks), np.int64),
                        shape=np.array(next(iter(masks.values())).shape, np.int64),
                        bits=np.stack([np.packbits(masks[k]) for k in sorted(masks)]))
    atomic_write_bytes(path, buf.getvalue())


def _read_resume_mask(path: Path, frame: int, shape: tuple[int, int]) -> Optional[np.ndarray]:
    """The unpolished mask of dataset ``frame`` from ``labels_resume.npz``, or None when it holds none."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as z:
            frames, bits, shp = z["frames"].tolist(), z["bits"], tuple(int(v) for v in z["shape"])
    except (OSError, ValueError, KeyError):
        return None
    if frame not in frames or shp != tuple(shape):
        return None
    n = shp[0] * shp[1]
    return np.unpackbits(bits[frames.index(frame)])[:n].reshape(shp).astype(bool)


