"""The segmenter's ``live`` setting: its network exported to ONNX and run by ONNX Runtime on the CPU.

A segmenter runs in one of two settings (:data:`SETTINGS`):

- ``accurate``: the model file's stored inference scale and test-time flips (chosen by training on its
  validation split), in torch — seconds a frame on a CPU;
- ``live``: scale 1 (the model's own input size) and no flips, the network exported once with
  ``torch.onnx.export`` and run by ONNX Runtime's CPU execution provider — ≈ 0.14 s a 640x360 frame on
  one core, 17× faster than ``accurate`` at scale 1.5 with 4 flips, but less accurate for a model that
  chose a scale above 1 (docs/segmentation.md, "Live and accurate").

The export is cached beside the model file as ``MODEL.live.onnx`` (:func:`live_path`), written
atomically, and tagged with the SHA-256 of the model file's bytes and the network's input size
(``(height, width)`` after padding to a multiple of 16): a retrained model, or another size, is exported
again. At export the graph is checked against torch on a test frame: the robot probabilities may differ
by at most :data:`EXPORT_TOLERANCE`. When ONNX Runtime is missing, the export fails or the check does
not pass, :func:`live_network` warns in one line and returns None, and the segmenter runs its network in
torch (same scale and flips).
"""
from __future__ import annotations

import hashlib
import io
import os
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from snaketrack.errors import InputError, SnaketrackWarning
from snaketrack.io import atomic_write_bytes

SETTINGS = ("live", "accurate")
EXPORT_TOLERANCE = 1e-3  # max |p_onnx - p_torch| of the robot probability on the check frame
OPSET = 17
KEY_FIELD = "snaketrack_model_sha256"
SIZE_FIELD = "snaketrack_net_size"


class LiveFallbackWarning(SnaketrackWarning):
    """The live setting could not use ONNX Runtime; the network runs in torch."""


def check_setting(setting: str) -> str:
    """``setting`` if it is one of :data:`SETTINGS`, else :class:`InputError`."""
    if setting not in SETTINGS:
        raise InputError(f"--setting {setting!r}: expected one of {', '.join(SETTINGS)}")
    return setting


def live_path(model_path: str | os.PathLike) -> Path:
    """The cached export beside a model file: ``DIR/m.pt`` → ``DIR/m.live.onnx``."""
    p = Path(model_path)
    return p.with_name(p.stem + ".live.onnx")


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes (a 50 MB model file: ≈ 0.1 s)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_bytes(model: torch.nn.Module, net_size: tuple[int, int], key: str) -> bytes:
    """The ONNX graph of ``model`` (input ``image`` float32 (B, 3, h, w) normalised and padded, output
    ``logit`` float32 (B, 1, h, w); the batch dimension free, (h, w) = ``net_size``), tagged with ``key``
    (the model file's SHA-256) and ``net_size`` in its metadata."""
    import onnx

    model = model.float().eval()
    x = torch.zeros((1, 3, *net_size), dtype=torch.float32)
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript-based exporter warns it is deprecated; it needs no onnxscript
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=OPSET, input_names=["image"],
                          output_names=["logit"], dynamic_axes={"image": {0: "batch"}, "logit": {0: "batch"}})
    graph = onnx.load_from_string(buf.getvalue())
    for k, v in ((KEY_FIELD, key), (SIZE_FIELD, f"{net_size[0]}x{net_size[1]}")):
        entry = graph.metadata_props.add()
        entry.key, entry.value = k, v
    return graph.SerializeToString()


class OnnxNetwork:
    """An exported network in an ONNX Runtime session on the CPU: ``net(x) -> logits``.

    graph: an ``.onnx`` file or its bytes. x: float32 (B, 3, h, w), normalised and padded like the torch
    network's input; returns float32 (B, 1, h, w). threads: ONNX Runtime's intra-op threads (None: torch's
    thread count, so ``--threads`` and ``torch.set_num_threads`` govern both).
    """

    backend = "onnxruntime"

    def __init__(self, graph: str | os.PathLike | bytes, threads: Optional[int] = None):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = int(threads or torch.get_num_threads())
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3  # errors only
        source = graph if isinstance(graph, bytes) else str(graph)
        self.session = ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(["logit"], {"image": np.ascontiguousarray(x, dtype=np.float32)})[0]


def check_frame(net_size: tuple[int, int], mean, std) -> np.ndarray:
    """The export check's input: a synthetic frame with a snake on textured ground (the toy video's first
    frame) at ``net_size``, normalised like the network's input; float32 (1, 3, h, w)."""
    from snaketrack.datasets.toy import toy_video
    from snaketrack.training.data import normalise

    frames, _ = toy_video(1, net_size[1], net_size[0], seed=0)
    return normalise(frames[0], mean, std)[None].astype(np.float32)


def max_probability_difference(net, model: torch.nn.Module, x: np.ndarray) -> float:
    """max |sigmoid(net(x)) - sigmoid(model(x))| over the pixels of ``x`` (float32 (B, 3, h, w))."""
    with torch.inference_mode():
        ref = torch.sigmoid(model.float().eval()(torch.from_numpy(x))).numpy()
    got = 1.0 / (1.0 + np.exp(-np.asarray(net(x), dtype=np.float64)))
    return float(np.abs(got - ref).max())


def _load_cached(path: Path, key: str, size: str, threads: Optional[int]) -> Optional[OnnxNetwork]:
    if not path.is_file():
        return None
    try:
        net = OnnxNetwork(path, threads)
    except Exception:  # unreadable or half-written by an older run: export again
        return None
    if net.metadata.get(KEY_FIELD) != key or net.metadata.get(SIZE_FIELD) != size:
        return None
    return net


def live_network(model_path: str | os.PathLike, model: torch.nn.Module, config, net_size: tuple[int, int],
                 threads: Optional[int] = None) -> Optional[OnnxNetwork]:
    """The live network of the model file ``model_path`` (``model`` its torch network, ``config`` its
    :class:`~snaketrack.training.model.SegmenterConfig`) at ``net_size`` (h, w, multiples of 16): the
    cached export when it matches the file and size, else a fresh export, checked against torch and
    cached. None, with a one-line :class:`LiveFallbackWarning`, when it cannot be used (module doc)."""
    path = live_path(model_path)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return _fallback("onnxruntime is not installed")
    key, size = file_sha256(model_path), f"{net_size[0]}x{net_size[1]}"
    net = _load_cached(path, key, size, threads)
    if net is not None:
        return net
    try:
        data = export_bytes(model, net_size, key)
        net = OnnxNetwork(data, threads)
        diff = max_probability_difference(net, model, check_frame(net_size, config.mean, config.std))
    except Exception as e:  # the exporter or ONNX Runtime refused this network
        first = str(e).splitlines()[0][:120] if str(e) else ""
        return _fallback(f"export to ONNX failed ({type(e).__name__}: {first})")
    if not diff <= EXPORT_TOLERANCE:
        return _fallback(f"the exported graph differs from torch by {diff:.2g} in probability "
                         f"(tolerance {EXPORT_TOLERANCE:g})")
    try:
        atomic_write_bytes(path, data)
    except OSError as e:  # a read-only model folder: this run keeps the export in memory only
        warnings.warn(f"{path}: not cached ({e.strerror}); the live network is exported again next time",
                      LiveFallbackWarning, stacklevel=2)
    return net


def _fallback(reason: str) -> None:
    warnings.warn(f"live segmenter: {reason}; running the network in torch instead", LiveFallbackWarning,
                  stacklevel=3)
    return None
