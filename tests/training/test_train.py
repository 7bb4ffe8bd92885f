"""Short training runs on a toy video: IoU rises, resume equals an uninterrupted run, weight averaging."""
import csv
import itertools

import numpy as np
import pytest
import torch

import snaketrack.training.selection as selection_module
import snaketrack.training.train as train_module
from snaketrack.errors import InputError
from snaketrack.training.config import TrainConfig, recipe_config
from snaketrack.training.data import SegmentationData
from snaketrack.training.model import SegmenterConfig, build_model, load_model
from snaketrack.training.train import evaluate_loss_iou, side_paths, train

CFG = dict(encoder="resnet18", input_size=(96, 128), crop_size=(64, 64), batch_size=4, lr=1e-3,
           max_steps_per_epoch=6, block=4, val_fraction=0.25, max_val_frames=6, threads=1, seed=0)


def test_validation_iou_rises(tmp_path, toy_root):
    cfg = TrainConfig(epochs=3, lr_step_epoch=10, **CFG)
    torch.manual_seed(cfg.seed)  # the same initial weights train() starts from
    model0 = build_model(SegmenterConfig(encoder=cfg.encoder, input_size=cfg.input_size))
    val = SegmentationData([toy_root], cfg.input_size, "val", cfg.val_fraction, cfg.block, cfg.seed,
                           max_frames=cfg.max_val_frames)
    _, iou0 = evaluate_loss_iou(model0, val, 4, cfg.input_size)
    res = train([toy_root], tmp_path / "m.pt", cfg, progress=False)
    assert res.epochs_done == 3
    assert res.best_val_iou > iou0 + 0.2, (iou0, [h["val_iou"] for h in res.history])
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    model, config, extra = load_model(tmp_path / "m.pt")  # the saved model is the one chosen on validation
    assert extra["best_epoch_val_iou"] == pytest.approx(res.best_val_iou)
    assert extra["epoch"] == res.selection["epoch"] and config.scale == res.selection["scale"]
    assert extra["val_iou"] >= res.best_val_iou - 0.05   # the final choice re-scores at the frames' own size
    paths = side_paths(tmp_path / "m.pt")
    assert paths["plot"].stat().st_size > 1000
    with open(paths["log"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]


def test_bf16_training_is_stored(tmp_path, toy_root):
    """Two steps under bfloat16 autocast: a finite loss, and the model file says bf16, so segment,
    eval-seg and track run it as trained (that it learns is the slow test below)."""
    cfg = TrainConfig(epochs=1, lr_step_epoch=10, precision="bf16", scales=(1.0,), flips=(1,),
                      **dict(CFG, max_steps_per_epoch=2, max_val_frames=2))
    res = train([toy_root], tmp_path / "b.pt", cfg, progress=False)
    assert np.isfinite(res.history[0]["train_loss"]) and np.isfinite(res.history[0]["val_iou"])
    _, config, extra = load_model(tmp_path / "b.pt")
    assert config.precision == "bf16" and extra["train"]["precision"] == "bf16"
    with pytest.raises(InputError, match="--precision"):
        TrainConfig(precision="fp16")


@pytest.mark.parametrize("native", [True, False])
def test_auto_precision_is_bf16_where_the_cpu_computes_it(tmp_path, toy_root, monkeypatch, native):
    """``auto`` (the cpu recipe's) is decided when training starts, by the CPU, and the model file stores the
    decision; the forward passes ran under it (autocast on or off)."""
    import snaketrack.training.model as model_module

    assert recipe_config().precision == "auto" and recipe_config("paper").precision == "fp32"
    monkeypatch.setattr(model_module, "cpu_computes_bf16", lambda: native)
    seen = []
    context = train_module.precision_context
    monkeypatch.setattr(train_module, "precision_context", lambda p, d="cpu": seen.append(p) or context(p, d))
    cfg = TrainConfig(epochs=1, lr_step_epoch=10, precision="auto", scales=(1.0,), flips=(1,),
                      **dict(CFG, max_steps_per_epoch=1, max_val_frames=2))
    train([toy_root], tmp_path / "a.pt", cfg, progress=False)
    want = "bf16" if native else "fp32"
    _, config, extra = load_model(tmp_path / "a.pt")
    assert config.precision == want and extra["train"]["precision"] == want
    assert seen and set(seen) == {want}


@pytest.mark.slow  # bfloat16 is emulated on a CPU without it: about 2.5 minutes on two cores without AVX-512
def test_bf16_training_learns_and_is_stored(tmp_path, toy_root):
    """The same short run as above under bfloat16 autocast: validation IoU rises as much, and the
    model file says bf16, so segment, eval-seg and track run it as trained."""
    cfg = TrainConfig(epochs=3, lr_step_epoch=10, precision="bf16", **CFG)
    torch.manual_seed(cfg.seed)
    model0 = build_model(SegmenterConfig(encoder=cfg.encoder, input_size=cfg.input_size))
    val = SegmentationData([toy_root], cfg.input_size, "val", cfg.val_fraction, cfg.block, cfg.seed,
                           max_frames=cfg.max_val_frames)
    _, iou0 = evaluate_loss_iou(model0, val, 4, cfg.input_size)
    res = train([toy_root], tmp_path / "b.pt", cfg, progress=False)
    assert res.best_val_iou > iou0 + 0.2, (iou0, [h["val_iou"] for h in res.history])
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    _, config, extra = load_model(tmp_path / "b.pt")
    assert config.precision == "bf16" and extra["train"]["precision"] == "bf16"
    with pytest.raises(InputError, match="--precision"):
        TrainConfig(precision="fp16")


def _reference_and_resumed(tmp_path, toy_root, cfg, monkeypatch, module, where: str):
    """An uninterrupted run (ref.pt) and a run (run.pt) interrupted by Ctrl-C when ``module`` calls
    ``where``, then run again to its end: (reference result, resumed result)."""
    ref = train([toy_root], tmp_path / "ref.pt", cfg, progress=False)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, where, interrupt)
    with pytest.raises(KeyboardInterrupt):
        train([toy_root], tmp_path / "run.pt", cfg, progress=False)
    monkeypatch.undo()
    return ref, train([toy_root], tmp_path / "run.pt", cfg, progress=False)


