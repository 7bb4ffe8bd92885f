"""The record of a labelling run: ``labels.csv``, ``fit.csv``, ``labels_report.json`` and the contact sheets.

A run that fits its labels to the robot model also writes ``fit.csv``, one row a frame: the tracker's status,
the IoU of the fitted silhouette and the label, which mask was written (``fit``: the silhouette, ``trim``:
the label trimmed to it, ``label``: the label as cut, which the model did not explain), and under the label gate
(:mod:`~snaketrack.labelling.label_gate`) what it did to the frame's label (``gate``: reasons joined by ``+``).
:func:`write_report` (re)writes ``labels_report.json`` (frame counts, flag
counts per reason, the labelling settings, one entry per flagged frame, and from ``fit.csv`` the count of
each kind of written mask, the frames whose label the model did not explain, and the gate's reasons counted),
``labels_sheet.png`` (:func:`contact_sheet_png` of up to 12 frames evenly
spaced through the run: a look at the whole labelling at once) and, when any
frame is flagged, ``labels_flagged.png`` (the flagged frames with mask,
prompt box and reasons) from ``labels.csv``, and when the fit kept any label as cut, ``labels_kept.png``
(those frames, the same way).
:func:`flagged_frames` reads the report back for training, which skips them.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from snaketrack.datasets.layout import MASK_EXT, frame_name, read_image, read_mask
from snaketrack.io import atomic_write_bytes, read_json, write_json

LABELS_CSV = "labels.csv"
REPORT_JSON = "labels_report.json"
CONTACT_SHEET = "labels_flagged.png"
KEPT_SHEET = "labels_kept.png"
OVERVIEW_SHEET = "labels_sheet.png"
OVERVIEW_TILES = 12
CSV_COLUMNS = ["frame", "source_frame", "box_x", "box_y", "box_w", "box_h", "area_px",
               "area_ratio", "overlap", "iou_prev", "flags"]
FIT_CSV = "fit.csv"
FIT_COLUMNS = ["frame", "status", "iou_fit", "source", "area_label_px", "area_fitted_px", "gate"]
#: a column a run without the label gate (:mod:`~snaketrack.labelling.label_gate`) may lack: read as empty
OPTIONAL_COLUMNS = ("gate",)


def read_label_rows(path: Path, columns: list[str] = CSV_COLUMNS) -> list[dict[str, str]]:
    """The complete rows of ``labels.csv`` (or of another of the run's tables with its ``columns``: column
    name → text)."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        absent = [c for c in OPTIONAL_COLUMNS if c in columns and c not in (reader.fieldnames or ())]
    for r in rows:
        r.update({c: "" for c in absent})
    good = []
    for r in rows:  # a row torn by an interruption ends the list
        if any(r.get(c) is None for c in columns):
            break
        good.append(r)
    return good


