import numpy as np
import pytest

from snaketrack.cli import main
from snaketrack.datasets.boxes import Box, mask_to_box
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.layout import Dataset
from snaketrack.datasets.toy import write_toy_dataset
from snaketrack.errors import StateError
from snaketrack.training.evaluate import evaluate_dataset_masks


def test_grabcut_labels_a_toy_video_through_the_cli(tmp_path, capsys):
    truth = write_toy_dataset(tmp_path / "truth", 12, 160, 120, seed=2)
    b = mask_to_box(Dataset(truth).mask(0)).expand(5)
    out = tmp_path / "labels"
    assert main(["label", truth, "--box", str(b), "--backend", "grabcut", "--out", str(out), "--json"]) == 0
    assert '"frames": 12' in capsys.readouterr().out
    assert evaluate_dataset_masks(out, truth)["iou"] > 0.8


def test_predict_before_set_image():
    with pytest.raises(StateError, match="set_image"):
        GrabCutBackend().predict(Box(0, 0, 5, 5))


def test_flat_image_gives_an_empty_mask_not_a_crash():
    gc = GrabCutBackend()
    gc.set_image(np.full((40, 50, 3), 128, np.uint8))
    assert gc.predict(Box(10, 10, 20, 15)).shape == (40, 50)
