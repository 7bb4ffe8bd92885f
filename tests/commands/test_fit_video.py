"""``snaketrack fit-video``: every stage in this process on a small clip, resumed after an interrupted track;
the held-out split; and on the real clips (skipped when the footage folder is absent) the first second of
COBRA labelled from one box, its robot file drawn over a frame, the CMU GIF's speckle filter."""
import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from snaketrack import cli
from snaketrack.datasets.layout import encode_mask, frame_name, read_image, read_mask
from snaketrack.datasets.split import split_in_time
from snaketrack.errors import SnaketrackWarning
from snaketrack.io import write_json

from posed_dataset import FPS, H, TruePoses, W, write_posed_dataset

FOOTAGE = Path(os.environ.get("SNAKETRACK_FOOTAGE", Path(__file__).resolve().parents[3] / "shared" / "footage"))
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


# -- fit-video end to end ------------------------------------------------------------------------
def _clip(root: Path, n: int) -> tuple[Path, str]:
    """An mp4 of ``n`` frames of the posed planar snake and a box around it in the first frame."""
    ds = write_posed_dataset(root / "ds", n, seed=3)
    clip = root / "clip.mp4"
    out = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (W, H))
    for i in range(n):
        out.write(cv2.cvtColor(read_image(ds / "frames" / frame_name(i)), cv2.COLOR_RGB2BGR))
    out.release()
    vv, uu = np.nonzero(read_mask(ds / "masks" / frame_name(0, ".png")))
    return clip, f"{uu.min() - 8},{vv.min() - 8},{uu.max() - uu.min() + 16},{vv.max() - vv.min() + 16}"


@pytest.mark.slow
def test_fit_video_runs_each_stage_in_process_and_resumes_after_an_interrupted_track(tmp_path, monkeypatch, capsys):
    from snaketrack.commands import fit_video
    from snaketrack.tracker.run import pipeline

    n = 14
    clip, box = _clip(tmp_path, n)
    out = tmp_path / "run"
    args = ["fit-video", str(clip), "--robot", "planar-snake-11", "--box", box, "--fov-deg", "43.6",
            "--camera", "moving", "--minutes", "0.05", "--epochs", "1", "--holdout", "0.3",
            "--train-args", "--scales 1 --flips 1 --no-live-int8 --max-val-frames 2 --input-size 320x240",
            "--out", str(out)]
    stages = []
    run_stage = fit_video.run_stage
    monkeypatch.setattr(fit_video, "run_stage", lambda argv: stages.append(argv) or run_stage(argv))
    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **kw: TruePoses(robot, fail_at=6))
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "stopped at frame 6" in err
    assert [a[0] for a in stages] == ["label", "train", "eval-seg", "eval-seg", "track"]
    label = stages[0]
    assert label[label.index("--robot") + 1] == "planar-snake-11"  # the labels go through the robot's model
    done = json.loads((out / "stages.json").read_text())["done"]
    assert set(done) == {"labels", "split", "train", "heldout"}  # the track did not finish ...
    assert not (out / "track").exists() and (out / "track.partial" / "track.csv").is_file()  # ... nor pass as done
    model_bytes = (out / "model.pt").read_bytes()

    stages.clear()
    monkeypatch.setattr(pipeline, "make_tracker", lambda robot, *a, **kw: TruePoses(robot))
    with pytest.warns(SnaketrackWarning) as caught:
        assert cli.main(args) == 0
    cap = capsys.readouterr()
    assert [a[0] for a in stages] == ["track"]  # labels, split, training and evaluation were finished: skipped
    assert (out / "model.pt").read_bytes() == model_bytes
    assert not (out / "track.partial").exists()
    figures = json.loads(cap.out.strip().splitlines()[-1])
    assert len(cap.out.strip().splitlines()) == 1  # the stages' own lines go to standard error
    assert figures["labels"]["frames"] == n and figures["track"]["frames"] == n
    split = figures["split"]
    assert split["train_frames"] + split["heldout_frames"] == n - figures["labels"]["flagged"]
    assert set(figures["segmenter_heldout_iou"]) == {"live", "accurate"}
    assert figures["speed"]["size"] == [W, H] and figures["speed"]["segmenter_ms"] > 0
    q = figures["quality"]
    assert q["silhouette_iou_mean"] == pytest.approx(figures["track"]["silhouette_iou_mean"])
    # one training epoch gives masks the true poses do not fit: the run is flagged, in the JSON and in one line
    assert q["flags"] and "silhouette_iou_mean" in {f["figure"] for f in q["flags"]}
    warning = [str(w.message) for w in caught if str(w.message).startswith("the track may have left the robot")]
    assert len(warning) == 1 and "silhouette_iou_mean" in warning[0] and "\n" not in warning[0]


def test_a_run_folder_of_other_flags_is_refused_in_one_line(tmp_path, capsys):
    clip = tmp_path / "clip.mp4"
    out = tmp_path / "run"
    out.mkdir()
    write_json(out / "stages.json", {"run": {"robot": "cobra-12"}, "done": {}})
    w = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
    for _ in range(3):
        w.write(np.zeros((48, 64, 3), np.uint8))
    w.release()
    code = cli.main(["fit-video", str(clip), "--robot", "planar-snake-11", "--box", "1,1,10,10", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "holds a run with robot 'cobra-12'" in err and len(err.strip().splitlines()) == 1
