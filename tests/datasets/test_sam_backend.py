"""Segment Anything code path with a randomly initialised vit_b saved to a temporary checkpoint.

Random weights give meaningless masks; what is tested is the real loading,
embedding and prompting code: the checkpoint loads through
sam_model_registry, the image is embedded once per frame, and our box
prompt reaches SamPredictor as the corners (x0, y0, x1, y1).
"""
import numpy as np
import pytest
import torch

from snaketrack.cli import main
from snaketrack.datasets.boxes import Box
from snaketrack.datasets.sam_backend import SamBackend, load_sam
from snaketrack.errors import FileFormatError, InputError, MissingFileError
from snaketrack.labelling.label import LabelConfig, Labeller


@pytest.fixture(scope="module")
def vit_b_state():
    from segment_anything import sam_model_registry

    torch.manual_seed(0)
    return sam_model_registry["vit_b"]().state_dict()


@pytest.fixture(scope="module")
def backend(tmp_path_factory, vit_b_state):
    ckpt = tmp_path_factory.mktemp("sam") / "sam_vit_b_random.pth"
    torch.save(vit_b_state, ckpt)
    return SamBackend(ckpt, "vit_b")


def test_random_vit_b_checkpoint_loads_through_the_registry(backend, vit_b_state):
    got = backend.predictor.model.state_dict()
    assert got.keys() == vit_b_state.keys()
    for k in ("mask_decoder.iou_prediction_head.layers.0.weight", "image_encoder.blocks.11.mlp.lin2.weight"):
        assert torch.equal(got[k], vit_b_state[k])


@pytest.mark.slow  # one vit_b image embedding: ~25 s on a shared 2-core CPU
def test_random_vit_b_answers_box_prompts_with_one_embedding(backend):
    model = backend.predictor.model
    calls = []
    model.image_encoder.register_forward_hook(lambda *a: calls.append(1))
    rgb = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    lab = Labeller(backend, LabelConfig())
    first = lab.start(rgb, Box(10, 8, 30, 20))
    assert first.mask.shape == (48, 64) and first.mask.dtype == bool
    # a second prompt on the same image re-uses the embedding, and equals SamPredictor's own answer
    box = Box(5, 4, 40, 30)
    ours = backend.predict(box)
    ref, _, _ = backend.predictor.predict(box=np.array([5, 4, 45, 34]), multimask_output=False)
    assert np.array_equal(ours, ref[0])
    assert len(calls) == 1


def test_missing_checkpoint_names_file_and_model(tmp_path):
    with pytest.raises(MissingFileError, match=r"nothere\.pth.*vit_l"):
        load_sam(tmp_path / "nothere.pth", "vit_l")
    with pytest.raises(InputError, match="vit_x"):
        load_sam(tmp_path / "nothere.pth", "vit_x")


def test_mismatched_or_corrupt_checkpoint_is_a_clear_error(tmp_path, vit_b_state):
    partial = {k: v for k, v in vit_b_state.items() if not k.startswith("mask_decoder.")}
    torch.save(partial, tmp_path / "partial.pth")
    with pytest.raises(FileFormatError, match=r"partial\.pth: does not match SAM model type vit_b"):
        load_sam(tmp_path / "partial.pth", "vit_b")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(FileFormatError, match=r"junk\.pth: not a readable SAM vit_b checkpoint"):
        load_sam(tmp_path / "junk.pth", "vit_b")


def test_cli_needs_a_checkpoint_for_sam(tmp_path, capsys):
    from snaketrack.datasets.toy import write_toy_dataset

    root = write_toy_dataset(tmp_path / "ds", 2, 64, 48)
    assert main(["label", root, "--box", "5,5,30,20", "--backend", "sam", "--out", str(tmp_path / "o")]) == 2
    assert "--sam-checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # without weights the default labeller is GrabCut
    assert main(["label", root, "--box", "5,5,30,20", "--out", str(tmp_path / "g")]) == 0
    assert len(list((tmp_path / "g" / "masks").glob("*.png"))) == 2
