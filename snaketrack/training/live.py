"""The segmenter's ``live`` setting: its network exported to ONNX and run by a CPU inference engine.

A segmenter runs in one of two settings (:data:`SETTINGS`):

- ``accurate``: the model file's stored inference scale and test-time flips (chosen by training on its
  validation split), in torch float32;
- ``live``: the stored scale and flips, at most the left-right pair (:data:`LIVE_FLIPS`: the frame and
  its mirror image averaged), in a window that follows the robot
  (:mod:`snaketrack.training.window`), the network exported once with
  ``torch.onnx.export`` and run by the fastest engine installed (:data:`ENGINES`): OpenVINO, in
  bfloat16 on a CPU that offers it (float32 elsewhere), else ONNX Runtime in float32
  (docs/segmentation.md, "Live and accurate"). A model file that carries an int8 network (made by
  training, :mod:`snaketrack.training.quantize`) runs that one instead, in the same engine.

The export is cached beside the model file as ``MODEL.live.onnx`` (:func:`live_path`), written
atomically, and tagged with the SHA-256 of the model file's bytes: a retrained model is exported again.
The graph takes any input size (height and width multiples of 16); OpenVINO compiles it once per size
it is given. When a network is opened it is checked against torch on a test frame: the robot probabilities may
differ by at most :func:`tolerance` (1e-3 in float32; 0.05 in bfloat16, whose 8-bit mantissa moves a
probability by about 0.015; for int8, 0.01 on average over the frame: its IoU was measured by
training). An int8 network that fails the check gives way to the float32 export. When no engine is
installed, the export fails or the check does not pass, :func:`live_network` warns in one line and
returns None, and the segmenter runs its network in torch (same scale and flips).
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from snaketrack.datasets.toy import toy_video
from snaketrack.errors import InputError, SnaketrackWarning
from snaketrack.extras import install_command
from snaketrack.io import atomic_write_bytes
from snaketrack.training.data import normalise

SETTINGS = ("live", "accurate")
#: the live setting's test-time flips at most: the left-right pair. On scenes the network was not trained on
#: the pair lifts the mask where a thing of the robot's colour lies beside it (docs/benchmarks.md,
#: "Live and accurate"), for 1.6–1.8× a single pass's time.
LIVE_FLIPS = 2
ENGINES = ("openvino", "onnxruntime")  # the live network's engines, fastest first
EXPORT_TOLERANCE = 1e-3  # max |p_engine - p_torch| of the robot probability on the check frame, float32
BF16_TOLERANCE = 0.05  # the same in bfloat16
INT8_TOLERANCE = 0.01  # mean |p_engine - p_torch| on the check frame, int8 (quantize.py measures the IoU)
OPSET = 17
KEY_FIELD = "snaketrack_model_sha256"
SIZE_FIELD = "snaketrack_net_size"
ANY_SIZE = "any"  # SIZE_FIELD of a graph whose height and width are free


class LiveFallbackWarning(SnaketrackWarning):
    """The live setting could not use an inference engine; the network runs in torch."""


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
    ``logit`` float32 (B, 1, h, w); batch, height and width free, traced at (h, w) = ``net_size``), tagged
    with ``key`` (the model file's SHA-256) and :data:`ANY_SIZE` in its metadata."""
    import onnx  # deferred: optional, the live extra

    model = model.float().eval()
    x = torch.zeros((1, 3, *net_size), dtype=torch.float32)
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript-based exporter warns it is deprecated; it needs no onnxscript
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=OPSET, input_names=["image"],
                          output_names=["logit"], dynamic_axes={n: {0: "batch", 2: "height", 3: "width"}
                                                                 for n in ("image", "logit")})
    graph = onnx.load_from_string(buf.getvalue())
    for k, v in ((KEY_FIELD, key), (SIZE_FIELD, ANY_SIZE)):
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

    def __init__(self, graph: str | os.PathLike | bytes, threads: Optional[int] = None, precision: str = "fp32"):
        import onnxruntime as ort  # deferred: optional, the live extra

        self.precision = precision  # fp32, or int8 for a quantized graph (QDQ)

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


def cpu_offers_bf16(core=None) -> bool:
    """Whether OpenVINO's CPU plugin computes in bfloat16 on this CPU (AVX512-BF16 or AMX); ``core``: an
    ``openvino.Core`` to ask (None: a new one)."""
    import openvino as ov  # deferred: optional, the live extra

    return "BF16" in (core or ov.Core()).get_property("CPU", "OPTIMIZATION_CAPABILITIES")


