"""Learning-rate schedules of a training run.

``step`` (the paper's): ``lr`` times ``lr_gamma`` from epoch
``lr_step_epoch`` on. ``cosine``: a linear warm-up over the first 3 % of the
run, then a cosine to 0. ``onecycle``: a warm-up from ``lr / 25`` over the
first 30 %, then a cosine to 0. The cosine and one-cycle progress is the
larger of the step fraction and, in a time-limited run, the time fraction of
``time_limit_s``, so a time-limited run still ends annealed.

>>> from snaketrack.training.config import TrainConfig
>>> lr_at(TrainConfig(), 9), lr_at(TrainConfig(), 10)
(0.0001, 1e-05)
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from snaketrack.training.config import TrainConfig

SCHEDULES = ("step", "cosine", "onecycle")


def lr_at(cfg: TrainConfig, epoch: int, progress: float = 0.0) -> float:
    """Learning rate in ``epoch`` (step schedule) or at ``progress`` ∈ [0, 1] of the run (cosine, onecycle)."""
    if cfg.schedule == "step":
        return cfg.lr * (cfg.lr_gamma if epoch >= cfg.lr_step_epoch else 1.0)
    f = min(max(float(progress), 0.0), 1.0)
    warm = 0.03 if cfg.schedule == "cosine" else 0.3
    lo = 0.0 if cfg.schedule == "cosine" else 1.0 / 25.0
    if f < warm:
        return cfg.lr * (lo + (1 - lo) * (f / warm))
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * (f - warm) / (1 - warm)))
