"""The robot model in labelling against MuJoCo truth, where box-only GrabCut errs: GrabCut guided by it, and
labels fitted to it while labelling.

Truth masks come from MuJoCo's segmentation render (an independent
renderer). The frames: the robot orange with dark joint bands (which
box-only GrabCut may take for shadow) on textured ground, and a
robot-coloured post touching the body's side (which box-only GrabCut
takes in). Labelled through the labeller's own
path (:func:`label_video`), the guided labels must be nearer the truth and
hold the post out.
"""
import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from snaketrack.datasets.boxes import Box, mask_to_box
from snaketrack.datasets.grabcut_backend import GrabCutBackend
from snaketrack.datasets.label_report import FIT_CSV
from snaketrack.datasets.layout import Dataset
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError, SnaketrackError, SnaketrackWarning
from snaketrack.labelling.fit_labels import FitConfig, FittedBackend, LabelFitter, fit_labels
from snaketrack.labelling.guided_backend import GuideConfig, GuidedBackend
from snaketrack.labelling.label import LabelConfig, label_video
from snaketrack.mask_edges import snap_edges
from snaketrack.masks import mask_iou
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import Camera

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mj_video import H, N, W  # noqa: E402


def _label(root, backend, out) -> list[np.ndarray]:
    truth0 = Dataset(root).mask(0)
    box = mask_to_box(truth0).expand(3)
    label_video(open_frames(str(root)), out, backend, box, LabelConfig(), progress=False)
    ds = Dataset(out)
    return [ds.mask(i) for i in range(len(ds))]


def test_guided_labels_are_nearer_the_truth_and_leave_the_post_out(video, tmp_path):
    root, truths, posts = video
    robot = load_robot("planar-snake-11")
    K = np.asarray(Dataset(root).meta["K"])
    plain = _label(root, GrabCutBackend(), tmp_path / "plain")
    guided_backend = GuidedBackend(robot, K, W, H, 30.0)
    guided = _label(root, guided_backend, tmp_path / "guided")
    iou_plain = np.mean([mask_iou(m, t) for m, t in zip(plain, truths)])
    iou_guided = np.mean([mask_iou(m, t) for m, t in zip(guided, truths)])
    assert guided_backend.fits >= N - 1
    assert iou_guided > 0.85 and iou_guided > iou_plain + 0.03, (iou_plain, iou_guided)
    # box-only GrabCut takes the robot-coloured post in; once the model guides, it stays out
    assert sum(np.count_nonzero(m & p) for m, p in zip(plain, posts)) > 20
    assert all(np.count_nonzero(m & p) == 0 for m, p in zip(guided[1:], posts[1:]))


def test_guide_makes_far_pixels_background_and_the_guide_robot():
    """A robot-coloured blob far from the guide is cut off; a dark part inside the guide is kept."""
    rgb = np.full((80, 120, 3), (90, 120, 70), np.uint8)
    rgb += np.random.default_rng(1).integers(0, 10, rgb.shape, dtype=np.uint8)
    body = np.zeros((80, 120), bool)
    body[36:44, 20:100] = True
    rgb[body] = (230, 120, 30)
    rgb[36:44, 56:64] = (30, 30, 30)  # a dark housing across the body
    rgb[18:26, 80:88] = (230, 120, 30)  # a robot-coloured stone inside the box
    gc = GrabCutBackend()
    gc.set_image(rgb)
    box = Box(16, 14, 90, 34)
    plain = gc.predict(box)
    guided = gc.predict(box, guide=body, guide_near_px=2, guide_far_px=6)
    assert plain[18:26, 80:88].mean() > 0.5 and not guided[18:26, 80:88].any()
    assert guided[36:44, 56:64].mean() > 0.9
    assert mask_iou(guided, body) > 0.9


def test_guide_config_is_checked():
    with pytest.raises(InputError, match="near"):
        GuideConfig(near_px=5, far_px=2)


