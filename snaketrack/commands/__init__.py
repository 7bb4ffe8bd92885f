"""CLI subcommands, one module per capability.

Each module defines ``COMMANDS``: a list of :class:`Command`. ``cli.py``
discovers every module here, so adding a capability never edits ``cli.py``.
A name with a space (``"sim oal"``) becomes a nested subcommand.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Optional


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

