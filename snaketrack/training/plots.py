"""Plots of a training run."""
from __future__ import annotations

import io
import os

from snaketrack.io import atomic_write_bytes


def plot_history(history: list[dict[str, float]], path: str | os.PathLike) -> None:
    """Loss (train, val) and validation IoU per epoch, as a PNG written atomically."""
    import matplotlib  # deferred: the module imports without matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: the module imports without matplotlib

    ep = [h["epoch"] for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    a1.plot(ep, [h["train_loss"] for h in history], "o-", label="train")
    a1.plot(ep, [h["val_loss"] for h in history], "s-", label="validation")
    a1.set_xlabel("epoch")
    a1.set_ylabel("loss")
    a1.legend()
    a2.plot(ep, [h["val_iou"] for h in history], "o-", color="C2")
    a2.set_xlabel("epoch")
    a2.set_ylabel("validation IoU")
    a2.set_ylim(0, 1)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
