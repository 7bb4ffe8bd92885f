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
