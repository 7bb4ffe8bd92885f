"""``snaketrack bench refine-helpers``: a rendered clip tracked with the compiled helpers and with their numpy
references, alternated; both settings give the same track (to rounding); bad counts are one line and
exit status 2."""
import json

import numpy as np
import pytest

from snaketrack.errors import InputError
from snaketrack.tracker.config import RefineConfig


def test_both_settings_track_the_clip_alike(tmp_path, capsys, run_bench):
    argv = ["--data", tmp_path, "--scenes", "static", "--robots", "arcsnake-4", "--frames", "6", "--reps", "1"]
    assert run_bench("refine-helpers", argv) == 0
    clip = json.loads(capsys.readouterr().out)["clips"]["static-arcsnake-s0"]
    for helpers in ("compiled", "numpy"):
        assert len(clip[helpers]["fps"]) == 1 and clip[helpers]["fps"][0] > 0
    np.testing.assert_allclose(clip["compiled"]["base_position_error_m"], clip["numpy"]["base_position_error_m"],
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(clip["compiled"]["joint_error_rad"], clip["numpy"]["joint_error_rad"],
                               rtol=1e-4, atol=1e-6)
    assert clip["fps_ratio_compiled_over_numpy"] > 0


def test_bad_counts_and_helpers_are_one_line(tmp_path, capsys, run_bench):
    assert run_bench("refine-helpers", ["--data", tmp_path, "--reps", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--reps" in err[0]
    with pytest.raises(InputError, match="helpers"):
        RefineConfig(helpers="cython")
