"""The package's optional parts: what each installs (``pip install 'snaketrack[EXTRA]'``) and the check a
command makes before it needs one.

The core (tracking, labelling with GrabCut, training, the simulators and the estimators) runs on
``pip install snaketrack``. Each extra of ``pyproject.toml`` carries the distributions one capability
imports; :data:`EXTRAS` names them by import name, and a test checks the two agree.

========= ========================================= ==========================================
extra     for                                       imports (distribution)
========= ========================================= ==========================================
service   ``serve``, ``listen``                     foxglove (foxglove-sdk), websockets
batch     ``batch``, ``track --chunks``             ray
live      the segmenter's ``live`` setting engines  onnx, onnxruntime, openvino
sam       ``label --backend sam``                   segment_anything (segment-anything)
pytorch3d ``--renderer pytorch3d``                  pytorch3d (easypytorch3d), trimesh
========= ========================================= ==========================================

The ``live`` setting falls back to torch, with a one-line warning naming the extra, when no engine is
installed; the other commands stop at once (:func:`require`). The ``pytorch3d`` extra's compiled part is
built against one torch release, so it is installed in an environment of its own (``make pytorch3d``,
requirements-pytorch3d.txt), and ``--renderer pytorch3d`` without it says so in one line
(:func:`snaketrack.tracker.render.renderers.check_renderer`).

>>> install_command("service")
"pip install 'snaketrack[service]'"
"""
from __future__ import annotations

import importlib
from typing import Optional, Sequence

from snaketrack.errors import SnaketrackError

#: extra → {import name: distribution}
EXTRAS: dict[str, dict[str, str]] = {
    "service": {"foxglove": "foxglove-sdk", "websockets": "websockets"},
    "batch": {"ray": "ray"},
    "live": {"onnx": "onnx", "onnxruntime": "onnxruntime", "openvino": "openvino"},
    "sam": {"segment_anything": "segment-anything"},
    "pytorch3d": {"pytorch3d": "easypytorch3d", "trimesh": "trimesh"},
}


class MissingExtraError(SnaketrackError, ImportError):
    """A command needs an optional distribution that is not installed."""


def install_command(extra: str) -> str:
    """The pip command that installs ``extra``."""
    return f"pip install 'snaketrack[{extra}]'"


def require(extra: str, what: str, modules: Optional[Sequence[str]] = None) -> None:
    """Import ``modules`` of ``extra`` (None: all of :data:`EXTRAS` ``[extra]``) or raise
    :class:`MissingExtraError`: ``WHAT needs DIST, which is not installed: pip install 'snaketrack[EXTRA]'``.

    what: the command or option that needs them, as the user typed it (``serve``, ``label --backend sam``).
    """
    names = EXTRAS[extra]
    for module in modules if modules is not None else names:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtraError(f"{what} needs {names[module]}, which is not installed: "
                                    f"{install_command(extra)}") from None
