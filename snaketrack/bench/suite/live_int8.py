"""Measure: does ONNX Runtime int8 quantization of the live segmenter pay (speed) without losing IoU?

The model's live export (float32, scale 1, no flips) against its int8 versions: dynamic quantization
(weights int8, activations quantized on the fly) and static QDQ quantization (per-channel int8 weights,
uint8 activations) with min-max or percentile (99.999 %) calibration on ``--calibration-frames`` frames
of ``--calibration`` (e.g. the model's training video). For each: mean IoU against ``--video``'s truth
masks (every ``--every``-th frame, the model's threshold, scale 1, no flips), the largest and the 99.9th
percentile absolute robot-probability difference from torch on those frames, and the median ms of one
640x360 network pass (ONNX Runtime alone, ``--threads`` intra-op threads).

    snaketrack bench live-int8 --model MODEL.pt --video DATASET --calibration TRAIN_DATASET
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from snaketrack.bench.registry import Benchmark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", required=True)
    ap.add_argument("--video", required=True, help="dataset with truth masks to score on")
    ap.add_argument("--calibration", required=True, help="dataset whose frames calibrate static quantization")
    ap.add_argument("--calibration-frames", type=int, default=15)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)


def run(args: argparse.Namespace) -> dict:
    import cv2
    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from snaketrack.datasets.layout import Dataset
    from snaketrack.masks import mask_iou
    from snaketrack.training.live import export_bytes
    from snaketrack.training.model import load_model, padded_size
    from snaketrack.training.quantize import network_input

    torch.set_num_threads(args.threads)
    model, cfg, _ = load_model(args.model)
    size = cfg.input_size
    net = padded_size(size)

    def prep(rgb):
        return network_input(rgb, cfg, size)

    class Frames(CalibrationDataReader):
        def __init__(self, xs):
            self.it = iter([{"image": x} for x in xs])

        def get_next(self):
            return next(self.it, None)

    ev, cal = Dataset(args.video), Dataset(args.calibration)
    step = max(len(cal) // args.calibration_frames, 1)
    cal_x = [prep(cal.frame(i)) for i in range(0, len(cal), step)][:args.calibration_frames]
    idx = list(range(0, len(ev), args.every))
    xs, truth = [prep(ev.frame(i)) for i in idx], [ev.mask(i) for i in idx]
    H, W = truth[0].shape
    with torch.inference_mode():
        p_torch = [torch.sigmoid(model(torch.from_numpy(x)))[0, 0].numpy() for x in xs]

    def iou(ps) -> float:
        return float(np.mean([mask_iou(cv2.resize(p[:size[0], :size[1]], (W, H)) > cfg.threshold, t)
                              for p, t in zip(ps, truth)]))

    out: dict[str, object] = {"model": args.model, "video": args.video, "calibration": args.calibration,
                              "frames": len(idx), "threads": args.threads, "torch_iou": iou(p_torch)}
    # onnxruntime's quantization tools leave temporary files in the working folder: work in tmp
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        fp32, pre = f"{tmp}/fp32.onnx", f"{tmp}/pre.onnx"
        Path(fp32).write_bytes(export_bytes(model, net, "measure"))
        quant_pre_process(fp32, pre, skip_symbolic_shape=True)
        variants = {"fp32": fp32, "dynamic_int8": f"{tmp}/dyn.onnx"}
        quantize_dynamic(pre, variants["dynamic_int8"], weight_type=QuantType.QUInt8)
        for name, method in (("static_int8_minmax", CalibrationMethod.MinMax),
                             ("static_int8_percentile", CalibrationMethod.Percentile)):
            variants[name] = f"{tmp}/{name}.onnx"
            quantize_static(pre, variants[name], Frames(cal_x), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, calibrate_method=method)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
        for name, path in variants.items():
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            ps = [1.0 / (1.0 + np.exp(-sess.run(None, {"image": x})[0][0, 0])) for x in xs]
            diff = np.concatenate([np.abs(a - b).ravel() for a, b in zip(ps, p_torch)])
            ts = []
            for x in xs[:args.repeats]:
                t = time.perf_counter()
                sess.run(None, {"image": x})
                ts.append(time.perf_counter() - t)
            out[name] = {"iou": iou(ps), "max_abs_prob_diff": float(diff.max()),
                         "p999_abs_prob_diff": float(np.percentile(diff, 99.9)),
                         "ms": 1000 * statistics.median(ts)}
            print(json.dumps({name: out[name]}), file=sys.stderr, flush=True)
    return out


BENCHMARK = Benchmark("live-int8", "does ONNX Runtime int8 quantization of the live segmenter pay (speed) without "
                      "losing IoU?", add_arguments, run, quick={"calibration_frames": 4, "every": 20, "repeats": 2})
