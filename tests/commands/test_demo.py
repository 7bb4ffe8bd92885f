"""``snaketrack demo`` reuses a rendering only of the settings asked for (no rendering here: a folder
written as a finished one would be)."""
import json

import pytest

from snaketrack.cli import main
from snaketrack.commands.demo import _check_reuse
from snaketrack.errors import InputError
from snaketrack.sim.video import VideoConfig, config_key


def _rendered(root, config, frames):
    (root / "frames").mkdir(parents=True)
    for i in range(frames):
        (root / "frames" / f"{i:06d}.jpg").write_bytes(b"")
    (root / "meta.json").write_text(json.dumps({"config": config_key(config)}))
    return root


def test_the_same_settings_are_reused_and_a_shorter_ask_tracks_fewer(tmp_path):
    data = _rendered(tmp_path / "drone-video", VideoConfig(scene="drone", frames=6, seed=0), 6)
    assert _check_reuse(data, VideoConfig(scene="drone", frames=6, seed=0))
    assert _check_reuse(data, VideoConfig(scene="drone", frames=4, seed=0))
    assert not _check_reuse(tmp_path / "none", VideoConfig(scene="drone", frames=4, seed=0))


def test_an_unfinished_rendering_is_resumed_and_other_settings_refused(tmp_path):
    data = _rendered(tmp_path / "drone-video", VideoConfig(scene="drone", frames=6, seed=0), 3)
    assert not _check_reuse(data, VideoConfig(scene="drone", frames=6, seed=0))  # resumed
    with pytest.raises(InputError, match="holds a 6-frame video"):
        _check_reuse(data, VideoConfig(scene="drone", frames=9, seed=0))
    with pytest.raises(InputError, match="seed 0, asked 5"):
        _check_reuse(data, VideoConfig(scene="drone", frames=6, seed=5))


def test_the_command_refuses_other_settings_in_one_line(tmp_path, capsys):
    _rendered(tmp_path / "drone-video", VideoConfig(scene="drone", frames=6, seed=0), 6)
    assert main(["demo", "--out", str(tmp_path), "--frames", "6", "--seed", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other settings" in err[0] and "give another --out" in err[0]
