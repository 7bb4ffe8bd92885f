"""The segmenter's live setting: ONNX export checked against torch in each engine, its cache, the commands'
defaults, the fallback."""
import warnings

import numpy as np
import pytest
import torch

import snaketrack.training.live as live
from snaketrack.cli import _format_warning, main
from snaketrack.datasets.layout import Dataset
from snaketrack.errors import InputError
from snaketrack.training.model import SegmenterConfig, build_model, save_model
from snaketrack.training.segmenter import load_segmenter

SIZE = (64, 96)  # (height, width) of the test model's input


def _save(path, seed):
    cfg = SegmenterConfig(encoder="resnet18", input_size=SIZE, threshold=0.5)
    torch.manual_seed(seed)
    model = build_model(cfg)
    save_model(path, model, cfg)
    return path


@pytest.fixture
def model_file(tmp_path):
    return _save(tmp_path / "m.pt", 0)


def _frames(n=3, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (n, *SIZE, 3), dtype=np.uint8)


@pytest.mark.parametrize("engine", live.ENGINES)
def test_export_equals_torch(model_file, engine):
    with warnings.catch_warnings():
        warnings.simplefilter("error", live.LiveFallbackWarning)
        seg = load_segmenter(model_file, setting="live", engine=engine, window=False, region=False)
    assert seg.backend == engine and (seg.scale, seg.flips) == (1.0, 1)
    assert live.live_path(model_file).is_file() and live.live_path(model_file).name == "m.live.onnx"
    # region=False: an untrained network's probabilities lie near 0.5, where bfloat16's rounding moves
    # pixels across the threshold and so changes which robot pieces a mask keeps; the network is compared
    torch_seg = load_segmenter(model_file, scale=1.0, flips=1, region=False)
    assert torch_seg.backend == "torch"
    tol = live.tolerance(seg.network)
    assert tol == (live.BF16_TOLERANCE if seg.network.precision == "bf16" else live.EXPORT_TOLERANCE)
    x = live.check_frame(seg.net_size, seg.config.mean, seg.config.std)
    assert live.probability_difference(seg.network, torch_seg.model, x) <= tol
    frames = _frames()
    p_live, p_torch = seg.predict_proba_batch(frames), torch_seg.predict_proba_batch(frames)
    assert p_live.shape == p_torch.shape == (3, *SIZE)
    assert np.abs(p_live - p_torch).max() <= tol
    # another frame size (resized to the model's input and back) and a batch of one
    big = np.random.default_rng(1).integers(0, 255, (90, 150, 3), dtype=np.uint8)
    assert np.abs(seg.predict_proba(big) - torch_seg.predict_proba(big)).max() <= tol
    # one graph for every input size (a window's among them)
    for size in ((32, 48), (48, 96), (96, 160)):
        x = live.check_frame(size, seg.config.mean, seg.config.std)
        assert live.probability_difference(seg.network, torch_seg.model, x) <= tol


def test_openvino_float32_equals_torch(model_file):
    seg = load_segmenter(model_file, scale=1.0, flips=1)
    net = live.OpenVinoNetwork(live.export_bytes(seg.model, seg.net_size, "key"), precision="fp32")
    assert net.precision == "fp32" and net.metadata[live.KEY_FIELD] == "key"
    x = live.check_frame(seg.net_size, seg.config.mean, seg.config.std)
    assert live.probability_difference(net, seg.model, x) <= live.EXPORT_TOLERANCE
    assert live.tolerance(net) == live.EXPORT_TOLERANCE


def test_openvino_is_the_default_engine_where_installed(model_file):
    assert live.installed_engines()[0] == "openvino"
    assert load_segmenter(model_file, setting="live").backend == "openvino"
    with pytest.warns(live.LiveFallbackWarning, match="unknown engine 'tensorrt'"):
        assert load_segmenter(model_file, setting="live", engine="tensorrt").backend == "torch"


def test_no_engine_installed_falls_back_to_torch(model_file, monkeypatch):
    monkeypatch.setattr(live, "installed_engines", lambda: [])
    with pytest.warns(live.LiveFallbackWarning, match="no inference engine is installed") as caught:
        assert load_segmenter(model_file, setting="live").backend == "torch"
    assert "pip install 'snaketrack[live]'" in str(caught[0].message)


def test_cache_reused_and_rebuilt_when_the_model_changes(model_file, monkeypatch):
    load_segmenter(model_file, setting="live")
    cached = live.live_path(model_file).read_bytes()
    calls = []
    export = live.export_bytes
    monkeypatch.setattr(live, "export_bytes", lambda *a: calls.append(1) or export(*a))
    seg = load_segmenter(model_file, setting="live")
    assert seg.backend == "openvino" and not calls  # the cache matched: nothing exported
    assert live.live_path(model_file).read_bytes() == cached
    _save(model_file, 1)  # retrained: other weights in the same file
    seg = load_segmenter(model_file, setting="live", window=False, region=False)
    assert seg.backend == "openvino" and len(calls) == 1
    assert live.live_path(model_file).read_bytes() != cached
    assert seg.network.metadata[live.KEY_FIELD] == live.file_sha256(model_file)
    frames = _frames()
    ref = load_segmenter(model_file, scale=1.0, flips=1, region=False, window=False).predict_proba_batch(frames)
    assert np.abs(seg.predict_proba_batch(frames) - ref).max() <= live.tolerance(seg.network)
    load_segmenter(model_file, setting="live", scale=1.5)  # another input size: the same graph
    assert len(calls) == 1
    live.live_path(model_file).write_bytes(b"not onnx")  # a damaged cache is exported again
    assert load_segmenter(model_file, setting="live").backend == "openvino" and len(calls) == 2


