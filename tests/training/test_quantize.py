"""The live setting's int8 network: quantized at the end of training on training frames, its validation IoU
measured against float32's and recomputed here, kept only within the allowed loss, run by the live setting in
either engine, and given up for float32 when it fails its check."""
import warnings

import cv2
import numpy as np
import pytest
import torch

import snaketrack.training.live as live
import snaketrack.training.quantize as quantize
from snaketrack.datasets.layout import Dataset
from snaketrack.masks import mask_iou
from snaketrack.training.config import TrainConfig
from snaketrack.training.model import SegmenterConfig, build_model, load_model, read_model_file
from snaketrack.training.segmenter import Segmenter, load_segmenter
from snaketrack.training.train import train


@pytest.fixture(scope="module")
def trained(toy_root, tmp_path_factory):
    # seed 2: a toy network whose int8 graph passes the live setting's load-time check (mean probability
    # within 0.01 of float32 on the check frame; seeds 1-4 differ by 0.0005-0.0011). A network trained for
    # 6 epochs on 24 toy frames can miss it (seed 0's differs by 0.0105), and the live setting then runs
    # float32, as test_an_int8_network_failing_its_check_gives_way_to_float32 checks.
    out = tmp_path_factory.mktemp("int8") / "m.pt"
    res = train([toy_root], out, TrainConfig(epochs=6, batch_size=4, input_size=(48, 64), lr=2e-3, threads=1,
                                             max_val_frames=6, scales=(1.0,), live_int8=True, seed=2),
                progress=False)
    return out, res


def _probabilities(net, x):
    return 1.0 / (1.0 + np.exp(-np.asarray(net(x), np.float64)))


