"""Suite-wide set-up.

torch imports triton lazily (from torch.optim and torch.func); importing it
after MuJoCo has opened its EGL context segfaults the process. Import it first.
"""
import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

try:  # pragma: no cover - depends on the torch build
    import triton  # noqa: F401
except Exception:
    pass


import importlib  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture(scope="session")
def load_script():
    """``load_script("bench_tracker")``: a module of ``scripts/``, imported with that folder on ``sys.path``
    as the scripts import one another."""
    def load(name: str):
        if str(SCRIPTS) not in sys.path:
            sys.path.insert(0, str(SCRIPTS))
        return importlib.import_module(name)

    return load