@pytest.mark.parametrize("schedule,average_from", [("step", None), ("cosine", None), ("cosine", 0.0)])
def test_resume_continues_to_the_same_weights(tmp_path, toy_root, schedule, average_from, monkeypatch):
    full = TrainConfig(epochs=2, lr_step_epoch=1, schedule=schedule, average_from=average_from,
                       **dict(CFG, max_steps_per_epoch=2))
    # plot_history is called right after epoch 1's checkpoint is written
    ref, res = _reference_and_resumed(tmp_path, toy_root, full, monkeypatch, train_module, "plot_history")
    assert res.epochs_done == 2
    assert [h["val_iou"] for h in res.history] == pytest.approx([h["val_iou"] for h in ref.history])
    ck_a = torch.load(side_paths(tmp_path / "run.pt")["last"], weights_only=False)
    ck_b = torch.load(side_paths(tmp_path / "ref.pt")["last"], weights_only=False)
    for part in ("model", "avg") if average_from is not None else ("model",):
        a, b = ck_a[part], ck_b[part]
        for k in a:
            assert torch.allclose(a[k].float(), b[k].float(), atol=1e-6), (part, k)
    if average_from is not None:
        assert int(ck_a["avg"]["n_averaged"]) == 4  # both epochs' steps, across the interruption
    with open(side_paths(tmp_path / "run.pt")["log"], newline="") as f:
        assert [int(r["epoch"]) for r in csv.DictReader(f)] == [1, 2]


