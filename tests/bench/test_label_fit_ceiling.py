"""snaketrack.bench.ceiling.measure_label_fit_ceiling on a dataset drawn by the tracker's own silhouette
model at known poses, so that the model at the true pose is the truth mask, pixel for pixel."""
import csv
from pathlib import Path

import cv2
import numpy as np
import pytest

from snaketrack.bench.ceiling import measure_label_fit_ceiling
from snaketrack.errors import MissingFileError
from snaketrack.masks import mask_iou
from snaketrack.models.robot import load_robot

from posed_dataset import QUAT_DOWN, H, K, W, pose, write_posed_dataset

N = 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_posed_dataset(tmp_path_factory.mktemp("fitceil") / "toy", N, seed=2)


def _labels(ds: Path, out: Path, grow_px: int = 0, empty: tuple[int, ...] = (), shadow_px: int = 0) -> Path:
    """The truth masks grown by ``grow_px`` (a band all round, like a blurred edge), joined by themselves
    shifted ``shadow_px`` down the image (a band on one side, like a cast shadow), the frames in ``empty``
    left empty."""
    out.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(sorted((ds / "masks").glob("*.png"))):
        m = cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)
        if grow_px:
            m = cv2.dilate(m, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow_px + 1,) * 2))
        if shadow_px:
            m = np.maximum(m, np.roll(m, shadow_px, axis=0))
        if i in empty:
            m[:] = 0
        cv2.imwrite(str(out / p.name), m)
    return out


def _track(path: Path, dz: float, lost: tuple[int, ...] = ()) -> Path:
    """A track.csv with the true joint angles and rotation, the base ``dz`` metres deeper."""
    robot = load_robot("planar-snake-11")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["frame", *[f"q_{j + 1}" for j in range(robot.dof)], "base_x", "base_y", "base_z",
                    "base_qw", "base_qx", "base_qy", "base_qz", "status"])
        for i in range(N):
            q, base = pose(robot, i)
            w.writerow([i, *q, base[0], base[1], base[2] + dz, *QUAT_DOWN, "lost" if i in lost else "tracked"])
    return path


def test_exact_labels_score_one_everywhere(dataset, tmp_path):
    res = measure_label_fit_ceiling(dataset, _labels(dataset, tmp_path / "l"), track=_track(tmp_path / "t.csv", 0.0))
    assert res["frames"] == N and res["fit_frames"] == N
    for k in ("iou_label", "iou_model_at_truth", "iou_fitted_at_truth", "iou_model_at_truth_vs_label",
              "iou_model_at_fit", "iou_fitted_at_fit"):
        assert res[k] == pytest.approx(1.0), k


def test_a_band_round_the_label_is_cut_by_the_true_silhouette(dataset, tmp_path):
    labels = _labels(dataset, tmp_path / "l", grow_px=2)
    res = measure_label_fit_ceiling(dataset, labels, agree_px=2)
    truth = [cv2.imread(str(p), 0) > 127 for p in sorted((dataset / "masks").glob("*.png"))]
    grown = [cv2.imread(str(p), 0) > 127 for p in sorted(labels.glob("*.png"))]
    assert res["iou_label"] == pytest.approx(np.mean([mask_iou(g, t) for g, t in zip(grown, truth)]))
    assert res["iou_label"] < 0.8
    assert res["iou_fitted_at_truth"] == pytest.approx(1.0)
    assert res["iou_model_at_truth_vs_label"] == pytest.approx(res["iou_label"])


def test_an_empty_label_fits_nothing_and_a_deeper_fit_scores_lower(dataset, tmp_path):
    labels = _labels(dataset, tmp_path / "l", empty=(2,))
    res = measure_label_fit_ceiling(dataset, labels, track=_track(tmp_path / "t.csv", 0.3, lost=(0,)))
    assert res["iou_fitted_at_truth"] == pytest.approx(0.75)  # three frames exact, one empty
    assert res["fit_frames"] == N - 1
    # seen straight down, a robot lying flat 0.3 m deeper is the image scaled by 2 / 2.3 about the
    # principal point (the body's thickness aside)
    s = 2.0 / 2.3
    A = np.array([[s, 0, (1 - s) * K[0, 2]], [0, s, (1 - s) * K[1, 2]]])
    truth = [cv2.imread(str(p), 0) for p in sorted((dataset / "masks").glob("*.png"))]
    shrunk = {i: cv2.warpAffine(truth[i], A, (W, H)) > 127 for i in range(1, N)}
    scaled = [mask_iou(shrunk[i], truth[i] > 127) for i in range(1, N)]
    assert res["iou_model_at_fit"] == pytest.approx(np.mean(scaled), abs=0.02)
    # the fitted label: the shrunk silhouette cut to the label grown by 2 px (the empty label of frame 2: nothing)
    grown = {i: cv2.dilate(truth[i], cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))) > 127 for i in (1, 3)}
    fitted = [mask_iou(shrunk[1] & grown[1], truth[1] > 127), 0.0, mask_iou(shrunk[3] & grown[3], truth[3] > 127)]
    assert res["iou_fitted_at_fit"] == pytest.approx(np.mean(fitted), abs=0.02)
    assert res["iou_fitted_at_fit"] <= res["iou_model_at_fit"] + 1e-9


def test_missing_truth_or_labels_are_refused(dataset, tmp_path, capsys, run_bench):
    with pytest.raises(MissingFileError, match="no such folder"):
        measure_label_fit_ceiling(dataset, tmp_path / "nowhere")
    assert run_bench("label-fit-ceiling", [dataset, tmp_path / "nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snaketrack: error: ") and len(err.strip().splitlines()) == 1


def test_refined_from_the_truth_holds_against_a_band_all_round_and_leaves_it_for_one_on_a_side(dataset, tmp_path):
    exact = measure_label_fit_ceiling(dataset, _labels(dataset, tmp_path / "e"), refine_steps=10)
    assert exact["refined_frames"] == N
    assert exact["iou_model_refined"] > 0.97  # the objective's optimum is the truth
    grown = measure_label_fit_ceiling(dataset, _labels(dataset, tmp_path / "g", grow_px=2), refine_steps=10)
    assert grown["iou_model_refined"] > 0.97  # the edge offset takes up a band all round
    side = measure_label_fit_ceiling(dataset, _labels(dataset, tmp_path / "s", shadow_px=3), refine_steps=10)
    assert side["iou_model_refined"] < exact["iou_model_refined"] - 0.02  # no offset explains a band on one side