def write_report(out: str | os.PathLike) -> dict[str, Any]:
    """(Re)write ``labels_report.json`` and the contact sheet from ``labels.csv``; returns the report."""
    out = Path(out)
    rows = read_label_rows(out / LABELS_CSV)
    entries = [{"frame": int(r["frame"]), "source_frame": int(r["source_frame"]),
                "flags": r["flags"].split("+") if r["flags"] else [], "area_px": int(r["area_px"]),
                "box": [int(r["box_x"]), int(r["box_y"]), int(r["box_w"]), int(r["box_h"])]}
               for r in rows]
    flagged = [e for e in entries if e["flags"]]
    meta = read_json(out / "meta.json") if (out / "meta.json").is_file() else {}
    counts: dict[str, int] = {}
    for f in flagged:
        for reason in f["flags"]:
            counts[reason] = counts.get(reason, 0) + 1
    report = {"frames": len(rows), "flagged_count": len(flagged), "good_count": len(rows) - len(flagged),
              "flag_counts": counts, "labelling": meta.get("labelling", {}),
              "contact_sheet": CONTACT_SHEET if flagged else None, "flagged": flagged}
    by_frame = {e["frame"]: e for e in entries}
    fits = [r for r in read_label_rows(out / FIT_CSV, FIT_COLUMNS) if int(r["frame"]) in by_frame]
    kept = []
    for r in fits:
        if r["source"] == "label":  # its tile names the fit's IoU with the label (nan: the model not yet started)
            e = by_frame[int(r["frame"])]
            kept.append(dict(e, flags=e["flags"] + [f"fit {r['iou_fit']}"]))
    if fits:
        kinds = [r["source"] for r in fits]
        gate: dict[str, int] = {}
        for r in fits:
            for reason in filter(None, r["gate"].split("+")):
                gate[reason] = gate.get(reason, 0) + 1
        report["fit"] = {"replaced": kinds.count("fit"), "trimmed": kinds.count("trim"), "kept": len(kept),
                         "kept_frames": [e["frame"] for e in kept], "contact_sheet": KEPT_SHEET if kept else None,
                         "gate_counts": gate, "gated_frames": sum(1 for r in fits if r["gate"])}
    write_json(out / REPORT_JSON, report)
    for sheet, items in ((out / CONTACT_SHEET, flagged), (out / KEPT_SHEET, kept)):
        if items:
            atomic_write_bytes(sheet, contact_sheet_png(out, items))
        elif sheet.exists():
            sheet.unlink()
    if entries:
        picks = np.unique(np.linspace(0, len(entries) - 1, min(OVERVIEW_TILES, len(entries))).round().astype(int))
        atomic_write_bytes(out / OVERVIEW_SHEET, contact_sheet_png(out, [entries[k] for k in picks], cols=4,
                                                                   tile_w=320))
    return report


def flagged_frames(root: str | os.PathLike) -> set[int]:
    """Dataset frame indices flagged by the labeller (empty when the folder has no report)."""
    p = Path(root) / REPORT_JSON
    if not p.is_file():
        return set()
    return {int(f["frame"]) for f in read_json(p).get("flagged", [])}


def contact_sheet_png(root: Path, flagged: list[dict[str, Any]], max_tiles: int = 48,
                      tile_w: int = 240, cols: int = 6) -> bytes:
    """PNG bytes of a grid of labelled frames: mask in red, prompt box in green, frame number and any flags
    written. ``flagged``: entries of the report (``frame``, ``box``, ``flags``)."""
    items = flagged[:max_tiles]
    tiles = []
    for f in items:
        i = f["frame"]
        rgb = read_image(root / "frames" / frame_name(i))
        mp = root / "masks" / frame_name(i, MASK_EXT)
        m = read_mask(mp) if mp.is_file() else np.zeros(rgb.shape[:2], bool)
        img = rgb.astype(np.float32)
        img[m] = 0.5 * img[m] + 0.5 * np.array([255, 0, 0], np.float32)
        img = np.clip(img, 0, 255).astype(np.uint8)
        x, y, bw, bh = f["box"]
        cv2.rectangle(img, (x, y), (x + bw - 1, y + bh - 1), (0, 255, 0), max(1, rgb.shape[1] // 320))
        s = tile_w / rgb.shape[1]
        tile = cv2.resize(img, (tile_w, max(int(round(rgb.shape[0] * s)), 1)), interpolation=cv2.INTER_AREA)
        text = f"{i}: {'+'.join(f['flags'])}" if f["flags"] else f"{i}"
        cv2.putText(tile, text, (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(tile, text, (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
        tiles.append(tile)
    th = max(t.shape[0] for t in tiles)
    rows_n = (len(tiles) + cols - 1) // cols
    ncols = min(cols, len(tiles))
    sheet = np.full((rows_n * (th + 2), ncols * (tile_w + 2), 3), 32, np.uint8)
    for k, t in enumerate(tiles):
        r, c = divmod(k, cols)
        sheet[r * (th + 2):r * (th + 2) + t.shape[0], c * (tile_w + 2):c * (tile_w + 2) + tile_w] = t
    ok, buf = cv2.imencode(".png", cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
    return buf.tobytes()
