"""A trained segmenter, ready to mask frames: ``load_segmenter(path).predict(rgb)``.

This is the tracker's entry point (``--masks segmenter:MODEL.pt``): give
it an RGB uint8 frame (H, W, 3) of any size, get a bool mask (H, W). The
frame is resized to the model's input size, normalised with its stored
mean/std, padded to a multiple of 16, segmented, and the robot
probability resized back to (H, W) and thresholded at the model's
threshold. The frame is first resized to the model's inference scale ×
its input size; with test-time flips the probabilities of the frame and
of its flipped copies (flipped back) are averaged. Threshold, scale and
flips are stored in the model file, chosen by training on its validation
split (0.5, 1 and 1 in files that predate the choice); each can be
overridden.

Two settings (:mod:`snaketrack.training.live`): ``accurate`` runs the stored scale and flips in torch;
``live`` runs the stored scale and flips, at most the left-right pair, through OpenVINO or ONNX Runtime
(the model file's int8 network when training made one, else the network exported once and cached
beside the model file as ``MODEL.live.onnx``), falling back to torch with a warning when it cannot.
Both take the frames they are given as one video's, in order, and segment each in a window that
follows the robot (:mod:`snaketrack.training.window`): on scenes the network was not trained on this is also the more
accurate view (docs/benchmarks.md, "The segmenter trained by default"); ``window=False``
segments each frame whole, for frames that are not one video's. In both, each mask keeps only its robot
(:func:`~snaketrack.training.window.robot_pieces`: its largest piece and, in turn, the pieces within
three body widths of those taken and at least half as thick, and in ``live`` a piece of the previous
frame's robot within six): one robot is in view, and specks of false robot farther off are dropped,
however large, and sticks beside it; and its edge pixels are then decided by their colour
(:func:`~snaketrack.mask_edges.unmix_edges`): a pixel beside the edge that is clearly more robot than
ground joins the mask, one clearly less leaves it; last, the edge is moved onto the frame's own colour
edge beside it by at most a pixel (:func:`~snaketrack.mask_edges.snap_edges`).

>>> import tempfile, os, numpy as np, torch
>>> from snaketrack.training.model import SegmenterConfig, build_model, save_model
>>> cfg = SegmenterConfig(encoder="resnet18", input_size=(36, 64))
>>> torch.manual_seed(0) and None
>>> p = os.path.join(tempfile.mkdtemp(), "m.pt"); save_model(p, build_model(cfg), cfg)
>>> seg = load_segmenter(p)
>>> m = seg.predict(np.zeros((90, 160, 3), np.uint8))
>>> m.shape, m.dtype
((90, 160), dtype('bool'))
"""
from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

import cv2
import numpy as np
import torch

from snaketrack.errors import InputError
from snaketrack.mask_edges import snap_edges, unmix_edges
from snaketrack.training.data import normalise, resize_to
from snaketrack.training.live import LIVE_FLIPS, check_setting, live_network
from snaketrack.training.model import (
    FLIPS,
    LIVE_INT8_FIELD,
    SegmenterConfig,
    check_precision,
    cpu_computes_bf16,
    load_model,
    padded_size,
    precision_context,
)
from snaketrack.training.window import Window, robot_pieces

FLIP_DIMS = ((), (3,), (2,), (2, 3))  # (B, 3, h, w) axes flipped: none, left-right, up-down, both


