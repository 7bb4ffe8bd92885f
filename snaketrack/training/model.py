"""DeepLabV3+ segmenter: build, save, load.

The network is segmentation-models-pytorch's ``DeepLabV3Plus`` with one
output channel (robot logit; background is its complement), built with
``encoder_weights=None`` — nothing is downloaded. A local weights file for
the encoder (a state dict of the encoder, e.g. torchvision ImageNet
weights saved by the user) may be given instead.

A model file is one ``torch.save`` dict: ``format``, ``version``,
``config`` (:class:`SegmenterConfig` as a dict: architecture, encoder,
input size, mean/std, classes, threshold, inference scale) and ``state_dict``, plus ``extra``
(training summary; ``extra["live_int8"]``: the live setting's int8 ONNX graph and its validation
measurement, :mod:`~snaketrack.training.quantize`). :func:`load_model` rebuilds from it alone.

DeepLabV3+ has output stride 16, so the network sees the input size
padded up to a multiple of 16 (:func:`padded_size`): 360×640 runs as
368×640, the padding cropped off again.

Its two bilinear upsamplings (stride 16 → 4 in the decoder, 4 → 1 in the
head) are half-pixel centred (``align_corners=False``), so the network is
translation-equivariant for shifts of 16 px and places a robot's edge
alike wherever it lies. smp builds them corner-aligned, which maps the
output to the features at a scale of ``(n-1)/(4n-1)`` instead of 1/4: the
edge's place then drifts with its position in the input, by 3 px across a
whole input whatever its size, so a network trained on 160 px crops
(robot near their centre) and run on 640 px frames shifts a robot near
the frame's side by up to 1.5 px. A model file that does not store
``align_corners`` loads corner-aligned, as it was trained.

>>> cfg = SegmenterConfig(encoder="resnet18", input_size=(36, 64))
>>> padded_size(cfg.input_size)
(48, 64)
"""
from __future__ import annotations

import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.io import atomic_write_bytes, parse_size

MODEL_FORMAT = "snaketrack-segmenter"
MODEL_VERSION = 1
LIVE_INT8_FIELD = "live_int8"  # the extra field holding the live setting's int8 graph and its measurement
OUTPUT_STRIDE = 16
ARCHITECTURES = ("DeepLabV3Plus", "Unet")
ENCODERS = ("resnet18", "resnet34", "mobilenet_v2", "efficientnet-b0")
FLIPS = (1, 2, 4)  # test-time flip counts: none, left-right, left-right and up-down
PRECISIONS = ("fp32", "bf16")  # the network's arithmetic (weights are stored in float32 either way)
AUTO_PRECISION = "auto"  # training's choice of the two by the CPU (:func:`resolve_precision`)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class SegmenterConfig:
    """Everything needed to rebuild and feed the network.

    encoder: smp encoder name; input_size: (height, width) the image is
    resized to [pixels]; mean/std: per-channel RGB normalisation of
    [0, 1] pixels; classes: class names, index 1 the robot; architecture:
    ``DeepLabV3Plus`` (the single-camera tracking paper's) or ``Unet`` (smp's, for comparison);
    threshold: robot probability above which a pixel is robot; scale:
    the network runs on frames resized to ``scale`` × ``input_size`` (1:
    as trained); flips: test-time flips averaged (1: none; 2: the frame
    and its mirror image; 4: also upside down, and both). Training picks all
    three on the validation split
    (:func:`~snaketrack.training.selection.select_inference`); a file
    without ``scale`` and ``flips`` loads with 1. precision:
    ``fp32``, or ``bf16`` (the forward pass under bfloat16 autocast,
    logits and loss in float32; :func:`precision_context`); training stores
    the one it trained with, and inference uses it unless told otherwise.
    align_corners: the bilinear upsamplings' corner alignment (module doc);
    False for new models, True for a file that does not store it.
    """

    encoder: str = "resnet18"
    input_size: tuple[int, int] = (360, 640)
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    classes: tuple[str, ...] = ("background", "robot")
    architecture: str = "DeepLabV3Plus"
    threshold: float = 0.5
    scale: float = 1.0
    flips: int = 1
    precision: str = "fp32"
    align_corners: bool = False

    def __post_init__(self) -> None:
        h, w = self.input_size
        if int(h) < 16 or int(w) < 16:
            raise InputError(f"--input-size {w}x{h}: expected at least 16x16 pixels")
        object.__setattr__(self, "input_size", (int(h), int(w)))
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        object.__setattr__(self, "classes", tuple(self.classes))
        if not 0.0 < float(self.threshold) < 1.0:
            raise InputError(f"threshold {self.threshold}: expected a probability in (0, 1)")
        object.__setattr__(self, "threshold", float(self.threshold))
        if not 0.1 <= float(self.scale) <= 8.0:
            raise InputError(f"scale {self.scale}: expected a factor between 0.1 and 8")
        object.__setattr__(self, "scale", float(self.scale))
        if int(self.flips) not in FLIPS:
            raise InputError(f"flips {self.flips}: expected one of {', '.join(map(str, FLIPS))}")
        object.__setattr__(self, "flips", int(self.flips))
        check_precision(self.precision)


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else :class:`InputError`."""
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return precision


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bfloat16 arithmetic of its own (AVX512-BF16 or AMX), where bfloat16 autocast runs
    faster than float32 (1.4–1.8× a resnet18 training step on two cores); elsewhere torch emulates it, slower
    than float32."""
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        probe = getattr(torch.cpu, name, None)
        try:
            if probe is not None and probe():
                return True
        except RuntimeError:
            pass
    return False


