"""The live network in int8, made at the end of training and kept only when it segments as well as float32.

A CPU runs an int8 network about three times faster than the same network in float32 (VNNI or AVX2 integer
dot products; docs/benchmarks.md, "int8"). Static quantization needs the ranges of the
network's activations on frames like the ones it will see, and training has them: :func:`live_int8_entry`
exports the trained network (:func:`~snaketrack.training.live.export_bytes`), quantizes it with ONNX
Runtime's static quantization in the QDQ format (int8 weights per output channel, uint8 activations,
min-max ranges over :data:`CALIBRATION_FRAMES` training frames at the model's inference scale, every second
one with its robot pasted onto a synthetic ground, :func:`calibration_frames`), and
scores both on the validation frames at that scale without flips, against their labels. The int8 graph
is kept in the model file (``extra["live_int8"]``, about a quarter of the float32 network's bytes) only
when its IoU is at most :data:`IOU_LOSS` below float32's; the measurement is kept either way. The
``live`` setting (:func:`~snaketrack.training.live.live_network`) runs the kept graph, in OpenVINO or ONNX
Runtime, both of which run QDQ graphs with integer kernels.
"""
from __future__ import annotations

import contextlib
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from snaketrack.io import atomic_write_bytes
from snaketrack.training.data import normalise, pad_to, resize_to
from snaketrack.training.evaluate import mean_iou
from snaketrack.training.grounds import paste_on_ground
from snaketrack.training.live import OnnxNetwork, _first_line, export_bytes
from snaketrack.training.model import LIVE_INT8_FIELD as FIELD
from snaketrack.training.model import SegmenterConfig, load_model, model_bytes, padded_size
from snaketrack.training.segmenter import Segmenter

CALIBRATION_FRAMES = 16  # training frames whose activation ranges set the int8 scales
IOU_LOSS = 0.02  # the most validation IoU the int8 network may lose against float32 and be kept
QUANTIZE_RESERVE_S = 15.0  # export and quantization of a resnet18 on a slow 2-core CPU [s], kept back by training


def network_input(rgb: np.ndarray, config: SegmenterConfig, size: tuple[int, int]) -> np.ndarray:
    """One RGB uint8 frame (H, W, 3) as the network takes it at ``size`` = (h, w): resized, normalised
    and padded right and bottom to a multiple of 16; float32 (1, 3, h', w')."""
    return pad_to(normalise(resize_to(rgb, size), config.mean, config.std)[None], padded_size(size)).astype(np.float32)