class OpenVinoNetwork:
    """An exported network compiled by OpenVINO for the CPU: ``net(x) -> logits``, as :class:`OnnxNetwork`.

    precision: ``bf16`` or ``fp32`` (None: ``bf16`` where :func:`cpu_offers_bf16`, else ``fp32``), or
    ``int8`` for a quantized graph (its quantized layers in integers, the rest in float32); the input and
    output stay float32. threads: OpenVINO's inference threads (None: torch's thread count).
    Compiled for latency (one frame at a time, as a live source delivers them), once per input shape
    (≈ 0.1–1 s each): on its first use, or beforehand in a background thread when :meth:`ready` is asked
    about it, so that a live segmenter need not wait for it (:meth:`Window.crop
    <snaketrack.training.window.Window.crop>` takes a larger window whose shape is compiled meanwhile).
    """

    backend = "openvino"

    def __init__(self, graph: str | os.PathLike | bytes, threads: Optional[int] = None,
                 precision: Optional[str] = None):
        import openvino as ov  # deferred: optional, the live extra

        core = ov.Core()
        self.precision = precision or ("bf16" if cpu_offers_bf16(core) else "fp32")
        self.core, self.data = core, graph if isinstance(graph, bytes) else Path(graph).read_bytes()
        self.metadata = graph_metadata(self.data)
        self.options = {"INFERENCE_NUM_THREADS": int(threads or torch.get_num_threads()),
                        "INFERENCE_PRECISION_HINT": "bf16" if self.precision == "bf16" else "f32",
                        "PERFORMANCE_HINT": "LATENCY"}
        self.requests: dict[tuple[int, ...], object] = {}  # input shape → its compiled network's request
        self.pending: dict[tuple[int, ...], Future] = {}  # input shape → its compilation in the background
        self._compiler: Optional[ThreadPoolExecutor] = None

    def _compile(self, shape: tuple[int, ...]):
        model = self.core.read_model(self.data)
        model.reshape({0: list(shape)})
        return self.core.compile_model(model, "CPU", self.options).create_infer_request()

    def ready(self, shape: tuple[int, ...]) -> bool:
        """Whether input ``shape`` (B, 3, h, w) is compiled; if not, its compilation is started in a
        background thread, unless another is being compiled (one at a time, each once)."""
        shape = tuple(int(s) for s in shape)
        if shape in self.requests:
            return True
        job = self.pending.get(shape)
        if job is None:
            if any(not j.done() for j in self.pending.values()):  # one at a time: ask again later
                return False
            if self._compiler is None:
                self._compiler = ThreadPoolExecutor(1, thread_name_prefix="openvino-compile")
            self.pending[shape] = self._compiler.submit(self._compile, shape)
            return False
        if not job.done() or job.exception() is not None:  # a failed compilation is raised by __call__
            return False
        self.requests[shape] = self.pending.pop(shape).result()
        return True

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        request = self.requests.get(x.shape)
        if request is None:
            job = self.pending.pop(x.shape, None)
            request = job.result() if job is not None else self._compile(x.shape)
            self.requests[x.shape] = request
        return np.array(request.infer({0: x})[0], dtype=np.float32)


def graph_metadata(data: bytes) -> dict[str, str]:
    """The metadata properties of an ONNX graph (its bytes): the tags :func:`export_bytes` writes."""
    import onnx  # deferred: optional, the live extra

    return {p.key: p.value for p in onnx.load_from_string(data).metadata_props}


def open_network(graph: str | os.PathLike | bytes, engine: str, threads: Optional[int] = None,
                 int8: bool = False):
    """The exported ``graph`` in ``engine`` (one of :data:`ENGINES`); ``int8``: the graph is quantized."""
    if engine == "openvino":
        return OpenVinoNetwork(graph, threads, "int8" if int8 else None)
    if engine == "onnxruntime":
        return OnnxNetwork(graph, threads, "int8" if int8 else "fp32")
    raise InputError(f"live engine {engine!r}: expected one of {', '.join(ENGINES)}")


def installed_engines() -> list[str]:
    """The :data:`ENGINES` whose Python package imports, fastest first."""
    return [e for e in ENGINES if importlib.util.find_spec(e) is not None]


def tolerance(net) -> float:
    """The largest probability difference from torch that the check of ``net`` accepts (module doc)."""
    precision = getattr(net, "precision", "fp32")
    return {"bf16": BF16_TOLERANCE, "int8": INT8_TOLERANCE}.get(precision, EXPORT_TOLERANCE)