def resolve_precision(precision: str, device: str = "cpu") -> str:
    """``precision`` with ``auto`` decided: ``bf16`` on a CPU that computes it (:func:`cpu_computes_bf16`),
    ``fp32`` on other CPUs and other devices.

    >>> resolve_precision("fp32"), resolve_precision("bf16"), resolve_precision("auto", "cuda")
    ('fp32', 'bf16', 'fp32')
    """
    if precision != AUTO_PRECISION:
        return check_precision(precision)
    return "bf16" if torch.device(device).type == "cpu" and cpu_computes_bf16() else "fp32"


def precision_context(precision: str, device: str = "cpu"):
    """The autocast context of ``precision`` on ``device`` (a no-op for ``fp32``).

    ``bf16`` runs convolutions and matrix products in bfloat16: 1.7× faster
    training steps on this CPU, which has AVX512-BF16 (measured by
    ``snaketrack bench segmenter``); on a CPU without it autocast still
    works, only slower. Callers cast the network's output to float32
    before the sigmoid or the loss.
    """
    dev = torch.device(device).type
    return torch.autocast(dev, dtype=torch.bfloat16, enabled=check_precision(precision) == "bf16")


def parse_input_size(text: str, flag: str = "--input-size") -> tuple[int, int]:
    """A flag's ``"WIDTHxHEIGHT"`` → ``(height, width)`` [px], the order the network's tensors use.

    >>> parse_input_size("640x360")
    (360, 640)
    """
    w, h = parse_size(text, flag)
    return h, w