def test_the_kept_graph_is_quantized_and_follows_the_float32_network_at_any_size(trained):
    out, _ = trained
    model, cfg, extra = load_model(out)
    graph = extra[quantize.FIELD]["graph"]
    import onnx

    ops = {n.op_type for n in onnx.load_from_string(graph).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops  # quantized, not a copy of the float32 graph
    nets = {e: live.open_network(graph, e, threads=1, int8=True) for e in live.ENGINES}
    # the calibration size, which the live setting checks the network at when it loads it, and a window's
    # other sizes, run unchecked: their bound is looser (this toy network's mean difference there lies
    # between 0.002 and 0.012, by the CPU that trained it)
    for size, bound in (((48, 64), live.INT8_TOLERANCE), ((32, 48), 2 * live.INT8_TOLERANCE),
                        ((96, 128), 2 * live.INT8_TOLERANCE)):
        x = live.check_frame(size, cfg.mean, cfg.std)
        with torch.inference_mode():
            ref = torch.sigmoid(model(torch.from_numpy(x))).numpy()
        for engine, net in nets.items():
            assert net.precision == "int8"
            got = _probabilities(net, x)
            assert got.shape == ref.shape
            assert np.abs(got - ref).mean() <= bound, (engine, size)
            assert live.probability_difference(net, model, x) == pytest.approx(np.abs(got - ref).mean(), abs=1e-6)


def test_training_keeps_an_int8_network_whose_validation_iou_is_recomputed_here(trained, toy_root):
    out, res = trained
    entry = read_model_file(out)["extra"][quantize.FIELD]
    assert res.selection["live_int8"] == {k: v for k, v in entry.items() if k != "graph"}
    assert entry["calibration_frames"] == quantize.CALIBRATION_FRAMES
    assert entry["kept"] == (entry["val_iou_int8"] >= entry["val_iou_fp32"] - quantize.IOU_LOSS)
    assert entry["kept"] and isinstance(entry["graph"], bytes)
    assert entry["val_iou_fp32"] > 0.5  # the network learnt the toy robot: the comparison means something
    # the stored IoUs, recomputed from the validation frames: float32 in torch, the stored graph in ONNX Runtime
    from snaketrack.training.data import SegmentationData

    model, cfg, _ = load_model(out)
    val = SegmentationData([toy_root], cfg.input_size, "val", 0.15, 20, 0, cfg.mean, cfg.std, max_frames=6)
    frames = [(ds.frame(i), ds.mask(i) > 0) for ds, i in val.items]
    assert entry["frames"] == len(frames) > 0
    fp32 = Segmenter(model, cfg, flips=1)
    int8 = Segmenter(model, cfg, flips=1, network=live.OnnxNetwork(entry["graph"], 1, "int8"))
    for seg, key in ((fp32, "val_iou_fp32"), (int8, "val_iou_int8")):
        assert np.mean([mask_iou(seg.predict(f), m) for f, m in frames]) == pytest.approx(entry[key], abs=1e-9)


@pytest.mark.parametrize("engine", live.ENGINES)
def test_the_live_setting_runs_the_int8_network(trained, toy_root, engine):
    out, _ = trained
    with warnings.catch_warnings():
        warnings.simplefilter("error", live.LiveFallbackWarning)
        seg = load_segmenter(out, setting="live", engine=engine, window=False)
    assert seg.backend == engine and seg.network.precision == "int8"
    assert load_segmenter(out, setting="live", engine=engine, window=False, int8=False).network.precision != "int8"
    accurate = load_segmenter(out, flips=1)
    ds = Dataset(toy_root)
    ious = [mask_iou(seg.predict(ds.frame(i)), accurate.predict(ds.frame(i))) for i in range(0, len(ds), 3)]
    assert np.mean(ious) >= 0.9


def test_a_finished_run_keeps_its_int8_network(trained, toy_root):
    out, _ = trained
    before = out.read_bytes()
    model, cfg, extra = load_model(out)
    again = quantize.attach_live_int8(out, [], [])  # nothing to calibrate on: it must not try
    assert again == {k: v for k, v in extra[quantize.FIELD].items() if k != "graph"}
    assert out.read_bytes() == before


def test_an_int8_network_losing_too_much_is_not_kept(toy_root, tmp_path, monkeypatch):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(48, 64))
    torch.manual_seed(0)
    from snaketrack.training.model import save_model

    path = tmp_path / "r.pt"
    save_model(path, build_model(cfg), cfg, {"epoch": 1})
    ds = Dataset(toy_root)
    items = [(ds, i) for i in range(4)]
    monkeypatch.setattr(quantize, "IOU_LOSS", -1.0)  # no network can gain a whole IoU
    entry = quantize.attach_live_int8(path, items, items)
    assert entry["kept"] is False and entry["calibration_frames"] == 4 and entry["frames"] == 4
    assert "graph" not in read_model_file(path)["extra"][quantize.FIELD]
    assert load_segmenter(path, setting="live", window=False).network.precision != "int8"


def test_an_int8_network_failing_its_check_gives_way_to_float32(trained, monkeypatch):
    out, _ = trained
    monkeypatch.setattr(live, "INT8_TOLERANCE", -1.0)
    with pytest.warns(live.LiveFallbackWarning, match="int8 network differs from torch.*running the float32 one"):
        seg = load_segmenter(out, setting="live", window=False)
    assert seg.backend in live.ENGINES and seg.network.precision != "int8"


def test_calibration_frames_alternate_the_training_frames_and_their_robots_on_other_grounds(toy_root):
    ds = Dataset(toy_root)
    items = [(ds, i) for i in range(len(ds))]
    frames = quantize.calibration_frames(items, 6, seed=3)
    chosen = quantize.evenly(items, 6)
    assert len(frames) == 6
    for k, (f, (_, i)) in enumerate(zip(frames, chosen)):
        rgb, robot = ds.frame(i), ds.mask(i) > 0
        assert f.shape == rgb.shape and f.dtype == np.uint8
        if k % 2 == 0:
            assert np.array_equal(f, rgb)
        else:  # the robot kept, the ground replaced
            assert robot.any() and np.array_equal(f[robot], rgb[robot])
            far = ~cv2.dilate(robot.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            assert np.abs(f[far].astype(int) - rgb[far].astype(int)).mean() > 10
    again = quantize.calibration_frames(items, 6, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(frames, again))  # reproducible from its seed
