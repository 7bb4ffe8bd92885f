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

if os.environ.get("PYTEST_XDIST_WORKER"):  # one torch thread per worker: two workers share two cores
    import torch

    torch.set_num_threads(1)


import runpy  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture
def run_script(monkeypatch):
    """``run_script("bench_tracker", [...])``: run ``scripts/bench_tracker.py`` as a command, in this
    process (as ``__main__``, with those arguments); returns its exit status. torch's thread count, which
    a script may set, is restored afterwards."""
    import torch

    threads = torch.get_num_threads()

    def run(name: str, argv) -> int:
        path = SCRIPTS / f"{name}.py"
        monkeypatch.setattr(sys, "argv", [str(path), *map(str, argv)])
        monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the repository first
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            return 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        return 0

    yield run
    torch.set_num_threads(threads)