def padded_size(size: tuple[int, int]) -> tuple[int, int]:
    """(height, width) rounded up to a multiple of the output stride (16)."""
    return tuple(-(-int(s) // OUTPUT_STRIDE) * OUTPUT_STRIDE for s in size)  # type: ignore[return-value]


def available_encoders() -> list[str]:
    """Encoder names smp offers (any works with ``--encoder``; :data:`ENCODERS` are the tested ones)."""
    import segmentation_models_pytorch as smp  # deferred: the module imports without segmentation-models-pytorch

    return sorted(smp.encoders.get_encoder_names())


def build_model(config: SegmenterConfig, encoder_weights: Optional[str | os.PathLike] = None) -> torch.nn.Module:
    """A fresh DeepLabV3+ for ``config``; random encoder unless ``encoder_weights`` (a local file) is given."""
    import segmentation_models_pytorch as smp  # deferred: the module imports without segmentation-models-pytorch

    if config.architecture not in ARCHITECTURES:
        raise InputError(f"architecture {config.architecture!r}: expected one of {', '.join(ARCHITECTURES)}")
    names = smp.encoders.get_encoder_names()
    if config.encoder not in names and not config.encoder.startswith("tu-"):
        raise InputError(f"--encoder {config.encoder!r}: not an smp encoder; e.g. {', '.join(ENCODERS)}")
    arch = getattr(smp, config.architecture)
    model = arch(encoder_name=config.encoder, encoder_weights=None, in_channels=3, classes=1)
    for m in model.modules():
        if isinstance(m, torch.nn.Upsample) and m.mode == "bilinear":
            m.align_corners = bool(config.align_corners)
    if encoder_weights is not None:
        load_encoder_weights(model, encoder_weights, config.encoder)
    return model


def load_encoder_weights(model: torch.nn.Module, path: str | os.PathLike, encoder: str) -> None:
    """Load a local encoder state dict (keys with or without an ``encoder.`` prefix; a classifier head is ignored)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such encoder weights file (for --encoder {encoder})")
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise FileFormatError(f"{path}: not a readable torch state dict ({type(e).__name__})") from None
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    sd = {k[len("encoder."):] if k.startswith("encoder.") else k: v for k, v in sd.items()}
    sd = {k: v for k, v in sd.items() if not k.startswith(("fc.", "classifier."))}
    try:
        model.encoder.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        raise FileFormatError(f"{path}: does not match encoder {encoder} "
                              f"({str(e).splitlines()[0][:160]})") from None


def model_bytes(model: torch.nn.Module, config: SegmenterConfig, extra: Optional[dict[str, Any]] = None) -> bytes:
    """The model file's bytes (see module doc)."""
    buf = io.BytesIO()
    cfg = asdict(config)
    cfg["input_size"] = list(config.input_size)
    torch.save({"format": MODEL_FORMAT, "version": MODEL_VERSION, "config": cfg,
                "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                "extra": dict(extra or {})}, buf)
    return buf.getvalue()


def save_model(path: str | os.PathLike, model: torch.nn.Module, config: SegmenterConfig,
               extra: Optional[dict[str, Any]] = None) -> None:
    """Write a model file atomically."""
    atomic_write_bytes(path, model_bytes(model, config, extra))


def read_model_file(path: str | os.PathLike) -> dict[str, Any]:
    """The raw dict of a model file, checked for its format."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such segmenter model file")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        raise FileFormatError(f"{path}: not a segmenter model file (torch cannot read it); make one with "
                              "`snaketrack train`") from None
    if not isinstance(blob, dict) or blob.get("format") != MODEL_FORMAT:
        raise FileFormatError(f"{path}: not a snaketrack segmenter file (no format={MODEL_FORMAT!r}); "
                              "make one with `snaketrack train`")
    if int(blob.get("version", 0)) > MODEL_VERSION:
        raise FileFormatError(f"{path}: version {blob.get('version')}; this snaketrack reads up to {MODEL_VERSION}")
    return blob


def config_from_dict(d: dict[str, Any]) -> SegmenterConfig:
    """:class:`SegmenterConfig` from its stored dict (one without ``align_corners``:
    corner-aligned, as smp builds it)."""
    d = dict(d)
    d["input_size"] = tuple(d["input_size"])
    d.setdefault("align_corners", True)
    return SegmenterConfig(**{k: v for k, v in d.items() if k in SegmenterConfig.__dataclass_fields__})


def load_model(path: str | os.PathLike) -> tuple[torch.nn.Module, SegmenterConfig, dict[str, Any]]:
    """Rebuild a saved model: ``(model in eval mode, config, extra)``."""
    blob = read_model_file(path)
    config = config_from_dict(blob["config"])
    model = build_model(config)
    try:
        model.load_state_dict(blob["state_dict"])
    except RuntimeError as e:
        raise FileFormatError(f"{path}: weights do not match {config.encoder} {config.architecture} "
                              f"({str(e).splitlines()[0][:160]})") from None
    return model.eval(), config, dict(blob.get("extra", {}))