def test_weight_average_is_the_final_model_with_its_own_batch_norm(tmp_path, toy_root, monkeypatch):
    cfg = TrainConfig(epochs=2, average_from=0.0, bn_batches=3, **dict(CFG, max_steps_per_epoch=3))
    seen = []  # the trained weights at every averaging step, recorded independently of AveragedModel
    update = torch.optim.swa_utils.AveragedModel.update_parameters

    def record(self, model):
        seen.append(model.state_dict()["encoder.conv1.weight"].detach().clone())
        return update(self, model)

    monkeypatch.setattr(torch.optim.swa_utils.AveragedModel, "update_parameters", record)
    res = train([toy_root], tmp_path / "m.pt", cfg, progress=False)
    model, config, extra = load_model(tmp_path / "m.pt")
    assert extra["checkpoint"] == "avg" and res.selection["n_averaged"] == len(seen) == 6
    assert [c["name"] for c in res.selection["candidates"]] == ["avg"]
    sd = model.state_dict()
    assert torch.allclose(sd["encoder.conv1.weight"], torch.stack(seen).mean(0), atol=1e-6)
    last = torch.load(side_paths(tmp_path / "m.pt")["last"], weights_only=False)["model"]
    assert not torch.allclose(sd["encoder.conv1.weight"], last["encoder.conv1.weight"])
    # first batch norm: running mean = mean over the recomputation's batches of each batch's channel means
    ds = SegmentationData([toy_root], cfg.input_size, "train", cfg.val_fraction, cfg.block, cfg.seed,
                          augment_train=True, crop_size=cfg.crop_size, p_robot=cfg.p_robot, zoom=cfg.zoom)
    ds.set_epoch(res.epochs_done)
    loader = torch.utils.data.DataLoader(ds, batch_size=cfg.batch_size, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(cfg.seed * 100003 + 99991))
    means = []
    with torch.no_grad():
        for x, _ in itertools.islice(loader, cfg.bn_batches):
            means.append(model.encoder.conv1(x).mean(dim=(0, 2, 3)))
    assert torch.allclose(sd["encoder.bn1.running_mean"], torch.stack(means).mean(0), atol=1e-5)
    assert not torch.allclose(sd["encoder.bn1.running_mean"], last["encoder.bn1.running_mean"], atol=1e-4)


def test_average_from_outside_the_run_is_refused():
    from snaketrack.errors import InputError

    with pytest.raises(InputError, match="--average-from"):
        TrainConfig(average_from=1.0)


@pytest.mark.parametrize("kw, flag", [({"time_limit_s": -60.0}, "--minutes -1"), ({"time_limit_s": 0.0}, "--minutes 0"),
                                      ({"val_fraction": 1.5}, "--val-fraction 1.5"), ({"zoom": (2.0,)}, "--zoom 2:")])
def test_a_budget_a_split_or_a_zoom_out_of_range_is_refused_by_its_flag(kw, flag):
    from snaketrack.errors import InputError

    with pytest.raises(InputError, match=flag):
        TrainConfig(**kw)


def test_an_averaging_run_interrupted_in_its_final_choice_still_ends_with_the_average(tmp_path, toy_root,
                                                                                        monkeypatch):
    cfg = TrainConfig(epochs=2, average_from=0.0, bn_batches=2, **dict(CFG, max_steps_per_epoch=2))
    # select_inference runs after the last epoch's checkpoint, before the choice is written
    ref, res = _reference_and_resumed(tmp_path, toy_root, cfg, monkeypatch, selection_module, "select_inference")
    _, _, extra = load_model(tmp_path / "run.pt")
    assert extra["checkpoint"] == "avg" and res.selection["n_averaged"] == ref.selection["n_averaged"] == 4
    a, _, _ = load_model(tmp_path / "run.pt")
    b, _, _ = load_model(tmp_path / "ref.pt")
    for k, v in a.state_dict().items():
        assert torch.allclose(v.float(), b.state_dict()[k].float(), atol=1e-6), k
