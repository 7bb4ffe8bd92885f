"""The CLI: discovery of subcommands, one-line errors with exit status 2."""
import subprocess
import sys

import pytest

from snaketrack import cli
from snaketrack.commands import Command
from snaketrack.errors import InputError


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "COMMAND" in out


def test_help_lists_the_pipeline_in_order_and_says_what_groups_hold(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()]
    pipeline = ["label", "train", "track", "estimate", "serve"]
    assert all(c in listed for c in pipeline)
    assert [listed.index(c) for c in pipeline] == sorted(listed.index(c) for c in pipeline)
    assert "subcommands" not in out  # each group says what it holds
    with pytest.raises(SystemExit):
        cli.main(["sim", "--help"])
    assert cli.GROUPS["sim"].split(":")[0] in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_project_error_becomes_one_line_exit_2(monkeypatch, capsys):
    def boom(args):
        raise InputError("robot.yaml: links[0].radius = -1; expected a positive number")

    fake = Command("boom", "raises", lambda p: None, boom)
    monkeypatch.setattr(cli, "_commands", lambda: [fake])
    assert cli.main(["boom"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "snaketrack: error: robot.yaml: links[0].radius = -1; expected a positive number"]


def test_nested_command_names(monkeypatch):
    seen = {}

    def run(a):
        seen["x"] = a.x

    fake = Command("sim thing", "nested", lambda p: p.add_argument("--x", type=int), run)
    monkeypatch.setattr(cli, "_commands", lambda: [fake])
    assert cli.main(["sim", "thing", "--x", "3"]) == 0
    assert seen["x"] == 3


def test_console_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "snaketrack", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "snaketrack" in r.stdout


def test_a_bad_flag_is_one_line_and_exit_2(monkeypatch, capsys):
    fake = Command("sim thing", "nested", lambda p: p.add_argument("--x", type=int, choices=[1, 2]), lambda a: 0)
    monkeypatch.setattr(cli, "_commands", lambda: [fake])
    for argv in (["sim", "thing", "--x", "3"], ["sim", "thing", "--y"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("snaketrack") and ": error: " in lines[0], lines


def test_an_out_folder_through_a_file_is_one_line_and_exit_2(tmp_path, capsys):
    """A real command asked to write under an existing file: the system's refusal, one line, no traceback."""
    (tmp_path / "a.png").write_bytes(b"x")
    out = tmp_path / "a.png" / "sub"
    assert cli.main(["robot", "show", "planar-snake-11", "--out", str(out / "r.png")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"snaketrack: error: {out}: Not a directory"]
    assert (tmp_path / "a.png").read_bytes() == b"x"
