"""The label gate's prediction against a robot that outruns it: MuJoCo truth, a perfect cut.

A serpentine robot drawn by MuJoCo's segmentation render (an independent renderer) sampled at every third frame
of :func:`mj_scene.serpentine`, so that its ends move farther in a frame than ``GateConfig.far_px``, under a
still camera. The backend's cut is the truth itself, so every pixel the gate loses is the prediction's doing.
The last fitted pose alone (``reach_px`` 0) lags, and the gate cuts the moving ends off; with the prediction
fitted to the cut first (:meth:`~snaketrack.labelling.label_gate.GatedBackend.predict`, ``aligned``) the
labels follow the robot.
"""
import sys
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from snaketrack.datasets.boxes import mask_to_box
from snaketrack.errors import InputError
from snaketrack.labelling.fit_labels import LabelFitter
from snaketrack.labelling.label_gate import GateConfig, GatedBackend, gate_tracker
from snaketrack.masks import mask_iou
from snaketrack.models.robot import load_robot
from snaketrack.tracker.calib.camera import Camera

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracker"))

W, H, F, STEP, N = 320, 240, 420.0, 3, 7


class TruthCut:
    """A box-prompted backend whose cut is the frame's truth mask (bool (H, W))."""

    name = "truth"

    def __init__(self, truths):
        self.truths, self.i = truths, -1

    def set_image(self, rgb):
        self.i += 1

    def reset_image(self):
        pass

    def predict(self, box, prior=None, guide=None, guide_far_px=None):
        return self.truths[self.i].copy()


def _clip():
    """(robot, K, truth masks, frames): the clip (module doc), the robot orange on a textured floor."""
    from mj_scene import MujocoMasks, serpentine

    robot = load_robot("planar-snake-11")
    mj = MujocoMasks(robot, W, H, F)
    truths = [mj.mask(*serpentine(robot, STEP * k)) for k in range(N)]
    mj.close()
    rng = np.random.default_rng(5)
    floor = cv2.GaussianBlur((rng.random((H, W, 3)) * 255).astype(np.uint8), (5, 5), 1.5)
    frames = []
    for t in truths:
        rgb = floor.copy()
        rgb[t] = (230, 120, 30)
        frames.append(rgb)
    return robot, mj.K, truths, frames


@pytest.fixture(scope="module")
def clip():
    return _clip()


def _gated(clip, config):
    """The gated labels of the clip (bool (H, W) each) and each frame's reasons."""
    robot, K, truths, frames = clip
    fitter = LabelFitter(robot, Camera(K, W, H), fps=30.0 / STEP, tracker_config=gate_tracker(config))
    gate = GatedBackend(TruthCut(truths), fitter, config)
    labels, reasons = [], []
    box = mask_to_box(truths[0]).expand(10).clip(W, H)
    for i, rgb in enumerate(frames):
        gate.seek(i)
        gate.set_image(rgb)
        if i > 0:
            box = gate.prompt_box(W, H) or box
        labels.append(gate.polish(gate.predict(box)))
        reasons.append(gate.last_fit["gate"])
    return labels, reasons


def _moved_px(a, b):
    """The 95th percentile of the distance [px] of ``b``'s pixels from ``a``."""
    d = cv2.distanceTransform((~a).astype(np.uint8), cv2.DIST_L2, 5)
    return float(np.percentile(d[b], 95))


def test_the_labels_follow_a_robot_that_moves_beyond_far_px_a_frame(clip):
    truths = clip[2]
    config = GateConfig(band=None, reach_px=24)
    # the clip does what it is for: the robot's ends move beyond far_px a frame
    assert min(_moved_px(a, b) for a, b in zip(truths, truths[1:])) > config.far_px
    aligned, why = _gated(clip, config)
    lagging, why_lag = _gated(clip, replace(config, reach_px=0))
    iou_a = [mask_iou(m, t) for m, t in zip(aligned, truths)][1:]
    iou_l = [mask_iou(m, t) for m, t in zip(lagging, truths)][1:]
    assert any("aligned" in r for r in why) and not any("aligned" in r for r in why_lag)
    assert min(iou_a) > 0.85, iou_a
    assert np.mean(iou_a) > np.mean(iou_l) + 0.1, (iou_a, iou_l)


def test_gate_config_checks_the_alignment():
    with pytest.raises(InputError, match="reach_px"):
        GateConfig(reach_px=-1)
    with pytest.raises(InputError, match="align_margin"):
        GateConfig(align_margin=2.0)


def test_label_gate_reach_reaches_the_gate_and_a_negative_one_is_refused(tmp_path, capsys):
    from snaketrack.cli import main
    from snaketrack.datasets.video import open_frames
    from snaketrack.labelling.backends import build_backend

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from distractor_video import write_distractor_video

    root = tmp_path / "clip"
    write_distractor_video(root, 3, tether=False)
    src = open_frames(str(root))
    assert build_backend("grabcut", src, None).config.reach_px == 0  # off by default
    assert build_backend("grabcut", src, None, gate_reach_px=24).config.reach_px == 24
    assert build_backend("grabcut", src, None, band_cut=False, gate_reach_px=24).config.band is None
    assert build_backend("grabcut", src, None).config.band.extend_frac == 0  # the body past the ends: opt-in
    assert build_backend("grabcut", src, None, body_beyond=True).config.band.extend_frac > 0
    assert main(["label", str(root), "--box", "10,10,50,50", "--gate-reach", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "reach_px" in capsys.readouterr().err
