"""``scripts/real_footage.py`` and the robot file of the real clip: the held-out split, and the first
seconds of the real COBRA clip labelled from one box (skipped when the footage folder is absent)."""
import json
import os
import runpy
from pathlib import Path

import numpy as np
import pytest

from snaketrack.datasets.layout import encode_mask, frame_name, read_mask
from snaketrack.io import write_json

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "real_footage.py"
FOOTAGE = Path(os.environ.get("SNAKETRACK_FOOTAGE", Path(__file__).resolve().parents[2] / "shared" / "footage"))
COBRA = FOOTAGE / "cobra-sidewinding-oblique.mp4"
CMU = FOOTAGE / "cmu-sidewinding.gif"


def _labels(root: Path, n: int, flagged=()) -> Path:
    (root / "frames").mkdir(parents=True)
    (root / "masks").mkdir()
    for i in range(n):
        (root / "frames" / frame_name(i)).write_bytes(b"jpeg %d" % i)
        m = np.zeros((4, 6), bool)
        m[0, i % 6] = True
        (root / "masks" / frame_name(i, ".png")).write_bytes(encode_mask(m))
    write_json(root / "meta.json", {"width": 6, "height": 4, "fps": 30.0})
    write_json(root / "labels_report.json", {"flagged": [{"frame": f} for f in flagged]})
    return root


def test_the_held_out_frames_are_the_end_of_the_clip_renumbered_and_flagged_frames_left_out(tmp_path):
    split_in_time = runpy.run_path(str(SCRIPT))["split_in_time"]
    labels = _labels(tmp_path / "labels", 20, flagged=(3, 17))
    res = split_in_time(labels, tmp_path / "train", tmp_path / "heldout", 0.25)
    assert res == {"train_frames": 14, "heldout_frames": 4, "heldout_from_frame": 15}
    good = [i for i in range(20) if i not in (3, 17)]
    for part, frames in (("train", good[:14]), ("heldout", good[14:])):
        names = sorted(p.name for p in (tmp_path / part / "frames").iterdir())
        assert names == [frame_name(k) for k in range(len(frames))]
        for k, i in enumerate(frames):  # frame k of the part is frame i of the labels, with its mask
            assert (tmp_path / part / "frames" / frame_name(k)).read_bytes() == b"jpeg %d" % i
            assert read_mask(tmp_path / part / "masks" / frame_name(k, ".png"))[0, i % 6]
    assert json.loads((tmp_path / "heldout" / "meta.json").read_text())["source_frames"] == [15, 19]
    # run again (resume): nothing changes, nothing fails
    assert split_in_time(labels, tmp_path / "train", tmp_path / "heldout", 0.25) == res


@pytest.mark.skipif(not COBRA.is_file(), reason="the real footage folder is absent")
def test_the_real_clip_s_first_second_is_labelled_from_one_box_without_flags(tmp_path):
    from snaketrack.cli import main

    out = tmp_path / "labels"
    assert main(["label", str(COBRA), "--box", "280,245,545,190", "--backend", "grabcut", "--max-frames", "30",
                 "--out", str(out), "--json"]) == 0
    report = json.loads((out / "labels_report.json").read_text())
    assert report["frames"] == 30 and report["flagged_count"] == 0
    areas = [read_mask(p).sum() for p in sorted((out / "masks").glob("*.png"))]
    assert min(areas) > 0.8 * max(areas)  # the robot lies still at the start: its mask keeps its size
    assert (out / "labels_sheet.png").is_file()


@pytest.mark.skipif(not COBRA.is_file(), reason="the real footage folder is absent")
def test_the_robot_file_drawn_over_the_real_frame(tmp_path):
    import cv2

    from snaketrack.cli import main

    cap = cv2.VideoCapture(str(COBRA))
    ok, bgr = cap.read()
    cap.release()
    assert ok
    frame = tmp_path / "frame.png"
    cv2.imwrite(str(frame), bgr)
    assert main(["robot", "show", "cobra-12", "--frame", str(frame), "--out", str(tmp_path / "show.png")]) == 0
    assert cv2.imread(str(tmp_path / "show.png")).shape[:2] == bgr.shape[:2]


@pytest.mark.skipif(not CMU.is_file(), reason="the real footage folder is absent")
def test_the_speckled_gif_is_filtered_before_grabcut_and_the_robot_is_found():
    """The GIF's dithered palette speckles the asphalt and the robot: cut raw, GrabCut keeps a few hundred
    pixels of a robot of several thousand (cut once; the second cut after a collapse gets back part of the
    rest); median-filtered first, most of it."""
    import imageio.v3 as iio

    from snaketrack.datasets.boxes import Box
    from snaketrack.datasets.grabcut_backend import GrabCutBackend, GrabCutConfig, speckle_level

    rgb = np.ascontiguousarray(iio.imread(CMU, index=0)[..., :3])
    assert speckle_level(rgb) > 15
    area = {}
    for level, recut in ((15.0, 0.5), (0.0, 0.0), (0.0, 0.5)):
        gc = GrabCutBackend(GrabCutConfig(speckle_level=level, collapse_frac=recut))
        gc.set_image(rgb)
        area[level, recut] = int(gc.predict(Box(5, 55, 180, 195)).sum())
    assert area[15.0, 0.5] > 4000 > area[0.0, 0.5] > 1000 > area[0.0, 0.0]
