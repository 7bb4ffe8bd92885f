"""The label gate against MuJoCo truth: labels held to the robot model fitted from the first frame.

The clip (:mod:`distractor_video`): a robot drawn by MuJoCo's segmentation render (an independent renderer)
on a textured floor, and from a quarter of the way through a shoe of nearly its colour resting against its
body, which box-prompted GrabCut takes in. Labelled through the command's own backends
(:func:`~snaketrack.commands.label.build_backend`) with the gate and without it (the labels fitted to the
model only), the gated labels must be nearer the truth, hold less of the shoe, and say why per frame. On the
same clip without the shoe the gate must leave the labels as they were. The labelling runs take minutes on
two cores (the fit's pose searches): they are ``slow``.
"""
import csv
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from snaketrack import cli
from snaketrack.datasets.boxes import mask_to_box
from snaketrack.datasets.label_report import FIT_CSV
from snaketrack.datasets.layout import Dataset
from snaketrack.datasets.video import open_frames
from snaketrack.errors import InputError
from snaketrack.labelling.backends import build_backend
from snaketrack.labelling.label import LabelConfig, label_video
from snaketrack.labelling.label_gate import GateConfig, GatedBackend, cut_blobs, cut_off_model
from snaketrack.masks import mask_iou

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distractor_video import write_distractor_video  # noqa: E402

N = 16


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """{name: (root, truths, shoe masks)}: the clip with the shoe, and the same without it."""
    base = tmp_path_factory.mktemp("gate")
    return {"shoe": write_distractor_video(base / "shoe", N, tether=False),
            "clean": write_distractor_video(base / "clean", N, clean=True)}


def _label(root, out, gate: bool, band_cut: bool = True):
    src = open_frames(str(root))
    backend = build_backend("grabcut", src, None, gate=gate, band_cut=band_cut)
    box = mask_to_box(Dataset(root).mask(0)).expand(3)
    res = label_video(src, out, backend, box, LabelConfig(), progress=False)
    ds = Dataset(out)
    return backend, res, [ds.mask(i) for i in range(len(ds))]


@pytest.fixture(scope="module")
def labelled(clips, tmp_path_factory):
    """{(clip, gate): (backend, result, masks)} for both clips, with and without the gate; and
    ("clean", "no band cut"), the clean clip gated without the band cut."""
    base = tmp_path_factory.mktemp("labels")
    out = {(c, g): _label(clips[c][0], base / f"{c}-{g}", g) for c in clips for g in (True, False)}
    out["clean", "no band cut"] = _label(clips["clean"][0], base / "clean-noband", True, band_cut=False)
    return out


OUTRUN = pytest.mark.xfail(strict=True, reason=(
    "the gate predicts the next silhouette from the last fitted pose moved with the camera: this clip's robot "
    "moves up to 8 px a frame under a still camera, beyond GateConfig.far_px (5), and the gate cuts its moving "
    "ends off (GateConfig.reach_px, off by default, refines the prediction on the frame's cut first)"))