class Segmenter:
    """A DeepLabV3+ with its preprocessing. ``threshold`` on the robot probability (None: the config's);
    ``scale``: the network runs on frames resized to ``scale`` × the model's input size (None: the
    config's, which training chose on validation; 1: as trained); ``flips``: test-time flips
    averaged, 1, 2 (left-right) or 4 (and up-down) (None: the config's); each costs one more pass;
    ``precision``: ``fp32`` or ``bf16`` (None: the config's, i.e. what the model was trained with, except that a
    model trained in ``bf16`` runs in ``fp32`` on a CPU without bfloat16 arithmetic of its own) of the torch
    network; ``network``: runs the network instead of ``model`` (None: ``model`` in torch), a callable taking
    float32 (B, 3, h, w) normalised, padded frames to float32 (B, 1, h, w) logits, e.g. the live setting's
    :class:`~snaketrack.training.live.OnnxNetwork`; ``window``: segment each frame in a
    :class:`~snaketrack.training.window.Window` around the previous frame's mask (frames are then taken as a
    video's consecutive frames; :meth:`reset` before another video); ``region``: keep the robot probability
    only on each mask's robot (:func:`~snaketrack.training.window.robot_pieces`: specks of false robot
    farther than three body widths from it, or less than half as thick, are dropped);
    ``edges``: decide each mask's edge pixels by their colour (:func:`~snaketrack.mask_edges.unmix_edges`,
    then :func:`~snaketrack.mask_edges.snap_edges`, after the threshold; the probabilities are the network's);
    ``wait``: with a window and an engine that
    compiles each input size on its first use (OpenVINO, ≈ 0.1–1 s a size), whether a frame waits for its
    window's new size to compile (the same masks on every run: a file's choice) or is segmented in the
    smallest larger window already compiled while the size compiles in the background (no frame stalls,
    the masks depend on timing: a live source's choice).

    DeepLabV3+ predicts at 1/4 of its input and upsamples; a thin robot's
    edge can be placed more finely when the frame is enlarged (``scale``
    1.5 runs the network on 2.25× the pixels; costs in docs/benchmarks.md, "Segmenter").
    """

    def __init__(self, model: torch.nn.Module, config: SegmenterConfig, threshold: Optional[float] = None,
                 device: str = "cpu", scale: Optional[float] = None, flips: Optional[int] = None,
                 precision: Optional[str] = None,
                 network: Optional[Callable[[np.ndarray], np.ndarray]] = None, window: bool = False,
                 region: bool = True, edges: bool = True, wait: bool = True):
        scale = config.scale if scale is None else scale
        if not 0.1 <= float(scale) <= 8.0:
            raise InputError(f"--scale {scale}: expected a factor between 0.1 and 8")
        flips = config.flips if flips is None else flips
        if int(flips) not in FLIPS:
            raise InputError(f"--flips {flips}: expected one of {', '.join(map(str, FLIPS))}")
        self.flips = int(flips)
        if precision is None:  # as trained, but bfloat16 only where the CPU computes it (emulated, it is slower)
            precision = config.precision
            if precision == "bf16" and torch.device(device).type == "cpu" and not cpu_computes_bf16():
                precision = "fp32"
        self.precision = check_precision(precision)
        self.model = model.to(device).eval()
        self.config = config
        self.threshold = float(config.threshold if threshold is None else threshold)
        if not 0.0 < self.threshold < 1.0:
            raise InputError(f"--threshold {self.threshold:g}: expected a robot probability between 0 and 1")
        self.device = device
        self.scale = float(scale)
        h, w = config.input_size
        self.size = (max(int(round(h * self.scale)), 16), max(int(round(w * self.scale)), 16))
        self.net_size = padded_size(self.size)
        self.network = network
        self.window = Window(self.size) if window else None
        self.region = bool(region)
        self.edges = bool(edges)
        self.wait = bool(wait)

    @property
    def backend(self) -> str:
        """What runs the network: ``torch`` or the engine's name (``openvino``, ``onnxruntime``)."""
        return "torch" if self.network is None else str(getattr(self.network, "backend", type(self.network).__name__))

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        """Float32 logits (B, 1, h, w) of normalised, padded frames (B, 3, h, w)."""
        if self.network is not None:
            return torch.from_numpy(np.asarray(self.network(x.cpu().numpy()), dtype=np.float32)).to(x.device)
        return self.model(x).float()

    def predict_proba_batch(self, frames: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """Robot probability float32 (B, H, W) for RGB uint8 frames (B, H, W, 3) of one size; with a
        :attr:`window`, the frames are taken as consecutive frames of one video (module doc)."""
        frames = [np.asarray(f) for f in frames]
        if not frames:
            return np.zeros((0, 0, 0), np.float32)
        H, W = frames[0].shape[:2]
        for f in frames:
            if f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] != 3:
                raise InputError(f"frame: {f.dtype} {f.shape}; expected RGB uint8 (H, W, 3)")
            if f.shape[:2] != (H, W):
                raise InputError(f"frames differ in size: {f.shape[:2]} vs {(H, W)}; predict them separately")
        if self.window is not None:  # the window finds each frame's robot pieces as it follows them
            p, robots = [], []
            for f in frames:
                p.append(self.window.follow(f, self._proba_at, self.threshold, self._runs_now))
                robots.append(self.window.robot)
            p = np.stack(p)
        else:
            p = self._proba_at(frames, self.size)
            if self.size != (H, W):
                p = np.stack([cv2.resize(pi, (W, H), interpolation=cv2.INTER_LINEAR) for pi in p])
            robots = [robot_pieces(pi > self.threshold) for pi in p] if self.region else []
        if self.region:
            for pi, robot in zip(p, robots):
                pi[~robot] = 0.0
        return p

    def _proba_at(self, images: Sequence[np.ndarray], size: tuple[int, int]) -> np.ndarray:
        """Robot probability float32 (B, h, w) of RGB uint8 images (B, H', W', 3), each resized to
        ``size`` = (h, w), padded to a multiple of 16 and run through the network with the flips."""
        h, w = size
        x = np.stack([normalise(resize_to(f, (h, w)), self.config.mean, self.config.std) for f in images])
        x = torch.from_numpy(np.ascontiguousarray(x)).to(self.device)
        net_h, net_w = padded_size((h, w))
        pad = (0, net_w - w, 0, net_h - h)  # right and bottom
        with torch.inference_mode(), precision_context(self.precision, self.device):
            p = torch.zeros((x.shape[0], h, w), dtype=torch.float32, device=self.device)
            for dims in FLIP_DIMS[:self.flips]:  # flip the frame, pad, segment, crop, flip back
                xf = torch.flip(x, dims) if dims else x
                pf = torch.sigmoid(self._logits(torch.nn.functional.pad(xf, pad)))[:, 0, :h, :w]
                p += torch.flip(pf, [d - 1 for d in dims]) if dims else pf
            return (p / self.flips).cpu().numpy()

    def _runs_now(self, size: tuple[int, int]) -> bool:
        """Whether the window may run frames resized to ``size`` (h, w) now: always when :attr:`wait`, else
        when the network has that size compiled (:meth:`~snaketrack.training.live.OpenVinoNetwork.ready`,
        which starts compiling it); torch and ONNX Runtime run every size at once."""
        ready = getattr(self.network, "ready", None)
        return True if self.wait or ready is None else bool(ready((1, 3, *padded_size(size))))

    def reset(self) -> None:
        """Forget the previous frame (a new video follows); nothing to forget without a window."""
        if self.window is not None:
            self.window.reset()

    def predict_batch(self, frames: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """Masks bool (B, H, W) for RGB uint8 frames (B, H, W, 3)."""
        masks = self.predict_proba_batch(frames) > self.threshold
        if self.edges:
            frames = [np.asarray(f) for f in frames]
            masks = np.stack([snap_edges(f, unmix_edges(f, m)) for f, m in zip(frames, masks)])
        return masks

    def predict_proba(self, rgb: np.ndarray) -> np.ndarray:
        """Robot probability float32 (H, W) of one RGB uint8 frame (H, W, 3)."""
        return self.predict_proba_batch([rgb])[0]

    def predict(self, rgb: np.ndarray) -> np.ndarray:
        """Mask bool (H, W) of one RGB uint8 frame (H, W, 3)."""
        return self.predict_batch([rgb])[0]


def load_segmenter(path: str | os.PathLike, device: str = "cpu", threshold: Optional[float] = None,
                   scale: Optional[float] = None, flips: Optional[int] = None,
                   precision: Optional[str] = None, setting: str = "accurate",
                   threads: Optional[int] = None, engine: Optional[str] = None,
                   window: bool = True, region: bool = True, int8: bool = True,
                   edges: bool = True, wait: bool = True) -> Segmenter:
    """Load a model file written by ``snaketrack train`` as a :class:`Segmenter`.

    threshold: robot probability threshold; None takes the model file's
    (chosen on the validation split by training; 0.5 in older files);
    scale: inference size over the trained input size; None takes the model file's (chosen on
    validation by training, 1 in older files); flips: test-time flips (1, 2, 4); None takes the setting's
    (``accurate``: the model file's; ``live``: the model file's, at most :data:`~snaketrack.training.live.LIVE_FLIPS`,
    the left-right pair); precision: ``fp32`` or ``bf16`` of the torch network,
    None takes the model file's (``fp32`` in older files; ``fp32`` for a ``bf16`` model on a CPU without bfloat16
    arithmetic, :class:`Segmenter`).
    setting: ``accurate`` (torch) or ``live`` (an inference engine on the CPU, :mod:`snaketrack.training.live`;
    on another device, or when no engine can be used, torch); window: whether to follow the robot in a
    :class:`~snaketrack.training.window.Window`, the frames given being one video's in order (the default in
    both settings; False: each frame whole, for frames that are not one video's; :meth:`Segmenter.reset`
    before another video); region: keep only the robot's region of each mask, edges: decide its edge
    pixels by colour (:class:`Segmenter`);
    threads: the engine's threads (None: torch's); engine: ``openvino`` or ``onnxruntime`` for the live
    setting (None: the fastest installed); int8: the live setting runs the model file's int8 network when it
    carries one (:mod:`~snaketrack.training.quantize`; False: the float32 network); wait: whether a
    window's frame waits for a new input size to compile (:class:`Segmenter`)."""
    check_setting(setting)
    model, config, extra = load_model(path)
    if setting == "live" and flips is None:
        flips = min(int(config.flips), LIVE_FLIPS)
    seg = Segmenter(model, config, threshold=threshold, device=device, scale=scale, flips=flips,
                    precision=precision, window=bool(window), region=region, edges=edges, wait=wait)
    if setting == "live" and torch.device(device).type == "cpu":
        graph = extra.get(LIVE_INT8_FIELD, {}).get("graph") if int8 else None
        seg.network = live_network(path, model, config, seg.net_size, threads=threads, engine=engine, int8=graph)
    return seg