def test_settings_and_overrides(model_file):
    cfg = SegmenterConfig(encoder="resnet18", input_size=SIZE, scale=1.5, flips=4)
    torch.manual_seed(0)
    save_model(model_file, build_model(cfg), cfg)
    acc = load_segmenter(model_file)  # the Python default: accurate, the stored choice
    assert (acc.scale, acc.flips, acc.backend) == (1.5, 4, "torch")
    acc = load_segmenter(model_file, setting="accurate")
    assert (acc.scale, acc.flips, acc.backend) == (1.5, 4, "torch")
    assert acc.window is not None  # frames given in order are followed in a window in both settings
    assert load_segmenter(model_file, window=False).window is None
    seg = load_segmenter(model_file, setting="live")  # the stored scale, the left-right pair, in a window
    assert (seg.scale, seg.flips, seg.backend) == (1.5, 2, "openvino") and seg.window is not None
    seg = load_segmenter(model_file, setting="live", flips=2, scale=1.25, window=False)  # explicit values win
    assert (seg.scale, seg.flips, seg.backend, seg.window) == (1.25, 2, "openvino", None)
    assert load_segmenter(model_file, window=True).window is not None
    frame = _frames(1)[0]
    ref = load_segmenter(model_file, scale=1.25, flips=2, window=False).predict_proba(frame)
    assert np.abs(seg.predict_proba(frame) - ref).max() <= live.tolerance(seg.network)
    with pytest.raises(InputError, match="--setting 'fast'"):
        load_segmenter(model_file, setting="fast")
    one = SegmenterConfig(encoder="resnet18", input_size=SIZE, scale=1.5, flips=1)
    save_model(model_file, build_model(one), one)  # training found flips not worth their time
    assert load_segmenter(model_file, setting="live", window=False).flips == 1  # live never flips more


def test_failed_export_falls_back_to_torch_with_a_warning(model_file, monkeypatch, capsys):
    def broken(*a):
        raise RuntimeError("unsupported operator\nmore detail")

    monkeypatch.setattr(live, "export_bytes", broken)
    with pytest.warns(live.LiveFallbackWarning, match="export to ONNX failed .*unsupported operator.*torch"):
        seg = load_segmenter(model_file, setting="live")
    assert seg.backend == "torch" and (seg.scale, seg.flips) == (1.0, 1)
    assert not live.live_path(model_file).exists()
    frames, ref = _frames(), load_segmenter(model_file, flips=1, window=True)
    assert np.array_equal(seg.predict_proba_batch(frames), ref.predict_proba_batch(frames))


def test_graph_unlike_torch_falls_back(model_file, monkeypatch):
    monkeypatch.setattr(live, "probability_difference", lambda *a: 0.25)
    with pytest.warns(live.LiveFallbackWarning, match="in openvino .* differs from torch by 0.25"):
        assert load_segmenter(model_file, setting="live").backend == "torch"
    assert not live.live_path(model_file).exists()  # a graph that failed its check is not cached


def test_segment_command_default_is_live_and_matches_torch(model_file, toy_root, tmp_path, capsys, monkeypatch):
    assert main(["segment", str(toy_root), "--model", str(model_file), "--out", str(tmp_path / "s")]) == 0
    assert live.live_path(model_file).is_file()  # the default setting exported the network
    ds, src = Dataset(tmp_path / "s"), Dataset(toy_root)
    ref = load_segmenter(model_file, flips=1, window=True)  # the frames in order, as the command gives them
    for i in range(len(src)):
        got, want = ds.mask(i), ref.predict(src.frame(i))
        assert got.shape == want.shape and np.count_nonzero(got != want) <= 4
    # a failed export: one warning line, and the masks still written (by torch)
    monkeypatch.setattr(live, "export_bytes", lambda *a: (_ for _ in ()).throw(RuntimeError("no")))
    live.live_path(model_file).unlink()
    with pytest.warns(live.LiveFallbackWarning) as caught:
        assert main(["segment", str(toy_root), "--model", str(model_file), "--out", str(tmp_path / "t")]) == 0
    assert len(Dataset(tmp_path / "t")) == len(src)
    w = caught[0]
    text = _format_warning(w.message, w.category, w.filename, w.lineno)  # as the command prints it
    assert text == "snaketrack: warning: live segmenter: export to ONNX failed (RuntimeError: no); " \
                   "running the network in torch instead\n"


def test_openvino_compiles_a_shape_in_the_background_when_asked_whether_it_is_ready(model_file):
    seg = load_segmenter(model_file, scale=1.0, flips=1)
    net = live.OpenVinoNetwork(live.export_bytes(seg.model, seg.net_size, "key"), precision="fp32")
    small, other = (1, 3, 32, 48), (1, 3, 48, 64)
    assert not net.ready(small) and small in net.pending
    assert not net.ready(other) and other not in net.pending  # one compilation at a time
    net.pending[small].result(timeout=60)
    assert net.ready(small) and small in net.requests and not net.pending
    x = live.check_frame(small[2:], seg.config.mean, seg.config.std)
    assert live.probability_difference(net, seg.model, x) <= live.EXPORT_TOLERANCE
    # a shape asked about and then run before its compilation ends waits for it, compiled once
    assert not net.ready(other)
    job = net.pending[other]
    y = live.check_frame(other[2:], seg.config.mean, seg.config.std)
    assert live.probability_difference(net, seg.model, y) <= live.EXPORT_TOLERANCE
    assert job.done() and other in net.requests and not net.pending
