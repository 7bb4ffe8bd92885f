"""Segmentation losses on the robot channel, and the per-image IoU used to score them.

The default loss is binary cross-entropy plus soft Dice (Dice keeps a thin
robot that covers a few percent of the image from being drowned by
background); soft IoU and the Lovász hinge are options (:func:`seg_loss`),
as is leaving out a thin band at the labels' edge (``ignore_edge``,
:func:`edge_band`). Logits and targets are (B, 1, H, W).
"""
from __future__ import annotations

import torch

from snaketrack.errors import InputError

LOSS_TERMS = ("bce", "dice", "iou", "lovasz")


def lovasz_hinge(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Lovász hinge (Berman et al. 2018) per image, averaged: a convex surrogate of 1 − IoU.

    logits, target: (B, 1, H, W), target in {0, 1}. For each image the hinge
    errors ``1 − logit·sign`` are sorted and weighted by the steps of the
    Jaccard loss along that order (the Lovász extension of 1 − IoU).
    """
    losses = []
    for lg, t in zip(logits.flatten(1), target.flatten(1)):
        errors = 1.0 - lg * (2.0 * t - 1.0)
        errors_sorted, perm = torch.sort(errors, descending=True)
        gt = t[perm]
        gts = gt.sum()
        inter = gts - gt.cumsum(0)
        union = gts + (1.0 - gt).cumsum(0)
        jac = 1.0 - inter / union
        grad = torch.cat([jac[:1], jac[1:] - jac[:-1]])
        losses.append(torch.dot(torch.relu(errors_sorted), grad))
    return torch.stack(losses).mean()


def edge_band(target: torch.Tensor, px: int) -> torch.Tensor:
    """1 where a pixel of the (B, 1, H, W) {0, 1} ``target`` is within ``px`` pixels (chessboard
    distance) of a pixel of the other class, else 0: the label's edge, ``px`` pixels each side.

    >>> t = torch.zeros(1, 1, 1, 6); t[..., 2:4] = 1
    >>> edge_band(t, 1)[0, 0, 0].tolist()
    [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    """
    if px <= 0:
        return torch.zeros_like(target)
    k = 2 * int(px) + 1
    dil = torch.nn.functional.max_pool2d(target, k, stride=1, padding=int(px))
    ero = -torch.nn.functional.max_pool2d(-target, k, stride=1, padding=int(px))
    return dil - ero


def seg_loss(logits: torch.Tensor, target: torch.Tensor, loss: str = "bce+dice",
             pos_weight: float = 1.0, ignore_edge: int = 0) -> torch.Tensor:
    """Sum of the terms named in ``loss`` on (B, 1, H, W) logits and {0, 1} targets.

    ``bce``: binary cross-entropy with logits, robot pixels weighted by
    ``pos_weight``; ``dice``: 1 − soft Dice (+1 smoothing) per image;
    ``iou``: 1 − soft IoU, (I + 1) / (ΣP + ΣT − I + 1) per image;
    ``lovasz``: :func:`lovasz_hinge`. Per-image terms are averaged.
    ``ignore_edge`` > 0 leaves the pixels of :func:`edge_band` out of every
    term (BCE is then the mean over the pixels kept).
    """
    total = logits.new_zeros(())
    p = torch.sigmoid(logits) if ("dice" in loss or "iou" in loss) else None
    w = None if ignore_edge <= 0 else 1.0 - edge_band(target, ignore_edge)
    for term in loss.split("+"):
        if term == "bce":
            pw = None if pos_weight == 1.0 else logits.new_tensor(float(pos_weight))
            if w is None:
                total = total + torch.nn.functional.binary_cross_entropy_with_logits(logits, target, pos_weight=pw)
            else:
                b = torch.nn.functional.binary_cross_entropy_with_logits(logits, target, weight=w, pos_weight=pw,
                                                                         reduction="sum")
                total = total + b / w.sum().clamp(min=1.0)
        elif term in ("dice", "iou"):
            pp, tt = (p, target) if w is None else (p * w, target * w)
            inter = (pp * tt).sum(dim=(1, 2, 3))
            sp, st = pp.sum(dim=(1, 2, 3)), tt.sum(dim=(1, 2, 3))
            if term == "dice":
                total = total + (1 - (2 * inter + 1) / (sp + st + 1)).mean()
            else:
                total = total + (1 - (inter + 1) / (sp + st - inter + 1)).mean()
        elif term == "lovasz":
            if w is not None:
                raise InputError("the Lovász hinge cannot leave edge pixels out (ignore_edge)")
            total = total + lovasz_hinge(logits, target)
        else:
            raise InputError(f"loss term {term!r}: expected one of {', '.join(LOSS_TERMS)}")
    return total


def batch_iou(logits: torch.Tensor, target: torch.Tensor, size: tuple[int, int]) -> list[float]:
    """Per-image IoU of ``logits > 0`` vs ``target > 0.5`` inside the unpadded (height, width)."""
    h, w = size
    p = (logits[:, 0, :h, :w] > 0)
    t = (target[:, 0, :h, :w] > 0.5)
    inter = (p & t).sum(dim=(1, 2)).double()
    union = (p | t).sum(dim=(1, 2)).double()
    return torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union)).tolist()
