"""Robot description files: shipped robots load, bad files give one-line errors."""
import numpy as np
import pytest
import yaml

from snaketrack.errors import FileFormatError, MissingFileError
from snaketrack.models.robot import available_robots, load_robot, robot_from_dict


def test_shipped_robots():
    assert {"planar-snake-11", "arcsnake-4"} <= set(available_robots())
    p = load_robot("planar-snake-11")
    assert p.n_links == 11 and p.dof == 10 and p.is_planar
    assert p.total_length == pytest.approx(1.1)
    a = load_robot("arcsnake-4")
    assert a.n_links == 4 and a.dof == 6 and not a.is_planar
    assert np.allclose(a.lengths, 0.15) and np.allclose(a.radii, 0.026)
    assert a.joint_names[:2] == ("yaw_1", "pitch_1")
    # the rendered look must differ from the capsule model (no inverse crime)
    for r in (p, a):
        assert not np.allclose(r.visual.body_radius, r.radii) or r.visual.housing_radius > r.radii.max()


def test_load_from_path(tmp_path):
    data = {"name": "tiny", "links": [{"length": 0.1, "radius": 0.01, "mass": 0.05}] * 3,
            "joints": [{"axes": ["z", "y"], "limits": [[-1, 1], [-0.5, 0.5]]}, {"axes": ["z"], "limit": 0.3}]}
    f = tmp_path / "tiny.yaml"
    f.write_text(yaml.safe_dump(data))
    r = load_robot(f)
    assert r.dof == 3
    np.testing.assert_allclose(r.lower, [-1, -0.5, -0.3])


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"links": {"count": 3, "length": -0.1, "radius": 0.02}}, r"links\[0\].length"),
        ({"joints": {"count": 5, "axes": ["z"]}}, "5 joints for 3 links"),
        ({"joints": {"count": 2, "axes": ["w"]}}, "axes"),
        ({"joints": {"count": 2, "axes": ["z"], "limits": [[1, -1]]}}, "lower < upper"),
        ({"visual": {"rgba": [2, 0, 0, 1]}}, "visual.rgba"),
        ({"visual": {"rgba": [1, 1, "a", 1]}}, "visual.rgba"),
        ({"links": [1, 2, 3]}, r"links\[0\] = 1; expected a mapping"),
        ({"joints": {"count": 2, "limits": 3}}, r"joints\[0\].limits = 3; expected one \[lower, upper\] pair"),
        ({"joints": {"count": 2, "axes": "zy"}}, r"joints\[0\].axes = \['zy'\]"),
        ({"joints": {"count": 2, "axes": 3}}, r"joints\[0\].axes = \[\]"),
    ],
)
def test_bad_descriptions(patch, message):
    data = {"name": "x", "links": {"count": 3, "length": 0.1, "radius": 0.02}, "joints": {"count": 2, "axes": ["z"]}}
    data.update(patch)
    with pytest.raises(FileFormatError, match=message):
        robot_from_dict(data, source="x.yaml")


def test_missing_robot():
    with pytest.raises(MissingFileError, match="not a shipped robot"):
        load_robot("no-such-robot")


def test_a_file_that_is_not_yaml_is_one_line_with_where(tmp_path, capsys):
    from snaketrack.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nlinks: [1,2\n")
    with pytest.raises(FileFormatError, match=r"not valid YAML \(expected ',' or '\]'.* at line 3, column 1\)"):
        load_robot(bad)
    assert main(["robot", "show", str(bad), "--out", str(tmp_path / "r.png")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
