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


import pytest  # noqa: E402


@pytest.fixture
def run_bench():
    """``run_bench("tracker", [...])``: ``snaketrack bench tracker ...`` in this process; returns its exit
    status. torch's thread count, which a benchmark may set, is restored afterwards."""
    import torch

    from snaketrack.cli import main

    threads = torch.get_num_threads()

    def run(name: str, argv=()) -> int:
        try:
            return main(["bench", name, *map(str, argv)])
        except SystemExit as e:  # argparse: --help, or a bad flag of the command itself
            return 0 if e.code is None else e.code if isinstance(e.code, int) else 1

    yield run
    torch.set_num_threads(threads)
