"""Fixtures of the labelling tests."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """(dataset root, truth masks, post masks): the robot video of :mod:`mj_video`."""
    from mj_video import write_robot_video

    return write_robot_video(tmp_path_factory.mktemp("robot") / "video")
