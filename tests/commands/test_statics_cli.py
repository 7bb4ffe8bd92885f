"""Tests of ``snaketrack statics`` (snaketrack/commands/statics.py).

The reference values are the paper's Table 1 (Hu et al., Robotics 2023),
typed in here; the command runs in-process through ``snaketrack.cli.main``.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from snaketrack.cli import main

# Table 1, ground-mounted steel, Est.: angles [deg], tip [mm]; and Est.* (no gravity).
STEEL_GROUND_DEG = [50.44, 43.26, 35.35, 30.62, 29.11]
STEEL_GROUND_TIP_MM = [34.98, 0.00, -11.45]
NO_GRAVITY_DEG = [28.99] * 5
NO_GRAVITY_TIP_MM = [47.04, 0.00, 14.85]


def _run_json(capsys, *args):
    code = main(["statics", *args, "--json"])
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


def test_json_output_reproduces_table1(capsys):
    out = _run_json(capsys, "--robot", "rolling-joint-6", "--density", "7860",
                    "--tensions", "0,2.4,0,5.1", "--mount", "ground")
    for key in ("bending_angles_rad", "tip_position_m", "iterations", "converged"):
        assert key in out
    assert out["converged"] is True and out["iterations"] > 1
    np.testing.assert_allclose(np.degrees(out["bending_angles_rad"]), STEEL_GROUND_DEG, atol=0.05)
    np.testing.assert_allclose(np.array(out["tip_position_m"]) * 1e3, STEEL_GROUND_TIP_MM, atol=0.05)
    np.testing.assert_allclose(np.degrees(out["no_gravity_bending_angles_rad"]), NO_GRAVITY_DEG, atol=0.05)


def test_mount_none_and_zero_mass_give_the_no_gravity_answer(capsys):
    a = _run_json(capsys, "--material", "steel", "--tensions", "0,2.4,0,5.1", "--mount", "none")
    b = _run_json(capsys, "--link-mass", "0", "--tensions", "0,2.4,0,5.1", "--mount", "ceiling")
    for out in (a, b):
        assert out["iterations"] == 1
        np.testing.assert_allclose(np.degrees(out["bending_angles_rad"]), NO_GRAVITY_DEG, atol=0.05)
        np.testing.assert_allclose(np.array(out["tip_position_m"]) * 1e3, NO_GRAVITY_TIP_MM, atol=0.05)


def test_gravity_vector_flag_matches_the_ceiling_preset(capsys):
    a = _run_json(capsys, "--material", "titanium", "--tensions", "0,2.4,0,5.1", "--mount", "ceiling")
    b = _run_json(capsys, "--material", "titanium", "--tensions", "0,2.4,0,5.1", "--gravity", "0,0,9.8")
    assert a["bending_angles_rad"] == b["bending_angles_rad"]
    # ceiling mounting lifts the tip above the no-gravity tip (Sec. 4.1.1)
    assert a["tip_position_m"][2] > a["no_gravity_tip_position_m"][2]


def test_alpha_flag_and_twelve_link_robot(capsys):
    out = _run_json(capsys, "--robot", "rolling-joint-12", "--alpha-deg", "90",
                    "--tensions", "1.96,1.96,1.96,6.86", "--mount", "ground")
    assert len(out["bending_angles_rad"]) == 11
    # T1 = T3 with alpha = 90 deg: odd joints stay straight (Sec. 4.2.1)
    np.testing.assert_allclose(out["bending_angles_rad"][0::2], 0.0, atol=1e-9)
    assert out["alpha_rad"] == pytest.approx(math.pi / 2)


def test_readable_table_in_degrees_and_millimetres(capsys):
    assert main(["statics", "--material", "steel", "--tensions", "0,2.4,0,5.1", "--mount", "ground"]) == 0
    out = capsys.readouterr().out
    assert "theta_1 (deg)" in out and "tip z (mm)" in out
    row = next(l for l in out.splitlines() if l.startswith("theta_1 (deg)"))
    assert float(row.split()[2]) == pytest.approx(STEEL_GROUND_DEG[0], abs=0.05)
    row = next(l for l in out.splitlines() if l.startswith("tip x (mm)"))
    assert float(row.split()[3]) == pytest.approx(STEEL_GROUND_TIP_MM[0], abs=0.05)


def test_plot_writes_an_image(tmp_path, capsys):
    path = tmp_path / "shape.png"
    out = _run_json(capsys, "--material", "steel", "--tensions", "0,2.4,0,5.1", "--plot", str(path))
    assert out["plot"] == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


@pytest.mark.parametrize(
    "args,message",
    [
        (["--tensions=-1,2.4,0,5.1"], "T1 = -1.0 N"),
        (["--tensions", "1,2,3"], "expected 4"),
        (["--tensions", "1,2,3,4", "--alpha-deg", "95"], "[-90, 90]"),
        (["--tensions", "1,2,3,4", "--robot", "no-such-robot"], "no-such-robot"),
        (["--tensions", "1,2,3,4", "--material", "gold"], "gold"),
        (["--tensions", "0,2.4,0,5.1", "--link-mass", "0.2"], "no root"),
        (["--tensions", "1,2,3,4", "--omega", "2"], "omega"),
        (["--tensions", "1,2,3,4", "--plot", "x.bmpx"], "unknown image type"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["statics", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("snaketrack: error:")
    assert message in err