def check_frame(net_size: tuple[int, int], mean, std) -> np.ndarray:
    """The export check's input: a synthetic frame with a snake on textured ground (the toy video's first
    frame) at ``net_size``, normalised like the network's input; float32 (1, 3, h, w)."""
    frames, _ = toy_video(1, net_size[1], net_size[0], seed=0)
    return normalise(frames[0], mean, std)[None].astype(np.float32)


def probability_difference(net, model: torch.nn.Module, x: np.ndarray) -> float:
    """|sigmoid(net(x)) - sigmoid(model(x))| over the pixels of ``x`` (float32 (B, 3, h, w)): its largest
    value, or its mean for an int8 ``net`` (whose integer rounding moves a few edge pixels' probabilities
    by more than any fixed bound)."""
    with torch.inference_mode():
        ref = torch.sigmoid(model.float().eval()(torch.from_numpy(x))).numpy()
    got = 1.0 / (1.0 + np.exp(-np.asarray(net(x), dtype=np.float64)))
    diff = np.abs(got - ref)
    return float(diff.mean() if getattr(net, "precision", "fp32") == "int8" else diff.max())


def _cached_graph(path: Path, key: str, size: str) -> Optional[bytes]:
    """The cached export's bytes when its tags match the model file and ``size``, else None."""
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        meta = graph_metadata(data)
    except Exception:  # unreadable or half-written by an older run: export again
        return None
    return data if meta.get(KEY_FIELD) == key and meta.get(SIZE_FIELD) == size else None


def live_network(model_path: str | os.PathLike, model: torch.nn.Module, config, net_size: tuple[int, int],
                 threads: Optional[int] = None, engine: Optional[str] = None, int8: Optional[bytes] = None):
    """The live network of the model file ``model_path`` (``model`` its torch network, ``config`` its
    :class:`~snaketrack.training.model.SegmenterConfig`), checked at ``net_size`` (h, w, multiples of 16), in
    ``engine`` (None: the first of :func:`installed_engines`): ``int8``, the model file's quantized graph
    (:mod:`~snaketrack.training.quantize`), when given and it passes the check; else the cached float32
    export when it matches the file, else a fresh export, cached; checked against torch either way. None,
    with a one-line :class:`LiveFallbackWarning`, when it cannot be used (module doc)."""
    engines = installed_engines()
    if engine is not None and engine not in engines:
        return _fallback(f"{engine} is not installed ({install_command('live')})" if engine in ENGINES else
                         f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    if not engines:
        return _fallback(f"no inference engine is installed ({' or '.join(ENGINES)}: {install_command('live')})")
    engine = engine or engines[0]
    x = check_frame(net_size, config.mean, config.std)
    if int8 is not None:
        try:
            net = open_network(int8, engine, threads, int8=True)
            diff = probability_difference(net, model, x)
        except Exception as e:  # the engine refused the graph
            diff, why = float("nan"), f"{engine} failed ({_first_line(e)})"
        else:
            why = f"differs from torch by {diff:.2g} in mean probability (tolerance {INT8_TOLERANCE:g})"
        if diff <= INT8_TOLERANCE:
            return net
        warnings.warn(f"live segmenter: the int8 network {why}; running the float32 one", LiveFallbackWarning,
                      stacklevel=2)
    path = live_path(model_path)
    key = file_sha256(model_path)
    data = _cached_graph(path, key, ANY_SIZE)
    fresh = data is None
    if fresh:
        try:
            data = export_bytes(model, net_size, key)
        except Exception as e:  # the exporter refused this network
            return _fallback(f"export to ONNX failed ({_first_line(e)})")
    try:
        net = open_network(data, engine, threads)
        diff = probability_difference(net, model, x)
    except Exception as e:  # the engine refused the graph
        return _fallback(f"{engine} failed ({_first_line(e)})")
    if not diff <= tolerance(net):
        return _fallback(f"the exported graph in {engine} ({net.precision}) differs from torch by {diff:.2g} "
                         f"in probability (tolerance {tolerance(net):g})")
    if fresh:
        try:
            atomic_write_bytes(path, data)
        except OSError as e:  # a read-only model folder: this run keeps the export in memory only
            warnings.warn(f"{path}: not cached ({e.strerror}); the live network is exported again next time",
                          LiveFallbackWarning, stacklevel=2)
    return net


def _first_line(e: Exception) -> str:
    first = str(e).splitlines()[0][:120] if str(e) else ""
    return f"{type(e).__name__}: {first}"


def _fallback(reason: str) -> None:
    warnings.warn(f"live segmenter: {reason}; running the network in torch instead", LiveFallbackWarning,
                  stacklevel=3)
    return None
