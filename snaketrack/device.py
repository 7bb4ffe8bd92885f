"""Where torch computes: ``--device cpu|cuda|cuda:N|auto`` resolved to a torch device name.

``auto`` is ``cuda`` when torch sees a CUDA GPU, else ``cpu``; ``cuda`` (the current GPU) and ``cuda:N``
(GPU N) must exist: asking for one on a machine without it is an :class:`~snaketrack.errors.InputError`
(one line, exit status 2 at the command line), not a silent fall back to the CPU.

>>> resolve_device("cpu")
'cpu'
>>> resolve_device("auto") in ("cpu", "cuda")
True
>>> resolve_device("gpu")
Traceback (most recent call last):
...
snaketrack.errors.InputError: --device 'gpu'; expected cpu, cuda, cuda:N or auto
"""
from __future__ import annotations

import re
from typing import Optional

from snaketrack.errors import InputError

#: the values ``--device`` takes
CHOICES = "cpu, cuda, cuda:N or auto"
_CUDA = re.compile(r"cuda(?::(\d+))?")


def check_device(spec: Optional[str], flag: str = "--device") -> str:
    """``spec`` stripped (None: ``auto``) when it is one of :data:`CHOICES`, else an :class:`InputError`;
    asks torch nothing (whether the GPU is there is :func:`resolve_device`'s question)."""
    name = "auto" if spec is None else str(spec).strip()
    if name not in ("cpu", "auto") and _CUDA.fullmatch(name) is None:
        raise InputError(f"{flag} {spec!r}; expected {CHOICES}")
    return name


def resolve_device(spec: Optional[str] = "auto", flag: str = "--device") -> str:
    """The torch device name (``cpu``, ``cuda`` or ``cuda:N``) of ``spec`` (module doc; None: ``auto``).

    ``flag`` names the option in the error message. Raises :class:`InputError` for a spec that is none of
    :data:`CHOICES`, and for ``cuda``/``cuda:N`` where torch sees no such GPU.
    """
    name = check_device(spec, flag)
    if name == "cpu":
        return "cpu"
    if name == "auto":
        return "cuda" if cuda_count() > 0 else "cpu"
    match = _CUDA.fullmatch(name)
    n = cuda_count()
    if n == 0:
        raise InputError(f"{flag} {name}: torch sees no CUDA GPU here ({_why_no_cuda()}); use {flag} cpu or auto")
    if match.group(1) is not None and int(match.group(1)) >= n:
        raise InputError(f"{flag} {name}: torch sees {n} CUDA GPU{'s' if n != 1 else ''} (cuda:0"
                         f"{f' to cuda:{n - 1}' if n > 1 else ''})")
    return name


def is_cuda(device) -> bool:
    """Whether ``device`` (a name or ``torch.device``) is a CUDA GPU."""
    return str(device).split(":")[0] == "cuda"


def cuda_count() -> int:
    """CUDA GPUs torch sees (0 without CUDA)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _why_no_cuda() -> str:
    import torch

    return "this torch is built without CUDA" if torch.version.cuda is None else \
        f"torch {torch.__version__} finds no GPU or driver"
