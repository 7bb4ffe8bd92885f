"""``snaketrack batch`` on a local Ray with 2 CPUs: a campaign's tracks equal the single-video command's,
a re-run skips finished stages, a broken video fails alone, a bad campaign lists every problem."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from snaketrack.batch.campaign import load_campaign
from snaketrack.batch.stages import run_command
from snaketrack.commands import command_parser
from snaketrack.errors import InputError
from snaketrack.io import read_csv_columns

from posed_dataset import write_posed_dataset

N = 12
TRACK = {"refine_steps": 3, "hold_frames": 0, "no_video": True}


@pytest.fixture(scope="module")
def ray_local():
    import ray

    from snaketrack.batch.runner import connect

    connect(workers=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    for k in range(3):
        write_posed_dataset(root / "clips" / f"clip{k}", N, seed=10 + k)
    (root / "clips" / "broken.mp4").write_text("not a video")
    spec = {"robot": "planar-snake-11", "masks": "truth", "track": TRACK, "estimate": {"sg_window": 5},
            "videos": [{"glob": "clips/clip*"}, {"path": "clips/broken.mp4"}]}
    (root / "campaign.yaml").write_text(yaml.safe_dump(spec))
    return root


def test_a_campaign_matches_the_single_video_commands_and_isolates_a_broken_video(campaign_dir, ray_local, tmp_path):
    from snaketrack.batch.runner import run_campaign

    campaign = load_campaign(campaign_dir / "campaign.yaml", command_parser)
    assert [v.name for v in campaign.videos] == ["clip0", "clip1", "clip2", "broken"]
    out = tmp_path / "out"
    summary = run_campaign(campaign, out, command_parser, progress=False)
    rows = {r["video"]: r for r in summary["per_video"]}
    assert summary["ok"] == 3 and summary["failed"] == 1
    assert rows["broken"]["failed_stage"] == "track" and "not a readable video" in rows["broken"]["error"]
    assert "\n" not in rows["broken"]["error"]
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the campaign's one-CPU tasks: a track's last digits follow the thread count
    for k in range(3):
        single = tmp_path / f"single{k}"
        assert run_command(["track", str(campaign_dir / "clips" / f"clip{k}"), "--robot", "planar-snake-11",
                            "--refine-steps", "3", "--hold-frames", "0", "--no-video", "--out", str(single)],
                           command_parser) is None
        a = read_csv_columns(out / f"clip{k}" / "track" / "track.csv")
        b = read_csv_columns(single / "track.csv")
        assert list(a) == list(b)
        for key in a:
            if np.asarray(a[key]).dtype.kind == "f":
                np.testing.assert_allclose(a[key], b[key], atol=1e-9, equal_nan=True, err_msg=key)
            else:
                assert list(map(str, a[key])) == list(map(str, b[key]))
        assert (out / f"clip{k}" / "estimate").is_dir()
        assert rows[f"clip{k}"]["frames"] == N
    torch.set_num_threads(threads)
    assert (out / "summary.csv").read_text().splitlines()[0].startswith("video,path,status")

    again = run_campaign(campaign, out, command_parser, progress=False)  # a re-run skips what finished
    statuses = {(s["video"], s["stage"]): s["status"] for s in again["stages"]}
    assert all(statuses[f"clip{k}", st] == "skipped" for k in range(3) for st in ("track", "estimate"))
    assert statuses["broken", "track"] == "failed" and statuses["broken", "estimate"] == "blocked"
    import shutil

    shutil.rmtree(out / "clip1" / "estimate")  # a finished stage whose output is gone runs again
    third = run_campaign(campaign, out, command_parser, progress=False)
    statuses = {(s["video"], s["stage"]): s["status"] for s in third["stages"]}
    assert statuses["clip1", "estimate"] == "done" and statuses["clip0", "estimate"] == "skipped"


def test_a_bad_campaign_lists_every_problem_at_once(tmp_path):
    spec = {"robot": "no-such-robot", "masks": "label", "track": {"no_such_flag": 1}, "fov_deg": 200,
            "videos": [{"path": "missing.mp4"}, {"glob": "nothing/*.mp4", "box": "1,2,3"}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(InputError) as e:
        load_campaign(path, command_parser)
    msg = str(e.value)
    for part in ("robot: 'no-such-robot'", "track.no_such_flag: not a flag", "videos[0].box: required",
                 "videos[1].glob", "videos[1].box: '1,2,3'", "fov_deg: 200"):
        assert part in msg, part
    r = subprocess.run([sys.executable, "-m", "snaketrack", "batch", str(path), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()  # nothing ran


def test_a_bad_box_or_robot_file_is_found_before_anything_runs(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"")
    robot = yaml.safe_load((Path(__file__).resolve().parents[2] / "snaketrack" / "models" / "robots" /
                            "planar-snake-11.yaml").read_text())
    robot["links"]["length"] = -0.1
    (tmp_path / "robot.yaml").write_text(yaml.safe_dump(robot))
    spec = {"robot": "robot.yaml", "masks": "label", "videos": [{"path": "clip.mp4", "box": "1,2,-3,4"}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(InputError) as e:
        load_campaign(tmp_path / "c.yaml", command_parser)
    msg = str(e.value)
    assert "videos[0].box: '1,2,-3,4'; width and height must be positive" in msg
    assert "robot: " in msg and "length" in msg and "\n" not in msg
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputError, match="not a text file"):
        load_campaign(tmp_path / "binary.yaml", command_parser)


def test_a_failed_video_carries_no_figures_of_an_earlier_run(tmp_path):
    from snaketrack.batch.campaign import Campaign, Video
    from snaketrack.batch.runner import write_summary
    from snaketrack.batch.stages import StageResult

    out = tmp_path / "out"
    (out / "a" / "track").mkdir(parents=True)
    (out / "a" / "track" / "summary.json").write_text('{"frames": 9, "iou": 0.9}')  # the earlier, good run's
    campaign = Campaign(path=tmp_path / "c.yaml", robot="planar-snake-11", intrinsics=None, masks="truth",
                        videos=(Video("a", tmp_path / "a", None, {}),))
    ok = write_summary(campaign, out, {("a", "track"): StageResult("a", "track", "skipped")})
    assert ok["per_video"][0]["iou"] == 0.9
    failed = write_summary(campaign, out, {("a", "track"): StageResult("a", "track", "failed", "bad flag")})
    row = failed["per_video"][0]
    assert row["status"] == "failed" and "iou" not in row and "frames" not in row
    assert "0.9" not in (out / "summary.csv").read_text()


def test_a_label_then_train_campaign_chains_every_stage(tmp_path, ray_local):
    """masks: label — each video labelled (GrabCut, the default without SAM weights) from its box, the labels
    fitted, one segmenter trained on both, both videos tracked with it."""
    import cv2

    from snaketrack.batch.runner import run_campaign
    from snaketrack.training.model import load_model

    root = tmp_path / "c"
    videos = []
    for k in range(2):
        ds = write_posed_dataset(root / "clips" / f"v{k}", 6, seed=20 + k)
        x, y, w, h = cv2.boundingRect((cv2.imread(str(ds / "masks" / "000000.png"), 0) > 127).astype(np.uint8))
        videos.append({"path": f"clips/v{k}", "box": f"{x - 6},{y - 6},{w + 12},{h + 12}"})
    spec = {"robot": "planar-snake-11", "masks": "label", "estimate": False, "videos": videos,
            "train": {"epochs": 8, "batch_size": 2, "input_size": "96x64", "val_fraction": 0.34, "threads": 1,
                      "no_live_int8": True},  # the int8 network: tests/training/test_quantize.py
            "track": TRACK}
    (root / "campaign.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    summary = run_campaign(load_campaign(root / "campaign.yaml", command_parser), out, command_parser,
                           progress=False)
    assert summary["ok"] == 2, summary["per_video"]
    done = {(s["video"], s["stage"]) for s in summary["stages"] if s["status"] == "done"}
    assert done == {("v0", "label"), ("v1", "label"), ("v0", "fit_labels"), ("v1", "fit_labels"),
                    ("segmenter", "train"), ("v0", "track"), ("v1", "track")}
    for k in range(2):
        assert len(list((out / f"v{k}" / "labels" / "masks").glob("*.png"))) == 6
        assert len(read_csv_columns(out / f"v{k}" / "track" / "track.csv")["frame"]) == 6
    _, config, extra = load_model(out / "segmenter" / "model.pt")
    assert tuple(config.input_size) == (64, 96) and "live_int8" not in extra  # the section's flags reached train


def test_a_malformed_cluster_address_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from snaketrack.batch.runner import connect; connect('garbage')"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "InputError: --address garbage:" in r.stderr, r.stderr[-2000:]


def test_a_negative_gpu_count_is_refused():
    from snaketrack.batch.runner import Resources

    with pytest.raises(InputError, match="--train-gpus -1"):
        Resources(train_gpus=-1.0)
