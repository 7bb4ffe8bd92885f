"""Settings of a segmenter training run (:class:`TrainConfig`), checked at construction."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from snaketrack.errors import InputError
from snaketrack.training.losses import LOSS_TERMS
from snaketrack.training.model import AUTO_PRECISION, FLIPS, check_precision
from snaketrack.training.schedule import SCHEDULES

SCALES = (1.0, 1.25, 1.5)


@dataclass(frozen=True)
class TrainConfig:
    """Settings of a training run; the defaults of the schedule are the paper's (module doc of
    :mod:`~snaketrack.training.train`).

    encoder: the network's encoder; default ``resnet18``.
    input_size: network input (height, width) [px]; default (360, 640).
    epochs: number of epochs; default 20.
    batch_size: samples a batch; default 8.
    lr: initial learning rate; default 1e-4.
    lr_step_epoch: epoch (counted from 0) from which the ``step`` schedule uses lr × lr_gamma; default 10.
    lr_gamma: the ``step`` schedule's factor; default 0.1.
    val_fraction: share of blocks held out for validation (:mod:`~snaketrack.training.data`); default 0.15.
    block: consecutive frames a held-out block [frames]; default 20.
    max_steps_per_epoch: cap on batches an epoch (None: all); default None.
    crop_size: training crops (height, width) [px] at the input resolution (None: whole frames); default None.
    max_val_frames: cap on validation frames, evenly spaced (None: all); default None.
    time_limit_s: the run's time, final choice included [s] (None: no limit); default None.
    encoder_weights: a local encoder weights file (None: random initialisation); default None.
    augment: augment training samples (:func:`~snaketrack.training.data.augment`); default True.
    threads: torch and OpenCV CPU threads (None: their defaults; 1 is fastest on a shared machine); default None.
    seed: seeds shuffling, augmentation and initialisation; default 0.
    loss: terms of :data:`~snaketrack.training.losses.LOSS_TERMS` joined by ``+``; default ``bce+dice``.
    pos_weight: BCE weight of robot pixels; default 1.
    schedule: ``step``, ``cosine`` or ``onecycle`` (:mod:`~snaketrack.training.schedule`); default ``step``.
    p_robot: share of training crops centred near the robot; default 0.7.
    architecture: ``DeepLabV3Plus`` or ``Unet``; default ``DeepLabV3Plus``.
    pick_threshold: choose the probability threshold on the validation split (False: 0.5); default True.
    scales: inference scales (× input size) the final choice tries; default (1, 1.25, 1.5).
    flips: test-time flip counts (1, 2, 4) the final choice tries at the chosen scale; default (1,).
    select_last: let the last epoch compete with the best one in the final choice; default True.
    tie_tolerance: validation IoU difference counted as a tie (cheaper option wins); default 0.002.
    ignore_edge: pixels within this chessboard distance of the label's edge left out of the loss [px]; default 0.
    ground_colour: probability of recolouring the ground, away from the robot, in a training sample; default 0.
    zoom: (low, high) of the log-uniform training zoom; default (0.7, 1.4).
    rotate_deg: training rotations are drawn from ± this [deg]; default 0.
    shadow: probability of a synthetic cast shadow beside the robot in a training sample; default 0.
    synthetic_ground: probability that a training sample's robot is pasted onto a procedural ground
        (:func:`~snaketrack.training.grounds.paste_on_ground`); default 0.
    average_from: fraction of the run from which the weights are averaged (None: no averaging); default None.
    bn_batches: training batches over which the average's batch-norm statistics are recomputed; default 32.
    precision: ``fp32``, ``bf16`` (autocast forward passes) or ``auto`` (``bf16`` on a CPU that computes it,
        :func:`~snaketrack.training.model.resolve_precision`), decided when training starts (in a data-parallel
        run by rank 0's CPU, for every worker) and stored in the model file; default ``fp32``.
    live_int8: at the end, quantize the network to int8 for the ``live`` setting, kept in the model file when
        it loses at most 0.02 validation IoU (:mod:`~snaketrack.training.quantize`); default False.
    """

    encoder: str = "resnet18"
    input_size: tuple[int, int] = (360, 640)
    epochs: int = 20
    batch_size: int = 8
    lr: float = 1e-4
    lr_step_epoch: int = 10
    lr_gamma: float = 0.1
    val_fraction: float = 0.15
    block: int = 20
    max_steps_per_epoch: Optional[int] = None
    crop_size: Optional[tuple[int, int]] = None
    max_val_frames: Optional[int] = None
    time_limit_s: Optional[float] = None
    encoder_weights: Optional[str] = None
    augment: bool = True
    threads: Optional[int] = None
    seed: int = 0
    loss: str = "bce+dice"
    pos_weight: float = 1.0
    schedule: str = "step"
    p_robot: float = 0.7
    architecture: str = "DeepLabV3Plus"
    pick_threshold: bool = True
    scales: tuple[float, ...] = SCALES
    flips: tuple[int, ...] = (1,)
    select_last: bool = True
    tie_tolerance: float = 0.002
    ignore_edge: int = 0
    ground_colour: float = 0.0
    zoom: tuple[float, float] = (0.7, 1.4)
    rotate_deg: float = 0.0
    shadow: float = 0.0
    synthetic_ground: float = 0.0
    average_from: Optional[float] = None
    bn_batches: int = 32
    precision: str = "fp32"
    live_int8: bool = False

    def __post_init__(self) -> None:
        terms = str(self.loss).split("+")
        if not terms or any(t not in LOSS_TERMS for t in terms):
            raise InputError(f"--loss {self.loss!r}: expected terms from {', '.join(LOSS_TERMS)} joined by '+'")
        if self.schedule not in SCHEDULES:
            raise InputError(f"--schedule {self.schedule!r}: expected one of {', '.join(SCHEDULES)}")
        if not 0.0 <= float(self.p_robot) <= 1.0:
            raise InputError(f"--p-robot {self.p_robot}: expected a fraction in [0, 1]")
        if not self.pos_weight > 0:
            raise InputError(f"--pos-weight {self.pos_weight}: expected a positive weight")
        for name in ("epochs", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"--{name.replace('_', '-')} {getattr(self, name)}: expected a positive integer")
        if not self.lr > 0:
            raise InputError(f"--lr {self.lr}: expected a positive learning rate")
        scales = tuple(float(v) for v in (self.scales if isinstance(self.scales, (tuple, list)) else [self.scales]))
        if not scales or any(not 0.1 <= v <= 8.0 for v in scales):
            raise InputError(f"--scales {self.scales}: expected factors between 0.1 and 8")
        object.__setattr__(self, "scales", scales)
        flips = tuple(int(v) for v in (self.flips if isinstance(self.flips, (tuple, list)) else [self.flips]))
        if any(v not in FLIPS for v in flips):
            raise InputError(f"--flips {self.flips}: expected counts from {', '.join(map(str, FLIPS))}")
        object.__setattr__(self, "flips", tuple(sorted(set(flips) | {1})))
        if not self.tie_tolerance >= 0:
            raise InputError(f"--tie-tolerance {self.tie_tolerance}: expected a non-negative IoU difference")
        if int(self.ignore_edge) < 0 or int(self.ignore_edge) != self.ignore_edge:
            raise InputError(f"--ignore-edge {self.ignore_edge}: expected a non-negative number of pixels")
        if int(self.ignore_edge) > 0 and "lovasz" in terms:
            raise InputError("--ignore-edge with --loss lovasz: the Lovász hinge cannot leave pixels out")
        if not 0.0 <= float(self.ground_colour) <= 1.0:
            raise InputError(f"--ground-colour {self.ground_colour}: expected a probability in [0, 1]")
        zoom = tuple(float(v) for v in self.zoom)
        if len(zoom) != 2 or not 0.05 <= zoom[0] <= zoom[1] <= 20.0:
            raise InputError(f"--zoom {','.join(f'{v:g}' for v in zoom)}: expected LOW,HIGH with "
                             "0.05 <= LOW <= HIGH <= 20")
        object.__setattr__(self, "zoom", zoom)
        if not 0.0 <= float(self.rotate_deg) <= 180.0:
            raise InputError(f"--rotate {self.rotate_deg}: expected degrees in [0, 180]")
        if not 0.0 <= float(self.shadow) <= 1.0:
            raise InputError(f"--shadow {self.shadow}: expected a probability in [0, 1]")
        if not 0.0 <= float(self.synthetic_ground) <= 1.0:
            raise InputError(f"--synthetic-ground {self.synthetic_ground}: expected a probability in [0, 1]")
        if self.average_from is not None and not 0.0 <= float(self.average_from) < 1.0:
            raise InputError(f"--average-from {self.average_from}: expected a fraction of the run in [0, 1)")
        if self.time_limit_s is not None and not float(self.time_limit_s) > 0:
            raise InputError(f"--minutes {float(self.time_limit_s) / 60:g}: expected a positive number of minutes")
        if not 0.0 <= float(self.val_fraction) < 1.0:
            raise InputError(f"--val-fraction {self.val_fraction}: expected a fraction in [0, 1)")
        if int(self.bn_batches) < 1:
            raise InputError(f"--bn-batches {self.bn_batches}: expected a positive number of batches")
        if self.precision != AUTO_PRECISION:
            check_precision(self.precision)


#: Named starting points for :func:`recipe_config`. ``cpu``, the default of ``snaketrack train``: the
#: recipe measured on a 2-core CPU from random weights (resnet18, 160×160 crops centred near the robot 90 % of
#: the time, zoom 0.4–2 and rotations within ±30°, half the samples' robots pasted onto synthetic grounds, Adam
#: 2e-3 annealed by a cosine schedule over a 20-minute budget, checkpoint, scale, flips and threshold chosen on
#: validation, the live setting's int8 network made and kept when it segments the validation frames as
#: well, bfloat16 forward passes on a CPU that computes them; docs/segmenter-training.md).
#: ``paper``: the single-camera tracking paper's settings (whole frames, lr 1e-4 ×0.1 at epoch 10, 20 epochs).
RECIPES: dict[str, dict[str, Any]] = {
    "cpu": dict(crop_size=(160, 160), lr=2e-3, schedule="cosine", p_robot=0.9, epochs=200, max_val_frames=16,
                zoom=(0.4, 2.0), rotate_deg=30.0, flips=(1, 4), synthetic_ground=0.5, time_limit_s=20 * 60.0,
                live_int8=True, precision=AUTO_PRECISION),
    "paper": {},
}


def recipe_config(recipe: str = "cpu", **overrides: Any) -> TrainConfig:
    """A :class:`TrainConfig` from the named recipe (:data:`RECIPES`), with ``overrides`` on top.

    >>> recipe_config().lr, recipe_config(lr=1e-3).lr, recipe_config("paper").crop_size
    (0.002, 0.001, None)
    """
    if recipe not in RECIPES:
        raise InputError(f"--recipe {recipe!r}: expected one of {', '.join(RECIPES)}")
    return TrainConfig(**{**RECIPES[recipe], **overrides})


def config_dict(config: TrainConfig) -> dict[str, Any]:
    """``config`` as plain JSON values, as stored in checkpoints and model files."""
    d = asdict(config)
    d["input_size"] = list(config.input_size)
    d["crop_size"] = None if config.crop_size is None else list(config.crop_size)
    return d