def quantize_graph(graph: bytes, inputs: Sequence[np.ndarray]) -> bytes:
    """The float32 ONNX ``graph`` (input ``image``) statically quantized to int8 in the QDQ format, its
    activation ranges the minima and maxima over ``inputs`` (float32 (1, 3, h, w) each)."""
    # deferred: optional, the live extra
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Inputs(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"image": x} for x in inputs])

        def get_next(self):
            return next(self.items, None)

    # the quantization tools write scratch files into the working folder: work in a temporary one
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Path("fp32.onnx").write_bytes(graph)
        quant_pre_process("fp32.onnx", "pre.onnx", skip_symbolic_shape=True)
        quantize_static("pre.onnx", "int8.onnx", Inputs(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
        return Path("int8.onnx").read_bytes()


def live_int8_entry(model: torch.nn.Module, config: SegmenterConfig, calibration: Sequence[np.ndarray],
                    validation: Sequence[tuple[np.ndarray, np.ndarray]],
                    threads: Optional[int] = None) -> dict[str, Any]:
    """The model file's :data:`FIELD` for ``model`` (its file's ``config``, with the chosen scale and
    threshold): the int8 graph (``graph``, bytes) when it keeps its validation IoU
    within :data:`IOU_LOSS` of float32's, and the measurement (``val_iou_fp32``, ``val_iou_int8``,
    ``frames``, ``calibration_frames``, ``kept``, ``seconds``).

    calibration: RGB uint8 training frames (H, W, 3); validation: (RGB uint8 frame, bool label) pairs.
    Both networks run at the model's scale without flips, the float32 one in torch, the int8 one in
    ONNX Runtime with ``threads`` intra-op threads (None: torch's)."""
    t0 = time.perf_counter()
    fp32 = Segmenter(model, config, flips=1, precision="fp32")
    xs = [network_input(f, config, fp32.size) for f in calibration]
    graph = quantize_graph(export_bytes(model, fp32.net_size, "model-file"), xs)  # kept in the file: no cache key
    int8 = Segmenter(model, config, flips=1, precision="fp32", network=OnnxNetwork(graph, threads))
    frames, labels = [f for f, _ in validation], [m for _, m in validation]
    ious = {name: mean_iou([seg.predict(f) for f in frames], labels) for name, seg in (("fp32", fp32), ("int8", int8))}
    kept = bool(ious["int8"] >= ious["fp32"] - IOU_LOSS)
    entry: dict[str, Any] = {"val_iou_fp32": ious["fp32"], "val_iou_int8": ious["int8"], "frames": len(frames),
                             "calibration_frames": len(xs), "kept": kept, "seconds": time.perf_counter() - t0}
    if kept:
        entry["graph"] = graph
    return entry


def calibration_frames(items: Sequence[tuple[Any, int]], n: int = CALIBRATION_FRAMES,
                       seed: int = 0) -> list[np.ndarray]:
    """RGB uint8 frames (H, W, 3) to set the int8 ranges on: ``n`` of ``items`` ((dataset, frame index) pairs
    with labels) evenly spaced, every second one with its labelled robot pasted onto a synthetic ground
    (:func:`~snaketrack.training.grounds.paste_on_ground`, drawn from ``seed``).

    The live setting runs on footage of other grounds than the training clip's, and activations outside the
    calibrated ranges are clipped (docs/benchmarks.md, "int8", measures the difference)."""
    rng = np.random.default_rng(seed)
    frames = []
    for k, (ds, i) in enumerate(evenly(list(items), n)):
        rgb = ds.frame(i)
        if k % 2:
            mask = ds.mask(i)
            if mask is not None and (mask > 0).any():
                rgb = paste_on_ground(rgb, mask > 0, rng)
        frames.append(rgb)
    return frames


def evenly(items: Sequence[Any], n: int) -> list[Any]:
    """At most ``n`` of ``items``, evenly spaced from the first to the last."""
    if len(items) <= n:
        return list(items)
    return [items[int(k)] for k in np.linspace(0, len(items) - 1, n).round()]


def attach_live_int8(model_path: str | Path, train_items: Sequence[tuple[Any, int]],
                     val_items: Sequence[tuple[Any, int]], threads: Optional[int] = None,
                     progress: bool = False) -> dict[str, Any]:
    """Add :data:`FIELD` (:func:`live_int8_entry`) to the model file at ``model_path``, calibrated on
    training frames (``train_items``: (dataset, frame index) pairs, :func:`calibration_frames`) and
    measured on ``val_items``' frames and masks; a file that has it already is left as it is. Returns the entry
    without its graph. An export or quantization that fails is recorded
    (``kept`` False, ``error``) and the live setting runs float32."""
    model, config, extra = load_model(model_path)
    if FIELD in extra:  # a finished run opened again
        return {k: v for k, v in extra[FIELD].items() if k != "graph"}
    calibration = calibration_frames(train_items)
    validation = [(ds.frame(i), ds.mask(i) > 0) for ds, i in val_items]
    try:
        entry = live_int8_entry(model, config, calibration, validation, threads)
    except Exception as e:  # an encoder the exporter or the quantizer refuses
        entry = {"kept": False, "error": _first_line(e)}
    atomic_write_bytes(model_path, model_bytes(model, config, {**extra, FIELD: entry}))
    summary = {k: v for k, v in entry.items() if k != "graph"}
    if progress:
        if "error" in entry:
            print(f"live int8 network not made ({entry['error']}); the live setting runs float32", flush=True)
        else:
            print(f"live int8 network: validation IoU {entry['val_iou_int8']:.4f} against float32's "
                  f"{entry['val_iou_fp32']:.4f}, {'kept' if entry['kept'] else 'not kept'} "
                  f"({entry['seconds']:.0f} s)", flush=True)
    return summary
