"""End to end: train a segmenter on a short rendered sequence, then track with its masks.

The sequence is drawn from known poses with the tracker's silhouette
renderer (no MuJoCo), the robot in a flat colour on a grey floor, so a
few training steps give usable masks; the tracker then runs on
``--masks segmenter:MODEL.pt`` and its rendered masks are compared with
the truth masks (``iou_truth``).
"""
import json

import numpy as np
import pytest
import torch

from snaketrack import cli
from snaketrack.datasets.layout import DatasetWriter
from snaketrack.io import read_csv_columns
from snaketrack.training.config import TrainConfig
from snaketrack.training.evaluate import evaluate_segmenter
from snaketrack.training.segmenter import load_segmenter
from snaketrack.training.train import train

W, H, FPS, N = 160, 120, 30.0, 24
K = np.array([[200.0, 0, 79.5], [0, 200.0, 59.5], [0, 0, 1]])
R_DOWN = np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]])


def _make_dataset(root):
    from snaketrack.models.kinematics import forward_kinematics_np
    from snaketrack.models.robot import load_robot
    from snaketrack.tracker.render.silhouette import SilhouetteRenderer
    from snaketrack.tracker.state import StateLayout

    robot = load_robot("planar-snake-11")
    layout = StateLayout.for_robot(robot)
    ren = SilhouetteRenderer(robot, K, W, H)
    rng = np.random.default_rng(0)
    meta = {"K": K.tolist(), "width": W, "height": H, "fps": FPS, "robot": "planar-snake-11",
            "scene": "static", "seed": 0}
    with DatasetWriter(root, meta, masks=True, truth=True) as w:
        for i in range(N):
            t = i / FPS
            q = 0.4 * np.sin(2 * np.pi * 0.5 * t + 0.6 * np.arange(robot.dof))
            base = np.array([-0.52 + 0.1 * t, 0.02, 2.0])
            with torch.no_grad():
                mask = ren.full_image(torch.as_tensor(layout.pack(q, R_DOWN, base))[None])[0].numpy() > 0.5
            rgb = (90 + rng.normal(0, 6, (H, W, 3))).clip(0, 255).astype(np.uint8)
            rgb[mask] = (200, 120, 40)
            head = forward_kinematics_np(robot, q, R_DOWN, base)["head"]
            w.write_frame(rgb, mask, {"t": t, "joint_angles": q.tolist(), "base_position_cam": base.tolist(),
                                      "base_quat_cam": [0.0, 1.0, 0.0, 0.0], "head_position_cam": head.tolist()})


@pytest.mark.slow  # a few minutes of CPU training and tracking
def test_track_with_a_trained_segmenter(tmp_path, capsys):
    root = tmp_path / "seq"
    _make_dataset(root)
    model = tmp_path / "seg.pt"
    res = train([root], model, TrainConfig(encoder="resnet18", input_size=(H, W), epochs=12, batch_size=4,
                                           lr=2e-3, lr_step_epoch=9, block=4, val_fraction=0.25, threads=1),
                progress=False)
    seg_iou = evaluate_segmenter(load_segmenter(model), root)["iou"]
    assert res.best_val_iou > 0.6 and seg_iou > 0.6, (res.best_val_iou, seg_iou)
    code = cli.main(["track", str(root), "--masks", f"segmenter:{model}", "--max-frames", "8", "--no-video",
                     "--out", str(tmp_path / "track")])
    assert code == 0, capsys.readouterr().err
    cols = read_csv_columns(tmp_path / "track" / "track.csv")
    assert len(cols["frame"]) == 8
    assert np.nanmean(cols["iou_truth"]) > 0.5
    metrics = json.loads((tmp_path / "track" / "metrics.json").read_text())
    assert metrics["iou_truth"] > 0.5