@pytest.mark.slow
@OUTRUN
def test_the_gate_cuts_the_shoe_the_fit_alone_takes_in(clips, labelled):
    _, truths, shoes = clips["shoe"]
    gated_backend, _, gated = labelled["shoe", True]
    fitted_backend, _, fitted = labelled["shoe", False]
    assert isinstance(gated_backend, GatedBackend) and not isinstance(fitted_backend, GatedBackend)
    touching = range(N // 4, N)  # the frames the shoe rests against the body
    iou_g = np.mean([mask_iou(gated[i], truths[i]) for i in touching])
    iou_f = np.mean([mask_iou(fitted[i], truths[i]) for i in touching])
    shoe_g = sum(np.count_nonzero(gated[i] & shoes[i]) for i in touching)
    shoe_f = sum(np.count_nonzero(fitted[i] & shoes[i]) for i in touching)
    assert shoe_f > 2000, shoe_f  # the clip does what it is for: the fitted labels take the shoe in
    assert iou_g > iou_f + 0.05, (iou_g, iou_f)
    assert shoe_g < 0.7 * shoe_f, (shoe_g, shoe_f)


@pytest.mark.slow
def test_the_gate_records_why_per_frame_and_counts_it(labelled, tmp_path):
    backend, res, _ = labelled["shoe", True]
    with open(Path(res.out) / FIT_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    reasons = {int(r["frame"]): r["gate"].split("+") for r in rows if r["gate"]}
    # the shoe, cut off at the model's boundary, on most frames it touches the body
    assert sum("cut_off_model" in reasons.get(i, []) for i in range(N // 4, N)) >= (N - N // 4) // 2
    report = json.loads((Path(res.out) / "labels_report.json").read_text())
    assert report["fit"]["gated_frames"] == len(reasons)
    assert report["fit"]["gate_counts"] == dict(Counter(r for rs in reasons.values() for r in rs))
    meta = json.loads((Path(res.out) / "meta.json").read_text())
    assert meta["labelling"]["robot_fit"]["gate"]["far_px"] == GateConfig().far_px
    # a frame flagged off_model is in the labeller's flags (training skips it) as well as in fit.csv
    flagged = {e["frame"] for e in report["flagged"] if "off_model" in e["flags"]}
    assert flagged == {i for i, r in reasons.items() if "off_model" in r}


@pytest.mark.slow
@OUTRUN
def test_on_a_clean_clip_the_gate_leaves_the_labels_as_they_were(clips, labelled):
    _, truths, _ = clips["clean"]
    _, res_g, gated = labelled["clean", "no band cut"]
    _, res_f, fitted = labelled["clean", False]
    assert res_g.flagged == res_f.flagged
    assert "off_model" not in res_g.report["flag_counts"]
    same = [mask_iou(g, f) for g, f in zip(gated, fitted) if g.any() or f.any()]
    assert np.mean(same) > 0.95 and min(same) > 0.85, same
    iou_g = np.mean([mask_iou(m, t) for m, t in zip(gated, truths)])
    iou_f = np.mean([mask_iou(m, t) for m, t in zip(fitted, truths)])
    assert iou_g > iou_f - 0.02, (iou_g, iou_f)
    # the band cut moves the labels' edges by colour: no farther from the truth than without it
    _, res_b, banded = labelled["clean", True]
    assert res_b.flagged == res_g.flagged
    iou_b = np.mean([mask_iou(m, t) for m, t in zip(banded, truths)])
    assert iou_b > iou_g - 0.01, (iou_b, iou_g)


def test_cut_off_model_and_cut_blobs_against_a_brute_force_distance():
    rng = np.random.default_rng(0)
    sil = np.zeros((40, 60), bool)
    sil[18:22, 5:55] = True
    cut = sil | (rng.random(sil.shape) < 0.2)
    ys, xs = np.nonzero(sil)
    for far in (0, 2, 5):
        kept = cut_off_model(cut, sil, far)
        for y, x in zip(*np.nonzero(cut)):  # square (Chebyshev) distance to the silhouette
            d = np.min(np.maximum(abs(ys - y), abs(xs - x)))
            assert kept[y, x] == (d <= far)
    blob = sil.copy()
    blob[22:34, 20:32] = True  # a 12 px thing against the body
    kept = cut_blobs(blob, sil, 1, 1)
    assert kept[sil].all() and np.count_nonzero(kept[23:34, 20:32]) == 0


def test_gate_config_is_checked():
    with pytest.raises(InputError):
        GateConfig(far_px=-1)
    with pytest.raises(InputError):
        GateConfig(drop_iou=1.5)


@pytest.mark.slow
def test_the_label_command_gates_by_default_and_says_so(clips, tmp_path, capsys):
    root = clips["shoe"][0]
    box = mask_to_box(Dataset(root).mask(0)).expand(3)
    args = ["label", str(root), "--box", f"{box.x},{box.y},{box.w},{box.h}", "--max-frames", "6", "--json"]
    assert cli.main(args + ["--out", str(tmp_path / "on")]) == 0
    on = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "gate" in on and on["frames_per_s"] > 0
    assert cli.main(args + ["--out", str(tmp_path / "off"), "--no-gate"]) == 0
    off = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "gate" not in off and "robot_fit" in off
