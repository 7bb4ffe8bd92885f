"""``snaketrack bench refine-settings``: a rendered clip tracked with each setting's two values, alternated;
both values give about the same track; bad counts are one line and exit status 2."""
import json

import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.tracker.config import RefineConfig


@pytest.mark.parametrize("setting,values", [("helpers", ("compiled", "numpy")), ("coarse", ("2.0", "0.0"))])
def test_both_values_track_the_clip_alike(tmp_path, capsys, run_bench, setting, values):
    argv = ["--setting", setting, "--data", tmp_path, "--scenes", "static", "--robots", "arcsnake-4",
            "--frames", "6", "--reps", "1"]
    assert run_bench("refine-settings", argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["setting"] == setting and tuple(out["values"]) == values
    clip = out["clips"]["static-arcsnake-s0"]
    a, b = values
    for v in values:
        assert len(clip[v]["fps"]) == 1 and clip[v]["fps"][0] > 0
    # the helpers compute the same values (to rounding); the coarse stage ends where the fine one does to
    # well under the errors (tests/tracker/test_refine.py)
    tol = 1e-4 if setting == "helpers" else 0.1
    np.testing.assert_allclose(clip[a]["base_position_error_m"], clip[b]["base_position_error_m"], rtol=tol,
                               atol=1e-5)
    np.testing.assert_allclose(clip[a]["joint_error_rad"], clip[b]["joint_error_rad"], rtol=tol, atol=1e-5)
    assert clip["fps_ratio"] > 0


def test_bad_counts_and_helpers_are_one_line(tmp_path, capsys, run_bench):
    assert run_bench("refine-settings", ["--data", tmp_path, "--reps", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--reps" in err[0]
    with pytest.raises(InputError, match="helpers"):
        RefineConfig(helpers="cython")