def test_label_backends_by_name(video, tmp_path):
    """Without --backend: box-only GrabCut (SAM with a checkpoint); guided on request, with the robot
    from the source's meta.json or --robot."""
    from snaketrack.datasets.toy import write_toy_dataset
    from snaketrack.labelling.backends import build_backend

    root, _, _ = video
    assert build_backend("default", open_frames(str(root))).name == "grabcut"
    assert build_backend("guided", open_frames(str(root))).name == "guided"
    toy = write_toy_dataset(tmp_path / "toy", 2, 64, 48, seed=0)
    assert build_backend("guided", open_frames(str(toy)), robot="planar-snake-11").name == "guided"
    with pytest.raises(SnaketrackError, match="robot"):
        build_backend("guided", open_frames(str(toy)))  # the toy's meta names no shipped robot
    with pytest.raises(InputError, match="checkpoint"):
        build_backend("sam", open_frames(str(toy)))


def test_labels_fitted_while_labelling_equal_the_labels_fitted_after(video, tmp_path):
    """The fit while labelling changes only the labels written: the cuts prompt and pass the guard as without
    it, and each written label is what ``fit-labels`` makes of the unfitted one; nearer the truth than it."""
    root, truths, posts = video
    robot = load_robot("planar-snake-11")
    camera = Camera.from_meta(Dataset(root).meta)
    plain = _label(root, GrabCutBackend(), tmp_path / "plain")
    # without the snap to the frame, which sees the source's frames while labelling and their JPEG copies after
    unsnapped = FitConfig(snap=False)
    backend = FittedBackend(GrabCutBackend(), LabelFitter(robot, camera, 30.0, unsnapped))
    _label(root, backend, tmp_path / "unsnapped")
    after = fit_labels(tmp_path / "plain", tmp_path / "after", config=unsnapped, progress=False)
    assert after["fitted"] == sum(backend.fitter.counts[k] for k in ("fit", "trim")) >= N - 1
    for a, b in zip(_masks(tmp_path / "unsnapped"), _masks(tmp_path / "after")):
        assert np.array_equal(a, b)
    # each frame's verdict is recorded as fit-labels records it, and the report lists the labels kept as cut
    assert (tmp_path / "unsnapped" / FIT_CSV).read_text() == (tmp_path / "after" / FIT_CSV).read_text()
    fit_rows = list(csv.DictReader((tmp_path / "unsnapped" / FIT_CSV).open()))
    report = json.loads((tmp_path / "unsnapped" / "labels_report.json").read_text())["fit"]
    assert (report["replaced"], report["trimmed"], report["kept"]) == tuple(
        backend.fitter.counts[k] for k in ("fit", "trim", "label"))
    assert report["kept_frames"] == [int(r["frame"]) for r in fit_rows if r["source"] == "label"]
    sheet = tmp_path / "unsnapped" / "labels_kept.png"
    assert sheet.is_file() == bool(report["kept_frames"]) and report["contact_sheet"] == (
        "labels_kept.png" if report["kept_frames"] else None)
    # by default a label the fit changed is then snapped to the frame it was cut from
    backend = FittedBackend(GrabCutBackend(), LabelFitter(robot, camera, 30.0))
    fitted = _label(root, backend, tmp_path / "fitted")
    refit, src = LabelFitter(robot, camera, 30.0, unsnapped), Dataset(root)
    for i, (label, written) in enumerate(zip(plain, fitted)):
        res = refit(label)
        expect = snap_edges(src.frame(i), res.mask) if res.source != "label" else res.mask
        assert np.array_equal(written, expect)
    assert (tmp_path / "plain" / "labels.csv").read_text() == (tmp_path / "fitted" / "labels.csv").read_text()
    iou_plain = np.mean([mask_iou(m, t) for m, t in zip(plain, truths)])
    iou_fitted = np.mean([mask_iou(m, t) for m, t in zip(fitted, truths)])
    assert iou_fitted > iou_plain + 0.01, (iou_plain, iou_fitted)
    assert sum(np.count_nonzero(m & p) for m, p in zip(fitted, posts)) < sum(
        np.count_nonzero(m & p) for m, p in zip(plain, posts))
    meta = Dataset(tmp_path / "fitted").meta["labelling"]
    assert meta["robot_fit"]["robot"] == "planar-snake-11" and meta["robot_fit"]["replace_iou"] == 0.85


