"""Every sub-package's public names resolve to objects of the module that defines them."""
import importlib

import pytest

PACKAGES = ["datasets", "models", "sim", "training", "tracker", "estimation", "labelling", "experiments"]


@pytest.mark.parametrize("package", PACKAGES)
def test_public_names_resolve(package):
    mod = importlib.import_module(f"snaketrack.{package}")
    assert mod.__doc__ and mod.__all__ == sorted(mod.__all__)
    for name in mod.__all__:
        obj = getattr(mod, name)
        assert getattr(obj, "__module__", mod.__name__).startswith("snaketrack."), name
    assert dir(mod) == mod.__all__
    with pytest.raises(AttributeError):
        mod.no_such_name  # noqa: B018


def test_importing_a_package_does_not_import_its_heavy_modules():
    import subprocess
    import sys

    code = ("import sys, snaketrack.tracker, snaketrack.training, snaketrack.sim; "
            "print('torch' in sys.modules, 'mujoco' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
