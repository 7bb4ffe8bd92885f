import numpy as np
import pytest
import torch

from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.training.model import (
    SegmenterConfig,
    build_model,
    load_model,
    padded_size,
    parse_input_size,
    save_model,
)
from snaketrack.training.segmenter import load_segmenter


def test_save_load_round_trip_gives_identical_outputs(tmp_path):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(40, 72), mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    torch.manual_seed(3)
    model = build_model(cfg)
    with torch.no_grad():  # non-trivial batch-norm statistics, so eval mode differs from init
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    model.eval()
    save_model(tmp_path / "m.pt", model, cfg, {"note": "x"})
    loaded, cfg2, extra = load_model(tmp_path / "m.pt")
    assert cfg2 == cfg and extra == {"note": "x"}
    x = torch.randn(2, 3, *padded_size(cfg.input_size))
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))
    rgb = np.random.default_rng(0).integers(0, 255, (90, 160, 3), dtype=np.uint8)
    from snaketrack.training.segmenter import Segmenter

    a = Segmenter(model, cfg).predict_proba(rgb)
    b = load_segmenter(tmp_path / "m.pt").predict_proba(rgb)
    assert np.array_equal(a, b)


def test_local_encoder_weights_are_loaded(tmp_path):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(32, 32))
    torch.manual_seed(1)
    donor = build_model(cfg)
    sd = {f"encoder.{k}": v for k, v in donor.encoder.state_dict().items()}
    sd["fc.weight"] = torch.zeros(3, 3)  # a classifier head, as in torchvision files, is ignored
    torch.save(sd, tmp_path / "enc.pth")
    torch.manual_seed(2)
    model = build_model(cfg, encoder_weights=tmp_path / "enc.pth")
    for k, v in donor.encoder.state_dict().items():
        assert torch.equal(model.encoder.state_dict()[k], v)
    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "bad.pth")
    with pytest.raises(FileFormatError, match="bad.pth: does not match encoder resnet18"):
        build_model(cfg, encoder_weights=tmp_path / "bad.pth")
    with pytest.raises(MissingFileError, match="none.pth"):
        build_model(cfg, encoder_weights=tmp_path / "none.pth")


def test_bad_inputs(tmp_path):
    assert parse_input_size("640x360") == (360, 640)  # flags are WIDTHxHEIGHT, tensors (height, width)
    assert padded_size((360, 640)) == (368, 640)
    for bad in ("360", "axb", "8x8"):
        with pytest.raises(InputError, match="--input-size"):
            parse_input_size(bad)
    with pytest.raises(InputError, match="--encoder"):
        build_model(SegmenterConfig(encoder="no_such_net"))
    with pytest.raises(InputError, match="--precision"):
        SegmenterConfig(precision="fp16")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(FileFormatError, match="junk.pt: not a segmenter model file") as e:
        load_segmenter(tmp_path / "junk.pt")
    assert "Error" not in str(e.value)  # no Python exception's name
    torch.save({"a": 1}, tmp_path / "other.pt")
    with pytest.raises(FileFormatError, match="not a snaketrack segmenter"):
        load_segmenter(tmp_path / "other.pt")
    with pytest.raises(MissingFileError):
        load_segmenter(tmp_path / "missing.pt")


def _shifted_response_error(align_corners: bool) -> float:
    """Largest difference between the network's logits for a blob and those for the blob moved by 128 px
    (8 strides of 16), moved back; relative to the response's range. A freshly built network in eval mode
    maps a zero image to zero features, so far from the image's sides only the upsampling's geometry can
    break translation equivariance."""
    torch.manual_seed(0)
    model = build_model(SegmenterConfig(encoder="resnet18", input_size=(64, 640), align_corners=align_corners))
    model.eval()
    x = torch.zeros(2, 3, 64, 640)
    blob = torch.randn(3, 12, 12)
    x[0, :, 26:38, 224:236] = blob
    x[1, :, 26:38, 352:364] = blob
    with torch.no_grad():
        y = model(x)[:, 0]
    a, b = y[0, :, 96:400], y[1, :, 224:528]
    return float((a - b).abs().max() / (a.max() - a.min()))


def test_upsampling_is_centred_so_the_network_is_translation_equivariant():
    assert _shifted_response_error(align_corners=False) < 1e-4
    assert _shifted_response_error(align_corners=True) > 0.01  # smp's corner-aligned build is not


def test_files_written_before_the_upsampling_was_stored_load_corner_aligned(tmp_path):
    cfg = SegmenterConfig(encoder="resnet18", input_size=(32, 32))
    assert not cfg.align_corners
    save_model(tmp_path / "new.pt", build_model(cfg), cfg)
    blob = torch.load(tmp_path / "new.pt", weights_only=True)
    assert load_model(tmp_path / "new.pt")[1].align_corners is False
    del blob["config"]["align_corners"]
    torch.save(blob, tmp_path / "old.pt")
    model, old_cfg, _ = load_model(tmp_path / "old.pt")
    assert old_cfg.align_corners is True
    ups = [m for m in model.modules() if isinstance(m, torch.nn.Upsample)]
    assert len(ups) == 2 and all(m.align_corners for m in ups)