def test_a_resumed_fitted_run_records_each_frames_fit_once(video, tmp_path):
    """An interrupted run whose last frame wrote its fit row but not its labels.csv row resumes with one fit
    row a frame, the same verdicts as an uninterrupted run for the frames before the interruption."""
    root, _, _ = video
    robot = load_robot("planar-snake-11")
    camera = Camera.from_meta(Dataset(root).meta)
    box = mask_to_box(Dataset(root).mask(0)).expand(3)

    def run(out, frames):
        backend = FittedBackend(GrabCutBackend(), LabelFitter(robot, camera, 30.0, FitConfig(snap=False)))
        label_video(open_frames(str(root)), out, backend, box, LabelConfig(), max_frames=frames, progress=False)

    run(tmp_path / "whole", None)
    run(tmp_path / "part", 3)
    path = tmp_path / "part" / FIT_CSV
    path.write_text(path.read_text() + "3,tracked,0.9,fit,100,100\n")  # a frame cut short after its fit row
    run(tmp_path / "part", None)
    frames = [int(r["frame"]) for r in csv.DictReader(path.open())]
    assert frames == list(range(N))
    whole = path.read_text().splitlines()[:4]
    assert whole == (tmp_path / "whole" / FIT_CSV).read_text().splitlines()[:4]


def _masks(root) -> list[np.ndarray]:
    ds = Dataset(root)
    return [ds.mask(i) for i in range(len(ds))]


def test_the_label_command_fits_when_the_robot_is_known(video, tmp_path, capsys):
    from snaketrack import cli
    from snaketrack.datasets.toy import write_toy_dataset
    from snaketrack.labelling.backends import build_backend

    root, _, _ = video
    src = open_frames(str(root))
    assert isinstance(build_backend("default", src), FittedBackend)  # the source's meta.json names the robot
    assert not isinstance(build_backend("default", src, fit=False), FittedBackend)
    assert not isinstance(build_backend("guided", src), FittedBackend)  # it fits the model itself
    with pytest.raises(InputError, match="itself"):
        build_backend("guided", src, fit=True)
    toy = open_frames(str(write_toy_dataset(tmp_path / "toy", 2, 64, 48, seed=0)))
    with pytest.warns(SnaketrackWarning, match="not fitted"):  # its meta.json's robot is no shipped one
        assert not isinstance(build_backend("default", toy), FittedBackend)
    assert isinstance(build_backend("default", toy, robot="planar-snake-11"), FittedBackend)
    with pytest.raises(SnaketrackError, match="'toy': not a shipped robot"):
        build_backend("default", toy, fit=True)  # asked for: a robot that does not load is an error
    box = mask_to_box(Dataset(root).mask(0)).expand(3)
    argv = ["label", str(root), "--box", f"{box.x},{box.y},{box.w},{box.h}", "--max-frames", "3", "--no-motion"]
    assert cli.main(argv + ["--out", str(tmp_path / "a"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert sum(out["robot_fit"][k] for k in ("fit", "trim", "label")) == 3
    assert out["robot_fit"]["joined"] == 0  # --no-motion: no moving pixels to join
    assert cli.main(argv + ["--no-fit", "--out", str(tmp_path / "b")]) == 0
    assert "fitted" not in capsys.readouterr().out
    assert cli.main(argv + ["--out", str(tmp_path / "c")]) == 0
    said = capsys.readouterr().out
    kept = json.loads((tmp_path / "c" / "labels_report.json").read_text())["fit"]["kept"]
    assert f"{kept} kept as cut" in said and ("labels_kept.png" in said) == (kept > 0)
    assert "robot_fit" not in Dataset(tmp_path / "b").meta["labelling"]
