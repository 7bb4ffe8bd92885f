"""``snaketrack bench skipped-frames``: every s-th frame of a rendered clip tracked with and without the retry
after a gap, side by side; a bad stride is one line and exit status 2."""
import json

import numpy as np


def test_each_stride_is_tracked_with_and_without_the_retry(tmp_path, capsys, run_bench):
    argv = ["--data", tmp_path, "--scenes", "static", "--robots", "arcsnake-4", "--strides", "1,3", "--frames", "4"]
    assert run_bench("skipped-frames", argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gap_frames"] > 0
    clip = out["clips"]["static-arcsnake-s0"]
    assert set(clip) == {"stride_1", "stride_3"}
    for runs in clip.values():
        assert set(runs) == {"retry", "no_retry"}
        for r in runs.values():
            assert r["frames"] == 4 and r["searches"] >= 0 and r["cpu_ms_per_frame"] > 0
            assert 0.0 < r["iou_mean"] <= 1.0 and np.isfinite(r["base_error_m"]) and np.isfinite(r["joint_error_rad"])
    # consecutive frames never take the retry: both runs are the same track
    same = clip["stride_1"]
    assert same["retry"]["iou_mean"] == same["no_retry"]["iou_mean"]
    assert same["retry"]["joint_error_rad"] == same["no_retry"]["joint_error_rad"]


def test_a_bad_stride_is_one_line_and_status_2(tmp_path, capsys, run_bench):
    assert run_bench("skipped-frames", ["--data", tmp_path, "--strides", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--strides" in err[0]
