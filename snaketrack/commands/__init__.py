"""CLI subcommands, one module per capability.

Each module defines ``COMMANDS``: a list of :class:`Command`. ``cli.py``
discovers every module here, so adding a capability never edits ``cli.py``.
A name with a space (``"sim oal"``) becomes a nested subcommand.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Optional

from snaketrack.errors import InputError


@dataclass(frozen=True)
class Command:
    """One subcommand.

    name: words after ``snaketrack`` (``"track"`` or ``"sim oal"``).
    help: one line for ``--help``.
    add_arguments: adds the command's flags to its parser.
    run: does the work; returns an exit status (None means 0).
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Optional[int]]


def parse_size(text: str) -> tuple[int, int]:
    """``"640x360"`` → (640, 360); a one-line :class:`InputError` for anything else."""
    try:
        w, h = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise InputError(f"size {text!r}; expected WIDTHxHEIGHT in pixels, e.g. 640x360") from None
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise InputError(f"size {text!r}; expected 16..8192 px on each side")
    return w, h
