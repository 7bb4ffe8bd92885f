"""snaketrack.bench.body_width: the same motion through two lenses, tracked and scored as the benchmark does;
``snaketrack bench body-width`` refuses bad arguments."""
import json

import numpy as np
import pytest

from snaketrack.bench import body_width
from snaketrack.bench.body_width import SweepConfig, clip_name, median_body_width, plot_body_width, sweep
from snaketrack.errors import FileFormatError, InputError
from snaketrack.sim.scene import SceneConfig
from snaketrack.sim.video import VideoConfig
from snaketrack.sim.video_dataset import render_video

FAST_SCENE = SceneConfig(tile_px=64, tiles=4, shadow_size=512)
FRAMES = 8


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Two tiny drone clips of the arcsnake, nominal body widths 5 and 10 px (a fast ground texture)."""
    data = tmp_path_factory.mktemp("width")
    for w in (5.0, 10.0):
        cfg = VideoConfig(scene="drone", robot="arcsnake-4", frames=FRAMES, seed=1, width=320, height=180,
                          target_width_px=w, scene_config=FAST_SCENE)
        render_video(cfg, data / clip_name("drone", "arcsnake-4", 1, w, (320, 180)), progress=False, extras=False)
    return data


@pytest.fixture
def one_thread():
    """torch on one thread, as the script's ``--threads 1`` (two threads on two shared cores are slower)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_sweep_scores_both_widths_and_resumes(clips, tmp_path, monkeypatch, one_thread):
    out = tmp_path / "out"
    config = SweepConfig(scenes=("drone",), robots=("arcsnake-4",), seeds=(1,), widths=(5.0, 10.0), frames=FRAMES,
                         size=(320, 180))
    runs = sweep(clips, out, config)
    assert json.loads((out / "body_width.json").read_text())["runs"] == runs
    assert [r["width_nominal_px"] for r in runs] == [5.0, 10.0]
    narrow, wide = runs
    # the lens doubles the body's pixels across, as the truth measures them
    assert 1.6 < wide["body_width_px"] / narrow["body_width_px"] < 2.4
    for r in runs:
        assert r["frames"] == FRAMES and np.isfinite(r["joint_error_rad"]) and 0 < r["iou_ceiling"] <= 1
        assert 0 < r["iou_model_ceiling"] <= 1
        assert (out / clip_name("drone", "arcsnake-4", 1, r["width_nominal_px"], (320, 180)) / "track.csv").is_file()
        assert r["dataset"].endswith("-320x180")  # the clips rendered here, not new ones
    # a wider body loses less of itself to the same 1-3 px of corruption
    assert wide["iou_ceiling"] > narrow["iou_ceiling"]
    plot_body_width(runs, out / "body_width.png")
    assert (out / "body_width.png").stat().st_size > 0

    # run again: what body_width.json holds is not tracked again
    def no_tracking(*a, **k):
        raise AssertionError("tracked again")

    monkeypatch.setattr(body_width, "measure_clip", no_tracking)
    assert sweep(clips, out, config) == runs


def test_median_body_width_reads_the_truth(tmp_path):
    (tmp_path / "truth.jsonl").write_text("".join(json.dumps({"body_width_px": w}) + "\n"
                                                  for w in (4.0, None, 9.0, 6.0, 100.0)))
    assert median_body_width(tmp_path, 4) == 6.0  # the row without a width is left out; frames 0..3
    (tmp_path / "truth.jsonl").write_text(json.dumps({"t": 0.0}) + "\n")
    with pytest.raises(FileFormatError, match="body_width_px"):
        median_body_width(tmp_path, 4)


def test_bad_arguments_are_refused(tmp_path, run_bench):
    for bad in (dict(widths=(0.0,)), dict(frames=0), dict(scenes=("garden",))):
        with pytest.raises(InputError):
            SweepConfig(**bad)
    for bad in (["--widths", "0"], ["--size", "640"], ["--frames", "0"]):
        assert run_bench("body-width", bad + ["--data", tmp_path, "--out", tmp_path / "o"]) == 2
