"""Public names of a sub-package, imported when first used.

Each ``__init__.py`` lists its public names and the module that defines each;
``from snaketrack.tracker import TrackingSession`` then works without the
package importing torch, OpenCV or MuJoCo for a command that never uses them.
"""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[list[str], Callable, Callable]:
    """``(__all__, __getattr__, __dir__)`` for ``package`` exporting ``exports`` (name → module, relative
    to the package)."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return sorted(exports), __getattr__, __dir__
