"""scripts/measure_body_width.py: the same motion through two lenses, tracked and scored as the benchmark does."""
import json

import numpy as np
import pytest

from snaketrack.sim.scene import SceneConfig
from snaketrack.sim.video import VideoConfig
from snaketrack.sim.video_dataset import render_video

FAST_SCENE = SceneConfig(tile_px=64, tiles=4, shadow_size=512)
FRAMES = 8


@pytest.fixture(scope="module")
def clips(tmp_path_factory, load_script):
    """Two tiny drone clips of the arcsnake, nominal body widths 5 and 10 px (a fast ground texture)."""
    mod = load_script("measure_body_width")
    data = tmp_path_factory.mktemp("width")
    for w in (5.0, 10.0):
        cfg = VideoConfig(scene="drone", robot="arcsnake-4", frames=FRAMES, seed=1, width=320, height=180,
                          target_width_px=w, scene_config=FAST_SCENE)
        render_video(cfg, data / mod.clip_name("drone", "arcsnake-4", 1, w, (320, 180)), progress=False, extras=False)
    return data


def test_sweep_scores_both_widths_and_resumes(clips, tmp_path, capsys, monkeypatch, load_script):
    mod = load_script("measure_body_width")
    out = tmp_path / "out"
    argv = ["--scenes", "drone", "--robots", "arcsnake-4", "--seeds", "1", "--widths", "5", "10",
            "--frames", str(FRAMES), "--size", "320x180", "--data", str(clips), "--out", str(out), "--threads", "1"]
    assert mod.main(argv) == 0
    runs = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["runs"]
    assert [r["width_nominal_px"] for r in runs] == [5.0, 10.0]
    narrow, wide = runs
    # the lens doubles the body's pixels across, as the truth measures them
    assert 1.6 < wide["body_width_px"] / narrow["body_width_px"] < 2.4
    for r in runs:
        assert r["frames"] == FRAMES and np.isfinite(r["joint_error_rad"]) and 0 < r["iou_ceiling"] <= 1
        assert 0 < r["iou_model_ceiling"] <= 1
        assert (out / mod.clip_name("drone", "arcsnake-4", 1, r["width_nominal_px"], (320, 180)) / "track.csv").is_file()
        assert r["dataset"].endswith("-320x180")  # the clips rendered here, not new ones
    # a wider body loses less of itself to the same 1-3 px of corruption
    assert wide["iou_ceiling"] > narrow["iou_ceiling"]
    assert (out / "body_width.png").stat().st_size > 0

    # run again: what body_width.json holds is not tracked again
    def no_tracking(*a, **k):
        raise AssertionError("tracked again")

    monkeypatch.setattr(mod, "measure_clip", no_tracking)
    assert mod.main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["runs"] == runs


def test_bad_arguments_are_refused(tmp_path, load_script):
    mod = load_script("measure_body_width")
    for bad in (["--widths", "0"], ["--size", "640"], ["--frames", "0"]):
        with pytest.raises(SystemExit) as e:
            mod.main(bad + ["--data", str(tmp_path), "--out", str(tmp_path / "o")])
        assert e.value.code == 2
