"""Compiled loops where numba is installed: :func:`jit` compiles a function (cached on disk, releasing the
interpreter lock, numpy's error model) and :func:`available` says whether it can; without numba ``jit``
returns the function as it is and callers fall back to their torch or numpy references."""
from __future__ import annotations

try:
    from numba import njit
except ImportError:  # pragma: no cover - exercised only without numba
    njit = None


def available() -> bool:
    """Whether compiled loops can run (numba is importable)."""
    return njit is not None


def jit(fn):
    """``fn`` compiled (numba ``njit``: cached, no GIL, numpy's error model), or ``fn`` itself without numba."""
    return njit(cache=True, nogil=True, error_model="numpy")(fn) if njit is not None else fn
