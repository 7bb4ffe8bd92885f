"""Training losses and schedules against independent computations."""

import numpy as np
import pytest
import torch

from snaketrack.errors import InputError
from snaketrack.training.config import TrainConfig
from snaketrack.training.losses import lovasz_hinge, seg_loss
from snaketrack.training.schedule import lr_at


def _masks(seed=0, shape=(2, 1, 12, 16)):
    rng = np.random.default_rng(seed)
    t = (rng.random(shape) < 0.2).astype(np.float32)
    p = (rng.random(shape) < 0.25).astype(np.float32)
    return t, p


def test_soft_iou_and_dice_equal_set_formulas_on_saturated_logits():
    t, p = _masks()
    logits = torch.from_numpy(np.where(p > 0, 40.0, -40.0).astype(np.float32))
    target = torch.from_numpy(t)
    iou_ref, dice_ref = [], []
    for a, b in zip(p.astype(bool), t.astype(bool)):
        i, u = np.logical_and(a, b).sum(), np.logical_or(a, b).sum()
        iou_ref.append(1 - (i + 1) / (u + 1))
        dice_ref.append(1 - (2 * i + 1) / (a.sum() + b.sum() + 1))
    assert float(seg_loss(logits, target, "iou")) == pytest.approx(np.mean(iou_ref), abs=1e-6)
    assert float(seg_loss(logits, target, "dice")) == pytest.approx(np.mean(dice_ref), abs=1e-6)


def test_weighted_bce_matches_its_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(0, 2, (2, 1, 5, 7))
    t = (rng.random(x.shape) < 0.3).astype(float)
    s = 1 / (1 + np.exp(-x))
    ref = np.mean(-(4.0 * t * np.log(s) + (1 - t) * np.log(1 - s)))
    got = seg_loss(torch.from_numpy(x), torch.from_numpy(t), "bce", pos_weight=4.0)
    assert float(got) == pytest.approx(ref, rel=1e-9)
    both = seg_loss(torch.from_numpy(x), torch.from_numpy(t), "bce+iou", pos_weight=4.0)
    assert float(both) == pytest.approx(ref + float(seg_loss(torch.from_numpy(x), torch.from_numpy(t), "iou")))


def test_lovasz_hinge_is_the_jaccard_loss_of_the_wrong_pixels():
    # margin 1 on right pixels (zero hinge), logit 0 on the wrong set M (hinge 1):
    # the Lovász extension at this 0/1 error vector is the set function, |M| / |T ∪ M|.
    t, wrong = _masks(2)
    sign = 2 * t - 1
    logits = np.where(wrong > 0, 0.0, sign).astype(np.float64)
    ref = [w.sum() / np.logical_or(w > 0, tt > 0).sum() for w, tt in zip(wrong, t)]
    got = lovasz_hinge(torch.from_numpy(logits), torch.from_numpy(t.astype(np.float64)))
    assert float(got) == pytest.approx(np.mean(ref), abs=1e-12)


def test_lovasz_hinge_agrees_with_smp():
    import segmentation_models_pytorch as smp

    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.normal(0, 2, (3, 1, 9, 11)).astype(np.float32))
    t = torch.from_numpy((rng.random((3, 1, 9, 11)) < 0.3).astype(np.float32))
    ref = smp.losses.LovaszLoss(mode="binary", per_image=True)(x, t)
    assert float(lovasz_hinge(x, t)) == pytest.approx(float(ref), abs=1e-5)
    x, t = x.double().requires_grad_(True), t.double()
    torch.autograd.gradcheck(lambda z: lovasz_hinge(z, t), (x,))  # piecewise linear: fine away from ties


def test_schedules():
    step = TrainConfig(lr=1e-4)  # the single-camera tracking paper's: 1e-4, x0.1 from epoch 10
    assert lr_at(step, 9) == pytest.approx(1e-4) and lr_at(step, 10) == pytest.approx(1e-5)
    cos = TrainConfig(lr=2e-3, schedule="cosine")
    assert lr_at(cos, 0, 0.0) == 0.0 and lr_at(cos, 0, 0.03) == pytest.approx(2e-3)
    assert lr_at(cos, 0, 0.515) == pytest.approx(1e-3) and lr_at(cos, 0, 1.0) == pytest.approx(0, abs=1e-12)
    one = TrainConfig(lr=1e-3, schedule="onecycle")
    assert lr_at(one, 0, 0.0) == pytest.approx(1e-3 / 25) and lr_at(one, 0, 0.3) == pytest.approx(1e-3)
    f = np.linspace(0.3, 1, 50)
    assert np.all(np.diff([lr_at(one, 0, v) for v in f]) <= 0)
    with pytest.raises(InputError, match="--loss"):
        TrainConfig(loss="bce+focal")
    with pytest.raises(InputError, match="--schedule"):
        TrainConfig(schedule="poly")
