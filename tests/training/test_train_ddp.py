"""Data-parallel training: two workers train an epoch whose model loads and segments; their step's
gradient is the single-process gradient of the same batch; bad settings and crashed workers end in one line."""
import json
import os
import time

import pytest
import torch

from snaketrack.cli import main
from snaketrack.datasets.layout import Dataset
from snaketrack.training.config import TrainConfig
from snaketrack.training.data import SegmentationData
from snaketrack.training.distributed import WorkerError, Workers, data_parallel, launch
from snaketrack.training.losses import seg_loss
from snaketrack.training.model import SegmenterConfig, build_model, load_model
from snaketrack.training.segmenter import load_segmenter
from snaketrack.training.train import _train_loader, decide_precision

CFG = TrainConfig(encoder="resnet18", input_size=(96, 128), crop_size=(64, 64), batch_size=4, block=4,
                  val_fraction=0.25, augment=False, threads=1, seed=3)


def test_two_workers_train_an_epoch_and_the_model_loads_and_segments(tmp_path, toy_root, capsys):
    out = tmp_path / "m.pt"  # without the int8 network (tests/training/test_quantize.py): a third less time
    status = main(["train", str(toy_root), "--workers", "2", "--input-size", "128x96", "--crop-size", "64x64",
                   "--batch-size", "4", "--epochs", "1", "--threads", "2", "--scales", "1", "--max-val-frames", "4",
                   "--no-live-int8", "--out", str(out), "--json"])
    assert status == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["epochs"] == 1 and summary["chosen_epoch"] == 1
    model, config, extra = load_model(out)  # the plain module, as a single process saves it
    plain = build_model(SegmenterConfig(encoder="resnet18", input_size=(96, 128)))
    assert list(model.state_dict()) == list(plain.state_dict())
    assert {type(m) for m in model.modules()} == {type(m) for m in plain.modules()}
    assert extra["train"]["batch_size"] == 4 and config.input_size == (96, 128)
    frame = Dataset(toy_root).frame(0)
    mask = load_segmenter(out).predict(frame)
    assert mask.shape == frame.shape[:2] and mask.dtype == bool


def _step_gradients(ctx: Workers, root: str, cfg: TrainConfig) -> dict[str, torch.Tensor]:
    """One training step's gradients (and a batch norm's running mean) on the first batch of epoch 0,
    in float64: in float32 the untrained network's small-batch batch norms amplify rounding to ~1e-3
    of the gradient, which would hide a real difference of that size."""
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    model = build_model(SegmenterConfig(encoder=cfg.encoder, input_size=cfg.input_size)).double()
    for m in model.modules():  # dropout draws differ between processes by design; this compares the rest
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model, net = data_parallel(model, ctx)
    ds = SegmentationData([root], cfg.input_size, "train", cfg.val_fraction, cfg.block, cfg.seed,
                          augment_train=False, crop_size=cfg.crop_size)
    x, y = (t.double() for t in next(iter(_train_loader(ds, cfg, 0, ctx))))
    assert len(x) == cfg.batch_size // ctx.world_size
    net.train()
    seg_loss(net(x), y).backward()
    out = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    out["running_mean"] = model.encoder.bn1.running_mean.clone()
    return out


def test_two_workers_step_with_the_single_process_gradient_of_the_same_batch(toy_root):
    single = _step_gradients(Workers(), str(toy_root), CFG)
    ranks = launch(_step_gradients, (str(toy_root), CFG), workers=2)
    assert len(ranks) == 2
    scale = max(float(g.abs().max()) for g in single.values())
    for k, g in single.items():
        for r, grads in enumerate(ranks):
            assert torch.allclose(grads[k], g, rtol=0, atol=1e-10 * scale), (r, k, float((grads[k] - g).abs().max()))
    # not vacuous: a worker's half of the batch alone gives another gradient
    half = _step_gradients(Workers(), str(toy_root), TrainConfig(**{**CFG.__dict__, "batch_size": 2}))
    assert not torch.allclose(half["encoder.conv1.weight"], single["encoder.conv1.weight"], atol=1e-3 * scale)


def _precision_on_mixed_cpus(ctx: Workers) -> tuple[str, str, str]:
    import snaketrack.training.model as model

    model.cpu_computes_bf16 = lambda: ctx.rank == 0  # rank 0 on a CPU with bfloat16 arithmetic, rank 1 without
    return model.resolve_precision("auto", ctx.device), decide_precision("auto", ctx), decide_precision("fp32", ctx)


def test_auto_precision_is_rank_0s_on_every_worker():
    """A run across CPUs of two kinds computes in one precision: rank 0's decision of ``auto``."""
    ranks = launch(_precision_on_mixed_cpus, (), workers=2)
    assert ranks[0] == ("bf16", "bf16", "fp32")
    assert ranks[1] == ("fp32", "bf16", "fp32")  # its own CPU alone would have said fp32


@pytest.mark.parametrize("flags,needle", [
    (["--workers", "0"], "--workers 0"),
    (["--workers", "3", "--batch-size", "4"], "--batch-size 4 over 3 workers"),
    (["--workers", "2", "--nnodes", "2"], "--address"),
    (["--workers", "2", "--nnodes", "2", "--address", "nohost", "--node-rank", "0"], "--address 'nohost'"),
    (["--workers", "2", "--nnodes", "2", "--address", "h:29500", "--node-rank", "2"], "--node-rank 2"),
])
def test_bad_worker_settings_give_one_line_and_exit_2(tmp_path, toy_root, capsys, flags, needle):
    assert main(["train", str(toy_root), "--out", str(tmp_path / "m.pt"), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not os.listdir(tmp_path)


def _die_on_rank_1(ctx: Workers) -> None:
    if ctx.rank == 1:
        os._exit(3)
    ctx.barrier()  # rank 0 would wait here for ever without the launcher


def test_a_crashed_worker_ends_the_run_in_one_line(toy_root):
    t0 = time.perf_counter()
    with pytest.raises(WorkerError) as e:
        launch(_die_on_rank_1, (), workers=2)
    assert "worker 1 failed" in str(e.value) and "\n" not in str(e.value)
    assert time.perf_counter() - t0 < 60


def test_the_worker_that_died_is_named_not_the_one_that_lost_it():
    from types import SimpleNamespace

    from snaketrack.training.distributed import _root_failure

    def failure(message, timestamp):
        return SimpleNamespace(message=message, timestamp=timestamp)

    lost = {"message": "RuntimeError: [pair.cc:561] Connection closed by peer [127.0.0.1]:29091. This is typically "
                       "caused by a remote worker crashing."}
    # the worker that exited without a word is seen at the launcher's next poll, after its peer's error
    error = SimpleNamespace(failures={0: failure(lost, 10), 1: failure("", 11)})
    assert _root_failure(error)[0] == 1
    error = SimpleNamespace(failures={0: failure({"message": "ValueError: bad batch"}, 12), 1: failure(lost, 11)})
    assert _root_failure(error)[0] == 0
    error = SimpleNamespace(failures={0: failure(lost, 12), 1: failure(lost, 11)})  # only lost peers: the first
    assert _root_failure(error)[0] == 1
