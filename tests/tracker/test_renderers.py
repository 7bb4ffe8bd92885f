"""The renderer by name: the own one by default, PyTorch3D's asked for where it does not import answered with
one line saying how to get it (exit 2, nothing written); the compiled refinement core is the own renderer's."""
import importlib.util

import pytest

from snaketrack.cli import main
from snaketrack.errors import InputError
from snaketrack.models.robot import load_robot
from snaketrack.tracker.config import RefineConfig, TrackerConfig
from snaketrack.tracker.fit.refine import Refiner, refine_core
from snaketrack.tracker.render import render_kernel
from snaketrack.tracker.render.renderers import check_renderer, make_renderer
from snaketrack.tracker.render.silhouette import SilhouetteRenderer
from snaketrack.tracker.tracker import Tracker

HAS_PYTORCH3D = importlib.util.find_spec("pytorch3d") is not None


def test_own_renderer_by_default_and_unknown_names():
    robot = load_robot("arcsnake-4")
    K = [[300.0, 0, 159.5], [0, 300.0, 119.5], [0, 0, 1]]
    assert type(Tracker(robot, K, 320, 240).renderer) is SilhouetteRenderer
    assert type(make_renderer("own", robot, K, 320, 240)) is SilhouetteRenderer
    with pytest.raises(InputError, match="expected own, pytorch3d, pytorch3d-shader"):
        check_renderer("opengl")


@pytest.mark.skipif(HAS_PYTORCH3D, reason="PyTorch3D imports here")
@pytest.mark.parametrize("command", ["track", "serve"])
def test_asking_for_pytorch3d_where_it_does_not_import(command, tmp_path, capsys):
    out = tmp_path / "out"
    args = [command, str(tmp_path / "clip"), "--robot", "arcsnake-4", "--renderer", "pytorch3d"]
    args += ["--out", str(out)] if command == "track" else []
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "make pytorch3d" in err
    assert not out.exists()
    with pytest.raises(InputError, match="make pytorch3d"):
        check_renderer("pytorch3d")


class _OwnJacobian(SilhouetteRenderer):
    """A renderer that gives its silhouette's Jacobian itself, as PyTorch3DRenderer does."""

    def pose_jacobian(self, *args, **kwargs):
        raise AssertionError("not rendered here")


def test_core_auto_is_torch_for_a_renderer_with_its_own_jacobian():
    robot = load_robot("arcsnake-4")
    K = [[300.0, 0, 159.5], [0, 300.0, 119.5], [0, 0, 1]]
    compiled = "compiled" if render_kernel.available() else "torch"
    assert Refiner(SilhouetteRenderer(robot, K, 320, 240), RefineConfig(core="auto")).core == compiled
    meshes = _OwnJacobian(robot, K, 320, 240)
    assert Refiner(meshes, RefineConfig(core="auto")).core == "torch"
    assert Refiner(meshes, RefineConfig(core="torch")).core == "torch"
    assert refine_core("auto", own_renderer=False) == "torch"
    with pytest.raises(InputError, match="own renderer only"):
        Refiner(meshes, RefineConfig(core="compiled"))
    if HAS_PYTORCH3D:
        tracker = Tracker(robot, K, 320, 240, config=TrackerConfig(renderer="pytorch3d"))
        assert tracker.refiner.core == tracker.search_refiner.core == "torch"
