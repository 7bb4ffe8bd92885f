"""``snaketrack serve`` with a segmenter: played as a camera delivers it (``--realtime``), the live window
does not wait for a new input size to compile; read at the tracker's pace, it waits, as ``track`` does."""
import pytest
import torch

from snaketrack.cli import build_parser
from snaketrack.commands.service import open_service
from snaketrack.training.model import SegmenterConfig, build_model, save_model

from posed_dataset import write_posed_dataset


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-seg")
    cfg = SegmenterConfig(encoder="resnet18", input_size=(64, 96))
    torch.manual_seed(0)
    save_model(root / "m.pt", build_model(cfg), cfg)
    return write_posed_dataset(root / "ds", 4, seed=3), root / "m.pt"


@pytest.mark.parametrize("realtime", [False, True])
def test_a_realtime_source_does_not_wait_for_compilations(served, realtime):
    dataset, model = served
    argv = ["serve", str(dataset), "--masks", f"segmenter:{model}", *(["--realtime"] if realtime else [])]
    service = open_service(build_parser().parse_args(argv))
    segmenter = service.session.segmenter
    assert segmenter.window is not None and segmenter.backend == "openvino"
    assert segmenter.wait is (not realtime)


@pytest.mark.parametrize("extra, flips", [([], 1), (["--segmenter-flips", "2"], 2)])
def test_the_segmenter_flips_are_the_settings_unless_given(served, extra, flips):
    dataset, model = served  # the model file stores one pass
    argv = ["serve", str(dataset), "--masks", f"segmenter:{model}", *extra]
    assert open_service(build_parser().parse_args(argv)).session.segmenter.flips == flips


@pytest.mark.parametrize("extra, scale", [([], 1.0), (["--segmenter-scale", "0.5"], 0.5)])
def test_the_segmenter_scale_is_the_models_unless_given(served, extra, scale):
    dataset, model = served  # the model file stores scale 1: the network sees 64x96 at 1, 32x48 at 0.5
    argv = ["serve", str(dataset), "--masks", f"segmenter:{model}", *extra]
    segmenter = open_service(build_parser().parse_args(argv)).session.segmenter
    assert segmenter.scale == scale and segmenter.size == (round(64 * scale), round(96 * scale))


def test_a_segmenter_scale_out_of_range_is_one_line(served, capsys):
    from snaketrack import cli

    dataset, model = served
    code = cli.main(["serve", str(dataset), "--masks", f"segmenter:{model}", "--segmenter-scale", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--segmenter-scale 0" in err and len(err.splitlines()) == 1
